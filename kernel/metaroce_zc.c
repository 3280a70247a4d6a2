// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Zero-copy packets and deregistration.
 *
 * A SEND or WRITE packet may carry an MR's pages as its fragments
 * (metaroce_mr_attach_to_skb()); the NIC, or a qdisc before it, reads them
 * when it sends the packet, which can be long after the packet was built.
 * After ibv_dereg_mr returns, no packet may still read them: the buffer is
 * the application's again, and what it writes there must not reach the
 * peer. So each such skb carries a struct metaroce_zc (its ubuf_info, which
 * the stack calls back when the last clone of the skb lets go of the
 * fragments), naming the MRs it holds pages of; each MR counts those skbs,
 * and deregistration waits for the count to drop to zero.
 *
 * A packet delivered locally (veth, loopback) could sit in a receiver's
 * socket for as long as that receiver likes: the stack copies the
 * fragments on delivery and lets go of ours first (skb_orphan_frags_rx()),
 * so that no other process can make deregistration wait. Elsewhere
 * (segmentation, forwarding) the skb keeps them, as MSG_ZEROCOPY's do
 * (SKBFL_DONT_ORPHAN): segments share the ubuf_info, counted.
 *
 * The wait is bounded: a transmit queue can stay stopped (pause frames) or a
 * qdisc hold packets for long, and deregistration runs when a process exits.
 * After ZC_WAIT_MS it gives up, counts it (dereg_zc_timeout) and returns; the
 * packets still queued may then carry what is written to the buffer next.
 * The device counts the skbs too: its teardown waits for all of them, as
 * the MR releases they may queue and this file's code must be done first.
 */
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/wait_bit.h>

#include "metaroce_loc.h"

#define ZC_WAIT_MS	10000

struct metaroce_zc {
	struct ubuf_info ubuf;
	struct metaroce_dev *mdev;
	u8 nr;
	/* A packet's payload comes from one WQE: at most one MR per SGE. */
	struct metaroce_mr *mr[METAROCE_MAX_SGE];
};

/*
 * Every clone and segment of the skb has let go of the fragments. May run
 * in process context (a qdisc reset) as well as in softirq.
 */
static void zc_complete(struct sk_buff *skb, struct ubuf_info *ubuf,
			bool zerocopy_success)
{
	struct metaroce_zc *zc = container_of(ubuf, struct metaroce_zc, ubuf);
	struct metaroce_dev *mdev = zc->mdev;
	u8 i;

	if (!refcount_dec_and_test(&ubuf->refcnt))
		return;
	/* Module text: metaroce_zc_drain() waits a grace period. */
	rcu_read_lock();
	for (i = 0; i < zc->nr; i++) {
		struct metaroce_mr *mr = zc->mr[i];

		/*
		 * The put first: the registration's reference stays until
		 * deregistration has seen the count drop, unless it gave up
		 * waiting; then the MR's release may be queued from here,
		 * which the device's count, dropped last, covers.
		 */
		metaroce_mr_put(mr);
		if (atomic_dec_and_test(&mr->zc_skbs))
			wake_up_var(&mr->zc_skbs);
	}
	kfree(zc);
	if (atomic_dec_and_test(&mdev->zc_skbs))
		wake_up_var(&mdev->zc_skbs);
	rcu_read_unlock();
}

/* How the stack calls zc_complete() (metaroce_compat.h). */
METAROCE_UBUF_OPS(zc_ops, zc_complete);

/*
 * Counts @skb as holding pages of @mr until it is freed. Called with the
 * MR checked not revoked, in the same RCU read-side critical section (so
 * metaroce_mr_revoke(), which waits for a grace period, then sees the
 * count), and with a reference to @mr held. -ENOMEM, or -EMSGSIZE if @skb
 * names too many MRs: the caller copies instead.
 */
int metaroce_zc_track(struct sk_buff *skb, struct metaroce_mr *mr)
{
	struct ubuf_info *ubuf = skb_zcopy(skb);
	struct metaroce_zc *zc;
	u8 i;

	if (ubuf) {
		if (WARN_ON_ONCE(!metaroce_ubuf_is(ubuf, zc_ops, zc_complete)))
			return -EINVAL;
		zc = container_of(ubuf, struct metaroce_zc, ubuf);
		for (i = 0; i < zc->nr; i++)
			if (zc->mr[i] == mr)
				return 0;
		if (zc->nr == ARRAY_SIZE(zc->mr))
			return -EMSGSIZE;
	} else {
		zc = kmalloc(sizeof(*zc), GFP_ATOMIC);
		if (!zc)
			return -ENOMEM;
		metaroce_ubuf_set(&zc->ubuf, zc_ops, zc_complete);
		refcount_set(&zc->ubuf.refcnt, 1);
		/*
		 * The fragments are shared with user space: whatever would
		 * write them in place (ESP) copies them first.
		 */
		zc->ubuf.flags = SKBFL_ZEROCOPY_FRAG | SKBFL_DONT_ORPHAN;
		zc->nr = 0;
		zc->mdev = mr->mdev;
		atomic_inc(&zc->mdev->zc_skbs);
		skb_zcopy_init(skb, &zc->ubuf);
	}
	refcount_inc(&mr->ref);
	atomic_inc(&mr->zc_skbs);
	zc->mr[zc->nr++] = mr;
	return 0;
}

/*
 * Waits until no skb holds pages of @mr (it is revoked: none will again),
 * for ZC_WAIT_MS at most.
 */
void metaroce_zc_wait(struct metaroce_mr *mr)
{
	if (!wait_var_event_timeout(&mr->zc_skbs, !atomic_read(&mr->zc_skbs),
				    msecs_to_jiffies(ZC_WAIT_MS)))
		metaroce_count(mr->mdev, DEREG_ZC_TIMEOUT);
}

/*
 * Waits until no skb holds pages of @mdev's MRs, before its teardown
 * flushes the MR releases: a qdisc may keep one for as long as it likes,
 * and what it frees calls back into this module.
 */
void metaroce_zc_drain(struct metaroce_dev *mdev)
{
	while (!wait_var_event_timeout(&mdev->zc_skbs,
				       !atomic_read(&mdev->zc_skbs),
				       msecs_to_jiffies(ZC_WAIT_MS)))
		dev_warn_ratelimited(&mdev->ib_dev.dev,
				     "waiting for %d packets to leave\n",
				     atomic_read(&mdev->zc_skbs));
	/* The last callback is out of its read-side section. */
	synchronize_rcu();
}
