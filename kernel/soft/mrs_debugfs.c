// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A protocol v2 QP in /sys/kernel/debug/metaroce/<dev>/qps: its paths
 * both ways, its stream both ways, its requester.
 */
#include <linux/seq_file.h>

#include "../metaroce_loc.h"
#include "mrs.h"

static void show_paths(struct seq_file *m, const struct mrs_qp *mq)
{
	u32 i;

	for (i = 0; i < mq->num_paths; i++) {
		const struct mrc_path_tx *p = &mq->ptx[i];

		seq_printf(m, "  path %u: sport %u state %s next %u una %u out %u cwnd %u.%02u srtt %uus min %uus ptos %u sent %llu acked %llu lost %llu spurious %llu refused %llu marked %llu failures %llu repaths %llu\n",
			   i, MRC_ENTROPY_BASE | p->entropy,
			   p->state == MRC_PATH_ACTIVE ? "active" : "failed",
			   p->next_seq, p->una, p->in_flight,
			   p->cwnd / MRC_CWND_ONE,
			   (p->cwnd % MRC_CWND_ONE) * 100 / MRC_CWND_ONE,
			   p->srtt_us, p->min_rtt_us, p->ptos, p->sent_packets,
			   p->acked, p->lost, p->spurious, p->refused, p->marked,
			   p->failures, p->repaths);
	}
	for (i = 0; i < MRC_MAX_PATHS; i++) {
		const struct mrc_path_rx *r = &mq->prx[i];

		if (!r->received && !r->duplicates && !r->beyond)
			continue;
		seq_printf(m, "  peer path %u: cum %u received %llu duplicates %llu beyond %llu unacked %u\n",
			   i, r->sack.cum, r->received, r->duplicates,
			   r->beyond, r->unacked);
	}
}

void mrs_debugfs_show(struct seq_file *m, struct metaroce_soft_qp *sqp)
{
	const struct mrs_qp *mq = sqp->v2;

	spin_lock_bh(&sqp->resp.lock);
	seq_printf(m, "  v2 stream out: next %u una %u resend %u delivered %llu resent %llu; limit %u blocked %d\n",
		   mq->stx.next_ssn, mq->stx.una, mq->stx.resend_len,
		   mq->stx.delivered, mq->stx.resent, mq->conn.limit,
		   mq->blocked);
	seq_printf(m, "  v2 stream in: cum %u recv_done %u accepted %llu duplicates %llu refused %llu beyond %llu requests %u\n",
		   mq->srx.map.cum, mq->srx.recv_done, mq->srx.accepted,
		   mq->srx.duplicates, mq->srx.refused, mq->srx.beyond,
		   mq->srx.req_len);
	seq_printf(m, "  v2 requester: head %u send %u tail %u requests %u posted %llu completed %llu bad_responses %llu\n",
		   mq->req.head, mq->req.send, mq->req.tail, mq->req.nreqs,
		   mq->req.posted, mq->req.completed, mq->req.bad_responses);
	show_paths(m, mq);
	spin_unlock_bh(&sqp->resp.lock);
}
