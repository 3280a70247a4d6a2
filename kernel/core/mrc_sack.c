// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Per-path receive map (protocol-v2.md section 3). Each transmission has
 * its own sequence, so a sequence seen twice is a copy the network made,
 * and a sequence below the sender's floor will never come: the map slides
 * over it.
 */
#include "mrc_sack.h"

void mrc_sack_init(struct mrc_sack *sack, u32 first_seq)
{
	memset(sack, 0, sizeof(*sack));
	sack->cum = first_seq;
}

static bool bit_test(const u64 *bits, u32 i)
{
	return bits[i / 64] & (1ULL << (i % 64));
}

bool mrc_sack_has(const struct mrc_sack *sack, u32 seq)
{
	s32 d = mrc_seq_diff(seq, sack->cum);

	if (d < 0)
		return true;
	if (d == 0 || d > MRC_SACK_BITS)
		return false;
	return bit_test(sack->bits, d - 1);
}

/* Drops the lowest @n bits: sequence cum + 1 + n becomes bit 0. */
static void bits_shift(u64 *bits, u32 n)
{
	u32 words = n / 64, rem = n % 64, i;

	if (n >= MRC_SACK_BITS) {
		memset(bits, 0, MRC_SACK_WORDS * sizeof(*bits));
		return;
	}
	for (i = 0; i < MRC_SACK_WORDS; i++) {
		u64 lo = i + words < MRC_SACK_WORDS ? bits[i + words] : 0;
		u64 hi = i + words + 1 < MRC_SACK_WORDS ?
			 bits[i + words + 1] : 0;

		bits[i] = rem ? (lo >> rem) | (hi << (64 - rem)) : lo;
	}
}

/*
 * cum has just reached a sequence whose arrival is @received: while it
 * has arrived, step over it; bit 0 is then the status of the next one.
 */
static void sack_step(struct mrc_sack *sack, bool received)
{
	while (received) {
		received = sack->bits[0] & 1;
		bits_shift(sack->bits, 1);
		sack->cum++;
	}
}

/* Moves cum @n ahead (the sequences passed are resolved), then on. */
static void sack_move(struct mrc_sack *sack, u32 n)
{
	bool received = n <= MRC_SACK_BITS && bit_test(sack->bits, n - 1);

	bits_shift(sack->bits, n);
	sack->cum += n;
	sack_step(sack, received);
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
	s32 d;

	if (mrc_seq_diff(seq, floor) < 0)
		floor = sack->cum;
	if (mrc_seq_diff(seq, sack->cum) > MRC_SACK_BITS &&
	    mrc_seq_diff(seq, floor) > MRC_SACK_BITS)
		return MRC_SACK_BEYOND;
	if (mrc_seq_diff(floor, sack->cum) > 0)
		sack_move(sack, floor - sack->cum);
	d = mrc_seq_diff(seq, sack->cum);
	if (d > MRC_SACK_BITS)
		return MRC_SACK_BEYOND;
	if (mrc_sack_has(sack, seq))
		return MRC_SACK_DUPLICATE;
	if (d == 0)
		sack_step(sack, true);
	else
		sack->bits[(d - 1) / 64] |= 1ULL << ((d - 1) % 64);
	return MRC_SACK_NEW;
}

/* Whether something arrived past a sequence that has not. */
bool mrc_sack_has_gap(const struct mrc_sack *sack)
{
	u32 i;

	for (i = 0; i < MRC_SACK_WORDS; i++)
		if (sack->bits[i])
			return true;
	return false;
}
