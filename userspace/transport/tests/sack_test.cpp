// The per-path receive map: what it records, what it refuses, how the sender's floor slides it.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>

extern "C" {
#include "mrc_sack.h"
}

namespace {

u64 bits0(const mrc_sack &s) {
    u64 bits[MRC_SACK_WORDS];
    mrc_sack_bits(&s, bits);
    return bits[0];
}

TEST(Sack, InOrderArrivalsMoveCum) {
    mrc_sack s;
    mrc_sack_init(&s, 100);
    for (uint32_t q = 100; q < 110; q++) EXPECT_EQ(mrc_sack_record(&s, q, 100), MRC_SACK_NEW);
    EXPECT_EQ(s.cum, 110u);
    EXPECT_FALSE(mrc_sack_has_gap(&s));
}

TEST(Sack, GapIsHeldInTheMapUntilFilled) {
    mrc_sack s;
    mrc_sack_init(&s, 0);
    EXPECT_EQ(mrc_sack_record(&s, 1, 0), MRC_SACK_NEW);
    EXPECT_EQ(mrc_sack_record(&s, 3, 0), MRC_SACK_NEW);
    EXPECT_EQ(s.cum, 0u);
    EXPECT_EQ(bits0(s), 0b101u);  // bit i is cum + 1 + i
    EXPECT_TRUE(mrc_sack_has_gap(&s));
    EXPECT_EQ(mrc_sack_record(&s, 0, 0), MRC_SACK_NEW);
    EXPECT_EQ(s.cum, 2u);
    EXPECT_EQ(bits0(s), 0b1u);
    EXPECT_EQ(mrc_sack_record(&s, 2, 0), MRC_SACK_NEW);
    EXPECT_EQ(s.cum, 4u);
    EXPECT_FALSE(mrc_sack_has_gap(&s));
}

TEST(Sack, CopiesAreDuplicates) {
    mrc_sack s;
    mrc_sack_init(&s, 0);
    mrc_sack_record(&s, 0, 0);
    mrc_sack_record(&s, 5, 0);
    EXPECT_EQ(mrc_sack_record(&s, 0, 0), MRC_SACK_DUPLICATE);
    EXPECT_EQ(mrc_sack_record(&s, 5, 0), MRC_SACK_DUPLICATE);
    EXPECT_EQ(s.cum, 1u);
}

TEST(Sack, WindowEndsAt256PastCum) {
    mrc_sack s;
    mrc_sack_init(&s, 7);
    EXPECT_EQ(mrc_sack_record(&s, 7 + 257, 7), MRC_SACK_BEYOND);
    EXPECT_EQ(s.cum, 7u);
    EXPECT_EQ(mrc_sack_record(&s, 7 + 256, 7), MRC_SACK_NEW);
    EXPECT_TRUE(mrc_sack_has(&s, 7 + 256));
    u64 bits[MRC_SACK_WORDS];
    mrc_sack_bits(&s, bits);
    EXPECT_EQ(bits[3], 1ULL << 63);
}

TEST(Sack, FloorSlidesOverWhatWillNeverCome) {
    mrc_sack s;
    mrc_sack_init(&s, 0);
    // 0 lost; 1..3 arrived; the sender then resolved 0 and says its floor is 4.
    for (uint32_t q = 1; q <= 3; q++) mrc_sack_record(&s, q, 0);
    EXPECT_EQ(s.cum, 0u);
    EXPECT_EQ(mrc_sack_record(&s, 5, 4), MRC_SACK_NEW);
    EXPECT_EQ(s.cum, 4u);  // 4 itself has not arrived
    EXPECT_TRUE(mrc_sack_has(&s, 5));
    EXPECT_EQ(mrc_sack_record(&s, 4, 4), MRC_SACK_NEW);
    EXPECT_EQ(s.cum, 6u);
}

TEST(Sack, FloorPastEverythingKnownClearsTheMap) {
    mrc_sack s;
    mrc_sack_init(&s, 0);
    mrc_sack_record(&s, 10, 0);
    EXPECT_EQ(mrc_sack_record(&s, 1000, 900), MRC_SACK_NEW);
    EXPECT_EQ(s.cum, 900u);
    EXPECT_TRUE(mrc_sack_has(&s, 1000));
    EXPECT_FALSE(mrc_sack_has(&s, 999));
}

TEST(Sack, FloorAheadOfTheSequenceIsIgnored) {
    mrc_sack s;
    mrc_sack_init(&s, 0);
    EXPECT_EQ(mrc_sack_record(&s, 2, 50), MRC_SACK_NEW);
    EXPECT_EQ(s.cum, 0u);
}

TEST(Sack, BeyondPacketMovesNothing) {
    mrc_sack s;
    mrc_sack_init(&s, 0);
    mrc_sack_record(&s, 3, 0);
    // A floor that would make it fit is still a floor 300 ahead of the map: refused whole.
    EXPECT_EQ(mrc_sack_record(&s, 600, 300), MRC_SACK_BEYOND);
    EXPECT_EQ(s.cum, 0u);
    EXPECT_TRUE(mrc_sack_has(&s, 3));
}

TEST(Sack, SequencesWrap) {
    mrc_sack s;
    uint32_t first = 0xfffffff0u;
    mrc_sack_init(&s, first);
    for (uint32_t i = 0; i < 40; i++)
        if (i != 20) {
            EXPECT_EQ(mrc_sack_record(&s, first + i, first), MRC_SACK_NEW);
        }
    EXPECT_EQ(s.cum, first + 20);
    EXPECT_TRUE(mrc_sack_has(&s, first + 21));
    EXPECT_TRUE(mrc_sack_has(&s, first + 5));
    mrc_sack_record(&s, first + 20, first);
    EXPECT_EQ(s.cum, first + 40);
}

// Against a plain set: random arrivals (copies included) from a sender whose floor rises; the map
// must say exactly what the set says within its window, and cum must be the first sequence at or
// past the floor that has not arrived.
TEST(Sack, PropertyMatchesASetOfArrivals) {
    for (uint32_t seed = 1; seed <= 50; seed++) {
        std::mt19937 rng(seed);
        uint32_t base = rng();
        mrc_sack s;
        mrc_sack_init(&s, base);
        std::set<uint32_t> arrived;  // offsets from base
        uint32_t floor = 0;
        for (int step = 0; step < 3000; step++) {
            if (rng() % 8 == 0) floor += rng() % 4;
            uint32_t q = floor + rng() % 255;
            bool fresh = !arrived.count(q);
            auto v = mrc_sack_record(&s, base + q, base + floor);
            ASSERT_EQ(v, fresh ? MRC_SACK_NEW : MRC_SACK_DUPLICATE) << "seed " << seed;
            arrived.insert(q);
            uint32_t cum = floor;
            while (arrived.count(cum)) cum++;
            ASSERT_EQ(s.cum, base + cum) << "seed " << seed << " step " << step;
            for (uint32_t i = 1; i <= MRC_SACK_BITS; i++)
                ASSERT_EQ(mrc_sack_has(&s, base + cum + i), arrived.count(cum + i) == 1);
        }
    }
}

}  // namespace

namespace {

// A stream's map: the same rules with no floor and a wider window.
TEST(StreamMap, RecordsPastThePathWindowAndCompletesInOrder) {
    mrc_stream_map m;
    mrc_stream_map_init(&m, 0xfffffff0u);
    for (uint32_t i = 1; i < MRC_STREAM_MAP_BITS; i++)
        ASSERT_EQ(mrc_stream_map_record(&m, 0xfffffff0u + i), MRC_SACK_NEW);
    EXPECT_EQ(mrc_stream_map_record(&m, 0xfffffff0u + MRC_STREAM_MAP_BITS), MRC_SACK_BEYOND);
    EXPECT_EQ(mrc_stream_map_record(&m, 0xfffffff5u), MRC_SACK_DUPLICATE);
    EXPECT_EQ(m.cum, 0xfffffff0u);
    EXPECT_EQ(mrc_stream_map_record(&m, 0xfffffff0u), MRC_SACK_NEW);
    EXPECT_EQ(m.cum, 0xfffffff0u + MRC_STREAM_MAP_BITS);
    EXPECT_TRUE(mrc_stream_map_has(&m, 0xfffffff0u + 7));
    EXPECT_FALSE(mrc_stream_map_has(&m, m.cum));
}

TEST(StreamMap, PropertyMatchesASetOfArrivals) {
    for (uint32_t seed = 1; seed <= 20; seed++) {
        std::mt19937 rng(seed);
        uint32_t base = rng();
        mrc_stream_map m;
        mrc_stream_map_init(&m, base);
        std::set<uint32_t> arrived;
        uint32_t cum = 0;
        for (int step = 0; step < 20000; step++) {
            uint32_t q = cum + rng() % (MRC_STREAM_MAP_BITS - 1);
            bool fresh = !arrived.count(q);
            ASSERT_EQ(mrc_stream_map_record(&m, base + q),
                      fresh ? MRC_SACK_NEW : MRC_SACK_DUPLICATE);
            arrived.insert(q);
            while (arrived.count(cum)) cum++;
            ASSERT_EQ(m.cum, base + cum);
        }
    }
}

}  // namespace
