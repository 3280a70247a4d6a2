#include "softmetaroce/v2/path_sender.h"

#include <algorithm>

namespace softmetaroce::v2 {

namespace {
constexpr uint64_t kNever = ~uint64_t{0};
constexpr uint32_t kNoBit = ~uint32_t{0};

// The highest bit set in an ACK's map, or kNoBit.
uint32_t highest_bit(const PathAck& ack) {
    for (unsigned w = 4; w-- > 0;) {
        if (ack.bits[w] != 0)
            return w * 64 + 63 - static_cast<unsigned>(__builtin_clzll(ack.bits[w]));
    }
    return kNoBit;
}
}  // namespace

PathSender::PathSender(uint32_t first_seq, uint16_t entropy, uint32_t cwnd)
    : next_(first_seq),
      floor_(first_seq),
      max_floor_sent_(first_seq),
      entropy_(entropy),
      cwnd_(std::clamp(cwnd, kCwndMin, kCwndMax)),
      window_end_(first_seq) {}

bool PathSender::can_send(uint64_t now_us) const {
    if (state_ == PathState::Failed && (probe_out_ || now_us < retry_at_)) return false;
    // Fewer in flight than the window, and the new sequence within 254 of the floor.
    return uint64_t{in_flight_} * kCwndOne < cwnd_ &&
           seq_diff(next_, floor_) <= static_cast<int32_t>(kMaxFloorDistance);
}

uint32_t PathSender::on_sent(uint64_t cookie, uint64_t now_us) {
    const uint32_t seq = next_++;
    const bool probe = state_ == PathState::Failed;
    at(seq) = Record{cookie, now_us, seq, route_, Tx::InFlight, probe};
    if (probe) probe_out_ = true;
    ++in_flight_;
    ++sent_;
    pto_from_us_ = now_us;
    max_floor_sent_ = floor_;  // floor_ only rises
    return seq;
}

AckVerdict PathSender::on_ack(const PathAck& ack, uint64_t now_us, PathEvents& ev) {
    // Refuse an ACK that names a sequence never sent: cum past next, or a bit at next or later.
    const int32_t span = seq_diff(next_, ack.cum);
    const uint32_t top = highest_bit(ack);
    if (span < 0 || (top != kNoBit && static_cast<int64_t>(top) + 1 >= span)) {
        ++invalid_acks_;
        return AckVerdict::Invalid;
    }
    // The newest sequence the ACK names.
    const uint32_t newest = top == kNoBit ? ack.cum - 1 : ack.cum + 1 + top;

    uint32_t newly = 0;
    bool sample = false, probe_acked = false;
    uint64_t sample_sent_us = 0;
    for (uint32_t s = next_ - kSackBits; s != next_; ++s) {
        Record& r = at(s);
        if (r.seq != s || (r.state != Tx::InFlight && r.state != Tx::Lost)) continue;
        const bool by_cum = seq_before(s, ack.cum);
        const int32_t d = seq_diff(s, ack.cum);
        const bool by_bit = d >= 1 && ack.bit(static_cast<unsigned>(d - 1));
        if (!by_cum && !by_bit) continue;
        if (r.state == Tx::InFlight) {
            --in_flight_;
            ++acked_;
            ++newly;
            if (s == newest) {
                sample = true;
                sample_sent_us = r.sent_us;
            }
            if (r.probe) probe_acked = true;
        } else {
            // Declared lost. cum is evidence of arrival only while no floor sent has passed it:
            // after that the receiver may have skipped it.
            if (!by_bit && seq_after(max_floor_sent_, s)) continue;
            ++spurious_;
            // Section 5.3: a probe that arrives after its PTO still shows the path works.
            if (r.probe) probe_acked = true;
        }
        r.state = Tx::Acked;
        ev.acked.push_back(r.cookie);
        if (!has_largest_ || seq_after(s, largest_acked_)) {
            has_largest_ = true;
            largest_acked_ = s;
            largest_route_ = r.route;
        }
    }

    if (newly > 0) {
        // Section 5.3: the path is alive, so its PTO counts from this ACK too.
        pto_count_ = 0;
        pto_from_us_ = now_us;
    }
    if (sample) update_rtt(now_us - sample_sent_us, ack.ack_delay_us);
    if (probe_acked && state_ == PathState::Failed) {
        state_ = PathState::Active;
        probe_out_ = false;
        retry_at_ = kNever;
        backoff_us_ = kFirstBackoffUs;
    }

    // The ACK counts CE marks, not which packets had them: attribute them to the newly acked.
    const uint32_t marked = std::min(ack.ce, newly);
    win_acked_ += newly;
    win_marked_ += marked;
    grow(newly - marked);

    detect_losses(now_us, ev);
    advance_floor();
    check_window_end();
    return AckVerdict::Ok;
}

void PathSender::update_rtt(uint64_t latest_us, uint32_t ack_delay_us) {
    const uint32_t latest = static_cast<uint32_t>(std::min<uint64_t>(latest_us, UINT32_MAX));
    latest_rtt_us_ = latest;
    if (!has_rtt_) {
        has_rtt_ = true;
        min_rtt_us_ = srtt_us_ = latest;
        rttvar_us_ = latest / 2;
        return;
    }
    min_rtt_us_ = std::min(min_rtt_us_, latest);
    uint32_t adjusted = latest;
    if (uint64_t{latest} >= uint64_t{min_rtt_us_} + ack_delay_us) adjusted = latest - ack_delay_us;
    const uint32_t dev = srtt_us_ > adjusted ? srtt_us_ - adjusted : adjusted - srtt_us_;
    rttvar_us_ = static_cast<uint32_t>((3 * uint64_t{rttvar_us_} + dev) / 4);
    srtt_us_ = static_cast<uint32_t>((7 * uint64_t{srtt_us_} + adjusted) / 8);
}

uint32_t PathSender::pto_us() const {
    uint64_t base = kInitialPtoUs;
    if (has_rtt_)
        base = uint64_t{srtt_us_} + std::max<uint64_t>(4 * uint64_t{rttvar_us_}, kMinPtoVarUs) +
               kPtoAckDelayUs;
    const uint32_t shift = std::min<uint32_t>(pto_count_, 32);
    return static_cast<uint32_t>(std::min<uint64_t>(base << shift, kMaxPtoUs));
}

uint64_t PathSender::loss_delay_us() const {
    const uint64_t m = std::max(srtt_us_, latest_rtt_us_);
    return std::max<uint64_t>(m * 9 / 8, kMinLossDelayUs);
}

uint64_t PathSender::pto_deadline() const {
    if (in_flight_ == 0) return kNever;
    // Section 5.3: a PTO after the newest packet sent or the newest ACK of one in flight (as
    // RFC 9002 restarts its PTO).
    return pto_from_us_ + pto_us();
}

uint64_t PathSender::deadline() const {
    uint64_t t = pto_deadline();
    if (has_largest_) {
        // The oldest transmission in flight below the newest acknowledged one: "more than" the
        // loss delay after it left is the microsecond after.
        for (uint32_t s = floor_; s != next_ && seq_before(s, largest_acked_); ++s) {
            const Record& r = at(s);
            if (r.state == Tx::InFlight) {
                t = std::min(t, r.sent_us + loss_delay_us());
                break;
            }
        }
    }
    return t;
}

uint64_t PathSender::retry_at() const {
    return state_ == PathState::Failed && !probe_out_ ? retry_at_ : kNever;
}

void PathSender::grow(uint32_t packets) {
    // 1/window per packet: 256 * 256 / cwnd in the 1/256 fixed point.
    for (uint32_t i = 0; i < packets && cwnd_ < kCwndMax; ++i)
        cwnd_ = std::min(cwnd_ + kCwndOne * kCwndOne / cwnd_, kCwndMax);
}

void PathSender::detect_losses(uint64_t now_us, PathEvents& ev) {
    if (!has_largest_) return;
    const uint64_t delay = loss_delay_us();
    for (uint32_t s = floor_; s != next_ && seq_before(s, largest_acked_); ++s) {
        Record& r = at(s);
        if (r.state != Tx::InFlight) continue;
        const bool by_gap = r.route == largest_route_ &&
                            seq_diff(largest_acked_, s) >= static_cast<int32_t>(kLossGap);
        const bool by_time = now_us >= r.sent_us + delay;
        if (by_gap || by_time) lose(r, ev);
    }
}

void PathSender::lose(Record& r, PathEvents& ev) {
    r.state = Tx::Lost;
    --in_flight_;
    ++lost_;
    ++win_lost_;
    ev.lost.push_back(r.cookie);
}

void PathSender::advance_floor() {
    while (floor_ != next_ && at(floor_).state != Tx::InFlight) ++floor_;
}

void PathSender::check_window_end() {
    if (!seq_after(floor_, window_end_)) return;
    // DCTCP: alpha from the fraction of the window's acknowledged packets that were marked.
    if (win_acked_ > 0) {
        const uint32_t frac = static_cast<uint32_t>(uint64_t{win_marked_} * kAlphaOne / win_acked_);
        alpha_ = (alpha_ * ((1u << kAlphaGainShift) - 1) + frac) >> kAlphaGainShift;
    }
    if (win_marked_ > 0) {
        const uint64_t cut = uint64_t{cwnd_} * (2 * kAlphaOne - alpha_) / (2 * kAlphaOne);
        cwnd_ = std::max(static_cast<uint32_t>(cut), kCwndMin);
    }
    const uint32_t total = win_acked_ + win_lost_;
    const bool loss_bad = total > 0 && uint64_t{win_lost_} * 4 >= total;
    const bool mark_bad = win_acked_ > 0 && uint64_t{win_marked_} * 4 >= uint64_t{win_acked_} * 3;
    if (loss_bad || mark_bad) {
        ++bad_windows_;
        run_had_loss_ = run_had_loss_ || loss_bad;
    } else {
        bad_windows_ = 0;
        run_had_loss_ = false;
    }
    // A run of kRepathWindows bad windows asks once; the count then starts again.
    if (bad_windows_ >= kRepathWindows) {
        repath_ = run_had_loss_ ? Repath::Loss : Repath::Marks;
        bad_windows_ = 0;
        run_had_loss_ = false;
    }
    win_acked_ = win_lost_ = win_marked_ = 0;
    window_end_ = next_;
}

void PathSender::move_route(uint16_t entropy) {
    entropy_ = entropy;
    ++route_;
    ++routes_;
    bad_windows_ = 0;
    run_had_loss_ = false;
    repath_ = Repath::None;
}

void PathSender::on_refused(const std::function<bool(uint64_t)>& refused, PathEvents& ev) {
    for (uint32_t seq = floor_; seq != next_; ++seq) {
        Record& r = at(seq);
        if (r.state != Tx::InFlight || !refused(r.cookie)) continue;
        r.state = Tx::Lost;
        --in_flight_;
        ++refused_;
        ev.lost.push_back(r.cookie);
    }
    advance_floor();
    check_window_end();
}

void PathSender::new_route(uint16_t entropy) {
    move_route(entropy);
    ++repaths_;
}

void PathSender::fail(uint64_t now_us, uint16_t new_entropy) {
    state_ = PathState::Failed;
    ++failures_;
    move_route(new_entropy);
    cwnd_ = std::max(cwnd_ / 4, kCwndMin);
    pto_count_ = 0;  // the probe is given one PTO
    backoff_us_ = kFirstBackoffUs;
    retry_at_ = now_us + backoff_us_;
    probe_out_ = false;
}

void PathSender::on_timer(uint64_t now_us, uint16_t new_entropy, PathEvents& ev) {
    detect_losses(now_us, ev);
    advance_floor();
    if (in_flight_ > 0 && now_us >= pto_deadline()) {
        // Nothing acknowledged for a PTO: the tail went missing, all of it is lost.
        for (uint32_t s = floor_; s != next_; ++s) {
            Record& r = at(s);
            if (r.state == Tx::InFlight) lose(r, ev);
        }
        advance_floor();
        check_window_end();
        if (state_ == PathState::Failed) {
            // The probe was lost: yet another route, and twice the wait.
            move_route(new_entropy);
            backoff_us_ = std::min(backoff_us_ * 2, kMaxBackoffUs);
            retry_at_ = now_us + backoff_us_;
            probe_out_ = false;
        } else if (++pto_count_ >= kFailPtos) {
            fail(now_us, new_entropy);
        }
        return;
    }
    check_window_end();
}

}  // namespace softmetaroce::v2
