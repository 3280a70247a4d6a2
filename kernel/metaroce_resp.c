// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Responder (protocol.md sections 5 and 6): tracks received PSNs, places
 * every data packet straight into its final buffer on arrival, answers
 * READs and atomics once everything before them has arrived, and completes
 * receive WQEs in message order. Receive runs in softirq context; READ and
 * atomic responses are sent from the QP's worker.
 */
#include "metaroce_loc.h"
#include "metaroce_soft.h"

void soft_resp_init(struct metaroce_soft_qp *sqp)
{
	struct soft_resp *resp = &sqp->resp;

	spin_lock_init(&resp->lock);
	hrtimer_init(&resp->ack_timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_SOFT);
	resp->ack_timer.function = soft_ack_timer_fn;
}

/* Lets go of a part that leaves the queue. */
static void release_part(struct soft_read *r)
{
	if (r->mr)
		metaroce_mr_put(r->mr);
	r->mr = NULL;
	r->done = false;
	r->atomic = 0;
	r->executed = false;
}

static void release_reads(struct soft_resp *resp)
{
	for (; resp->read_head != resp->read_tail; resp->read_head++)
		release_part(&resp->reads[resp->read_head % SOFT_MAX_READS]);
}

/*
 * Starts receiving at the QP's rq_psn (INIT to RTR), or drops everything
 * posted (RESET, destroy). The worker and timers are stopped.
 */
void soft_resp_reset(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_resp *resp = &sqp->resp;
	u32 i;

	spin_lock_bh(&resp->lock);
	if (READ_ONCE(qp->state) == IB_QPS_RESET || READ_ONCE(sqp->dying)) {
		for (i = 0; i < qp->rq.num_slots; i++)
			soft_release_rwqe(&resp->rwqes[i]);
		metaroce_queue_discard(&qp->rq);
	}
	release_reads(resp);
	resp->read_head = 0;
	resp->read_tail = 0;
	memset(resp->seen_reads, 0, sizeof(resp->seen_reads));
	soft_atomic_reset(resp);
	resp->cum = qp->attr.rq_psn;
	bitmap_zero(resp->rcvd, SOFT_RX_RING);
	resp->msn_done = 0;
	resp->last_wqe_reported = false;
	resp->refused = false;
	resp->unacked = 0;
	resp->ce_count = 0;
	resp->ack_due = false;
	spin_unlock_bh(&resp->lock);
}

/*
 * On an SRQ, a packet's message is at most as many messages ahead as its
 * PSN is ahead of cum (every message has a packet). A packet claiming
 * more would take WQEs the SRQ's other QPs need: it is dropped.
 */
static bool srq_msn_plausible(struct metaroce_soft_qp *sqp, u32 ahead, u32 psn)
{
	if (!metaroce_qp_srq(sqp->qp) ||
	    (s32)ahead <= soft_psn_diff(psn, sqp->resp.cum))
		return true;
	metaroce_count(sqp->qp->mdev, RX_BAD_PEER);
	return false;
}

/*
 * The receive WQE that message @msn lands in, or NULL if none is posted
 * (*@rnr set) or the packet at @psn is implausible.
 */
static struct soft_rwqe *rwqe_for_msn(struct metaroce_soft_qp *sqp, u32 msn,
				      u32 psn, bool *rnr)
{
	struct metaroce_qp *qp = sqp->qp;
	u32 ahead = msn - sqp->resp.msn_done;
	u32 index = qp->rq.own_index + ahead;
	struct soft_rwqe *rwqe;

	if (ahead >= SOFT_WINDOW) {
		*rnr = true;
		return NULL;
	}
	if (!srq_msn_plausible(sqp, ahead, psn))
		return NULL;
	/* Taken in message order: message @msn gets the next one. */
	soft_srq_fetch(sqp, ahead + 1);
	if (ahead >= metaroce_queue_available(&qp->rq)) {
		*rnr = true;
		return NULL;
	}
	rwqe = &sqp->resp.rwqes[index & (qp->rq.num_slots - 1)];
	if (!rwqe->taken)
		soft_take_recv_wqe(sqp, index);
	return rwqe;
}

/*
 * Completes the RQ's oldest WQE, @rwqe, with @status: releases it and
 * frees its slot before the completion can be polled (see soft_sq_retire).
 */
void soft_retire_recv(struct metaroce_qp *qp, struct soft_rwqe *rwqe,
		      u8 status)
{
	struct metaroce_cqe cqe = {
		.wr_id = rwqe->wqe.wr_id,
		.status = status,
		.opcode = rwqe->write_imm ? IB_WC_RECV_RDMA_WITH_IMM :
					    IB_WC_RECV,
		.byte_len = rwqe->write_imm ? rwqe->msg_len :
			    min(rwqe->msg_len, rwqe->capacity),
		.qp_num = qp->ibqp.qp_num,
		.src_qp = qp->attr.dest_qp_num,
		.imm_data = rwqe->imm,
		.flags = rwqe->with_imm ? METAROCE_CQE_WITH_IMM : 0,
	};

	bool solicited = rwqe->solicited;

	if (rwqe->with_inv) {
		cqe.invalidated_rkey = rwqe->inv_rkey;
		cqe.flags |= METAROCE_CQE_WITH_INV;
	}
	soft_release_rwqe(rwqe);
	metaroce_queue_consume(&qp->rq, 1);
	metaroce_cq_post(qp->rcq, &cqe, solicited);
}

/*
 * A SEND with invalidate completes: ends the registration it names, once
 * (protocol.md section 6). One the consumer ended meanwhile stays ended.
 */
void soft_invalidate_for(struct metaroce_qp *qp, u32 key)
{
	struct metaroce_mr *mr;

	if (metaroce_key_is_mw(key)) {
		metaroce_mw_invalidate(qp, key, true);
		return;
	}
	mr = metaroce_mr_get(qp->mdev, key);
	if (!mr)
		return;
	if (mr->fr)
		metaroce_frmr_invalidate(mr, qp->ibqp.pd, key);
	metaroce_mr_put(mr);
}

/* Whether @key names a registration a SEND to @qp may invalidate. */
bool soft_invalidation_allowed(struct metaroce_qp *qp, u32 key)
{
	struct metaroce_mr *mr;
	bool ok;

	/* A type 2 window's key, if it is bound to this QP. */
	if (metaroce_key_is_mw(key))
		return metaroce_mw_may_invalidate(qp, key, true);
	mr = metaroce_mr_get(qp->mdev, key);
	if (!mr)
		return false;
	ok = metaroce_frmr_valid_with(mr, qp->ibqp.pd, key);
	metaroce_mr_put(mr);
	return ok;
}

/* Completes, in message order, every message whose PSNs have all arrived. */
static bool complete_messages(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_resp *resp = &sqp->resp;
	bool any = false;

	while (metaroce_queue_available(&qp->rq)) {
		struct soft_rwqe *rwqe = &resp->rwqes[qp->rq.own_index &
						      (qp->rq.num_slots - 1)];

		if (!rwqe->taken || !rwqe->seen ||
		    soft_psn_diff(resp->cum, rwqe->last_psn) <= 0)
			break;
		if (rwqe->with_inv && rwqe->status == IB_WC_SUCCESS)
			soft_invalidate_for(qp, rwqe->inv_rkey);
		soft_retire_recv(qp, rwqe, rwqe->status);
		resp->msn_done++;
		any = true;
	}
	return any;
}

/*
 * Records a refused request; the NAK and the failure wait for the PSNs
 * before it (so the requester completes everything posted before it).
 */
static void refuse(struct metaroce_soft_qp *sqp, struct soft_pkt_info *pkt,
		   u8 syndrome)
{
	struct soft_resp *resp = &sqp->resp;

	if (resp->refused && soft_psn_diff(pkt->psn, resp->refuse_psn) >= 0)
		return;
	resp->refused = true;
	resp->refuse_psn = pkt->psn;
	resp->refuse_syndrome = syndrome;
	if (syndrome == METAROCE_NAK_REMOTE_ACCESS)
		metaroce_count(sqp->qp->mdev, REMOTE_ACCESS_ERR);
}

/*
 * Checks a data packet against the QP's path MTU: all packets of a message
 * but the last carry exactly one MTU of payload.
 */
static bool segment_ok(const struct metaroce_qp *qp, u32 offset, u32 len,
		       u32 msg_len)
{
	if (offset % qp->mtu || len > qp->mtu)
		return false;
	return offset + len == msg_len || len == qp->mtu;
}

/* The PSN of the last packet of the message @pkt belongs to. */
static u32 message_last_psn(const struct metaroce_qp *qp,
			    const struct soft_pkt_info *pkt, u32 offset)
{
	u32 first = soft_psn_add(pkt->psn, -(offset / qp->mtu));

	return soft_psn_add(first, soft_npkts(pkt->deth.msg_len, qp->mtu) - 1);
}

enum rx_verdict {
	RX_PLACED,
	RX_DROPPED,		/* nothing done; the sender will resend */
	RX_REFUSED,		/* a protocol or access error */
};

static enum rx_verdict rx_write(struct metaroce_soft_qp *sqp,
				struct soft_pkt_info *pkt)
{
	struct metaroce_qp *qp = sqp->qp;
	struct metaroce_mr *mr;
	bool ok;

	/*
	 * IBA C9-88: a zero-length WRITE names no memory, so its R_Key and
	 * address are not checked (UCX flushes with 0 bytes to R_Key 0).
	 */
	if (!pkt->payload_len && soft_qp_allows(qp, IB_ACCESS_REMOTE_WRITE))
		return RX_PLACED;
	mr = metaroce_rkey_get(qp, pkt->deth.key, pkt->deth.addr,
			       pkt->payload_len, IB_ACCESS_REMOTE_WRITE);
	ok = mr && soft_qp_allows(qp, IB_ACCESS_REMOTE_WRITE) &&
	     !metaroce_mr_copy_from_skb(mr, pkt->deth.key, pkt->deth.addr,
					pkt->skb, pkt->payload_offset,
					pkt->payload_len);
	if (mr)
		metaroce_mr_put(mr);
	if (!ok) {
		refuse(sqp, pkt, METAROCE_NAK_REMOTE_ACCESS);
		return RX_REFUSED;
	}
	return RX_PLACED;
}

/*
 * SEND packets, and the last packet of a WRITE with immediate. A SEND's
 * offset + payload is at most its msg_len (checked, without wrapping, when
 * it was parsed), so placing it needs only msg_len within the capacity.
 */
static enum rx_verdict rx_message(struct metaroce_soft_qp *sqp,
				  struct soft_pkt_info *pkt, bool *rnr)
{
	struct metaroce_qp *qp = sqp->qp;
	bool send = pkt->opcode == METAROCE_OP_SEND;
	u32 offset = send ? pkt->deth.addr : 0;
	struct soft_rwqe *rwqe;

	rwqe = rwqe_for_msn(sqp, pkt->deth.msn, pkt->psn, rnr);
	if (!rwqe)
		return RX_DROPPED;
	if (send && pkt->deth.msg_len > rwqe->capacity &&
	    rwqe->status == IB_WC_SUCCESS)
		rwqe->status = IB_WC_LOC_LEN_ERR;
	if (send && rwqe->status == IB_WC_SUCCESS &&
	    soft_place_in_sges(rwqe->sge, rwqe->mr, rwqe->wqe.num_sge, offset,
			       pkt->skb, pkt->payload_offset,
			       pkt->payload_len))
		rwqe->status = IB_WC_LOC_PROT_ERR;

	if (!rwqe->seen || (pkt->flags & METAROCE_F_LAST)) {
		rwqe->seen = true;
		rwqe->write_imm = !send;
		rwqe->msg_len = pkt->deth.msg_len;
		rwqe->last_psn = send ? message_last_psn(qp, pkt, offset) :
					pkt->psn;
	}
	if (pkt->flags & METAROCE_F_IMM) {
		rwqe->with_imm = true;
		rwqe->imm = pkt->deth.imm;
	}
	if (pkt->flags & METAROCE_F_INV) {
		rwqe->with_inv = true;
		rwqe->inv_rkey = be32_to_cpu(pkt->deth.imm);
		if (rwqe->status == IB_WC_SUCCESS &&
		    !soft_invalidation_allowed(qp, rwqe->inv_rkey))
			rwqe->status = IB_WC_REM_INV_REQ_ERR;
	}
	if (pkt->flags & METAROCE_F_SOLICITED)
		rwqe->solicited = true;
	if (rwqe->status != IB_WC_SUCCESS) {
		bool invalid = rwqe->status == IB_WC_LOC_LEN_ERR ||
			       rwqe->status == IB_WC_REM_INV_REQ_ERR;

		refuse(sqp, pkt, invalid ? METAROCE_NAK_INVALID_REQ :
					   METAROCE_NAK_REMOTE_OP);
		return RX_REFUSED;
	}
	return RX_PLACED;
}

/* Whether a READ part is queued and the one at the head waits for a gap. */
static bool head_read_waits(const struct soft_resp *resp)
{
	return resp->read_head != resp->read_tail &&
	       soft_psn_diff(resp->reads[resp->read_head % SOFT_MAX_READS].psn,
			     resp->cum) >= 0;
}

/* Whether a READ part is queued and its turn has come. */
static bool read_ready(const struct soft_resp *resp)
{
	return resp->read_head != resp->read_tail && !head_read_waits(resp);
}

/*
 * Whether a READ_REQ at @psn may be queued. At most max_dest_rd_atomic
 * parts are held, but one that can run at once (at or behind cum) is also
 * taken while the parts held all wait behind a gap: it may be the very
 * request they wait for (a tail probe overtook a lost request), and
 * dropping it would stall them for good.
 */
static bool read_slot_free(const struct soft_resp *resp,
			   const struct metaroce_qp *qp, u32 psn)
{
	u32 held = resp->read_tail - resp->read_head;

	if (held < clamp_t(u32, qp->attr.max_dest_rd_atomic, 1,
			   SOFT_MAX_READS))
		return true;
	return held < SOFT_MAX_READS && soft_psn_diff(psn, resp->cum) <= 0 &&
	       head_read_waits(resp);
}

/*
 * A new part at @psn (at or past cum) takes its place in PSN order: the
 * parts behind it all wait for a gap (none has sent anything), so moving
 * them back a slot disturbs none the worker is sending. Responses, and
 * atomics' executions, then follow the requester's order, not arrival's.
 */
static struct soft_read *insert_part(struct soft_resp *resp, u32 psn)
{
	u32 i = resp->read_tail++;

	for (; i != resp->read_head; i--) {
		struct soft_read *prev = &resp->reads[(i - 1) % SOFT_MAX_READS];

		if (soft_psn_diff(prev->psn, psn) < 0)
			break;
		resp->reads[i % SOFT_MAX_READS] = *prev;
	}
	return &resp->reads[i % SOFT_MAX_READS];
}

/* The READ a READ_REQ belongs to, and the PSNs it asks for, as a run. */
static void read_run(const struct metaroce_qp *qp,
		     const struct soft_pkt_info *pkt, u32 npkts,
		     struct soft_read_seen *run)
{
	run->base = pkt->rreq.va - pkt->rreq.offset;
	run->rkey = pkt->rreq.rkey;
	run->msn = pkt->rreq.msn;
	run->psn0 = soft_psn_add(pkt->psn, -(pkt->rreq.offset / qp->mtu));
	run->first = pkt->psn;
	run->npkts = npkts;
}

static bool same_read(const struct soft_read_seen *a,
		      const struct soft_read_seen *b)
{
	return a->npkts && a->base == b->base && a->rkey == b->rkey &&
	       a->msn == b->msn && a->psn0 == b->psn0;
}

/*
 * Records the run of an accepted READ_REQ, joined with a run of the same
 * READ it overlaps or touches. A new READ takes a free record or the one
 * that ended longest ago; a run keeps its last SOFT_RX_RING PSNs, which
 * is as far behind cum as a requester re-reads.
 */
static void remember_read(struct soft_resp *resp, const struct metaroce_qp *qp,
			  const struct soft_pkt_info *pkt, u32 npkts)
{
	struct soft_read_seen run, *r, *victim = NULL;
	s32 oldest = S32_MAX;
	int i;

	read_run(qp, pkt, npkts, &run);
	for (i = 0; i < SOFT_READ_HISTORY; i++) {
		s32 start, end, age;

		r = &resp->seen_reads[i];
		if (same_read(r, &run)) {
			start = soft_psn_diff(run.first, r->first);
			end = soft_psn_diff(soft_psn_add(run.first, run.npkts),
					    r->first);
			if (start <= (s32)r->npkts && end >= 0) {
				start = min(start, 0);
				end = max_t(s32, end, r->npkts);
				r->first = soft_psn_add(r->first, start);
				r->npkts = end - start;
				if (r->npkts > SOFT_RX_RING) {
					r->first = soft_psn_add(r->first, r->npkts -
								SOFT_RX_RING);
					r->npkts = SOFT_RX_RING;
				}
				return;
			}
		}
		age = r->npkts ? soft_psn_diff(soft_psn_add(r->first, r->npkts),
					       resp->cum) : S32_MIN;
		if (age < oldest) {
			oldest = age;
			victim = r;
		}
	}
	run.npkts = min_t(u32, run.npkts, SOFT_RX_RING);
	*victim = run;
}

/*
 * Whether a READ_REQ behind cum repeats a READ accepted before: the PSNs
 * it asks for that are behind cum all lie in one remembered run of the
 * same READ (rkey, MSN, address and PSN of byte 0). The PSNs from cum on
 * are new ones (a re-read that reaches into a part whose request was lost).
 */
static bool read_remembered(const struct soft_resp *resp,
			    const struct metaroce_qp *qp,
			    const struct soft_pkt_info *pkt, u32 npkts)
{
	s32 behind = soft_psn_diff(resp->cum, pkt->psn);
	struct soft_read_seen run;
	int i;

	if (pkt->rreq.offset % qp->mtu || behind <= 0 || behind > SOFT_RX_RING)
		return false;
	read_run(qp, pkt, min_t(u32, npkts, behind), &run);
	for (i = 0; i < SOFT_READ_HISTORY; i++) {
		const struct soft_read_seen *r = &resp->seen_reads[i];
		s32 start = soft_psn_diff(run.first, r->first);

		if (same_read(r, &run) && start >= 0 &&
		    start + run.npkts <= r->npkts)
			return true;
	}
	return false;
}

/*
 * Takes a READ_REQ part. A refusal of a new one NAKs and fails the QP; a
 * duplicate (@duplicate, behind cum) is never refused: it is dropped and
 * counted, as a request the responder cannot tell from a forged one.
 */
static enum rx_verdict rx_read_req(struct metaroce_soft_qp *sqp,
				   struct soft_pkt_info *pkt, u32 *npkts,
				   bool duplicate)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_resp *resp = &sqp->resp;
	struct metaroce_mr *mr;
	struct soft_read *r;
	bool run_first;

	*npkts = soft_npkts(pkt->rreq.len, qp->mtu);
	if (duplicate && !read_remembered(resp, qp, pkt, *npkts))
		goto unknown;
	if (pkt->rreq.offset % qp->mtu) {
		refuse(sqp, pkt, METAROCE_NAK_INVALID_REQ);
		return RX_REFUSED;
	}
	/* The requester resends what this responder cannot hold. */
	if (!read_slot_free(resp, qp, pkt->psn))
		return RX_DROPPED;

	/*
	 * IBA C9-88: a zero-length READ names no memory, so its R_Key and
	 * address are not checked (its response copies nothing); the QP's
	 * remote-read right still is.
	 */
	mr = NULL;
	if (pkt->rreq.len)
		mr = metaroce_rkey_get(qp, pkt->rreq.rkey, pkt->rreq.va,
				       pkt->rreq.len, IB_ACCESS_REMOTE_READ);
	if ((pkt->rreq.len && !mr) ||
	    !soft_qp_allows(qp, IB_ACCESS_REMOTE_READ)) {
		if (mr)
			metaroce_mr_put(mr);
		if (duplicate)
			goto unknown;
		refuse(sqp, pkt, METAROCE_NAK_REMOTE_ACCESS);
		return RX_REFUSED;
	}
	remember_read(resp, qp, pkt, *npkts);
	/*
	 * A READ whose turn has come (a re-read, or the request the parts at
	 * the head wait for) goes first, ahead of parts still waiting for
	 * earlier requests; the others queue in PSN order.
	 */
	run_first = soft_psn_diff(pkt->psn, resp->cum) < 0 ||
		    (pkt->psn == resp->cum && head_read_waits(resp));
	if (run_first)
		r = &resp->reads[--resp->read_head % SOFT_MAX_READS];
	else
		r = insert_part(resp, pkt->psn);
	r->mr = mr;
	r->rkey = pkt->rreq.rkey;
	r->va = pkt->rreq.va;
	r->psn = pkt->psn;
	r->len = pkt->rreq.len;
	r->offset = pkt->rreq.offset;
	r->msn = pkt->rreq.msn;
	r->sent = 0;
	r->retx = pkt->flags & METAROCE_F_RETX;
	r->done = false;
	r->atomic = 0;
	r->executed = false;
	return RX_PLACED;

unknown:
	metaroce_count(qp->mdev, RX_DUPLICATE_READ_UNKNOWN);
	return RX_DROPPED;
}

/* Fills an atomic part from its request. */
static void set_atomic_part(struct soft_read *r, const struct soft_pkt_info *pkt,
			    struct metaroce_mr *mr)
{
	r->mr = mr;
	r->rkey = pkt->areq.rkey;
	r->va = pkt->areq.va;
	r->psn = pkt->psn;
	r->len = METAROCE_ATOMIC_LEN;
	r->offset = 0;
	r->msn = pkt->areq.msn;
	r->sent = 0;
	r->retx = pkt->flags & METAROCE_F_RETX;
	r->done = false;
	r->atomic = pkt->opcode;
	r->executed = false;
	r->swap_add = pkt->areq.swap_add;
	r->compare = pkt->areq.compare;
}

/*
 * Takes a new atomic request: checked now, held as a part (one of the
 * max_dest_rd_atomic, as a READ_REQ part) and executed when cum passes it.
 */
static enum rx_verdict rx_atomic_req(struct metaroce_soft_qp *sqp,
				     struct soft_pkt_info *pkt)
{
	struct soft_resp *resp = &sqp->resp;
	struct metaroce_mr *mr;
	struct soft_read *r;
	u8 syndrome;

	syndrome = soft_atomic_check(sqp, pkt, &mr);
	if (syndrome) {
		refuse(sqp, pkt, syndrome);
		return RX_REFUSED;
	}
	/* The requester resends what this responder cannot hold. */
	if (!read_slot_free(resp, sqp->qp, pkt->psn)) {
		metaroce_mr_put(mr);
		return RX_DROPPED;
	}
	if (pkt->psn == resp->cum && head_read_waits(resp))
		r = &resp->reads[--resp->read_head % SOFT_MAX_READS];
	else
		r = insert_part(resp, pkt->psn);
	set_atomic_part(r, pkt, mr);
	return RX_PLACED;
}

/*
 * A repeated atomic (behind cum, or its PSN already received): answered
 * from the record if it was executed, with RETX and ahead of the parts
 * that wait, as a re-read; dropped if it waits for its turn (its response
 * comes then); otherwise dropped and counted. Never refused, never run.
 */
static void rx_duplicate_atomic(struct metaroce_soft_qp *sqp,
				struct soft_pkt_info *pkt)
{
	struct soft_resp *resp = &sqp->resp;
	const struct soft_atomic_rec *rec;
	struct soft_read *r;

	rec = soft_atomic_find(resp, pkt);
	if (rec) {
		/* No room: the requester asks again. */
		if (!read_slot_free(resp, sqp->qp, pkt->psn))
			return;
		r = &resp->reads[--resp->read_head % SOFT_MAX_READS];
		set_atomic_part(r, pkt, NULL);
		r->executed = true;
		r->orig = rec->orig;
		r->retx = true;
		return;
	}
	if (!soft_atomic_pending(resp, pkt))
		metaroce_count(sqp->qp->mdev, RX_DUPLICATE_ATOMIC_UNKNOWN);
}

/*
 * How far past cum the last PSN of @pkt is, @ahead being its first's: a
 * READ_REQ takes one PSN per response packet, and all must fit the window.
 */
static s64 last_psn_ahead(const struct metaroce_qp *qp,
			  const struct soft_pkt_info *pkt, s32 ahead)
{
	if (pkt->opcode != METAROCE_OP_READ_REQ)
		return ahead;
	return (s64)ahead + soft_npkts(pkt->rreq.len, qp->mtu) - 1;
}

static void mark_received(struct soft_resp *resp, u32 psn, u32 n)
{
	while (n--) {
		__set_bit(psn % SOFT_RX_RING, resp->rcvd);
		psn = soft_psn_add(psn, 1);
	}
	while (test_bit(resp->cum % SOFT_RX_RING, resp->rcvd)) {
		__clear_bit(resp->cum % SOFT_RX_RING, resp->rcvd);
		resp->cum = soft_psn_add(resp->cum, 1);
	}
}

/*
 * A duplicate READ_REQ behind cum is answered again if it repeats a READ
 * accepted before, and the PSNs it covers from cum on are marked (a re-read
 * may reach past what arrived); any other is dropped without an answer.
 * Other duplicates are only acknowledged.
 */
static void rx_duplicate(struct metaroce_soft_qp *sqp,
			 struct soft_pkt_info *pkt)
{
	struct soft_resp *resp = &sqp->resp;
	s32 behind = soft_psn_diff(resp->cum, pkt->psn);
	enum rx_verdict verdict;
	u32 npkts;

	metaroce_count(sqp->qp->mdev, RX_DUPLICATE);
	if (soft_op_is_atomic(pkt->opcode))
		rx_duplicate_atomic(sqp, pkt);
	if (pkt->opcode == METAROCE_OP_READ_REQ && behind > 0) {
		verdict = rx_read_req(sqp, pkt, &npkts, true);
		if (verdict != RX_PLACED)
			return;
		/*
		 * A re-read longer than what is behind cum moves cum: the
		 * messages it passes complete now, or msn_done would lag
		 * (and a QP on an SRQ would take the next message for an
		 * implausible one).
		 */
		if (npkts > behind) {
			mark_received(resp, resp->cum, npkts - behind);
			complete_messages(sqp);
		}
	}
	resp->ack_due = true;
}

void soft_resp_rx(struct metaroce_soft_qp *sqp, struct soft_pkt_info *pkt)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_resp *resp = &sqp->resp;
	struct soft_ack_info nak = {};
	enum rx_verdict verdict;
	bool rnr = false, reads_ready;
	s32 ahead;
	u32 n = 1;

	spin_lock_bh(&resp->lock);
	soft_ack_note_echo(resp, pkt);
	ahead = soft_psn_diff(pkt->psn, resp->cum);
	if (last_psn_ahead(qp, pkt, ahead) > SOFT_WINDOW) {
		metaroce_count(qp->mdev, RX_OUT_OF_WINDOW);
		goto unlock;
	}
	if (ahead < 0 || test_bit(pkt->psn % SOFT_RX_RING, resp->rcvd)) {
		rx_duplicate(sqp, pkt);
		goto ack;
	}
	if (resp->refused && soft_psn_diff(pkt->psn, resp->refuse_psn) > 0)
		goto unlock;
	/* Segments that do not fit the path MTU are malformed (section 12). */
	if (!soft_op_asks_responses(pkt->opcode) &&
	    !segment_ok(qp, pkt->opcode == METAROCE_OP_SEND ?
			pkt->deth.addr : 0, pkt->payload_len,
			pkt->opcode == METAROCE_OP_SEND ?
			pkt->deth.msg_len : pkt->payload_len)) {
		metaroce_count(qp->mdev, RX_MALFORMED);
		goto unlock;
	}

	switch (pkt->opcode) {
	case METAROCE_OP_WRITE:
		verdict = rx_write(sqp, pkt);
		if (verdict == RX_PLACED && (pkt->flags & METAROCE_F_IMM))
			verdict = rx_message(sqp, pkt, &rnr);
		break;
	case METAROCE_OP_SEND:
		verdict = rx_message(sqp, pkt, &rnr);
		break;
	case METAROCE_OP_ATOMIC_CMP_SWP:
	case METAROCE_OP_ATOMIC_FETCH_ADD:
		verdict = rx_atomic_req(sqp, pkt);
		break;
	default:
		verdict = rx_read_req(sqp, pkt, &n, false);
		break;
	}
	if (verdict == RX_DROPPED)
		goto dropped;
	if (verdict == RX_REFUSED)
		goto refused;

	if (ahead > 0)
		metaroce_count(qp->mdev, RX_OUT_OF_ORDER);
	mark_received(resp, pkt->psn, n);
	soft_ack_note_data(sqp, pkt);
	if (complete_messages(sqp))
		resp->ack_due = true;
	goto ack;

refused:
	goto ack;
dropped:
	if (rnr) {
		metaroce_count(qp->mdev, RNR_NAKS_SENT);
		nak.syndrome = METAROCE_NAK_RNR;
		nak.nak_arg = qp->attr.min_rnr_timer;
		nak.nak_psn = pkt->psn;
	}
ack:
	/*
	 * A refusal whose turn has come: everything before it arrived (a
	 * refused duplicate is behind cum already).
	 */
	if (resp->refused && soft_psn_diff(resp->cum, resp->refuse_psn) >= 0 &&
	    !nak.syndrome) {
		nak.syndrome = resp->refuse_syndrome;
		nak.nak_psn = resp->refuse_psn;
	}
	reads_ready = read_ready(resp);
	spin_unlock_bh(&resp->lock);

	if (nak.syndrome) {
		soft_ack_send(sqp, &nak);
		if (nak.syndrome != METAROCE_NAK_RNR) {
			metaroce_qp_event(qp, nak.syndrome ==
					  METAROCE_NAK_REMOTE_ACCESS ?
					  IB_EVENT_QP_ACCESS_ERR :
					  IB_EVENT_QP_REQ_ERR);
			soft_qp_fail(qp);
		}
	} else if (READ_ONCE(resp->ack_due)) {
		soft_ack_send(sqp, NULL);
	} else if (!hrtimer_is_queued(&resp->ack_timer) &&
		   !READ_ONCE(sqp->dying)) {
		/* Not "active": a running callback may have missed this PSN. */
		hrtimer_start(&resp->ack_timer,
			      soft_us(METAROCE_DELAYED_ACK_US),
			      HRTIMER_MODE_REL_SOFT);
	}
	if (reads_ready)
		soft_schedule_tx(sqp);
	return;
unlock:
	spin_unlock_bh(&resp->lock);
}

/*
 * Retires the parts at the head that are all sent. A part is marked done
 * where it is: a re-read may have been put in front of it meanwhile.
 */
static void pop_done_reads(struct soft_resp *resp)
{
	while (resp->read_head != resp->read_tail) {
		struct soft_read *r = &resp->reads[resp->read_head %
						   SOFT_MAX_READS];

		if (!r->done)
			break;
		release_part(r);
		resp->read_head++;
	}
}

/*
 * A READ part or atomic whose MR was deregistered after the request was
 * accepted: as for a bad rkey (protocol.md section 6), a REMOTE_ACCESS NAK
 * for the packet's PSN and the error state; nothing of it is sent. An
 * atomic on a word its mapping cannot align is refused as invalid.
 */
static void refuse_at_turn(struct metaroce_soft_qp *sqp, u32 psn, u8 syndrome)
{
	struct soft_ack_info nak = {
		.syndrome = syndrome,
		.nak_psn = psn,
	};

	if (syndrome == METAROCE_NAK_REMOTE_ACCESS)
		metaroce_count(sqp->qp->mdev, REMOTE_ACCESS_ERR);
	soft_ack_send(sqp, &nak);
	metaroce_qp_event(sqp->qp, syndrome == METAROCE_NAK_REMOTE_ACCESS ?
			  IB_EVENT_QP_ACCESS_ERR : IB_EVENT_QP_REQ_ERR);
	soft_qp_fail(sqp->qp);
}

/* An atomic part's response: its DETH and the word's former value. */
static struct sk_buff *build_atomic_resp(struct metaroce_qp *qp,
					 const struct soft_read *r)
{
	__be64 value = cpu_to_be64(r->orig);
	struct sk_buff *skb;

	skb = soft_alloc_skb(qp, METAROCE_BTH_LEN + METAROCE_DETH_LEN,
			     METAROCE_ATOMIC_LEN);
	if (skb)
		memcpy(skb_put(skb, METAROCE_ATOMIC_LEN), &value, sizeof(value));
	return skb;
}

/*
 * Sends READ responses of parts whose turn has come. Worker context; the
 * part at the head is read without the lock while its packet is built:
 * only this worker moves the head or changes a part once queued.
 *
 * The payload is copied, never attached: the peer decides when a READ
 * runs, and an skb carrying the MR's pages would let the bytes leave after
 * the application deregistered the MR and reused the buffer.
 */
int soft_resp_transmit(struct metaroce_soft_qp *sqp, int budget)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_resp *resp = &sqp->resp;
	struct soft_req *req = &sqp->req;
	int sent = 0;

	while (sent < budget) {
		struct metaroce_deth *deth;
		struct soft_read *r;
		struct sk_buff *skb;
		u32 off, len, psn;
		bool last = false;
		u8 flags;
		int path, err = 0;

		spin_lock_bh(&resp->lock);
		pop_done_reads(resp);
		if (!read_ready(resp)) {
			spin_unlock_bh(&resp->lock);
			break;
		}
		r = &resp->reads[resp->read_head % SOFT_MAX_READS];
		off = r->sent;
		len = min(qp->mtu, r->len - off);
		psn = soft_psn_add(r->psn, off / qp->mtu);
		/* Its turn: cum passed it, so it sees every WRITE before it. */
		if (r->atomic && !r->executed)
			err = soft_atomic_execute(resp, r);
		if (!err) {
			r->sent += len;
			last = r->sent == r->len;
		}
		spin_unlock_bh(&resp->lock);
		if (err) {
			refuse_at_turn(sqp, psn, err == -EACCES ?
				       METAROCE_NAK_REMOTE_ACCESS :
				       METAROCE_NAK_INVALID_REQ);
			break;
		}

		flags = (off ? 0 : METAROCE_F_FIRST) |
			(last ? METAROCE_F_LAST : 0) |
			(r->retx ? METAROCE_F_RETX : 0);
		spin_lock_bh(&req->lock);
		path = soft_path_pick(req, -1);
		spin_unlock_bh(&req->lock);

		if (r->atomic) {
			skb = build_atomic_resp(qp, r);
		} else {
			skb = soft_alloc_skb(qp, METAROCE_BTH_LEN +
					     METAROCE_DETH_LEN, len);
			if (skb && metaroce_mr_copy_to_buf(r->mr, r->rkey,
							   r->va + off,
							   skb_put(skb, len),
							   len)) {
				kfree_skb(skb);
				refuse_at_turn(sqp, psn,
					       METAROCE_NAK_REMOTE_ACCESS);
				break;
			}
		}
		if (skb) {
			soft_fill_bth((void *)skb->data, r->atomic ?
				      METAROCE_OP_ATOMIC_RESP :
				      METAROCE_OP_READ_RESP,
				      flags, qp->attr.dest_qp_num,
				      qp->ibqp.qp_num, psn, path);
			deth = (void *)skb->data + METAROCE_BTH_LEN;
			deth->addr = cpu_to_be64(r->offset + off);
			deth->key = 0;
			deth->msn = cpu_to_be32(r->msn);
			deth->msg_len = cpu_to_be32(r->offset + r->len);
			deth->imm = 0;
			soft_xmit(qp, &qp->av, skb, req->paths[path].entropy,
				  &req->paths[path].dst, true, 0);
		} else {
			metaroce_count(qp->mdev, TX_DROPPED);
		}
		sent++;

		if (last) {
			spin_lock_bh(&resp->lock);
			r->done = true;
			pop_done_reads(resp);
			spin_unlock_bh(&resp->lock);
		}
	}
	return sent;
}

/*
 * The QP is in the error state: every receive WQE completes flushed. The
 * producer is read once: user space may move it all the time, and each
 * doorbell of a receive posted later brings another flush.
 */
void soft_resp_flush(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_resp *resp = &sqp->resp;
	bool last_wqe;
	u32 avail;

	spin_lock_bh(&resp->lock);
	release_reads(resp);
	avail = metaroce_queue_available(&qp->rq);
	while (avail--) {
		struct soft_rwqe *rwqe = &resp->rwqes[qp->rq.own_index &
						      (qp->rq.num_slots - 1)];

		u8 status = IB_WC_WR_FLUSH_ERR;

		/* A message that failed here reports why; the rest flush. */
		if (rwqe->taken && rwqe->seen && rwqe->status)
			status = rwqe->status;
		if (!rwqe->taken)
			soft_take_recv_wqe(sqp, qp->rq.own_index);
		soft_retire_recv(qp, rwqe, status);
	}
	/* IBA 11.6.3: on an SRQ, the last WQE the QP took has completed. */
	last_wqe = metaroce_qp_srq(qp) && !resp->last_wqe_reported;
	resp->last_wqe_reported = true;
	spin_unlock_bh(&resp->lock);
	if (last_wqe)
		metaroce_qp_event(qp, IB_EVENT_QP_LAST_WQE_REACHED);
}
