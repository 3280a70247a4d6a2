// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Extended CQs (ibv_create_cq_ex): completions read through ibv_start_poll /
// ibv_next_poll / ibv_end_poll and the ibv_wc_read_*() accessors, on RC
// (WRITE with immediate, SEND, READ, an error and the flush behind it) and
// UD (src_qp, the network header type in sl); the same CQs through
// ibv_poll_cq, ibv_resize_cq and a completion channel; what create refuses.

#include <thread>

#include "verbs_env.hpp"

namespace mrt {
namespace {

// One completion as the ibv_cq_ex accessors report it.
struct ExWc {
	uint64_t wr_id = 0;
	ibv_wc_status status = IBV_WC_GENERAL_ERR;
	ibv_wc_opcode opcode = IBV_WC_SEND;
	uint32_t vendor_err = 0, byte_len = 0, qp_num = 0, src_qp = 0;
	unsigned int wc_flags = 0;
	uint32_t imm = 0;	// what read_imm_data returned, as is
	uint32_t slid = 0;
	uint8_t sl = 0, dlid_path_bits = 0;
};

// The current completion of a batch on a CQ with IBV_WC_STANDARD_FLAGS.
ExWc read_ex(ibv_cq_ex *x)
{
	ExWc e;
	e.wr_id = x->wr_id;
	e.status = x->status;
	e.opcode = ibv_wc_read_opcode(x);
	e.vendor_err = ibv_wc_read_vendor_err(x);
	e.byte_len = ibv_wc_read_byte_len(x);
	e.qp_num = ibv_wc_read_qp_num(x);
	e.src_qp = ibv_wc_read_src_qp(x);
	e.wc_flags = ibv_wc_read_wc_flags(x);
	e.imm = ibv_wc_read_invalidated_rkey(x);	// the same bits
	e.slid = ibv_wc_read_slid(x);
	e.sl = ibv_wc_read_sl(x);
	e.dlid_path_bits = ibv_wc_read_dlid_path_bits(x);
	return e;
}

// Up to @n completions within @timeout, in batches of whatever is there.
std::vector<ExWc> poll_ex(ibv_cq_ex *x, size_t n, Ms timeout = limit())
{
	std::vector<ExWc> out;
	auto deadline = std::chrono::steady_clock::now() + timeout;
	ibv_poll_cq_attr attr{};

	while (out.size() < n) {
		int ret = ibv_start_poll(x, &attr);
		if (ret == ENOENT) {
			if (std::chrono::steady_clock::now() > deadline)
				break;
			std::this_thread::sleep_for(std::chrono::microseconds(50));
			continue;
		}
		if (ret) {
			ADD_FAILURE() << "ibv_start_poll: " << errstr(ret);
			break;
		}
		do
			out.push_back(read_ex(x));
		while (out.size() < n && !(ret = ibv_next_poll(x)));
		ibv_end_poll(x);
		if (ret && ret != ENOENT) {
			ADD_FAILURE() << "ibv_next_poll: " << errstr(ret);
			break;
		}
	}
	return out;
}

ExWc poll1_ex(ibv_cq_ex *x, Ms timeout = limit())
{
	auto v = poll_ex(x, 1, timeout);
	if (v.empty()) {
		ADD_FAILURE() << "no completion within " << timeout.count()
			      << " ms";
		return {};
	}
	return v[0];
}

::testing::AssertionResult ex_is(const ExWc &e, uint64_t wr_id,
				 ibv_wc_status status, ibv_wc_opcode op)
{
	if (e.wr_id == wr_id && e.status == status &&
	    (status != IBV_WC_SUCCESS || e.opcode == op))
		return ::testing::AssertionSuccess();
	return ::testing::AssertionFailure()
	       << "completion wr_id " << e.wr_id << " " << wc_status(e.status)
	       << " opcode " << e.opcode << " vendor_err " << e.vendor_err
	       << "; wanted wr_id " << wr_id << " " << wc_status(status)
	       << " opcode " << op;
}

#define EXPECT_EX(e, ...) EXPECT_TRUE(ex_is((e), __VA_ARGS__))

class CqEx : public ChannelTest {};

// RC: a WRITE with immediate, a SEND, a READ and a SEND with immediate,
// each longer than a packet, every byte checked, every field the
// accessors give compared with what the operation was.
TEST_F(CqEx, RcWriteImmSendReadFields)
{
	Qp qa(A(), {.cq_ex = true}), qb(B(), {.cq_ex = true});
	ASSERT_NE(qa.scqx, nullptr);
	ASSERT_NE(qb.rcqx, nullptr);
	connect(qa, qb);
	const size_t seg = A().segment();
	const size_t wlen = 3 * seg + 17, slen = 2 * seg + 5,
		     rlen = 2 * seg + 99, ilen = 100;
	Buf src(A().pd, wlen + slen + ilen), wdst(B().pd, wlen + 2),
		rcv(B().pd, slen + ilen + 2), rsrc(B().pd, rlen),
		rdst(A().pd, rlen + 2);
	fill(src.p, src.len, 41);
	fill(rsrc.p, rsrc.len, 42);
	memset(wdst.p, 0xee, wdst.len);
	memset(rcv.p, 0xee, rcv.len);
	memset(rdst.p, 0xee, rdst.len);

	// The WRITE with immediate takes the first receive, without data.
	ASSERT_EQ(post_recv(qb.qp, {rcv.sge(0, 1)}, 100), 0);
	ASSERT_EQ(post_recv(qb.qp, {rcv.sge(1, slen)}, 101), 0);
	ASSERT_EQ(post_recv(qb.qp, {rcv.sge(1 + slen, ilen)}, 102), 0);

	Wr wimm = write_wr(src, 0, wdst, 1, wlen, 1);
	wimm.op = IBV_WR_RDMA_WRITE_WITH_IMM;
	wimm.imm = 0x11223344;
	Wr sendimm = send_wr(src, wlen + slen, ilen, 4);
	sendimm.op = IBV_WR_SEND_WITH_IMM;
	sendimm.imm = 0xa5a5c3c3;
	const Wr w[] = {wimm, send_wr(src, wlen, slen, 2),
			read_wr(rdst, 1, rsrc, 0, rlen, 3), sendimm};
	ASSERT_EQ(post_send(qa.qp, w), 0);

	auto s = poll_ex(qa.scqx, 4);
	ASSERT_EQ(s.size(), 4u);
	const ibv_wc_opcode sops[] = {IBV_WC_RDMA_WRITE, IBV_WC_SEND,
				      IBV_WC_RDMA_READ, IBV_WC_SEND};
	for (int i = 0; i < 4; i++) {
		EXPECT_EX(s[i], i + 1, IBV_WC_SUCCESS, sops[i]);
		EXPECT_EQ(s[i].qp_num, qa.qpn());
		EXPECT_EQ(s[i].wc_flags, 0u);
	}
	EXPECT_EQ(s[2].byte_len, rlen) << "a READ completes with its length";

	auto r = poll_ex(qb.rcqx, 3);
	ASSERT_EQ(r.size(), 3u);
	EXPECT_EX(r[0], 100, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM);
	EXPECT_EQ(r[0].byte_len, wlen) << "byte_len is the WRITE's length";
	EXPECT_EQ(r[0].wc_flags, unsigned(IBV_WC_WITH_IMM));
	EXPECT_EQ(be32toh(r[0].imm), 0x11223344u);
	EXPECT_EX(r[1], 101, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(r[1].byte_len, slen);
	EXPECT_EQ(r[1].wc_flags, 0u);
	EXPECT_EX(r[2], 102, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(r[2].byte_len, ilen);
	EXPECT_EQ(r[2].wc_flags, unsigned(IBV_WC_WITH_IMM));
	EXPECT_EQ(be32toh(r[2].imm), 0xa5a5c3c3u);
	for (const ExWc &e : r) {
		EXPECT_EQ(e.qp_num, qb.qpn());
		EXPECT_EQ(e.src_qp, qa.qpn());
		EXPECT_EQ(e.slid, 0u);
		EXPECT_EQ(e.sl, 0u);
		EXPECT_EQ(e.dlid_path_bits, 0u);
		EXPECT_EQ(e.vendor_err, 0u);
	}

	EXPECT_EQ(wdst.p[0], 0xee);
	EXPECT_TRUE(has_pattern(wdst.p + 1, wlen, 41, 0));
	EXPECT_EQ(wdst.p[1 + wlen], 0xee);
	EXPECT_EQ(rcv.p[0], 0xee) << "the WRITE with immediate wrote into the receive";
	EXPECT_TRUE(has_pattern(rcv.p + 1, slen, 41, wlen));
	EXPECT_TRUE(has_pattern(rcv.p + 1 + slen, ilen, 41, wlen + slen));
	EXPECT_EQ(rcv.p[1 + slen + ilen], 0xee);
	EXPECT_EQ(rdst.p[0], 0xee);
	EXPECT_TRUE(has_pattern(rdst.p + 1, rlen, 42));
	EXPECT_EQ(rdst.p[1 + rlen], 0xee);

	// Nothing more, and an empty CQ says ENOENT.
	ibv_poll_cq_attr attr{};
	EXPECT_EQ(ibv_start_poll(qa.scqx, &attr), ENOENT);
	EXPECT_EQ(ibv_start_poll(qb.rcqx, &attr), ENOENT);
}

// UD: the sender's QPN in src_qp and the network header type in sl (2:
// IPv4), read through the accessors, the datagram behind its 40 bytes.
TEST_F(CqEx, UdReceiveSrcQpAndSl)
{
	constexpr uint32_t qkey = 0x4444;
	Qp qa(A(), {.type = IBV_QPT_UD}),
		qb(B(), {.type = IBV_QPT_UD, .cq_ex = true});
	ud_up(qa, qkey);
	ud_up(qb, qkey);
	ibv_ah_attr to_b = ah_to(A(), B());
	ibv_ah *ah = ibv_create_ah(A().pd, &to_b);
	ASSERT_NE(ah, nullptr) << errstr(errno);
	const size_t n = A().mtu() - 3;
	Buf src(A().pd, n), dst(B().pd, kGrhLen + n + 16);
	fill(src.p, n, 43);
	memset(dst.p, 0xee, dst.len);

	ASSERT_EQ(post_recv(qb.qp, dst, 7), 0);
	Wr d{.sges = {src.sge()}, .wr_id = 8, .ah = ah,
	     .remote_qpn = qb.qpn(), .remote_qkey = qkey};
	ASSERT_EQ(post_send(qa.qp, d), 0);
	EXPECT_WC(poll1(qa.scq), 8, IBV_WC_SUCCESS, IBV_WC_SEND);
	ExWc e = poll1_ex(qb.rcqx);
	EXPECT_EX(e, 7, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(e.byte_len, kGrhLen + n);
	EXPECT_EQ(e.wc_flags, unsigned(IBV_WC_GRH));
	EXPECT_EQ(e.src_qp, qa.qpn());
	EXPECT_EQ(e.qp_num, qb.qpn());
	EXPECT_EQ(e.sl & 7, 2u) << "an IPv4 header in front";
	EXPECT_TRUE(has_pattern(dst.p + kGrhLen, n, 43));
	EXPECT_TRUE(all_bytes(dst.p + kGrhLen + n, 16, 0xee));

	// With immediate: both flags.
	ASSERT_EQ(post_recv(qb.qp, dst, 9), 0);
	d.op = IBV_WR_SEND_WITH_IMM;
	d.imm = 0xbeef;
	d.wr_id = 10;
	ASSERT_EQ(post_send(qa.qp, d), 0);
	EXPECT_WC(poll1(qa.scq), 10, IBV_WC_SUCCESS, IBV_WC_SEND);
	e = poll1_ex(qb.rcqx);
	EXPECT_EX(e, 9, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(e.wc_flags, unsigned(IBV_WC_GRH | IBV_WC_WITH_IMM));
	EXPECT_EQ(be32toh(e.imm), 0xbeefu);
	EXPECT_EQ(e.src_qp, qa.qpn());
	EXPECT_EQ(ibv_destroy_ah(ah), 0);
}

// An error completion through start_poll: a WRITE to a bad rkey fails
// with a remote access error, the WR behind it flushes, in one batch or
// two.
TEST_F(CqEx, ErrorCompletion)
{
	Qp qa(A(), {.cq_ex = true}), qb(B());
	connect(qa, qb);
	Buf src(A().pd, 256), dst(B().pd, 256);
	memset(dst.p, 0xee, dst.len);
	Wr bad = write_wr(src, 0, dst, 0, 256, 1);
	bad.rkey ^= 0x5a5a00;
	const Wr w[] = {bad, write_wr(src, 0, dst, 0, 256, 2)};
	ASSERT_EQ(post_send(qa.qp, w), 0);

	auto v = poll_ex(qa.scqx, 2);
	ASSERT_EQ(v.size(), 2u);
	EXPECT_EX(v[0], 1, IBV_WC_REM_ACCESS_ERR, IBV_WC_RDMA_WRITE);
	EXPECT_EQ(v[0].qp_num, qa.qpn());
	EXPECT_EX(v[1], 2, IBV_WC_WR_FLUSH_ERR, IBV_WC_RDMA_WRITE);
	EXPECT_TRUE(all_bytes(dst.p, dst.len, 0xee));
	EXPECT_EQ(qa.wait_state(IBV_QPS_ERR), IBV_QPS_ERR);
}

// A completion channel on an extended CQ: armed, the receive raises one
// event naming the CQ; then polled through the batch. Not armed again,
// the next raises none.
TEST_F(CqEx, ChannelEvent)
{
	ibv_comp_channel *ch = make_channel(B());
	Qp qa(A()), qb(B(), {.channel = ch, .cq_ex = true});
	ASSERT_EQ(qb.rcq->channel, ch);
	connect(qa, qb);
	Buf src(A().pd, 300), dst(B().pd, 600);
	fill(src.p, src.len, 44);

	ASSERT_EQ(post_recv(qb.qp, {dst.sge(0, 300)}, 1), 0);
	ASSERT_EQ(post_recv(qb.qp, {dst.sge(300, 300)}, 2), 0);
	ASSERT_EQ(ibv_req_notify_cq(qb.rcq, 0), 0);
	ASSERT_EQ(post_send(qa.qp, send_wr(src, 0, 300, 5)), 0);
	EXPECT_EQ(next_event(limit()), qb.rcq);
	ibv_poll_cq_attr attr{};
	ASSERT_EQ(ibv_start_poll(qb.rcqx, &attr), 0);
	ExWc e = read_ex(qb.rcqx);
	EXPECT_EQ(ibv_next_poll(qb.rcqx), ENOENT);
	ibv_end_poll(qb.rcqx);
	EXPECT_EX(e, 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(e.byte_len, 300u);
	EXPECT_EQ(e.qp_num, qb.qpn());
	EXPECT_TRUE(has_pattern(dst.p, 300, 44));
	EXPECT_TRUE(poll_ok(qa.scq, 1, 5));

	ASSERT_EQ(post_send(qa.qp, send_wr(src, 0, 300, 6)), 0);
	EXPECT_TRUE(poll_ok(qa.scq, 1, 6));
	EXPECT_EQ(next_event(Ms(300)), nullptr) << "event without arming";
	EXPECT_EX(poll1_ex(qb.rcqx), 2, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_TRUE(has_pattern(dst.p + 300, 300, 44));
}

// The same CQ through ibv_poll_cq and the batch API by turns, and resized
// with completions pending (they move to the new ring, in order); a
// single-threaded one.
TEST_F(CqEx, PlainPollAndResize)
{
	Qp qa(A()), qb(B(), {.recv_wr = 64, .rcqe = 16, .cq_ex = true});
	connect(qa, qb);
	Buf src(A().pd, 64 * 40), dst(B().pd, 64 * 40);
	fill(src.p, src.len, 45);
	for (int i = 0; i < 40; i++) {
		ASSERT_EQ(post_recv(qb.qp, {dst.sge(64 * i, 64)}, i), 0);
	}
	auto send = [&](int first, int n) {
		std::vector<Wr> w;
		for (int i = first; i < first + n; i++)
			w.push_back(send_wr(src, 64 * i, 64, i));
		ASSERT_EQ(post_send(qa.qp, w), 0);
		ASSERT_TRUE(poll_ok(qa.scq, n, first));
	};

	send(0, 10);
	auto a = poll_ex(qb.rcqx, 3);
	ASSERT_EQ(a.size(), 3u);
	auto b = poll(qb.rcq, 3);
	ASSERT_EQ(b.size(), 3u);
	for (int i = 0; i < 3; i++) {
		EXPECT_EX(a[i], i, IBV_WC_SUCCESS, IBV_WC_RECV);
		EXPECT_WC(b[i], i + 3, IBV_WC_SUCCESS, IBV_WC_RECV);
		EXPECT_EQ(b[i].qp_num, qb.qpn());
	}

	// Four pending move to a bigger ring.
	ASSERT_EQ(ibv_resize_cq(qb.rcq, 100), 0);
	EXPECT_GE(qb.rcqx->cqe, 100);
	a = poll_ex(qb.rcqx, 4);
	ASSERT_EQ(a.size(), 4u);
	for (int i = 0; i < 4; i++) {
		EXPECT_EX(a[i], 6 + i, IBV_WC_SUCCESS, IBV_WC_RECV);
		EXPECT_EQ(a[i].byte_len, 64u);
	}
	// And new ones land beyond the old size.
	send(10, 30);
	a = poll_ex(qb.rcqx, 30);
	ASSERT_EQ(a.size(), 30u);
	for (int i = 0; i < 30; i++) {
		EXPECT_EX(a[i], 10 + i, IBV_WC_SUCCESS, IBV_WC_RECV);
	}
	EXPECT_TRUE(has_pattern(dst.p, dst.len, 45));

	// Single-threaded: no lock, the same completions.
	Qp qc(A(), {.cq_ex = true, .cq_flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED}),
		qd(B());
	connect(qc, qd);
	Buf d2(B().pd, 64);
	ASSERT_EQ(post_send(qc.qp, write_wr(src, 0, d2, 0, 64, 77)), 0);
	ExWc e = poll1_ex(qc.scqx);
	EXPECT_EX(e, 77, IBV_WC_SUCCESS, IBV_WC_RDMA_WRITE);
	EXPECT_EQ(e.qp_num, qc.qpn());
	EXPECT_TRUE(has_pattern(d2.p, 64, 45));
}

// What ibv_create_cq_ex refuses: fields a CQE does not carry (a
// timestamp, VLAN, flow tag, tag-matching info), create flags other than
// single-threaded, a parent domain, unknown comp_mask bits, bad sizes and
// a completion vector the device does not have.
TEST_F(CqEx, CreateRefusals)
{
	struct Case {
		const char *what;
		uint64_t wc_flags;
		uint32_t comp_mask, flags;
		int cqe, comp_vector, err;
	};
	const int nvec = A().ctx->num_comp_vectors;
	const Case cases[] = {
		{"completion timestamp", IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, 0,
		 0, 16, 0, EOPNOTSUPP},
		{"wallclock timestamp",
		 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, 0, 0, 16, 0,
		 EOPNOTSUPP},
		{"cvlan", IBV_WC_EX_WITH_CVLAN, 0, 0, 16, 0, EOPNOTSUPP},
		{"flow tag", IBV_WC_EX_WITH_FLOW_TAG, 0, 0, 16, 0, EOPNOTSUPP},
		{"tm info", IBV_WC_EX_WITH_TM_INFO, 0, 0, 16, 0, EOPNOTSUPP},
		{"standard + timestamp",
		 uint64_t(IBV_WC_STANDARD_FLAGS) |
			 IBV_WC_EX_WITH_COMPLETION_TIMESTAMP,
		 0, 0, 16, 0, EOPNOTSUPP},
		{"ignore overrun", 0, IBV_CQ_INIT_ATTR_MASK_FLAGS,
		 IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN, 16, 0, EOPNOTSUPP},
		{"unknown create flag", 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, 1u << 9,
		 16, 0, EOPNOTSUPP},
		{"parent domain", 0, IBV_CQ_INIT_ATTR_MASK_PD, 0, 16, 0,
		 EOPNOTSUPP},
		{"unknown comp_mask", 0, 1u << 4, 0, 16, 0, EINVAL},
		{"cqe 0", 0, 0, 0, 0, 0, EINVAL},
		{"cqe beyond max_cqe", 0, 0, 0, kMaxCqe + 1, 0, EINVAL},
		{"comp_vector beyond the device's", 0, 0, 0, 16, nvec, EINVAL},
	};
	for (const Case &c : cases) {
		ibv_cq_init_attr_ex ca{};
		ca.cqe = c.cqe;
		ca.wc_flags = c.wc_flags;
		ca.comp_mask = c.comp_mask;
		ca.flags = c.flags;
		ca.comp_vector = c.comp_vector;
		errno = 0;
		ibv_cq_ex *x = ibv_create_cq_ex(A().ctx, &ca);
		EXPECT_EQ(x, nullptr) << c.what;
		EXPECT_EQ(errno, c.err) << c.what << ": " << errstr(errno);
		if (x)
			ibv_destroy_cq(ibv_cq_ex_to_cq(x));
	}

	// What is offered: every standard field, the largest CQ, the last
	// completion vector, single-threaded.
	int tag = 0;
	ibv_cq_init_attr_ex ok{};
	ok.cqe = kMaxCqe;
	ok.cq_context = &tag;
	ok.wc_flags = IBV_WC_STANDARD_FLAGS;
	ok.comp_vector = nvec - 1;
	ok.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS;
	ok.flags = IBV_CREATE_CQ_ATTR_SINGLE_THREADED;
	ibv_cq_ex *x = ibv_create_cq_ex(A().ctx, &ok);
	ASSERT_NE(x, nullptr) << errstr(errno);
	EXPECT_GE(x->cqe, kMaxCqe);
	EXPECT_EQ(x->cq_context, &tag);
	ibv_poll_cq_attr attr{};
	EXPECT_EQ(ibv_start_poll(x, &attr), ENOENT);
	EXPECT_EQ(ibv_destroy_cq(ibv_cq_ex_to_cq(x)), 0);
}

} // namespace
} // namespace mrt
