// A simulated host holding one QueuePair connected to a QP on another node.
#pragma once

#include "softmetaroce/queue_pair.h"
#include "softmetaroce/sim/sim_network.h"

namespace metaroce::sim {

class QpNode : public SimNode {
  public:
    explicit QpNode(QueuePair& qp) : qp_(qp) {}

    // The node the QP's peer lives on; every datagram the QP sends goes there.
    void set_peer(NodeId peer) { peer_ = peer; }

    void on_datagram(const Datagram& datagram, TimeUs now) override {
        qp_.on_datagram(datagram.bytes, datagram.ce, now);
    }
    std::optional<TimeUs> next_timer() const override { return qp_.next_timer(); }
    void on_timer(TimeUs now) override { qp_.on_timer(now); }
    std::vector<std::pair<NodeId, Datagram>> take_outgoing() override;

    QueuePair& qp() { return qp_; }

  private:
    QueuePair& qp_;
    NodeId peer_ = 0;
};

}  // namespace metaroce::sim
