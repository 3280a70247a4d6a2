#include "softmetaroce/reorder_tracker.h"

#include <algorithm>

namespace metaroce {

ReorderTracker::ReorderTracker(std::uint32_t initial_allowance, std::uint32_t max_allowance)
    : initial_(std::max<std::uint32_t>(1, initial_allowance)),
      max_(std::max(initial_, max_allowance)),
      allowance_(initial_) {}

void ReorderTracker::on_delivered(std::uint64_t tx_order, bool first_transmission) {
    const auto at = std::upper_bound(latest_.begin(), latest_.end(), tx_order);
    const auto later = static_cast<std::uint32_t>(latest_.end() - at);
    if (first_transmission && later > 0)
        allowance_ = std::min(std::max(allowance_, later + 1), max_);
    if (latest_.size() == max_ && at == latest_.begin()) return;
    latest_.insert(at, tx_order);
    if (latest_.size() > max_) latest_.erase(latest_.begin());
}

void ReorderTracker::decay() { allowance_ = std::max(allowance_ - allowance_ / 8, initial_); }

std::optional<std::uint64_t> ReorderTracker::loss_threshold() const {
    if (latest_.size() < allowance_) return std::nullopt;
    return latest_[latest_.size() - allowance_];
}

}  // namespace metaroce
