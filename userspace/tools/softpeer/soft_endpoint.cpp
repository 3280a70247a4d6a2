#include "soft_endpoint.h"

#include <algorithm>

namespace metaroce::tools {

SoftEndpoint::SoftEndpoint(QueuePair& qp, UdpTransport& udp, const SoftEndpointConfig& config)
    : qp_(qp),
      udp_(udp),
      config_(config),
      rng_(config.seed),
      start_(std::chrono::steady_clock::now()) {}

TimeUs SoftEndpoint::now() const {
    return static_cast<TimeUs>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now() - start_)
                                   .count());
}

void SoftEndpoint::flush() {
    for (const Datagram& d : qp_.take_outgoing()) {
        if (rng_.chance(config_.loss)) {
            ++stats_.dropped_tx;
            continue;
        }
        // Data packets go ECT(0), ACKs Not-ECT (protocol.md section 1).
        udp_.send(config_.peer, config_.peer_port, d.udp_src_port, d.bytes, d.ect ? 2 : 0);
        ++stats_.sent;
    }
}

void SoftEndpoint::deliver(const Received& r) {
    if (!(r.from == config_.peer)) {
        ++stats_.foreign;
        return;
    }
    if (rng_.chance(config_.loss)) {
        ++stats_.dropped_rx;
        return;
    }
    ++stats_.received;
    qp_.on_datagram(r.bytes, r.ce(), now());
}

bool SoftEndpoint::run_until(const std::function<bool()>& done, int timeout_ms) {
    const TimeUs deadline = now() + static_cast<TimeUs>(timeout_ms) * 1000;
    for (;;) {
        flush();
        if (done()) return true;
        TimeUs t = now();
        if (t >= deadline) return false;
        if (const auto timer = qp_.next_timer(); timer && *timer <= t) {
            qp_.on_timer(t);
            continue;
        }
        // Sleep until the next timer, the deadline, or a datagram.
        TimeUs wake = deadline;
        if (const auto timer = qp_.next_timer()) wake = std::min(wake, *timer);
        const int wait_ms = static_cast<int>((wake - t + 999) / 1000);
        if (auto r = udp_.recv(std::max(0, std::min(wait_ms, 100)))) {
            deliver(*r);
            // Drain what else is queued before acting on it.
            for (int i = 0; i < 256; ++i) {
                auto more = udp_.recv(0);
                if (!more) break;
                deliver(*more);
            }
        }
        t = now();
        if (const auto timer = qp_.next_timer(); timer && *timer <= t) qp_.on_timer(t);
    }
}

void SoftEndpoint::run_for(int ms) {
    run_until([] { return false; }, ms);
}

}  // namespace metaroce::tools
