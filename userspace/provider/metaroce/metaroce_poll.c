// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ibv_poll_cq(): completions come straight from the CQ ring the kernel
 * fills; no system call.  The ibv_cq_ex API (metaroce_cq_ex.c) reads the
 * same ring through the same metaroce_cq_read_wc().
 */
#include "metaroce.h"

int metaroce_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct metaroce_cq *cq = to_mcq(ibcq);
	uint32_t avail, n, i;

	if (ne <= 0)
		return 0;

	metaroce_cq_lock(cq);
	if (cq->broken) {
		metaroce_cq_unlock(cq);
		return -1;
	}
	avail = metaroce_ring_avail(&cq->ring);
	n = avail < (uint32_t)ne ? avail : (uint32_t)ne;
	for (i = 0; i < n; i++)
		metaroce_cq_read_wc(cq, i, &wc[i]);
	/* Only now may the kernel reuse the slots. */
	if (n)
		metaroce_ring_consume(&cq->ring, n);
	metaroce_cq_unlock(cq);
	return (int)n;
}
