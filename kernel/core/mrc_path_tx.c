// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The sending end of a path (protocol-v2.md section 5). A path keeps one
 * route, and a route does not reorder, so a gap in what the receiver saw
 * is loss, not reordering: a packet is lost once MRC_LOSS_GAP later ones
 * of its route arrived, or a later one did and it is overdue. Each
 * transmission has its own sequence; the caller resends lost data as new
 * transmissions. Nothing here allocates, locks or keeps time.
 */
#include "mrc_path.h"

#define MRC_NEVER	(~0ULL)

static struct mrc_sent *slot(struct mrc_path_tx *tx, u32 seq)
{
	return &tx->sent[seq % MRC_SACK_BITS];
}

void mrc_path_tx_init(struct mrc_path_tx *tx, u32 first_seq, u16 entropy,
		      u32 cwnd)
{
	memset(tx, 0, sizeof(*tx));
	tx->next_seq = first_seq;
	tx->una = first_seq;
	tx->floor_sent = first_seq;
	tx->first_seq = first_seq;
	tx->entropy = entropy;
	tx->backoff_us = MRC_MIN_BACKOFF_US;
	tx->cwnd = cwnd < MRC_CWND_ONE ? MRC_CWND_ONE :
		   cwnd > MRC_MAX_CWND ? MRC_MAX_CWND : cwnd;
	tx->alpha = 1024;
	tx->window_end = first_seq;
}

/* The probe timeout, before backing off: RFC 9002's, with our floor. */
u32 mrc_path_tx_pto(const struct mrc_path_tx *tx)
{
	u64 var, pto;

	if (!tx->has_rtt)
		return MRC_INITIAL_PTO_US;
	/* in 64 bits: a huge forged ACK delay must not wrap it short */
	var = 4ULL * tx->rttvar_us;
	if (var < MRC_GRANULARITY_US)
		var = MRC_GRANULARITY_US;
	pto = tx->srtt_us + var + MRC_DELAYED_ACK_US;
	return pto > MRC_MAX_PTO_US ? MRC_MAX_PTO_US : (u32)pto;
}

static u64 pto_deadline(const struct mrc_path_tx *tx)
{
	u64 pto = (u64)mrc_path_tx_pto(tx) << (tx->ptos < 16 ? tx->ptos : 16);

	if (pto > MRC_MAX_PTO_US)
		pto = MRC_MAX_PTO_US;
	return tx->pto_from_us + pto;
}

/* How long after it left a packet older than an arrival is overdue. */
static u64 loss_delay(const struct mrc_path_tx *tx)
{
	u64 rtt = tx->srtt_us > tx->latest_rtt_us ? tx->srtt_us :
		  tx->latest_rtt_us;

	rtt += rtt / 8;
	return rtt > MRC_GRANULARITY_US ? rtt : MRC_GRANULARITY_US;
}

bool mrc_path_tx_can_send(const struct mrc_path_tx *tx, u64 now)
{
	/* every unresolved sequence must fit the receiver's map */
	if (tx->next_seq - tx->una >= MRC_SACK_BITS - 1)
		return false;
	if (tx->state == MRC_PATH_FAILED)
		return !tx->in_flight && now >= tx->retry_us;
	return tx->in_flight * MRC_CWND_ONE < tx->cwnd;
}

/* Records a transmission of @cookie and returns its sequence. */
u32 mrc_path_tx_sent(struct mrc_path_tx *tx, u64 cookie, u64 now)
{
	struct mrc_sent *s = slot(tx, tx->next_seq);

	s->cookie = cookie;
	s->sent_us = now;
	s->state = MRC_SENT_OUT;
	s->route = tx->route;
	s->probe = tx->state == MRC_PATH_FAILED;
	tx->floor_sent = tx->una;
	tx->in_flight++;
	tx->pto_from_us = now;
	tx->sent_packets++;
	tx->next_seq++;
	/* the slots hold the last MRC_SACK_BITS sequences, however many wraps */
	if (tx->next_seq - tx->first_seq > MRC_SACK_BITS)
		tx->first_seq = tx->next_seq - MRC_SACK_BITS;
	return tx->next_seq - 1;
}

static void declare_lost(struct mrc_path_tx *tx, struct mrc_sent *s,
			 const struct mrc_path_ops *ops, void *ctx)
{
	s->state = MRC_SENT_LOST;
	tx->in_flight--;
	tx->lost++;
	tx->window_lost++;
	ops->lost(ctx, s->cookie);
}

static void advance_una(struct mrc_path_tx *tx)
{
	while (tx->una != tx->next_seq) {
		struct mrc_sent *s = slot(tx, tx->una);

		if (s->state == MRC_SENT_OUT)
			break;
		tx->una++;	/* the slot keeps its state until reused */
	}
}

static void rtt_sample(struct mrc_path_tx *tx, u64 sample, u32 ack_delay)
{
	u32 rtt = sample > 0xffffffffULL ? 0xffffffffU : (u32)sample;
	u32 dev;

	if (!tx->has_rtt || rtt < tx->min_rtt_us)
		tx->min_rtt_us = rtt;
	tx->latest_rtt_us = rtt;
	/* the receiver's delay is not the network's, unless it says more */
	if (rtt >= (u64)tx->min_rtt_us + ack_delay)
		rtt -= ack_delay;
	if (!tx->has_rtt) {
		tx->srtt_us = rtt;
		tx->rttvar_us = rtt / 2;
		tx->has_rtt = true;
		return;
	}
	dev = tx->srtt_us > rtt ? tx->srtt_us - rtt : rtt - tx->srtt_us;
	tx->rttvar_us = (u32)((3ULL * tx->rttvar_us + dev) / 4);
	tx->srtt_us = (u32)((7ULL * tx->srtt_us + rtt) / 8);
}

/*
 * A route that keeps losing a quarter of what it carries, or keeps most of
 * it marked, is a bad route (section 5.3): ask for a new one. Random loss
 * of a few percent never gets there.
 */
static void judge_route(struct mrc_path_tx *tx)
{
	u32 total = tx->window_acked + tx->window_lost;
	bool lossy = total && 4 * tx->window_lost >= total;
	bool marked = tx->window_acked &&
		      4 * tx->window_ce >= 3 * tx->window_acked;

	if (!lossy && !marked) {
		tx->bad_windows = 0;
		tx->lossy_windows = false;
		return;
	}
	tx->lossy_windows |= lossy;
	if (++tx->bad_windows < MRC_REPATH_WINDOWS)
		return;
	tx->repath_wanted = tx->lossy_windows ? MRC_REPATH_LOSS :
			    MRC_REPATH_MARKS;
	tx->bad_windows = 0;
	tx->lossy_windows = false;
}

/*
 * ECN (section 6): additive increase per acknowledged packet that saw no
 * mark. Loss leaves the window alone.
 */
static void cc_on_ack(struct mrc_path_tx *tx, u32 newly, u32 ce)
{
	u32 i;

	if (ce > newly)
		ce = newly;
	tx->window_acked += newly;
	tx->window_ce += ce;
	if (ce) {
		tx->window_marked = true;
		tx->marked += ce;
	}
	for (i = 0; i < newly - ce; i++) {
		tx->cwnd += MRC_CWND_ONE * MRC_CWND_ONE / tx->cwnd;
		if (tx->cwnd > MRC_MAX_CWND)
			tx->cwnd = MRC_MAX_CWND;
	}
}

/*
 * A window of data ends when the floor passes the sequence that was next
 * when the previous one ended, by an ACK or a timeout: DCTCP's alpha of
 * the fraction marked, a cut by half of it if any was, and a judgement of
 * the route.
 */
static void end_window(struct mrc_path_tx *tx)
{
	if (mrc_seq_diff(tx->una, tx->window_end) <= 0)
		return;
	if (tx->window_acked)
		tx->alpha = (15 * tx->alpha +
			     tx->window_ce * 1024 / tx->window_acked) / 16;
	if (tx->window_marked) {
		tx->cwnd = (u32)((u64)tx->cwnd * (2048 - tx->alpha) / 2048);
		if (tx->cwnd < MRC_CWND_ONE)
			tx->cwnd = MRC_CWND_ONE;
	}
	judge_route(tx);
	tx->window_end = tx->next_seq;
	tx->window_acked = 0;
	tx->window_ce = 0;
	tx->window_lost = 0;
	tx->window_marked = false;
}

static bool ack_names(const struct mrc_path_ack *ack, u32 seq)
{
	s32 d = mrc_seq_diff(seq, ack->cum);

	if (d < 0)
		return true;
	if (d == 0 || d > MRC_SACK_BITS)
		return false;
	return ack->bits[(d - 1) / 64] & (1ULL << ((d - 1) % 64));
}

/*
 * Whether an ACK naming @seq, declared lost, shows that it arrived: a bit
 * names an arrival; cum does too while no packet sent has told the
 * receiver to skip @seq (its floor passed @seq).
 */
static bool arrived_after_all(const struct mrc_path_tx *tx,
			      const struct mrc_path_ack *ack, u32 seq)
{
	return mrc_seq_diff(seq, ack->cum) > 0 ||
	       mrc_seq_diff(seq, tx->floor_sent) >= 0;
}

/*
 * The newest sequence shown to have arrived, a spurious loss's included
 * (Appendix A): the gap rule counts from it.
 */
static void note_arrival(struct mrc_path_tx *tx, u32 seq)
{
	if (tx->any_acked && mrc_seq_diff(seq, tx->newest_acked) <= 0)
		return;
	tx->newest_acked = seq;
	tx->newest_route = slot(tx, seq)->route;
	tx->any_acked = true;
}

/* An ACK of its packets shows a failed path alive again. */
static void recover(struct mrc_path_tx *tx, const struct mrc_path_ops *ops,
		    void *ctx)
{
	if (tx->state != MRC_PATH_FAILED)
		return;
	tx->state = MRC_PATH_ACTIVE;
	tx->backoff_us = MRC_MIN_BACKOFF_US;
	mrc_path_report(ops, ctx, MRC_PATH_EV_RECOVERED);
}

/* An ACK may name only what was sent: anything else is forged or broken. */
static bool ack_valid(const struct mrc_path_tx *tx,
		      const struct mrc_path_ack *ack)
{
	s32 unsent = mrc_seq_diff(tx->next_seq, ack->cum);
	u32 i;

	/* bit i names cum + 1 + i: from bit unsent - 1 on, nothing was sent */
	if (unsent < 0)
		return false;
	for (i = unsent ? unsent - 1 : 0; i < MRC_SACK_BITS; i++)
		if (ack->bits[i / 64] & (1ULL << (i % 64)))
			return false;
	return true;
}

static void detect_losses(struct mrc_path_tx *tx, u64 now,
			  const struct mrc_path_ops *ops, void *ctx)
{
	u8 route = tx->newest_route;
	u64 delay = loss_delay(tx);
	u32 seq;

	if (!tx->any_acked)
		return;
	for (seq = tx->una; seq != tx->next_seq &&
	     mrc_seq_diff(seq, tx->newest_acked) < 0; seq++) {
		struct mrc_sent *s = slot(tx, seq);

		if (s->state != MRC_SENT_OUT)
			continue;
		if ((s->route == route &&
		     tx->newest_acked - seq >= MRC_LOSS_GAP) ||
		    now >= s->sent_us + delay)
			declare_lost(tx, s, ops, ctx);
	}
}

enum mrc_ack_verdict mrc_path_tx_ack(struct mrc_path_tx *tx,
				     const struct mrc_path_ack *ack, u64 now,
				     const struct mrc_path_ops *ops, void *ctx)
{
	u32 seq, newly = 0, newest = 0;
	bool newest_new = false, probe_arrived = false;

	if (!ack_valid(tx, ack))
		return MRC_ACK_INVALID;
	/* from the oldest slot in use: below una, lost ones may yet arrive */
	for (seq = tx->first_seq; seq != tx->next_seq; seq++) {
		struct mrc_sent *s = slot(tx, seq);

		if (!ack_names(ack, seq))
			continue;
		if (s->state == MRC_SENT_LOST && arrived_after_all(tx, ack, seq)) {
			s->state = MRC_SENT_ACKED;
			tx->spurious++;
			/* a probe that arrived late still shows the path works */
			probe_arrived |= s->probe;
			note_arrival(tx, seq);
			ops->acked(ctx, s->cookie);
			/* the newest named, but no sample: not in flight */
			newest = seq;
			newest_new = false;
			continue;
		}
		if (mrc_seq_diff(seq, tx->una) < 0)
			continue;
		newest = seq;
		newest_new = false;
		if (s->state == MRC_SENT_OUT) {
			s->state = MRC_SENT_ACKED;
			tx->in_flight--;
			tx->acked++;
			newly++;
			newest_new = true;
			note_arrival(tx, seq);
			ops->acked(ctx, s->cookie);
		}
	}
	if (probe_arrived)
		recover(tx, ops, ctx);
	if (!newly) {
		/* a later arrival may have made an old one overdue */
		detect_losses(tx, now, ops, ctx);
		advance_una(tx);
		end_window(tx);
		return MRC_ACK_OK;
	}
	if (newest_new)
		rtt_sample(tx, now - slot(tx, newest)->sent_us,
			   ack->ack_delay_us);
	/*
	 * The path is alive: its PTO counts from here too. A burst that
	 * fills the window leaves a queue longer than a PTO of the RTT
	 * before it; a timeout from its last send alone fired while its
	 * ACKs were arriving (measured on the soft-NIC: 8 paths, 1 MiB).
	 */
	tx->pto_from_us = now;
	tx->ptos = 0;
	recover(tx, ops, ctx);
	cc_on_ack(tx, newly, ack->ce);
	detect_losses(tx, now, ops, ctx);
	advance_una(tx);
	end_window(tx);
	return MRC_ACK_OK;
}

/*
 * The peer refused what @refused names (an RNR NAK, section 9.2): those in
 * flight are handed back at once, to go again after the peer's RNR timer.
 * They were not lost on the path, so neither its window judgement nor its
 * probe timeout counts them.
 */
void mrc_path_tx_refused(struct mrc_path_tx *tx,
			 bool (*refused)(void *ctx, u64 cookie),
			 const struct mrc_path_ops *ops, void *ctx)
{
	u32 seq;

	for (seq = tx->una; seq != tx->next_seq; seq++) {
		struct mrc_sent *s = slot(tx, seq);

		if (s->state != MRC_SENT_OUT || !refused(ctx, s->cookie))
			continue;
		s->state = MRC_SENT_LOST;
		tx->in_flight--;
		tx->refused++;
		ops->lost(ctx, s->cookie);
	}
	advance_una(tx);
	end_window(tx);
}

/*
 * Moves the path to another route: packets sent from now on are told from
 * those still on the old one, which only the time rule calls lost.
 */
void mrc_path_tx_new_route(struct mrc_path_tx *tx, u16 entropy)
{
	tx->route++;
	tx->entropy = entropy;
	tx->repath_wanted = MRC_REPATH_NONE;
	tx->bad_windows = 0;
	tx->lossy_windows = false;
	tx->repaths++;
}

/* The next time mrc_path_tx_timer() has something to do; ~0: none. */
u64 mrc_path_tx_deadline(const struct mrc_path_tx *tx)
{
	u64 next = MRC_NEVER, delay = loss_delay(tx);
	u32 seq;

	if (tx->in_flight)
		next = pto_deadline(tx);
	if (tx->any_acked) {
		for (seq = tx->una; seq != tx->next_seq &&
		     mrc_seq_diff(seq, tx->newest_acked) < 0; seq++) {
			const struct mrc_sent *s = &tx->sent[seq %
							     MRC_SACK_BITS];

			if (s->state == MRC_SENT_OUT) {
				if (s->sent_us + delay < next)
					next = s->sent_us + delay;
				break;	/* the oldest is due first */
			}
		}
	}
	return next;
}

/* When a failed path may send its probe; ~0 if it is not waiting for one. */
u64 mrc_path_tx_retry_at(const struct mrc_path_tx *tx)
{
	if (tx->state != MRC_PATH_FAILED || tx->in_flight)
		return MRC_NEVER;
	return tx->retry_us;
}

/* A failed path probes after its backoff, which doubles for each lost. */
static void retry_later(struct mrc_path_tx *tx, u64 now)
{
	tx->retry_us = now + tx->backoff_us;
	tx->backoff_us = tx->backoff_us * 2 > MRC_MAX_BACKOFF_US ?
			 MRC_MAX_BACKOFF_US : tx->backoff_us * 2;
}

/*
 * Overdue packets older than an arrival are lost. A probe timeout (nothing
 * heard for a PTO after the newest packet) declares every packet in flight
 * lost: the tail of the path went missing. MRC_FAIL_PTOS in a row fail the
 * path: it moves to @new_entropy, a new route, and waits a backoff.
 */
void mrc_path_tx_timer(struct mrc_path_tx *tx, u64 now, u16 new_entropy,
		       const struct mrc_path_ops *ops, void *ctx)
{
	u32 seq;

	detect_losses(tx, now, ops, ctx);
	if (tx->in_flight && now >= pto_deadline(tx)) {
		for (seq = tx->una; seq != tx->next_seq; seq++) {
			struct mrc_sent *s = slot(tx, seq);

			if (s->state == MRC_SENT_OUT)
				declare_lost(tx, s, ops, ctx);
		}
		advance_una(tx);
		end_window(tx);
		if (tx->state == MRC_PATH_FAILED) {
			/* the probe was lost: another route, a longer wait */
			mrc_path_tx_new_route(tx, new_entropy);
			mrc_path_report(ops, ctx, MRC_PATH_EV_NEW_ROUTE);
			retry_later(tx, now);
		} else if (++tx->ptos >= MRC_FAIL_PTOS) {
			tx->state = MRC_PATH_FAILED;
			tx->failures++;
			mrc_path_report(ops, ctx, MRC_PATH_EV_FAILED);
			tx->ptos = 0;	/* a probe waits one PTO */
			mrc_path_tx_new_route(tx, new_entropy);
			mrc_path_report(ops, ctx, MRC_PATH_EV_NEW_ROUTE);
			tx->cwnd = tx->cwnd / 4 > MRC_CWND_ONE ?
				   tx->cwnd / 4 : MRC_CWND_ONE;
			retry_later(tx, now);
		}
	}
	advance_una(tx);
	end_window(tx);
}
