#include "softmetaroce/paths.h"

#include <gtest/gtest.h>
#include <rdma/metaroce_wire.h>

#include <set>

namespace metaroce {
namespace {

TEST(Paths, EntropyDistinctPerQpAndDiffersAcrossQps) {
    for (std::uint32_t qpn : {1u, 2u, 0x123456u, 0xffffffu}) {
        std::set<std::uint16_t> seen;
        for (unsigned i = 0; i < PathSet::kMaxPaths; ++i) {
            const std::uint16_t e = PathSet::entropy_for(qpn, i);
            EXPECT_LE(e, METAROCE_ENTROPY_MASK);
            seen.insert(e);
        }
        EXPECT_EQ(seen.size(), PathSet::kMaxPaths);
    }
    EXPECT_NE(PathSet::entropy_for(1, 0), PathSet::entropy_for(2, 0));
}

TEST(Paths, RoundRobinOverActivePaths) {
    PathSet paths(7, 4);
    for (unsigned round = 0; round < 3; ++round) {
        for (unsigned i = 0; i < 4; ++i) {
            const PathChoice c = paths.choose(0, std::nullopt, true, 100);
            EXPECT_EQ(c.index, i);
            EXPECT_FALSE(c.probe);
        }
    }
}

TEST(Paths, RetransmissionAvoidsThePathItWasLostOn) {
    PathSet paths(7, 4);
    for (int i = 0; i < 8; ++i) EXPECT_NE(paths.choose(0, std::uint16_t{2}, false, 100).index, 2);
    PathSet single(7, 1);
    EXPECT_EQ(single.choose(0, std::uint16_t{0}, false, 100).index, 0);  // no other choice
}

TEST(Paths, SkipsPathsMoreThanTwiceAsSlowAsTheBestButForOnePacketPerTheirRtt) {
    PathSet paths(7, 3);
    paths.on_echo(0, 10, 0);
    paths.on_echo(1, 25, 0);  // > 2 x 10: skipped, but for one packet per 25 us
    paths.on_echo(2, 20, 0);
    auto count_on_1 = [&](TimeUs now, int picks) {
        int n = 0;
        for (int i = 0; i < picks; ++i) n += paths.choose(now, std::nullopt, true, 100).index == 1;
        return n;
    };
    EXPECT_EQ(count_on_1(0, 6), 1);   // never measured since: it gets one
    EXPECT_EQ(count_on_1(24, 6), 0);  // within its RTT of that one
    EXPECT_EQ(count_on_1(25, 6), 1);
}

TEST(Paths, LossesMakeSuspectThenFailedAndDeliveryRestores) {
    PathConfig config;
    PathSet paths(7, 4, config);
    paths.on_sent(1, {1, false}, 0);
    paths.on_lost(1, 0);
    EXPECT_EQ(paths[1].state, PathState::Active);  // one loss: random loss is normal
    paths.on_lost(1, 0);
    EXPECT_EQ(paths[1].state, PathState::Suspect);
    paths.on_lost(1, 0);
    paths.on_lost(1, 0);
    EXPECT_EQ(paths[1].state, PathState::Failed);
    // A FAILED path carries nothing before its backoff expires...
    for (int i = 0; i < 8; ++i) EXPECT_NE(paths.choose(10, std::nullopt, true, 100).index, 1);
    // ...then one probe.
    const PathChoice probe = paths.choose(config.initial_fail_backoff_us, std::nullopt, true, 100);
    EXPECT_EQ(probe.index, 1);
    EXPECT_TRUE(probe.probe);
    paths.on_sent(1, probe, config.initial_fail_backoff_us);
    // The probe is lost: twice the backoff before the next one.
    paths.on_lost(1, config.initial_fail_backoff_us);
    EXPECT_EQ(paths[1].fail_backoff, 2 * config.initial_fail_backoff_us);
    // An ACK echoing the path brings it back.
    paths.on_echo(1, 30, 0);
    EXPECT_EQ(paths[1].state, PathState::Active);
    EXPECT_EQ(paths[1].consecutive_losses, 0u);
}

TEST(Paths, SuspectPathGetsOneProbePerRtt) {
    PathSet paths(7, 2);
    paths.on_echo(0, 50, 0);
    paths.on_echo(1, 50, 0);
    paths.on_lost(1, 0);
    paths.on_lost(1, 0);
    ASSERT_EQ(paths[1].state, PathState::Suspect);
    int probes = 0;
    for (TimeUs now = 0; now < 500; now += 10) {
        const PathChoice c = paths.choose(now, std::nullopt, true, 50);
        paths.on_sent(c.index, c, now);
        if (c.index == 1) {
            EXPECT_TRUE(c.probe);
            ++probes;
        }
    }
    EXPECT_GE(probes, 9);
    EXPECT_LE(probes, 11);
}

TEST(Paths, AllFailedStillProbesInTurn) {
    PathSet paths(7, 3);
    for (std::uint16_t i = 0; i < 3; ++i) {
        for (int k = 0; k < 4; ++k) paths.on_lost(i, 0);
        ASSERT_EQ(paths[i].state, PathState::Failed);
    }
    std::set<std::uint16_t> used;
    for (int i = 0; i < 3; ++i) {
        const PathChoice c = paths.choose(1, std::nullopt, false, 100);
        EXPECT_TRUE(c.probe);
        used.insert(c.index);
    }
    EXPECT_EQ(used.size(), 3u);
}

}  // namespace
}  // namespace metaroce
