#include "softmetaroce/v2/path_map.h"

namespace softmetaroce::v2 {

MapVerdict PathMap::record(uint32_t seq, uint32_t floor) {
    // A floor ahead of the packet's own sequence is not one a sender can send.
    const bool use_floor = !seq_after(floor, seq);
    uint32_t base = cum();
    if (use_floor && seq_after(floor, base)) base = floor;
    // Beyond the map: nothing moves, not even the floor.
    if (seq_diff(seq, base) > static_cast<int32_t>(kSackBits)) return MapVerdict::Beyond;
    if (use_floor) ring_.skip_to(floor);
    return ring_.record(seq);
}

}  // namespace softmetaroce::v2
