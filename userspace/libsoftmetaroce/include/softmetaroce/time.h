// Model time. Every component takes the current time as an argument (no real clock), so
// runs are reproducible: the caller (a test, the simulator, a soft endpoint) owns time.
#pragma once

#include <cstdint>
#include <limits>

namespace metaroce {

// Microseconds since an arbitrary origin chosen by the caller.
using TimeUs = std::uint64_t;

inline constexpr TimeUs kNever = std::numeric_limits<TimeUs>::max();

}  // namespace metaroce
