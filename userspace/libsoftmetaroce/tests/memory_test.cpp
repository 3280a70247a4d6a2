#include "softmetaroce/memory.h"

#include <gtest/gtest.h>

#include <cstring>

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

// A fast-registration region: no key names it until it is registered, then exactly the key of
// the registration in force, until that is invalidated; then it can be registered again.
TEST(MemoryModel, FastRegistrationLifecycle) {
    MemoryModel m;
    ASSERT_TRUE(m.register_region(7, 0x1000, 0x100, access::kRemoteWrite));
    const MemoryModel::FastRegId fr = m.alloc_fast_reg_region(0x200);
    EXPECT_FALSE(m.fast_reg_key(fr));
    EXPECT_FALSE(m.fast_reg_valid(0x4401));
    EXPECT_EQ(m.check(0x4401, 0x8000, 1, 0), AccessResult::BadKey);

    // Registration: within its room, under a key no region holds.
    EXPECT_FALSE(m.fast_register(fr, 0x4401, 0x8000, 0x201, access::kRemoteWrite));
    EXPECT_FALSE(m.fast_register(fr, 7, 0x8000, 0x100, access::kRemoteWrite));  // key taken
    EXPECT_FALSE(m.fast_register(fr, 0x4401, ~std::uint64_t{0} - 4, 0x10, 0));  // wraps
    EXPECT_FALSE(m.fast_register(99, 0x4401, 0x8000, 0x100, 0));                // no such region
    ASSERT_TRUE(
        m.fast_register(fr, 0x4401, 0x8000, 0x100, access::kRemoteWrite | access::kLocalWrite));
    EXPECT_EQ(m.fast_reg_key(fr), 0x4401u);
    EXPECT_TRUE(m.fast_reg_valid(0x4401));
    EXPECT_FALSE(m.fast_reg_valid(7));  // an ordinary region is no fast-registration region
    EXPECT_FALSE(m.register_region(0x4401, 0x9000, 0x10, 0));     // its key is taken too
    EXPECT_FALSE(m.fast_register(fr, 0x4402, 0x8000, 0x100, 0));  // registered already

    // Found under its key like any region, with the registration's bounds and rights.
    EXPECT_EQ(m.check(0x4401, 0x8000, 0x100, access::kRemoteWrite), AccessResult::Ok);
    EXPECT_EQ(m.check(0x4401, 0x8000, 0x101, access::kRemoteWrite), AccessResult::OutOfBounds);
    EXPECT_EQ(m.check(0x4401, 0x8000, 1, access::kRemoteRead), AccessResult::NoRights);
    const std::vector<std::uint8_t> data = {1, 2, 3};
    EXPECT_EQ(m.write(0x4401, 0x8010, data, access::kRemoteWrite), AccessResult::Ok);
    EXPECT_EQ(m.region_bytes(0x4401)[0x11], 2);
    EXPECT_TRUE(m.valid_receive_buffer(ReceiveWqe{1, {{0x4401, 0x8000, 0x10}}}));

    // Invalidation (local here; a SEND with invalidate does the same at completion): the key
    // names nothing from then on, the bytes stay readable by id.
    EXPECT_FALSE(m.invalidate(7));       // not a fast-registration region
    EXPECT_FALSE(m.invalidate(0x4402));  // not its key
    EXPECT_TRUE(m.fast_reg_valid(0x4401));
    EXPECT_TRUE(m.invalidate(0x4401));
    EXPECT_FALSE(m.fast_reg_valid(0x4401));
    EXPECT_FALSE(m.fast_reg_key(fr));
    EXPECT_FALSE(m.invalidate(0x4401));  // ended already
    EXPECT_EQ(m.check(0x4401, 0x8000, 1, 0), AccessResult::BadKey);
    EXPECT_EQ(m.write(0x4401, 0x8010, data, access::kRemoteWrite), AccessResult::BadKey);
    EXPECT_TRUE(m.region_bytes(0x4401).empty());
    EXPECT_FALSE(m.valid_receive_buffer(ReceiveWqe{1, {{0x4401, 0x8000, 0x10}}}));
    ASSERT_EQ(m.fast_reg_bytes(fr).size(), 0x100u);
    EXPECT_EQ(m.fast_reg_bytes(fr)[0x12], 3);
    EXPECT_EQ(m.check(7, 0x1000, 1, access::kRemoteWrite), AccessResult::Ok);  // untouched

    // Registered again under another key: a new registration of fresh bytes; the old key
    // stays dead, and is free for any region.
    ASSERT_TRUE(m.fast_register(fr, 0x4402, 0xa000, 0x40, access::kRemoteRead));
    EXPECT_TRUE(m.fast_reg_valid(0x4402));
    EXPECT_FALSE(m.fast_reg_valid(0x4401));
    EXPECT_EQ(m.check(0x4402, 0xa000, 0x40, access::kRemoteRead), AccessResult::Ok);
    EXPECT_EQ(m.region_bytes(0x4402)[0x12], 0);
    EXPECT_TRUE(m.register_region(0x4401, 0x9000, 0x10, 0));

    EXPECT_TRUE(m.free_fast_reg_region(fr));
    EXPECT_FALSE(m.fast_reg_valid(0x4402));
    EXPECT_EQ(m.check(0x4402, 0xa000, 1, 0), AccessResult::BadKey);
    EXPECT_FALSE(m.free_fast_reg_region(fr));
}

TEST(MemoryModel, FastRegistrationRegionsAreDistinct) {
    MemoryModel m;
    const MemoryModel::FastRegId a = m.alloc_fast_reg_region(64);
    const MemoryModel::FastRegId b = m.alloc_fast_reg_region(64);
    EXPECT_NE(a, b);
    ASSERT_TRUE(m.fast_register(a, 0x100, 0x1000, 64, access::kRemoteWrite));
    EXPECT_FALSE(m.fast_register(b, 0x100, 0x2000, 64, access::kRemoteWrite));  // a's key
    ASSERT_TRUE(m.fast_register(b, 0x200, 0x2000, 64, access::kRemoteWrite));
    EXPECT_TRUE(m.invalidate(0x100));
    EXPECT_TRUE(m.fast_reg_valid(0x200));
    EXPECT_FALSE(m.fast_reg_valid(0x100));
    // Once a's registration ended, b cannot take its key while registered, but a can.
    EXPECT_FALSE(m.fast_register(b, 0x100, 0x2000, 64, 0));
    EXPECT_TRUE(m.fast_register(a, 0x100, 0x1000, 64, 0));
}

TEST(MemoryModel, AtomicsOnNativeWords) {
    MemoryModel m;
    ASSERT_TRUE(m.register_region(1, 0x1000, 32, access::kRemoteAtomic));
    ASSERT_TRUE(m.register_region(2, 0x2000, 32, access::kRemoteWrite | access::kRemoteRead));
    std::uint64_t old = 0;
    ASSERT_TRUE(m.store_word(1, 0x1008, 10));
    EXPECT_EQ(m.atomic(1, 0x1008, AtomicOp::FetchAdd, 5, 0, access::kRemoteAtomic, old),
              AccessResult::Ok);
    EXPECT_EQ(old, 10u);
    EXPECT_EQ(m.load_word(1, 0x1008), 15u);
    // Modulo 2^64.
    EXPECT_EQ(m.atomic(1, 0x1008, AtomicOp::FetchAdd, ~0ull, 0, access::kRemoteAtomic, old),
              AccessResult::Ok);
    EXPECT_EQ(m.load_word(1, 0x1008), 14u);
    // Compare and swap: a miss leaves the word, a hit stores.
    EXPECT_EQ(m.atomic(1, 0x1008, AtomicOp::CompareSwap, 99, 13, access::kRemoteAtomic, old),
              AccessResult::Ok);
    EXPECT_EQ(old, 14u);
    EXPECT_EQ(m.load_word(1, 0x1008), 14u);
    EXPECT_EQ(m.atomic(1, 0x1008, AtomicOp::CompareSwap, 99, 14, access::kRemoteAtomic, old),
              AccessResult::Ok);
    EXPECT_EQ(m.load_word(1, 0x1008), 99u);
    // The word is the host's integer: its bytes are in host order.
    std::uint64_t bytes = 0;
    std::memcpy(&bytes, m.region_bytes(1).data() + 8, 8);
    EXPECT_EQ(bytes, 99u);
    // Refusals change nothing.
    EXPECT_EQ(m.atomic(1, 0x1004, AtomicOp::FetchAdd, 1, 0, access::kRemoteAtomic, old),
              AccessResult::Misaligned);
    EXPECT_EQ(m.atomic(1, 0x1020, AtomicOp::FetchAdd, 1, 0, access::kRemoteAtomic, old),
              AccessResult::OutOfBounds);
    EXPECT_EQ(m.atomic(1, 0x101c, AtomicOp::FetchAdd, 1, 0, access::kRemoteAtomic, old),
              AccessResult::OutOfBounds);
    EXPECT_EQ(m.atomic(2, 0x2000, AtomicOp::FetchAdd, 1, 0, access::kRemoteAtomic, old),
              AccessResult::NoRights);
    EXPECT_EQ(m.atomic(3, 0x2000, AtomicOp::FetchAdd, 1, 0, access::kRemoteAtomic, old),
              AccessResult::BadKey);
    EXPECT_EQ(m.load_word(1, 0x1008), 99u);
    EXPECT_EQ(m.load_word(2, 0x2000), 0u);
}

}  // namespace
}  // namespace metaroce
