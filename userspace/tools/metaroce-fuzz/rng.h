// The fuzzers' one source of randomness: a seeded xoshiro256** generator, so that a run is
// reproduced by its seed alone (the same seed and options give the same choices; what the
// kernel does meanwhile, and hence what the fuzzer learns, may still differ run to run).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

namespace metaroce::fuzz {

class Rng {
  public:
    explicit Rng(std::uint64_t seed) {
        for (auto& word : s_) word = splitmix(seed);
    }

    std::uint64_t next() {
        const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
        const std::uint64_t t = s_[1] << 17;
        s_[2] ^= s_[0];
        s_[3] ^= s_[1];
        s_[1] ^= s_[2];
        s_[0] ^= s_[3];
        s_[2] ^= t;
        s_[3] = rotl(s_[3], 45);
        return result;
    }
    std::uint32_t u32() { return static_cast<std::uint32_t>(next() >> 32); }
    // Uniform in [0, n); n > 0.
    std::uint64_t below(std::uint64_t n) { return next() % n; }
    // Uniform in [lo, hi].
    std::int64_t range(std::int64_t lo, std::int64_t hi) {
        return lo + static_cast<std::int64_t>(below(static_cast<std::uint64_t>(hi - lo) + 1));
    }
    bool chance(unsigned percent) { return below(100) < percent; }
    template <typename T>
    T pick(std::initializer_list<T> items) {
        return *(items.begin() + below(items.size()));
    }
    template <typename T>
    const T& pick(const std::vector<T>& items) {
        return items[below(items.size())];
    }
    void fill(std::uint8_t* p, std::size_t n) {
        for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<std::uint8_t>(next() >> 56);
    }

  private:
    static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
    static std::uint64_t splitmix(std::uint64_t& x) {
        std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    std::uint64_t s_[4];
};

}  // namespace metaroce::fuzz
