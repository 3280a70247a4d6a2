// Section 8: the sending end of one stream. A segment is kept from its first transmission until
// a transmission of it is acknowledged on any path; lost transmissions queue it again, and the
// queue goes before new segments, in the order of the losses, each on the path that lost it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <utility>

#include "softmetaroce/v2/seq.h"

namespace softmetaroce::v2 {

class StreamSender {
  public:
    explicit StreamSender(uint32_t first_ssn) : una_(first_ssn), next_(first_ssn) {}

    // A new segment would stay under 4095 past the oldest undelivered one.
    bool can_open() const { return seq_diff(next_, una_) < static_cast<int32_t>(kStreamWindow); }
    uint32_t open();  // a new segment; returns its SSN

    // Pops the oldest queued resend: (ssn, the path that lost it, or -1 as given to on_lost).
    std::optional<std::pair<uint32_t, int>> next_resend();
    bool resend_pending() const { return head_ != kNone; }

    void on_sent(uint32_t ssn);   // a transmission of ssn left
    bool on_acked(uint32_t ssn);  // true if this delivered it now
    void on_lost(uint32_t ssn, int path);

    bool delivered(uint32_t ssn) const;
    uint32_t una() const { return una_; }  // oldest undelivered (next SSN when none is)
    uint32_t next_ssn() const { return next_; }
    uint64_t delivered() const { return delivered_; }
    uint64_t resent() const { return resent_; }  // transmissions of a segment sent before

  private:
    static constexpr uint16_t kNone = 0xffff;
    struct Segment {
        uint32_t ssn = 0;
        int path = -1;
        uint16_t prev = kNone, next = kNone;  // the resend queue, linked through the ring
        bool delivered = false, queued = false, sent = false;
    };

    bool in_window(uint32_t ssn) const { return !seq_before(ssn, una_) && seq_before(ssn, next_); }
    static uint16_t slot(uint32_t ssn) { return static_cast<uint16_t>(ssn % kStreamMapBits); }
    void unlink(uint16_t i);

    std::array<Segment, kStreamMapBits> ring_{};
    uint32_t una_, next_;
    uint16_t head_ = kNone, tail_ = kNone;
    uint64_t delivered_ = 0, resent_ = 0;
};

}  // namespace softmetaroce::v2
