// A seeded property test of one path with one stream over it: the path's sender and receiver
// and the stream's sender and receiver map, over a simulated wire that loses, copies, delays
// and (for some seeds) reorders data, loses and delays ACKs, and black-holes the first route.
// Whatever the schedule:
//  - every ACK's map is exactly what arrived (and what the floors skipped), and the sender
//    never refuses one;
//  - every transmission is resolved: acknowledged at most once, declared lost at most once,
//    and acknowledged only if it really arrived; the sender's in-flight count and floor agree;
//  - the stream delivers every segment, each once, and its receiver's map ends complete.
#include <gtest/gtest.h>

#include <cstdint>
#include <queue>
#include <set>
#include <vector>

#include "softmetaroce/sim/rng.h"
#include "softmetaroce/v2/path_receiver.h"
#include "softmetaroce/v2/path_sender.h"
#include "softmetaroce/v2/stream_map.h"
#include "softmetaroce/v2/stream_sender.h"

namespace softmetaroce::v2 {
namespace {

struct Params {
    unsigned loss_pm = 0;      // data lost, per mille
    unsigned dup_pm = 0;       // data copied
    unsigned ack_loss_pm = 0;  // ACKs lost
    unsigned jitter_us = 0;    // extra delay, 0..jitter
    bool reorder = false;      // jitter may reorder data (otherwise the route is FIFO)
    bool black_hole = false;   // the first route drops everything from 5 ms on
};

class PathWorld {
  public:
    static constexpr uint32_t kFirstSeq = 0xffffff00u;  // across the wrap
    static constexpr uint32_t kFirstSsn = 0xfffff000u;
    static constexpr uint64_t kDelayUs = 40;
    static constexpr uint16_t kFirstEntropy = 1;

    PathWorld(uint64_t seed, Params p)
        : rng_(seed),
          p_(p),
          tx_(kFirstSeq, kFirstEntropy, 16 * kCwndOne),
          rx_(kFirstSeq),
          stream_(kFirstSsn),
          smap_(kFirstSsn) {}

    void run(uint32_t segments) {
        segments_ = segments;
        pump();
        for (int steps = 0; !done(); ++steps) {
            ASSERT_LT(steps, 5000000) << "no progress";
            ASSERT_LT(now_, 600000000u) << "simulated time ran out";
            step();
            if (::testing::Test::HasFatalFailure()) return;
            check_sender();
            if (::testing::Test::HasFatalFailure()) return;
            pump();
        }
        EXPECT_EQ(stream_.delivered(), segments);
        EXPECT_EQ(stream_.una(), kFirstSsn + segments);
        EXPECT_EQ(smap_.cum(), kFirstSsn + segments);
        for (const Tx& t : txs_) EXPECT_TRUE(t.acked || t.lost);
        uint64_t acked = 0, lost = 0, spurious = 0;
        for (const Tx& t : txs_) {
            acked += t.acked && !t.lost;
            lost += t.lost;
            spurious += t.acked && t.lost;
        }
        EXPECT_EQ(tx_.sent_packets(), txs_.size());
        EXPECT_EQ(tx_.acked(), acked);
        EXPECT_EQ(tx_.lost(), lost);
        EXPECT_EQ(tx_.spurious(), spurious);
        EXPECT_EQ(tx_.invalid_acks(), 0u);
        EXPECT_EQ(rx_.beyond(), 0u);
    }

    const PathSender& tx() const { return tx_; }
    const PathReceiver& rx() const { return rx_; }
    const StreamSender& stream() const { return stream_; }

  private:
    struct Tx {
        uint32_t seq, ssn;
        bool acked = false, lost = false;
    };
    struct Event {
        uint64_t at, order;
        bool is_ack;
        uint32_t seq, floor, ssn;
        bool ce;
        PathAck ack;
        bool operator>(const Event& o) const { return at != o.at ? at > o.at : order > o.order; }
    };

    bool chance(unsigned pm) { return pm > 0 && rng_.below(1000) < pm; }
    bool done() const {
        return stream_.una() == kFirstSsn + segments_ && tx_.in_flight() == 0 && events_.empty();
    }

    // Sends what the path has room for: resends first, then new segments.
    void pump() {
        while (tx_.can_send(now_)) {
            uint32_t ssn;
            if (auto r = stream_.next_resend()) {
                ssn = r->first;
            } else if (opened_ < segments_ && stream_.can_open()) {
                ssn = stream_.open();
                ++opened_;
            } else {
                return;
            }
            const uint64_t cookie = txs_.size();
            const uint32_t seq = tx_.on_sent(cookie, now_);
            txs_.push_back(Tx{seq, ssn});
            stream_.on_sent(ssn);
            transmit(seq, tx_.floor(), ssn);
        }
    }

    void transmit(uint32_t seq, uint32_t floor, uint32_t ssn) {
        const bool dead = p_.black_hole && tx_.entropy() == kFirstEntropy && now_ >= 5000;
        if (dead || chance(p_.loss_pm)) return;
        uint64_t at = now_ + kDelayUs + (p_.jitter_us ? rng_.below(p_.jitter_us + 1) : 0);
        if (!p_.reorder) at = std::max(at, last_data_at_);
        last_data_at_ = at;
        Event e{at, order_++, false, seq, floor, ssn, chance(100), {}};
        events_.push(e);
        if (chance(p_.dup_pm)) {
            e.at += 1 + rng_.below(30);
            e.order = order_++;
            events_.push(e);
        }
    }

    void send_ack() {
        const PathAck a = rx_.make_ack(now_);
        check_ack(a);
        if (chance(p_.ack_loss_pm)) return;
        uint64_t at = now_ + kDelayUs + (p_.jitter_us ? rng_.below(p_.jitter_us + 1) : 0);
        events_.push(Event{at, order_++, true, 0, 0, 0, false, a});
    }

    void step() {
        uint64_t t = events_.empty() ? ~uint64_t{0} : events_.top().at;
        t = std::min(t, tx_.deadline());
        t = std::min(t, tx_.retry_at());
        if (auto due = rx_.ack_due()) t = std::min(t, *due);
        ASSERT_NE(t, ~uint64_t{0}) << "nothing left to happen";
        ASSERT_GE(t, now_);
        now_ = t;
        if (auto due = rx_.ack_due(); due && *due <= now_) send_ack();
        if (tx_.deadline() <= now_) {
            PathEvents ev;
            tx_.on_timer(now_, next_entropy_++, ev);
            apply(ev);
        }
        while (!events_.empty() && events_.top().at <= now_) {
            const Event e = events_.top();
            events_.pop();
            if (e.is_ack) {
                PathEvents ev;
                ASSERT_EQ(tx_.on_ack(e.ack, now_, ev), AckVerdict::Ok);
                apply(ev);
            } else {
                arrive(e);
            }
            if (::testing::Test::HasFatalFailure()) return;
        }
    }

    void arrive(const Event& e) {
        const bool had = rx_.map().has(e.seq);
        const RxAck r = rx_.on_packet(e.seq, e.floor, e.ce, false, now_);
        ASSERT_NE(r, RxAck::Drop) << "a conforming sender went beyond the map";
        const uint64_t off = e.seq - kFirstSeq;
        if (!had) {
            ASSERT_TRUE(arrived_.insert(off).second);
        }
        if (!seq_after(e.floor, e.seq))
            max_floor_ = std::max<uint64_t>(max_floor_, e.floor - kFirstSeq);
        const MapVerdict v = smap_.record(e.ssn);
        ASSERT_NE(v, MapVerdict::Beyond) << "the stream went past its window";
        if (v == MapVerdict::New) {
            ASSERT_TRUE(stream_arrived_.insert(e.ssn - kFirstSsn).second);
        }
        if (r == RxAck::Now) send_ack();
    }

    // The ACK says exactly what arrived, and cum what arrived or was skipped by a floor.
    void check_ack(const PathAck& a) {
        ref_cum_ = std::max(ref_cum_, max_floor_);
        while (arrived_.count(ref_cum_)) ++ref_cum_;
        ASSERT_EQ(a.cum, static_cast<uint32_t>(kFirstSeq + ref_cum_));
        for (unsigned i = 0; i < kSackBits; ++i)
            ASSERT_EQ(a.bit(i), arrived_.count(ref_cum_ + 1 + i) == 1) << "bit " << i;
    }

    void apply(const PathEvents& ev) {
        for (uint64_t c : ev.acked) {
            ASSERT_LT(c, txs_.size());
            Tx& t = txs_[c];
            ASSERT_FALSE(t.acked) << "acknowledged twice";
            ASSERT_TRUE(arrived_.count(t.seq - kFirstSeq)) << "acknowledged but never arrived";
            t.acked = true;
            if (stream_.on_acked(t.ssn)) {
                ASSERT_TRUE(stream_arrived_.count(t.ssn - kFirstSsn));
            }
        }
        for (uint64_t c : ev.lost) {
            ASSERT_LT(c, txs_.size());
            Tx& t = txs_[c];
            ASSERT_FALSE(t.lost) << "lost twice";
            ASSERT_FALSE(t.acked) << "lost after it was acknowledged";
            t.lost = true;
            stream_.on_lost(t.ssn, 0);
        }
    }

    void check_sender() {
        uint32_t unresolved = 0;
        bool found = false;
        uint32_t oldest = tx_.next_seq();
        for (size_t i = txs_.size(); i-- > 0 && txs_.size() - i <= kSackBits;) {
            if (!txs_[i].acked && !txs_[i].lost) {
                ++unresolved;
                oldest = txs_[i].seq;
                found = true;
            }
        }
        ASSERT_EQ(tx_.in_flight(), unresolved);
        ASSERT_EQ(tx_.floor(), found ? oldest : tx_.next_seq());
        ASSERT_LE(seq_diff(tx_.next_seq(), tx_.floor()), 255);
        ASSERT_GE(tx_.cwnd(), kCwndMin);
        ASSERT_LE(tx_.cwnd(), kCwndMax);
    }

    metaroce::sim::SimRng rng_;
    Params p_;
    PathSender tx_;
    PathReceiver rx_;
    StreamSender stream_;
    StreamMap smap_;
    std::vector<Tx> txs_;
    std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
    std::set<uint64_t> arrived_, stream_arrived_;
    uint64_t max_floor_ = 0, ref_cum_ = 0;
    uint64_t now_ = 0, order_ = 0, last_data_at_ = 0;
    uint32_t segments_ = 0, opened_ = 0;
    uint16_t next_entropy_ = 100;
};

class PathProperty : public ::testing::TestWithParam<int> {};

TEST_P(PathProperty, EveryTransmissionResolvedAndEverySegmentDelivered) {
    const int seed = GetParam();
    metaroce::sim::SimRng pick(1000 + seed);
    Params p;
    // Seeds from 20 on lose much more: up to 40%.
    p.loss_pm = static_cast<unsigned>(pick.below(seed < 20 ? 150 : 400));
    p.dup_pm = static_cast<unsigned>(pick.below(50));
    p.ack_loss_pm = static_cast<unsigned>(pick.below(100));
    p.jitter_us = seed % 3 == 0 ? 0 : static_cast<unsigned>(pick.below(30));
    p.reorder = seed % 4 == 1;
    p.black_hole = seed % 5 == 2;
    SCOPED_TRACE(::testing::Message()
                 << "seed " << seed << " loss " << p.loss_pm << " dup " << p.dup_pm << " ack loss "
                 << p.ack_loss_pm << " jitter " << p.jitter_us << " reorder " << p.reorder
                 << " black hole " << p.black_hole);
    PathWorld w(static_cast<uint64_t>(seed), p);
    w.run(3000);
    if (p.black_hole) {
        EXPECT_GE(w.tx().failures(), 1u);
        EXPECT_NE(w.tx().entropy(), PathWorld::kFirstEntropy);
    }
    if (!p.reorder && p.jitter_us == 0) {
        EXPECT_EQ(w.tx().spurious(), 0u);
    }
}

INSTANTIATE_TEST_SUITE_P(Seeds, PathProperty, ::testing::Range(0, 40));

// No loss, no copies, a FIFO route: nothing is resent and nothing is called lost.
TEST(PathPropertyClean, NothingLostNothingResent) {
    PathWorld w(5, Params{});
    w.run(5000);
    EXPECT_EQ(w.tx().lost(), 0u);
    EXPECT_EQ(w.stream().resent(), 0u);
    EXPECT_EQ(w.tx().sent_packets(), 5000u);
}

}  // namespace
}  // namespace softmetaroce::v2
