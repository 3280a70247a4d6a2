// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// UD QPs: datagrams with the 40-byte network header in front (for IPv4 the
// IPv4 header in its last 20 bytes, as RoCEv2 does) and its type in wc.sl
// (as mlx5 reports it, which UCX relies on), IPv6 GIDs with any flow label,
// immediate data, Q_Key checks, length errors, and what UD refuses.
#include <arpa/inet.h>
#include <netinet/ip.h>

#include <set>

#include "verbs_env.hpp"

namespace mrt {
namespace {

constexpr uint32_t kQkey = 0x11111111;
// wc.sl of a datagram: bits 2:0 say which network header is in front.
constexpr uint32_t kSlIpv6 = 1, kSlIpv4 = 2;

// The index of a RoCEv2 IPv6 GID of @c (link-local or not), or -1.
int ipv6_gid(const Ctx &c, bool link_local, ibv_gid *gid)
{
	for (int i = 0; i < c.port.gid_tbl_len; i++) {
		ibv_gid_entry e{};
		static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0,
						     0, 0, 0xff, 0xff};
		if (ibv_query_gid_ex(c.ctx, kPort, i, &e, 0) ||
		    e.gid_type != IBV_GID_TYPE_ROCE_V2 ||
		    !memcmp(e.gid.raw, v4mapped, 12))
			continue;
		bool ll = e.gid.raw[0] == 0xfe && (e.gid.raw[1] & 0xc0) == 0x80;
		if (ll == link_local) {
			*gid = e.gid;
			return i;
		}
	}
	return -1;
}

class Ud : public TopoTest {
protected:
	void SetUp() override
	{
		TopoTest::SetUp();
		if (IsSkipped() || HasFatalFailure())
			return;
		qa_ = std::make_unique<Qp>(A(), QpOpts{.type = IBV_QPT_UD,
						       .send_wr = 256,
						       .recv_wr = 256});
		qb_ = std::make_unique<Qp>(Peer(), QpOpts{.type = IBV_QPT_UD,
							  .send_wr = 256,
							  .recv_wr = 256});
		ud_up(*qa_, kQkey);
		ud_up(*qb_, kQkey);
		ibv_ah_attr attr = ah_to(A(), Peer());
		ah_ = ibv_create_ah(A().pd, &attr);
		if (!ah_)
			fail("ibv_create_ah: " + errstr(errno));
	}

	void TearDown() override
	{
		if (ah_) {
			EXPECT_EQ(ibv_destroy_ah(ah_), 0);
		}
		qa_.reset();
		qb_.reset();
		TopoTest::TearDown();
	}

	Wr dgram(const Buf &src, size_t off, size_t n, uint64_t id,
		 uint32_t qkey = kQkey)
	{
		return {.op = IBV_WR_SEND, .sges = {src.sge(off, n)}, .wr_id = id,
			.ah = ah_, .remote_qpn = qb_->qpn(), .remote_qkey = qkey};
	}

	// The 40 bytes in front of a datagram from A: an IPv4 header from A's
	// address to the peer's in the last 20.
	void expect_ipv4_header(const uint8_t *grh)
	{
		iphdr ip;
		memcpy(&ip, grh + 20, sizeof(ip));
		EXPECT_EQ(ip.version, 4);
		EXPECT_EQ(ip.ihl, 5);
		EXPECT_EQ(ip.protocol, IPPROTO_UDP);
		EXPECT_EQ(ip.saddr, A().ipv4);
		EXPECT_EQ(ip.daddr, Peer().ipv4);
	}

	std::unique_ptr<Qp> qa_, qb_;
	ibv_ah *ah_ = nullptr;
};

INSTANTIATE_TEST_SUITE_P(Topo, Ud,
			 ::testing::Values(Topo::TwoDevices, Topo::Loopback),
			 topo_name);

TEST_P(Ud, QueryAndState)
{
	ibv_qp_attr a{};
	ibv_qp_init_attr ia{};
	ASSERT_EQ(ibv_query_qp(qa_->qp, &a, IBV_QP_STATE | IBV_QP_QKEY, &ia), 0);
	EXPECT_EQ(a.qp_state, IBV_QPS_RTS);
	EXPECT_EQ(a.qkey, kQkey);
	EXPECT_EQ(ia.qp_type, IBV_QPT_UD);
}

TEST_P(Ud, SendReceiveWithNetworkHeader)
{
	const size_t m = A().mtu();
	Buf src(A().pd, m), dst(Peer().pd, kGrhLen + m + 16);
	uint64_t id = 0;

	for (size_t n : {0ul, 1ul, 100ul, m - 1, m}) {
		SCOPED_TRACE(testing::Message() << "datagram of " << n);
		fill(src.p, n, 2000 + n);
		memset(dst.p, 0xee, dst.len);
		ASSERT_EQ(post_recv(qb_->qp, {dst.sge(0, kGrhLen + n + 16)}, id), 0);
		ASSERT_EQ(post_send(qa_->qp, dgram(src, 0, n, id)), 0);
		EXPECT_WC(poll1(qa_->scq), id, IBV_WC_SUCCESS, IBV_WC_SEND);
		ibv_wc wc = poll1(qb_->rcq);
		EXPECT_WC(wc, id, IBV_WC_SUCCESS, IBV_WC_RECV);
		EXPECT_EQ(wc.byte_len, kGrhLen + n);
		EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
		EXPECT_FALSE(wc.wc_flags & IBV_WC_WITH_IMM);
		EXPECT_EQ(wc.src_qp, qa_->qpn());
		EXPECT_EQ(wc.qp_num, qb_->qpn());
		EXPECT_EQ(wc.sl & 7, kSlIpv4);
		expect_ipv4_header(dst.p);
		EXPECT_TRUE(has_pattern(dst.p + kGrhLen, n, 2000 + n));
		EXPECT_TRUE(all_bytes(dst.p + kGrhLen + n, 16, 0xee));
		id++;
	}
}

// Over the IPv6 GIDs, link-local (index 0) and global: the flow label
// is 20 bits, whatever the AH says (UCX sets all 32; copied unmasked into
// the header, the version field read 15 and the peer dropped the packet).
TEST_P(Ud, Ipv6GidsWithAnAllOnesFlowLabel)
{
	Buf src(A().pd, 100), dst(Peer().pd, kGrhLen + 100);
	for (bool link_local : {true, false}) {
		SCOPED_TRACE(link_local ? "link-local GID" : "global GID");
		ibv_gid from{}, to{};
		int si = ipv6_gid(A(), link_local, &from);
		ASSERT_GE(si, 0) << "no such GID on " << A().name;
		ASSERT_GE(ipv6_gid(Peer(), link_local, &to), 0)
			<< "no such GID on " << Peer().name;
		ibv_ah_attr attr{};
		attr.is_global = 1;
		attr.grh.dgid = to;
		attr.grh.sgid_index = static_cast<uint8_t>(si);
		attr.grh.hop_limit = 64;
		attr.grh.flow_label = 0xffffffff;
		attr.port_num = kPort;
		ibv_ah *ah = ibv_create_ah(A().pd, &attr);
		ASSERT_NE(ah, nullptr) << errstr(errno);

		fill(src.p, 100, 2100 + link_local);
		memset(dst.p, 0xee, dst.len);
		ASSERT_EQ(post_recv(qb_->qp, dst, 1), 0);
		Wr w = dgram(src, 0, 100, 2);
		w.ah = ah;
		ASSERT_EQ(post_send(qa_->qp, w), 0);
		EXPECT_WC(poll1(qa_->scq), 2, IBV_WC_SUCCESS, IBV_WC_SEND);
		ibv_wc wc = poll1(qb_->rcq);
		EXPECT_WC(wc, 1, IBV_WC_SUCCESS, IBV_WC_RECV);
		EXPECT_EQ(wc.sl & 7, kSlIpv6);
		EXPECT_TRUE(wc.wc_flags & IBV_WC_GRH);
		const uint8_t *ip6 = dst.p;
		EXPECT_EQ(ip6[0] >> 4, 6) << "IP version";
		uint32_t label = (ip6[1] & 0xf) << 16 | ip6[2] << 8 | ip6[3];
		EXPECT_EQ(label, 0xfffffu);
		EXPECT_EQ(ip6[6], IPPROTO_UDP);
		EXPECT_TRUE(same_bytes(ip6 + 8, from.raw, 16)) << "source";
		EXPECT_TRUE(same_bytes(ip6 + 24, to.raw, 16)) << "destination";
		EXPECT_TRUE(has_pattern(dst.p + kGrhLen, 100, 2100 + link_local));
		EXPECT_EQ(ibv_destroy_ah(ah), 0);
	}
}

TEST_P(Ud, ScatteredReceiveAndGatheredSend)
{
	Qp qa(A(), {.type = IBV_QPT_UD, .send_sge = 3});
	Qp qb(Peer(), {.type = IBV_QPT_UD, .recv_sge = 3});
	ud_up(qa, kQkey);
	ud_up(qb, kQkey);
	Buf src(A().pd, 1000), grh(Peer().pd, kGrhLen), dst(Peer().pd, 1000);
	fill(src.p, 1000, 2100);
	// The network header in a buffer of its own, the payload split.
	ASSERT_EQ(post_recv(qb.qp, {grh.sge(), dst.sge(0, 300), dst.sge(500, 400)},
			    1),
		  0);
	Wr w{.op = IBV_WR_SEND,
	     .sges = {src.sge(0, 100), src.sge(100, 0), src.sge(200, 500)},
	     .wr_id = 2, .ah = ah_, .remote_qpn = qb.qpn(),
	     .remote_qkey = kQkey};
	EXPECT_WC(run1(qa, w), 2, IBV_WC_SUCCESS);
	ibv_wc wc = poll1(qb.rcq);
	EXPECT_WC(wc, 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_EQ(wc.byte_len, kGrhLen + 600u);
	expect_ipv4_header(grh.p);
	EXPECT_TRUE(has_pattern(dst.p, 100, 2100));
	EXPECT_TRUE(has_pattern(dst.p + 100, 200, 2100, 200));
	EXPECT_TRUE(has_pattern(dst.p + 500, 300, 2100, 400));
}

TEST_P(Ud, SendWithImmediateAndInline)
{
	Qp qa(A(), {.type = IBV_QPT_UD, .inline_data = 128});
	ud_up(qa, kQkey);
	Buf dst(Peer().pd, 256);
	uint8_t data[100];
	fill(data, sizeof(data), 2200);
	ASSERT_EQ(post_recv(qb_->qp, dst, 1), 0);
	Wr w{.op = IBV_WR_SEND_WITH_IMM,
	     .sges = {{reinterpret_cast<uintptr_t>(data), sizeof(data), 0}},
	     .wr_id = 2,
	     .flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE | IBV_SEND_SOLICITED,
	     .imm = 0xabad1dea,
	     .ah = ah_,
	     .remote_qpn = qb_->qpn(),
	     .remote_qkey = kQkey};
	ASSERT_EQ(post_send(qa.qp, w), 0);
	memset(data, 0, sizeof(data));
	EXPECT_WC(poll1(qa.scq), 2, IBV_WC_SUCCESS, IBV_WC_SEND);
	ibv_wc wc = poll1(qb_->rcq);
	EXPECT_WC(wc, 1, IBV_WC_SUCCESS, IBV_WC_RECV);
	EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
	EXPECT_EQ(be32toh(wc.imm_data), 0xabad1deau);
	EXPECT_EQ(wc.byte_len, kGrhLen + 100u);
	EXPECT_TRUE(has_pattern(dst.p + kGrhLen, 100, 2200));
}

TEST_P(Ud, WrongQkeyIsDropped)
{
	Buf src(A().pd, 64), dst(Peer().pd, 256 * 2);
	fill(src.p, 64, 2300);
	ASSERT_EQ(post_recv(qb_->qp, {dst.sge(0, 256)}, 1), 0);
	ASSERT_EQ(post_recv(qb_->qp, {dst.sge(256, 256)}, 2), 0);

	// Sent (UD completes once the datagram is out), never received.
	ASSERT_EQ(post_send(qa_->qp, dgram(src, 0, 64, 10, kQkey + 1)), 0);
	EXPECT_WC(poll1(qa_->scq), 10, IBV_WC_SUCCESS);
	EXPECT_TRUE(quiet(qb_->rcq, Ms(300)));
	// The receive it would have used takes the next good datagram.
	ASSERT_EQ(post_send(qa_->qp, dgram(src, 0, 64, 11)), 0);
	EXPECT_WC(poll1(qa_->scq), 11, IBV_WC_SUCCESS);
	EXPECT_WC(poll1(qb_->rcq), 1, IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(dst.p + kGrhLen, 64, 2300));
	EXPECT_TRUE(quiet(qb_->rcq, Ms(100)));
}

// IBA 10.2.5: a Q_Key with the high bit set in the WR means "the QP's own".
TEST_P(Ud, PrivilegedQkeyMeansTheQpsOwn)
{
	Qp qc(A(), {.type = IBV_QPT_UD});
	ud_up(qc, kQkey + 5);		// not the receiver's Q_Key
	Buf src(A().pd, 64), dst(Peer().pd, 256);
	ASSERT_EQ(post_recv(qb_->qp, dst, 1), 0);

	// qa's own Q_Key is the receiver's: delivered.
	ASSERT_EQ(post_send(qa_->qp, dgram(src, 0, 64, 1, 0x80000000)), 0);
	EXPECT_WC(poll1(qa_->scq), 1, IBV_WC_SUCCESS);
	EXPECT_WC(poll1(qb_->rcq), 1, IBV_WC_SUCCESS);
	// qc's is not: dropped.
	ASSERT_EQ(post_recv(qb_->qp, dst, 2), 0);
	Wr w = dgram(src, 0, 64, 2, 0x80000000);
	ASSERT_EQ(post_send(qc.qp, w), 0);
	EXPECT_WC(poll1(qc.scq), 2, IBV_WC_SUCCESS);
	EXPECT_TRUE(quiet(qb_->rcq, Ms(300)));
}

TEST_P(Ud, NoReceivePostedIsDropped)
{
	Buf src(A().pd, 64), dst(Peer().pd, 256);
	fill(src.p, 64, 2400);
	ASSERT_EQ(post_send(qa_->qp, dgram(src, 0, 64, 1)), 0);
	EXPECT_WC(poll1(qa_->scq), 1, IBV_WC_SUCCESS);
	std::this_thread::sleep_for(Ms(200));
	ASSERT_EQ(post_recv(qb_->qp, dst, 2), 0);
	EXPECT_TRUE(quiet(qb_->rcq, Ms(200)))
		<< "a datagram that found no receive was kept";
	fill(src.p, 64, 2401);
	ASSERT_EQ(post_send(qa_->qp, dgram(src, 0, 64, 3)), 0);
	EXPECT_WC(poll1(qb_->rcq), 2, IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(dst.p + kGrhLen, 64, 2401));
}

TEST_P(Ud, LongerThanMtuIsALocalLengthError)
{
	const size_t m = A().mtu();
	Buf src(A().pd, m + 1);
	EXPECT_WC(run1(*qa_, dgram(src, 0, m + 1, 1)), 1, IBV_WC_LOC_LEN_ERR);
	EXPECT_TRUE(quiet(qb_->rcq, Ms(100)));
}

TEST_P(Ud, ReceiveBufferTooSmall)
{
	Buf src(A().pd, 100), dst(Peer().pd, 256);
	memset(dst.p, 0xee, dst.len);
	// Room for the header and 99 bytes of the 100.
	ASSERT_EQ(post_recv(qb_->qp, {dst.sge(0, kGrhLen + 99)}, 1), 0);
	ASSERT_EQ(post_send(qa_->qp, dgram(src, 0, 100, 2)), 0);
	EXPECT_WC(poll1(qa_->scq), 2, IBV_WC_SUCCESS);
	EXPECT_WC(poll1(qb_->rcq), 1, IBV_WC_LOC_LEN_ERR);
	EXPECT_EQ(dst.p[kGrhLen + 99], 0xee);
}

TEST_P(Ud, ManyDatagrams)
{
	const int n = 200;
	const size_t sz = 200;
	Buf src(A().pd, n * sz), dst(Peer().pd, n * (kGrhLen + sz));
	for (int i = 0; i < n; i++) {
		fill(src.p + i * sz, sz, 2500 + i);
		memcpy(src.p + i * sz, &i, sizeof(i));
		ASSERT_EQ(post_recv(qb_->qp,
				    {dst.sge(i * (kGrhLen + sz), kGrhLen + sz)}, i),
			  0);
	}
	std::vector<Wr> w;
	for (int i = 0; i < n; i++)
		w.push_back(dgram(src, i * sz, sz, i));
	ASSERT_EQ(post_send(qa_->qp, w), 0);
	EXPECT_TRUE(poll_ok(qa_->scq, n));
	auto v = poll(qb_->rcq, n);
	EXPECT_EQ(v.size(), static_cast<size_t>(n)) << "datagrams lost";
	std::set<int> seen;
	for (const ibv_wc &wc : v) {
		ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << describe(wc);
		const uint8_t *p = dst.p + wc.wr_id * (kGrhLen + sz) + kGrhLen;
		int idx;
		memcpy(&idx, p, sizeof(idx));
		ASSERT_TRUE(idx >= 0 && idx < n);
		EXPECT_TRUE(seen.insert(idx).second) << "datagram " << idx << " twice";
		EXPECT_TRUE(has_pattern(p + sizeof(idx), sz - sizeof(idx),
					2500 + idx, sizeof(idx)));
	}
}

TEST_P(Ud, TwoDestinationsFromOneQp)
{
	Qp qc(A(), {.type = IBV_QPT_UD});
	ud_up(qc, kQkey);
	ibv_ah_attr attr = ah_to(A(), A());
	ibv_ah *self = ibv_create_ah(A().pd, &attr);
	ASSERT_NE(self, nullptr) << errstr(errno);
	Buf src(A().pd, 128), d1(Peer().pd, 256), d2(A().pd, 256);
	fill(src.p, 128, 2600);
	ASSERT_EQ(post_recv(qb_->qp, d1, 1), 0);
	ASSERT_EQ(post_recv(qc.qp, d2, 2), 0);
	std::vector<Wr> w = {dgram(src, 0, 64, 3), dgram(src, 64, 64, 4)};
	w[1].ah = self;
	w[1].remote_qpn = qc.qpn();
	ASSERT_EQ(post_send(qa_->qp, w), 0);
	EXPECT_TRUE(poll_ok(qa_->scq, 2, 3));
	EXPECT_WC(poll1(qb_->rcq), 1, IBV_WC_SUCCESS);
	EXPECT_WC(poll1(qc.rcq), 2, IBV_WC_SUCCESS);
	EXPECT_TRUE(has_pattern(d1.p + kGrhLen, 64, 2600));
	EXPECT_TRUE(has_pattern(d2.p + kGrhLen, 64, 2600, 64));
	EXPECT_EQ(ibv_destroy_ah(self), 0);
}

TEST_P(Ud, RdmaAndMissingAhRefused)
{
	Buf src(A().pd, 64), dst(Peer().pd, 64);
	for (ibv_wr_opcode op : {IBV_WR_RDMA_WRITE, IBV_WR_RDMA_WRITE_WITH_IMM,
				 IBV_WR_RDMA_READ}) {
		// (remote_addr 0: the union's AH pointer is NULL.)
		Wr w{.op = op, .sges = {src.sge(0, 64)}, .wr_id = 1,
		     .raddr = 0, .rkey = dst.rkey()};
		int bad = -2;
		EXPECT_EQ(post_send(qa_->qp, std::span<const Wr>(&w, 1), &bad),
			  EINVAL)
			<< "opcode " << op;
		EXPECT_EQ(bad, 0);
	}
	Wr w = dgram(src, 0, 64, 2);
	w.ah = nullptr;
	EXPECT_EQ(post_send(qa_->qp, w), EINVAL) << "UD SEND without an AH";
	EXPECT_TRUE(quiet(qa_->scq, Ms(100)));
}

} // namespace
} // namespace mrt
