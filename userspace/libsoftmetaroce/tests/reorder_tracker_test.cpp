#include "softmetaroce/reorder_tracker.h"

#include <gtest/gtest.h>

#include "softmetaroce/fair_share.h"

namespace metaroce {
namespace {

TEST(ReorderTracker, ThresholdIsTheOldestOfTheLatestDelivered) {
    ReorderTracker t(3, 3);
    t.on_delivered(10, false);
    t.on_delivered(4, false);
    EXPECT_EQ(t.loss_threshold(), std::nullopt);  // fewer than 3 delivered
    t.on_delivered(7, false);
    EXPECT_EQ(t.loss_threshold(), 4u);  // 4, 7, 10: anything sent before 4 is lost
    t.on_delivered(2, false);           // older than all three: changes nothing
    EXPECT_EQ(t.loss_threshold(), 4u);
    t.on_delivered(12, false);
    EXPECT_EQ(t.loss_threshold(), 7u);
}

TEST(ReorderTracker, OvertakenFirstTransmissionRaisesTheAllowance) {
    ReorderTracker t(3, 6);
    for (std::uint64_t tx = 10; tx < 15; ++tx) t.on_delivered(tx, true);
    EXPECT_EQ(t.allowance(), 3u);                     // in order: nothing overtaken
    EXPECT_EQ(t.loss_threshold(), 12u);               // 12, 13, 14
    t.on_delivered(5, /*first_transmission=*/false);  // a retransmission says nothing
    EXPECT_EQ(t.allowance(), 3u);
    t.on_delivered(8, true);  // arrived after 5 later ones: 6 are needed from now on
    EXPECT_EQ(t.allowance(), 6u);
    EXPECT_EQ(t.loss_threshold(), 8u);  // 8, 10..14
    t.on_delivered(2, true);            // beyond the ceiling
    EXPECT_EQ(t.allowance(), 6u);
    t.decay();  // an eighth, rounded down
    EXPECT_EQ(t.allowance(), 6u);
    ReorderTracker wide(8, 128);
    for (std::uint64_t tx = 100; tx < 140; ++tx) wide.on_delivered(tx, true);
    wide.on_delivered(50, true);
    EXPECT_EQ(wide.allowance(), 41u);
    wide.decay();
    EXPECT_EQ(wide.allowance(), 36u);
    for (int i = 0; i < 40; ++i) wide.decay();
    EXPECT_EQ(wide.allowance(), 8u);  // not below where it started
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
