// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ibv_cq_ex poll API: ibv_start_poll() / ibv_next_poll() /
 * ibv_end_poll() and the ibv_wc_read_*() callbacks.
 *
 * Each entry is copied out of the ring and translated once, by the code
 * ibv_poll_cq() uses, into cq->ex_wc; the callbacks return its fields.
 * The batch holds the CQ lock from start_poll() to end_poll(), which gives
 * the slots back to the kernel, so ibv_poll_cq() on the same CQ from
 * another thread sees either all of a batch or none of it.
 */
#include <errno.h>

#include "metaroce.h"

int metaroce_cq_ex_check(const struct ibv_cq_init_attr_ex *attr)
{
	if (attr->comp_mask & ~(uint32_t)(IBV_CQ_INIT_ATTR_MASK_FLAGS |
					  IBV_CQ_INIT_ATTR_MASK_PD))
		return EINVAL;
	/* Parent domains (custom allocators, no lock) are not offered. */
	if (attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_PD)
		return EOPNOTSUPP;
	/* A CQE has no timestamp, VLAN, flow tag or tag-matching info. */
	if (attr->wc_flags & ~(uint64_t)METAROCE_CQ_WC_FLAGS)
		return EOPNOTSUPP;
	/*
	 * The kernel always moves the CQ to error on overrun
	 * (IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN is refused).
	 */
	if ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	    (attr->flags & ~(uint32_t)IBV_CREATE_CQ_ATTR_SINGLE_THREADED))
		return EOPNOTSUPP;
	return 0;
}

/* Makes entry @ahead (past the consumer index) the current one. */
static void cqx_load(struct metaroce_cq *cq, uint32_t ahead)
{
	metaroce_cq_read_wc(cq, ahead, &cq->ex_wc);
	cq->vcq.cq_ex.status = cq->ex_wc.status;
	cq->vcq.cq_ex.wr_id = cq->ex_wc.wr_id;
	cq->ex_polled = ahead + 1;
}

static int cqx_start_poll(struct ibv_cq_ex *cqx, struct ibv_poll_cq_attr *attr)
{
	struct metaroce_cq *cq = cqx_to_mcq(cqx);
	int ret;

	if (attr->comp_mask)
		return EINVAL;

	/* On any error the batch has not begun: no end_poll() follows. */
	metaroce_cq_lock(cq);
	if (cq->broken) {
		ret = EIO;
		goto err;
	}
	if (!metaroce_ring_avail(&cq->ring)) {
		ret = ENOENT;
		goto err;
	}
	cqx_load(cq, 0);
	return 0;

err:
	metaroce_cq_unlock(cq);
	return ret;
}

static int cqx_next_poll(struct ibv_cq_ex *cqx)
{
	struct metaroce_cq *cq = cqx_to_mcq(cqx);

	/*
	 * The producer is read again: the kernel may have added entries.
	 * One that went back (only user space writes it so) or jumped more
	 * than a ring ahead counts as nothing new; end_poll() still gives
	 * back just what was read.
	 */
	if (metaroce_ring_avail(&cq->ring) <= cq->ex_polled)
		return ENOENT;
	cqx_load(cq, cq->ex_polled);
	return 0;
}

static void cqx_end_poll(struct ibv_cq_ex *cqx)
{
	struct metaroce_cq *cq = cqx_to_mcq(cqx);

	/* The entries are copied out: the kernel may reuse their slots. */
	if (cq->ex_polled)
		metaroce_ring_consume(&cq->ring, cq->ex_polled);
	cq->ex_polled = 0;
	metaroce_cq_unlock(cq);
}

static enum ibv_wc_opcode cqx_read_opcode(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->ex_wc.opcode;
}

static uint32_t cqx_read_vendor_err(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->ex_wc.vendor_err;
}

static uint32_t cqx_read_byte_len(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->ex_wc.byte_len;
}

/*
 * ibv_wc_read_invalidated_rkey() reads this too: imm_data shares its bits
 * with invalidated_rkey in struct ibv_wc, as the CQE's union does.
 */
static __be32 cqx_read_imm_data(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->ex_wc.imm_data;
}

static uint32_t cqx_read_qp_num(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->ex_wc.qp_num;
}

static uint32_t cqx_read_src_qp(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->ex_wc.src_qp;
}

static unsigned int cqx_read_wc_flags(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->ex_wc.wc_flags;
}

static uint32_t cqx_read_slid(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->ex_wc.slid;
}

/* On a datagram: its network header type, as ibv_wc.sl says. */
static uint8_t cqx_read_sl(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->ex_wc.sl;
}

static uint8_t cqx_read_dlid_path_bits(struct ibv_cq_ex *cqx)
{
	return cqx_to_mcq(cqx)->ex_wc.dlid_path_bits;
}

void metaroce_cq_init_poll_ex(struct metaroce_cq *cq, uint64_t wc_flags)
{
	struct ibv_cq_ex *cqx = &cq->vcq.cq_ex;

	cqx->start_poll = cqx_start_poll;
	cqx->next_poll = cqx_next_poll;
	cqx->end_poll = cqx_end_poll;
	cqx->read_opcode = cqx_read_opcode;
	cqx->read_vendor_err = cqx_read_vendor_err;
	cqx->read_wc_flags = cqx_read_wc_flags;
	/* As libibverbs documents: only what was asked for may be read. */
	if (wc_flags & IBV_WC_EX_WITH_BYTE_LEN)
		cqx->read_byte_len = cqx_read_byte_len;
	if (wc_flags & IBV_WC_EX_WITH_IMM)
		cqx->read_imm_data = cqx_read_imm_data;
	if (wc_flags & IBV_WC_EX_WITH_QP_NUM)
		cqx->read_qp_num = cqx_read_qp_num;
	if (wc_flags & IBV_WC_EX_WITH_SRC_QP)
		cqx->read_src_qp = cqx_read_src_qp;
	if (wc_flags & IBV_WC_EX_WITH_SLID)
		cqx->read_slid = cqx_read_slid;
	if (wc_flags & IBV_WC_EX_WITH_SL)
		cqx->read_sl = cqx_read_sl;
	if (wc_flags & IBV_WC_EX_WITH_DLID_PATH_BITS)
		cqx->read_dlid_path_bits = cqx_read_dlid_path_bits;
}
