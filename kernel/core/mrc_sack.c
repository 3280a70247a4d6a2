// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Receive maps as rings (protocol-v2.md sections 3 and 8). Sequence q's
 * bit is q modulo the ring's size, meaningful for q in [cum, cum + size).
 * On a path each transmission has its own sequence, so one seen twice is a
 * copy the network made, and one below the sender's floor will never come:
 * the map slides over it. A stream has no floor: it waits for every
 * segment.
 */
#include "mrc_sack.h"

/* A view of either map, for the code they share. */
struct ring {
	u32 *cum;
	u64 *bits;
	u32 size;	/* bits, a power of two */
	u32 window;	/* the furthest past cum it records */
};

static bool ring_test(const u64 *bits, u32 size, u32 seq)
{
	u32 i = seq & (size - 1);

	return bits[i / 64] & (1ULL << (i % 64));
}

static void ring_clear(struct ring *r, u32 seq)
{
	u32 i = seq & (r->size - 1);

	r->bits[i / 64] &= ~(1ULL << (i % 64));
}

/* Steps cum over every sequence that has arrived. */
static void ring_advance(struct ring *r)
{
	while (ring_test(r->bits, r->size, *r->cum)) {
		ring_clear(r, *r->cum);
		(*r->cum)++;
	}
}

static bool ring_has(const u64 *bits, u32 size, u32 cum, u32 seq)
{
	s32 d = mrc_seq_diff(seq, cum);

	if (d < 0)
		return true;
	return (u32)d < size && ring_test(bits, size, seq);
}

/* Moves cum to @to, forgetting what it passes, then on over arrivals. */
static void ring_slide(struct ring *r, u32 to)
{
	u32 n = to - *r->cum;

	if (n >= r->size)
		memset(r->bits, 0, r->size / 8);
	else
		while (*r->cum != to)
			ring_clear(r, (*r->cum)++);
	*r->cum = to;
	ring_advance(r);
}

static enum mrc_sack_verdict ring_record(struct ring *r, u32 seq)
{
	s32 d = mrc_seq_diff(seq, *r->cum);
	u32 i;

	if (d > (s32)r->window)
		return MRC_SACK_BEYOND;
	if (ring_has(r->bits, r->size, *r->cum, seq))
		return MRC_SACK_DUPLICATE;
	i = seq & (r->size - 1);
	r->bits[i / 64] |= 1ULL << (i % 64);
	ring_advance(r);
	return MRC_SACK_NEW;
}

static struct ring path_ring(struct mrc_sack *sack)
{
	struct ring r = { &sack->cum, sack->ring, MRC_SACK_RING_BITS,
			  MRC_SACK_BITS };

	return r;
}

void mrc_sack_init(struct mrc_sack *sack, u32 first_seq)
{
	memset(sack, 0, sizeof(*sack));
	sack->cum = first_seq;
}

bool mrc_sack_has(const struct mrc_sack *sack, u32 seq)
{
	return ring_has(sack->ring, MRC_SACK_RING_BITS, sack->cum, seq);
}

/*
 * Records transmission @seq, sent when the sender's oldest unresolved
 * sequence was @floor: nothing below it will be sent or waited for, so the
 * map slides up to it. A floor ahead of @seq is not one a sender can send
 * and is ignored. A packet past the window is refused before it moves
 * anything.
 */
enum mrc_sack_verdict mrc_sack_record(struct mrc_sack *sack, u32 seq,
				      u32 floor)
{
	struct ring r = path_ring(sack);

	if (mrc_seq_diff(seq, floor) < 0)
		floor = sack->cum;
	if (mrc_seq_diff(seq, sack->cum) > MRC_SACK_BITS &&
	    mrc_seq_diff(seq, floor) > MRC_SACK_BITS)
		return MRC_SACK_BEYOND;
	if (mrc_seq_diff(floor, sack->cum) > 0)
		ring_slide(&r, floor);
	return ring_record(&r, seq);
}

/* Whether something arrived past a sequence that has not. */
bool mrc_sack_has_gap(const struct mrc_sack *sack)
{
	u32 i;

	for (i = 0; i < MRC_SACK_RING_BITS / 64; i++)
		if (sack->ring[i])
			return true;
	return false;
}

/* The map as an ACK carries it: bit i is sequence cum + 1 + i. */
void mrc_sack_bits(const struct mrc_sack *sack, u64 bits[MRC_SACK_WORDS])
{
	u32 i;

	memset(bits, 0, MRC_SACK_WORDS * sizeof(*bits));
	for (i = 0; i < MRC_SACK_BITS; i++)
		if (ring_test(sack->ring, MRC_SACK_RING_BITS,
			      sack->cum + 1 + i))
			bits[i / 64] |= 1ULL << (i % 64);
}

void mrc_stream_map_init(struct mrc_stream_map *map, u32 first_ssn)
{
	memset(map, 0, sizeof(*map));
	map->cum = first_ssn;
}

bool mrc_stream_map_has(const struct mrc_stream_map *map, u32 ssn)
{
	return ring_has(map->ring, MRC_STREAM_MAP_BITS, map->cum, ssn);
}

/* Records segment @ssn: new, a resend of one that arrived, or beyond. */
enum mrc_sack_verdict mrc_stream_map_record(struct mrc_stream_map *map,
					    u32 ssn)
{
	struct ring r = { &map->cum, map->ring, MRC_STREAM_MAP_BITS,
			  MRC_STREAM_MAP_BITS - 1 };

	return ring_record(&r, ssn);
}
