// The receive window of a connection as a value: the cumulative PSN and the 256-bit bitmap of
// the PSNs after it (protocol.md sections 3.3 and 5). The responder tracks arrivals with it and
// the requester reads ACKs through it, so both sides agree on what a wire bitmap means.
#pragma once

#include <rdma/metaroce_wire.h>

#include <array>
#include <cstdint>

#include "softmetaroce/packet.h"
#include "softmetaroce/psn.h"

namespace metaroce {

// Where a PSN falls relative to the window [cum_psn, cum_psn + 256].
enum class WindowPosition {
    Duplicate,  // before cum_psn, or its bit is already set
    New,        // in the window and not yet received
    Beyond,     // more than 256 after cum_psn: a conforming sender never sends it
};

class SackBitmap {
  public:
    static constexpr unsigned kBits = METAROCE_SACK_BITS;

    explicit SackBitmap(Psn cum_psn = 0) : cum_psn_(cum_psn & kPsnMask) {}

    // Decodes an ACK's cum_psn and bitmap words (bit i: word i / 32, MSB first).
    static SackBitmap from_wire(Psn cum_psn, const SackWords& words);
    SackWords to_wire() const;

    // The first PSN not received; every PSN before it has been.
    Psn cum_psn() const { return cum_psn_; }

    // Bit i says whether cum_psn + 1 + i has been received (i < 256).
    bool bit(unsigned i) const { return (words_[i / 64] >> (i % 64)) & 1; }

    bool received(Psn psn) const;
    WindowPosition locate(Psn psn) const;

    // Records the arrival of a New PSN and moves cum_psn over every received PSN.
    // Returns how far cum_psn advanced (0 when the PSN left or widened a gap).
    std::uint32_t mark(Psn psn);

    // Whether some PSN after cum_psn has arrived (there is a gap at cum_psn).
    bool has_gap() const { return (words_[0] | words_[1] | words_[2] | words_[3]) != 0; }
    unsigned count() const;  // PSNs received after cum_psn

    friend bool operator==(const SackBitmap&, const SackBitmap&) = default;

  private:
    void set_bit(unsigned i) { words_[i / 64] |= std::uint64_t{1} << (i % 64); }
    // Drops the lowest n bits (the bitmap follows cum_psn moving by n).
    void shift_down(unsigned n);

    Psn cum_psn_;
    // Internal layout: bit i is bit i % 64 of words_[i / 64].
    std::array<std::uint64_t, kBits / 64> words_{};
};

}  // namespace metaroce
