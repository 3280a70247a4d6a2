#include "softmetaroce/v2/path_receiver.h"

#include <algorithm>

namespace softmetaroce::v2 {

namespace {
constexpr uint32_t kWireMax16 = 0xffff;  // the ACK's delay and CE fields are 16 bits, saturating
}

RxAck PathReceiver::on_packet(uint32_t seq, uint32_t floor, bool ce, bool ack_req,
                              uint64_t now_us) {
    switch (map_.record(seq, floor)) {
        case MapVerdict::Beyond:
            ++beyond_;
            return RxAck::Drop;
        case MapVerdict::Duplicate:
            // The sender may have lost the ACKs that covered it: tell it again now.
            ++duplicates_;
            if (!now_at_) now_at_ = now_us;
            return RxAck::Now;
        case MapVerdict::New:
            break;
    }
    ++received_;
    newest_arrival_us_ = now_us;
    if (ce && ce_ < kWireMax16) ++ce_;
    if (unacked_++ == 0) first_unacked_us_ = now_us;
    // A gap is loss: the sender should hear of it now.
    if (ack_req || map_.has_gap() || unacked_ >= kAckEvery) {
        if (!now_at_) now_at_ = now_us;
        return RxAck::Now;
    }
    return now_at_ ? RxAck::Now : RxAck::Later;
}

std::optional<uint64_t> PathReceiver::ack_due() const {
    if (now_at_) return now_at_;
    if (unacked_ > 0) return first_unacked_us_ + kDelayedAckUs;
    return std::nullopt;
}

PathAck PathReceiver::make_ack(uint64_t now_us) {
    PathAck ack;
    ack.cum = map_.cum();
    ack.bits = map_.bits();
    if (newest_arrival_us_ && now_us > *newest_arrival_us_)
        ack.ack_delay_us =
            static_cast<uint32_t>(std::min<uint64_t>(now_us - *newest_arrival_us_, kWireMax16));
    ack.ce = ce_;
    ce_ = 0;
    unacked_ = 0;
    now_at_.reset();
    ++acks_;
    return ack;
}

}  // namespace softmetaroce::v2
