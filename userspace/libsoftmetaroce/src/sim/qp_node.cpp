#include "softmetaroce/sim/qp_node.h"

namespace metaroce::sim {

std::vector<std::pair<NodeId, Datagram>> QpNode::take_outgoing() {
    std::vector<std::pair<NodeId, Datagram>> out;
    for (Datagram& datagram : qp_.take_outgoing()) out.emplace_back(peer_, std::move(datagram));
    return out;
}

}  // namespace metaroce::sim
