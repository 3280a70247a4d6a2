// Reordering-based loss detection (protocol.md section 8): a packet is lost once at least
// `allowance` packets sent after it are known delivered. Since only the count matters, it is
// enough to remember the transmission order numbers of the latest transmissions delivered:
// every packet sent before the `allowance`-th latest of those is lost.
//
// The allowance adapts to the paths: a first transmission delivered after `d` later ones raises
// it to d + 1 (at most `max_allowance`), and it falls back by an eighth per window of data, not
// below where it started.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace metaroce {

class ReorderTracker {
  public:
    ReorderTracker(std::uint32_t initial_allowance, std::uint32_t max_allowance);

    // A packet whose transmission had order number `tx_order` was delivered; a first
    // transmission overtaken by later ones shows how far the paths reorder.
    void on_delivered(std::uint64_t tx_order, bool first_transmission);
    // Once per window of data.
    void decay();
    std::uint32_t allowance() const { return allowance_; }
    // Packets whose transmissions have a lower order number than this are lost.
    std::optional<std::uint64_t> loss_threshold() const;

  private:
    std::uint32_t initial_;
    std::uint32_t max_;
    std::uint32_t allowance_;
    std::vector<std::uint64_t> latest_;  // ascending, at most max_ entries
};

}  // namespace metaroce
