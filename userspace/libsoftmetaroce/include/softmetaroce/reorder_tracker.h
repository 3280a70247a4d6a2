// Reordering-based loss detection (protocol.md section 8): a packet is lost once at least
// `reorder_allowance` packets sent after it are known delivered. Since only the count matters,
// it is enough to remember the transmission order numbers of the `reorder_allowance` latest
// transmissions delivered: every packet sent before the oldest of those is lost.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace metaroce {

class ReorderTracker {
  public:
    explicit ReorderTracker(std::uint32_t reorder_allowance);

    // A packet whose transmission had order number `tx_order` was delivered.
    void on_delivered(std::uint64_t tx_order);
    // Packets whose transmissions have a lower order number than this are lost.
    std::optional<std::uint64_t> loss_threshold() const;

  private:
    std::uint32_t allowance_;
    std::vector<std::uint64_t> latest_;  // ascending, at most allowance_ entries
};

}  // namespace metaroce
