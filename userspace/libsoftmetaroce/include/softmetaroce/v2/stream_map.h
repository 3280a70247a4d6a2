// Section 8: the receiver's map of one stream. The same kind of map as a path's, naming
// cum + 1 .. cum + 4095 (Appendix A), with no floor: a stream waits for every segment.
#pragma once

#include <cstdint>

#include "softmetaroce/v2/ring_map.h"

namespace softmetaroce::v2 {

class StreamMap {
  public:
    explicit StreamMap(uint32_t first_ssn) : ring_(first_ssn) {}

    // New: place it. Duplicate: a resend whose earlier copy arrived, not placed again. Beyond:
    // 4096 or more past cum, which a conforming sender never sends.
    MapVerdict record(uint32_t ssn) {
        if (seq_diff(ssn, ring_.cum()) >= static_cast<int32_t>(kStreamMapBits))
            return MapVerdict::Beyond;
        return ring_.record(ssn);
    }
    bool has(uint32_t ssn) const { return ring_.has(ssn); }
    // How far the stream has arrived in order.
    uint32_t cum() const { return ring_.cum(); }

  private:
    RingMap<kStreamMapBits> ring_;
};

}  // namespace softmetaroce::v2
