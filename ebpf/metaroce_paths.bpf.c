// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * tc classifier that counts MetaRoCE packets per QP and path, in both
 * directions of an interface, without changing anything (TC_ACT_OK).
 * The map is pinned as /sys/fs/bpf/metaroce/metaroce_paths:
 *   bpftool map dump pinned /sys/fs/bpf/metaroce/metaroce_paths
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/pkt_cls.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include <rdma/metaroce_wire.h>

#include "metaroce_paths.h"

/* Set by the loader before load. */
const volatile __u16 udp_port = METAROCE_UDP_PORT;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct metaroce_path_key);
	__type(value, struct metaroce_path_stats);
	__uint(pinning, LIBBPF_PIN_BY_NAME);
} metaroce_paths SEC(".maps");

#define ECN_CE 3

/* Finds the UDP header; returns its offset or -1. Sets *ecn. */
static __always_inline int udp_offset(struct __sk_buff *skb, __u8 *ecn)
{
	struct ethhdr eth;
	struct iphdr ip4;
	struct ipv6hdr ip6;

	if (bpf_skb_load_bytes(skb, 0, &eth, sizeof(eth)))
		return -1;
	if (eth.h_proto == bpf_htons(ETH_P_IP)) {
		if (bpf_skb_load_bytes(skb, sizeof(eth), &ip4, sizeof(ip4)) ||
		    ip4.protocol != IPPROTO_UDP || (ip4.frag_off & bpf_htons(0x3fff)))
			return -1;
		*ecn = ip4.tos & 3;
		return sizeof(eth) + ip4.ihl * 4;
	}
	if (eth.h_proto == bpf_htons(ETH_P_IPV6)) {
		if (bpf_skb_load_bytes(skb, sizeof(eth), &ip6, sizeof(ip6)) ||
		    ip6.nexthdr != IPPROTO_UDP)
			return -1;
		*ecn = (bpf_ntohs(*(__u16 *)&ip6) >> 4) & 3;
		return sizeof(eth) + sizeof(ip6);
	}
	return -1;
}

static __always_inline int count(struct __sk_buff *skb, __u8 dir)
{
	struct metaroce_path_stats *stats, fresh = {};
	struct metaroce_path_key key = {};
	struct metaroce_bth bth;
	struct udphdr udp;
	__u8 syndrome = 0, ecn = 0;
	int off = udp_offset(skb, &ecn);

	if (off < 0 || bpf_skb_load_bytes(skb, off, &udp, sizeof(udp)) ||
	    udp.dest != bpf_htons(udp_port) ||
	    bpf_skb_load_bytes(skb, off + sizeof(udp), &bth, sizeof(bth)) ||
	    (bth.version >> 4) != METAROCE_VERSION)
		return TC_ACT_OK;

	key.qpn = bpf_ntohl(bth.dqpn) & METAROCE_QPN_MASK;
	key.path = bpf_ntohs(bth.path);
	key.dir = dir;
	stats = bpf_map_lookup_elem(&metaroce_paths, &key);
	if (!stats) {
		bpf_map_update_elem(&metaroce_paths, &key, &fresh, BPF_NOEXIST);
		stats = bpf_map_lookup_elem(&metaroce_paths, &key);
		if (!stats)
			return TC_ACT_OK;
	}

	if (bth.opcode == METAROCE_OP_ACK) {
		bpf_skb_load_bytes(skb, off + sizeof(udp) + METAROCE_BTH_LEN +
				   __builtin_offsetof(struct metaroce_ack, syndrome),
				   &syndrome, 1);
		__sync_fetch_and_add(syndrome ? &stats->naks : &stats->acks, 1);
	} else {
		__sync_fetch_and_add(&stats->packets, 1);
		__sync_fetch_and_add(&stats->bytes, bpf_ntohs(udp.len));
		if (bth.flags & METAROCE_F_RETX)
			__sync_fetch_and_add(&stats->retransmits, 1);
	}
	if (ecn == ECN_CE)
		__sync_fetch_and_add(&stats->ecn_ce, 1);
	stats->last_seen_ns = bpf_ktime_get_ns();
	return TC_ACT_OK;
}

SEC("tc")
int metaroce_paths_ingress(struct __sk_buff *skb)
{
	return count(skb, METAROCE_DIR_RX);
}

SEC("tc")
int metaroce_paths_egress(struct __sk_buff *skb)
{
	return count(skb, METAROCE_DIR_TX);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
