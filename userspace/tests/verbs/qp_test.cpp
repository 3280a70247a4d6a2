// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Queue pairs: creation limits, the RC state machine with its attribute
// checks, query_qp, SQD (drain), the error state (flush) and RESET, posting
// in each state, and the ibv_qp_ex work-request API.
#include <rdma/metaroce_abi.h>

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <thread>

#include "verbs_env.hpp"

namespace mrt {
namespace {

class QpCreate : public VerbsTest {
protected:
	ibv_qp *try_create(const ibv_qp_cap &cap, ibv_qp_type type = IBV_QPT_RC,
			   ibv_srq *srq = nullptr)
	{
		if (!cq_)
			cq_ = ibv_create_cq(A().ctx, 64, nullptr, nullptr, 0);
		ibv_qp_init_attr ia{};
		ia.send_cq = ia.recv_cq = cq_;
		ia.qp_type = type;
		ia.cap = cap;
		ia.srq = srq;
		errno = 0;
		ibv_qp *qp = ibv_create_qp(A().pd, &ia);
		if (qp)
			got_ = ia.cap;
		return qp;
	}

	void TearDown() override
	{
		if (cq_) {
			EXPECT_EQ(ibv_destroy_cq(cq_), 0);
		}
		VerbsTest::TearDown();
	}

	ibv_cq *cq_ = nullptr;
	ibv_qp_cap got_{};
};

static ibv_qp_cap caps(uint32_t swr, uint32_t rwr, uint32_t ssge,
		       uint32_t rsge, uint32_t inl)
{
	ibv_qp_cap c{};
	c.max_send_wr = swr;
	c.max_recv_wr = rwr;
	c.max_send_sge = ssge;
	c.max_recv_sge = rsge;
	c.max_inline_data = inl;
	return c;
}

TEST_F(QpCreate, CapsRoundedUpAndQueried)
{
	Qp q(A(), {.send_wr = 100, .recv_wr = 50, .send_sge = 3,
		   .recv_sge = 5, .inline_data = 100, .sig_all = true});

	EXPECT_GE(q.cap.max_send_wr, 100u);
	EXPECT_GE(q.cap.max_recv_wr, 50u);
	EXPECT_GE(q.cap.max_send_sge, 3u);
	EXPECT_GE(q.cap.max_recv_sge, 5u);
	EXPECT_GE(q.cap.max_inline_data, 100u);
	EXPECT_LE(q.cap.max_send_wr, kMaxQpWr);
	EXPECT_LE(q.cap.max_send_sge, kMaxSge);
	EXPECT_LE(q.cap.max_recv_sge, kMaxSge);
	EXPECT_LE(q.cap.max_inline_data, kMaxInline);

	ibv_qp_attr a{};
	ibv_qp_init_attr ia{};
	ASSERT_EQ(ibv_query_qp(q.qp, &a, IBV_QP_STATE | IBV_QP_CAP, &ia), 0);
	EXPECT_EQ(a.qp_state, IBV_QPS_RESET);
	EXPECT_EQ(ia.qp_type, IBV_QPT_RC);
	EXPECT_EQ(ia.sq_sig_all, 1);
	for (const ibv_qp_cap *c : {&a.cap, &ia.cap}) {
		EXPECT_EQ(c->max_send_wr, q.cap.max_send_wr);
		EXPECT_EQ(c->max_recv_wr, q.cap.max_recv_wr);
		EXPECT_EQ(c->max_send_sge, q.cap.max_send_sge);
		EXPECT_EQ(c->max_recv_sge, q.cap.max_recv_sge);
		EXPECT_EQ(c->max_inline_data, q.cap.max_inline_data);
	}
	EXPECT_EQ(q.qp->qp_type, IBV_QPT_RC);
	EXPECT_EQ(q.qp->state, IBV_QPS_RESET);
	EXPECT_GE(q.qpn(), 2u) << "QPNs 0 and 1 are special";
	EXPECT_LE(q.qpn(), 0xffffffu);
}

TEST_F(QpCreate, MaximaAccepted)
{
	ibv_qp *qp = try_create(caps(kMaxQpWr, kMaxQpWr, kMaxSge, kMaxSge,
				     kMaxInline));
	ASSERT_NE(qp, nullptr) << errstr(errno);
	EXPECT_EQ(got_.max_send_wr, kMaxQpWr);
	EXPECT_EQ(got_.max_recv_wr, kMaxQpWr);
	EXPECT_EQ(got_.max_send_sge, kMaxSge);
	EXPECT_EQ(got_.max_recv_sge, kMaxSge);
	EXPECT_EQ(got_.max_inline_data, kMaxInline);
	EXPECT_EQ(ibv_destroy_qp(qp), 0);

	qp = try_create(caps(0, 0, 0, 0, 0));
	ASSERT_NE(qp, nullptr) << "all-zero caps: " << errstr(errno);
	EXPECT_EQ(ibv_destroy_qp(qp), 0);
}

TEST_F(QpCreate, TooLargeIsEinval)
{
	const struct {
		const char *what;
		ibv_qp_cap cap;
	} cases[] = {
		{"max_send_wr", caps(kMaxQpWr + 1, 16, 1, 1, 0)},
		{"max_recv_wr", caps(16, kMaxQpWr + 1, 1, 1, 0)},
		{"max_send_sge", caps(16, 16, kMaxSge + 1, 1, 0)},
		{"max_recv_sge", caps(16, 16, 1, kMaxSge + 1, 0)},
		{"max_inline_data", caps(16, 16, 1, 1, kMaxInline + 1)},
		{"huge max_send_wr", caps(1u << 31, 16, 1, 1, 0)},
		{"huge max_inline_data", caps(16, 16, 1, 1, 1u << 20)},
	};
	for (const auto &c : cases) {
		ibv_qp *qp = try_create(c.cap);
		int err = errno;
		EXPECT_EQ(qp, nullptr) << c.what;
		EXPECT_EQ(err, EINVAL) << c.what << ": " << errstr(err);
		if (qp)
			ibv_destroy_qp(qp);
	}
}

TEST_F(QpCreate, UnsupportedTypes)
{
	for (ibv_qp_type t : {IBV_QPT_UC, IBV_QPT_XRC_SEND, IBV_QPT_XRC_RECV,
			      IBV_QPT_RAW_PACKET, IBV_QPT_DRIVER}) {
		ibv_qp *qp = try_create(caps(16, 16, 1, 1, 0), t);
		int err = errno;
		EXPECT_EQ(qp, nullptr) << "QP type " << t;
		EXPECT_EQ(err, EOPNOTSUPP) << "QP type " << t << ": " << errstr(err);
		if (qp)
			ibv_destroy_qp(qp);
	}
}

TEST_F(QpCreate, ExtendedAttributes)
{
	ibv_cq *cq = ibv_create_cq(A().ctx, 16, nullptr, nullptr, 0);
	ASSERT_NE(cq, nullptr);
	auto attempt = [&](auto tweak) {
		ibv_qp_init_attr_ex a{};
		a.send_cq = a.recv_cq = cq;
		a.qp_type = IBV_QPT_RC;
		a.cap = caps(8, 8, 1, 1, 0);
		a.comp_mask = IBV_QP_INIT_ATTR_PD;
		a.pd = A().pd;
		tweak(a);
		errno = 0;
		ibv_qp *qp = ibv_create_qp_ex(A().ctx, &a);
		int err = qp ? 0 : errno;
		if (qp)
			ibv_destroy_qp(qp);
		return err;
	};
	EXPECT_EQ(attempt([](ibv_qp_init_attr_ex &) {}), 0);
	EXPECT_EQ(attempt([](ibv_qp_init_attr_ex &a) {
			  a.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
			  a.create_flags = IBV_QP_CREATE_SCATTER_FCS;
		  }),
		  EOPNOTSUPP);
	EXPECT_EQ(attempt([](ibv_qp_init_attr_ex &a) {
			  a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			  a.send_ops_flags = IBV_QP_EX_WITH_SEND |
					     IBV_QP_EX_WITH_ATOMIC_WRITE;
		  }),
		  EOPNOTSUPP);
	EXPECT_EQ(attempt([](ibv_qp_init_attr_ex &a) {
			  a.qp_type = IBV_QPT_UD;
			  a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			  a.send_ops_flags = IBV_QP_EX_WITH_RDMA_WRITE;
		  }),
		  EOPNOTSUPP);
	EXPECT_EQ(attempt([](ibv_qp_init_attr_ex &a) { a.send_cq = nullptr; }),
		  EINVAL);
	// (With IBV_QP_INIT_ATTR_PD alone libibverbs calls ibv_create_qp(pd),
	// which needs a PD; another bit routes it to the provider.)
	EXPECT_EQ(attempt([](ibv_qp_init_attr_ex &a) {
			  a.pd = nullptr;
			  a.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
			  a.send_ops_flags = IBV_QP_EX_WITH_SEND;
		  }),
		  EINVAL);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

TEST_F(QpCreate, ManyQps)
{
	std::vector<std::unique_ptr<Qp>> qps;
	std::vector<uint32_t> qpns;

	for (int i = 0; i < 64; i++) {
		qps.push_back(std::make_unique<Qp>(
			A(), QpOpts{.type = i % 2 ? IBV_QPT_UD : IBV_QPT_RC,
				    .send_wr = 8, .recv_wr = 8}));
		qpns.push_back(qps.back()->qpn());
	}
	std::sort(qpns.begin(), qpns.end());
	EXPECT_EQ(std::adjacent_find(qpns.begin(), qpns.end()), qpns.end())
		<< "duplicate QPN";
}

// ---------------------------------------------------------------------------

class QpState : public VerbsTest {};

TEST_F(QpState, ResetInitRtrRtsWithQuery)
{
	Qp qa(A(), {.send_wr = 32, .recv_wr = 16, .send_sge = 2,
		    .recv_sge = 3, .inline_data = 64});
	Qp qb(B());
	ConnOpts o{.psn_a = 0x123456, .psn_b = 0xabcdef, .mtu = IBV_MTU_512,
		   .timeout = 17, .retry_cnt = 5, .rnr_retry = 3,
		   .min_rnr_timer = 12, .access = IBV_ACCESS_REMOTE_READ,
		   .max_rd_atomic = 7, .max_dest_rd_atomic = 9};
	ibv_qp_attr a{};
	ibv_qp_init_attr ia{};
	const int all = IBV_QP_STATE | IBV_QP_CUR_STATE | IBV_QP_PKEY_INDEX |
			IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_AV |
			IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER |
			IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_CAP;

	ASSERT_EQ(rc_init(qa, o.access), 0);
	ASSERT_EQ(ibv_query_qp(qa.qp, &a, all, &ia), 0);
	EXPECT_EQ(a.qp_state, IBV_QPS_INIT);
	EXPECT_EQ(a.port_num, kPort);
	EXPECT_EQ(a.pkey_index, 0);
	EXPECT_EQ(a.qp_access_flags, static_cast<unsigned>(o.access));
	EXPECT_EQ(qa.qp->state, IBV_QPS_INIT);

	ASSERT_EQ(rc_init(qb, kRcAccess), 0);
	ASSERT_EQ(rc_rtr(qa, B(), qb.qpn(), o.psn_b, o), 0);
	a = {};
	ASSERT_EQ(ibv_query_qp(qa.qp, &a, all, &ia), 0);
	EXPECT_EQ(a.qp_state, IBV_QPS_RTR);
	EXPECT_EQ(a.path_mtu, IBV_MTU_512);
	EXPECT_EQ(a.dest_qp_num, qb.qpn());
	EXPECT_EQ(a.rq_psn, o.psn_b);
	EXPECT_EQ(a.max_dest_rd_atomic, o.max_dest_rd_atomic);
	EXPECT_EQ(a.min_rnr_timer, o.min_rnr_timer);
	EXPECT_EQ(a.ah_attr.is_global, 1);
	EXPECT_EQ(0, memcmp(&a.ah_attr.grh.dgid, &B().gid, 16))
		<< gid_str(a.ah_attr.grh.dgid) << " vs " << gid_str(B().gid);
	EXPECT_EQ(a.ah_attr.grh.sgid_index, A().gid_index);
	EXPECT_EQ(a.ah_attr.grh.hop_limit, 64);
	EXPECT_EQ(a.ah_attr.port_num, kPort);
	EXPECT_EQ(a.qp_access_flags, static_cast<unsigned>(o.access));

	ASSERT_EQ(rc_rts(qa, o.psn_a, o), 0);
	a = {};
	ASSERT_EQ(ibv_query_qp(qa.qp, &a, all, &ia), 0);
	EXPECT_EQ(a.qp_state, IBV_QPS_RTS);
	EXPECT_EQ(a.cur_qp_state, IBV_QPS_RTS);
	EXPECT_EQ(a.sq_psn, o.psn_a);
	EXPECT_EQ(a.timeout, o.timeout);
	EXPECT_EQ(a.retry_cnt, o.retry_cnt);
	EXPECT_EQ(a.rnr_retry, o.rnr_retry);
	EXPECT_EQ(a.max_rd_atomic, o.max_rd_atomic);
	EXPECT_EQ(a.sq_draining, 0);
	EXPECT_EQ(a.path_mtu, IBV_MTU_512);
	EXPECT_EQ(a.dest_qp_num, qb.qpn());
	EXPECT_EQ(a.cap.max_send_wr, qa.cap.max_send_wr);
	EXPECT_EQ(a.cap.max_recv_sge, qa.cap.max_recv_sge);
	EXPECT_EQ(a.cap.max_inline_data, qa.cap.max_inline_data);
	EXPECT_EQ(ia.cap.max_send_sge, qa.cap.max_send_sge);
	EXPECT_EQ(ia.qp_type, IBV_QPT_RC);
	EXPECT_EQ(qa.qp->state, IBV_QPS_RTS);

	// RTS -> RTS: the attributes allowed there.
	a = {};
	a.qp_state = IBV_QPS_RTS;
	a.min_rnr_timer = 20;
	a.qp_access_flags = kRcAccess;
	ASSERT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER |
				     IBV_QP_ACCESS_FLAGS),
		  0);
	a = {};
	ASSERT_EQ(ibv_query_qp(qa.qp, &a, all, &ia), 0);
	EXPECT_EQ(a.min_rnr_timer, 20);
	EXPECT_EQ(a.qp_access_flags, static_cast<unsigned>(kRcAccess));
}

TEST_F(QpState, IllegalTransitions)
{
	Qp qa(A()), qb(B());
	ConnOpts o;
	ibv_qp_attr a{};

	// RESET to RTR or RTS or SQD directly.
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN), EINVAL);
	a = {};
	a.qp_state = IBV_QPS_SQD;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), EINVAL);
	EXPECT_EQ(qa.state(), IBV_QPS_RESET);
	ASSERT_EQ(rc_init(qb, kRcAccess), 0);
	ASSERT_NE(rc_rtr(qa, B(), qb.qpn(), 0, o), 0) << "RESET -> RTR";
	EXPECT_EQ(qa.state(), IBV_QPS_RESET);

	// INIT to RTS, INIT to SQD.
	ASSERT_EQ(rc_init(qa, kRcAccess), 0);
	EXPECT_EQ(rc_rts(qa, 0, o), EINVAL) << "INIT -> RTS";
	a = {};
	a.qp_state = IBV_QPS_SQD;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), EINVAL);
	EXPECT_EQ(qa.state(), IBV_QPS_INIT);

	// RTR to SQD; RTR to INIT.
	ASSERT_EQ(rc_rtr(qa, B(), qb.qpn(), 0, o), 0);
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), EINVAL);
	a.qp_state = IBV_QPS_INIT;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), EINVAL);
	EXPECT_EQ(qa.state(), IBV_QPS_RTR);

	// And the legal path still works afterwards.
	EXPECT_EQ(rc_rts(qa, 0, o), 0);
	EXPECT_EQ(qa.state(), IBV_QPS_RTS);
	// Any state but RESET to ERR (ib_core's table), ERR to RESET only.
	a = {};
	a.qp_state = IBV_QPS_ERR;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), 0);
	EXPECT_EQ(qa.state(), IBV_QPS_ERR);
	a.qp_state = IBV_QPS_RTS;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), EINVAL) << "ERR -> RTS";
	a.qp_state = IBV_QPS_INIT;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), EINVAL) << "ERR -> INIT";
	a.qp_state = IBV_QPS_RESET;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), 0);
	EXPECT_EQ(qa.state(), IBV_QPS_RESET);
	a.qp_state = IBV_QPS_ERR;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), EINVAL) << "RESET -> ERR";
	EXPECT_EQ(qa.state(), IBV_QPS_RESET);
	// INIT -> ERR and RTR -> ERR.
	ASSERT_EQ(rc_init(qa, kRcAccess), 0);
	a.qp_state = IBV_QPS_ERR;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), 0);
	Qp qc(A());
	ASSERT_EQ(rc_init(qc, kRcAccess), 0);
	ASSERT_EQ(rc_rtr(qc, B(), qb.qpn(), 0, o), 0);
	EXPECT_EQ(ibv_modify_qp(qc.qp, &a, IBV_QP_STATE), 0);
	EXPECT_EQ(qc.state(), IBV_QPS_ERR);
}

// A current state (IBV_QP_CUR_STATE) that is not the QP's is refused (IBA
// 11.2.5.2: "invalid current QP state"), however legal the transition from
// the claimed state would be.
TEST_F(QpState, CurrentStateMustMatch)
{
	Qp qa(A()), qb(B());
	ConnOpts o;
	ASSERT_EQ(rc_init(qb, kRcAccess), 0);
	ASSERT_EQ(rc_init(qa, kRcAccess), 0);
	ASSERT_EQ(rc_rtr(qa, B(), qb.qpn(), 0, o), 0);

	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_RTS;
	a.cur_qp_state = IBV_QPS_SQD;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE),
		  EINVAL)
		<< "RTR -> RTS without an SQ PSN, claiming to be in SQD";
	EXPECT_EQ(qa.state(), IBV_QPS_RTR);

	// The right current state is fine (RTS -> RTS takes it).
	Qp qc(A()), qd(B());
	connect(qc, qd);
	a = {};
	a.qp_state = IBV_QPS_RTS;
	a.cur_qp_state = IBV_QPS_RTS;
	EXPECT_EQ(ibv_modify_qp(qc.qp, &a, IBV_QP_STATE | IBV_QP_CUR_STATE), 0);
	EXPECT_EQ(qc.state(), IBV_QPS_RTS);
}

// PSNs are 24 bits: Linux (ib_uverbs) keeps the low 24 bits of what it is
// given; the QP reports those.
TEST_F(QpState, PsnsAre24Bits)
{
	Qp qa(A()), qb(B());
	ConnOpts o;
	ASSERT_EQ(rc_init(qb, kRcAccess), 0);
	ASSERT_EQ(rc_init(qa, kRcAccess), 0);
	int err = rc_rtr(qa, B(), qb.qpn(), 0x1abcdef, o);
	if (err) {
		EXPECT_EQ(err, EINVAL);
		return;
	}
	err = rc_rts(qa, 0x3fedcba, o);
	ibv_qp_attr a{};
	ibv_qp_init_attr ia{};
	ASSERT_EQ(ibv_query_qp(qa.qp, &a, IBV_QP_RQ_PSN | IBV_QP_SQ_PSN, &ia), 0);
	EXPECT_EQ(a.rq_psn, 0xabcdefu);
	if (!err) {
		EXPECT_EQ(a.sq_psn, 0xfedcbau);
	} else {
		EXPECT_EQ(err, EINVAL);
	}
}

TEST_F(QpState, RequiredAndForbiddenAttributes)
{
	Qp qa(A()), qb(B());
	ConnOpts o;
	ibv_qp_attr a{};

	// RESET -> INIT needs P_Key index, port and access flags.
	a.qp_state = IBV_QPS_INIT;
	a.port_num = kPort;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE | IBV_QP_PORT |
				     IBV_QP_PKEY_INDEX),
		  EINVAL);
	// ... and takes no PSN.
	a.qp_access_flags = 0;
	a.sq_psn = 5;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE | IBV_QP_PORT |
				     IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS |
				     IBV_QP_SQ_PSN),
		  EINVAL);
	EXPECT_EQ(qa.state(), IBV_QPS_RESET);
	ASSERT_EQ(rc_init(qa, kRcAccess), 0);
	ASSERT_EQ(rc_init(qb, kRcAccess), 0);

	// INIT -> RTR without the address vector, or without the PSN.
	a = {};
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = qb.qpn();
	a.rq_psn = 0;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a,
				IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER),
		  EINVAL);
	a.ah_attr = ah_to(A(), B());
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a,
				IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					IBV_QP_DEST_QPN |
					IBV_QP_MAX_DEST_RD_ATOMIC |
					IBV_QP_MIN_RNR_TIMER),
		  EINVAL);
	EXPECT_EQ(qa.state(), IBV_QPS_INIT);
	ASSERT_EQ(rc_rtr(qa, B(), qb.qpn(), 0, o), 0);

	// RTR -> RTS without the SQ PSN; with an RTR-only attribute.
	a = {};
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC),
		  EINVAL);
	a.path_mtu = IBV_MTU_1024;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_MAX_QP_RD_ATOMIC | IBV_QP_SQ_PSN |
				     IBV_QP_PATH_MTU),
		  EINVAL);
	EXPECT_EQ(qa.state(), IBV_QPS_RTR);
	EXPECT_EQ(rc_rts(qa, 0, o), 0);
}

// One bad attribute value at the transition that takes it: refused with
// EINVAL, and the QP stays where it was.
struct BadValue {
	const char *name;
	ibv_qp_state at;	// the state the QP is in
	std::function<void(ibv_qp_attr &, int &)> bad;
	int err = EINVAL;	// 0: any error
};

TEST_F(QpState, BadAttributeValues)
{
	Ctx &a_ = A(), &b_ = B();
	const int gid_hole = a_.port.gid_tbl_len - 1;
	const BadValue cases[] = {
		{"port 2", IBV_QPS_RESET, [](auto &a, int &) { a.port_num = 2; }},
		{"port 0", IBV_QPS_RESET, [](auto &a, int &) { a.port_num = 0; }},
		{"pkey index 1", IBV_QPS_RESET,
		 [](auto &a, int &) { a.pkey_index = 1; }},
		{"access MW_BIND", IBV_QPS_RESET,
		 [](auto &a, int &) { a.qp_access_flags |= IBV_ACCESS_MW_BIND; }},
		{"access unknown bit", IBV_QPS_RESET,
		 [](auto &a, int &) { a.qp_access_flags |= 1u << 15; }},
		{"path_mtu 0", IBV_QPS_INIT,
		 [](auto &a, int &) { a.path_mtu = static_cast<ibv_mtu>(0); }},
		{"path_mtu 6", IBV_QPS_INIT,
		 [](auto &a, int &) { a.path_mtu = static_cast<ibv_mtu>(6); }},
		{"dest_qp_num 2^24", IBV_QPS_INIT,
		 [](auto &a, int &) { a.dest_qp_num = 1u << 24; }},
		{"max_dest_rd_atomic 129", IBV_QPS_INIT,
		 [](auto &a, int &) { a.max_dest_rd_atomic = kMaxRdAtomic + 1; }},
		{"min_rnr_timer 32", IBV_QPS_INIT,
		 [](auto &a, int &) { a.min_rnr_timer = 32; }},
		{"AV without GRH", IBV_QPS_INIT,
		 [](auto &a, int &) { a.ah_attr.is_global = 0; }},
		{"AV port 2", IBV_QPS_INIT,
		 [](auto &a, int &) { a.ah_attr.port_num = 2; }},
		// ib_core finds no GID there (ENODATA on Linux 6.1).
		{"AV empty source GID", IBV_QPS_INIT,
		 [gid_hole](auto &a, int &) {
			 a.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_hole);
		 },
		 0},
		{"timeout 32", IBV_QPS_RTR, [](auto &a, int &) { a.timeout = 32; }},
		{"timeout 255", IBV_QPS_RTR,
		 [](auto &a, int &) { a.timeout = 255; }},
		{"retry_cnt 8", IBV_QPS_RTR,
		 [](auto &a, int &) { a.retry_cnt = 8; }},
		{"rnr_retry 8", IBV_QPS_RTR,
		 [](auto &a, int &) { a.rnr_retry = 8; }},
		{"max_rd_atomic 129", IBV_QPS_RTR,
		 [](auto &a, int &) { a.max_rd_atomic = kMaxRdAtomic + 1; }},
	};
	Qp qb(b_);
	ASSERT_EQ(rc_init(qb, kRcAccess), 0);

	for (const BadValue &c : cases) {
		SCOPED_TRACE(c.name);
		Qp q(a_);
		ConnOpts o;
		ibv_qp_attr a{};
		int mask = 0;

		if (c.at >= IBV_QPS_INIT) {
			ASSERT_EQ(rc_init(q, kRcAccess), 0);
		}
		if (c.at >= IBV_QPS_RTR) {
			ASSERT_EQ(rc_rtr(q, b_, qb.qpn(), 0, o), 0);
		}
		switch (c.at) {
		case IBV_QPS_RESET:
			a.qp_state = IBV_QPS_INIT;
			a.port_num = kPort;
			a.qp_access_flags = kRcAccess;
			mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			       IBV_QP_ACCESS_FLAGS;
			break;
		case IBV_QPS_INIT:
			a.qp_state = IBV_QPS_RTR;
			a.path_mtu = IBV_MTU_1024;
			a.dest_qp_num = qb.qpn();
			a.max_dest_rd_atomic = 1;
			a.min_rnr_timer = 1;
			a.ah_attr = ah_to(a_, b_);
			mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			       IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
			break;
		default:
			a.qp_state = IBV_QPS_RTS;
			a.timeout = 14;
			a.retry_cnt = 7;
			a.rnr_retry = 7;
			a.max_rd_atomic = 1;
			mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			       IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			       IBV_QP_MAX_QP_RD_ATOMIC;
			break;
		}
		ibv_qp_attr good = a;
		c.bad(a, mask);
		int err = ibv_modify_qp(q.qp, &a, mask);
		if (c.err) {
			EXPECT_EQ(err, c.err) << errstr(err);
		} else {
			EXPECT_NE(err, 0);
		}
		EXPECT_EQ(q.state(), c.at);
		// The same transition with good values still works.
		EXPECT_EQ(ibv_modify_qp(q.qp, &good, mask), 0);
	}
}

TEST_F(QpState, PostRecvInResetIsEinvalInInitAccepted)
{
	Qp qa(A()), qb(B());
	Buf src(A().pd, 100), dst(B().pd, 100);
	fill(src.p, 100, 11);

	EXPECT_EQ(post_recv(qb.qp, dst, 1), EINVAL);
	ASSERT_EQ(rc_init(qb, kRcAccess), 0);
	// Receives posted in INIT are used once connected.
	EXPECT_EQ(post_recv(qb.qp, dst, 2), 0);
	ConnOpts o;
	ASSERT_EQ(rc_init(qa, kRcAccess), 0);
	ASSERT_EQ(rc_rtr(qa, B(), qb.qpn(), o.psn_b, o), 0);
	ASSERT_EQ(rc_rtr(qb, A(), qa.qpn(), o.psn_a, o), 0);
	ASSERT_EQ(rc_rts(qa, o.psn_a, o), 0);
	ASSERT_EQ(rc_rts(qb, o.psn_b, o), 0);
	ASSERT_EQ(post_send(qa.qp, {.sges = {src.sge()}, .wr_id = 3}), 0);
	EXPECT_WC(poll1(qa.scq), 3, IBV_WC_SUCCESS, IBV_WC_SEND);
	ibv_wc wc = poll1(qb.rcq);
	EXPECT_WC(wc, 2, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(wc.byte_len, 100u);
	EXPECT_TRUE(has_pattern(dst.p, 100, 11));
}

// IBA 10.3.1 (and the kernel's own post_send for in-kernel QPs): posting
// to the send queue in RESET, INIT or RTR is an immediate error.
TEST_F(QpState, PostSendBeforeRtsIsEinval)
{
	Qp qa(A()), qb(B());
	Buf src(A().pd, 64);
	ConnOpts o;
	Wr w{.sges = {src.sge()}, .wr_id = 1};

	EXPECT_EQ(post_send(qa.qp, w), EINVAL) << "in RESET";
	ASSERT_EQ(rc_init(qa, kRcAccess), 0);
	ASSERT_EQ(rc_init(qb, kRcAccess), 0);
	w.wr_id = 2;
	EXPECT_EQ(post_send(qa.qp, w), EINVAL) << "in INIT";
	ASSERT_EQ(rc_rtr(qa, B(), qb.qpn(), o.psn_b, o), 0);
	w.wr_id = 3;
	EXPECT_EQ(post_send(qa.qp, w), EINVAL) << "in RTR";
	ASSERT_EQ(rc_rtr(qb, A(), qa.qpn(), o.psn_a, o), 0);
	ASSERT_EQ(rc_rts(qb, o.psn_b, o), 0);
	ASSERT_EQ(rc_rts(qa, o.psn_a, o), 0);
	// Nothing of the above may run now.
	EXPECT_TRUE(quiet(qa.scq, Ms(300)));
	EXPECT_TRUE(quiet(qb.rcq, Ms(0)));
}

// The stream of 64 KiB WRITEs @first.. of @n into @dst, signaled.
static std::vector<Wr> writes(const Buf &src, const Buf &dst, size_t size,
			      int first, int n)
{
	std::vector<Wr> w;
	for (int i = first; i < first + n; i++)
		w.push_back({.op = IBV_WR_RDMA_WRITE,
			     .sges = {src.sge(size * i, size)},
			     .wr_id = static_cast<uint64_t>(i),
			     .raddr = dst.addr(size * i),
			     .rkey = dst.rkey()});
	return w;
}

// SQD with WRs outstanding: those in progress finish (here: SENDs held
// up by RNR until the receiver posts receives), then IBV_EVENT_SQ_DRAINED,
// once; WRs posted in SQD wait for RTS.
TEST_F(QpState, SqdDrainsThenResumes)
{
	const int n = 8, more = 4;
	// timeout 0: the RNR wait may take as long as it takes.
	ConnOpts o{.timeout = 0, .min_rnr_timer = 14};
	Qp qa(A(), {.send_wr = 64}), qb(B());
	Buf src(A().pd, 4096 * (n + more)), dst(B().pd, 4096 * (n + more));
	connect(qa, qb, o);
	fill(src.p, src.len, 12);

	std::vector<Wr> w;
	for (int i = 0; i < n; i++)
		w.push_back(send_wr(src, 4096 * i, 4096, i));
	ASSERT_EQ(post_send(qa.qp, w), 0);
	EXPECT_TRUE(quiet(qa.scq, Ms(100)));
	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_SQD;
	a.en_sqd_async_notify = 1;
	ASSERT_EQ(ibv_modify_qp(qa.qp, &a,
				IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY),
		  0);
	ibv_qp_init_attr ia{};
	a = {};
	ASSERT_EQ(ibv_query_qp(qa.qp, &a, IBV_QP_STATE, &ia), 0);
	EXPECT_EQ(a.qp_state, IBV_QPS_SQD);
	EXPECT_EQ(a.sq_draining, 1) << "SENDs are outstanding";
	EXPECT_FALSE(A().wait_event(IBV_EVENT_SQ_DRAINED, Ms(200), qa.qp))
		<< "drained while SENDs are outstanding";

	// Posting in SQD is allowed; these WRs wait.
	std::vector<Wr> w2;
	for (int i = n; i < n + more; i++)
		w2.push_back(write_wr(src, 4096 * i, dst, 4096 * i, 4096, i));
	ASSERT_EQ(post_send(qa.qp, w2), 0);

	// The receiver gets ready: what had started completes (which WRs had
	// is the device's business), then the event comes, once.
	for (int i = 0; i < n; i++)
		ASSERT_EQ(post_recv(qb.qp, {dst.sge(4096 * i, 4096)}, i), 0);
	auto ev = A().wait_event(IBV_EVENT_SQ_DRAINED, limit(), qa.qp);
	EXPECT_TRUE(ev.has_value()) << "no IBV_EVENT_SQ_DRAINED";
	auto v = poll(qa.scq, n, Ms(500));
	const int done = static_cast<int>(v.size());
	for (int i = 0; i < done; i++)
		EXPECT_WC(v[i], i, IBV_WC_SUCCESS, IBV_WC_SEND);
	EXPECT_GE(done, 1) << "the first SEND had begun before SQD";
	note("completed_in_sqd", done);
	a = {};
	ASSERT_EQ(ibv_query_qp(qa.qp, &a, IBV_QP_STATE, &ia), 0);
	EXPECT_EQ(a.qp_state, IBV_QPS_SQD);
	EXPECT_EQ(a.sq_draining, 0);
	EXPECT_TRUE(quiet(qa.scq, Ms(300))) << "a WR not begun ran in SQD";
	A().drain_events(Ms(100));
	EXPECT_EQ(A().count_events(IBV_EVENT_SQ_DRAINED, qa.qp), 1)
		<< "SQ_DRAINED reported more than once";

	// Back to RTS: the rest runs, in order.
	a = {};
	a.qp_state = IBV_QPS_RTS;
	ASSERT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), 0);
	EXPECT_TRUE(poll_ok(qa.scq, n + more - done, done));
	EXPECT_TRUE(poll_ok(qb.rcq, n));
	EXPECT_TRUE(has_pattern(dst.p, dst.len, 12));
	EXPECT_EQ(qa.state(), IBV_QPS_RTS);
}

// A message larger than the send window is partly sent when the QP goes
// to SQD: the send queue is not drained (sq_draining, no event) until that
// message has completed. (The peer drops everything until it is moved to
// RTR, so the message stays partly sent as long as needed.)
TEST_F(QpState, SqdWaitsForAPartlySentMessage)
{
	const size_t big = 1 << 20;	// 1024 packets at MTU 1024: > window
	ConnOpts o{.timeout = 0};
	Qp qa(A(), {.send_wr = 16}), qb(B());
	Buf src(A().pd, big + 4096), dst(B().pd, big + 4096);
	fill(src.p, src.len, 17);
	if (rc_init(qb, kRcAccess) || rc_init(qa, kRcAccess) ||
	    rc_rtr(qa, B(), qb.qpn(), o.psn_b, o) || rc_rts(qa, o.psn_a, o))
		fail("setup");
	ASSERT_EQ(post_send(qa.qp, std::vector<Wr>{
					   write_wr(src, 0, dst, 0, big, 1),
					   write_wr(src, big, dst, big, 4096, 2)}),
		  0);
	std::this_thread::sleep_for(Ms(100));

	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_SQD;
	a.en_sqd_async_notify = 1;
	ASSERT_EQ(ibv_modify_qp(qa.qp, &a,
				IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY),
		  0);
	ibv_qp_init_attr ia{};
	a = {};
	ASSERT_EQ(ibv_query_qp(qa.qp, &a, IBV_QP_STATE, &ia), 0);
	EXPECT_EQ(a.qp_state, IBV_QPS_SQD);
	EXPECT_EQ(a.sq_draining, 1)
		<< "a WRITE of " << big << " bytes is partly sent";
	EXPECT_FALSE(A().wait_event(IBV_EVENT_SQ_DRAINED, Ms(300), qa.qp))
		<< "drained with a partly sent WRITE outstanding";

	// The peer comes up: the WRITE completes, then the queue is drained.
	ASSERT_EQ(rc_rtr(qb, A(), qa.qpn(), o.psn_a, o), 0);
	ASSERT_EQ(rc_rts(qb, o.psn_b, o), 0);
	EXPECT_WC(poll1(qa.scq, limit(Ms(60000))), 1, IBV_WC_SUCCESS);
	EXPECT_TRUE(A().wait_event(IBV_EVENT_SQ_DRAINED, limit(), qa.qp)
			    .has_value())
		<< "no IBV_EVENT_SQ_DRAINED";
	EXPECT_TRUE(has_pattern(dst.p, big, 17));
	EXPECT_TRUE(quiet(qa.scq, Ms(200))) << "the second WRITE ran in SQD";
	A().drain_events(Ms(100));
	EXPECT_EQ(A().count_events(IBV_EVENT_SQ_DRAINED, qa.qp), 1)
		<< "SQ_DRAINED reported more than once";
	a = {};
	a.qp_state = IBV_QPS_RTS;
	ASSERT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), 0);
	EXPECT_WC(poll1(qa.scq), 2, IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(dst.p + big, 4096, 17, big));
}

// The drained event also comes when the send queue was empty already.
TEST_F(QpState, SqdEmptyQueueRaisesDrained)
{
	Qp qa(A()), qb(B());
	connect(qa, qb);
	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_SQD;
	a.en_sqd_async_notify = 1;
	ASSERT_EQ(ibv_modify_qp(qa.qp, &a,
				IBV_QP_STATE | IBV_QP_EN_SQD_ASYNC_NOTIFY),
		  0);
	EXPECT_TRUE(A().wait_event(IBV_EVENT_SQ_DRAINED, limit(Ms(2000)), qa.qp)
			    .has_value())
		<< "no IBV_EVENT_SQ_DRAINED for an empty send queue";
	EXPECT_EQ(qa.state(), IBV_QPS_SQD);
	a.qp_state = IBV_QPS_RTS;
	EXPECT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), 0);
}

// A QP whose peer never answers (in INIT: it drops everything), with an
// infinite timeout: what it sends stays outstanding.
static void stall(Qp &qa, Qp &qb, uint8_t timeout = 0)
{
	ConnOpts o;
	o.timeout = timeout;
	if (rc_init(qb, kRcAccess) || rc_init(qa, kRcAccess) ||
	    rc_rtr(qa, qb.c, qb.qpn(), o.psn_b, o) || rc_rts(qa, o.psn_a, o))
		fail("cannot set up the stalled pair");
}

TEST_F(QpState, ErrorFlushesEverythingResetClears)
{
	Qp qa(A()), qb(B());
	Buf src(A().pd, 4096), dst(B().pd, 4096 * 16);
	fill(src.p, src.len, 13);
	stall(qa, qb);

	for (int i = 0; i < 10; i++) {
		ASSERT_EQ(post_recv(qb.qp, {dst.sge(4096 * i, 4096)}, 100 + i), 0);
	}
	std::vector<Wr> w;
	for (int i = 0; i < 5; i++)
		w.push_back({.op = i % 2 ? IBV_WR_RDMA_WRITE : IBV_WR_SEND,
			     .sges = {src.sge()},
			     .wr_id = static_cast<uint64_t>(i),
			     .raddr = dst.addr(),
			     .rkey = dst.rkey()});
	w.push_back({.op = IBV_WR_RDMA_READ, .sges = {src.sge()}, .wr_id = 5,
		     .raddr = dst.addr(), .rkey = dst.rkey()});
	ASSERT_EQ(post_send(qa.qp, w), 0);
	ASSERT_EQ(post_recv(qa.qp, {src.sge()}, 50), 0);
	EXPECT_TRUE(quiet(qa.scq, Ms(200)));

	// To ERR: every outstanding WR, send and receive, completes flushed,
	// in order.
	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_ERR;
	ASSERT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), 0);
	auto v = poll(qa.scq, 6);
	ASSERT_EQ(v.size(), 6u);
	for (int i = 0; i < 6; i++) {
		EXPECT_WC(v[i], i, IBV_WC_WR_FLUSH_ERR);
		EXPECT_EQ(v[i].qp_num, qa.qpn());
	}
	EXPECT_WC(poll1(qa.rcq), 50, IBV_WC_WR_FLUSH_ERR);
	EXPECT_EQ(qa.state(), IBV_QPS_ERR);

	// WRs posted in ERR are flushed too.
	w.resize(3);
	for (int i = 0; i < 3; i++)
		w[i].wr_id = 6 + i;
	ASSERT_EQ(post_send(qa.qp, w), 0);
	ASSERT_EQ(post_recv(qa.qp, {src.sge()}, 51), 0);
	v = poll(qa.scq, 3);
	ASSERT_EQ(v.size(), 3u);
	for (int i = 0; i < 3; i++) {
		EXPECT_WC(v[i], 6 + i, IBV_WC_WR_FLUSH_ERR);
	}
	EXPECT_WC(poll1(qa.rcq), 51, IBV_WC_WR_FLUSH_ERR);

	// The receiver (INIT) to ERR: its ten receives flush.
	ASSERT_EQ(ibv_modify_qp(qb.qp, &a, IBV_QP_STATE), 0);
	v = poll(qb.rcq, 10);
	ASSERT_EQ(v.size(), 10u);
	for (int i = 0; i < 10; i++) {
		EXPECT_WC(v[i], 100 + i, IBV_WC_WR_FLUSH_ERR);
	}
	ASSERT_EQ(post_recv(qb.qp, {dst.sge(0, 64)}, 110), 0);
	EXPECT_WC(poll1(qb.rcq), 110, IBV_WC_WR_FLUSH_ERR);
	EXPECT_TRUE(quiet(qb.scq, Ms(0)));

	// To RESET: nothing more comes, receives are refused, and the QPs
	// connect again as new.
	a.qp_state = IBV_QPS_RESET;
	ASSERT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), 0);
	ASSERT_EQ(ibv_modify_qp(qb.qp, &a, IBV_QP_STATE), 0);
	EXPECT_EQ(qa.state(), IBV_QPS_RESET);
	EXPECT_EQ(post_recv(qb.qp, {dst.sge(0, 64)}, 111), EINVAL);
	EXPECT_TRUE(quiet(qa.scq, Ms(100)));
	EXPECT_TRUE(quiet(qa.rcq, Ms(0)));
	EXPECT_TRUE(quiet(qb.rcq, Ms(0)));

	connect(qa, qb, {.psn_a = 0x777, .psn_b = 0x888});
	memset(dst.p, 0, dst.len);
	ASSERT_EQ(post_recv(qb.qp, {dst.sge(0, 4096)}, 200), 0);
	ASSERT_EQ(post_send(qa.qp, {.sges = {src.sge()}, .wr_id = 300}), 0);
	ASSERT_EQ(post_send(qa.qp, {.op = IBV_WR_RDMA_WRITE,
				   .sges = {src.sge()},
				   .wr_id = 301,
				   .raddr = dst.addr(4096),
				   .rkey = dst.rkey()}),
		  0);
	EXPECT_TRUE(poll_ok(qa.scq, 2, 300));
	ibv_wc wc = poll1(qb.rcq);
	EXPECT_WC(wc, 200, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(wc.byte_len, 4096u);
	EXPECT_TRUE(has_pattern(dst.p, 4096, 13));
	EXPECT_TRUE(has_pattern(dst.p + 4096, 4096, 13));
}

// The header of the receive ring of a QP whose producer is @posted and
// consumer 0: found among the uverbs mappings (the test has no handle on
// the provider's rings), or nullptr.
static volatile metaroce_queue_hdr *find_rq_header(uint32_t posted)
{
	FILE *maps = fopen("/proc/self/maps", "r");
	volatile metaroce_queue_hdr *found = nullptr;
	char line[512];
	int matches = 0;

	if (!maps)
		return nullptr;
	while (fgets(line, sizeof(line), maps)) {
		unsigned long start, end;

		if (!strstr(line, "/dev/infiniband/uverbs") ||
		    sscanf(line, "%lx-%lx", &start, &end) != 2 ||
		    end - start < sizeof(metaroce_queue_hdr))
			continue;
		auto *hdr = reinterpret_cast<volatile metaroce_queue_hdr *>(start);
		if (hdr->producer == posted && hdr->consumer == 0) {
			found = hdr;
			matches++;
		}
	}
	fclose(maps);
	return matches == 1 ? found : nullptr;
}

// A process that keeps moving its RQ producer ahead while the QP goes to
// ERR (issue 13, finding 3): the flush takes what was posted when it
// looked, once, and ends; it does not chase the producer with the lock
// held (a soft lockup once it runs 20 s). METAROCE_VERBS_HAMMER_S sets how
// long the producer moves (default 3 s).
TEST_F(QpState, FlushEndsWhileUserMovesRqProducer)
{
	const uint32_t posted = 37;
	// A large ring: the old loop ran as long as one of the movers (one
	// per CPU: one is off the worker's) ran at least once a ring's time.
	Qp qa(A(), {.recv_wr = 4096, .rcqe = 16384});
	Buf dst(A().pd, 4096);
	ASSERT_EQ(rc_init(qa, kRcAccess), 0);
	for (uint32_t i = 0; i < posted; i++)
		ASSERT_EQ(post_recv(qa.qp, {dst.sge(0, 64)}, i), 0);
	ibv_qp_attr qattr{};
	ibv_qp_init_attr ia{};
	ASSERT_EQ(ibv_query_qp(qa.qp, &qattr, IBV_QP_CAP, &ia), 0);
	const uint32_t slots = qattr.cap.max_recv_wr;
	volatile metaroce_queue_hdr *hdr = find_rq_header(posted);
	if (!hdr)
		GTEST_SKIP() << "the RQ ring is not found among the mappings";

	const char *env = getenv("METAROCE_VERBS_HAMMER_S");
	const double secs = env ? atof(env) : 3.0;
	std::atomic<bool> stop{false};
	std::atomic<uint64_t> rounds{0};
	const unsigned cpus = std::max(1u, std::thread::hardware_concurrency());
	std::vector<std::thread> hammers;
	for (unsigned cpu = 0; cpu < std::min(cpus, 4u); cpu++) {
		hammers.emplace_back([&, cpu] {
			cpu_set_t set;
			CPU_ZERO(&set);
			CPU_SET(cpu, &set);
			pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
			while (!stop.load(std::memory_order_relaxed)) {
				uint32_t c = __atomic_load_n(&hdr->consumer,
							     __ATOMIC_ACQUIRE);
				__atomic_store_n(&hdr->producer, c + slots,
						 __ATOMIC_RELEASE);
				rounds.fetch_add(1, std::memory_order_relaxed);
			}
		});
	}
	// Let the hammer run first, then fail the QP under it.
	std::this_thread::sleep_for(Ms(100));
	const auto t0 = std::chrono::steady_clock::now();
	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_ERR;
	const int err = ibv_modify_qp(qa.qp, &a, IBV_QP_STATE);
	const double modify_ms = ms_since(t0);
	std::this_thread::sleep_for(
		std::chrono::duration<double>(secs));
	const uint32_t during = __atomic_load_n(&hdr->consumer,
						__ATOMIC_ACQUIRE);
	stop = true;
	for (std::thread &t : hammers)
		t.join();
	// Give the ring back to the provider's view: what it posted.
	const uint32_t end = __atomic_load_n(&hdr->consumer, __ATOMIC_ACQUIRE);
	__atomic_store_n(&hdr->producer, end, __ATOMIC_RELEASE);
	ASSERT_EQ(err, 0) << errstr(err);
	note("flush_modify_ms", modify_ms);
	note("flush_consumed_while_hammered", during);
	note("flush_hammer_rounds", static_cast<double>(rounds.load()));
	// One flush of at most a ring's worth (and one more from a doorbell
	// at most), however long the producer moved.
	EXPECT_LE(during, 2 * slots)
		<< "the flush consumed " << during << " receives of a " << slots
		<< "-slot ring while user space moved the producer";
	std::this_thread::sleep_for(Ms(200));
	EXPECT_EQ(__atomic_load_n(&hdr->consumer, __ATOMIC_ACQUIRE), end)
		<< "the flush went on after the producer stopped moving";
	EXPECT_EQ(qa.state(), IBV_QPS_ERR);
}

// ERR while data is moving: every WR completes exactly once, a run of
// successes then flushes.
TEST_F(QpState, ErrorWithTrafficInFlight)
{
	const size_t size = 64 * 1024;
	const int n = 32;
	Qp qa(A(), {.send_wr = 64}), qb(B());
	Buf src(A().pd, size * n), dst(B().pd, size * n);
	connect(qa, qb);
	fill(src.p, src.len, 14);

	ASSERT_EQ(post_send(qa.qp, writes(src, dst, size, 0, n)), 0);
	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_ERR;
	ASSERT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), 0);
	auto v = poll(qa.scq, n);
	ASSERT_EQ(v.size(), static_cast<size_t>(n));
	bool flushing = false;
	for (int i = 0; i < n; i++) {
		EXPECT_EQ(v[i].wr_id, static_cast<uint64_t>(i));
		if (v[i].status == IBV_WC_WR_FLUSH_ERR)
			flushing = true;
		else if (flushing || v[i].status != IBV_WC_SUCCESS) {
			ADD_FAILURE() << "completion " << i << ": " << describe(v[i]);
		}
		if (v[i].status == IBV_WC_SUCCESS) {
			EXPECT_TRUE(has_pattern(dst.p + size * i, size, 14,
						size * i));
		}
	}
	EXPECT_TRUE(quiet(qa.scq, Ms(200)));
}

TEST_F(QpState, FullQueuesAreEnomem)
{
	Qp qa(A(), {.send_wr = 16, .recv_wr = 16}), qb(B(), {.recv_wr = 16});
	Buf src(A().pd, 64), dst(B().pd, 64);
	stall(qa, qb);
	ASSERT_EQ(qa.cap.max_send_wr, 16u);
	ASSERT_EQ(qb.cap.max_recv_wr, 16u);

	std::vector<Wr> w(20, Wr{.op = IBV_WR_RDMA_WRITE, .sges = {src.sge()},
				 .raddr = dst.addr(), .rkey = dst.rkey()});
	for (int i = 0; i < 20; i++)
		w[i].wr_id = i;
	int bad = -2;
	EXPECT_EQ(post_send(qa.qp, w, &bad), ENOMEM);
	EXPECT_EQ(bad, 16) << "bad_wr must be the first WR that did not fit";
	EXPECT_EQ(post_send(qa.qp, w[19]), ENOMEM);

	for (int i = 0; i < 16; i++) {
		ASSERT_EQ(post_recv(qb.qp, {dst.sge()}, i), 0) << i;
	}
	EXPECT_EQ(post_recv(qb.qp, {dst.sge()}, 16), ENOMEM);

	// Room again once WRs complete (here: flushed).
	ibv_qp_attr a{};
	a.qp_state = IBV_QPS_ERR;
	ASSERT_EQ(ibv_modify_qp(qa.qp, &a, IBV_QP_STATE), 0);
	auto v = poll(qa.scq, 16);
	EXPECT_EQ(v.size(), 16u);
	EXPECT_EQ(post_send(qa.qp, w[19]), 0);
	EXPECT_WC(poll1(qa.scq), 19, IBV_WC_WR_FLUSH_ERR);
}

// Destroying a QP with WRs outstanding (sends in flight, receives posted)
// completes none of them: the CQs stay empty, and the peer carries on.
TEST_F(QpState, DestroyWithWrsOutstanding)
{
	Qp qa(A()), qb(B());
	Buf src(A().pd, 1 << 20), dst(B().pd, 1 << 20);
	stall(qa, qb);
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(post_recv(qa.qp, {src.sge(0, 64)}, i), 0);
	std::vector<Wr> w;
	for (int i = 0; i < 8; i++)
		w.push_back(write_wr(src, 0, dst, 0, 1 << 20, i));
	ASSERT_EQ(post_send(qa.qp, w), 0);
	std::this_thread::sleep_for(Ms(50));
	qa.destroy();
	EXPECT_TRUE(quiet(qa.scq, Ms(200)));
	EXPECT_TRUE(quiet(qa.rcq, Ms(0)));
	// The peer is still usable.
	Qp qc(A());
	connect(qc, qb, {.psn_a = 5, .psn_b = 6});
	EXPECT_WC(run1(qc, write_wr(src, 0, dst, 0, 4096, 9)), 9, IBV_WC_SUCCESS);
}

// ---------------------------------------------------------------------------
// The ibv_qp_ex work-request API.

class QpEx : public VerbsTest {};

constexpr uint64_t kRcOps = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |
			    IBV_QP_EX_WITH_RDMA_WRITE |
			    IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			    IBV_QP_EX_WITH_RDMA_READ;

TEST_F(QpEx, AllOpcodesInOneBatch)
{
	Qp qa(A(), {.send_sge = 4, .inline_data = 128, .send_ops = kRcOps});
	Qp qb(B());
	Buf src(A().pd, 8192), dst(B().pd, 8192), rd(A().pd, 1000);
	connect(qa, qb);
	fill(src.p, src.len, 15);
	fill(dst.p + 4096, 4096, 16);
	ibv_qp_ex *x = ibv_qp_to_qp_ex(qa.qp);
	ASSERT_NE(x, nullptr);
	for (int i = 0; i < 3; i++) {
		ASSERT_EQ(post_recv(qb.qp, {dst.sge(1024 * i, 1024)}, i), 0);
	}

	const char inl[] = "inline data through ibv_wr_set_inline_data_list";
	ibv_data_buf bufs[2] = {{(void *)inl, 10}, {(void *)(inl + 10), sizeof(inl) - 10}};
	ibv_sge three[3] = {src.sge(0, 100), src.sge(1000, 200), src.sge(3000, 300)};

	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge(x, src.lkey(), src.addr(), 1024);
	x->wr_id = 2;
	ibv_wr_send_imm(x, htobe32(0xfeedbeef));
	ibv_wr_set_inline_data_list(x, 2, bufs);
	x->wr_id = 3;
	ibv_wr_rdma_write_imm(x, dst.rkey(), dst.addr(2048), htobe32(42));
	ibv_wr_set_sge_list(x, 3, three);
	x->wr_id = 4;
	ibv_wr_rdma_write(x, dst.rkey(), dst.addr(3072));
	ibv_wr_set_inline_data(x, (void *)inl, 16);
	x->wr_id = 5;
	ibv_wr_rdma_read(x, dst.rkey(), dst.addr(4096));
	ibv_wr_set_sge(x, rd.lkey(), rd.addr(), 1000);
	ASSERT_EQ(ibv_wr_complete(x), 0);

	auto v = poll(qa.scq, 5);
	ASSERT_EQ(v.size(), 5u);
	const ibv_wc_opcode ops[] = {IBV_WC_SEND, IBV_WC_SEND, IBV_WC_RDMA_WRITE,
				     IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ};
	for (int i = 0; i < 5; i++) {
		EXPECT_WC(v[i], i + 1, IBV_WC_SUCCESS, ops[i]);
	}
	auto r = poll(qb.rcq, 3);
	ASSERT_EQ(r.size(), 3u);
	EXPECT_WC(r[0], 0, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(r[0].byte_len, 1024u);
	EXPECT_WC(r[1], 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(r[1].byte_len, sizeof(inl));
	EXPECT_TRUE(r[1].wc_flags & IBV_WC_WITH_IMM);
	EXPECT_EQ(be32toh(r[1].imm_data), 0xfeedbeefu);
	EXPECT_WC(r[2], 2, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	EXPECT_EQ(r[2].byte_len, 600u);
	EXPECT_EQ(be32toh(r[2].imm_data), 42u);

	EXPECT_TRUE(has_pattern(dst.p, 1024, 15));
	EXPECT_TRUE(same_bytes(dst.p + 1024, inl, sizeof(inl)));
	EXPECT_TRUE(has_pattern(dst.p + 2048, 100, 15, 0));
	EXPECT_TRUE(has_pattern(dst.p + 2148, 200, 15, 1000));
	EXPECT_TRUE(has_pattern(dst.p + 2348, 300, 15, 3000));
	EXPECT_TRUE(same_bytes(dst.p + 3072, inl, 16));
	EXPECT_TRUE(has_pattern(rd.p, 1000, 16));
}

TEST_F(QpEx, BatchErrorsPostNothing)
{
	Qp qa(A(), {.send_wr = 4, .inline_data = 64, .send_ops = kRcOps});
	Qp qb(B());
	Buf src(A().pd, 4096), dst(B().pd, 4096);
	connect(qa, qb);
	ibv_qp_ex *x = ibv_qp_to_qp_ex(qa.qp);
	ASSERT_NE(x, nullptr);
	std::vector<char> big(qa.cap.max_inline_data + 1, 'x');

	// Inline data beyond max_inline_data.
	ibv_wr_start(x);
	x->wr_id = 1;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(x, dst.rkey(), dst.addr());
	ibv_wr_set_sge(x, src.lkey(), src.addr(), 8);
	x->wr_id = 2;
	ibv_wr_rdma_write(x, dst.rkey(), dst.addr());
	ibv_wr_set_inline_data(x, big.data(), big.size());
	EXPECT_EQ(ibv_wr_complete(x), EINVAL);
	EXPECT_TRUE(quiet(qa.scq, Ms(200))) << "a failed batch posted WRs";

	// Too many SGEs.
	std::vector<ibv_sge> sges(qa.cap.max_send_sge + 1, src.sge(0, 1));
	ibv_wr_start(x);
	ibv_wr_send(x);
	ibv_wr_set_sge_list(x, sges.size(), sges.data());
	EXPECT_EQ(ibv_wr_complete(x), EINVAL);

	// More WRs than the queue holds.
	ibv_wr_start(x);
	for (uint32_t i = 0; i <= qa.cap.max_send_wr; i++) {
		x->wr_id = 10 + i;
		ibv_wr_rdma_write(x, dst.rkey(), dst.addr());
		ibv_wr_set_sge(x, src.lkey(), src.addr(), 8);
	}
	EXPECT_EQ(ibv_wr_complete(x), ENOMEM);
	EXPECT_TRUE(quiet(qa.scq, Ms(200)));

	// wr_abort drops a batch; the queue works afterwards.
	ibv_wr_start(x);
	x->wr_id = 99;
	ibv_wr_rdma_write(x, dst.rkey(), dst.addr());
	ibv_wr_set_sge(x, src.lkey(), src.addr(), 8);
	ibv_wr_abort(x);
	ibv_wr_start(x);
	x->wr_id = 100;
	ibv_wr_rdma_write(x, dst.rkey(), dst.addr());
	ibv_wr_set_sge(x, src.lkey(), src.addr(), 8);
	ASSERT_EQ(ibv_wr_complete(x), 0);
	EXPECT_WC(poll1(qa.scq), 100, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	EXPECT_TRUE(quiet(qa.scq, Ms(100)));
}

} // namespace
} // namespace mrt
