#include "softmetaroce/sim/sim_link.h"

#include <algorithm>

namespace metaroce::sim {

SimLink::SimLink(const LinkConfig& config, std::uint64_t seed)
    : config_(config), seed_(seed), rng_(seed) {}

void SimLink::set_blackhole(std::uint16_t udp_src_port, bool dead) {
    if (dead) {
        blackholed_ports_.insert(udp_src_port);
    } else {
        blackholed_ports_.erase(udp_src_port);
    }
}

TimeUs SimLink::propagation(TimeUs departure, std::uint16_t udp_src_port) {
    TimeUs route = 0;
    if (config_.route_spread_us != 0) {
        // The same port always takes the same route: a stateless hash of the port.
        SimRng route_rng(seed_ ^ (std::uint64_t{udp_src_port} << 32));
        route = route_rng.below(config_.route_spread_us + 1);
    }
    const TimeUs jitter = config_.jitter_us == 0 ? 0 : rng_.below(config_.jitter_us + 1);
    return departure + config_.delay_us + route + jitter;
}

std::vector<Arrival> SimLink::transmit(Datagram datagram, TimeUs now) {
    ++stats_.sent;
    if (blackholed_ports_.count(datagram.udp_src_port) != 0) {
        ++stats_.blackholed;
        return {};
    }
    if (rng_.chance(config_.loss_rate)) {
        ++stats_.lost;
        return {};
    }

    TimeUs departure = now;
    if (config_.bytes_per_us != 0) {
        const TimeUs start = std::max(now, queue_free_at_);
        const std::uint64_t queued_bytes = (start - now) * config_.bytes_per_us;
        if (datagram.ect && config_.ecn_threshold_bytes != 0 &&
            queued_bytes >= config_.ecn_threshold_bytes) {
            datagram.ce = true;
            ++stats_.ce_marked;
        }
        const std::uint64_t size = datagram.bytes.size();
        departure = start + (size + config_.bytes_per_us - 1) / config_.bytes_per_us;
        queue_free_at_ = departure;
    }

    std::vector<Arrival> arrivals;
    const bool duplicate = rng_.chance(config_.duplicate_rate);
    const std::uint16_t port = datagram.udp_src_port;
    arrivals.push_back(Arrival{propagation(departure, port), datagram});
    if (duplicate) {
        ++stats_.duplicated;
        arrivals.push_back(Arrival{propagation(departure, port), std::move(datagram)});
    }
    stats_.delivered += arrivals.size();
    return arrivals;
}

}  // namespace metaroce::sim
