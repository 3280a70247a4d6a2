// Reordering-based loss detection (protocol.md section 8): a packet is lost once a
// transmission at least `allowance` transmissions after it is known delivered. Only the latest
// transmission delivered matters, so that is all this remembers: every packet sent `allowance`
// or more transmissions before it is lost. (Packets between the two may be lost too: after a
// burst of losses the earliest are called at once, not only once `allowance` later ones got
// through.)
//
// The allowance adapts to the paths: a first transmission delivered `d` transmissions behind
// the latest one delivered before its ACK raises it to d + 1 (at most `max_allowance`), and it
// falls back by an eighth per window of data, not below where it started.
#pragma once

#include <cstdint>
#include <optional>

namespace metaroce {

class ReorderTracker {
  public:
    ReorderTracker(std::uint32_t initial_allowance, std::uint32_t max_allowance);

    // An ACK is about to be applied: its deliveries measure reordering against the latest
    // transmission known delivered before it, not against each other.
    void begin_ack() { latest_before_ack_ = latest_; }
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
    std::optional<std::uint64_t> latest_;  // the latest transmission delivered
    std::optional<std::uint64_t> latest_before_ack_;
};

}  // namespace metaroce
