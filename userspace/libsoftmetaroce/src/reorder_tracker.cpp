#include "softmetaroce/reorder_tracker.h"

#include <algorithm>

namespace metaroce {

ReorderTracker::ReorderTracker(std::uint32_t reorder_allowance)
    : allowance_(std::max<std::uint32_t>(1, reorder_allowance)) {}

void ReorderTracker::on_delivered(std::uint64_t tx_order) {
    if (latest_.size() == allowance_ && tx_order <= latest_.front()) return;
    latest_.insert(std::upper_bound(latest_.begin(), latest_.end(), tx_order), tx_order);
    if (latest_.size() > allowance_) latest_.erase(latest_.begin());
}

std::optional<std::uint64_t> ReorderTracker::loss_threshold() const {
    if (latest_.size() < allowance_) return std::nullopt;
    return latest_.front();
}

}  // namespace metaroce
