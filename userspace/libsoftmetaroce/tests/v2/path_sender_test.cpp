// Sections 5-6: the sending end of a path, rule by rule.
#include "softmetaroce/v2/path_sender.h"

#include <gtest/gtest.h>

#include <initializer_list>

#include "softmetaroce/v2/path_receiver.h"

namespace softmetaroce::v2 {
namespace {

constexpr uint64_t kNever = ~uint64_t{0};
using Cookies = std::vector<uint64_t>;

// An ACK with cum and the listed sequences' bits.
PathAck ack_of(uint32_t cum, std::initializer_list<uint32_t> seqs = {}, uint32_t delay = 0,
               uint32_t ce = 0) {
    PathAck a;
    a.cum = cum;
    for (uint32_t s : seqs) a.set_bit(s - cum - 1);
    a.ack_delay_us = delay;
    a.ce = ce;
    return a;
}

// A sender whose cookie for sequence s is 1000 + s.
struct Tx {
    explicit Tx(uint32_t first = 0, uint32_t cwnd = 64 * kCwndOne) : p(first, 1, cwnd) {}
    uint32_t send(uint64_t now) { return p.on_sent(1000 + p.next_seq(), now); }
    void send_n(unsigned n, uint64_t now) {
        for (unsigned i = 0; i < n; ++i) send(now);
    }
    AckVerdict ack(const PathAck& a, uint64_t now) {
        ev = {};
        return p.on_ack(a, now, ev);
    }
    void timer(uint64_t now, uint16_t entropy = 99) {
        ev = {};
        p.on_timer(now, entropy, ev);
    }
    PathSender p;
    PathEvents ev;
};

TEST(PathSender, FreshPath) {
    PathSender p(77, 5, 10 * kCwndOne);
    EXPECT_TRUE(p.can_send(0));
    EXPECT_EQ(p.next_seq(), 77u);
    EXPECT_EQ(p.floor(), 77u);
    EXPECT_EQ(p.entropy(), 5u);
    EXPECT_EQ(p.cwnd(), 2560u);
    EXPECT_EQ(p.pto_us(), 20000u);  // before the first sample
    EXPECT_EQ(p.deadline(), kNever);
    EXPECT_EQ(p.retry_at(), kNever);
    EXPECT_EQ(p.state(), PathState::Active);
    EXPECT_EQ(p.repath_wanted(), Repath::None);
    EXPECT_EQ(PathSender(0, 0, 0).cwnd(), kCwndMin);  // the window is 1..255 packets
    EXPECT_EQ(PathSender(0, 0, 1u << 20).cwnd(), kCwndMax);
}

TEST(PathSender, SendsFewerInFlightThanTheWindow) {
    Tx t(0, 2 * kCwndOne);
    t.send_n(2, 0);
    EXPECT_FALSE(t.p.can_send(0));
    Tx u(0, kCwndOne + 44);  // 1.17 packets: one in flight is fewer
    u.send(0);
    EXPECT_TRUE(u.p.can_send(0));
    u.send(0);
    EXPECT_FALSE(u.p.can_send(0));
    EXPECT_EQ(u.p.in_flight(), 2u);
}

TEST(PathSender, NewestSequenceStaysWithin254OfTheFloor) {
    Tx t(0xffffff80u, kCwndMax);
    t.send(0);  // the floor; a new route keeps the gap rule off it
    t.p.new_route(2);
    for (int i = 1; i < 254; ++i) t.send(0);
    EXPECT_TRUE(t.p.can_send(0));  // the next would be floor + 254
    t.send(0);
    EXPECT_FALSE(t.p.can_send(0));
    // Most of them acknowledged, so the window has room, but the floor holds.
    const uint32_t f = 0xffffff80u;
    PathAck a = ack_of(f);
    for (uint32_t s = 1; s <= 100; ++s) a.set_bit(s - 1);
    EXPECT_EQ(t.ack(a, 10), AckVerdict::Ok);
    EXPECT_EQ(t.ev.acked.size(), 100u);
    EXPECT_TRUE(t.ev.lost.empty());
    EXPECT_EQ(t.p.in_flight(), 155u);
    EXPECT_EQ(t.p.floor(), f);
    EXPECT_FALSE(t.p.can_send(10));
    a.cum = f + 1;
    a.bits = {};
    for (uint32_t s = 0; s < 99; ++s) a.set_bit(s);  // f + 2 .. f + 100
    EXPECT_EQ(t.ack(a, 11), AckVerdict::Ok);
    EXPECT_EQ(t.p.floor(), f + 101);
    EXPECT_TRUE(t.p.can_send(11));
}

TEST(PathSender, RefusesAnAckForSequencesNotSent) {
    Tx t(10);
    t.send_n(3, 0);                                              // 10, 11, 12
    EXPECT_EQ(t.ack(ack_of(14), 5), AckVerdict::Invalid);        // cum past next
    EXPECT_EQ(t.ack(ack_of(10, {13}), 5), AckVerdict::Invalid);  // a bit for 13
    EXPECT_EQ(t.p.invalid_acks(), 2u);
    EXPECT_EQ(t.p.in_flight(), 3u);
    EXPECT_FALSE(t.p.has_rtt());
    EXPECT_EQ(t.ack(ack_of(10, {12}), 5), AckVerdict::Ok);
    EXPECT_EQ(t.ev.acked, (Cookies{1012}));
    EXPECT_EQ(t.ack(ack_of(13), 6), AckVerdict::Ok);  // cum == next: all of them
    EXPECT_EQ(t.ev.acked, (Cookies{1010, 1011}));
    EXPECT_EQ(t.p.in_flight(), 0u);
    EXPECT_EQ(t.p.floor(), 13u);
    EXPECT_EQ(t.p.acked(), 3u);
}

TEST(PathSender, LossByAGapOfThree) {
    Tx t;
    t.send_n(6, 0);
    t.ack(ack_of(0, {2}), 100);
    EXPECT_TRUE(t.ev.lost.empty());  // 2 past 0: not yet
    t.ack(ack_of(0, {2, 3}), 101);
    EXPECT_EQ(t.ev.lost, (Cookies{1000}));
    t.ack(ack_of(0, {2, 3, 5}), 102);  // a burst: 1 is 4 behind, 4 is not 3 behind
    EXPECT_EQ(t.ev.acked, (Cookies{1005}));
    EXPECT_EQ(t.ev.lost, (Cookies{1001}));
    EXPECT_EQ(t.p.in_flight(), 1u);
    EXPECT_EQ(t.p.floor(), 4u);
    EXPECT_EQ(t.p.lost(), 2u);
    EXPECT_GE(t.p.cwnd(), 64 * kCwndOne);  // losses do not shrink it
}

TEST(PathSender, LossByGapOnlyOnTheSameRoute) {
    Tx t;
    t.send_n(2, 0);  // 0, 1 on the old route
    t.p.new_route(3);
    EXPECT_EQ(t.p.entropy(), 3u);
    EXPECT_EQ(t.p.repaths(), 1u);
    t.send_n(4, 0);  // 2..5 on the new one
    t.ack(ack_of(0, {5}), 100);
    EXPECT_EQ(t.ev.lost, (Cookies{1002}));  // 0 and 1 are 5 and 4 behind, but on the old route
    // Only the time rule calls them lost.
    EXPECT_EQ(t.p.deadline(), 1000u);  // at least 1 ms
    t.timer(999);
    EXPECT_TRUE(t.ev.lost.empty());
    t.timer(1000);  // all that left at 0 below 5, whatever their route
    EXPECT_EQ(t.ev.lost, (Cookies{1000, 1001, 1003, 1004}));
}

TEST(PathSender, LossByTimeIsNineEighthsOfTheLargerRtt) {
    Tx t;
    t.send(0);
    t.ack(ack_of(1), 1000);       // first sample 1000
    t.send_n(2, 1000);            // 1, 2
    t.ack(ack_of(1, {2}), 9000);  // latest 8000, SRTT (7000 + 8000) / 8
    EXPECT_EQ(t.p.latest_rtt_us(), 8000u);
    EXPECT_EQ(t.p.srtt_us(), 1875u);
    EXPECT_TRUE(t.ev.lost.empty());
    EXPECT_EQ(t.p.deadline(), 1000u + 9000);  // 9/8 * 8000 after it left
    t.timer(9999);
    EXPECT_TRUE(t.ev.lost.empty());
    t.timer(10000);
    EXPECT_EQ(t.ev.lost, (Cookies{1001}));
    EXPECT_EQ(t.p.deadline(), kNever);
}

TEST(PathSender, TimeRuleNeedsALaterAcknowledgedTransmission) {
    Tx t;
    t.send(0);
    t.ack(ack_of(1), 100);
    t.send(200);
    // Nothing after 1 acknowledged: only the probe timeout can call it lost.
    EXPECT_EQ(t.p.deadline(), 200u + t.p.pto_us());
    t.timer(200 + t.p.pto_us() - 1);
    EXPECT_TRUE(t.ev.lost.empty());
}

TEST(PathSender, SpuriousLossByABit) {
    Tx t;
    t.send(0);
    t.p.new_route(4);
    t.send_n(5, 0);  // 1..5
    t.ack(ack_of(0, {4}), 100);
    EXPECT_EQ(t.ev.lost, (Cookies{1001}));
    t.ack(ack_of(0, {1, 4}), 101);  // 1 had arrived after all
    EXPECT_EQ(t.ev.acked, (Cookies{1001}));
    EXPECT_EQ(t.p.spurious(), 1u);
    EXPECT_EQ(t.p.acked(), 1u);  // acked() counts only those acknowledged while in flight
    EXPECT_EQ(t.p.lost(), 1u);
    t.ack(ack_of(0, {1, 4}), 102);  // once only
    EXPECT_TRUE(t.ev.acked.empty());
    EXPECT_EQ(t.p.spurious(), 1u);
}

TEST(PathSender, SpuriousLossByCumWhileNoFloorSentPassedIt) {
    Tx t;
    t.send_n(4, 0);
    t.ack(ack_of(0, {3}), 100);
    EXPECT_EQ(t.ev.lost, (Cookies{1000}));
    EXPECT_EQ(t.p.floor(), 1u);
    t.ack(ack_of(4), 101);  // no packet has carried floor 1 yet: 0 arrived
    EXPECT_EQ(t.ev.acked, (Cookies{1000, 1001, 1002}));
    EXPECT_EQ(t.p.spurious(), 1u);
}

TEST(PathSender, CumPastALossIsNoEvidenceOnceAFloorPassedIt) {
    Tx t;
    t.send_n(4, 0);
    t.ack(ack_of(0, {3}), 100);
    EXPECT_EQ(t.ev.lost, (Cookies{1000}));
    t.send(100);  // carries floor 1: the receiver may skip 0
    EXPECT_EQ(t.p.floor(), 1u);
    t.ack(ack_of(5), 200);
    EXPECT_EQ(t.ev.acked, (Cookies{1001, 1002, 1004}));
    EXPECT_EQ(t.p.spurious(), 0u);
}

TEST(PathSender, RttAsInRfc9002) {
    Tx t;
    t.send(0);
    t.ack(ack_of(1, {}, 400), 1000);  // the first sample as it is, ACK delay or not
    EXPECT_EQ(t.p.srtt_us(), 1000u);
    EXPECT_EQ(t.p.rttvar_us(), 500u);
    EXPECT_EQ(t.p.min_rtt_us(), 1000u);
    EXPECT_EQ(t.p.pto_us(), 1000u + 2000 + 200);
    t.send(2000);
    t.ack(ack_of(2, {}, 300), 3500);  // 1500 - 300 leaves at least min RTT: 1200
    EXPECT_EQ(t.p.rttvar_us(), (3 * 500 + 200) / 4);
    EXPECT_EQ(t.p.srtt_us(), (7 * 1000 + 1200) / 8);
    t.send(4000);
    t.ack(ack_of(3, {}, 500), 5100);  // 1100 - 500 would go under min RTT: 1100 as it is
    EXPECT_EQ(t.p.rttvar_us(), (3 * 425 + 75) / 4);
    EXPECT_EQ(t.p.srtt_us(), (7 * 1025 + 1100) / 8);
    EXPECT_EQ(t.p.latest_rtt_us(), 1100u);
    t.send(6000);
    t.ack(ack_of(4), 6800);
    EXPECT_EQ(t.p.min_rtt_us(), 800u);
    EXPECT_EQ(t.p.pto_us(), t.p.srtt_us() + std::max(4 * t.p.rttvar_us(), 1000u) + 200);
}

TEST(PathSender, RttSampleOnlyWhenTheNewestNamedIsNewlyAcked) {
    Tx t;
    t.send_n(2, 0);
    t.ack(ack_of(0, {1}), 500);
    EXPECT_EQ(t.p.latest_rtt_us(), 500u);
    t.ack(ack_of(2), 900);  // newly acks 0, but the newest named, 1, was acked before
    EXPECT_EQ(t.ev.acked, (Cookies{1000}));
    EXPECT_EQ(t.p.latest_rtt_us(), 500u);
    EXPECT_EQ(t.p.srtt_us(), 500u);
}

TEST(PathSender, ProbeTimeoutLosesTheTailAndDoubles) {
    Tx t;
    t.send(0);
    t.send(10);
    t.send(20);
    EXPECT_EQ(t.p.deadline(), 20u + 20000);  // a PTO after the newest packet
    t.timer(20019);
    EXPECT_TRUE(t.ev.lost.empty());
    t.timer(20020);
    EXPECT_EQ(t.ev.lost, (Cookies{1000, 1001, 1002}));
    EXPECT_EQ(t.p.in_flight(), 0u);
    EXPECT_EQ(t.p.floor(), 3u);
    EXPECT_EQ(t.p.pto_count(), 1u);
    EXPECT_EQ(t.p.pto_us(), 40000u);
    EXPECT_EQ(t.p.deadline(), kNever);
    EXPECT_EQ(t.p.state(), PathState::Active);
    t.send(20020);  // resent at once, on the same path
    EXPECT_EQ(t.p.deadline(), 20020u + 40000);
    // An acknowledgement ends the run of timeouts.
    t.ack(ack_of(4), 20100);
    EXPECT_EQ(t.p.pto_count(), 0u);
}

TEST(PathSender, ProbeTimeoutCountsFromTheNewestSendOrAck) {
    Tx t;
    t.send_n(4, 0);
    t.ack(ack_of(1), 100);  // RTT 100: PTO 100 + 1000 + 200, from the ACK (at 100)
    EXPECT_EQ(t.p.deadline(), 100u + 1300);
    t.send(500);
    EXPECT_EQ(t.p.deadline(), 500u + 1300);
    t.ack(ack_of(1), 500);  // names nothing new: the PTO stays where the send put it
    EXPECT_EQ(t.p.deadline(), 500u + 1300);
}

TEST(PathSender, ProbeTimeoutIsAtMostTwoSeconds) {
    Tx t;
    t.send(0);
    t.ack(ack_of(1), 600000);  // SRTT 600 ms, RTTVAR 300 ms: 1.8 s + 200 us
    EXPECT_EQ(t.p.pto_us(), 600000u + 1200000 + 200);
    t.send(600000);
    t.timer(600000 + 1800200);
    EXPECT_EQ(t.p.pto_us(), 2000000u);
}

TEST(PathSender, ThreeTimeoutsFailThePathOntoANewRoute) {
    Tx t(0, 40 * kCwndOne);
    uint64_t now = 0;
    for (int i = 0; i < 3; ++i) {
        EXPECT_EQ(t.p.state(), PathState::Active);
        t.send(now);
        now = t.p.deadline();
        t.timer(now, 1234);
        EXPECT_EQ(t.ev.lost.size(), 1u);
    }
    EXPECT_EQ(now, 20000u + 40000 + 80000);
    EXPECT_EQ(t.p.state(), PathState::Failed);
    EXPECT_EQ(t.p.failures(), 1u);
    EXPECT_EQ(t.p.entropy(), 1234u);
    EXPECT_EQ(t.p.cwnd(), 10 * kCwndOne);  // a quarter
    EXPECT_EQ(t.p.retry_at(), now + 2000);
    EXPECT_FALSE(t.p.can_send(now));
    EXPECT_FALSE(t.p.can_send(now + 1999));
    EXPECT_TRUE(t.p.can_send(now + 2000));
    // One probe, given one PTO.
    now += 2000;
    const uint32_t probe = t.send(now);
    EXPECT_FALSE(t.p.can_send(now));
    EXPECT_EQ(t.p.retry_at(), kNever);
    EXPECT_EQ(t.p.deadline(), now + 20000);
    // Acknowledged: active again.
    t.ack(ack_of(probe + 1), now + 300);
    EXPECT_EQ(t.ev.acked, (Cookies{1000 + probe}));
    EXPECT_EQ(t.p.state(), PathState::Active);
    EXPECT_EQ(t.p.retry_at(), kNever);
    EXPECT_TRUE(t.p.can_send(now + 300));
    EXPECT_EQ(t.p.sent_packets(), 4u);
}

// Section 5.3: a probe declared lost whose ACK comes after all revives the path.
TEST(PathSender, AProbeThatArrivesLateRevivesThePath) {
    Tx t(0, 40 * kCwndOne);
    uint64_t now = 0;
    for (int i = 0; i < 3; ++i) {
        t.send(now);
        now = t.p.deadline();
        t.timer(now, 1234);
    }
    ASSERT_EQ(t.p.state(), PathState::Failed);
    now = t.p.retry_at();
    const uint32_t probe = t.send(now);
    now = t.p.deadline();
    t.timer(now, 4321);
    EXPECT_EQ(t.p.state(), PathState::Failed);
    t.ack(ack_of(probe + 1), now + 100);
    EXPECT_EQ(t.p.spurious(), 1u);
    EXPECT_EQ(t.p.state(), PathState::Active);
    EXPECT_TRUE(t.p.can_send(now + 100));
}

TEST(PathSender, LostProbesMoveRoutesAndDoubleTheBackoffTo500ms) {
    Tx t;
    uint64_t now = 0;
    for (int i = 0; i < 3; ++i) {
        t.send(now);
        now = t.p.deadline();
        t.timer(now, 50);
    }
    ASSERT_EQ(t.p.state(), PathState::Failed);
    uint64_t want = 2000;
    for (uint16_t e = 51; e < 62; ++e) {
        ASSERT_EQ(t.p.retry_at(), now + want);
        now = t.p.retry_at();
        ASSERT_TRUE(t.p.can_send(now));
        t.send(now);
        ASSERT_EQ(t.p.deadline(), now + 20000);
        now = t.p.deadline();
        t.timer(now, e);
        EXPECT_EQ(t.ev.lost.size(), 1u);
        EXPECT_EQ(t.p.state(), PathState::Failed);
        EXPECT_EQ(t.p.entropy(), e);  // yet another route
        want = std::min<uint64_t>(want * 2, 500000);
        EXPECT_EQ(t.p.backoff_us(), want);
    }
    EXPECT_EQ(want, 500000u);
    EXPECT_EQ(t.p.failures(), 1u);
    EXPECT_EQ(t.p.routes(), 12u);
}

TEST(PathSender, WindowGrowsByOneOverWindowPerUnmarkedPacket) {
    Tx t(0, 10 * kCwndOne);
    t.send_n(2, 0);
    t.ack(ack_of(2), 100);
    const uint32_t once = 2560 + 65536 / 2560;
    EXPECT_EQ(t.p.cwnd(), once + 65536 / once);
}

TEST(PathSender, WindowIsAtMost255Packets) {
    Tx t(0, kCwndMax - 2);
    t.send_n(4, 0);
    t.ack(ack_of(4), 100);
    EXPECT_EQ(t.p.cwnd(), kCwndMax);
}

TEST(PathSender, MarksCutByOneMinusHalfAlphaAtTheWindowEnd) {
    Tx t(0, 10 * kCwndOne);
    t.send_n(2, 0);
    t.ack(ack_of(2, {}, 0, 1), 100);  // one of two marked: one grows
    // The window (up to the first sequence) ended: alpha = (15 * 1024 + 512) / 16.
    EXPECT_EQ(t.p.alpha(), (15u * 1024 + 512) / 16);
    const uint32_t grown = 2560 + 65536 / 2560;
    EXPECT_EQ(t.p.cwnd(), grown * (2048 - t.p.alpha()) / 2048);
}

// A sender and a real receiver, one round (one window) at a time.
struct Rounds {
    Rounds() : tx(0, 1, 64 * kCwndOne), rx(0) {}
    // Sends 8; the first `drops` are lost and `marks` of the rest are CE-marked.
    void round(unsigned drops, unsigned marks) {
        for (unsigned i = 0; i < 8; ++i) {
            const uint32_t seq = tx.on_sent(cookie++, now);
            if (i >= drops) rx.on_packet(seq, tx.floor(), i - drops < marks, false, now + 50);
            now += 1;
        }
        const PathAck a = rx.make_ack(now + 50);
        now += 100;
        ev = {};
        ASSERT_EQ(tx.on_ack(a, now, ev), AckVerdict::Ok);
        ASSERT_EQ(tx.in_flight(), 0u);
        ASSERT_EQ(ev.lost.size(), drops);
    }
    PathSender tx;
    PathReceiver rx;
    PathEvents ev;
    uint64_t now = 0, cookie = 0;
};

TEST(PathSender, DctcpAlphaPerWindow) {
    Rounds r;
    r.round(0, 8);  // all marked: alpha stays 1, the window halves
    EXPECT_EQ(r.tx.alpha(), 1024u);
    const uint32_t w0 = 64 * kCwndOne;
    EXPECT_EQ(r.tx.cwnd(), w0 / 2);
    r.round(0, 0);  // none: alpha * 15/16, no cut, grows
    EXPECT_EQ(r.tx.alpha(), 960u);
    EXPECT_GT(r.tx.cwnd(), w0 / 2);
    const uint32_t w = r.tx.cwnd();
    r.round(0, 4);  // half
    EXPECT_EQ(r.tx.alpha(), (15u * 960 + 512) / 16);
    uint32_t grown = w;
    for (int i = 0; i < 4; ++i) grown += 65536 / grown;
    EXPECT_EQ(r.tx.cwnd(), grown * (2048 - r.tx.alpha()) / 2048);
}

TEST(PathSender, FourLossyWindowsInARowAskForANewRoute) {
    Rounds r;
    for (int i = 0; i < 3; ++i) {
        r.round(2, 0);  // a quarter lost
        EXPECT_EQ(r.tx.repath_wanted(), Repath::None);
    }
    r.round(1, 0);  // an eighth: the run ends
    EXPECT_EQ(r.tx.bad_windows(), 0u);
    for (int i = 0; i < 3; ++i) r.round(2, 0);
    EXPECT_EQ(r.tx.repath_wanted(), Repath::None);
    r.round(3, 0);
    EXPECT_EQ(r.tx.repath_wanted(), Repath::Loss);
    r.tx.new_route(77);
    EXPECT_EQ(r.tx.repath_wanted(), Repath::None);
    EXPECT_EQ(r.tx.entropy(), 77u);
    EXPECT_EQ(r.tx.repaths(), 1u);
    EXPECT_GE(r.tx.cwnd(), 64 * kCwndOne);  // loss never cut it
}

TEST(PathSender, FourMarkedWindowsInARowAskForANewRouteByMarks) {
    Rounds r;
    for (int i = 0; i < 3; ++i) r.round(0, 6);  // three quarters marked
    EXPECT_EQ(r.tx.repath_wanted(), Repath::None);
    r.round(0, 5);  // under three quarters
    EXPECT_EQ(r.tx.bad_windows(), 0u);
    for (int i = 0; i < 4; ++i) r.round(0, 8);
    EXPECT_EQ(r.tx.repath_wanted(), Repath::Marks);
    EXPECT_EQ(r.tx.bad_windows(), 0u);  // a run asks once; the count starts again
    r.tx.clear_repath();                // the connection declined
    for (int i = 0; i < 3; ++i) r.round(0, 8);
    EXPECT_EQ(r.tx.repath_wanted(), Repath::None);
    r.round(0, 8);
    EXPECT_EQ(r.tx.repath_wanted(), Repath::Marks);
}

TEST(PathSender, ARunWithAnyLossyWindowAsksByLoss) {
    Rounds r;
    r.round(2, 0);
    for (int i = 0; i < 3; ++i) r.round(0, 8);
    EXPECT_EQ(r.tx.repath_wanted(), Repath::Loss);
}

}  // namespace
}  // namespace softmetaroce::v2
