// Section 7: every opcode's layout against bytes written out by hand, each refusal, and random
// and mutated bytes (whatever parses builds back into the same header bytes).
#include "softmetaroce/v2/wire.h"

#include <gtest/gtest.h>

#include <array>
#include <limits>
#include <vector>

#include "softmetaroce/sim/rng.h"
#include "softmetaroce/v2/stream_segment.h"

namespace softmetaroce::v2 {
namespace {

using Bytes = std::vector<uint8_t>;
using metaroce::sim::SimRng;

constexpr std::array<uint8_t, 14> kOpcodes = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07,
                                              0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x10};

uint8_t op(Op o) { return static_cast<uint8_t>(o); }

Bytes cat(Bytes a, const Bytes& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// Bytes 0-23 of a segment's transport header, by hand: version 2 with flags, the opcode, path
// 42, reserved, connection 0x11223344, sequence 0x55667788, floor delta 254, stream 0x0102,
// SSN 0xa1a2a3a4, MSN 0xb1b2b3b4.
Bytes seg_prefix(uint8_t byte0, uint8_t opcode) {
    return {byte0, opcode, 0x2a, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
            0x00,  0xfe,   0x01, 0x02, 0xa1, 0xa2, 0xa3, 0xa4, 0xb1, 0xb2, 0xb3, 0xb4};
}

WirePacket seg_packet(uint8_t flags, uint8_t opcode, uint32_t offset, uint32_t len) {
    WirePacket p;
    p.flags = flags;
    p.opcode = opcode;
    p.path = 42;
    p.conn = 0x11223344;
    p.seq = 0x55667788;
    p.floor_delta = 254;
    p.stream = 0x0102;
    p.ssn = 0xa1a2a3a4;
    p.msn = 0xb1b2b3b4;
    p.offset = offset;
    p.msg_len = len;
    return p;
}

// The packet builds into exactly `header`, and `header` plus `payload` bytes parses into it.
void expect_layout(WirePacket p, const Bytes& header, uint32_t payload) {
    EXPECT_EQ(header_length(p.opcode), header.size());
    const auto built = build_headers(p);
    ASSERT_TRUE(built.has_value());
    EXPECT_EQ(*built, header);
    Bytes wire = header;
    wire.resize(header.size() + payload, 0x5a);
    WirePacket got;
    ASSERT_EQ(parse(wire, got), WireError::Ok);
    p.payload_offset = static_cast<uint32_t>(header.size());
    p.payload_len = payload;
    EXPECT_EQ(got, p);
}

TEST(Wire, HeaderLengthsFollowTheTable) {
    const std::array<uint32_t, 14> lens = {32, 36, 36, 48, 52, 48, 32, 64, 64, 32, 40, 40, 44, 80};
    for (size_t i = 0; i < kOpcodes.size(); ++i) EXPECT_EQ(header_length(kOpcodes[i]), lens[i]);
    for (unsigned o = 0; o < 256; ++o) {
        const bool known = (o >= 0x01 && o <= 0x0d) || o == 0x10;
        if (!known) {
            EXPECT_EQ(header_length(static_cast<uint8_t>(o)), 0u) << o;
            WirePacket p;
            p.opcode = static_cast<uint8_t>(o);
            EXPECT_FALSE(build_headers(p).has_value()) << o;
        }
    }
}

TEST(Wire, SendLayout) {
    // ACK_REQ | SOLICITED; offset 4 of 10 bytes, a last segment of 6.
    expect_layout(seg_packet(0x5, op(Op::Send), 4, 10),
                  cat(seg_prefix(0x25, 0x01), {0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x0a}), 6);
}

TEST(Wire, SendImmAndSendInvLayout) {
    WirePacket p = seg_packet(0x0, op(Op::SendImm), 0, 1);
    p.imm = 0xdeadbeef;
    expect_layout(p,
                  cat(seg_prefix(0x20, 0x02),
                      {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xde, 0xad, 0xbe, 0xef}),
                  1);
    p.opcode = op(Op::SendInv);
    p.imm = 0x0000abcd;  // the key to invalidate
    expect_layout(p,
                  cat(seg_prefix(0x20, 0x03),
                      {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0xab, 0xcd}),
                  1);
}

TEST(Wire, WriteAndWriteImmLayout) {
    WirePacket p = seg_packet(0x2, op(Op::Write), 0, 3);  // RETX
    p.va = 0x0102030405060708;
    p.rkey = 0xcafef00d;
    const Bytes reth = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                        0xca, 0xfe, 0xf0, 0x0d, 0x00, 0x00, 0x00, 0x00};
    const Bytes off_len = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03};
    expect_layout(p, cat(cat(seg_prefix(0x22, 0x04), off_len), reth), 3);
    p.opcode = op(Op::WriteImm);
    p.imm = 0x01020304;
    expect_layout(p, cat(cat(cat(seg_prefix(0x22, 0x05), off_len), reth), {1, 2, 3, 4}), 3);
}

TEST(Wire, ReadReqLayout) {
    WirePacket p = seg_packet(0x1, op(Op::ReadReq), 0, 0x10000);  // bytes to read
    p.va = 0xffffffffffff0000;  // the range ends exactly at 2^64: it does not wrap
    p.rkey = 0x00000007;
    expect_layout(p, cat(seg_prefix(0x21, 0x06), {0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00,
                                                  0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x00, 0x00,
                                                  0x00, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00, 0x00}),
                  0);
}

TEST(Wire, ReadRespLayout) {
    expect_layout(seg_packet(0x2, op(Op::ReadResp), 0x1000, 0x1800),
                  cat(seg_prefix(0x22, 0x07), {0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x18, 0x00}),
                  0x800);
}

TEST(Wire, AtomicLayout) {
    for (const Op o : {Op::CmpSwp, Op::FetchAdd}) {
        WirePacket p = seg_packet(0x0, op(o), 0, 8);
        p.va = 0x0000000000001000;
        p.rkey = 0x89abcdef;
        p.swap_add = 0x1111111122222222;
        p.compare = 0x3333333344444444;
        expect_layout(
            p,
            cat(seg_prefix(0x20, op(o)),
                {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08,  // off, len
                 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x89, 0xab, 0xcd, 0xef,  //
                 0x00, 0x00, 0x00, 0x00, 0x11, 0x11, 0x11, 0x11, 0x22, 0x22, 0x22, 0x22,  //
                 0x33, 0x33, 0x33, 0x33, 0x44, 0x44, 0x44, 0x44}),
            0);
    }
}

TEST(Wire, AtomicRespLayout) {
    expect_layout(seg_packet(0x0, op(Op::AtomicResp), 0, 8),
                  cat(seg_prefix(0x20, 0x0a), {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x08}), 8);
}

TEST(Wire, NakLayout) {
    WirePacket p = seg_packet(0x0, op(Op::Nak), 0, 0);
    p.syndrome = kSyndromeRnr;
    p.rnr_timer = 0x0e;
    p.nak_ssn = 0x00000064;
    expect_layout(p,
                  cat(seg_prefix(0x20, 0x0b), {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
                                               0x0e, 0x00, 0x00, 0x00, 0x00, 0x00, 0x64}),
                  0);
}

TEST(Wire, DatagramLayout) {
    WirePacket p;
    p.flags = kFlagSolicited;
    p.opcode = kOpUdSend;
    p.path = 3;
    p.conn = 0x00000011;
    p.msg_len = 5;  // its payload's
    p.qkey = 0x80010000;
    p.src_qpn = 0x00000123;
    const Bytes header = {0x24, 0x0c, 0x03, 0x00, 0x00, 0x00, 0x00, 0x11, 0x00, 0x00, 0x00,
                          0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                          0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x05};
    const Bytes deth = {0x80, 0x01, 0x00, 0x00, 0x00, 0x00, 0x01, 0x23};
    expect_layout(p, cat(header, deth), 5);
    p.opcode = kOpUdSendImm;
    p.imm = 0x0badf00d;
    Bytes header_imm = header;
    header_imm[1] = 0x0d;
    expect_layout(p, cat(cat(header_imm, deth), {0x0b, 0xad, 0xf0, 0x0d}), 5);
}

WirePacket ack_packet() {
    WirePacket p;
    p.opcode = kOpAck;
    p.path = 7;
    p.conn = 0x00abcdef;
    p.ack_cum = 0x00000100;
    p.ack_bits = {(uint64_t{1} << 63) | (1u << 9) | 1u, 1u, 0, uint64_t{1} << 63};
    p.ack_delay_us = 0x0123;
    p.ack_ce = 0x0045;
    p.share = 0x8000;
    p.capacity_mbps = 100000;
    return p;
}

const Bytes kAckBytes = {
    0x20, 0x10, 0x07, 0x00, 0x00, 0xab, 0xcd, 0xef,  // version 2, ACK, path 7, connection
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // sequence, floor, stream: 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // SSN, MSN: 0
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // offset, length: 0
    0x00, 0x00, 0x01, 0x00,                          // cum 256
    0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,  // bits 0, 9, 63
    0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  // bit 64
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  //
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,  // bit 255
    0x01, 0x23, 0x00, 0x45, 0x80, 0x00, 0x00, 0x00,  // delay, CE, share, reserved
    0x00, 0x01, 0x86, 0xa0,                          // capacity 100,000 Mbit/s
};

TEST(Wire, AckLayout) { expect_layout(ack_packet(), kAckBytes, 0); }

TEST(Wire, AckDelayAndCeSaturate) {
    WirePacket p = ack_packet();
    p.ack_delay_us = 70000;
    p.ack_ce = 65536;
    const Bytes built = *build_headers(p);
    EXPECT_EQ(built[36 + 32], 0xff);
    EXPECT_EQ(built[37 + 32], 0xff);
    EXPECT_EQ(built[38 + 32], 0xff);
    EXPECT_EQ(built[39 + 32], 0xff);
    WirePacket got;
    ASSERT_EQ(parse(built, got), WireError::Ok);
    EXPECT_EQ(got.ack_delay_us, 65535u);
    EXPECT_EQ(got.ack_ce, 65535u);
}

TEST(Wire, BuildWritesOnlyTheOpcodesExtensions) {
    WirePacket p = seg_packet(0, op(Op::Send), 0, 0);
    p.va = 1;
    p.qkey = 2;
    p.imm = 3;
    p.syndrome = 4;
    p.ack_cum = 5;
    EXPECT_EQ(*build_headers(p),
              cat(seg_prefix(0x20, 0x01), {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00}));
}

// --- Refusals ---

Bytes valid(uint8_t opcode) {
    WirePacket p;
    p.opcode = opcode;
    p.path = 1;
    p.conn = 9;
    if (opcode == kOpAck) return *build_headers(p);
    if (opcode != kOpUdSend && opcode != kOpUdSendImm) {
        p.seq = 100;
        p.floor_delta = 3;
        p.ssn = 50;
    }
    p.syndrome = kSyndromeRemoteAccess;
    const bool atomic = opcode == op(Op::CmpSwp) || opcode == op(Op::FetchAdd);
    const bool data = !(atomic || opcode == op(Op::ReadReq) || opcode == op(Op::Nak));
    const bool eight = atomic || opcode == op(Op::AtomicResp);
    p.msg_len = eight ? 8 : data ? 4 : opcode == op(Op::ReadReq) ? 100 : 0;
    Bytes b = *build_headers(p);
    if (data) b.resize(b.size() + p.msg_len, 0xee);
    return b;
}

WireError parse_bytes(const Bytes& b) {
    WirePacket p;
    return parse(b, p);
}

TEST(Wire, ValidBaselinesParse) {
    for (const uint8_t o : kOpcodes) EXPECT_EQ(parse_bytes(valid(o)), WireError::Ok) << int{o};
}

TEST(Wire, RefusesShort) {
    for (const uint8_t o : kOpcodes) {
        const Bytes b = valid(o);
        for (size_t n = 0; n < header_length(o); ++n) {
            EXPECT_EQ(parse_bytes(Bytes(b.begin(), b.begin() + n)), WireError::Short) << n;
        }
    }
    // Shorter than 32 comes before the version; shorter than the opcode's headers after it.
    Bytes b = valid(op(Op::Write));
    b[0] = 0x10;
    EXPECT_EQ(parse_bytes(Bytes(b.begin(), b.begin() + 31)), WireError::Short);
    EXPECT_EQ(parse_bytes(Bytes(b.begin(), b.begin() + 40)), WireError::Version);
}

TEST(Wire, RefusesVersionBeforeOpcode) {
    for (const uint8_t v : {0x00, 0x10, 0x30, 0xf0}) {
        Bytes b = valid(op(Op::Send));
        b[0] = v;
        EXPECT_EQ(parse_bytes(b), WireError::Version);
        b[1] = 0x42;
        EXPECT_EQ(parse_bytes(b), WireError::Version);
    }
}

TEST(Wire, RefusesUnknownOpcodes) {
    Bytes b = valid(op(Op::Send));
    for (const uint8_t o : {0x00, 0x0e, 0x0f, 0x11, 0x80, 0xff}) {
        b[1] = o;
        EXPECT_EQ(parse_bytes(b), WireError::Opcode) << int{o};
    }
    b.resize(32);
    b[1] = 0x00;
    b[3] = 1;
    EXPECT_EQ(parse_bytes(b), WireError::Opcode);  // before any field
}

TEST(Wire, RefusesReservedFields) {
    auto with = [](uint8_t o, size_t at, uint8_t v) {
        Bytes b = valid(o);
        b[at] = v;
        return parse_bytes(b);
    };
    EXPECT_EQ(with(op(Op::Send), 0, 0x28), WireError::Ok);  // EARLY: a stream begun in RTR
    EXPECT_EQ(with(op(Op::Send), 3, 0x01), WireError::Reserved);
    EXPECT_EQ(with(op(Op::Write), 32 + 12, 0x01), WireError::Reserved);    // RETH 12-15
    EXPECT_EQ(with(op(Op::ReadReq), 32 + 15, 0x80), WireError::Reserved);  // RETH 12-15
    EXPECT_EQ(with(op(Op::CmpSwp), 32 + 13, 0x01), WireError::Reserved);   // ATOMIC 12-15
    EXPECT_EQ(with(op(Op::Nak), 32 + 2, 0x01), WireError::Reserved);       // NAK 2-3
    EXPECT_EQ(with(op(Op::Nak), 32 + 3, 0x01), WireError::Reserved);
    EXPECT_EQ(with(kOpAck, 32 + 42, 0x01), WireError::Reserved);  // ACK 42-43
    EXPECT_EQ(with(kOpAck, 32 + 43, 0x01), WireError::Reserved);
    // An ACK's flags, sequence, floor, stream, SSN, MSN, offset and length.
    for (const uint8_t f : {0x21, 0x22, 0x24, 0x28}) {
        EXPECT_EQ(with(kOpAck, 0, f), WireError::Reserved);
    }
    for (size_t at = 8; at < 32; ++at) EXPECT_EQ(with(kOpAck, at, 1), WireError::Reserved) << at;
    // A datagram's sequence, floor, stream, SSN, MSN, and the flags about sequences (ACK_REQ,
    // RETX, EARLY); SOLICITED is its own.
    for (const uint8_t o : {kOpUdSend, kOpUdSendImm}) {
        for (size_t at = 8; at < 24; ++at) EXPECT_EQ(with(o, at, 1), WireError::Reserved) << at;
        EXPECT_EQ(with(o, 0, 0x24), WireError::Ok);
        EXPECT_EQ(with(o, 0, 0x21), WireError::Reserved);
        EXPECT_EQ(with(o, 0, 0x22), WireError::Reserved);
        EXPECT_EQ(with(o, 0, 0x28), WireError::Reserved);
    }
    // A floor the opcode does not use is Reserved, not Floor.
    EXPECT_EQ(with(kOpUdSend, 13, 0xff), WireError::Reserved);
}

TEST(Wire, RefusesPath) {
    for (const uint8_t o : kOpcodes) {
        Bytes b = valid(o);
        b[2] = 63;
        EXPECT_EQ(parse_bytes(b), WireError::Ok);
        for (const uint8_t path : {64, 65, 128, 255}) {
            b[2] = path;
            EXPECT_EQ(parse_bytes(b), WireError::Path) << int{o};
        }
    }
}

TEST(Wire, RefusesFloor) {
    Bytes b = valid(op(Op::Send));
    b[12] = 0;
    b[13] = 254;
    EXPECT_EQ(parse_bytes(b), WireError::Ok);
    b[13] = 255;
    EXPECT_EQ(parse_bytes(b), WireError::Floor);
    b[12] = 0x80;
    b[13] = 0;
    EXPECT_EQ(parse_bytes(b), WireError::Floor);
}

TEST(Wire, RefusesPayloadOnOpcodesThatCarryNone) {
    for (const uint8_t o :
         {op(Op::ReadReq), op(Op::CmpSwp), op(Op::FetchAdd), op(Op::Nak), kOpAck}) {
        Bytes b = valid(o);
        b.push_back(0);
        EXPECT_EQ(parse_bytes(b), WireError::Payload) << int{o};
    }
}

// The packet `valid(o)` with its offset, length and payload replaced.
Bytes sized(uint8_t o, uint32_t offset, uint32_t len, uint32_t payload) {
    WirePacket p;
    EXPECT_EQ(parse(valid(o), p), WireError::Ok);
    p.offset = offset;
    p.msg_len = len;
    Bytes b = *build_headers(p);
    b.resize(b.size() + payload, 0x77);
    return b;
}

TEST(Wire, RefusesBounds) {
    const uint8_t send = op(Op::Send);
    EXPECT_EQ(parse_bytes(sized(send, 6, 10, 4)), WireError::Ok);
    EXPECT_EQ(parse_bytes(sized(send, 7, 10, 4)), WireError::Bounds);  // passes the length
    EXPECT_EQ(parse_bytes(sized(send, 0xfffffffe, 0xffffffff, 4)),
              WireError::Bounds);                                      // and would overflow 32 bits
    EXPECT_EQ(parse_bytes(sized(send, 0, 0, 0)), WireError::Ok);       // an empty message
    EXPECT_EQ(parse_bytes(sized(send, 0, 10, 0)), WireError::Bounds);  // no bytes of some
    EXPECT_EQ(parse_bytes(sized(send, 10, 10, 0)), WireError::Bounds);
    EXPECT_EQ(parse_bytes(sized(op(Op::ReadResp), 0, 0, 0)), WireError::Ok);  // an empty READ
    // An offset on a packet that carries no bytes.
    EXPECT_EQ(parse_bytes(sized(op(Op::ReadReq), 1, 100, 0)), WireError::Bounds);
    EXPECT_EQ(parse_bytes(sized(op(Op::Nak), 1, 0, 0)), WireError::Bounds);
    EXPECT_EQ(parse_bytes(sized(op(Op::FetchAdd), 4, 8, 0)), WireError::Bounds);
    // A NAK is a message of no bytes.
    EXPECT_EQ(parse_bytes(sized(op(Op::Nak), 0, 1, 0)), WireError::Bounds);
    // A datagram's length is its payload's.
    EXPECT_EQ(parse_bytes(sized(kOpUdSend, 0, 5, 5)), WireError::Ok);
    EXPECT_EQ(parse_bytes(sized(kOpUdSend, 0, 6, 5)), WireError::Bounds);
    EXPECT_EQ(parse_bytes(sized(kOpUdSendImm, 0, 4, 5)), WireError::Bounds);
    EXPECT_EQ(parse_bytes(sized(kOpUdSend, 1, 5, 5)), WireError::Bounds);
    EXPECT_EQ(parse_bytes(sized(kOpUdSend, 0, 0, 0)), WireError::Ok);
    // An atomic's length is 8.
    for (const uint8_t o : {op(Op::CmpSwp), op(Op::FetchAdd)}) {
        EXPECT_EQ(parse_bytes(sized(o, 0, 7, 0)), WireError::Bounds);
        EXPECT_EQ(parse_bytes(sized(o, 0, 16, 0)), WireError::Bounds);
        EXPECT_EQ(parse_bytes(sized(o, 0, 0, 0)), WireError::Bounds);
    }
}

TEST(Wire, RefusesAddressRangesThatWrap) {
    auto with_va = [](uint8_t o, uint64_t va, uint32_t len) {
        WirePacket p;
        EXPECT_EQ(parse(valid(o), p), WireError::Ok);
        p.va = va;
        p.msg_len = len;
        Bytes b = *build_headers(p);
        if (o != op(Op::ReadReq) && o != op(Op::CmpSwp) && o != op(Op::FetchAdd)) {
            b.resize(b.size() + len, 0);
        }
        return parse_bytes(b);
    };
    const uint64_t top = std::numeric_limits<uint64_t>::max();
    for (const uint8_t o : {op(Op::Write), op(Op::WriteImm), op(Op::ReadReq)}) {
        EXPECT_EQ(with_va(o, top - 99, 100), WireError::Ok);  // ends at 2^64
        EXPECT_EQ(with_va(o, top - 98, 100), WireError::Bounds);
        EXPECT_EQ(with_va(o, top, 1), WireError::Ok);
        EXPECT_EQ(with_va(o, top, 2), WireError::Bounds);
    }
    EXPECT_EQ(with_va(op(Op::ReadReq), top, 0), WireError::Ok);  // an empty range never wraps
    EXPECT_EQ(with_va(op(Op::Write), top, 0), WireError::Ok);
    for (const uint8_t o : {op(Op::CmpSwp), op(Op::FetchAdd)}) {
        EXPECT_EQ(with_va(o, top - 7, 8), WireError::Ok);
        EXPECT_EQ(with_va(o, top - 6, 8), WireError::Bounds);
    }
}

TEST(Wire, RefusesNakSyndromesNotInTheList) {
    Bytes b = valid(op(Op::Nak));
    for (unsigned s = 0; s < 256; ++s) {
        b[32] = static_cast<uint8_t>(s);
        EXPECT_EQ(parse_bytes(b), s >= 1 && s <= 4 ? WireError::Ok : WireError::Syndrome) << s;
    }
}

TEST(Wire, ARefusalNamesTheFirstRuleBroken) {
    Bytes b = valid(op(Op::ReadReq));
    b[2] = 64;       // path
    b[3] = 1;        // reserved byte 3, after the path
    b[13] = 255;     // floor
    b.push_back(0);  // payload
    EXPECT_EQ(parse_bytes(b), WireError::Path);
    b[2] = 0;
    EXPECT_EQ(parse_bytes(b), WireError::Reserved);
    b[3] = 0;
    EXPECT_EQ(parse_bytes(b), WireError::Floor);
    b[13] = 0;
    b[32 + 12] = 1;  // RETH reserved, before payload presence
    EXPECT_EQ(parse_bytes(b), WireError::Reserved);
    b[32 + 12] = 0;
    b[24 + 3] = 1;  // offset on no bytes: bounds, after payload presence
    EXPECT_EQ(parse_bytes(b), WireError::Payload);
    b.pop_back();
    EXPECT_EQ(parse_bytes(b), WireError::Bounds);

    Bytes nak = valid(op(Op::Nak));
    nak[32] = 9;  // syndrome, extension byte 0
    nak[32 + 2] = 1;
    nak.push_back(0);
    EXPECT_EQ(parse_bytes(nak), WireError::Syndrome);  // before its reserved bytes and payload
    nak[32] = 1;
    EXPECT_EQ(parse_bytes(nak), WireError::Reserved);
    nak[13] = 255;
    EXPECT_EQ(parse_bytes(nak), WireError::Floor);

    Bytes ack = valid(kOpAck);
    ack[0] = 0x21;  // ACK_REQ on an ACK
    ack[2] = 70;    // path
    EXPECT_EQ(parse_bytes(ack), WireError::Reserved);
    ack[0] = 0x20;
    EXPECT_EQ(parse_bytes(ack), WireError::Path);

    Bytes send = sized(op(Op::Send), 20, 10, 0);
    send[13] = 255;
    EXPECT_EQ(parse_bytes(send), WireError::Floor);
}

// --- Random packets ---

uint32_t u32(SimRng& rng) { return static_cast<uint32_t>(rng.next()); }

// A length: often small, sometimes anything, sometimes at the edges.
uint32_t length(SimRng& rng) {
    switch (rng.below(4)) {
        case 0:
            return static_cast<uint32_t>(rng.below(9000));
        case 1:
            return u32(rng);
        case 2:
            return std::numeric_limits<uint32_t>::max() - static_cast<uint32_t>(rng.below(3));
        default:
            return static_cast<uint32_t>(rng.below(3));
    }
}

// An address whose range of `len` bytes does not wrap, often at the top.
uint64_t address(SimRng& rng, uint64_t len) {
    const uint64_t last = std::numeric_limits<uint64_t>::max() - (len == 0 ? 0 : len - 1);
    if (rng.chance(0.25)) return last;
    return last == std::numeric_limits<uint64_t>::max() ? rng.next() : rng.below(last + 1);
}

// A packet every rule of section 7 accepts, with the payload length it needs.
WirePacket random_valid(SimRng& rng, uint8_t opcode, uint32_t& payload) {
    WirePacket p;
    p.opcode = opcode;
    p.path = static_cast<uint8_t>(rng.below(kMaxPaths));
    p.conn = u32(rng);
    payload = 0;
    if (opcode == kOpAck) {
        p.ack_cum = u32(rng);
        for (auto& w : p.ack_bits) w = rng.chance(0.2) ? 0 : rng.next();
        p.ack_delay_us = static_cast<uint32_t>(rng.below(65536));
        p.ack_ce = static_cast<uint32_t>(rng.below(65536));
        p.share = static_cast<uint16_t>(rng.next());
        p.capacity_mbps = u32(rng);
        return p;
    }
    p.flags = static_cast<uint8_t>(rng.below(8));
    const bool datagram = opcode == kOpUdSend || opcode == kOpUdSendImm;
    if (datagram) p.flags &= kFlagSolicited;
    if (!datagram) {
        p.seq = u32(rng);
        p.floor_delta = static_cast<uint16_t>(rng.below(255));
        p.stream = static_cast<uint16_t>(rng.next());
        p.ssn = u32(rng);
        p.msn = u32(rng);
    }
    if (opcode == 0x02 || opcode == 0x03 || opcode == 0x05 || opcode == kOpUdSendImm) {
        p.imm = u32(rng);
    }
    switch (opcode) {
        case 0x06:  // READ_REQ
            p.msg_len = length(rng);
            p.va = address(rng, p.msg_len);
            p.rkey = u32(rng);
            return p;
        case 0x08:
        case 0x09:  // atomics
            p.msg_len = 8;
            p.va = address(rng, 8);
            p.rkey = u32(rng);
            p.swap_add = rng.next();
            p.compare = rng.next();
            return p;
        case 0x0a:  // ATOMIC_RESP: the 8 bytes before
            p.msg_len = payload = 8;
            return p;
        case 0x0b:  // NAK
            p.syndrome = static_cast<uint8_t>(1 + rng.below(4));
            p.rnr_timer = static_cast<uint8_t>(rng.next());
            p.nak_ssn = u32(rng);
            return p;
        case kOpUdSend:
        case kOpUdSendImm:
            p.qkey = u32(rng);
            p.src_qpn = u32(rng);
            payload = p.msg_len = static_cast<uint32_t>(rng.below(4097));
            return p;
        default:
            break;
    }
    // A segment of data: some bytes of its message, or an empty message.
    p.msg_len = length(rng);
    if (p.msg_len != 0) {
        payload = 1 + static_cast<uint32_t>(rng.below(std::min<uint32_t>(p.msg_len, 4096)));
        p.offset = static_cast<uint32_t>(rng.below(uint64_t{p.msg_len} - payload + 1));
    }
    if (opcode == 0x04 || opcode == 0x05) {
        p.va = address(rng, p.msg_len);
        p.rkey = u32(rng);
    }
    return p;
}

Bytes with_payload(const WirePacket& p, uint32_t payload, SimRng& rng) {
    Bytes b = *build_headers(p);
    for (uint32_t i = 0; i < payload; ++i) b.push_back(static_cast<uint8_t>(rng.next()));
    return b;
}

TEST(Wire, RandomValidPacketsRoundTrip) {
    SimRng rng(7);
    for (int i = 0; i < 20000; ++i) {
        const uint8_t o = kOpcodes[rng.below(kOpcodes.size())];
        uint32_t payload = 0;
        WirePacket p = random_valid(rng, o, payload);
        const Bytes b = with_payload(p, payload, rng);
        WirePacket got;
        ASSERT_EQ(parse(b, got), WireError::Ok) << "opcode " << int{o} << " run " << i;
        p.payload_offset = header_length(o);
        p.payload_len = payload;
        ASSERT_EQ(got, p) << "opcode " << int{o} << " run " << i;
        ASSERT_EQ(*build_headers(got), Bytes(b.begin(), b.begin() + header_length(o)));
    }
}

// Whatever parses builds back into exactly its header bytes, and its payload is the rest.
void check_rebuilds(const Bytes& b, std::array<int, 10>& seen) {
    WirePacket got;
    const WireError e = parse(b, got);
    ++seen[static_cast<size_t>(e)];
    if (e != WireError::Ok) return;
    const uint32_t hlen = header_length(got.opcode);
    ASSERT_EQ(got.payload_offset, hlen);
    ASSERT_EQ(uint64_t{got.payload_offset} + got.payload_len, b.size());
    ASSERT_EQ(*build_headers(got), Bytes(b.begin(), b.begin() + hlen));
}

TEST(Wire, EverySingleBitFlipThatParsesRebuilds) {
    SimRng rng(11);
    std::array<int, 10> seen{};
    for (const uint8_t o : kOpcodes) {
        for (int k = 0; k < 4; ++k) {
            uint32_t payload = 0;
            const Bytes b = with_payload(random_valid(rng, o, payload), payload, rng);
            for (size_t at = 0; at < header_length(o); ++at) {
                for (int bit = 0; bit < 8; ++bit) {
                    Bytes m = b;
                    m[at] ^= static_cast<uint8_t>(1u << bit);
                    check_rebuilds(m, seen);
                }
            }
        }
    }
    EXPECT_GT(seen[0], 0);
}

TEST(Wire, MutatedAndRandomBytesThatParseRebuild) {
    SimRng rng(13);
    std::array<int, 10> seen{};
    for (int i = 0; i < 200000; ++i) {
        Bytes b;
        if (rng.chance(0.2)) {
            // Random bytes, often with a valid version and opcode.
            b.resize(rng.below(120));
            for (auto& x : b) x = static_cast<uint8_t>(rng.next());
            if (b.size() > 1 && rng.chance(0.7)) {
                b[0] = static_cast<uint8_t>(0x20 | (b[0] & 0x0f));
                b[1] = kOpcodes[rng.below(kOpcodes.size())];
            }
        } else {
            const uint8_t o = kOpcodes[rng.below(kOpcodes.size())];
            uint32_t payload = 0;
            const WirePacket p = random_valid(rng, o, payload);
            b = with_payload(p, std::min<uint32_t>(payload, 64), rng);
            const int n = 1 + static_cast<int>(rng.below(3));
            for (int k = 0; k < n && !b.empty(); ++k) {
                const size_t at = rng.below(b.size());
                switch (rng.below(6)) {
                    case 0:
                        b[at] ^= static_cast<uint8_t>(1u << rng.below(8));
                        break;
                    case 1:
                        b[at] = static_cast<uint8_t>(rng.next());
                        break;
                    case 2:
                        b[at] = rng.chance(0.5) ? 0 : 0xff;
                        break;
                    case 3:
                        b.resize(rng.below(b.size() + 1));
                        break;
                    case 4:
                        b.resize(b.size() + 1 + rng.below(16), static_cast<uint8_t>(rng.next()));
                        break;
                    default:
                        b[1] = kOpcodes[rng.below(kOpcodes.size())];  // another opcode's row
                        break;
                }
            }
        }
        check_rebuilds(b, seen);
        if (testing::Test::HasFatalFailure()) return;
    }
    // Every reason comes up, and so do packets that parse.
    for (size_t r = 0; r < seen.size(); ++r) EXPECT_GT(seen[r], 0) << "reason " << r;
}

}  // namespace
}  // namespace softmetaroce::v2
