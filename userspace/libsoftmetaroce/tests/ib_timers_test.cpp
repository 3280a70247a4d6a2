#include "softmetaroce/ib_timers.h"

#include <gtest/gtest.h>

namespace metaroce {
namespace {

TEST(IbTimers, RnrTimerEncoding) {
    EXPECT_EQ(rnr_timer_us(0), 655360u);
    EXPECT_EQ(rnr_timer_us(1), 10u);
    EXPECT_EQ(rnr_timer_us(12), 640u);
    EXPECT_EQ(rnr_timer_us(14), 1280u);
    EXPECT_EQ(rnr_timer_us(31), 491520u);
    EXPECT_EQ(rnr_timer_us(200), 491520u);
}

TEST(IbTimers, TransportTimeout) {
    EXPECT_EQ(transport_timeout_us(0), std::nullopt);
    EXPECT_EQ(transport_timeout_us(1), 9u);       // 8.192 us, rounded up
    EXPECT_EQ(transport_timeout_us(14), 67109u);  // 67.108864 ms
    EXPECT_EQ(transport_timeout_us(18), 1073742u);
}

}  // namespace
}  // namespace metaroce
