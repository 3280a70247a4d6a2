/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The receiving end of a stream (protocol-v2.md sections 8.1 and 9): which
 * segments it takes, when a receive-consuming message completes, when a
 * request may run. The caller places the bytes and keeps the receive WQEs;
 * this decides the order. A segment refused (or beyond) is not recorded on
 * its path either, so its sender takes it for lost and sends it again: the
 * caller records a transmission on its path only for a segment taken or a
 * duplicate.
 */
#ifndef MRC_STREAM_RX_H
#define MRC_STREAM_RX_H

#include "mrc_wire.h"

/* Receive-consuming messages between the oldest not complete and the newest. */
#define MRC_RECV_SLOTS		MRC_STREAM_MAP_BITS

struct mrc_stream_rx {
	struct mrc_stream_map map;	/* the segments accepted */
	u32 recv_done;			/* MSN of the next message to complete */
	u32 last_ssn[MRC_RECV_SLOTS];	/* by MSN: the SSN of its last segment */
	u64 last_known[MRC_RECV_SLOTS / 64];
	u32 req[MRC_MAX_REQUESTS];	/* accepted requests' SSNs, in order */
	u32 req_head, req_len, req_limit;
	bool refusing;			/* after an RNR: from refused_ssn on */
	u32 refused_ssn;
	u64 accepted, duplicates, refused, beyond;
};

enum mrc_seg_verdict {
	MRC_SEG_TAKE,		/* check it; then place it and _accept() it */
	MRC_SEG_DUPLICATE,	/* accepted before: not placed again */
	MRC_SEG_BEYOND,		/* past what the stream can name: drop */
	MRC_SEG_REFUSE,		/* refused after an RNR, with no new NAK */
};

void mrc_stream_rx_init(struct mrc_stream_rx *rx, u32 first_ssn, u32 first_msn,
			u32 max_requests);
enum mrc_seg_verdict mrc_stream_rx_check(struct mrc_stream_rx *rx,
					 const struct mrc_hdr *h);
bool mrc_stream_rx_rebase(struct mrc_stream_rx *rx, u32 first_ssn);
bool mrc_stream_rx_requests_full(const struct mrc_stream_rx *rx, u32 ssn);
bool mrc_stream_rx_refuse(struct mrc_stream_rx *rx, u32 ssn);
void mrc_stream_rx_accept(struct mrc_stream_rx *rx, const struct mrc_hdr *h,
			  u32 payload_len);
bool mrc_stream_rx_next_completion(struct mrc_stream_rx *rx, u32 *msn);
bool mrc_stream_rx_next_request(struct mrc_stream_rx *rx, u32 *ssn);

#endif /* MRC_STREAM_RX_H */
