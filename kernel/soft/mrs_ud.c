// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Datagrams on protocol v2: UD_SEND and UD_SEND_IMM (protocol-v2.md
 * section 7), unsequenced, one per work request. metaroce_ud.c keeps the
 * rest (taking WQEs, receive WQEs, the 40-byte network header, the CQE);
 * this is only their v2 form on the wire.
 */
#include <linux/etherdevice.h>
#include <linux/ip.h>
#include <linux/udp.h>

#include "../metaroce_loc.h"
#include "mrs.h"

/* The packet of datagram @swqe, its Q_Key given (the QP's own resolved). */
struct sk_buff *mrs_build_datagram(struct metaroce_qp *qp,
				   struct soft_swqe *swqe, u32 qkey)
{
	bool imm = swqe->wqe.opcode == IB_WR_SEND_WITH_IMM;
	struct mrc_pkt pkt = {};
	struct sk_buff *skb;
	u32 hdr;

	pkt.hdr.opcode = imm ? MRC_OP_UD_SEND_IMM : MRC_OP_UD_SEND;
	hdr = mrc_opcode[pkt.hdr.opcode].length;
	if (swqe->wqe.flags & METAROCE_WQE_SOLICITED)
		pkt.hdr.flags = MRC_F_SOLICITED;
	pkt.hdr.conn = swqe->wqe.ud.remote_qpn;
	pkt.hdr.msg_len = swqe->length;
	pkt.deth.qkey = qkey;
	pkt.deth.src_qpn = qp->ibqp.qp_num;
	if (imm)
		pkt.imm = be32_to_cpu(swqe->wqe.imm_data);
	skb = soft_alloc_skb(qp, hdr, swqe->length);
	if (!skb)
		return NULL;
	if (soft_copy_from_sges(swqe, 0, skb_put(skb, swqe->length),
				swqe->length)) {
		kfree_skb(skb);
		return NULL;
	}
	mrc_wire_build(&pkt, skb->data, hdr);
	return skb;
}

/* A datagram for UD or GSI QP @qp, handed to the datagram receive path. */
void mrs_rx_datagram(struct metaroce_qp *qp, struct sk_buff *skb,
		     const struct mrc_pkt *pkt, u32 payload_offset)
{
	struct soft_pkt_info info = {
		.skb = skb,
		.opcode = METAROCE_OP_UD_SEND,
		.dqpn = pkt->hdr.conn,
		.sqpn = pkt->deth.src_qpn,
		.payload_offset = payload_offset,
		.payload_len = pkt->payload_len,
	};

	info.flags = METAROCE_F_FIRST | METAROCE_F_LAST;
	if (pkt->hdr.flags & MRC_F_SOLICITED)
		info.flags |= METAROCE_F_SOLICITED;
	if (pkt->hdr.opcode == MRC_OP_UD_SEND_IMM) {
		info.flags |= METAROCE_F_IMM;
		info.deth.imm = cpu_to_be32(pkt->imm);
	}
	info.deth.key = pkt->deth.qkey;
	info.deth.msg_len = pkt->hdr.msg_len;
	info.src.net_type = skb->protocol == htons(ETH_P_IP) ?
			    RDMA_NETWORK_IPV4 : RDMA_NETWORK_IPV6;
	if (skb_mac_header_was_set(skb))
		ether_addr_copy(info.smac, eth_hdr(skb)->h_source);
	soft_ud_rx(qp->soft, &info);
}
