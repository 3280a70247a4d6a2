// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
//
// Device, port, GID and P_Key queries; protection domains; what the
// device does not implement (MW, extended CQs).
#include <arpa/inet.h>
#include <fcntl.h>

#include "verbs_env.hpp"

namespace mrt {
namespace {

class Device : public VerbsTest {};
class Pd : public VerbsTest {};

TEST_F(Device, QueryDeviceLimits)
{
	const ibv_device_attr &d = A().dev_attr;

	EXPECT_EQ(d.vendor_id, 0xffffffu);
	EXPECT_EQ(d.vendor_part_id, 0x4d52u);
	EXPECT_STREQ(d.fw_ver, "1.0.0");
	EXPECT_EQ(d.max_qp_wr, static_cast<int>(kMaxQpWr));
	EXPECT_EQ(d.max_sge, static_cast<int>(kMaxSge));
	EXPECT_EQ(d.max_sge_rd, static_cast<int>(kMaxSge));
	EXPECT_EQ(d.max_cqe, kMaxCqe);
	EXPECT_EQ(d.max_qp_rd_atom, static_cast<int>(kMaxRdAtomic));
	EXPECT_EQ(d.max_qp_init_rd_atom, static_cast<int>(kMaxRdAtomic));
	// Atomics on the responder's CPU: atomic against the host too.
	EXPECT_EQ(d.atomic_cap, IBV_ATOMIC_HCA);
	EXPECT_GE(d.max_srq, 1024);
	EXPECT_EQ(d.max_srq_sge, static_cast<int>(kMaxSge));
	// Memory windows, type 1 and 2B (mw_test.cpp).
	EXPECT_EQ(d.max_mw, 65536);
	EXPECT_EQ(d.max_pkeys, 1);
	EXPECT_EQ(d.phys_port_cnt, 1);
	EXPECT_GE(d.max_mr_size, 1ULL << 30);
	EXPECT_GE(d.max_qp, 1024);
	EXPECT_GE(d.max_cq, 1024);
	EXPECT_GE(d.max_mr, 1024);
	EXPECT_GE(d.max_pd, 1024);
	EXPECT_GE(d.max_ah, 1024);
	EXPECT_TRUE(d.page_size_cap & 4096);
	EXPECT_TRUE(d.device_cap_flags & IBV_DEVICE_RC_RNR_NAK_GEN);
	EXPECT_TRUE(d.device_cap_flags & IBV_DEVICE_PORT_ACTIVE_EVENT);
	EXPECT_EQ(A().ctx->device->node_type, IBV_NODE_CA);
	EXPECT_EQ(A().ctx->device->transport_type, IBV_TRANSPORT_IB);

	ibv_device_attr_ex ex{};
	ASSERT_EQ(ibv_query_device_ex(A().ctx, nullptr, &ex), 0);
	EXPECT_EQ(ex.orig_attr.max_qp_wr, d.max_qp_wr);
	EXPECT_EQ(ex.orig_attr.max_cqe, d.max_cqe);
}

TEST_F(Device, QueryPort)
{
	ibv_port_attr p{};

	ASSERT_EQ(ibv_query_port(A().ctx, kPort, &p), 0);
	EXPECT_EQ(p.state, IBV_PORT_ACTIVE);
	EXPECT_EQ(p.phys_state, 5) << "LinkUp";
	EXPECT_EQ(p.link_layer, IBV_LINK_LAYER_ETHERNET);
	EXPECT_EQ(p.max_mtu, IBV_MTU_4096);
	EXPECT_GE(p.active_mtu, IBV_MTU_256);
	EXPECT_LE(p.active_mtu, p.max_mtu);
	// A 1 GiB message is within the device's limits.
	EXPECT_GE(p.max_msg_sz, 1u << 30);
	EXPECT_EQ(p.pkey_tbl_len, 1);
	EXPECT_GE(p.gid_tbl_len, 2);
	EXPECT_TRUE(p.port_cap_flags & IBV_PORT_CM_SUP);
	EXPECT_EQ(p.lid, 0) << "no LIDs on Ethernet";
}

TEST_F(Device, QueryBadPort)
{
	ibv_port_attr p{};

	EXPECT_EQ(ibv_query_port(A().ctx, 2, &p), EINVAL);
	EXPECT_EQ(ibv_query_port(A().ctx, 0, &p), EINVAL);
}

TEST_F(Device, GidIsTheNetdevIpv4Address)
{
	ibv_gid_entry e{};
	char ip[INET_ADDRSTRLEN];

	ASSERT_EQ(ibv_query_gid_ex(A().ctx, kPort, A().gid_index, &e, 0), 0);
	EXPECT_EQ(e.gid_type, IBV_GID_TYPE_ROCE_V2);
	EXPECT_EQ(e.gid_index, static_cast<uint32_t>(A().gid_index));
	EXPECT_EQ(e.port_num, kPort);
	EXPECT_EQ(0, memcmp(&e.gid, &A().gid, 16));
	inet_ntop(AF_INET, &A().ipv4, ip, sizeof(ip));
	RecordProperty("gid_a", gid_str(A().gid) + " = " + ip);
	EXPECT_NE(A().ipv4, 0u);
	if (two_devices()) {
		EXPECT_NE(0, memcmp(&A().gid, &B().gid, 16))
			<< "the two devices have the same GID "
			<< gid_str(A().gid);
	}

	// Index 0 is the link-local IPv6 address (RoCE GID management).
	ibv_gid_entry e0{};
	if (ibv_query_gid_ex(A().ctx, kPort, 0, &e0, 0) == 0 &&
	    A().gid_index != 0) {
		EXPECT_EQ(e0.gid.raw[0], 0xfe) << gid_str(e0.gid);
	}

	// Out of the table.
	ibv_gid g{};
	EXPECT_NE(ibv_query_gid(A().ctx, kPort, A().port.gid_tbl_len, &g), 0);
	EXPECT_NE(ibv_query_gid_ex(A().ctx, kPort, A().port.gid_tbl_len, &e, 0),
		  0);
}

TEST_F(Device, QueryGidTable)
{
	std::vector<ibv_gid_entry> t(A().port.gid_tbl_len);
	ssize_t n = ibv_query_gid_table(A().ctx, t.data(), t.size(), 0);

	ASSERT_GE(n, 1) << errstr(static_cast<int>(-n));
	bool found = false;
	for (ssize_t i = 0; i < n; i++)
		if (!memcmp(&t[i].gid, &A().gid, 16) &&
		    t[i].gid_index == static_cast<uint32_t>(A().gid_index))
			found = true;
	EXPECT_TRUE(found) << "GID " << gid_str(A().gid) << " not in the table";
}

TEST_F(Device, QueryPkey)
{
	uint16_t pkey = 0;

	ASSERT_EQ(ibv_query_pkey(A().ctx, kPort, 0, &pkey), 0);
	EXPECT_EQ(pkey, htons(0xffff));
	EXPECT_NE(ibv_query_pkey(A().ctx, kPort, 1, &pkey), 0);
	EXPECT_EQ(ibv_get_pkey_index(A().ctx, kPort, htons(0xffff)), 0);
}

TEST_F(Device, OpenTwice)
{
	// Two contexts on one device are independent.
	Ctx second(A().ctx->device);
	Buf b1(A().pd, 4096), b2(second.pd, 4096);

	EXPECT_NE(b1.lkey(), b2.lkey());
	EXPECT_EQ(0, memcmp(&A().gid, &second.gid, 16));
}

TEST_F(Device, AsyncFdIsQuiet)
{
	A().drain_events(Ms(50));
	EXPECT_TRUE(A().seen.empty())
		<< "event " << ibv_event_type_str(A().seen[0].event_type);
}

TEST_F(Pd, AllocDeallocMany)
{
	std::vector<ibv_pd *> pds;

	for (int i = 0; i < 256; i++) {
		ibv_pd *pd = ibv_alloc_pd(A().ctx);
		ASSERT_NE(pd, nullptr) << i << ": " << errstr(errno);
		pds.push_back(pd);
	}
	for (ibv_pd *pd : pds) {
		EXPECT_EQ(ibv_dealloc_pd(pd), 0);
	}
}

TEST_F(Pd, DeallocWithMrIsBusy)
{
	ibv_pd *pd = ibv_alloc_pd(A().ctx);
	ASSERT_NE(pd, nullptr);
	{
		Buf b(pd, 4096);
		EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
	}
	EXPECT_EQ(ibv_dealloc_pd(pd), 0);
}

TEST_F(Pd, DeallocWithQpIsBusy)
{
	ibv_pd *pd = ibv_alloc_pd(A().ctx);
	ASSERT_NE(pd, nullptr);
	ibv_cq *cq = ibv_create_cq(A().ctx, 16, nullptr, nullptr, 0);
	ASSERT_NE(cq, nullptr);
	ibv_qp_init_attr ia{};
	ia.send_cq = ia.recv_cq = cq;
	ia.qp_type = IBV_QPT_RC;
	ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
	ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
	ibv_qp *qp = ibv_create_qp(pd, &ia);
	ASSERT_NE(qp, nullptr) << errstr(errno);
	EXPECT_EQ(ibv_dealloc_pd(pd), EBUSY);
	EXPECT_EQ(ibv_destroy_qp(qp), 0);
	EXPECT_EQ(ibv_dealloc_pd(pd), 0);
	EXPECT_EQ(ibv_destroy_cq(cq), 0);
}

// Not implemented: XRC domains. libibverbs' defaults say EOPNOTSUPP.
// (Extended CQs and memory windows are: cq_ex_test.cpp, mw_test.cpp.)
TEST_F(Device, UnsupportedObjects)
{
	ibv_xrcd_init_attr xa{};
	xa.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS;
	xa.fd = -1;
	xa.oflags = O_CREAT;
	errno = 0;
	EXPECT_EQ(ibv_open_xrcd(A().ctx, &xa), nullptr);
	EXPECT_EQ(errno, EOPNOTSUPP) << errstr(errno);
}

TEST_F(Device, AddressHandle)
{
	ibv_ah_attr attr = ah_to(A(), B());
	ibv_ah *ah = ibv_create_ah(A().pd, &attr);

	ASSERT_NE(ah, nullptr) << errstr(errno);
	EXPECT_EQ(ibv_destroy_ah(ah), 0);

	// RoCE needs a GRH.
	attr.is_global = 0;
	errno = 0;
	EXPECT_EQ(ibv_create_ah(A().pd, &attr), nullptr);
	EXPECT_EQ(errno, EINVAL) << errstr(errno);

	// A source GID index that holds no GID.
	attr = ah_to(A(), B());
	attr.grh.sgid_index = static_cast<uint8_t>(A().port.gid_tbl_len - 1);
	ibv_gid g{};
	if (ibv_query_gid(A().ctx, kPort, attr.grh.sgid_index, &g) == 0 &&
	    !g.global.subnet_prefix && !g.global.interface_id) {
		errno = 0;
		ibv_ah *bad = ibv_create_ah(A().pd, &attr);
		EXPECT_EQ(bad, nullptr);
		if (bad)
			ibv_destroy_ah(bad);
	}
}

} // namespace
} // namespace mrt
