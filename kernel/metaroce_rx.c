// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Receive: header validation (protocol.md section 12) and dispatch of each
 * packet to the QP and the part of the engine that handles it. Runs in
 * softirq context, from the UDP tunnel socket. Nothing in a malformed
 * packet changes any state: it is counted and dropped.
 */
#include <linux/if_ether.h>
#include <linux/etherdevice.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/udp.h>
#include <net/inet_ecn.h>
#include <net/ipv6.h>

#include "metaroce_loc.h"
#include "metaroce_soft.h"

/* The largest payload any QP accepts: the largest path MTU. */
#define MAX_PAYLOAD	4096

union ext_hdr {
	struct metaroce_deth deth;
	struct metaroce_rreq rreq;
	struct metaroce_areq areq;
	struct metaroce_ack ack;
};

/* Also: v1 carries stream 0 only (protocol.md section 9). */
static bool reserved_bits_clear(const struct metaroce_bth *bth)
{
	return !(bth->version & 0x0f) && !(bth->flags & ~METAROCE_F_ALL) &&
	       !bth->stream &&
	       !(be32_to_cpu(bth->dqpn) & ~METAROCE_QPN_MASK) &&
	       !(be32_to_cpu(bth->sqpn) & ~METAROCE_QPN_MASK) &&
	       !(be32_to_cpu(bth->psn) & ~METAROCE_PSN_MASK) &&
	       !bth->reserved;
}

/* The flags each opcode may carry (protocol.md section 3). */
static bool flags_allowed(u8 opcode, u8 flags)
{
	switch (opcode) {
	case METAROCE_OP_SEND:
		/* INV: on the last packet, in place of immediate data. */
		return !(flags & METAROCE_F_INV) ||
		       (flags & (METAROCE_F_LAST | METAROCE_F_IMM)) ==
		       METAROCE_F_LAST;
	case METAROCE_OP_WRITE:
		return !(flags & METAROCE_F_INV);
	case METAROCE_OP_READ_REQ:
	case METAROCE_OP_ATOMIC_CMP_SWP:
	case METAROCE_OP_ATOMIC_FETCH_ADD:
		return !(flags & ~(METAROCE_F_ACK_REQ | METAROCE_F_RETX));
	case METAROCE_OP_ATOMIC_RESP:
		return (flags & ~METAROCE_F_RETX) ==
		       (METAROCE_F_FIRST | METAROCE_F_LAST);
	case METAROCE_OP_READ_RESP:
		return !(flags & ~(METAROCE_F_FIRST | METAROCE_F_LAST |
				   METAROCE_F_RETX));
	case METAROCE_OP_UD_SEND:
		return (flags & (METAROCE_F_FIRST | METAROCE_F_LAST)) ==
		       (METAROCE_F_FIRST | METAROCE_F_LAST) &&
		       !(flags & (METAROCE_F_ACK_REQ | METAROCE_F_RETX |
				  METAROCE_F_INV));
	default:
		return !flags;
	}
}

/* Fields an opcode gives as 0 must be 0. */
static bool zero_fields_clear(const struct soft_pkt_info *pkt)
{
	switch (pkt->opcode) {
	case METAROCE_OP_SEND:
	case METAROCE_OP_READ_RESP:
		if (pkt->deth.key)
			return false;
		break;
	case METAROCE_OP_ATOMIC_RESP:
		/* Its row of protocol.md section 3.1: only the MSN varies. */
		return !pkt->deth.addr && !pkt->deth.key && !pkt->deth.imm &&
		       pkt->deth.msg_len == METAROCE_ATOMIC_LEN;
	case METAROCE_OP_ATOMIC_FETCH_ADD:
		return !pkt->areq.compare;
	case METAROCE_OP_UD_SEND:
		if (pkt->deth.msn)
			return false;
		break;
	case METAROCE_OP_WRITE:
		break;
	case METAROCE_OP_ACK:
		if (pkt->ack.syndrome == METAROCE_ACK)
			return !pkt->ack.nak_psn && !pkt->ack.nak_arg;
		if (pkt->ack.syndrome == METAROCE_NAK_RNR)
			return pkt->ack.nak_arg < 32;
		return pkt->ack.syndrome == METAROCE_NAK_VERSION ||
		       !pkt->ack.nak_arg;
	default:
		return true;
	}
	/* Every data packet: no immediate data without IMM (or INV). */
	return (pkt->flags & (METAROCE_F_IMM | METAROCE_F_INV)) ||
	       !pkt->deth.imm;
}

static void parse_deth(struct soft_pkt_info *pkt, const struct metaroce_deth *d)
{
	pkt->deth.addr = be64_to_cpu(d->addr);
	pkt->deth.key = be32_to_cpu(d->key);
	pkt->deth.msn = be32_to_cpu(d->msn);
	pkt->deth.msg_len = be32_to_cpu(d->msg_len);
	pkt->deth.imm = d->imm;
}

static void parse_rreq(struct soft_pkt_info *pkt, const struct metaroce_rreq *r)
{
	pkt->rreq.va = be64_to_cpu(r->va);
	pkt->rreq.rkey = be32_to_cpu(r->rkey);
	pkt->rreq.len = be32_to_cpu(r->len);
	pkt->rreq.offset = be32_to_cpu(r->offset);
	pkt->rreq.msn = be32_to_cpu(r->msn);
}

static void parse_areq(struct soft_pkt_info *pkt, const struct metaroce_areq *a)
{
	pkt->areq.va = be64_to_cpu(a->va);
	pkt->areq.rkey = be32_to_cpu(a->rkey);
	pkt->areq.msn = be32_to_cpu(a->msn);
	pkt->areq.swap_add = be64_to_cpu(a->swap_add);
	pkt->areq.compare = be64_to_cpu(a->compare);
}

static bool parse_ack(struct soft_pkt_info *pkt, const struct metaroce_ack *a)
{
	int i;

	pkt->ack.cum_psn = be32_to_cpu(a->cum_psn);
	pkt->ack.nak_psn = be32_to_cpu(a->nak_psn);
	pkt->ack.syndrome = a->syndrome;
	pkt->ack.nak_arg = a->nak_arg;
	pkt->ack.ce_count = be16_to_cpu(a->ce_count);
	pkt->ack.fair_share = be16_to_cpu(a->fair_share);
	pkt->ack.echo_path = be16_to_cpu(a->echo_path);
	pkt->ack.ts_echo = be32_to_cpu(a->ts_echo);
	for (i = 0; i < METAROCE_SACK_WORDS; i++)
		pkt->ack.sack[i] = be32_to_cpu(a->sack[i]);
	return !(pkt->ack.cum_psn & ~METAROCE_PSN_MASK) &&
	       !(pkt->ack.nak_psn & ~METAROCE_PSN_MASK) &&
	       pkt->ack.cum_psn == pkt->psn &&
	       pkt->ack.syndrome <= METAROCE_NAK_VERSION;
}

/*
 * Data packets: the payload must fit the message it claims to be part of.
 * Written so that no sum can wrap, whatever the address: once this holds,
 * a SEND's or READ response's offset fits 32 bits and offset + payload is
 * at most msg_len, which is all placement relies on.
 */
static bool data_consistent(const struct soft_pkt_info *pkt)
{
	if (pkt->payload_len > MAX_PAYLOAD)
		return false;
	switch (pkt->opcode) {
	case METAROCE_OP_SEND:
	case METAROCE_OP_READ_RESP:
		return pkt->deth.addr <= pkt->deth.msg_len &&
		       pkt->payload_len <= pkt->deth.msg_len - pkt->deth.addr;
	case METAROCE_OP_WRITE:
		return pkt->payload_len <= pkt->deth.msg_len;
	case METAROCE_OP_UD_SEND:
		return !pkt->deth.addr && pkt->payload_len == pkt->deth.msg_len;
	case METAROCE_OP_ATOMIC_RESP:
		return pkt->payload_len == METAROCE_ATOMIC_LEN;
	}
	return true;
}

/* A READ ends within the largest message, so its PSN count fits too. */
static bool rreq_consistent(const struct soft_pkt_info *pkt)
{
	return (u64)pkt->rreq.offset + pkt->rreq.len <= METAROCE_MAX_MSG_SIZE;
}

static void read_addresses(struct sk_buff *skb, struct soft_pkt_info *pkt)
{
	if (skb->protocol == htons(ETH_P_IP)) {
		const struct iphdr *iph = ip_hdr(skb);

		pkt->src.net_type = RDMA_NETWORK_IPV4;
		pkt->src.saddr4 = iph->saddr;
		pkt->src.daddr4 = iph->daddr;
		pkt->ce = INET_ECN_is_ce(iph->tos);
	} else {
		const struct ipv6hdr *ip6h = ipv6_hdr(skb);

		pkt->src.net_type = RDMA_NETWORK_IPV6;
		pkt->src.saddr6 = ip6h->saddr;
		pkt->src.daddr6 = ip6h->daddr;
		pkt->ce = INET_ECN_is_ce(ipv6_get_dsfield(ip6h));
	}
	if (skb_mac_header_was_set(skb))
		ether_addr_copy(pkt->smac, eth_hdr(skb)->h_source);
}

static bool from_peer(const struct metaroce_qp *qp,
		      const struct soft_pkt_info *pkt);

/*
 * A newer version than ours, for a connected QP from its peer: say which
 * version we speak (protocol.md section 13). The BTH of later versions
 * starts as ours does, so its QPNs and PSN are read at our offsets.
 */
static void nak_version(struct metaroce_dev *mdev, struct sk_buff *skb,
			const struct metaroce_bth *bth)
{
	struct soft_ack_info nak = {
		.syndrome = METAROCE_NAK_VERSION,
		.nak_arg = METAROCE_VERSION,
		.nak_psn = be32_to_cpu(bth->psn) & METAROCE_PSN_MASK,
	};
	struct soft_pkt_info pkt = {
		.sqpn = be32_to_cpu(bth->sqpn) & METAROCE_QPN_MASK,
	};
	struct metaroce_qp *qp;

	qp = metaroce_qp_get(mdev, be32_to_cpu(bth->dqpn) & METAROCE_QPN_MASK);
	if (!qp)
		return;
	read_addresses(skb, &pkt);
	if (qp->ibqp.qp_type == IB_QPT_RC && from_peer(qp, &pkt) &&
	    READ_ONCE(qp->state) >= IB_QPS_RTR &&
	    READ_ONCE(qp->state) <= IB_QPS_SQE)
		soft_ack_send(qp->soft, &nak);
	metaroce_qp_put(qp);
}

/*
 * Fills @pkt from @skb (skb->data at the UDP header). Returns false, having
 * counted why, if the packet is not well formed.
 */
static bool parse_packet(struct metaroce_dev *mdev, struct sk_buff *skb,
			 struct soft_pkt_info *pkt)
{
	const unsigned int off = sizeof(struct udphdr);
	struct metaroce_bth bth;
	union ext_hdr ext;
	int ext_len;

	if (skb->len < off + METAROCE_BTH_LEN ||
	    !soft_udp_checksum_present(skb) ||
	    skb_copy_bits(skb, off, &bth, sizeof(bth)))
		goto malformed;
	if ((bth.version >> 4) != METAROCE_VERSION) {
		metaroce_count(mdev, RX_BAD_VERSION);
		if ((bth.version >> 4) > METAROCE_VERSION)
			nak_version(mdev, skb, &bth);
		return false;
	}
	ext_len = metaroce_ext_len(bth.opcode);
	if (ext_len < 0 || !reserved_bits_clear(&bth) ||
	    skb->len < off + METAROCE_BTH_LEN + ext_len ||
	    skb_copy_bits(skb, off + METAROCE_BTH_LEN, &ext, ext_len))
		goto malformed;

	memset(pkt, 0, sizeof(*pkt));
	pkt->skb = skb;
	pkt->opcode = bth.opcode;
	pkt->flags = bth.flags;
	pkt->stream = bth.stream;
	pkt->dqpn = be32_to_cpu(bth.dqpn);
	pkt->sqpn = be32_to_cpu(bth.sqpn);
	pkt->psn = be32_to_cpu(bth.psn);
	pkt->path = be16_to_cpu(bth.path);
	pkt->ts = be32_to_cpu(bth.ts);
	pkt->payload_offset = off + METAROCE_BTH_LEN + ext_len;
	pkt->payload_len = skb->len - pkt->payload_offset;

	if ((pkt->payload_len && !metaroce_op_has_payload(pkt->opcode)) ||
	    !flags_allowed(pkt->opcode, pkt->flags))
		goto malformed;
	switch (ext_len) {
	case METAROCE_DETH_LEN:
		if (pkt->opcode == METAROCE_OP_READ_REQ) {
			parse_rreq(pkt, &ext.rreq);
			if (!rreq_consistent(pkt))
				goto malformed;
			break;
		}
		parse_deth(pkt, &ext.deth);
		if (!data_consistent(pkt))
			goto malformed;
		break;
	case METAROCE_AREQ_LEN:
		parse_areq(pkt, &ext.areq);
		break;
	case METAROCE_ACK_LEN:
		if (!parse_ack(pkt, &ext.ack))
			goto malformed;
		break;
	}
	if (!zero_fields_clear(pkt))
		goto malformed;
	read_addresses(skb, pkt);
	return true;

malformed:
	metaroce_count(mdev, RX_MALFORMED);
	return false;
}

static bool from_peer(const struct metaroce_qp *qp,
		      const struct soft_pkt_info *pkt)
{
	const struct metaroce_av *av = &qp->av;

	if (pkt->sqpn != qp->attr.dest_qp_num ||
	    pkt->src.net_type != av->net_type)
		return false;
	if (av->net_type == RDMA_NETWORK_IPV4)
		return pkt->src.saddr4 == av->daddr4;
	return ipv6_addr_equal(&pkt->src.saddr6, &av->daddr6);
}

/* Whether a QP in @state takes packets of @opcode (from its peer). */
static bool state_accepts(enum ib_qp_state state, u8 opcode)
{
	switch (state) {
	case IB_QPS_RTR:
		/* Receive side only: requests (and datagrams). */
		return opcode != METAROCE_OP_ACK &&
		       opcode != METAROCE_OP_READ_RESP &&
		       opcode != METAROCE_OP_ATOMIC_RESP;
	case IB_QPS_RTS:
	case IB_QPS_SQD:
	case IB_QPS_SQE:
		return true;
	default:
		return false;
	}
}

/* Returns false if the packet was dropped without being looked at. */
static bool dispatch(struct metaroce_dev *mdev, struct metaroce_qp *qp,
		     struct soft_pkt_info *pkt)
{
	struct metaroce_soft_qp *sqp = qp->soft;
	bool ud = qp->ibqp.qp_type != IB_QPT_RC;
	bool ud_packet = pkt->opcode == METAROCE_OP_UD_SEND;

	if (ud != ud_packet) {
		metaroce_count(mdev, RX_MALFORMED);
		return false;
	}
	if (!state_accepts(READ_ONCE(qp->state), pkt->opcode)) {
		metaroce_count(mdev, RX_BAD_STATE);
		return false;
	}
	if (ud) {
		soft_ud_rx(sqp, pkt);
		return true;
	}
	if (!from_peer(qp, pkt)) {
		metaroce_count(mdev, RX_BAD_PEER);
		return false;
	}
	if (pkt->ce)
		metaroce_count(mdev, RX_ECN_CE);

	switch (pkt->opcode) {
	case METAROCE_OP_ACK:
		soft_comp_rx_ack(sqp, pkt);
		break;
	case METAROCE_OP_READ_RESP:
		soft_comp_rx_read_resp(sqp, pkt);
		break;
	case METAROCE_OP_ATOMIC_RESP:
		soft_comp_rx_atomic_resp(sqp, pkt);
		break;
	default:
		soft_resp_rx(sqp, pkt);
		break;
	}
	return true;
}

/* Handles one received MetaRoCE datagram; consumes @skb. */
void metaroce_rx(struct metaroce_dev *mdev, struct sk_buff *skb)
{
	struct soft_pkt_info pkt;
	struct metaroce_qp *qp;
	bool handled = false;

	metaroce_count(mdev, RX_PACKETS);
	metaroce_count_add(mdev, RX_BYTES, skb->len);

	if (!parse_packet(mdev, skb, &pkt))
		goto out;
	qp = metaroce_qp_get(mdev, pkt.dqpn);
	if (!qp) {
		metaroce_count(mdev, RX_UNKNOWN_QP);
		goto out;
	}
	handled = dispatch(mdev, qp, &pkt);
	metaroce_qp_put(qp);
out:
	if (handled)
		consume_skb(skb);
	else
		kfree_skb(skb);
}
