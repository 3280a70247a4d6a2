// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Memory regions: registration checks, keys, MRs of every alignment and
// size from 1 byte to hundreds of MiB (and a 1 GiB registration), user
// iova, every transfer checked byte for byte including the bytes around it.
#include <sys/mman.h>
#include <unistd.h>

#include <set>

#include "verbs_env.hpp"

namespace mrt {
namespace {

class Mr : public VerbsTest {};

TEST_F(Mr, AccessFlagChecks)
{
	Buf mem(65536);
	struct {
		const char *what;
		int access;
		int err;
	} cases[] = {
		{"REMOTE_WRITE without LOCAL_WRITE", IBV_ACCESS_REMOTE_WRITE,
		 EINVAL},
		{"REMOTE_ATOMIC without LOCAL_WRITE", IBV_ACCESS_REMOTE_ATOMIC,
		 EINVAL},
		{"unknown access bit", IBV_ACCESS_LOCAL_WRITE | (1 << 15), EINVAL},
		// ib_core's errno: EINVAL on Linux 6.1, EOPNOTSUPP later.
		{"ON_DEMAND without ODP", IBV_ACCESS_LOCAL_WRITE |
						  IBV_ACCESS_ON_DEMAND,
		 EINVAL},
	};
	for (const auto &c : cases) {
		errno = 0;
		ibv_mr *mr = ibv_reg_mr(A().pd, mem.p, mem.len, c.access);
		int err = errno;
		EXPECT_EQ(mr, nullptr) << c.what;
		if (c.err == EINVAL && (c.access & IBV_ACCESS_ON_DEMAND)) {
			EXPECT_TRUE(err == EINVAL || err == EOPNOTSUPP)
				<< c.what << ": " << errstr(err);
		} else {
			EXPECT_EQ(err, c.err) << c.what << ": " << errstr(err);
		}
		if (mr)
			ibv_dereg_mr(mr);
	}
	// Every legal combination registers.
	for (int access : std::initializer_list<int>{0, IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_READ,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
			   kRcAccess, kRcAccess | IBV_ACCESS_REMOTE_ATOMIC}) {
		ibv_mr *mr = ibv_reg_mr(A().pd, mem.p, mem.len, access);
		EXPECT_NE(mr, nullptr) << "access 0x" << std::hex << access
				       << ": " << errstr(errno);
		if (mr) {
			EXPECT_EQ(mr->length, mem.len);
			EXPECT_EQ(mr->addr, mem.p);
			EXPECT_EQ(ibv_dereg_mr(mr), 0);
		}
	}
}

TEST_F(Mr, BadRangesRefused)
{
	long page = sysconf(_SC_PAGESIZE);
	Buf mem(page);

	errno = 0;
	ibv_mr *mr = ibv_reg_mr(A().pd, mem.p, 0, kLocalWrite);
	EXPECT_EQ(mr, nullptr) << "zero length";
	EXPECT_EQ(errno, EINVAL) << errstr(errno);
	if (mr)
		ibv_dereg_mr(mr);

	// Beyond max_mr_size.
	uint64_t too_big = A().dev_attr.max_mr_size + page;
	errno = 0;
	mr = ibv_reg_mr(A().pd, mem.p, too_big, kLocalWrite);
	EXPECT_EQ(mr, nullptr) << "beyond max_mr_size";
	EXPECT_EQ(errno, EINVAL) << errstr(errno);
	if (mr)
		ibv_dereg_mr(mr);

	// Memory that is not mapped.
	void *hole = mmap(nullptr, 16 * page, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(hole, MAP_FAILED);
	munmap(hole, 16 * page);
	errno = 0;
	mr = ibv_reg_mr(A().pd, hole, 16 * page, kLocalWrite);
	EXPECT_EQ(mr, nullptr) << "unmapped memory";
	EXPECT_EQ(errno, EFAULT) << errstr(errno);
	if (mr)
		ibv_dereg_mr(mr);

	// An iova whose offset within the page differs from the address's.
	errno = 0;
	mr = ibv_reg_mr_iova(A().pd, mem.p + 8, 64, 0x100000 + 16, kLocalWrite);
	EXPECT_EQ(mr, nullptr) << "iova page offset mismatch";
	EXPECT_EQ(errno, EINVAL) << errstr(errno);
	if (mr)
		ibv_dereg_mr(mr);
}

TEST_F(Mr, KeysAreDistinct)
{
	Buf mem(1 << 20);
	std::vector<ibv_mr *> mrs;
	std::set<uint32_t> lkeys, rkeys;

	for (int i = 0; i < 200; i++) {
		ibv_mr *mr = ibv_reg_mr(A().pd, mem.p + 4096 * (i % 256), 4096,
					kRcAccess);
		ASSERT_NE(mr, nullptr) << i << ": " << errstr(errno);
		mrs.push_back(mr);
		lkeys.insert(mr->lkey);
		rkeys.insert(mr->rkey);
	}
	EXPECT_EQ(lkeys.size(), mrs.size());
	EXPECT_EQ(rkeys.size(), mrs.size());
	for (ibv_mr *mr : mrs) {
		EXPECT_EQ(ibv_dereg_mr(mr), 0);
	}
}

// A peer that learns one rkey must not be able to guess the next: keys of
// MRs registered one after the other share no stride, neither in their
// high bits (an index above a random byte) nor in their low bits (an
// index below random bits), and a key freed and registered again differs
// in more than its low byte.
TEST_F(Mr, KeysAreUnpredictable)
{
	Buf mem(65536);
	std::vector<ibv_mr *> mrs;
	int high_steps = 0, low_steps = 0;

	for (int i = 0; i < 64; i++) {
		ibv_mr *mr = ibv_reg_mr(A().pd, mem.p, 4096, kRcAccess);
		ASSERT_NE(mr, nullptr) << i << ": " << errstr(errno);
		mrs.push_back(mr);
	}
	for (size_t i = 1; i < mrs.size(); i++) {
		uint32_t prev = mrs[i - 1]->rkey, cur = mrs[i]->rkey;

		high_steps += (cur >> 8) == (prev >> 8) + 1;
		low_steps += (cur & 0xfffff) == (prev & 0xfffff) + 1;
	}
	EXPECT_LT(high_steps, 4) << "keys step by 256";
	EXPECT_LT(low_steps, 4) << "keys' low bits step by 1";

	uint32_t old_key = mrs.back()->rkey;
	ASSERT_EQ(ibv_dereg_mr(mrs.back()), 0);
	mrs.pop_back();
	ibv_mr *again = ibv_reg_mr(A().pd, mem.p, 4096, kRcAccess);
	ASSERT_NE(again, nullptr) << errstr(errno);
	EXPECT_NE(again->rkey >> 8, old_key >> 8);
	mrs.push_back(again);
	for (ibv_mr *mr : mrs) {
		EXPECT_EQ(ibv_dereg_mr(mr), 0);
	}
}

TEST_F(Mr, OneByteMrsAtOddAddresses)
{
	Qp qa(A()), qb(B());
	connect(qa, qb);
	// 1-byte MRs: the last byte of a page, and the second byte of one.
	Buf src(A().pd, 1, kRcAccess, 4095), dst(B().pd, 1, kRcAccess, 1);
	Buf back(A().pd, 1, kRcAccess, 2049), rcv(B().pd, 1, kRcAccess, 7);
	src.p[0] = 0x5a;
	dst.p[-1] = dst.p[1] = 0xee;
	back.p[-1] = back.p[1] = 0xee;
	rcv.p[-1] = rcv.p[1] = 0xee;

	EXPECT_WC(run1(qa, write_wr(src, 0, dst, 0, 1, 1)), 1, IBV_WC_SUCCESS,
		  IBV_WC_RDMA_WRITE);
	EXPECT_EQ(dst.p[0], 0x5a);
	dst.p[0] = 0xa5;
	EXPECT_WC(run1(qa, read_wr(back, 0, dst, 0, 1, 2)), 2, IBV_WC_SUCCESS,
		  IBV_WC_RDMA_READ);
	EXPECT_EQ(back.p[0], 0xa5);
	ASSERT_EQ(post_recv(qb.qp, rcv, 3), 0);
	EXPECT_WC(run1(qa, send_wr(src, 0, 1, 4)), 4, IBV_WC_SUCCESS,
		  IBV_WC_SEND);
	ibv_wc wc = poll1(qb.rcq);
	EXPECT_WC(wc, 3, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(wc.byte_len, 1u);
	EXPECT_EQ(rcv.p[0], 0x5a);
	for (const Buf *b : {&dst, &back, &rcv}) {
		EXPECT_EQ(b->p[-1], 0xee) << "byte before the MR written";
		EXPECT_EQ(b->p[1], 0xee) << "byte after the MR written";
	}
}

// WRITEs and READs at odd offsets and lengths across page boundaries,
// against a shadow copy of the target; guard bytes around both MRs.
TEST_F(Mr, OddOffsetsAcrossPages)
{
	const size_t len = 3 * 4096 + 123;
	Qp qa(A(), {.send_wr = 64}), qb(B());
	connect(qa, qb);
	Buf src(A().pd, len, kRcAccess, 4001), dst(B().pd, len, kRcAccess, 77);
	Buf lcl(A().pd, len, kRcAccess, 3);
	std::vector<uint8_t> shadow(len), lshadow(len);
	fill(src.p, len, 21);
	memset(dst.p - 77, 0xee, len + 77);
	memset(shadow.data(), 0xee, len);
	memset(lcl.p - 3, 0xdd, len + 3);
	memset(lshadow.data(), 0xdd, len);
	uint8_t after_dst = dst.p[len] = 0xcc, after_lcl = lcl.p[len] = 0xcc;

	const struct {
		size_t soff, doff, n;
	} ops[] = {
		{0, 0, 1}, {1, 4095, 2}, {3, 4094, 4097}, {4090, 8190, 10},
		{17, 1, 4096}, {5, 4096 * 3, 123}, {len - 1, 0, 1},
		{0, len - 1, 1}, {2, 3, len - 5}, {100, 200, 0},
		{4096, 4096, 4096}, {1, 0, len - 1},
	};
	uint64_t id = 0;
	for (const auto &o : ops) {
		SCOPED_TRACE(testing::Message() << "write src+" << o.soff
						<< " -> dst+" << o.doff
						<< " len " << o.n);
		EXPECT_WC(run1(qa, write_wr(src, o.soff, dst, o.doff, o.n, id)),
			  id, IBV_WC_SUCCESS);
		id++;
		memcpy(shadow.data() + o.doff, src.p + o.soff, o.n);
		ASSERT_TRUE(same_bytes(dst.p, shadow.data(), len));
	}
	EXPECT_TRUE(all_bytes(dst.p - 77, 77, 0xee));
	EXPECT_EQ(dst.p[len], after_dst);

	for (const auto &o : ops) {
		SCOPED_TRACE(testing::Message() << "read dst+" << o.doff
						<< " -> lcl+" << o.soff
						<< " len " << o.n);
		EXPECT_WC(run1(qa, read_wr(lcl, o.soff, dst, o.doff, o.n, id)),
			  id, IBV_WC_SUCCESS);
		id++;
		memcpy(lshadow.data() + o.soff, shadow.data() + o.doff, o.n);
		ASSERT_TRUE(same_bytes(lcl.p, lshadow.data(), len));
	}
	EXPECT_TRUE(all_bytes(lcl.p - 3, 3, 0xdd));
	EXPECT_EQ(lcl.p[len], after_lcl);
}

TEST_F(Mr, ManyPages)
{
	const size_t len = 8 << 20;
	Qp qa(A()), qb(B());
	connect(qa, qb);
	Buf src(A().pd, len, kRcAccess, 100), dst(B().pd, len, kRcAccess, 0);
	Buf back(A().pd, len, kRcAccess, 4000);
	fill(src.p, len, 22);

	EXPECT_WC(run1(qa, write_wr(src, 0, dst, 0, len, 1)), 1, IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(dst.p, len, 22));
	EXPECT_WC(run1(qa, read_wr(back, 0, dst, 0, len, 2)), 2, IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(back.p, len, 22));
	memset(dst.p, 0, len);
	ASSERT_EQ(post_recv(qb.qp, {dst.sge(1, len - 1)}, 3), 0);
	EXPECT_WC(run1(qa, send_wr(src, 1, len - 1, 4)), 4, IBV_WC_SUCCESS);
	ibv_wc wc = poll1(qb.rcq);
	EXPECT_WC(wc, 3, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(wc.byte_len, len - 1);
	EXPECT_TRUE(has_pattern(dst.p + 1, len - 1, 22, 1));
	EXPECT_EQ(dst.p[0], 0);
}

// MRs with a chosen iova: remote addresses and local SGE addresses are in
// the MR's iova space.
TEST_F(Mr, UserIova)
{
	const size_t len = 5 * 4096;
	Qp qa(A()), qb(B());
	connect(qa, qb);
	Buf src(A().pd, len, kRcAccess, 123, 0x7000000000ULL + 123);
	Buf dst(B().pd, len, kRcAccess, 456, 0x100000000000ULL + 456);
	ASSERT_EQ(src.mr->addr, static_cast<void *>(src.p));
	fill(src.p, len, 23);

	EXPECT_WC(run1(qa, write_wr(src, 10, dst, 20, len - 30, 1)), 1,
		  IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(dst.p + 20, len - 30, 23, 10));
	memset(src.p, 0, len);
	EXPECT_WC(run1(qa, read_wr(src, 0, dst, 20, len - 30, 2)), 2,
		  IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(src.p, len - 30, 23, 10));

	// The process address is not in the iova space of the MR.
	Wr w = write_wr(src, 0, dst, 0, 64, 3);
	w.raddr = reinterpret_cast<uintptr_t>(dst.p);
	EXPECT_WC(run1(qa, w), 3, IBV_WC_REM_ACCESS_ERR);
}

// A message of hundreds of MiB end to end (METAROCE_VERBS_BIG_MIB,
// default 256): one WRITE of all of it, a READ and a SEND of up to 64 MiB.
TEST_F(Mr, LargeMessages)
{
	const size_t big = config().big_mib << 20;
	const size_t part = std::min<size_t>(big, 64 << 20);
	if (!big)
		GTEST_SKIP() << "METAROCE_VERBS_BIG_MIB=0";
	Qp qa(A()), qb(B());
	connect(qa, qb);
	Buf src(A().pd, big), dst(B().pd, big);
	fill(src.p, big, 24);
	auto t0 = std::chrono::steady_clock::now();

	const Ms slow = limit(Ms(600000));
	EXPECT_WC(run1(qa, write_wr(src, 0, dst, 0, big, 1), slow), 1,
		  IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	note("write_ms", ms_since(t0));
	EXPECT_TRUE(has_pattern(dst.p, big, 24));

	// READ the first part back over a zeroed source.
	memset(src.p, 0, part);
	t0 = std::chrono::steady_clock::now();
	ibv_wc wc = run1(qa, read_wr(src, 0, dst, 0, part, 2), slow);
	EXPECT_WC(wc, 2, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	note("read_ms", ms_since(t0));
	EXPECT_TRUE(has_pattern(src.p, part, 24));

	// SEND it into the far end of the target.
	ASSERT_EQ(post_recv(qb.qp, {dst.sge(big - part, part)}, 3), 0);
	fill(src.p, part, 25);
	t0 = std::chrono::steady_clock::now();
	EXPECT_WC(run1(qa, send_wr(src, 0, part, 4), slow), 4, IBV_WC_SUCCESS);
	wc = poll1(qb.rcq);
	note("send_ms", ms_since(t0));
	EXPECT_WC(wc, 3, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(wc.byte_len, part);
	EXPECT_TRUE(has_pattern(dst.p + big - part, part, 25));
	if (big > part) {
		EXPECT_TRUE(has_pattern(dst.p, big - part, 24));
	}
}

// A 1 GiB MR registers (read-only: its pages stay the shared zero page),
// and messages up to max_msg_sz are accepted; beyond it, a local length
// error.
TEST_F(Mr, GiBRegistrationAndMessageLimit)
{
	const size_t gib = 1ULL << 30;
	Qp qa(A()), qb(B());
	connect(qa, qb);
	Buf huge(A().pd, gib, 0);
	Buf dst(B().pd, 4096);
	EXPECT_EQ(huge.mr->length, gib);
	ASSERT_GE(A().port.max_msg_sz, gib);

	// Three SGEs of 1 GiB: more than max_msg_sz (2 GiB).
	ASSERT_LT(A().port.max_msg_sz, 3 * gib);
	Qp q3(A(), {.send_sge = 3});
	Qp p3(B());
	connect(q3, p3);
	Wr w{.op = IBV_WR_RDMA_WRITE,
	     .sges = {huge.sge(0, gib), huge.sge(0, gib), huge.sge(0, gib)},
	     .wr_id = 7, .raddr = dst.addr(), .rkey = dst.rkey()};
	ibv_wc wc = run1(q3, w);
	EXPECT_WC(wc, 7, IBV_WC_LOC_LEN_ERR);
	EXPECT_EQ(q3.wait_state(IBV_QPS_ERR), IBV_QPS_ERR);

	// The 1 GiB MR is usable: its last page goes out.
	EXPECT_WC(run1(qa, write_wr(huge, gib - 4096, dst, 0, 4096, 8)), 8,
		  IBV_WC_SUCCESS);
	EXPECT_TRUE(all_bytes(dst.p, 4096, 0));
}

TEST_F(Mr, DeregisteredKeysAreInvalid)
{
	Qp qa(A()), qb(B());
	connect(qa, qb);
	Buf src(A().pd, 4096), dst(B().pd, 4096);
	Wr w = write_wr(src, 0, dst, 0, 4096, 1);
	fill(src.p, 4096, 26);
	EXPECT_WC(run1(qa, w), 1, IBV_WC_SUCCESS);
	memset(dst.p, 0x11, 4096);
	dst.deregister();
	w.wr_id = 2;
	EXPECT_WC(run1(qa, w), 2, IBV_WC_REM_ACCESS_ERR);
	EXPECT_TRUE(all_bytes(dst.p, 4096, 0x11));

	Qp qc(A()), qd(B());
	connect(qc, qd);
	Buf dst2(B().pd, 4096);
	Wr w2 = write_wr(src, 0, dst2, 0, 4096, 3);
	src.deregister();
	EXPECT_WC(run1(qc, w2), 3, IBV_WC_LOC_PROT_ERR);
}

} // namespace
} // namespace mrt
