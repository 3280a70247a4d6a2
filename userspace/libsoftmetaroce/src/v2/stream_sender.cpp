#include "softmetaroce/v2/stream_sender.h"

namespace softmetaroce::v2 {

uint32_t StreamSender::open() {
    const uint32_t ssn = next_++;
    ring_[slot(ssn)] = Segment{.ssn = ssn};
    return ssn;
}

std::optional<std::pair<uint32_t, int>> StreamSender::next_resend() {
    if (head_ == kNone) return std::nullopt;
    const uint16_t i = head_;
    unlink(i);
    return std::pair<uint32_t, int>{ring_[i].ssn, ring_[i].path};
}

void StreamSender::on_sent(uint32_t ssn) {
    if (seq_before(ssn, una_)) {
        ++resent_;  // delivered, so sent before
        return;
    }
    if (!in_window(ssn)) return;
    Segment& s = ring_[slot(ssn)];
    if (s.sent) ++resent_;
    s.sent = true;
}

bool StreamSender::on_acked(uint32_t ssn) {
    if (!in_window(ssn)) return false;
    Segment& s = ring_[slot(ssn)];
    if (s.delivered) return false;
    // Delivered whatever other transmissions of it are still out; a queued resend is moot.
    s.delivered = true;
    ++delivered_;
    if (s.queued) unlink(slot(ssn));
    while (una_ != next_ && ring_[slot(una_)].delivered) ++una_;
    return true;
}

void StreamSender::on_lost(uint32_t ssn, int path) {
    if (!in_window(ssn)) return;
    const uint16_t i = slot(ssn);
    Segment& s = ring_[i];
    if (s.delivered || s.queued) return;
    s.queued = true;
    s.path = path;
    s.prev = tail_;
    s.next = kNone;
    if (tail_ == kNone)
        head_ = i;
    else
        ring_[tail_].next = i;
    tail_ = i;
}

bool StreamSender::delivered(uint32_t ssn) const {
    if (seq_before(ssn, una_)) return true;
    if (!in_window(ssn)) return false;
    return ring_[slot(ssn)].delivered;
}

void StreamSender::unlink(uint16_t i) {
    Segment& s = ring_[i];
    if (s.prev == kNone)
        head_ = s.next;
    else
        ring_[s.prev].next = s.next;
    if (s.next == kNone)
        tail_ = s.prev;
    else
        ring_[s.next].prev = s.prev;
    s.prev = s.next = kNone;
    s.queued = false;
}

}  // namespace softmetaroce::v2
