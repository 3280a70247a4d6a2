// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The soft-NIC: the NIC engine that runs the MetaRoCE transport in the
 * kernel over an ordinary Ethernet netdev. This file is its face to the
 * verbs layer and the per-QP transmit worker; the transport itself is in
 * metaroce_req.c (send), metaroce_comp.c (ACKs and completions),
 * metaroce_resp.c (receive and placement), metaroce_ud.c (datagrams),
 * metaroce_ack.c, metaroce_path.c and metaroce_cc.c.
 */
#include <linux/slab.h>

#include "metaroce_loc.h"
#include "metaroce_engine.h"
#include "metaroce_soft.h"
#include "soft/mrs.h"

static int soft_dev_open(struct metaroce_dev *mdev)
{
	return metaroce_net_open(dev_net(mdev->ndev));
}

static void soft_dev_close(struct metaroce_dev *mdev)
{
	/* The namespace's sockets outlive devices; nothing to release. */
}

void soft_schedule_tx(struct metaroce_soft_qp *sqp)
{
	/* Work queued for an offline CPU still runs, on another one. */
	if (!READ_ONCE(sqp->dying))
		queue_work_on(sqp->tx_cpu, metaroce_wq, &sqp->tx_work);
}

/* The engine gives up on a QP: error state, then everything is flushed. */
void soft_qp_fail(struct metaroce_qp *qp)
{
	metaroce_qp_fail(qp);
}

/*
 * Everything posted is sent: tell user space that new send WQEs need a
 * doorbell, unless some arrived meanwhile, in which case the worker runs.
 * Also with packets in flight: waiting for their ACK to look at the ring
 * again would hold a ping-pong's next message back whenever the peer's
 * message overtook its ACK of ours.
 */
void soft_sq_go_idle(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	struct metaroce_queue_hdr *hdr = qp->sq.hdr;

	WRITE_ONCE(hdr->doorbell_needed, 1);
	/* Pairs with the provider's barrier between producer and flag. */
	smp_mb();
	if (metaroce_queue_producer(&qp->sq) != READ_ONCE(sqp->req.fetch_index)) {
		WRITE_ONCE(hdr->doorbell_needed, 0);
		soft_schedule_tx(sqp);
	}
}

/* One transmit run of at most @budget packets; the caller holds tx_mutex. */
static void soft_tx_run(struct metaroce_soft_qp *sqp, int budget)
{
	struct metaroce_qp *qp = sqp->qp;
	enum ib_qp_state state = READ_ONCE(qp->state);
	enum soft_tx_result result = TX_IDLE;

	switch (state) {
	case IB_QPS_ERR:
		if (sqp->v2) {
			mrs_flush(sqp);
			return;
		}
		soft_resp_flush(sqp);
		soft_req_flush(sqp);
		return;
	case IB_QPS_RTR:
	case IB_QPS_RTS:
	case IB_QPS_SQD:
	case IB_QPS_SQE:
		break;
	default:
		return;
	}

	/* Running: posts need no doorbell until we say so again. */
	WRITE_ONCE(qp->sq.hdr->doorbell_needed, 0);
	if (!sqp->v2)
		budget -= soft_resp_transmit(sqp, budget);
	/* v2 answers READs and atomics in RTR too (protocol-v2.md 9.1) */
	if (budget > 0 && (state == IB_QPS_RTS || state == IB_QPS_SQD ||
			   (state == IB_QPS_RTR && sqp->v2 &&
			    qp->ibqp.qp_type == IB_QPT_RC))) {
		if (sqp->v2 && qp->ibqp.qp_type == IB_QPT_RC)
			result = mrs_transmit(sqp, &budget);
		else if (qp->ibqp.qp_type == IB_QPT_RC)
			result = soft_req_transmit(sqp, &budget);
		else
			result = soft_ud_transmit(sqp, &budget);
	}

	if (budget <= 0)
		soft_schedule_tx(sqp);
	else if (result == TX_IDLE)
		soft_sq_go_idle(sqp);
	/* TX_BLOCKED: an ACK (or the timer) schedules the worker again. */
}

static void soft_tx_work(struct work_struct *work)
{
	struct metaroce_soft_qp *sqp = container_of(work,
					struct metaroce_soft_qp, tx_work);

	mutex_lock(&sqp->tx_mutex);
	soft_tx_run(sqp, SOFT_TX_BUDGET);
	mutex_unlock(&sqp->tx_mutex);
}

static int soft_qp_create(struct metaroce_qp *qp)
{
	/*
	 * A user's QP is charged to its memory cgroup: at the largest sizes
	 * the copies of the WQEs take some 15 MiB, which had better fail
	 * than wake the OOM killer.
	 */
	gfp_t gfp = qp->is_user ? GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL |
				  __GFP_NOWARN : GFP_KERNEL;
	struct metaroce_soft_qp *sqp;

	/* About 21 KiB (the path table, READ records): no need for contiguous pages. */
	sqp = kvzalloc(sizeof(*sqp), gfp);
	if (!sqp)
		return -ENOMEM;
	sqp->qp = qp;
	sqp->req.swqes = kvcalloc(qp->sq.num_slots, sizeof(*sqp->req.swqes),
				  gfp);
	sqp->resp.rwqes = kvcalloc(qp->rq.num_slots, sizeof(*sqp->resp.rwqes),
				   gfp);
	if (!sqp->req.swqes || !sqp->resp.rwqes)
		goto err;
	if (qp->ibqp.qp_type == IB_QPT_RC && soft_atomic_alloc(&sqp->resp, gfp))
		goto err;
	if (qp->ibqp.qp_type == IB_QPT_RC)
		soft_paths_init(&sqp->req, qp->ibqp.qp_num,
				qp->mdev->num_paths);
	else
		soft_paths_init(&sqp->req, qp->ibqp.qp_num, 1);
	if (!sqp->req.num_paths)
		goto err;

	INIT_WORK(&sqp->tx_work, soft_tx_work);
	mutex_init(&sqp->tx_mutex);
	/* QPs spread over the CPUs by number. */
	sqp->tx_cpu = cpumask_local_spread(qp->ibqp.qp_num, NUMA_NO_NODE);
	soft_req_init(sqp);
	soft_resp_init(sqp);
	if (qp->mdev->protocol == 2 && mrs_qp_create(sqp, gfp))
		goto err;
	/* Until the engine runs, a post must ring the doorbell. */
	qp->sq.hdr->doorbell_needed = 1;
	qp->soft = sqp;
	return 0;

err:
	soft_atomic_free(&sqp->resp);
	kvfree(sqp->resp.rwqes);
	kvfree(sqp->req.swqes);
	kvfree(sqp);
	return -ENOMEM;
}

/* Stops the worker and the timers for good (@dying) or for a reset. */
static void soft_qp_quiesce(struct metaroce_soft_qp *sqp, bool dying)
{
	WRITE_ONCE(sqp->dying, true);
	hrtimer_cancel(&sqp->req.timer);
	hrtimer_cancel(&sqp->resp.ack_timer);
	/* A doorbell's run that began before @dying may queue the worker. */
	mutex_lock(&sqp->tx_mutex);
	mutex_unlock(&sqp->tx_mutex);
	cancel_work_sync(&sqp->tx_work);
	/* The worker may have armed a timer on its way out. */
	hrtimer_cancel(&sqp->req.timer);
	hrtimer_cancel(&sqp->resp.ack_timer);
	if (sqp->v2)
		mrs_qp_quiesce(sqp);
	WRITE_ONCE(sqp->dying, dying);
}

static void soft_qp_destroy(struct metaroce_qp *qp)
{
	struct metaroce_soft_qp *sqp = qp->soft;

	soft_qp_quiesce(sqp, true);
	if (sqp->v2) {
		mrs_qp_reset(sqp);
		mrs_qp_destroy(sqp);
	}
	soft_req_reset(sqp);
	soft_resp_reset(sqp);
	soft_paths_cleanup(&sqp->req);
	soft_atomic_free(&sqp->resp);
	kvfree(sqp->resp.rwqes);
	kvfree(sqp->req.swqes);
	kvfree(sqp);
	qp->soft = NULL;
}

static int soft_qp_state_changed(struct metaroce_qp *qp, enum ib_qp_state old,
				 enum ib_qp_state new)
{
	struct metaroce_soft_qp *sqp = qp->soft;

	switch (new) {
	case IB_QPS_RESET:
		/* Process context: modify_qp. Everything posted is dropped. */
		soft_qp_quiesce(sqp, false);
		if (sqp->v2)
			mrs_qp_reset(sqp);
		soft_req_reset(sqp);
		soft_resp_reset(sqp);
		break;
	case IB_QPS_RTR:
		if (old == IB_QPS_INIT && sqp->v2)
			mrs_qp_reset(sqp);
		if (old == IB_QPS_INIT)
			soft_resp_reset(sqp);
		break;
	case IB_QPS_RTS:
		if (old == IB_QPS_RTR && sqp->v2)
			mrs_qp_reset(sqp);
		if (old == IB_QPS_RTR)
			soft_req_reset(sqp);
		soft_schedule_tx(sqp);
		break;
	case IB_QPS_SQD:
		if (sqp->v2) {
			mrs_enter_sqd(sqp);
			break;
		}
		spin_lock_bh(&sqp->req.lock);
		sqp->req.sq_drained_sent = false;
		soft_req_notify_drained(sqp);
		spin_unlock_bh(&sqp->req.lock);
		break;
	case IB_QPS_ERR:
		/* Any context: the worker flushes. */
		WRITE_ONCE(qp->rq.hdr->doorbell_needed, 1);
		soft_schedule_tx(sqp);
		break;
	default:
		break;
	}
	return 0;
}

static bool soft_sq_drained(struct metaroce_qp *qp)
{
	if (qp->soft->v2)
		return mrs_sq_drained(qp->soft);
	return soft_req_drained(qp->soft);
}

/*
 * A user doorbell comes in process context (the post_send system call).
 * The run happens right here, as rxe does, sparing a switch to the worker
 * (which a busy-polling application delays). A doorbell rings only after
 * a run sent all that was posted, so this run is short: a streaming
 * sender keeps the doorbell off and its posts go with the worker's runs.
 * While another run is under way or queued, the worker runs.
 */
static void soft_sq_doorbell(struct metaroce_qp *qp)
{
	struct metaroce_soft_qp *sqp = qp->soft;
	int budget = SOFT_TX_BUDGET;

	/*
	 * Protocol v2 calls a gap in a path's sequence loss, and packets of
	 * one path sent from two CPUs can pass each other in their backlogs:
	 * here only one packet, the first of an idle QP, on a path of its
	 * own; the worker sends the rest from its CPU (measured: thousands of
	 * spurious resends on a link that loses nothing, without this).
	 */
	if (sqp->v2) {
		if (!mrs_quiet(sqp)) {
			soft_schedule_tx(sqp);
			return;
		}
		budget = 1;
	}
	if (qp->is_user && !work_pending(&sqp->tx_work) &&
	    mutex_trylock(&sqp->tx_mutex)) {
		if (!READ_ONCE(sqp->dying))
			soft_tx_run(sqp, budget);
		mutex_unlock(&sqp->tx_mutex);
		return;
	}
	soft_schedule_tx(sqp);
}

static void soft_rq_doorbell(struct metaroce_qp *qp)
{
	/* Receives are taken when packets need them; only a flush waits. */
	if (READ_ONCE(qp->state) == IB_QPS_ERR)
		soft_schedule_tx(qp->soft);
}

const struct metaroce_engine_ops metaroce_soft_engine = {
	.name = "soft",
	.dev_open = soft_dev_open,
	.dev_close = soft_dev_close,
	.qp_create = soft_qp_create,
	.qp_destroy = soft_qp_destroy,
	.qp_state_changed = soft_qp_state_changed,
	.sq_drained = soft_sq_drained,
	.sq_doorbell = soft_sq_doorbell,
	.rq_doorbell = soft_rq_doorbell,
};
