// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The sending end of a stream. A segment is delivered when any of its
 * transmissions is acknowledged on any path; a lost transmission queues
 * the segment to be sent again, first in line and preferably on the path
 * that lost it. The stream never has a segment out MRC_STREAM_WINDOW or
 * more past its oldest undelivered one, so the receiver's map names all.
 */
#include "mrc_stream.h"

static struct mrc_seg *seg(struct mrc_stream_tx *st, u32 ssn)
{
	return &st->seg[ssn % MRC_STREAM_MAP_BITS];
}

static bool in_flight_range(const struct mrc_stream_tx *st, u32 ssn)
{
	return mrc_seq_diff(ssn, st->una) >= 0 &&
	       mrc_seq_diff(ssn, st->next_ssn) < 0;
}

void mrc_stream_tx_init(struct mrc_stream_tx *st, u32 first_ssn)
{
	memset(st, 0, sizeof(*st));
	st->next_ssn = first_ssn;
	st->una = first_ssn;
}

/* Whether the window has room for a new segment. */
bool mrc_stream_tx_can_open(const struct mrc_stream_tx *st)
{
	return st->next_ssn - st->una < MRC_STREAM_WINDOW;
}

/* Numbers a new segment; the caller sends it and calls _sent(). */
u32 mrc_stream_tx_open(struct mrc_stream_tx *st)
{
	struct mrc_seg *s = seg(st, st->next_ssn);

	s->state = MRC_SEG_OUT;
	s->lost_path = -1;
	return st->next_ssn++;
}

/* The oldest lost segment still undelivered, to send before new ones. */
bool mrc_stream_tx_next_resend(struct mrc_stream_tx *st, u32 *ssn,
			       int *lost_path)
{
	while (st->resend_len) {
		u32 q = st->resend[st->resend_head];
		struct mrc_seg *s = seg(st, q);

		if (in_flight_range(st, q) && s->state == MRC_SEG_RESEND) {
			*ssn = q;
			*lost_path = s->lost_path;
			return true;
		}
		/* delivered after all (a late copy): nothing to resend */
		st->resend_head = (st->resend_head + 1) % MRC_STREAM_MAP_BITS;
		st->resend_len--;
	}
	return false;
}

/* The caller sent @ssn (a resend _next_resend() gave, or a new one). */
void mrc_stream_tx_sent(struct mrc_stream_tx *st, u32 ssn)
{
	struct mrc_seg *s = seg(st, ssn);

	if (!in_flight_range(st, ssn))
		return;
	if (s->state == MRC_SEG_RESEND && st->resend_len &&
	    st->resend[st->resend_head] == ssn) {
		st->resend_head = (st->resend_head + 1) % MRC_STREAM_MAP_BITS;
		st->resend_len--;
		st->resent++;
	}
	if (s->state != MRC_SEG_DELIVERED)
		s->state = MRC_SEG_OUT;
}

/*
 * A transmission of @ssn was acknowledged. Returns whether that delivered
 * it now (not before): the stream's oldest undelivered segment may move.
 */
bool mrc_stream_tx_acked(struct mrc_stream_tx *st, u32 ssn)
{
	struct mrc_seg *s = seg(st, ssn);

	if (!in_flight_range(st, ssn) || s->state == MRC_SEG_DELIVERED)
		return false;
	s->state = MRC_SEG_DELIVERED;
	st->delivered++;
	while (st->una != st->next_ssn &&
	       seg(st, st->una)->state == MRC_SEG_DELIVERED) {
		seg(st, st->una)->state = MRC_SEG_FREE;
		st->una++;
	}
	return true;
}

/* Drops queued SSNs that no longer wait: at most the window's stay. */
static void resend_compact(struct mrc_stream_tx *st)
{
	u32 i, n = 0;

	for (i = 0; i < st->resend_len; i++) {
		u32 q = st->resend[(st->resend_head + i) % MRC_STREAM_MAP_BITS];

		if (in_flight_range(st, q) && seg(st, q)->state == MRC_SEG_RESEND)
			st->resend[(st->resend_head + n++) % MRC_STREAM_MAP_BITS] = q;
	}
	st->resend_len = n;
}

/* A transmission of @ssn was lost on @path: queue the segment again. */
void mrc_stream_tx_lost(struct mrc_stream_tx *st, u32 ssn, int path)
{
	struct mrc_seg *s = seg(st, ssn);

	/* another transmission of it may still be out; one resend at a time */
	if (!in_flight_range(st, ssn) || s->state != MRC_SEG_OUT)
		return;
	if (st->resend_len == MRC_STREAM_MAP_BITS)
		resend_compact(st);
	s->state = MRC_SEG_RESEND;
	s->lost_path = path;
	st->resend[(st->resend_head + st->resend_len) % MRC_STREAM_MAP_BITS] = ssn;
	st->resend_len++;
}
