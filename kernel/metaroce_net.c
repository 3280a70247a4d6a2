// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The soft-NIC's UDP endpoint: one IPv4 and one IPv6 tunnel socket per
 * network namespace, opened when the first device appears there and
 * closed when the namespace (or the module) goes away. Devices share them;
 * received packets are matched to a device by their netdev. Also the
 * transmit side: routing and UDP encapsulation of a built packet.
 */
#include <linux/module.h>
#include <net/dst_cache.h>
#include <net/inet_ecn.h>
#include <net/ip6_route.h>
#include <net/ipv6.h>
#include <net/ipv6_stubs.h>
#include <net/net_namespace.h>
#include <net/netns/generic.h>
#include <net/route.h>
#include <net/udp_tunnel.h>
#include <uapi/rdma/metaroce_wire.h>

#include "metaroce_loc.h"
#include "metaroce_soft.h"
#include "soft/mrs.h"

unsigned short metaroce_udp_port = METAROCE_UDP_PORT;
module_param_named(udp_port, metaroce_udp_port, ushort, 0444);
MODULE_PARM_DESC(udp_port, "UDP destination port of MetaRoCE packets");

struct metaroce_net {
	struct mutex lock;	/* serialises opening the sockets */
	struct socket __rcu *sock4;
	struct socket __rcu *sock6;
};

static unsigned int metaroce_net_id;

static int metaroce_udp_encap_recv(struct sock *sk, struct sk_buff *skb)
{
	struct metaroce_dev *mdev = metaroce_get_dev_for_skb(skb);

	if (mdev) {
		if (mdev->protocol == 2)
			mrs_rx(mdev, skb);
		else
			metaroce_rx(mdev, skb);
		ib_device_put(&mdev->ib_dev);
	} else {
		kfree_skb(skb);
	}
	return 0;
}

static struct socket *open_tunnel_socket(struct net *net, bool ipv6)
{
	struct udp_tunnel_sock_cfg tunnel_cfg = {
		.encap_type = 1,
		.encap_rcv = metaroce_udp_encap_recv,
	};
	struct udp_port_cfg port_cfg = {
		.local_udp_port = htons(metaroce_udp_port),
	};
	struct socket *sock;
	int err;

	if (ipv6) {
		port_cfg.family = AF_INET6;
		port_cfg.ipv6_v6only = 1;
		port_cfg.use_udp6_tx_checksums = 1;
		port_cfg.use_udp6_rx_checksums = 1;
	} else {
		port_cfg.family = AF_INET;
		port_cfg.use_udp_checksums = 1;
	}

	err = udp_sock_create(net, &port_cfg, &sock);
	if (err)
		return ERR_PTR(err);

	setup_udp_tunnel_sock(net, sock, &tunnel_cfg);
	return sock;
}

/* Makes sure the namespace's sockets exist. Returns 0 or a negative errno. */
int metaroce_net_open(struct net *net)
{
	struct metaroce_net *mn = net_generic(net, metaroce_net_id);
	struct socket *sock;
	int err = 0;

	mutex_lock(&mn->lock);
	if (!rcu_access_pointer(mn->sock4)) {
		sock = open_tunnel_socket(net, false);
		if (IS_ERR(sock)) {
			err = PTR_ERR(sock);
			pr_err("metaroce: cannot bind UDP port %u: %d\n",
			       metaroce_udp_port, err);
			goto out;
		}
		rcu_assign_pointer(mn->sock4, sock);
	}
	if (!rcu_access_pointer(mn->sock6) && ipv6_mod_enabled()) {
		sock = open_tunnel_socket(net, true);
		/* An IPv4-only namespace is fine. */
		if (!IS_ERR(sock))
			rcu_assign_pointer(mn->sock6, sock);
	}
out:
	mutex_unlock(&mn->lock);
	return err;
}

static void close_tunnel_socket(struct socket __rcu **sockp)
{
	struct socket *sock = rcu_replace_pointer(*sockp, NULL, true);

	if (sock) {
		/* Senders look the socket up under RCU. */
		synchronize_net();
		udp_tunnel_sock_release(sock);
	}
}

static struct rtable *route4(struct net *net, struct net_device *ndev,
			     const struct metaroce_av *av, __be16 sport,
			     struct dst_cache *cache)
{
	struct rtable *rt;
	__be32 saddr;
	struct flowi4 fl4 = {
		.flowi4_oif = ndev->ifindex,
		.flowi4_proto = IPPROTO_UDP,
		.daddr = av->daddr4,
		.saddr = av->saddr4,
		.fl4_sport = sport,
		.fl4_dport = htons(metaroce_udp_port),
	};

	rt = cache ? dst_cache_get_ip4(cache, &saddr) : NULL;
	if (rt)
		return rt;
	rt = ip_route_output_key(net, &fl4);
	if (IS_ERR(rt))
		return NULL;
	if (cache)
		dst_cache_set_ip4(cache, &rt->dst, fl4.saddr);
	return rt;
}

#if IS_ENABLED(CONFIG_IPV6)
static struct dst_entry *route6(struct net *net, struct sock *sk,
				struct net_device *ndev,
				const struct metaroce_av *av, __be16 sport,
				struct dst_cache *cache)
{
	struct dst_entry *dst;
	struct in6_addr saddr;
	struct flowi6 fl6 = {
		.flowi6_oif = ndev->ifindex,
		.flowi6_proto = IPPROTO_UDP,
		.daddr = av->daddr6,
		.saddr = av->saddr6,
		.fl6_sport = sport,
		.fl6_dport = htons(metaroce_udp_port),
	};

	dst = cache ? dst_cache_get_ip6(cache, &saddr) : NULL;
	if (dst)
		return dst;
	dst = ipv6_stub->ipv6_dst_lookup_flow(net, sk, &fl6, NULL);
	if (IS_ERR(dst))
		return NULL;
	if (cache)
		dst_cache_set_ip6(cache, dst, &fl6.saddr);
	return dst;
}
#endif

/* Room to leave in front of a MetaRoCE header for the layers below. */
static unsigned int lower_headroom(const struct net_device *ndev)
{
	return LL_RESERVED_SPACE(ndev) + sizeof(struct ipv6hdr) +
	       sizeof(struct udphdr);
}

/*
 * A packet for @qp with @hdr_len bytes of MetaRoCE headers put and room
 * for @linear_payload more bytes after them.
 */
struct sk_buff *soft_alloc_skb(struct metaroce_qp *qp, u32 hdr_len,
			       u32 linear_payload)
{
	struct net_device *ndev = qp->mdev->ndev;
	unsigned int headroom = lower_headroom(ndev);
	struct sk_buff *skb;

	skb = alloc_skb(headroom + hdr_len + linear_payload, GFP_ATOMIC);
	if (!skb)
		return NULL;
	skb_reserve(skb, headroom);
	skb_put(skb, hdr_len);
	return skb;
}

void soft_fill_bth(struct metaroce_bth *bth, u8 opcode, u8 flags, u32 dqpn,
		   u32 sqpn, u32 psn, u16 path)
{
	bth->version = METAROCE_VERSION << 4;
	bth->opcode = opcode;
	bth->flags = flags;
	bth->stream = 0;
	bth->dqpn = cpu_to_be32(dqpn & METAROCE_QPN_MASK);
	bth->sqpn = cpu_to_be32(sqpn & METAROCE_QPN_MASK);
	bth->psn = cpu_to_be32(psn & METAROCE_PSN_MASK);
	bth->path = cpu_to_be16(path);
	bth->reserved = 0;
	bth->ts = cpu_to_be32(soft_now_us());
}

/*
 * Encapsulates @skb (skb->data at the BTH) in UDP/IP towards @av and sends
 * it with UDP source port entropy @entropy; @ect marks it ECN capable.
 * @cache remembers the route of a connection's path (NULL: look it up).
 * @gso_size: non-zero for a batch of packets of that size back to back
 * (the last may be shorter), sent as one UDP GSO datagram.
 * Consumes the skb. Callable from process and softirq context.
 */
int soft_xmit(struct metaroce_qp *qp, const struct metaroce_av *av,
	      struct sk_buff *skb, u16 entropy, struct dst_cache *cache,
	      bool ect, u32 gso_size)
{
	struct metaroce_dev *mdev = qp->mdev;
	struct net_device *ndev = mdev->ndev;
	struct net *net = dev_net(ndev);
	struct metaroce_net *mn = net_generic(net, metaroce_net_id);
	__be16 sport = htons(METAROCE_ENTROPY_BASE | entropy);
	__be16 dport = htons(metaroce_udp_port);
	u8 ecn = ect ? INET_ECN_ECT_0 : INET_ECN_NOT_ECT;
	u8 tos = (av->traffic_class & ~INET_ECN_MASK) | ecn;
	unsigned int len = skb->len, segs = 1;
	struct socket *sock;
	int err = -EHOSTUNREACH;

	if (gso_size && skb->len > gso_size) {
		/*
		 * As a UDP_SEGMENT socket does: the stack (or the NIC) cuts
		 * the datagram and fills in each segment's UDP checksum.
		 */
		segs = DIV_ROUND_UP(skb->len, gso_size);
		skb_shinfo(skb)->gso_size = gso_size;
		skb_shinfo(skb)->gso_type = SKB_GSO_UDP_L4;
		skb_shinfo(skb)->gso_segs = segs;
		skb->ip_summed = CHECKSUM_PARTIAL;
		skb->csum_start = skb_headroom(skb) - sizeof(struct udphdr);
		skb->csum_offset = offsetof(struct udphdr, check);
	}

	/* The dst caches are per CPU: stay on this one. */
	local_bh_disable();
	rcu_read_lock();
	if (av->net_type == RDMA_NETWORK_IPV4) {
		struct rtable *rt;

		sock = rcu_dereference(mn->sock4);
		rt = sock ? route4(net, ndev, av, sport, cache) : NULL;
		if (!rt)
			goto drop;
		udp_tunnel_xmit_skb(rt, sock->sk, skb, av->saddr4, av->daddr4,
				    tos, av->hop_limit ?:
				    ip4_dst_hoplimit(&rt->dst),
				    htons(IP_DF), sport, dport, false, false);
#if IS_ENABLED(CONFIG_IPV6)
	} else {
		struct in6_addr saddr = av->saddr6, daddr = av->daddr6;
		struct dst_entry *dst;

		sock = rcu_dereference(mn->sock6);
		dst = sock ? route6(net, sock->sk, ndev, av, sport, cache) :
			     NULL;
		if (!dst)
			goto drop;
		udp_tunnel6_xmit_skb(dst, sock->sk, skb, ndev, &saddr, &daddr,
				     tos, av->hop_limit ?:
				     ip6_dst_hoplimit(dst),
				     cpu_to_be32(av->flow_label), sport, dport,
				     false);
#endif
	}
	rcu_read_unlock();
	local_bh_enable();
	metaroce_count_add(mdev, TX_PACKETS, segs);
	metaroce_count_add(mdev, TX_BYTES, len);
	return 0;

drop:
	rcu_read_unlock();
	local_bh_enable();
	metaroce_count(mdev, TX_DROPPED);
	kfree_skb(skb);
	return err;
}

static int __net_init metaroce_net_init_ns(struct net *net)
{
	struct metaroce_net *mn = net_generic(net, metaroce_net_id);

	mutex_init(&mn->lock);
	return 0;
}

static void __net_exit metaroce_net_exit_ns(struct net *net)
{
	struct metaroce_net *mn = net_generic(net, metaroce_net_id);

	close_tunnel_socket(&mn->sock6);
	close_tunnel_socket(&mn->sock4);
	mutex_destroy(&mn->lock);
}

static struct pernet_operations metaroce_net_ops = {
	.init = metaroce_net_init_ns,
	.exit = metaroce_net_exit_ns,
	.id = &metaroce_net_id,
	.size = sizeof(struct metaroce_net),
};

int metaroce_net_init(void)
{
	return register_pernet_subsys(&metaroce_net_ops);
}

void metaroce_net_exit(void)
{
	unregister_pernet_subsys(&metaroce_net_ops);
	/* No receive callback may still be running in this module. */
	synchronize_net();
}
