// The simulator itself: determinism, loss/duplication/jitter statistics, black holes, ECN
// marking, and event ordering.
#include <gtest/gtest.h>

#include <set>

#include "softmetaroce/sim/rng.h"
#include "softmetaroce/sim/sim_link.h"
#include "softmetaroce/sim/sim_network.h"
#include "test_support.h"

namespace metaroce::sim {
namespace {

Datagram datagram(std::size_t size, std::uint16_t port = 0xc000, bool ect = true) {
    return Datagram{std::vector<std::uint8_t>(size, 0), port, ect, false};
}

TEST(SimRng, DeterministicAndUniform) {
    SimRng a(42), b(42), c(43);
    for (int i = 0; i < 100; ++i) {
        const std::uint64_t x = a.next();
        EXPECT_EQ(x, b.next());
        EXPECT_NE(x, c.next());
    }
    int buckets[10] = {};
    for (int i = 0; i < 100000; ++i) ++buckets[a.below(10)];
    for (const int n : buckets) EXPECT_NEAR(n, 10000, 500);
    for (int i = 0; i < 1000; ++i) {
        const double u = a.uniform();
        EXPECT_GE(u, 0.0);
        EXPECT_LT(u, 1.0);
    }
}

TEST(SimLink, LossDuplicationAndJitterRates) {
    SimLink link(
        LinkConfig{.delay_us = 10, .jitter_us = 20, .loss_rate = 0.2, .duplicate_rate = 0.1}, 7);
    std::uint64_t arrivals = 0;
    for (int i = 0; i < 20000; ++i) {
        for (const Arrival& a : link.transmit(datagram(100), 1000)) {
            ++arrivals;
            EXPECT_GE(a.at, 1010u);
            EXPECT_LE(a.at, 1030u);
        }
    }
    EXPECT_NEAR(static_cast<double>(link.stats().lost) / 20000, 0.2, 0.02);
    EXPECT_NEAR(static_cast<double>(link.stats().duplicated) / (20000 - link.stats().lost), 0.1,
                0.02);
    EXPECT_EQ(arrivals, link.stats().delivered);
}

TEST(SimLink, SameSeedSameFate) {
    const LinkConfig config{
        .delay_us = 5, .jitter_us = 50, .loss_rate = 0.3, .duplicate_rate = 0.2};
    SimLink a(config, 99), b(config, 99);
    for (int i = 0; i < 1000; ++i) {
        const auto x = a.transmit(datagram(64), i);
        const auto y = b.transmit(datagram(64), i);
        ASSERT_EQ(x.size(), y.size());
        for (std::size_t k = 0; k < x.size(); ++k) EXPECT_EQ(x[k].at, y[k].at);
    }
}

TEST(SimLink, EachRouteHasItsOwnFixedDelay) {
    SimLink link(LinkConfig{.delay_us = 10, .route_spread_us = 50}, 3);
    std::set<TimeUs> delays;
    for (std::uint16_t port = 0xc000; port < 0xc040; ++port) {
        const TimeUs first = link.transmit(datagram(10, port), 0).at(0).at;
        EXPECT_GE(first, 10u);
        EXPECT_LE(first, 60u);
        for (int i = 0; i < 5; ++i) EXPECT_EQ(link.transmit(datagram(10, port), 0).at(0).at, first);
        delays.insert(first);
    }
    EXPECT_GT(delays.size(), 20u);
}

TEST(SimLink, BlackHoleBySourcePort) {
    SimLink link(LinkConfig{}, 1);
    link.set_blackhole(0xc005, true);
    EXPECT_TRUE(link.transmit(datagram(10, 0xc005), 0).empty());
    EXPECT_EQ(link.transmit(datagram(10, 0xc006), 0).size(), 1u);
    link.set_blackhole(0xc005, false);
    EXPECT_EQ(link.transmit(datagram(10, 0xc005), 0).size(), 1u);
    EXPECT_EQ(link.stats().blackholed, 1u);
}

TEST(SimLink, QueueDelaysAndMarksEctAboveThreshold) {
    // 100 bytes per microsecond; mark when 1000 bytes or more are queued.
    SimLink link(LinkConfig{.delay_us = 0, .bytes_per_us = 100, .ecn_threshold_bytes = 1000}, 1);
    std::vector<bool> marks;
    TimeUs last = 0;
    for (int i = 0; i < 20; ++i) {
        const auto a = link.transmit(datagram(500), 0);
        ASSERT_EQ(a.size(), 1u);
        EXPECT_EQ(a[0].at, static_cast<TimeUs>(5 * (i + 1)));  // serialized one after another
        last = a[0].at;
        marks.push_back(a[0].datagram.ce);
    }
    EXPECT_FALSE(marks[0]);
    EXPECT_FALSE(marks[1]);  // 500 bytes queued
    EXPECT_TRUE(marks[2]);   // 1000 bytes queued
    EXPECT_TRUE(marks[19]);
    EXPECT_FALSE(link.transmit(datagram(500, 0xc000, /*ect=*/false), 0)[0].datagram.ce);
    // Once the queue has drained nothing is marked.
    EXPECT_FALSE(link.transmit(datagram(500), last + 100)[0].datagram.ce);
}

class RecordingNode : public SimNode {
  public:
    void on_datagram(const Datagram& d, TimeUs now) override {
        received.push_back({now, d.bytes.size()});
    }
    std::optional<TimeUs> next_timer() const override { return timer; }
    void on_timer(TimeUs now) override {
        fired.push_back(now);
        timer.reset();
    }
    std::vector<std::pair<NodeId, Datagram>> take_outgoing() override {
        return std::exchange(outgoing, {});
    }

    std::vector<std::pair<TimeUs, std::size_t>> received;
    std::vector<TimeUs> fired;
    std::optional<TimeUs> timer;
    std::vector<std::pair<NodeId, Datagram>> outgoing;
};

TEST(SimNetwork, DeliversInTimeOrderAndFiresTimers) {
    RecordingNode a, b;
    SimNetwork net(1);
    const NodeId ia = net.add_node(a);
    const NodeId ib = net.add_node(b);
    net.connect(ia, ib, LinkConfig{.delay_us = 10, .jitter_us = 30}, LinkConfig{});
    for (std::size_t i = 1; i <= 50; ++i) a.outgoing.push_back({ib, datagram(i)});
    b.timer = 25;
    net.run_for(1000);
    EXPECT_EQ(net.now(), 1000u);
    ASSERT_EQ(b.received.size(), 50u);
    for (std::size_t i = 1; i < b.received.size(); ++i) {
        EXPECT_LE(b.received[i - 1].first, b.received[i].first);
    }
    EXPECT_EQ(b.fired, (std::vector<TimeUs>{25}));
}

}  // namespace
}  // namespace metaroce::sim
