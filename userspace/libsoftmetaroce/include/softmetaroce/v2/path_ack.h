// Section 4: what an ACK says about one path.
#pragma once

#include <array>
#include <cstdint>

namespace softmetaroce::v2 {

struct PathAck {
    uint32_t cum = 0;
    std::array<uint64_t, 4>
        bits{};                 // bit i (word i / 64, bit i % 64): sequence cum + 1 + i arrived
    uint32_t ack_delay_us = 0;  // newest arrival to this ACK (saturates at 65535, as on the wire)
    uint32_t ce = 0;            // CE-marked arrivals since the previous ACK (saturates at 65535)

    bool bit(unsigned i) const { return (bits[i / 64] >> (i % 64)) & 1; }
    void set_bit(unsigned i) { bits[i / 64] |= uint64_t{1} << (i % 64); }

    friend bool operator==(const PathAck&, const PathAck&) = default;
};

}  // namespace softmetaroce::v2
