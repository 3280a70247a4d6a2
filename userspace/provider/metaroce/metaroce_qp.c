// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Queue pairs: creation (including the ibv_qp_ex work-request API),
 * modification, query and destruction.  RC and UD only, on an RQ of their
 * own or an SRQ; no XRC or create flags.  The send and receive rings are
 * mapped from the kernel; posting is in metaroce_post.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "metaroce.h"

/* comp_mask bits passed on to ibv_cmd_create_qp_ex(). */
#define METAROCE_QP_COMP_MASK                                                  \
	(IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)

static uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static int check_init_attr(const struct ibv_qp_init_attr_ex *attr)
{
	uint64_t ops;

	if (attr->qp_type != IBV_QPT_RC && attr->qp_type != IBV_QPT_UD)
		return EOPNOTSUPP;
	/* Create flags only if none is set; no XRC, RSS, TSO. */
	if (attr->comp_mask & ~(uint32_t)(METAROCE_QP_COMP_MASK |
					  IBV_QP_INIT_ATTR_CREATE_FLAGS))
		return EOPNOTSUPP;
	if ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	    attr->create_flags)
		return EOPNOTSUPP;
	if (!(attr->comp_mask & IBV_QP_INIT_ATTR_PD) || !attr->pd ||
	    !attr->send_cq || !attr->recv_cq)
		return EINVAL;

	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS) {
		ops = attr->qp_type == IBV_QPT_RC ? METAROCE_RC_SEND_OPS :
						    METAROCE_UD_SEND_OPS;
		if (attr->send_ops_flags & ~ops)
			return EOPNOTSUPP;
	}
	return 0;
}

/*
 * Maps both rings and derives the posting limits from the capabilities
 * the kernel granted (@cap) and what a slot can really hold.
 */
static int map_queues(struct metaroce_qp *qp, int cmd_fd,
		      const struct ibv_qp_init_attr_ex *attr,
		      const struct metaroce_create_qp_resp *resp)
{
	const uint32_t send_head = sizeof(struct metaroce_send_wqe);
	const uint32_t recv_head = sizeof(struct metaroce_recv_wqe);
	const uint32_t sge = sizeof(struct metaroce_sge);
	int ret;

	ret = metaroce_ring_map(cmd_fd, &resp->sq, send_head, &qp->sq.ring);
	if (ret)
		return ret;
	/* The producer indices are ours; new rings start where they say. */
	qp->sq.ring.index = qp->sq.ring.hdr->producer;
	qp->sq.max_sge = min_u32(attr->cap.max_send_sge,
				 (qp->sq.ring.stride - send_head) / sge);
	/* On an SRQ there is no RQ: receives are posted to the SRQ. */
	if (!attr->srq) {
		ret = metaroce_ring_map(cmd_fd, &resp->rq, recv_head,
					&qp->rq.ring);
		if (ret) {
			metaroce_ring_unmap(&qp->sq.ring);
			return ret;
		}
		qp->rq.ring.index = qp->rq.ring.hdr->producer;
		qp->rq.max_sge = metaroce_ring_recv_sges(&qp->rq.ring,
							 attr->cap.max_recv_sge);
	}

	qp->sq_caps.qp_type = attr->qp_type;
	qp->sq_caps.max_sge = qp->sq.max_sge;
	qp->sq_caps.max_inline = min_u32(resp->max_inline_data,
					 qp->sq.ring.stride - send_head);
	qp->sq_caps.sig_all = attr->sq_sig_all != 0;
	return 0;
}

static int init_locks(struct metaroce_qp *qp)
{
	int ret;

	ret = pthread_spin_init(&qp->sq.lock, PTHREAD_PROCESS_PRIVATE);
	if (ret)
		return ret;
	ret = pthread_spin_init(&qp->rq.lock, PTHREAD_PROCESS_PRIVATE);
	if (ret)
		pthread_spin_destroy(&qp->sq.lock);
	return ret;
}

/*
 * Both ibv_create_qp() and ibv_create_qp_ex() end here.  On success the
 * capabilities the kernel granted are in attr->cap.
 */
static struct ibv_qp *create_qp(struct ibv_context *context,
				struct ibv_qp_init_attr_ex *attr)
{
	struct metaroce_cmd_create_qp_resp resp = {};
	struct ibv_create_qp cmd = {};
	struct ibv_qp_init_attr_ex cmd_attr;
	struct metaroce_qp *qp;
	int ret;

	ret = check_init_attr(attr);
	if (ret) {
		errno = ret;
		return NULL;
	}

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;

	/* The helper accepts only the comp_mask bits it knows. */
	cmd_attr = *attr;
	cmd_attr.comp_mask &= METAROCE_QP_COMP_MASK;
	ret = ibv_cmd_create_qp_ex(context, &qp->vqp, &cmd_attr, &cmd,
				   sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (ret)
		goto err_free;

	ret = map_queues(qp, context->cmd_fd, &cmd_attr, &resp.drv_payload);
	if (ret) {
		verbs_err(verbs_get_ctx(context),
			  "cannot map QP rings (%d)\n", ret);
		goto err_destroy;
	}
	ret = init_locks(qp);
	if (ret)
		goto err_unmap;

	if (attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS)
		metaroce_qp_init_wr_api(qp, attr->send_ops_flags);

	/* What the kernel granted (max_send_wr = slots in the ring, ...). */
	attr->cap = cmd_attr.cap;
	return &qp->vqp.qp;

err_unmap:
	metaroce_ring_unmap(&qp->rq.ring);
	metaroce_ring_unmap(&qp->sq.ring);
err_destroy:
	ibv_cmd_destroy_qp(&qp->vqp.qp);
err_free:
	free(qp);
	errno = ret;
	return NULL;
}

struct ibv_qp *metaroce_create_qp(struct ibv_pd *pd,
				  struct ibv_qp_init_attr *attr)
{
	struct ibv_qp_init_attr_ex attr_ex = {
		.qp_context = attr->qp_context,
		.send_cq = attr->send_cq,
		.recv_cq = attr->recv_cq,
		.srq = attr->srq,
		.cap = attr->cap,
		.qp_type = attr->qp_type,
		.sq_sig_all = attr->sq_sig_all,
		.comp_mask = IBV_QP_INIT_ATTR_PD,
		.pd = pd,
	};
	struct ibv_qp *qp;

	qp = create_qp(pd->context, &attr_ex);
	if (qp)
		attr->cap = attr_ex.cap;
	return qp;
}

struct ibv_qp *metaroce_create_qp_ex(struct ibv_context *context,
				     struct ibv_qp_init_attr_ex *attr)
{
	return create_qp(context, attr);
}

int metaroce_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		       int attr_mask)
{
	struct ibv_modify_qp cmd = {};

	/*
	 * Nothing to do here on RESET: the kernel drops what was posted by
	 * moving the consumer indices up to our producers, which stay valid.
	 */
	return ibv_cmd_modify_qp(ibqp, attr, attr_mask, &cmd, sizeof(cmd));
}

int metaroce_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *attr,
		      int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd = {};

	return ibv_cmd_query_qp(ibqp, attr, attr_mask, init_attr, &cmd,
				sizeof(cmd));
}

int metaroce_destroy_qp(struct ibv_qp *ibqp)
{
	struct metaroce_qp *qp = to_mqp(ibqp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;

	metaroce_ring_unmap(&qp->rq.ring);
	metaroce_ring_unmap(&qp->sq.ring);
	pthread_spin_destroy(&qp->rq.lock);
	pthread_spin_destroy(&qp->sq.lock);
	free(qp);
	return 0;
}
