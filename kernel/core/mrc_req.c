// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * A stream's requester. Work requests leave in posting order, each cut into
 * segments of at most one MTU; a READ or an atomic is one segment, answered
 * by the responder's own segments; local operations (memory registration)
 * run when the send point reaches them. Completions are reported in posting
 * order: a SEND or WRITE when every segment is delivered, a READ or atomic
 * when its response is in whole. A fenced request waits until every READ
 * and atomic before it is answered; at most max_rd_atomic are unanswered.
 */
#include "mrc_req.h"

static struct mrc_wr *wr_at(const struct mrc_req *r, u32 index)
{
	return &r->wrs[index % r->num_wrs];
}

static bool is_request(u8 op)
{
	return op && (mrc_opcode[op].mask & MRC_OPM_REQ);
}

/* The bytes a request's response carries: a READ's length, an atomic's 8. */
static u32 answer_len(const struct mrc_wr *w)
{
	return w->op == MRC_OP_READ_REQ ? w->length : MRC_ATOMIC_VALUE_LEN;
}

/*
 * @num_wrs must be a power of two: indices are serial u32 numbers, and the
 * slot of each is the index modulo @num_wrs across the wrap too.
 */
bool mrc_req_init(struct mrc_req *r, struct mrc_wr *wrs, u32 num_wrs, u32 mtu,
		  u32 first_msn, u32 max_reqs)
{
	if (!num_wrs || (num_wrs & (num_wrs - 1)))
		return false;
	memset(r, 0, sizeof(*r));
	r->wrs = wrs;
	r->num_wrs = num_wrs;
	r->mtu = mtu ? mtu : 1;
	r->next_msn = first_msn;
	mrc_req_set_max_reqs(r, max_reqs);
	return true;
}

/* max_rd_atomic, given at RTS: at least one, at most MRC_MAX_REQUESTS. */
void mrc_req_set_max_reqs(struct mrc_req *r, u32 max_reqs)
{
	r->max_reqs = max_reqs < MRC_MAX_REQUESTS ? max_reqs : MRC_MAX_REQUESTS;
	if (!r->max_reqs)
		r->max_reqs = 1;
}

/* A requester's opcodes: segments of its own messages, not answers. */
static bool requester_op(u8 op)
{
	u16 mask;

	if (!op)
		return true;
	if (op >= MRC_NUM_OPCODES || !mrc_opcode[op].name)
		return false;
	mask = mrc_opcode[op].mask;
	return (mask & MRC_OPM_SEG) && !(mask & MRC_OPM_RESP);
}

/*
 * Posts a work request of @op (0: local) and @length bytes (an atomic's is
 * 8); returns false when every entry is in use or @op is not one a
 * requester sends. Its index, for the caller's own records, in @index.
 */
bool mrc_req_post(struct mrc_req *r, u8 op, u32 length, u8 flags, u32 *index)
{
	struct mrc_wr *w;

	if (r->tail - r->head >= r->num_wrs || !requester_op(op))
		return false;
	w = wr_at(r, r->tail);
	memset(w, 0, sizeof(*w));
	w->op = op;
	w->flags = flags;
	w->length = op && (mrc_opcode[op].mask & MRC_OPM_ATOMIC) ?
		    MRC_ATOMIC_VALUE_LEN : length;
	if (!op)
		w->nsegs = 0;
	else if (mrc_opcode[op].mask & MRC_OPM_PAYLOAD)
		w->nsegs = length ? length / r->mtu + !!(length % r->mtu) : 1;
	else
		w->nsegs = 1;
	w->msn = r->next_msn;
	if (op && (mrc_opcode[op].mask & MRC_OPM_RECV))
		r->next_msn++;
	*index = r->tail++;
	r->posted++;
	return true;
}

static void describe(const struct mrc_req *r, u32 index, u32 ssn,
		     struct mrc_seg_out *out)
{
	const struct mrc_wr *w = wr_at(r, index);
	u32 seg = ssn - w->first_ssn;

	out->wr = index;
	out->op = w->op;
	out->ssn = ssn;
	out->msn = w->msn;
	out->msg_len = w->length;
	if (mrc_opcode[w->op].mask & MRC_OPM_PAYLOAD) {
		out->offset = seg * r->mtu;
		out->payload_len = w->length - out->offset < r->mtu ?
				   w->length - out->offset : r->mtu;
	} else {
		out->offset = 0;
		out->payload_len = 0;
	}
}

/*
 * The next new segment to send, opened on @st; or a local operation to run
 * (@out->op 0). False when there is none, or it must wait: the stream's
 * window, the fence, the limit on unanswered requests.
 */
bool mrc_req_next(struct mrc_req *r, struct mrc_stream_tx *st,
		  struct mrc_seg_out *out)
{
	struct mrc_wr *w;
	u32 ssn;

	if (r->send == r->tail)
		return false;
	w = wr_at(r, r->send);
	if ((w->flags & MRC_WR_FENCE) && r->nreqs)
		return false;
	if (!w->op) {
		w->state = MRC_WR_OPENED;
		out->wr = r->send++;
		out->op = 0;
		return true;
	}
	if (is_request(w->op) && r->nreqs >= r->max_reqs)
		return false;
	if (!mrc_stream_tx_can_open(st))
		return false;
	ssn = mrc_stream_tx_open(st);
	if (!w->opened)
		w->first_ssn = ssn;
	w->opened++;
	r->wr_of_ssn[ssn % MRC_STREAM_MAP_BITS] = r->send;
	describe(r, r->send, ssn, out);
	if (w->opened == w->nsegs) {
		w->state = MRC_WR_OPENED;
		if (is_request(w->op))
			r->reqs[r->nreqs++] = r->send;
		r->send++;
	}
	return true;
}

/* What segment @ssn (the stream's to resend) carries. */
bool mrc_req_resend(const struct mrc_req *r, u32 ssn, struct mrc_seg_out *out)
{
	u32 index = r->wr_of_ssn[ssn % MRC_STREAM_MAP_BITS];
	const struct mrc_wr *w = wr_at(r, index);

	if (index - r->head >= r->tail - r->head || !w->opened ||
	    ssn - w->first_ssn >= w->opened)
		return false;
	describe(r, index, ssn, out);
	return true;
}

/* The stream delivered segment @ssn (mrc_stream_tx_acked() said so). */
void mrc_req_delivered(struct mrc_req *r, u32 ssn)
{
	u32 index = r->wr_of_ssn[ssn % MRC_STREAM_MAP_BITS];
	struct mrc_wr *w = wr_at(r, index);

	if (index - r->head < r->tail - r->head && w->opened &&
	    ssn - w->first_ssn < w->opened && w->delivered < w->nsegs)
		w->delivered++;
}

/*
 * A response segment @h of @payload_len bytes: which request it answers,
 * checked against what that request asked. The peer's stream map has told
 * a resend from a new segment already; the caller places the bytes and
 * then calls _answered().
 */
enum mrc_resp_verdict mrc_req_response(struct mrc_req *r,
				       const struct mrc_hdr *h,
				       u32 payload_len, u32 *wr)
{
	const struct mrc_wr *w;
	bool read, read_resp;
	u32 i;

	for (i = 0; i < r->nreqs; i++) {
		w = wr_at(r, r->reqs[i]);
		if (w->first_ssn == h->msn)
			break;
	}
	if (i == r->nreqs) {
		r->bad_responses++;
		return MRC_RESP_UNKNOWN;
	}
	read = w->op == MRC_OP_READ_REQ;
	read_resp = h->opcode == MRC_OP_READ_RESP;
	if (read != read_resp || h->msg_len != answer_len(w) ||
	    (u64)h->offset + payload_len > h->msg_len) {
		r->bad_responses++;
		return MRC_RESP_BAD;
	}
	*wr = r->reqs[i];
	return MRC_RESP_OK;
}

/* Request @index no longer waits for its answer. */
static void drop_request(struct mrc_req *r, u32 index)
{
	u32 i;

	for (i = 0; i < r->nreqs; i++) {
		if (r->reqs[i] == index) {
			r->nreqs--;
			memmove(&r->reqs[i], &r->reqs[i + 1],
				(r->nreqs - i) * sizeof(r->reqs[0]));
			break;
		}
	}
}

/* @bytes of request @index's response were placed; whole, it is answered. */
void mrc_req_answered(struct mrc_req *r, u32 index, u32 bytes)
{
	struct mrc_wr *w = wr_at(r, index);

	w->resp_bytes += bytes;
	if (w->resp_bytes < answer_len(w) || w->answered)
		return;
	w->answered = true;
	drop_request(r, index);
}

/* The work request segment @ssn belongs to, if it is one still held. */
bool mrc_req_wr_of(const struct mrc_req *r, u32 ssn, u32 *wr)
{
	u32 index = r->wr_of_ssn[ssn % MRC_STREAM_MAP_BITS];
	const struct mrc_wr *w = wr_at(r, index);

	if (index - r->head >= r->tail - r->head || !w->opened ||
	    ssn - w->first_ssn >= w->opened)
		return false;
	*wr = index;
	return true;
}

/*
 * The responder refused work request @index (a NAK, section 9.2): it is
 * done, in error, as soon as every one before it is; nothing more of it is
 * sent, and it no longer counts as a request waiting for its answer.
 */
void mrc_req_refused(struct mrc_req *r, u32 index)
{
	struct mrc_wr *w = wr_at(r, index);

	if (index - r->head >= r->tail - r->head || w->state == MRC_WR_DONE)
		return;
	w->refused = true;
	if (w->state == MRC_WR_POSTED) {
		/* only the send point can be part opened */
		w->state = MRC_WR_OPENED;
		if (r->send == index)
			r->send++;
	}
	drop_request(r, index);
}

/* The oldest work request, if it is complete: in posting order. */
bool mrc_req_next_completion(struct mrc_req *r, u32 *index)
{
	struct mrc_wr *w;
	bool done;

	if (r->head == r->tail)
		return false;
	w = wr_at(r, r->head);
	if (w->state != MRC_WR_OPENED)
		return false;
	if (!w->op || w->refused)
		done = true;
	else if (is_request(w->op))
		done = w->answered;
	else
		done = w->delivered == w->nsegs;
	if (!done)
		return false;
	w->state = MRC_WR_DONE;
	*index = r->head++;
	r->completed++;
	return true;
}
