// Sections 3-4: the receiving end of one path: its map and when it sends the path's ACK.
#pragma once

#include <cstdint>
#include <optional>

#include "softmetaroce/v2/path_ack.h"
#include "softmetaroce/v2/path_map.h"

namespace softmetaroce::v2 {

// Later: the delayed-ACK timer (ack_due) covers it. Now: send an ACK at once. Drop: beyond
// the map, nothing moved and no ACK.
enum class RxAck { Later, Now, Drop };

class PathReceiver {
  public:
    explicit PathReceiver(uint32_t first_seq) : map_(first_seq) {}

    RxAck on_packet(uint32_t seq, uint32_t floor, bool ce, bool ack_req, uint64_t now_us);

    // When the path's ACK is due: the time of the packet that asked for one at once, else the
    // oldest unacknowledged arrival + 200 us; nothing when every arrival has been acknowledged.
    std::optional<uint64_t> ack_due() const;

    // Builds the ACK and resets the ACK state (pending arrivals, CE count).
    PathAck make_ack(uint64_t now_us);

    const PathMap& map() const { return map_; }
    uint64_t received() const { return received_; }      // new arrivals recorded
    uint64_t duplicates() const { return duplicates_; }  // copies of earlier arrivals
    uint64_t beyond() const { return beyond_; }          // dropped beyond the map
    uint64_t acks() const { return acks_; }              // ACKs built

  private:
    PathMap map_;
    uint64_t received_ = 0, duplicates_ = 0, beyond_ = 0, acks_ = 0;
    // ACK state since the previous ACK.
    uint32_t unacked_ = 0;            // new arrivals not yet acknowledged
    uint64_t first_unacked_us_ = 0;   // when the oldest of them arrived
    std::optional<uint64_t> now_at_;  // an ACK is due at once since this time
    uint32_t ce_ = 0;
    std::optional<uint64_t> newest_arrival_us_;
};

}  // namespace softmetaroce::v2
