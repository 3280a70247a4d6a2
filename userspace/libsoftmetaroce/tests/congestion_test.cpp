#include "softmetaroce/congestion.h"

#include <gtest/gtest.h>

namespace metaroce {
namespace {

CongestionConfig starting_at(std::uint32_t cwnd) {
    CongestionConfig c;
    c.initial_cwnd = cwnd;
    return c;
}

TEST(Congestion, StartsAtTheFullWindow) {
    CongestionControl cc;
    EXPECT_EQ(cc.window(0), 256u);
    EXPECT_DOUBLE_EQ(cc.alpha(), 1.0);
}

TEST(Congestion, AdditiveIncreaseIsOnePacketPerWindow) {
    CongestionControl cc(starting_at(16));
    cc.on_ack(16, 0);  // one window of clean ACKs: +1 packet (approximately)
    EXPECT_NEAR(cc.cwnd(), 17.0, 0.1);
    for (int i = 0; i < 100; ++i) cc.on_ack(17, 0);
    EXPECT_GT(cc.cwnd(), 60.0);
}

TEST(Congestion, CappedAt256AndFairShare) {
    CongestionControl cc(starting_at(16));
    for (int i = 0; i < 10000; ++i) cc.on_ack(64, 0);
    EXPECT_EQ(cc.window(0), 256u);
    EXPECT_EQ(cc.window(40), 40u);
    EXPECT_EQ(cc.window(1000), 256u);
}

TEST(Congestion, EcnShrinksWithDctcpAlpha) {
    CongestionControl cc(starting_at(16));
    // First window fully marked: alpha stays 1 and cwnd halves.
    cc.on_ack(16, 16);
    EXPECT_NEAR(cc.cwnd(), 8.0, 0.01);
    EXPECT_NEAR(cc.alpha(), 1.0, 0.01);
    // Unmarked windows decay alpha by 1/16 each, without shrinking cwnd.
    for (int i = 0; i < 20; ++i) cc.on_ack(static_cast<std::uint32_t>(cc.cwnd()) + 1, 0);
    EXPECT_LT(cc.alpha(), 0.4);
    const double before = cc.cwnd();
    // One marked packet in a window now costs only alpha / 2 of it.
    cc.on_ack(static_cast<std::uint32_t>(before), 1);
    EXPECT_GT(cc.cwnd(), before * 0.8);
    EXPECT_LT(cc.cwnd(), before);
}

TEST(Congestion, LossAloneDoesNotShrinkButRtoHalvesDownTo16) {
    CongestionControl cc;
    cc.on_ack(0, 0);  // an ACK with nothing new (say, after losses)
    EXPECT_EQ(cc.window(0), 256u);
    cc.on_rto();
    EXPECT_EQ(cc.window(0), 128u);
    for (int i = 0; i < 10; ++i) cc.on_rto();
    EXPECT_EQ(cc.window(0), 16u);
    // ECN may take it lower; a timeout then brings it back to 16.
    CongestionControl marked(starting_at(16));
    for (int i = 0; i < 5; ++i) marked.on_ack(static_cast<std::uint32_t>(marked.cwnd()) + 1, 64);
    EXPECT_LT(marked.window(0), 16u);
    marked.on_rto();
    EXPECT_EQ(marked.window(0), 16u);
}

}  // namespace
}  // namespace metaroce
