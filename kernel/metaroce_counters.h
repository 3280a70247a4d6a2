/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Per-device counters, exported as RDMA hardware counters:
 *   rdma statistic show link <dev>/1
 */
#ifndef METAROCE_COUNTERS_H
#define METAROCE_COUNTERS_H

#include <linux/percpu.h>

enum metaroce_counter {
	METAROCE_CNT_TX_PACKETS,
	METAROCE_CNT_TX_BYTES,
	METAROCE_CNT_RX_PACKETS,
	METAROCE_CNT_RX_BYTES,
	METAROCE_CNT_TX_ACKS,
	METAROCE_CNT_RX_ACKS,
	METAROCE_CNT_TX_NAKS,
	METAROCE_CNT_RX_NAKS,
	METAROCE_CNT_TX_DROPPED,	/* no route, no memory, netdev refused */
	METAROCE_CNT_RX_MALFORMED,	/* failed header validation */
	METAROCE_CNT_RX_BAD_VERSION,
	METAROCE_CNT_RX_UNKNOWN_QP,
	METAROCE_CNT_RX_BAD_STATE,	/* QP state does not accept it */
	METAROCE_CNT_RX_BAD_PEER,	/* not from the connected peer */
	METAROCE_CNT_RX_DUPLICATE,
	METAROCE_CNT_RX_DUPLICATE_READ_UNKNOWN,	/* not a READ it remembers */
	METAROCE_CNT_RX_DUPLICATE_ATOMIC_UNKNOWN, /* no record or pending match */
	METAROCE_CNT_RX_OUT_OF_WINDOW,
	METAROCE_CNT_RX_OUT_OF_ORDER,	/* placed ahead of a gap */
	METAROCE_CNT_RX_ACK_INVALID,	/* ACK/NAK for PSNs not sent/outstanding */
	METAROCE_CNT_RX_ACK_BAD_ECHO,	/* ACK/NAK echoing no timestamp we sent */
	METAROCE_CNT_RX_ECN_CE,
	METAROCE_CNT_RX_NO_RECV_WQE,	/* datagram with no receive posted */
	METAROCE_CNT_REMOTE_ACCESS_ERR,	/* refused a remote access */
	METAROCE_CNT_RNR_NAKS_SENT,
	METAROCE_CNT_RX_REFUSED,	/* v2: segment refused, no receive WQE */
	METAROCE_CNT_RETRANSMITS,
	METAROCE_CNT_LOST_BY_COUNT,	/* overtaken by enough later packets */
	METAROCE_CNT_LOST_BY_TIME,	/* overtaken, and out too long */
	METAROCE_CNT_TAIL_PROBES,
	METAROCE_CNT_REREADS,
	METAROCE_CNT_RTO_EXPIRED,
	METAROCE_CNT_RETRY_EXCEEDED,
	METAROCE_CNT_RNR_RETRY_EXCEEDED,
	METAROCE_CNT_PATH_FAILED,
	METAROCE_CNT_PATH_RECOVERED,
	METAROCE_CNT_PATH_MOVED,	/* v2: a path took another route */
	METAROCE_CNT_CQ_OVERFLOW,
	METAROCE_CNT_OBJ_LIMIT,		/* creation refused: at the limit */
	METAROCE_CNT_DEREG_ZC_TIMEOUT,	/* dereg gave up waiting for packets */
	METAROCE_NUM_COUNTERS
};

struct metaroce_counters {
	u64 value[METAROCE_NUM_COUNTERS];
};

#define metaroce_count_add(mdev, counter, n) \
	this_cpu_add((mdev)->counters->value[METAROCE_CNT_##counter], (n))
#define metaroce_count(mdev, counter) metaroce_count_add(mdev, counter, 1)

#endif /* METAROCE_COUNTERS_H */
