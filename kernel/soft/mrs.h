/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The soft-NIC on protocol v2 (docs/protocol-v2.md): per RC QP, the
 * transport core's state (kernel/core), and the glue around it: skbs, the
 * lock, the timer, work requests and memory. Chosen per device by the
 * module's protocol parameter while v1 is the default (issue 15).
 */
#ifndef MRS_H
#define MRS_H

#include <linux/hrtimer.h>
#include <net/dst_cache.h>

#include "../core/mrc_req.h"
#include "../core/mrc_stream_rx.h"
#include "../metaroce_soft.h"

/* What the core knows a transmission by: its segment and its path. */
static inline u64 mrs_cookie(u32 ssn, u32 path)
{
	return (u64)path << 32 | ssn;
}

/* A path's cached route, and the route number it was looked up for. */
struct mrs_dst {
	struct dst_cache cache;
	u8 route;
};

/*
 * Per QP. Everything is under the responder lock of the soft QP
 * (sqp->resp.lock), which the RQ's flush and SRQ taking also rely on.
 */
struct seq_file;

/* Responses being sent or not yet delivered, at most: a ring. */
#define MRS_MAX_RESPONSES	256

/* A request of the peer's, taken, waiting for its turn to run. */
struct mrs_request {
	bool used;
	u8 op;			/* MRC_OP_READ_REQ, _CMP_SWP, _FETCH_ADD */
	u32 ssn;
	u32 len;		/* READ: bytes asked for */
	u64 va;
	u32 rkey;
	u64 swap_add, compare;
};

/* What our stream sends in answer: READ data, an atomic's value, a NAK. */
struct mrs_response {
	u8 op;			/* MRC_OP_READ_RESP, _ATOMIC_RESP, _NAK */
	bool fail_after;	/* an error NAK: the QP fails once it is sent */
	bool revoked;		/* READ: its MR went; nothing more is sent */
	u32 req_ssn;		/* the request (or segment) answered: the MSN */
	u32 first_ssn;
	u32 nsegs, opened, delivered;
	u32 len;
	struct metaroce_mr *mr;	/* READ: referenced until delivered */
	u32 rkey;
	u64 va;
	u64 value;		/* ATOMIC_RESP: the word before */
	struct mrc_nak nak;
};

struct mrs_qp {
	struct metaroce_soft_qp *sqp;
	u32 num_paths;
	struct mrc_conn_tx conn;
	struct mrc_path_tx *ptx;	/* num_paths of them */
	struct mrs_dst *dst;
	/* The peer's paths, as many as it may use, whatever our own number. */
	struct mrc_path_rx *prx;	/* MRC_MAX_PATHS */
	unsigned long ack_due;		/* peer paths with a delayed ACK */
	/* Our stream: our requests' segments; the peer's, as it arrives. */
	struct mrc_stream_tx stx;
	struct mrc_stream_rx srx;
	struct mrc_req req;
	struct mrc_wr *wrs;		/* one per SQ slot */
	/* The responder: requests waiting, responses out [head, tail). */
	struct mrs_request *requests;	/* MRC_MAX_REQUESTS */
	struct mrs_response *resps;	/* MRS_MAX_RESPONSES */
	u32 resp_head, resp_send, resp_tail;
	/* Which of our segments are responses, and whose: by SSN. */
	u64 is_resp[MRC_STREAM_MAP_BITS / 64];
	u8 resp_of_ssn[MRC_STREAM_MAP_BITS];
	/* A refusal (error NAK) waits for everything before it to arrive. */
	bool nak_due;
	bool failing;			/* an error NAK is queued: take no more */
	u8 nak_syndrome;
	u32 nak_ssn;
	/* The peer said RNR: nothing is sent again until then. */
	u64 rnr_until_us;
	u32 rnr_ssn;			/* refused from: mrs_rx.c's predicate */
	u32 rnr_retries;		/* for the oldest work request */
	u64 progress_us;		/* last delivery, or first send after */
	bool blocked;			/* data waits for a path's room */
	bool stalled;			/* the last run stopped with work left */
	bool refused;			/* a refusal failed the QP: NAK due */
	/*
	 * The sending half was reset for RTR or RTS: the state is published
	 * before the reset runs, and nothing may go out in between.
	 */
	bool tx_ready;
	/*
	 * Our stream began in RTR, to answer READs and atomics before any
	 * sq_psn was given: at the peer's first SSN, and its segments say so
	 * (MRC_F_EARLY, protocol-v2.md section 9.1).
	 */
	bool early;
	struct hrtimer timer;		/* PTOs, delayed ACKs, failed paths */
};

static inline struct mrs_response *mrs_response_at(struct mrs_qp *mq, u32 i)
{
	return &mq->resps[i % MRS_MAX_RESPONSES];
}

static inline u64 mrs_now_us(void)
{
	return div_u64(ktime_get_ns(), NSEC_PER_USEC);
}

/* mrs_qp.c */
int mrs_qp_create(struct metaroce_soft_qp *sqp, gfp_t gfp);
void mrs_cap_window(struct mrs_qp *mq);
void mrs_qp_destroy(struct metaroce_soft_qp *sqp);
void mrs_qp_quiesce(struct metaroce_soft_qp *sqp);
void mrs_qp_reset(struct metaroce_soft_qp *sqp);
void mrs_arm_timer(struct mrs_qp *mq);
bool mrs_sq_drained(struct metaroce_soft_qp *sqp);
void mrs_enter_sqd(struct metaroce_soft_qp *sqp);
bool mrs_quiet(struct metaroce_soft_qp *sqp);
void mrs_complete(struct metaroce_soft_qp *sqp);
void mrs_flush(struct metaroce_soft_qp *sqp);
extern const struct mrc_path_ops mrs_path_ops;

/* mrs_resp.c: the responder's requests and what answers them */
bool mrs_take_request(struct mrs_qp *mq, const struct mrc_pkt *pkt);
void mrs_run_requests(struct mrs_qp *mq);
bool mrs_queue_nak(struct mrs_qp *mq, u8 syndrome, u8 arg, u32 ssn,
		   bool fail_after);
void mrs_refuse(struct mrs_qp *mq, u8 syndrome, u32 ssn);
void mrs_check_refusal(struct mrs_qp *mq);
void mrs_refuse_revoked_read(struct mrs_qp *mq, u32 ssn);
bool mrs_response_waiting(struct mrs_qp *mq);
bool mrs_next_response(struct mrs_qp *mq, struct mrc_seg_out *out);
bool mrs_resend_response(struct mrs_qp *mq, u32 ssn, struct mrc_seg_out *out);
struct mrs_response *mrs_response_of(struct mrs_qp *mq, u32 ssn);
void mrs_response_delivered(struct mrs_qp *mq, u32 ssn);
void mrs_responses_reset(struct mrs_qp *mq);

/* mrs_ud.c: datagrams */
struct sk_buff *mrs_build_datagram(struct metaroce_qp *qp,
				   struct soft_swqe *swqe, u32 qkey);
void mrs_rx_datagram(struct metaroce_qp *qp, struct sk_buff *skb,
		     const struct mrc_pkt *pkt, u32 payload_offset);

/* mrs_tx.c */
enum soft_tx_result mrs_transmit(struct metaroce_soft_qp *sqp, int *budget);
void mrs_send_ack(struct metaroce_soft_qp *sqp, u32 path);

/* mrs_debugfs.c */
void mrs_debugfs_show(struct seq_file *m, struct metaroce_soft_qp *sqp);

/* mrs_rx.c */
void mrs_rx(struct metaroce_dev *mdev, struct sk_buff *skb);

#endif /* MRS_H */
