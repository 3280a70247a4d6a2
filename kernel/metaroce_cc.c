// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Congestion control (protocol.md section 10): a window in packets that
 * grows by one packet per round trip and shrinks, DCTCP style, by the
 * fraction of ECN-marked packets; random loss does not shrink it.
 */
#include "metaroce_soft.h"

#define CWND_ONE	256		/* cwnd is in 1/256 packets */
#define ALPHA_ONE	1024		/* alpha is in 1/1024 */
#define ALPHA_GAIN_SHIFT 4		/* g = 1/16 */

/*
 * A connection whose first PSN is @psn. alpha starts at 1, as in Linux's
 * DCTCP: the first window with marks halves cwnd. The first window ends
 * with the first ACK; a window end left at PSN 0 would, for a first PSN in
 * the upper half of the PSN space, lie 2^23 PSNs in the past and in the
 * future at once, and no window would end before the PSNs wrapped.
 */
void soft_cc_init(struct soft_cc *cc, u32 psn)
{
	memset(cc, 0, sizeof(*cc));
	cc->cwnd = SOFT_INITIAL_CWND * CWND_ONE;
	cc->alpha = ALPHA_ONE;
	cc->window_end_psn = psn;
}

/*
 * @delivered packets were newly acknowledged, @ce_count of the packets
 * the receiver got since its last ACK were CE-marked.
 */
void soft_cc_on_ack(struct soft_cc *cc, u32 delivered, u32 ce_count,
		    u32 cum_psn, u32 psn_next)
{
	u32 cwnd_pkts = max(cc->cwnd / CWND_ONE, 1U);

	cc->window_acked += delivered;
	cc->window_marked += ce_count;
	if (!ce_count)
		cc->cwnd += delivered * CWND_ONE / cwnd_pkts;

	/* Once per window of data: update alpha, react to marks. */
	if (metaroce_psn_diff(cum_psn, cc->window_end_psn) >= 0) {
		u32 frac = cc->window_acked ?
			   min(cc->window_marked * ALPHA_ONE /
			       cc->window_acked, (u32)ALPHA_ONE) : 0;

		cc->alpha = cc->alpha - (cc->alpha >> ALPHA_GAIN_SHIFT) +
			    (frac >> ALPHA_GAIN_SHIFT);
		if (cc->window_marked)
			cc->cwnd -= (u64)cc->cwnd * cc->alpha /
				    (2 * ALPHA_ONE);
		cc->window_end_psn = psn_next;
		cc->window_acked = 0;
		cc->window_marked = 0;
	}
	cc->cwnd = clamp_t(u32, cc->cwnd, CWND_ONE, SOFT_WINDOW * CWND_ONE);
}

void soft_cc_on_rto(struct soft_cc *cc)
{
	cc->cwnd = max_t(u32, cc->cwnd / 2, METAROCE_RTO_MIN_CWND * CWND_ONE);
}

/* Packets that may be in flight. */
u32 soft_cc_window(const struct soft_cc *cc)
{
	u32 window = cc->cwnd / CWND_ONE;

	if (cc->fair_share)
		window = min_t(u32, window, cc->fair_share);
	return clamp_t(u32, window, 1, SOFT_WINDOW);
}
