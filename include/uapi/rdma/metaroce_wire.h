/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * MetaRoCE wire format, version 1. docs/protocol.md is the specification;
 * this header is the single definition of every on-the-wire layout, shared
 * unmodified by the kernel module, the eBPF programs and the C++ userspace.
 *
 * Every multi-byte field is big endian. A packet is
 *
 *   Ethernet | IPv4 or IPv6 | UDP | metaroce_bth | extension | payload
 *
 * where the extension is chosen by the opcode (metaroce_ext_len()) and the
 * payload runs to the end of the UDP datagram. The UDP checksum, which
 * senders must fill in, protects headers and payload; there is no ICRC.
 */
#ifndef METAROCE_WIRE_H
#define METAROCE_WIRE_H

#include <linux/types.h>

/*
 * UDP destination port of MetaRoCE packets. Not IANA assigned; the kernel
 * module's udp_port parameter overrides it. RoCEv2's 4791 stays free.
 */
#define METAROCE_UDP_PORT		4793

/*
 * UDP source ports carry the path entropy that ECMP hashes on: a sender
 * uses METAROCE_ENTROPY_BASE | (14-bit entropy value of the path).
 */
#define METAROCE_ENTROPY_BASE		0xc000
#define METAROCE_ENTROPY_MASK		0x3fff

#define METAROCE_VERSION		1

/* PSNs and QPNs are 24-bit quantities carried in 32-bit fields. */
#define METAROCE_PSN_MASK		0x00ffffff
#define METAROCE_QPN_MASK		0x00ffffff

/* Width of the selective-ACK bitmap, in packets. */
#define METAROCE_SACK_BITS		256
#define METAROCE_SACK_WORDS		(METAROCE_SACK_BITS / 32)

enum metaroce_opcode {
	METAROCE_OP_SEND	= 0x01,	/* data: into the next receive WQE */
	METAROCE_OP_WRITE	= 0x02,	/* data: at a remote address */
	METAROCE_OP_READ_REQ	= 0x03,	/* read request */
	METAROCE_OP_READ_RESP	= 0x04,	/* data: read response */
	METAROCE_OP_UD_SEND	= 0x05,	/* data: datagram (UD and GSI QPs) */
	METAROCE_OP_ATOMIC_CMP_SWP	= 0x06,	/* atomic compare and swap */
	METAROCE_OP_ATOMIC_FETCH_ADD	= 0x07,	/* atomic fetch and add */
	METAROCE_OP_ATOMIC_RESP	= 0x08,	/* the original value, 8 bytes */
	METAROCE_OP_ACK		= 0x10,	/* ACK or NAK with SACK bitmap */
};

/* metaroce_bth.flags */
#define METAROCE_F_FIRST	0x01	/* first packet of a message */
#define METAROCE_F_LAST		0x02	/* last packet of a message */
#define METAROCE_F_IMM		0x04	/* message carries immediate data */
#define METAROCE_F_SOLICITED	0x08	/* solicited event requested */
#define METAROCE_F_ACK_REQ	0x10	/* receiver should ACK at once */
#define METAROCE_F_RETX		0x20	/* retransmission */
/*
 * Last packet of a SEND with invalidate: deth.imm holds a key of the
 * receiver's that it invalidates when the message completes. Never with
 * METAROCE_F_IMM (protocol.md section 6).
 */
#define METAROCE_F_INV		0x40
#define METAROCE_F_ALL		0x7f

/* Base transport header, first in every packet: 24 bytes. */
struct metaroce_bth {
	__u8	version;	/* high nibble: METAROCE_VERSION; low: 0 */
	__u8	opcode;		/* enum metaroce_opcode */
	__u8	flags;		/* METAROCE_F_* */
	__u8	stream;		/* ordered stream within the connection */
	__be32	dqpn;		/* destination QP (24 bits; top byte 0) */
	__be32	sqpn;		/* source QP (24 bits; top byte 0) */
	__be32	psn;		/* packet sequence number (24 bits; top byte 0) */
	__be16	path;		/* sender's path index, echoed in ACKs */
	__be16	reserved;	/* 0 */
	__be32	ts;		/* sender's clock, microseconds, echoed in ACKs */
};

/*
 * Placement header of every data-carrying packet (SEND, WRITE, READ_RESP,
 * UD_SEND): 24 bytes. Each packet names its own destination, so the
 * receiver places it on arrival, in any order.
 */
struct metaroce_deth {
	/*
	 * WRITE: remote virtual address of the first payload byte.
	 * SEND, READ_RESP: byte offset of the payload within the message.
	 * UD_SEND: 0.
	 */
	__be64	addr;
	__be32	key;		/* WRITE: rkey. UD_SEND: Q_Key. Others: 0 */
	__be32	msn;		/* message number in the stream */
	__be32	msg_len;	/* length of the whole message in bytes */
	__be32	imm;		/* immediate data (F_IMM), or the key (F_INV) */
};

/*
 * Read request: 24 bytes. The request with PSN p asks for the bytes
 * [offset, offset + len) of a READ whose response packets carry PSNs
 * p, p + 1, ...; a re-read of a lost part repeats the READ's msn with the
 * PSN and offset of the first missing response packet.
 */
struct metaroce_rreq {
	__be64	va;		/* remote address of byte 'offset' of the READ */
	__be32	rkey;
	__be32	len;		/* bytes asked for by this request */
	__be32	offset;		/* offset within the READ */
	__be32	msn;		/* the READ's message number in the stream */
};

/*
 * Atomic request (ATOMIC_CMP_SWP, ATOMIC_FETCH_ADD): 32 bytes. It takes one
 * PSN; its ATOMIC_RESP carries the same PSN, a DETH (addr 0, key 0, the
 * request's msn, msg_len 8, imm 0) and the 8-byte value the responder's
 * memory held before the operation. A retransmitted request is answered
 * from the responder's record of executed atomics, never executed twice
 * (protocol.md section 6).
 */
struct metaroce_areq {
	__be64	va;		/* remote address, a multiple of 8 */
	__be32	rkey;
	__be32	msn;		/* message number in the stream, as a READ's */
	__be64	swap_add;	/* CMP_SWP: the new value; FETCH_ADD: addend */
	__be64	compare;	/* CMP_SWP: the expected value; FETCH_ADD: 0 */
};

/* metaroce_ack.syndrome */
enum metaroce_syndrome {
	METAROCE_ACK			= 0x00,
	METAROCE_NAK_RNR		= 0x01,	/* no receive WQE posted */
	METAROCE_NAK_INVALID_REQ	= 0x02,	/* malformed or unsupported */
	METAROCE_NAK_REMOTE_ACCESS	= 0x03,	/* rkey, bounds or rights */
	METAROCE_NAK_REMOTE_OP		= 0x04,	/* responder failure */
	METAROCE_NAK_VERSION		= 0x05,	/* version not supported */
};

/*
 * ACK (or NAK when syndrome != 0): 56 bytes after the BTH, whose psn field
 * holds cum_psn too. Every PSN before cum_psn has been received; bit i of
 * the bitmap (word i / 32, bit i % 32, most significant first) says
 * whether cum_psn + 1 + i has been received.
 */
struct metaroce_ack {
	__be32	cum_psn;	/* first PSN not yet received */
	__be32	nak_psn;	/* NAK: the PSN refused; ACK: 0 */
	__u8	syndrome;	/* enum metaroce_syndrome */
	__u8	nak_arg;	/* RNR: timer (IB encoding); VERSION: highest */
	__be16	ce_count;	/* CE-marked packets since the previous ACK */
	__be16	fair_share;	/* receiver's window hint in packets, 0: none */
	__be16	echo_path;	/* path of the packet that triggered this ACK */
	__be32	ts_echo;	/* its ts */
	__be32	msn;		/* messages of stream 0 completed so far */
	__be32	sack[METAROCE_SACK_WORDS];
};

#define METAROCE_BTH_LEN	24
#define METAROCE_DETH_LEN	24
#define METAROCE_RREQ_LEN	24
#define METAROCE_AREQ_LEN	32
/* The operand of an atomic: one 64-bit word, 8-byte aligned. */
#define METAROCE_ATOMIC_LEN	8
#define METAROCE_ACK_LEN	56

/* Largest header stack: BTH + extension. */
#define METAROCE_MAX_TRANSPORT_HDR	(METAROCE_BTH_LEN + METAROCE_ACK_LEN)

/* Length of the extension header of an opcode, or -1 if it is unknown. */
static inline int metaroce_ext_len(__u8 opcode)
{
	switch (opcode) {
	case METAROCE_OP_SEND:
	case METAROCE_OP_WRITE:
	case METAROCE_OP_READ_RESP:
	case METAROCE_OP_UD_SEND:
	case METAROCE_OP_ATOMIC_RESP:
		return METAROCE_DETH_LEN;
	case METAROCE_OP_READ_REQ:
		return METAROCE_RREQ_LEN;
	case METAROCE_OP_ATOMIC_CMP_SWP:
	case METAROCE_OP_ATOMIC_FETCH_ADD:
		return METAROCE_AREQ_LEN;
	case METAROCE_OP_ACK:
		return METAROCE_ACK_LEN;
	default:
		return -1;
	}
}

/* Whether packets of this opcode carry a payload. */
static inline int metaroce_op_has_payload(__u8 opcode)
{
	return opcode == METAROCE_OP_SEND || opcode == METAROCE_OP_WRITE ||
	       opcode == METAROCE_OP_READ_RESP || opcode == METAROCE_OP_UD_SEND ||
	       opcode == METAROCE_OP_ATOMIC_RESP;
}

/*
 * Payload bytes of every packet of an RC message but its last (the segment
 * size), for a QP whose path MTU is @path_mtu bytes (protocol.md section 4.1).
 * It is the IB MTU, except for the 1024-byte class: that is the class of a
 * 1500-byte Ethernet MTU, and its packets carry as much as such a frame holds
 * behind IPv6, UDP, BTH and DETH (1404 bytes), rounded down to 8.
 */
#define METAROCE_SEGMENT_ETH1500	1400

static inline __u32 metaroce_segment_size(__u32 path_mtu)
{
	return path_mtu == 1024 ? METAROCE_SEGMENT_ETH1500 : path_mtu;
}

/*
 * Protocol defaults (protocol.md sections 8, 10 and 11): the counts and
 * times of ACK generation, loss detection and recovery that every
 * implementation (the soft-NIC, the C++ model) starts from. Times in
 * microseconds, counts in packets.
 */
#define METAROCE_ACK_EVERY		32	/* data packets per ACK */
#define METAROCE_DELAYED_ACK_US		200
#define METAROCE_ACK_AHEAD_OF_GAP	4	/* unacknowledged, ahead of a gap */
#define METAROCE_REORDER_ALLOWANCE	8	/* the count rule, at the start */
#define METAROCE_MAX_REORDER_ALLOWANCE	128
#define METAROCE_MIN_REORDER_US		1000	/* the time rule's floor */
#define METAROCE_MIN_PROBE_US		1000	/* tail-loss probe floor */
#define METAROCE_MAX_PROBES		2	/* tail-loss probes in a row */
#define METAROCE_MIN_RTO_US		5000
#define METAROCE_INITIAL_RTO_US		20000	/* before the first RTT sample */
#define METAROCE_MAX_RTO_US		2000000
#define METAROCE_RTO_MIN_CWND		16	/* a timeout halves cwnd to this */
#define METAROCE_RX_BUDGET		512	/* the fair-share hint's budget */
#define METAROCE_MIN_FAIR_SHARE		4	/* the smallest hint */
#define METAROCE_REREAD_HISTORY		128	/* re-reads a late fatal NAK may name */

/* Serial-number comparison of 24-bit PSNs: a - b in [-2^23, 2^23). */
static inline __s32 metaroce_psn_diff(__u32 a, __u32 b)
{
	return (__s32)((a - b) << 8) >> 8;
}

#endif /* METAROCE_WIRE_H */
