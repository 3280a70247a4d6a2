// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Datagrams: UD and GSI QPs send one UD_SEND packet per work request,
 * unacknowledged, and receive into the next receive WQE behind a 40-byte
 * network header, as RoCE does, so the IB CM and rdma_cm run unchanged.
 */
#include <linux/etherdevice.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <rdma/ib_mad.h>

#include "metaroce_loc.h"
#include "metaroce_soft.h"
#include "soft/mrs.h"

#define GRH_LEN	40

static u32 wqe_qkey(const struct metaroce_qp *qp, u32 qkey)
{
	/* IBA: a Q_Key with the high bit set means the QP's own. */
	return (qkey & 0x80000000) ? qp->attr.qkey : qkey;
}

static struct sk_buff *build_datagram(struct metaroce_qp *qp,
				      struct soft_swqe *swqe, u32 psn)
{
	struct metaroce_deth *deth;
	struct sk_buff *skb;
	u8 flags = METAROCE_F_FIRST | METAROCE_F_LAST;

	if (qp->mdev->protocol == 2)
		return mrs_build_datagram(qp, swqe,
					  wqe_qkey(qp, swqe->wqe.ud.remote_qkey));
	skb = soft_alloc_skb(qp, METAROCE_BTH_LEN + METAROCE_DETH_LEN,
			     swqe->length);
	if (!skb)
		return NULL;
	soft_copy_from_sges(swqe, 0, skb_put(skb, swqe->length),
			    swqe->length);
	if (swqe->wqe.opcode == IB_WR_SEND_WITH_IMM)
		flags |= METAROCE_F_IMM;
	if (swqe->wqe.flags & METAROCE_WQE_SOLICITED)
		flags |= METAROCE_F_SOLICITED;
	soft_fill_bth((void *)skb->data, METAROCE_OP_UD_SEND, flags,
		      swqe->wqe.ud.remote_qpn, qp->ibqp.qp_num, psn, 0);
	deth = (void *)skb->data + METAROCE_BTH_LEN;
	deth->addr = 0;
	deth->key = cpu_to_be32(wqe_qkey(qp, swqe->wqe.ud.remote_qkey));
	deth->msn = 0;
	deth->msg_len = cpu_to_be32(swqe->length);
	deth->imm = (flags & METAROCE_F_IMM) ? swqe->wqe.imm_data : 0;
	return skb;
}

/* Sends posted datagrams, each completing once handed to the network. */
enum soft_tx_result soft_ud_transmit(struct metaroce_soft_qp *sqp,
				     int *budget)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;
	struct soft_swqe *swqe;
	struct sk_buff *skb;
	u32 psn;

	while (*budget > 0) {
		spin_lock_bh(&req->lock);
		if (READ_ONCE(qp->state) != IB_QPS_RTS ||
		    !metaroce_queue_available(&qp->sq)) {
			spin_unlock_bh(&req->lock);
			return TX_IDLE;
		}
		req->fetch_index = qp->sq.own_index + 1;
		req->send_index = req->fetch_index;
		if (soft_fetch_send_wqe(sqp, qp->sq.own_index)) {
			soft_qp_fail(qp);
			spin_unlock_bh(&req->lock);
			return TX_IDLE;
		}
		swqe = &req->swqes[qp->sq.own_index & (qp->sq.num_slots - 1)];
		psn = req->psn_next;
		req->psn_next = soft_psn_add(psn, 1);
		spin_unlock_bh(&req->lock);

		skb = build_datagram(qp, swqe, psn);
		if (skb)
			soft_xmit(qp, &swqe->av, skb, req->paths[0].entropy,
				  NULL, true, 0);
		else
			metaroce_count(qp->mdev, TX_DROPPED);
		(*budget)--;

		spin_lock_bh(&req->lock);
		soft_release_swqe(swqe);
		soft_sq_retire(qp, swqe->wqe.wr_id, swqe->wqe.opcode,
			       IB_WC_SUCCESS, swqe->length,
			       swqe->wqe.flags & METAROCE_WQE_SIGNALED);
		spin_unlock_bh(&req->lock);
	}
	return TX_MORE;
}

static bool qkey_ok(const struct metaroce_qp *qp, u32 qkey)
{
	if (qp->ibqp.qp_type == IB_QPT_GSI)
		return qkey == IB_QP1_QKEY;
	return qkey == qp->attr.qkey;
}

void soft_ud_rx(struct metaroce_soft_qp *sqp, struct soft_pkt_info *pkt)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_resp *resp = &sqp->resp;
	struct sk_buff *skb = pkt->skb;
	u8 grh[GRH_LEN] = {};
	struct metaroce_cqe cqe = {};
	struct soft_rwqe *rwqe;

	if (!qkey_ok(qp, pkt->deth.key)) {
		metaroce_count(qp->mdev, RX_BAD_PEER);
		return;
	}

	/* The network header goes first, where a GRH would be. */
	if (pkt->src.net_type == RDMA_NETWORK_IPV4)
		memcpy(grh + 20, ip_hdr(skb), sizeof(struct iphdr));
	else
		memcpy(grh, ipv6_hdr(skb), sizeof(struct ipv6hdr));

	spin_lock_bh(&resp->lock);
	soft_srq_fetch(sqp, 1);
	if (!metaroce_queue_available(&qp->rq)) {
		spin_unlock_bh(&resp->lock);
		metaroce_count(qp->mdev, RX_NO_RECV_WQE);
		return;
	}
	rwqe = &resp->rwqes[qp->rq.own_index & (qp->rq.num_slots - 1)];
	soft_take_recv_wqe(sqp, qp->rq.own_index);

	cqe.status = rwqe->status;
	if (!cqe.status && rwqe->capacity < GRH_LEN + pkt->payload_len)
		cqe.status = IB_WC_LOC_LEN_ERR;
	/* A revoked buffer (deregistered) is a protection error too. */
	if (!cqe.status &&
	    (soft_place_buf_in_sges(rwqe->sge, rwqe->mr, rwqe->wqe.num_sge, 0,
				    grh, GRH_LEN) ||
	     soft_place_in_sges(rwqe->sge, rwqe->mr, rwqe->wqe.num_sge,
				GRH_LEN, skb, pkt->payload_offset,
				pkt->payload_len)))
		cqe.status = IB_WC_LOC_PROT_ERR;
	cqe.wr_id = rwqe->wqe.wr_id;
	cqe.opcode = IB_WC_RECV;
	cqe.byte_len = GRH_LEN + pkt->payload_len;
	cqe.qp_num = qp->ibqp.qp_num;
	cqe.src_qp = pkt->sqpn;
	cqe.flags = METAROCE_CQE_GRH;
	if (pkt->flags & METAROCE_F_IMM) {
		cqe.flags |= METAROCE_CQE_WITH_IMM;
		cqe.imm_data = pkt->deth.imm;
	}
	BUILD_BUG_ON(RDMA_NETWORK_IPV4 != METAROCE_NETWORK_IPV4 ||
		     RDMA_NETWORK_IPV6 != METAROCE_NETWORK_IPV6);
	cqe.network_hdr_type = pkt->src.net_type;
	ether_addr_copy(cqe.smac, pkt->smac);
	soft_release_rwqe(rwqe);
	metaroce_queue_consume(&qp->rq, 1);
	spin_unlock_bh(&resp->lock);

	metaroce_cq_post(qp->rcq, &cqe,
			 !!(pkt->flags & METAROCE_F_SOLICITED));
}
