// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Protocol v2, per QP: the core's state set up and reset, the one timer
 * (probe timeouts, delayed ACKs, a failed path's probe), work requests
 * completed in posting order, and the flush of the error state.
 */
#include <linux/slab.h>

#include "../metaroce_loc.h"
#include "../metaroce_soft.h"
#include "mrs.h"

/*
 * The timer is never armed sooner than this from now: a deadline only the
 * worker can move must not fire the timer in a loop that keeps the worker
 * (on this CPU) from running.
 */
#define MRS_TIMER_MIN_US	10

/*
 * A path's first window: v1's 256 packets per QP, spread over its paths;
 * and the most a QP has in flight over all its paths (mrs_cap_window()).
 */
#define MRS_QP_WINDOW		256
#define MRS_MIN_INITIAL_CWND	16

static void path_acked(void *ctx, u64 cookie)
{
	struct mrs_qp *mq = ctx;
	u32 ssn = (u32)cookie;

	if (!mrc_stream_tx_acked(&mq->stx, ssn))
		return;
	if (mrs_response_of(mq, ssn))
		mrs_response_delivered(mq, ssn);
	else
		mrc_req_delivered(&mq->req, ssn);
}

static void path_lost(void *ctx, u64 cookie)
{
	struct mrs_qp *mq = ctx;

	mrc_stream_tx_lost(&mq->stx, (u32)cookie, (int)(cookie >> 32));
}

/* The device's counters of path failures, recoveries and route moves. */
static void path_event(void *ctx, enum mrc_path_event ev)
{
	struct metaroce_dev *mdev = ((struct mrs_qp *)ctx)->sqp->qp->mdev;

	switch (ev) {
	case MRC_PATH_EV_FAILED:
		metaroce_count(mdev, PATH_FAILED);
		break;
	case MRC_PATH_EV_RECOVERED:
		metaroce_count(mdev, PATH_RECOVERED);
		break;
	case MRC_PATH_EV_NEW_ROUTE:
		metaroce_count(mdev, PATH_MOVED);
		break;
	}
}

const struct mrc_path_ops mrs_path_ops = {
	.acked = path_acked,
	.lost = path_lost,
	.event = path_event,
};

/*
 * Whether the peer has taken nothing for longer than the QP's timeout
 * times (retry_cnt + 1) while a work request of ours waits: then the
 * oldest fails with a retry error, and the QP with it, as in IB. Only the
 * requester times out: a responder's answers go on being resent (as an IB
 * responder answers every repeat), and a QP with nothing posted never
 * fails on its own. Progress is a delivery, a response, an RNR NAK or the
 * end of its wait; a READ whose answer never comes times out too.
 */
static u64 retry_deadline(const struct mrs_qp *mq)
{
	const struct metaroce_qp *qp = mq->sqp->qp;
	u64 limit_us = qp->attr.timeout ?
		       div_u64(4096ULL << qp->attr.timeout, NSEC_PER_USEC) : 0;

	if (!limit_us || mq->req.head == mq->req.tail || mq->rnr_until_us)
		return ~0ULL;
	return mq->progress_us + limit_us * (qp->attr.retry_cnt + 1) + 1;
}

static bool retry_exceeded(const struct mrs_qp *mq, u64 now)
{
	return now >= retry_deadline(mq);
}

/*
 * Arms the timer at the earliest of the paths' probe timeouts and delayed
 * ACKs, and, while data waits for room, a failed path's probe. Under the
 * lock; a timer that fires early finds nothing to do and arms again.
 */
void mrs_arm_timer(struct mrs_qp *mq)
{
	u64 next = mrc_conn_tx_deadline(&mq->conn), t;
	unsigned long i;

	/* Per packet: only the paths that owe an ACK, not all 64. */
	for_each_set_bit(i, &mq->ack_due, MRC_MAX_PATHS) {
		t = mq->prx[i].ack_due_us;
		if (t < next)
			next = t;
	}
	if (mq->blocked) {
		t = mrc_conn_tx_retry_at(&mq->conn);
		if (t < next)
			next = t;
	}
	if (mq->rnr_until_us && mq->rnr_until_us < next)
		next = mq->rnr_until_us;
	t = retry_deadline(mq);
	if (t < next)
		next = t;
	if (next == ~0ULL || READ_ONCE(mq->sqp->dying))
		return;
	next = max(next, mrs_now_us() + MRS_TIMER_MIN_US);
	if (hrtimer_is_queued(&mq->timer) &&
	    ktime_to_ns(hrtimer_get_expires(&mq->timer)) <=
	    (s64)(next * NSEC_PER_USEC))
		return;
	hrtimer_start(&mq->timer, ns_to_ktime(next * NSEC_PER_USEC),
		      HRTIMER_MODE_ABS_SOFT);
}

static void fail_oldest(struct metaroce_soft_qp *sqp, u8 status)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_swqe *swqe = &sqp->req.swqes[sqp->v2->req.head &
						 (qp->sq.num_slots - 1)];

	if (swqe->status == IB_WC_SUCCESS)
		swqe->status = status;
}

static enum hrtimer_restart mrs_timer_fn(struct hrtimer *timer)
{
	struct mrs_qp *mq = container_of(timer, struct mrs_qp, timer);
	struct metaroce_soft_qp *sqp = mq->sqp;
	unsigned long due = 0, i;
	bool kick, fail = false;
	u64 now;

	spin_lock_bh(&sqp->resp.lock);
	/*
	 * The clock is read under the lock: every time the core holds was
	 * taken under it before, and time going back would wrap the core's
	 * differences (a retry error, or a huge RTT sample, at once).
	 */
	now = mrs_now_us();
	mrc_conn_tx_timer(&mq->conn, now, &mrs_path_ops, mq);
	if (retry_exceeded(mq, now)) {
		fail_oldest(sqp, IB_WC_RETRY_EXC_ERR);
		metaroce_count(sqp->qp->mdev, RETRY_EXCEEDED);
		fail = true;
	}
	for_each_set_bit(i, &mq->ack_due, MRC_MAX_PATHS) {
		if (mq->prx[i].ack_due_us <= now)
			due |= BIT(i);
	}
	/* Sent below, after the lock: not armed for again meanwhile. */
	mq->ack_due &= ~due;
	/*
	 * The worker looks again, and says again whether it is blocked: a
	 * probe time left armed until it runs would fire the timer in a loop
	 * that keeps it (on this CPU) from running.
	 */
	kick = mq->stx.resend_len || mq->blocked;
	mq->blocked = false;
	if (mq->rnr_until_us && mq->rnr_until_us <= now) {
		/* The wait counts as progress: the retry clock starts again. */
		mq->rnr_until_us = 0;
		mq->progress_us = now;
		kick = true;
	}
	if (!fail)
		mrs_arm_timer(mq);
	spin_unlock_bh(&sqp->resp.lock);

	if (fail)
		soft_qp_fail(sqp->qp);
	for_each_set_bit(i, &due, MRC_MAX_PATHS)
		mrs_send_ack(sqp, i);
	if (kick)
		soft_schedule_tx(sqp);
	return HRTIMER_NORESTART;
}

static void free_state(struct mrs_qp *mq)
{
	kvfree(mq->resps);
	kvfree(mq->requests);
	kvfree(mq->wrs);
	kvfree(mq->dst);
	kvfree(mq->prx);
	kvfree(mq->ptx);
	kvfree(mq);
}

int mrs_qp_create(struct metaroce_soft_qp *sqp, gfp_t gfp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_qp *mq;
	u32 n, i;

	/* About 60 KiB, and 7 KiB per path: no need for contiguous pages. */
	mq = kvzalloc(sizeof(*mq), gfp);
	if (!mq)
		return -ENOMEM;
	n = qp->ibqp.qp_type == IB_QPT_RC ? qp->mdev->num_paths : 1;
	mq->num_paths = clamp_t(u32, n, 1, MRC_MAX_PATHS);
	mq->sqp = sqp;
	mq->ptx = kvcalloc(mq->num_paths, sizeof(*mq->ptx), gfp);
	mq->prx = kvcalloc(MRC_MAX_PATHS, sizeof(*mq->prx), gfp);
	mq->dst = kvcalloc(mq->num_paths, sizeof(*mq->dst), gfp);
	mq->wrs = kvcalloc(qp->sq.num_slots, sizeof(*mq->wrs), gfp);
	mq->requests = kvcalloc(MRC_MAX_REQUESTS, sizeof(*mq->requests), gfp);
	mq->resps = kvcalloc(MRS_MAX_RESPONSES, sizeof(*mq->resps), gfp);
	if (!mq->ptx || !mq->prx || !mq->dst || !mq->wrs || !mq->requests ||
	    !mq->resps)
		goto err;
	for (i = 0; i < mq->num_paths; i++) {
		if (dst_cache_init(&mq->dst[i].cache, gfp & ~__GFP_ACCOUNT))
			goto err_dst;
	}
	hrtimer_init(&mq->timer, CLOCK_MONOTONIC, HRTIMER_MODE_ABS_SOFT);
	mq->timer.function = mrs_timer_fn;
	sqp->v2 = mq;
	mrs_qp_reset(sqp);
	return 0;

err_dst:
	while (i--)
		dst_cache_destroy(&mq->dst[i].cache);
err:
	free_state(mq);
	return -ENOMEM;
}

/* After the soft QP's worker is stopped for good (or for a reset). */
void mrs_qp_quiesce(struct metaroce_soft_qp *sqp)
{
	hrtimer_cancel(&sqp->v2->timer);
}

void mrs_qp_destroy(struct metaroce_soft_qp *sqp)
{
	struct mrs_qp *mq = sqp->v2;
	u32 i;

	hrtimer_cancel(&mq->timer);
	for (i = 0; i < mq->num_paths; i++)
		dst_cache_destroy(&mq->dst[i].cache);
	free_state(mq);
	sqp->v2 = NULL;
}

/* The receiving half: the peer's stream and our paths' maps. */
static void rx_reset(struct mrs_qp *mq)
{
	struct metaroce_qp *qp = mq->sqp->qp;
	u32 i;

	for (i = 0; i < MRC_MAX_PATHS; i++)
		mrc_path_rx_init(&mq->prx[i], 0);
	mq->ack_due = 0;
	mrc_stream_rx_init(&mq->srx, qp->attr.rq_psn, 0,
			   qp->attr.max_dest_rd_atomic);
	mrs_responses_reset(mq);
	mq->refused = false;
}

/*
 * A QP has at most MRS_QP_WINDOW packets in flight over all its paths, as
 * on v1, whatever its receiver grants (a link of unknown speed grants
 * nothing). Per-path windows grow on every clean ACK and shrink only on
 * ECN marks; eight of them, each up to 255 packets, overran a link that
 * drops instead of marking (measured on make bench's two VMs: 18% of the
 * data packets dropped, ib_write_bw 1.2x rxe's, against v1's 0.9% and
 * 2.4x).
 */
void mrs_cap_window(struct mrs_qp *mq)
{
	if (!mq->conn.limit || mq->conn.limit > MRS_QP_WINDOW)
		mq->conn.limit = MRS_QP_WINDOW;
}

/*
 * The sending half: paths, our stream, the requester. In RTR (@early) the
 * stream starts at the peer's first SSN, the one both ends know then.
 */
static void tx_reset(struct mrs_qp *mq, bool early)
{
	struct metaroce_qp *qp = mq->sqp->qp;
	u32 cwnd = max_t(u32, MRS_MIN_INITIAL_CWND,
			 MRS_QP_WINDOW / mq->num_paths) * MRC_CWND_ONE;
	u32 i;

	for (i = 0; i < mq->num_paths; i++) {
		mrc_path_tx_init(&mq->ptx[i], 0,
				 soft_path_entropy(qp->ibqp.qp_num, i), cwnd);
		dst_cache_reset(&mq->dst[i].cache);
		mq->dst[i].route = 0;
	}
	mrc_conn_tx_init(&mq->conn, mq->ptx, mq->num_paths, qp->mtu,
			 get_random_u32());
	mrs_cap_window(mq);
	mrc_stream_tx_init(&mq->stx, early ? qp->attr.rq_psn : qp->attr.sq_psn);
	mq->early = early;
	mrc_req_init(&mq->req, mq->wrs, qp->sq.num_slots, qp->mtu, 0,
		     qp->attr.max_rd_atomic);
	/* The requester's indices are the SQ's, so a WR's slot is its own. */
	mq->req.head = qp->sq.own_index;
	mq->req.send = qp->sq.own_index;
	mq->req.tail = qp->sq.own_index;
	mq->blocked = false;
	mq->rnr_until_us = 0;
	mq->rnr_retries = 0;
}

/* Whether our stream began in RTR: then it goes on in RTS. */
static bool answered_in_rtr(const struct mrs_qp *mq)
{
	return mq->early && mq->stx.next_ssn != mq->sqp->qp->attr.rq_psn;
}

/*
 * Called when the QP is created, reset, made ready to receive (RTR) or to
 * send (RTS): each half starts when the QP can first use it, from the PSNs
 * both ends agreed on. The worker and timer are stopped, or not yet running
 * for that half.
 */
void mrs_qp_reset(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_qp *mq = sqp->v2;
	enum ib_qp_state state = READ_ONCE(qp->state);
	u32 i;

	spin_lock_bh(&sqp->resp.lock);
	if (state == IB_QPS_RESET || READ_ONCE(sqp->dying)) {
		for (i = 0; i < qp->sq.num_slots; i++)
			soft_release_swqe(&sqp->req.swqes[i]);
		for (i = 0; i < qp->rq.num_slots; i++)
			soft_release_rwqe(&sqp->resp.rwqes[i]);
		metaroce_queue_discard(&qp->sq);
		sqp->req.fetch_index = qp->sq.own_index;
		mrs_responses_reset(mq);
	}
	if (state != IB_QPS_RTS)
		rx_reset(mq);
	if (state == IB_QPS_RTS && answered_in_rtr(mq))
		mrc_req_set_max_reqs(&mq->req, qp->attr.max_rd_atomic);
	else
		tx_reset(mq, state == IB_QPS_RTR);
	mq->tx_ready = state == IB_QPS_RTR || state == IB_QPS_RTS;
	spin_unlock_bh(&sqp->resp.lock);
}

/*
 * Whether nothing of ours is in flight on any path. Without the lock: a
 * kernel consumer may post from a completion handler, which runs under it;
 * a stale answer costs one packet sent from this CPU, or a worker run.
 */
bool mrs_quiet(struct metaroce_soft_qp *sqp)
{
	const struct mrs_qp *mq = sqp->v2;
	u32 i;

	for (i = 0; i < mq->num_paths; i++)
		if (READ_ONCE(mq->ptx[i].in_flight))
			return false;
	return true;
}

/* SQD: every work request taken has completed (none is taken in SQD). */
bool mrs_sq_drained(struct metaroce_soft_qp *sqp)
{
	bool ret;

	spin_lock_bh(&sqp->resp.lock);
	ret = sqp->v2->req.head == sqp->req.fetch_index;
	spin_unlock_bh(&sqp->resp.lock);
	return ret;
}

/*
 * Entry to SQD: the drained event is due again, at once if every work
 * request taken has completed. Under the lock mrs_complete() holds.
 */
void mrs_enter_sqd(struct metaroce_soft_qp *sqp)
{
	spin_lock_bh(&sqp->resp.lock);
	sqp->req.sq_drained_sent = false;
	if (sqp->v2->req.head == sqp->req.fetch_index)
		soft_req_notify_drained(sqp);
	spin_unlock_bh(&sqp->resp.lock);
}

/*
 * Completes work requests in posting order while they are done; one that
 * failed fails the QP, and the flush reports the rest. Under the lock.
 */
void mrs_complete(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct mrs_qp *mq = sqp->v2;
	u32 index;

	/*
	 * A completed work request keeps its MRs until its slot is taken
	 * again (or flushed): the worker may be building a resend of it
	 * outside the lock right now.
	 */
	while (mrc_req_next_completion(&mq->req, &index)) {
		struct soft_swqe *swqe = &sqp->req.swqes[index &
						(qp->sq.num_slots - 1)];

		if (swqe->status != IB_WC_SUCCESS) {
			soft_qp_fail(qp);
			soft_sq_retire(qp, swqe->wqe.wr_id, swqe->wqe.opcode,
				       swqe->status, 0, true);
			return;
		}
		soft_sq_retire(qp, swqe->wqe.wr_id, swqe->wqe.opcode,
			       IB_WC_SUCCESS, swqe->length,
			       swqe->wqe.flags & METAROCE_WQE_SIGNALED);
		/* RNR retries are counted per message. */
		mq->rnr_retries = 0;
	}
	if (mq->req.head == sqp->req.fetch_index)
		soft_req_notify_drained(sqp);
}

/*
 * The error state: every work request not completed, and everything still
 * in the ring, completes with a flush error (a failed one with its own
 * status), then the receive queue. Worker context.
 */
void mrs_flush(struct metaroce_soft_qp *sqp)
{
	struct mrs_qp *mq = sqp->v2;

	spin_lock_bh(&sqp->resp.lock);
	hrtimer_try_to_cancel(&mq->timer);
	soft_flush_send_queue(sqp);
	tx_reset(mq, false);
	mrs_responses_reset(mq);
	spin_unlock_bh(&sqp->resp.lock);
	soft_resp_flush(sqp);
}
