// The receiver's fair-share hint (protocol.md section 10): its receive budget in packets
// divided by the number of connections that sent it data in the last millisecond. One tracker
// is shared by all connections of a device (or simulated host).
#pragma once

#include <rdma/metaroce_wire.h>

#include <cstdint>
#include <map>

#include "softmetaroce/time.h"

namespace metaroce {

class FairShareTracker {
  public:
    static constexpr TimeUs kActivityWindowUs = 1000;

    explicit FairShareTracker(std::uint32_t receive_budget = METAROCE_RX_BUDGET)
        : budget_(receive_budget) {}

    // Connection `connection` (e.g. its QPN) delivered data at `now`.
    void note_activity(std::uint32_t connection, TimeUs now);
    // The hint for the ACK field: budget / active connections, at least
    // METAROCE_MIN_FAIR_SHARE, at most 65535.
    std::uint16_t hint(TimeUs now) const;
    unsigned active_connections(TimeUs now) const;

  private:
    std::uint32_t budget_;
    std::map<std::uint32_t, TimeUs> last_activity_;
};

}  // namespace metaroce
