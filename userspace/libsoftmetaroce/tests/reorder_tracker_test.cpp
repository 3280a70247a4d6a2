#include "softmetaroce/reorder_tracker.h"

#include <gtest/gtest.h>

#include "softmetaroce/fair_share.h"

namespace metaroce {
namespace {

TEST(ReorderTracker, ThresholdIsTheOldestOfTheLatestDelivered) {
    ReorderTracker t(3);
    t.on_delivered(10);
    t.on_delivered(4);
    EXPECT_EQ(t.loss_threshold(), std::nullopt);  // fewer than 3 delivered
    t.on_delivered(7);
    EXPECT_EQ(t.loss_threshold(), 4u);  // 4, 7, 10: anything sent before 4 is lost
    t.on_delivered(2);                  // older than all three: changes nothing
    EXPECT_EQ(t.loss_threshold(), 4u);
    t.on_delivered(12);
    EXPECT_EQ(t.loss_threshold(), 7u);
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
    EXPECT_EQ(tiny.hint(0), 1);  // never 0, which would mean "no hint"
}

}  // namespace
}  // namespace metaroce
