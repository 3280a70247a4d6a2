// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Requester, receive side (protocol.md section 8): ACKs and NAKs update
 * the scoreboard, SACKs reveal losses, READ responses are placed, and work
 * requests complete in order. Also the retransmission and RNR timer.
 * Runs in softirq context under the requester lock.
 */
#include "metaroce_loc.h"
#include "metaroce_soft.h"

/* IB RNR timer encoding (IBA table 45), microseconds. */
static const u32 rnr_timer_us[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960,
	1280, 1920, 2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720,
	40960, 61440, 81920, 122880, 163840, 245760, 327680, 491520,
};

static u8 wc_opcode(u32 wr_opcode)
{
	switch (wr_opcode) {
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return IB_WC_RDMA_WRITE;
	case IB_WR_RDMA_READ:
		return IB_WC_RDMA_READ;
	case IB_WR_ATOMIC_CMP_AND_SWP:
		return IB_WC_COMP_SWAP;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		return IB_WC_FETCH_ADD;
	case IB_WR_REG_MR:
		return IB_WC_REG_MR;
	case IB_WR_LOCAL_INV:
		return IB_WC_LOCAL_INV;
	case IB_WR_BIND_MW:
		return IB_WC_BIND_MW;
	default:
		return IB_WC_SEND;
	}
}

void soft_post_send_cqe(struct metaroce_qp *qp, u64 wr_id, u32 wr_opcode,
			u8 status, u32 len)
{
	struct metaroce_cqe cqe = {
		.wr_id = wr_id,
		.status = status,
		.opcode = wc_opcode(wr_opcode),
		.byte_len = len,
		.qp_num = qp->ibqp.qp_num,
	};

	metaroce_cq_post(qp->scq, &cqe, false);
}

/*
 * Frees the SQ's oldest slot, then posts its completion (if @cqe): an
 * application that posts again as soon as it polls a completion must find
 * the room that completion stands for (perftest keeps its SQ full).
 */
void soft_sq_retire(struct metaroce_qp *qp, u64 wr_id, u32 wr_opcode,
		    u8 status, u32 len, bool cqe)
{
	metaroce_queue_consume(&qp->sq, 1);
	if (cqe)
		soft_post_send_cqe(qp, wr_id, wr_opcode, status, len);
}

/* The tail-loss probe timeout (protocol.md section 8). */
static u32 probe_timeout_us(const struct soft_req *req)
{
	if (!req->srtt_us)
		return METAROCE_INITIAL_RTO_US;
	return max3(2 * req->srtt_us, req->srtt_us + 4 * req->rttvar_us,
		    (u32)METAROCE_MIN_PROBE_US);
}

/*
 * When the timer looks next, within [250 us, 5 ms], and how late it may
 * be (*@slack). With packets that a later one may overtake, every half
 * round trip, punctually: the time rule of loss detection. With one packet
 * out and nothing lost or probed, no time rule applies and only the
 * tail-loss probe can fall due: the timer sleeps until then (lazy), so a
 * latency-bound QP takes no timer interrupt per message, and may expire up
 * to a scheduler tick late, with the tick, instead of programming the
 * clock event device when armed and again when the ACK cancels it (under
 * emulation that costs as much as the rest of a small message).
 */
static ktime_t next_tick(struct soft_req *req, u64 *slack)
{
	s32 quiet;

	req->timer_lazy = req->inflight <= 1 && !req->nr_lost &&
			  !req->rnr_wait && !req->probes;
	if (!req->timer_lazy) {
		*slack = 0;
		return soft_us(clamp_t(u32, req->srtt_us / 2, 250, 5000));
	}
	*slack = TICK_NSEC;
	quiet = soft_now_us() - req->delivered_us;
	return soft_us(clamp_t(s32, (s32)probe_timeout_us(req) - quiet, 250,
			       5000));
}

/*
 * After a send: a lazy timer wakes up once a second packet is out. Only a
 * queued timer counts as armed: a callback running now may have seen
 * nothing in flight and be about to stop for good (it leaves a timer that
 * was started meanwhile queued).
 */
void soft_req_arm_timer(struct soft_req *req)
{
	struct metaroce_soft_qp *sqp = container_of(req, struct metaroce_soft_qp,
						    req);
	ktime_t next;
	u64 slack;

	if (READ_ONCE(sqp->dying))
		return;
	if (!hrtimer_is_queued(&req->timer) ||
	    (req->timer_lazy && req->inflight > 1)) {
		next = next_tick(req, &slack);
		hrtimer_start_range_ns(&req->timer, next, slack,
				       HRTIMER_MODE_REL_SOFT);
	}
}

/* RFC 6298: SRTT + 4 RTTVAR, within the protocol's RTO bounds. */
static u32 rto_from_rtt(const struct soft_req *req)
{
	if (!req->srtt_us)
		return METAROCE_INITIAL_RTO_US;
	return clamp_t(u32, req->srtt_us + 4 * req->rttvar_us,
		       METAROCE_MIN_RTO_US, METAROCE_MAX_RTO_US);
}

/* RFC 6298 estimators over all paths. */
void soft_rtt_sample(struct soft_req *req, u32 rtt_us)
{
	if (!req->srtt_us) {
		req->srtt_us = rtt_us;
		req->rttvar_us = rtt_us / 2;
	} else {
		u32 err = abs((s32)(req->srtt_us - rtt_us));

		req->rttvar_us = req->rttvar_us - req->rttvar_us / 4 + err / 4;
		req->srtt_us = req->srtt_us - req->srtt_us / 8 + rtt_us / 8;
	}
}

static bool is_read_psn(const struct soft_req *req, const struct soft_pkt *e)
{
	return soft_op_asks_responses(req->swqes[e->swqe].wire_op);
}

static void advance(u32 *watermark, u32 tx_seq)
{
	if ((s32)(tx_seq - *watermark) > 0)
		*watermark = tx_seq;
}

/* A new acknowledgment or response: the retry period starts again. */
static void note_progress(struct soft_req *req)
{
	req->progress_ns = ktime_get_ns();
	req->resent_in_period = false;
	req->retries = 0;
}

/* Marks one outstanding PSN delivered. */
static void deliver(struct soft_req *req, struct soft_pkt *e)
{
	if (e->state == PKT_INFLIGHT) {
		req->inflight--;
		req->paths[e->path].inflight--;
	} else if (e->state == PKT_LOST) {
		req->nr_lost--;
	}
	e->state = PKT_DELIVERED;
	req->delivered_us = soft_now_us();
	req->probes = 0;
	if (e->part_end) {
		e->part_end = false;
		req->reads--;
	}
	req->swqes[e->swqe].delivered++;
	soft_path_on_delivered(req, e->path);
}

/*
 * @blame_path: the loss is evidence against the packet's path (the SACK
 * shows later packets arriving); a timeout is not, it hits every path.
 */
static void declare_lost(struct metaroce_dev *mdev, struct soft_req *req,
			 struct soft_pkt *e, bool blame_path)
{
	req->inflight--;
	req->paths[e->path].inflight--;
	e->state = PKT_LOST;
	req->nr_lost++;
	if (e->part_end) {
		e->part_end = false;
		req->reads--;
	}
	if (blame_path)
		soft_path_on_lost(mdev, req, e->path);
}

/*
 * How long after the newest READ response one missing before it is lost:
 * responses leave the responder in order.
 */
static u32 response_gap_us(const struct soft_req *req)
{
	return max_t(u32, req->srtt_us / 2, METAROCE_MIN_REORDER_US);
}

/* How long after its send a packet overtaken by a later one is lost. */
static u32 reorder_window_us(const struct soft_req *req)
{
	if (!req->srtt_us)
		return METAROCE_INITIAL_RTO_US;
	return req->srtt_us + response_gap_us(req);
}

/*
 * The evidence against a PSN: for a data packet and a READ request not yet
 * acknowledged, packets acknowledged after it; for a READ response whose
 * request arrived, responses delivered after it (ACKs for later packets
 * say nothing about responses the responder has yet to send); for one a
 * re-read asked for, none: the responder answers a re-read ahead of the
 * parts it holds, so no response shows it was sent before, and only the
 * timeout calls it lost.
 */
static s32 sent_later_and_arrived(const struct soft_req *req,
				  const struct soft_pkt *e)
{
	if (e->request_acked)
		return e->retx ? 0 : req->response_seq - e->resp_seq;
	return req->acked_tx_seq - e->tx_seq;
}

/*
 * A packet is lost once a packet sent after it has arrived, and either
 * METAROCE_REORDER_ALLOWANCE transmissions after it did, or it has been out
 * longer than a round trip plus a reordering allowance. Returns whether it
 * declared anything lost.
 */
static bool detect_losses(struct metaroce_soft_qp *sqp, u32 now)
{
	struct soft_req *req = &sqp->req;
	u32 span = soft_psn_diff(req->psn_next, req->psn_una);
	u32 window = reorder_window_us(req);
	u32 gap = response_gap_us(req);
	bool any = false;
	u32 i;

	for (i = 0; i < span; i++) {
		struct soft_pkt *e = &req->pkts[soft_psn_add(req->psn_una, i) %
						SOFT_WINDOW];
		s32 later = sent_later_and_arrived(req, e);

		if (e->state != PKT_INFLIGHT || later <= 0)
			continue;
		/*
		 * Responses leave the responder one after another, long after
		 * their request: only the count tells of their loss.
		 */
		if (later >= (s32)req->reorder) {
			metaroce_count(sqp->qp->mdev, LOST_BY_COUNT);
		} else if (!e->request_acked ?
			   (s32)(now - e->sent_us) >= (s32)window :
			   (s32)(now - req->response_seen_us) >= (s32)gap) {
			metaroce_count(sqp->qp->mdev, LOST_BY_TIME);
		} else {
			continue;
		}
		declare_lost(sqp->qp->mdev, req, e, true);
		any = true;
	}
	return any;
}

static void advance_una(struct soft_req *req)
{
	while (req->psn_una != req->psn_next) {
		struct soft_pkt *e = &req->pkts[req->psn_una % SOFT_WINDOW];

		if (e->state != PKT_DELIVERED)
			break;
		e->state = PKT_FREE;
		req->psn_una = soft_psn_add(req->psn_una, 1);
	}
}

/* Whether every packet of @swqe is sent and acknowledged (local: done). */
static bool swqe_finished(const struct soft_swqe *swqe)
{
	if (swqe->local)
		return swqe->done;
	return swqe->npkts && swqe->next_pkt >= swqe->npkts &&
	       swqe->delivered >= swqe->npkts;
}

/* Completes WQEs in order while they are done; fails the QP on an error. */
void soft_comp_complete(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;

	while (qp->sq.own_index != req->fetch_index) {
		struct soft_swqe *swqe = &req->swqes[qp->sq.own_index &
						     (qp->sq.num_slots - 1)];

		if (swqe->status == IB_WC_WR_FLUSH_ERR) {
			/* Ahead of one the responder refused (fail_refused()). */
			soft_qp_fail(qp);
			soft_sq_retire(qp, swqe->wqe.wr_id, swqe->wqe.opcode,
				       swqe->status, 0, true);
			continue;
		}
		if (swqe->status != IB_WC_SUCCESS) {
			/* In error before anyone sees the error completion. */
			soft_qp_fail(qp);
			soft_sq_retire(qp, swqe->wqe.wr_id, swqe->wqe.opcode,
				       swqe->status, 0, true);
			if ((s32)(req->send_index - qp->sq.own_index) < 0)
				req->send_index = qp->sq.own_index;
			return;
		}
		if (!swqe_finished(swqe))
			break;
		/* RNR retries are counted per message. */
		req->rnr_retries = 0;
		soft_sq_retire(qp, swqe->wqe.wr_id, swqe->wqe.opcode,
			       IB_WC_SUCCESS, swqe->length,
			       swqe->wqe.flags & METAROCE_WQE_SIGNALED);
	}
	soft_req_notify_drained(sqp);
}

/* Fails the WQE that owns @psn with @status. */
static void fail_wqe_at(struct soft_req *req, u32 psn, u8 status)
{
	struct soft_pkt *e;

	if (soft_psn_diff(psn, req->psn_una) < 0 ||
	    soft_psn_diff(psn, req->psn_next) >= 0)
		return;
	e = &req->pkts[psn % SOFT_WINDOW];
	if (e->state != PKT_FREE)
		req->swqes[e->swqe].status = status;
}

/*
 * A fatal NAK for @psn: the responder refused it and is in the error state
 * now, so a WQE before it that is not finished (a READ whose responses have
 * not come, a message whose packets the NAK does not acknowledge) never
 * will be. Each completes with IB_WC_WR_FLUSH_ERR, ahead of the refused one
 * (protocol.md section 6), rather than with a retry timeout.
 */
static void fail_refused(struct metaroce_soft_qp *sqp, u32 psn, u8 status)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;
	u32 mask = qp->sq.num_slots - 1, i;
	struct soft_pkt *e;

	if (soft_psn_diff(psn, req->psn_una) < 0 ||
	    soft_psn_diff(psn, req->psn_next) >= 0)
		return;
	e = &req->pkts[psn % SOFT_WINDOW];
	if (e->state == PKT_FREE)
		return;
	for (i = qp->sq.own_index; i != req->fetch_index; i++) {
		struct soft_swqe *swqe = &req->swqes[i & mask];

		if ((i & mask) == e->swqe)
			break;
		if (swqe->status == IB_WC_SUCCESS && !swqe_finished(swqe))
			swqe->status = IB_WC_WR_FLUSH_ERR;
	}
	req->swqes[e->swqe].status = status;
}

static void handle_nak(struct metaroce_soft_qp *sqp, struct soft_pkt_info *pkt)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;
	u32 psn = pkt->ack.nak_psn;
	struct soft_pkt *e;

	metaroce_count(qp->mdev, RX_NAKS);
	switch (pkt->ack.syndrome) {
	case METAROCE_NAK_RNR:
		if (soft_psn_diff(psn, req->psn_una) < 0 ||
		    soft_psn_diff(psn, req->psn_next) >= 0)
			return;
		e = &req->pkts[psn % SOFT_WINDOW];
		if (e->state == PKT_INFLIGHT)
			declare_lost(qp->mdev, req, e, false);
		/* The responder NAKs each packet it refuses: one wait, one retry. */
		if (req->rnr_wait)
			return;
		if (qp->attr.rnr_retry != 7 &&
		    ++req->rnr_retries > qp->attr.rnr_retry) {
			metaroce_count(qp->mdev, RNR_RETRY_EXCEEDED);
			fail_wqe_at(req, psn, IB_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		req->rnr_wait = true;
		req->rnr_until_us = soft_now_us() +
				    rnr_timer_us[pkt->ack.nak_arg & 31];
		/* An RNR NAK is an answer: no transport retry is spent. */
		note_progress(req);
		/* Re-arms a pending timer; a running one sees it queued. */
		req->timer_lazy = false;
		hrtimer_start(&req->timer,
			      soft_us(rnr_timer_us[pkt->ack.nak_arg & 31]),
			      HRTIMER_MODE_REL_SOFT);
		return;
	case METAROCE_NAK_REMOTE_ACCESS:
		fail_refused(sqp, psn, IB_WC_REM_ACCESS_ERR);
		return;
	case METAROCE_NAK_REMOTE_OP:
		fail_refused(sqp, psn, IB_WC_REM_OP_ERR);
		return;
	default:
		fail_refused(sqp, psn, IB_WC_REM_INV_REQ_ERR);
		return;
	}
}

/* Whether the worker has something it may send now. */
static bool want_tx(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;

	if (req->rnr_wait || req->inflight >= soft_cc_window(&req->cc))
		return false;
	return req->nr_lost || req->send_index != req->fetch_index ||
	       metaroce_queue_producer(&qp->sq) != req->fetch_index;
}

/* Once per window of data, the allowance falls back by an eighth. */
static void decay_reordering(struct soft_req *req)
{
	if (soft_psn_diff(req->psn_una, req->reorder_decay_psn) < 0)
		return;
	req->reorder = max_t(u32, req->reorder - req->reorder / 8,
			     METAROCE_REORDER_ALLOWANCE);
	req->reorder_decay_psn = soft_psn_add(req->psn_una, SOFT_WINDOW);
}

/* After the scoreboard changed: losses, completions, timer, worker. */
static void after_update(struct metaroce_soft_qp *sqp, u32 delivered,
			 u32 ce_count, u32 cum_psn)
{
	struct soft_req *req = &sqp->req;

	if (delivered) {
		note_progress(req);
		req->rto_us = rto_from_rtt(req);
	}
	detect_losses(sqp, soft_now_us());
	advance_una(req);
	decay_reordering(req);
	soft_cc_on_ack(&req->cc, delivered, ce_count, cum_psn, req->psn_next);
	soft_comp_complete(sqp);

	if (!req->inflight && !req->nr_lost && !req->rnr_wait)
		hrtimer_try_to_cancel(&req->timer);
	if (want_tx(sqp))
		soft_schedule_tx(sqp);
	else if (!req->inflight && !req->nr_lost && !req->rnr_wait &&
		 req->send_index == req->fetch_index)
		soft_sq_go_idle(sqp);
}

/*
 * A first transmission of @e arrives although @overtaken later ones were
 * known to have arrived before it: the paths reorder that much, so wait
 * for that many before calling a packet lost.
 */
static void note_reordering(struct soft_req *req, const struct soft_pkt *e,
			    s32 overtaken)
{
	if (e->retx || overtaken <= 0)
		return;
	req->reorder = clamp_t(u32, max_t(u32, req->reorder, overtaken + 1),
			       METAROCE_REORDER_ALLOWANCE,
			       METAROCE_MAX_REORDER_ALLOWANCE);
}

/*
 * The peer has PSN @e: a data packet is delivered; a READ PSN only says
 * the request arrived (its response delivers it). @acked_before is the
 * acknowledged watermark before this ACK. Returns 1 if delivered.
 */
static u32 peer_has(struct soft_req *req, struct soft_pkt *e, u32 acked_before)
{
	if (e->state == PKT_DELIVERED || e->state == PKT_FREE)
		return 0;
	advance(&req->acked_tx_seq, e->tx_seq);
	if (is_read_psn(req, e)) {
		/*
		 * The responder has the request: its first acknowledgment is
		 * progress, though nothing is delivered; a re-read's is not.
		 */
		if (!e->request_acked_once)
			note_progress(req);
		e->request_acked_once = true;
		e->request_acked = true;
		return 0;
	}
	note_reordering(req, e, acked_before - e->tx_seq);
	deliver(req, e);
	return 1;
}

/* Whether an ACK claims any PSN at or past @psn_next, never sent. */
static bool acks_unsent(const struct soft_pkt_info *pkt, u32 psn_next)
{
	s32 first = soft_psn_diff(psn_next, pkt->ack.cum_psn) - 1;
	u32 w, word;
	s32 skip;

	/* A word at a time: bit 0 of the SACK is the word's top bit. */
	for (w = 0; w < METAROCE_SACK_WORDS; w++) {
		skip = first - 32 * (s32)w;
		if (skip >= 32)
			continue;
		word = pkt->ack.sack[w];
		if (skip > 0)
			word &= 0xffffffffU >> skip;
		if (word)
			return true;
	}
	return false;
}

/*
 * The selective part of an ACK, whose bits acks_unsent() found all on
 * PSNs sent. Returns how many packets it newly delivered.
 */
static u32 sacked(struct soft_req *req, const struct soft_pkt_info *pkt,
		  u32 acked_before)
{
	u32 delivered = 0, w, word, bit, psn;

	for (w = 0; w < METAROCE_SACK_WORDS; w++) {
		for (word = pkt->ack.sack[w]; word; word &= ~BIT(bit)) {
			/* SACK bit 32 * w + 31 - bit: PSN order is MSB first. */
			bit = __fls(word);
			psn = soft_psn_add(pkt->ack.cum_psn, 32 * w + 32 - bit);
			if (soft_psn_diff(psn, req->psn_una) < 0)
				continue;
			delivered += peer_has(req, &req->pkts[psn % SOFT_WINDOW],
					      acked_before);
		}
	}
	return delivered;
}

/*
 * Whether a fatal NAK names a PSN a re-read asked for, which may have
 * arrived since: the responder refuses a re-read at its turn when the
 * region was revoked meanwhile, and the responses it asked for may come
 * from the first reading first. The responder is in the error state then
 * all the same (protocol.md sections 6 and 12.1).
 */
static bool late_fatal_nak(const struct soft_req *req,
			   const struct soft_pkt_info *pkt)
{
	u32 i, n = min_t(u32, req->nr_rereads, METAROCE_REREAD_HISTORY);

	if (pkt->ack.syndrome == METAROCE_NAK_RNR)
		return false;
	for (i = 0; i < n; i++) {
		const struct soft_reread *rr = &req->rereads[i];
		s32 k = soft_psn_diff(pkt->ack.nak_psn, rr->psn);

		if (k >= 0 && k < rr->npkts)
			return true;
	}
	return false;
}

/*
 * Whether a NAK refuses a PSN that is outstanding: sent, not yet known
 * received, and not among those its own cum_psn says the responder has.
 * A READ or atomic response PSN behind cum_psn is still outstanding until
 * its response arrives: cum_psn says the responder accepted the request,
 * and it refuses a part it accepted when the region is revoked before the
 * part's turn (protocol.md sections 6 and 12.1). So is, for a fatal NAK, a
 * PSN a re-read asked for.
 */
static bool nak_outstanding(const struct soft_req *req,
			    const struct soft_pkt_info *pkt)
{
	u32 psn = pkt->ack.nak_psn;
	const struct soft_pkt *e;

	if (soft_psn_diff(psn, req->psn_next) >= 0)
		return false;
	if (soft_psn_diff(psn, req->psn_una) < 0)
		return late_fatal_nak(req, pkt);
	e = &req->pkts[psn % SOFT_WINDOW];
	if ((e->state == PKT_INFLIGHT || e->state == PKT_LOST) &&
	    (soft_psn_diff(psn, pkt->ack.cum_psn) >= 0 || is_read_psn(req, e)))
		return true;
	return late_fatal_nak(req, pkt);
}

/*
 * What a fatal NAK refuses: the PSN it names or, for a late one whose work
 * request finished, the first PSN after it of one that has not; psn_next
 * if none is left.
 */
static u32 refused_psn(const struct soft_req *req, u32 psn)
{
	const struct soft_pkt *e;

	if (soft_psn_diff(psn, req->psn_una) < 0)
		psn = req->psn_una;
	for (; psn != req->psn_next; psn = soft_psn_add(psn, 1)) {
		e = &req->pkts[psn % SOFT_WINDOW];
		if (e->state != PKT_DELIVERED ||
		    !swqe_finished(&req->swqes[e->swqe]))
			break;
	}
	return psn;
}

/*
 * Whether an ACK echoes a timestamp we sent (protocol.md section 12.1):
 * our timestamps carry a secret offset, and the packet echoed went out no
 * earlier than the first transmission of the oldest PSN outstanding, and
 * at most METAROCE_MAX_RTO_US ago. An off-path sender has to guess it.
 * Returns the age of the echoed packet, or -1.
 */
static s32 echo_age(const struct soft_req *req,
		    const struct soft_pkt_info *pkt, u32 now)
{
	u32 oldest = req->pkts[req->psn_una % SOFT_WINDOW].first_us;
	u32 age = now - (pkt->ack.ts_echo - req->ts_offset);

	if (age > min_t(u32, now - oldest, METAROCE_MAX_RTO_US))
		return -1;
	return age;
}

void soft_comp_rx_ack(struct metaroce_soft_qp *sqp, struct soft_pkt_info *pkt)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;
	u32 cum = pkt->ack.cum_psn, delivered = 0, span, i;
	u32 acked_before;
	s32 rtt;

	metaroce_count(qp->mdev, RX_ACKS);
	spin_lock_bh(&req->lock);
	/*
	 * Everything is checked before anything is acted upon: an ACK that
	 * fails a check changes no state (protocol.md section 12.1).
	 */
	if (soft_psn_diff(cum, req->psn_next) > 0 ||
	    acks_unsent(pkt, req->psn_next)) {
		/* Acknowledges PSNs never sent. */
		metaroce_count(qp->mdev, RX_ACK_INVALID);
		goto out;
	}
	/* Nothing outstanding: an old ACK, with nothing to tell. */
	if (req->psn_una == req->psn_next)
		goto out;
	if (pkt->ack.syndrome != METAROCE_ACK && !nak_outstanding(req, pkt)) {
		metaroce_count(qp->mdev, RX_ACK_INVALID);
		goto out;
	}
	rtt = echo_age(req, pkt, soft_now_us());
	if (rtt < 0) {
		metaroce_count(qp->mdev, RX_ACK_BAD_ECHO);
		goto out;
	}

	/*
	 * An ACK behind one already seen (overtaken on another path) is old
	 * news (protocol.md section 3.3): no RTT sample, no fair-share hint.
	 * Every PSN before the newest cum_psn is delivered, so psn_una is at
	 * or past it.
	 */
	if (soft_psn_diff(cum, req->psn_una) >= 0) {
		soft_rtt_sample(req, rtt);
		if (pkt->ack.echo_path < req->num_paths)
			soft_path_on_rtt(req, pkt->ack.echo_path, rtt);
		req->cc.fair_share = pkt->ack.fair_share;
	}

	/* Cumulative part. */
	acked_before = req->acked_tx_seq;
	span = max(soft_psn_diff(cum, req->psn_una), 0);
	for (i = 0; i < span; i++)
		delivered += peer_has(req, &req->pkts[soft_psn_add(req->psn_una,
							   i) % SOFT_WINDOW],
				      acked_before);
	delivered += sacked(req, pkt, acked_before);
	if (pkt->ack.syndrome != METAROCE_ACK) {
		if (pkt->ack.syndrome != METAROCE_NAK_RNR)
			pkt->ack.nak_psn = refused_psn(req, pkt->ack.nak_psn);
		handle_nak(sqp, pkt);
	}
	after_update(sqp, delivered, pkt->ack.ce_count, cum);
out:
	spin_unlock_bh(&req->lock);
}

/*
 * A response to the READ_REQ (part or re-read) sent in transmission
 * @tx_seq, at @psn: the responder has that request, so every PSN it asked
 * for is a response due, whatever became of the ACK.
 */
static void request_arrived(struct soft_req *req, u32 psn, u32 tx_seq)
{
	u32 p = psn;

	/* Back to the request's first PSN, then over every PSN it asked for. */
	while (p != req->psn_una &&
	       req->pkts[soft_psn_add(p, -1) % SOFT_WINDOW].tx_seq == tx_seq)
		p = soft_psn_add(p, -1);
	for (; p != req->psn_next; p = soft_psn_add(p, 1)) {
		struct soft_pkt *e = &req->pkts[p % SOFT_WINDOW];

		if (e->tx_seq != tx_seq)
			break;
		e->request_acked = true;
		e->request_acked_once = true;
	}
}

/*
 * The scoreboard entry of a response's PSN if it is outstanding; else the
 * response is a duplicate (or for a PSN never asked for), counted, NULL.
 */
static struct soft_pkt *response_due(struct metaroce_soft_qp *sqp,
				     const struct soft_pkt_info *pkt)
{
	struct soft_req *req = &sqp->req;
	struct soft_pkt *e;

	if (soft_psn_diff(pkt->psn, req->psn_una) < 0 ||
	    soft_psn_diff(pkt->psn, req->psn_next) >= 0) {
		metaroce_count(sqp->qp->mdev, RX_DUPLICATE);
		return NULL;
	}
	e = &req->pkts[pkt->psn % SOFT_WINDOW];
	if (e->state == PKT_DELIVERED || e->state == PKT_FREE) {
		metaroce_count(sqp->qp->mdev, RX_DUPLICATE);
		return NULL;
	}
	return e;
}

/* A response to @e was placed: delivers it, with the loss evidence it is. */
static void response_placed(struct metaroce_soft_qp *sqp,
			    const struct soft_pkt_info *pkt, struct soft_pkt *e)
{
	struct soft_req *req = &sqp->req;

	if (!e->request_acked)
		request_arrived(req, pkt->psn, e->tx_seq);
	/*
	 * Responses come in request order, except that the responder answers
	 * a re-read (RETX) ahead of the parts it has queued: only a response
	 * to a part's first request shows that earlier ones are missing.
	 */
	if (!e->retx && !(pkt->flags & METAROCE_F_RETX)) {
		note_reordering(req, e, req->response_seq - e->resp_seq);
		if ((s32)(e->resp_seq - req->response_seq) > 0) {
			req->response_seq = e->resp_seq;
			req->response_seen_us = soft_now_us();
		}
	}
	deliver(req, e);
	after_update(sqp, 1, pkt->ce, req->psn_una);
}

void soft_comp_rx_read_resp(struct metaroce_soft_qp *sqp,
			    struct soft_pkt_info *pkt)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;
	struct soft_swqe *swqe;
	struct soft_pkt *e;
	u32 k, offset, len;
	int err;

	spin_lock_bh(&req->lock);
	e = response_due(sqp, pkt);
	if (!e)
		goto out;
	swqe = &req->swqes[e->swqe];
	k = soft_psn_diff(pkt->psn, swqe->first_psn);
	/* Response k of the READ: never past its end, whatever came in. */
	if (swqe->wire_op != METAROCE_OP_READ_REQ || k >= swqe->npkts) {
		metaroce_count(qp->mdev, RX_MALFORMED);
		goto out;
	}
	offset = k * qp->mtu;
	len = offset < swqe->length ? min(qp->mtu, swqe->length - offset) : 0;
	if (offset > swqe->length || pkt->deth.addr != offset ||
	    pkt->payload_len != len) {
		metaroce_count(qp->mdev, RX_MALFORMED);
		goto out;
	}
	err = soft_place_in_sges(swqe->sge, swqe->mr, swqe->wqe.num_sge,
				 offset, pkt->skb, pkt->payload_offset, len);
	if (err == -EACCES) {
		/* A destination MR was deregistered: the READ fails. */
		if (swqe->status == IB_WC_SUCCESS)
			swqe->status = IB_WC_LOC_PROT_ERR;
		soft_comp_complete(sqp);
		goto out;
	}
	if (err) {
		metaroce_count(qp->mdev, RX_MALFORMED);
		goto out;
	}
	response_placed(sqp, pkt, e);
out:
	spin_unlock_bh(&req->lock);
}

/*
 * An ATOMIC_RESP: for an outstanding atomic of ours and its MSN (the rest
 * of its DETH was checked on arrival), the word's former value, placed in
 * host order in the WQE's one 8-byte SGE.
 */
void soft_comp_rx_atomic_resp(struct metaroce_soft_qp *sqp,
			      struct soft_pkt_info *pkt)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;
	struct soft_swqe *swqe;
	struct soft_pkt *e;
	__be64 wire;
	u64 value;
	int err;

	spin_lock_bh(&req->lock);
	e = response_due(sqp, pkt);
	if (!e)
		goto out;
	swqe = &req->swqes[e->swqe];
	if (!soft_op_is_atomic(swqe->wire_op) || pkt->deth.msn != swqe->msn ||
	    skb_copy_bits(pkt->skb, pkt->payload_offset, &wire, sizeof(wire))) {
		metaroce_count(qp->mdev, RX_MALFORMED);
		goto out;
	}
	value = be64_to_cpu(wire);
	err = soft_place_buf_in_sges(swqe->sge, swqe->mr, swqe->wqe.num_sge, 0,
				     &value, sizeof(value));
	if (err) {
		/* The destination MR was deregistered: the atomic fails. */
		if (swqe->status == IB_WC_SUCCESS)
			swqe->status = IB_WC_LOC_PROT_ERR;
		soft_comp_complete(sqp);
		goto out;
	}
	response_placed(sqp, pkt, e);
out:
	spin_unlock_bh(&req->lock);
}

/* Retransmission timeout: every packet out longer than @rto is lost. */
static bool expire_packets(struct metaroce_soft_qp *sqp, u32 now, u32 rto)
{
	struct soft_req *req = &sqp->req;
	u32 span = soft_psn_diff(req->psn_next, req->psn_una);
	bool any = false;
	u32 i;

	for (i = 0; i < span; i++) {
		struct soft_pkt *e = &req->pkts[soft_psn_add(req->psn_una, i) %
						SOFT_WINDOW];

		if (e->state == PKT_INFLIGHT &&
		    (s32)(now - e->sent_us) >= (s32)rto) {
			declare_lost(sqp->qp->mdev, req, e, false);
			any = true;
		}
	}
	return any;
}

/*
 * Tail-loss probe: nothing delivered for two round trips, so perhaps the
 * last packets were lost and nothing after them can reveal it. Resending
 * the newest packet in flight draws a SACK that does.
 */
static void probe_tail(struct metaroce_soft_qp *sqp)
{
	struct soft_req *req = &sqp->req;
	u32 psn = req->psn_next;

	while (psn != req->psn_una) {
		struct soft_pkt *e;

		psn = soft_psn_add(psn, -1);
		e = &req->pkts[psn % SOFT_WINDOW];
		if (e->state == PKT_INFLIGHT) {
			declare_lost(sqp->qp->mdev, req, e, false);
			return;
		}
	}
}

/*
 * Nothing delivered for a while: probe first, then time out. Neither waits
 * longer than the QP's local ACK timeout (@limit_us), after which an IB
 * requester retries.
 */
static bool handle_quiet(struct metaroce_soft_qp *sqp, u32 now, u32 limit_us)
{
	struct soft_req *req = &sqp->req;
	s32 quiet = now - req->delivered_us;
	u32 pto = min(probe_timeout_us(req), limit_us);
	u32 rto = min(req->rto_us, limit_us);

	if (!req->inflight || quiet < (s32)pto)
		return false;
	if (req->probes < METAROCE_MAX_PROBES) {
		/* Probes in a row are a probe timeout apart too. */
		if (req->probes && (s32)(now - req->probe_us) < (s32)pto)
			return false;
		req->probes++;
		req->probe_us = now;
		metaroce_count(sqp->qp->mdev, TAIL_PROBES);
		probe_tail(sqp);
		return true;
	}
	if (quiet < (s32)rto || !expire_packets(sqp, now, rto))
		return false;
	metaroce_count(sqp->qp->mdev, RTO_EXPIRED);
	req->rto_us = min_t(u32, 2 * req->rto_us, METAROCE_MAX_RTO_US);
	/* The next timeout is a full (backed off) RTO away. */
	req->delivered_us = now;
	soft_cc_on_rto(&req->cc);
	return true;
}

/* The oldest WQE not yet completed fails with @status. */
static void fail_oldest(struct metaroce_soft_qp *sqp, u8 status)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_req *req = &sqp->req;

	if (qp->sq.own_index == req->fetch_index)
		return;
	req->swqes[qp->sq.own_index & (qp->sq.num_slots - 1)].status = status;
	soft_comp_complete(sqp);
}

/* IB local ACK timeout: 4.096 us * 2^timeout; 0 is infinite. */
static u64 ib_timeout_ns(u8 timeout)
{
	return timeout ? 4096ULL << timeout : 0;
}

/*
 * The requester's timer: a tick every half round trip while packets are
 * out, and the end of an RNR wait. Detects losses by time, probes the tail,
 * times out, and fails the QP once more than retry_cnt periods of the QP's
 * timeout passed without progress, each with something resent (a period in
 * which nothing was resent was no retry).
 */
enum hrtimer_restart soft_req_timer_fn(struct hrtimer *timer)
{
	struct soft_req *req = container_of(timer, struct soft_req, timer);
	struct metaroce_soft_qp *sqp = container_of(req, struct metaroce_soft_qp,
						    req);
	struct metaroce_qp *qp = sqp->qp;
	u64 limit = ib_timeout_ns(qp->attr.timeout);
	ktime_t next;
	u64 now_ns, slack;
	u32 now;

	spin_lock_bh(&req->lock);
	/*
	 * Read the clocks under the lock: a send that took it first may have
	 * started a retry period later than a clock read before it, and the
	 * period would then look ended at once.
	 */
	now_ns = ktime_get_ns();
	now = soft_now_us();
	if (READ_ONCE(sqp->dying))
		goto out;
	if (req->rnr_wait && (s32)(now - req->rnr_until_us) >= 0) {
		req->rnr_wait = false;
		soft_schedule_tx(sqp);
	}
	if (!req->inflight && !req->nr_lost && !req->rnr_wait)
		goto out;

	if (detect_losses(sqp, now) ||
	    handle_quiet(sqp, now, limit ? div_u64(limit, NSEC_PER_USEC) :
					   U32_MAX))
		soft_schedule_tx(sqp);

	if (limit && (req->inflight || req->nr_lost) &&
	    now_ns - req->progress_ns >= limit) {
		bool retried = req->resent_in_period;

		req->progress_ns = now_ns;
		req->resent_in_period = false;
		if (retried && ++req->retries > qp->attr.retry_cnt) {
			metaroce_count(qp->mdev, RETRY_EXCEEDED);
			fail_oldest(sqp, IB_WC_RETRY_EXC_ERR);
			goto out;
		}
	}
	/* Re-armed meanwhile (a send, an RNR NAK): that one stands. */
	if (hrtimer_is_queued(timer))
		goto out;
	next = next_tick(req, &slack);
	hrtimer_set_expires_range_ns(timer,
				     ktime_add(hrtimer_cb_get_time(timer), next),
				     slack);
	spin_unlock_bh(&req->lock);
	return HRTIMER_RESTART;
out:
	spin_unlock_bh(&req->lock);
	return HRTIMER_NORESTART;
}
