// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The receiving end of a path (protocol-v2.md section 4): records each
 * transmission and decides when to acknowledge. An ACK always carries the
 * whole map, so a lost ACK costs only time.
 */
#include "mrc_path.h"

void mrc_path_rx_init(struct mrc_path_rx *rx, u32 first_seq)
{
	memset(rx, 0, sizeof(*rx));
	mrc_sack_init(&rx->sack, first_seq);
	rx->newest_seq = first_seq - 1;
}

enum mrc_rx_ack mrc_path_rx_packet(struct mrc_path_rx *rx, u32 seq, u32 floor,
				   bool ce, bool ack_req, u64 now)
{
	enum mrc_sack_verdict v = mrc_sack_record(&rx->sack, seq, floor);

	if (v == MRC_SACK_BEYOND) {
		rx->beyond++;
		return MRC_RX_DROP;
	}
	if (v == MRC_SACK_DUPLICATE) {
		/* the sender may have lost our ACKs: tell it at once */
		rx->duplicates++;
		return MRC_RX_ACK_NOW;
	}
	rx->received++;
	rx->unacked++;
	if (ce)
		rx->ce++;
	if (mrc_seq_diff(seq, rx->newest_seq) > 0) {
		rx->newest_seq = seq;
		rx->newest_us = now;
	}
	/* a gap is loss: the sender should hear of it now */
	if (ack_req || mrc_sack_has_gap(&rx->sack) ||
	    rx->unacked >= MRC_ACK_EVERY)
		return MRC_RX_ACK_NOW;
	if (!rx->ack_due_us)
		rx->ack_due_us = now + MRC_DELAYED_ACK_US;
	return MRC_RX_ACK_LATER;
}

/* Fills @ack with the path's state, and starts the next count. */
void mrc_path_rx_ack(struct mrc_path_rx *rx, struct mrc_path_ack *ack,
		     u64 now)
{
	u64 delay = now > rx->newest_us ? now - rx->newest_us : 0;

	ack->cum = rx->sack.cum;
	mrc_sack_bits(&rx->sack, ack->bits);
	ack->ack_delay_us = delay > 0xffffffffULL ? 0xffffffffU : (u32)delay;
	ack->ce = rx->ce;
	rx->unacked = 0;
	rx->ce = 0;
	rx->ack_due_us = 0;
}
