// A discrete-event simulation of hosts exchanging datagrams over SimLinks. One clock drives
// everything: the network steps from event to event (a datagram arriving, a host's timer
// expiring), in a deterministic order, so a seed fully determines a run.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <queue>
#include <utility>
#include <vector>

#include "softmetaroce/datagram.h"
#include "softmetaroce/sim/sim_link.h"
#include "softmetaroce/time.h"

namespace metaroce::sim {

using NodeId = std::uint32_t;

// A simulated host (see QpNode for one holding a QueuePair).
class SimNode {
  public:
    virtual ~SimNode() = default;
    virtual void on_datagram(const Datagram& datagram, TimeUs now) = 0;
    virtual std::optional<TimeUs> next_timer() const = 0;
    virtual void on_timer(TimeUs now) = 0;
    // Datagrams produced since the last call, each with its destination.
    virtual std::vector<std::pair<NodeId, Datagram>> take_outgoing() = 0;
};

class SimNetwork {
  public:
    using DeliveryTap =
        std::function<void(NodeId from, NodeId to, const Datagram& datagram, TimeUs now)>;

    explicit SimNetwork(std::uint64_t seed) : seed_(seed) {}

    // The node must outlive the network.
    NodeId add_node(SimNode& node);
    // Creates the links from a to b and from b to a.
    void connect(NodeId a, NodeId b, const LinkConfig& a_to_b, const LinkConfig& b_to_a);
    SimLink& link(NodeId from, NodeId to) { return links_.at({from, to}); }

    TimeUs now() const { return now_; }
    std::uint64_t events() const { return events_; }

    // Runs events in time order until `done` holds (checked after every event) or no event is
    // due by `deadline`; the clock then stands at the deadline. Returns whether done.
    bool run_until(const std::function<bool()>& done, TimeUs deadline);
    void run_for(TimeUs duration);

    // Sees every datagram a node sends, right after the event that produced it (so the
    // sender's state is still the one it was produced in).
    void set_send_tap(DeliveryTap tap) { send_tap_ = std::move(tap); }
    // Sees every datagram just before it is handed to its destination.
    void set_delivery_tap(DeliveryTap tap) { delivery_tap_ = std::move(tap); }
    // Called after every event (a delivery or a round of timers).
    void set_after_event(std::function<void()> hook) { after_event_ = std::move(hook); }

  private:
    struct Event {
        TimeUs at = 0;
        std::uint64_t seq = 0;  // ties break in scheduling order
        NodeId from = 0;
        NodeId to = 0;
        Datagram datagram;
    };
    struct Later {
        bool operator()(const Event& a, const Event& b) const {
            return a.at != b.at ? a.at > b.at : a.seq > b.seq;
        }
    };

    void collect_outgoing();
    std::optional<TimeUs> next_node_timer() const;
    void fire_timers();

    std::uint64_t seed_;
    TimeUs now_ = 0;
    std::uint64_t events_ = 0;
    std::uint64_t next_seq_ = 0;
    std::vector<SimNode*> nodes_;
    std::map<std::pair<NodeId, NodeId>, SimLink> links_;
    std::priority_queue<Event, std::vector<Event>, Later> queue_;
    DeliveryTap send_tap_;
    DeliveryTap delivery_tap_;
    std::function<void()> after_event_;
};

}  // namespace metaroce::sim
