// Section 8: a stream's sending end.
#include <gtest/gtest.h>

#include "softmetaroce/v2/stream_sender.h"

namespace softmetaroce::v2 {
namespace {

using Resend = std::optional<std::pair<uint32_t, int>>;

TEST(StreamSender, WindowIs4095PastTheOldestUndelivered) {
    StreamSender s(0xfffff800u);  // across the wrap
    for (uint32_t i = 0; i < 4095; ++i) {
        ASSERT_TRUE(s.can_open()) << i;
        EXPECT_EQ(s.open(), 0xfffff800u + i);
    }
    EXPECT_FALSE(s.can_open());
    // Delivering a later segment does not help; the oldest does.
    EXPECT_TRUE(s.on_acked(0xfffff801u));
    EXPECT_FALSE(s.can_open());
    EXPECT_EQ(s.una(), 0xfffff800u);
    EXPECT_TRUE(s.on_acked(0xfffff800u));
    EXPECT_EQ(s.una(), 0xfffff802u);
    EXPECT_TRUE(s.can_open());
    s.open();
    EXPECT_TRUE(s.can_open());
    s.open();
    EXPECT_FALSE(s.can_open());
}

TEST(StreamSender, DeliveredOnceByAnyTransmission) {
    StreamSender s(10);
    const uint32_t a = s.open();
    s.on_sent(a);
    s.on_lost(a, 2);
    s.on_sent(a);  // the resend
    EXPECT_EQ(s.resent(), 1u);
    EXPECT_TRUE(s.on_acked(a));   // either transmission
    EXPECT_FALSE(s.on_acked(a));  // the other arriving too changes nothing
    EXPECT_EQ(s.delivered(), 1u);
    EXPECT_EQ(s.una(), 11u);
    EXPECT_FALSE(s.on_acked(11));  // never opened
}

TEST(StreamSender, ResendsInTheOrderLostWithTheirPaths) {
    StreamSender s(0);
    for (int i = 0; i < 6; ++i) s.on_sent(s.open());
    s.on_lost(4, 1);
    s.on_lost(1, 3);
    s.on_lost(2, -1);
    s.on_lost(1, 0);  // already queued: keeps its place and path
    EXPECT_TRUE(s.resend_pending());
    EXPECT_EQ(s.next_resend(), (Resend{{4, 1}}));
    EXPECT_EQ(s.next_resend(), (Resend{{1, 3}}));
    EXPECT_EQ(s.next_resend(), (Resend{{2, -1}}));
    EXPECT_EQ(s.next_resend(), std::nullopt);
    EXPECT_FALSE(s.resend_pending());
}

TEST(StreamSender, DeliveryMeanwhileDropsOrPreventsAResend) {
    StreamSender s(0);
    for (int i = 0; i < 4; ++i) s.on_sent(s.open());
    s.on_lost(0, 0);
    s.on_lost(1, 0);
    s.on_lost(2, 0);
    EXPECT_TRUE(s.on_acked(1));  // a spurious loss: the earlier copy arrived
    s.on_acked(3);
    s.on_lost(3, 1);  // delivered: not queued
    EXPECT_EQ(s.next_resend(), (Resend{{0, 0}}));
    EXPECT_EQ(s.next_resend(), (Resend{{2, 0}}));
    EXPECT_EQ(s.next_resend(), std::nullopt);
    // Lost again after its resend left: queued again.
    s.on_sent(0);
    s.on_lost(0, 2);
    EXPECT_EQ(s.next_resend(), (Resend{{0, 2}}));
}

TEST(StreamSender, SegmentsNotOutAreIgnored) {
    StreamSender s(100);
    s.on_lost(99, 0);
    s.on_lost(100, 0);  // not opened yet
    EXPECT_EQ(s.next_resend(), std::nullopt);
    EXPECT_FALSE(s.on_acked(100));
}

}  // namespace
}  // namespace softmetaroce::v2
