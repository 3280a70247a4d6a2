// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Completion queues: creation (ibv_create_cq, ibv_create_cq_ex), resizing
 * and destruction.  The kernel writes struct metaroce_cqe entries into a
 * ring the provider maps and polls (metaroce_poll.c, metaroce_cq_ex.c).
 */
#include <errno.h>
#include <stdlib.h>

#include "metaroce.h"

/*
 * Maps the ring a create response names and readies the lock, for either
 * create command; on failure the caller destroys the kernel CQ.
 */
static int cq_setup(struct metaroce_cq *cq, struct ibv_context *context,
		    const struct metaroce_create_cq_resp *drv)
{
	int ret;

	ret = metaroce_ring_map(context->cmd_fd, &drv->cq,
				sizeof(struct metaroce_cqe), &cq->ring);
	if (ret) {
		verbs_err(verbs_get_ctx(context),
			  "cannot map CQ ring (%d)\n", ret);
		return ret;
	}
	/* The consumer index is ours; a new ring starts where it says. */
	cq->ring.index = cq->ring.hdr->consumer;

	ret = pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	if (ret)
		metaroce_ring_unmap(&cq->ring);
	return ret;
}

struct ibv_cq *metaroce_create_cq(struct ibv_context *context, int cqe,
				  struct ibv_comp_channel *channel,
				  int comp_vector)
{
	struct metaroce_cmd_create_cq_resp resp = {};
	struct ibv_create_cq cmd = {};
	struct metaroce_cq *cq;
	int ret;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;

	ret = ibv_cmd_create_cq(context, cqe, channel, comp_vector,
				&cq->vcq.cq, &cmd, sizeof(cmd), &resp.ibv_resp,
				sizeof(resp));
	if (ret)
		goto err_free;

	ret = cq_setup(cq, context, &resp.drv_payload);
	if (ret)
		goto err_destroy;
	return &cq->vcq.cq;

err_destroy:
	ibv_cmd_destroy_cq(&cq->vcq.cq);
err_free:
	free(cq);
	errno = ret;
	return NULL;
}

/*
 * The same kernel CQ and ring as metaroce_create_cq(): the extended command
 * only adds create flags, and the kernel takes none.  So the CQ also serves
 * ibv_poll_cq(), completion channels and ibv_resize_cq().
 */
struct ibv_cq_ex *metaroce_create_cq_ex(struct ibv_context *context,
					struct ibv_cq_init_attr_ex *attr)
{
	struct metaroce_cmd_create_cq_ex_resp resp = {};
	struct ibv_create_cq_ex cmd = {};
	struct metaroce_cq *cq;
	int ret;

	ret = metaroce_cq_ex_check(attr);
	if (ret) {
		errno = ret;
		return NULL;
	}

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;

	ret = ibv_cmd_create_cq_ex(context, attr, &cq->vcq, &cmd, sizeof(cmd),
				   &resp.ibv_resp, sizeof(resp), 0);
	if (ret)
		goto err_free;

	ret = cq_setup(cq, context, &resp.drv_payload);
	if (ret)
		goto err_destroy;

	cq->single_threaded =
		(attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
		(attr->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED);
	metaroce_cq_init_poll_ex(cq, attr->wc_flags);
	return &cq->vcq.cq_ex;

err_destroy:
	ibv_cmd_destroy_cq(&cq->vcq.cq);
err_free:
	free(cq);
	errno = ret;
	return NULL;
}

/*
 * The kernel moves the unconsumed completions to a new ring, slots 0..n-1,
 * and drops the old one.  Holding the lock across the command keeps
 * pollers off the old ring while the kernel copies from it, and makes them
 * find the new one afterwards.
 */
int metaroce_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct metaroce_cq *cq = to_mcq(ibcq);
	struct metaroce_cmd_resize_cq_resp resp = {};
	struct ibv_resize_cq cmd = {};
	struct metaroce_ring ring = {};
	int ret;

	metaroce_cq_lock(cq);
	if (cq->broken) {
		ret = EIO;
		goto out;
	}

	ret = ibv_cmd_resize_cq(ibcq, cqe, &cmd, sizeof(cmd), &resp.ibv_resp,
				sizeof(resp));
	if (ret)
		goto out;

	ret = metaroce_ring_map(ibcq->context->cmd_fd, &resp.drv_payload.cq,
				sizeof(struct metaroce_cqe), &ring);
	if (ret) {
		/*
		 * The kernel has switched to a ring we cannot see.  Keep the
		 * old mapping (valid memory, never written again) and make
		 * every poll fail rather than report nothing forever.
		 */
		cq->broken = true;
		verbs_err(verbs_get_ctx(ibcq->context),
			  "cannot map resized CQ ring (%d)\n", ret);
		goto out;
	}
	metaroce_ring_unmap(&cq->ring);
	cq->ring = ring;
	cq->ring.index = cq->ring.hdr->consumer;	/* 0 */
out:
	metaroce_cq_unlock(cq);
	return ret;
}

int metaroce_destroy_cq(struct ibv_cq *ibcq)
{
	struct metaroce_cq *cq = to_mcq(ibcq);
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;

	metaroce_ring_unmap(&cq->ring);
	pthread_spin_destroy(&cq->lock);
	free(cq);
	return 0;
}
