// Property tests of the transport core over a simulated network: several streams sprayed over
// several paths of different delay, random loss, duplication and ACK loss, shaped links that mark
// CE, a path that black-holes until it moves to a new route. Every segment must reach its stream
// exactly once and each stream must complete in order; every ACK must describe exactly what
// arrived; the sender must never take a transmission for delivered that was not; with no loss
// nothing may be resent.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <vector>

extern "C" {
#include "mrc_conn.h"
#include "mrc_stream.h"
}

namespace {

// A link several paths may share (path p takes link p % links): a FIFO served at one packet per
// service_us, marking CE past mark_at packets queued and dropping past buffer; 0: unshaped.
struct Link {
    u64 service_us = 0;
    u64 mark_at = 0, buffer = 0;
};

struct Schedule {
    std::vector<u64> delay_us;  // one-way delay of each path, both directions
    std::vector<Link> links;    // empty: every path its own unshaped link
    double loss = 0, dup = 0, ack_loss = 0;
    int bad_route_path = -1;   // loses 40% until its first new route
    int blackhole_path = -1;   // drops everything until its first new route
    uint32_t messages = 3000;  // one-packet segments, dealt round robin to the streams
    uint32_t streams = 4;
};

struct Packet {
    u64 at;
    uint32_t seq, floor;
    u64 tx_id;
    bool ce, ack_req;
};

struct AckPacket {
    u64 at;
    mrc_path_ack ack;
};

struct Result {
    u64 resent = 0, spurious = 0, failures = 0, repaths = 0, end_us = 0;
};

class Sim {
  public:
    Sim(const Schedule &s, uint32_t seed)
        : s_(s),
          rng_(seed),
          paths_(s.delay_us.size()),
          tx_(s.delay_us.size()),
          stx_(s.streams),
          srx_(s.streams),
          remaining_(s.streams),
          first_ssn_(s.streams) {
        for (size_t p = 0; p < paths_.size(); p++) {
            uint32_t first = rng_();
            mrc_path_tx_init(&tx_[p], first, uint16_t(p), 32 * MRC_CWND_ONE);
            mrc_path_rx_init(&paths_[p].rx, first);
        }
        mrc_conn_tx_init(&conn_, tx_.data(), u32(paths_.size()), 1400, seed);
        link_free_.assign(s.links.size(), 0);
        for (uint32_t st = 0; st < s.streams; st++) {
            first_ssn_[st] = rng_();
            mrc_stream_tx_init(&stx_[st], first_ssn_[st]);
            mrc_stream_map_init(&srx_[st], first_ssn_[st]);
            remaining_[st] = s.messages / s.streams + (st < s.messages % s.streams);
        }
    }

    Result run() {
        const mrc_path_ops ops = {on_acked, on_lost, nullptr};
        u64 now = 0;
        while (!done()) {
            if (now > 60'000'000) {
                ADD_FAILURE() << "no progress";
                break;
            }
            send_all(now);
            u64 next = ~0ULL;
            next = std::min(next, mrc_conn_tx_deadline(&conn_));
            if (has_work()) next = std::min(next, mrc_conn_tx_retry_at(&conn_));
            for (auto &p : paths_) {
                if (p.rx.ack_due_us) next = std::min(next, p.rx.ack_due_us);
                if (!p.data.empty()) next = std::min(next, p.data.front().at);
                if (!p.acks.empty()) next = std::min(next, p.acks.front().at);
            }
            if (next == ~0ULL) {
                ADD_FAILURE() << "nothing to wait for";
                break;
            }
            if (next <= now && next_was_ == now && ++stuck_ > 1000) {
                ADD_FAILURE() << "time stands still at " << now << " us";
                break;
            }
            if (next > now) stuck_ = 0;
            next_was_ = now;
            now = std::max(now, next);
            for (size_t i = 0; i < paths_.size(); i++) step(i, now, ops);
            mrc_conn_tx_timer(&conn_, now, &ops, this);
        }
        r_.end_us = now;
        if (getenv("MRCORE_SIM_VERBOSE"))
            fprintf(stderr, "sim: %u segments, %zu transmissions, %llu us\n", s_.messages,
                    txs_.size(), (unsigned long long)now);
        for (auto &t : tx_) {
            r_.spurious += t.spurious;
            r_.failures += t.failures;
            r_.repaths += t.repaths;
        }
        for (uint32_t st = 0; st < s_.streams; st++)
            EXPECT_EQ(stx_[st].delivered, first_count(st)) << "stream " << st;
        return r_;
    }

  private:
    struct Path {
        mrc_path_rx rx;
        std::deque<Packet> data;
        std::deque<AckPacket> acks;
        u64 last_data_at = 0, last_ack_at = 0;
        std::set<uint32_t> arrived;   // ground truth: sequences that reached the receiver
        uint32_t max_floor_seen = 0;  // the highest floor a packet brought
        bool floor_seen = false;
    };
    struct Tx {
        uint32_t stream, ssn, seq;
        size_t path;
    };

    static void on_acked(void *ctx, u64 id) {
        auto *sim = static_cast<Sim *>(ctx);
        const Tx &t = sim->txs_.at(id);
        // Never "acknowledged" unless that very transmission arrived.
        EXPECT_TRUE(sim->paths_[t.path].arrived.count(t.seq))
            << "path " << t.path << " seq " << t.seq;
        mrc_stream_tx_acked(&sim->stx_[t.stream], t.ssn);
    }
    static void on_lost(void *ctx, u64 id) {
        auto *sim = static_cast<Sim *>(ctx);
        const Tx &t = sim->txs_.at(id);
        sim->r_.resent++;
        mrc_stream_tx_lost(&sim->stx_[t.stream], t.ssn, int(t.path));
    }

    u64 first_count(uint32_t st) const {
        return s_.messages / s_.streams + (st < s_.messages % s_.streams);
    }

    // Done when every stream's sender saw all delivered and its receiver completed all, in order.
    bool done() const {
        for (uint32_t st = 0; st < s_.streams; st++) {
            u32 end = first_ssn_[st] + u32(first_count(st));
            if (stx_[st].una != end || srx_[st].cum != end) return false;
        }
        return true;
    }

    bool has_work() {
        for (uint32_t st = 0; st < s_.streams; st++) {
            u32 ssn;
            int lp;
            if (mrc_stream_tx_next_resend(&stx_[st], &ssn, &lp)) return true;
            if (remaining_[st] && mrc_stream_tx_can_open(&stx_[st])) return true;
        }
        return false;
    }

    bool drops(size_t p, double rate) {
        if (int(p) == s_.blackhole_path && tx_[p].route == 0) return true;
        if (int(p) == s_.bad_route_path && tx_[p].route == 0) rate = std::max(rate, 0.4);
        return std::uniform_real_distribution<>(0, 1)(rng_) < rate;
    }

    // Resends first, on the path that lost them if it has room; then new segments; streams in turn.
    void send_all(u64 now) {
        bool progress = true;
        while (progress) {
            progress = false;
            for (uint32_t i = 0; i < s_.streams; i++) {
                uint32_t st = (rr_ + i) % s_.streams;
                u32 ssn;
                int lost_path, p;
                if (mrc_stream_tx_next_resend(&stx_[st], &ssn, &lost_path)) {
                    p = mrc_conn_tx_pick(&conn_, lost_path, now);
                    if (p == MRC_NO_PATH) return;
                } else if (remaining_[st] && mrc_stream_tx_can_open(&stx_[st])) {
                    p = mrc_conn_tx_pick(&conn_, MRC_NO_PATH, now);
                    if (p == MRC_NO_PATH) return;
                    ssn = mrc_stream_tx_open(&stx_[st]);
                    remaining_[st]--;
                } else {
                    continue;
                }
                mrc_stream_tx_sent(&stx_[st], ssn);
                transmit(size_t(p), st, ssn, now);
                progress = true;
            }
            rr_ = (rr_ + 1) % s_.streams;
        }
    }

    void transmit(size_t p, uint32_t st, uint32_t ssn, u64 now) {
        Path &path = paths_[p];
        u64 id = txs_.size();
        uint32_t floor = tx_[p].una;
        uint32_t seq = mrc_path_tx_sent(&tx_[p], id, now);
        bool ack_req = mrc_conn_tx_ack_wanted(&conn_, u32(p), now);
        txs_.push_back({st, ssn, seq, p});
        if (drops(p, s_.loss)) return;
        bool ce = false;
        u64 at = now;
        if (!s_.links.empty()) {
            // Through the path's link: queued behind what it holds, marked or dropped.
            size_t l = p % s_.links.size();
            const Link &link = s_.links[l];
            u64 start = std::max(now, link_free_[l]);
            u64 queued = (start - now) / link.service_us;
            if (queued >= link.buffer) return;
            ce = queued >= link.mark_at;
            link_free_[l] = start + link.service_us;
            at = link_free_[l];
        }
        // A path is one route: it keeps the order it was given.
        at = std::max(at + s_.delay_us[p] + 1, path.last_data_at);
        path.last_data_at = at;
        path.data.push_back({at, seq, floor, id, ce, ack_req});
        if (drops(p, 1 - s_.dup)) return;
        path.data.push_back({at, seq, floor, id, ce, ack_req});
    }

    void send_ack(size_t p, u64 now) {
        Path &path = paths_[p];
        AckPacket a{};
        mrc_path_rx_ack(&path.rx, &a.ack, now);
        check_ack(path, a.ack);
        if (drops(p, s_.ack_loss)) return;
        a.at = std::max(now + s_.delay_us[p] + 1, path.last_ack_at);
        path.last_ack_at = a.at;
        path.acks.push_back(a);
    }

    // The ACK says exactly what arrived: each bit, and below cum only what arrived or what the
    // sender had given up (below a floor it sent).
    void check_ack(const Path &path, const mrc_path_ack &a) {
        for (uint32_t i = 0; i < MRC_SACK_BITS; i++) {
            uint32_t q = a.cum + 1 + i;
            bool bit = a.bits[i / 64] >> (i % 64) & 1;
            ASSERT_EQ(bit, path.arrived.count(q) == 1) << "seq " << q;
        }
        ASSERT_FALSE(path.arrived.count(a.cum));
        for (uint32_t q = a.cum - 256; q != a.cum; q++) {
            if (!path.arrived.count(q)) {
                ASSERT_TRUE(path.floor_seen && mrc_seq_diff(q, path.max_floor_seen) < 0)
                    << "seq " << q << " below cum neither arrived nor given up";
            }
        }
    }

    // The stream's receiver: each segment placed exactly once, completion in stream order.
    void deliver(const Tx &t) {
        mrc_stream_map &rx = srx_[t.stream];
        u32 cum = rx.cum;
        auto v = mrc_stream_map_record(&rx, t.ssn);
        ASSERT_NE(v, MRC_SACK_BEYOND) << "the stream sender went past the receiver's window";
        if (v == MRC_SACK_NEW) {
            ASSERT_TRUE(placed_.insert({t.stream, t.ssn}).second) << "placed twice";
        }
        ASSERT_GE(mrc_seq_diff(rx.cum, cum), 0);
    }

    void step(size_t p, u64 now, const mrc_path_ops &ops) {
        Path &path = paths_[p];
        while (!path.data.empty() && path.data.front().at <= now) {
            Packet pk = path.data.front();
            path.data.pop_front();
            auto verdict = mrc_path_rx_packet(&path.rx, pk.seq, pk.floor, pk.ce, pk.ack_req, now);
            ASSERT_NE(verdict, MRC_RX_DROP) << "a correct sender went past the map";
            if (!path.floor_seen || mrc_seq_diff(pk.floor, path.max_floor_seen) > 0)
                path.max_floor_seen = pk.floor;
            path.floor_seen = true;
            bool fresh = path.arrived.insert(pk.seq).second;
            ASSERT_EQ(fresh, path.rx.duplicates == dups_[p]) << "a copy taken for new or not";
            dups_[p] = path.rx.duplicates;
            if (fresh) deliver(txs_[pk.tx_id]);
            if (verdict == MRC_RX_ACK_NOW) send_ack(p, now);
        }
        if (path.rx.ack_due_us && path.rx.ack_due_us <= now && path.rx.unacked) send_ack(p, now);
        if (path.rx.ack_due_us && path.rx.ack_due_us <= now) path.rx.ack_due_us = 0;
        while (!path.acks.empty() && path.acks.front().at <= now) {
            AckPacket a = path.acks.front();
            path.acks.pop_front();
            ASSERT_EQ(mrc_conn_tx_ack(&conn_, u32(p), &a.ack, now, &ops, this), MRC_ACK_OK);
        }
        ASSERT_LT(tx_[p].next_seq - tx_[p].una, uint32_t{MRC_SACK_BITS});
    }

    Schedule s_;
    std::mt19937_64 rng_;
    std::vector<Path> paths_;
    std::vector<mrc_path_tx> tx_;  // the connection's paths, as mrc_conn_tx wants them
    mrc_conn_tx conn_;
    std::vector<mrc_stream_tx> stx_;
    std::vector<mrc_stream_map> srx_;  // each stream's receive map
    std::vector<u64> remaining_;
    std::vector<u32> first_ssn_;
    u32 rr_ = 0;
    u64 next_was_ = 0, stuck_ = 0;  // a loop that never moves time on fails, not hangs
    std::vector<u64> link_free_;    // when each link has sent what it holds
    std::map<size_t, u64> dups_;
    std::vector<Tx> txs_;
    std::set<std::pair<uint32_t, uint32_t>> placed_;
    Result r_;
};

const std::vector<u64> kUnequal = {100, 600, 1100, 2100};

TEST(PathProperty, UnequalDelaysWithoutLossResendNothing) {
    for (uint32_t seed = 1; seed <= 10; seed++) {
        Schedule s;
        s.delay_us = kUnequal;
        Result r = Sim(s, seed).run();
        EXPECT_EQ(r.resent, 0u) << "seed " << seed;
        EXPECT_EQ(r.failures, 0u) << "seed " << seed;
    }
}

TEST(PathProperty, RandomLossDuplicationAndAckLossDeliverEverything) {
    for (double loss : {0.01, 0.05, 0.1, 0.3}) {
        for (uint32_t seed = 1; seed <= 8; seed++) {
            Schedule s;
            s.delay_us = kUnequal;
            s.loss = loss;
            s.dup = 0.02;
            s.ack_loss = loss;
            Result r = Sim(s, seed).run();
            EXPECT_GT(r.resent, 0u) << "loss " << loss << " seed " << seed;
        }
    }
}

TEST(PathProperty, ResendsStayNearTheLoss) {
    // Losses are called by gaps, not by timers: resends should be close to what was dropped.
    Schedule s;
    s.delay_us = {100, 100, 100, 100, 100, 100, 100, 100};
    s.loss = 0.01;
    s.messages = 20000;
    Result r = Sim(s, 7).run();
    EXPECT_LT(r.resent, 20000 * 0.01 * 1.5 + 20);
    EXPECT_EQ(r.spurious, 0u);
}

// Four links shaped to one packet per 10 us, marking CE from 20 packets queued: eight paths (two
// a link) must carry at least 3.6 times what one path does. Per-path windows are what lets a
// connection fill several paths; one window over all would be trimmed by whichever link marks.
TEST(PathProperty, EightPathsOverFourShapedLinksCarryNearlyFourTimesOne) {
    auto run = [](size_t paths) {
        Schedule s;
        s.delay_us.assign(paths, 50);
        s.links.assign(4, Link{10, 20, 200});
        s.messages = 20000;
        return Sim(s, 3).run();
    };
    Result one = run(1), eight = run(8);
    double ratio = double(one.end_us) / double(eight.end_us);
    EXPECT_GE(ratio, 3.6) << "1 path " << one.end_us << " us, 8 paths " << eight.end_us << " us";
    EXPECT_EQ(eight.failures, 0u);
}

// A stream whose segment waits for a resend holds back only itself: with one path black-holed,
// every stream still completes, each in order (checked by the receiver on every arrival).
TEST(PathProperty, OneStreamOrManyEveryStreamCompletesInOrder) {
    for (uint32_t streams : {1u, 3u, 16u}) {
        Schedule s;
        s.delay_us = kUnequal;
        s.loss = 0.05;
        s.dup = 0.01;
        s.streams = streams;
        s.messages = 5000;
        Result r = Sim(s, streams).run();
        EXPECT_GT(r.resent, 0u);
    }
}

// Simulated time, so deterministic: one stream over four unequal paths, each on a link of its own
// that is the bottleneck, keeps most of its lossless throughput under random loss (issue 15's
// targets: 95% at 1%, 85% at 5%, 75% at 10%). With a 1024-segment stream window it kept 88%, 72%
// and 62%: a lost segment on the slowest path held the stream back.
TEST(PathProperty, OneStreamUnderRandomLoss) {
    auto run = [](double loss) {
        Schedule s;
        s.delay_us = kUnequal;
        s.links.assign(4, Link{10, 20, 200});
        s.loss = loss;
        s.streams = 1;
        s.messages = 20000;
        return Sim(s, 11).run();
    };
    double clean = double(run(0).end_us);
    for (auto [loss, kept] : {std::pair{0.01, 0.95}, {0.05, 0.85}, {0.1, 0.75}}) {
        double ratio = clean / double(run(loss).end_us);
        fprintf(stderr, "loss %.2f: %.3f of lossless\n", loss, ratio);
        EXPECT_GE(ratio, kept) << "loss " << loss;
    }
}

// A route that loses 40% but still delivers never fails its path: the path asks for a new route.
TEST(PathProperty, ALossyRouteIsLeftForAnother) {
    for (uint32_t seed = 1; seed <= 5; seed++) {
        Schedule s;
        s.delay_us = kUnequal;
        s.bad_route_path = 1;
        s.messages = 10000;
        Result r = Sim(s, seed).run();
        EXPECT_EQ(r.repaths, 1u) << "seed " << seed;
        EXPECT_EQ(r.failures, 0u) << "seed " << seed;
    }
}

TEST(PathProperty, ABlackHoledPathFailsMovesAndDeliveryGoesOn) {
    for (uint32_t seed = 1; seed <= 5; seed++) {
        Schedule s;
        s.delay_us = kUnequal;
        s.blackhole_path = 2;
        Result r = Sim(s, seed).run();
        EXPECT_EQ(r.failures, 1u) << "seed " << seed;
    }
}

}  // namespace
