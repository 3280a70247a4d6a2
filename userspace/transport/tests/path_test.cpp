// One path's sender and receiver: acknowledgement, loss by a gap and by time, probe timeouts,
// failure and a new route, forged ACKs, ECN.
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <vector>

extern "C" {
#include "mrc_conn.h"
}

namespace {

struct Events {
    std::vector<uint64_t> acked, lost;
    std::vector<mrc_path_event> path;  // failed, recovered, new route
    static void on_acked(void *ctx, u64 c) { static_cast<Events *>(ctx)->acked.push_back(c); }
    static void on_lost(void *ctx, u64 c) { static_cast<Events *>(ctx)->lost.push_back(c); }
    static void on_event(void *ctx, mrc_path_event e) { static_cast<Events *>(ctx)->path.push_back(e); }
};
const mrc_path_ops kOps = {Events::on_acked, Events::on_lost, Events::on_event};
using Ev = std::vector<mrc_path_event>;

class PathTest : public ::testing::Test {
  protected:
    void SetUp() override {
        mrc_path_tx_init(&tx, 1000, 0x123, 32 * MRC_CWND_ONE);
        mrc_path_rx_init(&rx, 1000);
    }
    uint32_t send(uint64_t cookie, uint64_t now) {
        uint32_t floor = tx.una;
        uint32_t seq = mrc_path_tx_sent(&tx, cookie, now);
        floor_of[seq] = floor;
        return seq;
    }
    void arrive(uint32_t seq, uint64_t now, bool ce = false) {
        mrc_path_rx_packet(&rx, seq, floor_of.at(seq), ce, false, now);
    }
    mrc_ack_verdict ack(uint64_t now) {
        mrc_path_ack a;
        mrc_path_rx_ack(&rx, &a, now);
        return mrc_path_tx_ack(&tx, &a, now, &kOps, &ev);
    }
    mrc_path_tx tx;
    mrc_path_rx rx;
    Events ev;
    std::map<uint32_t, uint32_t> floor_of;  // what each transmission carried
};

TEST_F(PathTest, AcknowledgedInOrderWithAnRttSample) {
    for (int i = 0; i < 4; i++) arrive(send(i, 0), 50);
    EXPECT_EQ(ack(50), MRC_ACK_OK);
    EXPECT_EQ(ev.acked, (std::vector<uint64_t>{0, 1, 2, 3}));
    EXPECT_TRUE(ev.lost.empty());
    EXPECT_EQ(tx.in_flight, 0u);
    EXPECT_EQ(tx.una, 1004u);
    EXPECT_TRUE(tx.has_rtt);
    EXPECT_EQ(tx.srtt_us, 50u);
    arrive(send(4, 200), 250);
    ack(300);
    EXPECT_EQ(tx.latest_rtt_us, 100u);  // the sample as it is (RFC 9002's latest_rtt)
    EXPECT_EQ(tx.srtt_us, 50u);         // less the receiver's 50 us of delay
}

TEST_F(PathTest, AGapWithThreeLaterArrivalsIsLostAtOnce) {
    for (int i = 0; i < 5; i++) send(i, 0);
    arrive(1000, 10);
    arrive(1002, 10);
    arrive(1003, 10);
    ack(20);
    EXPECT_TRUE(ev.lost.empty());  // two later arrivals: maybe still on its way
    arrive(1004, 11);
    ack(21);
    EXPECT_EQ(ev.lost, (std::vector<uint64_t>{1}));
    EXPECT_EQ(tx.una, 1005u);  // lost is resolved: the floor passes it
    EXPECT_EQ(tx.in_flight, 0u);
}

TEST_F(PathTest, AnOverdueGapIsLostByTime) {
    send(0, 0);
    send(1, 0);
    arrive(1001, 100);
    ack(100);
    EXPECT_TRUE(ev.lost.empty());
    uint64_t due = mrc_path_tx_deadline(&tx);
    EXPECT_EQ(due, uint64_t{MRC_GRANULARITY_US});  // 9/8 RTT, at least the granularity
    mrc_path_tx_timer(&tx, due - 1, 0, &kOps, &ev);
    EXPECT_TRUE(ev.lost.empty());
    mrc_path_tx_timer(&tx, due, 0, &kOps, &ev);
    EXPECT_EQ(ev.lost, (std::vector<uint64_t>{0}));
}

TEST_F(PathTest, AcrossARouteChangeOnlyTimeCallsLoss) {
    send(0, 0);
    tx.route++;  // as a failure does: later packets take another route
    for (int i = 1; i < 5; i++) send(i, 10);
    for (uint32_t q = 1001; q < 1005; q++) arrive(q, 20);
    ack(30);
    EXPECT_TRUE(ev.lost.empty());
}

TEST_F(PathTest, ProbeTimeoutLosesTheTailAndThreeFailThePath) {
    send(0, 0);
    send(1, 0);
    uint64_t now = mrc_path_tx_deadline(&tx);
    EXPECT_EQ(now, uint64_t{MRC_INITIAL_PTO_US});
    mrc_path_tx_timer(&tx, now, 0x55, &kOps, &ev);
    EXPECT_EQ(ev.lost, (std::vector<uint64_t>{0, 1}));
    EXPECT_EQ(tx.state, MRC_PATH_ACTIVE);
    for (int round = 0; round < 2; round++) {
        send(10 + round, now);
        now = mrc_path_tx_deadline(&tx);
        mrc_path_tx_timer(&tx, now, 0x55, &kOps, &ev);
    }
    EXPECT_EQ(tx.state, MRC_PATH_FAILED);
    EXPECT_EQ(tx.entropy, 0x55);
    EXPECT_EQ(tx.route, 1);
    EXPECT_EQ(ev.path, (Ev{MRC_PATH_EV_FAILED, MRC_PATH_EV_NEW_ROUTE}));
    EXPECT_FALSE(mrc_path_tx_can_send(&tx, now));
    EXPECT_EQ(mrc_path_tx_deadline(&tx), ~0ULL);  // nothing for the timer to do
    EXPECT_EQ(mrc_path_tx_retry_at(&tx), now + MRC_MIN_BACKOFF_US);
    now += MRC_MIN_BACKOFF_US;
    ASSERT_TRUE(mrc_path_tx_can_send(&tx, now));
    // A lost probe: another route, and twice the wait.
    send(19, now);
    uint64_t lost_at = mrc_path_tx_deadline(&tx);
    mrc_path_tx_timer(&tx, lost_at, 0x66, &kOps, &ev);
    EXPECT_EQ(tx.route, 2);
    EXPECT_EQ(tx.entropy, 0x66);
    EXPECT_EQ(ev.path.size(), 3u);
    EXPECT_EQ(ev.path.back(), MRC_PATH_EV_NEW_ROUTE);
    EXPECT_EQ(mrc_path_tx_retry_at(&tx), lost_at + 2 * MRC_MIN_BACKOFF_US);
    now = lost_at + 2 * MRC_MIN_BACKOFF_US;
    ASSERT_TRUE(mrc_path_tx_can_send(&tx, now));
    uint32_t probe = send(20, now);
    EXPECT_FALSE(mrc_path_tx_can_send(&tx, now));  // one probe at a time
    arrive(probe, now + 10);
    ack(now + 10);
    EXPECT_EQ(tx.state, MRC_PATH_ACTIVE);
    EXPECT_EQ(tx.ptos, 0u);
    EXPECT_EQ(ev.acked.back(), 20u);
    EXPECT_EQ(ev.path.size(), 4u);
    EXPECT_EQ(ev.path.back(), MRC_PATH_EV_RECOVERED);
}

// A burst that fills the window queues up behind itself: its ACKs keep coming
// later than a PTO of the RTT measured before it. Each that acknowledges
// something shows the path alive, so the PTO counts from it (section 5.3).
TEST_F(PathTest, ProbeTimeoutCountsFromTheNewestSendOrAck) {
    arrive(send(0, 0), 100);
    ack(100);  // RTT 100 us: PTO 100 + 1000 + 200
    for (int i = 1; i <= 8; i++) send(i, 200);
    EXPECT_EQ(mrc_path_tx_deadline(&tx), 200u + 1300);
    arrive(1001, 1400);
    ack(1400);  // later than the PTO would have been from the send
    EXPECT_EQ(mrc_path_tx_deadline(&tx), 1400u + mrc_path_tx_pto(&tx));
    mrc_path_tx_timer(&tx, 1500, 0x55, &kOps, &ev);
    EXPECT_TRUE(ev.lost.empty());
    ack(1600);  // nothing new: the PTO stays
    EXPECT_EQ(mrc_path_tx_deadline(&tx), 1400u + mrc_path_tx_pto(&tx));
}

// A stall longer than the probe's PTO: the probe is declared lost, then its
// ACK comes. The path works, so it is active again (section 5.3).
TEST_F(PathTest, AProbeThatArrivesLateRevivesThePath) {
    uint64_t now = 0;
    for (int i = 0; i < 3; i++) {
        send(i, now);
        now = mrc_path_tx_deadline(&tx);
        mrc_path_tx_timer(&tx, now, 0x55, &kOps, &ev);
    }
    ASSERT_EQ(tx.state, MRC_PATH_FAILED);
    now = mrc_path_tx_retry_at(&tx);
    uint32_t probe = send(9, now);
    uint64_t lost_at = mrc_path_tx_deadline(&tx);
    mrc_path_tx_timer(&tx, lost_at, 0x66, &kOps, &ev);
    ASSERT_EQ(ev.lost.back(), 9u);
    EXPECT_EQ(tx.state, MRC_PATH_FAILED);
    arrive(probe, lost_at + 100);
    ack(lost_at + 100);
    EXPECT_EQ(tx.spurious, 1u);
    EXPECT_EQ(tx.state, MRC_PATH_ACTIVE);
    EXPECT_EQ(tx.backoff_us, uint32_t{MRC_MIN_BACKOFF_US});
    EXPECT_EQ(ev.path.back(), MRC_PATH_EV_RECOVERED);
}

TEST_F(PathTest, AckNamingWhatWasNotSentIsRefused) {
    send(0, 0);
    mrc_path_ack a = {};
    a.cum = 1000;
    a.bits[0] = 1;  // 1001: not sent
    EXPECT_EQ(mrc_path_tx_ack(&tx, &a, 10, &kOps, &ev), MRC_ACK_INVALID);
    a.bits[0] = 0;
    a.cum = 1002;
    EXPECT_EQ(mrc_path_tx_ack(&tx, &a, 10, &kOps, &ev), MRC_ACK_INVALID);
    EXPECT_TRUE(ev.acked.empty());
    EXPECT_EQ(tx.in_flight, 1u);
    a.cum = 1001;
    EXPECT_EQ(mrc_path_tx_ack(&tx, &a, 10, &kOps, &ev), MRC_ACK_OK);
    EXPECT_EQ(ev.acked.size(), 1u);
}

TEST_F(PathTest, ALossThatArrivesAfterAllIsCountedSpurious) {
    for (int i = 0; i < 5; i++) send(i, 0);
    for (uint32_t q = 1001; q < 1005; q++) arrive(q, 10);
    ack(10);
    ASSERT_EQ(ev.lost, (std::vector<uint64_t>{0}));
    // The first copy turns up late, before anything sent has told the receiver to skip it.
    arrive(1000, 30);
    ack(30);
    EXPECT_EQ(tx.spurious, 1u);
    EXPECT_EQ(ev.acked.back(), 0u);
}

bool cookie_at_least_2(void *, u64 cookie) { return cookie >= 2; }

TEST_F(PathTest, ARefusalHandsBackWhatItNamesAndIsNoPathLoss) {
    for (int i = 0; i < 5; i++) send(i, 0);
    arrive(1000, 10);
    ack(10);
    mrc_path_tx_refused(&tx, cookie_at_least_2, &kOps, &ev);
    EXPECT_EQ(ev.lost, (std::vector<uint64_t>{2, 3, 4}));  // in flight and named, in order
    EXPECT_EQ(tx.in_flight, 1u);                           // cookie 1 is still on its way
    EXPECT_EQ(tx.una, 1001u);
    EXPECT_EQ(tx.refused, 3u);
    EXPECT_EQ(tx.lost, 0u);         // the path lost nothing
    EXPECT_EQ(tx.window_lost, 0u);  // nor does its window judgement count them
    // What was handed back is not lost again by a later gap.
    for (int i = 5; i < 9; i++) arrive(send(i, 20), 30);
    arrive(1001, 30);
    ack(30);
    EXPECT_EQ(ev.lost, (std::vector<uint64_t>{2, 3, 4}));
    EXPECT_EQ(tx.in_flight, 0u);
    EXPECT_EQ(tx.una, tx.next_seq);
    EXPECT_EQ(mrc_path_tx_deadline(&tx), ~0ULL);  // nothing in flight: no probe timeout
}

TEST_F(PathTest, SlotsFollowTheSequenceAcrossAnyNumberOfWraps) {
    // The oldest slot trails the next sequence by the map, so after 2^32 sends (next_seq back
    // at the first sequence) the slots in flight are still the ones an ACK is read against.
    for (int i = 0; i < 300; i++) {
        arrive(send(i, 0), 0);
        ack(0);
        ASSERT_LE(tx.next_seq - tx.first_seq, uint32_t{MRC_SACK_BITS});
    }
    EXPECT_EQ(tx.first_seq, tx.next_seq - MRC_SACK_BITS);
}

TEST(ConnTx, AtTheCapNoProbeTimeIsOffered) {
    mrc_path_tx paths[2];
    mrc_path_tx_init(&paths[0], 0, 1, 8 * MRC_CWND_ONE);
    mrc_path_tx_init(&paths[1], 0, 2, 8 * MRC_CWND_ONE);
    paths[1].state = MRC_PATH_FAILED;
    paths[1].retry_us = 5;
    mrc_conn_tx conn;
    mrc_conn_tx_init(&conn, paths, 2, 1400, 1);
    conn.limit = 4;
    for (int i = 0; i < 4; i++) mrc_path_tx_sent(&paths[0], i, 0);
    EXPECT_EQ(mrc_conn_tx_pick(&conn, MRC_NO_PATH, 10), MRC_NO_PATH);
    EXPECT_EQ(mrc_conn_tx_retry_at(&conn), ~0ULL);  // a past time would be waited on forever
    conn.limit = 0;
    EXPECT_EQ(mrc_conn_tx_retry_at(&conn), 5u);
    EXPECT_NE(mrc_conn_tx_pick(&conn, MRC_NO_PATH, 10), MRC_NO_PATH);
}

TEST_F(PathTest, WindowAndMapBoundWhatMaySend) {
    mrc_path_tx_init(&tx, 0, 1, MRC_MAX_CWND);
    int n = 0;
    while (mrc_path_tx_can_send(&tx, 0)) send(n++, 0);
    EXPECT_EQ(n, MRC_SACK_BITS - 1);  // every unresolved sequence fits one map
    mrc_path_tx_init(&tx, 0, 1, 4 * MRC_CWND_ONE);
    n = 0;
    while (mrc_path_tx_can_send(&tx, 0)) send(n++, 0);
    EXPECT_EQ(n, 4);
}

TEST_F(PathTest, EcnMarksTrimThePathAndCleanAcksGrowIt) {
    uint32_t start = tx.cwnd;
    uint64_t now = 0;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 8; i++) arrive(send(i, now), now + 5, true);
        ack(now + 10);
        now += 20;
    }
    EXPECT_LT(tx.cwnd, start);
    EXPECT_EQ(tx.marked, 32u);
    uint32_t trimmed = tx.cwnd;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 8; i++) arrive(send(i, now), now + 5);
        ack(now + 10);
        now += 20;
    }
    EXPECT_GT(tx.cwnd, trimmed);
}

TEST_F(PathTest, ReceiverAcksAGapAtOnceAndCoalescesInOrder) {
    EXPECT_EQ(mrc_path_rx_packet(&rx, 1000, 1000, false, false, 0), MRC_RX_ACK_LATER);
    EXPECT_EQ(rx.ack_due_us, uint64_t{MRC_DELAYED_ACK_US});
    EXPECT_EQ(mrc_path_rx_packet(&rx, 1002, 1000, false, false, 1), MRC_RX_ACK_NOW);
    EXPECT_EQ(mrc_path_rx_packet(&rx, 1002, 1000, false, false, 2), MRC_RX_ACK_NOW);
    EXPECT_EQ(rx.duplicates, 1u);
    EXPECT_EQ(mrc_path_rx_packet(&rx, 1000 + 300, 1000, false, false, 3), MRC_RX_DROP);
    EXPECT_EQ(rx.beyond, 1u);
    mrc_path_ack a;
    mrc_path_rx_ack(&rx, &a, 3);
    EXPECT_EQ(a.cum, 1001u);
    EXPECT_EQ(a.bits[0], 0b1u);  // 1002 is cum + 1
    EXPECT_EQ(a.ack_delay_us, 2u);
    EXPECT_EQ(rx.ack_due_us, 0u);
}

// Windows of data on one path: @lose of every @n sent lost (by gaps), @ce of the rest marked.
void windows(mrc_conn_tx &conn, uint32_t path, int count, int n, int lose, int ce, Events &ev) {
    mrc_path_tx &tx = conn.paths[path];
    mrc_path_rx rx;
    mrc_path_rx_init(&rx, tx.next_seq);
    for (int w = 0; w < count; w++) {
        std::vector<uint32_t> seqs;
        for (int i = 0; i < n + 3; i++) seqs.push_back(mrc_path_tx_sent(&tx, i, 0));
        for (int i = 0; i < n + 3; i++) {
            if (i < lose) continue;
            mrc_path_rx_packet(&rx, seqs[i], tx.una, i < lose + ce, false, 0);
        }
        mrc_path_ack a;
        mrc_path_rx_ack(&rx, &a, 0);
        mrc_conn_tx_ack(&conn, path, &a, 0, &kOps, &ev);
    }
}

TEST(Repath, ARouteThatKeepsLosingAQuarterMovesAndRandomLossDoesNot) {
    Events ev;
    mrc_path_tx paths[2];
    mrc_path_tx_init(&paths[0], 0, 7, 64 * MRC_CWND_ONE);
    mrc_path_tx_init(&paths[1], 0, 8, 64 * MRC_CWND_ONE);
    mrc_conn_tx conn;
    mrc_conn_tx_init(&conn, paths, 2, 1400, 1);
    windows(conn, 0, MRC_REPATH_WINDOWS + 1, 16, 1, 0, ev);  // 1 in 19: random loss
    windows(conn, 1, MRC_REPATH_WINDOWS + 1, 16, 6, 0, ev);  // 6 in 19
    mrc_conn_tx_pick(&conn, MRC_NO_PATH, 0);
    EXPECT_EQ(paths[0].repaths, 0u);
    EXPECT_EQ(paths[1].repaths, 1u);
    EXPECT_EQ(paths[1].route, 1);
    EXPECT_NE(paths[1].entropy, 8);
    EXPECT_EQ(ev.path, Ev{MRC_PATH_EV_NEW_ROUTE});
}

TEST(ConnTx, AnAckForAPathItDoesNotHaveIsRefused) {
    Events ev;
    mrc_path_tx paths[2];
    for (auto &p : paths) mrc_path_tx_init(&p, 0, 1, 8 * MRC_CWND_ONE);
    mrc_conn_tx conn;
    mrc_conn_tx_init(&conn, paths, 2, 1400, 1);
    mrc_path_ack a = {};
    EXPECT_EQ(mrc_conn_tx_ack(&conn, 2, &a, 0, &kOps, &ev), MRC_ACK_INVALID);
    EXPECT_EQ(mrc_conn_tx_ack(&conn, 1, &a, 0, &kOps, &ev), MRC_ACK_OK);
}

TEST(Repath, AMarkedRouteMovesOnlyWhenAnotherIsClearer) {
    Events ev;
    mrc_path_tx paths[2];
    for (auto &p : paths) mrc_path_tx_init(&p, 0, 1, 64 * MRC_CWND_ONE);
    mrc_conn_tx conn;
    mrc_conn_tx_init(&conn, paths, 2, 1400, 1);
    // Both marked alike (the receiver's link): neither moves.
    windows(conn, 0, 2 * MRC_REPATH_WINDOWS, 16, 0, 19, ev);
    windows(conn, 1, 2 * MRC_REPATH_WINDOWS, 16, 0, 19, ev);
    mrc_conn_tx_pick(&conn, MRC_NO_PATH, 0);
    EXPECT_EQ(paths[0].repaths + paths[1].repaths, 0u);
    EXPECT_TRUE(ev.path.empty());
    // Path 1 clears up; path 0 stays marked: it moves.
    windows(conn, 1, 40, 16, 0, 0, ev);
    windows(conn, 0, MRC_REPATH_WINDOWS, 16, 0, 19, ev);
    mrc_conn_tx_pick(&conn, MRC_NO_PATH, 0);
    EXPECT_EQ(paths[0].repaths, 1u);
    EXPECT_EQ(paths[1].repaths, 0u);
    EXPECT_EQ(ev.path, Ev{MRC_PATH_EV_NEW_ROUTE});
}

// The receiver's grant: share x capacity x the paths' mean minimum RTT, in packets; no capacity
// lifts the cap; no RTT yet keeps what there was.
TEST(ConnTx, AGrantCapsPacketsInFlightAtTheShareOfTheReceiversLink) {
    mrc_path_tx paths[2];
    for (auto &p : paths) mrc_path_tx_init(&p, 0, 1, 64 * MRC_CWND_ONE);
    mrc_conn_tx conn;
    mrc_conn_tx_init(&conn, paths, 2, 1000, 1);
    mrc_conn_tx_grant(&conn, MRC_FAIR_FULL / 2, 8000);
    EXPECT_EQ(conn.limit, 0u) << "no RTT sample yet";
    paths[0].has_rtt = paths[1].has_rtt = true;
    paths[0].min_rtt_us = 100;
    paths[1].min_rtt_us = 300;
    // 8000 Mbit/s for 200 us is 200,000 bytes; half of it is 100 packets of 1000 bytes.
    mrc_conn_tx_grant(&conn, MRC_FAIR_FULL / 2, 8000);
    EXPECT_EQ(conn.limit, 99u);  // 32767 / 65535 of 200 packets, rounded down
    mrc_conn_tx_grant(&conn, 1, 8000);
    EXPECT_EQ(conn.limit, uint32_t{MRC_FAIR_MIN_WINDOW});
    for (uint32_t i = 0; i < MRC_FAIR_MIN_WINDOW; i++) {
        ASSERT_NE(mrc_conn_tx_pick(&conn, MRC_NO_PATH, 0), MRC_NO_PATH);
        mrc_path_tx_sent(&paths[i % 2], i, 0);
    }
    EXPECT_EQ(mrc_conn_tx_pick(&conn, MRC_NO_PATH, 0), MRC_NO_PATH);
    mrc_conn_tx_grant(&conn, 1, 0);
    EXPECT_EQ(conn.limit, 0u);
    EXPECT_NE(mrc_conn_tx_pick(&conn, MRC_NO_PATH, 0), MRC_NO_PATH);
}

// ACK_REQ on the packet that leaves no room, while the path has too few out for the receiver's
// every-16 rule to answer.
TEST(ConnTx, APacketThatFillsASmallWindowAsksForAnAck) {
    mrc_path_tx paths[1];
    mrc_path_tx_init(&paths[0], 0, 1, 4 * MRC_CWND_ONE);
    mrc_conn_tx conn;
    mrc_conn_tx_init(&conn, paths, 1, 1000, 1);
    for (uint32_t i = 0; i < 4; i++) {
        mrc_path_tx_sent(&paths[0], i, 0);
        EXPECT_EQ(mrc_conn_tx_ack_wanted(&conn, 0, 0), i == 3) << i;
    }
    mrc_path_tx_init(&paths[0], 0, 1, 32 * MRC_CWND_ONE);
    for (uint32_t i = 0; i < 32; i++) {
        mrc_path_tx_sent(&paths[0], i, 0);
        EXPECT_FALSE(mrc_conn_tx_ack_wanted(&conn, 0, 0)) << i;
    }
    mrc_path_tx_init(&paths[0], 0, 1, 32 * MRC_CWND_ONE);
    conn.limit = 2;
    mrc_path_tx_sent(&paths[0], 0, 0);
    EXPECT_FALSE(mrc_conn_tx_ack_wanted(&conn, 0, 0));
    mrc_path_tx_sent(&paths[0], 1, 0);
    EXPECT_TRUE(mrc_conn_tx_ack_wanted(&conn, 0, 0)) << "at the connection's cap";
}

}  // namespace
