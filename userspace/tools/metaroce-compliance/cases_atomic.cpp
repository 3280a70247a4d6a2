// Atomics (protocol.md sections 3.4, 5, 6): the DUT as responder executes ATOMIC_CMP_SWP and
// ATOMIC_FETCH_ADD exactly once, in PSN order, answers repeats from its record and refuses
// what it must; as requester it asks again for a lost response and completes once.
#include <cstring>

#include "harness.h"

namespace metaroce::compliance {
namespace {

// A DUT region that allows remote atomics (and remote read and write, for the WRITEs some
// cases place on the same words). The words cases use are at offsets 0x100 and up.
constexpr std::size_t kAtomicMrSize = 4096;
constexpr int kAtomicAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
                              IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
constexpr std::size_t kWord = 0x100;

// A DUT QP that allows remote atomics.
ConnOptions atomic_qp() {
    ConnOptions o;
    o.access |= IBV_ACCESS_REMOTE_ATOMIC;
    return o;
}

// The 64-bit word at `offset` of the region, in the DUT's (this host's) byte order.
std::uint64_t word(DutRegion& r, std::size_t offset) {
    std::uint64_t v;
    std::memcpy(&v, r.data() + offset, sizeof v);
    return v;
}

void set_word(DutRegion& r, std::size_t offset, std::uint64_t v) {
    std::memcpy(r.data() + offset, &v, sizeof v);
}

std::vector<std::uint8_t> be64_bytes(std::uint64_t v) {
    std::vector<std::uint8_t> out(8);
    for (int i = 7; i >= 0; --i, v >>= 8) out[static_cast<std::size_t>(i)] = v & 0xff;
    return out;
}

std::uint64_t be64_value(const std::vector<std::uint8_t>& b) {
    std::uint64_t v = 0;
    for (const std::uint8_t x : b) v = (v << 8) | x;
    return v;
}

std::string hex(std::uint64_t v) { return format("0x%016llx", static_cast<unsigned long long>(v)); }

// Waits for the ATOMIC_RESP with PSN `psn` and, if `cum` is given, an ACK with that cum_psn
// (in either order); fails on a NAK, on any other kind of packet, or unless the response has
// FIRST, LAST, RETX as `retx`, the atomic's MSN and the 8 bytes big-endian `orig`.
Packet expect_atomic_response(Conn& c, Psn psn, std::uint32_t msn, std::uint64_t orig, bool retx,
                              std::optional<Psn> cum = std::nullopt) {
    std::optional<Packet> resp;
    bool acked = !cum;
    const auto seen = c.receive_until(
        [&](const Packet& p) {
            if (p.bth.opcode == Opcode::Ack) {
                if (p.ack().is_nak()) return true;
                if (cum && p.ack().cum_psn == *cum) acked = true;
            } else if (p.bth.opcode == Opcode::AtomicResponse && !resp) {
                resp = p;
            }
            return resp && acked;
        },
        2000);
    for (const Seen& s : seen) {
        const Packet& p = s.packet;
        expect(p.bth.opcode == Opcode::Ack || p.bth.opcode == Opcode::AtomicResponse,
               "the DUT answered an atomic with " + describe(p));
        expect(p.bth.opcode != Opcode::Ack || !p.ack().is_nak(),
               "the DUT refused a valid atomic: " + describe(p));
    }
    expect(resp.has_value(), format("no ATOMIC_RESP for the atomic at PSN 0x%06x", psn));
    expect(acked, format("no ACK with cum_psn 0x%06x after the atomic", cum.value_or(0)));
    const Packet& p = *resp;
    expect(p.bth.psn == psn,
           format("the ATOMIC_RESP has PSN 0x%06x, expected the atomic's 0x%06x", p.bth.psn, psn));
    expect(p.bth.has(flag::kFirst) && p.bth.has(flag::kLast),
           "an ATOMIC_RESP without FIRST and LAST: " + describe(p));
    expect(p.bth.has(flag::kRetx) == retx,
           std::string(retx ? "an answer from the record without RETX: "
                            : "RETX on the answer to a first request: ") +
               describe(p));
    expect(p.deth().msn == msn, "the ATOMIC_RESP's MSN is not the atomic's: " + describe(p));
    expect(p.payload.size() == 8, "the ATOMIC_RESP does not carry 8 bytes: " + describe(p));
    expect(be64_value(p.payload) == orig, "the ATOMIC_RESP carries " + hex(be64_value(p.payload)) +
                                              ", expected the word's former value " + hex(orig));
    return p;
}

// Nothing but ACKs (no NAK, no ATOMIC_RESP) for `ms` milliseconds.
void expect_no_answer(Conn& c, int ms, const std::string& what) {
    for (const Seen& s : c.collect(ms)) {
        expect(s.packet.bth.opcode == Opcode::Ack && !s.packet.ack().is_nak(),
               what + ": " + describe(s.packet));
    }
}

void expect_word(DutRegion& r, std::size_t offset, std::uint64_t want, const std::string& what) {
    const std::uint64_t got = word(r, offset);
    expect(got == want, what + ": the word holds " + hex(got) + ", expected " + hex(want));
}

void fetch_add_executed(Env& env) {
    Conn c(env, atomic_qp());
    DutRegion at(env, kAtomicMrSize, kAtomicAccess);
    const Psn r = c.rq_psn();
    set_word(at, kWord, 0x0123456789abcdefull);
    set_word(at, kWord + 8, 0xfffffffffffffff0ull);
    c.send(c.atomic(Opcode::AtomicFetchAdd, r, at.addr() + kWord, at.rkey(), 0x1111));
    expect_atomic_response(c, r, 0, 0x0123456789abcdefull, false, psn_next(r));
    expect_word(at, kWord, 0x0123456789abcdefull + 0x1111, "after one FETCH_ADD of 0x1111");
    // Modulo 2^64, and the MSN of the response is the request's.
    c.send(c.atomic(Opcode::AtomicFetchAdd, psn_next(r), at.addr() + kWord + 8, at.rkey(), 0x20, 0,
                    3));
    expect_atomic_response(c, psn_next(r), 3, 0xfffffffffffffff0ull, false, psn_add(r, 2));
    expect_word(at, kWord + 8, 0x10, "a FETCH_ADD past 2^64");
    expect_word(at, kWord, 0x0123456789abcdefull + 0x1111, "a FETCH_ADD of the next word");
}

void cmp_swap_match(Env& env) {
    Conn c(env, atomic_qp());
    DutRegion at(env, kAtomicMrSize, kAtomicAccess);
    const Psn r = c.rq_psn();
    set_word(at, kWord, 0xaaaa5555aaaa5555ull);
    c.send(c.atomic(Opcode::AtomicCmpSwp, r, at.addr() + kWord, at.rkey(), 0x0102030405060708ull,
                    0xaaaa5555aaaa5555ull));
    expect_atomic_response(c, r, 0, 0xaaaa5555aaaa5555ull, false, psn_next(r));
    expect_word(at, kWord, 0x0102030405060708ull, "after a CMP_SWP whose compare matched");
}

void cmp_swap_mismatch(Env& env) {
    Conn c(env, atomic_qp());
    DutRegion at(env, kAtomicMrSize, kAtomicAccess);
    const Psn r = c.rq_psn();
    set_word(at, kWord, 0xaaaa5555aaaa5555ull);
    c.send(c.atomic(Opcode::AtomicCmpSwp, r, at.addr() + kWord, at.rkey(), 0x0102030405060708ull,
                    0xaaaa5555aaaa5554ull));
    expect_atomic_response(c, r, 0, 0xaaaa5555aaaa5555ull, false, psn_next(r));
    expect_word(at, kWord, 0xaaaa5555aaaa5555ull, "after a CMP_SWP whose compare did not match");
}

void duplicate_atomic(Env& env) {
    Conn c(env, atomic_qp());
    DutRegion at(env, kAtomicMrSize, kAtomicAccess);
    const Psn r = c.rq_psn();
    set_word(at, kWord, 100);
    const Packet req = c.atomic(Opcode::AtomicFetchAdd, r, at.addr() + kWord, at.rkey(), 5, 0, 2);
    c.send(req);
    expect_atomic_response(c, r, 2, 100, false, psn_next(r));
    expect_word(at, kWord, 105, "after the FETCH_ADD");
    CounterCheck counters(env);
    // The requester lost the response and asks again (RETX); then a duplicate from the
    // fabric (no RETX). Both answered from the record: the first value, RETX, memory alone.
    Packet again = req;
    again.bth.flags |= flag::kRetx;
    c.send(again);
    expect_atomic_response(c, r, 2, 100, true, psn_next(r));
    c.send(req);
    expect_atomic_response(c, r, 2, 100, true, psn_next(r));
    for (const Seen& s : c.collect(200)) {
        expect(s.packet.bth.opcode == Opcode::Ack && !s.packet.ack().is_nak(),
               "more than one answer to each repeat of an atomic: " + describe(s.packet));
    }
    expect_word(at, kWord, 105, "an atomic answered from the record was executed again");
    c.probe(psn_next(r), psn_add(r, 2));
    counters.expect_delta("rx_duplicate", 2);
    counters.expect_delta("rx_duplicate_atomic_unknown", 0);
}

void duplicate_atomic_changed(Env& env) {
    Conn c(env, atomic_qp());
    DutRegion at(env, kAtomicMrSize, kAtomicAccess);
    const Psn r = c.rq_psn();
    set_word(at, kWord, 7);
    set_word(at, kWord + 8, 70);
    const std::uint64_t va = at.addr() + kWord;
    c.send(c.atomic(Opcode::AtomicFetchAdd, r, va, at.rkey(), 1));
    expect_atomic_response(c, r, 0, 7, false, psn_next(r));
    CounterCheck counters(env);
    // The PSN of the atomic executed, anything else different: not a repeat of it, so neither
    // executed nor answered with the recorded value (a spoofer would learn it).
    const std::uint8_t f = flag::kAckReq | flag::kRetx;
    const Packet changed[] = {
        c.atomic(Opcode::AtomicFetchAdd, r, va, at.rkey(), 2, 0, 0, f),      // other addend
        c.atomic(Opcode::AtomicFetchAdd, r, va + 8, at.rkey(), 1, 0, 0, f),  // other address
        c.atomic(Opcode::AtomicFetchAdd, r, va, at.rkey(), 1, 0, 1, f),      // other MSN
        c.atomic(Opcode::AtomicCmpSwp, r, va, at.rkey(), 9, 8, 0, f),        // other opcode
    };
    for (const Packet& p : changed) c.send(p);
    expect_no_answer(c, 300, "the DUT answered a changed repeat of an executed atomic");
    expect_word(at, kWord, 8, "a changed repeat of an atomic");
    expect_word(at, kWord + 8, 70, "a changed repeat of an atomic at another address");
    c.expect_state(IBV_QPS_RTS);
    c.probe(psn_next(r), psn_add(r, 2));
    counters.expect_delta("rx_duplicate_atomic_unknown", 4);
    counters.expect_delta("rx_duplicate", 4);
}

void atomic_waits_for_gap(Env& env) {
    Conn c(env, atomic_qp());
    DutRegion at(env, kAtomicMrSize, kAtomicAccess);
    const Psn r = c.rq_psn();
    constexpr std::uint64_t kBefore = 0x1111, kWritten = 0x2222000000000000ull;
    set_word(at, kWord, kBefore);
    // PSN r: a WRITE of the word, held back. PSN r + 1: a FETCH_ADD of it.
    std::vector<std::uint8_t> bytes(8);
    std::memcpy(bytes.data(), &kWritten, 8);
    Packet w = c.write(r, 0, bytes);
    w.deth().addr = at.addr() + kWord;
    w.deth().key = at.rkey();
    const Packet req =
        c.atomic(Opcode::AtomicFetchAdd, psn_next(r), at.addr() + kWord, at.rkey(), 3);
    c.send(req);
    // Its PSN is received (the ACK shows it), its execution waits.
    const std::optional<Seen> first = c.receive(2000);
    expect(first && first->packet.bth.opcode == Opcode::Ack && !first->packet.ack().is_nak() &&
               first->packet.ack().cum_psn == r && first->packet.ack().sack[0] == 0x80000000u,
           "expected an ACK with cum_psn r and r + 1 SACKed for the atomic behind the gap, got " +
               (first ? describe(first->packet) : std::string("nothing")));
    expect_no_answer(c, 300, "the atomic was answered before the PSN before it arrived");
    expect_word(at, kWord, kBefore, "the atomic was executed before the PSN before it arrived");
    // A repeat while it waits: dropped, its response comes when it executes.
    CounterCheck counters(env);
    Packet again = req;
    again.bth.flags |= flag::kRetx;
    c.send(again);
    expect_no_answer(c, 100, "a repeat of a waiting atomic was answered");
    // The WRITE arrives: the atomic executes once, and sees the WRITE.
    c.send(w);
    expect_atomic_response(c, psn_next(r), 0, kWritten, false, psn_add(r, 2));
    expect_no_answer(c, 200, "a second answer to the atomic that waited");
    expect_word(at, kWord, kWritten + 3, "the atomic that waited for the WRITE");
    counters.expect_delta("rx_duplicate_atomic_unknown", 0);
}

// A refused atomic: a NAK with `syndrome` at its PSN, QP error, the words unchanged.
void expect_atomic_refused(Conn& c, const Packet& bad, Syndrome syndrome, DutRegion& at) {
    CounterCheck counters(c.env());
    set_word(at, kWord, 0x77);
    c.post_recv(1, 0, 64);
    c.send(bad);
    c.expect_nak(syndrome, bad.bth.psn);
    c.expect_state(IBV_QPS_ERR);
    const ibv_wc wc = c.expect_recv_completion();
    expect(wc.status == IBV_WC_WR_FLUSH_ERR,
           format("the posted receive completed with %s, expected WR_FLUSH_ERR",
                  ibv_wc_status_str(wc.status)));
    expect_word(at, kWord, 0x77, "a refused atomic changed the DUT's memory");
    if (syndrome == Syndrome::RemoteAccess) counters.expect_delta("remote_access_errors", 1);
}

void atomic_misaligned(Env& env) {
    Conn c(env, atomic_qp());
    DutRegion at(env, kAtomicMrSize, kAtomicAccess);
    expect_atomic_refused(
        c, c.atomic(Opcode::AtomicFetchAdd, c.rq_psn(), at.addr() + kWord + 4, at.rkey(), 1),
        Syndrome::InvalidRequest, at);
}

void atomic_no_rights(Env& env) {
    {
        // A region with remote read and write, not atomic.
        Conn c(env, atomic_qp());
        DutRegion at(env, kAtomicMrSize,
                     IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
        expect_atomic_refused(
            c, c.atomic(Opcode::AtomicFetchAdd, c.rq_psn(), at.addr() + kWord, at.rkey(), 1),
            Syndrome::RemoteAccess, at);
    }
    {
        // A QP without remote atomics, on a region that allows them.
        Conn c(env);
        DutRegion at(env, kAtomicMrSize, kAtomicAccess);
        expect_atomic_refused(
            c, c.atomic(Opcode::AtomicCmpSwp, c.rq_psn(), at.addr() + kWord, at.rkey(), 1, 0x77),
            Syndrome::RemoteAccess, at);
    }
}

void atomic_bad_rkey(Env& env) {
    Conn c(env, atomic_qp());
    DutRegion at(env, kAtomicMrSize, kAtomicAccess);
    expect_atomic_refused(
        c, c.atomic(Opcode::AtomicFetchAdd, c.rq_psn(), at.addr() + kWord, at.rkey() ^ 0x5a5a00, 1),
        Syndrome::RemoteAccess, at);
}

void atomic_out_of_bounds(Env& env) {
    Conn c(env, atomic_qp());
    DutRegion at(env, kAtomicMrSize, kAtomicAccess);
    // The first word past the end of the region (the last one inside is at size - 8).
    expect_atomic_refused(
        c, c.atomic(Opcode::AtomicFetchAdd, c.rq_psn(), at.addr() + kAtomicMrSize, at.rkey(), 1),
        Syndrome::RemoteAccess, at);
}

// The DUT as requester: a FETCH_AND_ADD whose response is lost is asked for again, the same
// request with RETX, and completes once with the value of the response.
void requester_atomic_response_lost(Env& env) {
    Conn c(env);
    const Psn s = c.sq_psn();
    constexpr std::uint64_t kRemoteWord = 0x0000100000000040ull;
    constexpr std::uint32_t kRkey = 0x00abcdef;
    constexpr std::uint64_t kAdd = 0x10, kOrig = 0x0123456789abcdefull;
    constexpr std::uint64_t kDst = 128 * 1024;
    std::uint8_t* dst = c.local().data() + kDst;
    std::memset(dst, 0xee, 8);
    ibv_sge sge{c.local().addr() + kDst, 8, c.local().lkey()};
    ibv_send_wr wr{};
    wr.wr_id = 7;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = kRemoteWord;
    wr.wr.atomic.compare_add = kAdd;
    wr.wr.atomic.rkey = kRkey;
    ibv_send_wr* bad = nullptr;
    const int rc = ibv_post_send(c.qp().qp(), &wr, &bad);
    expect(rc == 0, format("ibv_post_send of a FETCH_AND_ADD: %s", std::strerror(rc)));
    const auto check_request = [&](const Packet& p, bool retx) {
        expect(p.bth.opcode == Opcode::AtomicFetchAdd && p.bth.psn == s,
               "expected the FETCH_ADD at the DUT's first PSN: " + describe(p));
        expect(p.bth.has(flag::kRetx) == retx,
               std::string(retx ? "the request asked again has no RETX: "
                                : "RETX on the first request: ") +
                   describe(p));
        const AtomicReq& a = p.areq();
        expect(a.va == kRemoteWord && a.rkey == kRkey && a.msn == 0 && a.swap_add == kAdd &&
                   a.compare == 0,
               "the FETCH_ADD's AREQ is not the work request's: " + describe(p));
    };
    const auto next_atomic = [&](int timeout_ms) {
        const auto seen = c.receive_until(
            [](const Packet& p) { return is_atomic_request(p.bth.opcode); }, timeout_ms);
        expect(!seen.empty() && is_atomic_request(seen.back().packet.bth.opcode),
               "the DUT sent no atomic request");
        return seen.back().packet;
    };
    check_request(next_atomic(2000), false);
    // Its response is lost: no answer. The DUT must ask again, with the same request.
    check_request(next_atomic(3000), true);
    expect(!c.poll_send(0).has_value(), "the FETCH_AND_ADD completed without a response");
    Packet resp = c.base(Opcode::AtomicResponse, s, flag::kFirst | flag::kLast | flag::kRetx);
    resp.ext = Deth{0, 0, 0, 8, 0};
    resp.payload = be64_bytes(kOrig);
    c.send(resp);
    const ibv_wc wc = c.expect_send_completion();
    expect(
        wc.wr_id == 7 && wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_FETCH_ADD,
        format("completion of %llu: %s opcode %d, expected 7 SUCCESS FETCH_ADD",
               static_cast<unsigned long long>(wc.wr_id), ibv_wc_status_str(wc.status), wc.opcode));
    std::uint64_t got;
    std::memcpy(&got, dst, 8);
    expect(got == kOrig, "the FETCH_AND_ADD's buffer holds " + hex(got) + ", expected " +
                             hex(kOrig) + " (in host order)");
    // The response to the first request comes late: a duplicate, nothing completes again.
    CounterCheck counters(env);
    resp.bth.flags = flag::kFirst | flag::kLast;
    resp.payload = be64_bytes(kOrig + 1);
    c.send(resp);
    expect(!c.poll_send(200).has_value(), "a late duplicate ATOMIC_RESP completed a work request");
    std::memcpy(&got, dst, 8);
    expect(got == kOrig, "a late duplicate ATOMIC_RESP was placed: the buffer holds " + hex(got));
    c.expect_state(IBV_QPS_RTS);
    counters.expect_delta("rx_duplicate", 1);
}

}  // namespace

std::vector<Case> atomic_cases() {
    return {
        {"atomic_fetch_add",
         "FETCH_ADD: ATOMIC_RESP (PSN, FIRST|LAST, MSN, the former value big-endian), the word "
         "grows by exactly the addend, modulo 2^64",
         fetch_add_executed},
        {"atomic_cmp_swap_match", "CMP_SWP whose compare matches: the former value, swap stored",
         cmp_swap_match},
        {"atomic_cmp_swap_mismatch",
         "CMP_SWP whose compare does not match: the former value, the word unchanged",
         cmp_swap_mismatch},
        {"duplicate_atomic",
         "an executed FETCH_ADD repeated (with RETX, and without): answered from the record with "
         "the first value and RETX, memory changed once (rx_duplicate)",
         duplicate_atomic},
        {"duplicate_atomic_changed",
         "the PSN of an executed atomic with another addend, address, MSN or opcode: no answer, "
         "memory unchanged, QP unharmed (rx_duplicate_atomic_unknown)",
         duplicate_atomic_changed},
        {"atomic_waits_for_gap",
         "a FETCH_ADD behind a missing WRITE of its word: no response, memory unchanged, a "
         "repeat dropped; the WRITE arrives: executed once, on the written value",
         atomic_waits_for_gap},
        {"atomic_misaligned",
         "an atomic at an address not a multiple of 8: INVALID_REQUEST NAK, QP error, memory "
         "unchanged",
         atomic_misaligned},
        {"atomic_no_rights",
         "an atomic on a region without remote atomic, and on a QP without it: REMOTE_ACCESS "
         "NAK, QP error, memory unchanged",
         atomic_no_rights},
        {"atomic_bad_rkey", "an atomic with an unknown rkey: REMOTE_ACCESS NAK, QP error",
         atomic_bad_rkey},
        {"atomic_out_of_bounds",
         "an atomic on the word past the end of its region: REMOTE_ACCESS NAK, QP error",
         atomic_out_of_bounds},
        {"requester_atomic_response_lost",
         "the DUT's FETCH_AND_ADD unanswered: the same request again with RETX; the response "
         "completes it once with the value in host order, a late duplicate is dropped",
         requester_atomic_response_lost},
    };
}

}  // namespace metaroce::compliance
