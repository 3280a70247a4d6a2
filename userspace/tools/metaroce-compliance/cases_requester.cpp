// The DUT as requester: what it sends (flags, fields, message numbers), and how it reacts to
// SACKs, NAKs, invalid ACKs, READ responses and silence (protocol.md sections 3, 8).
#include <cstring>
#include <thread>

#include "harness.h"
#include "pattern.h"

namespace metaroce::compliance {
namespace {

using Clock = std::chrono::steady_clock;

// The harness's fictitious remote memory (it answers READs with this pattern).
constexpr std::uint64_t kRemote = 0x0000100000000000ull;
constexpr std::uint32_t kRkey = 0x00abcdef;
constexpr std::uint64_t kRemoteSeed = 0x5245;
// In the DUT's local buffer: sources at 0.., READ destinations from kReadDst.
constexpr std::uint64_t kReadDst = 128 * 1024;

double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

void post(Conn& c, ibv_wr_opcode op, std::uint64_t wr_id, std::uint64_t local, std::uint32_t len,
          std::uint64_t remote = kRemote, std::uint32_t imm = 0) {
    c.qp().post_send(op, wr_id, c.local().addr() + local, len, c.local().lkey(), remote, kRkey,
                     imm);
}

// A READ response for response packet `k` of the READ_REQ `req` (its part starts at PSN
// req.psn and offset req.offset), with the harness's remote pattern.
Packet read_response(Conn& c, const Packet& req, std::uint32_t k) {
    const ReadReq& r = req.rreq();
    const std::uint32_t n = read_response_packets(r.len, c.mtu());
    const std::uint32_t begin = k * c.mtu();
    const std::uint32_t size = std::min(c.mtu(), r.len - begin);
    std::uint8_t flags = 0;
    if (k == 0) flags |= flag::kFirst;
    if (k + 1 == n) flags |= flag::kLast;
    Packet p = c.base(Opcode::ReadResponse, psn_add(req.bth.psn, k), flags);
    p.ext = Deth{std::uint64_t{r.offset} + begin, 0, r.msn, r.offset + r.len, 0};
    p.payload = tools::pattern(size, kRemoteSeed, r.va - kRemote + begin);
    return p;
}

void expect_wc(const ibv_wc& wc, std::uint64_t wr_id, ibv_wc_status status,
               std::optional<ibv_wc_opcode> opcode = std::nullopt) {
    expect(wc.wr_id == wr_id && wc.status == status && (!opcode || wc.opcode == *opcode),
           format("completion of %llu: %s opcode %d, expected %llu %s%s",
                  static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status),
                  wc.opcode, static_cast<unsigned long long>(wr_id), ibv_wc_status_str(status),
                  opcode ? format(" opcode %d", *opcode).c_str() : ""));
}

// The first DUT request packet (SEND, WRITE or READ_REQ) with PSN `psn`.
Seen expect_request(Conn& c, Psn psn, int timeout_ms = 3000) {
    const auto seen = c.receive_until(
        [psn](const Packet& p) { return p.bth.opcode != Opcode::Ack && p.bth.psn == psn; },
        timeout_ms);
    expect(!seen.empty() && seen.back().packet.bth.opcode != Opcode::Ack &&
               seen.back().packet.bth.psn == psn,
           format("the DUT sent no packet with PSN 0x%06x", psn));
    return seen.back();
}

// A resend (RETX) of `psn`; fails if any other request PSN in `forbidden` is sent first.
Seen expect_resend(Conn& c, Psn psn, const std::set<Psn>& forbidden, int timeout_ms = 3000) {
    const auto seen = c.receive_until(
        [&](const Packet& p) { return p.bth.opcode != Opcode::Ack && p.bth.psn == psn; },
        timeout_ms);
    for (const Seen& s : seen) {
        if (s.packet.bth.opcode == Opcode::Ack) continue;
        expect(forbidden.count(s.packet.bth.psn) == 0,
               "the DUT resent a PSN it knows was received: " + describe(s.packet));
    }
    expect(!seen.empty() && seen.back().packet.bth.psn == psn &&
               seen.back().packet.bth.opcode != Opcode::Ack,
           format("the DUT did not resend PSN 0x%06x", psn));
    const Packet& p = seen.back().packet;
    expect(p.bth.has(flag::kRetx) && p.bth.has(flag::kAckReq),
           "a retransmission without RETX and ACK_REQ: " + describe(p));
    return seen.back();
}

void check_data(const Seen& s, Opcode op, std::uint8_t flags, std::uint64_t addr, std::uint32_t key,
                std::uint32_t msn, std::uint32_t msg_len, std::uint32_t imm,
                const std::vector<std::uint8_t>& payload) {
    const Packet& p = s.packet;
    const Deth& d = p.deth();
    expect(p.bth.opcode == op, "wrong opcode: " + describe(p));
    expect(p.bth.flags == flags,
           format("flags 0x%02x, expected 0x%02x: ", p.bth.flags, flags) + describe(p));
    expect(d.addr == addr && d.key == key && d.msn == msn && d.msg_len == msg_len && d.imm == imm,
           format("DETH addr 0x%llx key 0x%x msn %u msg_len %u imm 0x%x, expected 0x%llx 0x%x "
                  "%u %u 0x%x",
                  static_cast<unsigned long long>(d.addr), d.key, d.msn, d.msg_len, d.imm,
                  static_cast<unsigned long long>(addr), key, msn, msg_len, imm));
    expect(p.payload == payload, "payload differs from the posted data: " + describe(p));
}

void requester_packet_format(Env& env) {
    Conn c(env);
    const Psn s = c.sq_psn();
    const std::uint32_t mtu = c.mtu();
    // Two 3-packet WRITEs (within 4 KiB for segments up to 1400 bytes).
    const std::uint32_t len1 = 2 * mtu + mtu / 2, len2 = 2 * mtu + 100;
    std::uint8_t* local = c.local().data();
    tools::fill_pattern({local, len1}, 1);
    tools::fill_pattern({local + 4096, 100}, 2);
    tools::fill_pattern({local + 8192, len2}, 3);
    std::memset(local + kReadDst, 0xa5, 2000);
    post(c, IBV_WR_RDMA_WRITE, 1, 0, len1);
    post(c, IBV_WR_SEND, 2, 4096, 100);
    post(c, IBV_WR_RDMA_WRITE_WITH_IMM, 3, 8192, len2, kRemote + 0x10000, 0xabcdef01);
    post(c, IBV_WR_RDMA_READ, 4, kReadDst, 2000, kRemote + 0x20000);
    const std::map<Psn, Seen> reqs = c.collect_requests(8);
    const auto at = [&](unsigned k) -> const Seen& {
        const auto it = reqs.find(psn_add(s, k));
        expect(it != reqs.end(), format("no packet with PSN sq_psn + %u", k));
        return it->second;
    };
    const auto slice = [&](std::uint64_t off, std::uint32_t len) {
        return std::vector<std::uint8_t>(local + off, local + off + len);
    };
    using namespace flag;
    // The first WRITE: MSN 0 (the next receive-consuming message's number).
    for (unsigned k = 0; k < 3; ++k) {
        const std::uint8_t f = (k == 0 ? kFirst : 0) | (k == 2 ? kLast | kAckReq : 0);
        const std::uint32_t len = std::min(mtu, len1 - k * mtu);
        check_data(at(k), Opcode::Write, f, kRemote + k * mtu, kRkey, 0, len1, 0,
                   slice(k * mtu, len));
    }
    // SEND: MSN 0, consumes the peer's first receive.
    check_data(at(3), Opcode::Send, kFirst | kLast | kAckReq, 0, 0, 0, 100, 0, slice(4096, 100));
    // WRITE with immediate: MSN 1; IMM and the value on its last packet only.
    for (unsigned k = 0; k < 3; ++k) {
        const std::uint8_t f = (k == 0 ? kFirst : 0) | (k == 2 ? kLast | kAckReq | kImm : 0);
        const std::uint32_t len = std::min(mtu, len2 - k * mtu);
        check_data(at(4 + k), Opcode::Write, f, kRemote + 0x10000 + k * mtu, kRkey, 1, len2,
                   k == 2 ? 0xabcdef01 : 0, slice(8192 + k * mtu, len));
    }
    // READ_REQ: ACK_REQ, MSN 2 (carries the next number without consuming it).
    const Packet& rreq = at(7).packet;
    expect(rreq.bth.opcode == Opcode::ReadRequest && rreq.bth.flags == kAckReq,
           "READ_REQ: " + describe(rreq));
    const ReadReq& r = rreq.rreq();
    expect(r.va == kRemote + 0x20000 && r.rkey == kRkey && r.len == 2000 && r.offset == 0 &&
               r.msn == 2,
           "READ_REQ fields: " + describe(rreq));
    // Every path's packets leave from one UDP source port 0xC000 | entropy.
    std::map<std::uint16_t, std::uint16_t> port_of_path;
    for (const auto& [psn, seen] : reqs) {
        expect((seen.src_port & 0xc000) == 0xc000,
               format("UDP source port 0x%04x is not 0xC000 | entropy", seen.src_port));
        expect(seen.packet.bth.path < 64, "path index >= 64: " + describe(seen.packet));
        const auto [it, fresh] = port_of_path.emplace(seen.packet.bth.path, seen.src_port);
        expect(fresh || it->second == seen.src_port,
               format("path %u used UDP source ports 0x%04x and 0x%04x", seen.packet.bth.path,
                      it->second, seen.src_port));
    }
    note("%zu paths used for 8 packets", port_of_path.size());
    // Complete everything: ACK the data, answer the READ.
    c.send(c.ack(psn_add(s, 7)));
    c.send(read_response(c, rreq, 0));
    c.send(read_response(c, rreq, 1));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
    expect_wc(c.expect_send_completion(), 2, IBV_WC_SUCCESS, IBV_WC_SEND);
    expect_wc(c.expect_send_completion(), 3, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
    expect_wc(c.expect_send_completion(), 4, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
    expect(tools::first_mismatch({local + kReadDst, 2000}, kRemoteSeed, 0x20000) < 0,
           "the READ's data was not placed");
}

// One try of requester_selective_retransmit; false when the harness answered too late for the
// check to be strict (the DUT's retransmission timer may have fired before the SACK arrived).
bool selective_retransmit_once(Env& env, bool last_try) {
    // The DUT's first RTO (no RTT sample yet) is 20 ms; answer well inside it.
    constexpr double kPromptMs = 10.0;
    Conn c(env);
    const Psn s = c.sq_psn();
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 12 * c.mtu());
    const auto reqs = c.collect_requests(12);
    // Everything but s + 2 arrived (s, s + 1 cumulatively, s + 3 .. s + 11 selectively).
    std::set<Psn> sacked;
    for (unsigned k = 3; k < 12; ++k) sacked.insert(psn_add(s, k));
    c.send(c.ack(psn_add(s, 2), sacked));
    const double answered = ms_between(reqs.at(s).at, Clock::now());
    const bool prompt = answered < kPromptMs;
    if (!prompt && !last_try) {
        note("the SACK left %.1f ms after the first packet: trying again", answered);
        return false;
    }
    // A tail-loss probe of the newest PSN may have crossed our SACK; nothing else may be resent.
    std::set<Psn> forbidden;
    if (prompt) {
        forbidden = sacked;
        forbidden.erase(psn_add(s, 11));
        forbidden.insert(s);
        forbidden.insert(psn_next(s));
    } else {
        note("the SACK left %.1f ms after the first packet: only the resend is checked", answered);
    }
    expect_resend(c, psn_add(s, 2), forbidden);
    c.send(c.ack(psn_add(s, 12)));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS);
    for (const Seen& x : c.collect(200)) {
        expect(x.packet.bth.opcode == Opcode::Ack,
               "resent after everything was acknowledged: " + describe(x.packet));
    }
    return true;
}

void requester_selective_retransmit(Env& env) {
    constexpr int kTries = 3;
    for (int t = 1; t <= kTries; ++t) {
        if (selective_retransmit_once(env, t == kTries)) return;
    }
}

void requester_tail_loss_probe(Env& env) {
    Conn c(env);
    const Psn s = c.sq_psn();
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 100);
    const Seen first = expect_request(c, s);
    // Nothing is acknowledged: the newest packet in flight is resent after the probe timeout (at
    // least 1 ms).
    const Seen probe = expect_resend(c, s, {}, 3000);
    const double gap = ms_between(first.at, probe.at);
    note("resent after %.1f ms", gap);
    expect(gap >= 1.0, format("resent after %.3f ms, before the 1 ms floor", gap));
    c.send(c.ack(psn_next(s)));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS);
}

// Probes in a row are spaced by the probe timeout too: the second is not due one timer tick
// after the first (protocol.md section 8). Three packets, so that the first probe leaves two in
// flight (with none, the resend would restart the quiet clock anyway).
void requester_tail_probes_spaced(Env& env) {
    Conn c(env);
    const Psn last = psn_add(c.sq_psn(), 2);
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 3 * c.mtu());
    c.collect_requests(3);
    // The DUT has no RTT sample (nothing was acknowledged yet): its probe timeout is
    // the initial RTO, 20 ms. The gap between the probes is measured, not the one before the
    // first: the harness may read the first transmissions late.
    const Seen probe1 = expect_resend(c, last, {}, 3000);
    const Seen probe2 = expect_resend(c, last, {}, 3000);
    const double gap = ms_between(probe1.at, probe2.at);
    const double floor_ms = METAROCE_INITIAL_RTO_US / 2000.0;
    note("the second probe %.1f ms after the first", gap);
    expect(
        gap >= floor_ms,
        format("the second probe came %.3f ms after the first, under half the probe timeout", gap));
    c.send(c.ack(psn_next(last)));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS);
}

void requester_rnr_nak(Env& env) {
    Conn c(env);
    const Psn s = c.sq_psn();
    post(c, IBV_WR_SEND, 1, 0, 100);
    expect_request(c, s);
    const auto nak_at = Clock::now();
    c.send(c.ack(s, {}, Syndrome::RnrNak, s, 20));  // RNR timer code 20: 10.24 ms
    const Seen again = expect_resend(c, s, {}, 3000);
    const double waited = ms_between(nak_at, again.at);
    note("resent %.1f ms after the RNR NAK", waited);
    expect(waited >= 10.0, format("resent %.2f ms after an RNR NAK asking for 10.24 ms", waited));
    c.send(c.ack(psn_next(s)));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS);
}

void requester_rnr_retry_exceeded(Env& env) {
    ConnOptions o;
    o.rnr_retry = 1;
    Conn c(env, o);
    const Psn s = c.sq_psn();
    post(c, IBV_WR_SEND, 1, 0, 100);
    expect_request(c, s);
    c.send(c.ack(s, {}, Syndrome::RnrNak, s, 1));
    expect_resend(c, s, {}, 3000);
    c.send(c.ack(s, {}, Syndrome::RnrNak, s, 1));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_RNR_RETRY_EXC_ERR);
    c.expect_state(IBV_QPS_ERR);
}

void requester_rnr_nak_per_packet(Env& env) {
    ConnOptions o;
    o.rnr_retry = 1;
    Conn c(env, o);
    const Psn s = c.sq_psn();
    post(c, IBV_WR_SEND, 1, 0, 3 * c.mtu());
    c.collect_requests(3);
    // A responder NAKs each packet of the message it refuses: one wait (10.24 ms), one retry.
    for (unsigned k = 0; k < 3; ++k) c.send(c.ack(s, {}, Syndrome::RnrNak, psn_add(s, k), 20));
    expect_resend(c, s, {}, 3000);
    c.send(c.ack(psn_add(s, 3)));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS);
}

void fatal_nak(Env& env, Syndrome syndrome, std::uint8_t arg, ibv_wc_status want) {
    Conn c(env);
    const Psn s = c.sq_psn();
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 100);
    post(c, IBV_WR_RDMA_WRITE, 2, 0, 100);
    expect_request(c, psn_next(s));
    c.send(c.ack(s, {}, syndrome, s, arg));
    const ibv_wc wc = c.expect_send_completion();
    if (syndrome == Syndrome::Version) {
        expect(wc.wr_id == 1 && wc.status != IBV_WC_SUCCESS && wc.status != IBV_WC_WR_FLUSH_ERR,
               format("after a VERSION NAK the work request completed with %s",
                      ibv_wc_status_str(wc.status)));
    } else {
        expect_wc(wc, 1, want);
    }
    expect_wc(c.expect_send_completion(), 2, IBV_WC_WR_FLUSH_ERR);
    c.expect_state(IBV_QPS_ERR);
    post(c, IBV_WR_RDMA_WRITE, 3, 0, 100);
    expect_wc(c.expect_send_completion(), 3, IBV_WC_WR_FLUSH_ERR);
}

void requester_remote_access_nak(Env& env) {
    fatal_nak(env, Syndrome::RemoteAccess, 0, IBV_WC_REM_ACCESS_ERR);
}

void requester_invalid_request_nak(Env& env) {
    fatal_nak(env, Syndrome::InvalidRequest, 0, IBV_WC_REM_INV_REQ_ERR);
}

void requester_remote_op_nak(Env& env) {
    fatal_nak(env, Syndrome::RemoteOperational, 0, IBV_WC_REM_OP_ERR);
}

void requester_version_nak(Env& env) {
    fatal_nak(env, Syndrome::Version, METAROCE_VERSION, IBV_WC_GENERAL_ERR);
}

void requester_ack_never_sent(Env& env) {
    Conn c(env);
    const Psn s = c.sq_psn();
    CounterCheck counters(env);
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 100);
    expect_request(c, s);
    c.send(c.ack(psn_add(s, 5)));  // acknowledges PSNs never sent
    expect(!c.poll_send(200).has_value(), "an ACK for PSNs never sent completed a work request");
    counters.expect_delta("rx_ack_invalid", 1);
    c.send(c.ack(psn_next(s)));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS);
}

void requester_sack_never_sent(Env& env) {
    Conn c(env);
    const Psn s = c.sq_psn();
    CounterCheck counters(env);
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 100);
    expect_request(c, s);
    // cum_psn is fine, but the bitmap claims PSN s + 3, never sent: an ACK for PSNs never
    // sent (section 12), dropped and counted.
    c.send(c.ack(s, {psn_add(s, 3)}));
    c.collect(100);
    counters.expect_delta("rx_ack_invalid", 1);
    c.send(c.ack(psn_next(s)));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS);
}

// Off-path injection (protocol.md section 12.1). A forgery that gets every field right but the
// timestamp echo: ts_echo half the 32-bit space away from any the DUT sent.
Packet forged(const Conn& c, Packet p) {
    p.ack().ts_echo = c.echo_ts() ^ 0x80000000u;
    return p;
}

// The forgeries changed nothing: no completion, the QP in RTS.
void expect_nothing_completed(Conn& c, const char* what) {
    const std::optional<ibv_wc> early = c.poll_send(200);
    expect(!early.has_value(),
           format("%s: work request completed with %s although nothing was delivered", what,
                  early ? ibv_wc_status_str(early->status) : ""));
    c.expect_state(IBV_QPS_RTS);
}

// Then the real ACK completes the work request.
void expect_real_ack_completes(Conn& c, Psn cum) {
    c.send(c.ack(cum));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS);
    c.expect_state(IBV_QPS_RTS);
}

void requester_forged_ack_bad_echo(Env& env) {
    Conn c(env);
    const Psn s = c.sq_psn();
    CounterCheck counters(env);
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 3 * c.mtu());
    c.collect_requests(3);
    // In the window and cumulative, as a blind spoofer who guessed the PSN sends it; the
    // packets were never delivered (the harness "lost" them).
    c.send(forged(c, c.ack(psn_add(s, 3))));
    // And a SACK-only forgery: cum_psn behind the oldest PSN outstanding, bits on all three.
    c.send(forged(c, c.ack(psn_add(s, -1), {s, psn_add(s, 1), psn_add(s, 2)})));
    expect_nothing_completed(c, "an ACK with a forged ts_echo");
    counters.expect_delta("rx_ack_bad_echo", 2);
    expect_real_ack_completes(c, psn_add(s, 3));
}

void requester_forged_nak_bad_echo(Env& env) {
    Conn c(env);
    const Psn s = c.sq_psn();
    CounterCheck counters(env);
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 100);
    expect_request(c, s);
    // A fatal NAK for the outstanding PSN, and an RNR NAK that would stall it for 655 ms.
    c.send(forged(c, c.ack(s, {}, Syndrome::RemoteAccess, s)));
    c.send(forged(c, c.ack(s, {}, Syndrome::RnrNak, s, 0)));
    expect_nothing_completed(c, "a NAK with a forged ts_echo");
    counters.expect_delta("rx_ack_bad_echo", 2);
    expect_real_ack_completes(c, psn_next(s));
}

void requester_nak_not_outstanding(Env& env) {
    ConnOptions o;
    o.rnr_retry = 0;
    Conn c(env, o);
    const Psn s = c.sq_psn();
    CounterCheck counters(env);
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 3 * c.mtu());
    c.collect_requests(3);
    // s + 1 and s + 2 are delivered, s is outstanding.
    c.send(c.ack(s, {psn_add(s, 1), psn_add(s, 2)}));
    c.collect(50);
    // NAKs for PSNs that are not outstanding (section 12.1): one already acknowledged (an RNR
    // NAK, with rnr_retry 0, would fail the work request), one never sent, and one behind the
    // NAK's own cum_psn (the responder cannot refuse what it says it received).
    c.send(c.ack(s, {psn_add(s, 1), psn_add(s, 2)}, Syndrome::RnrNak, psn_add(s, 1), 0));
    c.send(c.ack(s, {psn_add(s, 1), psn_add(s, 2)}, Syndrome::RemoteAccess, psn_add(s, 3)));
    c.send(c.ack(psn_add(s, 1), {psn_add(s, 2)}, Syndrome::RemoteAccess, s));
    expect_nothing_completed(c, "a NAK for a PSN not outstanding");
    counters.expect_delta("rx_ack_invalid", 3);
    expect_real_ack_completes(c, psn_add(s, 3));
}

Packet post_read_and_capture(Conn& c, std::uint32_t len) {
    std::memset(c.local().data() + kReadDst, 0xa5, len);
    post(c, IBV_WR_RDMA_READ, 1, kReadDst, len, kRemote + 0x40000);
    const Seen req = expect_request(c, c.sq_psn());
    expect(req.packet.bth.opcode == Opcode::ReadRequest, "not a READ_REQ: " + describe(req.packet));
    return req.packet;
}

// A fatal NAK leaves the responder in the error state: a work request before the refused one
// that is not finished (here a READ never answered) never will be, and completes with
// WR_FLUSH_ERR ahead of the refused one (protocol.md section 6), not with a retry timeout.
void requester_nak_flushes_unfinished_before(Env& env) {
    Conn c(env);
    const Psn s = c.sq_psn();
    post_read_and_capture(c, c.mtu());
    post(c, IBV_WR_RDMA_WRITE, 2, 0, 100);
    expect_request(c, psn_next(s));
    c.send(c.ack(s, {}, Syndrome::RemoteAccess, psn_next(s)));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_WR_FLUSH_ERR);
    expect_wc(c.expect_send_completion(), 2, IBV_WC_REM_ACCESS_ERR);
    c.expect_state(IBV_QPS_ERR);
}

// A responder that accepted a READ (its ACK passed the READ's PSNs) refuses a part when the
// region is revoked before the part's turn, with a NAK behind its own cum_psn (protocol.md
// sections 6 and 12.1). The DUT takes it while the response is due: REM_ACCESS_ERR, not a
// retry timeout; a NAK behind cum_psn for a response that arrived is stale and dropped.
void requester_nak_of_accepted_read(Env& env) {
    Conn c(env);
    CounterCheck counters(env);
    const std::uint32_t len = 3 * c.mtu();
    const Packet req = post_read_and_capture(c, len);
    const Psn s = req.bth.psn;
    c.send(c.ack(psn_add(s, 3)));
    c.send(read_response(c, req, 0));
    c.collect(50);
    c.send(c.ack(psn_add(s, 3), {}, Syndrome::RemoteAccess, s));
    expect_nothing_completed(c, "a NAK for a READ response that arrived");
    counters.expect_delta("rx_ack_invalid", 1);
    c.send(c.ack(psn_add(s, 3), {}, Syndrome::RemoteAccess, psn_add(s, 1)));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_REM_ACCESS_ERR);
    c.expect_state(IBV_QPS_ERR);
}

void expect_read_done(Conn& c, std::uint32_t len) {
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
    expect(tools::first_mismatch({c.local().data() + kReadDst, len}, kRemoteSeed, 0x40000) < 0,
           "the READ's data was not placed correctly");
}

void requester_read_out_of_order(Env& env) {
    Conn c(env);
    const std::uint32_t len = 2 * c.mtu() + 500;
    const Packet req = post_read_and_capture(c, len);
    c.send(read_response(c, req, 2));
    c.send(read_response(c, req, 0));
    c.send(read_response(c, req, 1));
    expect_read_done(c, len);
}

void requester_read_duplicate_response(Env& env) {
    Conn c(env);
    CounterCheck counters(env);
    const std::uint32_t len = 2 * c.mtu();
    const Packet req = post_read_and_capture(c, len);
    c.send(read_response(c, req, 0));
    c.send(read_response(c, req, 0));
    c.send(read_response(c, req, 1));
    expect_read_done(c, len);
    counters.expect_delta("rx_duplicate", 1);
}

void requester_read_response_bad_offset(Env& env) {
    Conn c(env);
    CounterCheck counters(env);
    const std::uint32_t len = 2 * c.mtu();
    const Packet req = post_read_and_capture(c, len);
    Packet bad = read_response(c, req, 1);
    bad.bth.psn = req.bth.psn;  // response 0's PSN with response 1's offset and data
    bad.bth.flags = flag::kLast;
    c.send(bad);
    c.collect(50);
    c.send(read_response(c, req, 0));
    c.send(read_response(c, req, 1));
    expect_read_done(c, len);
    counters.expect_delta("rx_malformed", 1);
}

// READ responses whose address wraps 2^64, or whose low 32 bits are a valid offset (issue 13,
// finding 1): malformed, not placed; the READ completes with the real responses.
void requester_read_response_offset_wraps(Env& env) {
    Conn c(env);
    CounterCheck counters(env);
    const std::uint32_t mtu = c.mtu();
    const std::uint32_t len = 2 * mtu;
    const Packet req = post_read_and_capture(c, len);
    const std::uint64_t addrs[] = {0xFFFFFFFFFFFFFFFFull - mtu + 1, 0xFFFFFFFFFFFFFBB8ull,
                                   0x100000000ull, 0x100000000ull + mtu};
    for (const std::uint64_t addr : addrs) {
        Packet bad = read_response(c, req, addr % 0x100000000ull == mtu ? 1 : 0);
        bad.deth().addr = addr;
        bad.payload = bytes_of(bad.payload.size(), addr);
        c.send(bad);
    }
    c.collect(50);
    expect(!c.poll_send(0).has_value(), "the READ completed on bogus responses");
    c.send(read_response(c, req, 0));
    c.send(read_response(c, req, 1));
    expect_read_done(c, len);
    counters.expect_delta("rx_malformed", std::size(addrs));
}

void requester_reread(Env& env) {
    Conn c(env);
    const std::uint32_t mtu = c.mtu();
    const std::uint32_t len = 3 * mtu;
    const Packet req = post_read_and_capture(c, len);
    c.send(read_response(c, req, 0));
    c.send(read_response(c, req, 2));
    // Response 1 is lost: the DUT must re-read exactly it.
    const Psn lost = psn_next(req.bth.psn);
    // (A tail-loss probe may re-read the newest response before ours arrived: allowed.)
    const Seen again = expect_resend(c, lost, {req.bth.psn}, 3000);
    const Packet& rr = again.packet;
    expect(rr.bth.opcode == Opcode::ReadRequest, "not a re-read: " + describe(rr));
    const ReadReq& r = rr.rreq();
    expect(r.offset == mtu && r.len == mtu && r.va == req.rreq().va + mtu &&
               r.rkey == req.rreq().rkey && r.msn == req.rreq().msn,
           "the re-read does not ask for exactly the lost response: " + describe(rr));
    c.send(read_response(c, rr, 0));
    expect_read_done(c, len);
}

// A READ of `n` responses posted next to a 100-byte WRITE (wr_id 2), the READ (wr_id 1) first
// if `read_first`; returns its READ_REQ and the WRITE's PSN.
std::pair<Packet, Psn> post_read_and_write(Conn& c, std::uint32_t n, bool read_first) {
    const Psn s = c.sq_psn();
    std::memset(c.local().data() + kReadDst, 0xa5, n * c.mtu());
    if (!read_first) post(c, IBV_WR_RDMA_WRITE, 2, 0, 100);
    post(c, IBV_WR_RDMA_READ, 1, kReadDst, n * c.mtu(), kRemote + 0x40000);
    if (read_first) post(c, IBV_WR_RDMA_WRITE, 2, 0, 100);
    const auto sent = c.collect_requests(2);
    const Psn read_psn = read_first ? s : psn_next(s);
    const Psn write_psn = read_first ? psn_add(s, n) : s;
    expect(sent.count(read_psn) && sent.at(read_psn).packet.bth.opcode == Opcode::ReadRequest &&
               sent.count(write_psn),
           "the DUT did not send the READ_REQ and the WRITE as one request each");
    return {sent.at(read_psn).packet, write_psn};
}

// Both work requests acknowledged, every response sent: both complete, the READ's data placed.
void finish_read_and_write(Conn& c, const Packet& req, std::uint32_t n, bool read_first) {
    c.send(c.ack(psn_add(c.sq_psn(), n + 1)));
    for (std::uint32_t k = 0; k < n; ++k) c.send(read_response(c, req, k));
    if (read_first) {
        expect_read_done(c, n * c.mtu());
        expect_wc(c.expect_send_completion(), 2, IBV_WC_SUCCESS);
    } else {
        expect_wc(c.expect_send_completion(), 2, IBV_WC_SUCCESS);
        expect_read_done(c, n * c.mtu());
    }
}

// Twice the initial reorder allowance: what a READ_REQ asks for in the cases below.
constexpr std::uint32_t kReadResponses = 2 * METAROCE_REORDER_ALLOWANCE;

void requester_read_after_write_one_transmission(Env& env) {
    Conn c(env);
    CounterCheck counters(env);
    const auto [req, write_psn] = post_read_and_write(c, kReadResponses, false);
    // The READ_REQ was acknowledged, the WRITE before it not yet: one transmission went after
    // the WRITE, whatever the READ asks for. Too few for the count rule.
    std::set<Psn> read_psns;
    for (std::uint32_t k = 0; k < kReadResponses; ++k) read_psns.insert(psn_add(req.bth.psn, k));
    c.send(c.ack(write_psn, read_psns));
    c.collect(5);
    counters.expect_delta("lost_by_count", 0);
    finish_read_and_write(c, req, kReadResponses, false);
}

void requester_write_after_read_one_transmission(Env& env) {
    Conn c(env);
    CounterCheck counters(env);
    const auto [req, write_psn] = post_read_and_write(c, kReadResponses, true);
    // The WRITE after the READ_REQ was acknowledged, the READ_REQ not yet: none of the READ's
    // responses is lost by count.
    c.send(c.ack(req.bth.psn, {write_psn}));
    c.collect(5);
    counters.expect_delta("lost_by_count", 0);
    finish_read_and_write(c, req, kReadResponses, true);
}

// Polls the DUT's send queue, taking in what it sends, for up to `ms`.
std::optional<ibv_wc> poll_send_for(Env& env, Conn& c, int ms) {
    std::optional<ibv_wc> wc;
    const auto deadline = Clock::now() + std::chrono::milliseconds(env.ms(ms));
    while (!wc && Clock::now() < deadline) {
        c.collect(2);
        wc = c.poll_send(0);
    }
    return wc;
}

// Retry periods of 67 ms (timeout 14) and no retry to spare: the first period that ends
// without progress after a resend fails the work request.
constexpr std::uint8_t kRetryTimeout = 14;
constexpr double kRetryPeriodMs = 4.096 * (1 << kRetryTimeout) / 1000;

ConnOptions no_retries() {
    ConnOptions o;
    o.timeout = kRetryTimeout;
    o.retry_cnt = 0;
    return o;
}

void requester_retry_period_not_restarted_by_resends(Env& env) {
    Conn c(env, no_retries());
    const double period_ms = kRetryPeriodMs;
    const auto posted = Clock::now();
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 100);
    // Never acknowledged. The DUT resends its one packet (probes, then timeouts) within the
    // first period; a resend is not a send after a quiet time, so the period that began with
    // the first send ends a period later with a retry, and retry_cnt 0 leaves none to spare.
    const std::optional<ibv_wc> wc = poll_send_for(env, c, 3000);
    expect(wc.has_value(), "no completion 3 s after a send never acknowledged");
    const double at = ms_between(posted, Clock::now());
    note("RETRY_EXC_ERR %.0f ms after the post (retry period %.0f ms)", at, period_ms);
    expect_wc(*wc, 1, IBV_WC_RETRY_EXC_ERR);
    expect(at >= period_ms - 2 && at < 1.6 * period_ms,
           format("RETRY_EXC_ERR %.0f ms after the post, not at the end of the first retry "
                  "period (%.0f ms)",
                  at, period_ms));
}

void requester_read_request_ack_is_progress(Env& env) {
    Conn c(env, no_retries());
    const double period_ms = kRetryPeriodMs;
    const auto posted = Clock::now();
    const Packet req = post_read_and_capture(c, c.mtu());
    // No answer: the DUT probes twice (about 20 and 40 ms after its send), which makes the
    // first retry period one with a resend. Then the READ_REQ is acknowledged and its response
    // never sent. The acknowledgement is progress (protocol.md section 8): a period starts
    // there, and the retries run out a period after it at the soonest, not with the end of the
    // first period.
    const Seen probe1 = expect_resend(c, req.bth.psn, {}, 3000);
    const Seen probe2 = expect_resend(c, req.bth.psn, {}, 3000);
    const auto acked_at = Clock::now();
    note("probes %.0f and %.0f ms after the post, acknowledged at %.0f ms",
         ms_between(posted, probe1.at), ms_between(posted, probe2.at),
         ms_between(posted, acked_at));
    c.send(c.ack(psn_next(req.bth.psn)));
    const std::optional<ibv_wc> wc = poll_send_for(env, c, 3000);
    expect(wc.has_value(), "no completion 3 s after the READ_REQ was acknowledged");
    const double after = ms_between(acked_at, Clock::now());
    note("retries ran out %.0f ms after the READ_REQ was acknowledged", after);
    expect_wc(*wc, 1, IBV_WC_RETRY_EXC_ERR);
    expect(after >= period_ms - 20,
           format("the retries ran out %.0f ms after the READ_REQ was acknowledged, less than "
                  "a retry period (%.0f ms): the acknowledgement was not progress",
                  after, period_ms));
}

void requester_reread_response_lost_by_timeout_only(Env& env) {
    Conn c(env);
    const std::uint32_t n = kReadResponses;
    const std::uint32_t len = n * c.mtu();
    // First an RTT sample of 100 ms (a WRITE acknowledged late), so that the DUT's timer,
    // 20 ms before any sample, cannot beat the count rule while the harness sends the 15
    // responses below (under emulation it did, now and then).
    post(c, IBV_WR_RDMA_WRITE, 9, 0, 100);
    expect_request(c, c.sq_psn());
    std::this_thread::sleep_for(std::chrono::milliseconds(env.ms(100)));
    c.send(c.ack(psn_next(c.sq_psn())));
    expect_wc(c.expect_send_completion(), 9, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
    CounterCheck first_loss(env);
    const Psn s = psn_next(c.sq_psn());
    std::memset(c.local().data() + kReadDst, 0xa5, len);
    post(c, IBV_WR_RDMA_READ, 1, kReadDst, len, kRemote + 0x40000);
    const Packet req = expect_request(c, s).packet;
    // Response 1 is missing behind 15 later ones: lost by count (the responses show that the
    // request arrived, with no ACK), re-read.
    for (std::uint32_t k = 0; k < n; ++k) {
        if (k != 1) c.send(read_response(c, req, k));
    }
    const Seen reread = expect_resend(c, psn_add(s, 1), {}, 3000);
    first_loss.expect_delta("lost_by_count", 1);
    CounterCheck counters(env);
    // A second READ, whose requests (the re-read's too) are acknowledged and whose responses
    // all arrive: the responder answers a re-read ahead of what it holds, so they show nothing
    // about the re-read's answer, which is lost by the timeout only.
    const std::uint64_t second_dst = kReadDst + len;
    std::memset(c.local().data() + second_dst, 0xa5, len);
    post(c, IBV_WR_RDMA_READ, 2, second_dst, len, kRemote + 0x80000);
    const Packet req2 = expect_request(c, psn_add(s, n)).packet;
    c.send(c.ack(psn_add(s, 2 * n)));
    for (std::uint32_t k = 0; k < n; ++k) c.send(read_response(c, req2, k));
    c.collect(5);
    counters.expect_delta("lost_by_count", 0);
    c.send(read_response(c, reread.packet, 0));
    expect_read_done(c, len);
    expect_wc(c.expect_send_completion(), 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
    expect(tools::first_mismatch({c.local().data() + second_dst, len}, kRemoteSeed, 0x80000) < 0,
           "the second READ's data was not placed correctly");
}

// A responder refuses a re-read at its turn when the region was revoked meanwhile, naming a PSN
// the re-read asked for; the first reading's response may have arrived by then (protocol.md
// sections 6 and 12.1). Such a late fatal NAK is taken, for the first PSN still owed: here the
// WRITE after the READ completes with REM_ACCESS_ERR, not with a retry timeout.
void requester_late_nak_of_reread(Env& env) {
    Conn c(env);
    const auto [req, write_psn] = post_read_and_write(c, 3, true);
    const Psn s = req.bth.psn;
    c.send(read_response(c, req, 0));
    c.send(read_response(c, req, 2));
    expect_resend(c, psn_add(s, 1), {s}, 3000);
    c.send(read_response(c, req, 1));
    expect_read_done(c, 3 * c.mtu());
    c.send(c.ack(write_psn, {}, Syndrome::RemoteAccess, psn_add(s, 1)));
    expect_wc(c.expect_send_completion(), 2, IBV_WC_REM_ACCESS_ERR);
    c.expect_state(IBV_QPS_ERR);
}

void requester_retry_exceeded(Env& env) {
    ConnOptions o;
    o.timeout = 10;  // 4.2 ms per period
    o.retry_cnt = 1;
    Conn c(env, o);
    CounterCheck counters(env);
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 100);
    post(c, IBV_WR_RDMA_WRITE, 2, 0, 100);
    // Never acknowledged: the transport timeout runs out after retry_cnt retries.
    std::optional<ibv_wc> wc;
    const auto deadline = Clock::now() + std::chrono::milliseconds(env.ms(10000));
    while (!wc && Clock::now() < deadline) {
        c.collect(20);
        wc = c.poll_send(0);
    }
    expect(wc.has_value(), "no completion after 10 s without any ACK");
    expect_wc(*wc, 1, IBV_WC_RETRY_EXC_ERR);
    expect_wc(c.expect_send_completion(), 2, IBV_WC_WR_FLUSH_ERR);
    c.expect_state(IBV_QPS_ERR);
    counters.expect_delta("retry_exceeded", 1);
}

void requester_psn_wrap(Env& env) {
    ConnOptions o;
    o.dut_sq_psn = 0xfffffe;
    Conn c(env, o);
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 4 * c.mtu());
    const auto reqs = c.collect_requests(4);
    for (const Psn p : {0xfffffeu, 0xffffffu, 0u, 1u}) {
        expect(reqs.count(p) == 1, format("no packet with PSN 0x%06x", p));
    }
    c.send(c.ack(2));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS);
}

// The DUT sends `n` new packets from PSN `first`: returns how many it sent before its first
// timer event (a tail-loss probe or an RTO, which also shrinks cwnd; RETX marks it), which is
// what its window allowed, then acknowledges everything until the last is in. Packets before
// `first` (late resends of earlier work) are ignored.
std::size_t sent_before_timer(Conn& c, Psn first, std::uint32_t n) {
    const Psn end = psn_add(first, n);
    std::set<Psn> fresh, received;
    bool timed_out = false;
    Psn cum = first;
    const auto deadline = Clock::now() + std::chrono::milliseconds(c.env().ms(3000));
    while (cum != end && Clock::now() < deadline) {
        const std::optional<Seen> seen = c.receive(100);
        if (!seen) {
            // Silence: the DUT waits for ACKs; the count is complete.
            timed_out = true;
            c.send(c.ack(cum));
            continue;
        }
        const Packet& p = seen->packet;
        if (p.bth.opcode == Opcode::Ack || psn_diff(p.bth.psn, first) < 0) continue;
        if (p.bth.has(flag::kRetx)) timed_out = true;
        if (psn_diff(p.bth.psn, cum) >= 0) {
            if (!timed_out) fresh.insert(p.bth.psn);
            received.insert(p.bth.psn);
            while (received.count(cum) != 0) cum = psn_next(cum);
        }
        if (timed_out) c.send(c.ack(cum));
    }
    c.send(c.ack(cum));
    return fresh.size();
}

void requester_ecn_halves_window(Env& env) {
    // A first PSN in the upper half of the PSN space: windows of data must still end there.
    ConnOptions o;
    o.dut_sq_psn = 0x900000;
    Conn c(env, o);
    const Psn s = c.sq_psn();
    // A first window of 32 packets, quick enough to be acknowledged before any timer, all
    // CE-marked (section 10): alpha starts at 1, so the window's end halves cwnd.
    constexpr std::uint32_t kMarked = 32;
    post(c, IBV_WR_RDMA_WRITE, 1, 0, kMarked * c.mtu());
    c.collect_requests(kMarked);
    Packet a = c.ack(psn_add(s, kMarked));
    a.ack().ce_count = kMarked;
    c.send(a);
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS);
    // Then more than half the initial window of 256, within the local buffer.
    const std::uint32_t packets = std::min<std::uint32_t>(180, Conn::kMrSize / c.mtu());
    post(c, IBV_WR_RDMA_WRITE, 2, 0, packets * c.mtu());
    const std::size_t sent = sent_before_timer(c, psn_add(s, kMarked), packets);
    note("after a fully marked window the DUT sent %zu new packets", sent);
    expect(sent != 0, "the DUT sent nothing after the marked window");
    expect(
        sent <= METAROCE_SACK_BITS / 2,
        format("%zu packets in flight after a fully CE-marked window: cwnd was not halved", sent));
    expect_wc(c.expect_send_completion(), 2, IBV_WC_SUCCESS);
}

void requester_stale_ack_ignored(Env& env) {
    Conn c(env);
    const Psn s = c.sq_psn();
    post(c, IBV_WR_RDMA_WRITE, 1, 0, 4 * c.mtu());
    c.collect_requests(4);
    c.send(c.ack(psn_add(s, 4)));
    expect_wc(c.expect_send_completion(), 1, IBV_WC_SUCCESS);
    // An ACK overtaken by a newer one (section 3.3): its fair-share hint of one packet is old
    // news and must not limit the next message.
    Packet stale = c.ack(psn_add(s, 2));
    stale.ack().fair_share = 1;
    c.send(stale);
    env.drain();  // the stale ACK is in before the next post
    post(c, IBV_WR_RDMA_WRITE, 2, 0, 32 * c.mtu());
    const std::size_t sent = sent_before_timer(c, psn_add(s, 4), 32);
    note("after a stale ACK with a fair-share hint of 1 the DUT sent %zu packets", sent);
    expect(sent > 1, "the DUT took the fair-share hint of a stale ACK");
    expect_wc(c.expect_send_completion(), 2, IBV_WC_SUCCESS);
}

// Deregistration revokes the source of a SEND not yet acknowledged: once ibv_dereg_mr
// returned, a resend must not read the (still mapped, rewritten) buffer; the WQE completes with
// LOC_PROT_ERR and the QP goes to the error state.
void requester_resend_after_dereg(Env& env) {
    ConnOptions o;
    o.timeout = 12;  // 17 ms per retry period: resends come soon
    Conn c(env, o);
    const std::uint32_t len = 1000;  // one packet, attached rather than copied
    DutRegion region(env, len, IBV_ACCESS_LOCAL_WRITE);
    const auto data = bytes_of(len, 44);
    std::memcpy(region.data(), data.data(), len);
    c.qp().post_send(IBV_WR_SEND, 9, region.addr(), len, region.lkey());
    const Seen first = expect_request(c, c.sq_psn());
    expect(first.packet.payload == data, "the SEND's payload differs from the buffer");
    region.deregister();
    const auto after = bytes_of(len, 45);
    std::memcpy(region.data(), after.data(), len);
    // No ACK: the DUT resends (tail probe, RTO) or fails the WQE.
    std::optional<ibv_wc> wc;
    const auto deadline = Clock::now() + std::chrono::milliseconds(env.ms(2000));
    while (!wc && Clock::now() < deadline) {
        for (const Seen& s : c.collect(50)) {
            const Packet& p = s.packet;
            if (p.bth.opcode != Opcode::Send) continue;
            // One sent before the deregistration may arrive after it: only the new bytes
            // prove a read after it.
            expect(p.payload != after,
                   "a resend after ibv_dereg_mr returned carries the bytes written after it: " +
                       describe(p));
            note("a resend with the old bytes (sent before the deregistration)");
        }
        wc = c.poll_send(0);
    }
    expect(wc.has_value(), "no send completion after the source region was deregistered");
    expect_wc(*wc, 9, IBV_WC_LOC_PROT_ERR);
    c.expect_state(IBV_QPS_ERR);
}

}  // namespace

std::vector<Case> requester_cases() {
    return {
        {"requester_packet_format",
         "WRITE, SEND, WRITE with immediate, READ from the DUT: PSNs, FIRST/LAST/ACK_REQ, IMM on "
         "the last packet only, DETH/RREQ fields, MSNs, UDP source ports; completions in order",
         requester_packet_format},
        {"requester_selective_retransmit",
         "SACK of all but one PSN: exactly that PSN is resent (RETX, ACK_REQ), nothing acked is",
         requester_selective_retransmit},
        {"requester_tail_loss_probe",
         "no ACK at all: the newest packet is resent (RETX) after at least 1 ms",
         requester_tail_loss_probe},
        {"requester_tail_probes_spaced",
         "no ACK at all: the second tail-loss probe follows the first by a probe timeout too",
         requester_tail_probes_spaced},
        {"requester_rnr_nak", "RNR NAK: the refused PSN is resent after the RNR timer",
         requester_rnr_nak},
        {"requester_rnr_nak_per_packet",
         "RNR NAKs for each packet of one refused message spend one retry (rnr_retry 1)",
         requester_rnr_nak_per_packet},
        {"requester_rnr_retry_exceeded", "RNR NAKs beyond rnr_retry: RNR_RETRY_EXC_ERR, QP error",
         requester_rnr_retry_exceeded},
        {"requester_remote_access_nak",
         "REMOTE_ACCESS NAK: REM_ACCESS_ERR, later work flushed, QP error",
         requester_remote_access_nak},
        {"requester_invalid_request_nak", "INVALID_REQUEST NAK: REM_INV_REQ_ERR, QP error",
         requester_invalid_request_nak},
        {"requester_remote_op_nak", "REMOTE_OPERATIONAL NAK: REM_OP_ERR, QP error",
         requester_remote_op_nak},
        {"requester_version_nak", "VERSION NAK: the work request fails, QP error",
         requester_version_nak},
        {"requester_ack_never_sent",
         "an ACK whose cum_psn is past what was sent: ignored, counted (rx_ack_invalid)",
         requester_ack_never_sent},
        {"requester_sack_never_sent",
         "an ACK whose SACK bitmap names a PSN never sent: dropped, counted (rx_ack_invalid)",
         requester_sack_never_sent},
        {"requester_forged_ack_bad_echo",
         "blind ACKs in the window whose ts_echo names no transmission (cumulative, SACK only): "
         "dropped, counted (rx_ack_bad_echo); the real ACK completes",
         requester_forged_ack_bad_echo},
        {"requester_forged_nak_bad_echo",
         "blind REMOTE_ACCESS and RNR NAKs for the outstanding PSN with a ts_echo that names no "
         "transmission: dropped, counted (rx_ack_bad_echo); the QP stays in RTS",
         requester_forged_nak_bad_echo},
        {"requester_nak_not_outstanding",
         "NAKs for a PSN acknowledged, never sent, or behind the NAK's cum_psn: dropped, counted "
         "(rx_ack_invalid); the real ACK completes",
         requester_nak_not_outstanding},
        {"requester_nak_of_accepted_read",
         "a REMOTE_ACCESS NAK behind cum_psn for a READ response still due (the region revoked "
         "after the READ was accepted): REM_ACCESS_ERR, QP error; for a response that arrived: "
         "dropped, counted (rx_ack_invalid)",
         requester_nak_of_accepted_read},
        {"requester_late_nak_of_reread",
         "a REMOTE_ACCESS NAK for a PSN a re-read asked for, after the first reading's response "
         "arrived: taken for the first PSN still owed (the WRITE after the READ: REM_ACCESS_ERR)",
         requester_late_nak_of_reread},
        {"requester_nak_flushes_unfinished_before",
         "a READ never answered, then a WRITE refused by a REMOTE_ACCESS NAK: the READ completes "
         "with WR_FLUSH_ERR, then the WRITE with REM_ACCESS_ERR, QP error",
         requester_nak_flushes_unfinished_before},
        {"requester_read_out_of_order",
         "READ responses in any order are placed; the READ completes with the right data",
         requester_read_out_of_order},
        {"requester_read_duplicate_response",
         "a duplicate READ response is dropped and counted (rx_duplicate)",
         requester_read_duplicate_response},
        {"requester_read_response_offset_wraps",
         "READ responses whose address wraps 2^64 or is past 2^32: malformed, not placed, the "
         "READ completes with the real responses",
         requester_read_response_offset_wraps},
        {"requester_read_response_bad_offset",
         "a READ response whose offset does not match its PSN: malformed, not placed",
         requester_read_response_bad_offset},
        {"requester_reread",
         "a lost READ response is re-read: READ_REQ with RETX, its PSN, offset, length, MSN",
         requester_reread},
        {"requester_read_after_write_one_transmission",
         "a READ_REQ is one transmission: acknowledging it does not make the WRITE sent before "
         "it lost by count",
         requester_read_after_write_one_transmission},
        {"requester_write_after_read_one_transmission",
         "a READ_REQ is one transmission: acknowledging the WRITE sent after it does not make "
         "its responses lost by count",
         requester_write_after_read_one_transmission},
        {"requester_retry_period_not_restarted_by_resends",
         "resending the only packet outstanding starts no retry period: retry_cnt 0 fails at "
         "the end of the first",
         requester_retry_period_not_restarted_by_resends},
        {"requester_read_request_ack_is_progress",
         "an acknowledged READ_REQ is progress: the retry count starts again from its ACK",
         requester_read_request_ack_is_progress},
        {"requester_reread_response_lost_by_timeout_only",
         "a response missing behind its part's later ones is lost by count, no ACK needed; "
         "responses to a later READ are no evidence against a re-read's response",
         requester_reread_response_lost_by_timeout_only},
        {"requester_retry_exceeded",
         "no ACK for retry_cnt transport timeouts: RETRY_EXC_ERR, the rest flushed, QP error",
         requester_retry_exceeded},
        {"requester_psn_wrap", "the DUT's PSNs wrap from 0xffffff to 0", requester_psn_wrap},
        {"requester_stale_ack_ignored",
         "an ACK behind a newer one is ignored: its fair-share hint of 1 does not limit the next "
         "WRITE",
         requester_stale_ack_ignored},
        {"requester_ecn_halves_window",
         "a window of data all CE-marked halves the DUT's cwnd (alpha starts at 1), with a first "
         "PSN in the upper half of the PSN space",
         requester_ecn_halves_window},
        {"requester_resend_after_dereg",
         "a SEND whose source region is deregistered (and rewritten) before it is acknowledged: "
         "no resend reads it, LOC_PROT_ERR completion, QP error",
         requester_resend_after_dereg},
    };
}

}  // namespace metaroce::compliance
