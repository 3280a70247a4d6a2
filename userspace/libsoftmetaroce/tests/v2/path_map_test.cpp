// Section 3 (the path map) and the map half of section 8 (the stream map).
#include "softmetaroce/v2/path_map.h"

#include <gtest/gtest.h>

#include <set>

#include "softmetaroce/sim/rng.h"
#include "softmetaroce/v2/stream_map.h"

namespace softmetaroce::v2 {
namespace {

bool bit(const std::array<uint64_t, 4>& b, unsigned i) { return (b[i / 64] >> (i % 64)) & 1; }

TEST(PathMap, InOrderArrivalsMoveCum) {
    PathMap m(100);
    EXPECT_EQ(m.cum(), 100u);
    EXPECT_FALSE(m.has(100));
    EXPECT_TRUE(m.has(99));  // below cum: arrived or skipped
    for (uint32_t q = 100; q < 1100; ++q) EXPECT_EQ(m.record(q, q), MapVerdict::New);
    EXPECT_EQ(m.cum(), 1100u);
    EXPECT_FALSE(m.has_gap());
    EXPECT_EQ(m.bits(), (std::array<uint64_t, 4>{}));
}

TEST(PathMap, GapSetsBitsAndCumStepsOverThem) {
    PathMap m(0);
    EXPECT_EQ(m.record(1, 0), MapVerdict::New);
    EXPECT_EQ(m.record(3, 0), MapVerdict::New);
    EXPECT_TRUE(m.has_gap());
    EXPECT_EQ(m.cum(), 0u);
    auto b = m.bits();
    EXPECT_TRUE(bit(b, 0));   // 1
    EXPECT_FALSE(bit(b, 1));  // 2
    EXPECT_TRUE(bit(b, 2));   // 3
    EXPECT_EQ(m.record(0, 0), MapVerdict::New);
    EXPECT_EQ(m.cum(), 2u);
    EXPECT_TRUE(bit(m.bits(), 0));  // 3 is now bit 0
    EXPECT_EQ(m.record(2, 0), MapVerdict::New);
    EXPECT_EQ(m.cum(), 4u);
    EXPECT_FALSE(m.has_gap());
}

TEST(PathMap, CopiesAreDuplicates) {
    PathMap m(10);
    EXPECT_EQ(m.record(10, 10), MapVerdict::New);
    EXPECT_EQ(m.record(12, 10), MapVerdict::New);
    EXPECT_EQ(m.record(10, 10), MapVerdict::Duplicate);  // below cum
    EXPECT_EQ(m.record(12, 10), MapVerdict::Duplicate);  // its bit set
    EXPECT_EQ(m.record(5, 5), MapVerdict::Duplicate);
    EXPECT_EQ(m.cum(), 11u);
}

TEST(PathMap, BeyondTheMapIsDroppedAndNothingMoves) {
    PathMap m(0);
    EXPECT_EQ(m.record(256, 0), MapVerdict::New);  // q - cum == 256: the last bit
    EXPECT_TRUE(bit(m.bits(), 255));
    EXPECT_EQ(m.record(257, 0), MapVerdict::Beyond);
    EXPECT_EQ(m.record(257, 1), MapVerdict::New);  // the floor makes room
    EXPECT_EQ(m.cum(), 1u);
    // Beyond max(cum, floor): the floor does not slide either.
    PathMap n(0);
    EXPECT_EQ(n.record(400, 100), MapVerdict::Beyond);
    EXPECT_EQ(n.cum(), 0u);
    EXPECT_EQ(n.record(356, 100), MapVerdict::New);
    EXPECT_EQ(n.cum(), 100u);
}

TEST(PathMap, FloorSlidesCumBeforeRecording) {
    PathMap m(0);
    m.record(1, 0);
    m.record(5, 0);
    EXPECT_EQ(m.cum(), 0u);
    // 0 will never be sent again: the floor 2 skips it (and 1, which had arrived).
    EXPECT_EQ(m.record(7, 2), MapVerdict::New);
    EXPECT_EQ(m.cum(), 2u);
    EXPECT_TRUE(m.has(5));
    EXPECT_TRUE(m.has(7));
    EXPECT_FALSE(m.has(6));
    // A floor onto an arrived sequence steps over the run after it.
    m.record(6, 2);
    EXPECT_EQ(m.record(9, 5), MapVerdict::New);
    EXPECT_EQ(m.cum(), 8u);
    // A floor far ahead clears the whole map.
    EXPECT_EQ(m.record(2000, 2000), MapVerdict::New);
    EXPECT_EQ(m.cum(), 2001u);
    EXPECT_FALSE(m.has_gap());
}

TEST(PathMap, FloorAheadOfSequenceIsIgnored) {
    PathMap m(0);
    EXPECT_EQ(m.record(3, 10), MapVerdict::New);
    EXPECT_EQ(m.cum(), 0u);
    EXPECT_TRUE(m.has_gap());
    // Beyond is then judged from cum alone.
    EXPECT_EQ(m.record(300, 301), MapVerdict::Beyond);
}

TEST(PathMap, FloorBehindCumChangesNothing) {
    PathMap m(50);
    for (uint32_t q = 50; q < 60; ++q) m.record(q, q);
    EXPECT_EQ(m.record(61, 40), MapVerdict::New);
    EXPECT_EQ(m.cum(), 60u);
}

TEST(PathMap, SerialArithmeticAcrossTheWrap) {
    PathMap m(0xfffffff0u);
    for (uint32_t i = 0; i < 0x20; i += 2)
        EXPECT_EQ(m.record(0xfffffff0u + i, 0xfffffff0u), MapVerdict::New);
    EXPECT_EQ(m.cum(), 0xfffffff1u);
    EXPECT_TRUE(m.has(0x0e));
    EXPECT_FALSE(m.has(0x0f));
    EXPECT_EQ(m.record(0x0f, 0x0f), MapVerdict::New);
    EXPECT_EQ(m.cum(), 0x10u);
}

// Against a set of arrivals, over random arrivals and floors (some ahead of their packet,
// so ignored), across the wrap.
TEST(PathMap, MatchesAReferenceSet) {
    metaroce::sim::SimRng rng(7);
    const uint32_t first = 0xffffff00u;
    PathMap m(first);
    std::set<uint32_t> arrived;  // offsets from first
    uint32_t floor = 100;        // offsets stay positive below
    for (int step = 0; step < 20000; ++step) {
        if (rng.below(8) == 0) floor += static_cast<uint32_t>(rng.below(40));
        const uint32_t q = floor + static_cast<uint32_t>(rng.below(300)) - 20;
        const uint32_t cum = m.cum() - first;
        // The rules of section 3 over unwrapped offsets.
        const bool use_floor = floor <= q;
        const uint32_t base = use_floor ? std::max(cum, floor) : cum;
        MapVerdict want;
        uint32_t c = cum;
        if (q > base + 256) {
            want = MapVerdict::Beyond;
        } else {
            c = base;
            while (arrived.count(c)) ++c;
            want = q < c || arrived.count(q) ? MapVerdict::Duplicate : MapVerdict::New;
            if (want == MapVerdict::New) arrived.insert(q);
            while (arrived.count(c)) ++c;
        }
        ASSERT_EQ(m.record(first + q, first + floor), want) << step;
        ASSERT_EQ(m.cum(), first + c) << step;
        const auto b = m.bits();
        for (unsigned i = 0; i < kSackBits; ++i)
            ASSERT_EQ(bit(b, i), arrived.count(c + 1 + i) == 1) << step << " bit " << i;
        ASSERT_EQ(m.has_gap(), b != (std::array<uint64_t, 4>{}));
    }
}

TEST(StreamMap, FourThousandNinetyFiveAheadAndNoFloor) {
    StreamMap m(7);
    EXPECT_EQ(m.record(7 + 4095), MapVerdict::New);
    EXPECT_EQ(m.record(7 + 4096), MapVerdict::Beyond);  // cum's own slot
    EXPECT_EQ(m.record(8), MapVerdict::New);
    EXPECT_EQ(m.cum(), 7u);  // waits for 7
    EXPECT_EQ(m.record(8), MapVerdict::Duplicate);
    EXPECT_TRUE(m.has(8));
    EXPECT_FALSE(m.has(9));
    for (uint32_t s = 9; s < 7 + 4095; ++s) m.record(s);
    EXPECT_EQ(m.cum(), 7u);
    EXPECT_EQ(m.record(7), MapVerdict::New);
    EXPECT_EQ(m.cum(), 7u + 4096);
    EXPECT_EQ(m.record(100), MapVerdict::Duplicate);  // a resend whose earlier copy arrived
}

TEST(StreamMap, RandomOrderAcrossTheWrap) {
    metaroce::sim::SimRng rng(3);
    const uint32_t first = 0xfffff000u;
    StreamMap m(first);
    std::set<uint32_t> arrived;
    for (int step = 0; step < 40000; ++step) {
        const uint32_t cum = m.cum() - first;
        const uint32_t s = rng.below(4) == 0
                               ? cum
                               : cum + static_cast<uint32_t>(rng.below(4100)) - (cum >= 2 ? 2 : 0);
        MapVerdict want = s < cum || arrived.count(s) ? MapVerdict::Duplicate
                          : s >= cum + 4096           ? MapVerdict::Beyond
                                                      : MapVerdict::New;
        ASSERT_EQ(m.record(first + s), want);
        if (want == MapVerdict::New) arrived.insert(s);
        uint32_t c = cum;
        while (arrived.count(c)) ++c;
        ASSERT_EQ(m.cum(), first + c);
    }
    EXPECT_GT(m.cum() - first, 10000u);
}

}  // namespace
}  // namespace softmetaroce::v2
