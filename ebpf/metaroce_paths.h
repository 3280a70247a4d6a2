/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Per-path telemetry shared by the BPF program and its loader: one entry
 * per (QP, path, direction) of the MetaRoCE packets seen on an interface.
 */
#ifndef METAROCE_PATHS_H
#define METAROCE_PATHS_H

#include <linux/types.h>

enum metaroce_dir {
	METAROCE_DIR_RX = 0,
	METAROCE_DIR_TX = 1,
};

struct metaroce_path_key {
	__u32 qpn;		/* destination QP of the packets */
	__u16 path;		/* BTH path index (the UDP source-port entropy slot) */
	__u8 dir;		/* enum metaroce_dir */
	__u8 pad;
};

struct metaroce_path_stats {
	__u64 packets;		/* data and read-request packets */
	__u64 bytes;		/* their UDP payload bytes */
	__u64 retransmits;	/* with the RETX flag */
	__u64 ecn_ce;		/* arrived or left CE-marked */
	__u64 acks;		/* ACKs and NAKs on this path */
	__u64 naks;
	__u64 last_seen_ns;
};

#endif /* METAROCE_PATHS_H */
