// Section 3: the receiver's map of one path, with the sender's floor.
#pragma once

#include <array>
#include <cstdint>

#include "softmetaroce/v2/ring_map.h"

namespace softmetaroce::v2 {

class PathMap {
  public:
    explicit PathMap(uint32_t first_seq) : ring_(first_seq) {}

    // Records the arrival of sequence `seq` carrying the sender's floor `floor`. Beyond the map
    // nothing moves; otherwise cum first slides up to the floor (unless the floor is ahead of
    // seq, which no sender can send, and is ignored).
    MapVerdict record(uint32_t seq, uint32_t floor);

    bool has(uint32_t seq) const { return ring_.has(seq); }
    // Something after cum has arrived while cum has not.
    bool has_gap() const { return ring_.any(); }
    uint32_t cum() const { return ring_.cum(); }
    std::array<uint64_t, 4> bits() const { return ring_.window256(); }

  private:
    RingMap<kSackBits> ring_;
};

}  // namespace softmetaroce::v2
