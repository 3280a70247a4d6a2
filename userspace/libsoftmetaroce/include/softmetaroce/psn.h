// 24-bit packet sequence numbers and their serial-number arithmetic (protocol.md section 5).
#pragma once

#include <rdma/metaroce_wire.h>

#include <cstdint>

namespace metaroce {

using Psn = std::uint32_t;

inline constexpr Psn kPsnMask = METAROCE_PSN_MASK;

// a - b as a signed 24-bit serial difference in [-2^23, 2^23); the same result as the
// header's metaroce_psn_diff() (C++20 defines both the narrowing cast and the shift).
constexpr std::int32_t psn_diff(Psn a, Psn b) {
    return static_cast<std::int32_t>((a - b) << 8) >> 8;
}

// p + n modulo 2^24 (n may be negative).
constexpr Psn psn_add(Psn p, std::int64_t n) {
    return static_cast<Psn>(static_cast<std::uint64_t>(p) + static_cast<std::uint64_t>(n)) &
           kPsnMask;
}

constexpr Psn psn_next(Psn p) { return psn_add(p, 1); }

// Serial order: a comes strictly before b.
constexpr bool psn_before(Psn a, Psn b) { return psn_diff(a, b) < 0; }

// Whether p lies in [first, first + count).
constexpr bool psn_in_range(Psn p, Psn first, std::uint32_t count) {
    const std::int32_t d = psn_diff(p, first);
    return d >= 0 && static_cast<std::uint32_t>(d) < count;
}

}  // namespace metaroce
