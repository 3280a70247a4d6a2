// What an on-path observer learns: MetaRoCE packets the device under test sends, read with a
// packet socket in the fuzzer's network namespace (CAP_NET_RAW there). An ACK from DUT QP X
// gives the first PSN X still expects (its window); a data packet gives X's send PSNs.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "softmetaroce/psn.h"

namespace metaroce::fuzz {

struct Sighting {
    std::uint32_t dut_qpn = 0;
    bool ack = false;  // an ACK: psn is the DUT's cum_psn; else a data packet's PSN
    Psn psn = 0;
};

class Sniffer {
  public:
    // Opens the socket in `netns` (empty: ours); ok() is false if not allowed.
    Sniffer(const std::string& netns, const std::string& dut_ip);
    ~Sniffer();
    Sniffer(const Sniffer&) = delete;
    Sniffer& operator=(const Sniffer&) = delete;

    bool ok() const { return fd_ >= 0; }
    // The next packet from the DUT already received (never waits).
    std::optional<Sighting> poll();

  private:
    int fd_ = -1;
    std::uint32_t dut_addr_ = 0;  // network order
};

}  // namespace metaroce::fuzz
