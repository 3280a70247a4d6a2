// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Paths (protocol.md section 7): each a UDP source port that ECMP hashes
 * onto its own route. New packets go round robin over healthy paths (a
 * slow one gets one per round trip); a path that loses packets in a row is
 * failed, left alone for a backoff, then probed; a delivery on it makes it
 * healthy again.
 */
#include <linux/jhash.h>

#include "metaroce_loc.h"
#include "metaroce_soft.h"

/* Losses in a row that fail a path. */
#define PATH_FAIL_LOSSES	3
#define PATH_MIN_BACKOFF_US	2000
#define PATH_MAX_BACKOFF_US	(500 * USEC_PER_MSEC)

/* Distinct for the paths of one QP: 0x9e5 is odd, so i -> i * 0x9e5 is a
 * bijection modulo 2^14.
 */
u16 soft_path_entropy(u32 qpn, unsigned int path)
{
	return (jhash_1word(qpn, 0x6d72) + path * 0x9e5) &
	       METAROCE_ENTROPY_MASK;
}

void soft_paths_init(struct soft_req *req, u32 qpn, unsigned int num_paths)
{
	unsigned int i;

	num_paths = clamp(num_paths, 1U, (unsigned int)SOFT_MAX_PATHS);
	for (i = 0; i < num_paths; i++) {
		struct soft_path *path = &req->paths[i];

		memset(path, 0, sizeof(*path));
		if (dst_cache_init(&path->dst, GFP_KERNEL))
			goto err;
		path->entropy = soft_path_entropy(qpn, i);
		path->backoff_us = PATH_MIN_BACKOFF_US;
	}
	req->num_paths = num_paths;
	return;
err:
	while (i--)
		dst_cache_destroy(&req->paths[i].dst);
	req->num_paths = 0;
}

void soft_paths_cleanup(struct soft_req *req)
{
	unsigned int i;

	for (i = 0; i < req->num_paths; i++)
		dst_cache_destroy(&req->paths[i].dst);
	req->num_paths = 0;
}

/* Whether @path may carry a packet now; a probe moves its clock on. */
static bool path_usable(struct soft_path *path, u32 now)
{
	if (path->state == PATH_ACTIVE)
		return true;
	if ((s32)(now - path->retry_at_us) < 0)
		return false;
	/* One probe, then wait again unless it is delivered. */
	path->retry_at_us = now + (path->state == PATH_FAILED ?
				   path->backoff_us : max(path->srtt_us, 100U));
	return true;
}

/*
 * Picks the path for the next packet, not @avoid if there is a choice
 * (a retransmission avoids the path its packet was lost on).
 */
int soft_path_pick(struct soft_req *req, int avoid)
{
	unsigned int n = req->num_paths, i, best_rtt = U32_MAX;
	u32 now = soft_now_us();

	for (i = 0; i < n; i++)
		if (req->paths[i].state == PATH_ACTIVE &&
		    req->paths[i].srtt_us && req->paths[i].srtt_us < best_rtt)
			best_rtt = req->paths[i].srtt_us;

	for (i = 0; i < n; i++) {
		unsigned int p = (req->next_path + i) % n;
		struct soft_path *path = &req->paths[p];

		if ((int)p == avoid && n > 1)
			continue;
		/*
		 * Skip slow paths (more than twice the best round trip), but
		 * for one packet per their round trip: a path left unused is
		 * never measured again, one high sample would exclude it for
		 * good, and one that went bad would never fail.
		 */
		if (path->state == PATH_ACTIVE && best_rtt != U32_MAX &&
		    path->srtt_us > 2 * best_rtt + 200 &&
		    now - path->used_us < path->srtt_us)
			continue;
		if (!path_usable(path, now))
			continue;
		path->used_us = now;
		req->next_path = (p + 1) % n;
		return p;
	}
	/* Nothing healthy: go on round robin over all, so probes continue. */
	i = req->next_path;
	req->paths[i].used_us = now;
	req->next_path = (i + 1) % n;
	return i;
}

void soft_path_on_delivered(struct soft_req *req, unsigned int path)
{
	struct soft_path *p = &req->paths[path];

	p->consecutive_losses = 0;
	if (p->state != PATH_ACTIVE) {
		p->state = PATH_ACTIVE;
		p->backoff_us = PATH_MIN_BACKOFF_US;
		metaroce_count(container_of(req, struct metaroce_soft_qp,
					    req)->qp->mdev, PATH_RECOVERED);
	}
}

void soft_path_on_lost(struct metaroce_dev *mdev, struct soft_req *req,
		       unsigned int path)
{
	struct soft_path *p = &req->paths[path];

	p->lost++;
	if (++p->consecutive_losses < PATH_FAIL_LOSSES) {
		if (p->state == PATH_ACTIVE && req->num_paths > 1) {
			p->state = PATH_SUSPECT;
			p->retry_at_us = soft_now_us() + max(p->srtt_us, 100U);
		}
		return;
	}
	if (p->state != PATH_FAILED)
		metaroce_count(mdev, PATH_FAILED);
	else
		p->backoff_us = min(2 * p->backoff_us, PATH_MAX_BACKOFF_US);
	p->state = PATH_FAILED;
	p->retry_at_us = soft_now_us() + p->backoff_us;
}

void soft_path_on_rtt(struct soft_req *req, unsigned int path, u32 rtt_us)
{
	struct soft_path *p = &req->paths[path];

	/* EWMA with gain 1/8, as SRTT. */
	p->srtt_us = p->srtt_us ? p->srtt_us - p->srtt_us / 8 + rtt_us / 8 :
				  rtt_us;
}
