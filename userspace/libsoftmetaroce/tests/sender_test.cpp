// The requester: segmentation, windows, loss recovery, timers, NAKs, READs, congestion
// control reactions and path steering (protocol.md sections 3, 7, 8, 10).
#include "softmetaroce/sender.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "test_support.h"

namespace metaroce {
namespace {

using namespace test;
using flag::kAckReq;
using flag::kFirst;
using flag::kImm;
using flag::kLast;
using flag::kRetx;

constexpr std::uint32_t kMtu = 256;
constexpr Psn kStart = 100;
constexpr TimeUs kRtt = 20;

class SenderTest : public ::testing::Test {
  protected:
    SenderTest() {
        config.qpn = kQpA;
        config.peer_qpn = kQpB;
        config.initial_psn = kStart;
        config.mtu = kMtu;
        config.num_paths = 4;
        reset();
    }

    void reset() { tx = std::make_unique<Sender>(config); }

    std::vector<Packet> sent() { return through_wire(tx->take_outbox(), kMtu); }
    std::vector<Psn> psns(const std::vector<Packet>& packets) {
        std::vector<Psn> out;
        for (const Packet& p : packets) out.push_back(p.bth.psn);
        return out;
    }

    void post_send(std::uint64_t id, std::size_t len, WrOpcode op = WrOpcode::Send) {
        WorkRequest wr;
        wr.wr_id = id;
        wr.opcode = op;
        wr.data = pattern_bytes(len, static_cast<std::uint32_t>(id));
        wr.remote_addr = 0x10000;
        wr.rkey = 0x10;
        wr.imm = 0x77;
        tx->post(std::move(wr), now);
    }

    void post_read(std::uint64_t id, std::uint32_t len, std::uint64_t addr = 0x20000) {
        WorkRequest wr;
        wr.wr_id = id;
        wr.opcode = WrOpcode::Read;
        wr.remote_addr = addr;
        wr.rkey = 0x20;
        wr.read_length = len;
        tx->post(std::move(wr), now);
    }

    void ack(Psn cum, std::initializer_list<Psn> sacked = {}, std::uint16_t ce = 0,
             std::uint16_t echo_path = 0) {
        Packet p = ack_packet(cum, sacked, ce, 0, echo_path);
        tx->on_ack(through_wire(echoed(p), kMtu), now);
    }

    // `p` echoing the timestamp of a packet the sender sent `age` ago, as a responder echoes.
    Packet echoed(Packet p, TimeUs age = kRtt) const {
        p.ack().ts_echo = static_cast<std::uint32_t>(now - age) + config.ts_offset;
        return p;
    }

    // Delivers READ_RESP packets for the READ whose request had PSN `psn`.
    void respond(const Packet& request, std::set<std::uint32_t> skip = {}) {
        const ReadReq& r = request.rreq();
        const std::uint32_t n = read_response_packets(r.len, kMtu);
        for (std::uint32_t k = 0; k < n; ++k) {
            if (skip.count(k) != 0) continue;
            const std::uint32_t begin = k * kMtu;
            const std::uint32_t len = std::min(kMtu, r.len - begin);
            Packet p;
            p.bth.opcode = Opcode::ReadResponse;
            p.bth.dqpn = kQpA;
            p.bth.sqpn = kQpB;
            p.bth.psn = psn_add(request.bth.psn, k);
            if (k == 0) p.bth.flags |= kFirst;  // FIRST and LAST delimit the part
            if (k + 1 == n) p.bth.flags |= kLast;
            p.ext = Deth{r.offset + begin, 0, r.msn, r.offset + r.len, 0};
            const auto all = pattern_bytes(1 << 20, 5);  // remote memory at 0x20000
            const std::size_t at = r.va - 0x20000 + begin;
            p.payload.assign(all.begin() + at, all.begin() + at + len);
            tx->on_read_response(through_wire(p, kMtu), now);
        }
    }

    SenderConfig config;
    std::unique_ptr<Sender> tx;
    TimeUs now = 1000;
};

TEST_F(SenderTest, SegmentsSendByMtu) {
    post_send(1, 2 * kMtu + 50, WrOpcode::SendWithImm);
    const auto p = sent();
    ASSERT_EQ(p.size(), 3u);
    for (std::uint32_t k = 0; k < 3; ++k) {
        EXPECT_EQ(p[k].bth.opcode, Opcode::Send);
        EXPECT_EQ(p[k].bth.psn, kStart + k);
        EXPECT_EQ(p[k].bth.dqpn, kQpB);
        EXPECT_EQ(p[k].bth.sqpn, kQpA);
        EXPECT_EQ(p[k].deth().addr, k * kMtu);
        EXPECT_EQ(p[k].deth().msn, 0u);
        EXPECT_EQ(p[k].deth().msg_len, 2 * kMtu + 50);
        // IMM and the immediate value go on the last packet only.
        EXPECT_EQ(p[k].deth().imm, k == 2 ? 0x77u : 0u);
        EXPECT_EQ(p[k].bth.has(kImm), k == 2);
        EXPECT_FALSE(p[k].bth.has(kRetx));
        EXPECT_EQ(p[k].bth.stream, 0);
    }
    EXPECT_TRUE(p[0].bth.has(kFirst));
    EXPECT_TRUE(p[2].bth.has(kLast));
    EXPECT_TRUE(p[2].bth.has(kAckReq));
    EXPECT_FALSE(p[1].bth.has(kAckReq));
    EXPECT_EQ(p[2].payload.size(), 50u);
    EXPECT_EQ(tx->next_psn(), kStart + 3);
}

// A SEND with invalidate: a SEND whose last packet carries INV and the key in its immediate
// field (protocol.md sections 3, 6); it consumes a receive WQE like any SEND.
TEST_F(SenderTest, SendWithInvalidateCarriesTheKeyOnItsLastPacket) {
    WorkRequest wr;
    wr.wr_id = 1;
    wr.opcode = WrOpcode::SendWithInv;
    wr.data = pattern_bytes(2 * kMtu + 10, 1);
    wr.invalidate_rkey = 0x4401;
    wr.imm = 0x77;  // not sent: the field holds the key
    wr.solicited = true;
    EXPECT_TRUE(wr.is_send());
    EXPECT_TRUE(wr.has_inv());
    EXPECT_FALSE(wr.has_imm());
    EXPECT_TRUE(wr.consumes_receive_wqe());
    tx->post(std::move(wr), now);
    post_send(2, 10, WrOpcode::Send);
    const auto p = sent();
    ASSERT_EQ(p.size(), 4u);
    for (std::uint32_t k = 0; k < 3; ++k) {
        EXPECT_EQ(p[k].bth.opcode, Opcode::Send);
        EXPECT_EQ(p[k].deth().msn, 0u);
        EXPECT_EQ(p[k].deth().key, 0u);
        EXPECT_EQ(p[k].deth().msg_len, 2 * kMtu + 10);
        EXPECT_FALSE(p[k].bth.has(kImm));
        EXPECT_EQ(p[k].bth.has(flag::kInv), k == 2);
        EXPECT_EQ(p[k].deth().imm, k == 2 ? 0x4401u : 0u);
    }
    EXPECT_TRUE(p[2].bth.has(kLast));
    EXPECT_TRUE(p[2].bth.has(kAckReq));
    EXPECT_TRUE(p[2].bth.has(flag::kSolicited));
    // The next SEND takes the next receive WQE and carries no INV.
    EXPECT_EQ(p[3].deth().msn, 1u);
    EXPECT_FALSE(p[3].bth.has(flag::kInv));
    EXPECT_EQ(p[3].deth().imm, 0u);

    now += kRtt;
    ack(kStart + 4);
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[0].wr_id, 1u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    EXPECT_EQ(done[0].opcode, WcOpcode::Send);
    EXPECT_EQ(done[0].byte_len, 2 * kMtu + 10);
}

// A lost INV packet is resent as it was, with INV, the key and RETX.
TEST_F(SenderTest, SendWithInvalidateIsResentWithItsKey) {
    WorkRequest wr;
    wr.wr_id = 1;
    wr.opcode = WrOpcode::SendWithInv;
    wr.data = pattern_bytes(10, 1);
    wr.invalidate_rkey = 0x4401;
    tx->post(std::move(wr), now);
    ASSERT_EQ(sent().size(), 1u);
    ASSERT_TRUE(tx->next_timer());  // nothing acknowledged: a tail-loss probe resends it
    now = *tx->next_timer();
    tx->on_timer(now);
    const auto resent = sent();
    ASSERT_FALSE(resent.empty());
    EXPECT_EQ(resent[0].bth.psn, kStart);
    EXPECT_TRUE(resent[0].bth.has(kRetx));
    EXPECT_TRUE(resent[0].bth.has(flag::kInv));
    EXPECT_FALSE(resent[0].bth.has(kImm));
    EXPECT_EQ(resent[0].deth().imm, 0x4401u);
}

TEST_F(SenderTest, WriteAddressesAndMessageNumbers) {
    post_send(1, 10, WrOpcode::Send);         // receive msn 0
    post_send(2, kMtu + 1, WrOpcode::Write);  // 2nd message of the stream: msn 1
    post_send(3, 0, WrOpcode::WriteWithImm);  // receive msn 1, zero length
    post_send(4, 5, WrOpcode::Send);          // receive msn 2
    const auto p = sent();
    ASSERT_EQ(p.size(), 5u);
    EXPECT_EQ(p[0].deth().msn, 0u);
    EXPECT_EQ(p[1].bth.opcode, Opcode::Write);
    EXPECT_EQ(p[1].deth().addr, 0x10000u);
    EXPECT_EQ(p[1].deth().key, 0x10u);
    EXPECT_EQ(p[1].deth().msn, 1u);
    EXPECT_EQ(p[2].deth().addr, 0x10000u + kMtu);
    EXPECT_EQ(p[3].deth().msg_len, 0u);
    EXPECT_TRUE(p[3].payload.empty());
    EXPECT_TRUE(p[3].bth.has(kFirst) && p[3].bth.has(kLast) && p[3].bth.has(kImm));
    EXPECT_EQ(p[3].deth().msn, 1u);
    EXPECT_EQ(p[4].deth().msn, 2u);
}

TEST_F(SenderTest, CongestionWindowStartsFullAndLimitsPacketsInFlight) {
    EXPECT_EQ(tx->window(), 256u);  // the full window, as RoCE NICs start at line rate
    config.congestion.initial_cwnd = 16;
    reset();
    post_send(1, 40 * kMtu);
    auto p = sent();
    EXPECT_EQ(p.size(), 16u);
    EXPECT_EQ(tx->inflight(), 16u);
    // ACK_REQ only on the last packet of a message, however full the window.
    for (std::size_t i = 0; i < p.size(); ++i) EXPECT_FALSE(p[i].bth.has(kAckReq)) << i;
    now += kRtt;
    ack(kStart + 8);
    p = sent();
    EXPECT_EQ(p.size(), 8u);
    EXPECT_EQ(p.front().bth.psn, kStart + 16);
}

TEST_F(SenderTest, NeverMoreThan256PsnsPastTheOldestUnacked) {
    post_send(1, 300 * kMtu);
    auto p = sent();
    EXPECT_EQ(p.size(), 256u);
    EXPECT_EQ(p.back().bth.psn, kStart + 255);
    // SACK everything but the oldest: still nothing new may go.
    now += kRtt;
    Packet a = ack_packet(kStart, {}, 0, static_cast<std::uint32_t>(now - kRtt));
    SackBitmap all(kStart);
    for (Psn q = kStart + 1; q < kStart + 256; ++q) all.mark(q);
    a.ack().sack = all.to_wire();
    tx->on_ack(a, now);
    p = sent();
    // Only the oldest, declared lost by reordering, is resent.
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].bth.psn, kStart);
    EXPECT_TRUE(p[0].bth.has(kRetx));
    now += kRtt;
    ack(kStart + 256);
    p = sent();
    EXPECT_FALSE(p.empty());
    EXPECT_EQ(p.front().bth.psn, kStart + 256);
}

TEST_F(SenderTest, RetransmitsExactlyTheMissingPsnsOnAnotherPath) {
    config.congestion.initial_cwnd = 32;
    reset();
    post_send(1, 20 * kMtu);
    const auto first = sent();
    ASSERT_EQ(first.size(), 20u);
    now += kRtt;
    // Everything but PSNs 103 and 110 arrived.
    Packet a = ack_packet(kStart + 3, {}, 0, static_cast<std::uint32_t>(now - kRtt));
    SackBitmap b(kStart + 3);
    for (Psn q = kStart + 4; q < kStart + 20; ++q) {
        if (q != kStart + 10) b.mark(q);
    }
    a.ack().sack = b.to_wire();
    tx->on_ack(a, now);
    const auto resent = sent();
    EXPECT_EQ(psns(resent), (std::vector<Psn>{kStart + 3, kStart + 10}));
    for (const Packet& p : resent) {
        EXPECT_TRUE(p.bth.has(kRetx));
        EXPECT_TRUE(p.bth.has(kAckReq));  // every retransmission asks for an ACK
        EXPECT_NE(p.bth.path, first[p.bth.psn - kStart].bth.path);
        EXPECT_EQ(p.payload, first[p.bth.psn - kStart].payload);
    }
    EXPECT_EQ(tx->counters().reorder_losses, 2u);
    now += kRtt;
    ack(kStart + 20);
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    EXPECT_EQ(done[0].opcode, WcOpcode::Send);
}

TEST_F(SenderTest, FewerThanReorderAllowanceLaterPacketsIsNotALossYet) {
    post_send(1, 8 * kMtu);
    sent();
    now += kRtt;
    ack(kStart, {kStart + 1, kStart + 2, kStart + 3, kStart + 4, kStart + 5, kStart + 6,
                 kStart + 7});  // only 7 sent after it arrived
    EXPECT_TRUE(sent().empty());
    EXPECT_EQ(tx->counters().reorder_losses, 0u);
    // The time rule: out longer than SRTT + max(SRTT / 2, 1 ms) once a later packet was
    // delivered (SRTT is 20 us here).
    const TimeUs sent_at = now - kRtt;
    EXPECT_EQ(tx->next_timer(), sent_at + kRtt + 1000);
    now = sent_at + kRtt + 999;
    tx->on_timer(now);
    EXPECT_TRUE(sent().empty());
    now += 1;
    tx->on_timer(now);
    const auto p = sent();
    EXPECT_EQ(psns(p), (std::vector<Psn>{kStart}));
    EXPECT_TRUE(p[0].bth.has(kRetx) && p[0].bth.has(kAckReq));
    EXPECT_EQ(tx->counters().reorder_losses, 1u);
}

TEST_F(SenderTest, ReorderingSeenRaisesTheCountRuleAllowance) {
    post_send(1, 24 * kMtu);
    sent();
    now += kRtt;
    // 101..120 arrived ahead of 100: the count rule (8) calls 100 lost, but a fair-share hint
    // of 2 holds its retransmission back.
    Packet a = ack_packet(kStart, {}, 0, static_cast<std::uint32_t>(now - kRtt));
    SackBitmap later(kStart);
    for (Psn p = kStart + 1; p <= kStart + 20; ++p) later.mark(p);
    a.ack().sack = later.to_wire();
    a.ack().fair_share = 2;
    tx->on_ack(a, now);
    EXPECT_EQ(tx->counters().reorder_losses, 1u);
    EXPECT_TRUE(sent().empty());
    EXPECT_EQ(tx->reorder_allowance(), 8u);
    // Then 100's first transmission arrives after 20 later ones: the paths reorder that far.
    now += kRtt;
    ack(kStart + 20);
    EXPECT_EQ(tx->reorder_allowance(), 21u);
    EXPECT_EQ(tx->counters().retransmissions, 0u);
}

TEST_F(SenderTest, NothingSentLaterDeliveredIsNeverLostByTheRules) {
    post_send(1, 3 * kMtu);
    sent();
    now += kRtt;
    ack(kStart + 1);  // 101 and 102 outstanding; nothing sent after them was delivered
    now += 900;       // past the reordering window, before the tail-loss probe
    tx->on_timer(now);
    EXPECT_TRUE(sent().empty());
    EXPECT_EQ(tx->counters().reorder_losses, 0u);
}

TEST_F(SenderTest, TailLossProbesThenRtoWithBackoff) {
    post_send(1, 4 * kMtu);
    sent();
    const TimeUs sent_at = now;
    // The ACK comes late (its echo still says SRTT 20 us), so that the time rule and the
    // tail-loss probe, both with a 1 ms floor, fall due at different times.
    now += 300;
    ack(kStart, {kStart + 2});  // 100, 101 and 103 unknown, 102 received
    EXPECT_TRUE(sent().empty());
    EXPECT_EQ(tx->congestion().window(0), 256u);
    // The time rule catches 100 and 101 (sent before the delivered 102) once they have been
    // out SRTT + max(SRTT / 2, 1 ms).
    now = *tx->next_timer();
    EXPECT_EQ(now, sent_at + kRtt + 1000);
    tx->on_timer(now);
    EXPECT_EQ(psns(sent()), (std::vector<Psn>{kStart, kStart + 1}));
    const TimeUs resent_at = now;
    // Nothing delivered for max(2 * SRTT, SRTT + 4 * RTTVAR, 1 ms) = 1 ms since the ACK: a
    // tail-loss probe resends the newest packet in flight, 103.
    const auto path_losses = [this] {
        std::uint64_t n = 0;
        for (unsigned i = 0; i < tx->paths().size(); ++i) n += tx->paths()[i].lost;
        return n;
    };
    const std::uint64_t blamed = path_losses();
    EXPECT_EQ(blamed, 2u);  // the time rule's losses count against their paths
    const TimeUs last_ack = sent_at + 300;
    now = *tx->next_timer();
    EXPECT_EQ(now, last_ack + 1000);
    tx->on_timer(now);
    auto p = sent();
    EXPECT_EQ(psns(p), (std::vector<Psn>{kStart + 3}));
    EXPECT_TRUE(p[0].bth.has(kRetx) && p[0].bth.has(kAckReq));
    EXPECT_EQ(tx->counters().tail_probes, 1u);
    now = *tx->next_timer();  // the second probe, one probe timeout later
    EXPECT_EQ(now, last_ack + 2000);
    tx->on_timer(now);
    EXPECT_EQ(psns(sent()), (std::vector<Psn>{kStart + 3}));
    EXPECT_EQ(tx->counters().tail_probes, 2u);
    EXPECT_EQ(tx->counters().rto_expiries, 0u);
    // Then the RTO (5 ms floor), once the oldest packet in flight (the retransmissions of 100
    // and 101) has been out that long: those are lost, the window halves.
    now = *tx->next_timer();
    EXPECT_EQ(now, resent_at + 5000);
    tx->on_timer(now);
    p = sent();
    EXPECT_EQ(psns(p), (std::vector<Psn>{kStart, kStart + 1}));
    EXPECT_TRUE(p[0].bth.has(kRetx) && p[0].bth.has(kAckReq));
    EXPECT_EQ(tx->counters().rto_expiries, 1u);
    EXPECT_EQ(tx->congestion().window(0), 128u);
    EXPECT_EQ(tx->rtt().rto(), 10'000u);  // doubled
    // No answer: the next timeout is the doubled RTO after this one.
    const TimeUs first_rto = now;
    while (tx->counters().rto_expiries < 2) {
        now = *tx->next_timer();
        tx->on_timer(now);
        sent();
    }
    EXPECT_EQ(now, first_rto + 10'000);
    EXPECT_EQ(tx->congestion().window(0), 64u);
    EXPECT_EQ(tx->rtt().rto(), 20'000u);
    // Probes and timeouts are not held against the paths.
    EXPECT_EQ(path_losses(), blamed);
    // A new RTT sample ends the backoff.
    ack(kStart + 1);
    EXPECT_EQ(tx->rtt().rto(), 5000u);
}

TEST_F(SenderTest, TailLossProbeWaitsLongerOnAJitteryPath) {
    post_send(1, 3 * kMtu);
    sent();
    now += 600;
    // The first RTT sample, 600 us: SRTT 600, RTTVAR 300. The probe timeout is then
    // SRTT + 4 * RTTVAR = 1800 us, beyond 2 * SRTT and the 1 ms floor.
    Packet p = ack_packet(kStart + 1, {}, 0, static_cast<std::uint32_t>(now - 600), 0);
    tx->on_ack(through_wire(p, kMtu), now);
    const TimeUs last_ack = now;
    ASSERT_TRUE(tx->next_timer().has_value());
    EXPECT_EQ(*tx->next_timer(), last_ack + 1800);
    tx->on_timer(last_ack + 1200);
    EXPECT_TRUE(sent().empty());
    tx->on_timer(last_ack + 1800);
    EXPECT_EQ(psns(sent()), (std::vector<Psn>{kStart + 2}));
    EXPECT_EQ(tx->counters().tail_probes, 1u);
}

TEST_F(SenderTest, ProbesAndRtoWaitNoLongerThanTheLocalAckTimeout) {
    config.timeout = 8;  // 1.048576 ms, under the 20 ms probe timeout and RTO of no sample
    reset();
    post_send(1, 3 * kMtu);
    sent();
    const TimeUs start = now;
    now = *tx->next_timer();
    EXPECT_EQ(now, start + 1049);
    tx->on_timer(now);
    EXPECT_EQ(psns(sent()), (std::vector<Psn>{kStart + 2}));
    EXPECT_EQ(tx->counters().tail_probes, 1u);
    now = *tx->next_timer();
    EXPECT_EQ(now, start + 2 * 1049);
    tx->on_timer(now);
    EXPECT_EQ(psns(sent()), (std::vector<Psn>{kStart + 2}));
    EXPECT_EQ(tx->counters().tail_probes, 2u);
    // The RTO, capped too, is due already: 100 and 101 have been out longer than 1049 us.
    EXPECT_LE(*tx->next_timer(), now);
    tx->on_timer(now);
    EXPECT_EQ(psns(sent()), (std::vector<Psn>{kStart, kStart + 1}));
    EXPECT_EQ(tx->counters().rto_expiries, 1u);
}

TEST_F(SenderTest, RtoHalvesTheWindowButNotBelow16) {
    config.congestion.initial_cwnd = 20;
    reset();
    post_send(1, 10);
    sent();
    while (tx->counters().rto_expiries < 3) {
        now = *tx->next_timer();
        tx->on_timer(now);
        sent();
    }
    EXPECT_EQ(tx->congestion().window(0), 16u);
    // Before any RTT sample the RTO is 20 ms, doubling up to 2 s.
    EXPECT_EQ(tx->rtt().rto(), 160'000u);
}

TEST_F(SenderTest, RetryExhaustionCompletesWithRetryExcErrAndFlushes) {
    config.timeout = 10;  // 4.194304 ms
    config.retry_cnt = 2;
    reset();
    post_send(1, 10);
    post_send(2, 10);
    sent();
    const TimeUs start = now;
    while (!tx->in_error()) {
        const auto t = tx->next_timer();
        ASSERT_TRUE(t.has_value());
        now = *t;
        tx->on_timer(now);
        sent();
        ASSERT_LT(now, start + 100'000);
    }
    // Three periods without progress and with a resend (more than retry_cnt = 2), after the
    // first, in which nothing was resent yet.
    EXPECT_EQ(now, start + 4 * 4195);
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[0].wr_id, 1u);
    EXPECT_EQ(done[0].status, WcStatus::RetryExcErr);
    EXPECT_EQ(done[1].status, WcStatus::WrFlushErr);
    post_send(3, 10);
    EXPECT_EQ(tx->take_completions().at(0).status, WcStatus::WrFlushErr);
}

TEST_F(SenderTest, APeriodWithoutAResendIsNoRetry) {
    config.timeout = 10;  // 4.194304 ms, under the 20 ms probe timeout of no RTT sample
    config.retry_cnt = 0;
    reset();
    post_send(1, 10);
    sent();
    const TimeUs start = now;
    // The first period ends before anything was resent: no retry, the QP lives on.
    now = start + 4195;
    tx->on_timer(now);
    EXPECT_FALSE(tx->in_error());
    EXPECT_EQ(tx->counters().retries, 0u);
    EXPECT_EQ(psns(sent()), (std::vector<Psn>{kStart}));  // the probe (capped at the period)
    // The second had a resend: one retry, more than retry_cnt.
    now = start + 2 * 4195;
    tx->on_timer(now);
    EXPECT_TRUE(tx->in_error());
    EXPECT_EQ(tx->take_completions().at(0).status, WcStatus::RetryExcErr);
}

TEST_F(SenderTest, ProgressResetsTheRetryCount) {
    config.timeout = 10;
    config.retry_cnt = 1;
    reset();
    post_send(1, 3 * kMtu);
    sent();
    now += 4195 + 100;  // one period passes
    tx->on_timer(now);
    sent();
    ack(kStart + 1);  // progress
    now += 4195 + 100;
    tx->on_timer(now);
    sent();
    EXPECT_FALSE(tx->in_error());
    ack(kStart + 3);
    EXPECT_EQ(tx->take_completions().at(0).status, WcStatus::Success);
}

TEST_F(SenderTest, RnrNakWaitsThenResendsFromTheRefusedPsn) {
    post_send(1, 3 * kMtu);
    sent();
    now += kRtt;
    Packet nak = nak_packet(Syndrome::RnrNak, kStart, kStart, 14);  // 1.28 ms
    nak.ack().ts_echo = static_cast<std::uint32_t>(now - kRtt);
    tx->on_ack(nak, now);
    EXPECT_TRUE(tx->waiting_rnr());
    EXPECT_EQ(tx->next_timer(), now + 1280);
    post_send(2, 10);
    EXPECT_TRUE(sent().empty());  // nothing goes while waiting
    now += 1280;
    tx->on_timer(now);
    const auto p = sent();
    EXPECT_EQ(psns(p), (std::vector<Psn>{kStart, kStart + 1, kStart + 2, kStart + 3}));
    EXPECT_TRUE(p[0].bth.has(kRetx));
    EXPECT_FALSE(p[3].bth.has(kRetx));  // the new work request
}

TEST_F(SenderTest, RnrRetryExhaustion) {
    config.rnr_retry = 1;
    reset();
    post_send(1, 10);
    sent();
    for (int i = 0; i < 2; ++i) {
        now += kRtt;
        tx->on_ack(echoed(nak_packet(Syndrome::RnrNak, kStart, kStart, 1), 10), now);
        if (tx->in_error()) break;
        now += 10;
        tx->on_timer(now);
        sent();
    }
    EXPECT_TRUE(tx->in_error());
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, WcStatus::RnrRetryExcErr);
}

TEST_F(SenderTest, FatalNaksFailTheWorkRequest) {
    const std::pair<Syndrome, WcStatus> cases[] = {
        {Syndrome::RemoteAccess, WcStatus::RemAccessErr},
        {Syndrome::InvalidRequest, WcStatus::RemInvReqErr},
        {Syndrome::RemoteOperational, WcStatus::RemOpErr},
        {Syndrome::Version, WcStatus::RemInvReqErr},
    };
    for (const auto& [syndrome, status] : cases) {
        reset();
        post_send(1, 10);
        post_send(2, 10, WrOpcode::Write);
        post_send(3, 10);
        sent();
        now += kRtt;
        tx->on_ack(echoed(nak_packet(syndrome, kStart + 1, kStart + 1)),
                   now);  // 1st done, 2nd refused
        EXPECT_TRUE(tx->in_error());
        const auto done = tx->take_completions();
        ASSERT_EQ(done.size(), 3u);
        EXPECT_EQ(done[0].status, WcStatus::Success);
        EXPECT_EQ(done[1].wr_id, 2u);
        EXPECT_EQ(done[1].status, status);
        EXPECT_EQ(done[2].status, WcStatus::WrFlushErr);
    }
}

TEST_F(SenderTest, InvalidAndStaleAcksAreIgnored) {
    post_send(1, 4 * kMtu);
    sent();
    now += kRtt;
    ack(kStart + 10);           // cum past what was sent
    ack(kStart, {kStart + 5});  // SACK of a PSN never sent
    EXPECT_EQ(tx->counters().invalid_acks, 2u);
    EXPECT_EQ(tx->oldest_unacked(), kStart);
    ack(kStart + 2);
    ack(kStart + 1, {kStart + 3});  // behind the newest: carries nothing new
    EXPECT_EQ(tx->counters().stale_acks, 1u);
    EXPECT_FALSE(tx->known_delivered(kStart + 3));
    EXPECT_EQ(tx->oldest_unacked(), kStart + 2);
}

// Off-path injection (section 12.1): an ACK or NAK must echo a timestamp of a transmission no
// older than the oldest PSN outstanding; the sender's timestamps carry a secret offset.
TEST_F(SenderTest, TimestampsCarryTheConnectionsSecretOffset) {
    config.ts_offset = 0x8badf00d;
    reset();
    post_send(1, 10);
    const auto p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].bth.ts, static_cast<std::uint32_t>(now) + 0x8badf00d);
}

TEST_F(SenderTest, AcksWithAnEchoNoTransmissionHadAreDropped) {
    config.ts_offset = 0x8badf00d;
    reset();
    post_send(1, 4 * kMtu);
    sent();
    now += kRtt;
    Packet forged = ack_packet(kStart + 4);
    forged.ack().ts_echo = static_cast<std::uint32_t>(now - kRtt);  // the plain clock
    tx->on_ack(through_wire(forged, kMtu), now);
    // Sent before the oldest PSN outstanding, and one not sent yet.
    tx->on_ack(echoed(ack_packet(kStart + 4), kRtt + 1), now);
    tx->on_ack(echoed(ack_packet(kStart, {kStart + 1}), 0 - TimeUs{1}), now);
    EXPECT_EQ(tx->counters().bad_echo_acks, 3u);
    EXPECT_EQ(tx->oldest_unacked(), kStart);
    EXPECT_FALSE(tx->known_delivered(kStart + 1));
    EXPECT_FALSE(tx->rtt().srtt().has_value());
    EXPECT_TRUE(tx->take_completions().empty());
    ack(kStart + 4);  // echoes the packets' own timestamp
    ASSERT_EQ(tx->take_completions().size(), 1u);
    EXPECT_EQ(tx->rtt().srtt(), kRtt);
}

TEST_F(SenderTest, NaksWithAnEchoNoTransmissionHadAreDropped) {
    config.ts_offset = 0x8badf00d;
    reset();
    post_send(1, 10);
    sent();
    now += kRtt;
    Packet fatal = nak_packet(Syndrome::RemoteAccess, kStart, kStart);
    fatal.ack().ts_echo = 0x12345678;
    tx->on_ack(fatal, now);
    Packet rnr = nak_packet(Syndrome::RnrNak, kStart, kStart, 0);
    rnr.ack().ts_echo = 0x12345678;
    tx->on_ack(rnr, now);
    EXPECT_EQ(tx->counters().bad_echo_acks, 2u);
    EXPECT_FALSE(tx->in_error());
    EXPECT_FALSE(tx->waiting_rnr());
    ack(kStart + 1);
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
}

TEST_F(SenderTest, NaksForPsnsNotOutstandingAreDropped) {
    config.rnr_retry = 0;
    reset();
    post_send(1, 3 * kMtu);
    sent();
    now += kRtt;
    ack(kStart, {kStart + 1, kStart + 2});
    // Acknowledged already, never sent, and behind the NAK's own cum_psn.
    tx->on_ack(echoed(nak_packet(Syndrome::RnrNak, kStart, kStart + 1, 0)), now);
    tx->on_ack(echoed(nak_packet(Syndrome::RemoteAccess, kStart, kStart + 3)), now);
    tx->on_ack(echoed(nak_packet(Syndrome::RemoteAccess, kStart + 1, kStart)), now);
    EXPECT_EQ(tx->counters().invalid_acks, 3u);
    EXPECT_EQ(tx->oldest_unacked(), kStart);  // the last one's cum_psn was not applied either
    EXPECT_FALSE(tx->in_error());
    EXPECT_FALSE(tx->waiting_rnr());
    ack(kStart + 3);
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
}

// A responder that accepted a READ (its ACK passed the READ's PSNs) refuses a part when the
// region is revoked before the part's turn, with a NAK behind its own cum_psn (protocol.md
// sections 6 and 12.1): the READ fails with REM_ACCESS_ERR, not with a retry timeout.
TEST_F(SenderTest, NakOfAnAcceptedReadBehindCumFailsTheRead) {
    post_read(1, 3 * kMtu);
    post_send(2, 10);
    ASSERT_EQ(sent().size(), 2u);
    now += kRtt;
    ack(kStart + 4);  // the READ's 3 PSNs and the SEND
    ASSERT_TRUE(tx->take_completions().empty());
    now += kRtt;
    tx->on_ack(echoed(nak_packet(Syndrome::RemoteAccess, kStart + 4, kStart + 1), 2 * kRtt), now);
    EXPECT_EQ(tx->counters().invalid_acks, 0u);
    EXPECT_TRUE(tx->in_error());
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[0].wr_id, 1u);
    EXPECT_EQ(done[0].status, WcStatus::RemAccessErr);
    EXPECT_EQ(done[1].status, WcStatus::WrFlushErr);
}

// Behind cum_psn, a NAK still must name a response the requester waits for.
TEST_F(SenderTest, NakBehindCumOfAReadResponseThatArrivedIsDropped) {
    post_read(1, 3 * kMtu);
    const auto p = sent();
    ASSERT_EQ(p.size(), 1u);
    post_send(2, 10);
    sent();
    now += kRtt;
    respond(p[0], {2});  // responses 0 and 1 arrive, 2 does not
    ack(kStart + 4);
    now += kRtt;
    tx->on_ack(echoed(nak_packet(Syndrome::RemoteAccess, kStart + 4, kStart + 1), 2 * kRtt), now);
    EXPECT_EQ(tx->counters().invalid_acks, 1u);
    EXPECT_FALSE(tx->in_error());
    tx->on_ack(echoed(nak_packet(Syndrome::RemoteAccess, kStart + 4, kStart + 2), 2 * kRtt), now);
    EXPECT_TRUE(tx->in_error());
    const auto done = tx->take_completions();
    ASSERT_FALSE(done.empty());
    EXPECT_EQ(done[0].status, WcStatus::RemAccessErr);
}

// A responder refuses a re-read at its turn when the region was revoked meanwhile; the first
// reading's response may have arrived by then (protocol.md section 12.1). The NAK is taken for
// the first work request not finished: the SEND after the READ.
TEST_F(SenderTest, LateNakOfAReReadFailsWhatIsStillOwed) {
    post_read(1, 12 * kMtu);
    post_send(2, 10);
    const auto p = sent();
    ASSERT_EQ(p.size(), 2u);
    respond(p[0], {2});
    const auto rereads = sent();
    ASSERT_EQ(rereads.size(), 1u);
    ASSERT_EQ(rereads[0].bth.psn, kStart + 2);
    std::set<std::uint32_t> all_but_2;
    for (std::uint32_t k = 0; k < 12; ++k) {
        if (k != 2) all_but_2.insert(k);
    }
    respond(p[0], all_but_2);  // the first reading's response 2 arrives after all
    auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    now += kRtt;
    tx->on_ack(echoed(nak_packet(Syndrome::RemoteAccess, kStart + 12, kStart + 2)), now);
    EXPECT_EQ(tx->counters().invalid_acks, 0u);
    EXPECT_EQ(tx->counters().bad_echo_acks, 0u);
    EXPECT_TRUE(tx->in_error());
    done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].wr_id, 2u);
    EXPECT_EQ(done[0].status, WcStatus::RemAccessErr);
}

TEST_F(SenderTest, AnAckWithNothingOutstandingChangesNothing) {
    post_send(1, 10);
    sent();
    now += kRtt;
    ack(kStart + 1);
    ASSERT_EQ(tx->take_completions().size(), 1u);
    Packet late = echoed(ack_packet(kStart + 1));
    late.ack().fair_share = 1;
    tx->on_ack(late, now);
    EXPECT_NE(tx->fair_share(), 1u);
}

TEST_F(SenderTest, EcnEchoShrinksTheWindowAndFairShareCapsIt) {
    config.congestion.initial_cwnd = 32;
    reset();
    post_send(1, 200 * kMtu);
    sent();
    now += kRtt;
    ack(kStart + 32, {}, /*ce=*/32);  // a whole window marked
    EXPECT_NEAR(tx->congestion().cwnd(), 16.0, 0.5);
    sent();
    now += kRtt;
    Packet a = ack_packet(kStart + 40, {}, 0, static_cast<std::uint32_t>(now - kRtt));
    a.ack().fair_share = 4;
    tx->on_ack(a, now);
    EXPECT_EQ(tx->window(), 4u);
    sent();
    EXPECT_LE(tx->inflight(), 8u + 4u);
}

TEST_F(SenderTest, ReadRequestAndResponses) {
    post_read(1, 1000);
    const auto p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].bth.opcode, Opcode::ReadRequest);
    EXPECT_TRUE(p[0].bth.has(kAckReq));
    EXPECT_EQ(p[0].rreq().va, 0x20000u);
    EXPECT_EQ(p[0].rreq().rkey, 0x20u);
    EXPECT_EQ(p[0].rreq().len, 1000u);
    EXPECT_EQ(p[0].rreq().offset, 0u);
    EXPECT_EQ(tx->next_psn(), kStart + 4);  // 4 response PSNs
    respond(p[0]);
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].opcode, WcOpcode::RdmaRead);
    EXPECT_EQ(done[0].byte_len, 1000u);
    const auto remote = pattern_bytes(1 << 20, 5);
    EXPECT_TRUE(std::equal(done[0].read_data.begin(), done[0].read_data.end(), remote.begin()));
    // The responses acknowledged the READ's PSNs.
    EXPECT_EQ(tx->oldest_unacked(), kStart + 4);
}

// A READ's PSNs stay in the window until its responses arrive, acknowledged or not: new PSNs
// go no further than 256 past it, so that a re-read still names a READ the responder
// remembers (protocol.md sections 5 and 8; metaroce-interop "model -> kernel, 2% loss"
// failed with rx_duplicate_read_unknown when they did).
TEST_F(SenderTest, AReadWithResponsesDueHoldsTheWindow) {
    post_read(1, 4 * kMtu);
    ASSERT_EQ(sent().size(), 1u);
    now += kRtt;
    ack(kStart + 4);  // the request is accepted; no response yet
    post_send(2, 400 * kMtu, WrOpcode::Write);
    sent();
    now += kRtt;
    ack(kStart + 150);
    sent();
    EXPECT_LE(psn_diff(tx->next_psn(), kStart), 256);
}

TEST_F(SenderTest, ReadResponsesCountAgainstTheWindow) {
    config.congestion.initial_cwnd = 8;
    reset();
    post_read(1, 20 * kMtu);
    post_send(2, kMtu);
    auto p = sent();
    // The first part asks for as many responses as the window has room for; the SEND waits.
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].bth.opcode, Opcode::ReadRequest);
    EXPECT_EQ(p[0].rreq().len, 8 * kMtu);
    EXPECT_EQ(tx->inflight(), 8u);
    // The ACK says the request arrived; its responses are still to come and still count.
    now += kRtt;
    ack(kStart + 8);
    EXPECT_TRUE(sent().empty());
    EXPECT_EQ(tx->inflight(), 8u);
    // Five responses arrive, one at a time: each makes room for one more, asked for at once.
    respond(p[0], {5, 6, 7});
    const auto next = sent();
    ASSERT_EQ(next.size(), 5u);
    for (unsigned i = 0; i < 5; ++i) {
        EXPECT_EQ(next[i].bth.opcode, Opcode::ReadRequest);
        EXPECT_EQ(next[i].rreq().offset, (8 + i) * kMtu);
        EXPECT_EQ(next[i].rreq().len, kMtu);
    }
    EXPECT_EQ(tx->inflight(), 8u);
}

TEST_F(SenderTest, ReReadsWaitForRoomInTheWindow) {
    post_read(1, 8 * kMtu);
    const auto req = sent().at(0);
    now += kRtt;
    // The request arrived; the receiver's fair-share hint shrinks the window to 4.
    Packet a = ack_packet(kStart + 8, {}, 0, static_cast<std::uint32_t>(now - kRtt));
    a.ack().fair_share = 4;
    tx->on_ack(a, now);
    ASSERT_EQ(tx->window(), 4u);
    // Responses 0..5 are lost, 6 and 7 arrive; after the response gap the time rule calls the
    // six lost, and only four of them fit the window.
    respond(req, {0, 1, 2, 3, 4, 5});
    EXPECT_TRUE(sent().empty());
    now += 1000;
    tx->on_timer(now);
    auto p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_TRUE(p[0].bth.has(kRetx));
    EXPECT_EQ(p[0].rreq().offset, 0u);
    EXPECT_EQ(p[0].rreq().len, 4 * kMtu);
    EXPECT_EQ(tx->inflight(), 4u);
    // Their answers make room for the other two, one at a time.
    respond(p[0]);
    p = sent();
    ASSERT_EQ(p.size(), 2u);
    for (unsigned i = 0; i < 2; ++i) {
        EXPECT_EQ(p[i].rreq().offset, (4 + i) * kMtu);
        EXPECT_EQ(p[i].rreq().len, kMtu);
        respond(p[i]);
    }
    EXPECT_EQ(tx->take_completions().at(0).status, WcStatus::Success);
}

TEST_F(SenderTest, ReReadsTakeAReadCredit) {
    config.max_rd_atomic = 1;
    reset();
    post_read(1, 8 * kMtu);
    const auto req = sent().at(0);
    now += kRtt;
    ack(kStart + 8);
    // Responses 0 and 4 are lost; after the response gap both are called lost, which frees
    // the part's credit, but only one re-read may be out at a time.
    respond(req, {0, 4});
    now += 1000;
    tx->on_timer(now);
    auto p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].rreq().offset, 0u);
    respond(p[0]);
    p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].rreq().offset, 4 * kMtu);
    respond(p[0]);
    EXPECT_EQ(tx->take_completions().at(0).status, WcStatus::Success);
}

TEST_F(SenderTest, ReReadGoesOnAnotherPathThanTheRequest) {
    // The READ_REQ and a 3-packet SEND take the four paths in turn, so that the turn has come
    // round to the request's path again when the re-read goes.
    post_read(1, 4 * kMtu);
    post_send(2, 3 * kMtu);
    const auto out = sent();
    ASSERT_EQ(out.size(), 4u);
    const Packet& req = out[0];
    now += kRtt;
    ack(kStart + 7);
    respond(req, {0});
    now += 1000;
    tx->on_timer(now);
    const auto p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_TRUE(p[0].bth.has(kRetx));
    EXPECT_NE(p[0].bth.path, req.bth.path);
}

TEST_F(SenderTest, LostReadRequestIsResentWhenTheWindowShrank) {
    config.congestion.initial_cwnd = 8;
    reset();
    post_read(1, 5 * kMtu);
    post_send(2, 3 * kMtu);
    const auto out = sent();
    ASSERT_EQ(out.size(), 4u);  // the READ_REQ (5 responses) and the SEND: the window is full
    // The READ_REQ is lost; the SEND arrives, and the receiver's hint shrinks the window to 4.
    now += kRtt;
    Packet a = ack_packet(kStart, {kStart + 5, kStart + 6, kStart + 7}, 0,
                          static_cast<std::uint32_t>(now - kRtt));
    a.ack().fair_share = 4;
    tx->on_ack(a, now);
    ASSERT_EQ(tx->window(), 4u);
    // The time rule calls the request lost; its five responses were never asked for, so they
    // do not hold the window, and the request goes again.
    now += 2000;
    tx->on_timer(now);
    const auto p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].bth.opcode, Opcode::ReadRequest);
    EXPECT_TRUE(p[0].bth.has(kRetx));
    EXPECT_EQ(tx->inflight(), 5u);
    respond(p[0]);
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    EXPECT_EQ(tx->inflight(), 0u);
}

TEST_F(SenderTest, LargeReadIsRequestedInParts) {
    config.max_read_packets = 4;
    reset();
    post_read(1, 10 * kMtu + 5);
    const auto p = sent();
    ASSERT_EQ(p.size(), 3u);
    EXPECT_EQ(psns(p), (std::vector<Psn>{kStart, kStart + 4, kStart + 8}));
    EXPECT_EQ(p[1].rreq().va, 0x20000u + 4 * kMtu);
    EXPECT_EQ(p[1].rreq().offset, 4 * kMtu);
    EXPECT_EQ(p[1].rreq().len, 4 * kMtu);
    EXPECT_EQ(p[2].rreq().offset, 8 * kMtu);
    EXPECT_EQ(p[2].rreq().len, 2 * kMtu + 5);
    for (const Packet& part : p) {
        EXPECT_EQ(part.rreq().msn, p[0].rreq().msn);  // one READ message
        EXPECT_FALSE(part.bth.has(kRetx));
    }
    respond(p[2]);
    respond(p[0]);
    EXPECT_TRUE(tx->take_completions().empty());
    respond(p[1]);
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    const auto remote = pattern_bytes(1 << 20, 5);
    EXPECT_TRUE(std::equal(done[0].read_data.begin(), done[0].read_data.end(), remote.begin()));
}

TEST_F(SenderTest, LostReadResponsesAreReReadExactly) {
    post_read(1, 12 * kMtu + 100);
    const auto req = sent().at(0);
    // Responses 2, 3 and 6 are lost: response 10 is 8 after 2 and 11 is 8 after 3, so each is
    // re-read as they arrive; nothing 8 after 6 arrives (the last is 12), so 6 waits for the
    // timer.
    respond(req, {2, 3, 6});
    auto p = sent();
    ASSERT_EQ(p.size(), 2u);
    for (unsigned i = 0; i < 2; ++i) {
        EXPECT_EQ(p[i].bth.opcode, Opcode::ReadRequest);
        EXPECT_TRUE(p[i].bth.has(kRetx));
        EXPECT_EQ(p[i].bth.psn, kStart + 2 + i);
        EXPECT_EQ(p[i].rreq().offset, (2 + i) * kMtu);
        EXPECT_EQ(p[i].rreq().len, kMtu);
        EXPECT_EQ(p[i].rreq().va, 0x20000u + (2 + i) * kMtu);
        EXPECT_EQ(p[i].rreq().msn, req.rreq().msn);
    }
    EXPECT_EQ(tx->counters().rereads, 2u);
    now += kRtt;
    respond(p[0]);
    respond(p[1]);
    EXPECT_TRUE(tx->take_completions().empty());
    now = *tx->next_timer();
    tx->on_timer(now);
    p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].bth.psn, kStart + 6);
    EXPECT_EQ(p[0].rreq().len, kMtu);
    respond(p[0]);
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    const auto remote = pattern_bytes(1 << 20, 5);
    EXPECT_TRUE(std::equal(done[0].read_data.begin(), done[0].read_data.end(), remote.begin()));
}

TEST_F(SenderTest, ALaterReadsResponsesShowAnEarlierReadsLoss) {
    post_read(1, 4 * kMtu);
    post_read(2, 8 * kMtu, 0x20000 + 4 * kMtu);
    const auto reqs = sent();
    ASSERT_EQ(reqs.size(), 2u);
    // The first READ's last response is missing, with nothing of that READ after it. The
    // responder executes READs in PSN order, so the second READ's responses left after it:
    // the eighth of them makes it lost by count, before any timer.
    respond(reqs[0], {3});
    EXPECT_TRUE(sent().empty());
    respond(reqs[1]);
    const auto p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].bth.opcode, Opcode::ReadRequest);
    EXPECT_TRUE(p[0].bth.has(kRetx));
    EXPECT_EQ(p[0].bth.psn, kStart + 3);
    EXPECT_EQ(p[0].rreq().len, kMtu);
    respond(p[0]);
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 2u);
    const auto remote = pattern_bytes(1 << 20, 5);
    EXPECT_TRUE(std::equal(done[0].read_data.begin(), done[0].read_data.end(), remote.begin()));
    EXPECT_TRUE(
        std::equal(done[1].read_data.begin(), done[1].read_data.end(), remote.begin() + 4 * kMtu));
}

TEST_F(SenderTest, TailProbeReReadsTheNewestResponseInFlight) {
    post_read(1, 4 * kMtu);
    const auto req = sent().at(0);
    ack(kStart + 4);    // the responder has the request
    respond(req, {3});  // the last response is lost, and nothing after it can show that
    // Nothing else is in flight: after the probe timeout the newest response asked for is
    // re-read (section 8), before the READ's own timer.
    now = *tx->next_timer();
    tx->on_timer(now);
    const auto p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].bth.opcode, Opcode::ReadRequest);
    EXPECT_TRUE(p[0].bth.has(kRetx));
    EXPECT_EQ(p[0].bth.psn, kStart + 3);
    EXPECT_EQ(p[0].rreq().len, kMtu);
    EXPECT_EQ(tx->counters().tail_probes, 1u);
    respond(p[0]);
    EXPECT_EQ(tx->take_completions().size(), 1u);
}

TEST_F(SenderTest, ReadResponsesAllLostAreProbedThenReReadAfterTheTimer) {
    post_read(1, 3 * kMtu);
    sent();
    now += kRtt;
    ack(kStart + 3);  // the request arrived, the responses never do
    const TimeUs acked_at = now;
    // First the tail-loss probe re-reads the newest response asked for (section 8)...
    now = *tx->next_timer();
    EXPECT_LT(now, acked_at + 5000);
    tx->on_timer(now);
    auto p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].bth.psn, kStart + 2);
    EXPECT_TRUE(p[0].bth.has(kRetx));
    // ...then, with no answer, the READ's timer (the RTO, 5 ms at least) gives up the rest.
    std::vector<Packet> rereads;
    for (int timers = 0; timers < 10 && (rereads.empty() || rereads.front().bth.psn != kStart);
         ++timers) {
        now = *tx->next_timer();
        tx->on_timer(now);
        rereads = sent();
    }
    ASSERT_FALSE(rereads.empty());
    EXPECT_GE(now, acked_at + 5000);
    EXPECT_EQ(rereads.front().rreq().offset, 0u);
    EXPECT_TRUE(rereads.front().bth.has(kRetx));
}

// Atomics (protocol.md sections 3.4, 8).
class SenderAtomicTest : public SenderTest {
  protected:
    void post_atomic(std::uint64_t id, WrOpcode op, std::uint64_t swap_add,
                     std::uint64_t compare = 0, std::uint64_t addr = 0x30008, bool fence = false) {
        WorkRequest wr;
        wr.wr_id = id;
        wr.opcode = op;
        wr.remote_addr = addr;
        wr.rkey = 0x30;
        wr.swap_add = swap_add;
        wr.compare = compare;
        wr.fence = fence;
        tx->post(std::move(wr), now);
    }
    void answer(const Packet& request, std::uint64_t value, std::uint8_t extra = 0) {
        tx->on_read_response(through_wire(atomic_response(request.bth.psn, request.areq().msn,
                                                          value, kFirst | kLast | extra),
                                          kMtu),
                             now);
    }
};

TEST_F(SenderAtomicTest, RequestTakesOnePsnAndCompletesWithTheValue) {
    post_send(1, 10);  // a SEND first: the atomic carries the next MSN, 1
    post_atomic(2, WrOpcode::AtomicCmpSwp, 9, 5);
    post_atomic(3, WrOpcode::AtomicFetchAdd, 3, 0, 0x30010);
    const auto p = sent();
    ASSERT_EQ(p.size(), 3u);
    EXPECT_EQ(p[1].bth.opcode, Opcode::AtomicCmpSwp);
    EXPECT_EQ(p[1].bth.psn, kStart + 1);
    EXPECT_EQ(p[1].bth.flags, kAckReq);
    EXPECT_EQ(p[1].areq(), (AtomicReq{0x30008, 0x30, 1, 9, 5}));
    EXPECT_EQ(p[2].bth.opcode, Opcode::AtomicFetchAdd);
    EXPECT_EQ(p[2].bth.psn, kStart + 2);
    EXPECT_EQ(p[2].areq(), (AtomicReq{0x30010, 0x30, 1, 3, 0}));  // MSN not consumed
    EXPECT_EQ(tx->next_psn(), kStart + 3);
    now += kRtt;
    ack(kStart + 3);
    auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);  // the SEND; the atomics wait for their responses
    answer(p[2], 77);            // out of order: completions stay in order
    EXPECT_TRUE(tx->take_completions().empty());
    answer(p[1], 0x0102030405060708ull);
    done = tx->take_completions();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[0].wr_id, 2u);
    EXPECT_EQ(done[0].opcode, WcOpcode::CompSwap);
    EXPECT_EQ(done[0].byte_len, 8u);
    EXPECT_EQ(done[0].atomic_value, 0x0102030405060708ull);
    std::uint64_t in_buffer = 0;
    ASSERT_EQ(done[0].read_data.size(), 8u);
    std::memcpy(&in_buffer, done[0].read_data.data(), 8);  // in the requester's byte order
    EXPECT_EQ(in_buffer, 0x0102030405060708ull);
    EXPECT_EQ(done[1].opcode, WcOpcode::FetchAdd);
    EXPECT_EQ(done[1].atomic_value, 77u);
}

TEST_F(SenderAtomicTest, LostResponseIsAskedForWithTheSameRequestAndRetx) {
    post_atomic(1, WrOpcode::AtomicFetchAdd, 1);
    const auto first = sent();
    ASSERT_EQ(first.size(), 1u);
    now += kRtt;
    ack(kStart + 1);  // the request arrived; its response never does
    std::vector<Packet> again;
    for (int timers = 0; timers < 10 && again.empty(); ++timers) {
        now = *tx->next_timer();
        tx->on_timer(now);
        again = sent();
    }
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].bth.opcode, Opcode::AtomicFetchAdd);
    EXPECT_EQ(again[0].bth.psn, kStart);
    EXPECT_EQ(again[0].areq(), first[0].areq());
    EXPECT_TRUE(again[0].bth.has(kRetx) && again[0].bth.has(kAckReq));
    // The responder answers from its record (with RETX): that value completes it.
    answer(again[0], 41, kRetx);
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].status, WcStatus::Success);
    EXPECT_EQ(done[0].atomic_value, 41u);
    // A late copy of the first answer changes nothing.
    answer(first[0], 41);
    EXPECT_TRUE(tx->take_completions().empty());
    EXPECT_EQ(tx->counters().unexpected_read_responses, 1u);
}

TEST_F(SenderAtomicTest, LostRequestIsResentTheSameWithRetx) {
    post_atomic(1, WrOpcode::AtomicCmpSwp, 2, 1);
    post_send(2, 10);
    const auto first = sent();
    ASSERT_EQ(first.size(), 2u);
    now += kRtt;
    ack(kStart, {kStart + 1});  // the SEND arrived, the atomic did not
    std::vector<Packet> again;
    for (int timers = 0; timers < 10 && again.empty(); ++timers) {
        now = *tx->next_timer();
        tx->on_timer(now);
        again = sent();
    }
    ASSERT_EQ(again.size(), 1u);
    EXPECT_EQ(again[0].bth.opcode, Opcode::AtomicCmpSwp);
    EXPECT_EQ(again[0].bth.psn, kStart);
    EXPECT_EQ(again[0].areq(), first[0].areq());
    EXPECT_TRUE(again[0].bth.has(kRetx));
    answer(again[0], 1);
    const auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[0].atomic_value, 1u);
}

TEST_F(SenderAtomicTest, ResponsesOfTheWrongKindOrMsnAreRefused) {
    post_atomic(1, WrOpcode::AtomicFetchAdd, 1);
    post_read(2, 100);
    const auto p = sent();
    ASSERT_EQ(p.size(), 2u);
    // A READ_RESP for the atomic's PSN, an ATOMIC_RESP for the READ's, another MSN.
    Packet read_like;
    read_like.bth.opcode = Opcode::ReadResponse;
    read_like.bth.flags = kFirst | kLast;
    read_like.bth.dqpn = kQpA;
    read_like.bth.sqpn = kQpB;
    read_like.bth.psn = kStart;
    read_like.ext = Deth{0, 0, 0, 8, 0};
    read_like.payload.assign(8, 0);
    tx->on_read_response(through_wire(read_like, kMtu), now);
    tx->on_read_response(through_wire(atomic_response(kStart + 1, 0, 5), kMtu), now);
    tx->on_read_response(through_wire(atomic_response(kStart, 9, 5), kMtu), now);
    EXPECT_EQ(tx->counters().bad_read_responses, 3u);
    EXPECT_TRUE(tx->take_completions().empty());
}

TEST_F(SenderAtomicTest, NaksCompleteTheAtomicWithTheirStatus) {
    for (const auto& [syndrome, status] :
         {std::pair{Syndrome::RemoteAccess, WcStatus::RemAccessErr},
          std::pair{Syndrome::InvalidRequest, WcStatus::RemInvReqErr}}) {
        reset();
        post_atomic(1, WrOpcode::AtomicFetchAdd, 1);
        sent();
        now += kRtt;
        tx->on_ack(through_wire(echoed(nak_packet(syndrome, kStart, kStart)), kMtu), now);
        const auto done = tx->take_completions();
        ASSERT_EQ(done.size(), 1u);
        EXPECT_EQ(done[0].status, status);
        EXPECT_EQ(done[0].opcode, WcOpcode::FetchAdd);
        EXPECT_TRUE(tx->in_error());
    }
}

TEST_F(SenderAtomicTest, AtomicsHoldReadCreditsAndFenceWaitsForThem) {
    config.max_rd_atomic = 2;
    reset();
    post_atomic(1, WrOpcode::AtomicFetchAdd, 1);
    post_read(2, 10);
    post_atomic(3, WrOpcode::AtomicFetchAdd, 1);  // a third part: waits for a credit
    auto p = sent();
    ASSERT_EQ(p.size(), 2u);
    answer(p[0], 0);
    p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].bth.opcode, Opcode::AtomicFetchAdd);
    // A fenced SEND waits for the atomics before it.
    post_send(4, 10);
    EXPECT_EQ(sent().size(), 1u);
    reset();
    post_atomic(1, WrOpcode::AtomicFetchAdd, 1);
    WorkRequest fenced;
    fenced.wr_id = 2;
    fenced.opcode = WrOpcode::Send;
    fenced.data = {1};
    fenced.fence = true;
    tx->post(fenced, now);
    p = sent();
    ASSERT_EQ(p.size(), 1u);
    answer(p[0], 0);
    p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].bth.opcode, Opcode::Send);
}

TEST_F(SenderTest, CompletionsInPostingOrderAndFence) {
    post_read(1, 100);
    WorkRequest fenced;
    fenced.wr_id = 2;
    fenced.opcode = WrOpcode::Write;
    fenced.data = pattern_bytes(10, 2);
    fenced.rkey = 0x10;
    fenced.fence = true;
    tx->post(fenced, now);
    auto p = sent();
    ASSERT_EQ(p.size(), 1u);  // the fenced WRITE waits for the READ
    now += kRtt;
    ack(kStart + 1);
    EXPECT_TRUE(sent().empty());
    respond(p[0]);
    auto done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].wr_id, 1u);
    p = sent();
    ASSERT_EQ(p.size(), 1u);
    EXPECT_EQ(p[0].bth.opcode, Opcode::Write);

    // A SEND acknowledged before an earlier READ completes waits for it.
    post_read(3, 100);
    post_send(4, 10);
    const auto q = sent();
    ASSERT_EQ(q.size(), 2u);
    now += kRtt;
    ack(tx->next_psn());
    done = tx->take_completions();
    ASSERT_EQ(done.size(), 1u);
    EXPECT_EQ(done[0].wr_id, 2u);
    respond(q[0]);
    done = tx->take_completions();
    ASSERT_EQ(done.size(), 2u);
    EXPECT_EQ(done[0].wr_id, 3u);
    EXPECT_EQ(done[1].wr_id, 4u);
}

TEST_F(SenderTest, UnsignaledSuccessHasNoCompletion) {
    WorkRequest wr;
    wr.wr_id = 1;
    wr.data = {1, 2, 3};
    wr.signaled = false;
    tx->post(wr, now);
    sent();
    now += kRtt;  // an ACK echoes a packet sent before it
    ack(kStart + 1);
    EXPECT_TRUE(tx->take_completions().empty());
    EXPECT_EQ(tx->outstanding_wrs(), 0u);
}

TEST_F(SenderTest, LossyPathIsAvoidedAndRecovers) {
    config.congestion.initial_cwnd = 64;
    reset();
    post_send(1, 400 * kMtu);
    std::set<Psn> delivered;
    std::uint64_t on_bad_path_late = 0;
    // Path 2 drops everything: the ACKs show every packet but those sent on it.
    for (int round = 0; round < 40; ++round) {
        for (const Packet& p : sent()) {
            if (p.bth.path != 2) delivered.insert(p.bth.psn);
            if (round > 20 && p.bth.path == 2) ++on_bad_path_late;
        }
        now += kRtt;
        Psn cum = tx->oldest_unacked();
        while (delivered.count(cum) != 0) cum = psn_next(cum);
        SackBitmap b(cum);
        for (const Psn q : delivered) {
            if (psn_diff(q, cum) > 0 && psn_diff(q, cum) <= 256) b.mark(q);
        }
        Packet a = ack_packet(cum, {}, 0, static_cast<std::uint32_t>(now - kRtt), 0);
        a.ack().sack = b.to_wire();
        tx->on_ack(a, now);
        if (const auto t = tx->next_timer(); t && *t <= now) tx->on_timer(now);
    }
    EXPECT_EQ(tx->paths()[2].state, PathState::Failed);
    // After failing, path 2 only carries the odd probe.
    EXPECT_LE(on_bad_path_late, 3u);
    EXPECT_FALSE(tx->in_error());

    // The path heals: an ACK echoing a probe on it makes it ACTIVE again. (Once everything
    // is acknowledged an ACK has nothing to tell, section 12.1: the probe is new work.)
    now += 100'000;
    post_send(2, 8 * kMtu);
    const auto next = sent();
    EXPECT_TRUE(
        std::any_of(next.begin(), next.end(), [](const Packet& p) { return p.bth.path == 2; }));
    now += kRtt;
    ack(tx->oldest_unacked(), {}, 0, 2);
    EXPECT_EQ(tx->paths()[2].state, PathState::Active);
}

class SenderWrapTest : public SenderTest {};

TEST_F(SenderWrapTest, PsnsWrapAt24Bits) {
    config.initial_psn = 0xfffffe;
    reset();
    post_send(1, 4 * kMtu);
    const auto p = sent();
    EXPECT_EQ(psns(p), (std::vector<Psn>{0xfffffe, 0xffffff, 0, 1}));
    now += kRtt;
    Packet a = ack_packet(0xffffff, {0, 1}, 0, static_cast<std::uint32_t>(now - kRtt));
    tx->on_ack(a, now);
    EXPECT_TRUE(tx->known_delivered(0xfffffe));
    EXPECT_TRUE(tx->known_delivered(1));
    EXPECT_FALSE(tx->known_delivered(0xffffff));
    ack(2);
    EXPECT_EQ(tx->take_completions().size(), 1u);
    EXPECT_EQ(tx->oldest_unacked(), 2u);
}

}  // namespace
}  // namespace metaroce
