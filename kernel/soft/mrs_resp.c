// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Protocol v2's responder (protocol-v2.md section 9): the peer's READs and
 * atomics are taken in any order and run in stream order, once everything
 * before them is in, and each is answered with segments of our own stream,
 * sequenced and resent like any data. Also the NAKs that refuse a segment.
 * Everything here runs under the lock.
 */
#include "../metaroce_loc.h"
#include "mrs.h"

/* The response segment @ssn of our stream is part of, or NULL. */
struct mrs_response *mrs_response_of(struct mrs_qp *mq, u32 ssn)
{
	u32 b = ssn % MRC_STREAM_MAP_BITS;

	if (!(mq->is_resp[b / 64] & BIT_ULL(b % 64)))
		return NULL;
	return &mq->resps[mq->resp_of_ssn[b]];
}

/* A request the stream took: kept until its turn. */
bool mrs_take_request(struct mrs_qp *mq, const struct mrc_pkt *pkt)
{
	u32 i;

	for (i = 0; i < MRC_MAX_REQUESTS; i++) {
		struct mrs_request *q = &mq->requests[i];

		if (q->used)
			continue;
		memset(q, 0, sizeof(*q));
		q->used = true;
		q->op = pkt->hdr.opcode;
		q->ssn = pkt->hdr.ssn;
		q->len = pkt->hdr.msg_len;
		if (q->op == MRC_OP_READ_REQ) {
			q->va = pkt->reth.va;
			q->rkey = pkt->reth.rkey;
		} else {
			q->va = pkt->atomic.va;
			q->rkey = pkt->atomic.rkey;
			q->swap_add = pkt->atomic.swap_add;
			q->compare = pkt->atomic.compare;
		}
		return true;
	}
	return false;
}

static struct mrs_response *new_response(struct mrs_qp *mq, u8 op,
					 u32 req_ssn, u32 len)
{
	struct mrs_response *r;

	if (mq->resp_tail - mq->resp_head >= MRS_MAX_RESPONSES)
		return NULL;
	r = mrs_response_at(mq, mq->resp_tail++);
	memset(r, 0, sizeof(*r));
	r->op = op;
	r->req_ssn = req_ssn;
	r->len = len;
	r->nsegs = op == MRC_OP_READ_RESP && len ?
		   DIV_ROUND_UP(len, mq->req.mtu) : 1;
	return r;
}

/*
 * Queues a NAK of segment @ssn; an error NAK (@fail_after) fails the QP
 * once it is sent, and nothing more of the peer's is taken meanwhile. The
 * last free response is kept for an error NAK (requests leave it too): an
 * RNR NAK that finds no other is not queued, and goes when the refused
 * segment is resent, as it is refused at the same point again.
 */
bool mrs_queue_nak(struct mrs_qp *mq, u8 syndrome, u8 arg, u32 ssn,
		   bool fail_after)
{
	struct mrs_response *r;

	if (!fail_after &&
	    mq->resp_tail - mq->resp_head >= MRS_MAX_RESPONSES - 1)
		return false;
	r = new_response(mq, MRC_OP_NAK, ssn, 0);
	if (!r)
		return false;
	r->nak.syndrome = syndrome;
	r->nak.arg = arg;
	r->nak.ssn = ssn;
	r->fail_after = fail_after;
	if (fail_after)
		mq->failing = true;
	return true;
}

/*
 * Segment @ssn is refused with @syndrome (a key, bounds or length error).
 * As in IB, the NAK waits until everything before it has arrived, so the
 * requester completes what it posted before; the earliest refusal wins.
 */
void mrs_refuse(struct mrs_qp *mq, u8 syndrome, u32 ssn)
{
	if (syndrome == MRC_NAK_REMOTE_ACCESS)
		metaroce_count(mq->sqp->qp->mdev, REMOTE_ACCESS_ERR);
	if (mq->nak_due && mrc_seq_diff(ssn, mq->nak_ssn) >= 0)
		return;
	mq->nak_due = true;
	mq->nak_syndrome = syndrome;
	mq->nak_ssn = ssn;
	mrs_check_refusal(mq);
}

/* The refusal's turn: the stream has everything before the refused one. */
void mrs_check_refusal(struct mrs_qp *mq)
{
	if (!mq->nak_due || mq->srx.map.cum != mq->nak_ssn)
		return;
	if (mrs_queue_nak(mq, mq->nak_syndrome, 0, mq->nak_ssn, true))
		mq->nak_due = false;
}

/*
 * Segment @ssn of a READ response could not be built: its MR was
 * deregistered (or rereg'd) under it, and nothing may read it again. The
 * READ is refused with an access error, as for a bad key, and nothing
 * more of it is sent. One error NAK goes, naming the oldest READ so
 * refused, and the QP fails once it is out.
 */
void mrs_refuse_revoked_read(struct mrs_qp *mq, u32 ssn)
{
	struct mrs_response *r = mrs_response_of(mq, ssn), *nak = NULL;
	u32 i;

	if (!r || r->op != MRC_OP_READ_RESP || r->revoked ||
	    ssn - r->first_ssn >= r->opened)
		return;
	r->revoked = true;
	for (i = mq->resp_head; i != mq->resp_tail && !nak; i++) {
		nak = mrs_response_at(mq, i);
		if (nak->op != MRC_OP_NAK || !nak->fail_after)
			nak = NULL;
	}
	if (!mq->failing) {
		metaroce_count(mq->sqp->qp->mdev, REMOTE_ACCESS_ERR);
		mrs_queue_nak(mq, MRC_NAK_REMOTE_ACCESS, 0, r->req_ssn, true);
	} else if (nak && !nak->opened &&
		   mrc_seq_diff(r->req_ssn, nak->nak.ssn) < 0) {
		/* The error NAK not yet out names the oldest refusal. */
		nak->req_ssn = r->req_ssn;
		nak->nak.ssn = r->req_ssn;
		nak->nak.syndrome = MRC_NAK_REMOTE_ACCESS;
	}
}

static void run_read(struct mrs_qp *mq, const struct mrs_request *q)
{
	struct metaroce_qp *qp = mq->sqp->qp;
	struct metaroce_mr *mr = NULL;
	struct mrs_response *r;

	/* IBA C9-88: an empty READ names no memory, but needs the right. */
	if (!soft_qp_allows(qp, IB_ACCESS_REMOTE_READ) || q->len) {
		if (soft_qp_allows(qp, IB_ACCESS_REMOTE_READ))
			mr = metaroce_rkey_get(qp, q->rkey, q->va, q->len,
					       IB_ACCESS_REMOTE_READ);
		if (!mr) {
			metaroce_count(qp->mdev, REMOTE_ACCESS_ERR);
			mrs_queue_nak(mq, MRC_NAK_REMOTE_ACCESS, 0, q->ssn,
				      true);
			return;
		}
	}
	r = new_response(mq, MRC_OP_READ_RESP, q->ssn, q->len);
	r->mr = mr;
	r->rkey = q->rkey;
	r->va = q->va;
}

static void run_atomic(struct mrs_qp *mq, const struct mrs_request *q)
{
	struct metaroce_qp *qp = mq->sqp->qp;
	u8 op = q->op == MRC_OP_CMP_SWP ? METAROCE_OP_ATOMIC_CMP_SWP :
					  METAROCE_OP_ATOMIC_FETCH_ADD;
	struct metaroce_mr *mr = NULL;
	u8 syndrome = 0;
	u64 orig = 0;

	if (q->va % MRC_ATOMIC_VALUE_LEN)
		syndrome = MRC_NAK_INVALID_REQ;
	else if (soft_qp_allows(qp, IB_ACCESS_REMOTE_ATOMIC))
		mr = metaroce_rkey_get(qp, q->rkey, q->va,
				       MRC_ATOMIC_VALUE_LEN,
				       IB_ACCESS_REMOTE_ATOMIC);
	if (!syndrome && (!mr || metaroce_mr_atomic(mr, q->rkey, q->va, op,
						    q->swap_add, q->compare,
						    &orig)))
		syndrome = MRC_NAK_REMOTE_ACCESS;
	if (mr)
		metaroce_mr_put(mr);
	if (syndrome) {
		if (syndrome == MRC_NAK_REMOTE_ACCESS)
			metaroce_count(qp->mdev, REMOTE_ACCESS_ERR);
		mrs_queue_nak(mq, syndrome, 0, q->ssn, true);
		return;
	}
	new_response(mq, MRC_OP_ATOMIC_RESP, q->ssn,
		     MRC_ATOMIC_VALUE_LEN)->value = orig;
}

static struct mrs_request *find_request(struct mrs_qp *mq, u32 ssn)
{
	u32 i;

	for (i = 0; i < MRC_MAX_REQUESTS; i++)
		if (mq->requests[i].used && mq->requests[i].ssn == ssn)
			return &mq->requests[i];
	return NULL;
}

/*
 * Runs the requests whose turn has come: every segment before them is in,
 * so a READ sees every WRITE before it, and each runs once. One slot of
 * the responses is kept for a NAK.
 */
void mrs_run_requests(struct mrs_qp *mq)
{
	struct mrs_request *q;
	u32 ssn;

	while (!mq->failing &&
	       mq->resp_tail - mq->resp_head < MRS_MAX_RESPONSES - 1 &&
	       mrc_stream_rx_next_request(&mq->srx, &ssn)) {
		q = find_request(mq, ssn);
		if (WARN_ON_ONCE(!q))
			continue;
		if (q->op == MRC_OP_READ_REQ)
			run_read(mq, q);
		else
			run_atomic(mq, q);
		q->used = false;
	}
}

static void describe(struct mrs_qp *mq, u32 index, u32 ssn,
		     struct mrc_seg_out *out)
{
	const struct mrs_response *r = mrs_response_at(mq, index);
	u32 mtu = mq->req.mtu;

	memset(out, 0, sizeof(*out));
	out->wr = index;
	out->op = r->op;
	out->ssn = ssn;
	out->msn = r->req_ssn;
	out->msg_len = r->len;
	if (r->op == MRC_OP_READ_RESP) {
		out->offset = (ssn - r->first_ssn) * mtu;
		out->payload_len = min(mtu, r->len - out->offset);
	} else if (r->op == MRC_OP_ATOMIC_RESP) {
		out->payload_len = MRC_ATOMIC_VALUE_LEN;
	}
}

/* Whether response @r has segments left to open. */
static bool to_open(const struct mrs_response *r)
{
	return r->opened < r->nsegs && !r->revoked;
}

/* Whether a response has segments to open. */
bool mrs_response_waiting(struct mrs_qp *mq)
{
	for (; mq->resp_send != mq->resp_tail; mq->resp_send++)
		if (to_open(mrs_response_at(mq, mq->resp_send)))
			return true;
	return false;
}

/* The next new response segment, opened on our stream; false if none. */
bool mrs_next_response(struct mrs_qp *mq, struct mrc_seg_out *out)
{
	struct mrs_response *r;
	u32 ssn, b;

	/* resp_of_ssn holds a response's index in a byte */
	BUILD_BUG_ON(MRS_MAX_RESPONSES > 256);
	for (; mq->resp_send != mq->resp_tail; mq->resp_send++) {
		r = mrs_response_at(mq, mq->resp_send);
		if (!to_open(r))
			continue;
		if (!mrc_stream_tx_can_open(&mq->stx))
			return false;
		ssn = mrc_stream_tx_open(&mq->stx);
		if (!r->opened)
			r->first_ssn = ssn;
		r->opened++;
		b = ssn % MRC_STREAM_MAP_BITS;
		mq->is_resp[b / 64] |= BIT_ULL(b % 64);
		mq->resp_of_ssn[b] = mq->resp_send % MRS_MAX_RESPONSES;
		describe(mq, mq->resp_send, ssn, out);
		return true;
	}
	return false;
}

/* What response segment @ssn (the stream's to resend) carries. */
bool mrs_resend_response(struct mrs_qp *mq, u32 ssn, struct mrc_seg_out *out)
{
	struct mrs_response *r = mrs_response_of(mq, ssn);

	if (!r || r->revoked || ssn - r->first_ssn >= r->opened)
		return false;
	describe(mq, r - mq->resps, ssn, out);
	return true;
}

/* Segment @ssn of a response was delivered; a whole one lets its MR go. */
void mrs_response_delivered(struct mrs_qp *mq, u32 ssn)
{
	struct mrs_response *r = mrs_response_of(mq, ssn);

	if (!r || r->delivered >= r->nsegs)
		return;
	if (++r->delivered == r->nsegs && r->mr) {
		metaroce_mr_put(r->mr);
		r->mr = NULL;
	}
	while (mq->resp_head != mq->resp_send &&
	       mrs_response_at(mq, mq->resp_head)->delivered ==
	       mrs_response_at(mq, mq->resp_head)->nsegs)
		mq->resp_head++;
}

/* Drops every request and response (reset, error, destroy). */
void mrs_responses_reset(struct mrs_qp *mq)
{
	u32 i;

	for (i = mq->resp_head; i != mq->resp_tail; i++) {
		struct mrs_response *r = mrs_response_at(mq, i);

		if (r->mr)
			metaroce_mr_put(r->mr);
		r->mr = NULL;
	}
	mq->resp_head = 0;
	mq->resp_send = 0;
	mq->resp_tail = 0;
	memset(mq->requests, 0, MRC_MAX_REQUESTS * sizeof(*mq->requests));
	memset(mq->is_resp, 0, sizeof(mq->is_resp));
	mq->nak_due = false;
	mq->failing = false;
}
