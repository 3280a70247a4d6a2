// The paths of a connection (protocol.md section 7): one ECMP entropy value each, with the
// per-path state the sender steers by. New packets go round-robin over ACTIVE paths, skipping
// paths whose RTT is more than twice the best; SUSPECT paths carry one probe per RTT; FAILED
// paths carry nothing until a backoff expires, then a probe. A delivery on a path (an ACK
// echoing it, or the acknowledgement of a packet sent only there) makes it ACTIVE again.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "softmetaroce/time.h"

namespace metaroce {

enum class PathState : std::uint8_t { Active, Suspect, Failed };

std::string_view to_string(PathState state);

struct PathConfig {
    std::uint32_t suspect_after_losses = 2;  // consecutive losses: ACTIVE -> SUSPECT
    std::uint32_t fail_after_losses = 4;     // consecutive losses: -> FAILED
    TimeUs initial_fail_backoff_us = 1000;
    TimeUs max_fail_backoff_us = 64000;
};

struct Path {
    std::uint16_t entropy = 0;  // UDP source port is METAROCE_ENTROPY_BASE | entropy
    PathState state = PathState::Active;
    std::uint32_t inflight = 0;
    std::optional<TimeUs> srtt;  // from ACKs echoing this path
    std::uint32_t consecutive_losses = 0;
    TimeUs next_probe_at = 0;  // SUSPECT, FAILED: when the next probe may go
    TimeUs fail_backoff = 0;   // FAILED: wait before the next probe
    // When choose() last gave it a packet: a slow path still gets one per its own RTT, or it
    // would never be measured again (protocol.md section 7).
    std::optional<TimeUs> last_picked;
    // Statistics.
    std::uint64_t sent = 0;
    std::uint64_t delivered = 0;
    std::uint64_t lost = 0;
    std::uint64_t ce_marks = 0;
};

struct PathChoice {
    std::uint16_t index = 0;
    bool probe = false;  // sent on a SUSPECT or FAILED path to test it
};

class PathSet {
  public:
    static constexpr unsigned kMaxPaths = 64;

    // `count` paths (1..64) with entropy values derived from the QPN.
    PathSet(std::uint32_t qpn, unsigned count, const PathConfig& config = {});

    // The 14-bit entropy of path `index` of QP `qpn`: distinct for the paths of one QP and
    // spread by a hash of the QPN so that different QPs take different ECMP routes.
    static std::uint16_t entropy_for(std::uint32_t qpn, unsigned index);

    // Picks the path of the next packet. A retransmission names the path it was lost on in
    // `avoid` and is never used as a probe. `probe_interval` is the RTT used to pace probes on
    // SUSPECT paths.
    PathChoice choose(TimeUs now, std::optional<std::uint16_t> avoid, bool allow_probe,
                      TimeUs probe_interval);

    void on_sent(std::uint16_t index, const PathChoice& choice, TimeUs now);
    // A packet sent on the path left flight: delivered, or declared lost by the network.
    void on_delivered(std::uint16_t index);
    void on_lost(std::uint16_t index, TimeUs now);
    // The packet left flight for a reason that says nothing about the path (RNR, error).
    void on_withdrawn(std::uint16_t index);
    // An ACK echoed this path: proof of delivery, an RTT sample and its CE marks.
    void on_echo(std::uint16_t index, TimeUs rtt_us, std::uint32_t ce_marks);

    unsigned size() const { return static_cast<unsigned>(paths_.size()); }
    const Path& operator[](unsigned index) const { return paths_[index]; }
    unsigned count_in(PathState state) const;

  private:
    void mark_delivering(Path& path);
    std::optional<TimeUs> best_rtt() const;
    bool too_slow(const Path& path, std::optional<TimeUs> best) const;
    TimeUs suspect_probe_interval(const Path& path) const;

    PathConfig config_;
    std::vector<Path> paths_;
    unsigned next_active_ = 0;      // round-robin cursor over ACTIVE paths
    unsigned next_probe_ = 0;       // round-robin cursor for probes
    unsigned next_any_ = 0;         // round-robin cursor when no path is ACTIVE
    TimeUs probe_interval_ = 1000;  // the connection's RTT, from the last choose()
};

}  // namespace metaroce
