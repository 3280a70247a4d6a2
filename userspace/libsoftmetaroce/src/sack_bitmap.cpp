#include "softmetaroce/sack_bitmap.h"

#include <bit>

namespace metaroce {

SackBitmap SackBitmap::from_wire(Psn cum_psn, const SackWords& words) {
    SackBitmap bitmap(cum_psn);
    for (unsigned i = 0; i < kBits; ++i) {
        if ((words[i / 32] >> (31 - i % 32)) & 1) bitmap.set_bit(i);
    }
    return bitmap;
}

SackWords SackBitmap::to_wire() const {
    SackWords words{};
    for (unsigned i = 0; i < kBits; ++i) {
        if (bit(i)) words[i / 32] |= std::uint32_t{1} << (31 - i % 32);
    }
    return words;
}

bool SackBitmap::received(Psn psn) const {
    const std::int32_t d = psn_diff(psn, cum_psn_);
    if (d < 0) return true;
    if (d == 0 || d > static_cast<std::int32_t>(kBits)) return false;
    return bit(static_cast<unsigned>(d - 1));
}

WindowPosition SackBitmap::locate(Psn psn) const {
    const std::int32_t d = psn_diff(psn, cum_psn_);
    if (d < 0) return WindowPosition::Duplicate;
    if (d > static_cast<std::int32_t>(kBits)) return WindowPosition::Beyond;
    if (d > 0 && bit(static_cast<unsigned>(d - 1))) return WindowPosition::Duplicate;
    return WindowPosition::New;
}

std::uint32_t SackBitmap::mark(Psn psn) {
    const std::int32_t d = psn_diff(psn, cum_psn_);
    if (d < 0 || d > static_cast<std::int32_t>(kBits)) return 0;
    if (d > 0) {
        set_bit(static_cast<unsigned>(d - 1));
        return 0;
    }
    // psn == cum_psn: advance over it and over the run of received PSNs that follows.
    unsigned run = 0;
    for (const std::uint64_t w : words_) {
        const int ones = std::countr_one(w);
        run += static_cast<unsigned>(ones);
        if (ones != 64) break;
    }
    const unsigned advance = run + 1;
    shift_down(advance);
    cum_psn_ = psn_add(cum_psn_, advance);
    return advance;
}

unsigned SackBitmap::count() const {
    unsigned n = 0;
    for (const std::uint64_t w : words_) n += static_cast<unsigned>(std::popcount(w));
    return n;
}

void SackBitmap::shift_down(unsigned n) {
    if (n >= kBits) {
        words_ = {};
        return;
    }
    const unsigned word_shift = n / 64;
    const unsigned bit_shift = n % 64;
    constexpr unsigned kWords = kBits / 64;
    for (unsigned i = 0; i < kWords; ++i) {
        const unsigned src = i + word_shift;
        std::uint64_t v = 0;
        if (src < kWords) {
            v = words_[src] >> bit_shift;
            if (bit_shift != 0 && src + 1 < kWords) v |= words_[src + 1] << (64 - bit_shift);
        }
        words_[i] = v;
    }
}

}  // namespace metaroce
