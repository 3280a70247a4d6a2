// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A stream's receiver. Segments are placed on arrival in any order, but
 * what the application can see keeps the stream's order: a message that
 * consumes a receive WQE completes only when every segment before its last
 * was accepted (so a WRITE before a SEND is in memory when the SEND
 * completes), in MSN order; a READ or an atomic runs only when every
 * segment before it was accepted, and once, since a segment the map has is
 * never taken again.
 */
#include "mrc_stream_rx.h"

void mrc_stream_rx_init(struct mrc_stream_rx *rx, u32 first_ssn, u32 first_msn,
			u32 max_requests)
{
	memset(rx, 0, sizeof(*rx));
	mrc_stream_map_init(&rx->map, first_ssn);
	rx->recv_done = first_msn;
	rx->req_limit = max_requests < MRC_MAX_REQUESTS ? max_requests :
			MRC_MAX_REQUESTS;
}

static u16 op_mask(const struct mrc_hdr *h)
{
	return mrc_opcode[h->opcode].mask;
}

enum mrc_seg_verdict mrc_stream_rx_check(struct mrc_stream_rx *rx,
					 const struct mrc_hdr *h)
{
	s32 d = mrc_seq_diff(h->ssn, rx->map.cum);

	if (d < 0 || mrc_stream_map_has(&rx->map, h->ssn)) {
		rx->duplicates++;
		return MRC_SEG_DUPLICATE;
	}
	/* a correct sender stays in the map, and its MSNs within the slots */
	if (d > MRC_STREAM_MAP_BITS - 1 ||
	    ((op_mask(h) & MRC_OPM_RECV) &&
	     (u32)(h->msn - rx->recv_done) >= MRC_RECV_SLOTS)) {
		rx->beyond++;
		return MRC_SEG_BEYOND;
	}
	/* a NAK is never refused (section 9.2): it may be what frees us */
	if (rx->refusing && h->opcode != MRC_OP_NAK &&
	    mrc_seq_diff(h->ssn, rx->refused_ssn) > 0) {
		rx->refused++;
		return MRC_SEG_REFUSE;
	}
	return MRC_SEG_TAKE;
}

/*
 * A stream that began in its sender's RTR starts at @first_ssn, where our
 * own stream started (protocol-v2.md section 9.1). Moved there only before
 * anything of it was taken: returns false after.
 */
bool mrc_stream_rx_rebase(struct mrc_stream_rx *rx, u32 first_ssn)
{
	if (rx->accepted || rx->refusing || rx->req_len)
		return false;
	mrc_stream_map_init(&rx->map, first_ssn);
	return true;
}

/*
 * Whether request @ssn must wait (RNR): as many as the QP takes are queued,
 * and it comes after all of them. One before a queued request is taken
 * whatever the limit (up to MRC_MAX_REQUESTS): the queued ones run only
 * after it, so refusing it would hold the stream for good.
 */
bool mrc_stream_rx_requests_full(const struct mrc_stream_rx *rx, u32 ssn)
{
	u32 last;

	if (rx->req_len >= MRC_MAX_REQUESTS)
		return true;
	if (rx->req_len < rx->req_limit)
		return false;
	last = rx->req[(rx->req_head + rx->req_len - 1) % MRC_MAX_REQUESTS];
	return mrc_seq_diff(ssn, last) > 0;
}

/*
 * The caller could not take @ssn for want of a receive WQE or a request
 * slot (RNR): it and every later segment are refused until the sender goes
 * back to it. Returns whether to send a NAK: once per refusal point.
 */
bool mrc_stream_rx_refuse(struct mrc_stream_rx *rx, u32 ssn)
{
	rx->refused++;
	if (rx->refusing && mrc_seq_diff(ssn, rx->refused_ssn) > 0)
		return false;
	rx->refusing = true;
	rx->refused_ssn = ssn;
	return true;
}

static void queue_request(struct mrc_stream_rx *rx, u32 ssn)
{
	u32 i = rx->req_len++;

	/* in SSN order, though they may arrive in any */
	while (i && mrc_seq_diff(rx->req[(rx->req_head + i - 1) %
					 MRC_MAX_REQUESTS], ssn) > 0) {
		rx->req[(rx->req_head + i) % MRC_MAX_REQUESTS] =
			rx->req[(rx->req_head + i - 1) % MRC_MAX_REQUESTS];
		i--;
	}
	rx->req[(rx->req_head + i) % MRC_MAX_REQUESTS] = ssn;
}

/* The caller took segment @h (of @payload_len bytes) that _check() let by. */
void mrc_stream_rx_accept(struct mrc_stream_rx *rx, const struct mrc_hdr *h,
			  u32 payload_len)
{
	u16 mask = op_mask(h);

	if (mrc_stream_map_record(&rx->map, h->ssn) != MRC_SACK_NEW)
		return;
	rx->accepted++;
	if (rx->refusing && h->ssn == rx->refused_ssn)
		rx->refusing = false;
	if ((mask & MRC_OPM_RECV) && h->offset + payload_len == h->msg_len) {
		u32 slot = h->msn % MRC_RECV_SLOTS;

		rx->last_ssn[slot] = h->ssn;
		rx->last_known[slot / 64] |= 1ULL << (slot % 64);
	}
	if ((mask & MRC_OPM_REQ) && rx->req_len < MRC_MAX_REQUESTS)
		queue_request(rx, h->ssn);
}

/* The next receive-consuming message complete, in MSN order. */
bool mrc_stream_rx_next_completion(struct mrc_stream_rx *rx, u32 *msn)
{
	u32 slot = rx->recv_done % MRC_RECV_SLOTS;

	if (!(rx->last_known[slot / 64] & (1ULL << (slot % 64))) ||
	    mrc_seq_diff(rx->map.cum, rx->last_ssn[slot]) <= 0)
		return false;
	rx->last_known[slot / 64] &= ~(1ULL << (slot % 64));
	*msn = rx->recv_done++;
	return true;
}

/* The next request whose turn has come: every segment before it is in. */
bool mrc_stream_rx_next_request(struct mrc_stream_rx *rx, u32 *ssn)
{
	if (!rx->req_len ||
	    mrc_seq_diff(rx->map.cum, rx->req[rx->req_head]) <= 0)
		return false;
	*ssn = rx->req[rx->req_head];
	rx->req_head = (rx->req_head + 1) % MRC_MAX_REQUESTS;
	rx->req_len--;
	return true;
}
