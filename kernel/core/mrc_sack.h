/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Receive maps (protocol-v2.md sections 3 and 8): the first sequence not
 * yet received, and which sequences after it have arrived. A path's map
 * names 256 sequences past cum, as its ACK does; a stream's names more, so
 * one stream can keep going while a lost segment waits for its resend.
 * Both are rings, so arrivals in order cost no shifting.
 */
#ifndef MRC_SACK_H
#define MRC_SACK_H

#include "mrc_types.h"

#define MRC_SACK_BITS		256	/* a path: what an ACK names past cum */
#define MRC_SACK_WORDS		(MRC_SACK_BITS / 64)
#define MRC_SACK_RING_BITS	(2 * MRC_SACK_BITS)	/* room past cum */
#define MRC_STREAM_MAP_BITS	4096	/* a stream: its window, section 8 */

struct mrc_sack {
	u32 cum;			/* first sequence not received */
	u64 ring[MRC_SACK_RING_BITS / 64];	/* bit q % size: q arrived */
};

struct mrc_stream_map {
	u32 cum;
	u64 ring[MRC_STREAM_MAP_BITS / 64];
};

enum mrc_sack_verdict {
	MRC_SACK_NEW,		/* recorded now */
	MRC_SACK_DUPLICATE,	/* this sequence arrived before */
	MRC_SACK_BEYOND,	/* past the window: a correct sender never */
};

void mrc_sack_init(struct mrc_sack *sack, u32 first_seq);
bool mrc_sack_has(const struct mrc_sack *sack, u32 seq);
enum mrc_sack_verdict mrc_sack_record(struct mrc_sack *sack, u32 seq,
				      u32 floor);
bool mrc_sack_has_gap(const struct mrc_sack *sack);
void mrc_sack_bits(const struct mrc_sack *sack, u64 bits[MRC_SACK_WORDS]);

void mrc_stream_map_init(struct mrc_stream_map *map, u32 first_ssn);
bool mrc_stream_map_has(const struct mrc_stream_map *map, u32 ssn);
enum mrc_sack_verdict mrc_stream_map_record(struct mrc_stream_map *map,
					    u32 ssn);

#endif /* MRC_SACK_H */
