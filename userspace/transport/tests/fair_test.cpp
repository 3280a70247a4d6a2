// The receiver's fair share: equal parts for senders that use them, twice its demand for one that
// does not, the rest to the others; and the window a sender makes of its share.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>

extern "C" {
#include "mrc_fair.h"
}

namespace {

struct Flow {
    uint32_t conn, mbps;
};

// Each flow at its rate, interleaved, for two periods ending at @end, so the receiver knows each
// one's rate over a whole period.
void sends(mrc_fair_rx &f, std::initializer_list<Flow> flows, u64 end) {
    const uint32_t step = 10;  // us between arrivals
    for (u64 t = end - 2 * MRC_FAIR_PERIOD_US; t <= end; t += step)
        for (const Flow &fl : flows) mrc_fair_rx_arrival(&f, fl.conn, fl.mbps * step / 8, t);
}

TEST(Fair, ASenderAloneGetsEverything) {
    mrc_fair_rx f;
    mrc_fair_rx_init(&f, 10000);
    EXPECT_EQ(mrc_fair_rx_share(&f, 1, 100), MRC_FAIR_FULL);
    sends(f, {{1, 9000}}, 5000);
    EXPECT_EQ(mrc_fair_rx_share(&f, 1, 5000), MRC_FAIR_FULL);
}

TEST(Fair, HeavySendersSplitEqually) {
    mrc_fair_rx f;
    mrc_fair_rx_init(&f, 10000);
    sends(f, {{1, 10000}, {2, 10000}, {3, 10000}, {4, 10000}}, 5000);
    for (uint32_t c = 1; c <= 4; c++) EXPECT_EQ(mrc_fair_rx_share(&f, c, 5000), MRC_FAIR_FULL / 4);
    // A fifth sender, not seen yet, is counted as one about to be.
    EXPECT_EQ(mrc_fair_rx_share(&f, 9, 5000), MRC_FAIR_FULL / 5);
}

TEST(Fair, ALightSenderLeavesItsRestToTheOthers) {
    mrc_fair_rx f;
    mrc_fair_rx_init(&f, 10000);
    sends(f, {{1, 1000}, {2, 9000}, {3, 9000}}, 5000);  // 1 sends a tenth of the link
    uint32_t light = mrc_fair_rx_share(&f, 1, 5000);
    EXPECT_NEAR(light, MRC_FAIR_FULL / 5, MRC_FAIR_FULL / 100);  // twice its tenth
    EXPECT_NEAR(mrc_fair_rx_share(&f, 2, 5000), (MRC_FAIR_FULL - light) / 2, 1);
}

TEST(Fair, ASenderUnderOneMbitStillHasADemand) {
    mrc_fair_rx f;
    mrc_fair_rx_init(&f, 10);  // a 10 Mbit/s receiver
    // 1 byte every 10 us: 0.8 Mbit/s, granted twice that of 10. Whole Mbit/s would make it 0.
    sends(f, {{1, 1}, {2, 10}}, 5000);
    EXPECT_NEAR(mrc_fair_rx_share(&f, 1, 5000), MRC_FAIR_FULL * 16 / 100, MRC_FAIR_FULL / 100);
}

// A light sender's demand is of the link as it is now: on a link renegotiated from 10 to 1
// Gbit/s, 100 Mbit/s is a tenth of it, no longer a hundredth.
TEST(Fair, ARenegotiatedLinkSharesItsNewRate) {
    mrc_fair_rx f;
    mrc_fair_rx_init(&f, 10000);
    sends(f, {{1, 100}, {2, 9000}}, 5000);
    EXPECT_NEAR(mrc_fair_rx_share(&f, 1, 5000), MRC_FAIR_FULL * 2 / 100, MRC_FAIR_FULL / 200);
    mrc_fair_rx_set_capacity(&f, 1000);
    EXPECT_NEAR(mrc_fair_rx_share(&f, 1, 5000), MRC_FAIR_FULL * 2 / 10, MRC_FAIR_FULL / 100);
}

// A receiver that does not know its rate caps no one by demand; it sends no grant at all (the
// soft-NIC leaves the share out when the capacity is 0), and nothing divides by it.
TEST(Fair, AnUnknownCapacityCapsNoOne) {
    mrc_fair_rx f;
    mrc_fair_rx_init(&f, 0);
    sends(f, {{1, 100}, {2, 9000}}, 5000);
    EXPECT_EQ(mrc_fair_rx_share(&f, 1, 5000), MRC_FAIR_FULL / 2);
}

TEST(Fair, SilentSendersStopCounting) {
    mrc_fair_rx f;
    mrc_fair_rx_init(&f, 10000);
    sends(f, {{1, 10000}, {2, 10000}}, 5000);
    EXPECT_EQ(mrc_fair_rx_share(&f, 1, 5000), MRC_FAIR_FULL / 2);
    EXPECT_EQ(mrc_fair_rx_share(&f, 1, 5000 + 2 * MRC_FAIR_PERIOD_US), MRC_FAIR_FULL);
}

TEST(Fair, MoreSendersThanTheTableReplaceTheOldest) {
    mrc_fair_rx f;
    mrc_fair_rx_init(&f, 10000);
    for (uint32_t c = 0; c < MRC_FAIR_SENDERS + 8; c++) mrc_fair_rx_arrival(&f, c, 4096, 100 + c);
    uint32_t tracked = 0;
    for (auto &s : f.senders) tracked += s.conn >= 8;
    EXPECT_EQ(tracked, uint32_t{MRC_FAIR_SENDERS});
}

TEST(Fair, AShareBecomesAWindowOfCapacityTimesRtt) {
    // 100 Gbit/s, 10 us, 4 KiB packets: 125,000 bytes, 30 packets in all.
    EXPECT_EQ(mrc_fair_window(MRC_FAIR_FULL, 100000, 10, 4096), 30u);
    EXPECT_EQ(mrc_fair_window(MRC_FAIR_FULL / 2, 100000, 10, 4096), 15u);
    // An incast of a hundred still leaves each enough to show a gap.
    EXPECT_EQ(mrc_fair_window(MRC_FAIR_FULL / 100, 100000, 10, 4096),
              uint32_t{MRC_FAIR_MIN_WINDOW});
}

}  // namespace
