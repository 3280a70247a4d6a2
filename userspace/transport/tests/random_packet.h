// A random v2 packet every field of which a correct sender could send, for the codec's tests
// (wire_test.cpp) and its differential test against the model (differential_wire_test.cpp).
#pragma once

#include <cstdint>
#include <iterator>
#include <random>
#include <vector>

extern "C" {
#include "mrc_wire.h"
}

namespace mrcore_test {

using Bytes = std::vector<uint8_t>;

// Its bytes, as the core builds them; its fields in @out.
inline Bytes random_valid(std::mt19937_64 &rng, mrc_pkt *out) {
    static const uint8_t ops[] = {
        MRC_OP_SEND,     MRC_OP_SEND_IMM,  MRC_OP_SEND_INV,    MRC_OP_WRITE,     MRC_OP_WRITE_IMM,
        MRC_OP_READ_REQ, MRC_OP_READ_RESP, MRC_OP_CMP_SWP,     MRC_OP_FETCH_ADD, MRC_OP_ATOMIC_RESP,
        MRC_OP_NAK,      MRC_OP_UD_SEND,   MRC_OP_UD_SEND_IMM, MRC_OP_ACK};
    uint8_t op = ops[rng() % std::size(ops)];
    uint16_t mask = mrc_opcode[op].mask;
    mrc_pkt p{};
    p.hdr.opcode = op;
    p.hdr.path = rng() % MRC_MAX_PATHS;
    p.hdr.conn = uint32_t(rng());
    Bytes payload;
    if (mask & MRC_OPM_SEQ) {
        p.hdr.flags = rng() % (MRC_F_ALL + 1);
        p.hdr.seq = uint32_t(rng());
        p.hdr.floor_delta = rng() % (MRC_MAX_FLOOR_DELTA + 1);
        p.hdr.stream = uint16_t(rng());
        p.hdr.ssn = uint32_t(rng());
        p.hdr.msn = uint32_t(rng());
    } else if (mask & MRC_OPM_DETH) {
        p.hdr.flags = rng() % 2 ? MRC_F_SOLICITED : 0;
    }
    if (mask & MRC_OPM_PAYLOAD) {
        uint32_t n = 1 + rng() % 40;
        payload.resize(n);
        p.hdr.msg_len = n;
        if (mask & MRC_OPM_SEG) {
            p.hdr.msg_len = n + rng() % 50000;
            p.hdr.offset = uint32_t(rng() % (p.hdr.msg_len - n + 1));
        }
    }
    if (op == MRC_OP_ATOMIC_RESP || (mask & MRC_OPM_ATOMIC)) {
        p.hdr.msg_len = 8;
        p.hdr.offset = 0;
        if (op == MRC_OP_ATOMIC_RESP) payload.assign(8, 0x11);
    }
    if (op == MRC_OP_READ_REQ) p.hdr.msg_len = uint32_t(rng());
    if (mask & MRC_OPM_RETH) {
        p.reth.va = rng() % (UINT64_MAX - p.hdr.msg_len);
        p.reth.rkey = uint32_t(rng());
    }
    if (mask & MRC_OPM_ATOMIC) {
        p.atomic.va = rng() % (UINT64_MAX / 2);
        p.atomic.rkey = uint32_t(rng());
        p.atomic.swap_add = rng();
        p.atomic.compare = rng();
    }
    if (mask & MRC_OPM_DETH) {
        p.deth.qkey = uint32_t(rng());
        p.deth.src_qpn = uint32_t(rng());
    }
    if (mask & MRC_OPM_ACK) {
        p.ack.path.cum = uint32_t(rng());
        for (auto &w : p.ack.path.bits) w = rng();
        p.ack.path.ack_delay_us = uint32_t(rng() % 70000);
        p.ack.path.ce = uint32_t(rng() % 70000);
        p.ack.share = uint16_t(rng());
        p.ack.capacity_mbps = uint32_t(rng());
    }
    if (mask & MRC_OPM_NAK) {
        p.nak.syndrome = MRC_NAK_RNR + rng() % 4;
        p.nak.arg = uint8_t(rng());
        p.nak.ssn = uint32_t(rng());
    }
    if (mask & MRC_OPM_IMM) p.imm = uint32_t(rng());
    for (auto &c : payload) c = uint8_t(rng());
    Bytes b(MRC_MAX_HDRS_LEN);
    b.resize(mrc_wire_build(&p, b.data(), uint32_t(b.size())));
    b.insert(b.end(), payload.begin(), payload.end());
    *out = p;
    return b;
}

}  // namespace mrcore_test
