#include "softmetaroce/reorder_tracker.h"

#include <gtest/gtest.h>

#include "softmetaroce/fair_share.h"

namespace metaroce {
namespace {

TEST(ReorderTracker, LostOnceATransmissionAllowanceLaterArrived) {
    ReorderTracker t(3, 3);
    EXPECT_EQ(t.loss_threshold(), std::nullopt);  // nothing delivered
    t.on_delivered(1, false);
    EXPECT_EQ(t.loss_threshold(), std::nullopt);  // nothing sent 3 before 1
    t.on_delivered(10, false);
    EXPECT_EQ(t.loss_threshold(), 8u);  // 7 and older are 3 or more before 10: lost
    t.on_delivered(4, false);           // older than the latest: changes nothing
    EXPECT_EQ(t.loss_threshold(), 8u);
    t.on_delivered(12, false);
    EXPECT_EQ(t.loss_threshold(), 10u);
}

TEST(ReorderTracker, AfterABurstOfLossesTheOldestAreLostAtOnce) {
    // 0..19 sent, 0..9 lost: the first delivery, 10, already calls 0..7 lost; a count of later
    // deliveries would wait for three of them.
    ReorderTracker t(3, 8);
    t.begin_ack();
    t.on_delivered(10, true);
    EXPECT_EQ(t.loss_threshold(), 8u);
}

TEST(ReorderTracker, OvertakenFirstTransmissionRaisesTheAllowance) {
    ReorderTracker t(3, 6);
    t.begin_ack();
    for (std::uint64_t tx = 10; tx < 15; ++tx) t.on_delivered(tx, true);
    EXPECT_EQ(t.allowance(), 3u);        // in order: nothing overtaken
    EXPECT_EQ(t.loss_threshold(), 12u);  // 11 and older
    t.begin_ack();
    t.on_delivered(5, /*first_transmission=*/false);  // a retransmission says nothing
    EXPECT_EQ(t.allowance(), 3u);
    t.begin_ack();
    t.on_delivered(9, true);  // 14 arrived before it, 5 later: 6 needed from now on
    EXPECT_EQ(t.allowance(), 6u);
    EXPECT_EQ(t.loss_threshold(), 9u);  // 8 and older
    t.on_delivered(2, true);            // beyond the ceiling
    EXPECT_EQ(t.allowance(), 6u);
    t.decay();  // an eighth, rounded down
    EXPECT_EQ(t.allowance(), 6u);
    ReorderTracker wide(8, 128);
    wide.begin_ack();
    for (std::uint64_t tx = 100; tx < 140; ++tx) wide.on_delivered(tx, true);
    wide.begin_ack();
    wide.on_delivered(98, true);
    EXPECT_EQ(wide.allowance(), 42u);
    wide.decay();
    EXPECT_EQ(wide.allowance(), 37u);
    for (int i = 0; i < 40; ++i) wide.decay();
    EXPECT_EQ(wide.allowance(), 8u);  // not below where it started
}

TEST(ReorderTracker, DeliveriesInOneAckDoNotOvertakeEachOther) {
    // One ACK names a retransmission (tx 20) and a first transmission sent before it (tx 16):
    // the order within the ACK says nothing about the paths.
    ReorderTracker t(3, 64);
    t.begin_ack();
    t.on_delivered(14, true);
    t.begin_ack();
    t.on_delivered(20, false);
    t.on_delivered(16, true);
    EXPECT_EQ(t.allowance(), 3u);
    t.begin_ack();
    t.on_delivered(15, true);  // 20 arrived before it: overtaken by 5
    EXPECT_EQ(t.allowance(), 6u);
}

TEST(FairShareTracker, BudgetSplitOverActiveConnections) {
    FairShareTracker f(512);
    EXPECT_EQ(f.hint(0), 512);  // nobody active: the whole budget
    f.note_activity(1, 0);
    f.note_activity(2, 100);
    f.note_activity(3, 200);
    EXPECT_EQ(f.active_connections(500), 3u);
    EXPECT_EQ(f.hint(500), 170);
    EXPECT_EQ(f.hint(1050), 256);  // connection 1 idle for a millisecond
    FairShareTracker tiny(2);
    for (std::uint32_t c = 0; c < 5; ++c) tiny.note_activity(c, 0);
    EXPECT_EQ(tiny.hint(0), 4);  // never below 4 (and never 0, which would mean "no hint")
}

}  // namespace
}  // namespace metaroce
