// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Completion queues: limits, completion channels (next and solicited-only
// events), resizing with completions pending, overflow.

#include "verbs_env.hpp"

namespace mrt {
namespace {

class Cq : public ChannelTest {};

TEST_F(Cq, CreateLimits)
{
	ibv_cq *cq = ibv_create_cq(A().ctx, 1, nullptr, nullptr, 0);
	ASSERT_NE(cq, nullptr) << errstr(errno);
	EXPECT_GE(cq->cqe, 1);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);

	cq = ibv_create_cq(A().ctx, kMaxCqe, nullptr, nullptr, 0);
	ASSERT_NE(cq, nullptr) << "max_cqe " << kMaxCqe << ": " << errstr(errno);
	EXPECT_GE(cq->cqe, kMaxCqe);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);

	for (int cqe : {kMaxCqe + 1, 1 << 24, 0, -1}) {
		errno = 0;
		cq = ibv_create_cq(A().ctx, cqe, nullptr, nullptr, 0);
		EXPECT_EQ(cq, nullptr) << "cqe " << cqe;
		EXPECT_EQ(errno, EINVAL) << "cqe " << cqe << ": " << errstr(errno);
		if (cq)
			ibv_destroy_cq(cq);
	}
}

TEST_F(Cq, DestroyInUseIsBusy)
{
	ibv_cq *cq = ibv_create_cq(A().ctx, 16, nullptr, nullptr, 0);
	ASSERT_NE(cq, nullptr);
	ibv_qp_init_attr ia{};
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ibv_qp *qp = ibv_create_qp(A().pd, &ia);
	ASSERT_NE(qp, nullptr) << errstr(errno);
	EXPECT_EQ(ibv_destroy_cq(cq), EBUSY);
	EXPECT_EQ(ibv_destroy_qp(qp), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

TEST_F(Cq, ChannelEventOncePerArm)
{
	ibv_comp_channel *ch = make_channel(B());
	Qp qa(A()), qb(B(), {.channel = ch});
	Buf src(A().pd, 64), dst(B().pd, 64 * 4);
	connect(qa, qb);
	fill(src.p, 64, 1);

	for (int i = 0; i < 4; i++) {
		ASSERT_EQ(post_recv(qb.qp, {dst.sge(64 * i, 64)}, i), 0);
	}

	// Armed: the receive completion raises one event.
	ASSERT_EQ(ibv_req_notify_cq(qb.rcq, 0), 0);
	ASSERT_EQ(post_send(qa.qp, {.sges = {src.sge()}, .wr_id = 0}), 0);
	EXPECT_EQ(next_event(limit()), qb.rcq);
	EXPECT_WC(poll1(qa.scq), 0, IBV_WC_SUCCESS, IBV_WC_SEND);
	EXPECT_WC(poll1(qb.rcq), 0, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_TRUE(has_pattern(dst.p, 64, 1));

	// Not armed: no event.
	ASSERT_EQ(post_send(qa.qp, {.sges = {src.sge()}, .wr_id = 1}), 0);
	EXPECT_WC(poll1(qb.rcq), 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(next_event(Ms(300)), nullptr) << "event without arming";

	// Armed while a completion is pending and unpolled: only a new one
	// raises the event. (The sender's completion comes after the ACK,
	// which the receiver sends after writing its completion.)
	ASSERT_EQ(post_send(qa.qp, {.sges = {src.sge()}, .wr_id = 2}), 0);
	ASSERT_TRUE(poll_ok(qa.scq, 2, 1));
	ASSERT_EQ(ibv_req_notify_cq(qb.rcq, 0), 0);
	EXPECT_EQ(next_event(Ms(300)), nullptr)
		<< "arming with a completion pending raised an event";
	ASSERT_EQ(post_send(qa.qp, {.sges = {src.sge()}, .wr_id = 3}), 0);
	EXPECT_EQ(next_event(limit()), qb.rcq);
	auto v = poll(qb.rcq, 2);
	ASSERT_EQ(v.size(), 2u);
	EXPECT_WC(v[0], 2, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_WC(v[1], 3, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_TRUE(poll_ok(qa.scq, 1, 3));
	EXPECT_TRUE(quiet(qb.rcq, Ms(0)));
}

TEST_F(Cq, SendCqEvent)
{
	ibv_comp_channel *ch = make_channel(B());
	Qp qb(B(), {.channel = ch}), qa(A());
	Buf src(B().pd, 128), dst(A().pd, 128);
	connect(qb, qa);
	fill(src.p, 128, 2);

	ASSERT_EQ(ibv_req_notify_cq(qb.scq, 0), 0);
	ASSERT_EQ(post_send(qb.qp, {.op = IBV_WR_RDMA_WRITE,
				   .sges = {src.sge()},
				   .wr_id = 9,
				   .raddr = dst.addr(),
				   .rkey = dst.rkey()}),
		  0);
	EXPECT_EQ(next_event(limit()), qb.scq);
	EXPECT_WC(poll1(qb.scq), 9, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	EXPECT_TRUE(has_pattern(dst.p, 128, 2));
}

// Completion events for UD too: a datagram received raises the event of
// the armed receive CQ, one sent that of the armed send CQ.
TEST_F(Cq, UdSendAndReceiveEvents)
{
	constexpr uint32_t qkey = 0x3333;
	ibv_comp_channel *ch = make_channel(B());
	Qp qa(A(), {.type = IBV_QPT_UD}),
		qb(B(), {.type = IBV_QPT_UD, .channel = ch});
	ud_up(qa, qkey);
	ud_up(qb, qkey);
	ibv_ah_attr to_b = ah_to(A(), B()), to_a = ah_to(B(), A());
	ibv_ah *ah_b = ibv_create_ah(A().pd, &to_b);
	ibv_ah *ah_a = ibv_create_ah(B().pd, &to_a);
	ASSERT_NE(ah_b, nullptr) << errstr(errno);
	ASSERT_NE(ah_a, nullptr) << errstr(errno);
	Buf sa(A().pd, 64), sb(B().pd, 64), da(A().pd, kGrhLen + 64),
		db(B().pd, kGrhLen + 64);
	fill(sa.p, 64, 4);

	ASSERT_EQ(post_recv(qb.qp, db, 1), 0);
	ASSERT_EQ(ibv_req_notify_cq(qb.rcq, 0), 0);
	ASSERT_EQ(post_send(qa.qp, {.sges = {sa.sge()}, .wr_id = 2, .ah = ah_b,
				   .remote_qpn = qb.qpn(), .remote_qkey = qkey}),
		  0);
	EXPECT_EQ(next_event(limit()), qb.rcq);
	EXPECT_WC(poll1(qb.rcq), 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_TRUE(has_pattern(db.p + kGrhLen, 64, 4));

	ASSERT_EQ(post_recv(qa.qp, da, 3), 0);
	ASSERT_EQ(ibv_req_notify_cq(qb.scq, 0), 0);
	ASSERT_EQ(post_send(qb.qp, {.sges = {sb.sge()}, .wr_id = 4, .ah = ah_a,
				   .remote_qpn = qa.qpn(), .remote_qkey = qkey}),
		  0);
	EXPECT_EQ(next_event(limit()), qb.scq);
	EXPECT_WC(poll1(qb.scq), 4, IBV_WC_SUCCESS, IBV_WC_SEND);
	EXPECT_WC(poll1(qa.rcq), 3, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(ibv_destroy_ah(ah_a), 0);
	EXPECT_EQ(ibv_destroy_ah(ah_b), 0);
}

// A QP on an SRQ raises its receive CQ's event like any other.
TEST_F(Cq, SrqReceiveEvent)
{
	ibv_comp_channel *ch = make_channel(B());
	ibv_srq_init_attr sa{};
	sa.attr.max_wr = 4;
	sa.attr.max_sge = 1;
	ibv_srq *srq = ibv_create_srq(B().pd, &sa);
	ASSERT_NE(srq, nullptr) << errstr(errno);
	{
		Qp qa(A()), qb(B(), {.channel = ch, .srq = srq});
		connect(qa, qb);
		Buf src(A().pd, 64), dst(B().pd, 64);
		ibv_sge sge = dst.sge();
		ibv_recv_wr wr{}, *bad = nullptr;
		wr.wr_id = 5;
		wr.sg_list = &sge;
		wr.num_sge = 1;
		ASSERT_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
		ASSERT_EQ(ibv_req_notify_cq(qb.rcq, 0), 0);
		ASSERT_EQ(post_send(qa.qp, {.sges = {src.sge()}, .wr_id = 6}), 0);
		EXPECT_EQ(next_event(limit()), qb.rcq);
		EXPECT_WC(poll1(qb.rcq), 5, IBV_WC_SUCCESS, IBV_WC_RECV);
		EXPECT_TRUE(poll_ok(qa.scq, 1, 6));
	}
	EXPECT_EQ(ibv_destroy_srq(srq), 0);
}

TEST_F(Cq, SolicitedOnly)
{
	ibv_comp_channel *ch = make_channel(B());
	Qp qa(A()), qb(B(), {.channel = ch});
	Buf src(A().pd, 256), dst(B().pd, 256 * 8), wdst(B().pd, 256);
	connect(qa, qb);
	fill(src.p, 256, 3);
	for (int i = 0; i < 8; i++) {
		ASSERT_EQ(post_recv(qb.qp, {dst.sge(256 * i, 256)}, i), 0);
	}

	ASSERT_EQ(ibv_req_notify_cq(qb.rcq, 1), 0);
	// Unsolicited SEND, SEND with immediate, WRITE with immediate: no
	// event, though each completes.
	Wr plain{.sges = {src.sge()}, .wr_id = 0};
	Wr imm{.op = IBV_WR_SEND_WITH_IMM, .sges = {src.sge()}, .wr_id = 1,
	       .imm = 0x1234};
	Wr wimm{.op = IBV_WR_RDMA_WRITE_WITH_IMM, .sges = {src.sge()},
		.wr_id = 2, .raddr = wdst.addr(), .rkey = wdst.rkey(),
		.imm = 0x5678};
	ASSERT_EQ(post_send(qa.qp, plain), 0);
	ASSERT_EQ(post_send(qa.qp, imm), 0);
	ASSERT_EQ(post_send(qa.qp, wimm), 0);
	ASSERT_TRUE(poll_ok(qa.scq, 3));
	auto v = poll(qb.rcq, 3);
	ASSERT_EQ(v.size(), 3u);
	EXPECT_EQ(next_event(Ms(300)), nullptr)
		<< "event for an unsolicited completion";

	// A solicited SEND raises the event.
	Wr sol{.sges = {src.sge()}, .wr_id = 3,
	       .flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED};
	ASSERT_EQ(post_send(qa.qp, sol), 0);
	EXPECT_EQ(next_event(limit()), qb.rcq);
	EXPECT_WC(poll1(qb.rcq), 3, IBV_WC_SUCCESS, IBV_WC_RECV);

	// So does a solicited WRITE with immediate.
	ASSERT_EQ(ibv_req_notify_cq(qb.rcq, 1), 0);
	wimm.wr_id = 4;
	wimm.flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	ASSERT_EQ(post_send(qa.qp, wimm), 0);
	EXPECT_EQ(next_event(limit()), qb.rcq);
	ibv_wc wc = poll1(qb.rcq);
	EXPECT_WC(wc, 4, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	EXPECT_EQ(be32toh(wc.imm_data), 0x5678u);

	// Solicited-only armed, then a normal arm: the next completion fires.
	ASSERT_EQ(ibv_req_notify_cq(qb.rcq, 1), 0);
	ASSERT_EQ(ibv_req_notify_cq(qb.rcq, 0), 0);
	plain.wr_id = 5;
	ASSERT_EQ(post_send(qa.qp, plain), 0);
	EXPECT_EQ(next_event(limit()), qb.rcq);
	EXPECT_WC(poll1(qb.rcq), 5, IBV_WC_SUCCESS, IBV_WC_RECV);
	ASSERT_TRUE(poll_ok(qa.scq, 3, 3));
}

TEST_F(Cq, ResizeWithCompletionsPending)
{
	Qp qa(A()), qb(B(), {.recv_wr = 128, .rcqe = 16});
	Buf src(A().pd, 64 * 60), dst(B().pd, 64 * 60);
	connect(qa, qb);
	fill(src.p, src.len, 4);
	for (int i = 0; i < 60; i++) {
		ASSERT_EQ(post_recv(qb.qp, {dst.sge(64 * i, 64)}, i), 0);
	}

	auto send = [&](int first, int n) {
		std::vector<Wr> w;
		for (int i = first; i < first + n; i++)
			w.push_back({.sges = {src.sge(64 * i, 64)},
				     .wr_id = static_cast<uint64_t>(i)});
		ASSERT_EQ(post_send(qa.qp, w), 0);
		ASSERT_TRUE(poll_ok(qa.scq, n, first));
	};
	int orig = qb.rcq->cqe;
	ASSERT_GE(orig, 16);
	send(0, 10);
	// The receive completions are in the CQ, unpolled (the sender
	// completes only after the receiver's ACK).

	// Too small for what is pending: refused, nothing lost.
	EXPECT_EQ(ibv_resize_cq(qb.rcq, 4), EINVAL);
	EXPECT_EQ(qb.rcq->cqe, orig);
	EXPECT_EQ(ibv_resize_cq(qb.rcq, kMaxCqe + 1), EINVAL);
	EXPECT_EQ(ibv_resize_cq(qb.rcq, 0), EINVAL);

	// Bigger: the pending completions move over, in order.
	ASSERT_EQ(ibv_resize_cq(qb.rcq, 100), 0);
	EXPECT_GE(qb.rcq->cqe, 100);
	auto v = poll(qb.rcq, 10);
	ASSERT_EQ(v.size(), 10u);
	for (int i = 0; i < 10; i++) {
		EXPECT_WC(v[i], i, IBV_WC_SUCCESS, IBV_WC_RECV);
		EXPECT_EQ(v[i].byte_len, 64u);
	}
	// And new ones land in the new ring, beyond the old size.
	send(10, 40);
	ASSERT_TRUE(poll_ok(qb.rcq, 40, 10));

	// Smaller again, with some pending.
	send(50, 5);
	ASSERT_EQ(ibv_resize_cq(qb.rcq, 8), 0);
	EXPECT_GE(qb.rcq->cqe, 8);
	ASSERT_TRUE(poll_ok(qb.rcq, 5, 50));
	send(55, 5);
	ASSERT_TRUE(poll_ok(qb.rcq, 5, 55));
	EXPECT_TRUE(has_pattern(dst.p, dst.len, 4));
}

TEST_F(Cq, OverflowRaisesCqError)
{
	Qp qa(A(), {.send_wr = 64, .scqe = 4}), qb(B());
	Buf src(A().pd, 64), dst(B().pd, 64);
	connect(qa, qb);
	int cap = qa.scq->cqe;
	ASSERT_GE(cap, 4);
	ASSERT_LT(cap, 40) << "the CQ is much bigger than asked";

	std::vector<Wr> w;
	for (int i = 0; i < cap + 8; i++)
		w.push_back({.op = IBV_WR_RDMA_WRITE, .sges = {src.sge()},
			     .wr_id = static_cast<uint64_t>(i),
			     .raddr = dst.addr(), .rkey = dst.rkey()});
	ASSERT_EQ(post_send(qa.qp, w), 0);

	auto ev = A().wait_event(IBV_EVENT_CQ_ERR, limit(), nullptr, qa.scq);
	ASSERT_TRUE(ev.has_value()) << "no IBV_EVENT_CQ_ERR";
	EXPECT_EQ(ev->element.cq, qa.scq);
	// What fit is there, in order and successful.
	auto v = poll(qa.scq, cap + 8, Ms(300));
	EXPECT_GE(v.size(), static_cast<size_t>(cap));
	EXPECT_LT(v.size(), static_cast<size_t>(cap + 8));
	for (size_t i = 0; i < v.size(); i++) {
		EXPECT_WC(v[i], i, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	}
	EXPECT_EQ(A().count_events(IBV_EVENT_CQ_ERR), 1);
}

} // namespace
} // namespace mrt
