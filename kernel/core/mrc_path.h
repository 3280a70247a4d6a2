/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * One path of a connection (protocol-v2.md sections 3 to 5): the sender's
 * record of its transmissions and the receiver's map of what arrived, with
 * the per-path ACK between them. Time is in microseconds, from the caller.
 */
#ifndef MRC_PATH_H
#define MRC_PATH_H

#include "mrc_sack.h"

/* Defaults of protocol-v2.md section 5.4. */
#define MRC_LOSS_GAP		3	/* later arrivals that call a gap lost */
#define MRC_ACK_EVERY		16	/* data packets per ACK */
#define MRC_DELAYED_ACK_US	200	/* the delayed-ACK timer */
#define MRC_GRANULARITY_US	1000	/* floor of the probe timeout's variance */
#define MRC_INITIAL_PTO_US	20000	/* before the first RTT sample */
#define MRC_MAX_PTO_US		2000000
#define MRC_FAIL_PTOS		3	/* probe timeouts in a row fail a path */
#define MRC_MIN_BACKOFF_US	2000	/* a failed path waits, then probes */
#define MRC_MAX_BACKOFF_US	500000
#define MRC_REPATH_WINDOWS	4	/* bad windows in a row move a path */
#define MRC_CWND_ONE		256	/* one packet, in cwnd's fixed point */
#define MRC_MAX_CWND		(255 * MRC_CWND_ONE)	/* the map's span */

/* What an ACK says about one path: section 4.2. */
struct mrc_path_ack {
	u32 cum;
	u64 bits[MRC_SACK_WORDS];
	u32 ack_delay_us;	/* newest arrival to this ACK */
	u32 ce;			/* CE-marked arrivals since the last ACK */
};

struct mrc_path_rx {
	struct mrc_sack sack;
	u32 newest_seq;		/* newest sequence received */
	u64 newest_us;		/* when it arrived */
	u32 unacked;		/* arrivals since the last ACK */
	u32 ce;			/* of them CE-marked */
	u64 ack_due_us;		/* delayed-ACK deadline; 0: none */
	u64 received, duplicates, beyond;
};

enum mrc_rx_ack {
	MRC_RX_ACK_LATER,	/* the delayed-ACK deadline covers it */
	MRC_RX_ACK_NOW,
	MRC_RX_DROP,		/* past the window: drop, count, no ACK */
};

void mrc_path_rx_init(struct mrc_path_rx *rx, u32 first_seq);
enum mrc_rx_ack mrc_path_rx_packet(struct mrc_path_rx *rx, u32 seq, u32 floor,
				   bool ce, bool ack_req, u64 now);
void mrc_path_rx_ack(struct mrc_path_rx *rx, struct mrc_path_ack *ack,
		     u64 now);

enum mrc_sent_state {
	MRC_SENT_NONE,		/* slot unused */
	MRC_SENT_OUT,		/* in flight */
	MRC_SENT_ACKED,
	MRC_SENT_LOST,		/* declared lost; its data was handed back */
};

struct mrc_sent {
	u64 cookie;		/* the caller's name for what it carried */
	u64 sent_us;
	u8 state;
	u8 route;		/* the path's route when it left */
	bool probe;		/* sent while the path was failed */
};

enum mrc_repath {
	MRC_REPATH_NONE,
	MRC_REPATH_LOSS,	/* the route keeps losing */
	MRC_REPATH_MARKS,	/* the route keeps being marked */
};

enum mrc_path_state {
	MRC_PATH_ACTIVE,
	MRC_PATH_FAILED,	/* unused until @retry_us, then one probe */
};

struct mrc_path_tx {
	u32 next_seq;		/* next sequence to send */
	u32 una;		/* oldest unresolved: the floor it sends */
	u32 floor_sent;		/* the floor the newest packet carried */
	u32 first_seq;		/* slots before it were never used */
	u32 in_flight;		/* OUT packets */
	struct mrc_sent sent[MRC_SACK_BITS];	/* by seq % MRC_SACK_BITS */

	u32 newest_acked;	/* newest sequence acknowledged */
	u8 newest_route;	/* the route it went on */
	bool any_acked;
	u8 route;		/* bumped each time the entropy changes */
	u16 entropy;		/* UDP source port bits of this route */

	u32 srtt_us, rttvar_us, min_rtt_us, latest_rtt_us;
	bool has_rtt;
	u32 ptos;		/* probe timeouts in a row */
	u64 pto_from_us;	/* newest send, or ACK of one in flight */

	enum mrc_path_state state;
	u32 backoff_us;
	u64 retry_us;

	u32 cwnd;		/* MRC_CWND_ONE = one packet */
	u32 alpha;		/* CE fraction, in 1/1024 */
	u32 window_end;		/* ends the window alpha is measured over */
	u32 window_acked, window_ce, window_lost;
	bool window_marked;
	u32 bad_windows;	/* in a row: a quarter lost or 3/4 marked */
	bool lossy_windows;	/* of them, one or more were lossy */
	u8 repath_wanted;	/* enum mrc_repath: mrc_conn_tx acts on it */

	u64 sent_packets, acked, lost, spurious, marked, failures, repaths;
	u64 refused;		/* handed back by mrc_path_tx_refused() */
};

/* What happened to a path as a whole, for counters (mrc_path_ops.event). */
enum mrc_path_event {
	MRC_PATH_EV_FAILED,	/* its probe timeouts declared it failed */
	MRC_PATH_EV_RECOVERED,	/* a failed path's probe was acknowledged */
	MRC_PATH_EV_NEW_ROUTE,	/* it moved to another route (entropy) */
};

/*
 * Where a path's acknowledgements and losses go: the stream layer; and
 * its events, for whoever counts them (@event may be NULL).
 */
struct mrc_path_ops {
	void (*acked)(void *ctx, u64 cookie);
	void (*lost)(void *ctx, u64 cookie);
	void (*event)(void *ctx, enum mrc_path_event ev);
};

static inline void mrc_path_report(const struct mrc_path_ops *ops, void *ctx,
				   enum mrc_path_event ev)
{
	if (ops->event)
		ops->event(ctx, ev);
}

enum mrc_ack_verdict {
	MRC_ACK_OK,
	MRC_ACK_INVALID,	/* names a sequence not sent: drop and count */
};

void mrc_path_tx_init(struct mrc_path_tx *tx, u32 first_seq, u16 entropy,
		      u32 cwnd);
bool mrc_path_tx_can_send(const struct mrc_path_tx *tx, u64 now);
u32 mrc_path_tx_sent(struct mrc_path_tx *tx, u64 cookie, u64 now);
enum mrc_ack_verdict mrc_path_tx_ack(struct mrc_path_tx *tx,
				     const struct mrc_path_ack *ack, u64 now,
				     const struct mrc_path_ops *ops, void *ctx);
u64 mrc_path_tx_deadline(const struct mrc_path_tx *tx);
u64 mrc_path_tx_retry_at(const struct mrc_path_tx *tx);
void mrc_path_tx_timer(struct mrc_path_tx *tx, u64 now, u16 new_entropy,
		       const struct mrc_path_ops *ops, void *ctx);
u32 mrc_path_tx_pto(const struct mrc_path_tx *tx);
void mrc_path_tx_new_route(struct mrc_path_tx *tx, u16 entropy);
void mrc_path_tx_refused(struct mrc_path_tx *tx,
			 bool (*refused)(void *ctx, u64 cookie),
			 const struct mrc_path_ops *ops, void *ctx);

#endif /* MRC_PATH_H */
