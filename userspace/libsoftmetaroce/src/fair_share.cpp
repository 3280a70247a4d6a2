#include "softmetaroce/fair_share.h"

#include <algorithm>

namespace metaroce {

void FairShareTracker::note_activity(std::uint32_t connection, TimeUs now) {
    last_activity_[connection] = now;
}

unsigned FairShareTracker::active_connections(TimeUs now) const {
    unsigned n = 0;
    for (const auto& [connection, at] : last_activity_) {
        if (at + kActivityWindowUs > now) ++n;
    }
    return n;
}

std::uint16_t FairShareTracker::hint(TimeUs now) const {
    const unsigned active = std::max(1u, active_connections(now));
    const std::uint32_t share = std::max<std::uint32_t>(METAROCE_MIN_FAIR_SHARE, budget_ / active);
    return static_cast<std::uint16_t>(std::min<std::uint32_t>(share, 0xffff));
}

}  // namespace metaroce
