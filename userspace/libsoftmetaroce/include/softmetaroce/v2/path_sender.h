// Sections 5-6: the sending end of one path. It numbers transmissions with the path's sequence,
// tells from ACKs which arrived and which are lost, keeps the path's RTT, probe timeout and ECN
// window, fails a path whose route went dead and moves it to new routes. Cookies are the
// caller's names for what a transmission carries; the path never looks inside them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

#include "softmetaroce/v2/path_ack.h"
#include "softmetaroce/v2/seq.h"

namespace softmetaroce::v2 {

// Appended to, in the order decided: acked holds transmissions an ACK showed arrived
// (including losses found spurious), lost those declared lost.
struct PathEvents {
    std::vector<uint64_t> acked;
    std::vector<uint64_t> lost;
};

enum class AckVerdict { Ok, Invalid };
enum class PathState { Active, Failed };
// Why the path asks the connection for a new route (section 5.3).
enum class Repath { None, Loss, Marks };

class PathSender {
  public:
    PathSender(uint32_t first_seq, uint16_t entropy, uint32_t cwnd /* in 1/256 packet */);

    // Section 5.1, and a failed path's single probe once its backoff is over.
    bool can_send(uint64_t now_us) const;
    // Records a transmission (the caller checked can_send) and returns the sequence it took.
    // The packet carries floor() as it is after this call.
    uint32_t on_sent(uint64_t cookie, uint64_t now_us);
    AckVerdict on_ack(const PathAck& ack, uint64_t now_us, PathEvents& ev);
    // The next time on_timer must run (loss by time, probe timeout); ~0 if none.
    uint64_t deadline() const;
    // A failed path's end of backoff, while its probe has not been sent; ~0 otherwise.
    uint64_t retry_at() const;
    // new_entropy is the route the path takes if this call fails it or loses its probe.
    void on_timer(uint64_t now_us, uint16_t new_entropy, PathEvents& ev);
    // Section 9.2: the peer refused what refused(cookie) names (an RNR NAK). Those in flight are
    // handed back at once (as lost in ev) to go again after the peer's RNR timer; they were not
    // lost on the path, so neither the window judgement nor the probe timeout counts them.
    void on_refused(const std::function<bool(uint64_t)>& refused, PathEvents& ev);
    // The connection acting on repath_wanted(): the sequence goes on over a new route.
    void new_route(uint16_t entropy);
    Repath repath_wanted() const { return repath_; }
    // The connection declined a request for marks (no other path is clearly less marked).
    void clear_repath() { repath_ = Repath::None; }

    uint32_t pto_us() const;
    uint32_t next_seq() const { return next_; }
    uint32_t floor() const { return floor_; }
    uint32_t in_flight() const { return in_flight_; }
    uint32_t cwnd() const { return cwnd_; }
    uint32_t srtt_us() const { return srtt_us_; }
    uint32_t rttvar_us() const { return rttvar_us_; }
    uint32_t min_rtt_us() const { return min_rtt_us_; }
    uint32_t latest_rtt_us() const { return latest_rtt_us_; }
    bool has_rtt() const { return has_rtt_; }
    PathState state() const { return state_; }
    uint16_t entropy() const { return entropy_; }
    uint32_t alpha() const { return alpha_; }  // DCTCP alpha, 1/1024
    uint32_t pto_count() const { return pto_count_; }
    uint64_t backoff_us() const { return backoff_us_; }
    uint32_t bad_windows() const { return bad_windows_; }
    uint64_t sent_packets() const { return sent_; }
    uint64_t acked() const { return acked_; }        // in flight, then acknowledged
    uint64_t lost() const { return lost_; }          // declared lost (spurious ones included)
    uint64_t spurious() const { return spurious_; }  // declared lost, then shown arrived
    uint64_t refused() const { return refused_; }    // handed back by on_refused
    uint64_t failures() const { return failures_; }
    uint64_t repaths() const { return repaths_; }  // new_route calls
    uint64_t routes() const { return routes_; }    // every move: failures, lost probes, repaths
    uint64_t invalid_acks() const { return invalid_acks_; }

  private:
    enum class Tx : uint8_t { Empty, InFlight, Lost, Acked };
    struct Record {
        uint64_t cookie = 0;
        uint64_t sent_us = 0;
        uint32_t seq = 0;
        uint32_t route = 0;
        Tx state = Tx::Empty;
        bool probe = false;
    };

    Record& at(uint32_t seq) { return ring_[seq % kSackBits]; }
    const Record& at(uint32_t seq) const { return ring_[seq % kSackBits]; }
    uint64_t loss_delay_us() const;
    uint64_t pto_deadline() const;
    void update_rtt(uint64_t latest_us, uint32_t ack_delay_us);
    void grow(uint32_t packets);
    void detect_losses(uint64_t now_us, PathEvents& ev);
    void lose(Record& r, PathEvents& ev);
    void advance_floor();
    void check_window_end();
    void move_route(uint16_t entropy);
    void fail(uint64_t now_us, uint16_t new_entropy);

    // Records of the last 256 sequences sent, at seq % 256: every unresolved one (the floor
    // rule keeps them within 255) and resolved ones kept to spot spurious losses.
    std::array<Record, kSackBits> ring_{};
    uint32_t next_, floor_;
    uint32_t max_floor_sent_;  // the highest floor a packet carried
    uint32_t in_flight_ = 0;
    uint16_t entropy_;
    uint32_t route_ = 0;  // route generation: bumped on every move, whatever the entropy

    bool has_largest_ = false;  // newest sequence acknowledged on the path, and its route
    uint32_t largest_acked_ = 0;
    uint32_t largest_route_ = 0;

    bool has_rtt_ = false;
    uint32_t srtt_us_ = 0, rttvar_us_ = 0, min_rtt_us_ = 0, latest_rtt_us_ = 0;
    uint32_t pto_count_ = 0;
    uint64_t pto_from_us_ = 0;

    PathState state_ = PathState::Active;
    uint64_t backoff_us_ = kFirstBackoffUs;
    uint64_t retry_at_ = ~uint64_t{0};
    bool probe_out_ = false;

    uint32_t cwnd_;
    uint32_t alpha_ = kAlphaOne;
    uint32_t window_end_;  // the window ends when the floor passes it
    uint32_t win_acked_ = 0, win_lost_ = 0, win_marked_ = 0;
    uint32_t bad_windows_ = 0;
    bool run_had_loss_ = false;
    Repath repath_ = Repath::None;

    uint64_t sent_ = 0, acked_ = 0, lost_ = 0, spurious_ = 0, failures_ = 0, repaths_ = 0;
    uint64_t routes_ = 0, invalid_acks_ = 0, refused_ = 0;
};

}  // namespace softmetaroce::v2
