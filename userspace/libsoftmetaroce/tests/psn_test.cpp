#include "softmetaroce/psn.h"

#include <gtest/gtest.h>

namespace metaroce {
namespace {

TEST(Psn, AddWraps) {
    EXPECT_EQ(psn_add(0xffffff, 1), 0u);
    EXPECT_EQ(psn_add(0xfffffe, 5), 3u);
    EXPECT_EQ(psn_add(2, -3), 0xffffffu);
    EXPECT_EQ(psn_next(0xffffff), 0u);
}

TEST(Psn, SerialOrderAcrossWrap) {
    EXPECT_TRUE(psn_before(0xffffff, 0));
    EXPECT_FALSE(psn_before(0, 0xffffff));
    EXPECT_EQ(psn_diff(5, 0xfffffd), 8);
    EXPECT_EQ(psn_diff(0xfffffd, 5), -8);
    EXPECT_TRUE(psn_in_range(1, 0xffffff, 3));
    EXPECT_FALSE(psn_in_range(2, 0xffffff, 3));
    EXPECT_FALSE(psn_in_range(0xfffffe, 0xffffff, 3));
}

TEST(Psn, DiffIsAntisymmetricExceptAtHalfRange) {
    for (std::uint32_t a = 0; a < (1u << 24); a += 0x12345) {
        for (std::uint32_t b = 7; b < (1u << 24); b += 0x23456) {
            const std::int32_t d = psn_diff(a, b);
            EXPECT_GE(d, -(1 << 23));
            EXPECT_LT(d, 1 << 23);
            EXPECT_EQ(psn_add(b, d), a);
            if (d != -(1 << 23)) {
                EXPECT_EQ(psn_diff(b, a), -d);
            }
        }
    }
}

}  // namespace
}  // namespace metaroce
