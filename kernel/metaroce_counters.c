// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The device's counters as rdma hardware counters.
 */
#include "metaroce_loc.h"

static const struct rdma_stat_desc counter_descs[] = {
	[METAROCE_CNT_TX_PACKETS].name		= "tx_packets",
	[METAROCE_CNT_TX_BYTES].name		= "tx_bytes",
	[METAROCE_CNT_RX_PACKETS].name		= "rx_packets",
	[METAROCE_CNT_RX_BYTES].name		= "rx_bytes",
	[METAROCE_CNT_TX_ACKS].name		= "tx_acks",
	[METAROCE_CNT_RX_ACKS].name		= "rx_acks",
	[METAROCE_CNT_TX_NAKS].name		= "tx_naks",
	[METAROCE_CNT_RX_NAKS].name		= "rx_naks",
	[METAROCE_CNT_TX_DROPPED].name		= "tx_dropped",
	[METAROCE_CNT_RX_MALFORMED].name	= "rx_malformed",
	[METAROCE_CNT_RX_BAD_VERSION].name	= "rx_bad_version",
	[METAROCE_CNT_RX_UNKNOWN_QP].name	= "rx_unknown_qp",
	[METAROCE_CNT_RX_BAD_STATE].name	= "rx_bad_qp_state",
	[METAROCE_CNT_RX_BAD_PEER].name		= "rx_bad_peer",
	[METAROCE_CNT_RX_DUPLICATE].name	= "rx_duplicate",
	[METAROCE_CNT_RX_DUPLICATE_READ_UNKNOWN].name = "rx_duplicate_read_unknown",
	[METAROCE_CNT_RX_DUPLICATE_ATOMIC_UNKNOWN].name =
		"rx_duplicate_atomic_unknown",
	[METAROCE_CNT_RX_OUT_OF_WINDOW].name	= "rx_out_of_window",
	[METAROCE_CNT_RX_OUT_OF_ORDER].name	= "rx_out_of_order",
	[METAROCE_CNT_RX_ACK_INVALID].name	= "rx_ack_invalid",
	[METAROCE_CNT_RX_ACK_BAD_ECHO].name	= "rx_ack_bad_echo",
	[METAROCE_CNT_RX_ECN_CE].name		= "rx_ecn_ce",
	[METAROCE_CNT_RX_NO_RECV_WQE].name	= "rx_no_recv_wqe",
	[METAROCE_CNT_REMOTE_ACCESS_ERR].name	= "remote_access_errors",
	[METAROCE_CNT_RNR_NAKS_SENT].name	= "rnr_naks_sent",
	[METAROCE_CNT_RX_REFUSED].name		= "rx_refused",
	[METAROCE_CNT_RETRANSMITS].name		= "retransmits",
	[METAROCE_CNT_LOST_BY_COUNT].name	= "lost_by_count",
	[METAROCE_CNT_LOST_BY_TIME].name	= "lost_by_time",
	[METAROCE_CNT_TAIL_PROBES].name		= "tail_probes",
	[METAROCE_CNT_REREADS].name		= "rereads",
	[METAROCE_CNT_RTO_EXPIRED].name		= "rto_expired",
	[METAROCE_CNT_RETRY_EXCEEDED].name	= "retry_exceeded",
	[METAROCE_CNT_RNR_RETRY_EXCEEDED].name	= "rnr_retry_exceeded",
	[METAROCE_CNT_PATH_FAILED].name		= "path_failed",
	[METAROCE_CNT_PATH_RECOVERED].name	= "path_recovered",
	[METAROCE_CNT_PATH_MOVED].name		= "path_moved",
	[METAROCE_CNT_CQ_OVERFLOW].name		= "cq_overflow",
	[METAROCE_CNT_OBJ_LIMIT].name		= "obj_limit_refused",
	[METAROCE_CNT_DEREG_ZC_TIMEOUT].name	= "dereg_zc_timeout",
};

static_assert(ARRAY_SIZE(counter_descs) == METAROCE_NUM_COUNTERS);

struct rdma_hw_stats *metaroce_alloc_hw_port_stats(struct ib_device *ibdev,
						   u32 port_num)
{
	return rdma_alloc_hw_stats_struct(counter_descs, METAROCE_NUM_COUNTERS,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

int metaroce_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
			  u32 port, int index)
{
	struct metaroce_dev *mdev = to_mdev(ibdev);
	int cpu, i;

	for (i = 0; i < METAROCE_NUM_COUNTERS; i++) {
		u64 sum = 0;

		for_each_possible_cpu(cpu)
			sum += per_cpu_ptr(mdev->counters, cpu)->value[i];
		stats->value[i] = sum;
	}
	return METAROCE_NUM_COUNTERS;
}
