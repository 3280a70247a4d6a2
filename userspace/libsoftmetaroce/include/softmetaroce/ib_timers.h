// The verbs encodings of the two requester timers (InfiniBand spec, as used by ibverbs).
#pragma once

#include <cstdint>
#include <optional>

#include "softmetaroce/time.h"

namespace metaroce {

// RNR NAK timer (the NAK's nak_arg, the QP's min_rnr_timer): code 0..31 to microseconds.
// Code 0 is the longest, 655.36 ms; 1 is 10 us. Codes above 31 are clamped to 31.
TimeUs rnr_timer_us(std::uint8_t code);

// Local ACK timeout (the QP's `timeout` attribute): 4.096 us * 2^code; code 0 means infinite
// (no timeout), returned as nullopt. Rounded up to whole microseconds; codes above 31 clamp.
std::optional<TimeUs> transport_timeout_us(std::uint8_t code);

}  // namespace metaroce
