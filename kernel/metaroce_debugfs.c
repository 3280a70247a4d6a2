// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * /sys/kernel/debug/metaroce/<dev>/qps: the transport state of every QP of
 * a device, for people (and tests) looking into a stuck or slow connection.
 */
#include <linux/debugfs.h>
#include <linux/seq_file.h>

#include "metaroce_loc.h"
#include "metaroce_soft.h"
#include "soft/mrs.h"

static struct dentry *debugfs_root;

static const char *const pkt_states = "-ILD";	/* free, in flight, lost, delivered */

static void show_req(struct seq_file *m, struct soft_req *req)
{
	u32 span, i;

	spin_lock_bh(&req->lock);
	span = soft_psn_diff(req->psn_next, req->psn_una);
	seq_printf(m, "  req: una %06x next %06x inflight %u lost %u reads %u cwnd %u srtt %uus rto %uus reorder %u probes %u retries %u rnr_wait %d\n",
		   req->psn_una, req->psn_next, req->inflight, req->nr_lost,
		   req->reads, soft_cc_window(&req->cc), req->srtt_us,
		   req->rto_us, req->reorder, req->probes, req->retries,
		   req->rnr_wait);
	seq_printf(m, "       tx_seq %u acked %u responses %u, oldest:",
		   req->tx_seq, req->acked_tx_seq, req->response_seq);
	for (i = 0; i < min(span, 16U); i++) {
		struct soft_pkt *e = &req->pkts[soft_psn_add(req->psn_una, i) %
						SOFT_WINDOW];

		seq_printf(m, " %c%u%s", pkt_states[e->state], e->tx_seq,
			   e->request_acked ? "a" : "");
	}
	seq_puts(m, "\n");
	for (i = 0; i < req->num_paths; i++) {
		struct soft_path *p = &req->paths[i];

		seq_printf(m, "  path %u: sport %u state %s inflight %u srtt %uus sent %llu lost %llu\n",
			   i, METAROCE_ENTROPY_BASE | p->entropy,
			   p->state == PATH_ACTIVE ? "active" :
			   p->state == PATH_SUSPECT ? "suspect" : "failed",
			   p->inflight, p->srtt_us, p->sent, p->lost);
	}
	spin_unlock_bh(&req->lock);
}

static void show_resp(struct seq_file *m, struct soft_resp *resp)
{
	spin_lock_bh(&resp->lock);
	seq_printf(m, "  resp: cum %06x msn_done %u reads %u (head psn %06x) unacked %u refused %d\n",
		   resp->cum, resp->msn_done, resp->read_tail - resp->read_head,
		   resp->read_head != resp->read_tail ?
		   resp->reads[resp->read_head % SOFT_MAX_READS].psn : 0,
		   resp->unacked, resp->refused);
	spin_unlock_bh(&resp->lock);
}

/* Where the rings stand: a stall with WQEs posted but not taken shows here. */
static void show_queues(struct seq_file *m, struct metaroce_qp *qp)
{
	struct soft_req *req = &qp->soft->req;

	seq_printf(m, "  sq: posted %u taken %u sending %u completed %u doorbell_needed %u; rq: posted %u completed %u\n",
		   metaroce_queue_producer(&qp->sq), READ_ONCE(req->fetch_index),
		   READ_ONCE(req->send_index), READ_ONCE(qp->sq.own_index),
		   READ_ONCE(qp->sq.hdr->doorbell_needed),
		   metaroce_queue_producer(&qp->rq), READ_ONCE(qp->rq.own_index));
}

static int qps_show(struct seq_file *m, void *unused)
{
	struct metaroce_dev *mdev = m->private;
	struct metaroce_qp *qp;
	unsigned long qpn;

	xa_lock(&mdev->qps);
	xa_for_each(&mdev->qps, qpn, qp) {
		if (!refcount_inc_not_zero(&qp->ref))
			continue;
		xa_unlock(&mdev->qps);
		seq_printf(m, "qp %lu: type %d state %d peer qpn %u mtu %u\n",
			   qpn, qp->ibqp.qp_type, READ_ONCE(qp->state),
			   qp->attr.dest_qp_num, qp->mtu);
		if (qp->soft && qp->soft->v2) {
			show_queues(m, qp);
			mrs_debugfs_show(m, qp->soft);
		} else if (qp->soft) {
			show_queues(m, qp);
			show_req(m, &qp->soft->req);
			show_resp(m, &qp->soft->resp);
		}
		metaroce_qp_put(qp);
		xa_lock(&mdev->qps);
	}
	xa_unlock(&mdev->qps);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(qps);

void metaroce_debugfs_add(struct metaroce_dev *mdev, const char *name)
{
	mdev->debugfs = debugfs_create_dir(name, debugfs_root);
	debugfs_create_file("qps", 0400, mdev->debugfs, mdev, &qps_fops);
}

void metaroce_debugfs_remove(struct metaroce_dev *mdev)
{
	debugfs_remove_recursive(mdev->debugfs);
	mdev->debugfs = NULL;
}

void metaroce_debugfs_init(void)
{
	debugfs_root = debugfs_create_dir("metaroce", NULL);
}

void metaroce_debugfs_exit(void)
{
	debugfs_remove_recursive(debugfs_root);
}
