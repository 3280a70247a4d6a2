// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ibv_poll_cq(): completions come straight from the CQ ring the kernel
 * fills; no system call.
 */
#include "metaroce.h"

int metaroce_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct metaroce_cq *cq = to_mcq(ibcq);
	struct metaroce_cqe cqe;
	uint32_t avail, n, i;

	if (ne <= 0)
		return 0;

	pthread_spin_lock(&cq->lock);
	if (cq->broken) {
		pthread_spin_unlock(&cq->lock);
		return -1;
	}
	avail = metaroce_ring_avail(&cq->ring);
	n = avail < (uint32_t)ne ? avail : (uint32_t)ne;
	for (i = 0; i < n; i++) {
		/* Copy first: each field of the shared slot is read once. */
		cqe = *(const struct metaroce_cqe *)
			metaroce_ring_slot(&cq->ring, cq->ring.index + i);
		metaroce_cqe_to_wc(&cqe, &wc[i]);
	}
	/* Only now may the kernel reuse the slots. */
	if (n)
		metaroce_ring_consume(&cq->ring, n);
	pthread_spin_unlock(&cq->lock);
	return (int)n;
}
