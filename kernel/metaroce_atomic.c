// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The responder's atomics (protocol.md sections 3.4, 5 and 6): checked on
 * arrival, executed once cum passes them, and recorded, so that a repeat
 * (the requester's recovery, or the fabric's duplicate) is answered from
 * the record and never executed again. The queueing of an atomic as a
 * part among READ parts is metaroce_resp.c's; all here runs under the
 * responder lock.
 */
#include <linux/slab.h>

#include "metaroce_loc.h"
#include "metaroce_soft.h"

int soft_atomic_alloc(struct soft_resp *resp, gfp_t gfp)
{
	resp->atomics = kvcalloc(SOFT_ATOMIC_HISTORY, sizeof(*resp->atomics),
				 gfp);
	return resp->atomics ? 0 : -ENOMEM;
}

void soft_atomic_free(struct soft_resp *resp)
{
	kvfree(resp->atomics);
	resp->atomics = NULL;
}

/* A new connection: PSNs start over, no record can match them. */
void soft_atomic_reset(struct soft_resp *resp)
{
	if (resp->atomics)
		memset(resp->atomics, 0,
		       SOFT_ATOMIC_HISTORY * sizeof(*resp->atomics));
	resp->atomic_next = 0;
}

/*
 * Checks a new atomic request at arrival. Returns 0 with *@mr referenced,
 * or the syndrome of the NAK that refuses it.
 */
u8 soft_atomic_check(struct metaroce_soft_qp *sqp,
		     const struct soft_pkt_info *pkt, struct metaroce_mr **mr)
{
	struct metaroce_qp *qp = sqp->qp;

	*mr = NULL;
	if (pkt->areq.va % METAROCE_ATOMIC_LEN)
		return METAROCE_NAK_INVALID_REQ;
	if ((qp->attr.qp_access_flags & IB_ACCESS_REMOTE_ATOMIC) !=
	    IB_ACCESS_REMOTE_ATOMIC)
		return METAROCE_NAK_REMOTE_ACCESS;
	*mr = metaroce_rkey_get(qp, pkt->areq.rkey, pkt->areq.va,
				METAROCE_ATOMIC_LEN, IB_ACCESS_REMOTE_ATOMIC);
	return *mr ? 0 : METAROCE_NAK_REMOTE_ACCESS;
}

static bool rec_matches(const struct soft_atomic_rec *rec,
			const struct soft_pkt_info *pkt)
{
	return rec->opcode == pkt->opcode && rec->psn == pkt->psn &&
	       rec->va == pkt->areq.va && rec->rkey == pkt->areq.rkey &&
	       rec->msn == pkt->areq.msn &&
	       rec->swap_add == pkt->areq.swap_add &&
	       rec->compare == pkt->areq.compare;
}

/*
 * The record of the atomic @pkt repeats: same PSN and every other field
 * equal. A request that differs in any is not a repeat but a forgery (or
 * a peer's bug), and must not learn the recorded value. An executed atomic
 * is behind cum, and a requester resends no further back than its window:
 * a record further behind is of an older lap of the PSN space.
 */
const struct soft_atomic_rec *
soft_atomic_find(const struct soft_resp *resp, const struct soft_pkt_info *pkt)
{
	s32 behind = soft_psn_diff(resp->cum, pkt->psn);
	u32 i;

	if (!resp->atomics || behind <= 0 || behind > SOFT_RX_RING)
		return NULL;
	for (i = 0; i < SOFT_ATOMIC_HISTORY; i++)
		if (rec_matches(&resp->atomics[i], pkt))
			return &resp->atomics[i];
	return NULL;
}

/* Whether @pkt repeats an atomic accepted and still waiting for its turn. */
bool soft_atomic_pending(const struct soft_resp *resp,
			 const struct soft_pkt_info *pkt)
{
	u32 i;

	for (i = resp->read_head; i != resp->read_tail; i++) {
		const struct soft_read *r = &resp->reads[i % SOFT_MAX_READS];

		if (r->atomic == pkt->opcode && !r->executed &&
		    r->psn == pkt->psn && r->va == pkt->areq.va &&
		    r->rkey == pkt->areq.rkey && r->msn == pkt->areq.msn &&
		    r->swap_add == pkt->areq.swap_add &&
		    r->compare == pkt->areq.compare)
			return true;
	}
	return false;
}

/*
 * Executes the atomic part @r, whose turn has come, and records it in place
 * of the oldest record. Under the responder lock, so that a repeat finds it
 * either pending or recorded, never in between. -EACCES if its MR was
 * deregistered (or its key invalidated) since it was accepted, -EINVAL if
 * the word's mapping is not aligned: refused, as a READ part would be.
 */
int soft_atomic_execute(struct soft_resp *resp, struct soft_read *r)
{
	struct soft_atomic_rec *rec;
	int err;

	err = metaroce_mr_atomic(r->mr, r->rkey, r->va, r->atomic, r->swap_add,
				 r->compare, &r->orig);
	if (err)
		return err;
	r->executed = true;
	rec = &resp->atomics[resp->atomic_next++ % SOFT_ATOMIC_HISTORY];
	rec->va = r->va;
	rec->swap_add = r->swap_add;
	rec->compare = r->compare;
	rec->orig = r->orig;
	rec->psn = r->psn;
	rec->rkey = r->rkey;
	rec->msn = r->msn;
	rec->opcode = r->atomic;
	return 0;
}
