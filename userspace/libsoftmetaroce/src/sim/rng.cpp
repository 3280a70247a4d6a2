#include "softmetaroce/sim/rng.h"

#include <bit>

namespace metaroce::sim {
namespace {

std::uint64_t splitmix64(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

}  // namespace

SimRng::SimRng(std::uint64_t seed) {
    for (std::uint64_t& word : state_) word = splitmix64(seed);
}

std::uint64_t SimRng::next() {
    const std::uint64_t result = std::rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = std::rotl(state_[3], 45);
    return result;
}

double SimRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

std::uint64_t SimRng::below(std::uint64_t n) {
    if (n == 0) return 0;
    // Rejection sampling keeps the result exactly uniform.
    const std::uint64_t limit = ~std::uint64_t{0} - (~std::uint64_t{0} % n);
    std::uint64_t v = next();
    while (v >= limit) v = next();
    return v % n;
}

}  // namespace metaroce::sim
