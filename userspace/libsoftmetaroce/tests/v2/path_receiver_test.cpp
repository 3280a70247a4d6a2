// Sections 3-4: the receiving end of a path and when it acknowledges.
#include "softmetaroce/v2/path_receiver.h"

#include <gtest/gtest.h>

namespace softmetaroce::v2 {
namespace {

TEST(PathReceiver, InOrderArrivalsWaitForTheDelayedAck) {
    PathReceiver rx(0);
    EXPECT_FALSE(rx.ack_due());
    EXPECT_EQ(rx.on_packet(0, 0, false, false, 1000), RxAck::Later);
    EXPECT_EQ(rx.ack_due(), 1200u);  // 200 us after the oldest unacknowledged arrival
    EXPECT_EQ(rx.on_packet(1, 0, false, false, 1100), RxAck::Later);
    EXPECT_EQ(rx.ack_due(), 1200u);
    const PathAck a = rx.make_ack(1200);
    EXPECT_EQ(a.cum, 2u);
    EXPECT_EQ(a.bits, (std::array<uint64_t, 4>{}));
    EXPECT_EQ(a.ack_delay_us, 100u);  // from the newest arrival
    EXPECT_EQ(a.ce, 0u);
    EXPECT_FALSE(rx.ack_due());
    EXPECT_EQ(rx.received(), 2u);
}

TEST(PathReceiver, EverySixteenthArrivalIsAckedAtOnce) {
    PathReceiver rx(5);
    for (uint32_t i = 0; i < 15; ++i)
        EXPECT_EQ(rx.on_packet(5 + i, 5 + i, false, false, 10 + i), RxAck::Later) << i;
    EXPECT_EQ(rx.on_packet(20, 20, false, false, 30), RxAck::Now);
    EXPECT_EQ(rx.ack_due(), 30u);
    EXPECT_EQ(rx.make_ack(30).cum, 21u);
    for (uint32_t i = 0; i < 15; ++i)
        EXPECT_EQ(rx.on_packet(21 + i, 21, false, false, 40 + i), RxAck::Later) << i;
    EXPECT_EQ(rx.on_packet(36, 21, false, false, 60), RxAck::Now);
}

TEST(PathReceiver, AckReqIsAckedAtOnce) {
    PathReceiver rx(0);
    EXPECT_EQ(rx.on_packet(0, 0, false, true, 5), RxAck::Now);
    EXPECT_EQ(rx.ack_due(), 5u);
    EXPECT_EQ(rx.make_ack(7).ack_delay_us, 2u);
}

TEST(PathReceiver, AGapIsAckedAtOnceWhileItLasts) {
    PathReceiver rx(0);
    EXPECT_EQ(rx.on_packet(0, 0, false, false, 1), RxAck::Later);
    EXPECT_EQ(rx.on_packet(2, 0, false, false, 2), RxAck::Now);  // 1 is missing
    PathAck a = rx.make_ack(2);
    EXPECT_EQ(a.cum, 1u);
    EXPECT_EQ(a.bits[0], 1u);                                    // 2 = cum + 1 + 0
    EXPECT_EQ(rx.on_packet(3, 0, false, false, 3), RxAck::Now);  // still a gap
    rx.make_ack(3);
    // The floor skips the lost 1: no gap, back to delayed ACKs.
    EXPECT_EQ(rx.on_packet(4, 2, false, false, 4), RxAck::Later);
    EXPECT_EQ(rx.map().cum(), 5u);
}

TEST(PathReceiver, CopiesAreAckedAtOnceAndCounted) {
    PathReceiver rx(0);
    rx.on_packet(0, 0, false, false, 1);
    rx.make_ack(2);
    EXPECT_EQ(rx.on_packet(0, 0, false, false, 3), RxAck::Now);
    EXPECT_EQ(rx.duplicates(), 1u);
    EXPECT_EQ(rx.received(), 1u);
    const PathAck a = rx.make_ack(3);
    EXPECT_EQ(a.cum, 1u);
    EXPECT_EQ(a.ack_delay_us, 2u);  // the copy is not an arrival for the delay
}

TEST(PathReceiver, BeyondTheMapIsDroppedWithoutAnAck) {
    PathReceiver rx(0);
    EXPECT_EQ(rx.on_packet(257, 0, true, true, 1), RxAck::Drop);
    EXPECT_EQ(rx.beyond(), 1u);
    EXPECT_FALSE(rx.ack_due());
    EXPECT_EQ(rx.map().cum(), 0u);
    EXPECT_EQ(rx.make_ack(2).ce, 0u);  // nothing of it counted
}

TEST(PathReceiver, CountsCeSinceThePreviousAck) {
    PathReceiver rx(0);
    rx.on_packet(0, 0, true, false, 1);
    rx.on_packet(1, 0, false, false, 2);
    rx.on_packet(2, 0, true, false, 3);
    EXPECT_EQ(rx.make_ack(4).ce, 2u);
    rx.on_packet(3, 3, false, false, 5);
    EXPECT_EQ(rx.make_ack(6).ce, 0u);
}

TEST(PathReceiver, EveryAckCarriesTheWholeMap) {
    PathReceiver rx(0);
    rx.on_packet(1, 0, false, false, 1);
    rx.on_packet(70, 0, false, false, 2);
    const PathAck a = rx.make_ack(3);
    const PathAck b = rx.make_ack(4);  // nothing new: the same map
    EXPECT_EQ(a.cum, 0u);
    EXPECT_TRUE(a.bit(0));
    EXPECT_TRUE(a.bit(69));
    EXPECT_EQ(a.bits, b.bits);
    EXPECT_EQ(b.ack_delay_us, 2u);
}

TEST(PathReceiver, AckDelaySaturatesAsOnTheWire) {
    PathReceiver rx(0);
    rx.on_packet(0, 0, false, false, 0);
    EXPECT_EQ(rx.make_ack(1000000).ack_delay_us, 65535u);
}

}  // namespace
}  // namespace softmetaroce::v2
