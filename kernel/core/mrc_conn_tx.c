// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Spraying over a connection's paths. A packet goes on the path it is
 * meant for when that path has room (a resend: the path that lost it),
 * otherwise on the next path round robin that has room. A path whose
 * window an ECN mark trimmed has room less often, so the next packets go
 * to clear paths; a failed path has none until its probe.
 */
#include "mrc_conn.h"

void mrc_conn_tx_init(struct mrc_conn_tx *conn, struct mrc_path_tx *paths,
		      u32 num_paths, u32 mtu, u32 seed)
{
	conn->paths = paths;
	conn->num_paths = num_paths;
	conn->next = 0;
	conn->limit = 0;
	conn->mtu = mtu;
	conn->rng = seed ? seed : 0x6d72;
}

u32 mrc_conn_tx_in_flight(const struct mrc_conn_tx *conn)
{
	u32 i, n = 0;

	for (i = 0; i < conn->num_paths; i++)
		n += conn->paths[i].in_flight;
	return n;
}

/*
 * An ACK for the connection's path @path (from the wire: checked here).
 * A path that then asks for a new route gets one, unless it asked for its
 * marks and no other path is clearly less marked: then the congestion is
 * not the route's (the receiver's link, say) and moving would not help.
 */
enum mrc_ack_verdict mrc_conn_tx_ack(struct mrc_conn_tx *conn, u32 path,
				     const struct mrc_path_ack *ack, u64 now,
				     const struct mrc_path_ops *ops, void *ctx)
{
	struct mrc_path_tx *tx;
	enum mrc_ack_verdict v;
	u32 j;

	if (path >= conn->num_paths)
		return MRC_ACK_INVALID;
	tx = &conn->paths[path];
	v = mrc_path_tx_ack(tx, ack, now, ops, ctx);
	if (tx->repath_wanted == MRC_REPATH_MARKS) {
		tx->repath_wanted = MRC_REPATH_NONE;
		for (j = 0; j < conn->num_paths; j++)
			if (j != path && 2 * conn->paths[j].alpha < tx->alpha)
				break;
		if (j == conn->num_paths)
			return v;
	} else if (tx->repath_wanted != MRC_REPATH_LOSS) {
		return v;
	}
	mrc_path_tx_new_route(tx, mrc_conn_tx_new_entropy(conn, path));
	mrc_path_report(ops, ctx, MRC_PATH_EV_NEW_ROUTE);
	return v;
}

/*
 * The receiver's grant, from an ACK: @share of its @capacity_mbps. Packets
 * go round robin over the paths, so those in flight at a rate are the rate
 * times the paths' mean RTT (their minimum, without queues). A receiver
 * that names no capacity lifts the cap.
 */
void mrc_conn_tx_grant(struct mrc_conn_tx *conn, u16 share, u32 capacity_mbps)
{
	u64 sum = 0;
	u32 i, n = 0;

	if (!capacity_mbps) {
		conn->limit = 0;
		return;
	}
	for (i = 0; i < conn->num_paths; i++) {
		if (conn->paths[i].has_rtt) {
			sum += conn->paths[i].min_rtt_us;
			n++;
		}
	}
	if (n)
		conn->limit = mrc_fair_window(share, capacity_mbps,
					      (u32)(sum / n), conn->mtu);
}

/* The path the next packet goes on, or MRC_NO_PATH: none has room. */
int mrc_conn_tx_pick(struct mrc_conn_tx *conn, int preferred, u64 now)
{
	u32 i;

	if (conn->limit && mrc_conn_tx_in_flight(conn) >= conn->limit)
		return MRC_NO_PATH;
	if (preferred >= 0 && (u32)preferred < conn->num_paths &&
	    mrc_path_tx_can_send(&conn->paths[preferred], now))
		return preferred;
	for (i = 0; i < conn->num_paths; i++) {
		u32 p = (conn->next + i) % conn->num_paths;

		if (mrc_path_tx_can_send(&conn->paths[p], now)) {
			conn->next = (p + 1) % conn->num_paths;
			return p;
		}
	}
	return MRC_NO_PATH;
}

/*
 * Whether the packet just sent on @path should carry ACK_REQ: it left the
 * path or the connection no room, so nothing more goes until an ACK comes,
 * and the path has fewer than MRC_ACK_EVERY packets out, so the receiver
 * would wait for its delayed-ACK timer. That wait would idle the window
 * and inflate the RTT a grant's window is made of.
 */
bool mrc_conn_tx_ack_wanted(const struct mrc_conn_tx *conn, u32 path, u64 now)
{
	const struct mrc_path_tx *tx = &conn->paths[path];

	if (tx->in_flight >= MRC_ACK_EVERY)
		return false;
	if (conn->limit && mrc_conn_tx_in_flight(conn) >= conn->limit)
		return true;
	return !mrc_path_tx_can_send(tx, now);
}

/* A 14-bit entropy value for a new route, other than the path's own. */
u16 mrc_conn_tx_new_entropy(struct mrc_conn_tx *conn, u32 path)
{
	u16 old = conn->paths[path].entropy, e;

	do {
		conn->rng ^= conn->rng << 13;
		conn->rng ^= conn->rng >> 17;
		conn->rng ^= conn->rng << 5;
		e = conn->rng & 0x3fff;
	} while (e == old);
	return e;
}

/* The earliest of @when over the paths; ~0 if none has one. */
static u64 earliest(const struct mrc_conn_tx *conn,
		    u64 (*when)(const struct mrc_path_tx *tx))
{
	u64 next = ~0ULL, t;
	u32 i;

	for (i = 0; i < conn->num_paths; i++) {
		t = when(&conn->paths[i]);
		if (t < next)
			next = t;
	}
	return next;
}

u64 mrc_conn_tx_deadline(const struct mrc_conn_tx *conn)
{
	return earliest(conn, mrc_path_tx_deadline);
}

/* When a failed path may probe: for a caller whose data waits for room. */
u64 mrc_conn_tx_retry_at(const struct mrc_conn_tx *conn)
{
	/* at the connection's cap only an ACK makes room, not a probe time */
	if (conn->limit && mrc_conn_tx_in_flight(conn) >= conn->limit)
		return ~0ULL;
	return earliest(conn, mrc_path_tx_retry_at);
}

void mrc_conn_tx_timer(struct mrc_conn_tx *conn, u64 now,
		       const struct mrc_path_ops *ops, void *ctx)
{
	u32 i;

	for (i = 0; i < conn->num_paths; i++)
		if (mrc_path_tx_deadline(&conn->paths[i]) <= now)
			mrc_path_tx_timer(&conn->paths[i], now,
					  mrc_conn_tx_new_entropy(conn, i),
					  ops, ctx);
}
