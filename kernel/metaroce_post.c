// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Posting work requests. User space writes WQEs straight into the shared
 * rings and calls in only to ring a doorbell; in-kernel users come through
 * ib_post_send()/ib_post_recv(), which write the same WQEs here.
 */
#include "metaroce_loc.h"
#include "metaroce_engine.h"

static bool sq_accepts_posts(enum ib_qp_state state)
{
	/* WRs posted in the error states are flushed by the engine. */
	return state == IB_QPS_RTS || state == IB_QPS_SQD ||
	       state == IB_QPS_SQE || state == IB_QPS_ERR;
}

static int wr_opcode_ok(const struct metaroce_qp *qp, enum ib_wr_opcode op)
{
	switch (op) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
		return true;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
	case IB_WR_RDMA_READ:
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
	case IB_WR_SEND_WITH_INV:
	case IB_WR_REG_MR:
	case IB_WR_LOCAL_INV:
		return qp->ibqp.qp_type == IB_QPT_RC;
	default:
		return false;
	}
}

static int copy_inline(struct metaroce_qp *qp, const struct ib_send_wr *wr,
		       struct metaroce_send_wqe *wqe)
{
	u8 *dst = (u8 *)(wqe + 1);
	u32 total = 0;
	int i;

	for (i = 0; i < wr->num_sge; i++) {
		u32 len = wr->sg_list[i].length;

		if (len > qp->max_inline - total)
			return -EINVAL;
		/* In-kernel SGE addresses are kernel virtual addresses. */
		memcpy(dst + total, (void *)(uintptr_t)wr->sg_list[i].addr, len);
		total += len;
	}
	wqe->inline_len = total;
	wqe->num_sge = 0;
	return 0;
}

static int build_send_wqe(struct metaroce_qp *qp, const struct ib_send_wr *wr,
			  struct metaroce_send_wqe *wqe)
{
	struct metaroce_sge *sge = (struct metaroce_sge *)(wqe + 1);
	int i;

	if (!wr_opcode_ok(qp, wr->opcode) || wr->num_sge > qp->max_send_sge)
		return -EINVAL;

	memset(wqe, 0, sizeof(*wqe));
	wqe->wr_id = wr->wr_id;
	wqe->opcode = wr->opcode;
	if ((wr->send_flags & IB_SEND_SIGNALED) || qp->sq_sig_all)
		wqe->flags |= METAROCE_WQE_SIGNALED;
	if (wr->send_flags & IB_SEND_SOLICITED)
		wqe->flags |= METAROCE_WQE_SOLICITED;
	if (wr->send_flags & IB_SEND_FENCE)
		wqe->flags |= METAROCE_WQE_FENCE;
	if (wr->opcode == IB_WR_SEND_WITH_IMM ||
	    wr->opcode == IB_WR_RDMA_WRITE_WITH_IMM)
		wqe->imm_data = wr->ex.imm_data;
	if (wr->opcode == IB_WR_SEND_WITH_INV ||
	    wr->opcode == IB_WR_LOCAL_INV)
		wqe->invalidate_rkey = wr->ex.invalidate_rkey;

	switch (wr->opcode) {
	case IB_WR_REG_MR:
		/* The MR is found by its new key, when the engine gets here. */
		metaroce_wqe_set_kernel_reg(wqe, reg_wr(wr)->key,
					    reg_wr(wr)->access);
		return 0;
	case IB_WR_LOCAL_INV:
		return 0;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
	case IB_WR_RDMA_READ:
		wqe->rdma.remote_addr = rdma_wr(wr)->remote_addr;
		wqe->rdma.rkey = rdma_wr(wr)->rkey;
		break;
	case IB_WR_ATOMIC_CMP_AND_SWP:
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		/* The result lands in one SGE of exactly the word's size. */
		if (wr->num_sge != 1 ||
		    wr->sg_list[0].length != METAROCE_ATOMIC_LEN)
			return -EINVAL;
		wqe->rdma.remote_addr = atomic_wr(wr)->remote_addr;
		wqe->rdma.rkey = atomic_wr(wr)->rkey;
		wqe->atomic.compare_add = atomic_wr(wr)->compare_add;
		wqe->atomic.swap = atomic_wr(wr)->swap;
		break;
	default:
		if (qp->ibqp.qp_type != IB_QPT_RC) {
			wqe->ud.remote_qpn = ud_wr(wr)->remote_qpn;
			wqe->ud.remote_qkey = ud_wr(wr)->remote_qkey;
			metaroce_wqe_set_kernel_ah(wqe, to_mah(ud_wr(wr)->ah));
		}
		break;
	}

	if ((wr->send_flags & IB_SEND_INLINE) && wr->opcode != IB_WR_RDMA_READ &&
	    wr->opcode != IB_WR_ATOMIC_CMP_AND_SWP &&
	    wr->opcode != IB_WR_ATOMIC_FETCH_AND_ADD) {
		wqe->flags |= METAROCE_WQE_INLINE;
		return copy_inline(qp, wr, wqe);
	}
	wqe->num_sge = wr->num_sge;
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = wr->sg_list[i].addr;
		sge[i].length = wr->sg_list[i].length;
		sge[i].lkey = wr->sg_list[i].lkey;
	}
	return 0;
}

int metaroce_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		       const struct ib_send_wr **bad_wr)
{
	struct metaroce_qp *qp = to_mqp(ibqp);
	unsigned long flags;
	int err = 0;

	if (qp->is_user) {
		/* The doorbell: user space has filled the ring. */
		qp->mdev->engine->sq_doorbell(qp);
		return 0;
	}
	if (!sq_accepts_posts(READ_ONCE(qp->state))) {
		*bad_wr = wr;
		return -EINVAL;
	}

	spin_lock_irqsave(&qp->sq_post_lock, flags);
	for (; wr; wr = wr->next) {
		struct metaroce_send_wqe *wqe = metaroce_queue_post_slot(&qp->sq);

		if (!wqe) {
			err = -ENOMEM;
			break;
		}
		err = build_send_wqe(qp, wr, wqe);
		if (err)
			break;
		metaroce_queue_post_publish(&qp->sq);
	}
	spin_unlock_irqrestore(&qp->sq_post_lock, flags);

	if (err)
		*bad_wr = wr;
	qp->mdev->engine->sq_doorbell(qp);
	return err;
}

/*
 * Writes one receive WQE of an in-kernel user into @q (an RQ or an SRQ
 * whose SGEs are at most @max_sge) and publishes it.
 */
int metaroce_post_recv_wqe(struct metaroce_queue *q, u32 max_sge,
			   const struct ib_recv_wr *wr)
{
	struct metaroce_recv_wqe *wqe;
	struct metaroce_sge *sge;
	int i;

	if (wr->num_sge > max_sge)
		return -EINVAL;
	wqe = metaroce_queue_post_slot(q);
	if (!wqe)
		return -ENOMEM;
	wqe->wr_id = wr->wr_id;
	wqe->num_sge = wr->num_sge;
	sge = (struct metaroce_sge *)(wqe + 1);
	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = wr->sg_list[i].addr;
		sge[i].length = wr->sg_list[i].length;
		sge[i].lkey = wr->sg_list[i].lkey;
	}
	metaroce_queue_post_publish(q);
	return 0;
}

int metaroce_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr)
{
	struct metaroce_qp *qp = to_mqp(ibqp);
	unsigned long flags;
	int err = 0;

	/* A QP on an SRQ has no receive queue to post to. */
	if (metaroce_qp_srq(qp)) {
		*bad_wr = wr;
		return -EINVAL;
	}
	if (qp->is_user) {
		/* A doorbell: lets the engine flush receives of a failed QP. */
		qp->mdev->engine->rq_doorbell(qp);
		return 0;
	}
	if (READ_ONCE(qp->state) == IB_QPS_RESET) {
		*bad_wr = wr;
		return -EINVAL;
	}

	spin_lock_irqsave(&qp->rq_post_lock, flags);
	for (; wr; wr = wr->next) {
		err = metaroce_post_recv_wqe(&qp->rq, qp->max_recv_sge, wr);
		if (err)
			break;
	}
	spin_unlock_irqrestore(&qp->rq_post_lock, flags);

	if (err)
		*bad_wr = wr;
	qp->mdev->engine->rq_doorbell(qp);
	return err;
}
