// One direction of a simulated fabric between two hosts. Per datagram it applies, from a
// seeded RNG: black-holing by UDP source port (a dead ECMP path), random loss, a bottleneck
// queue that CE-marks ECT packets above a threshold, propagation delay plus a fixed extra
// delay per ECMP route (hashed from the UDP source port) plus random per-packet jitter (both
// reorder), and random duplication.
#pragma once

#include <cstdint>
#include <set>
#include <vector>

#include "softmetaroce/datagram.h"
#include "softmetaroce/sim/rng.h"
#include "softmetaroce/time.h"

namespace metaroce::sim {

struct LinkConfig {
    TimeUs delay_us = 5;         // propagation delay
    TimeUs route_spread_us = 0;  // each source port's route adds a fixed [0, spread] delay
    TimeUs jitter_us = 0;        // extra delay per packet, uniform in [0, jitter_us]
    double loss_rate = 0;        // per datagram
    double duplicate_rate = 0;   // per delivered datagram: a second copy
    // Bottleneck: 0 means infinitely fast (no queue). Otherwise datagrams are serialized at
    // this rate and queue behind each other.
    std::uint64_t bytes_per_us = 0;
    // ECT datagrams that find at least this many bytes queued are CE-marked; 0: never mark.
    std::uint64_t ecn_threshold_bytes = 0;
};

struct LinkStats {
    std::uint64_t sent = 0;
    std::uint64_t delivered = 0;  // copies scheduled for delivery (duplicates included)
    std::uint64_t lost = 0;
    std::uint64_t blackholed = 0;
    std::uint64_t duplicated = 0;
    std::uint64_t ce_marked = 0;
};

// A copy of a datagram and when it arrives.
struct Arrival {
    TimeUs at = 0;
    Datagram datagram;
};

class SimLink {
  public:
    SimLink(const LinkConfig& config, std::uint64_t seed);

    // What becomes of a datagram sent at `now`: zero, one or two arrivals.
    std::vector<Arrival> transmit(Datagram datagram, TimeUs now);

    void set_blackhole(std::uint16_t udp_src_port, bool dead);
    void set_config(const LinkConfig& config) { config_ = config; }
    const LinkConfig& config() const { return config_; }
    const LinkStats& stats() const { return stats_; }

  private:
    TimeUs propagation(TimeUs departure, std::uint16_t udp_src_port);

    LinkConfig config_;
    std::uint64_t seed_;
    SimRng rng_;
    std::set<std::uint16_t> blackholed_ports_;
    TimeUs queue_free_at_ = 0;  // when the bottleneck finishes the last queued datagram
    LinkStats stats_;
};

}  // namespace metaroce::sim
