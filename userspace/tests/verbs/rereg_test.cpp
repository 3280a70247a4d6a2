// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// ibv_rereg_mr: a new translation, new access rights, another PD, each
// checked end to end with every byte of the old and the new buffer; bad
// arguments leave the registration as it was; and once the call returns,
// nothing reaches the old translation any more, not even WRs, READ
// responses or zero-copy packets that were under way.
//
// (A fast-registration MR and the DMA MR refuse rereg in the kernel; user
// space cannot name either, so no case here can try.)
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>

#include "verbs_env.hpp"

namespace mrt {
namespace {

class Rereg : public VerbsTest {};

// Memory [@p, @p + len) as the MR @mr now translates it (iova = address).
ibv_sge sge_of(const ibv_mr *mr, const void *p, size_t len)
{
	return ibv_sge{reinterpret_cast<uintptr_t>(p),
		       static_cast<uint32_t>(len), mr->lkey};
}

Wr write_to(const Buf &src, size_t soff, size_t len, const ibv_mr *mr,
	    const void *dst, uint64_t wr_id)
{
	return {.op = IBV_WR_RDMA_WRITE, .sges = {src.sge(soff, len)},
		.wr_id = wr_id, .raddr = reinterpret_cast<uintptr_t>(dst),
		.rkey = mr->rkey};
}

Wr read_from(const Buf &dst, size_t doff, size_t len, const ibv_mr *mr,
	     const void *src, uint64_t wr_id)
{
	return {.op = IBV_WR_RDMA_READ, .sges = {dst.sge(doff, len)},
		.wr_id = wr_id, .raddr = reinterpret_cast<uintptr_t>(src),
		.rkey = mr->rkey};
}

// A new translation: WRITE, READ and SEND from the peer, and SEND from the
// MR itself, use the new buffer only; the old one is no longer in the MR.
TEST_F(Rereg, TranslationMovesToANewBuffer)
{
	const size_t n = 3 * 4096 + 100;
	Qp qa(A()), qb(B());
	connect(qa, qb);
	Buf src(A().pd, n), back(A().pd, n);
	Buf old(B().pd, n);
	Buf fresh(n + 1, 77);		// guard bytes on both sides
	ibv_mr *mr = old.mr;
	const uint32_t lkey = mr->lkey, rkey = mr->rkey;
	memset(old.p, 0x11, n);
	memset(fresh.p - 77, 0xee, n + 78);

	ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION, nullptr,
			       fresh.p, n, 0), 0)
		<< errstr(errno);
	EXPECT_EQ(mr->addr, static_cast<void *>(fresh.p));
	EXPECT_EQ(mr->length, n);
	// MetaRoCE keeps the keys (docs/compatibility.md).
	EXPECT_EQ(mr->lkey, lkey);
	EXPECT_EQ(mr->rkey, rkey);

	fill(src.p, n, 61);
	EXPECT_WC(run1(qa, write_to(src, 0, n, mr, fresh.p, 1)), 1,
		  IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	EXPECT_TRUE(has_pattern(fresh.p, n, 61));
	EXPECT_TRUE(all_bytes(old.p, n, 0x11)) << "old buffer written";

	memset(back.p, 0, n);
	EXPECT_WC(run1(qa, read_from(back, 0, n, mr, fresh.p, 2)), 2,
		  IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	EXPECT_TRUE(has_pattern(back.p, n, 61));

	fill(src.p, n, 62);
	ASSERT_EQ(post_recv(qb.qp, {sge_of(mr, fresh.p, n)}, 3), 0);
	EXPECT_WC(run1(qa, send_wr(src, 0, n, 4)), 4, IBV_WC_SUCCESS);
	ibv_wc wc = poll1(qb.rcq);
	EXPECT_WC(wc, 3, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(wc.byte_len, n);
	EXPECT_TRUE(has_pattern(fresh.p, n, 62));
	EXPECT_TRUE(all_bytes(old.p, n, 0x11)) << "old buffer written";

	// The MR as a local buffer: B sends from it.
	memset(back.p, 0, n);
	ASSERT_EQ(post_recv(qa.qp, back, 5), 0);
	Wr s{.op = IBV_WR_SEND, .sges = {sge_of(mr, fresh.p, n)}, .wr_id = 6};
	EXPECT_WC(run1(qb, s), 6, IBV_WC_SUCCESS);
	EXPECT_WC(poll1(qa.rcq), 5, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_TRUE(has_pattern(back.p, n, 62));

	EXPECT_TRUE(all_bytes(fresh.p - 77, 77, 0xee));
	EXPECT_EQ(fresh.p[n], 0xee);

	// The old addresses are outside the MR now.
	EXPECT_WC(run1(qa, write_to(src, 0, n, mr, old.p, 7)), 7,
		  IBV_WC_REM_ACCESS_ERR);
	EXPECT_TRUE(all_bytes(old.p, n, 0x11)) << "old buffer written";
	old.deregister();
}

// Remote write taken away: the peer's WRITE fails with a remote access
// error and writes nothing; the remote read that stays still works.
TEST_F(Rereg, DroppingRemoteWriteRefusesWrites)
{
	Qp qa(A()), qb(B());
	connect(qa, qb);
	Buf src(A().pd, 4096), back(A().pd, 4096), dst(B().pd, 4096);
	fill(src.p, 4096, 63);
	EXPECT_WC(run1(qa, write_wr(src, 0, dst, 0, 4096, 1)), 1,
		  IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(dst.p, 4096, 63));

	ASSERT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr,
			       nullptr, 0,
			       IBV_ACCESS_LOCAL_WRITE |
				       IBV_ACCESS_REMOTE_READ), 0)
		<< errstr(errno);
	memset(dst.p, 0x22, 4096);
	fill(src.p, 4096, 64);
	EXPECT_WC(run1(qa, write_wr(src, 0, dst, 0, 4096, 2)), 2,
		  IBV_WC_REM_ACCESS_ERR);
	EXPECT_TRUE(all_bytes(dst.p, 4096, 0x22));
	EXPECT_EQ(qb.wait_state(IBV_QPS_ERR), IBV_QPS_ERR);

	Qp qc(A()), qd(B());
	connect(qc, qd);
	EXPECT_WC(run1(qc, read_wr(back, 0, dst, 0, 4096, 3)), 3,
		  IBV_WC_SUCCESS);
	EXPECT_TRUE(all_bytes(back.p, 4096, 0x22));
}

// Remote read given: a READ refused before works after.
TEST_F(Rereg, AddingRemoteReadAllowsReads)
{
	Qp qa(A()), qb(B());
	connect(qa, qb);
	Buf back(A().pd, 4096), src(A().pd, 4096);
	Buf dst(B().pd, 4096, kLocalWrite);
	fill(dst.p, 4096, 65);
	memset(back.p, 0, 4096);
	EXPECT_WC(run1(qa, read_wr(back, 0, dst, 0, 4096, 1)), 1,
		  IBV_WC_REM_ACCESS_ERR);
	EXPECT_TRUE(all_bytes(back.p, 4096, 0));

	ASSERT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr,
			       nullptr, 0, kRcAccess), 0)
		<< errstr(errno);
	Qp qc(A()), qd(B());
	connect(qc, qd);
	EXPECT_WC(run1(qc, read_wr(back, 0, dst, 0, 4096, 2)), 2,
		  IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(back.p, 4096, 65));
	fill(src.p, 4096, 66);
	EXPECT_WC(run1(qc, write_wr(src, 0, dst, 0, 4096, 3)), 3,
		  IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(dst.p, 4096, 66));
}

// A read-only MR of memory never written is pinned on the shared zero
// page. Made writable, it must be pinned again for writing: the peer's
// WRITE lands in this process's buffer, and the zero page stays zero.
TEST_F(Rereg, ReadOnlyMadeWritableWritesOwnPages)
{
	const size_t n = 2 * 4096;
	Qp qa(A()), qb(B());
	connect(qa, qb);
	Buf src(A().pd, n);
	Buf ro(B().pd, n, 0);		// untouched: the zero page
	ASSERT_EQ(ibv_rereg_mr(ro.mr, IBV_REREG_MR_CHANGE_ACCESS, nullptr,
			       nullptr, 0, kRcAccess), 0)
		<< errstr(errno);
	fill(src.p, n, 67);
	EXPECT_WC(run1(qa, write_wr(src, 0, ro, 0, n, 1)), 1, IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(ro.p, n, 67));
	Buf zero(n);			// untouched too
	EXPECT_TRUE(all_bytes(zero.p, n, 0)) << "the zero page was written";
}

// Another PD of the same context: QPs of the old PD can no longer use the
// MR, neither remotely nor locally; QPs of the new one can; the new PD is
// in use until the MR goes.
TEST_F(Rereg, MovesToAnotherPd)
{
	ibv_pd *pd2 = ibv_alloc_pd(B().ctx);
	ASSERT_NE(pd2, nullptr) << errstr(errno);
	{
		Qp qa(A()), qb(B());		// qb: the old PD
		Qp qc(A()), qd(B(), {.pd = pd2});
		Qp qe(A()), qf(B());		// qf: the old PD
		connect(qa, qb);
		connect(qc, qd);
		connect(qe, qf);
		Buf src(A().pd, 4096), back(A().pd, 4096);
		Buf dst(B().pd, 4096);
		fill(src.p, 4096, 68);
		EXPECT_WC(run1(qa, write_wr(src, 0, dst, 0, 4096, 1)), 1,
			  IBV_WC_SUCCESS);

		ASSERT_EQ(ibv_rereg_mr(dst.mr, IBV_REREG_MR_CHANGE_PD, pd2,
				       nullptr, 0, 0), 0)
			<< errstr(errno);
		EXPECT_EQ(dst.mr->pd, pd2);
		EXPECT_EQ(ibv_dealloc_pd(pd2), EBUSY);
		memset(dst.p, 0x33, 4096);

		// The new PD's QP: remote and local use.
		fill(src.p, 4096, 69);
		EXPECT_WC(run1(qc, write_wr(src, 0, dst, 0, 4096, 2)), 2,
			  IBV_WC_SUCCESS);
		EXPECT_TRUE(has_pattern(dst.p, 4096, 69));
		memset(back.p, 0, 4096);
		ASSERT_EQ(post_recv(qc.qp, back, 3), 0);
		EXPECT_WC(run1(qd, send_wr(dst, 0, 4096, 4)), 4,
			  IBV_WC_SUCCESS);
		EXPECT_WC(poll1(qc.rcq), 3, IBV_WC_SUCCESS, IBV_WC_RECV);
		EXPECT_TRUE(has_pattern(back.p, 4096, 69));

		// The old PD's QPs: refused, nothing written or sent.
		memset(dst.p, 0x33, 4096);
		EXPECT_WC(run1(qa, write_wr(src, 0, dst, 0, 4096, 5)), 5,
			  IBV_WC_REM_ACCESS_ERR);
		EXPECT_TRUE(all_bytes(dst.p, 4096, 0x33));
		memset(back.p, 0, 4096);
		ASSERT_EQ(post_recv(qe.qp, back, 6), 0);
		EXPECT_WC(run1(qf, send_wr(dst, 0, 4096, 7)), 7,
			  IBV_WC_LOC_PROT_ERR);
		EXPECT_TRUE(all_bytes(back.p, 4096, 0));
		dst.deregister();
	}
	EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
}

// Bad arguments fail with the errno of the check they fail, and leave the
// MR as it was: same address, keys, rights, still usable.
TEST_F(Rereg, BadArgumentsLeaveTheMrIntact)
{
	const size_t n = 4096;
	Qp qa(A()), qb(B());
	connect(qa, qb);
	Buf src(A().pd, n), dst(B().pd, n);
	ibv_mr *mr = dst.mr;
	const ibv_mr before = *mr;
	long page = sysconf(_SC_PAGESIZE);
	void *hole = mmap(nullptr, 16 * page, PROT_NONE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(hole, MAP_FAILED);
	munmap(hole, 16 * page);
	Buf other(n);

	const struct {
		const char *what;
		int flags;
		void *addr;
		size_t len;
		int access;
		int ret, err;
	} cases[] = {
		{"no flags", 0, nullptr, 0, 0, IBV_REREG_MR_ERR_CMD, EINVAL},
		{"unknown flag", 1 << 3, nullptr, 0, 0, IBV_REREG_MR_ERR_INPUT,
		 EINVAL},
		{"REMOTE_WRITE without LOCAL_WRITE", IBV_REREG_MR_CHANGE_ACCESS,
		 nullptr, 0, IBV_ACCESS_REMOTE_WRITE, IBV_REREG_MR_ERR_CMD,
		 EINVAL},
		{"unknown access bit", IBV_REREG_MR_CHANGE_ACCESS, nullptr, 0,
		 IBV_ACCESS_LOCAL_WRITE | (1 << 15), IBV_REREG_MR_ERR_CMD,
		 EINVAL},
		{"zero length", IBV_REREG_MR_CHANGE_TRANSLATION, other.p, 0, 0,
		 IBV_REREG_MR_ERR_INPUT, EINVAL},
		{"beyond max_mr_size", IBV_REREG_MR_CHANGE_TRANSLATION, other.p,
		 static_cast<size_t>(B().dev_attr.max_mr_size + page), 0,
		 IBV_REREG_MR_ERR_CMD, EINVAL},
		{"unmapped memory", IBV_REREG_MR_CHANGE_TRANSLATION, hole,
		 static_cast<size_t>(16 * page), 0, IBV_REREG_MR_ERR_CMD,
		 EFAULT},
	};
	for (const auto &c : cases) {
		errno = 0;
		int ret = ibv_rereg_mr(mr, c.flags, nullptr, c.addr, c.len,
				       c.access);
		int err = errno;
		EXPECT_EQ(ret, c.ret) << c.what;
		EXPECT_EQ(err, c.err) << c.what << ": " << errstr(err);
		EXPECT_EQ(mr->addr, before.addr) << c.what;
		EXPECT_EQ(mr->length, before.length) << c.what;
		EXPECT_EQ(mr->lkey, before.lkey) << c.what;
		EXPECT_EQ(mr->rkey, before.rkey) << c.what;
		EXPECT_EQ(mr->pd, before.pd) << c.what;
	}
	// Still registered as before: a WRITE and a READ work.
	fill(src.p, n, 70);
	EXPECT_WC(run1(qa, write_wr(src, 0, dst, 0, n, 1)), 1, IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(dst.p, n, 70));
	memset(src.p, 0, n);
	EXPECT_WC(run1(qa, read_wr(src, 0, dst, 0, n, 2)), 2, IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(src.p, n, 70));
}

// Rereg while the peer WRITEs into and READs from the MR, at several
// moments of the stream. Each WR completes whole or fails (the rest then
// flush); nothing reaches the new buffer through the old addresses, and
// after ibv_rereg_mr returns nothing writes the old buffer or reads it:
// what the application writes there next shows up in no READ. Then the
// MR works at its new place.
TEST_F(Rereg, WhilePeerWritesAndReads)
{
	const size_t blk = 64 << 10, nblk = 8, n = blk * nblk;
	const int nwr = 96;

	for (int round = 0; round < 3; round++) {
		SCOPED_TRACE(testing::Message() << "round " << round);
		Qp qa(A(), {.send_wr = nwr}), qb(B());
		connect(qa, qb);
		Buf src(A().pd, blk), back(A().pd, blk * nwr);
		Buf x(B().pd, n);
		Buf y(n);
		ibv_mr *mr = x.mr;
		fill(src.p, blk, 71);
		memset(x.p, 0, n / 2);
		fill(x.p + n / 2, n / 2, 72);	// what READs read
		memset(y.p, 0xee, n);
		memset(back.p, 0, blk * nwr);

		// WRITEs into the first half, READs of the second.
		std::vector<Wr> wrs;
		for (int i = 0; i < nwr; i++) {
			size_t b = i % (nblk / 2);
			if (i % 2)
				wrs.push_back(read_from(back, i * blk, blk, mr,
							x.p + n / 2 + b * blk,
							i));
			else
				wrs.push_back(write_to(src, 0, blk, mr,
						       x.p + b * blk, i));
		}
		ASSERT_EQ(post_send(qa.qp, wrs), 0);
		std::this_thread::sleep_for(Ms(round * 15));
		ASSERT_EQ(ibv_rereg_mr(mr, IBV_REREG_MR_CHANGE_TRANSLATION,
				       nullptr, y.p, n, 0), 0)
			<< errstr(errno);
		// The old buffer is the application's again.
		memset(x.p, 0x5a, n);

		std::vector<ibv_wc> wcs = poll(qa.scq, nwr, limit(Ms(120000)));
		ASSERT_EQ(wcs.size(), static_cast<size_t>(nwr));
		int ok = 0, refused = 0, flushed = 0;
		for (const ibv_wc &wc : wcs) {
			if (wc.status == IBV_WC_SUCCESS) {
				ok++;
				if (wc.opcode == IBV_WC_RDMA_READ) {
					size_t b = wc.wr_id % (nblk / 2);
					EXPECT_TRUE(has_pattern(
						back.p + wc.wr_id * blk, blk,
						72, b * blk))
						<< "READ " << wc.wr_id;
				}
			} else if (wc.status == IBV_WC_REM_ACCESS_ERR) {
				refused++;
			} else if (wc.status == IBV_WC_WR_FLUSH_ERR) {
				flushed++;
			} else {
				ADD_FAILURE() << describe(wc);
			}
		}
		note("round" + std::to_string(round) + "_ok", ok);
		EXPECT_EQ(ok + refused + flushed, nwr);
		EXPECT_TRUE(all_bytes(x.p, n, 0x5a))
			<< "the old buffer written after rereg returned";
		EXPECT_TRUE(all_bytes(y.p, n, 0xee))
			<< "the new buffer written through old addresses";

		Qp qc(A()), qd(B());
		connect(qc, qd);
		EXPECT_WC(run1(qc, write_to(src, 0, blk, mr, y.p + blk, 1000)),
			  1000, IBV_WC_SUCCESS);
		EXPECT_TRUE(has_pattern(y.p + blk, blk, 71));
		EXPECT_TRUE(all_bytes(y.p, blk, 0xee));
		x.deregister();
	}
}

// After ibv_rereg_mr returns, no packet still carries the old pages: a
// zero-copy SEND whose packets wait in a qdisc (netem) must not carry
// what the application writes into the old buffer after the rereg, as
// for deregistration (RcError.DeregWaitsForPacketsHeldInAQdisc).
TEST_F(Rereg, WaitsForPacketsHeldInAQdisc)
{
	Qdisc qdisc;
	if (!qdisc.available())
		GTEST_SKIP() << "METAROCE_VERBS_QDISC_A not set";
	Buf other(64 << 10);
	expect_held_send_unchanged(A(), B(), qdisc, 73, [&](Buf &src) {
		ASSERT_EQ(ibv_rereg_mr(src.mr, IBV_REREG_MR_CHANGE_TRANSLATION,
				       nullptr, other.p, 64 << 10, 0), 0)
			<< errstr(errno);
	});
}

} // namespace
} // namespace mrt
