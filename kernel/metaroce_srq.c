// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Shared receive queues: creation, the limit event, query, destruction,
 * posting by in-kernel users, and the move of a WQE from the shared ring
 * into the private ring of the QP that takes it.
 *
 * User space posts into the mapped ring with no system call, as into an
 * RQ. A QP takes a WQE when a message needs one (metaroce_srq_take()),
 * copying it out of the shared ring at once: from then on the WQE is the
 * QP's, completed or flushed on the QP's receive CQ, and its slot is the
 * poster's again.
 */
#include <rdma/uverbs_ioctl.h>

#include "metaroce_loc.h"

static int check_srq_attr(const struct ib_srq_init_attr *init)
{
	const struct ib_srq_attr *attr = &init->attr;

	if (init->srq_type != IB_SRQT_BASIC)
		return -EOPNOTSUPP;
	if (!attr->max_wr || attr->max_wr > METAROCE_MAX_SRQ_WR ||
	    attr->max_sge > METAROCE_MAX_SGE)
		return -EINVAL;
	if (attr->srq_limit > attr->max_wr)
		return -EINVAL;
	return 0;
}

int metaroce_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
			struct ib_udata *udata)
{
	struct metaroce_dev *mdev = to_mdev(ibsrq->device);
	struct metaroce_srq *srq = to_msrq(ibsrq);
	struct metaroce_create_srq_resp resp = {};
	struct ib_srq_attr *attr = &init->attr;
	struct metaroce_ucontext *uctx;
	int err;

	err = check_srq_attr(init);
	if (err)
		return err;
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	err = metaroce_obj_charge(mdev, METAROCE_OBJ_SRQ);
	if (err)
		return err;

	srq->mdev = mdev;
	srq->is_user = !!udata;
	spin_lock_init(&srq->lock);
	spin_lock_init(&srq->post_lock);
	err = metaroce_queue_init(&srq->queue, attr->max_wr,
				  metaroce_recv_wqe_size(attr->max_sge), !!udata);
	if (err)
		goto err_uncharge;
	srq->max_sge = metaroce_recv_slot_sges(&srq->queue, METAROCE_MAX_SGE);
	srq->limit = attr->srq_limit;
	/* Report what the ring really holds. */
	attr->max_wr = srq->queue.num_slots;
	attr->max_sge = srq->max_sge;

	if (udata) {
		uctx = rdma_udata_to_drv_context(udata,
						 struct metaroce_ucontext, ibuc);
		err = metaroce_queue_expose(&srq->queue, &uctx->ibuc,
					    &resp.rq);
		if (err)
			goto err_queue;
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (err)
			goto err_queue;
	}
	return 0;

err_queue:
	metaroce_queue_cleanup(&srq->queue);
err_uncharge:
	metaroce_obj_uncharge(mdev, METAROCE_OBJ_SRQ);
	return err;
}

/* IB_SRQ_LIMIT arms the limit event; IB_SRQ_MAX_WR (resizing) is refused. */
int metaroce_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
			enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct metaroce_srq *srq = to_msrq(ibsrq);

	if (mask & ~IB_SRQ_LIMIT)
		return -EOPNOTSUPP;
	/* As rxe: a limit must leave room for a WQE above it. */
	if (attr->srq_limit >= srq->queue.num_slots)
		return -EINVAL;
	spin_lock_bh(&srq->lock);
	srq->limit = attr->srq_limit;
	spin_unlock_bh(&srq->lock);
	return 0;
}

int metaroce_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct metaroce_srq *srq = to_msrq(ibsrq);

	attr->max_wr = srq->queue.num_slots;
	attr->max_sge = srq->max_sge;
	attr->srq_limit = READ_ONCE(srq->limit);
	return 0;
}

/* ib_core refuses while a QP uses the SRQ: nothing takes from it now. */
int metaroce_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	struct metaroce_srq *srq = to_msrq(ibsrq);

	metaroce_queue_cleanup(&srq->queue);
	metaroce_obj_uncharge(srq->mdev, METAROCE_OBJ_SRQ);
	return 0;
}

int metaroce_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			   const struct ib_recv_wr **bad_wr)
{
	struct metaroce_srq *srq = to_msrq(ibsrq);
	unsigned long flags;
	int err = 0;

	/* User space posts into the mapped ring and never asks for this. */
	if (srq->is_user) {
		*bad_wr = wr;
		return -EINVAL;
	}
	spin_lock_irqsave(&srq->post_lock, flags);
	for (; wr; wr = wr->next) {
		err = metaroce_post_recv_wqe(&srq->queue, srq->max_sge, wr);
		if (err)
			break;
	}
	spin_unlock_irqrestore(&srq->post_lock, flags);
	if (err)
		*bad_wr = wr;
	return err;
}

/*
 * Moves the oldest WQE of @srq into @dst, the private ring of the QP that
 * takes it, whose free slot the caller has checked. Returns false if the
 * SRQ is empty. Raises IB_EVENT_SRQ_LIMIT_REACHED, once per arming, when
 * fewer WQEs than the limit are left. Called with BHs off, under the
 * taker's responder lock; the handlers (uverbs' and ULPs') take only
 * irq-safe locks.
 */
bool metaroce_srq_take(struct metaroce_srq *srq, struct metaroce_queue *dst)
{
	void *slot = metaroce_queue_post_slot(dst);
	bool low = false;
	u32 avail;

	if (WARN_ON_ONCE(!slot || dst->slot_size != srq->queue.slot_size))
		return false;
	spin_lock_bh(&srq->lock);
	avail = metaroce_queue_available(&srq->queue);
	if (!avail) {
		spin_unlock_bh(&srq->lock);
		return false;
	}
	/*
	 * Copied once out of the shared ring: what user space writes there
	 * later cannot change the WQE.
	 */
	memcpy(slot, metaroce_queue_slot(&srq->queue, srq->queue.own_index),
	       srq->queue.slot_size);
	metaroce_queue_consume(&srq->queue, 1);
	if (srq->limit && avail - 1 < srq->limit) {
		srq->limit = 0;
		low = true;
	}
	spin_unlock_bh(&srq->lock);
	metaroce_queue_post_publish(dst);

	if (low && srq->ibsrq.event_handler) {
		struct ib_event ev = {
			.device = srq->ibsrq.device,
			.element.srq = &srq->ibsrq,
			.event = IB_EVENT_SRQ_LIMIT_REACHED,
		};

		srq->ibsrq.event_handler(&ev, srq->ibsrq.srq_context);
	}
	return true;
}
