// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * ACK generation (protocol.md sections 3.3 and 11): when to acknowledge,
 * and the ACK/NAK packet with the cumulative PSN, the 256-bit SACK
 * bitmap, the ECN echo and the receiver's fair-share hint.
 */
#include "metaroce_loc.h"
#include "metaroce_soft.h"

/* Counts @resp's connection as active in this millisecond. */
static void note_active(struct metaroce_dev *mdev, struct soft_resp *resp)
{
	u32 epoch = (u32)(ktime_get_ns() >> 20);

	if (resp->active_epoch == epoch)
		return;
	resp->active_epoch = epoch;
	if (READ_ONCE(mdev->fs_epoch) != epoch) {
		WRITE_ONCE(mdev->fs_epoch, epoch);
		WRITE_ONCE(mdev->fs_active, atomic_xchg(&mdev->fs_count, 0));
	}
	atomic_inc(&mdev->fs_count);
}

static u16 fair_share(struct metaroce_dev *mdev)
{
	u32 senders = max3(READ_ONCE(mdev->fs_active),
			   (u32)atomic_read(&mdev->fs_count), 1U);

	return max_t(u32, METAROCE_RX_BUDGET / senders,
		     METAROCE_MIN_FAIR_SHARE);
}

/*
 * Called under the responder lock for every request packet from the peer:
 * the next ACK echoes the newest one, whatever became of it (a duplicate
 * or a refused packet triggers an ACK too), and counts its CE mark.
 */
void soft_ack_note_echo(struct soft_resp *resp, const struct soft_pkt_info *pkt)
{
	resp->echo_path = pkt->path;
	resp->echo_ts = pkt->ts;
	if (pkt->ce)
		resp->ce_count++;
}

/* Called under the responder lock for each data packet accepted. */
void soft_ack_note_data(struct metaroce_soft_qp *sqp,
			const struct soft_pkt_info *pkt)
{
	struct soft_resp *resp = &sqp->resp;

	resp->unacked++;
	note_active(sqp->qp->mdev, resp);

	if ((pkt->flags & METAROCE_F_ACK_REQ) ||
	    resp->unacked >= METAROCE_ACK_EVERY ||
	    (soft_psn_diff(resp->cum, pkt->psn) <= 0 &&
	     resp->unacked >= METAROCE_ACK_AHEAD_OF_GAP))
		resp->ack_due = true;
}

/*
 * The SACK bitmap: bit i for PSN cum + 1 + i. Only PSNs past cum have bits
 * in the receive ring, and in order there are none: walking the set bits
 * costs little where testing all 256 took longer than the rest of the ACK.
 */
static void fill_sack(const struct soft_resp *resp, __be32 *sack)
{
	u32 words[METAROCE_SACK_WORDS] = {};
	unsigned long bit;
	u32 i;

	for_each_set_bit(bit, resp->rcvd, SOFT_RX_RING) {
		/* The ring's size divides the PSN space: no wrap to mind. */
		i = (bit - resp->cum - 1) % SOFT_RX_RING;
		if (i < METAROCE_SACK_BITS)
			words[i / 32] |= 0x80000000U >> (i % 32);
	}
	for (i = 0; i < METAROCE_SACK_WORDS; i++)
		sack[i] = cpu_to_be32(words[i]);
}

/* Fills the ACK header from the responder state; resets the counters. */
static void fill_ack(struct metaroce_soft_qp *sqp, struct metaroce_ack *ack,
		     const struct soft_ack_info *nak)
{
	struct soft_resp *resp = &sqp->resp;

	ack->cum_psn = cpu_to_be32(resp->cum);
	ack->nak_psn = cpu_to_be32(nak ? nak->nak_psn : 0);
	ack->syndrome = nak ? nak->syndrome : METAROCE_ACK;
	ack->nak_arg = nak ? nak->nak_arg : 0;
	ack->ce_count = cpu_to_be16(min_t(u32, resp->ce_count, U16_MAX));
	ack->fair_share = cpu_to_be16(fair_share(sqp->qp->mdev));
	ack->echo_path = cpu_to_be16(resp->echo_path);
	ack->ts_echo = cpu_to_be32(resp->echo_ts);
	ack->msn = cpu_to_be32(resp->msn_done);
	fill_sack(resp, ack->sack);
	resp->unacked = 0;
	resp->ce_count = 0;
	resp->ack_due = false;
}

/* Sends an ACK, or the NAK @nak, with the current state. Any context. */
void soft_ack_send(struct metaroce_soft_qp *sqp, const struct soft_ack_info *nak)
{
	struct metaroce_qp *qp = sqp->qp;
	struct soft_resp *resp = &sqp->resp;
	struct soft_req *req = &sqp->req;
	struct sk_buff *skb;
	struct soft_path *path;
	u32 cum;

	skb = soft_alloc_skb(qp, METAROCE_BTH_LEN + METAROCE_ACK_LEN, 0);
	if (!skb) {
		metaroce_count(qp->mdev, TX_DROPPED);
		return;
	}
	spin_lock_bh(&resp->lock);
	fill_ack(sqp, (void *)skb->data + METAROCE_BTH_LEN, nak);
	cum = resp->cum;
	/* ACKs ride the path the data came on, as seen from this end. */
	path = &req->paths[resp->echo_path % req->num_paths];
	spin_unlock_bh(&resp->lock);
	hrtimer_try_to_cancel(&resp->ack_timer);

	soft_fill_bth((void *)skb->data, METAROCE_OP_ACK, 0,
		      qp->attr.dest_qp_num, qp->ibqp.qp_num, cum,
		      path - req->paths);
	if (nak && nak->syndrome)
		metaroce_count(qp->mdev, TX_NAKS);
	else
		metaroce_count(qp->mdev, TX_ACKS);
	soft_xmit(qp, &qp->av, skb, path->entropy, &path->dst, false, 0);
}

enum hrtimer_restart soft_ack_timer_fn(struct hrtimer *timer)
{
	struct soft_resp *resp = container_of(timer, struct soft_resp,
					      ack_timer);
	struct metaroce_soft_qp *sqp = container_of(resp,
						    struct metaroce_soft_qp,
						    resp);

	if (READ_ONCE(resp->unacked) && !READ_ONCE(sqp->dying))
		soft_ack_send(sqp, NULL);
	return HRTIMER_NORESTART;
}
