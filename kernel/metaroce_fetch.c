// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Taking work requests from the shared rings. Each WQE is copied once into
 * engine memory and checked there, so nothing user space writes later can
 * change what the engine does; the MRs it names are looked up and held
 * until the copy is released. Holding an MR does not keep the right to use
 * it: the copies below fail with -EACCES once it is deregistered.
 */
#include "metaroce_loc.h"
#include "metaroce_soft.h"

void soft_release_swqe(struct soft_swqe *swqe)
{
	int i;

	for (i = 0; i < METAROCE_MAX_SGE; i++) {
		if (swqe->mr[i])
			metaroce_mr_put(swqe->mr[i]);
		swqe->mr[i] = NULL;
	}
}

void soft_release_rwqe(struct soft_rwqe *rwqe)
{
	int i;

	for (i = 0; i < METAROCE_MAX_SGE; i++) {
		if (rwqe->mr[i])
			metaroce_mr_put(rwqe->mr[i]);
		rwqe->mr[i] = NULL;
	}
	rwqe->taken = false;
}

static u8 wire_opcode(const struct metaroce_qp *qp, u32 wr_opcode)
{
	if (qp->ibqp.qp_type != IB_QPT_RC)
		return (wr_opcode == IB_WR_SEND ||
			wr_opcode == IB_WR_SEND_WITH_IMM) ?
		       METAROCE_OP_UD_SEND : 0;

	switch (wr_opcode) {
	case IB_WR_SEND:
	case IB_WR_SEND_WITH_IMM:
	case IB_WR_SEND_WITH_INV:
		return METAROCE_OP_SEND;
	case IB_WR_RDMA_WRITE:
	case IB_WR_RDMA_WRITE_WITH_IMM:
		return METAROCE_OP_WRITE;
	case IB_WR_RDMA_READ:
		return METAROCE_OP_READ_REQ;
	case IB_WR_ATOMIC_CMP_AND_SWP:
		return METAROCE_OP_ATOMIC_CMP_SWP;
	case IB_WR_ATOMIC_FETCH_AND_ADD:
		return METAROCE_OP_ATOMIC_FETCH_ADD;
	default:
		return 0;
	}
}

/*
 * Looks up and checks the MRs of @num_sge SGEs for @access; returns the
 * total length, or a negative IB_WC_* status.
 */
static s64 hold_sge_mrs(struct metaroce_qp *qp, struct ib_pd *pd,
			const struct metaroce_sge *sge,
			struct metaroce_mr **mr, u32 num_sge, int access)
{
	u64 total = 0;
	u32 i;

	for (i = 0; i < num_sge; i++) {
		if (!sge[i].length)
			continue;
		mr[i] = metaroce_mr_get(qp->mdev, sge[i].lkey);
		if (!mr[i] || !metaroce_mr_allows(mr[i], pd,
						  sge[i].addr, sge[i].length,
						  access))
			return -IB_WC_LOC_PROT_ERR;
		total += sge[i].length;
	}
	if (total > METAROCE_MAX_MSG_SIZE)
		return -IB_WC_LOC_LEN_ERR;
	return total;
}

static int fetch_ud_dest(struct metaroce_qp *qp, struct soft_swqe *swqe)
{
	struct metaroce_ah *ah;

	if (!qp->is_user) {
		ah = metaroce_wqe_kernel_ah(&swqe->wqe);
		if (!ah)
			return -EINVAL;
		swqe->av = ah->av;
		return 0;
	}
	return metaroce_ah_lookup(qp->mdev, swqe->wqe.ud.ah, qp->ibqp.pd,
				  &swqe->av);
}

/*
 * Copies and checks send WQE @index. On failure the copy carries the
 * completion status in ->status and a negative errno is returned.
 */
int soft_fetch_send_wqe(struct metaroce_soft_qp *sqp, u32 index)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_swqe *swqe;
	const struct metaroce_send_wqe *src;
	int access = 0;
	s64 len;

	swqe = &sqp->req.swqes[index & (qp->sq.num_slots - 1)];
	src = metaroce_queue_slot(&qp->sq, index);
	soft_release_swqe(swqe);
	memset(swqe, 0, sizeof(*swqe));
	swqe->wqe = *src;
	swqe->status = IB_WC_SUCCESS;

	/*
	 * Only in-kernel users register memory through the SQ, only user
	 * space has memory windows to bind (ib_core gives the kernel none);
	 * both invalidate, on RC QPs.
	 */
	if (swqe->wqe.opcode == IB_WR_REG_MR ||
	    swqe->wqe.opcode == IB_WR_BIND_MW ||
	    swqe->wqe.opcode == IB_WR_LOCAL_INV) {
		if (qp->ibqp.qp_type != IB_QPT_RC ||
		    (swqe->wqe.opcode == IB_WR_REG_MR && qp->is_user) ||
		    (swqe->wqe.opcode == IB_WR_BIND_MW && !qp->is_user))
			goto bad_op;
		swqe->local = true;
		return 0;
	}
	swqe->wire_op = wire_opcode(qp, swqe->wqe.opcode);
	if (!swqe->wire_op)
		goto bad_op;

	if (swqe->wqe.flags & METAROCE_WQE_INLINE) {
		if (soft_op_asks_responses(swqe->wire_op) ||
		    swqe->wqe.inline_len > qp->max_inline)
			goto bad_len;
		memcpy(swqe->inline_data, src + 1, swqe->wqe.inline_len);
		swqe->wqe.num_sge = 0;
		swqe->length = swqe->wqe.inline_len;
	} else {
		if (swqe->wqe.num_sge > qp->max_send_sge)
			goto bad_len;
		memcpy(swqe->sge, src + 1,
		       swqe->wqe.num_sge * sizeof(struct metaroce_sge));
		/* A READ or an atomic writes into the local buffers. */
		if (soft_op_asks_responses(swqe->wire_op))
			access = IB_ACCESS_LOCAL_WRITE;
		len = hold_sge_mrs(qp, qp->ibqp.pd, swqe->sge, swqe->mr,
				   swqe->wqe.num_sge, access);
		if (len < 0) {
			swqe->status = -len;
			return -EINVAL;
		}
		swqe->length = len;
	}
	/* An atomic's result goes to one SGE of exactly 8 bytes. */
	if (soft_op_is_atomic(swqe->wire_op) &&
	    (swqe->wqe.num_sge != 1 ||
	     swqe->sge[0].length != METAROCE_ATOMIC_LEN))
		goto bad_len;

	if (swqe->wire_op == METAROCE_OP_UD_SEND) {
		if (swqe->length > qp->mtu)
			goto bad_len;
		if (fetch_ud_dest(qp, swqe))
			goto bad_op;
	}
	return 0;

bad_len:
	swqe->status = IB_WC_LOC_LEN_ERR;
	return -EINVAL;
bad_op:
	swqe->status = IB_WC_LOC_QP_OP_ERR;
	return -EINVAL;
}

/*
 * The QP is in the error state: completes every send WQE taken and not
 * completed (a failed one with its status, the rest with a flush error),
 * then everything still in the ring, which was never looked at. Under the
 * engine's send-side lock.
 */
void soft_flush_send_queue(struct metaroce_soft_qp *sqp)
{
	struct metaroce_qp *qp = sqp->qp;
	const struct metaroce_send_wqe *wqe;
	u32 avail;

	while (qp->sq.own_index != sqp->req.fetch_index) {
		struct soft_swqe *swqe = &sqp->req.swqes[qp->sq.own_index &
						(qp->sq.num_slots - 1)];

		soft_release_swqe(swqe);
		soft_sq_retire(qp, swqe->wqe.wr_id, swqe->wqe.opcode,
			       swqe->status ?: IB_WC_WR_FLUSH_ERR, 0, true);
	}
	avail = metaroce_queue_available(&qp->sq);
	while (avail--) {
		wqe = metaroce_queue_slot(&qp->sq, qp->sq.own_index);
		/* Read before the slot is handed back. */
		soft_sq_retire(qp, READ_ONCE(wqe->wr_id),
			       READ_ONCE(wqe->opcode), IB_WC_WR_FLUSH_ERR, 0,
			       true);
	}
	sqp->req.fetch_index = qp->sq.own_index;
	WRITE_ONCE(qp->sq.hdr->doorbell_needed, 1);
}

/*
 * Carries out a local operation (REG_MR, LOCAL_INV, BIND_MW) of an SQ; a
 * failure leaves its status, which fails the QP when it completes.
 */
void soft_local_op(struct metaroce_soft_qp *sqp, struct soft_swqe *swqe)
{
	struct metaroce_qp *qp = sqp->qp;
	const struct metaroce_send_wqe *wqe = &swqe->wqe;
	struct metaroce_mr *mr;
	u32 key, access = 0;
	int err = -EINVAL;

	if (wqe->opcode == IB_WR_BIND_MW) {
		if (metaroce_mw_bind(qp, wqe))
			swqe->status = IB_WC_MW_BIND_ERR;
		swqe->done = true;
		return;
	}
	if (wqe->opcode == IB_WR_REG_MR)
		metaroce_wqe_kernel_reg(wqe, &key, &access);
	else
		key = wqe->invalidate_rkey;
	if (metaroce_key_is_mw(key)) {
		if (wqe->opcode != IB_WR_LOCAL_INV ||
		    metaroce_mw_invalidate(qp, key, false))
			swqe->status = IB_WC_LOC_PROT_ERR;
		swqe->done = true;
		return;
	}
	mr = metaroce_frmr_get(qp->mdev, key);
	if (mr) {
		if (wqe->opcode == IB_WR_REG_MR)
			err = metaroce_frmr_register(mr, qp->ibqp.pd, key,
						     access);
		else
			err = metaroce_frmr_invalidate(mr, qp->ibqp.pd, key);
		metaroce_mr_put(mr);
	}
	if (err)
		swqe->status = wqe->opcode == IB_WR_REG_MR ? IB_WC_MW_BIND_ERR :
							     IB_WC_LOC_PROT_ERR;
	swqe->done = true;
}

/*
 * On an SRQ: moves WQEs from it into the QP's private ring until @need
 * are there (fewer if it runs dry). The caller holds the responder lock;
 * a QP that has failed takes nothing, so the flush, which takes that lock
 * after the failure, sees every WQE the QP took.
 */
void soft_srq_fetch(struct metaroce_soft_qp *sqp, u32 need)
{
	struct metaroce_qp *qp = sqp->qp;
	struct metaroce_srq *srq = metaroce_qp_srq(qp);

	if (!srq || READ_ONCE(qp->state) == IB_QPS_ERR)
		return;
	while (metaroce_queue_available(&qp->rq) < need &&
	       metaroce_srq_take(srq, &qp->rq))
		;
}

/*
 * Copies and checks receive WQE @index into its slot. A bad SGE leaves
 * ->status set; the message that lands there completes in error.
 */
int soft_take_recv_wqe(struct metaroce_soft_qp *sqp, u32 index)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_rwqe *rwqe;
	const struct metaroce_recv_wqe *src;
	s64 len;

	rwqe = &sqp->resp.rwqes[index & (qp->rq.num_slots - 1)];
	src = metaroce_queue_slot(&qp->rq, index);
	soft_release_rwqe(rwqe);
	memset(rwqe, 0, sizeof(*rwqe));
	rwqe->wqe = *src;
	rwqe->taken = true;
	rwqe->status = IB_WC_SUCCESS;

	if (rwqe->wqe.num_sge > qp->max_recv_sge) {
		rwqe->wqe.num_sge = 0;
		rwqe->status = IB_WC_LOC_LEN_ERR;
		return -EINVAL;
	}
	memcpy(rwqe->sge, src + 1,
	       rwqe->wqe.num_sge * sizeof(struct metaroce_sge));
	/* An SRQ's WQEs name MRs of the SRQ's PD. */
	len = hold_sge_mrs(qp, qp->ibqp.srq ? qp->ibqp.srq->pd : qp->ibqp.pd,
			   rwqe->sge, rwqe->mr, rwqe->wqe.num_sge,
			   IB_ACCESS_LOCAL_WRITE);
	if (len < 0) {
		rwqe->status = -len;
		return -EINVAL;
	}
	rwqe->capacity = len;
	return 0;
}

/* Finds the SGE holding byte @offset; returns its index, *@in = offset. */
static u32 sge_seek(const struct metaroce_sge *sge, u32 num_sge, u32 offset,
		    u32 *in)
{
	u32 i;

	for (i = 0; i < num_sge; i++) {
		if (offset < sge[i].length)
			break;
		offset -= sge[i].length;
	}
	*in = offset;
	return i;
}

/*
 * Copies @len bytes at message offset @offset of a send WQE into @buf;
 * -EACCES if one of its MRs was deregistered.
 */
int soft_copy_from_sges(struct soft_swqe *swqe, u32 offset, void *buf,
			u32 len)
{
	u32 i, in;
	int err;

	if (swqe->wqe.flags & METAROCE_WQE_INLINE) {
		memcpy(buf, swqe->inline_data + offset, len);
		return 0;
	}
	for (i = sge_seek(swqe->sge, swqe->wqe.num_sge, offset, &in); len;
	     i++, in = 0) {
		u32 chunk = min(len, swqe->sge[i].length - in);

		err = metaroce_mr_copy_to_buf(swqe->mr[i], swqe->sge[i].lkey,
					      swqe->sge[i].addr + in, buf,
					      chunk);
		if (err)
			return err;
		buf += chunk;
		len -= chunk;
	}
	return 0;
}

/* Whether an MR a send WQE names was deregistered since it was taken. */
bool soft_swqe_revoked(const struct soft_swqe *swqe)
{
	u32 i;

	for (i = 0; i < swqe->wqe.num_sge && i < METAROCE_MAX_SGE; i++)
		if (swqe->mr[i] && metaroce_mr_revoked(swqe->mr[i]))
			return true;
	return false;
}

/* Attaches message bytes [@offset, @offset + @len) to @skb, zero copy. */
int soft_attach_sges(struct soft_swqe *swqe, u32 offset, u32 len,
		     struct sk_buff *skb)
{
	u32 i, in;
	int err;

	for (i = sge_seek(swqe->sge, swqe->wqe.num_sge, offset, &in); len;
	     i++, in = 0) {
		u32 chunk = min(len, swqe->sge[i].length - in);

		err = metaroce_mr_attach_to_skb(swqe->mr[i],
						swqe->sge[i].addr + in, skb,
						chunk);
		if (err)
			return err;
		len -= chunk;
	}
	return 0;
}

/*
 * Scatters @len bytes of @skb at @skb_offset into the SGEs, from byte
 * @offset of the buffer they describe. The caller checked the capacity;
 * bytes past the last SGE are refused all the same (-EINVAL), never
 * placed through a slot past the list. -EACCES if one of the MRs was
 * deregistered (placement stops there).
 */
int soft_place_in_sges(struct metaroce_sge *sge, struct metaroce_mr **mr,
		       u32 num_sge, u32 offset, const struct sk_buff *skb,
		       u32 skb_offset, u32 len)
{
	u32 i, in;
	int err;

	for (i = sge_seek(sge, num_sge, offset, &in); len; i++, in = 0) {
		u32 chunk;

		if (i >= num_sge)
			return -EINVAL;
		chunk = min(len, sge[i].length - in);

		err = metaroce_mr_copy_from_skb(mr[i], sge[i].lkey,
						sge[i].addr + in, skb,
						skb_offset, chunk);
		if (err)
			return err;
		skb_offset += chunk;
		len -= chunk;
	}
	return 0;
}

/* As soft_place_in_sges(), from a buffer. */
int soft_place_buf_in_sges(struct metaroce_sge *sge, struct metaroce_mr **mr,
			   u32 num_sge, u32 offset, const void *buf, u32 len)
{
	u32 i, in;
	int err;

	for (i = sge_seek(sge, num_sge, offset, &in); len; i++, in = 0) {
		u32 chunk = min(len, sge[i].length - in);

		err = metaroce_mr_copy_from_buf(mr[i], sge[i].lkey,
						sge[i].addr + in, buf, chunk);
		if (err)
			return err;
		buf += chunk;
		len -= chunk;
	}
	return 0;
}
