// Protocol v2's constants and serial arithmetic (docs/protocol-v2.md). Path sequences and stream
// SSNs are 32-bit and compared by their signed 32-bit difference.
#pragma once

#include <cstdint>

namespace softmetaroce::v2 {

constexpr unsigned kSackBits = 256;        // section 3: a path map's width
constexpr unsigned kStreamMapBits = 4096;  // section 8: a stream map's width

constexpr uint32_t kAckEvery = 16;           // section 4: MRC_ACK_EVERY
constexpr uint64_t kDelayedAckUs = 200;      // section 4: MRC_DELAYED_ACK_US
constexpr uint32_t kMaxFloorDistance = 254;  // section 5.1: newest sequence - floor
constexpr uint32_t kLossGap = 3;             // section 5.2: MRC_LOSS_GAP
constexpr uint64_t kMinLossDelayUs = 1000;   // section 5.2: the time rule's floor
constexpr uint32_t kInitialPtoUs = 20000;    // section 5.3: PTO before the first RTT sample
constexpr uint32_t kMinPtoVarUs = 1000;      // section 5.3: max(4 * RTTVAR, 1 ms)
constexpr uint32_t kPtoAckDelayUs = 200;     // section 5.3: the + 200 us
constexpr uint32_t kMaxPtoUs = 2000000;      // section 5.3: at most 2 s
constexpr uint32_t kFailPtos = 3;            // section 5.3: MRC_FAIL_PTOS
constexpr uint64_t kFirstBackoffUs = 2000;   // section 5.3: a failed path's first backoff
constexpr uint64_t kMaxBackoffUs = 500000;   // section 5.3: ... doubling to 500 ms
constexpr uint32_t kRepathWindows = 4;       // section 5.3: MRC_REPATH_WINDOWS
constexpr uint32_t kCwndOne = 256;           // section 6: one packet in the window's fixed point
constexpr uint32_t kCwndMin = 1 * kCwndOne;
constexpr uint32_t kCwndMax = 255 * kCwndOne;
constexpr uint32_t kAlphaOne = 1024;      // section 6: alpha's fixed point (our choice)
constexpr uint32_t kAlphaGainShift = 4;   // section 6: gain 1/16
constexpr uint32_t kStreamWindow = 4095;  // section 8: a segment out is < 4095 past una

// The signed serial distance a - b.
constexpr int32_t seq_diff(uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b); }
constexpr bool seq_before(uint32_t a, uint32_t b) { return seq_diff(a, b) < 0; }
constexpr bool seq_after(uint32_t a, uint32_t b) { return seq_diff(a, b) > 0; }

}  // namespace softmetaroce::v2
