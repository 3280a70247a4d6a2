#include "softmetaroce/ib_timers.h"

#include <array>

namespace metaroce {

TimeUs rnr_timer_us(std::uint8_t code) {
    // In units of 10 us, indexed by code (IBA table "Encoding for RNR NAK Timer Field").
    static constexpr std::array<std::uint32_t, 32> kTensOfMicros = {
        65536, 1,    2,    3,    4,    6,     8,     12,    16,    24,   32,
        48,    64,   96,   128,  192,  256,   384,   512,   768,   1024, 1536,
        2048,  3072, 4096, 6144, 8192, 12288, 16384, 24576, 32768, 49152};
    const std::uint8_t clamped = code > 31 ? 31 : code;
    return TimeUs{kTensOfMicros[clamped]} * 10;
}

std::optional<TimeUs> transport_timeout_us(std::uint8_t code) {
    if (code == 0) return std::nullopt;
    const std::uint8_t clamped = code > 31 ? 31 : code;
    const std::uint64_t nanos = std::uint64_t{4096} << clamped;
    return (nanos + 999) / 1000;
}

}  // namespace metaroce
