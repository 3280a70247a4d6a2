// What a receiver drops, counts and otherwise ignores (protocol.md sections 1, 2, 3, 12, 13):
// every case sends packets the DUT must drop, each followed by a valid probe one PSN before
// the dropped packet's, whose ACK must show that nothing of the dropped packet was accepted.
#include <cstring>
#include <thread>

#include "harness.h"

namespace metaroce::compliance {
namespace {

constexpr std::uint64_t kArea = 0x1000;

// Sends each packet the DUT must drop, after it a probe; checks `counter` grew by their number.
class Dropper {
  public:
    explicit Dropper(Conn& c) : c_(c), next_(c.rq_psn()), counters_(c.env()) {}

    // A valid WRITE of 64 bytes to kArea at the PSN after the next probe: a base to mutate.
    Packet write() const { return c_.write(psn_next(next_), kArea, bytes_of(64, next_)); }
    Psn next_psn() const { return psn_next(next_); }

    void drop(const std::vector<std::uint8_t>& bytes, const IpAddress* from = nullptr) {
        c_.expect_dropped(bytes, next_, from);
        next_ = psn_next(next_);
        ++dropped_;
    }
    void drop(const Packet& p) { drop(encode(p)); }
    // Dropped too, but not counted in the counter expect_counted checks.
    void drop_uncounted(const Packet& p) {
        c_.expect_dropped(encode(p), next_);
        next_ = psn_next(next_);
    }

    void expect_counted(const std::string& counter) { counters_.expect_delta(counter, dropped_); }
    CounterCheck& counters() { return counters_; }

  private:
    Conn& c_;
    Psn next_;
    std::uint64_t dropped_ = 0;
    CounterCheck counters_;
};

void expect_unplaced(Conn& c, const std::vector<std::uint8_t>& before) {
    expect(std::memcmp(c.mr().data() + kArea, before.data(), before.size()) == 0,
           "a packet the DUT must drop changed its memory");
}

std::vector<std::uint8_t> snapshot(Conn& c) {
    return {c.mr().data() + kArea, c.mr().data() + kArea + 4096};
}

void version_zero_dropped(Env& env) {
    Conn c(env);
    const auto before = snapshot(c);
    Dropper d(c);
    std::vector<std::uint8_t> b = encode(d.write());
    b[0] = 0x00;
    d.drop(b);  // a lower, unknown version: dropped and counted, no NAK
    expect_unplaced(c, before);
    d.expect_counted("rx_bad_version");
}

void version_newer_nak(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    CounterCheck counters(env);
    const auto before = snapshot(c);
    Packet w = c.write(r, kArea, bytes_of(64, 1));
    w.bth.ts = 0;
    std::vector<std::uint8_t> b = encode(w);
    b[0] = 0x20;  // version 2
    c.send_bytes(b, 5);
    const Packet nak = c.expect_nak(Syndrome::Version, r);
    expect(nak.ack().nak_arg == METAROCE_VERSION,
           format("VERSION NAK names version %u as the highest spoken, expected %u",
                  nak.ack().nak_arg, METAROCE_VERSION));
    expect(nak.ack().cum_psn == r, "the newer-version packet was accepted: " + describe(nak));
    expect_unplaced(c, before);
    c.probe(r, psn_next(r));
    c.expect_state(IBV_QPS_RTS);
    counters.expect_delta("rx_bad_version", 1);
}

void version_reserved_nibble(Env& env) {
    Conn c(env);
    const auto before = snapshot(c);
    Dropper d(c);
    for (const std::uint8_t byte0 : {0x11, 0x18}) {
        std::vector<std::uint8_t> b = encode(d.write());
        b[0] = byte0;
        d.drop(b);
    }
    expect_unplaced(c, before);
    d.expect_counted("rx_malformed");
}

void unknown_opcode(Env& env) {
    Conn c(env);
    const auto before = snapshot(c);
    Dropper d(c);
    // 0x06..0x08 are the atomics (section 3.4): the first unknown values after them and
    // around ACK (0x10).
    for (const std::uint8_t op : {0x00, 0x09, 0x0a, 0x0f, 0x11, 0x82, 0xff}) {
        std::vector<std::uint8_t> b = encode(d.write());
        b[1] = op;
        d.drop(b);
    }
    expect_unplaced(c, before);
    d.expect_counted("rx_malformed");
}

void reserved_flags(Env& env) {
    Conn c(env);
    const auto before = snapshot(c);
    Dropper d(c);
    // 0x80 is the one reserved flag bit (0x40 is INV, valid on the last packet of a SEND only:
    // inv_on_write and the cases after it).
    for (Packet p : {d.write(), c.send_message(d.next_psn(), 0, bytes_of(16, 2))[0]}) {
        p.bth.psn = d.next_psn();
        p.bth.flags |= 0x80;
        d.drop(p);
    }
    expect_unplaced(c, before);
    d.expect_counted("rx_malformed");
}

// INV (0x40) marks the last packet of a SEND with invalidate, with the key to invalidate in
// the immediate field (protocol.md section 3). Each case below breaks one rule of it and must
// be dropped and counted as malformed, with no state changed: nothing placed, no NAK, no
// receive completed, the QP usable. (A well-formed one is NAKed by a DUT without fast-
// registration MRs: send_with_inv_bad_key.)

// INV before the last packet of a SEND: the first of two, a middle one of three.
void inv_without_last(Env& env) {
    Conn c(env);
    c.post_recv(1, 0, 8192);
    Dropper d(c);
    const std::uint32_t mtu = c.mtu();
    Packet first = c.base(Opcode::Send, d.next_psn(), flag::kFirst | flag::kInv);
    first.ext = Deth{0, 0, 0, mtu + 16, c.mr().rkey()};
    first.payload = bytes_of(mtu, 30);
    d.drop(first);
    Packet middle = c.base(Opcode::Send, d.next_psn(), flag::kInv | flag::kAckReq);
    middle.ext = Deth{mtu, 0, 0, 3 * mtu, c.mr().rkey()};
    middle.payload = bytes_of(mtu, 31);
    d.drop(middle);
    // With an immediate field of 0 too: INV itself is what is wrong there.
    middle.bth.psn = d.next_psn();
    middle.deth().imm = 0;
    d.drop(middle);
    expect(!c.poll_recv(50).has_value(), "a dropped SEND with INV completed a receive");
    c.expect_state(IBV_QPS_RTS);
    d.expect_counted("rx_malformed");
}

// INV together with IMM (the two share the immediate field): on a one-packet SEND and on the
// last packet of a two-packet one.
void inv_with_imm(Env& env) {
    Conn c(env);
    c.post_recv(1, 0, 8192);
    Dropper d(c);
    const std::uint32_t mtu = c.mtu();
    Packet single = c.send_message(d.next_psn(), 0, bytes_of(32, 32), 0x1234)[0];
    single.bth.flags |= flag::kInv;
    single.deth().imm = c.mr().rkey();
    d.drop(single);
    Packet last = c.send_message(d.next_psn(), 0, bytes_of(mtu + 16, 33), 0x1234).back();
    last.bth.psn = d.next_psn();
    last.bth.flags |= flag::kInv;
    d.drop(last);
    expect(!c.poll_recv(50).has_value(), "a dropped SEND with INV and IMM completed a receive");
    c.expect_state(IBV_QPS_RTS);
    d.expect_counted("rx_malformed");
}

// INV on a WRITE (and on a WRITE with immediate): a flag the opcode does not allow.
void inv_on_write(Env& env) {
    Conn c(env);
    c.post_recv(1, 0, 8192);
    const auto before = snapshot(c);
    Dropper d(c);
    Packet w = d.write();
    w.bth.flags |= flag::kInv;
    w.deth().imm = c.mr().rkey();
    d.drop(w);
    w = d.write();
    w.bth.flags |= flag::kInv;  // its immediate field 0
    d.drop(w);
    w = d.write();
    w.bth.flags |= flag::kInv | flag::kImm;
    w.deth().imm = 0x5678;
    d.drop(w);
    expect_unplaced(c, before);
    expect(!c.poll_recv(50).has_value(), "a dropped WRITE with INV completed a receive");
    c.expect_state(IBV_QPS_RTS);
    d.expect_counted("rx_malformed");
}

void reserved_bth_fields(Env& env) {
    Conn c(env);
    const auto before = snapshot(c);
    Dropper d(c);
    // The top byte of the 24-bit dqpn, sqpn and PSN fields, and the reserved half-word.
    for (const std::size_t at : {4u, 8u, 12u, 18u, 19u}) {
        std::vector<std::uint8_t> b = encode(d.write());
        b[at] |= 0x01;
        d.drop(b);
    }
    expect_unplaced(c, before);
    d.expect_counted("rx_malformed");
}

void stream_not_zero(Env& env) {
    Conn c(env);
    const auto before = snapshot(c);
    Dropper d(c);
    for (const std::uint8_t stream : {1, 255}) {
        Packet p = d.write();
        p.bth.stream = stream;
        d.drop(p);
    }
    expect_unplaced(c, before);
    d.expect_counted("rx_malformed");
}

void flags_not_allowed(Env& env) {
    Conn c(env);
    Dropper d(c);
    for (const std::uint8_t f : {flag::kFirst, flag::kLast, flag::kImm, flag::kSolicited}) {
        d.drop(c.read_request(d.next_psn(), c.mr().addr(), c.mr().rkey(), 64, 0, 0,
                              flag::kAckReq | f));
    }
    Packet resp =
        c.base(Opcode::ReadResponse, d.next_psn(), flag::kFirst | flag::kLast | flag::kAckReq);
    resp.ext = Deth{0, 0, 0, 4, 0};
    resp.payload = {1, 2, 3, 4};
    d.drop(resp);
    Packet ack = c.ack(c.sq_psn());
    ack.bth.flags = flag::kAckReq;
    d.drop(ack);
    d.expect_counted("rx_malformed");
}

// Malformed atomics (sections 3, 3.4, 12), to a QP and a region that allow remote atomics,
// so that each would be executed if it were well formed: an AREQ cut short, a payload after
// it, flags an atomic request does not allow, a FETCH_ADD with a compare value; ATOMIC_RESPs
// (the responder's packet, sent to the DUT's QP) without FIRST and LAST, with other than 8
// bytes, with DETH fields other than their row, cut short. All malformed: the word unchanged,
// no answer, no completion, the QP unharmed. A well-formed ATOMIC_RESP for no atomic of the
// DUT's is not malformed but a duplicate response (`rx_duplicate`), dropped all the same.
void atomic_malformed(Env& env) {
    ConnOptions o;
    o.access |= IBV_ACCESS_REMOTE_ATOMIC;
    Conn c(env, o);
    DutRegion at(env, 4096,
                 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC);
    constexpr std::uint64_t kValue = 0x0123456789abcdefull;
    std::memcpy(at.data() + 0x100, &kValue, 8);
    const std::uint64_t va = at.addr() + 0x100;
    Dropper d(c);
    const auto fetch_add = [&](std::uint8_t flags = flag::kAckReq) {
        return c.atomic(Opcode::AtomicFetchAdd, d.next_psn(), va, at.rkey(), 1, 0, 0, flags);
    };
    for (const std::size_t n : {24u + 16u, 24u + 31u}) {
        std::vector<std::uint8_t> b = encode(fetch_add());
        b.resize(n);
        d.drop(b);
    }
    Packet p = fetch_add();
    p.payload = bytes_of(8, 40);
    d.drop(p);
    p = c.atomic(Opcode::AtomicCmpSwp, d.next_psn(), va, at.rkey(), 1, kValue);
    p.payload = {1};
    d.drop(p);
    for (const std::uint8_t f :
         {std::uint8_t{flag::kFirst | flag::kLast}, flag::kImm, flag::kSolicited}) {
        d.drop(fetch_add(flag::kAckReq | f));
    }
    p = fetch_add();
    p.areq().compare = 1;
    d.drop(p);
    const auto response = [&](std::uint8_t flags) {
        Packet r = c.base(Opcode::AtomicResponse, d.next_psn(), flags);
        r.ext = Deth{0, 0, 0, 8, 0};
        r.payload = bytes_of(8, 41);
        return r;
    };
    for (const std::uint8_t f : {std::uint8_t{0}, flag::kFirst, flag::kLast, flag::kRetx}) {
        d.drop(response(f));
    }
    p = response(flag::kFirst | flag::kLast);
    p.payload.resize(4);
    p.deth().msg_len = 4;
    d.drop(p);
    p = response(flag::kFirst | flag::kLast);
    p.payload.resize(16);
    d.drop(p);
    p = response(flag::kFirst | flag::kLast);
    p.deth().key = at.rkey();
    d.drop(p);
    p = response(flag::kFirst | flag::kLast);
    p.deth().addr = 8;
    d.drop(p);
    p = response(flag::kFirst | flag::kLast);
    p.deth().imm = 1;
    d.drop(p);
    std::vector<std::uint8_t> b = encode(response(flag::kFirst | flag::kLast));
    b.resize(24 + 23);
    d.drop(b);
    d.expect_counted("rx_malformed");
    CounterCheck duplicates(env);
    d.drop_uncounted(response(flag::kFirst | flag::kLast));
    duplicates.expect_delta("rx_duplicate", 1);
    std::uint64_t now;
    std::memcpy(&now, at.data() + 0x100, 8);
    expect(now == kValue, "a malformed atomic changed the DUT's memory");
    expect(!c.poll_send(0).has_value(), "a dropped ATOMIC_RESP completed a work request");
    c.expect_state(IBV_QPS_RTS);
}

void ud_send_on_rc(Env& env) {
    Conn c(env);
    Dropper d(c);
    Packet ud = c.base(Opcode::UdSend, d.next_psn(), flag::kFirst | flag::kLast);
    ud.ext = Deth{0, 0x11111111, 0, 16, 0};
    ud.payload = bytes_of(16, 2);
    d.drop(ud);
    // Which counter is the implementation's choice: the packet is malformed for the QP, or
    // of a kind its state does not accept.
    expect(d.counters().delta("rx_malformed") + d.counters().delta("rx_bad_qp_state") == 1 ||
               !env.has_counters(),
           "the UD_SEND to an RC QP was not counted (rx_malformed or rx_bad_qp_state)");
}

void zero_fields(Env& env) {
    Conn c(env);
    c.post_recv(1, 0, 4096);
    const auto before = snapshot(c);
    Dropper d(c);
    Packet send = c.send_message(d.next_psn(), 0, bytes_of(32, 3))[0];
    send.deth().key = 5;  // SEND: key must be 0
    d.drop(send);
    send = c.send_message(d.next_psn(), 0, bytes_of(32, 3))[0];
    send.deth().imm = 7;  // immediate without IMM
    d.drop(send);
    expect_unplaced(c, before);
    expect(!c.poll_recv(50).has_value(), "a dropped SEND completed a receive");
    d.expect_counted("rx_malformed");
}

void write_imm_without_flag(Env& env) {
    Conn c(env);
    const auto before = snapshot(c);
    Dropper d(c);
    // A WRITE's immediate field is "with IMM" (section 3.1): without IMM it must be 0.
    Packet w = d.write();
    w.deth().imm = 9;
    d.drop(w);
    expect_unplaced(c, before);
    d.expect_counted("rx_malformed");
}

void truncated(Env& env) {
    Conn c(env);
    Dropper d(c);
    const std::vector<std::uint8_t> full = encode(d.write());
    for (const std::size_t n : {0u, 1u, 23u, 24u, 47u}) {
        d.drop(std::vector<std::uint8_t>(full.begin(), full.begin() + n));
    }
    std::vector<std::uint8_t> ack = encode(c.ack(c.sq_psn()));
    ack.resize(24 + 55);
    d.drop(ack);
    d.expect_counted("rx_malformed");
}

void payload_not_allowed(Env& env) {
    Conn c(env);
    Dropper d(c);
    Packet rreq = c.read_request(d.next_psn(), c.mr().addr(), c.mr().rkey(), 64);
    rreq.payload = {1, 2, 3, 4};
    d.drop(rreq);
    Packet ack = c.ack(c.sq_psn());
    ack.payload = bytes_of(8, 4);
    d.drop(ack);
    d.expect_counted("rx_malformed");
}

void oversized_payload_mtu(Env& env) {
    Conn c(env);
    const auto before = snapshot(c);
    Dropper d(c);
    // More payload than the path MTU (but within the largest MTU): malformed (section 12),
    // dropped and counted; no state changes (no NAK, the QP stays usable).
    Packet w = c.write(d.next_psn(), kArea, bytes_of(2 * c.mtu(), 5));
    d.drop(w);
    expect_unplaced(c, before);
    c.expect_state(IBV_QPS_RTS);
    d.expect_counted("rx_malformed");
}

void oversized_payload_4k(Env& env) {
    Conn c(env);
    const auto before = snapshot(c);
    Dropper d(c);
    d.drop(c.write(d.next_psn(), kArea, bytes_of(4100, 6)));
    expect_unplaced(c, before);
    d.expect_counted("rx_malformed");
}

void inconsistent_length(Env& env) {
    Conn c(env);
    c.post_recv(1, 0, 8192);
    const auto before = snapshot(c);
    Dropper d(c);
    Packet send = c.send_message(d.next_psn(), 0, bytes_of(200, 7))[0];
    send.deth().msg_len = 100;  // payload past the end of the message
    d.drop(send);
    d.drop(c.write(d.next_psn(), kArea, bytes_of(300, 8), flag::kFirst | flag::kLast, 100));
    expect_unplaced(c, before);
    d.expect_counted("rx_malformed");
}

void inconsistent_segment(Env& env) {
    Conn c(env);
    c.post_recv(1, 0, 8192);
    Dropper d(c);
    // A first SEND packet of a 2000-byte message carrying 512 bytes (not the MTU), and a SEND
    // packet at an offset that is not a multiple of the MTU: inconsistent with their message
    // (section 12), dropped and counted, no state changes.
    const auto data = bytes_of(2000, 9);
    Packet first = c.base(Opcode::Send, d.next_psn(), flag::kFirst);
    first.ext = Deth{0, 0, 0, 2000, 0};
    first.payload.assign(data.begin(), data.begin() + 512);
    d.drop(first);
    Packet odd = c.base(Opcode::Send, d.next_psn(), 0);
    odd.ext = Deth{100, 0, 0, 2000, 0};
    odd.payload.assign(data.begin(), data.begin() + c.mtu());
    d.drop(odd);
    c.expect_state(IBV_QPS_RTS);
    expect(!c.poll_recv(50).has_value(), "a dropped SEND completed a receive");
    d.expect_counted("rx_malformed");
}

// A SEND whose offset plus payload wraps 2^64 (issue 13, finding 1): 0xFFFFFFFFFFFFFBB8 + 1400
// wraps to 304, within msg_len 1400, and its low 32 bits are a multiple of the 1400-byte
// segment. At the expected PSN, to a QP with an 8 KiB receive posted: malformed, dropped and
// counted, no NAK, no completion, the receive still takes the real message afterwards.
void send_offset_wraps(Env& env) {
    Conn c(env);
    if (c.mtu() != 1400) throw CaseSkip("needs the 1400-byte segment (--mtu 1024)");
    const Psn r = c.rq_psn();
    c.post_recv(1, 0, 8192);
    CounterCheck counters(env);
    Packet bad = c.base(Opcode::Send, r, flag::kFirst | flag::kLast | flag::kAckReq);
    bad.ext = Deth{0xFFFFFFFFFFFFFBB8ull, 0, 0, 1400, 0};
    bad.payload = bytes_of(1400, 24);
    c.send(bad);
    for (const Seen& s : c.collect(200)) {
        expect(s.packet.bth.opcode == Opcode::Ack && !s.packet.ack().is_nak(),
               "the DUT answered a SEND whose offset wraps 2^64: " + describe(s.packet));
    }
    expect(!c.poll_recv(50).has_value(), "a SEND whose offset wraps 2^64 completed a receive");
    // The real message 0 at the same PSN: placed, completed, the bytes right.
    const auto data = bytes_of(1400, 25);
    c.send(c.send_message(r, 0, data)[0]);
    c.expect_ack(psn_next(r));
    const ibv_wc wc = c.expect_recv_completion();
    expect(wc.status == IBV_WC_SUCCESS && wc.byte_len == 1400,
           format("the receive completed with %s, %u bytes, expected SUCCESS, 1400",
                  ibv_wc_status_str(wc.status), wc.byte_len));
    expect(std::memcmp(c.local().data(), data.data(), data.size()) == 0,
           "the SEND after the dropped one was not placed correctly");
    c.expect_state(IBV_QPS_RTS);
    counters.expect_delta("rx_malformed", 1);
}

// SEND offsets and lengths at the edges: addresses near 2^64 and 2^32 (whose low 32 bits
// would be a valid offset), offset + payload one past msg_len. All malformed.
void send_offset_boundaries(Env& env) {
    Conn c(env);
    c.post_recv(1, 0, 8192);
    Dropper d(c);
    const std::uint32_t mtu = c.mtu();
    struct Variant {
        std::uint64_t addr;
        std::uint32_t msg_len;
        std::uint32_t payload;
    };
    const Variant variants[] = {
        {0xFFFFFFFFFFFFFFFFull - mtu + 1, mtu, mtu},  // end wraps to exactly 0
        {0xFFFFFFFFFFFFFFFFull, mtu, mtu},            // end wraps to mtu - 1
        {0x100000000ull, mtu, mtu},                   // low 32 bits 0: offset 0 if truncated
        {0x100000000ull + mtu, 2 * mtu, mtu},         // low 32 bits mtu: the second packet
        {0xFFFFFFFF00000000ull, mtu, mtu},            // low 32 bits 0, end wraps past 2^64
        {mtu, 2 * mtu - 1, mtu},                      // offset + payload one past msg_len
    };
    for (const Variant& v : variants) {
        Packet p = c.base(
            Opcode::Send, d.next_psn(),
            (v.addr + v.payload == v.msg_len ? flag::kLast : 0) | (v.addr == 0 ? flag::kFirst : 0));
        p.ext = Deth{v.addr, 0, 0, v.msg_len, 0};
        p.payload = bytes_of(v.payload, v.addr);
        d.drop(p);
    }
    expect(!c.poll_recv(50).has_value(), "a dropped SEND completed a receive");
    c.expect_state(IBV_QPS_RTS);
    d.expect_counted("rx_malformed");
}

// READ_REQ lengths past the largest message (2^31), also where offset + length would wrap
// 2^32 or where the packet count overflows 32 bits: malformed, dropped (no NAK, QP unharmed).
void read_length_over_max(Env& env) {
    Conn c(env);
    Dropper d(c);
    const std::uint32_t mtu = c.mtu();
    d.drop(c.read_request(d.next_psn(), c.mr().addr(), c.mr().rkey(), 0x80000001u));
    d.drop(c.read_request(d.next_psn(), c.mr().addr(), c.mr().rkey(), 0xFFFFFFFFu));
    d.drop(c.read_request(d.next_psn(), c.mr().addr(), c.mr().rkey(), 0xFFFFFFFFu - mtu + 2));
    d.drop(c.read_request(d.next_psn(), c.mr().addr() + 0x7FFFF000u, c.mr().rkey(), 0x2000,
                          0x80000000u - (0x80000000u % mtu)));
    c.expect_state(IBV_QPS_RTS);
    d.expect_counted("rx_malformed");
}

void unknown_qp(Env& env) {
    Conn c(env);
    CounterCheck counters(env);
    Packet w = c.write(c.rq_psn(), kArea, bytes_of(64, 10));
    w.bth.dqpn = 0xfedcba;  // no such QP
    c.send(w);
    for (const Seen& s : c.collect(200)) expect(false, "answered: " + describe(s.packet));
    c.probe(c.rq_psn(), psn_next(c.rq_psn()));
    counters.expect_delta("rx_unknown_qp", 1);
}

void wrong_source_qpn(Env& env) {
    Conn c(env);
    const auto before = snapshot(c);
    Dropper d(c);
    Packet w = d.write();
    w.bth.sqpn = c.fake_qpn() ^ 0x000100;
    d.drop(w);
    expect_unplaced(c, before);
    d.expect_counted("rx_bad_peer");
}

void wrong_source_address(Env& env) {
    if (env.alt_udp() == nullptr) throw CaseSkip("needs --alt-ip (a second local address)");
    Conn c(env);
    const auto before = snapshot(c);
    Dropper d(c);
    const IpAddress alt = *env.options().alt_ip;
    d.drop(encode(d.write()), &alt);
    expect_unplaced(c, before);
    d.expect_counted("rx_bad_peer");
}

void qp_not_ready(Env& env) {
    Conn live(env);
    ConnOptions o;
    o.connect = false;  // RESET
    Conn reset(env, o);
    ConnOptions init;
    init.connect = false;
    Conn in_init(env, init);
    in_init.qp().to_init(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    CounterCheck counters(env);
    for (Conn* c : {&reset, &in_init}) {
        c->send(c->write(c->rq_psn(), kArea, bytes_of(64, 11)));
        for (const Seen& s : c->collect(200)) expect(false, "answered: " + describe(s.packet));
        expect(std::memcmp(c->mr().data() + kArea, bytes_of(64, 11).data(), 64) != 0,
               "a QP that is not ready accepted a WRITE");
    }
    live.probe(live.rq_psn(), psn_next(live.rq_psn()));
    counters.expect_delta("rx_bad_qp_state", 2);
}

void udp_zero_checksum(Env& env) {
    Conn c(env);
    const auto before = snapshot(c);
    Dropper d(c);
    Packet w = d.write();
    w.bth.ts = 1;
    // Section 1: the UDP checksum is mandatory; an IPv4 datagram without one (checksum 0) is
    // dropped and counted as malformed.
    env.udp().send_raw(env.options().dut_ip, env.options().port, Conn::src_port_of(0), encode(w),
                       /*checksum=*/0);
    std::this_thread::sleep_for(std::chrono::milliseconds(env.ms(20)));
    d.drop(std::vector<std::uint8_t>{});  // the probe; the empty datagram is malformed too
    expect_unplaced(c, before);
    d.counters().expect_delta("rx_malformed", 2);
}

void udp_bad_checksum(Env& env) {
    Conn c(env);
    const auto before = snapshot(c);
    Packet w = c.write(psn_next(c.rq_psn()), kArea, bytes_of(64, 12));
    const std::vector<std::uint8_t> bytes = encode(w);
    // A checksum that is wrong (and not 0): the UDP layer drops the datagram.
    env.udp().send_raw(env.options().dut_ip, env.options().port, Conn::src_port_of(0), bytes,
                       /*checksum=*/0x1234);
    std::this_thread::sleep_for(std::chrono::milliseconds(env.ms(20)));
    const Packet a = c.probe(c.rq_psn(), psn_next(c.rq_psn()));
    expect(a.ack().sack == SackWords{}, "a datagram with a bad UDP checksum was accepted");
    expect_unplaced(c, before);
}

}  // namespace

std::vector<Case> validation_cases() {
    return {
        {"version_zero_dropped", "version 0: dropped without a NAK, counted (rx_bad_version)",
         version_zero_dropped},
        {"version_newer_nak",
         "version 2 for a connected QP: VERSION NAK (nak_psn, highest version 1), not placed, "
         "QP unharmed",
         version_newer_nak},
        {"version_reserved_nibble", "a non-zero low nibble of byte 0: malformed",
         version_reserved_nibble},
        {"unknown_opcode", "opcodes outside section 3: malformed", unknown_opcode},
        {"reserved_flags", "flag bit 0x80 (WRITE, SEND): malformed", reserved_flags},
        {"inv_without_last",
         "INV on a SEND packet before the last (first of two, a middle one): malformed, no NAK, "
         "no completion, QP unharmed",
         inv_without_last},
        {"inv_with_imm",
         "INV with IMM on a SEND's last packet (one- and two-packet SENDs): malformed, no NAK, "
         "no completion, QP unharmed",
         inv_with_imm},
        {"inv_on_write",
         "INV on a WRITE (key, 0 and with IMM in the immediate field): malformed, not placed, "
         "no completion, QP unharmed",
         inv_on_write},
        {"reserved_bth_fields", "top bytes of dqpn/sqpn/PSN and the reserved half-word: malformed",
         reserved_bth_fields},
        {"stream_not_zero", "a stream other than 0 (version 1): malformed", stream_not_zero},
        {"flags_not_allowed",
         "flags an opcode does not allow (READ_REQ with FIRST/LAST/IMM/SOLICITED, READ_RESP "
         "with ACK_REQ, ACK with a flag): malformed",
         flags_not_allowed},
        {"atomic_malformed",
         "atomic requests cut short, with a payload, with FIRST/LAST/IMM/SOLICITED, FETCH_ADD "
         "with a compare value; ATOMIC_RESPs without FIRST and LAST, with 4 or 16 bytes, a DETH "
         "field off its row, cut short: malformed, memory unchanged, QP unharmed; an "
         "ATOMIC_RESP for no atomic: dropped (rx_duplicate)",
         atomic_malformed},
        {"ud_send_on_rc", "a UD_SEND to an RC QP: dropped and counted", ud_send_on_rc},
        {"zero_fields",
         "fields given as 0 not 0 (SEND key, SEND immediate without IMM): malformed, no "
         "completion",
         zero_fields},
        {"write_imm_without_flag",
         "a WRITE with a non-zero immediate field but no IMM flag: malformed, not placed",
         write_imm_without_flag},
        {"truncated", "datagrams shorter than the BTH plus extension: malformed", truncated},
        {"payload_not_allowed", "READ_REQ or ACK with a payload: malformed", payload_not_allowed},
        {"oversized_payload_mtu",
         "more payload than the path MTU (2 x MTU): malformed, dropped, no NAK, QP unharmed",
         oversized_payload_mtu},
        {"oversized_payload_4k", "more payload than any MTU (4100 bytes): malformed",
         oversized_payload_4k},
        {"inconsistent_length",
         "payload past msg_len (SEND, WRITE): malformed, not placed, no completion",
         inconsistent_length},
        {"inconsistent_segment",
         "a non-last packet shorter than the MTU, an offset not a multiple of the MTU: malformed, "
         "dropped, QP unharmed",
         inconsistent_segment},
        {"send_offset_wraps",
         "a SEND at the expected PSN whose offset + payload wraps 2^64 (0xFFFFFFFFFFFFFBB8 + "
         "1400, 8 KiB receive posted): malformed, no NAK, no completion, the receive intact",
         send_offset_wraps},
        {"send_offset_boundaries",
         "SEND offsets near 2^64 and 2^32, offset + payload one past msg_len: malformed, QP "
         "unharmed",
         send_offset_boundaries},
        {"read_length_over_max",
         "READ_REQ lengths over 2^31 (and offset + length over 2^31, packet counts that "
         "overflow 32 bits): malformed, no NAK, QP unharmed",
         read_length_over_max},
        {"unknown_qp", "a packet for a QP that does not exist: dropped, counted (rx_unknown_qp)",
         unknown_qp},
        {"wrong_source_qpn", "from another source QPN: dropped, counted (rx_bad_peer)",
         wrong_source_qpn},
        {"wrong_source_address", "from another IP address: dropped, counted (rx_bad_peer)",
         wrong_source_address},
        {"qp_not_ready", "packets for QPs in RESET and INIT: dropped, counted (rx_bad_qp_state)",
         qp_not_ready},
        {"udp_zero_checksum",
         "an IPv4 datagram without a UDP checksum (0): dropped, counted malformed",
         udp_zero_checksum},
        {"udp_bad_checksum", "a wrong UDP checksum: dropped (by the UDP layer), not placed",
         udp_bad_checksum},
    };
}

}  // namespace metaroce::compliance
