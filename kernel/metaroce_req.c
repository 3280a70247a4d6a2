// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Requester, transmit side (protocol.md sections 3, 5 and 8): turns send
 * WQEs into packets, one PSN each (a READ: one per response packet, asked
 * for in parts), within the SACK window and the congestion window, and
 * resends what the completer declared lost. Runs in the QP's worker.
 *
 * Each step is planned under the requester lock (which PSN, which path,
 * the scoreboard updated) and then built and sent without it.
 */
#include <linux/random.h>

#include "metaroce_loc.h"
#include "metaroce_soft.h"

/* What to send next, decided under the lock. */
struct tx_plan {
	struct soft_swqe *swqe;
	u32 psn;			/* of the first packet */
	u32 offset;			/* in the message */
	u32 len;			/* payload in all, or READ part bytes */
	u32 npkts;			/* data packets, consecutive PSNs */
	u8 flags;			/* of a single packet */
	u8 path;
	bool retx;
};

/*
 * The requester's timestamp: its clock in microseconds plus the
 * connection's secret offset, so that an ACK can echo a timestamp only if
 * its sender saw one of our packets (protocol.md section 12.1). The
 * responder's packets carry the plain clock: nothing checks their echo.
 */
static void stamp_ts(const struct metaroce_qp *qp, struct metaroce_bth *bth)
{
	bth->ts = cpu_to_be32(soft_now_us() + READ_ONCE(qp->soft->req.ts_offset));
}

static u32 sq_slot(const struct metaroce_qp *qp, u32 index)
{
	return index & (qp->sq.num_slots - 1);
}

void soft_req_init(struct metaroce_soft_qp *sqp)
{
	struct soft_req *req = &sqp->req;

	spin_lock_init(&req->lock);
	hrtimer_init(&req->timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_SOFT);
	req->timer.function = soft_req_timer_fn;
	soft_cc_init(&req->cc, 0);
	req->rto_us = METAROCE_INITIAL_RTO_US;
}

/* Starts sending from the QP's sq_psn: the RTR to RTS transition. */
static void req_start(struct soft_req *req, u32 sq_psn)
{
	unsigned int i;

	memset(req->pkts, 0, sizeof(req->pkts));
	req->psn_next = sq_psn;
	req->psn_una = sq_psn;
	req->msn_next = 0;
	req->tx_seq = 0;
	req->resp_seq = 0;
	req->acked_tx_seq = 0;
	req->response_seq = 0;
	req->reorder = METAROCE_REORDER_ALLOWANCE;
	req->reorder_decay_psn = sq_psn;
	req->nr_lost = 0;
	req->inflight = 0;
	req->reads = 0;
	req->nr_rereads = 0;
	req->srtt_us = 0;
	req->rttvar_us = 0;
	req->rto_us = METAROCE_INITIAL_RTO_US;
	req->probes = 0;
	req->retries = 0;
	req->resent_in_period = false;
	req->rnr_retries = 0;
	req->rnr_wait = false;
	req->progress_ns = ktime_get_ns();
	/* A new connection, a new secret clock offset (protocol.md 12.1). */
	req->ts_offset = get_random_u32();
	soft_cc_init(&req->cc, sq_psn);
	for (i = 0; i < req->num_paths; i++) {
		req->paths[i].state = PATH_ACTIVE;
		req->paths[i].inflight = 0;
		req->paths[i].consecutive_losses = 0;
	}
}

/*
 * The QP's requester starts over: on RESET everything posted is dropped,
 * on RTS the PSNs start at sq_psn. Callers have stopped the worker and the
 * timer, or hold off the RTS transition until they can.
 */
void soft_req_reset(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;
	u32 i;

	spin_lock_bh(&req->lock);
	if (READ_ONCE(qp->state) == IB_QPS_RESET || READ_ONCE(sqp->dying)) {
		for (i = 0; i < qp->sq.num_slots; i++)
			soft_release_swqe(&req->swqes[i]);
		/* Drop whatever was posted. */
		metaroce_queue_discard(&qp->sq);
		req->fetch_index = qp->sq.own_index;
		req->send_index = qp->sq.own_index;
	}
	req_start(req, qp->attr.sq_psn);
	spin_unlock_bh(&req->lock);
}

/* SQD: every WQE taken has completed (none is taken in SQD). */
static bool drained(struct metaroce_soft_qp *sqp)
{
	return sqp->qp->sq.own_index == sqp->req.fetch_index;
}

bool soft_req_drained(struct metaroce_soft_qp *sqp)
{
	struct soft_req *req = &sqp->req;
	bool ret;

	spin_lock_bh(&req->lock);
	ret = drained(sqp);
	spin_unlock_bh(&req->lock);
	return ret;
}

/*
 * In SQD, once drained: the affiliated event, once per entry to SQD, if
 * the QP asked for it. Called under the lock of the sending half: v1's
 * requester lock, v2's QP lock (mrs_enter_sqd()).
 */
void soft_req_notify_drained(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;

	if (READ_ONCE(qp->state) != IB_QPS_SQD || req->sq_drained_sent ||
	    !drained(sqp))
		return;
	req->sq_drained_sent = true;
	if (qp->attr.en_sqd_async_notify)
		metaroce_qp_event(qp, IB_EVENT_SQ_DRAINED);
}

/*
 * Whether an earlier WQE still in flight is a READ or an atomic (for
 * IBV_SEND_FENCE).
 */
static bool read_in_flight(struct metaroce_qp *qp, struct soft_req *req)
{
	u32 i;

	for (i = qp->sq.own_index; i != req->send_index; i++) {
		struct soft_swqe *s = &req->swqes[sq_slot(qp, i)];

		if (soft_op_asks_responses(s->wire_op) && s->delivered < s->npkts)
			return true;
	}
	return false;
}

/* Makes send_index name a WQE taken from the ring, if there is one. */
static struct soft_swqe *current_swqe(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;
	struct soft_swqe *swqe;
	u32 avail;

	if (req->send_index == req->fetch_index) {
		/* No new work is started in SQD. */
		if (READ_ONCE(qp->state) != IB_QPS_RTS)
			return NULL;
		avail = metaroce_queue_producer(&qp->sq) -
			req->fetch_index;
		if (!avail || avail > qp->sq.num_slots -
				      (req->fetch_index - qp->sq.own_index))
			return NULL;
		if (soft_fetch_send_wqe(sqp, req->fetch_index)) {
			/* A local error fails the QP; the flush reports it. */
			req->fetch_index++;
			req->send_index = req->fetch_index;
			soft_qp_fail(qp);
			return NULL;
		}
		req->fetch_index++;
	}
	swqe = &req->swqes[sq_slot(qp, req->send_index)];
	if (!swqe->local && !swqe->next_pkt && !swqe->npkts) {
		/* First packet: give the message its PSNs. */
		swqe->first_psn = req->psn_next;
		swqe->npkts = soft_npkts(swqe->length, qp->mtu);
		swqe->msn = req->msn_next;
		if (swqe->wire_op == METAROCE_OP_SEND ||
		    swqe->wqe.opcode == IB_WR_RDMA_WRITE_WITH_IMM)
			req->msn_next++;
	}
	return swqe;
}

/* Records PSN @psn as sent in transmission req->tx_seq. */
static struct soft_pkt *mark_sent(struct soft_req *req, u32 psn, u32 slot,
				  u8 path, bool retx, bool part_end)
{
	struct soft_pkt *e = &req->pkts[psn % SOFT_WINDOW];

	if (e->state == PKT_LOST)
		req->nr_lost--;
	e->tx_seq = req->tx_seq;
	e->sent_us = soft_now_us();
	/* The oldest send an ACK may echo while this PSN is outstanding. */
	if (!retx)
		e->first_us = e->sent_us;
	/* The quiet clock of tail-loss probes starts with the first send. */
	if (!req->inflight)
		req->delivered_us = e->sent_us;
	e->swqe = slot;
	e->path = path;
	e->state = PKT_INFLIGHT;
	e->retx = retx ? e->retx + 1 : 0;
	if (retx)
		req->resent_in_period = true;
	/*
	 * The first packet after a quiet time starts a retry period; a resend
	 * of the only one outstanding does not.
	 */
	if (!retx && !req->inflight && !req->nr_lost)
		req->progress_ns = ktime_get_ns();
	e->part_end = part_end;
	e->request_acked = false;
	if (!retx)
		e->request_acked_once = false;
	req->inflight++;
	req->paths[path].inflight++;
	req->paths[path].sent++;
	return e;
}

/* A data packet: a transmission of its own. */
static void mark_data_sent(struct soft_req *req, u32 psn, u32 slot, u8 path,
			   bool retx)
{
	req->tx_seq++;
	mark_sent(req, psn, slot, path, retx, false);
}

/*
 * A READ_REQ part asking for the @n responses from @psn: one transmission,
 * so that a packet sent before it is not taken for @n transmissions behind
 * once the request is acknowledged; its responses numbered in the order the
 * responder sends them, for their own count rule.
 */
static void mark_read_sent(struct soft_req *req, u32 psn, u32 n, u32 slot,
			   u8 path, bool retx)
{
	struct soft_pkt *e;
	u32 i;

	req->tx_seq++;
	for (i = 0; i < n; i++) {
		e = mark_sent(req, soft_psn_add(psn, i), slot, path, retx,
			      i == n - 1);
		e->resp_seq = ++req->resp_seq;
	}
}

static u8 data_flags(const struct soft_swqe *swqe, u32 k)
{
	u8 flags = 0;

	if (k == 0)
		flags |= METAROCE_F_FIRST;
	if (k == swqe->npkts - 1) {
		flags |= METAROCE_F_LAST | METAROCE_F_ACK_REQ;
		if (swqe->wqe.opcode == IB_WR_SEND_WITH_IMM ||
		    swqe->wqe.opcode == IB_WR_RDMA_WRITE_WITH_IMM)
			flags |= METAROCE_F_IMM;
		if (swqe->wqe.opcode == IB_WR_SEND_WITH_INV)
			flags |= METAROCE_F_INV;
		/* Only a message that consumes a receive can be solicited. */
		if ((swqe->wqe.flags & METAROCE_WQE_SOLICITED) &&
		    (swqe->wire_op == METAROCE_OP_SEND ||
		     swqe->wqe.opcode == IB_WR_RDMA_WRITE_WITH_IMM))
			flags |= METAROCE_F_SOLICITED;
	}
	return flags;
}

/* Plans the resend of the oldest lost PSN (a READ: a re-read part). */
static bool plan_retx(struct metaroce_soft_qp *sqp, struct tx_plan *plan,
		      u32 room)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;
	u32 span = soft_psn_diff(req->psn_next, req->psn_una);
	u32 i, n, psn, k;
	struct soft_pkt *e;
	struct soft_swqe *swqe;
	int path;

	for (i = 0; i < span; i++) {
		psn = soft_psn_add(req->psn_una, i);
		e = &req->pkts[psn % SOFT_WINDOW];
		if (e->state == PKT_LOST)
			break;
	}
	if (i == span)
		return false;

	swqe = &req->swqes[e->swqe];
	/*
	 * A re-read takes a read credit like any part: the responder drops
	 * what it cannot hold, and that would be a loss of our own making.
	 */
	if (soft_op_asks_responses(swqe->wire_op) &&
	    req->reads >= max_t(u32, qp->attr.max_rd_atomic, 1))
		return false;
	k = soft_psn_diff(psn, swqe->first_psn);
	path = soft_path_pick(req, e->path);
	plan->swqe = swqe;
	plan->psn = psn;
	plan->offset = k * qp->mtu;
	plan->npkts = 1;
	plan->path = path;
	plan->retx = true;

	if (!soft_op_asks_responses(swqe->wire_op)) {
		plan->len = min(qp->mtu, swqe->length - plan->offset);
		/* A resent packet is acknowledged at once: it filled a gap. */
		plan->flags = data_flags(swqe, k) | METAROCE_F_RETX |
			      METAROCE_F_ACK_REQ;
		mark_data_sent(req, psn, e->swqe, path, true);
		return true;
	}

	/*
	 * Re-read the run of lost response packets starting here, as much of
	 * it as the window has room for (its responses count in flight). An
	 * atomic has one: the same request goes again, answered from the
	 * responder's record if it already ran.
	 */
	for (n = 0; k + n < swqe->npkts && n < min_t(u32, SOFT_READ_PART, room);
	     n++) {
		struct soft_pkt *r = &req->pkts[soft_psn_add(psn, n) %
						 SOFT_WINDOW];

		if (r->state != PKT_LOST)
			break;
	}
	mark_read_sent(req, psn, n, e->swqe, path, true);
	req->rereads[req->nr_rereads++ % METAROCE_REREAD_HISTORY] =
		(struct soft_reread){ .psn = psn, .npkts = n };
	plan->len = min(n * qp->mtu, swqe->length - plan->offset);
	plan->flags = METAROCE_F_RETX | METAROCE_F_ACK_REQ;
	req->reads++;
	return true;
}

/* Plans the next new packet (or READ part) of the current WQE. */
static bool plan_new(struct metaroce_soft_qp *sqp, struct tx_plan *plan,
		     u32 room)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;
	struct soft_swqe *swqe = current_swqe(sqp);
	u32 slot = sq_slot(qp, req->send_index);
	u32 k, n, i;
	int path;

	/*
	 * Local operations take effect in SQ order: when every WQE before
	 * them is out (and, fenced, every READ before them is in), before any
	 * WQE after them is taken from the ring.
	 */
	while (swqe && swqe->local) {
		/* One that failed stops the SQ; completing it fails the QP. */
		if (swqe->done)
			return false;
		if ((swqe->wqe.flags & METAROCE_WQE_FENCE) &&
		    read_in_flight(qp, req))
			return false;
		soft_local_op(sqp, swqe);
		if (swqe->status == IB_WC_SUCCESS)
			req->send_index++;
		soft_comp_complete(sqp);
		if (swqe->status != IB_WC_SUCCESS)
			return false;
		swqe = current_swqe(sqp);
		slot = sq_slot(qp, req->send_index);
	}
	if (!swqe)
		return false;
	if (!swqe->next_pkt && (swqe->wqe.flags & METAROCE_WQE_FENCE) &&
	    read_in_flight(qp, req))
		return false;

	k = swqe->next_pkt;
	if (soft_op_asks_responses(swqe->wire_op)) {
		if (req->reads >= max_t(u32, qp->attr.max_rd_atomic, 1))
			return false;
		n = min3(swqe->npkts - k, (u32)SOFT_READ_PART, room);
	} else {
		/* Consecutive packets of a message go out as one batch. */
		n = min3(swqe->npkts - k, (u32)SOFT_TX_BATCH, room);
	}
	path = soft_path_pick(req, -1);
	plan->swqe = swqe;
	plan->psn = req->psn_next;
	plan->offset = k * qp->mtu;
	plan->path = path;
	plan->retx = false;
	plan->len = min(n * qp->mtu, swqe->length - plan->offset);
	if (soft_op_asks_responses(swqe->wire_op)) {
		plan->npkts = 1;
		plan->flags = METAROCE_F_ACK_REQ;
		req->reads++;
		mark_read_sent(req, req->psn_next, n, slot, path, false);
	} else {
		plan->npkts = n;
		plan->flags = data_flags(swqe, k);
		for (i = 0; i < n; i++)
			mark_data_sent(req, soft_psn_add(req->psn_next, i),
				       slot, path, false);
	}
	req->psn_next = soft_psn_add(req->psn_next, n);
	swqe->next_pkt += n;
	if (swqe->next_pkt == swqe->npkts)
		req->send_index++;
	return true;
}

/*
 * Decides the next transmission. TX_MORE with @plan filled, or why nothing
 * may go now.
 */
static enum soft_tx_result plan_next(struct metaroce_soft_qp *sqp,
				     struct tx_plan *plan)
{
	struct soft_req *req = &sqp->req;
	u32 window = soft_cc_window(&req->cc);
	u32 outstanding = soft_psn_diff(req->psn_next, req->psn_una);

	if (req->rnr_wait || req->inflight >= window)
		return TX_BLOCKED;
	if (req->nr_lost)
		return plan_retx(sqp, plan, window - req->inflight) ?
		       TX_MORE : TX_BLOCKED;
	if (outstanding >= SOFT_WINDOW)
		return TX_BLOCKED;
	if (plan_new(sqp, plan, min(window - req->inflight,
				    SOFT_WINDOW - outstanding)))
		return TX_MORE;
	/*
	 * Taken WQEs with packets left wait for a fence or a read slot.
	 * Otherwise all that was posted is out, whether or not acknowledged.
	 */
	return req->send_index != req->fetch_index ? TX_BLOCKED : TX_IDLE;
}

static void fill_deth(struct metaroce_deth *deth,
		      const struct soft_swqe *swqe, u32 offset, u8 flags)
{
	if (swqe->wire_op == METAROCE_OP_WRITE) {
		deth->addr = cpu_to_be64(swqe->wqe.rdma.remote_addr + offset);
		deth->key = cpu_to_be32(swqe->wqe.rdma.rkey);
	} else {
		deth->addr = cpu_to_be64(offset);
		deth->key = 0;
	}
	deth->msn = cpu_to_be32(swqe->msn);
	deth->msg_len = cpu_to_be32(swqe->length);
	if (flags & METAROCE_F_IMM)
		deth->imm = swqe->wqe.imm_data;
	else if (flags & METAROCE_F_INV)
		deth->imm = cpu_to_be32(swqe->wqe.invalidate_rkey);
	else
		deth->imm = 0;
}

/* An atomic's request, the same in every transmission (protocol.md 3.4). */
static void fill_areq(struct metaroce_areq *areq, const struct soft_swqe *swqe)
{
	const struct metaroce_send_wqe *wqe = &swqe->wqe;
	bool cas = swqe->wire_op == METAROCE_OP_ATOMIC_CMP_SWP;

	areq->va = cpu_to_be64(wqe->rdma.remote_addr);
	areq->rkey = cpu_to_be32(wqe->rdma.rkey);
	areq->msn = cpu_to_be32(swqe->msn);
	areq->swap_add = cpu_to_be64(cas ? wqe->atomic.swap :
				     wqe->atomic.compare_add);
	areq->compare = cpu_to_be64(cas ? wqe->atomic.compare_add : 0);
}

static void fill_rreq(struct metaroce_rreq *rreq, const struct tx_plan *plan)
{
	const struct soft_swqe *swqe = plan->swqe;

	rreq->va = cpu_to_be64(swqe->wqe.rdma.remote_addr + plan->offset);
	rreq->rkey = cpu_to_be32(swqe->wqe.rdma.rkey);
	rreq->len = cpu_to_be32(plan->len);
	rreq->offset = cpu_to_be32(plan->offset);
	rreq->msn = cpu_to_be32(swqe->msn);
}

/*
 * A data packet whose payload is copied rather than attached. NULL without
 * memory or when a source MR was deregistered (see build_failed()).
 */
static struct sk_buff *build_copied(struct metaroce_qp *qp,
				    const struct tx_plan *plan)
{
	const u32 hdr = METAROCE_BTH_LEN + METAROCE_DETH_LEN;
	struct sk_buff *skb = soft_alloc_skb(qp, hdr, plan->len);

	if (skb && soft_copy_from_sges(plan->swqe, plan->offset,
				       skb_put(skb, plan->len), plan->len)) {
		kfree_skb(skb);
		return NULL;
	}
	return skb;
}

/*
 * No packet could be built for @plan. Without memory it is lost as on the
 * wire (the timers resend it). If a source MR was deregistered, nothing may
 * read it again: the WQE fails with a local protection error, reported
 * when its turn to complete comes.
 */
static void build_failed(struct metaroce_soft_qp *sqp,
			 const struct tx_plan *plan)
{
	struct soft_req *req = &sqp->req;

	if (!soft_swqe_revoked(plan->swqe)) {
		metaroce_count(sqp->qp->mdev, TX_DROPPED);
		return;
	}
	spin_lock_bh(&req->lock);
	if (plan->swqe->status == IB_WC_SUCCESS)
		plan->swqe->status = IB_WC_LOC_PROT_ERR;
	soft_comp_complete(sqp);
	spin_unlock_bh(&req->lock);
}

/*
 * Whether a single packet should carry the registered pages rather than a
 * copy: not for a small payload, where the copy costs less than the page
 * references, and not when the netdev takes no fragments, because the
 * stack would then copy them into a freshly allocated linear buffer.
 */
static bool attach_pays(const struct metaroce_qp *qp, u32 len)
{
	return len > SOFT_TX_COPYBREAK &&
	       (qp->mdev->ndev->features & NETIF_F_SG);
}

static struct sk_buff *build_packet(struct metaroce_qp *qp,
				    const struct tx_plan *plan)
{
	const struct soft_swqe *swqe = plan->swqe;
	struct sk_buff *skb;

	if (swqe->wire_op == METAROCE_OP_READ_REQ) {
		skb = soft_alloc_skb(qp, METAROCE_BTH_LEN + METAROCE_RREQ_LEN,
				     0);
		if (skb)
			fill_rreq((void *)skb->data + METAROCE_BTH_LEN, plan);
	} else if (soft_op_is_atomic(swqe->wire_op)) {
		skb = soft_alloc_skb(qp, METAROCE_BTH_LEN + METAROCE_AREQ_LEN,
				     0);
		if (skb)
			fill_areq((void *)skb->data + METAROCE_BTH_LEN, swqe);
	} else if (swqe->wqe.flags & METAROCE_WQE_INLINE ||
		   !attach_pays(qp, plan->len)) {
		skb = build_copied(qp, plan);
	} else {
		/* Zero copy: the registered pages become the payload. */
		skb = soft_alloc_skb(qp, METAROCE_BTH_LEN + METAROCE_DETH_LEN,
				     0);
		if (skb && soft_attach_sges(plan->swqe, plan->offset,
					    plan->len, skb)) {
			kfree_skb(skb);
			skb = build_copied(qp, plan);
		}
	}
	if (!skb)
		return NULL;
	if (!soft_op_asks_responses(swqe->wire_op))
		fill_deth((void *)skb->data + METAROCE_BTH_LEN, swqe,
			  plan->offset, plan->flags);
	soft_fill_bth((void *)skb->data, swqe->wire_op, plan->flags,
		      qp->attr.dest_qp_num, qp->ibqp.qp_num, plan->psn,
		      plan->path);
	stamp_ts(qp, (void *)skb->data);
	return skb;
}

/* Puts the BTH and DETH of packet @i of a batch plan at @pos. */
static void fill_batch_headers(struct metaroce_qp *qp,
			       const struct tx_plan *plan, u32 i, void *pos)
{
	const struct soft_swqe *swqe = plan->swqe;
	u32 offset = plan->offset + i * qp->mtu;
	u8 flags = data_flags(swqe, plan->offset / qp->mtu + i);

	soft_fill_bth(pos, swqe->wire_op, flags, qp->attr.dest_qp_num,
		      qp->ibqp.qp_num, soft_psn_add(plan->psn, i), plan->path);
	stamp_ts(qp, pos);
	fill_deth(pos + METAROCE_BTH_LEN, swqe, offset, flags);
}

/* Payload bytes of packet @i of a batch plan. */
static u32 batch_packet_len(struct metaroce_qp *qp, const struct tx_plan *plan,
			    u32 i)
{
	return min(qp->mtu, plan->swqe->length - plan->offset - i * qp->mtu);
}

/*
 * Packets @first .. @first + @n - 1 of a batch plan as one UDP GSO datagram
 * (a single packet when @n is 1): the packets lie back to back, each with
 * its headers and one MTU of payload (the last may be shorter), and the
 * stack cuts it into one UDP datagram per packet. One trip through routing,
 * the qdisc and the driver for the batch instead of one per packet. The
 * payload is copied here; see build_batch_attached().
 */
static struct sk_buff *build_batch_copied(struct metaroce_qp *qp,
					  const struct tx_plan *plan,
					  u32 first, u32 n)
{
	const u32 hdr = METAROCE_BTH_LEN + METAROCE_DETH_LEN;
	struct soft_swqe *swqe = (struct soft_swqe *)plan->swqe;
	struct sk_buff *skb;
	u32 i, len = 0;
	void *pos;

	for (i = first; i < first + n; i++)
		len += hdr + batch_packet_len(qp, plan, i);
	skb = soft_alloc_skb(qp, 0, len);
	if (!skb)
		return NULL;
	for (i = first; i < first + n; i++) {
		len = batch_packet_len(qp, plan, i);
		pos = skb_put(skb, hdr + len);
		fill_batch_headers(qp, plan, i, pos);
		if (soft_copy_from_sges(swqe, plan->offset + i * qp->mtu,
					pos + hdr, len)) {
			kfree_skb(skb);
			return NULL;
		}
	}
	return skb;
}

/* Releases the fragments of @skb from slot @nr on, and their bytes. */
static void drop_frags_from(struct sk_buff *skb, int nr)
{
	struct skb_shared_info *shinfo = skb_shinfo(skb);

	while (shinfo->nr_frags > nr) {
		skb_frag_t *frag = &shinfo->frags[--shinfo->nr_frags];
		u32 size = skb_frag_size(frag);

		skb->len -= size;
		skb->data_len -= size;
		skb->truesize -= size;
		__skb_frag_unref(frag, false);
	}
}

/*
 * As build_batch_copied(), from packet @first on, but without touching the
 * payload: the first packet's headers go in the linear part, the others'
 * in one page fragment, and each packet's data is the registered pages
 * themselves. Allocating, zeroing and filling a large linear buffer per
 * batch cost about a fifth of the sender's CPU on the bench. Takes as many
 * packets as the fragment slots hold and says how many in *@n; NULL when
 * not even the first fits (the caller copies then).
 */
static struct sk_buff *build_batch_attached(struct metaroce_qp *qp,
					    const struct tx_plan *plan,
					    u32 first, u32 *n)
{
	const u32 hdr = METAROCE_BTH_LEN + METAROCE_DETH_LEN;
	struct soft_swqe *swqe = (struct soft_swqe *)plan->swqe;
	u32 i, count = plan->npkts - first;
	struct page *hdr_page = NULL;
	struct sk_buff *skb;
	void *hdrs = NULL;

	*n = 0;
	skb = soft_alloc_skb(qp, hdr, 0);
	if (!skb)
		return NULL;
	if (count > 1) {
		hdrs = netdev_alloc_frag((count - 1) * hdr);
		if (!hdrs) {
			kfree_skb(skb);
			return NULL;
		}
		hdr_page = virt_to_head_page(hdrs);
	}
	for (i = 0; i < count; i++) {
		int nr = skb_shinfo(skb)->nr_frags;
		void *pos = skb->data;

		if (i) {
			if (nr >= MAX_SKB_FRAGS)
				break;
			pos = hdrs + (i - 1) * hdr;
			get_page(hdr_page);
			skb_fill_page_desc(skb, nr, hdr_page,
					   pos - page_address(hdr_page), hdr);
			skb->len += hdr;
			skb->data_len += hdr;
			skb->truesize += hdr;
		}
		fill_batch_headers(qp, plan, first + i, pos);
		if (soft_attach_sges(swqe, plan->offset +
				     (first + i) * qp->mtu,
				     batch_packet_len(qp, plan, first + i),
				     skb)) {
			drop_frags_from(skb, nr);
			break;
		}
	}
	if (hdrs)
		page_frag_free(hdrs);
	if (!i) {
		kfree_skb(skb);
		return NULL;
	}
	*n = i;
	return skb;
}

/* Sends the packets of a batch plan, in as few GSO datagrams as fit. */
static void send_batch(struct metaroce_soft_qp *sqp, const struct tx_plan *plan)
{
	const u32 size = METAROCE_BTH_LEN + METAROCE_DETH_LEN + sqp->qp->mtu;
	struct soft_path *path = &sqp->req.paths[plan->path];
	struct metaroce_qp *qp = sqp->qp;
	struct sk_buff *skb;
	u32 first, n;

	for (first = 0; first < plan->npkts; first += n) {
		skb = NULL;
		if (!(plan->swqe->wqe.flags & METAROCE_WQE_INLINE))
			skb = build_batch_attached(qp, plan, first, &n);
		if (!skb) {
			n = plan->npkts - first;
			skb = build_batch_copied(qp, plan, first, n);
		}
		if (!skb) {
			build_failed(sqp, plan);
			return;
		}
		soft_xmit(qp, &qp->av, skb, path->entropy, &path->dst, true,
			  n > 1 ? size : 0);
	}
}

/*
 * Sends packets while *@budget lasts, counting them off it; says why it
 * stopped. Worker context.
 */
enum soft_tx_result soft_req_transmit(struct metaroce_soft_qp *sqp,
				      int *budget)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;
	enum soft_tx_result result;
	struct tx_plan plan;
	struct sk_buff *skb;

	while (*budget > 0) {
		spin_lock_bh(&req->lock);
		result = plan_next(sqp, &plan);
		if (result != TX_MORE) {
			spin_unlock_bh(&req->lock);
			return result;
		}
		soft_req_arm_timer(req);
		spin_unlock_bh(&req->lock);

		if (plan.npkts > 1) {
			send_batch(sqp, &plan);
		} else {
			skb = build_packet(qp, &plan);
			if (skb)
				soft_xmit(qp, &qp->av, skb,
					  req->paths[plan.path].entropy,
					  &req->paths[plan.path].dst, true, 0);
			else
				build_failed(sqp, &plan);
		}
		if (plan.retx && soft_op_asks_responses(plan.swqe->wire_op))
			metaroce_count(qp->mdev, REREADS);
		else if (plan.retx)
			metaroce_count(qp->mdev, RETRANSMITS);
		*budget -= plan.npkts;
	}
	return TX_MORE;
}

/*
 * The QP is in the error state: completes every WQE not yet completed,
 * the failed one with its error and the others with a flush error, and
 * everything still in the ring. Worker context.
 */
void soft_req_flush(struct metaroce_soft_qp *sqp)
{
	struct soft_req *req = &sqp->req;

	spin_lock_bh(&req->lock);
	hrtimer_try_to_cancel(&req->timer);
	soft_flush_send_queue(sqp);
	req->send_index = sqp->qp->sq.own_index;
	req_start(req, req->psn_next);
	spin_unlock_bh(&req->lock);
}
