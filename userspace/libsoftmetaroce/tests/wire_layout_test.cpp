// Checks every size, offset and constant of <rdma/metaroce_wire.h> against docs/protocol.md
// (sections 1-3, 5), and the byte-exact encoding of one packet of each header kind.
#include <gtest/gtest.h>
#include <rdma/metaroce_wire.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "softmetaroce/codec.h"
#include "softmetaroce/psn.h"

namespace metaroce {
namespace {

TEST(WireLayout, HeaderSizes) {
    EXPECT_EQ(sizeof(metaroce_bth), 24u);
    EXPECT_EQ(sizeof(metaroce_deth), 24u);
    EXPECT_EQ(sizeof(metaroce_rreq), 24u);
    EXPECT_EQ(sizeof(metaroce_ack), 56u);
    EXPECT_EQ(sizeof(metaroce_areq), 32u);
    EXPECT_EQ(METAROCE_AREQ_LEN, 32);
    EXPECT_EQ(METAROCE_ATOMIC_LEN, 8);
    EXPECT_EQ(METAROCE_BTH_LEN, 24);
    EXPECT_EQ(METAROCE_DETH_LEN, 24);
    EXPECT_EQ(METAROCE_RREQ_LEN, 24);
    EXPECT_EQ(METAROCE_ACK_LEN, 56);
    EXPECT_EQ(METAROCE_MAX_TRANSPORT_HDR, 24 + 56);
}

TEST(WireLayout, BthOffsets) {
    EXPECT_EQ(offsetof(metaroce_bth, version), 0u);
    EXPECT_EQ(offsetof(metaroce_bth, opcode), 1u);
    EXPECT_EQ(offsetof(metaroce_bth, flags), 2u);
    EXPECT_EQ(offsetof(metaroce_bth, stream), 3u);
    EXPECT_EQ(offsetof(metaroce_bth, dqpn), 4u);
    EXPECT_EQ(offsetof(metaroce_bth, sqpn), 8u);
    EXPECT_EQ(offsetof(metaroce_bth, psn), 12u);
    EXPECT_EQ(offsetof(metaroce_bth, path), 16u);
    EXPECT_EQ(offsetof(metaroce_bth, reserved), 18u);
    EXPECT_EQ(offsetof(metaroce_bth, ts), 20u);
}

TEST(WireLayout, DethOffsets) {
    EXPECT_EQ(offsetof(metaroce_deth, addr), 0u);
    EXPECT_EQ(offsetof(metaroce_deth, key), 8u);
    EXPECT_EQ(offsetof(metaroce_deth, msn), 12u);
    EXPECT_EQ(offsetof(metaroce_deth, msg_len), 16u);
    EXPECT_EQ(offsetof(metaroce_deth, imm), 20u);
}

TEST(WireLayout, RreqOffsets) {
    EXPECT_EQ(offsetof(metaroce_rreq, va), 0u);
    EXPECT_EQ(offsetof(metaroce_rreq, rkey), 8u);
    EXPECT_EQ(offsetof(metaroce_rreq, len), 12u);
    EXPECT_EQ(offsetof(metaroce_rreq, offset), 16u);
    EXPECT_EQ(offsetof(metaroce_rreq, msn), 20u);
}

// Section 3.4: va, R_Key, MSN, swap or add, compare; the 64-bit fields 8-aligned.
TEST(WireLayout, AreqOffsets) {
    EXPECT_EQ(offsetof(metaroce_areq, va), 0u);
    EXPECT_EQ(offsetof(metaroce_areq, rkey), 8u);
    EXPECT_EQ(offsetof(metaroce_areq, msn), 12u);
    EXPECT_EQ(offsetof(metaroce_areq, swap_add), 16u);
    EXPECT_EQ(offsetof(metaroce_areq, compare), 24u);
    EXPECT_EQ(alignof(metaroce_areq), 8u);
}

TEST(WireLayout, AtomicOpcodes) {
    EXPECT_EQ(METAROCE_OP_ATOMIC_CMP_SWP, 0x06);
    EXPECT_EQ(METAROCE_OP_ATOMIC_FETCH_ADD, 0x07);
    EXPECT_EQ(METAROCE_OP_ATOMIC_RESP, 0x08);
}

TEST(WireLayout, AckOffsets) {
    EXPECT_EQ(offsetof(metaroce_ack, cum_psn), 0u);
    EXPECT_EQ(offsetof(metaroce_ack, nak_psn), 4u);
    EXPECT_EQ(offsetof(metaroce_ack, syndrome), 8u);
    EXPECT_EQ(offsetof(metaroce_ack, nak_arg), 9u);
    EXPECT_EQ(offsetof(metaroce_ack, ce_count), 10u);
    EXPECT_EQ(offsetof(metaroce_ack, fair_share), 12u);
    EXPECT_EQ(offsetof(metaroce_ack, echo_path), 14u);
    EXPECT_EQ(offsetof(metaroce_ack, ts_echo), 16u);
    EXPECT_EQ(offsetof(metaroce_ack, msn), 20u);
    EXPECT_EQ(offsetof(metaroce_ack, sack), 24u);
    EXPECT_EQ(sizeof(metaroce_ack::sack), 32u);
}

TEST(WireLayout, Constants) {
    EXPECT_EQ(METAROCE_UDP_PORT, 4793);
    EXPECT_EQ(METAROCE_ENTROPY_BASE, 0xc000);
    EXPECT_EQ(METAROCE_ENTROPY_MASK, 0x3fff);
    EXPECT_EQ(METAROCE_VERSION, 1);
    EXPECT_EQ(METAROCE_PSN_MASK, 0xffffff);
    EXPECT_EQ(METAROCE_QPN_MASK, 0xffffff);
    EXPECT_EQ(METAROCE_SACK_BITS, 256);
    EXPECT_EQ(METAROCE_SACK_WORDS, 8);

    EXPECT_EQ(METAROCE_OP_SEND, 0x01);
    EXPECT_EQ(METAROCE_OP_WRITE, 0x02);
    EXPECT_EQ(METAROCE_OP_READ_REQ, 0x03);
    EXPECT_EQ(METAROCE_OP_READ_RESP, 0x04);
    EXPECT_EQ(METAROCE_OP_UD_SEND, 0x05);
    EXPECT_EQ(METAROCE_OP_ACK, 0x10);

    EXPECT_EQ(METAROCE_F_FIRST, 0x01);
    EXPECT_EQ(METAROCE_F_LAST, 0x02);
    EXPECT_EQ(METAROCE_F_IMM, 0x04);
    EXPECT_EQ(METAROCE_F_SOLICITED, 0x08);
    EXPECT_EQ(METAROCE_F_ACK_REQ, 0x10);
    EXPECT_EQ(METAROCE_F_RETX, 0x20);
    EXPECT_EQ(METAROCE_F_INV, 0x40);
    EXPECT_EQ(METAROCE_F_ALL, 0x7f);

    EXPECT_EQ(METAROCE_ACK, 0);
    EXPECT_EQ(METAROCE_NAK_RNR, 1);
    EXPECT_EQ(METAROCE_NAK_INVALID_REQ, 2);
    EXPECT_EQ(METAROCE_NAK_REMOTE_ACCESS, 3);
    EXPECT_EQ(METAROCE_NAK_REMOTE_OP, 4);
    EXPECT_EQ(METAROCE_NAK_VERSION, 5);
}

// protocol.md section 11.1: the defaults every implementation starts from.
TEST(WireLayout, ProtocolDefaults) {
    EXPECT_EQ(METAROCE_ACK_EVERY, 32);
    EXPECT_EQ(METAROCE_ACK_EVERY, METAROCE_SACK_BITS / 8);  // an eighth of the window
    EXPECT_EQ(METAROCE_DELAYED_ACK_US, 200);
    EXPECT_EQ(METAROCE_ACK_AHEAD_OF_GAP, 4);
    EXPECT_EQ(METAROCE_REORDER_ALLOWANCE, 8);
    EXPECT_EQ(METAROCE_MAX_REORDER_ALLOWANCE, 128);
    EXPECT_EQ(METAROCE_MIN_REORDER_US, 1000);
    EXPECT_EQ(METAROCE_MIN_PROBE_US, 1000);
    EXPECT_EQ(METAROCE_MAX_PROBES, 2);
    EXPECT_EQ(METAROCE_MIN_RTO_US, 5000);
    EXPECT_EQ(METAROCE_INITIAL_RTO_US, 20000);
    EXPECT_EQ(METAROCE_MAX_RTO_US, 2000000);
    EXPECT_EQ(METAROCE_RTO_MIN_CWND, 16);
    EXPECT_EQ(METAROCE_RX_BUDGET, 512);
    EXPECT_EQ(METAROCE_MIN_FAIR_SHARE, 4);
}

TEST(WireLayout, SegmentOfThe1500ByteClassFitsAnEthernetFrameBehindIpv6) {
    EXPECT_EQ(METAROCE_SEGMENT_ETH1500, 1400);
    EXPECT_EQ(METAROCE_SEGMENT_ETH1500 % 8, 0);
    // IPv6 40 + UDP 8 + BTH + DETH + payload within a 1500-byte IP MTU.
    EXPECT_LE(40 + 8 + METAROCE_BTH_LEN + METAROCE_DETH_LEN + METAROCE_SEGMENT_ETH1500, 1500);
    EXPECT_EQ(metaroce_segment_size(1024), 1400u);
    for (const unsigned mtu : {256u, 512u, 2048u, 4096u})
        EXPECT_EQ(metaroce_segment_size(mtu), mtu);
}

TEST(WireLayout, ExtensionLengthsAndPayloads) {
    for (int op = 0; op < 256; ++op) {
        const auto opcode = static_cast<std::uint8_t>(op);
        int expected = -1;
        bool payload = false;
        switch (op) {
            case 0x01:
            case 0x02:
            case 0x04:
            case 0x05:
            case 0x08:
                expected = 24;
                payload = true;
                break;
            case 0x03:
                expected = 24;
                break;
            case 0x06:
            case 0x07:
                expected = 32;
                break;
            case 0x10:
                expected = 56;
                break;
            default:
                break;
        }
        EXPECT_EQ(metaroce_ext_len(opcode), expected) << "opcode " << op;
        EXPECT_EQ(metaroce_op_has_payload(opcode) != 0, payload) << "opcode " << op;
    }
}

TEST(WireLayout, PsnDiffMatchesHeader) {
    const std::uint32_t samples[] = {0,        1,        2,        0x7fffff, 0x800000,
                                     0x800001, 0xfffffe, 0xffffff, 0x123456, 0xabcdef};
    for (std::uint32_t a : samples) {
        for (std::uint32_t b : samples) {
            EXPECT_EQ(psn_diff(a, b), metaroce_psn_diff(a, b)) << a << " " << b;
        }
    }
    EXPECT_EQ(metaroce_psn_diff(0, 0xffffff), 1);
    EXPECT_EQ(metaroce_psn_diff(0xffffff, 0), -1);
    EXPECT_EQ(metaroce_psn_diff(0x800000, 0), -0x800000);
    EXPECT_EQ(metaroce_psn_diff(0x7fffff, 0), 0x7fffff);
}

// Byte-exact encodings, written out by hand from the diagrams of protocol.md.
TEST(WireLayout, GoldenWrite) {
    Packet p;
    p.bth.opcode = Opcode::Write;
    p.bth.flags = METAROCE_F_FIRST | METAROCE_F_LAST | METAROCE_F_ACK_REQ;
    p.bth.dqpn = 0x010203;
    p.bth.sqpn = 0x040506;
    p.bth.psn = 0xabcdef;
    p.bth.path = 0x0102;
    p.bth.ts = 0x11223344;
    p.ext = Deth{0x0102030405060708ull, 0xa1a2a3a4, 0xb1b2b3b4, 3, 0};
    p.payload = {0xee, 0xff, 0x00};
    const std::vector<std::uint8_t> expected = {
        0x10, 0x02, 0x13, 0x00,                          // version 1 | opcode | flags | stream
        0x00, 0x01, 0x02, 0x03,                          // dqpn
        0x00, 0x04, 0x05, 0x06,                          // sqpn
        0x00, 0xab, 0xcd, 0xef,                          // psn
        0x01, 0x02, 0x00, 0x00,                          // path | reserved
        0x11, 0x22, 0x33, 0x44,                          // ts
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,  // addr
        0xa1, 0xa2, 0xa3, 0xa4,                          // key
        0xb1, 0xb2, 0xb3, 0xb4,                          // msn
        0x00, 0x00, 0x00, 0x03,                          // msg_len
        0x00, 0x00, 0x00, 0x00,                          // imm
        0xee, 0xff, 0x00,                                // payload
    };
    EXPECT_EQ(encode(p), expected);
    const auto decoded = decode(expected, {4096});
    ASSERT_TRUE(decoded.ok()) << decoded.error();
    EXPECT_EQ(*decoded, p);
    // Byte 3 is the stream: version 1 uses stream 0 only.
    p.bth.stream = 0x07;
    std::vector<std::uint8_t> other_stream = expected;
    other_stream[3] = 0x07;
    EXPECT_EQ(encode(p), other_stream);
    EXPECT_FALSE(decode(other_stream, {4096}).ok());
}

TEST(WireLayout, GoldenReadRequest) {
    Packet p;
    p.bth.opcode = Opcode::ReadRequest;
    p.bth.flags = METAROCE_F_ACK_REQ | METAROCE_F_RETX;
    p.bth.dqpn = 1;
    p.bth.sqpn = 2;
    p.bth.psn = 3;
    p.ext = ReadReq{0x1122334455667788ull, 0x99aabbcc, 0x2000, 0x1000, 0x42};
    const std::vector<std::uint8_t> expected = {
        0x10, 0x03, 0x30, 0x00, 0, 0, 0, 1, 0,    0,    0,    2,    0,    0,    0,    3,
        0,    0,    0,    0,    0, 0, 0, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // va
        0x99, 0xaa, 0xbb, 0xcc,                                                              // rkey
        0x00, 0x00, 0x20, 0x00,                                                              // len
        0x00, 0x00, 0x10, 0x00,  // offset
        0x00, 0x00, 0x00, 0x42,  // msn
    };
    EXPECT_EQ(encode(p), expected);
    const auto decoded = decode(expected, {4096});
    ASSERT_TRUE(decoded.ok()) << decoded.error();
    EXPECT_EQ(*decoded, p);
}

TEST(WireLayout, GoldenAtomicCompareSwap) {
    Packet p;
    p.bth.opcode = Opcode::AtomicCmpSwp;
    p.bth.flags = METAROCE_F_ACK_REQ;
    p.bth.dqpn = 1;
    p.bth.sqpn = 2;
    p.bth.psn = 3;
    p.ext = AtomicReq{0x1122334455667788ull, 0x99aabbcc, 0x42, 0x0102030405060708ull,
                      0xf1f2f3f4f5f6f7f8ull};
    const std::vector<std::uint8_t> expected = {
        0x10, 0x06, 0x10, 0x00, 0,    0,    0,    1,    0,    0,    0,
        2,    0,    0,    0,    3,    0,    0,    0,    0,    0,    0,
        0,    0,    0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,  // va
        0x99, 0xaa, 0xbb, 0xcc,                                      // rkey
        0x00, 0x00, 0x00, 0x42,                                      // msn
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,              // swap
        0xf1, 0xf2, 0xf3, 0xf4, 0xf5, 0xf6, 0xf7, 0xf8,              // compare
    };
    EXPECT_EQ(encode(p), expected);
    const auto decoded = decode(expected, {4096});
    ASSERT_TRUE(decoded.ok()) << decoded.error();
    EXPECT_EQ(*decoded, p);
}

TEST(WireLayout, GoldenAtomicResponse) {
    Packet p;
    p.bth.opcode = Opcode::AtomicResponse;
    p.bth.flags = METAROCE_F_FIRST | METAROCE_F_LAST | METAROCE_F_RETX;
    p.bth.dqpn = 1;
    p.bth.sqpn = 2;
    p.bth.psn = 3;
    p.ext = Deth{0, 0, 0x42, 8, 0};
    p.payload = {0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x02};  // the value 0x102
    const std::vector<std::uint8_t> expected = {
        0x10, 0x08, 0x23, 0x00, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3,  // flags FIRST|LAST|RETX
        0,    0,    0,    0,    0, 0, 0, 0,                          // path, reserved, ts
        0,    0,    0,    0,    0, 0, 0, 0,                          // addr
        0,    0,    0,    0,                                         // key
        0,    0,    0,    0x42,                                      // msn
        0,    0,    0,    8,                                         // msg_len
        0,    0,    0,    0,                                         // imm
        0,    0,    0,    0,    0, 0, 1, 2,                          // the value, big-endian
    };
    EXPECT_EQ(encode(p), expected);
    const auto decoded = decode(expected, {4096});
    ASSERT_TRUE(decoded.ok()) << decoded.error();
    EXPECT_EQ(*decoded, p);
}

TEST(WireLayout, GoldenNakWithSackBitmap) {
    Packet p;
    p.bth.opcode = Opcode::Ack;
    p.bth.dqpn = 0x0a;
    p.bth.sqpn = 0x0b;
    p.bth.psn = 0x000100;
    p.bth.path = 5;
    p.bth.ts = 0x01020304;
    Ack a;
    a.cum_psn = 0x000100;
    a.nak_psn = 0x000105;
    a.syndrome = Syndrome::RnrNak;
    a.nak_arg = 14;
    a.ce_count = 0x0203;
    a.fair_share = 0x0040;
    a.echo_path = 0x0007;
    a.ts_echo = 0xa0b0c0d0;
    a.msn = 9;
    // PSN cum+1 (bit 0) and cum+1+33 (bit 33) received: word 0 MSB, word 1 second MSB.
    a.sack = {0x80000000u, 0x40000000u, 0, 0, 0, 0, 0, 0};
    p.ext = a;
    std::vector<std::uint8_t> expected = {
        0x10, 0x10, 0x00, 0x00, 0,    0,    0,    0x0a, 0,    0,    0,    0x0b, 0,    0, 0x01,
        0x00, 0,    5,    0,    0,    0x01, 0x02, 0x03, 0x04, 0x00, 0x00, 0x01, 0x00,  // cum_psn
        0x00, 0x00, 0x01, 0x05,                                                        // nak_psn
        0x01, 0x0e, 0x02, 0x03,                          // syndrome | nak_arg | ce_count
        0x00, 0x40, 0x00, 0x07,                          // fair_share | echo_path
        0xa0, 0xb0, 0xc0, 0xd0,                          // ts_echo
        0x00, 0x00, 0x00, 0x09,                          // msn
        0x80, 0x00, 0x00, 0x00, 0x40, 0x00, 0x00, 0x00,  // sack words 0, 1
    };
    expected.resize(24 + 56, 0);  // words 2..7 are zero
    EXPECT_EQ(encode(p), expected);
    const auto decoded = decode(expected, {4096});
    ASSERT_TRUE(decoded.ok()) << decoded.error();
    EXPECT_EQ(*decoded, p);
}

}  // namespace
}  // namespace metaroce
