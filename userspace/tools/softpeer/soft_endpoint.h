// A libsoftmetaroce QueuePair driven by a real clock over a UdpTransport: the soft MetaRoCE
// endpoint of metaroce-peer and of metaroce-compliance's reference transfers. Optionally drops
// a seeded random share of its own sends and receives (loss injection).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "softmetaroce/queue_pair.h"
#include "softmetaroce/sim/rng.h"
#include "udp.h"

namespace metaroce::tools {

struct SoftEndpointConfig {
    IpAddress peer;                  // the other QP's address
    std::uint16_t peer_port = 4793;  // its MetaRoCE UDP port
    double loss = 0;                 // probability of dropping each datagram sent or received
    std::uint64_t seed = 1;
};

struct SoftEndpointStats {
    std::uint64_t sent = 0;
    std::uint64_t received = 0;
    std::uint64_t dropped_tx = 0;  // by loss injection
    std::uint64_t dropped_rx = 0;
    std::uint64_t foreign = 0;  // from another address: not for this QP
};

class SoftEndpoint {
  public:
    SoftEndpoint(QueuePair& qp, UdpTransport& udp, const SoftEndpointConfig& config);

    // Microseconds since the endpoint was made: the QueuePair's clock.
    TimeUs now() const;

    // Sends what the QP produced, delivers datagrams and fires timers until `done` holds
    // (checked after every event) or `timeout_ms` passed. Returns done().
    bool run_until(const std::function<bool()>& done, int timeout_ms);
    // Runs for `ms` milliseconds.
    void run_for(int ms);
    // Sends what the QP produced so far.
    void flush();

    const SoftEndpointStats& stats() const { return stats_; }

  private:
    void deliver(const Received& r);

    QueuePair& qp_;
    UdpTransport& udp_;
    SoftEndpointConfig config_;
    sim::SimRng rng_;
    std::chrono::steady_clock::time_point start_;
    SoftEndpointStats stats_;
};

}  // namespace metaroce::tools
