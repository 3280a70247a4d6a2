// The ring both receiver maps are built on (sections 3 and 8): `cum`, the first sequence neither
// arrived nor skipped, and one bit for each of the N sequences after it, stored at the slot
// sequence % N so that arrivals in order cost no shifting.
#pragma once

#include <array>
#include <cstdint>

#include "softmetaroce/v2/seq.h"

namespace softmetaroce::v2 {

enum class MapVerdict { New, Duplicate, Beyond };

template <unsigned N>
class RingMap {
    static_assert(N % 64 == 0 && N >= 256 && (N & (N - 1)) == 0);

  public:
    static constexpr unsigned kBits = N;

    explicit RingMap(uint32_t cum) : cum_(cum) {}

    uint32_t cum() const { return cum_; }

    // Below cum: arrived or skipped. cum itself never has.
    bool has(uint32_t seq) const {
        const int32_t d = seq_diff(seq, cum_);
        if (d < 0) return true;
        if (d == 0 || d > static_cast<int32_t>(N)) return false;
        return test(seq % N);
    }

    bool any() const {
        uint64_t acc = 0;
        for (uint64_t w : words_) acc |= w;
        return acc != 0;
    }

    MapVerdict record(uint32_t seq) {
        const int32_t d = seq_diff(seq, cum_);
        if (d < 0) return MapVerdict::Duplicate;
        if (d > static_cast<int32_t>(N)) return MapVerdict::Beyond;
        if (d == 0) {
            step_over();
            return MapVerdict::New;
        }
        const unsigned slot = seq % N;
        if (test(slot)) return MapVerdict::Duplicate;
        set(slot);
        return MapVerdict::New;
    }

    // Everything before `to` is resolved: cum slides up to it, then over what has arrived.
    void skip_to(uint32_t to) {
        const int32_t d = seq_diff(to, cum_);
        if (d <= 0) return;
        if (d > static_cast<int32_t>(N)) {
            // Every sequence the map could name is below `to`.
            words_.fill(0);
            cum_ = to;
            return;
        }
        bool arrived = false;
        for (int32_t i = 0; i < d; ++i) arrived = pop_next();
        if (arrived) step_over();
    }

    // The 256 bits after cum: bit i (word i / 64, bit i % 64) is cum + 1 + i.
    std::array<uint64_t, 4> window256() const {
        constexpr unsigned kWords = N / 64;
        const unsigned r = (cum_ + 1) % N;
        const unsigned w = r / 64, b = r % 64;
        std::array<uint64_t, 4> out{};
        for (unsigned k = 0; k < 4; ++k) {
            const uint64_t lo = words_[(w + k) % kWords];
            const uint64_t hi = words_[(w + k + 1) % kWords];
            out[k] = b == 0 ? lo : (lo >> b) | (hi << (64 - b));
        }
        return out;
    }

  private:
    bool test(unsigned slot) const { return (words_[slot / 64] >> (slot % 64)) & 1; }
    void set(unsigned slot) { words_[slot / 64] |= uint64_t{1} << (slot % 64); }

    // cum is resolved: move to the next sequence. Its slot held whether it arrived and from now
    // on stands for cum + N, which cannot have arrived yet, so it is cleared.
    bool pop_next() {
        ++cum_;
        const unsigned slot = cum_ % N;
        const bool arrived = test(slot);
        words_[slot / 64] &= ~(uint64_t{1} << (slot % 64));
        return arrived;
    }

    // cum has just arrived: step over it and every sequence after it that has arrived.
    void step_over() {
        while (pop_next()) {
        }
    }

    uint32_t cum_;
    std::array<uint64_t, N / 64> words_{};
};

}  // namespace softmetaroce::v2
