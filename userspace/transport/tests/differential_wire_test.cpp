// The differential test of protocol v2's codec (protocol-v2.md section 7): the core's parser and
// builder (mrc_wire.c) against the C++ model's (softmetaroce::v2::parse, build_headers), written
// apart from the spec. The same bytes, random and mutated from valid packets, go to both parsers:
// the verdict, the reason for a refusal and every field of what parses must be the same; the same
// packets go to both builders: the bytes must be the same.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "random_packet.h"
#include "softmetaroce/v2/wire.h"

extern "C" {
#include "mrc_wire.h"
}

namespace {

namespace m = softmetaroce::v2;

using mrcore_test::Bytes;
using mrcore_test::random_valid;

// The model's packet as the core's fields, to compare the two parsers' output.
std::string differ(const mrc_pkt &c, const m::WirePacket &w, size_t len) {
    const mrc_hdr &h = c.hdr;
    uint16_t mask = mrc_opcode[h.opcode].mask;
    std::ostringstream o;
    auto chk = [&](const char *name, uint64_t a, uint64_t b) {
        if (a != b) o << name << ": core " << a << ", model " << b << "; ";
    };
    chk("flags", h.flags, w.flags);
    chk("opcode", h.opcode, w.opcode);
    chk("path", h.path, w.path);
    chk("conn", h.conn, w.conn);
    chk("seq", h.seq, w.seq);
    chk("floor", h.floor_delta, w.floor_delta);
    chk("stream", h.stream, w.stream);
    chk("ssn", h.ssn, w.ssn);
    chk("msn", h.msn, w.msn);
    chk("offset", h.offset, w.offset);
    chk("msg_len", h.msg_len, w.msg_len);
    chk("payload", c.payload_len, w.payload_len);
    chk("payload at", len - c.payload_len, w.payload_offset);
    if (mask & MRC_OPM_RETH) {
        chk("va", c.reth.va, w.va);
        chk("rkey", c.reth.rkey, w.rkey);
    }
    if (mask & MRC_OPM_ATOMIC) {
        chk("va", c.atomic.va, w.va);
        chk("rkey", c.atomic.rkey, w.rkey);
        chk("swap_add", c.atomic.swap_add, w.swap_add);
        chk("compare", c.atomic.compare, w.compare);
    }
    if (mask & MRC_OPM_DETH) {
        chk("qkey", c.deth.qkey, w.qkey);
        chk("src_qpn", c.deth.src_qpn, w.src_qpn);
    }
    if (mask & MRC_OPM_IMM) chk("imm", c.imm, w.imm);
    if (mask & MRC_OPM_NAK) {
        chk("syndrome", c.nak.syndrome, w.syndrome);
        chk("rnr", c.nak.arg, w.rnr_timer);
        chk("nak ssn", c.nak.ssn, w.nak_ssn);
    }
    if (mask & MRC_OPM_ACK) {
        chk("cum", c.ack.path.cum, w.ack_cum);
        for (int i = 0; i < 4; i++) chk("bits", c.ack.path.bits[i], w.ack_bits[i]);
        chk("delay", c.ack.path.ack_delay_us, w.ack_delay_us);
        chk("ce", c.ack.path.ce, w.ack_ce);
        chk("share", c.ack.share, w.share);
        chk("capacity", c.ack.capacity_mbps, w.capacity_mbps);
    }
    return o.str();
}

// The same packet's fields for the model's builder.
m::WirePacket as_model(const mrc_pkt &p) {
    m::WirePacket w;
    const mrc_hdr &h = p.hdr;
    w.flags = h.flags;
    w.opcode = h.opcode;
    w.path = h.path;
    w.conn = h.conn;
    w.seq = h.seq;
    w.floor_delta = h.floor_delta;
    w.stream = h.stream;
    w.ssn = h.ssn;
    w.msn = h.msn;
    w.offset = h.offset;
    w.msg_len = h.msg_len;
    uint16_t mask = mrc_opcode[h.opcode].mask;
    if (mask & MRC_OPM_RETH) w.va = p.reth.va, w.rkey = p.reth.rkey;
    if (mask & MRC_OPM_ATOMIC) {
        w.va = p.atomic.va;
        w.rkey = p.atomic.rkey;
        w.swap_add = p.atomic.swap_add;
        w.compare = p.atomic.compare;
    }
    if (mask & MRC_OPM_DETH) w.qkey = p.deth.qkey, w.src_qpn = p.deth.src_qpn;
    if (mask & MRC_OPM_IMM) w.imm = p.imm;
    if (mask & MRC_OPM_NAK) {
        w.syndrome = p.nak.syndrome;
        w.rnr_timer = p.nak.arg;
        w.nak_ssn = p.nak.ssn;
    }
    if (mask & MRC_OPM_ACK) {
        w.ack_cum = p.ack.path.cum;
        for (int i = 0; i < 4; i++) w.ack_bits[i] = p.ack.path.bits[i];
        w.ack_delay_us = p.ack.path.ack_delay_us;
        w.ack_ce = p.ack.path.ce;
        w.share = p.ack.share;
        w.capacity_mbps = p.ack.capacity_mbps;
    }
    return w;
}

TEST(DifferentialWire, BuildersWriteTheSameBytes) {
    std::mt19937_64 rng(21);
    for (int i = 0; i < 20000; i++) {
        mrc_pkt p;
        Bytes b = random_valid(rng, &p);
        auto mb = m::build_headers(as_model(p));
        ASSERT_TRUE(mb.has_value());
        ASSERT_EQ(Bytes(b.begin(), b.begin() + long(mb->size())), *mb)
            << "opcode " << int(p.hdr.opcode);
        ASSERT_EQ(m::header_length(p.hdr.opcode), mrc_opcode[p.hdr.opcode].length);
    }
    for (unsigned op = 0; op < 256; op++) {
        bool c = op < MRC_NUM_OPCODES && mrc_opcode[op].name;
        EXPECT_EQ(c, m::header_length(uint8_t(op)) != 0) << op;
    }
}

TEST(DifferentialWire, ParsersAgreeOnEveryByteString) {
    std::mt19937_64 rng(22);
    int accepted = 0;
    std::vector<int> reasons(MRC_WIRE_NUM_ERRORS);
    std::set<std::string> kinds;
    for (int i = 0; i < 300000; i++) {
        mrc_pkt p;
        Bytes b = random_valid(rng, &p);
        switch (i % 4) {
            case 0:
                break;  // as sent
            case 1:
            case 2:
                for (int flips = 1 + int(rng() % 3); flips > 0; flips--)
                    b[rng() % b.size()] ^= uint8_t(1u << (rng() % 8));
                if (rng() % 8 == 0) b.resize(rng() % (b.size() + 1));
                break;
            case 3:
                b.resize(rng() % 100);
                for (auto &c : b) c = uint8_t(rng());
                if (!b.empty()) b[0] = uint8_t(MRC_VERSION << 4 | (b[0] & 0xf));
                break;
        }
        mrc_pkt c;
        m::WirePacket w;
        int cv = int(mrc_wire_parse(b.data(), uint32_t(b.size()), &c));
        int mv = int(m::parse(b, w));
        reasons[cv]++;
        if (cv != mv) {
            // One example of each kind of disagreement, then the test fails.
            std::string kind = std::string(mrc_wire_error_name(mrc_wire_error(cv))) + "/" +
                               std::to_string(mv) + " opcode " +
                               std::to_string(b.size() > 1 ? b[1] : -1);
            if (kinds.insert(kind).second) {
                std::ostringstream o;
                for (uint8_t x : b) o << std::hex << int(x) << ' ';
                ADD_FAILURE() << "iteration " << i << ": core/model " << kind << ": " << o.str();
            }
            continue;
        }
        if (cv != MRC_WIRE_OK) continue;
        accepted++;
        std::string d = differ(c, w, b.size());
        ASSERT_EQ(d, "") << "iteration " << i;
    }
    EXPECT_GT(accepted, 50000);
    for (int e = 0; e < MRC_WIRE_NUM_ERRORS; e++)
        EXPECT_GT(reasons[e], 0) << mrc_wire_error_name(mrc_wire_error(e));
}

}  // namespace
