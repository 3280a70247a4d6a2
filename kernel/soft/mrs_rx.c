// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Protocol v2 receive, in softirq context from the UDP socket: the core's
 * codec parses (and refuses, counted), the connection identifier finds
 * the QP, the source address must be its peer's. An ACK goes to the
 * sending paths; a segment is checked against the peer's stream, placed,
 * accepted, and only then recorded on its path, so what the path's ACK
 * says arrived is what the receiver took (protocol-v2.md section 8.1).
 */
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <net/inet_ecn.h>
#include <net/ipv6.h>

#include "../metaroce_loc.h"
#include "mrs.h"

/* What became of a segment the stream let by. */
enum mrs_take {
	MRS_TAKEN,		/* placed (or queued): accept it */
	MRS_NOT_NOW,		/* no receive WQE or request slot: RNR */
	MRS_DROP,		/* malformed for this QP: dropped, counted */
	MRS_REFUSED,		/* an access, length or operation error: NAK */
};

/* IB's RNR timer encoding (IBA table 45), microseconds. */
static const u32 rnr_timer_us[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
	1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

/* A received packet: its fields, where its payload is, where it came from. */
struct mrs_rx_pkt {
	struct mrc_pkt pkt;
	struct sk_buff *skb;
	u32 payload_offset;	/* in skb, from skb->data */
	bool ce;
};

static bool from_peer(const struct metaroce_qp *qp, const struct sk_buff *skb,
		      bool *ce)
{
	const struct metaroce_av *av = &qp->av;

	if (skb->protocol == htons(ETH_P_IP)) {
		const struct iphdr *iph = ip_hdr(skb);

		*ce = INET_ECN_is_ce(iph->tos);
		return av->net_type == RDMA_NETWORK_IPV4 &&
		       iph->saddr == av->daddr4;
	}
	*ce = INET_ECN_is_ce(ipv6_get_dsfield(ipv6_hdr(skb)));
	return av->net_type == RDMA_NETWORK_IPV6 &&
	       ipv6_addr_equal(&ipv6_hdr(skb)->saddr, &av->daddr6);
}

/* Whether a QP in @state takes packets of @opcode from its peer. */
static bool state_accepts(enum ib_qp_state state, u8 opcode)
{
	switch (state) {
	case IB_QPS_RTR:
		/*
		 * The peer's requests, and the ACKs of our answers to them
		 * (protocol-v2.md 9.1); no responses: we asked nothing.
		 */
		return !(mrc_opcode[opcode].mask & MRC_OPM_RESP);
	case IB_QPS_RTS:
	case IB_QPS_SQD:
	case IB_QPS_SQE:
		return true;
	default:
		return false;
	}
}

static void rx_ack(struct metaroce_soft_qp *sqp, const struct mrc_pkt *pkt)
{
	struct mrs_qp *mq = sqp->v2;
	struct metaroce_dev *mdev = sqp->qp->mdev;
	u64 now, delivered;
	bool kick;

	spin_lock_bh(&sqp->resp.lock);
	/* Under the lock: no time the core holds is later (mrs_timer_fn). */
	now = mrs_now_us();
	delivered = mq->stx.delivered;
	if (mrc_conn_tx_ack(&mq->conn, pkt->hdr.path, &pkt->ack.path, now,
			    &mrs_path_ops, mq) == MRC_ACK_INVALID) {
		metaroce_count(mdev, RX_ACK_INVALID);
	} else {
		metaroce_count(mdev, RX_ACKS);
		mrc_conn_tx_grant(&mq->conn, pkt->ack.share,
				  pkt->ack.capacity_mbps);
		mrs_cap_window(mq);
	}
	if (mq->stx.delivered != delivered)
		mq->progress_us = now;
	mrs_complete(sqp);
	/* Delivered responses make room for the requests waiting. */
	mrs_run_requests(mq);
	kick = mq->stx.resend_len || mq->blocked || mq->stalled ||
	       mrs_response_waiting(mq);
	mrs_arm_timer(mq);
	spin_unlock_bh(&sqp->resp.lock);
	if (kick)
		soft_schedule_tx(sqp);
}

/* Every segment but a message's last carries exactly one MTU. */
static bool fits_mtu(const struct metaroce_qp *qp, const struct mrc_hdr *h,
		     u32 len)
{
	if (h->offset % qp->mtu || len > qp->mtu)
		return false;
	return h->offset + len == h->msg_len || len == qp->mtu;
}

static enum mrs_take place_write(struct metaroce_soft_qp *sqp,
				 const struct mrs_rx_pkt *rp)
{
	const struct mrc_pkt *pkt = &rp->pkt;
	struct metaroce_qp *qp = sqp->qp;
	u64 addr = pkt->reth.va + pkt->hdr.offset;
	struct metaroce_mr *mr;
	bool ok;

	if (!soft_qp_allows(qp, IB_ACCESS_REMOTE_WRITE))
		goto refused;
	/* IBA C9-88: a zero-length WRITE names no memory. */
	if (!pkt->payload_len)
		return MRS_TAKEN;
	mr = metaroce_rkey_get(qp, pkt->reth.rkey, addr, pkt->payload_len,
			       IB_ACCESS_REMOTE_WRITE);
	ok = mr && !metaroce_mr_copy_from_skb(mr, pkt->reth.rkey, addr, rp->skb,
					      rp->payload_offset,
					      pkt->payload_len);
	if (mr)
		metaroce_mr_put(mr);
	if (ok)
		return MRS_TAKEN;
refused:
	mrs_refuse(sqp->v2, MRC_NAK_REMOTE_ACCESS, pkt->hdr.ssn);
	return MRS_REFUSED;
}

/*
 * The receive WQE message @msn lands in: the nth receive-consuming message
 * of the stream takes the nth WQE. NULL if none is posted (yet).
 */
static struct soft_rwqe *rwqe_for(struct metaroce_soft_qp *sqp,
				  const struct mrc_hdr *h)
{
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_qp *mq = sqp->v2;
	u32 ahead = h->msn - mq->srx.recv_done;
	u32 index = qp->rq.own_index + ahead;
	struct soft_rwqe *rwqe;

	/*
	 * On an SRQ a message cannot be further ahead than its segment:
	 * each takes one at least. Else a peer could drain the shared queue.
	 */
	if (metaroce_qp_srq(qp) && ahead > h->ssn - mq->srx.map.cum)
		return NULL;
	soft_srq_fetch(sqp, ahead + 1);
	if (ahead >= metaroce_queue_available(&qp->rq))
		return NULL;
	rwqe = &sqp->resp.rwqes[index & (qp->rq.num_slots - 1)];
	if (!rwqe->taken)
		soft_take_recv_wqe(sqp, index);
	return rwqe;
}

/* A segment of a receive-consuming message: placed in its receive WQE. */
static enum mrs_take place_recv(struct metaroce_soft_qp *sqp,
				const struct mrs_rx_pkt *rp)
{
	const struct mrc_pkt *pkt = &rp->pkt;
	const struct mrc_hdr *h = &pkt->hdr;
	bool send = h->opcode != MRC_OP_WRITE_IMM;
	struct soft_rwqe *rwqe = rwqe_for(sqp, h);

	if (!rwqe)
		return MRS_NOT_NOW;
	if (send && h->msg_len > rwqe->capacity &&
	    rwqe->status == IB_WC_SUCCESS)
		rwqe->status = IB_WC_LOC_LEN_ERR;
	if (send && rwqe->status == IB_WC_SUCCESS && pkt->payload_len &&
	    soft_place_in_sges(rwqe->sge, rwqe->mr, rwqe->wqe.num_sge,
			       h->offset, rp->skb, rp->payload_offset,
			       pkt->payload_len))
		rwqe->status = IB_WC_LOC_PROT_ERR;
	rwqe->seen = true;
	rwqe->write_imm = !send;
	rwqe->msg_len = h->msg_len;
	if (h->opcode == MRC_OP_SEND_IMM || h->opcode == MRC_OP_WRITE_IMM) {
		rwqe->with_imm = true;
		rwqe->imm = cpu_to_be32(pkt->imm);
	}
	if (h->opcode == MRC_OP_SEND_INV) {
		rwqe->with_inv = true;
		rwqe->inv_rkey = pkt->imm;
		if (rwqe->status == IB_WC_SUCCESS &&
		    !soft_invalidation_allowed(sqp->qp, rwqe->inv_rkey))
			rwqe->status = IB_WC_REM_INV_REQ_ERR;
	}
	if (h->flags & MRC_F_SOLICITED)
		rwqe->solicited = true;
	if (rwqe->status == IB_WC_SUCCESS)
		return MRS_TAKEN;
	mrs_refuse(sqp->v2, rwqe->status == IB_WC_LOC_LEN_ERR ||
		   rwqe->status == IB_WC_REM_INV_REQ_ERR ?
		   MRC_NAK_INVALID_REQ : MRC_NAK_REMOTE_OP, h->ssn);
	return MRS_REFUSED;
}

/* What a NAK's syndrome makes of the work request it refuses. */
static u8 nak_status(u8 syndrome)
{
	switch (syndrome) {
	case MRC_NAK_REMOTE_ACCESS:
		return IB_WC_REM_ACCESS_ERR;
	case MRC_NAK_INVALID_REQ:
		return IB_WC_REM_INV_REQ_ERR;
	default:
		return IB_WC_REM_OP_ERR;
	}
}

/* The peer refuses the segment its RNR NAK names and every later one. */
static bool refused_by_rnr(void *ctx, u64 cookie)
{
	const struct mrs_qp *mq = ctx;

	return mrc_seq_diff((u32)cookie, mq->rnr_ssn) >= 0;
}

/*
 * An RNR NAK (section 9.2): what the peer refused is handed back at once,
 * and nothing is sent again for its timer; then it goes again, up to
 * rnr_retry times per message. False when the retries are used up.
 */
static bool rnr_wait(struct metaroce_soft_qp *sqp, const struct mrc_nak *nak)
{
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_qp *mq = sqp->v2;
	u32 i;

	mq->rnr_ssn = nak->ssn;
	for (i = 0; i < mq->num_paths; i++)
		mrc_path_tx_refused(&mq->ptx[i], refused_by_rnr, &mrs_path_ops,
				    mq);
	/* The peer is there: no retry timeout while it says RNR. */
	mq->progress_us = mrs_now_us();
	/* 7 is infinite (IBA 9.7.5.2.8) */
	if (qp->attr.rnr_retry == 7 ||
	    ++mq->rnr_retries <= qp->attr.rnr_retry) {
		mq->rnr_until_us = mrs_now_us() + rnr_timer_us[nak->arg % 32];
		return true;
	}
	metaroce_count(qp->mdev, RNR_RETRY_EXCEEDED);
	return false;
}

/*
 * The peer refused a segment of ours (section 9.2). RNR: see rnr_wait();
 * once the retries are used up the work request fails in its turn. An
 * error NAK: the peer's QP failed as it sent it, and answers nothing
 * more, so ours fails now: what the peer acknowledged before completes,
 * the refused work request with the error, the rest is flushed. A NAK
 * naming a work request already complete (a READ whose answer reached us
 * before the peer found its MR gone) refuses the oldest one not complete.
 */
static void take_nak(struct metaroce_soft_qp *sqp, const struct mrc_nak *nak)
{
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_qp *mq = sqp->v2;
	struct soft_swqe *swqe;
	bool found;
	u8 status;
	u32 wr;

	metaroce_count(qp->mdev, RX_NAKS);
	found = mrc_req_wr_of(&mq->req, nak->ssn, &wr);
	if (nak->syndrome == MRC_NAK_RNR) {
		if (!found || rnr_wait(sqp, nak))
			return;
		status = IB_WC_RNR_RETRY_EXC_ERR;
	} else {
		status = nak_status(nak->syndrome);
		soft_qp_fail(qp);
		if (!found) {
			if (mq->req.head == mq->req.tail)
				return;
			wr = mq->req.head;
		}
	}
	swqe = &sqp->req.swqes[wr & (qp->sq.num_slots - 1)];
	if (swqe->status == IB_WC_SUCCESS)
		swqe->status = status;
	mrc_req_refused(&mq->req, wr);
}

/*
 * A response to one of our READs or atomics: checked against the request,
 * placed in its local buffers. It delivers the request's own segment too:
 * the responder had it.
 */
static enum mrs_take take_response(struct metaroce_soft_qp *sqp,
				   const struct mrs_rx_pkt *rp)
{
	const struct mrc_pkt *pkt = &rp->pkt;
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_qp *mq = sqp->v2;
	struct soft_swqe *swqe;
	u32 wr, first;

	if (pkt->hdr.opcode == MRC_OP_NAK) {
		take_nak(sqp, &pkt->nak);
		return MRS_TAKEN;
	}
	if (mrc_req_response(&mq->req, &pkt->hdr, pkt->payload_len, &wr) !=
	    MRC_RESP_OK)
		return MRS_DROP;
	swqe = &sqp->req.swqes[wr & (qp->sq.num_slots - 1)];
	if (pkt->payload_len && swqe->status == IB_WC_SUCCESS &&
	    soft_place_in_sges(swqe->sge, swqe->mr, swqe->wqe.num_sge,
			       pkt->hdr.offset, rp->skb, rp->payload_offset,
			       pkt->payload_len))
		swqe->status = IB_WC_LOC_PROT_ERR;
	mrc_req_answered(&mq->req, wr, pkt->payload_len);
	first = mq->wrs[wr % mq->req.num_wrs].first_ssn;
	if (mrc_stream_tx_acked(&mq->stx, first))
		mrc_req_delivered(&mq->req, first);
	mq->progress_us = mrs_now_us();
	return MRS_TAKEN;
}

/* A READ or an atomic of the peer's: queued for its turn, or RNR. */
static enum mrs_take take_request(struct metaroce_soft_qp *sqp,
				  const struct mrs_rx_pkt *rp)
{
	struct mrs_qp *mq = sqp->v2;

	if (rp->pkt.hdr.msg_len > METAROCE_MAX_MSG_SIZE)
		return MRS_DROP;
	if (mrc_stream_rx_requests_full(&mq->srx, rp->pkt.hdr.ssn) ||
	    !mrs_take_request(mq, &rp->pkt))
		return MRS_NOT_NOW;
	return MRS_TAKEN;
}

static enum mrs_take take_segment(struct metaroce_soft_qp *sqp,
				  const struct mrs_rx_pkt *rp)
{
	const struct mrc_hdr *h = &rp->pkt.hdr;
	u16 mask = mrc_opcode[h->opcode].mask;
	enum mrs_take t = MRS_TAKEN;

	if ((mask & MRC_OPM_PAYLOAD) &&
	    !fits_mtu(sqp->qp, h, rp->pkt.payload_len))
		return MRS_DROP;
	if (mask & MRC_OPM_RESP)
		return take_response(sqp, rp);
	if (mask & MRC_OPM_REQ)
		return take_request(sqp, rp);
	if (mask & MRC_OPM_RETH)
		t = place_write(sqp, rp);
	if (t == MRS_TAKEN && (mask & MRC_OPM_RECV))
		t = place_recv(sqp, rp);
	return t;
}

/* Completes, in MSN order, the messages whose every segment is in. */
static void complete_recvs(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_qp *mq = sqp->v2;
	u32 msn;

	while (mrc_stream_rx_next_completion(&mq->srx, &msn)) {
		struct soft_rwqe *rwqe = &sqp->resp.rwqes[qp->rq.own_index &
						(qp->rq.num_slots - 1)];

		if (rwqe->with_inv && rwqe->status == IB_WC_SUCCESS)
			soft_invalidate_for(qp, rwqe->inv_rkey);
		soft_retire_recv(qp, rwqe, rwqe->status);
	}
}

/*
 * Whether the stream refuses @h outright: after an error, from the refused
 * segment on (a NAK of the peer's always goes by: it may be why).
 */
static bool refusing(const struct mrs_qp *mq, const struct mrc_hdr *h)
{
	if (h->opcode == MRC_OP_NAK)
		return false;
	return mq->failing ||
	       (mq->nak_due && mrc_seq_diff(h->ssn, mq->nak_ssn) >= 0);
}

static void rx_segment(struct metaroce_soft_qp *sqp, struct mrs_rx_pkt *rp)
{
	const struct mrc_hdr *h = &rp->pkt.hdr;
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_qp *mq = sqp->v2;
	enum mrc_rx_ack ack = MRC_RX_DROP;
	bool kick;
	u64 now;

	spin_lock_bh(&sqp->resp.lock);
	now = mrs_now_us();
	if (refusing(mq, h)) {
		metaroce_count(qp->mdev, RX_REFUSED);
		goto unlock;
	}
	/* The peer answered us from RTR: its stream starts at our sq_psn. */
	if (h->flags & MRC_F_EARLY)
		mrc_stream_rx_rebase(&mq->srx, qp->attr.sq_psn);
	switch (mrc_stream_rx_check(&mq->srx, h)) {
	case MRC_SEG_DUPLICATE:
		metaroce_count(qp->mdev, RX_DUPLICATE);
		break;
	case MRC_SEG_BEYOND:
		metaroce_count(qp->mdev, RX_OUT_OF_WINDOW);
		goto unlock;
	case MRC_SEG_REFUSE:
		metaroce_count(qp->mdev, RX_REFUSED);
		goto unlock;
	case MRC_SEG_TAKE:
		switch (take_segment(sqp, rp)) {
		case MRS_TAKEN:
			if (h->ssn != mq->srx.map.cum)
				metaroce_count(qp->mdev, RX_OUT_OF_ORDER);
			mrc_stream_rx_accept(&mq->srx, h, rp->pkt.payload_len);
			break;
		case MRS_NOT_NOW:
			metaroce_count(qp->mdev, RX_REFUSED);
			/* One NAK per refusal point; it is never refused. */
			if (mrc_stream_rx_refuse(&mq->srx, h->ssn))
				mrs_queue_nak(mq, MRC_NAK_RNR,
					      qp->attr.min_rnr_timer, h->ssn,
					      false);
			goto unlock;
		case MRS_DROP:
			metaroce_count(qp->mdev, RX_MALFORMED);
			goto unlock;
		case MRS_REFUSED:
			goto unlock;
		}
		break;
	}
	ack = mrc_path_rx_packet(&mq->prx[h->path], h->seq,
				 h->seq - h->floor_delta, rp->ce,
				 h->flags & MRC_F_ACK_REQ, now);
	if (ack == MRC_RX_DROP)
		metaroce_count(qp->mdev, RX_OUT_OF_WINDOW);
	else if (ack == MRC_RX_ACK_LATER)
		mq->ack_due |= BIT(h->path);
	complete_recvs(sqp);
	mrs_check_refusal(mq);
	mrs_run_requests(mq);
	mrs_complete(sqp);
unlock:
	kick = mrs_response_waiting(mq) || mq->stx.resend_len ||
	       mq->rnr_until_us || mq->stalled;
	mrs_arm_timer(mq);
	spin_unlock_bh(&sqp->resp.lock);

	if (ack == MRC_RX_ACK_NOW)
		mrs_send_ack(sqp, h->path);
	if (kick)
		soft_schedule_tx(sqp);
}

/* The device's record of who sends to it, for the shares in its ACKs. */
static void note_arrival(struct metaroce_qp *qp, u32 bytes)
{
	struct metaroce_dev *mdev = qp->mdev;

	if (!mdev->fair)
		return;
	spin_lock_bh(&mdev->fair_lock);
	mrc_fair_rx_arrival(mdev->fair, qp->ibqp.qp_num, bytes, mrs_now_us());
	spin_unlock_bh(&mdev->fair_lock);
}

static bool dispatch(struct metaroce_dev *mdev, struct metaroce_qp *qp,
		     struct mrs_rx_pkt *rp)
{
	const struct mrc_hdr *h = &rp->pkt.hdr;
	u16 mask = mrc_opcode[h->opcode].mask;
	bool ud = qp->ibqp.qp_type != IB_QPT_RC;

	if (ud != !!(mask & MRC_OPM_DETH)) {
		metaroce_count(mdev, RX_MALFORMED);
		return false;
	}
	if (ud) {
		if (!state_accepts(READ_ONCE(qp->state), h->opcode)) {
			metaroce_count(mdev, RX_BAD_STATE);
			return false;
		}
		mrs_rx_datagram(qp, rp->skb, &rp->pkt, rp->payload_offset);
		return true;
	}
	if (!state_accepts(READ_ONCE(qp->state), h->opcode)) {
		metaroce_count(mdev, RX_BAD_STATE);
		return false;
	}
	if (!from_peer(qp, rp->skb, &rp->ce)) {
		metaroce_count(mdev, RX_BAD_PEER);
		return false;
	}
	if (rp->ce)
		metaroce_count(mdev, RX_ECN_CE);
	if (mask & MRC_OPM_ACK) {
		rx_ack(qp->soft, &rp->pkt);
		return true;
	}
	note_arrival(qp, rp->skb->len);
	rx_segment(qp->soft, rp);
	return true;
}

/* Handles one received datagram (skb->data at its UDP header); consumes it. */
void mrs_rx(struct metaroce_dev *mdev, struct sk_buff *skb)
{
	const u32 off = sizeof(struct udphdr);
	struct mrs_rx_pkt rp = { .skb = skb };
	enum mrc_wire_error err;
	struct metaroce_qp *qp;
	bool handled = false;

	metaroce_count(mdev, RX_PACKETS);
	metaroce_count_add(mdev, RX_BYTES, skb->len);
	if (skb->len < off || !soft_udp_checksum_present(skb) ||
	    !pskb_may_pull(skb, min_t(u32, skb->len, off + MRC_MAX_HDRS_LEN))) {
		metaroce_count(mdev, RX_MALFORMED);
		goto out;
	}
	/* The codec reads only the headers, which are in the linear part. */
	err = mrc_wire_parse(skb->data + off, skb->len - off, &rp.pkt);
	if (err) {
		if (err == MRC_WIRE_VERSION)
			metaroce_count(mdev, RX_BAD_VERSION);
		else
			metaroce_count(mdev, RX_MALFORMED);
		goto out;
	}
	rp.payload_offset = off + mrc_opcode[rp.pkt.hdr.opcode].length;
	qp = metaroce_qp_get(mdev, rp.pkt.hdr.conn);
	if (!qp) {
		metaroce_count(mdev, RX_UNKNOWN_QP);
		goto out;
	}
	handled = dispatch(mdev, qp, &rp);
	metaroce_qp_put(qp);
out:
	if (handled)
		consume_skb(skb);
	else
		kfree_skb(skb);
}
