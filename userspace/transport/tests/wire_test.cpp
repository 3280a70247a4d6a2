// Protocol v2's packets on the wire: the opcode table, the byte layout of every header (against
// bytes written out by hand from protocol-v2.md section 7), round trips, and what parsing refuses.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "random_packet.h"

extern "C" {
#include "mrc_wire.h"
}

namespace {

using Bytes = std::vector<uint8_t>;

Bytes build(const mrc_pkt &pkt, const Bytes &payload = {}) {
    Bytes out(MRC_MAX_HDRS_LEN);
    uint32_t n = mrc_wire_build(&pkt, out.data(), static_cast<uint32_t>(out.size()));
    EXPECT_GT(n, 0u);
    out.resize(n);
    out.insert(out.end(), payload.begin(), payload.end());
    return out;
}

mrc_wire_error parse(const Bytes &b, mrc_pkt *pkt) {
    return mrc_wire_parse(b.data(), static_cast<uint32_t>(b.size()), pkt);
}

mrc_pkt data_pkt(uint8_t opcode, uint32_t offset, uint32_t msg_len) {
    mrc_pkt p{};
    p.hdr.opcode = opcode;
    p.hdr.path = 5;
    p.hdr.conn = 0x11223344;
    p.hdr.seq = 0x55667788;
    p.hdr.floor_delta = 9;
    p.hdr.stream = 0x0102;
    p.hdr.ssn = 0x0a0b0c0d;
    p.hdr.msn = 0x01020304;
    p.hdr.offset = offset;
    p.hdr.msg_len = msg_len;
    return p;
}

TEST(Wire, OpcodeTableIsConsistent) {
    int named = 0;
    for (unsigned op = 0; op < MRC_NUM_OPCODES; op++) {
        const mrc_opcode_info &info = mrc_opcode[op];
        if (!info.name) continue;
        named++;
        unsigned len = MRC_HDR_LEN, exts = 0;
        if (info.mask & MRC_OPM_RETH) len += MRC_RETH_LEN, exts++;
        if (info.mask & MRC_OPM_ATOMIC) len += MRC_ATOMIC_LEN, exts++;
        if (info.mask & MRC_OPM_DETH) len += MRC_DETH_LEN, exts++;
        if (info.mask & MRC_OPM_ACK) len += MRC_ACK_LEN, exts++;
        if (info.mask & MRC_OPM_NAK) len += MRC_NAK_LEN, exts++;
        if (info.mask & MRC_OPM_IMM) len += MRC_IMM_LEN;
        EXPECT_EQ(info.length, len) << info.name;
        EXPECT_LE(exts, 1u) << info.name << ": one extension before IMM";
        EXPECT_LE(info.length, MRC_MAX_HDRS_LEN) << info.name;
        // A stream's segments are what paths sequence; only ACKs and datagrams are neither.
        EXPECT_EQ(!!(info.mask & MRC_OPM_SEG), !!(info.mask & MRC_OPM_SEQ)) << info.name;
        if (info.mask & MRC_OPM_RESP) {
            EXPECT_FALSE(info.mask & MRC_OPM_RECV) << info.name;
        }
    }
    EXPECT_EQ(named, 14);
    EXPECT_STREQ(mrc_opcode[MRC_OP_ACK].name, "ACK");
}

TEST(Wire, TransportHeaderLayout) {
    mrc_pkt p = data_pkt(MRC_OP_SEND_IMM, 0x100, 0x1000);
    p.hdr.flags = MRC_F_ACK_REQ | MRC_F_SOLICITED;
    p.imm = 0xdeadbeef;
    Bytes b = build(p, Bytes(4, 0xee));
    const Bytes want = {
        0x25, 0x02, 0x05, 0x00,  // version 2 | flags, opcode, path, reserved
        0x11, 0x22, 0x33, 0x44,  // connection
        0x55, 0x66, 0x77, 0x88,  // path sequence
        0x00, 0x09, 0x01, 0x02,  // floor delta, stream
        0x0a, 0x0b, 0x0c, 0x0d,  // SSN
        0x01, 0x02, 0x03, 0x04,  // MSN
        0x00, 0x00, 0x01, 0x00,  // offset
        0x00, 0x00, 0x10, 0x00,  // message length
        0xde, 0xad, 0xbe, 0xef,  // immediate
        0xee, 0xee, 0xee, 0xee,  // payload
    };
    EXPECT_EQ(b, want);
}

TEST(Wire, RethAndImmediateLayout) {
    mrc_pkt p = data_pkt(MRC_OP_WRITE_IMM, 0, 1);
    p.reth.va = 0x0102030405060708ull;
    p.reth.rkey = 0xa1a2a3a4;
    p.imm = 0xb1b2b3b4;
    Bytes b = build(p, Bytes(1, 0x77));
    ASSERT_EQ(b.size(), MRC_HDR_LEN + MRC_RETH_LEN + MRC_IMM_LEN + 1u);
    const Bytes ext = {1,    2, 3, 4, 5, 6,    7,    8,    0xa1, 0xa2, 0xa3,
                       0xa4, 0, 0, 0, 0, 0xb1, 0xb2, 0xb3, 0xb4, 0x77};
    EXPECT_EQ(Bytes(b.begin() + MRC_HDR_LEN, b.end()), ext);
}

TEST(Wire, AtomicLayout) {
    mrc_pkt p = data_pkt(MRC_OP_CMP_SWP, 0, 8);
    p.atomic.va = 0x1000;
    p.atomic.rkey = 7;
    p.atomic.swap_add = 0x1111111122222222ull;
    p.atomic.compare = 0x3333333344444444ull;
    Bytes b = build(p);
    const Bytes ext = {0,    0,    0,    0,    0,    0,    0x10, 0,    0,    0,    0,
                       7,    0,    0,    0,    0,    0x11, 0x11, 0x11, 0x11, 0x22, 0x22,
                       0x22, 0x22, 0x33, 0x33, 0x33, 0x33, 0x44, 0x44, 0x44, 0x44};
    EXPECT_EQ(Bytes(b.begin() + MRC_HDR_LEN, b.end()), ext);
}

TEST(Wire, AckLayoutNamesBitsLeastSignificantFirst) {
    mrc_pkt p{};
    p.hdr.opcode = MRC_OP_ACK;
    p.hdr.path = 63;
    p.hdr.conn = 9;
    p.ack.path.cum = 0x01020304;
    p.ack.path.bits[0] = 1ull | 1ull << 9;  // cum + 1 and cum + 10
    p.ack.path.bits[3] = 1ull << 63;        // cum + 256
    p.ack.path.ack_delay_us = 70000;        // saturates
    p.ack.path.ce = 3;
    p.ack.share = 0x8000;
    p.ack.capacity_mbps = 100000;
    Bytes b = build(p);
    ASSERT_EQ(b.size(), MRC_HDR_LEN + MRC_ACK_LEN + 0u);
    EXPECT_EQ(b[0], 0x20);
    EXPECT_EQ(b[2], 63);
    EXPECT_EQ(Bytes(b.begin() + 8, b.begin() + 32), Bytes(24, 0));  // not sequenced
    Bytes ext(b.begin() + MRC_HDR_LEN, b.end());
    Bytes want(MRC_ACK_LEN, 0);
    want[0] = 1, want[1] = 2, want[2] = 3, want[3] = 4;
    want[4] = 0x01;   // bit 0
    want[5] = 0x02;   // bit 9
    want[35] = 0x80;  // bit 255
    want[36] = 0xff, want[37] = 0xff;
    want[39] = 3;
    want[40] = 0x80;
    want[44] = 0x00, want[45] = 0x01, want[46] = 0x86, want[47] = 0xa0;
    EXPECT_EQ(ext, want);

    mrc_pkt q;
    ASSERT_EQ(parse(b, &q), MRC_WIRE_OK);
    EXPECT_EQ(q.ack.path.cum, p.ack.path.cum);
    for (int i = 0; i < MRC_SACK_WORDS; i++) EXPECT_EQ(q.ack.path.bits[i], p.ack.path.bits[i]);
    EXPECT_EQ(q.ack.path.ack_delay_us, 0xffffu);
    EXPECT_EQ(q.ack.share, 0x8000);
    EXPECT_EQ(q.ack.capacity_mbps, 100000u);
}

TEST(Wire, NakAndDatagramLayout) {
    mrc_pkt n = data_pkt(MRC_OP_NAK, 0, 0);
    n.nak.syndrome = MRC_NAK_RNR;
    n.nak.arg = 14;
    n.nak.ssn = 0x01020304;
    Bytes b = build(n);
    EXPECT_EQ(Bytes(b.begin() + MRC_HDR_LEN, b.end()), (Bytes{1, 14, 0, 0, 1, 2, 3, 4}));

    mrc_pkt u{};
    u.hdr.opcode = MRC_OP_UD_SEND_IMM;
    u.hdr.conn = 0x000123;
    u.hdr.msg_len = 2;
    u.deth.qkey = 0x80010000;
    u.deth.src_qpn = 0x42;
    u.imm = 5;
    b = build(u, Bytes{9, 9});
    EXPECT_EQ(Bytes(b.begin() + MRC_HDR_LEN, b.end()),
              (Bytes{0x80, 0x01, 0, 0, 0, 0, 0, 0x42, 0, 0, 0, 5, 9, 9}));
    mrc_pkt q;
    ASSERT_EQ(parse(b, &q), MRC_WIRE_OK);
    EXPECT_EQ(q.payload_len, 2u);
    EXPECT_EQ(q.deth.src_qpn, 0x42u);
}

Bytes random_valid(std::mt19937_64 &rng) {
    mrc_pkt p;
    return mrcore_test::random_valid(rng, &p);
}

Bytes rebuild(const mrc_pkt &p) { return build(p, Bytes(p.payload, p.payload + p.payload_len)); }

TEST(Wire, EveryValidPacketRoundTripsExactly) {
    std::mt19937_64 rng(15);
    for (int i = 0; i < 20000; i++) {
        Bytes b = random_valid(rng);
        mrc_pkt p;
        ASSERT_EQ(parse(b, &p), MRC_WIRE_OK) << "packet " << i << " opcode " << int(b[1]);
        ASSERT_EQ(rebuild(p), b) << "packet " << i;
    }
}

// Hostile bytes: anything parses or is refused, and what parses is canonical (builds back into the
// same bytes, so no field the parser ignored can carry meaning) and fits its message.
TEST(Wire, RandomAndMutatedBytesAreRefusedOrCanonical) {
    std::mt19937_64 rng(16);
    int accepted = 0;
    for (int i = 0; i < 200000; i++) {
        Bytes b;
        if (i % 2) {
            b = random_valid(rng);
            for (int flips = 1 + rng() % 3; flips > 0; flips--)
                b[rng() % b.size()] ^= static_cast<uint8_t>(1u << (rng() % 8));
            if (rng() % 8 == 0) b.resize(rng() % (b.size() + 1));
        } else {
            b.resize(rng() % 120);
            for (auto &c : b) c = static_cast<uint8_t>(rng());
            if (b.size() > 1) b[0] = static_cast<uint8_t>(MRC_VERSION << 4 | (b[0] & 0xf));
        }
        mrc_pkt p;
        mrc_wire_error err = parse(b, &p);
        ASSERT_LT(err, MRC_WIRE_NUM_ERRORS);
        if (err != MRC_WIRE_OK) continue;
        accepted++;
        ASSERT_EQ(rebuild(p), b) << "iteration " << i;
        uint16_t mask = mrc_opcode[p.hdr.opcode].mask;
        ASSERT_LE(uint64_t(p.hdr.offset) + p.payload_len, p.hdr.msg_len);
        if (mask & MRC_OPM_RETH) {
            ASSERT_GE(p.reth.va + p.hdr.msg_len, p.reth.va);
        }
    }
    EXPECT_GT(accepted, 10000);
}

class Refused : public ::testing::Test {
  protected:
    Bytes send_ = build(data_pkt(MRC_OP_SEND, 0, 4), Bytes(4, 1));
    mrc_pkt p_;
    mrc_wire_error parse_send() { return parse(send_, &p_); }
};

TEST_F(Refused, ValidBaseline) { EXPECT_EQ(parse_send(), MRC_WIRE_OK); }

TEST_F(Refused, EveryTruncation) {
    for (size_t n = 0; n < MRC_HDR_LEN; n++)
        EXPECT_EQ(mrc_wire_parse(send_.data(), n, &p_), MRC_WIRE_SHORT) << n;
    Bytes w = build(data_pkt(MRC_OP_WRITE, 0, 0));
    for (size_t n = MRC_HDR_LEN; n < w.size(); n++)
        EXPECT_EQ(mrc_wire_parse(w.data(), n, &p_), MRC_WIRE_SHORT) << n;
}

TEST_F(Refused, OtherVersions) {
    for (int v : {0, 1, 3, 15}) {
        send_[0] = static_cast<uint8_t>(v << 4);
        EXPECT_EQ(parse_send(), MRC_WIRE_VERSION) << v;
    }
}

TEST_F(Refused, UnknownOpcodes) {
    for (int op : {0x00, 0x0e, 0x0f, 0x11, 0x80, 0xff}) {
        send_[1] = static_cast<uint8_t>(op);
        EXPECT_EQ(parse_send(), MRC_WIRE_OPCODE) << op;
    }
}

TEST_F(Refused, ReservedBitsAndFields) {
    send_[0] |= MRC_F_EARLY;  // a segment of a stream begun in RTR (section 9.1)
    EXPECT_EQ(parse_send(), MRC_WIRE_OK);
    send_[0] &= ~MRC_F_EARLY;
    send_[3] = 1;
    EXPECT_EQ(parse_send(), MRC_WIRE_RESERVED);

    mrc_pkt w = data_pkt(MRC_OP_WRITE, 0, 0);
    Bytes b = build(w);
    b[MRC_HDR_LEN + 12] = 1;  // RETH's reserved word
    EXPECT_EQ(parse(b, &p_), MRC_WIRE_RESERVED);

    mrc_pkt a{};
    a.hdr.opcode = MRC_OP_ACK;
    b = build(a);
    b[8] = 1;  // an ACK is not sequenced
    EXPECT_EQ(parse(b, &p_), MRC_WIRE_RESERVED);
    b[8] = 0;
    b[0] |= MRC_F_ACK_REQ;
    EXPECT_EQ(parse(b, &p_), MRC_WIRE_RESERVED);
    b[0] &= ~MRC_F_ACK_REQ;
    b[17] = 1;  // an ACK names no segment
    EXPECT_EQ(parse(b, &p_), MRC_WIRE_RESERVED);
    b[17] = 0;
    b[23] = 1;  // nor a message
    EXPECT_EQ(parse(b, &p_), MRC_WIRE_RESERVED);
    b[23] = 0;
    EXPECT_EQ(parse(b, &p_), MRC_WIRE_OK);

    mrc_pkt u{};
    u.hdr.opcode = MRC_OP_UD_SEND;
    u.hdr.msg_len = 1;
    b = build(u, Bytes(1, 0));
    b[15] = 1;  // a datagram is in no stream
    EXPECT_EQ(parse(b, &p_), MRC_WIRE_RESERVED);
    b[15] = 0;
    b[0] |= MRC_F_EARLY;  // nor in any stream's beginning
    EXPECT_EQ(parse(b, &p_), MRC_WIRE_RESERVED);
}

TEST_F(Refused, PathAndFloor) {
    send_[2] = MRC_MAX_PATHS;
    EXPECT_EQ(parse_send(), MRC_WIRE_PATH);
    send_[2] = 0;
    send_[12] = 0, send_[13] = MRC_MAX_FLOOR_DELTA + 1;
    EXPECT_EQ(parse_send(), MRC_WIRE_FLOOR);
    send_[12] = 1, send_[13] = 0;
    EXPECT_EQ(parse_send(), MRC_WIRE_FLOOR);
}

TEST_F(Refused, PayloadOnAnOpcodeThatCarriesNone) {
    Bytes b = build(data_pkt(MRC_OP_READ_REQ, 0, 100), Bytes(1, 0));
    EXPECT_EQ(parse(b, &p_), MRC_WIRE_PAYLOAD);
    mrc_pkt a{};
    a.hdr.opcode = MRC_OP_ACK;
    b = build(a, Bytes(1, 0));
    EXPECT_EQ(parse(b, &p_), MRC_WIRE_PAYLOAD);
}

// Issue 13's first finding, in v2 terms: a segment whose offset and length wrap past its message.
TEST_F(Refused, SegmentsThatDoNotFitTheirMessage) {
    EXPECT_EQ(parse(build(data_pkt(MRC_OP_SEND, 0xfffffbb8, 1400), Bytes(1400, 0)), &p_),
              MRC_WIRE_BOUNDS);
    EXPECT_EQ(parse(build(data_pkt(MRC_OP_SEND, 1, 4), Bytes(4, 0)), &p_), MRC_WIRE_BOUNDS);
    EXPECT_EQ(parse(build(data_pkt(MRC_OP_READ_RESP, 0, 5), Bytes()), &p_), MRC_WIRE_BOUNDS);
    EXPECT_EQ(parse(build(data_pkt(MRC_OP_SEND, 0, 0), Bytes()), &p_), MRC_WIRE_OK);

    mrc_pkt w = data_pkt(MRC_OP_WRITE, 0, 0x1000);
    w.reth.va = UINT64_MAX - 0x800;
    EXPECT_EQ(parse(build(w, Bytes(16, 0)), &p_), MRC_WIRE_BOUNDS);

    mrc_pkt a = data_pkt(MRC_OP_FETCH_ADD, 0, 16);
    EXPECT_EQ(parse(build(a), &p_), MRC_WIRE_BOUNDS);
    a.hdr.msg_len = 8;
    a.atomic.va = UINT64_MAX - 3;
    EXPECT_EQ(parse(build(a), &p_), MRC_WIRE_BOUNDS);

    mrc_pkt u{};
    u.hdr.opcode = MRC_OP_UD_SEND;
    u.hdr.msg_len = 3;  // a datagram is its payload
    EXPECT_EQ(parse(build(u, Bytes(2, 0)), &p_), MRC_WIRE_BOUNDS);
}

TEST_F(Refused, UnknownSyndrome) {
    mrc_pkt n = data_pkt(MRC_OP_NAK, 0, 0);
    n.nak.syndrome = 0;
    EXPECT_EQ(parse(build(n), &p_), MRC_WIRE_SYNDROME);
    n.nak.syndrome = MRC_NAK_REMOTE_OP + 1;
    EXPECT_EQ(parse(build(n), &p_), MRC_WIRE_SYNDROME);
}

TEST(Wire, BuildRefusesShortRoomAndUnknownOpcodes) {
    mrc_pkt p = data_pkt(MRC_OP_WRITE, 0, 0);
    uint8_t buf[MRC_MAX_HDRS_LEN];
    EXPECT_EQ(mrc_wire_build(&p, buf, MRC_HDR_LEN + MRC_RETH_LEN - 1), 0u);
    EXPECT_EQ(mrc_wire_build(&p, buf, sizeof(buf)), MRC_HDR_LEN + MRC_RETH_LEN + 0u);
    p.hdr.opcode = 0x0f;
    EXPECT_EQ(mrc_wire_build(&p, buf, sizeof(buf)), 0u);
}

TEST(Wire, ErrorNames) {
    for (int e = 0; e < MRC_WIRE_NUM_ERRORS; e++)
        EXPECT_STRNE(mrc_wire_error_name(static_cast<mrc_wire_error>(e)), "unknown") << e;
    EXPECT_STREQ(mrc_wire_error_name(MRC_WIRE_NUM_ERRORS), "unknown");
}

}  // namespace
