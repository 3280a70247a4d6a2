// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Shared receive queues: creation, modification (the limit), query and
 * destruction.  The kernel maps the SRQ's ring like a QP's RQ; posting
 * (metaroce_post.c) writes into it with no system call.
 */
#include <errno.h>
#include <stdlib.h>

#include "metaroce.h"

struct ibv_srq *metaroce_create_srq(struct ibv_pd *pd,
				    struct ibv_srq_init_attr *attr)
{
	const uint32_t recv_head = sizeof(struct metaroce_recv_wqe);
	struct metaroce_cmd_create_srq_resp resp = {};
	struct ibv_create_srq cmd = {};
	struct metaroce_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;

	ret = ibv_cmd_create_srq(pd, &srq->ibv_srq, attr, &cmd, sizeof(cmd),
				 &resp.ibv_resp, sizeof(resp));
	if (ret)
		goto err_free;

	ret = metaroce_ring_map(pd->context->cmd_fd, &resp.drv_payload.rq,
				recv_head, &srq->rq.ring);
	if (ret) {
		verbs_err(verbs_get_ctx(pd->context),
			  "cannot map SRQ ring (%d)\n", ret);
		goto err_destroy;
	}
	/* The producer index is ours; a new ring starts where it says. */
	srq->rq.ring.index = srq->rq.ring.hdr->producer;
	srq->rq.max_sge = metaroce_ring_recv_sges(&srq->rq.ring,
						  attr->attr.max_sge);

	ret = pthread_spin_init(&srq->rq.lock, PTHREAD_PROCESS_PRIVATE);
	if (ret)
		goto err_unmap;
	return &srq->ibv_srq;

err_unmap:
	metaroce_ring_unmap(&srq->rq.ring);
err_destroy:
	ibv_cmd_destroy_srq(&srq->ibv_srq);
err_free:
	free(srq);
	errno = ret;
	return NULL;
}

int metaroce_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr,
			int attr_mask)
{
	struct ibv_modify_srq cmd = {};

	return ibv_cmd_modify_srq(ibsrq, attr, attr_mask, &cmd, sizeof(cmd));
}

int metaroce_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd = {};

	return ibv_cmd_query_srq(ibsrq, attr, &cmd, sizeof(cmd));
}

int metaroce_destroy_srq(struct ibv_srq *ibsrq)
{
	struct metaroce_srq *srq = to_msrq(ibsrq);
	int ret;

	ret = ibv_cmd_destroy_srq(ibsrq);
	if (ret)
		return ret;

	metaroce_ring_unmap(&srq->rq.ring);
	pthread_spin_destroy(&srq->rq.lock);
	free(srq);
	return 0;
}
