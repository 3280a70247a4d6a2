// Deterministic test data shared by metaroce-peer, metaroce-interop and metaroce-compliance:
// byte `offset` of stream `seed` is the same on every host, so each side of a transfer checks
// what the other one wrote without exchanging the data.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace metaroce::tools {

// Byte `offset` of the pattern stream `seed`.
std::uint8_t pattern_byte(std::uint64_t seed, std::uint64_t offset);

// Fills `out` with bytes [offset, offset + out.size()) of stream `seed`.
void fill_pattern(std::span<std::uint8_t> out, std::uint64_t seed, std::uint64_t offset = 0);
std::vector<std::uint8_t> pattern(std::size_t len, std::uint64_t seed, std::uint64_t offset = 0);

// Index of the first byte of `data` that differs from the pattern, or -1 if all match.
std::int64_t first_mismatch(std::span<const std::uint8_t> data, std::uint64_t seed,
                            std::uint64_t offset = 0);

}  // namespace metaroce::tools
