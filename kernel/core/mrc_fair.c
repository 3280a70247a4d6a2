// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Max-min fair shares of a receiver's inbound capacity. Each active sender
 * gets an equal part, except that one sending less than its part is
 * granted twice what it sends (room to grow) and the rest is split among
 * the others. A sender takes share * capacity * RTT as its window, so an
 * incast settles in the round trip the first ACKs take.
 */
#include "mrc_fair.h"

void mrc_fair_rx_init(struct mrc_fair_rx *f, u32 capacity_mbps)
{
	memset(f, 0, sizeof(*f));
	f->capacity_mbps = capacity_mbps;
}

/* A link that renegotiated: the shares that follow are of the new rate. */
void mrc_fair_rx_set_capacity(struct mrc_fair_rx *f, u32 capacity_mbps)
{
	f->capacity_mbps = capacity_mbps;
}

static bool active(const struct mrc_fair_sender *s, u64 now)
{
	return s->last_us &&
	       (s->last_us >= now || now - s->last_us <= MRC_FAIR_PERIOD_US);
}

void mrc_fair_rx_arrival(struct mrc_fair_rx *f, u32 conn, u32 bytes, u64 now)
{
	struct mrc_fair_sender *s, *free = NULL, *oldest = &f->senders[0];
	u32 i;

	for (i = 0; i < MRC_FAIR_SENDERS; i++) {
		s = &f->senders[i];
		if (s->last_us && s->conn == conn)
			goto found;
		if (!free && !active(s, now))
			free = s;
		if (s->last_us < oldest->last_us)
			oldest = s;
	}
	s = free ? free : oldest;
	memset(s, 0, sizeof(*s));
	s->conn = conn;
	s->period_start_us = now;
found:
	if (now - s->period_start_us >= MRC_FAIR_PERIOD_US) {
		/* a period with nothing in it leaves a rate of 0 */
		s->last_bytes = now - s->period_start_us <
				2 * MRC_FAIR_PERIOD_US ? s->bytes : 0;
		s->bytes = 0;
		s->period_start_us = now;
	}
	s->bytes += bytes;
	s->last_us = now ? now : 1;
}

/* A sender's demand as a share of the capacity, from its last period. */
static u64 demand(const struct mrc_fair_rx *f, const struct mrc_fair_sender *s)
{
	if (!f->capacity_mbps)
		return MRC_FAIR_FULL;
	/* bytes * 8 / period_us is Mbit/s; scaled before dividing */
	return s->last_bytes * 8 * MRC_FAIR_FULL /
	       ((u64)MRC_FAIR_PERIOD_US * f->capacity_mbps);
}

/*
 * The share granted to @conn, of MRC_FAIR_FULL. Water-filling: senders
 * whose doubled demand is under the equal part are given it, and leave the
 * rest to the others; repeated until no such sender is left.
 */
u16 mrc_fair_rx_share(const struct mrc_fair_rx *f, u32 conn, u64 now)
{
	bool capped[MRC_FAIR_SENDERS] = { false };
	u64 left = MRC_FAIR_FULL, part, want = MRC_FAIR_FULL;
	u32 i, n = 0, round;
	int me = -1;

	for (i = 0; i < MRC_FAIR_SENDERS; i++) {
		if (!active(&f->senders[i], now))
			continue;
		if (f->senders[i].conn == conn)
			me = i;
		n++;
	}
	if (me < 0)
		n++;	/* a sender not yet seen is about to be one */
	for (round = 0; round < MRC_FAIR_SENDERS && n; round++) {
		bool changed = false;

		part = left / n;
		for (i = 0; i < MRC_FAIR_SENDERS; i++) {
			const struct mrc_fair_sender *s = &f->senders[i];
			u64 d;

			if (capped[i] || !active(s, now) || !s->last_bytes)
				continue;
			d = 2 * demand(f, s);
			if (d >= part)
				continue;
			capped[i] = true;
			left -= d;
			n--;
			changed = true;
			if ((int)i == me)
				want = d;
		}
		if (!changed)
			break;
	}
	if (me >= 0 && capped[me])
		return want ? want : 1;
	return n ? left / n : MRC_FAIR_FULL;
}

/* Packets in flight that carry @share of @capacity_mbps over @rtt_us. */
u32 mrc_fair_window(u16 share, u32 capacity_mbps, u32 rtt_us, u32 mtu)
{
	/* Mbit/s * us = bits; / 8 = bytes */
	u64 bytes = (u64)capacity_mbps * rtt_us / 8 * share / MRC_FAIR_FULL;
	u64 packets = mtu ? bytes / mtu : 0;

	if (packets < MRC_FAIR_MIN_WINDOW)
		return MRC_FAIR_MIN_WINDOW;
	return packets > 0xffffffffULL ? 0xffffffffU : (u32)packets;
}
