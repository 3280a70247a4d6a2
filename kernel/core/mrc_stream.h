/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * One ordered stream (protocol-v2.md section 8, in part): its segments are
 * numbered by a stream sequence (SSN) of their own, whatever paths carry
 * them. The receiver keeps a map of SSNs (struct mrc_stream_map, like a
 * path's with no floor: a stream waits for every segment), so a resend is told
 * from new data and completion follows the stream's order. The sender
 * tracks each segment until one of its transmissions is acknowledged.
 */
#ifndef MRC_STREAM_H
#define MRC_STREAM_H

#include "mrc_sack.h"

/* Segments of one stream past the oldest undelivered: the receiver's map. */
#define MRC_STREAM_WINDOW	(MRC_STREAM_MAP_BITS - 1)

enum mrc_seg_state {
	MRC_SEG_FREE,
	MRC_SEG_OUT,		/* a transmission of it is on a path */
	MRC_SEG_RESEND,		/* its transmission was lost: queued */
	MRC_SEG_DELIVERED,
};

struct mrc_seg {
	u8 state;
	s8 lost_path;		/* the path that lost it, or -1 */
};

struct mrc_stream_tx {
	u32 next_ssn;		/* next new segment */
	u32 una;		/* oldest segment not delivered */
	struct mrc_seg seg[MRC_STREAM_MAP_BITS];	/* by ssn % its size */
	u32 resend[MRC_STREAM_MAP_BITS];	/* SSNs waiting, in loss order */
	u32 resend_head, resend_len;
	u64 delivered, resent;
};

void mrc_stream_tx_init(struct mrc_stream_tx *st, u32 first_ssn);
bool mrc_stream_tx_can_open(const struct mrc_stream_tx *st);
u32 mrc_stream_tx_open(struct mrc_stream_tx *st);
bool mrc_stream_tx_next_resend(struct mrc_stream_tx *st, u32 *ssn,
			       int *lost_path);
void mrc_stream_tx_sent(struct mrc_stream_tx *st, u32 ssn);
bool mrc_stream_tx_acked(struct mrc_stream_tx *st, u32 ssn);
void mrc_stream_tx_lost(struct mrc_stream_tx *st, u32 ssn, int path);

#endif /* MRC_STREAM_H */
