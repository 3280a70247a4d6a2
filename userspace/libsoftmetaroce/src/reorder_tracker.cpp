#include "softmetaroce/reorder_tracker.h"

#include <algorithm>

namespace metaroce {

ReorderTracker::ReorderTracker(std::uint32_t initial_allowance, std::uint32_t max_allowance)
    : initial_(std::max<std::uint32_t>(1, initial_allowance)),
      max_(std::max(initial_, max_allowance)),
      allowance_(initial_) {}

void ReorderTracker::on_delivered(std::uint64_t tx_order, bool first_transmission) {
    if (first_transmission && latest_before_ack_ && *latest_before_ack_ > tx_order) {
        const std::uint64_t overtaken = *latest_before_ack_ - tx_order;
        allowance_ = static_cast<std::uint32_t>(
            std::min<std::uint64_t>(std::max<std::uint64_t>(allowance_, overtaken + 1), max_));
    }
    if (!latest_ || tx_order > *latest_) latest_ = tx_order;
}

void ReorderTracker::decay() { allowance_ = std::max(allowance_ - allowance_ / 8, initial_); }

std::optional<std::uint64_t> ReorderTracker::loss_threshold() const {
    if (!latest_ || *latest_ + 1 < allowance_) return std::nullopt;
    return *latest_ + 1 - allowance_;
}

}  // namespace metaroce
