#include "softmetaroce/rtt_estimator.h"

#include <gtest/gtest.h>

namespace metaroce {
namespace {

TEST(RttEstimator, InitialAndMinimum) {
    RttEstimator r;
    EXPECT_EQ(r.rto(), 20'000u);  // 20 ms before the first sample
    r.on_sample(20);              // SRTT 20, RTTVAR 10: 60 us, raised to the 5 ms minimum
    EXPECT_EQ(r.srtt(), 20u);
    EXPECT_EQ(r.rttvar(), 10u);
    EXPECT_EQ(r.rto(), 5000u);
}

TEST(RttEstimator, DefaultBackoffDoublesUpTo2sAndANewSampleResetsIt) {
    RttEstimator r;
    r.on_sample(100);
    for (int i = 0; i < 20; ++i) r.on_timeout();
    EXPECT_EQ(r.rto(), 2'000'000u);
    r.on_sample(100);
    EXPECT_EQ(r.rto(), 5000u);
}

TEST(RttEstimator, Rfc6298Update) {
    RttEstimator r(RttConfig{.min_rto_us = 1, .initial_rto_us = 1000, .max_rto_us = 1'000'000});
    r.on_sample(1000);
    EXPECT_EQ(r.rto(), 1000u + 4 * 500u);
    r.on_sample(2000);
    // RTTVAR = 3/4 * 500 + 1/4 * 1000 = 625; SRTT = 7/8 * 1000 + 1/8 * 2000 = 1125.
    EXPECT_EQ(r.rttvar(), 625u);
    EXPECT_EQ(r.srtt(), 1125u);
    EXPECT_EQ(r.rto(), 1125u + 2500u);
}

TEST(RttEstimator, BackoffDoublesUntilMaxAndResetsOnProgress) {
    RttEstimator r(RttConfig{.min_rto_us = 1000, .initial_rto_us = 1000, .max_rto_us = 10'000});
    r.on_timeout();
    EXPECT_EQ(r.rto(), 2000u);
    r.on_timeout();
    EXPECT_EQ(r.rto(), 4000u);
    r.on_timeout();
    r.on_timeout();
    r.on_timeout();
    EXPECT_EQ(r.rto(), 10'000u);
    r.on_progress();
    EXPECT_EQ(r.rto(), 1000u);
}

}  // namespace
}  // namespace metaroce
