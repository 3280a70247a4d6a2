#include "softmetaroce/sim/sim_network.h"

#include <stdexcept>

namespace metaroce::sim {

NodeId SimNetwork::add_node(SimNode& node) {
    nodes_.push_back(&node);
    return static_cast<NodeId>(nodes_.size() - 1);
}

void SimNetwork::connect(NodeId a, NodeId b, const LinkConfig& a_to_b, const LinkConfig& b_to_a) {
    // Each link gets its own random stream, derived from the network seed and its ends.
    const auto link_seed = [this](NodeId from, NodeId to) {
        return seed_ * 0x100000001b3ull + (std::uint64_t{from} << 32) + to + 1;
    };
    links_.insert_or_assign({a, b}, SimLink(a_to_b, link_seed(a, b)));
    links_.insert_or_assign({b, a}, SimLink(b_to_a, link_seed(b, a)));
}

void SimNetwork::collect_outgoing() {
    for (NodeId from = 0; from < nodes_.size(); ++from) {
        for (auto& [to, datagram] : nodes_[from]->take_outgoing()) {
            if (send_tap_) send_tap_(from, to, datagram, now_);
            const auto it = links_.find({from, to});
            if (it == links_.end()) continue;  // no route: dropped
            for (Arrival& arrival : it->second.transmit(std::move(datagram), now_)) {
                queue_.push(Event{arrival.at, next_seq_++, from, to, std::move(arrival.datagram)});
            }
        }
    }
}

std::optional<TimeUs> SimNetwork::next_node_timer() const {
    std::optional<TimeUs> next;
    for (const SimNode* node : nodes_) {
        const std::optional<TimeUs> t = node->next_timer();
        if (t && (!next || *t < *next)) next = t;
    }
    return next;
}

void SimNetwork::fire_timers() {
    for (SimNode* node : nodes_) {
        const std::optional<TimeUs> t = node->next_timer();
        if (!t || *t > now_) continue;
        node->on_timer(now_);
        const std::optional<TimeUs> after = node->next_timer();
        if (after && *after <= now_ && *after == *t) {
            throw std::logic_error("SimNetwork: a node's timer did not move when it fired");
        }
    }
}

bool SimNetwork::run_until(const std::function<bool()>& done, TimeUs deadline) {
    for (;;) {
        collect_outgoing();
        if (done()) return true;
        const std::optional<TimeUs> timer = next_node_timer();
        const std::optional<TimeUs> arrival =
            queue_.empty() ? std::nullopt : std::optional<TimeUs>(queue_.top().at);
        if (!timer && !arrival) break;
        const TimeUs at = std::min(timer.value_or(kNever), arrival.value_or(kNever));
        if (at > deadline) break;
        now_ = std::max(now_, at);
        ++events_;
        // Timers due at the same instant as an arrival go first.
        if (timer && *timer <= at) {
            fire_timers();
        } else {
            Event event = queue_.top();
            queue_.pop();
            if (delivery_tap_) delivery_tap_(event.from, event.to, event.datagram, now_);
            nodes_[event.to]->on_datagram(event.datagram, now_);
        }
        if (after_event_) after_event_();
    }
    now_ = std::max(now_, deadline);
    return done();
}

void SimNetwork::run_for(TimeUs duration) {
    run_until([] { return false; }, now_ + duration);
}

}  // namespace metaroce::sim
