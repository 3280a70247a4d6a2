// One valid packet of every kind and shape: the fuzzer's seed corpus and the starting points
// of the replay driver's mutations.
#pragma once

#include <cstdint>
#include <vector>

#include "softmetaroce/packet.h"

namespace metaroce::fuzz {

inline std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
    std::vector<std::uint8_t> bytes(n);
    for (std::size_t i = 0; i < n; ++i) bytes[i] = static_cast<std::uint8_t>(seed + i * 7);
    return bytes;
}

// All valid at MTU 256. Multi-packet samples use 256-byte packets, so at larger MTUs some
// break the length rules, which is useful to the fuzzer too.
inline std::vector<Packet> sample_packets() {
    constexpr std::uint32_t kMtu = 256;
    std::vector<Packet> out;
    const auto bth = [](Opcode op, std::uint8_t flags, Psn psn) {
        Bth b;
        b.opcode = op;
        b.flags = flags;
        b.dqpn = 0x000123;
        b.sqpn = 0x000456;
        b.psn = psn;
        b.path = 3;
        b.ts = 0xdeadbeef;
        return b;
    };
    using namespace flag;
    // SEND: single packet with immediate, first/middle/last of a multi-packet message, empty,
    // with invalidate.
    out.push_back({bth(Opcode::Send, kFirst | kLast | kImm | kSolicited | kAckReq, 1),
                   Deth{0, 0, 5, 100, 0xcafe}, pattern(100, 1)});
    out.push_back({bth(Opcode::Send, kFirst, 2), Deth{0, 0, 6, 600, 0}, pattern(kMtu, 2)});
    out.push_back({bth(Opcode::Send, 0, 3), Deth{kMtu, 0, 6, 600, 0}, pattern(kMtu, 3)});
    out.push_back({bth(Opcode::Send, kLast | kAckReq | kRetx, 4), Deth{2 * kMtu, 0, 6, 600, 0},
                   pattern(88, 4)});
    out.push_back({bth(Opcode::Send, kFirst | kLast, 5), Deth{0, 0, 7, 0, 0}, {}});
    // SEND with invalidate: the key in the immediate field of the last packet, with INV.
    out.push_back({bth(Opcode::Send, kFirst | kLast | kInv | kAckReq, 15),
                   Deth{0, 0, 8, 40, 0x00abcd01}, pattern(40, 12)});
    out.push_back({bth(Opcode::Send, kLast | kInv | kAckReq | kRetx | kSolicited, 16),
                   Deth{kMtu, 0, 9, kMtu + 20, 0x00abce02}, pattern(20, 13)});
    // WRITE: single, first/middle/last, with immediate and solicited.
    out.push_back({bth(Opcode::Write, kFirst | kLast | kAckReq, 6), Deth{0x10000, 0x77, 0, 10, 0},
                   pattern(10, 5)});
    out.push_back(
        {bth(Opcode::Write, kFirst, 7), Deth{0x20000, 0x77, 1, 700, 0}, pattern(kMtu, 6)});
    out.push_back({bth(Opcode::Write, 0, 8), Deth{0x20100, 0x77, 1, 700, 0}, pattern(kMtu, 7)});
    out.push_back({bth(Opcode::Write, kLast | kImm | kSolicited, 9),
                   Deth{0x20200, 0x77, 2, 700, 0x1234}, pattern(700 - 2 * kMtu, 8)});
    // READ_REQ: first request and a re-read.
    out.push_back({bth(Opcode::ReadRequest, kAckReq, 10), ReadReq{0x30000, 0x88, 1000, 0, 3}, {}});
    out.push_back({bth(Opcode::ReadRequest, kAckReq | kRetx, 12),
                   ReadReq{0x30000 + 2 * kMtu, 0x88, 1000 - 2 * kMtu, 2 * kMtu, 3},
                   {}});
    // READ_RESP: first, last, a zero-length READ's only response.
    out.push_back(
        {bth(Opcode::ReadResponse, kFirst, 10), Deth{0, 0, 3, 1000, 0}, pattern(kMtu, 9)});
    out.push_back({bth(Opcode::ReadResponse, kLast | kRetx, 13), Deth{3 * kMtu, 0, 3, 1000, 0},
                   pattern(1000 - 3 * kMtu, 10)});
    out.push_back({bth(Opcode::ReadResponse, kFirst | kLast, 14), Deth{0, 0, 4, 0, 0}, {}});
    // UD_SEND.
    out.push_back({bth(Opcode::UdSend, kFirst | kLast | kImm, 0), Deth{0, 0x11111111, 0, 64, 9},
                   pattern(64, 11)});
    // Atomics: a compare-and-swap, a fetch-and-add retransmitted, and a response.
    out.push_back({bth(Opcode::AtomicCmpSwp, kAckReq, 15),
                   AtomicReq{0x40008, 0x99, 5, 0x1111222233334444ull, 7},
                   {}});
    out.push_back(
        {bth(Opcode::AtomicFetchAdd, kAckReq | kRetx, 16), AtomicReq{0x40010, 0x99, 5, 1, 0}, {}});
    out.push_back(
        {bth(Opcode::AtomicResponse, kFirst | kLast, 15), Deth{0, 0, 5, 8, 0}, pattern(8, 12)});
    // ACK, and NAKs of every syndrome.
    Ack ack;
    ack.cum_psn = 20;
    ack.ce_count = 3;
    ack.fair_share = 512;
    ack.echo_path = 3;
    ack.ts_echo = 0xdeadbeef;
    ack.msn = 4;
    ack.sack = {0x80000001u, 0, 0x12345678u, 0, 0, 0, 0, 1};
    out.push_back({bth(Opcode::Ack, 0, 20), ack, {}});
    for (const auto& [syndrome, arg] : {std::pair{Syndrome::RnrNak, std::uint8_t{14}},
                                        std::pair{Syndrome::InvalidRequest, std::uint8_t{0}},
                                        std::pair{Syndrome::RemoteAccess, std::uint8_t{0}},
                                        std::pair{Syndrome::RemoteOperational, std::uint8_t{0}},
                                        std::pair{Syndrome::Version, std::uint8_t{1}}}) {
        Ack nak = ack;
        nak.syndrome = syndrome;
        nak.nak_psn = 22;
        nak.nak_arg = arg;
        out.push_back({bth(Opcode::Ack, 0, 20), nak, {}});
    }
    return out;
}

}  // namespace metaroce::fuzz
