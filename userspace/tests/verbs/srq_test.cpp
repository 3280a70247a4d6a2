// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Shared receive queues: limits and attribute checks, query and modify,
// the limit event, RC and UD QPs sharing one SRQ, RNR while it is empty,
// the error state (what a QP took is flushed on its CQ, the rest stays for
// the others, IBV_EVENT_QP_LAST_WQE_REACHED), and loss, duplication and
// reordering never consuming a WQE twice or completing one wrongly.
#include <functional>
#include <set>
#include <thread>

#include "verbs_env.hpp"

namespace mrt {
namespace {

// An SRQ of @max_wr WQEs with up to @max_sge SGEs each.
class Srq {
public:
	Srq(Ctx &c, uint32_t max_wr, uint32_t max_sge = 1, uint32_t limit = 0)
	{
		ibv_srq_init_attr a{};
		a.attr.max_wr = max_wr;
		a.attr.max_sge = max_sge;
		a.attr.srq_limit = limit;
		srq = ibv_create_srq(c.pd, &a);
		if (!srq)
			fail("ibv_create_srq: " + errstr(errno));
		attr = a.attr;
	}
	~Srq()
	{
		if (srq) {
			EXPECT_EQ(ibv_destroy_srq(srq), 0);
		}
	}
	Srq(const Srq &) = delete;
	Srq &operator=(const Srq &) = delete;

	int post(const ibv_sge &sge, uint64_t wr_id)
	{
		ibv_sge s = sge;
		ibv_recv_wr wr{}, *bad = nullptr;
		wr.wr_id = wr_id;
		wr.sg_list = &s;
		wr.num_sge = 1;
		return ibv_post_srq_recv(srq, &wr, &bad);
	}

	ibv_srq *srq = nullptr;
	ibv_srq_attr attr{};	// as granted
};

ibv_srq *try_create(ibv_pd *pd, uint32_t max_wr, uint32_t max_sge,
		    uint32_t limit = 0)
{
	ibv_srq_init_attr a{};
	a.attr.max_wr = max_wr;
	a.attr.max_sge = max_sge;
	a.attr.srq_limit = limit;
	errno = 0;
	return ibv_create_srq(pd, &a);
}

class SrqAttr : public VerbsTest {};

TEST_F(SrqAttr, DeviceLimits)
{
	const ibv_device_attr &d = A().dev_attr;
	EXPECT_GT(d.max_srq, 0);
	// UCX's rc_verbs asks for 4095 (its receive queue length).
	EXPECT_GE(d.max_srq_wr, 4095);
	EXPECT_EQ(d.max_srq_sge, static_cast<int>(kMaxSge));
}

TEST_F(SrqAttr, CreateRoundsUpAndQueryAgrees)
{
	Srq s(A(), 100, 3, 7);
	EXPECT_EQ(s.attr.max_wr, 128u) << "a power of two, at least asked";
	EXPECT_GE(s.attr.max_sge, 3u);
	ibv_srq_attr q{};
	ASSERT_EQ(ibv_query_srq(s.srq, &q), 0);
	EXPECT_EQ(q.max_wr, s.attr.max_wr);
	EXPECT_EQ(q.max_sge, s.attr.max_sge);
	EXPECT_EQ(q.srq_limit, 7u);
}

TEST_F(SrqAttr, BadAttributesAreRefused)
{
	const ibv_device_attr &d = A().dev_attr;
	EXPECT_EQ(try_create(A().pd, 0, 1), nullptr);
	EXPECT_EQ(errno, EINVAL) << errstr(errno);
	EXPECT_EQ(try_create(A().pd, d.max_srq_wr + 1, 1), nullptr);
	EXPECT_EQ(errno, EINVAL) << errstr(errno);
	EXPECT_EQ(try_create(A().pd, 16, d.max_srq_sge + 1), nullptr);
	EXPECT_EQ(errno, EINVAL) << errstr(errno);
	EXPECT_EQ(try_create(A().pd, 16, 1, 17), nullptr)
		<< "a limit above max_wr";
	EXPECT_EQ(errno, EINVAL) << errstr(errno);
}

TEST_F(SrqAttr, ModifyLimitButNotSize)
{
	Srq s(A(), 64);
	ibv_srq_attr a{};
	a.srq_limit = 10;
	ASSERT_EQ(ibv_modify_srq(s.srq, &a, IBV_SRQ_LIMIT), 0);
	ibv_srq_attr q{};
	ASSERT_EQ(ibv_query_srq(s.srq, &q), 0);
	EXPECT_EQ(q.srq_limit, 10u);
	// A limit leaves room for a WQE above it.
	a.srq_limit = s.attr.max_wr;
	EXPECT_EQ(ibv_modify_srq(s.srq, &a, IBV_SRQ_LIMIT), EINVAL);
	// No IBV_DEVICE_SRQ_RESIZE: the size stays.
	EXPECT_FALSE(A().dev_attr.device_cap_flags & IBV_DEVICE_SRQ_RESIZE);
	a.max_wr = 256;
	EXPECT_EQ(ibv_modify_srq(s.srq, &a, IBV_SRQ_MAX_WR), EOPNOTSUPP);
	ASSERT_EQ(ibv_query_srq(s.srq, &q), 0);
	EXPECT_EQ(q.max_wr, s.attr.max_wr);
	EXPECT_EQ(q.srq_limit, 10u);
}

TEST_F(SrqAttr, TooManySgesAndFullRing)
{
	Srq s(A(), 4, 1);
	Buf b(A().pd, 64);
	ibv_sge sges[2] = {b.sge(0, 32), b.sge(32, 32)};
	ibv_recv_wr wr{}, *bad = nullptr;
	wr.sg_list = sges;
	wr.num_sge = s.attr.max_sge + 1;
	EXPECT_EQ(ibv_post_srq_recv(s.srq, &wr, &bad), EINVAL);
	EXPECT_EQ(bad, &wr);
	for (uint32_t i = 0; i < s.attr.max_wr; i++)
		ASSERT_EQ(s.post(b.sge(), i), 0);
	EXPECT_EQ(s.post(b.sge(), 99), ENOMEM) << "posted past the ring";
}

TEST_F(SrqAttr, QpOnSrqHasNoReceiveQueue)
{
	Srq s(A(), 16);
	Qp q(A(), {.recv_wr = 16, .srq = s.srq});
	EXPECT_EQ(q.cap.max_recv_wr, 0u);
	Buf b(A().pd, 64);
	EXPECT_EQ(post_recv(q.qp, b, 1), EINVAL);
	ibv_qp_attr a{};
	ibv_qp_init_attr ia{};
	ASSERT_EQ(ibv_query_qp(q.qp, &a, IBV_QP_CAP, &ia), 0);
	EXPECT_EQ(ia.srq, s.srq);
	EXPECT_EQ(a.cap.max_recv_wr, 0u);
	// In use: it cannot go before the QP.
	EXPECT_EQ(ibv_destroy_srq(s.srq), EBUSY);
	q.destroy();
}

TEST_F(SrqAttr, SrqOfAnotherPdIsFine)
{
	// The SRQ's WQEs name MRs of the SRQ's PD, whatever the QP's is.
	ibv_pd *pd2 = ibv_alloc_pd(A().ctx);
	ASSERT_NE(pd2, nullptr);
	{
		ibv_srq *srq = try_create(pd2, 16, 1);
		ASSERT_NE(srq, nullptr) << errstr(errno);
		Qp q(A(), {.srq = srq});
		q.destroy();
		EXPECT_EQ(ibv_destroy_srq(srq), 0);
	}
	EXPECT_EQ(ibv_dealloc_pd(pd2), 0);
}

// RC and UD QPs on Peer() receive from one SRQ; A sends.
class SrqTraffic : public TopoTest {
protected:
	// Message @i of sender @q: size(i) bytes of pattern seed(q, i).
	static uint64_t seed(int q, int i) { return 5000 + 1000 * q + i; }
	using SizeFn = std::function<size_t(int)>;

	// @per_qp messages from each of @senders, message i in slot q*per_qp+i
	// of @src, posted as one chain per QP.
	void send_messages(std::vector<Qp *> senders, Buf &src, int per_qp,
			   size_t slot, const SizeFn &size)
	{
		for (size_t q = 0; q < senders.size(); q++) {
			std::vector<Wr> w;
			for (int i = 0; i < per_qp; i++) {
				size_t off = (q * per_qp + i) * slot;
				fill(src.p + off, size(i), seed(q, i));
				w.push_back(send_wr(src, off, size(i), i));
			}
			ASSERT_EQ(post_send(senders[q]->qp, w), 0);
		}
	}

	// Each receiver got its sender's messages in order, each whole in
	// the WQE (slot wr_id of @dst) its completion names, no WQE twice.
	void expect_messages(std::vector<Qp *> receivers, const Buf &dst,
			     int per_qp, size_t slot, const SizeFn &size)
	{
		std::set<uint64_t> used;
		for (size_t q = 0; q < receivers.size(); q++) {
			Qp &b = *receivers[q];
			auto wcs = poll(b.rcq, per_qp);
			ASSERT_EQ(wcs.size(), static_cast<size_t>(per_qp));
			for (int i = 0; i < per_qp; i++) {
				const ibv_wc &wc = wcs[i];
				SCOPED_TRACE(testing::Message()
					     << "qp " << q << " msg " << i);
				ASSERT_WC(wc, wc.wr_id, IBV_WC_SUCCESS,
					  IBV_WC_RECV);
				EXPECT_EQ(wc.qp_num, b.qpn());
				EXPECT_EQ(wc.byte_len, size(i));
				ASSERT_LT(wc.wr_id, receivers.size() * per_qp);
				EXPECT_TRUE(used.insert(wc.wr_id).second)
					<< "WQE " << wc.wr_id << " used twice";
				const uint8_t *p = dst.p + wc.wr_id * slot;
				EXPECT_TRUE(has_pattern(p, size(i), seed(q, i)));
				EXPECT_TRUE(all_bytes(p + size(i),
						      slot - size(i), 0xee));
			}
		}
	}
};

INSTANTIATE_TEST_SUITE_P(Topo, SrqTraffic,
			 ::testing::Values(Topo::TwoDevices, Topo::Loopback),
			 topo_name);

// Two connections share one SRQ: messages of one to a few packets, each
// lands whole in the WQE its completion names, in message order per QP,
// and no WQE is used twice.
TEST_P(SrqTraffic, TwoRcQpsShareOneSrq)
{
	const int per_qp = 48, slot = 4 * 4096;
	Srq s(Peer(), 2 * per_qp);
	Buf dst(Peer().pd, 2 * per_qp * slot);
	memset(dst.p, 0xee, dst.len);
	for (int i = 0; i < 2 * per_qp; i++)
		ASSERT_EQ(s.post(dst.sge(i * slot, slot), i), 0);

	Qp a0(A(), {.send_wr = per_qp}), a1(A(), {.send_wr = per_qp});
	Qp b0(Peer(), {.srq = s.srq}), b1(Peer(), {.srq = s.srq});
	connect(a0, b0);
	connect(a1, b1);
	const size_t seg = A().segment();
	auto size = [&](int i) {
		return std::min<size_t>(slot, (i % 4) * seg + 1 + 37 * i);
	};
	Buf src(A().pd, 2 * per_qp * slot);
	send_messages({&a0, &a1}, src, per_qp, slot, size);
	EXPECT_TRUE(poll_ok(a0.scq, per_qp));
	EXPECT_TRUE(poll_ok(a1.scq, per_qp));
	expect_messages({&b0, &b1}, dst, per_qp, slot, size);
	EXPECT_TRUE(quiet(b0.rcq, Ms(50)));
	EXPECT_TRUE(quiet(b1.rcq, Ms(50)));
}

// An empty SRQ sends the requester into RNR waits; posting ends them and
// every message arrives (rnr_retry 7: wait for ever).
TEST_P(SrqTraffic, EmptySrqIsRnrUntilPosted)
{
	const int n = 4;
	Srq s(Peer(), 16);
	Qp a(A()), b(Peer(), {.srq = s.srq});
	connect(a, b);
	Buf src(A().pd, n * 256), dst(Peer().pd, n * 256);
	fill(src.p, src.len, 77);
	for (int i = 0; i < n; i++)
		ASSERT_EQ(post_send(a.qp, send_wr(src, i * 256, 256, i)), 0);
	EXPECT_TRUE(quiet(a.scq, Ms(200)));
	for (int i = 0; i < n; i++)
		ASSERT_EQ(s.post(dst.sge(i * 256, 256), 100 + i), 0);
	EXPECT_TRUE(poll_ok(a.scq, n));
	auto wcs = poll(b.rcq, n);
	ASSERT_EQ(wcs.size(), static_cast<size_t>(n));
	for (int i = 0; i < n; i++) {
		EXPECT_WC(wcs[i], 100 + i, IBV_WC_SUCCESS, IBV_WC_RECV);
		EXPECT_TRUE(has_pattern(dst.p + i * 256, 256, 77, i * 256));
	}
}

// IBV_EVENT_SRQ_LIMIT_REACHED once fewer WQEs than the limit are left,
// then the limit is disarmed (0) until set again.
TEST_P(SrqTraffic, LimitEventFiresOnceAndDisarms)
{
	Srq s(Peer(), 16);
	Qp a(A()), b(Peer(), {.srq = s.srq});
	connect(a, b);
	Buf src(A().pd, 64), dst(Peer().pd, 16 * 64);
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(s.post(dst.sge(i * 64, 64), i), 0);
	ibv_srq_attr attr{};
	attr.srq_limit = 4;
	ASSERT_EQ(ibv_modify_srq(s.srq, &attr, IBV_SRQ_LIMIT), 0);
	auto limit_events = [&] {
		int n = 0;
		for (const auto &ev : Peer().seen)
			n += ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED &&
			     ev.element.srq == s.srq;
		return n;
	};
	// 8 -> 4 left: not below the limit.
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(post_send(a.qp, send_wr(src, 0, 64, i)), 0);
	EXPECT_TRUE(poll_ok(b.rcq, 4));
	Peer().drain_events(Ms(100));
	EXPECT_EQ(limit_events(), 0);
	// 3 left: the event.
	ASSERT_EQ(post_send(a.qp, send_wr(src, 0, 64, 4)), 0);
	EXPECT_TRUE(poll_ok(b.rcq, 1, 4));
	ASSERT_TRUE(Peer().wait_event(IBV_EVENT_SRQ_LIMIT_REACHED, limit(Ms(2000))));
	ASSERT_EQ(ibv_query_srq(s.srq, &attr), 0);
	EXPECT_EQ(attr.srq_limit, 0u) << "the limit stays armed";
	// Disarmed: no second event.
	ASSERT_EQ(post_send(a.qp, send_wr(src, 0, 64, 5)), 0);
	EXPECT_TRUE(poll_ok(b.rcq, 1, 5));
	Peer().drain_events(Ms(100));
	EXPECT_EQ(limit_events(), 1);
	EXPECT_TRUE(poll_ok(a.scq, 6));
}

// A QP going to the error state flushes what it took and raises
// IBV_EVENT_QP_LAST_WQE_REACHED; the WQEs it did not take stay in the SRQ
// and serve another QP.
TEST_P(SrqTraffic, ErrorStateLeavesTheRestToOthers)
{
	Srq s(Peer(), 16);
	Buf src(A().pd, 128), dst(Peer().pd, 8 * 128);
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(s.post(dst.sge(i * 128, 128), i), 0);
	Qp a0(A()), a1(A()), b0(Peer(), {.srq = s.srq}),
		b1(Peer(), {.srq = s.srq});
	connect(a0, b0);
	connect(a1, b1);
	fill(src.p, 128, 90);
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(post_send(a0.qp, send_wr(src, 0, 128, i)), 0);
	EXPECT_TRUE(poll_ok(b0.rcq, 2));

	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_ERR;
	ASSERT_EQ(ibv_modify_qp(b0.qp, &a, IBV_QP_STATE), 0);
	EXPECT_TRUE(Peer().wait_event(IBV_EVENT_QP_LAST_WQE_REACHED,
				      limit(Ms(2000)), b0.qp));
	EXPECT_TRUE(quiet(b0.rcq, Ms(100))) << "it had taken nothing more";

	fill(src.p, 128, 91);
	for (int i = 0; i < 6; i++)
		ASSERT_EQ(post_send(a1.qp, send_wr(src, 0, 128, i)), 0);
	EXPECT_TRUE(poll_ok(a1.scq, 6));
	auto wcs = poll(b1.rcq, 6);
	ASSERT_EQ(wcs.size(), 6u);
	for (int i = 0; i < 6; i++) {
		EXPECT_WC(wcs[i], 2 + i, IBV_WC_SUCCESS, IBV_WC_RECV);
		EXPECT_TRUE(has_pattern(dst.p + (2 + i) * 128, 128, 91));
	}
}

// A UD QP receives from an SRQ, with the network header in front.
TEST_P(SrqTraffic, UdQpOnSrq)
{
	constexpr uint32_t kQkey = 0x2222;
	Srq s(Peer(), 16);
	Qp a(A(), {.type = IBV_QPT_UD}),
		b(Peer(), {.type = IBV_QPT_UD, .srq = s.srq});
	ud_up(a, kQkey);
	ud_up(b, kQkey);
	ibv_ah_attr attr = ah_to(A(), Peer());
	ibv_ah *ah = ibv_create_ah(A().pd, &attr);
	ASSERT_NE(ah, nullptr) << errstr(errno);
	Buf src(A().pd, 200), dst(Peer().pd, 4 * (kGrhLen + 200));
	for (int i = 0; i < 4; i++)
		ASSERT_EQ(s.post(dst.sge(i * (kGrhLen + 200), kGrhLen + 200),
				 i),
			  0);
	for (int i = 0; i < 4; i++) {
		fill(src.p, 200, 300 + i);
		Wr w = {.op = IBV_WR_SEND, .sges = {src.sge(0, 200)},
			.wr_id = static_cast<uint64_t>(i), .ah = ah,
			.remote_qpn = b.qpn(), .remote_qkey = kQkey};
		ASSERT_EQ(post_send(a.qp, w), 0);
		EXPECT_WC(poll1(a.scq), i, IBV_WC_SUCCESS);
		ibv_wc wc = poll1(b.rcq);
		EXPECT_WC(wc, i, IBV_WC_SUCCESS, IBV_WC_RECV);
		EXPECT_EQ(wc.byte_len, kGrhLen + 200u);
		EXPECT_EQ(wc.src_qp, a.qpn());
		EXPECT_TRUE(has_pattern(dst.p + i * (kGrhLen + 200) + kGrhLen,
					200, 300 + i));
	}
	EXPECT_EQ(ibv_destroy_ah(ah), 0);
}

// Loss, duplicates and reordering on the wire (netem on A's link) never
// make a message take two WQEs or a WQE complete twice: exactly as many
// WQEs as messages are posted, each message arrives whole in one, and the
// SRQ is empty afterwards (the next message waits in RNR).
TEST_P(SrqTraffic, LossDuplicatesAndReorderingTakeEachWqeOnce)
{
	if (GetParam() == Topo::Loopback)
		GTEST_SKIP() << "no link to impair";
	Qdisc qdisc;
	if (!qdisc.available())
		GTEST_SKIP() << "METAROCE_VERBS_QDISC_A not set";
	const int per_qp = 100, slot = 3 * 4096;
	Srq s(Peer(), 2 * per_qp);
	Buf dst(Peer().pd, 2 * per_qp * slot);
	memset(dst.p, 0xee, dst.len);
	for (int i = 0; i < 2 * per_qp; i++)
		ASSERT_EQ(s.post(dst.sge(i * slot, slot), i), 0);
	Qp a0(A(), {.send_wr = per_qp + 1}), a1(A(), {.send_wr = per_qp});
	Qp b0(Peer(), {.srq = s.srq}), b1(Peer(), {.srq = s.srq});
	connect(a0, b0);
	connect(a1, b1);
	ASSERT_TRUE(qdisc.set("netem loss 3% duplicate 3% delay 1ms "
			      "reorder 75% 50% limit 10000"));
	const size_t seg = A().segment();
	auto size = [&](int i) {
		return std::min<size_t>(slot, (i % 3) * seg + 100 + 11 * i);
	};
	Buf src(A().pd, 2 * per_qp * slot);
	send_messages({&a0, &a1}, src, per_qp, slot, size);
	EXPECT_TRUE(poll_ok(a0.scq, per_qp, 0, limit(Ms(60000))));
	EXPECT_TRUE(poll_ok(a1.scq, per_qp, 0, limit(Ms(60000))));
	expect_messages({&b0, &b1}, dst, per_qp, slot, size);
	// Nothing left: one more message finds no WQE until one is posted.
	ASSERT_TRUE(qdisc.set("pfifo"));
	Buf extra(Peer().pd, 64);
	ASSERT_EQ(post_send(a0.qp, send_wr(src, 0, 64, per_qp)), 0);
	EXPECT_TRUE(quiet(b0.rcq, Ms(300))) << "a WQE was left over";
	ASSERT_EQ(s.post(extra.sge(), 999), 0);
	EXPECT_WC(poll1(b0.rcq), 999, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_TRUE(quiet(b1.rcq, Ms(50)));
}

} // namespace
} // namespace mrt
