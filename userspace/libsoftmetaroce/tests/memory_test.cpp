#include "softmetaroce/memory.h"

#include <gtest/gtest.h>

namespace metaroce {
namespace {

TEST(MemoryModel, RegionChecks) {
    MemoryModel m;
    ASSERT_TRUE(m.register_region(7, 0x1000, 0x100, access::kRemoteWrite));
    EXPECT_FALSE(m.register_region(7, 0x5000, 0x10, access::kRemoteWrite));
    EXPECT_FALSE(m.register_region(8, ~std::uint64_t{0} - 4, 0x10, access::kRemoteWrite));
    EXPECT_EQ(m.check(7, 0x1000, 0x100, access::kRemoteWrite), AccessResult::Ok);
    EXPECT_EQ(m.check(7, 0x1000, 0x101, access::kRemoteWrite), AccessResult::OutOfBounds);
    EXPECT_EQ(m.check(7, 0xfff, 1, access::kRemoteWrite), AccessResult::OutOfBounds);
    EXPECT_EQ(m.check(7, 0x10ff, 1, access::kRemoteWrite), AccessResult::Ok);
    EXPECT_EQ(m.check(7, 0x1100, 0, access::kRemoteWrite), AccessResult::Ok);
    EXPECT_EQ(m.check(7, ~std::uint64_t{0}, 2, access::kRemoteWrite), AccessResult::OutOfBounds);
    EXPECT_EQ(m.check(7, 0x1000, 1, access::kRemoteRead), AccessResult::NoRights);
    EXPECT_EQ(m.check(9, 0x1000, 1, access::kRemoteWrite), AccessResult::BadKey);
    EXPECT_TRUE(m.deregister_region(7));
    EXPECT_EQ(m.check(7, 0x1000, 1, access::kRemoteWrite), AccessResult::BadKey);
}

TEST(MemoryModel, WriteAndRead) {
    MemoryModel m;
    ASSERT_TRUE(m.register_region(1, 100, 10, access::kRemoteWrite | access::kRemoteRead));
    const std::vector<std::uint8_t> data = {1, 2, 3};
    EXPECT_EQ(m.write(1, 105, data, access::kRemoteWrite), AccessResult::Ok);
    std::vector<std::uint8_t> out;
    EXPECT_EQ(m.read(1, 104, 5, access::kRemoteRead, out), AccessResult::Ok);
    EXPECT_EQ(out, (std::vector<std::uint8_t>{0, 1, 2, 3, 0}));
    EXPECT_EQ(m.write(1, 108, data, access::kRemoteWrite), AccessResult::OutOfBounds);
}

TEST(MemoryModel, ScatterAcrossSges) {
    MemoryModel m;
    ASSERT_TRUE(m.register_region(1, 0, 100, access::kLocalWrite));
    ASSERT_TRUE(m.register_region(2, 1000, 100, access::kLocalWrite));
    ASSERT_TRUE(m.register_region(3, 0, 100, access::kRemoteWrite));
    ReceiveWqe wqe{5, {{1, 10, 4}, {2, 1050, 6}}};
    EXPECT_EQ(wqe.total_length(), 10u);
    EXPECT_TRUE(m.valid_receive_buffer(wqe));
    EXPECT_FALSE(m.valid_receive_buffer(ReceiveWqe{6, {{3, 0, 4}}}));  // not local write
    EXPECT_FALSE(m.valid_receive_buffer(ReceiveWqe{6, {{1, 98, 4}}}));
    m.scatter(wqe, 2, std::vector<std::uint8_t>{1, 2, 3, 4, 5});
    EXPECT_EQ(m.gather(wqe, 10), (std::vector<std::uint8_t>{0, 0, 1, 2, 3, 4, 5, 0, 0, 0}));
    EXPECT_EQ(m.region_bytes(1)[12], 1);
    EXPECT_EQ(m.region_bytes(2)[50], 3);
}

}  // namespace
}  // namespace metaroce
