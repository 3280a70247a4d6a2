/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * MetaRoCE libibverbs provider: private objects and the verbs each source
 * file implements.
 *
 *   metaroce.c       device matching, context, queries, PD, MR, AH, op table
 *   metaroce_cq.c    CQ create (also extended) / resize / destroy
 *                    (commands, ring mapping)
 *   metaroce_qp.c    QP create / modify / query / destroy
 *   metaroce_srq.c   SRQ create / modify / query / destroy
 *   metaroce_post.c  posting: ibv_post_send/recv, the ibv_qp_ex WR API,
 *                    doorbells
 *   metaroce_poll.c  ibv_poll_cq
 *   metaroce_cq_ex.c the ibv_cq_ex poll API (start/next/end_poll, read_*)
 *   metaroce_wqe.c   WQE/CQE formats (pure; unit tested)
 *   metaroce_ring.c  mmap of the kernel's rings (arithmetic: metaroce_ring.h)
 */
#ifndef METAROCE_PROVIDER_H
#define METAROCE_PROVIDER_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "driver_compat.h"
#include "metaroce_ring.h"
#include "metaroce_wqe.h"

/*
 * driver_id placed in every uverbs ioctl header.  The kernel rejects any
 * command whose header id differs from its ib_device_ops.driver_id (EINVAL),
 * and reports METAROCE_DRIVER_ID for MetaRoCE devices.
 */
#ifndef METAROCE_DRIVER_ID
#error "rdma/metaroce_abi.h does not define METAROCE_DRIVER_ID"
#endif
#define METAROCE_VERBS_DRIVER_ID METAROCE_DRIVER_ID

struct metaroce_device {
	struct verbs_device ibv_dev;
	uint32_t abi_version;	/* uverbs ABI of the kernel device */
};

struct metaroce_context {
	struct verbs_context ibv_ctx;
	uint32_t kernel_abi_version;	/* from alloc_context udata */
};

struct metaroce_pd {
	struct ibv_pd ibv_pd;
};

struct metaroce_ah {
	struct ibv_ah ibv_ah;
	uint32_t ah_num;	/* kernel handle, goes into UD WQEs */
};

struct metaroce_cq {
	struct verbs_cq vcq;	/* first: ibv_cq and ibv_cq_ex */
	/* poll_cq, the ibv_cq_ex batch, resize_cq */
	pthread_spinlock_t lock;
	struct metaroce_ring ring;	/* kernel produces, we consume */
	/* resize_cq could not map the kernel's new ring: polls fail. */
	bool broken;
	/* IBV_CREATE_CQ_ATTR_SINGLE_THREADED: the lock is never taken. */
	bool single_threaded;

	/*
	 * ibv_cq_ex batch between start_poll() and end_poll(), under lock:
	 * the entries read past ring.index (given back at end_poll()), and
	 * the current one, translated, which the read_*() callbacks return.
	 */
	uint32_t ex_polled;
	struct ibv_wc ex_wc;
};

/* A send or receive queue: the provider produces, the kernel consumes. */
struct metaroce_wq {
	pthread_spinlock_t lock;
	struct metaroce_ring ring;
	uint32_t max_sge;
};

struct metaroce_qp {
	struct verbs_qp vqp;	/* first: ibv_qp and ibv_qp_ex */
	struct metaroce_wq sq;
	struct metaroce_wq rq;	/* not mapped on an SRQ */
	struct metaroce_sq_caps sq_caps;

	/*
	 * ibv_qp_ex batch between wr_start() and wr_complete()/wr_abort(),
	 * all under sq.lock: the index of the next slot, the WQE the wr_set_*
	 * calls apply to (NULL before the first wr_<opcode>()), and the first
	 * error, which makes wr_complete() discard the batch.
	 */
	uint32_t wr_index;
	struct metaroce_send_wqe *wr_cur;
	int wr_err;
};

struct metaroce_srq {
	struct ibv_srq ibv_srq;
	struct metaroce_wq rq;	/* the provider produces, QPs take */
};

/* --- udata wrappers ------------------------------------------------------ */

METAROCE_DRV_RESP(metaroce_get_context_resp, ib_uverbs_get_context_resp,
		  metaroce_alloc_context_resp);
METAROCE_DRV_RESP(metaroce_cmd_create_cq_resp, ib_uverbs_create_cq_resp,
		  metaroce_create_cq_resp);
/* The extended command: the same driver data after the longer core part. */
METAROCE_DRV_RESP(metaroce_cmd_create_cq_ex_resp, ib_uverbs_ex_create_cq_resp,
		  metaroce_create_cq_resp);
METAROCE_DRV_RESP(metaroce_cmd_resize_cq_resp, ib_uverbs_resize_cq_resp,
		  metaroce_resize_cq_resp);
METAROCE_DRV_RESP(metaroce_cmd_create_qp_resp, ib_uverbs_create_qp_resp,
		  metaroce_create_qp_resp);
METAROCE_DRV_RESP(metaroce_cmd_create_srq_resp, ib_uverbs_create_srq_resp,
		  metaroce_create_srq_resp);
METAROCE_DRV_RESP(metaroce_cmd_create_ah_resp, ib_uverbs_create_ah_resp,
		  metaroce_create_ah_resp);

/* --- casts ------------------------------------------------------------- */

static inline struct metaroce_device *to_mdev(struct ibv_device *ibdev)
{
	return container_of(ibdev, struct metaroce_device, ibv_dev.device);
}

static inline struct metaroce_context *to_mctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct metaroce_context, ibv_ctx.context);
}

static inline struct metaroce_pd *to_mpd(struct ibv_pd *ibpd)
{
	return container_of(ibpd, struct metaroce_pd, ibv_pd);
}

static inline struct metaroce_ah *to_mah(struct ibv_ah *ibah)
{
	return container_of(ibah, struct metaroce_ah, ibv_ah);
}

static inline struct metaroce_cq *to_mcq(struct ibv_cq *ibcq)
{
	return container_of(ibcq, struct metaroce_cq, vcq.cq);
}

static inline struct metaroce_cq *cqx_to_mcq(struct ibv_cq_ex *cqx)
{
	return container_of(cqx, struct metaroce_cq, vcq.cq_ex);
}

static inline struct metaroce_qp *to_mqp(struct ibv_qp *ibqp)
{
	return container_of(ibqp, struct metaroce_qp, vqp.qp);
}

static inline struct metaroce_srq *to_msrq(struct ibv_srq *ibsrq)
{
	return container_of(ibsrq, struct metaroce_srq, ibv_srq);
}

static inline struct metaroce_qp *qpx_to_mqp(struct ibv_qp_ex *qpx)
{
	return container_of(qpx, struct metaroce_qp, vqp.qp_ex);
}

/* --- metaroce_cq.c ------------------------------------------------------- */

struct ibv_cq *metaroce_create_cq(struct ibv_context *context, int cqe,
				  struct ibv_comp_channel *channel,
				  int comp_vector);
struct ibv_cq_ex *metaroce_create_cq_ex(struct ibv_context *context,
					struct ibv_cq_init_attr_ex *attr);
int metaroce_resize_cq(struct ibv_cq *ibcq, int cqe);
int metaroce_destroy_cq(struct ibv_cq *ibcq);

/* --- CQ data path (metaroce_poll.c, metaroce_cq_ex.c) -------------------- */

static inline void metaroce_cq_lock(struct metaroce_cq *cq)
{
	if (!cq->single_threaded)
		pthread_spin_lock(&cq->lock);
}

static inline void metaroce_cq_unlock(struct metaroce_cq *cq)
{
	if (!cq->single_threaded)
		pthread_spin_unlock(&cq->lock);
}

/*
 * Translates the entry @ahead slots past the consumer index into @wc, for
 * ibv_poll_cq() and the ibv_cq_ex API alike.  The caller holds the lock
 * and has seen at least @ahead + 1 entries available.
 */
static inline void metaroce_cq_read_wc(const struct metaroce_cq *cq,
				       uint32_t ahead, struct ibv_wc *wc)
{
	struct metaroce_cqe cqe;

	/* Copy first: each field of the shared slot is read once. */
	cqe = *(const struct metaroce_cqe *)
		metaroce_ring_slot(&cq->ring, cq->ring.index + ahead);
	metaroce_cqe_to_wc(&cqe, wc);
}

int metaroce_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc);

/* The ibv_wc_read_*() fields a CQE carries (no timestamp, VLAN, tag). */
#define METAROCE_CQ_WC_FLAGS IBV_WC_STANDARD_FLAGS

/*
 * Checks an ibv_create_cq_ex() request: 0, EOPNOTSUPP for what MetaRoCE
 * does not offer (wc_flags beyond METAROCE_CQ_WC_FLAGS, a parent domain,
 * create flags other than IBV_CREATE_CQ_ATTR_SINGLE_THREADED), EINVAL for
 * comp_mask bits libibverbs does not define.
 */
int metaroce_cq_ex_check(const struct ibv_cq_init_attr_ex *attr);
/*
 * Installs the ibv_cq_ex poll callbacks, the read_*() ones for the fields
 * @wc_flags (already checked) asks for.
 */
void metaroce_cq_init_poll_ex(struct metaroce_cq *cq, uint64_t wc_flags);

/* --- metaroce_qp.c ------------------------------------------------------- */

struct ibv_qp *metaroce_create_qp(struct ibv_pd *pd,
				  struct ibv_qp_init_attr *attr);
struct ibv_qp *metaroce_create_qp_ex(struct ibv_context *context,
				     struct ibv_qp_init_attr_ex *attr);
int metaroce_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		       int attr_mask);
int metaroce_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		      int attr_mask, struct ibv_qp_init_attr *init_attr);
int metaroce_destroy_qp(struct ibv_qp *ibqp);

/* --- metaroce_srq.c ------------------------------------------------------ */

struct ibv_srq *metaroce_create_srq(struct ibv_pd *pd,
				    struct ibv_srq_init_attr *attr);
int metaroce_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
			int attr_mask);
int metaroce_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr);
int metaroce_destroy_srq(struct ibv_srq *ibsrq);

/* --- metaroce_post.c ----------------------------------------------------- */

/* ibv_qp_ex ops a QP supports, as IBV_QP_EX_WITH_* flags, per QP type. */
#define METAROCE_RC_SEND_OPS                                                   \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM |                 \
	 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |     \
	 IBV_QP_EX_WITH_RDMA_READ | IBV_QP_EX_WITH_SEND_WITH_INV |            \
	 IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |                                   \
	 IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD | IBV_QP_EX_WITH_BIND_MW |        \
	 IBV_QP_EX_WITH_LOCAL_INV)
#define METAROCE_UD_SEND_OPS                                                   \
	(IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM)

int metaroce_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr,
		       struct ibv_send_wr **bad_wr);
int metaroce_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr,
		       struct ibv_recv_wr **bad_wr);
int metaroce_post_srq_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr,
			   struct ibv_recv_wr **bad_wr);
/*
 * Installs the ibv_qp_ex callbacks for @send_ops (already checked against
 * the QP type) and marks the QP as extended.
 */
void metaroce_qp_init_wr_api(struct metaroce_qp *qp, uint64_t send_ops);

#endif /* METAROCE_PROVIDER_H */
