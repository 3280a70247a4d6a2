/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * A connection's sending paths (protocol-v2.md section 10, in part): the
 * ACKs that reach them, which path a packet goes on, the connection's
 * window over all of them, the entropy of a new route.
 */
#ifndef MRC_CONN_H
#define MRC_CONN_H

#include "mrc_path.h"
#include "mrc_fair.h"

#define MRC_MAX_PATHS	64
#define MRC_NO_PATH	(-1)

struct mrc_conn_tx {
	struct mrc_path_tx *paths;	/* @num_paths of them, the caller's */
	u32 num_paths;
	u32 next;		/* where the round robin goes on */
	u32 limit;		/* packets in flight over all paths; 0: none */
	u32 mtu;		/* payload bytes a packet carries */
	u32 rng;		/* xorshift state for new entropy, never 0 */
};

void mrc_conn_tx_init(struct mrc_conn_tx *conn, struct mrc_path_tx *paths,
		      u32 num_paths, u32 mtu, u32 seed);
enum mrc_ack_verdict mrc_conn_tx_ack(struct mrc_conn_tx *conn, u32 path,
				     const struct mrc_path_ack *ack, u64 now,
				     const struct mrc_path_ops *ops, void *ctx);
void mrc_conn_tx_grant(struct mrc_conn_tx *conn, u16 share, u32 capacity_mbps);
int mrc_conn_tx_pick(struct mrc_conn_tx *conn, int preferred, u64 now);
u32 mrc_conn_tx_in_flight(const struct mrc_conn_tx *conn);
bool mrc_conn_tx_ack_wanted(const struct mrc_conn_tx *conn, u32 path, u64 now);
u16 mrc_conn_tx_new_entropy(struct mrc_conn_tx *conn, u32 path);
u64 mrc_conn_tx_deadline(const struct mrc_conn_tx *conn);
u64 mrc_conn_tx_retry_at(const struct mrc_conn_tx *conn);
void mrc_conn_tx_timer(struct mrc_conn_tx *conn, u64 now,
		       const struct mrc_path_ops *ops, void *ctx);

#endif /* MRC_CONN_H */
