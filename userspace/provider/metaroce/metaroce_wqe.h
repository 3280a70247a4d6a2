/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Encoding of work requests into ring slots and decoding of completions:
 * the translation between the public verbs structures and the MetaRoCE
 * uapi formats.  Pure functions over caller-provided memory (no locking,
 * no libibverbs private interface), shared by ibv_post_send(), the
 * ibv_qp_ex work-request API and the unit tests.
 */
#ifndef METAROCE_WQE_H
#define METAROCE_WQE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "metaroce_ring.h"

/* What a send queue accepts; fixed when the QP is created. */
struct metaroce_sq_caps {
	enum ibv_qp_type qp_type;	/* IBV_QPT_RC or IBV_QPT_UD */
	uint32_t max_sge;		/* SGEs that fit a slot */
	uint32_t max_inline;		/* inline bytes that fit a slot */
	bool sig_all;			/* created with sq_sig_all */
};

/* Whether @opcode may be posted to a send queue of type @qp_type. */
bool metaroce_send_opcode_ok(enum ibv_qp_type qp_type,
			     enum ibv_wr_opcode opcode);

/*
 * METAROCE_WQE_* flags for ibv send flags @send_flags.  Returns EINVAL for
 * flags MetaRoCE does not implement (IBV_SEND_IP_CSUM, unknown bits).
 * IBV_SEND_INLINE maps to nothing here: METAROCE_WQE_INLINE is set by
 * whoever copies the inline data.
 */
int metaroce_wqe_flags(unsigned int send_flags, bool sig_all, uint32_t *flags);

/*
 * Starts a send WQE in @wqe: the head is rewritten (stale contents of the
 * slot cleared) with no SGEs and no inline data.
 */
void metaroce_wqe_init(struct metaroce_send_wqe *wqe, uint64_t wr_id,
		       enum ibv_wr_opcode opcode, uint32_t flags);

/* Whether @wqe is a compare-and-swap or a fetch-and-add. */
bool metaroce_wqe_is_atomic(const struct metaroce_send_wqe *wqe);

/*
 * Gives @wqe @num_sge gather entries.  EINVAL if more than caps allow, or
 * for an atomic other than one SGE of 8 bytes (its result).
 */
int metaroce_wqe_set_sge_list(struct metaroce_send_wqe *wqe,
			      const struct metaroce_sq_caps *caps,
			      size_t num_sge, const struct ibv_sge *sg_list);

/*
 * Copies @num_buf buffers into @wqe as inline data.  EINVAL if the total
 * exceeds caps->max_inline or the opcode is an RDMA READ.
 */
int metaroce_wqe_set_inline_list(struct metaroce_send_wqe *wqe,
				 const struct metaroce_sq_caps *caps,
				 size_t num_buf, const struct ibv_data_buf *buf);

/*
 * Makes @wqe (a BIND_MW) bind the window that has key @mw_rkey with the new
 * key @rkey as @info says; a NULL MR (length 0) unbinds a type 1 window.
 * EINVAL for rights a window cannot grant.
 */
int metaroce_wqe_set_bind(struct metaroce_send_wqe *wqe, uint32_t mw_rkey,
			  uint32_t rkey, const struct ibv_mw_bind_info *info);

/*
 * Builds the WQE for @wr into @slot.  @ah_num is the kernel's AH handle of
 * wr->wr.ud.ah (UD only).  Returns 0, or EINVAL for a request this queue
 * cannot carry (opcode, flags, SGE count, inline size, missing AH).
 */
int metaroce_build_send_wqe(void *slot, const struct metaroce_sq_caps *caps,
			    const struct ibv_send_wr *wr, uint32_t ah_num);

/* Builds the receive WQE for @wr into @slot; EINVAL if too many SGEs. */
int metaroce_build_recv_wqe(void *slot, uint32_t max_sge,
			    const struct ibv_recv_wr *wr);

/* ibv_wc.sl of a datagram: its network header, as mlx5 says on RoCE. */
#define METAROCE_WC_SL_IPV6 1
#define METAROCE_WC_SL_IPV4 2

/* Translates one completion (already copied out of the ring). */
void metaroce_cqe_to_wc(const struct metaroce_cqe *cqe, struct ibv_wc *wc);

#endif /* METAROCE_WQE_H */
