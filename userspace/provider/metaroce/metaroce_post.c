// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Posting work requests: ibv_post_send(), ibv_post_recv() and the
 * ibv_qp_ex work-request API (ibv_wr_start() ... ibv_wr_complete()).
 *
 * WQEs are written straight into the rings shared with the kernel and
 * published with a release store of the producer index.  The kernel only
 * needs a system call (a "doorbell") when its engine has gone idle; it says
 * so in the queue header's doorbell_needed, so streaming posts make none.
 *
 * The doorbell is a uverbs POST_SEND / POST_RECV command carrying no work
 * requests, for which the kernel's post_send/post_recv just kick the
 * engine.  It is issued with ibv_cmd_post_send()/ibv_cmd_post_recv(), i.e.
 * by libibverbs' command layer: on Linux >= 5.x that is the ioctl
 * UVERBS_METHOD_INVOKE_WRITE with our driver id in the header (which the
 * kernel requires to equal its own), falling back to write() on kernels
 * without it.  rxe instead write()s a hand-built struct ibv_post_send; the
 * write() path fails with EACCES once the process has changed credentials
 * after opening the device (ib_safe_file_access()), the ioctl does not.
 */
#include <errno.h>
#include <stddef.h>

#include "metaroce.h"

/* --- work queues: slots, publishing, doorbells ---------------------------- */

/*
 * The slot for the WQE at @index of @wq, or NULL if the queue is full.
 * *room is the free space known so far: the kernel's consumer index is
 * re-read only when it runs out.
 */
static void *wq_next_slot(struct metaroce_wq *wq, uint32_t index,
			  uint32_t *room)
{
	if (!*room)
		*room = metaroce_ring_free(&wq->ring, index);
	if (!*room)
		return NULL;
	--*room;
	return metaroce_ring_slot(&wq->ring, index);
}

/*
 * The doorbell.  For the RQ the kernel only asks while the QP is in the
 * error state, where new receives must be flushed with completions.
 */
static int wq_doorbell(struct metaroce_qp *qp, struct metaroce_wq *wq)
{
	struct ibv_send_wr *bad_send = NULL;
	struct ibv_recv_wr *bad_recv = NULL;

	if (wq == &qp->sq)
		return ibv_cmd_post_send(&qp->vqp.qp, NULL, &bad_send);
	return ibv_cmd_post_recv(&qp->vqp.qp, NULL, &bad_recv);
}

/*
 * Ends a post on @wq, whose lock the caller holds: publishes the WQEs
 * before @index (none if it is still the ring's index), unlocks, and rings
 * the doorbell if the kernel asks for it.  Returns the doorbell's error:
 * then the kernel did not learn of the new WQEs (in practice: the device
 * is gone).  They stay published, but nothing says they will run, so the
 * callers report the whole post as failed.
 */
static int wq_commit(struct metaroce_qp *qp, struct metaroce_wq *wq,
		     uint32_t index)
{
	bool posted = index != wq->ring.index;

	if (posted)
		metaroce_ring_publish(&wq->ring, index);
	pthread_spin_unlock(&wq->lock);

	if (!posted || !metaroce_ring_doorbell_needed(&wq->ring))
		return 0;
	return wq_doorbell(qp, wq);
}

/* --- ibv_post_send / ibv_post_recv ---------------------------------------- */

static uint32_t wr_ah_num(const struct metaroce_qp *qp,
			  const struct ibv_send_wr *wr)
{
	if (qp->sq_caps.qp_type != IBV_QPT_UD || !wr->wr.ud.ah)
		return 0;
	return to_mah(wr->wr.ud.ah)->ah_num;
}

int metaroce_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad_wr)
{
	struct metaroce_qp *qp = to_mqp(ibqp);
	struct ibv_send_wr *first = wr;
	uint32_t index, room = 0;
	int err = 0, db_err;
	void *slot;

	/*
	 * Sends are taken in RTS and SQD, and flushed in SQE and ERR; before
	 * RTS they are an error (the kernel's own post path says the same).
	 */
	if (ibqp->state == IBV_QPS_RESET || ibqp->state == IBV_QPS_INIT ||
	    ibqp->state == IBV_QPS_RTR) {
		*bad_wr = wr;
		return EINVAL;
	}

	pthread_spin_lock(&qp->sq.lock);
	index = qp->sq.ring.index;
	for (; wr; wr = wr->next) {
		slot = wq_next_slot(&qp->sq, index, &room);
		if (!slot) {
			err = ENOMEM;
			break;
		}
		err = metaroce_build_send_wqe(slot, &qp->sq_caps, wr,
					      wr_ah_num(qp, wr));
		if (err)
			break;
		index++;
	}
	db_err = wq_commit(qp, &qp->sq, index);

	if (err)
		*bad_wr = wr;
	else if (db_err)
		*bad_wr = first;
	return err ? err : db_err;
}

/*
 * Writes the receive WQEs of *@wr into @wq from its index on, stopping at
 * the first that fails (left in *@wr, its error returned).  Returns the
 * index after the last one written in *@end.  The caller holds wq->lock.
 */
static int wq_write_recvs(struct metaroce_wq *wq, struct ibv_recv_wr **wr,
			  uint32_t *end)
{
	uint32_t index = wq->ring.index, room = 0;
	int err = 0;
	void *slot;

	for (; *wr; *wr = (*wr)->next) {
		slot = wq_next_slot(wq, index, &room);
		if (!slot) {
			err = ENOMEM;
			break;
		}
		err = metaroce_build_recv_wqe(slot, wq->max_sge, *wr);
		if (err)
			break;
		index++;
	}
	*end = index;
	return err;
}

int metaroce_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad_wr)
{
	struct metaroce_qp *qp = to_mqp(ibqp);
	struct ibv_recv_wr *first = wr;
	uint32_t index;
	int err, db_err;

	/*
	 * C10-97.2.1: no receives while the QP is in RESET.  A QP on an SRQ
	 * has no receive queue of its own.
	 */
	if (ibqp->state == IBV_QPS_RESET || ibqp->srq) {
		*bad_wr = wr;
		return EINVAL;
	}

	pthread_spin_lock(&qp->rq.lock);
	err = wq_write_recvs(&qp->rq, &wr, &index);
	db_err = wq_commit(qp, &qp->rq, index);

	if (err)
		*bad_wr = wr;
	else if (db_err)
		*bad_wr = first;
	return err ? err : db_err;
}

/*
 * The QPs take from an SRQ when messages arrive, so a post needs no
 * doorbell: a QP that found it empty has told its sender to retry (RNR).
 */
int metaroce_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			   struct ibv_recv_wr **bad_wr)
{
	struct metaroce_srq *srq = to_msrq(ibsrq);
	uint32_t index;
	int err;

	pthread_spin_lock(&srq->rq.lock);
	err = wq_write_recvs(&srq->rq, &wr, &index);
	if (index != srq->rq.ring.index)
		metaroce_ring_publish(&srq->rq.ring, index);
	pthread_spin_unlock(&srq->rq.lock);

	if (err)
		*bad_wr = wr;
	return err;
}

/* --- the ibv_qp_ex work-request API --------------------------------------- */

/*
 * Every wr_<opcode>() starts a new WQE in the next free slot, taking wr_id
 * and wr_flags from the ibv_qp_ex as they are now; the wr_set_*() calls
 * that follow fill in the WQE last started.  Nothing is visible to the
 * kernel until wr_complete() publishes the batch.  Errors are remembered
 * and returned by wr_complete(), which then posts nothing.
 */

static void wr_fail(struct metaroce_qp *qp, int err)
{
	if (!qp->wr_err)
		qp->wr_err = err;
}

static void wr_start(struct ibv_qp_ex *qpx)
{
	struct metaroce_qp *qp = qpx_to_mqp(qpx);

	pthread_spin_lock(&qp->sq.lock);
	qp->wr_index = qp->sq.ring.index;
	qp->wr_cur = NULL;
	qp->wr_err = 0;
}

/* Starts the next WQE; NULL (and the batch failed) if there is none. */
static struct metaroce_send_wqe *wr_begin(struct metaroce_qp *qp,
					  enum ibv_wr_opcode opcode)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	struct metaroce_send_wqe *wqe;
	uint32_t flags;
	int err;

	qp->wr_cur = NULL;
	if (qp->wr_err)
		return NULL;
	if (!metaroce_ring_free(&qp->sq.ring, qp->wr_index)) {
		wr_fail(qp, ENOMEM);
		return NULL;
	}
	/*
	 * Inline data comes from wr_set_inline_data*(); like other providers
	 * ignore IBV_SEND_INLINE in wr_flags.
	 */
	err = metaroce_wqe_flags(qpx->wr_flags & ~(unsigned int)IBV_SEND_INLINE,
				 qp->sq_caps.sig_all, &flags);
	if (err) {
		wr_fail(qp, err);
		return NULL;
	}

	wqe = metaroce_ring_slot(&qp->sq.ring, qp->wr_index++);
	metaroce_wqe_init(wqe, qpx->wr_id, opcode, flags);
	qp->wr_cur = wqe;
	return wqe;
}

/* The WQE a wr_set_*() call applies to. */
static struct metaroce_send_wqe *wr_current(struct metaroce_qp *qp)
{
	if (!qp->wr_cur)
		wr_fail(qp, EINVAL);	/* no wr_<opcode>() before it */
	return qp->wr_err ? NULL : qp->wr_cur;
}

static void wr_send(struct ibv_qp_ex *qpx)
{
	wr_begin(qpx_to_mqp(qpx), IBV_WR_SEND);
}

static void wr_send_imm(struct ibv_qp_ex *qpx, __be32 imm_data)
{
	struct metaroce_send_wqe *wqe;

	wqe = wr_begin(qpx_to_mqp(qpx), IBV_WR_SEND_WITH_IMM);
	if (wqe)
		wqe->imm_data = imm_data;
}

static void wr_send_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct metaroce_send_wqe *wqe;

	wqe = wr_begin(qpx_to_mqp(qpx), IBV_WR_SEND_WITH_INV);
	if (wqe)
		wqe->invalidate_rkey = invalidate_rkey;
}

static void wr_bind_mw(struct ibv_qp_ex *qpx, struct ibv_mw *mw,
		       uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	struct metaroce_qp *qp = qpx_to_mqp(qpx);
	struct metaroce_send_wqe *wqe;
	int err;

	wqe = wr_begin(qp, IBV_WR_BIND_MW);
	if (!wqe)
		return;
	err = metaroce_wqe_set_bind(wqe, mw->rkey, rkey, info);
	if (err)
		wr_fail(qp, err);
}

static void wr_local_inv(struct ibv_qp_ex *qpx, uint32_t invalidate_rkey)
{
	struct metaroce_send_wqe *wqe;

	wqe = wr_begin(qpx_to_mqp(qpx), IBV_WR_LOCAL_INV);
	if (wqe)
		wqe->invalidate_rkey = invalidate_rkey;
}

static void wr_rdma(struct ibv_qp_ex *qpx, enum ibv_wr_opcode opcode,
		    uint32_t rkey, uint64_t remote_addr, __be32 imm_data)
{
	struct metaroce_send_wqe *wqe;

	wqe = wr_begin(qpx_to_mqp(qpx), opcode);
	if (!wqe)
		return;
	wqe->rdma.remote_addr = remote_addr;
	wqe->rdma.rkey = rkey;
	wqe->imm_data = imm_data;
}

static void wr_rdma_write(struct ibv_qp_ex *qpx, uint32_t rkey,
			  uint64_t remote_addr)
{
	wr_rdma(qpx, IBV_WR_RDMA_WRITE, rkey, remote_addr, 0);
}

static void wr_rdma_write_imm(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr, __be32 imm_data)
{
	wr_rdma(qpx, IBV_WR_RDMA_WRITE_WITH_IMM, rkey, remote_addr, imm_data);
}

static void wr_rdma_read(struct ibv_qp_ex *qpx, uint32_t rkey,
			 uint64_t remote_addr)
{
	wr_rdma(qpx, IBV_WR_RDMA_READ, rkey, remote_addr, 0);
}

static void wr_atomic(struct ibv_qp_ex *qpx, enum ibv_wr_opcode opcode,
		      uint32_t rkey, uint64_t remote_addr, uint64_t compare_add,
		      uint64_t swap)
{
	struct metaroce_send_wqe *wqe;

	wqe = wr_begin(qpx_to_mqp(qpx), opcode);
	if (!wqe)
		return;
	wqe->rdma.remote_addr = remote_addr;
	wqe->rdma.rkey = rkey;
	wqe->atomic.compare_add = compare_add;
	wqe->atomic.swap = swap;
}

static void wr_atomic_cmp_swp(struct ibv_qp_ex *qpx, uint32_t rkey,
			      uint64_t remote_addr, uint64_t compare,
			      uint64_t swap)
{
	wr_atomic(qpx, IBV_WR_ATOMIC_CMP_AND_SWP, rkey, remote_addr, compare,
		  swap);
}

static void wr_atomic_fetch_add(struct ibv_qp_ex *qpx, uint32_t rkey,
				uint64_t remote_addr, uint64_t add)
{
	wr_atomic(qpx, IBV_WR_ATOMIC_FETCH_AND_ADD, rkey, remote_addr, add, 0);
}

static void wr_set_ud_addr(struct ibv_qp_ex *qpx, struct ibv_ah *ah,
			   uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct metaroce_qp *qp = qpx_to_mqp(qpx);
	struct metaroce_send_wqe *wqe = wr_current(qp);

	if (!wqe)
		return;
	if (qp->sq_caps.qp_type != IBV_QPT_UD || !ah) {
		wr_fail(qp, EINVAL);
		return;
	}
	wqe->ud.ah = to_mah(ah)->ah_num;
	wqe->ud.remote_qpn = remote_qpn;
	wqe->ud.remote_qkey = remote_qkey;
}

static void wr_set_sge_list(struct ibv_qp_ex *qpx, size_t num_sge,
			    const struct ibv_sge *sg_list)
{
	struct metaroce_qp *qp = qpx_to_mqp(qpx);
	struct metaroce_send_wqe *wqe = wr_current(qp);

	if (wqe)
		wr_fail(qp, metaroce_wqe_set_sge_list(wqe, &qp->sq_caps,
						      num_sge, sg_list));
}

static void wr_set_sge(struct ibv_qp_ex *qpx, uint32_t lkey, uint64_t addr,
		       uint32_t length)
{
	const struct ibv_sge sge = {
		.addr = addr,
		.length = length,
		.lkey = lkey,
	};

	wr_set_sge_list(qpx, 1, &sge);
}

static void wr_set_inline_data_list(struct ibv_qp_ex *qpx, size_t num_buf,
				    const struct ibv_data_buf *buf_list)
{
	struct metaroce_qp *qp = qpx_to_mqp(qpx);
	struct metaroce_send_wqe *wqe = wr_current(qp);

	if (wqe)
		wr_fail(qp, metaroce_wqe_set_inline_list(wqe, &qp->sq_caps,
							 num_buf, buf_list));
}

static void wr_set_inline_data(struct ibv_qp_ex *qpx, void *addr,
			       size_t length)
{
	const struct ibv_data_buf buf = {
		.addr = addr,
		.length = length,
	};

	wr_set_inline_data_list(qpx, 1, &buf);
}

/*
 * Whether every atomic of the batch was given its 8-byte SGE: one without
 * any would otherwise reach the kernel, which fails the QP over it.
 */
static int wr_check_atomics(struct metaroce_qp *qp)
{
	uint32_t i;

	for (i = qp->sq.ring.index; i != qp->wr_index; i++) {
		struct metaroce_send_wqe *wqe = metaroce_ring_slot(&qp->sq.ring,
								   i);

		if (metaroce_wqe_is_atomic(wqe) && wqe->num_sge != 1)
			return EINVAL;
	}
	return 0;
}

static int wr_complete(struct ibv_qp_ex *qpx)
{
	struct metaroce_qp *qp = qpx_to_mqp(qpx);
	int err = qp->wr_err ? qp->wr_err : wr_check_atomics(qp), db_err;

	qp->wr_cur = NULL;
	/* On error nothing is published: the slots are simply reused. */
	db_err = wq_commit(qp, &qp->sq,
			   err ? qp->sq.ring.index : qp->wr_index);
	return err ? err : db_err;
}

static void wr_abort(struct ibv_qp_ex *qpx)
{
	struct metaroce_qp *qp = qpx_to_mqp(qpx);

	qp->wr_cur = NULL;
	pthread_spin_unlock(&qp->sq.lock);
}

void metaroce_qp_init_wr_api(struct metaroce_qp *qp, uint64_t send_ops)
{
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;

	if (send_ops & IBV_QP_EX_WITH_SEND)
		qpx->wr_send = wr_send;
	if (send_ops & IBV_QP_EX_WITH_SEND_WITH_IMM)
		qpx->wr_send_imm = wr_send_imm;
	if (send_ops & IBV_QP_EX_WITH_SEND_WITH_INV)
		qpx->wr_send_inv = wr_send_inv;
	if (send_ops & IBV_QP_EX_WITH_RDMA_WRITE)
		qpx->wr_rdma_write = wr_rdma_write;
	if (send_ops & IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
		qpx->wr_rdma_write_imm = wr_rdma_write_imm;
	if (send_ops & IBV_QP_EX_WITH_RDMA_READ)
		qpx->wr_rdma_read = wr_rdma_read;
	if (send_ops & IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP)
		qpx->wr_atomic_cmp_swp = wr_atomic_cmp_swp;
	if (send_ops & IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
		qpx->wr_atomic_fetch_add = wr_atomic_fetch_add;
	if (send_ops & IBV_QP_EX_WITH_BIND_MW)
		qpx->wr_bind_mw = wr_bind_mw;
	if (send_ops & IBV_QP_EX_WITH_LOCAL_INV)
		qpx->wr_local_inv = wr_local_inv;

	qpx->wr_set_sge = wr_set_sge;
	qpx->wr_set_sge_list = wr_set_sge_list;
	qpx->wr_set_inline_data = wr_set_inline_data;
	qpx->wr_set_inline_data_list = wr_set_inline_data_list;
	qpx->wr_set_ud_addr = wr_set_ud_addr;
	qpx->wr_start = wr_start;
	qpx->wr_complete = wr_complete;
	qpx->wr_abort = wr_abort;

	qp->vqp.comp_mask |= VERBS_QP_EX;
}
