// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Protocol v2 transmit: work requests taken from the ring and handed to
 * the requester; the stream's resends first, then responses to the peer's
 * requests, then new segments, each on the path the connection picks,
 * built with the core's codec. Decisions are made under the lock; packets
 * are built and sent outside it. Also the per-path ACK.
 */
#include <linux/skbuff.h>

#include "../metaroce_loc.h"
#include "mrs.h"

/* Payloads up to this size are copied into the packet, not attached. */
#define MRS_TX_COPYBREAK	256

/* One packet to send, decided under the lock. */
struct mrs_plan {
	struct soft_swqe *swqe;		/* a segment of a work request */
	struct mrc_pkt pkt;
	u32 path;
	u16 entropy;
	u8 route;
	bool retx;
	/* A response: READ data from the peer's MR (referenced), a value. */
	struct metaroce_mr *mr;
	u32 key;
	u64 addr;
	u64 value;
	bool fail_after;		/* an error NAK: fail the QP once sent */
};

static u8 wr_op(const struct soft_swqe *swqe)
{
	switch (swqe->wqe.opcode) {
	case IB_WR_SEND:
		return MRC_OP_SEND;
	case IB_WR_SEND_WITH_IMM:
		return MRC_OP_SEND_IMM;
	case IB_WR_SEND_WITH_INV:
		return MRC_OP_SEND_INV;
	case IB_WR_RDMA_WRITE:
		return MRC_OP_WRITE;
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return MRC_OP_WRITE_IMM;
	case IB_WR_RDMA_READ:
		return MRC_OP_READ_REQ;
	case IB_WR_ATOMIC_CMP_AND_SWP:
		return MRC_OP_CMP_SWP;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		return MRC_OP_FETCH_ADD;
	default:
		return 0;
	}
}

/*
 * Takes the next send WQE from the ring, when the requester has opened
 * everything before it: work requests leave in posting order anyway, and
 * a WQE taken late is one user space cannot have changed meanwhile.
 * None in SQD. A WQE that fails its checks fails the QP (the flush
 * reports its status).
 */
static bool fetch_wqe(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_qp *mq = sqp->v2;
	struct soft_swqe *swqe;
	u32 index = sqp->req.fetch_index, avail, wr;
	u8 op;

	if (READ_ONCE(qp->state) != IB_QPS_RTS)
		return false;
	avail = metaroce_queue_producer(&qp->sq) - index;
	if (!avail || avail > qp->sq.num_slots - (index - qp->sq.own_index))
		return false;
	if (soft_fetch_send_wqe(sqp, index)) {
		sqp->req.fetch_index++;
		soft_qp_fail(qp);
		return false;
	}
	swqe = &sqp->req.swqes[index & (qp->sq.num_slots - 1)];
	op = swqe->local ? 0 : wr_op(swqe);
	/* The first work request after none: the retry clock starts. */
	if (mq->req.head == mq->req.tail)
		mq->progress_us = mrs_now_us();
	if (!mrc_req_post(&mq->req, op, swqe->length,
			  swqe->wqe.flags & METAROCE_WQE_FENCE ?
			  MRC_WR_FENCE : 0, &wr))
		return false;
	sqp->req.fetch_index++;
	return true;
}

static void fill_extensions(struct mrc_pkt *pkt, const struct soft_swqe *swqe)
{
	const struct metaroce_send_wqe *wqe = &swqe->wqe;
	u16 mask = mrc_opcode[pkt->hdr.opcode].mask;

	if (mask & MRC_OPM_RETH) {
		pkt->reth.va = wqe->rdma.remote_addr;
		pkt->reth.rkey = wqe->rdma.rkey;
	}
	if (mask & MRC_OPM_ATOMIC) {
		pkt->atomic.va = wqe->rdma.remote_addr;
		pkt->atomic.rkey = wqe->rdma.rkey;
		if (pkt->hdr.opcode == MRC_OP_CMP_SWP) {
			pkt->atomic.swap_add = wqe->atomic.swap;
			pkt->atomic.compare = wqe->atomic.compare_add;
		} else {
			pkt->atomic.swap_add = wqe->atomic.compare_add;
		}
	}
	if (mask & MRC_OPM_IMM)
		pkt->imm = pkt->hdr.opcode == MRC_OP_SEND_INV ?
			   wqe->invalidate_rkey : be32_to_cpu(wqe->imm_data);
}

/* Records the transmission of segment @out on @path; its header. */
static void plan_common(struct metaroce_soft_qp *sqp,
			const struct mrc_seg_out *out, u32 path, bool retx,
			u64 now, struct mrs_plan *plan)
{
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_qp *mq = sqp->v2;
	struct mrc_path_tx *tx = &mq->ptx[path];
	struct mrc_hdr *h = &plan->pkt.hdr;
	u32 seq;

	seq = mrc_path_tx_sent(tx, mrs_cookie(out->ssn, path), now);
	mrc_stream_tx_sent(&mq->stx, out->ssn);
	/* The first segment out after none: the retry clock starts. */
	if (out->ssn == mq->stx.una && !retx)
		mq->progress_us = now;
	memset(plan, 0, sizeof(*plan));
	plan->path = path;
	plan->entropy = tx->entropy;
	plan->route = tx->route;
	plan->retx = retx;
	h->opcode = out->op;
	h->path = path;
	h->conn = qp->attr.dest_qp_num;
	h->seq = seq;
	h->floor_delta = seq - tx->floor_sent;
	h->ssn = out->ssn;
	h->msn = out->msn;
	h->offset = out->offset;
	h->msg_len = out->msg_len;
	if (retx)
		h->flags |= MRC_F_RETX;
	if (mq->early)
		h->flags |= MRC_F_EARLY;
	if (mrc_conn_tx_ack_wanted(&mq->conn, path, now))
		h->flags |= MRC_F_ACK_REQ;
	plan->pkt.payload_len = out->payload_len;
}

/*
 * Whether the send queue has nothing more to send once this segment is
 * out: every work request taken is opened and none is posted behind it.
 * Its last segment then asks for an ACK at once (protocol-v2.md section
 * 4): the work request completes on that ACK, and a receiver's delayed
 * ACK would add up to MRC_DELAYED_ACK_US to every round of a ping-pong
 * (measured: ib_write_lat 581 us on v2 against 378 on v1 and 368 on rxe).
 */
static bool sq_idle_after(struct metaroce_soft_qp *sqp)
{
	return sqp->v2->req.send == sqp->v2->req.tail &&
	       metaroce_queue_producer(&sqp->qp->sq) ==
	       READ_ONCE(sqp->req.fetch_index);
}

static void plan_segment(struct metaroce_soft_qp *sqp,
			 const struct mrc_seg_out *out, u32 path, bool retx,
			 u64 now, struct mrs_plan *plan)
{
	struct metaroce_qp *qp = sqp->qp;

	bool last = out->offset + out->payload_len == out->msg_len;

	plan_common(sqp, out, path, retx, now, plan);
	plan->swqe = &sqp->req.swqes[out->wr & (qp->sq.num_slots - 1)];
	if ((plan->swqe->wqe.flags & METAROCE_WQE_SOLICITED) && last)
		plan->pkt.hdr.flags |= MRC_F_SOLICITED;
	if (last && sq_idle_after(sqp))
		plan->pkt.hdr.flags |= MRC_F_ACK_REQ;
	fill_extensions(&plan->pkt, plan->swqe);
}

/* A segment of our answer to the peer: what it is made of. */
static void plan_response(struct metaroce_soft_qp *sqp,
			  const struct mrc_seg_out *out, u32 path, bool retx,
			  u64 now, struct mrs_plan *plan)
{
	struct mrs_response *r = mrs_response_at(sqp->v2, out->wr);

	plan_common(sqp, out, path, retx, now, plan);
	switch (r->op) {
	case MRC_OP_READ_RESP:
		if (!r->mr)
			break;
		/* Held for the copy: the response may be delivered meanwhile. */
		refcount_inc(&r->mr->ref);
		plan->mr = r->mr;
		plan->key = r->rkey;
		plan->addr = r->va + out->offset;
		break;
	case MRC_OP_ATOMIC_RESP:
		plan->value = r->value;
		break;
	case MRC_OP_NAK:
		plan->pkt.nak = r->nak;
		plan->fail_after = r->fail_after;
		break;
	}
}

/* A segment of the requester's was opened at @ssn: it is not a response. */
static void note_request_segment(struct mrs_qp *mq, u32 ssn)
{
	u32 b = ssn % MRC_STREAM_MAP_BITS;

	mq->is_resp[b / 64] &= ~BIT_ULL(b % 64);
}

/*
 * Decides the next packet: a resend first, on the path that lost it if it
 * has room; else a local operation or a new segment. Under the lock.
 */
static enum soft_tx_result plan_next(struct metaroce_soft_qp *sqp,
				     struct mrs_plan *plan)
{
	struct mrs_qp *mq = sqp->v2;
	struct mrc_seg_out out;
	u64 now = mrs_now_us();
	int lost_path, path;
	u32 ssn;

	/* RTR and RTS are published before the sending half is reset. */
	if (!mq->tx_ready)
		return TX_IDLE;
	/* After an RNR NAK the peer refuses the stream until the timer. */
	if (mq->rnr_until_us) {
		if (now < mq->rnr_until_us)
			return TX_BLOCKED;
		mq->rnr_until_us = 0;
		mq->progress_us = now;
	}
	for (;;) {
		if (mrc_stream_tx_next_resend(&mq->stx, &ssn, &lost_path)) {
			path = mrc_conn_tx_pick(&mq->conn, lost_path, now);
			if (path == MRC_NO_PATH)
				goto blocked;
			if (mrs_resend_response(mq, ssn, &out)) {
				plan_response(sqp, &out, path, true, now, plan);
			} else if (mrc_req_resend(&mq->req, ssn, &out)) {
				plan_segment(sqp, &out, path, true, now, plan);
			} else {
				/* Delivered after all: nothing to send. */
				mrc_stream_tx_sent(&mq->stx, ssn);
				continue;
			}
			break;
		}
		if (mrs_response_waiting(mq)) {
			path = mrc_conn_tx_pick(&mq->conn, MRC_NO_PATH, now);
			if (path == MRC_NO_PATH)
				goto blocked;
			if (!mrs_next_response(mq, &out))
				return TX_BLOCKED;	/* the stream window */
			plan_response(sqp, &out, path, false, now, plan);
			break;
		}
		if (mq->req.send == mq->req.tail && !fetch_wqe(sqp))
			return TX_IDLE;
		if (!mq->wrs[mq->req.send % mq->req.num_wrs].op) {
			struct soft_swqe *swqe;

			if (!mrc_req_next(&mq->req, &mq->stx, &out))
				return TX_BLOCKED;
			swqe = &sqp->req.swqes[out.wr &
					       (sqp->qp->sq.num_slots - 1)];
			soft_local_op(sqp, swqe);
			mrs_complete(sqp);
			continue;
		}
		path = mrc_conn_tx_pick(&mq->conn, MRC_NO_PATH, now);
		if (path == MRC_NO_PATH)
			goto blocked;
		/* The fence, max_rd_atomic, the stream window: responses resume. */
		if (!mrc_req_next(&mq->req, &mq->stx, &out))
			return TX_BLOCKED;
		note_request_segment(mq, out.ssn);
		plan_segment(sqp, &out, path, false, now, plan);
		break;
	}
	mq->blocked = false;
	return TX_MORE;

blocked:
	mq->blocked = true;
	return TX_BLOCKED;
}

/*
 * Whether a packet should carry the registered pages rather than a copy:
 * not a small payload, where the copy costs less than the page references,
 * and not when the netdev takes no fragments (the stack would copy them).
 */
static bool attach_pays(const struct metaroce_qp *qp, u32 len)
{
	return len > MRS_TX_COPYBREAK &&
	       (qp->mdev->ndev->features & NETIF_F_SG);
}

/* A response's packet: READ data copied from the MR, an atomic's value. */
static struct sk_buff *build_response(struct metaroce_qp *qp,
				      const struct mrs_plan *plan)
{
	u32 hdr = mrc_opcode[plan->pkt.hdr.opcode].length;
	u32 len = plan->pkt.payload_len;
	struct sk_buff *skb = soft_alloc_skb(qp, hdr, len);

	if (!skb)
		return NULL;
	if (plan->pkt.hdr.opcode == MRC_OP_ATOMIC_RESP) {
		/* The word as the target's memory held it. */
		memcpy(skb_put(skb, len), &plan->value, len);
	} else if (len && (!plan->mr ||
			   metaroce_mr_copy_to_buf(plan->mr, plan->key,
						   plan->addr,
						   skb_put(skb, len), len))) {
		kfree_skb(skb);
		return NULL;
	}
	mrc_wire_build(&plan->pkt, skb->data, hdr);
	return skb;
}

static struct sk_buff *build_segment(struct metaroce_qp *qp,
				     const struct mrs_plan *plan)
{
	u32 hdr = mrc_opcode[plan->pkt.hdr.opcode].length;
	u32 offset = plan->pkt.hdr.offset, len = plan->pkt.payload_len;
	struct soft_swqe *swqe = plan->swqe;
	struct sk_buff *skb = NULL;

	if (len && !(swqe->wqe.flags & METAROCE_WQE_INLINE) &&
	    attach_pays(qp, len)) {
		/* Zero copy: the registered pages become the payload. */
		skb = soft_alloc_skb(qp, hdr, 0);
		if (skb && soft_attach_sges(swqe, offset, len, skb)) {
			kfree_skb(skb);
			skb = NULL;
		}
	}
	if (!skb) {
		skb = soft_alloc_skb(qp, hdr, len);
		if (skb && len &&
		    soft_copy_from_sges(swqe, offset, skb_put(skb, len), len)) {
			kfree_skb(skb);
			return NULL;
		}
	}
	if (skb)
		mrc_wire_build(&plan->pkt, skb->data, hdr);
	return skb;
}

/*
 * No packet could be built. Without memory it is lost as on the wire (the
 * path's rules resend it). If a source MR was deregistered, nothing may
 * read it again: the work request fails with a local protection error,
 * and the QP with it. A READ response whose MR was deregistered under it
 * refuses its READ (mrs_refuse_revoked_read()).
 */
static void build_failed(struct metaroce_soft_qp *sqp,
			 const struct mrs_plan *plan)
{
	bool revoked = plan->swqe ? soft_swqe_revoked(plan->swqe) :
		       plan->mr && metaroce_mr_revoked(plan->mr);

	if (!revoked) {
		metaroce_count(sqp->qp->mdev, TX_DROPPED);
		return;
	}
	spin_lock_bh(&sqp->resp.lock);
	if (!plan->swqe)
		mrs_refuse_revoked_read(sqp->v2, plan->pkt.hdr.ssn);
	else if (plan->swqe->status == IB_WC_SUCCESS)
		plan->swqe->status = IB_WC_LOC_PROT_ERR;
	spin_unlock_bh(&sqp->resp.lock);
	if (plan->swqe)
		soft_qp_fail(sqp->qp);
	else
		soft_schedule_tx(sqp);
}

/*
 * An error NAK is about to go: the QP fails once it is out, and its
 * delayed ACKs with it, so every path with arrivals not yet acknowledged
 * is acknowledged first. The stream has everything before the refused
 * segment, and the peer completes it (protocol-v2.md section 9.2). Nothing
 * arrives meanwhile: a failing stream takes nothing more.
 */
static void ack_before_failing(struct metaroce_soft_qp *sqp)
{
	unsigned long paths = 0;
	u32 i;

	spin_lock_bh(&sqp->resp.lock);
	for (i = 0; i < MRC_MAX_PATHS; i++)
		if (sqp->v2->prx[i].unacked)
			paths |= BIT(i);
	spin_unlock_bh(&sqp->resp.lock);
	for_each_set_bit(i, &paths, MRC_MAX_PATHS)
		mrs_send_ack(sqp, i);
}

/* An error NAK went out: the responder's QP fails, as in IB. */
static void refused_and_failed(struct metaroce_qp *qp, u8 syndrome)
{
	metaroce_qp_event(qp, syndrome == MRC_NAK_REMOTE_ACCESS ?
			  IB_EVENT_QP_ACCESS_ERR : IB_EVENT_QP_REQ_ERR);
	soft_qp_fail(qp);
}

static void send_plan(struct metaroce_soft_qp *sqp, const struct mrs_plan *plan)
{
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_dst *dst = &sqp->v2->dst[plan->path];
	struct sk_buff *skb = plan->swqe ? build_segment(qp, plan) :
			      build_response(qp, plan);

	if (plan->mr)
		metaroce_mr_put(plan->mr);
	if (!skb) {
		build_failed(sqp, plan);
		return;
	}
	if (plan->fail_after)
		ack_before_failing(sqp);
	/* Routes are cached per path; a new route may hash elsewhere. */
	if (dst->route != plan->route) {
		dst_cache_reset(&dst->cache);
		dst->route = plan->route;
	}
	soft_xmit(qp, &qp->av, skb, plan->entropy, &dst->cache, true, 0);
	if (plan->retx)
		metaroce_count(qp->mdev, RETRANSMITS);
	if (plan->pkt.hdr.opcode == MRC_OP_NAK) {
		metaroce_count(qp->mdev, TX_NAKS);
		if (plan->pkt.nak.syndrome == MRC_NAK_RNR)
			metaroce_count(qp->mdev, RNR_NAKS_SENT);
	}
	if (plan->fail_after)
		refused_and_failed(qp, plan->pkt.nak.syndrome);
}

/*
 * Sends packets while *@budget lasts, counting them off it; says why it
 * stopped. Worker context, one run at a time (the soft QP's tx_mutex).
 */
enum soft_tx_result mrs_transmit(struct metaroce_soft_qp *sqp, int *budget)
{
	struct mrs_qp *mq = sqp->v2;
	enum soft_tx_result result;
	struct mrs_plan plan;

	while (*budget > 0) {
		spin_lock_bh(&sqp->resp.lock);
		result = plan_next(sqp, &plan);
		/* An ACK, a response or the timer runs it again. */
		mq->stalled = result == TX_BLOCKED;
		mrs_arm_timer(mq);
		spin_unlock_bh(&sqp->resp.lock);
		if (result != TX_MORE)
			return result;
		send_plan(sqp, &plan);
		(*budget)--;
	}
	return TX_MORE;
}

/*
 * The receiver's share for the QP's peer, from the device's record of
 * who sends to it (protocol-v2.md section 10); a link of unknown speed
 * grants nothing.
 */
static void fair_share(struct metaroce_qp *qp, u64 now, struct mrc_ack_info *a)
{
	struct metaroce_dev *mdev = qp->mdev;

	if (!mdev->fair)
		return;
	spin_lock_bh(&mdev->fair_lock);
	a->capacity_mbps = mdev->fair->capacity_mbps;
	if (a->capacity_mbps)
		a->share = mrc_fair_rx_share(mdev->fair, qp->ibqp.qp_num, now);
	spin_unlock_bh(&mdev->fair_lock);
}

/* Acknowledges path @path of the peer's: its map, now. Any context. */
void mrs_send_ack(struct metaroce_soft_qp *sqp, u32 path)
{
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_qp *mq = sqp->v2;
	struct mrc_pkt pkt = {};
	u64 now = mrs_now_us();
	struct sk_buff *skb;
	u16 entropy;

	pkt.hdr.opcode = MRC_OP_ACK;
	pkt.hdr.path = path;
	pkt.hdr.conn = qp->attr.dest_qp_num;
	spin_lock_bh(&sqp->resp.lock);
	mrc_path_rx_ack(&mq->prx[path], &pkt.ack.path, now);
	mq->ack_due &= ~BIT(path);
	entropy = mq->ptx[path % mq->num_paths].entropy;
	spin_unlock_bh(&sqp->resp.lock);
	fair_share(qp, now, &pkt.ack);

	skb = soft_alloc_skb(qp, MRC_HDR_LEN + MRC_ACK_LEN, 0);
	if (!skb) {
		metaroce_count(qp->mdev, TX_DROPPED);
		return;
	}
	mrc_wire_build(&pkt, skb->data, MRC_HDR_LEN + MRC_ACK_LEN);
	/* ACKs are Not-ECT: a mark on them would trim no window. */
	if (!soft_xmit(qp, &qp->av, skb, entropy, NULL, false, 0))
		metaroce_count(qp->mdev, TX_ACKS);
}
