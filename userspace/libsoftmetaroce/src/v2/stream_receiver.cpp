#include "softmetaroce/v2/stream_receiver.h"

namespace softmetaroce::v2 {

namespace {

bool test_bit(const auto& words, uint32_t i) { return (words[i / 64] >> (i % 64)) & 1; }
void set_bit(auto& words, uint32_t i) { words[i / 64] |= uint64_t{1} << (i % 64); }
void clear_bit(auto& words, uint32_t i) { words[i / 64] &= ~(uint64_t{1} << (i % 64)); }

}  // namespace

StreamReceiver::StreamReceiver(uint32_t first_ssn, uint32_t first_msn, uint32_t max_requests)
    : map_(first_ssn),
      max_requests_(max_requests),
      reported_msn_(first_msn),
      done_msn_(first_msn) {}

bool StreamReceiver::rebase(uint32_t first_ssn) {
    if (accepted_ != 0 || refusing_ || queued_requests_ != 0) return false;
    map_ = StreamMap(first_ssn);
    return true;
}

SegVerdict StreamReceiver::classify(const Segment& s) const {
    // Appendix A: the map names cum + 1 .. cum + 4095, and cum is the first not accepted.
    if (seq_diff(s.ssn, cum()) >= static_cast<int32_t>(kStreamMapBits)) return SegVerdict::Beyond;
    if (map_.has(s.ssn)) return SegVerdict::Duplicate;
    // Only RECV segments use their MSN; it must name a receive slot the receiver keeps.
    if (consumes_recv(s.op) && s.msn - done_msn_ >= kRecvSlots) return SegVerdict::Beyond;
    // Section 9.2: refusing everything past the refusal point; a NAK is never refused.
    if (refusing_ && s.op != Op::Nak && seq_after(s.ssn, refused_ssn_)) return SegVerdict::Refuse;
    return SegVerdict::Take;
}

SegVerdict StreamReceiver::check(const Segment& s) {
    const SegVerdict v = classify(s);
    switch (v) {
        case SegVerdict::Take:
            break;
        case SegVerdict::Duplicate:
            ++duplicates_;
            break;
        case SegVerdict::Beyond:
            ++beyond_;
            break;
        case SegVerdict::Refuse:
            ++refused_;
            break;
    }
    return v;
}

bool StreamReceiver::refuse(uint32_t ssn) {
    // Accepted already or unnameable: there is nothing to refuse.
    if (seq_diff(ssn, cum()) >= static_cast<int32_t>(kStreamMapBits) || map_.has(ssn)) return false;
    ++refused_;
    // Past the refusal point it is one of the segments refused for the earlier one: no NAK.
    if (refusing_ && seq_after(ssn, refused_ssn_)) return false;
    // A new refusal point, an earlier one, or the refused segment's resend refused again (the
    // requester counts that NAK against rnr_retry).
    refusing_ = true;
    refused_ssn_ = ssn;
    return true;
}

void StreamReceiver::accept(const Segment& s) {
    if (classify(s) != SegVerdict::Take) return;
    const uint32_t before = cum();
    map_.record(s.ssn);
    ++accepted_;
    if (consumes_recv(s.op) && is_last(s)) {
        const uint32_t slot = s.msn % kRecvSlots;
        // A conforming sender has one last segment per message; keep the first.
        if (!test_bit(last_known_, slot)) {
            set_bit(last_known_, slot);
            last_ssn_[slot] = s.ssn;
        }
    }
    if (is_request(s.op)) {
        set_bit(request_at_, s.ssn % kRequestSlots);
        if (queued_requests_ == 0 || seq_after(s.ssn, newest_request_)) newest_request_ = s.ssn;
        ++queued_requests_;
    }
    if (refusing_ && s.ssn == refused_ssn_) refusing_ = false;
    pass_requests(before, cum());
    complete_messages();
}

// cum moved from `from` to `to`: every request in between has its turn, in SSN order.
void StreamReceiver::pass_requests(uint32_t from, uint32_t to) {
    for (uint32_t ssn = from; ssn != to; ++ssn) {
        const uint32_t slot = ssn % kRequestSlots;
        if (!test_bit(request_at_, slot)) continue;
        clear_bit(request_at_, slot);
        ready_.push_back(ssn);
    }
}

// Section 8.1: a receive-consuming message completes when cum passes its last segment, in MSN
// order, so a later message whose segments all arrived waits for the earlier one.
void StreamReceiver::complete_messages() {
    for (;;) {
        const uint32_t slot = done_msn_ % kRecvSlots;
        if (!test_bit(last_known_, slot) || !seq_before(last_ssn_[slot], cum())) return;
        clear_bit(last_known_, slot);
        ++done_msn_;
    }
}

std::optional<uint32_t> StreamReceiver::next_completion() {
    if (reported_msn_ == done_msn_) return std::nullopt;
    return reported_msn_++;
}

std::optional<uint32_t> StreamReceiver::next_request() {
    if (ready_.empty()) return std::nullopt;
    const uint32_t ssn = ready_.front();
    ready_.pop_front();
    --queued_requests_;
    return ssn;
}

}  // namespace softmetaroce::v2
