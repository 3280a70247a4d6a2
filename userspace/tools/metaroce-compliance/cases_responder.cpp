// The DUT as responder: placement, the SACK window, ACK generation, READ execution, receive
// completions, NAKs (protocol.md sections 3, 5, 6, 11).
#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "harness.h"

namespace metaroce::compliance {
namespace {

constexpr std::uint64_t kArea = 0x1000;  // where most cases write in mr

bool mr_equals(Conn& c, std::uint64_t offset, const std::vector<std::uint8_t>& data) {
    return std::memcmp(c.mr().data() + offset, data.data(), data.size()) == 0;
}

std::set<Psn> sacked(const Ack& a) {
    std::set<Psn> out;
    for (unsigned i = 0; i < 256; ++i) {
        if (a.sack[i / 32] & (0x80000000u >> (i % 32))) out.insert(psn_add(a.cum_psn, 1 + i));
    }
    return out;
}

std::string psns(const std::set<Psn>& s) {
    std::string out;
    for (const Psn p : s) out += format(" 0x%06x", p);
    return out.empty() ? " none" : out;
}

// Waits for an ACK that shows exactly cum_psn `cum` and the PSNs `want` after it.
Packet expect_window(Conn& c, Psn cum, const std::set<Psn>& want) {
    const auto seen = c.receive_until(
        [&](const Packet& p) {
            return p.bth.opcode == Opcode::Ack &&
                   (p.ack().is_nak() || (p.ack().cum_psn == cum && sacked(p.ack()) == want));
        },
        2000);
    std::string last = "none";
    for (const Seen& s : seen) last = describe(s.packet);
    expect(!seen.empty() && seen.back().packet.bth.opcode == Opcode::Ack &&
               !seen.back().packet.ack().is_nak() && seen.back().packet.ack().cum_psn == cum,
           format("expected an ACK with cum_psn 0x%06x and SACK%s; last: %s", cum,
                  psns(want).c_str(), last.c_str()));
    return seen.back().packet;
}

Packet with_flags(Packet p, std::uint8_t add) {
    p.bth.flags |= add;
    return p;
}

void write_in_order(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    const auto data = bytes_of(3000, 1);
    const auto packets = c.write_message(r, kArea, data);
    for (std::size_t k = 0; k < packets.size(); ++k) {
        c.send(packets[k], static_cast<std::uint16_t>(k));
    }
    const Packet a = c.expect_ack(psn_add(r, 3));
    expect(a.ack().sack == SackWords{}, "SACK bitmap not empty: " + describe(a));
    expect(mr_equals(c, kArea, data), "the WRITE's bytes are not in the DUT's memory");
}

void ack_fields(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    CounterCheck counters(env);
    const Packet sent = c.send(c.write(r, kArea, bytes_of(100, 2)), 3);
    const auto seen =
        c.receive_until([](const Packet& p) { return p.bth.opcode == Opcode::Ack; }, 2000);
    expect(!seen.empty() && seen.back().packet.bth.opcode == Opcode::Ack, "no ACK");
    const Seen& s = seen.back();
    const Packet& p = s.packet;
    const Ack& a = p.ack();
    // The codec already checked version, flags (none), stream 0, cum_psn == BTH PSN and the
    // zero fields (nak_psn, nak_arg) of an ACK.
    expect(a.syndrome == Syndrome::Ack, "not an ACK: " + describe(p));
    expect(a.cum_psn == psn_next(r),
           format("cum_psn 0x%06x, expected 0x%06x", a.cum_psn, psn_next(r)));
    expect(a.sack == SackWords{}, "SACK bitmap not empty");
    expect(a.echo_path == 3,
           format("echo_path %u, expected the path of the packet (3)", a.echo_path));
    expect(a.ts_echo == sent.bth.ts,
           format("ts_echo %u, expected the packet's timestamp %u", a.ts_echo, sent.bth.ts));
    expect(p.bth.path == 3,
           format("the ACK for a packet on path 3 went on path %u (section 7: the responder "
                  "answers on its own path of the same index)",
                  p.bth.path));
    expect((s.src_port & 0xc000) == 0xc000,
           format("UDP source port 0x%04x is not 0xC000 | entropy", s.src_port));
    expect(a.msn == 0, format("msn %u: no message consuming a receive WQE completed", a.msn));
    counters.expect_delta("tx_acks", 1, true);
}

void write_out_of_order_sack(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    CounterCheck counters(env);
    const std::uint32_t mtu = c.mtu();
    const auto data = bytes_of(4 * mtu + mtu / 2, 3);  // 5 packets
    const auto packets = c.write_message(r, kArea, data);
    const auto at = [&](unsigned k) { return psn_add(r, k); };
    c.send(with_flags(packets[2], flag::kAckReq), 1);
    expect_window(c, r, {at(2)});
    // Placed on arrival, before the gap is filled.
    expect(std::memcmp(c.mr().data() + kArea + 2 * mtu, data.data() + 2 * mtu, mtu) == 0,
           "a packet ahead of a gap was not placed on arrival");
    c.send(with_flags(packets[4], flag::kAckReq), 2);
    expect_window(c, r, {at(2), at(4)});
    c.send(with_flags(packets[0], flag::kAckReq), 3);
    expect_window(c, at(1), {at(2), at(4)});
    c.send(with_flags(packets[3], flag::kAckReq), 4);
    expect_window(c, at(1), {at(2), at(3), at(4)});
    c.send(packets[1], 5);
    expect_window(c, at(5), {});
    expect(mr_equals(c, kArea, data), "the WRITE's bytes are not in the DUT's memory");
    counters.expect_delta("rx_out_of_order", 3);
}

void duplicate_acked_not_replaced(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    CounterCheck counters(env);
    const Packet w = c.write(r, kArea, bytes_of(64, 4));
    c.send(w);
    c.expect_ack(psn_next(r));
    c.mr().data()[kArea] ^= 0xff;  // a second placement would undo this
    const std::uint8_t marker = c.mr().data()[kArea];
    Packet dup = w;
    dup.bth.flags &= static_cast<std::uint8_t>(~flag::kAckReq);  // ACKed for being a duplicate
    c.send(dup);
    c.expect_ack(psn_next(r));
    expect(c.mr().data()[kArea] == marker, "a duplicate was placed again");
    // A duplicate inside the window (its bit already set).
    const Packet ahead = c.write(psn_add(r, 2), kArea + 4096, bytes_of(64, 5));
    c.send(ahead);
    expect_window(c, psn_next(r), {psn_add(r, 2)});
    Packet dup2 = ahead;
    dup2.bth.flags &= static_cast<std::uint8_t>(~flag::kAckReq);
    c.send(dup2);
    expect_window(c, psn_next(r), {psn_add(r, 2)});
    counters.expect_delta("rx_duplicate", 2);
}

void delayed_ack(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    // No ACK_REQ: the delayed-ACK timer (200 us by default) must still acknowledge it.
    c.send(c.write(r, kArea, bytes_of(10, 6), flag::kFirst | flag::kLast));
    c.expect_ack(psn_next(r), 1000);
}

void ack_every_32(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    constexpr std::uint32_t kPackets = 96;
    const std::uint32_t every = METAROCE_ACK_EVERY;
    const auto data = bytes_of(std::size_t{kPackets} * c.mtu(), 13);
    auto packets = c.write_message(r, kArea, data);
    packets.back().bth.flags &= static_cast<std::uint8_t>(~flag::kAckReq);
    // Encoded first, then sent back to back: the count rule, not the delayed-ACK timer, is
    // what must acknowledge a fast stream.
    std::vector<std::vector<std::uint8_t>> wire;
    for (const Packet& p : packets) wire.push_back(encode(p));
    for (const auto& bytes : wire) c.send_bytes(bytes);
    const Psn end = psn_add(r, kPackets);
    const auto is_ack = [](const Packet& p) {
        return p.bth.opcode == Opcode::Ack && !p.ack().is_nak();
    };
    Psn cum = r;
    std::string advances;  // packets acknowledged by each ACK, for the log
    for (const Seen& s : c.receive_until(
             [&](const Packet& p) { return is_ack(p) && p.ack().cum_psn == end; }, 3000)) {
        if (!is_ack(s.packet)) continue;
        const Psn next = s.packet.ack().cum_psn;
        const std::int32_t advance = psn_diff(next, cum);
        if (advance <= 0) continue;
        expect(advance <= static_cast<std::int32_t>(every),
               format("%d packets went unacknowledged (cum %u to %u); the spec allows %u", advance,
                      cum, next, every));
        advances += format(" %d", advance);
        cum = next;
    }
    expect(cum == end, format("the stream ended acknowledged to %u, not %u", cum, end));
    note("%u packets acknowledged in runs of:%s", kPackets, advances.c_str());
    expect(mr_equals(c, kArea, data), "the WRITE's bytes are not in the DUT's memory");
}

void sack_window_edge(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    const auto data = bytes_of(32, 7);
    c.send(c.write(psn_add(r, 256), kArea, data));  // cum + 256: the last PSN the bitmap names
    const Packet a = expect_window(c, r, {psn_add(r, 256)});
    expect(a.ack().sack[7] == 1u, "PSN cum + 256 is not the last bit of the bitmap");
    expect(mr_equals(c, kArea, data), "a packet at the edge of the window was not placed");
}

void beyond_window(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    CounterCheck counters(env);
    const auto before =
        std::vector<std::uint8_t>(c.mr().data() + kArea, c.mr().data() + kArea + 32);
    Packet far = c.write(psn_add(r, 257), kArea, bytes_of(32, 8));
    c.expect_dropped(encode(far), r);
    expect(mr_equals(c, kArea, before), "a packet beyond the window was placed");
    counters.expect_delta("rx_out_of_window", 1);
}

// A READ_REQ takes one PSN per response packet: it is in the window when its last PSN is.
void read_window_edge(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    const std::uint32_t len = 2 * c.mtu() + 100;  // PSNs cum + 254 .. cum + 256
    c.send(c.read_request(psn_add(r, 254), c.mr().addr() + kArea, c.mr().rkey(), len));
    expect_window(c, r, {psn_add(r, 254), psn_add(r, 255), psn_add(r, 256)});
    c.expect_state(IBV_QPS_RTS);
}

void read_beyond_window(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    CounterCheck counters(env);
    const std::uint32_t len = 2 * c.mtu() + 100;  // PSNs cum + 255 .. cum + 257
    c.expect_dropped(
        encode(c.read_request(psn_add(r, 255), c.mr().addr() + kArea, c.mr().rkey(), len)), r);
    counters.expect_delta("rx_out_of_window", 1);
    c.expect_state(IBV_QPS_RTS);
}

void psn_wrap(Env& env) {
    ConnOptions o;
    o.dut_rq_psn = 0xfffffe;
    Conn c(env, o);
    const auto data = bytes_of(3 * c.mtu() + 900, 9);
    auto packets = c.write_message(0xfffffe, kArea, data);  // fffffe, ffffff, 0, 1
    for (Packet& p : packets) p.bth.flags |= flag::kAckReq;
    c.send(packets[3]);
    expect_window(c, 0xfffffe, {1});
    c.send(packets[0]);
    expect_window(c, 0xffffff, {1});
    c.send(packets[2]);
    expect_window(c, 0xffffff, {0, 1});
    c.send(packets[1]);
    expect_window(c, 2, {});
    expect(mr_equals(c, kArea, data), "bytes across the PSN wrap are wrong");
}

void expect_read_responses(Conn& c, const std::vector<Seen>& seen, Psn first, std::uint32_t n,
                           std::uint64_t mr_offset, std::uint32_t offset, std::uint32_t len,
                           std::uint32_t msn, bool retx = false) {
    std::map<Psn, Packet> by_psn;
    for (const Seen& s : seen) {
        if (s.packet.bth.opcode != Opcode::ReadResponse) continue;
        expect((s.src_port & 0xc000) == 0xc000,
               format("UDP source port 0x%04x is not 0xC000 | entropy", s.src_port));
        by_psn.emplace(s.packet.bth.psn, s.packet);
    }
    expect(by_psn.size() == n, format("%zu READ responses, expected %u", by_psn.size(), n));
    const std::uint32_t mtu = c.mtu();
    for (std::uint32_t k = 0; k < n; ++k) {
        const auto it = by_psn.find(psn_add(first, k));
        expect(it != by_psn.end(), format("no READ response with PSN 0x%06x", psn_add(first, k)));
        const Packet& p = it->second;
        const Deth& d = p.deth();
        const std::uint32_t begin = k * mtu;
        const std::uint32_t size = std::min(mtu, len - begin);
        expect(p.bth.has(flag::kFirst) == (k == 0) && p.bth.has(flag::kLast) == (k + 1 == n),
               "FIRST/LAST do not delimit the part: " + describe(p));
        expect(p.bth.has(flag::kRetx) == retx,
               std::string(retx ? "an answer to a re-read without RETX: "
                                : "RETX on an answer to a first request: ") +
                   describe(p));
        expect(d.addr == offset + begin, "wrong DETH address (offset in the READ): " + describe(p));
        expect(d.msn == msn, "wrong MSN: " + describe(p));
        expect(d.msg_len == offset + len,
               format("msg_len %u, expected the part's offset + length %u: ", d.msg_len,
                      offset + len) +
                   describe(p));
        expect(p.payload.size() == size &&
                   std::memcmp(p.payload.data(), c.mr().data() + mr_offset + begin, size) == 0,
               "READ response payload differs from the DUT's memory: " + describe(p));
    }
}

void read_response_format(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    const std::uint32_t len = 2 * c.mtu() + 452;  // 3 response packets
    c.send(c.read_request(r, c.mr().addr() + 0x3000, c.mr().rkey(), len, 0, 0));
    const auto seen = c.receive_until(
        [&](const Packet& p) {
            return p.bth.opcode == Opcode::Ack && p.ack().cum_psn == psn_add(r, 3);
        },
        2000);
    // The READ's PSNs are marked received: the ACK names r + 3.
    expect(!seen.empty() && seen.back().packet.bth.opcode == Opcode::Ack,
           "no ACK with cum_psn r + 3 (a READ_REQ marks the PSNs of its responses)");
    auto all = seen;
    const auto more = c.collect(100);
    all.insert(all.end(), more.begin(), more.end());
    expect_read_responses(c, all, r, 3, 0x3000, 0, len, 0);
}

// protocol.md section 6: a zero-length READ names no memory (IBA C9-88): rkey 0 at address 0
// is answered with one empty response, not a REMOTE_ACCESS NAK.
void zero_length_read_needs_no_key(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    c.send(c.read_request(r, 0, 0, 0, 0, 4));
    auto seen = c.receive_until(
        [&](const Packet& p) {
            return p.bth.opcode == Opcode::Ack && p.ack().cum_psn == psn_next(r);
        },
        2000);
    expect(!seen.empty() && seen.back().packet.bth.opcode == Opcode::Ack &&
               seen.back().packet.ack().syndrome == Syndrome::Ack,
           "no ACK with cum_psn r + 1");
    const auto more = c.collect(100);
    seen.insert(seen.end(), more.begin(), more.end());
    expect_read_responses(c, seen, r, 1, 0, 0, 0, 4);
    c.expect_state(IBV_QPS_RTS);
}

void read_part_response_format(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    // The part of a READ starting at response packet 2: offset 2 MTU, its own PSNs from r.
    const std::uint32_t mtu = c.mtu();
    const std::uint32_t offset = 2 * mtu;
    const std::uint32_t len = mtu + 100;
    c.send(c.read_request(r, c.mr().addr() + 0x3000 + offset, c.mr().rkey(), len, offset, 3));
    auto seen = c.receive_until(
        [&](const Packet& p) {
            return p.bth.opcode == Opcode::Ack && p.ack().cum_psn == psn_add(r, 2);
        },
        2000);
    const auto more = c.collect(100);
    seen.insert(seen.end(), more.begin(), more.end());
    expect_read_responses(c, seen, r, 2, 0x3000 + offset, offset, len, 3);
}

void read_deferred_until_prior_psns(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    const auto fresh = bytes_of(64, 10);
    // PSN r: a WRITE of new bytes, held back. PSN r + 1: a READ of the same bytes.
    c.send(c.read_request(psn_next(r), c.mr().addr() + kArea, c.mr().rkey(), 64));
    expect_window(c, r, {psn_next(r)});
    for (const Seen& s : c.collect(300)) {
        expect(s.packet.bth.opcode != Opcode::ReadResponse,
               "the READ was answered before the PSN before it arrived");
    }
    c.send(c.write(r, kArea, fresh));
    const auto seen =
        c.receive_until([](const Packet& p) { return p.bth.opcode == Opcode::ReadResponse; }, 2000);
    expect(!seen.empty() && seen.back().packet.bth.opcode == Opcode::ReadResponse,
           "no READ response once the earlier PSN arrived");
    expect(seen.back().packet.payload == fresh,
           "the READ did not observe the WRITE posted before it");
}

void read_lost_request_after_tail_probe(Env& env) {
    // One READ credit. The READ of 3 packets at PSN r is lost; the requester's tail probe, a
    // re-read of the last packet at r + 2, arrives first and takes the only slot, waiting for
    // r. The resent request at r must still be taken, or both would wait for ever.
    ConnOptions o;
    o.max_dest_rd_atomic = 1;
    Conn c(env, o);
    const Psn r = c.rq_psn();
    const std::uint32_t mtu = c.mtu();
    const std::uint32_t len = 2 * mtu + 100;
    const std::uint64_t va = c.mr().addr() + 0x3000;
    c.send(c.read_request(psn_add(r, 2), va + 2 * mtu, c.mr().rkey(), 100, 2 * mtu, 0,
                          flag::kAckReq | flag::kRetx));
    expect_window(c, r, {psn_add(r, 2)});
    c.send(c.read_request(r, va, c.mr().rkey(), len, 0, 0, flag::kAckReq | flag::kRetx));
    auto seen = c.receive_until(
        [&](const Packet& p) {
            return p.bth.opcode == Opcode::Ack && p.ack().cum_psn == psn_add(r, 3);
        },
        2000);
    expect(!seen.empty() && seen.back().packet.bth.opcode == Opcode::Ack,
           "the request the tail probe waits for was not taken: no ACK with cum_psn r + 3");
    const auto more = c.collect(200);
    seen.insert(seen.end(), more.begin(), more.end());
    std::set<Psn> answered;
    for (const Seen& s : seen) {
        if (s.packet.bth.opcode == Opcode::ReadResponse) answered.insert(s.packet.bth.psn);
    }
    expect(answered.count(r) && answered.count(psn_add(r, 1)) && answered.count(psn_add(r, 2)),
           format("%zu of the 3 READ response PSNs answered", answered.size()));
}

void read_duplicate_reexecuted(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    CounterCheck counters(env);
    const Packet req = c.read_request(r, c.mr().addr() + 0x5000, c.mr().rkey(), 1500);
    c.send(req);
    auto seen = c.receive_until(
        [&](const Packet& p) {
            return p.bth.opcode == Opcode::Ack && p.ack().cum_psn == psn_add(r, 2);
        },
        2000);
    auto more = c.collect(100);
    seen.insert(seen.end(), more.begin(), more.end());
    expect_read_responses(c, seen, r, 2, 0x5000, 0, 1500, 0);
    // The same request again (a lost ACK): executed again, and ACKed at once.
    c.send(with_flags(req, flag::kRetx));
    seen = c.collect(300);
    expect_read_responses(c, seen, r, 2, 0x5000, 0, 1500, 0, true);
    bool acked = false;
    for (const Seen& s : seen) acked |= s.packet.bth.opcode == Opcode::Ack;
    expect(acked, "a duplicate READ_REQ was not acknowledged");
    counters.expect_delta("rx_duplicate", 1);
}

void reread_range(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    const std::uint32_t mtu = c.mtu();
    const std::uint32_t len = 3 * mtu + 500;
    c.send(c.read_request(r, c.mr().addr() + 0x8000, c.mr().rkey(), len));
    c.receive_until(
        [&](const Packet& p) {
            return p.bth.opcode == Opcode::Ack && p.ack().cum_psn == psn_add(r, 4);
        },
        2000);
    c.collect(100);
    // Responses 2 and 3 were "lost": a re-read of exactly them, with their PSNs.
    c.send(c.read_request(psn_add(r, 2), c.mr().addr() + 0x8000 + 2 * mtu, c.mr().rkey(),
                          len - 2 * mtu, 2 * mtu, 0, flag::kAckReq | flag::kRetx));
    const auto seen = c.collect(300);
    expect_read_responses(c, seen, psn_add(r, 2), 2, 0x8000 + 2 * mtu, 2 * mtu, len - 2 * mtu, 0,
                          true);
}

void reread_marks_new_psns(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    const std::uint32_t mtu = c.mtu();
    // A READ of 4 responses asked for in two parts; the second part's request (r + 2) was
    // lost, and so was response 1 of the first: the requester re-reads the run of missing
    // responses 1..3, PSNs r + 1 .. r + 3 (section 3.2), which starts behind cum_psn.
    c.send(c.read_request(r, c.mr().addr() + 0x8000, c.mr().rkey(), 2 * mtu, 0, 0));
    c.receive_until(
        [&](const Packet& p) {
            return p.bth.opcode == Opcode::Ack && p.ack().cum_psn == psn_add(r, 2);
        },
        2000);
    c.collect(100);
    c.send(c.read_request(psn_next(r), c.mr().addr() + 0x8000 + mtu, c.mr().rkey(), 3 * mtu, mtu, 0,
                          flag::kAckReq | flag::kRetx));
    const auto seen = c.collect(300);
    expect_read_responses(c, seen, psn_next(r), 3, 0x8000 + mtu, mtu, 3 * mtu, 0, true);
    // Accepting it marks every PSN it asks for (section 5), else the PSNs of the lost part
    // stay missing although their responses went out, and every later PSN waits behind them.
    Psn cum = r;
    for (const Seen& x : seen) {
        if (x.packet.bth.opcode == Opcode::Ack && !x.packet.ack().is_nak()) {
            cum = x.packet.ack().cum_psn;
        }
    }
    expect(cum == psn_add(r, 4),
           format("after the re-read the DUT's cum_psn is 0x%06x, expected 0x%06x: PSNs it "
                  "answered were not marked received",
                  cum, psn_add(r, 4)));
    c.probe(psn_add(r, 4), psn_add(r, 5));
}

// As reread_marks_new_psns, with a SEND already arrived behind the lost part (at r + 4): the
// re-read moves cum_psn past it, and the SEND completes then, not when some later packet comes
// (on an SRQ, the next message would have been dropped as too far ahead of cum_psn for good).
void reread_completes_messages_it_passes(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    const std::uint32_t mtu = c.mtu();
    c.post_recv(1, 0, 4096);
    c.send(c.read_request(r, c.mr().addr() + 0x8000, c.mr().rkey(), 2 * mtu, 0, 0));
    c.receive_until(
        [&](const Packet& p) {
            return p.bth.opcode == Opcode::Ack && p.ack().cum_psn == psn_add(r, 2);
        },
        2000);
    const auto data = bytes_of(100, 60);
    for (const Packet& p : c.send_message(psn_add(r, 4), 0, data)) c.send(p);
    c.collect(100);
    expect(!c.poll_recv(100).has_value(), "the SEND completed with PSNs before it missing");
    c.send(c.read_request(psn_next(r), c.mr().addr() + 0x8000 + mtu, c.mr().rkey(), 3 * mtu, mtu, 0,
                          flag::kAckReq | flag::kRetx));
    const ibv_wc wc = c.expect_recv_completion(500);
    expect(wc.status == IBV_WC_SUCCESS && wc.wr_id == 1 && wc.byte_len == 100,
           format("receive completion: wr_id %llu status %s len %u",
                  static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status),
                  wc.byte_len));
    expect(std::memcmp(c.local().data(), data.data(), data.size()) == 0, "SEND data differs");
    c.probe(psn_add(r, 5), psn_add(r, 6));
}

void send_rnr_then_accepted(Env& env) {
    ConnOptions o;
    o.min_rnr_timer = 14;
    Conn c(env, o);
    const Psn r = c.rq_psn();
    CounterCheck counters(env);
    const auto data = bytes_of(100, 11);
    const auto m = c.send_message(r, 0, data);
    c.send(m[0]);
    const Packet nak = c.expect_nak(Syndrome::RnrNak, r);
    expect(nak.ack().nak_arg == 14,
           format("RNR NAK timer %u, expected the QP's min_rnr_timer 14", nak.ack().nak_arg));
    expect(nak.ack().cum_psn == r, "the refused SEND was marked received: " + describe(nak));
    counters.expect_delta("rnr_naks_sent", 1);
    c.post_recv(1, 0, 4096);
    c.send(with_flags(m[0], flag::kRetx));
    c.expect_ack(psn_next(r));
    const ibv_wc wc = c.expect_recv_completion();
    expect(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == 100 &&
               wc.wr_id == 1,
           format("receive completion: status %s opcode %d len %u", ibv_wc_status_str(wc.status),
                  wc.opcode, wc.byte_len));
    expect(std::memcmp(c.local().data(), data.data(), data.size()) == 0, "SEND data differs");
    c.expect_state(IBV_QPS_RTS);
}

void send_msn_selects_wqe(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    c.post_recv(10, 0, 4096);
    c.post_recv(11, 8192, 4096);
    const auto first = bytes_of(200, 12);
    const auto second = bytes_of(1500, 13);
    // The second message (MSN 1) arrives completely before the first (MSN 0).
    for (const Packet& p : c.send_message(psn_next(r), 1, second)) c.send(p);
    expect(!c.poll_recv(200).has_value(), "a receive completed while an earlier PSN is missing");
    for (const Packet& p : c.send_message(r, 0, first)) c.send(p);
    const ibv_wc a = c.expect_recv_completion();
    const ibv_wc b = c.expect_recv_completion();
    expect(
        a.wr_id == 10 && a.byte_len == 200 && b.wr_id == 11 && b.byte_len == 1500 &&
            a.status == IBV_WC_SUCCESS && b.status == IBV_WC_SUCCESS,
        format("completions %llu/%u/%s then %llu/%u/%s, expected 10/200 then 11/1500",
               static_cast<unsigned long long>(a.wr_id), a.byte_len, ibv_wc_status_str(a.status),
               static_cast<unsigned long long>(b.wr_id), b.byte_len, ibv_wc_status_str(b.status)));
    expect(std::memcmp(c.local().data(), first.data(), first.size()) == 0 &&
               std::memcmp(c.local().data() + 8192, second.data(), second.size()) == 0,
           "a SEND landed in the wrong receive WQE");
    c.expect_ack(psn_add(r, 3));
}

// Two connections share an SRQ of 8 WQEs. A SEND on the first claiming MSN 7 at its first PSN
// cannot be genuine (messages 0 to 6 would each need a PSN before it): taking WQEs for it
// would hand all eight to that connection and leave the other with none (RNR). It is dropped
// and counted (rx_bad_peer); the other connection's 8 messages take the 8 WQEs.
void srq_message_ahead_of_its_psn(Env& env) {
    ibv_srq_init_attr sa{};
    sa.attr.max_wr = 8;
    sa.attr.max_sge = 1;
    ibv_srq* srq = ibv_create_srq(env.dev().pd(), &sa);
    if (srq == nullptr && errno == EOPNOTSUPP) throw CaseSkip("the DUT has no SRQ");
    expect(srq != nullptr, format("ibv_create_srq: %s", std::strerror(errno)));
    struct SrqGuard {
        ibv_srq* srq;
        ~SrqGuard() { ibv_destroy_srq(srq); }
    } guard{srq};
    ConnOptions o;
    o.srq = srq;
    Conn c1(env, o), c2(env, o);
    for (std::uint32_t i = 0; i < 8; i++) {
        ibv_sge sge{c1.local().addr() + i * 4096, 4096, c1.local().lkey()};
        ibv_recv_wr wr{};
        ibv_recv_wr* bad = nullptr;
        wr.wr_id = i;
        wr.sg_list = &sge;
        wr.num_sge = 1;
        expect(ibv_post_srq_recv(srq, &wr, &bad) == 0, "ibv_post_srq_recv failed");
    }
    CounterCheck counters(env);
    const Psn r1 = c1.rq_psn();
    c1.expect_dropped(encode(c1.send_message(r1, 7, bytes_of(100, 40))[0]), r1);

    const Psn r2 = c2.rq_psn();
    for (std::uint32_t i = 0; i < 8; i++)
        for (const Packet& p : c2.send_message(psn_add(r2, i), i, bytes_of(100, 50 + i)))
            c2.send(p);
    c2.expect_ack(psn_add(r2, 8));
    for (std::uint32_t i = 0; i < 8; i++) {
        const ibv_wc wc = c2.expect_recv_completion();
        expect(wc.status == IBV_WC_SUCCESS && wc.wr_id == i && wc.byte_len == 100,
               format("completion %u: wr_id %llu status %s len %u", i,
                      static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status),
                      wc.byte_len));
        const auto want = bytes_of(100, 50 + i);
        expect(std::memcmp(c1.local().data() + i * 4096, want.data(), want.size()) == 0,
               format("message %u is not in WQE %u", i, i));
    }
    counters.expect_delta("rx_bad_peer", 1);
    c1.expect_state(IBV_QPS_RTS);
    c2.expect_state(IBV_QPS_RTS);
}

void send_with_immediate(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    c.post_recv(5, 0, 4096);
    const auto data = bytes_of(2500, 14);
    // IMM and the value on the last packet only (section 3).
    for (const Packet& p : c.send_message(r, 0, data, 0xdeadbeef)) c.send(p);
    const ibv_wc wc = c.expect_recv_completion();
    expect(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.byte_len == 2500,
           format("completion: %s opcode %d len %u", ibv_wc_status_str(wc.status), wc.opcode,
                  wc.byte_len));
    expect((wc.wc_flags & IBV_WC_WITH_IMM) && ntohl(wc.imm_data) == 0xdeadbeef,
           format("immediate data missing or wrong (flags 0x%x imm 0x%x)", wc.wc_flags,
                  ntohl(wc.imm_data)));
    expect(std::memcmp(c.local().data(), data.data(), data.size()) == 0, "SEND data differs");
}

void send_too_long_for_wqe(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    c.post_recv(7, 0, 1000);
    c.post_recv(8, 4096, 1000);
    const auto m = c.send_message(r, 0, bytes_of(2000, 15));
    c.send(m[0]);
    c.send(m[1]);
    c.expect_nak(Syndrome::InvalidRequest, r);
    const ibv_wc wc = c.expect_recv_completion();
    expect(wc.wr_id == 7 && wc.status == IBV_WC_LOC_LEN_ERR,
           format("receive %llu completed with %s, expected 7 with LOC_LEN_ERR",
                  static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status)));
    c.expect_state(IBV_QPS_ERR);
    const ibv_wc flushed = c.expect_recv_completion();
    expect(flushed.status == IBV_WC_WR_FLUSH_ERR, "the next receive was not flushed");
}

// A SEND with invalidate (INV on its last packet, protocol.md section 6) whose key names no
// fast-registration MR of the DUT QP's PD valid with it: REMOTE_INVALID_REQUEST NAK at the
// INV packet's PSN, the receive completes with REM_INV_REQ_ERR, QP to error. The DUT QP is a
// user-space QP, whose PD has no fast-registration MRs, so every key is invalid there: the
// rkey of an ordinary MR of the PD (one-packet SEND), and an unknown key (the INV packet is
// the second of two, after a first accepted).
void send_with_inv_bad_key(Env& env) {
    Conn c(env);
    Conn unknown(env);
    struct Variant {
        Conn* conn;
        std::uint32_t key;
        std::size_t len;
    };
    const Variant variants[] = {
        {&c, c.mr().rkey(), 64},
        {&unknown, unknown.mr().rkey() ^ 0x5a5a5a00u, unknown.mtu() + 64},
    };
    for (const Variant& v : variants) {
        Conn& k = *v.conn;
        const Psn r = k.rq_psn();
        k.post_recv(11, 0, 8192);
        k.post_recv(12, 8192, 8192);
        CounterCheck counters(env);
        auto m = k.send_message(r, 0, bytes_of(v.len, 44));
        m.back().bth.flags |= flag::kInv;
        m.back().deth().imm = v.key;
        const Psn inv_psn = m.back().bth.psn;
        if (m.size() > 1) {
            k.send(m[0]);
            k.expect_ack(psn_next(r));
        }
        k.send(m.back());
        const Packet nak = k.expect_nak(Syndrome::InvalidRequest, inv_psn);
        expect(nak.ack().cum_psn == inv_psn,
               "the refused SEND with invalidate was accepted: " + describe(nak));
        k.expect_state(IBV_QPS_ERR);
        const ibv_wc wc = k.expect_recv_completion();
        expect(
            wc.wr_id == 11 && wc.status == IBV_WC_REM_INV_REQ_ERR,
            format("receive %llu completed with %s, expected 11 with REM_INV_REQ_ERR (key "
                   "0x%08x)",
                   static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status), v.key));
        const ibv_wc flushed = k.expect_recv_completion();
        expect(flushed.status == IBV_WC_WR_FLUSH_ERR, "the next receive was not flushed");
        counters.expect_delta("tx_naks", 1, /*at_least=*/true);
    }
}

void write_with_immediate(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    c.post_recv(9, 0, 0);
    const auto data = bytes_of(1500, 16);
    auto packets = c.write_message(r, kArea, data, 0);
    packets.back().bth.flags |= flag::kImm;
    packets.back().deth().imm = 0x12345678;
    for (const Packet& p : packets) c.send(p);
    const ibv_wc wc = c.expect_recv_completion();
    expect(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
               wc.byte_len == 1500 && (wc.wc_flags & IBV_WC_WITH_IMM) &&
               ntohl(wc.imm_data) == 0x12345678,
           format("completion: %s opcode %d len %u imm 0x%x", ibv_wc_status_str(wc.status),
                  wc.opcode, wc.byte_len, ntohl(wc.imm_data)));
    expect(mr_equals(c, kArea, data), "the WRITE's bytes are not in the DUT's memory");
}

void zero_length_send(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    c.post_recv(3, 0, 64);
    c.send(c.send_message(r, 0, {})[0]);
    c.expect_ack(psn_next(r));
    const ibv_wc wc = c.expect_recv_completion();
    expect(wc.status == IBV_WC_SUCCESS && wc.byte_len == 0,
           format("completion %s len %u", ibv_wc_status_str(wc.status), wc.byte_len));
}

void ce_marks_echoed(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    CounterCheck counters(env);
    const auto packets = c.write_message(r, kArea, bytes_of(3000, 17));
    for (const Packet& p : packets) c.send(p, 0, /*tos=*/3);  // ECN CE
    // Each ACK counts the marks since the previous one (a delayed ACK may come in between).
    const auto seen = c.receive_until(
        [&](const Packet& p) {
            return p.bth.opcode == Opcode::Ack && p.ack().cum_psn == psn_add(r, 3);
        },
        2000);
    unsigned marks = 0;
    for (const Seen& s : seen) {
        if (s.packet.bth.opcode == Opcode::Ack) marks += s.packet.ack().ce_count;
    }
    expect(!seen.empty() && seen.back().packet.bth.opcode == Opcode::Ack, "no ACK");
    expect(marks == 3, format("the ACKs echoed %u CE marks, expected 3", marks));
    // A marked duplicate counts too: the count covers the packets received (section 11).
    c.send(packets[0], 0, /*tos=*/3);
    const Packet dup = c.expect_ack(psn_add(r, 3));
    expect(
        dup.ack().ce_count == 1,
        format("the ACK of a CE-marked duplicate echoed %u marks, expected 1", dup.ack().ce_count));
    counters.expect_delta("rx_ecn_ce", 4);
}

// A remote access error: REMOTE_ACCESS NAK with the packet's PSN, QP to error, receives flushed.
void expect_access_error(Conn& c, const Packet& bad, std::uint64_t area,
                         const std::vector<std::uint8_t>& before) {
    CounterCheck counters(c.env());
    c.post_recv(1, 0, 64);
    c.send(bad);
    c.expect_nak(Syndrome::RemoteAccess, bad.bth.psn);
    c.expect_state(IBV_QPS_ERR);
    const ibv_wc wc = c.expect_recv_completion();
    expect(wc.status == IBV_WC_WR_FLUSH_ERR,
           format("the posted receive completed with %s, expected WR_FLUSH_ERR",
                  ibv_wc_status_str(wc.status)));
    if (!before.empty()) {
        expect(std::memcmp(c.mr().data() + area, before.data(), before.size()) == 0,
               "a refused WRITE changed the DUT's memory");
    }
    counters.expect_delta("remote_access_errors", 1);
}

void write_bad_rkey(Env& env) {
    Conn c(env);
    Packet w = c.write(c.rq_psn(), kArea, bytes_of(64, 18));
    w.deth().key = c.mr().rkey() ^ 0x5a5a00;
    expect_access_error(
        c, w, kArea, std::vector<std::uint8_t>(c.mr().data() + kArea, c.mr().data() + kArea + 64));
}

void write_out_of_bounds(Env& env) {
    Conn c(env);
    // Starts inside the region and runs 32 bytes past its end.
    Packet w = c.write(c.rq_psn(), Conn::kMrSize - 32, bytes_of(64, 19));
    expect_access_error(c, w, Conn::kMrSize - 32,
                        std::vector<std::uint8_t>(c.mr().data() + Conn::kMrSize - 32,
                                                  c.mr().data() + Conn::kMrSize));
}

void write_without_rights(Env& env) {
    Conn c(env);
    Packet w = c.write(c.rq_psn(), 0, bytes_of(64, 20));
    w.deth().addr = c.ro().addr();  // a region registered for remote read only
    w.deth().key = c.ro().rkey();
    const std::vector<std::uint8_t> before(c.ro().data(), c.ro().data() + 64);
    expect_access_error(c, w, 0, {});
    expect(std::memcmp(c.ro().data(), before.data(), 64) == 0,
           "a WRITE changed a region without remote write rights");
}

void read_bad_rkey(Env& env) {
    Conn c(env);
    expect_access_error(c, c.read_request(c.rq_psn(), c.mr().addr(), c.mr().rkey() ^ 0x5a5a00, 100),
                        0, {});
}

void read_out_of_bounds(Env& env) {
    Conn c(env);
    expect_access_error(
        c, c.read_request(c.rq_psn(), c.mr().addr() + Conn::kMrSize - 100, c.mr().rkey(), 200), 0,
        {});
}

void read_without_rights(Env& env) {
    Conn c(env);
    expect_access_error(c, c.read_request(c.rq_psn(), c.wo().addr(), c.wo().rkey(), 64), 0, {});
}

void access_nak_names_the_psn(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    Packet bad = c.write(psn_next(r), kArea, bytes_of(64, 21));
    bad.deth().key ^= 0x5a5a00;
    c.send(bad);
    c.send(c.write(r, kArea + 4096, bytes_of(64, 22)));
    const Packet nak = c.expect_nak(Syndrome::RemoteAccess, psn_next(r));
    expect(!psn_before(psn_next(r), nak.ack().cum_psn),
           "the NAK's cum_psn is past the refused PSN: " + describe(nak));
    c.expect_state(IBV_QPS_ERR);
}

// After one READ at PSN r: the QP and its cum_psn r + n.
Psn one_read_done(Conn& c, std::uint64_t va, std::uint32_t len) {
    const Psn r = c.rq_psn();
    const std::uint32_t n = read_response_packets(len, c.mtu());
    c.send(c.read_request(r, va, c.mr().rkey(), len));
    c.receive_until(
        [&](const Packet& p) {
            return p.bth.opcode == Opcode::Ack && p.ack().cum_psn == psn_add(r, n);
        },
        2000);
    c.collect(100);
    return psn_add(r, n);
}

// A READ_REQ behind cum_psn that the DUT must drop without answering it: no READ response, no
// NAK, counted (rx_duplicate_read_unknown), the QP still answers at `cum`.
void expect_unknown_duplicate_read(Conn& c, const Packet& dup, Psn cum) {
    CounterCheck counters(c.env());
    c.send(dup);
    std::size_t responses = 0;
    for (const Seen& s : c.collect(300)) {
        if (s.packet.bth.opcode == Opcode::ReadResponse) {
            ++responses;
            continue;
        }
        expect(s.packet.bth.opcode == Opcode::Ack && !s.packet.ack().is_nak(),
               "the DUT refused a duplicate READ_REQ it does not know: " + describe(s.packet));
    }
    expect(responses == 0,
           format("the DUT answered a duplicate READ_REQ it never executed with %zu READ "
                  "responses (%s)",
                  responses, describe(dup).c_str()));
    c.expect_state(IBV_QPS_RTS);
    c.probe(cum, psn_next(cum));
    counters.expect_delta("rx_duplicate_read_unknown", 1);
}

void duplicate_read_with_bad_rkey(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    const Psn cum = one_read_done(c, c.mr().addr(), 100);
    // The same PSN again, with a bad rkey: not the request the DUT executed, so not a
    // duplicate of it (a spoofer's guess): dropped and counted, no NAK, the QP unharmed.
    expect_unknown_duplicate_read(c,
                                  c.read_request(r, c.mr().addr(), c.mr().rkey() ^ 0x5a5a00, 100, 0,
                                                 0, flag::kAckReq | flag::kRetx),
                                  cum);
}

void duplicate_read_unknown_psn(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    // Far behind cum_psn, where no READ ever was, asking for the whole region: the old
    // responder streamed 256 KiB to the peer for one spoofed packet.
    expect_unknown_duplicate_read(c,
                                  c.read_request(psn_add(r, -1000), c.mr().addr(), c.mr().rkey(),
                                                 static_cast<std::uint32_t>(Conn::kMrSize)),
                                  r);
}

void duplicate_read_larger_than_original(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    const std::uint32_t mtu = c.mtu();
    Psn cum = one_read_done(c, c.mr().addr() + 0x5000, 100);
    // Two WRITEs take PSNs r + 1 and r + 2.
    for (int i = 0; i < 2; ++i) {
        c.probe(cum, psn_next(cum));
        cum = psn_next(cum);
    }
    // "The READ at r again", asking 3 packets: r + 1 and r + 2 were WRITEs. Dropped.
    expect_unknown_duplicate_read(c,
                                  c.read_request(r, c.mr().addr() + 0x5000, c.mr().rkey(), 3 * mtu,
                                                 0, 0, flag::kAckReq | flag::kRetx),
                                  cum);
    // The same READ asked again as it was: answered, exactly (a re-read).
    c.send(c.read_request(r, c.mr().addr() + 0x5000, c.mr().rkey(), 100, 0, 0,
                          flag::kAckReq | flag::kRetx));
    const auto seen = c.collect(300);
    expect_read_responses(c, seen, r, 1, 0x5000, 0, 100, 0, true);
}

void duplicate_read_other_message(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    const Psn cum = one_read_done(c, c.mr().addr() + 0x5000, 2 * c.mtu());
    // The PSN of the READ's second response, but another address, offset or MSN: dropped.
    const std::uint32_t mtu = c.mtu();
    const std::uint64_t va = c.mr().addr() + 0x5000;
    expect_unknown_duplicate_read(c,
                                  c.read_request(psn_next(r), va + mtu + 8, c.mr().rkey(), mtu, mtu,
                                                 0, flag::kAckReq | flag::kRetx),
                                  cum);
    expect_unknown_duplicate_read(
        c, c.read_request(psn_next(r), va, c.mr().rkey(), mtu, 0, 0, flag::kAckReq | flag::kRetx),
        cum);
    expect_unknown_duplicate_read(c,
                                  c.read_request(psn_next(r), va + mtu, c.mr().rkey(), mtu, mtu, 7,
                                                 flag::kAckReq | flag::kRetx),
                                  cum);
}

// Deregistration revokes remote access (section 6): a READ_REQ with a valid rkey waits behind
// a PSN gap; the application deregisters the region and writes new bytes into the buffer (still
// mapped); then the gap is filled. The READ must not be answered with the buffer's bytes: the
// key is gone, so the part is refused like a bad rkey (REMOTE_ACCESS NAK at its PSN, QP error).
// With @rereg the region is re-registered onto another buffer instead (ibv_rereg_mr, the key
// stays): the READ was accepted against the old translation, so it is refused the same way,
// and neither the old buffer's new bytes nor the new buffer's are sent.
void read_after_revocation(Env& env, bool rereg) {
    const char* what = rereg ? "ibv_rereg_mr" : "ibv_dereg_mr";
    Conn c(env);
    const Psn r = c.rq_psn();
    const std::uint32_t len = 2 * c.mtu();
    DutRegion region(env, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
    std::vector<std::uint8_t> other = bytes_of(len, 43);
    const auto before = bytes_of(len, 40);
    std::memcpy(region.data(), before.data(), len);
    const Psn read_psn = psn_next(r);
    c.send(c.read_request(read_psn, region.addr(), region.rkey(), len));
    expect_window(c, r, {read_psn, psn_add(r, 2)});
    if (rereg)
        region.rereg_to(other.data(), len);
    else
        region.deregister();
    const auto after = bytes_of(len, 41);
    std::memcpy(region.data(), after.data(), len);
    c.send(c.write(r, kArea, bytes_of(64, 42)));
    const auto seen = c.collect(500);
    bool naked = false;
    const auto contains = [](const std::vector<std::uint8_t>& in, const Packet& p) {
        return !p.payload.empty() &&
               std::search(in.begin(), in.end(), p.payload.begin(), p.payload.end()) != in.end();
    };
    for (const Seen& s : seen) {
        const Packet& p = s.packet;
        if (p.bth.opcode == Opcode::ReadResponse) {
            const char* which = contains(after, p)   ? "with the bytes written after it"
                                : contains(other, p) ? "with the new translation's bytes"
                                                     : "old bytes";
            expect(false, format("a READ response after %s returned (%s): ", what, which) +
                              describe(p));
        }
        if (p.bth.opcode == Opcode::Ack && p.ack().is_nak()) {
            expect(p.ack().syndrome == Syndrome::RemoteAccess && p.ack().nak_psn == read_psn,
                   "expected a REMOTE_ACCESS NAK for the READ's PSN: " + describe(p));
            naked = true;
        }
    }
    expect(naked, format("no REMOTE_ACCESS NAK for the READ of the region after %s", what));
    c.expect_state(IBV_QPS_ERR);
}

void read_after_dereg(Env& env) { read_after_revocation(env, false); }

void read_after_rereg(Env& env) { read_after_revocation(env, true); }

// Deregistration revokes the receive buffers of posted receives, even one a message already
// started to land in: the rest of the SEND is not placed in the (still mapped) buffer and the
// receive completes with LOC_PROT_ERR; the responder refuses the packet (REMOTE_OPERATIONAL
// NAK, as for any local error at the responder) and the QP goes to the error state.
void recv_after_dereg(Env& env) {
    Conn c(env);
    const Psn r = c.rq_psn();
    const std::uint32_t len = 2 * c.mtu();
    DutRegion region(env, len, IBV_ACCESS_LOCAL_WRITE);
    std::memset(region.data(), 0, len);
    c.qp().post_recv(3, region.addr(), len, region.lkey());
    const auto data = bytes_of(len, 43);
    const auto m = c.send_message(r, 0, data);
    expect(m.size() == 2, "expected a 2-packet SEND");
    c.send(m[0]);
    c.expect_ack(psn_next(r));
    expect(std::memcmp(region.data(), data.data(), c.mtu()) == 0,
           "the SEND's first packet was not placed");
    region.deregister();
    std::memset(region.data(), 0, len);
    c.send(m[1]);
    // The answer first (an ACK says it was placed), then what landed.
    const auto seen =
        c.receive_until([](const Packet& p) { return p.bth.opcode == Opcode::Ack; }, 2000);
    const std::vector<std::uint8_t> zeros(len, 0);
    expect(std::memcmp(region.data(), zeros.data(), len) == 0,
           "the SEND's last packet was placed in the buffer after ibv_dereg_mr returned");
    expect(!seen.empty() && seen.back().packet.bth.opcode == Opcode::Ack &&
               seen.back().packet.ack().syndrome == Syndrome::RemoteOperational &&
               seen.back().packet.ack().nak_psn == psn_next(r),
           "expected a REMOTE_OPERATIONAL NAK for the last packet's PSN; last: " +
               (seen.empty() ? std::string("none") : describe(seen.back().packet)));
    const ibv_wc wc = c.expect_recv_completion();
    expect(wc.wr_id == 3 && wc.status == IBV_WC_LOC_PROT_ERR,
           format("receive %llu completed with %s, expected 3 with LOC_PROT_ERR",
                  static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status)));
    c.expect_state(IBV_QPS_ERR);
}

}  // namespace

std::vector<Case> responder_cases() {
    return {
        {"write_in_order", "a 3-packet WRITE is placed and acknowledged (cum_psn, empty SACK)",
         write_in_order},
        {"ack_fields",
         "ACK: syndrome 0, cum_psn, echo_path/ts_echo of the packet, same path index, UDP "
         "source port 0xC000|entropy, msn",
         ack_fields},
        {"write_out_of_order_sack",
         "out-of-order packets are placed on arrival; each ACK's cum_psn and SACK bits are exact",
         write_out_of_order_sack},
        {"duplicate_acked_not_replaced",
         "duplicates (behind cum_psn and inside the window) are ACKed at once, not placed again, "
         "counted (rx_duplicate)",
         duplicate_acked_not_replaced},
        {"delayed_ack", "a packet without ACK_REQ is acknowledged by the delayed-ACK timer",
         delayed_ack},
        {"ack_every_32", "a fast stream without ACK_REQ is acknowledged at least every 32 packets",
         ack_every_32},
        {"sack_window_edge", "PSN cum+256 is accepted and is the last bit of the bitmap",
         sack_window_edge},
        {"beyond_window", "PSN cum+257 is dropped, not placed, counted (rx_out_of_window)",
         beyond_window},
        {"read_window_edge",
         "a READ_REQ whose last response PSN is cum+256 is accepted: its PSNs are marked",
         read_window_edge},
        {"read_beyond_window",
         "a READ_REQ whose last response PSN is cum+257 is dropped, counted (rx_out_of_window), "
         "no NAK",
         read_beyond_window},
        {"psn_wrap", "PSNs wrap at 2^24: SACK bits and cum_psn across 0xffffff -> 0", psn_wrap},
        {"read_response_format",
         "READ responses: PSNs p..p+n-1, FIRST/LAST, address k*MTU, MSN, msg_len, data; the "
         "READ's PSNs are marked",
         read_response_format},
        {"read_part_response_format",
         "a READ_REQ part at offset 2*MTU: FIRST on its first response, msg_len = offset + "
         "length",
         read_part_response_format},
        {"read_lost_request_after_tail_probe",
         "one READ credit held by a tail probe ahead of a gap: the request that fills the gap is "
         "still taken and both are answered",
         read_lost_request_after_tail_probe},
        {"read_deferred_until_prior_psns",
         "a READ is executed only once the PSNs before it arrived, and sees the WRITE before it",
         read_deferred_until_prior_psns},
        {"read_duplicate_reexecuted",
         "a duplicate READ_REQ is executed again and ACKed (rx_duplicate)",
         read_duplicate_reexecuted},
        {"reread_range",
         "a re-read (RETX) is answered with exactly its range and original PSNs, each with RETX",
         reread_range},
        {"reread_marks_new_psns",
         "a re-read that starts behind cum_psn and covers PSNs never received marks them all",
         reread_marks_new_psns},
        {"send_rnr_then_accepted",
         "a SEND without a receive WQE: RNR NAK (PSN, min_rnr_timer), not marked; accepted once "
         "posted",
         send_rnr_then_accepted},
        {"send_msn_selects_wqe",
         "the MSN selects the receive WQE; completions wait for earlier PSNs and come in order",
         send_msn_selects_wqe},
        {"send_with_immediate",
         "a multi-packet SEND with IMM on its last packet completes with the immediate",
         send_with_immediate},
        {"send_too_long_for_wqe",
         "a SEND longer than the WQE: INVALID_REQUEST NAK, LOC_LEN_ERR completion, QP error",
         send_too_long_for_wqe},
        {"send_with_inv_bad_key",
         "a SEND with invalidate of a key the responder's PD has no fast-registration MR for "
         "(an ordinary MR's rkey, an unknown key): REMOTE_INVALID_REQUEST NAK at the INV "
         "packet's PSN, REM_INV_REQ_ERR completion, QP error",
         send_with_inv_bad_key},
        {"write_with_immediate",
         "a WRITE with immediate is placed and consumes a receive WQE (RECV_RDMA_WITH_IMM)",
         write_with_immediate},
        {"zero_length_send", "a zero-length SEND completes with byte_len 0", zero_length_send},
        {"ce_marks_echoed", "CE-marked packets are counted in the ACK's ce_count (rx_ecn_ce)",
         ce_marks_echoed},
        {"write_bad_rkey",
         "WRITE with an unknown rkey: REMOTE_ACCESS NAK at its PSN, QP error, not placed",
         write_bad_rkey},
        {"write_out_of_bounds", "WRITE past the end of the region: REMOTE_ACCESS NAK, QP error",
         write_out_of_bounds},
        {"write_without_rights",
         "WRITE into a region without remote write: REMOTE_ACCESS NAK, QP error",
         write_without_rights},
        {"read_bad_rkey", "READ_REQ with an unknown rkey: REMOTE_ACCESS NAK, QP error",
         read_bad_rkey},
        {"zero_length_read_needs_no_key",
         "a zero-length READ_REQ with rkey 0 at address 0: one empty response, no NAK",
         zero_length_read_needs_no_key},
        {"read_out_of_bounds", "READ_REQ past the end of the region: REMOTE_ACCESS NAK, QP error",
         read_out_of_bounds},
        {"read_without_rights",
         "READ_REQ of a region without remote read: REMOTE_ACCESS NAK, QP error",
         read_without_rights},
        {"access_nak_names_the_psn",
         "a refused WRITE behind a gap: the REMOTE_ACCESS NAK names its PSN, QP error",
         access_nak_names_the_psn},
        {"duplicate_read_with_bad_rkey",
         "a READ_REQ at the PSN of an executed READ but with a bad rkey: not that READ, "
         "dropped, counted (rx_duplicate_read_unknown), no NAK, QP unharmed",
         duplicate_read_with_bad_rkey},
        {"duplicate_read_unknown_psn",
         "a READ_REQ far behind cum_psn where no READ was, for the whole region: dropped, no "
         "response, counted (rx_duplicate_read_unknown), QP unharmed",
         duplicate_read_unknown_psn},
        {"duplicate_read_larger_than_original",
         "a duplicate READ_REQ asking more than the READ executed at its PSN: dropped, no "
         "response; the READ as it was is still answered again",
         duplicate_read_larger_than_original},
        {"duplicate_read_other_message",
         "a READ_REQ behind cum_psn inside an executed READ's PSNs but with another address, "
         "offset or MSN: dropped, counted (rx_duplicate_read_unknown)",
         duplicate_read_other_message},
        {"read_after_dereg",
         "a READ_REQ behind a gap whose region is deregistered (and the buffer rewritten) before "
         "the gap fills: no READ response, REMOTE_ACCESS NAK at its PSN, QP error",
         read_after_dereg},
        {"read_after_rereg",
         "a READ_REQ behind a gap whose region is re-registered onto another buffer (and the old "
         "one rewritten) before the gap fills: no READ response, REMOTE_ACCESS NAK at its PSN, "
         "QP error",
         read_after_rereg},
        {"reread_completes_messages_it_passes",
         "a re-read that moves cum_psn past a SEND that had arrived behind the lost part: the "
         "SEND completes then",
         reread_completes_messages_it_passes},
        {"srq_message_ahead_of_its_psn",
         "on an SRQ shared by two QPs, a SEND claiming a message further ahead than its PSN: "
         "dropped, counted (rx_bad_peer), takes no WQE; the other QP's messages take them all",
         srq_message_ahead_of_its_psn},
        {"recv_after_dereg",
         "a SEND's last packet after its receive buffer's region was deregistered: not placed, "
         "REMOTE_OPERATIONAL NAK, LOC_PROT_ERR completion, QP error",
         recv_after_dereg},
    };
}

}  // namespace metaroce::compliance
