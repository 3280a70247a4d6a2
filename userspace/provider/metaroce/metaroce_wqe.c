// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Work request and completion formats: ibv_send_wr / ibv_recv_wr into
 * MetaRoCE WQEs, MetaRoCE CQEs into ibv_wc.  See metaroce_wqe.h.
 *
 * Slots live in memory the kernel reads concurrently only after the
 * producer index covering them is published, so plain stores suffice
 * here; the release store of the producer orders them.
 */
#include <errno.h>
#include <string.h>

#include "metaroce_wqe.h"

/* IBV_WR_* values are the uverbs (and kernel) opcodes the WQE carries. */
_Static_assert(IBV_WR_RDMA_WRITE == 0 && IBV_WR_RDMA_WRITE_WITH_IMM == 1 &&
		       IBV_WR_SEND == 2 && IBV_WR_SEND_WITH_IMM == 3 &&
		       IBV_WR_RDMA_READ == 4 && IBV_WR_SEND_WITH_INV == 9 &&
		       IBV_WR_ATOMIC_CMP_AND_SWP == 5 &&
		       IBV_WR_ATOMIC_FETCH_AND_ADD == 6 &&
		       IBV_WR_LOCAL_INV == 7 && IBV_WR_BIND_MW == 8,
	       "IBV_WR_* differ from IB_UVERBS_WR_*");

#define METAROCE_SUPPORTED_SEND_FLAGS                                          \
	(IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE |           \
	 IBV_SEND_FENCE)

bool metaroce_send_opcode_ok(enum ibv_qp_type qp_type,
			     enum ibv_wr_opcode opcode)
{
	switch (opcode) {
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
		return qp_type == IBV_QPT_RC || qp_type == IBV_QPT_UD;
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
	case IBV_WR_SEND_WITH_INV:
	/* Memory windows: binds, and LOCAL_INV of a type 2 window's key. */
	case IBV_WR_BIND_MW:
	case IBV_WR_LOCAL_INV:
		return qp_type == IBV_QPT_RC;
	default:
		return false;
	}
}

int metaroce_wqe_flags(unsigned int send_flags, bool sig_all, uint32_t *flags)
{
	uint32_t f = 0;

	if (send_flags & ~(unsigned int)METAROCE_SUPPORTED_SEND_FLAGS)
		return EINVAL;
	if ((send_flags & IBV_SEND_SIGNALED) || sig_all)
		f |= METAROCE_WQE_SIGNALED;
	if (send_flags & IBV_SEND_SOLICITED)
		f |= METAROCE_WQE_SOLICITED;
	if (send_flags & IBV_SEND_FENCE)
		f |= METAROCE_WQE_FENCE;
	*flags = f;
	return 0;
}

void metaroce_wqe_init(struct metaroce_send_wqe *wqe, uint64_t wr_id,
		       enum ibv_wr_opcode opcode, uint32_t flags)
{
	memset(wqe, 0, sizeof(*wqe));
	wqe->wr_id = wr_id;
	wqe->opcode = (uint32_t)opcode;
	wqe->flags = flags;
}

bool metaroce_wqe_is_atomic(const struct metaroce_send_wqe *wqe)
{
	return wqe->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
	       wqe->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD;
}

int metaroce_wqe_set_sge_list(struct metaroce_send_wqe *wqe,
			      const struct metaroce_sq_caps *caps,
			      size_t num_sge, const struct ibv_sge *sg_list)
{
	struct metaroce_sge *sge = (struct metaroce_sge *)(wqe + 1);
	size_t i;

	if (num_sge > caps->max_sge)
		return EINVAL;
	/* An atomic's result: one 8-byte buffer, as the kernel requires. */
	if (metaroce_wqe_is_atomic(wqe) &&
	    (num_sge != 1 || sg_list[0].length != sizeof(uint64_t)))
		return EINVAL;

	for (i = 0; i < num_sge; i++) {
		sge[i].addr = sg_list[i].addr;
		sge[i].length = sg_list[i].length;
		sge[i].lkey = sg_list[i].lkey;
	}
	wqe->num_sge = (uint32_t)num_sge;
	wqe->inline_len = 0;
	wqe->flags &= ~(uint32_t)METAROCE_WQE_INLINE;
	return 0;
}

/* Appends @len bytes at @addr to the inline data of @wqe (room checked). */
static void wqe_append_inline(struct metaroce_send_wqe *wqe, const void *addr,
			      size_t len)
{
	uint8_t *dst = (uint8_t *)(wqe + 1) + wqe->inline_len;

	if (len)
		memcpy(dst, addr, len);
	wqe->inline_len += (uint32_t)len;
}

static int wqe_begin_inline(struct metaroce_send_wqe *wqe)
{
	/* READs and atomics write into local buffers: nothing to inline. */
	if (wqe->opcode == IBV_WR_RDMA_READ || metaroce_wqe_is_atomic(wqe))
		return EINVAL;
	wqe->num_sge = 0;
	wqe->inline_len = 0;
	wqe->flags |= METAROCE_WQE_INLINE;
	return 0;
}

int metaroce_wqe_set_inline_list(struct metaroce_send_wqe *wqe,
				 const struct metaroce_sq_caps *caps,
				 size_t num_buf, const struct ibv_data_buf *buf)
{
	size_t total = 0;
	size_t i;
	int err;

	for (i = 0; i < num_buf; i++) {
		if (buf[i].length > caps->max_inline - total)
			return EINVAL;
		total += buf[i].length;
	}
	err = wqe_begin_inline(wqe);
	if (err)
		return err;
	for (i = 0; i < num_buf; i++)
		wqe_append_inline(wqe, buf[i].addr, buf[i].length);
	return 0;
}

/* IBV_SEND_INLINE: the SGEs name the data to copy, by virtual address. */
static int wqe_set_inline_sges(struct metaroce_send_wqe *wqe,
			       const struct metaroce_sq_caps *caps,
			       size_t num_sge, const struct ibv_sge *sg_list)
{
	size_t total = 0;
	size_t i;
	int err;

	for (i = 0; i < num_sge; i++) {
		if (sg_list[i].length > caps->max_inline - total)
			return EINVAL;
		total += sg_list[i].length;
	}
	err = wqe_begin_inline(wqe);
	if (err)
		return err;
	for (i = 0; i < num_sge; i++)
		wqe_append_inline(wqe, (const void *)(uintptr_t)sg_list[i].addr,
				  sg_list[i].length);
	return 0;
}

/*
 * A window grants remote rights only: local write, which applications pass
 * out of habit, is ignored; a zero-based window or any other bit is refused
 * here, before it could fail the QP with a bind error.
 */
#define MW_REMOTE_ACCESS (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | \
			  IBV_ACCESS_REMOTE_ATOMIC)

int metaroce_wqe_set_bind(struct metaroce_send_wqe *wqe, uint32_t mw_rkey,
			  uint32_t rkey, const struct ibv_mw_bind_info *info)
{
	if (info->mw_access_flags & ~(MW_REMOTE_ACCESS | IBV_ACCESS_LOCAL_WRITE))
		return EINVAL;
	wqe->bind.mw_rkey = mw_rkey;
	wqe->bind.rkey = rkey;
	wqe->bind.addr = info->addr;
	wqe->bind_mr.length = info->length;
	wqe->bind_mr.mr_lkey = info->mr ? info->mr->lkey : 0;
	wqe->bind_mr.access = info->mw_access_flags & MW_REMOTE_ACCESS;
	wqe->num_sge = 0;
	wqe->inline_len = 0;
	return 0;
}

int metaroce_build_send_wqe(void *slot, const struct metaroce_sq_caps *caps,
			    const struct ibv_send_wr *wr, uint32_t ah_num)
{
	struct metaroce_send_wqe *wqe = slot;
	uint32_t flags;
	int err;

	if (!metaroce_send_opcode_ok(caps->qp_type, wr->opcode) ||
	    wr->num_sge < 0)
		return EINVAL;
	if (caps->qp_type == IBV_QPT_UD && !wr->wr.ud.ah)
		return EINVAL;
	err = metaroce_wqe_flags(wr->send_flags, caps->sig_all, &flags);
	if (err)
		return err;

	metaroce_wqe_init(wqe, wr->wr_id, wr->opcode, flags);
	if (wr->opcode == IBV_WR_SEND_WITH_IMM ||
	    wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM)
		wqe->imm_data = wr->imm_data;
	if (wr->opcode == IBV_WR_SEND_WITH_INV ||
	    wr->opcode == IBV_WR_LOCAL_INV)
		wqe->invalidate_rkey = wr->invalidate_rkey;
	/* Local operations: no data. */
	if (wr->opcode == IBV_WR_LOCAL_INV)
		return 0;
	if (wr->opcode == IBV_WR_BIND_MW) {
		if (!wr->bind_mw.mw)
			return EINVAL;
		return metaroce_wqe_set_bind(wqe, wr->bind_mw.mw->rkey,
					     wr->bind_mw.rkey,
					     &wr->bind_mw.bind_info);
	}

	if (caps->qp_type == IBV_QPT_UD) {
		wqe->ud.ah = ah_num;
		wqe->ud.remote_qpn = wr->wr.ud.remote_qpn;
		wqe->ud.remote_qkey = wr->wr.ud.remote_qkey;
	} else if (metaroce_wqe_is_atomic(wqe)) {
		wqe->rdma.remote_addr = wr->wr.atomic.remote_addr;
		wqe->rdma.rkey = wr->wr.atomic.rkey;
		wqe->atomic.compare_add = wr->wr.atomic.compare_add;
		if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP)
			wqe->atomic.swap = wr->wr.atomic.swap;
	} else if (wr->opcode != IBV_WR_SEND &&
		   wr->opcode != IBV_WR_SEND_WITH_IMM &&
		   wr->opcode != IBV_WR_SEND_WITH_INV) {
		wqe->rdma.remote_addr = wr->wr.rdma.remote_addr;
		wqe->rdma.rkey = wr->wr.rdma.rkey;
	}

	if (wr->send_flags & IBV_SEND_INLINE)
		return wqe_set_inline_sges(wqe, caps, (size_t)wr->num_sge,
					   wr->sg_list);
	return metaroce_wqe_set_sge_list(wqe, caps, (size_t)wr->num_sge,
					 wr->sg_list);
}

int metaroce_build_recv_wqe(void *slot, uint32_t max_sge,
			    const struct ibv_recv_wr *wr)
{
	struct metaroce_recv_wqe *wqe = slot;
	struct metaroce_sge *sge = (struct metaroce_sge *)(wqe + 1);
	int i;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > max_sge)
		return EINVAL;

	for (i = 0; i < wr->num_sge; i++) {
		sge[i].addr = wr->sg_list[i].addr;
		sge[i].length = wr->sg_list[i].length;
		sge[i].lkey = wr->sg_list[i].lkey;
	}
	wqe->wr_id = wr->wr_id;
	wqe->num_sge = (uint32_t)wr->num_sge;
	wqe->reserved = 0;
	return 0;
}

void metaroce_cqe_to_wc(const struct metaroce_cqe *cqe, struct ibv_wc *wc)
{
	wc->wr_id = cqe->wr_id;
	wc->status = (enum ibv_wc_status)cqe->status;
	wc->opcode = (enum ibv_wc_opcode)cqe->opcode;
	wc->vendor_err = cqe->vendor_err;
	wc->byte_len = cqe->byte_len;
	wc->qp_num = cqe->qp_num;
	wc->src_qp = cqe->src_qp;
	wc->wc_flags = 0;
	wc->imm_data = 0;
	if (cqe->flags & METAROCE_CQE_WITH_IMM) {
		wc->wc_flags |= IBV_WC_WITH_IMM;
		wc->imm_data = cqe->imm_data;	/* big endian, as sent */
	}
	if (cqe->flags & METAROCE_CQE_WITH_INV) {
		wc->wc_flags |= IBV_WC_WITH_INV;
		wc->invalidated_rkey = cqe->invalidated_rkey;
	}
	if (cqe->flags & METAROCE_CQE_GRH)
		wc->wc_flags |= IBV_WC_GRH;
	wc->pkey_index = cqe->pkey_index;
	/* No LIDs on Ethernet. */
	wc->slid = 0;
	wc->sl = 0;
	wc->dlid_path_bits = 0;
	/*
	 * What is in front of a datagram, in sl as mlx5 reports it on RoCE
	 * (bits 2:0: 1 an IPv6 header, 2 an IPv4 header in the last 20 of
	 * the 40 bytes): UCX reads it to find the destination address there.
	 */
	if (cqe->flags & METAROCE_CQE_GRH) {
		if (cqe->network_hdr_type == METAROCE_NETWORK_IPV4)
			wc->sl = METAROCE_WC_SL_IPV4;
		else if (cqe->network_hdr_type == METAROCE_NETWORK_IPV6)
			wc->sl = METAROCE_WC_SL_IPV6;
	}
}
