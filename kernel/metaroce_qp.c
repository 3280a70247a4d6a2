// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Queue pairs: creation, the verbs state machine with attribute checks,
 * query and destruction. The engine is told of every state change.
 */
#include <rdma/uverbs_ioctl.h>

#include "metaroce_loc.h"
#include "metaroce_engine.h"

#define QPN_LIMIT	XA_LIMIT(METAROCE_MIN_QPN, METAROCE_QPN_MASK)

static int check_init_attr(struct metaroce_dev *mdev,
			   const struct ib_qp_init_attr *init)
{
	const struct ib_qp_cap *cap = &init->cap;

	switch (init->qp_type) {
	case IB_QPT_RC:
	case IB_QPT_UD:
	case IB_QPT_GSI:
		break;
	default:
		return -EOPNOTSUPP;
	}
	if (init->create_flags || init->rwq_ind_tbl)
		return -EOPNOTSUPP;
	if (init->srq && init->qp_type == IB_QPT_GSI)
		return -EINVAL;
	if (!init->send_cq || !init->recv_cq)
		return -EINVAL;
	if (cap->max_send_wr > METAROCE_MAX_QP_WR ||
	    cap->max_recv_wr > METAROCE_MAX_QP_WR ||
	    cap->max_send_sge > METAROCE_MAX_SGE ||
	    cap->max_recv_sge > METAROCE_MAX_SGE ||
	    cap->max_inline_data > METAROCE_MAX_INLINE)
		return -EINVAL;
	return 0;
}

static u32 send_wqe_size(const struct ib_qp_cap *cap)
{
	u32 body = max_t(u32, max(cap->max_send_sge, 1U) *
			 sizeof(struct metaroce_sge), cap->max_inline_data);

	return sizeof(struct metaroce_send_wqe) + body;
}

/*
 * The receive ring. On an SRQ it is private: the QP moves the WQEs it
 * takes there, one per message in flight (RC) or one at a time (UD).
 */
static int create_rq(struct metaroce_qp *qp, struct ib_qp_init_attr *init,
		     bool user)
{
	struct ib_qp_cap *cap = &init->cap;
	struct metaroce_srq *srq;
	int err;

	if (!init->srq) {
		err = metaroce_queue_init(&qp->rq, max(cap->max_recv_wr, 1U),
					  metaroce_recv_wqe_size(cap->max_recv_sge),
					  user);
		if (err)
			return err;
		cap->max_recv_wr = qp->rq.num_slots;
		cap->max_recv_sge = metaroce_recv_slot_sges(&qp->rq,
							    METAROCE_MAX_SGE);
		qp->max_recv_sge = cap->max_recv_sge;
		return 0;
	}
	srq = to_msrq(init->srq);
	/* Not mapped, but charged to the creator like every user ring. */
	err = metaroce_queue_init(&qp->rq, init->qp_type == IB_QPT_RC ?
				  METAROCE_SRQ_QP_SLOTS : 1,
				  srq->queue.slot_size, user);
	if (err)
		return err;
	cap->max_recv_wr = 0;
	cap->max_recv_sge = 0;
	qp->max_recv_sge = srq->max_sge;
	return 0;
}

static int create_queues(struct metaroce_qp *qp, struct ib_qp_init_attr *init,
			 struct ib_udata *udata,
			 struct metaroce_create_qp_resp *resp)
{
	struct ib_qp_cap *cap = &init->cap;
	struct metaroce_ucontext *uctx;
	int err;

	err = metaroce_queue_init(&qp->sq, max(cap->max_send_wr, 1U),
				  send_wqe_size(cap), !!udata);
	if (err)
		return err;
	err = create_rq(qp, init, !!udata);
	if (err)
		goto err_sq;

	/* Report what the rings really hold. */
	cap->max_send_wr = qp->sq.num_slots;
	cap->max_send_sge = (qp->sq.slot_size -
			     sizeof(struct metaroce_send_wqe)) /
			    sizeof(struct metaroce_sge);
	cap->max_send_sge = min_t(u32, cap->max_send_sge, METAROCE_MAX_SGE);
	cap->max_inline_data = min_t(u32, qp->sq.slot_size -
				     sizeof(struct metaroce_send_wqe),
				     METAROCE_MAX_INLINE);
	qp->max_send_sge = cap->max_send_sge;
	qp->max_inline = cap->max_inline_data;
	if (!udata)
		return 0;

	uctx = rdma_udata_to_drv_context(udata, struct metaroce_ucontext, ibuc);
	err = metaroce_queue_expose(&qp->sq, &uctx->ibuc, &resp->sq);
	if (err)
		goto err_rq;
	if (!init->srq) {
		err = metaroce_queue_expose(&qp->rq, &uctx->ibuc, &resp->rq);
		if (err)
			goto err_rq;
	}
	resp->max_inline_data = qp->max_inline;
	return 0;

err_rq:
	metaroce_queue_cleanup(&qp->rq);
err_sq:
	metaroce_queue_cleanup(&qp->sq);
	return err;
}

static int alloc_qpn(struct metaroce_dev *mdev, struct metaroce_qp *qp,
		     enum ib_qp_type type)
{
	u32 qpn;
	int err;

	if (type == IB_QPT_GSI) {
		err = xa_insert(&mdev->qps, METAROCE_GSI_QPN, NULL, GFP_KERNEL);
		qpn = METAROCE_GSI_QPN;
	} else {
		err = xa_alloc_cyclic(&mdev->qps, &qpn, NULL, QPN_LIMIT,
				      &mdev->next_qpn, GFP_KERNEL);
	}
	if (err < 0)
		return err;
	qp->ibqp.qp_num = qpn;
	return 0;
}

int metaroce_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		       struct ib_udata *udata)
{
	struct metaroce_dev *mdev = to_mdev(ibqp->device);
	struct metaroce_qp *qp = to_mqp(ibqp);
	struct metaroce_create_qp_resp resp = {};
	int err;

	err = check_init_attr(mdev, init);
	if (err)
		return err;
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	err = metaroce_obj_charge(mdev, METAROCE_OBJ_QP);
	if (err)
		return err;

	qp->mdev = mdev;
	qp->serial = atomic64_inc_return(&mdev->qp_serial);
	qp->is_user = !!udata;
	qp->sq_sig_all = init->sq_sig_type == IB_SIGNAL_ALL_WR;
	qp->scq = to_mcq(init->send_cq);
	qp->rcq = to_mcq(init->recv_cq);
	qp->state = IB_QPS_RESET;
	qp->attr.qp_state = IB_QPS_RESET;
	qp->attr.path_mtu = IB_MTU_1024;
	qp->mtu = ib_mtu_enum_to_int(IB_MTU_1024);
	refcount_set(&qp->ref, 1);
	init_completion(&qp->released);
	mutex_init(&qp->modify_lock);
	spin_lock_init(&qp->state_lock);
	spin_lock_init(&qp->sq_post_lock);
	spin_lock_init(&qp->rq_post_lock);

	err = alloc_qpn(mdev, qp, init->qp_type);
	if (err)
		goto err_uncharge;
	err = create_queues(qp, init, udata, &resp);
	if (err)
		goto err_qpn;
	err = mdev->engine->qp_create(qp);
	if (err)
		goto err_queues;
	if (udata) {
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (err)
			goto err_engine;
	}
	/* Now the packet path can find it. */
	xa_store(&mdev->qps, ibqp->qp_num, qp, GFP_KERNEL);
	return 0;

err_engine:
	mdev->engine->qp_destroy(qp);
err_queues:
	metaroce_queue_cleanup(&qp->rq);
	metaroce_queue_cleanup(&qp->sq);
err_qpn:
	xa_erase(&mdev->qps, ibqp->qp_num);
err_uncharge:
	metaroce_obj_uncharge(mdev, METAROCE_OBJ_QP);
	return err;
}

/* Attribute values ib_modify_qp_is_ok() does not look at. */
static int check_attr_values(struct metaroce_qp *qp,
			     const struct ib_qp_attr *attr, int mask)
{
	if ((mask & IB_QP_PORT) && attr->port_num != METAROCE_PORT)
		return -EINVAL;
	if ((mask & IB_QP_PKEY_INDEX) && attr->pkey_index)
		return -EINVAL;
	if ((mask & IB_QP_PATH_MTU) &&
	    (attr->path_mtu < IB_MTU_256 || attr->path_mtu > IB_MTU_4096))
		return -EINVAL;
	if ((mask & IB_QP_MAX_QP_RD_ATOMIC) &&
	    attr->max_rd_atomic > METAROCE_MAX_RD_ATOMIC)
		return -EINVAL;
	if ((mask & IB_QP_MAX_DEST_RD_ATOMIC) &&
	    attr->max_dest_rd_atomic > METAROCE_MAX_RD_ATOMIC)
		return -EINVAL;
	if ((mask & IB_QP_RETRY_CNT) && attr->retry_cnt > 7)
		return -EINVAL;
	if ((mask & IB_QP_RNR_RETRY) && attr->rnr_retry > 7)
		return -EINVAL;
	if ((mask & IB_QP_TIMEOUT) && attr->timeout > 31)
		return -EINVAL;
	if ((mask & IB_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31)
		return -EINVAL;
	if ((mask & IB_QP_DEST_QPN) && attr->dest_qp_num > METAROCE_QPN_MASK)
		return -EINVAL;
	if ((mask & IB_QP_SQ_PSN) && attr->sq_psn > METAROCE_PSN_MASK)
		return -EINVAL;
	if ((mask & IB_QP_RQ_PSN) && attr->rq_psn > METAROCE_PSN_MASK)
		return -EINVAL;
	if ((mask & IB_QP_ACCESS_FLAGS) &&
	    (attr->qp_access_flags & ~(IB_ACCESS_REMOTE_WRITE |
				       IB_ACCESS_REMOTE_READ |
				       IB_ACCESS_REMOTE_ATOMIC |
				       IB_ACCESS_LOCAL_WRITE)))
		return -EINVAL;
	return 0;
}

/* Copies the attributes named by @mask into the QP. */
static void apply_attr(struct metaroce_qp *qp, const struct ib_qp_attr *attr,
		       int mask, const struct metaroce_av *av)
{
	struct ib_qp_attr *cur = &qp->attr;

	if (mask & IB_QP_AV) {
		rdma_replace_ah_attr(&cur->ah_attr, &attr->ah_attr);
		qp->av = *av;
	}
	if (mask & IB_QP_PATH_MTU)
		cur->path_mtu = attr->path_mtu;
	if (mask & IB_QP_ACCESS_FLAGS)
		cur->qp_access_flags = attr->qp_access_flags;
	if (mask & IB_QP_PKEY_INDEX)
		cur->pkey_index = attr->pkey_index;
	if (mask & IB_QP_PORT)
		cur->port_num = attr->port_num;
	if (mask & IB_QP_QKEY)
		cur->qkey = attr->qkey;
	if (mask & IB_QP_DEST_QPN)
		cur->dest_qp_num = attr->dest_qp_num;
	if (mask & IB_QP_RQ_PSN)
		cur->rq_psn = attr->rq_psn;
	if (mask & IB_QP_SQ_PSN)
		cur->sq_psn = attr->sq_psn;
	if (mask & IB_QP_MAX_QP_RD_ATOMIC)
		cur->max_rd_atomic = attr->max_rd_atomic;
	if (mask & IB_QP_MAX_DEST_RD_ATOMIC)
		cur->max_dest_rd_atomic = attr->max_dest_rd_atomic;
	if (mask & IB_QP_MIN_RNR_TIMER)
		cur->min_rnr_timer = attr->min_rnr_timer;
	if (mask & IB_QP_TIMEOUT)
		cur->timeout = attr->timeout;
	if (mask & IB_QP_RETRY_CNT)
		cur->retry_cnt = attr->retry_cnt;
	if (mask & IB_QP_RNR_RETRY)
		cur->rnr_retry = attr->rnr_retry;
	if (mask & IB_QP_EN_SQD_ASYNC_NOTIFY)
		cur->en_sqd_async_notify = attr->en_sqd_async_notify;
}

/*
 * Payload bytes per packet: for RC the segment size of the path MTU, for UD
 * the MTU; never more than the netdev carries.
 */
static u32 packet_payload(const struct metaroce_qp *qp)
{
	enum ib_mtu mtu = min(qp->attr.path_mtu,
			      metaroce_active_mtu(qp->mdev));
	u32 bytes = ib_mtu_enum_to_int(mtu);

	return qp->ibqp.qp_type == IB_QPT_RC ? metaroce_segment_size(bytes) :
					       bytes;
}

/* States in which the engine may fail a QP: it carries traffic. */
static bool engine_may_fail(enum ib_qp_state state)
{
	return state >= IB_QPS_RTR && state <= IB_QPS_SQE;
}

/*
 * Moves the QP from @expected to @state for modify_qp (under modify_lock)
 * and lets the engine act on it. The engine may have failed the QP since
 * modify_qp read the state (metaroce_qp_fail() does not take modify_lock):
 * then only a move to RESET or ERR still makes sense.
 */
static int set_state(struct metaroce_qp *qp, enum ib_qp_state expected,
		     enum ib_qp_state state)
{
	enum ib_qp_state old;
	unsigned long flags;

	spin_lock_irqsave(&qp->state_lock, flags);
	old = qp->state;
	if (old != expected && state != IB_QPS_RESET && state != IB_QPS_ERR) {
		spin_unlock_irqrestore(&qp->state_lock, flags);
		return -EINVAL;
	}
	qp->attr.qp_state = state;
	/* Release: the attributes are in place before the state says so. */
	smp_store_release(&qp->state, state);
	spin_unlock_irqrestore(&qp->state_lock, flags);

	return qp->mdev->engine->qp_state_changed(qp, old, state);
}

int metaroce_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		       struct ib_udata *udata)
{
	struct metaroce_qp *qp = to_mqp(ibqp);
	enum ib_qp_state cur_state, new_state;
	struct metaroce_av av = {};
	int err;

	if (mask & ~IB_QP_ATTR_STANDARD_BITS)
		return -EOPNOTSUPP;

	mutex_lock(&qp->modify_lock);
	cur_state = qp->state;
	new_state = (mask & IB_QP_STATE) ? attr->qp_state : cur_state;
	err = -EINVAL;
	/* A caller's idea of the current state must be the truth. */
	if ((mask & IB_QP_CUR_STATE) && attr->cur_qp_state != cur_state)
		goto out;
	if (!ib_modify_qp_is_ok(cur_state, new_state, ibqp->qp_type, mask))
		goto out;
	err = check_attr_values(qp, attr, mask);
	if (err)
		goto out;
	if (mask & IB_QP_AV) {
		/*
		 * The packet path reads the AV without a lock once the QP is
		 * in RTR; it may change only before (SQD -> SQD is refused).
		 */
		err = -EOPNOTSUPP;
		if (cur_state != IB_QPS_RESET && cur_state != IB_QPS_INIT)
			goto out;
		err = metaroce_av_from_attr(&av, &attr->ah_attr);
		if (err)
			goto out;
	}

	apply_attr(qp, attr, mask, &av);
	/*
	 * An RC QP's messages are segmented at its path MTU: it changes only
	 * when the user sets one (INIT to RTR), never with the netdev's MTU
	 * on another modify, under messages in flight. A UD message is one
	 * packet: it follows the netdev.
	 */
	if (qp->ibqp.qp_type != IB_QPT_RC || (mask & IB_QP_PATH_MTU))
		qp->mtu = packet_payload(qp);
	err = set_state(qp, cur_state, new_state);
out:
	mutex_unlock(&qp->modify_lock);
	return err;
}

/*
 * How the engine gives up on a QP, from any context: the error state, then
 * the engine flushes. A QP the user has just reset (or not yet connected)
 * stays as it is: the check and the move are one step under state_lock.
 */
void metaroce_qp_fail(struct metaroce_qp *qp)
{
	enum ib_qp_state old;
	unsigned long flags;

	spin_lock_irqsave(&qp->state_lock, flags);
	old = qp->state;
	if (!engine_may_fail(old)) {
		spin_unlock_irqrestore(&qp->state_lock, flags);
		return;
	}
	qp->attr.qp_state = IB_QPS_ERR;
	WRITE_ONCE(qp->state, IB_QPS_ERR);
	spin_unlock_irqrestore(&qp->state_lock, flags);

	qp->mdev->engine->qp_state_changed(qp, old, IB_QPS_ERR);
}

/* Reports an affiliated asynchronous event on the QP. */
void metaroce_qp_event(struct metaroce_qp *qp, enum ib_event_type type)
{
	struct ib_qp *ibqp = &qp->ibqp;
	struct ib_event ev = {
		.device = ibqp->device,
		.element.qp = ibqp,
		.event = type,
	};

	if (ibqp->event_handler)
		ibqp->event_handler(&ev, ibqp->qp_context);
}

int metaroce_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		      struct ib_qp_init_attr *init)
{
	struct metaroce_qp *qp = to_mqp(ibqp);

	mutex_lock(&qp->modify_lock);
	*attr = qp->attr;
	/* ib_query_qp() hands out no reference on the source GID. */
	attr->ah_attr.grh.sgid_attr = NULL;
	attr->qp_state = READ_ONCE(qp->state);
	attr->cur_qp_state = attr->qp_state;
	attr->cap.max_send_wr = qp->sq.num_slots;
	if (!metaroce_qp_srq(qp)) {
		attr->cap.max_recv_wr = qp->rq.num_slots;
		attr->cap.max_recv_sge = qp->max_recv_sge;
	}
	attr->cap.max_send_sge = qp->max_send_sge;
	attr->cap.max_inline_data = qp->max_inline;
	attr->sq_draining = attr->qp_state == IB_QPS_SQD &&
			    !qp->mdev->engine->sq_drained(qp);
	mutex_unlock(&qp->modify_lock);

	memset(init, 0, sizeof(*init));
	init->send_cq = &qp->scq->ibcq;
	init->recv_cq = &qp->rcq->ibcq;
	init->srq = ibqp->srq;
	init->cap = attr->cap;
	init->qp_type = ibqp->qp_type;
	init->sq_sig_type = qp->sq_sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
	init->port_num = METAROCE_PORT;
	return 0;
}

/*
 * Finds QP @qpn and takes a reference, or returns NULL. Callable from any
 * context; metaroce_destroy_qp() explains why the QP cannot be freed under
 * the lookup.
 */
struct metaroce_qp *metaroce_qp_get(struct metaroce_dev *mdev, u32 qpn)
{
	struct metaroce_qp *qp;

	rcu_read_lock();
	qp = xa_load(&mdev->qps, qpn);
	if (qp && !refcount_inc_not_zero(&qp->ref))
		qp = NULL;
	rcu_read_unlock();
	return qp;
}

int metaroce_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct metaroce_qp *qp = to_mqp(ibqp);
	struct metaroce_dev *mdev = qp->mdev;

	/*
	 * ib_core allocated this QP (our size, INIT_RDMA_OBJ_SIZE) and kfrees
	 * it as soon as we return, with no grace period. A lookup that read
	 * the pointer from the table just before the erase may still be about
	 * to take its reference: after synchronize_rcu() every such lookup has
	 * either taken it or given up, so waiting for the references to drop
	 * covers every user. A grace period here, on a slow path, keeps the
	 * per-packet lookup free of locks.
	 */
	xa_erase(&mdev->qps, ibqp->qp_num);
	synchronize_rcu();
	metaroce_qp_put(qp);
	metaroce_wait_last_user(&qp->released, "QP", ibqp->qp_num);

	mdev->engine->qp_destroy(qp);
	metaroce_queue_cleanup(&qp->rq);
	metaroce_queue_cleanup(&qp->sq);
	rdma_destroy_ah_attr(&qp->attr.ah_attr);
	mutex_destroy(&qp->modify_lock);
	metaroce_obj_uncharge(mdev, METAROCE_OBJ_QP);
	return 0;
}
