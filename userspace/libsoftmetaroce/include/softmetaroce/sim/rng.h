// The simulator's random numbers: xoshiro256** seeded by splitmix64. Self-contained (the
// standard distributions differ between standard libraries), so a seed means the same run
// with any compiler.
#pragma once

#include <array>
#include <cstdint>

namespace metaroce::sim {

class SimRng {
  public:
    explicit SimRng(std::uint64_t seed);

    std::uint64_t next();
    // Uniform in [0, 1).
    double uniform();
    // True with probability p.
    bool chance(double p) { return p > 0 && uniform() < p; }
    // Uniform in [0, n); 0 when n is 0.
    std::uint64_t below(std::uint64_t n);

  private:
    std::array<std::uint64_t, 4> state_{};
};

}  // namespace metaroce::sim
