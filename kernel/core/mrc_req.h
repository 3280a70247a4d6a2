/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A stream's requester (protocol-v2.md sections 8.1 and 9): work requests
 * cut into segments, READ and atomic responses matched to their requests,
 * completions in posting order. The caller keeps the work requests' data
 * and gives the array this keeps their progress in, one entry per send
 * queue slot.
 */
#ifndef MRC_REQ_H
#define MRC_REQ_H

#include "mrc_stream.h"
#include "mrc_wire.h"

#define MRC_WR_FENCE		0x1	/* wait for earlier READs and atomics */

enum mrc_wr_state {
	MRC_WR_POSTED,		/* segments to open */
	MRC_WR_OPENED,		/* all opened (a local operation: run) */
	MRC_WR_DONE,		/* complete, reported in order */
};

struct mrc_wr {
	u8 op;			/* MRC_OP_* of its segments; 0: local */
	u8 flags;		/* MRC_WR_* */
	u8 state;		/* enum mrc_wr_state */
	bool answered;		/* a request: its response arrived whole */
	bool refused;		/* the responder refused it (a NAK) */
	u32 length;
	u32 msn;		/* receive-consuming: its MSN */
	u32 first_ssn;
	u32 nsegs, opened, delivered;
	u32 resp_bytes;		/* a request: response bytes in */
};

/* A segment to send: what its packet's header and payload are. */
struct mrc_seg_out {
	u32 wr;			/* the work request's index */
	u8 op;			/* MRC_OP_*; 0: a local operation to run now */
	u32 ssn, msn, offset, payload_len, msg_len;
};

struct mrc_req {
	struct mrc_wr *wrs;	/* the caller's, @num_wrs of them */
	u32 num_wrs;
	u32 head;		/* oldest not complete */
	u32 send;		/* oldest with segments to open */
	u32 tail;		/* next to post */
	u32 mtu;
	u32 next_msn;		/* receive-consuming messages posted */
	u32 max_reqs;		/* READs and atomics unanswered, at most */
	u32 reqs[MRC_MAX_REQUESTS];	/* their WR indices, in order */
	u32 nreqs;
	u32 wr_of_ssn[MRC_STREAM_MAP_BITS];	/* the WR of each segment out */
	u64 posted, completed, bad_responses;
};

bool mrc_req_init(struct mrc_req *r, struct mrc_wr *wrs, u32 num_wrs, u32 mtu,
		  u32 first_msn, u32 max_reqs);
void mrc_req_set_max_reqs(struct mrc_req *r, u32 max_reqs);
bool mrc_req_post(struct mrc_req *r, u8 op, u32 length, u8 flags, u32 *index);
bool mrc_req_next(struct mrc_req *r, struct mrc_stream_tx *st,
		  struct mrc_seg_out *out);
bool mrc_req_resend(const struct mrc_req *r, u32 ssn, struct mrc_seg_out *out);
void mrc_req_delivered(struct mrc_req *r, u32 ssn);
enum mrc_resp_verdict {
	MRC_RESP_OK,
	MRC_RESP_UNKNOWN,	/* answers no request waiting: drop, count */
	MRC_RESP_BAD,		/* not what the request asked for: drop, count */
};

enum mrc_resp_verdict mrc_req_response(struct mrc_req *r,
				       const struct mrc_hdr *h,
				       u32 payload_len, u32 *wr);
void mrc_req_answered(struct mrc_req *r, u32 wr, u32 bytes);
bool mrc_req_wr_of(const struct mrc_req *r, u32 ssn, u32 *wr);
void mrc_req_refused(struct mrc_req *r, u32 wr);
bool mrc_req_next_completion(struct mrc_req *r, u32 *wr);

#endif /* MRC_REQ_H */
