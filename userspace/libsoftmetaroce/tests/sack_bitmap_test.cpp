#include "softmetaroce/sack_bitmap.h"

#include <gtest/gtest.h>

#include <set>

#include "softmetaroce/sim/rng.h"

namespace metaroce {
namespace {

TEST(SackBitmap, WireBitOrderIsMsbFirst) {
    SackBitmap b(100);
    b.mark(101);  // bit 0
    b.mark(132);  // bit 31
    b.mark(133);  // bit 32
    b.mark(356);  // bit 255
    const SackWords w = b.to_wire();
    EXPECT_EQ(w[0], 0x80000001u);
    EXPECT_EQ(w[1], 0x80000000u);
    EXPECT_EQ(w[7], 0x00000001u);
    for (int i = 2; i < 7; ++i) EXPECT_EQ(w[i], 0u);
    EXPECT_EQ(SackBitmap::from_wire(100, w), b);
}

TEST(SackBitmap, WireRoundTripOfEveryBit) {
    for (unsigned i = 0; i < SackBitmap::kBits; ++i) {
        SackWords w{};
        w[i / 32] = 1u << (31 - i % 32);
        const SackBitmap b = SackBitmap::from_wire(0xfffff0, w);
        for (unsigned j = 0; j < SackBitmap::kBits; ++j) EXPECT_EQ(b.bit(j), i == j);
        EXPECT_TRUE(b.received(psn_add(0xfffff0, 1 + i)));
        EXPECT_EQ(b.to_wire(), w);
    }
}

TEST(SackBitmap, Classification) {
    SackBitmap b(1000);
    EXPECT_EQ(b.locate(999), WindowPosition::Duplicate);
    EXPECT_EQ(b.locate(1000), WindowPosition::New);
    EXPECT_EQ(b.locate(1256), WindowPosition::New);  // cum + 256: the last bit
    EXPECT_EQ(b.locate(1257), WindowPosition::Beyond);
    EXPECT_EQ(b.mark(1005), 0u);
    EXPECT_EQ(b.locate(1005), WindowPosition::Duplicate);
    EXPECT_TRUE(b.has_gap());
    EXPECT_FALSE(b.received(1000));
    EXPECT_TRUE(b.received(999));
}

TEST(SackBitmap, CumulativeAdvanceOverRun) {
    SackBitmap b(0);
    for (Psn p = 1; p < 200; ++p) EXPECT_EQ(b.mark(p), 0u);
    EXPECT_EQ(b.count(), 199u);
    EXPECT_EQ(b.mark(0), 200u);
    EXPECT_EQ(b.cum_psn(), 200u);
    EXPECT_FALSE(b.has_gap());
}

TEST(SackBitmap, FullWindowThenFill) {
    SackBitmap b(0xffff80);  // the window straddles the PSN wrap
    for (std::uint32_t i = 1; i <= 256; ++i) b.mark(psn_add(0xffff80, i));
    EXPECT_EQ(b.count(), 256u);
    EXPECT_EQ(b.mark(0xffff80), 257u);
    EXPECT_EQ(b.cum_psn(), psn_add(0xffff80, 257));
    EXPECT_EQ(b.count(), 0u);
}

// The bitmap always describes exactly the set of PSNs marked, under any arrival order.
TEST(SackBitmap, MatchesReferenceSetUnderRandomArrivals) {
    for (std::uint64_t seed = 1; seed <= 50; ++seed) {
        sim::SimRng rng(seed);
        const Psn start = static_cast<Psn>(rng.below(1u << 24));
        SackBitmap b(start);
        std::set<std::int64_t> received;  // offsets from start
        std::int64_t cum = 0;
        for (int step = 0; step < 2000; ++step) {
            const std::int64_t offset = cum + static_cast<std::int64_t>(rng.below(257));
            const Psn psn = psn_add(start, offset);
            const bool was_new = received.count(offset) == 0;
            EXPECT_EQ(b.locate(psn), was_new ? WindowPosition::New : WindowPosition::Duplicate);
            b.mark(psn);
            received.insert(offset);
            while (received.count(cum) != 0) ++cum;
            ASSERT_EQ(b.cum_psn(), psn_add(start, cum));
            for (std::int64_t o = cum - 3; o <= cum + 257; ++o) {
                ASSERT_EQ(b.received(psn_add(start, o)), o < cum || received.count(o) != 0)
                    << "seed " << seed << " offset " << o;
            }
            // The wire form carries exactly the same set.
            ASSERT_EQ(SackBitmap::from_wire(b.cum_psn(), b.to_wire()), b);
        }
    }
}

}  // namespace
}  // namespace metaroce
