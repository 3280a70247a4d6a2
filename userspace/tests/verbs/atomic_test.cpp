// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Atomics (compare-and-swap, fetch-and-add; protocol.md 3.4): results and
// memory, many atomics from two QPs on one counter, exactly once under
// netem loss and duplication, the errors (misaligned, no rights, a bad
// local SGE), ordering against WRITEs, fences, and the ibv_wr_* API.
#include "verbs_env.hpp"

#include <algorithm>
#include <set>

namespace mrt {
namespace {

constexpr int kAtomicAccess = kRcAccess | IBV_ACCESS_REMOTE_ATOMIC;

class Atomic : public TopoTest {
protected:
	ConnOpts conn(int access = kAtomicAccess)
	{
		ConnOpts o;
		o.access = access;
		return o;
	}
};

INSTANTIATE_TEST_SUITE_P(Topo, Atomic,
			 ::testing::Values(Topo::TwoDevices, Topo::Loopback),
			 topo_name);

uint64_t word(const Buf &b, size_t off)
{
	uint64_t v;

	memcpy(&v, b.p + off, sizeof(v));
	return v;
}

void set_word(Buf &b, size_t off, uint64_t v)
{
	memcpy(b.p + off, &v, sizeof(v));
}

struct AtomicWr {
	ibv_wr_opcode op;
	ibv_sge sge;
	uint64_t wr_id;
	uint64_t raddr;
	uint32_t rkey;
	uint64_t compare_add;
	uint64_t swap = 0;
	unsigned flags = IBV_SEND_SIGNALED;
};

int post_atomic(ibv_qp *qp, const AtomicWr &a)
{
	ibv_sge sge = a.sge;
	ibv_send_wr wr{}, *bad = nullptr;

	wr.wr_id = a.wr_id;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = a.op;
	wr.send_flags = a.flags;
	wr.wr.atomic.remote_addr = a.raddr;
	wr.wr.atomic.rkey = a.rkey;
	wr.wr.atomic.compare_add = a.compare_add;
	wr.wr.atomic.swap = a.swap;
	return ibv_post_send(qp, &wr, &bad);
}

AtomicWr fetch_add(const Buf &res, size_t roff, const Buf &dst, size_t doff,
		   uint64_t add, uint64_t wr_id = 0)
{
	return {.op = IBV_WR_ATOMIC_FETCH_AND_ADD, .sge = res.sge(roff, 8),
		.wr_id = wr_id, .raddr = dst.addr(doff), .rkey = dst.rkey(),
		.compare_add = add};
}

AtomicWr cmp_swap(const Buf &res, size_t roff, const Buf &dst, size_t doff,
		  uint64_t compare, uint64_t swap, uint64_t wr_id = 0)
{
	return {.op = IBV_WR_ATOMIC_CMP_AND_SWP, .sge = res.sge(roff, 8),
		.wr_id = wr_id, .raddr = dst.addr(doff), .rkey = dst.rkey(),
		.compare_add = compare, .swap = swap};
}

// One atomic, waited for: its completion.
ibv_wc run_atomic(Qp &q, const AtomicWr &a, Ms timeout = limit())
{
	if (int err = post_atomic(q.qp, a)) {
		ADD_FAILURE() << "ibv_post_send: " << errstr(err);
		ibv_wc wc{};
		wc.status = static_cast<ibv_wc_status>(-1);
		return wc;
	}
	return poll1(q.scq, timeout);
}

TEST_P(Atomic, FetchAddAndCompareSwap)
{
	Qp qa(A()), qb(Peer());
	connect(qa, qb, conn());
	Buf res(A().pd, 64), dst(Peer().pd, 64, kAtomicAccess);
	memset(res.p, 0xee, res.len);
	memset(dst.p, 0xcc, dst.len);
	set_word(dst, 8, 0x0102030405060708ull);

	ibv_wc wc = run_atomic(qa, fetch_add(res, 16, dst, 8, 0x10, 1));
	EXPECT_WC(wc, 1, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	EXPECT_EQ(wc.byte_len, 8u);
	EXPECT_EQ(word(res, 16), 0x0102030405060708ull);
	EXPECT_EQ(word(dst, 8), 0x0102030405060718ull);

	// Equal: swapped, the old value returned.
	wc = run_atomic(qa, cmp_swap(res, 24, dst, 8, 0x0102030405060718ull,
				     0xfedcba9876543210ull, 2));
	EXPECT_WC(wc, 2, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	EXPECT_EQ(wc.byte_len, 8u);
	EXPECT_EQ(word(res, 24), 0x0102030405060718ull);
	EXPECT_EQ(word(dst, 8), 0xfedcba9876543210ull);

	// Not equal: left alone, the current value returned.
	wc = run_atomic(qa, cmp_swap(res, 32, dst, 8, 1, 2, 3));
	EXPECT_WC(wc, 3, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	EXPECT_EQ(word(res, 32), 0xfedcba9876543210ull);
	EXPECT_EQ(word(dst, 8), 0xfedcba9876543210ull);

	// Wraps modulo 2^64.
	wc = run_atomic(qa, fetch_add(res, 40, dst, 8, 0x0123456789abcdf0ull, 4));
	EXPECT_WC(wc, 4, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	EXPECT_EQ(word(dst, 8), 0xfedcba9876543210ull + 0x0123456789abcdf0ull);

	// Nothing else moved.
	EXPECT_TRUE(all_bytes(dst.p, 8, 0xcc));
	EXPECT_TRUE(all_bytes(dst.p + 16, 48, 0xcc));
	EXPECT_TRUE(all_bytes(res.p, 16, 0xee));
	EXPECT_TRUE(all_bytes(res.p + 48, 16, 0xee));
}

// A responder kept in RTR answers READs and atomics (IBA: RTR receives and
// responds; stock ib_read_bw and ib_atomic_bw leave their server there).
// Moved to RTS afterwards, it sends on the stream it began: a SEND from it
// arrives after the answers (protocol-v2.md 9.1).
TEST_P(Atomic, AResponderInRtrAnswersAndSendsOnceInRts)
{
	ConnOpts o = conn();
	Qp qa(A()), qb(Peer());
	ASSERT_EQ(rc_init(qa, o.access), 0);
	ASSERT_EQ(rc_init(qb, o.access), 0);
	ASSERT_EQ(rc_rtr(qa, qb.c, qb.qpn(), o.psn_b, o), 0);
	ASSERT_EQ(rc_rtr(qb, qa.c, qa.qpn(), o.psn_a, o), 0);
	ASSERT_EQ(rc_rts(qa, o.psn_a, o), 0);
	Buf remote(Peer().pd, 3 * 4096 + 8, kAtomicAccess);
	Buf local(A().pd, 3 * 4096 + 64), res(A().pd, 64);
	fill(remote.p, remote.len, 77);
	memset(local.p, 0xee, local.len);
	memset(res.p, 0xee, res.len);
	set_word(remote, 0, 40);

	for (uint64_t id = 1; id <= 3; id++) {
		ibv_wc wc = run1(qa, read_wr(local, 1, remote, 8, 3 * 4096, id));
		ASSERT_WC(wc, id, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
		EXPECT_TRUE(has_pattern(local.p + 1, 3 * 4096, 77, 8));
	}
	ibv_wc wc = run_atomic(qa, fetch_add(res, 8, remote, 0, 2, 4));
	ASSERT_WC(wc, 4, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	EXPECT_EQ(word(res, 8), 40u);
	EXPECT_EQ(word(remote, 0), 42u);
	EXPECT_EQ(qb.state(), IBV_QPS_RTR);

	ASSERT_EQ(rc_rts(qb, o.psn_b, o), 0);
	Buf src(Peer().pd, 100), dst(A().pd, 100);
	fill(src.p, src.len, 5);
	ASSERT_EQ(post_recv(qa.qp, {dst.sge(0, 100)}, 9), 0);
	EXPECT_WC(run1(qb, send_wr(src, 0, 100, 9)), 9, IBV_WC_SUCCESS);
	EXPECT_WC(poll1(qa.rcq), 9, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_TRUE(has_pattern(dst.p, 100, 5));
	// And A still reads from it.
	wc = run1(qa, read_wr(local, 0, remote, 8, 64, 10));
	EXPECT_WC(wc, 10, IBV_WC_SUCCESS, IBV_WC_RDMA_READ);
	EXPECT_TRUE(has_pattern(local.p, 64, 77, 8));
}

// Two QPs add to one counter: the sum is exact and every fetch-add saw a
// different value.
TEST_P(Atomic, ManyFromTwoQpsOnOneCounter)
{
	const int per_qp = 500;
	Qp a0(A(), {.send_wr = per_qp}), a1(A(), {.send_wr = per_qp});
	Qp b0(Peer()), b1(Peer());
	connect(a0, b0, conn());
	connect(a1, b1, conn());
	Buf res(A().pd, 2 * per_qp * 8), dst(Peer().pd, 64, kAtomicAccess);
	set_word(dst, 0, 0);
	for (int i = 0; i < per_qp; i++) {
		ASSERT_EQ(post_atomic(a0.qp, fetch_add(res, 8 * i, dst, 0, 1, i)),
			  0);
		ASSERT_EQ(post_atomic(a1.qp, fetch_add(res, 8 * (per_qp + i),
						       dst, 0, 1, i)),
			  0);
	}
	EXPECT_TRUE(poll_ok(a0.scq, per_qp, 0, limit(Ms(60000))));
	EXPECT_TRUE(poll_ok(a1.scq, per_qp, 0, limit(Ms(60000))));
	EXPECT_EQ(word(dst, 0), 2u * per_qp);
	std::set<uint64_t> seen;
	for (int i = 0; i < 2 * per_qp; i++)
		seen.insert(word(res, 8 * i));
	EXPECT_EQ(seen.size(), 2u * per_qp);
	EXPECT_EQ(*seen.rbegin(), 2u * per_qp - 1);
}

// Loss and duplicates on the wire: every fetch-add runs exactly once, so N
// adds of 1 leave N and return a permutation of 0 .. N-1; a compare-swap
// chain (each expects the previous one's result) never skips or repeats.
TEST_P(Atomic, ExactlyOnceUnderLossAndDuplication)
{
	if (GetParam() == Topo::Loopback)
		GTEST_SKIP() << "no link to impair";
	Qdisc qdisc;
	if (!qdisc.available())
		GTEST_SKIP() << "METAROCE_VERBS_QDISC_A not set";
	const int n = 400;
	Qp qa(A(), {.send_wr = n}), qb(Peer());
	connect(qa, qb, conn());
	Buf res(A().pd, n * 8), dst(Peer().pd, 64, kAtomicAccess);
	memset(dst.p, 0, dst.len);
	int64_t rereads0 = hw_counter(A().name, "rereads", true);
	int64_t dup0 = hw_counter(Peer().name, "rx_duplicate");
	ASSERT_TRUE(qdisc.set("netem loss 5% duplicate 5% delay 1ms "
			      "reorder 75% 50% limit 10000"));
	for (int i = 0; i < n; i++)
		ASSERT_EQ(post_atomic(qa.qp, fetch_add(res, 8 * i, dst, 0, 1, i)),
			  0);
	EXPECT_TRUE(poll_ok(qa.scq, n, 0, limit(Ms(120000))));
	EXPECT_EQ(word(dst, 0), static_cast<uint64_t>(n));
	std::vector<uint64_t> got(n);
	for (int i = 0; i < n; i++)
		got[i] = word(res, 8 * i);
	std::sort(got.begin(), got.end());
	for (int i = 0; i < n; i++)
		ASSERT_EQ(got[i], static_cast<uint64_t>(i)) << "at " << i;

	// Compare-and-swap k -> k + 1, one after another.
	for (int i = 0; i < 50; i++) {
		ibv_wc wc = run_atomic(qa, cmp_swap(res, 0, dst, 8, i, i + 1,
						    1000 + i), limit(Ms(60000)));
		ASSERT_WC(wc, 1000 + i, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
		ASSERT_EQ(word(res, 0), static_cast<uint64_t>(i));
	}
	EXPECT_EQ(word(dst, 8), 50u);
	ASSERT_TRUE(qdisc.set("pfifo"));
	// How much recovery there was: resent atomics, repeats received.
	note("atomic_resent", static_cast<double>(
		hw_counter(A().name, "rereads", true) - rereads0));
	note("atomic_peer_duplicates", static_cast<double>(
		hw_counter(Peer().name, "rx_duplicate") - dup0));
}

// An address that is not a multiple of 8 is an invalid request; the
// requester's QP fails with it.
TEST_P(Atomic, MisalignedIsInvalidRequest)
{
	Qp qa(A()), qb(Peer());
	connect(qa, qb, conn());
	Buf res(A().pd, 64), dst(Peer().pd, 64, kAtomicAccess);
	memset(dst.p, 0x5a, dst.len);
	ibv_wc wc = run_atomic(qa, fetch_add(res, 0, dst, 4, 1, 7));
	EXPECT_WC(wc, 7, IBV_WC_REM_INV_REQ_ERR);
	EXPECT_EQ(qa.wait_state(IBV_QPS_ERR), IBV_QPS_ERR);
	EXPECT_TRUE(all_bytes(dst.p, dst.len, 0x5a));
}

// An MR without REMOTE_ATOMIC, and a QP without remote atomics: remote
// access errors, memory untouched.
TEST_P(Atomic, WithoutRightsIsRemoteAccessError)
{
	{
		Qp qa(A()), qb(Peer());
		connect(qa, qb, conn());
		Buf res(A().pd, 64), dst(Peer().pd, 64, kRcAccess);
		memset(dst.p, 0x5a, dst.len);
		ibv_wc wc = run_atomic(qa, fetch_add(res, 0, dst, 8, 1, 8));
		EXPECT_WC(wc, 8, IBV_WC_REM_ACCESS_ERR);
		EXPECT_TRUE(all_bytes(dst.p, dst.len, 0x5a));
	}
	{
		Qp qa(A()), qb(Peer());
		connect(qa, qb, conn(kRcAccess));
		Buf res(A().pd, 64), dst(Peer().pd, 64, kAtomicAccess);
		memset(dst.p, 0x5a, dst.len);
		ibv_wc wc = run_atomic(qa, cmp_swap(res, 0, dst, 8,
						    0x5a5a5a5a5a5a5a5aull, 0, 9));
		EXPECT_WC(wc, 9, IBV_WC_REM_ACCESS_ERR);
		EXPECT_TRUE(all_bytes(dst.p, dst.len, 0x5a));
	}
}

// The local SGE must be one of exactly 8 bytes: anything else fails the
// post itself.
TEST_P(Atomic, LocalSgeMustBeEightBytes)
{
	Qp qa(A(), {.send_sge = 2}), qb(Peer());
	connect(qa, qb, conn());
	Buf res(A().pd, 64), dst(Peer().pd, 64, kAtomicAccess);
	AtomicWr a = fetch_add(res, 0, dst, 8, 1, 10);
	a.sge.length = 4;
	EXPECT_EQ(post_atomic(qa.qp, a), EINVAL);
	a.sge.length = 16;
	EXPECT_EQ(post_atomic(qa.qp, a), EINVAL);

	ibv_sge sges[2] = {res.sge(0, 4), res.sge(4, 4)};
	ibv_send_wr wr{}, *bad = nullptr;
	wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr.sg_list = sges;
	wr.num_sge = 2;
	wr.wr.atomic.remote_addr = dst.addr(8);
	wr.wr.atomic.rkey = dst.rkey();
	EXPECT_EQ(ibv_post_send(qa.qp, &wr, &bad), EINVAL);
	// The QP is fine afterwards.
	a.sge.length = 8;
	EXPECT_WC(run_atomic(qa, a), 10, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
}

// An atomic posted after a WRITE to the same word sees what it wrote, and
// a WRITE fenced after an atomic lands after it.
TEST_P(Atomic, OrderedAfterWriteAndFenced)
{
	Qp qa(A(), {.send_wr = 256}), qb(Peer());
	connect(qa, qb, conn());
	Buf src(A().pd, 64 * 8), res(A().pd, 64 * 8);
	Buf dst(Peer().pd, 64 * 8, kAtomicAccess);
	memset(dst.p, 0, dst.len);
	const int rounds = 64;
	for (int i = 0; i < rounds; i++) {
		set_word(src, 8 * i, 1000 + i);
		ASSERT_EQ(post_send(qa.qp, write_wr(src, 8 * i, dst, 8 * i, 8,
						    2 * i)),
			  0);
		ASSERT_EQ(post_atomic(qa.qp, fetch_add(res, 8 * i, dst, 8 * i,
						       1, 2 * i + 1)),
			  0);
	}
	EXPECT_TRUE(poll_ok(qa.scq, 2 * rounds, 0, limit(Ms(60000))));
	for (int i = 0; i < rounds; i++) {
		EXPECT_EQ(word(res, 8 * i), 1000u + i) << "round " << i;
		EXPECT_EQ(word(dst, 8 * i), 1001u + i) << "round " << i;
	}

	// IBV_SEND_FENCE on a WRITE after an atomic: the WRITE comes after.
	set_word(dst, 0, 5);
	set_word(src, 0, 77);
	ASSERT_EQ(post_atomic(qa.qp, cmp_swap(res, 0, dst, 0, 5, 6, 500)), 0);
	Wr w = write_wr(src, 0, dst, 0, 8, 501);
	w.flags |= IBV_SEND_FENCE;
	ASSERT_EQ(post_send(qa.qp, w), 0);
	EXPECT_TRUE(poll_ok(qa.scq, 2, 500));
	EXPECT_EQ(word(res, 0), 5u);
	EXPECT_EQ(word(dst, 0), 77u);
}

// The ibv_wr_* API posts both atomics.
TEST_P(Atomic, WorkRequestApi)
{
	const uint64_t ops = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
			     IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD |
			     IBV_QP_EX_WITH_RDMA_WRITE;
	Qp qa(A(), {.send_ops = ops}), qb(Peer());
	connect(qa, qb, conn());
	Buf res(A().pd, 64), dst(Peer().pd, 64, kAtomicAccess);
	memset(res.p, 0, res.len);
	set_word(dst, 0, 40);
	ibv_qp_ex *x = ibv_qp_to_qp_ex(qa.qp);
	ASSERT_NE(x, nullptr);
	ASSERT_NE(x->wr_atomic_fetch_add, nullptr);
	ASSERT_NE(x->wr_atomic_cmp_swp, nullptr);

	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_fetch_add(x, dst.rkey(), dst.addr(0), 2);
	ibv_wr_set_sge(x, res.lkey(), res.addr(0), 8);
	x->wr_id = 2;
	ibv_wr_atomic_cmp_swp(x, dst.rkey(), dst.addr(0), 42, 100);
	ibv_wr_set_sge(x, res.lkey(), res.addr(8), 8);
	ASSERT_EQ(ibv_wr_complete(x), 0);
	std::vector<ibv_wc> wcs = poll(qa.scq, 2);
	ASSERT_EQ(wcs.size(), 2u);
	EXPECT_WC(wcs[0], 1, IBV_WC_SUCCESS, IBV_WC_FETCH_ADD);
	EXPECT_WC(wcs[1], 2, IBV_WC_SUCCESS, IBV_WC_COMP_SWAP);
	EXPECT_EQ(word(res, 0), 40u);
	EXPECT_EQ(word(res, 8), 42u);
	EXPECT_EQ(word(dst, 0), 100u);

	// A 4-byte SGE fails the batch.
	ibv_wr_start(x);
	ibv_wr_atomic_fetch_add(x, dst.rkey(), dst.addr(0), 2);
	ibv_wr_set_sge(x, res.lkey(), res.addr(0), 4);
	EXPECT_EQ(ibv_wr_complete(x), EINVAL);
	EXPECT_TRUE(quiet(qa.scq, Ms(50)));
}

} // namespace
} // namespace mrt
