// A MetaRoCE packet as carried by UDP: its bytes, the UDP source port (path entropy) and the
// IP ECN bits that matter to the protocol.
#pragma once

#include <cstdint>
#include <vector>

namespace metaroce {

struct Datagram {
    std::vector<std::uint8_t> bytes;  // the UDP payload: BTH, extension, payload
    std::uint16_t udp_src_port = 0;   // METAROCE_ENTROPY_BASE | path entropy
    bool ect = false;                 // sent ECT(0) (data) or Not-ECT (ACKs)
    bool ce = false;                  // CE-marked on the way
};

}  // namespace metaroce
