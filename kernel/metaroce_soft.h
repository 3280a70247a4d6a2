/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The soft-NIC engine's private per-QP state: requester (send side),
 * responder (receive side), paths and congestion control.
 * docs/protocol.md is the specification this implements.
 */
#ifndef METAROCE_SOFT_H
#define METAROCE_SOFT_H

#include <linux/hrtimer.h>
#include <linux/workqueue.h>
#include <linux/udp.h>
#include <net/dst_cache.h>

#include "metaroce.h"

/* PSNs a sender may have outstanding: what one SACK bitmap names. */
#define SOFT_WINDOW		METAROCE_SACK_BITS
/* The responder's received-PSN ring: window plus room to slide. */
#define SOFT_RX_RING		(2 * SOFT_WINDOW)
#define SOFT_MAX_PATHS		64
#define SOFT_DEFAULT_PATHS	8
/* A READ is asked for in parts of at most this many response packets. */
#define SOFT_READ_PART		64
/* READ_REQ parts a responder holds at once. */
#define SOFT_MAX_READS		METAROCE_MAX_RD_ATOMIC
/* READs a responder remembers, to answer only true duplicates of them. */
#define SOFT_READ_HISTORY	METAROCE_MAX_RD_ATOMIC
/* Atomics it remembers having executed (protocol.md section 5). */
#define SOFT_ATOMIC_HISTORY	METAROCE_MAX_RD_ATOMIC
/*
 * ACK, loss detection and RTO counts and times are the protocol's defaults
 * (METAROCE_* in metaroce_wire.h), shared with the C++ model.
 *
 * Start at the full window, as RoCE NICs start at line rate; ECN marks
 * bring it down.
 */
#define SOFT_INITIAL_CWND	SOFT_WINDOW
/* Packets a transmit run sends before yielding the CPU. */
#define SOFT_TX_BUDGET		64
/* Consecutive packets of a message sent as one GSO batch, at most. */
#define SOFT_TX_BATCH		16
/* Payloads up to this size are copied into the packet, not attached. */
#define SOFT_TX_COPYBREAK	256

struct metaroce_mr;
struct mrs_qp;

/* The requester's checked private copy of a send WQE. */
struct soft_swqe {
	struct metaroce_send_wqe wqe;
	union {
		struct metaroce_sge sge[METAROCE_MAX_SGE];
		u8 inline_data[METAROCE_MAX_INLINE];
	};
	struct metaroce_mr *mr[METAROCE_MAX_SGE];	/* referenced */
	struct metaroce_av av;		/* UD: the destination */
	u32 length;			/* message bytes */
	u32 first_psn;
	u32 npkts;			/* PSNs it takes */
	u32 msn;
	u32 next_pkt;			/* packets (READ: asked for) so far */
	u32 delivered;			/* packets acknowledged (READ: in) */
	u8 wire_op;			/* METAROCE_OP_*; 0 if local */
	u8 status;			/* IB_WC_*, once failed */
	bool local;			/* REG_MR, LOCAL_INV: no packets */
	bool done;			/* nothing left to send or wait for */
};

enum soft_pkt_state {
	PKT_FREE,
	PKT_INFLIGHT,			/* sent, no news yet */
	PKT_LOST,			/* declared lost, to be resent */
	PKT_DELIVERED,			/* acknowledged (READ: response in) */
};

/* The requester's scoreboard entry of one outstanding PSN. */
struct soft_pkt {
	u32 tx_seq;			/* order of its latest transmission */
	u32 resp_seq;			/* READ: order of its response */
	u32 sent_us;			/* its latest transmission */
	u32 first_us;			/* its first transmission */
	u16 swqe;			/* SQ index & mask of its WQE */
	u8 state;			/* enum soft_pkt_state */
	u8 path;
	u8 retx;
	bool part_end;			/* last PSN of a READ_REQ part */
	bool request_acked;		/* READ: the responder has the request */
	bool request_acked_once;	/* READ: since its first transmission */
};

enum soft_path_state {
	PATH_ACTIVE,
	PATH_SUSPECT,			/* lost recently: one probe per RTT */
	PATH_FAILED,			/* lost in a row: unused until retry_at */
};

struct soft_path {
	u16 entropy;			/* UDP source port low 14 bits */
	u8 state;
	u8 consecutive_losses;
	u32 inflight;
	u32 srtt_us;
	u32 retry_at_us;		/* FAILED/SUSPECT: next probe */
	u32 used_us;			/* last picked for a packet */
	u32 backoff_us;
	u64 sent;
	u64 lost;
	u64 ce;
	struct dst_cache dst;
};

struct soft_cc {
	u32 cwnd;			/* packets << 8 */
	u32 alpha;			/* CE fraction, 1/1024 units */
	u32 window_end_psn;		/* end of the current DCTCP window */
	u32 window_acked;
	u32 window_marked;
	u16 fair_share;			/* receiver's hint, 0: none */
};

/* A re-read sent: the PSNs it asked for. */
struct soft_reread {
	u32 psn;
	u32 npkts;
};

struct soft_req {
	spinlock_t lock;		/* everything below; softirq and worker */
	struct soft_swqe *swqes;	/* one per SQ slot */
	/* SQ indices: sq.own_index (oldest not completed) <= send <= fetch */
	u32 send_index;			/* oldest WQE with packets to send */
	u32 fetch_index;		/* next WQE to take from the ring */
	u32 psn_next;			/* next new PSN */
	u32 psn_una;			/* oldest PSN not delivered */
	u32 msn_next;			/* receive-consuming messages so far */
	u32 ts_offset;			/* secret: added to our timestamps */
	struct soft_pkt pkts[SOFT_WINDOW];
	/*
	 * Transmissions so far: a READ_REQ part is one, however many responses
	 * it asks for. READ responses asked for so far, in the order the
	 * responder sends them.
	 */
	u32 tx_seq;
	u32 resp_seq;
	/*
	 * Loss evidence: the latest tx_seq an ACK acknowledged (data, READ
	 * requests), and the latest resp_seq of a READ response that arrived.
	 */
	u32 acked_tx_seq;
	u32 response_seq;
	u32 response_seen_us;		/* when response_seq last moved */
	/*
	 * Transmissions after a packet that may arrive before it: grows with
	 * the reordering seen, decays back to METAROCE_REORDER_ALLOWANCE.
	 */
	u32 reorder;
	u32 reorder_decay_psn;		/* next decay when psn_una passes it */
	u32 nr_lost;			/* PKT_LOST entries */
	u32 inflight;			/* PKT_INFLIGHT entries */
	u32 reads;			/* READ_REQ parts outstanding */
	/* The latest re-reads sent, which a late fatal NAK may name. */
	struct soft_reread rereads[METAROCE_REREAD_HISTORY];
	u32 nr_rereads;			/* sent so far; the oldest is overwritten */
	u32 srtt_us;
	u32 rttvar_us;
	u32 rto_us;			/* with the backoff applied */
	u32 delivered_us;		/* last delivery (or first send) */
	u64 progress_ns;		/* start of the current retry period */
	u8 retries;			/* retry periods without progress */
	bool resent_in_period;		/* something was resent this period */
	u8 probes;			/* tail probes since the last delivery */
	u32 probe_us;			/* when the last of them went */
	u8 rnr_retries;			/* RNR NAKs for the current message */
	bool sq_drained_sent;		/* SQD: the drained event went out */
	bool rnr_wait;			/* resend nothing until rnr_until_us */
	bool timer_lazy;		/* the timer sleeps until the probe */
	u32 rnr_until_us;
	struct hrtimer timer;		/* loss detection tick, RNR wait */
	struct soft_cc cc;
	unsigned int num_paths;
	unsigned int next_path;		/* round robin */
	struct soft_path paths[SOFT_MAX_PATHS];
};

/* The responder's copy of a receive WQE and its message. */
struct soft_rwqe {
	struct metaroce_recv_wqe wqe;
	struct metaroce_sge sge[METAROCE_MAX_SGE];
	struct metaroce_mr *mr[METAROCE_MAX_SGE];
	u32 capacity;			/* bytes the SGEs hold */
	bool taken;			/* copied from the ring */
	bool seen;			/* a packet of its message arrived */
	bool with_imm;
	bool with_inv;			/* SEND with invalidate of inv_rkey */
	bool solicited;
	bool write_imm;			/* consumed by a WRITE with immediate */
	u8 status;			/* IB_WC_SUCCESS or the error */
	u32 last_psn;
	u32 msg_len;
	__be32 imm;
	u32 inv_rkey;
};

/*
 * A READ_REQ part the responder answers, or an atomic: a part of one
 * 8-byte response, executed when its turn comes (or, answering a repeat,
 * already executed: then it holds no MR, only the recorded value).
 */
struct soft_read {
	struct metaroce_mr *mr;		/* referenced; NULL for a repeat */
	u32 rkey;			/* that found it */
	u64 va;				/* of the first byte of the part */
	u32 psn;			/* of its first response packet */
	u32 len;
	u32 offset;			/* within the READ */
	u32 msn;
	u32 sent;			/* bytes sent */
	bool retx;			/* a re-read: responses carry RETX */
	bool done;			/* all sent; leaves at the head */
	u8 atomic;			/* METAROCE_OP_ATOMIC_*; 0: a READ */
	bool executed;			/* atomic: orig holds its result */
	u64 swap_add;
	u64 compare;
	u64 orig;			/* the word before the operation */
};

/* An atomic the responder executed: a repeat must match every field. */
struct soft_atomic_rec {
	u64 va;
	u64 swap_add;
	u64 compare;
	u64 orig;			/* the value it returned */
	u32 psn;
	u32 rkey;
	u32 msn;
	u8 opcode;			/* 0: unused */
};

/*
 * A run of response PSNs of one READ the responder accepted (protocol.md
 * section 5): the READ is named by its rkey, MSN, the address of its byte 0
 * and the PSN of its response packet 0; the run is [first, first + npkts).
 */
struct soft_read_seen {
	u64 base;			/* va - offset */
	u32 rkey;
	u32 msn;
	u32 psn0;			/* psn - offset / mtu */
	u32 first;
	u32 npkts;			/* 0: unused */
};

struct soft_resp {
	spinlock_t lock;		/* everything below; softirq and worker */
	u32 cum;			/* first PSN not received */
	DECLARE_BITMAP(rcvd, SOFT_RX_RING);	/* by psn % SOFT_RX_RING */
	u32 msn_done;			/* receive-consuming messages done */
	bool last_wqe_reported;		/* on an SRQ, after the flush */
	struct soft_rwqe *rwqes;	/* one per RQ slot */
	/* READ parts, in PSN order: [read_head, read_tail) */
	struct soft_read reads[SOFT_MAX_READS];
	u32 read_head;
	u32 read_tail;
	/* READs accepted lately: only these are answered again. */
	struct soft_read_seen seen_reads[SOFT_READ_HISTORY];
	/* Atomics executed, a ring with the oldest replaced (RC only). */
	struct soft_atomic_rec *atomics;
	u32 atomic_next;
	/*
	 * A request refused (bad key, length, ...): the NAK goes out, and the
	 * QP fails, once everything before it has arrived.
	 */
	bool refused;
	u8 refuse_syndrome;
	u32 refuse_psn;
	/* ACK state */
	u32 unacked;			/* data packets since the last ACK */
	u32 ce_count;
	u16 echo_path;
	u32 echo_ts;
	bool ack_due;
	u32 active_epoch;		/* fair share bookkeeping */
	struct hrtimer ack_timer;
};

struct metaroce_soft_qp {
	struct metaroce_qp *qp;
	struct work_struct tx_work;
	/*
	 * The worker always runs on this CPU: transmissions from several CPUs
	 * would reorder packets of the QP in per-CPU queues on their way out.
	 * (A doorbell transmits on its own CPU only with nothing in flight.)
	 */
	int tx_cpu;
	/* One transmit run at a time: the worker's or a doorbell's. */
	struct mutex tx_mutex;
	bool dying;			/* destroy under way: no rescheduling */
	struct soft_req req;
	struct soft_resp resp;
	/* Protocol v2 (soft/mrs.h), on a device that speaks it; else NULL. */
	struct mrs_qp *v2;
};

/* A parsed packet, fields in host order. */
struct soft_pkt_info {
	struct sk_buff *skb;
	u8 opcode;
	u8 flags;
	u8 stream;
	bool ce;			/* arrived CE-marked */
	u32 dqpn;
	u32 sqpn;
	u32 psn;
	u16 path;
	u32 ts;
	u32 payload_offset;		/* in skb, from skb->data */
	u32 payload_len;
	union {
		struct {
			u64 addr;
			u32 key;
			u32 msn;
			u32 msg_len;
			__be32 imm;
		} deth;
		struct {
			u64 va;
			u32 rkey;
			u32 len;
			u32 offset;
			u32 msn;
		} rreq;
		struct {
			u64 va;
			u32 rkey;
			u32 msn;
			u64 swap_add;
			u64 compare;
		} areq;
		struct {
			u32 cum_psn;
			u32 nak_psn;
			u8 syndrome;
			u8 nak_arg;
			u16 ce_count;
			u16 fair_share;
			u16 echo_path;
			u32 ts_echo;
			u32 sack[METAROCE_SACK_WORDS];
		} ack;
	};
	struct metaroce_av src;		/* addresses it came from */
	u8 smac[ETH_ALEN];
};

static inline bool soft_qp_allows(const struct metaroce_qp *qp, int access)
{
	return (qp->attr.qp_access_flags & access) == access;
}

/* IPv4 UDP may omit its checksum; MetaRoCE may not (protocol.md 1). */
static inline bool soft_udp_checksum_present(const struct sk_buff *skb)
{
	return skb->protocol != htons(ETH_P_IP) || udp_hdr(skb)->check;
}

static inline bool soft_op_is_atomic(u8 opcode)
{
	return opcode == METAROCE_OP_ATOMIC_CMP_SWP ||
	       opcode == METAROCE_OP_ATOMIC_FETCH_ADD;
}

/*
 * A request the responder answers with response packets, one per PSN it
 * takes (a READ_REQ part, an atomic): the requester's READ machinery.
 */
static inline bool soft_op_asks_responses(u8 opcode)
{
	return opcode == METAROCE_OP_READ_REQ || soft_op_is_atomic(opcode);
}

/* Packets of @len bytes at @mtu per packet: at least one. Cannot wrap. */
static inline u32 soft_npkts(u32 len, u32 mtu)
{
	return len ? len / mtu + !!(len % mtu) : 1;
}

static inline u32 soft_psn_add(u32 psn, u32 n)
{
	return (psn + n) & METAROCE_PSN_MASK;
}

static inline s32 soft_psn_diff(u32 a, u32 b)
{
	return metaroce_psn_diff(a, b);
}

static inline ktime_t soft_us(u32 us)
{
	return ns_to_ktime((u64)us * NSEC_PER_USEC);
}

static inline u32 soft_now_us(void)
{
	return (u32)div_u64(ktime_get_ns(), NSEC_PER_USEC);
}

/* metaroce_soft.c */
void soft_schedule_tx(struct metaroce_soft_qp *sqp);
void soft_qp_fail(struct metaroce_qp *qp);

/* metaroce_fetch.c: taking WQEs from the rings */
int soft_fetch_send_wqe(struct metaroce_soft_qp *sqp, u32 index);
void soft_local_op(struct metaroce_soft_qp *sqp, struct soft_swqe *swqe);
void soft_release_swqe(struct soft_swqe *swqe);
void soft_flush_send_queue(struct metaroce_soft_qp *sqp);
int soft_take_recv_wqe(struct metaroce_soft_qp *sqp, u32 index);
void soft_release_rwqe(struct soft_rwqe *rwqe);
void soft_srq_fetch(struct metaroce_soft_qp *sqp, u32 need);
int soft_copy_from_sges(struct soft_swqe *swqe, u32 offset, void *buf,
			u32 len);
bool soft_swqe_revoked(const struct soft_swqe *swqe);
int soft_attach_sges(struct soft_swqe *swqe, u32 offset, u32 len,
		     struct sk_buff *skb);
int soft_place_in_sges(struct metaroce_sge *sge, struct metaroce_mr **mr,
		       u32 num_sge, u32 offset, const struct sk_buff *skb,
		       u32 skb_offset, u32 len);
int soft_place_buf_in_sges(struct metaroce_sge *sge, struct metaroce_mr **mr,
			   u32 num_sge, u32 offset, const void *buf, u32 len);

/* metaroce_req.c: requester transmit */
void soft_req_init(struct metaroce_soft_qp *sqp);
void soft_req_reset(struct metaroce_soft_qp *sqp);
/* Why a transmit run stopped. */
enum soft_tx_result {
	TX_MORE,		/* budget used up, more to send */
	TX_BLOCKED,		/* window, RNR wait or read limit: ACKs resume */
	TX_IDLE,		/* all posted is sent: the next post rings */
};

enum soft_tx_result soft_req_transmit(struct metaroce_soft_qp *sqp,
				      int *budget);
void soft_sq_go_idle(struct metaroce_soft_qp *sqp);
void soft_req_flush(struct metaroce_soft_qp *sqp);
bool soft_req_drained(struct metaroce_soft_qp *sqp);
void soft_req_notify_drained(struct metaroce_soft_qp *sqp);

/* metaroce_comp.c: requester receive (ACKs, READ responses), completions */
void soft_comp_rx_ack(struct metaroce_soft_qp *sqp, struct soft_pkt_info *pkt);
void soft_comp_rx_read_resp(struct metaroce_soft_qp *sqp,
			    struct soft_pkt_info *pkt);
void soft_comp_rx_atomic_resp(struct metaroce_soft_qp *sqp,
			      struct soft_pkt_info *pkt);
void soft_comp_complete(struct metaroce_soft_qp *sqp);
void soft_sq_retire(struct metaroce_qp *qp, u64 wr_id, u32 wr_opcode,
		    u8 status, u32 len, bool cqe);
void soft_post_send_cqe(struct metaroce_qp *qp, u64 wr_id, u32 wr_opcode,
			u8 status, u32 len);
enum hrtimer_restart soft_req_timer_fn(struct hrtimer *timer);
void soft_req_arm_timer(struct soft_req *req);
void soft_rtt_sample(struct soft_req *req, u32 rtt_us);

/* metaroce_resp.c: responder */
void soft_resp_init(struct metaroce_soft_qp *sqp);
void soft_resp_reset(struct metaroce_soft_qp *sqp);
void soft_resp_rx(struct metaroce_soft_qp *sqp, struct soft_pkt_info *pkt);
int soft_resp_transmit(struct metaroce_soft_qp *sqp, int budget);
void soft_resp_flush(struct metaroce_soft_qp *sqp);
void soft_retire_recv(struct metaroce_qp *qp, struct soft_rwqe *rwqe,
		      u8 status);
void soft_invalidate_for(struct metaroce_qp *qp, u32 key);
bool soft_invalidation_allowed(struct metaroce_qp *qp, u32 key);

/* metaroce_atomic.c: the responder's atomics, executed exactly once */
int soft_atomic_alloc(struct soft_resp *resp, gfp_t gfp);
void soft_atomic_free(struct soft_resp *resp);
void soft_atomic_reset(struct soft_resp *resp);
u8 soft_atomic_check(struct metaroce_soft_qp *sqp,
		     const struct soft_pkt_info *pkt, struct metaroce_mr **mr);
const struct soft_atomic_rec *
soft_atomic_find(const struct soft_resp *resp, const struct soft_pkt_info *pkt);
bool soft_atomic_pending(const struct soft_resp *resp,
			 const struct soft_pkt_info *pkt);
int soft_atomic_execute(struct soft_resp *resp, struct soft_read *r);

/* metaroce_ud.c: datagrams (UD and GSI QPs) */
enum soft_tx_result soft_ud_transmit(struct metaroce_soft_qp *sqp,
				     int *budget);
void soft_ud_rx(struct metaroce_soft_qp *sqp, struct soft_pkt_info *pkt);

/* metaroce_ack.c */
struct soft_ack_info {
	u8 syndrome;
	u8 nak_arg;
	u32 nak_psn;
};

void soft_ack_send(struct metaroce_soft_qp *sqp, const struct soft_ack_info *nak);
void soft_ack_note_echo(struct soft_resp *resp,
			const struct soft_pkt_info *pkt);
void soft_ack_note_data(struct metaroce_soft_qp *sqp,
			const struct soft_pkt_info *pkt);
enum hrtimer_restart soft_ack_timer_fn(struct hrtimer *timer);

/* metaroce_path.c */
void soft_paths_init(struct soft_req *req, u32 qpn, unsigned int num_paths);
void soft_paths_cleanup(struct soft_req *req);
int soft_path_pick(struct soft_req *req, int avoid);
void soft_path_on_delivered(struct soft_req *req, unsigned int path);
void soft_path_on_lost(struct metaroce_dev *mdev, struct soft_req *req,
		       unsigned int path);
void soft_path_on_rtt(struct soft_req *req, unsigned int path, u32 rtt_us);
u16 soft_path_entropy(u32 qpn, unsigned int path);

/* metaroce_cc.c */
void soft_cc_init(struct soft_cc *cc, u32 psn);
void soft_cc_on_ack(struct soft_cc *cc, u32 delivered, u32 ce_count,
		    u32 cum_psn, u32 psn_next);
void soft_cc_on_rto(struct soft_cc *cc);
u32 soft_cc_window(const struct soft_cc *cc);

/* metaroce_net.c: packets in and out */
struct sk_buff *soft_alloc_skb(struct metaroce_qp *qp, u32 hdr_len,
			       u32 linear_payload);
int soft_xmit(struct metaroce_qp *qp, const struct metaroce_av *av,
	      struct sk_buff *skb, u16 entropy, struct dst_cache *dst,
	      bool ect, u32 gso_size);
void soft_fill_bth(struct metaroce_bth *bth, u8 opcode, u8 flags, u32 dqpn,
		   u32 sqpn, u32 psn, u16 path);

#endif /* METAROCE_SOFT_H */
