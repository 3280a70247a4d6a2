/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The receiver's fair share (protocol-v2.md section 10): the part of its
 * inbound capacity it grants each sender, in every ACK, and the window a
 * sender makes of it.
 */
#ifndef MRC_FAIR_H
#define MRC_FAIR_H

#include "mrc_types.h"

#define MRC_FAIR_SENDERS	64	/* senders tracked; more share the rest */
#define MRC_FAIR_PERIOD_US	1000	/* a sender is active this long */
#define MRC_FAIR_FULL		65535	/* a share of all the capacity */
#define MRC_FAIR_MIN_WINDOW	4	/* packets: enough to show a gap */

struct mrc_fair_sender {
	u32 conn;		/* the sender's connection at this receiver */
	u64 last_us;		/* its newest arrival */
	u64 period_start_us;
	u64 bytes, last_bytes;	/* this period's and the previous one's */
};

struct mrc_fair_rx {
	u32 capacity_mbps;	/* the inbound link's rate; 0: unknown */
	struct mrc_fair_sender senders[MRC_FAIR_SENDERS];
};

void mrc_fair_rx_init(struct mrc_fair_rx *f, u32 capacity_mbps);
void mrc_fair_rx_set_capacity(struct mrc_fair_rx *f, u32 capacity_mbps);
void mrc_fair_rx_arrival(struct mrc_fair_rx *f, u32 conn, u32 bytes, u64 now);
u16 mrc_fair_rx_share(const struct mrc_fair_rx *f, u32 conn, u64 now);
u32 mrc_fair_window(u16 share, u32 capacity_mbps, u32 rtt_us, u32 mtu);

#endif /* MRC_FAIR_H */
