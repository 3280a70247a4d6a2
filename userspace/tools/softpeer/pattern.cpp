#include "pattern.h"

namespace metaroce::tools {
namespace {

std::uint64_t mix(std::uint64_t x) {
    // splitmix64's finalizer
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

}  // namespace

std::uint8_t pattern_byte(std::uint64_t seed, std::uint64_t offset) {
    const std::uint64_t word = mix((seed * 0x100000001b3ull) ^ (offset / 8));
    return static_cast<std::uint8_t>(word >> (8 * (offset % 8)));
}

void fill_pattern(std::span<std::uint8_t> out, std::uint64_t seed, std::uint64_t offset) {
    for (std::size_t i = 0; i < out.size(); ++i) out[i] = pattern_byte(seed, offset + i);
}

std::vector<std::uint8_t> pattern(std::size_t len, std::uint64_t seed, std::uint64_t offset) {
    std::vector<std::uint8_t> out(len);
    fill_pattern(out, seed, offset);
    return out;
}

std::int64_t first_mismatch(std::span<const std::uint8_t> data, std::uint64_t seed,
                            std::uint64_t offset) {
    for (std::size_t i = 0; i < data.size(); ++i) {
        if (data[i] != pattern_byte(seed, offset + i)) return static_cast<std::int64_t>(i);
    }
    return -1;
}

}  // namespace metaroce::tools
