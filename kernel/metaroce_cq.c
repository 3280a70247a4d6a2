// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Completion queues: a ring of struct metaroce_cqe that the engine fills
 * and the user (or ib_poll_cq() for in-kernel users) drains.
 */
#include <linux/etherdevice.h>
#include <rdma/uverbs_ioctl.h>

#include "metaroce_loc.h"

static struct ib_ucontext *udata_ucontext(struct ib_udata *udata)
{
	struct metaroce_ucontext *uctx = rdma_udata_to_drv_context(udata,
		struct metaroce_ucontext, ibuc);

	return &uctx->ibuc;
}

/* A ring for @cqe completions, mapped for user space when @udata is set. */
static int cq_queue_create(struct metaroce_queue *q, int cqe,
			   struct ib_udata *udata,
			   struct metaroce_queue_info *info)
{
	int err;

	/* One slot more than asked: a full ring still has a free slot. */
	err = metaroce_queue_init(q, cqe + 1, sizeof(struct metaroce_cqe),
				  !!udata);
	if (err || !udata)
		return err;
	err = metaroce_queue_expose(q, udata_ucontext(udata), info);
	if (err)
		metaroce_queue_cleanup(q);
	return err;
}

static int cq_check_size(struct ib_device *ibdev, int cqe)
{
	if (cqe < 1 || cqe > METAROCE_MAX_CQE)
		return -EINVAL;
	return 0;
}

int metaroce_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		       struct metaroce_cq_uarg *uarg)
{
	struct ib_udata *udata = metaroce_cq_udata(uarg);
	struct metaroce_dev *mdev = to_mdev(ibcq->device);
	struct metaroce_cq *cq = to_mcq(ibcq);
	struct metaroce_create_cq_resp resp = {};
	int err;

	if (attr->flags)
		return -EOPNOTSUPP;
	err = cq_check_size(ibcq->device, attr->cqe);
	if (err)
		return err;
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;
	err = metaroce_obj_charge(mdev, METAROCE_OBJ_CQ);
	if (err)
		return err;

	spin_lock_init(&cq->lock);
	cq->is_user = !!udata;
	err = cq_queue_create(&cq->queue, attr->cqe, udata, &resp.cq);
	if (err)
		goto err_uncharge;
	ibcq->cqe = cq->queue.num_slots - 1;

	if (udata) {
		err = ib_copy_to_udata(udata, &resp, sizeof(resp));
		if (err)
			goto err_queue;
	}
	return 0;

err_queue:
	metaroce_queue_cleanup(&cq->queue);
err_uncharge:
	metaroce_obj_uncharge(mdev, METAROCE_OBJ_CQ);
	return err;
}

int metaroce_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	metaroce_queue_cleanup(&to_mcq(ibcq)->queue);
	metaroce_obj_uncharge(to_mdev(ibcq->device), METAROCE_OBJ_CQ);
	return 0;
}

/* Completions written and not yet consumed. */
static u32 cq_count(const struct metaroce_cq *cq)
{
	u32 used = cq->queue.own_index - READ_ONCE(cq->queue.hdr->consumer);

	return min(used, cq->queue.num_slots);
}

/*
 * Moves the unconsumed completions to a new ring of @cqe entries. The
 * provider holds its CQ lock across the command and switches to the new
 * mapping afterwards, with its consumer index at 0.
 */
int metaroce_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata)
{
	struct metaroce_cq *cq = to_mcq(ibcq);
	struct metaroce_resize_cq_resp resp = {};
	struct metaroce_queue new_q, old_q;
	unsigned long flags;
	u32 n, i, first;
	int err;

	err = cq_check_size(ibcq->device, cqe);
	if (err)
		return err;
	if (udata && udata->outlen < sizeof(resp))
		return -EINVAL;

	err = cq_queue_create(&new_q, cqe, udata, &resp.cq);
	if (err)
		return err;

	spin_lock_irqsave(&cq->lock, flags);
	n = cq_count(cq);
	if (n > new_q.num_slots - 1) {
		spin_unlock_irqrestore(&cq->lock, flags);
		metaroce_queue_cleanup(&new_q);
		return -EINVAL;
	}
	first = cq->queue.own_index - n;
	for (i = 0; i < n; i++)
		memcpy(metaroce_queue_slot(&new_q, i),
		       metaroce_queue_slot(&cq->queue, first + i),
		       sizeof(struct metaroce_cqe));
	new_q.own_index = n;
	new_q.hdr->producer = n;
	old_q = cq->queue;
	cq->queue = new_q;
	ibcq->cqe = new_q.num_slots - 1;
	spin_unlock_irqrestore(&cq->lock, flags);

	metaroce_queue_cleanup(&old_q);
	if (udata)
		return ib_copy_to_udata(udata, &resp, sizeof(resp));
	return 0;
}

/*
 * Adds a completion. Returns -ENOSPC, and reports a CQ error, when the
 * consumer has let the ring fill up. Callable from any context.
 */
int metaroce_cq_post(struct metaroce_cq *cq, const struct metaroce_cqe *cqe,
		     bool solicited)
{
	struct ib_cq *ibcq = &cq->ibcq;
	bool notify = false;
	unsigned long flags;

	spin_lock_irqsave(&cq->lock, flags);
	if (!metaroce_queue_free_slots(&cq->queue) || cq->overflowed) {
		bool first = !cq->overflowed;

		cq->overflowed = true;
		spin_unlock_irqrestore(&cq->lock, flags);
		metaroce_count(to_mdev(ibcq->device), CQ_OVERFLOW);
		if (first && ibcq->event_handler) {
			struct ib_event ev = {
				.device = ibcq->device,
				.element.cq = ibcq,
				.event = IB_EVENT_CQ_ERR,
			};

			ibcq->event_handler(&ev, ibcq->cq_context);
		}
		return -ENOSPC;
	}
	memcpy(metaroce_queue_slot(&cq->queue, cq->queue.own_index), cqe,
	       sizeof(*cqe));
	metaroce_queue_produce(&cq->queue);

	if (cq->notify == IB_CQ_NEXT_COMP ||
	    (cq->notify == IB_CQ_SOLICITED && solicited)) {
		cq->notify = 0;
		notify = true;
	}
	spin_unlock_irqrestore(&cq->lock, flags);

	if (notify && ibcq->comp_handler)
		ibcq->comp_handler(ibcq, ibcq->cq_context);
	return 0;
}

int metaroce_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct metaroce_cq *cq = to_mcq(ibcq);
	unsigned long irqflags;
	int missed = 0;

	spin_lock_irqsave(&cq->lock, irqflags);
	if (cq->notify != IB_CQ_NEXT_COMP)
		cq->notify = flags & IB_CQ_SOLICITED_MASK;
	if ((flags & IB_CQ_REPORT_MISSED_EVENTS) && cq_count(cq))
		missed = 1;
	spin_unlock_irqrestore(&cq->lock, irqflags);
	return missed;
}

/*
 * The QP a completion of @cq is for. A completion may outlive its QP (and
 * the number be reused), so the QP is looked up with a reference and must
 * still be one of this CQ's; the work completion carries no reference.
 */
static struct ib_qp *cqe_qp(struct metaroce_cq *cq, u32 qpn)
{
	struct metaroce_qp *qp = metaroce_qp_get(to_mdev(cq->ibcq.device), qpn);
	struct ib_qp *ibqp = NULL;

	if (!qp)
		return NULL;
	if (qp->scq == cq || qp->rcq == cq)
		ibqp = &qp->ibqp;
	metaroce_qp_put(qp);
	return ibqp;
}

static void cqe_to_wc(struct metaroce_cq *cq, const struct metaroce_cqe *cqe,
		      struct ib_wc *wc)
{
	struct ib_qp *qp = cqe_qp(cq, cqe->qp_num);

	memset(wc, 0, sizeof(*wc));
	wc->wr_id = cqe->wr_id;
	wc->status = cqe->status;
	wc->opcode = cqe->opcode;
	wc->vendor_err = cqe->vendor_err;
	wc->byte_len = cqe->byte_len;
	wc->qp = qp;
	wc->src_qp = cqe->src_qp;
	wc->pkey_index = cqe->pkey_index;
	wc->port_num = METAROCE_PORT;
	if (cqe->flags & METAROCE_CQE_WITH_IMM) {
		wc->ex.imm_data = cqe->imm_data;
		wc->wc_flags |= IB_WC_WITH_IMM;
	}
	if (cqe->flags & METAROCE_CQE_WITH_INV) {
		wc->ex.invalidate_rkey = cqe->invalidated_rkey;
		wc->wc_flags |= IB_WC_WITH_INVALIDATE;
	}
	if (cqe->flags & METAROCE_CQE_GRH) {
		wc->wc_flags |= IB_WC_GRH | IB_WC_WITH_SMAC |
				IB_WC_WITH_NETWORK_HDR_TYPE;
		ether_addr_copy(wc->smac, cqe->smac);
		wc->network_hdr_type = cqe->network_hdr_type;
	}
}

/* ib_poll_cq() for in-kernel users; user CQs are polled in user space. */
int metaroce_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc)
{
	struct metaroce_cq *cq = to_mcq(ibcq);
	struct metaroce_queue_hdr *hdr;
	unsigned long flags;
	int n = 0;

	spin_lock_irqsave(&cq->lock, flags);
	hdr = cq->queue.hdr;
	while (n < num_entries && hdr->consumer != cq->queue.own_index) {
		cqe_to_wc(cq, metaroce_queue_slot(&cq->queue, hdr->consumer),
			  &wc[n++]);
		/* Release: ordered after reading the entry (resize reads it). */
		smp_store_release(&hdr->consumer, hdr->consumer + 1);
	}
	spin_unlock_irqrestore(&cq->lock, flags);
	return n;
}
