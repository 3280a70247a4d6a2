/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The receiver's view of one path (protocol-v2.md section 3): the first
 * sequence not yet received and a 256-bit map of the sequences after it.
 */
#ifndef MRC_SACK_H
#define MRC_SACK_H

#include "mrc_types.h"

#define MRC_SACK_BITS	256
#define MRC_SACK_WORDS	(MRC_SACK_BITS / 64)

struct mrc_sack {
	u32 cum;			/* first sequence not received */
	u64 bits[MRC_SACK_WORDS];	/* bit i: cum + 1 + i received */
};

enum mrc_sack_verdict {
	MRC_SACK_NEW,		/* recorded now */
	MRC_SACK_DUPLICATE,	/* this transmission arrived before */
	MRC_SACK_BEYOND,	/* past the window: a correct sender never */
};

void mrc_sack_init(struct mrc_sack *sack, u32 first_seq);
bool mrc_sack_has(const struct mrc_sack *sack, u32 seq);
enum mrc_sack_verdict mrc_sack_record(struct mrc_sack *sack, u32 seq,
				      u32 floor);
bool mrc_sack_has_gap(const struct mrc_sack *sack);

#endif /* MRC_SACK_H */
