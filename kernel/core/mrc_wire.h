/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Protocol version 2 on the wire (protocol-v2.md section 7): the opcodes,
 * their table, and the packet as its fields, which mrc_wire.c parses from
 * and builds into bytes. The one place that knows the byte layout; it is
 * not user ABI, so it lives here and not in uapi.
 */
#ifndef MRC_WIRE_H
#define MRC_WIRE_H

#include "mrc_conn.h"

#define MRC_UDP_PORT		4793	/* the destination port */
#define MRC_ENTROPY_BASE	0xc000	/* source port = base | entropy */
#define MRC_ENTROPY_MASK	0x3fff
#define MRC_VERSION		2
#define MRC_MAX_FLOOR_DELTA	254	/* a path's sequence past its floor */
#define MRC_MAX_REQUESTS	128	/* READs and atomics out: max_rd_atomic */

/* The transport header's flags: its low four bits. */
#define MRC_F_ACK_REQ		0x1	/* acknowledge this path at once */
#define MRC_F_RETX		0x2	/* a resend of a segment */
#define MRC_F_SOLICITED		0x4	/* solicited event requested */
#define MRC_F_EARLY		0x8	/* the stream began in its sender's RTR */
#define MRC_F_ALL		0xf

enum mrc_opcode {
	MRC_OP_SEND		= 0x01,
	MRC_OP_SEND_IMM		= 0x02,
	MRC_OP_SEND_INV		= 0x03,
	MRC_OP_WRITE		= 0x04,
	MRC_OP_WRITE_IMM	= 0x05,
	MRC_OP_READ_REQ		= 0x06,
	MRC_OP_READ_RESP	= 0x07,
	MRC_OP_CMP_SWP		= 0x08,
	MRC_OP_FETCH_ADD	= 0x09,
	MRC_OP_ATOMIC_RESP	= 0x0a,
	MRC_OP_NAK		= 0x0b,
	MRC_OP_UD_SEND		= 0x0c,
	MRC_OP_UD_SEND_IMM	= 0x0d,
	MRC_OP_ACK		= 0x10,
	MRC_NUM_OPCODES		= 0x11,
};

/* What a packet of an opcode carries and means: the table's mask. */
enum mrc_op_mask {
	MRC_OPM_SEQ	= 1 << 0,	/* sequenced on a path, acknowledged */
	MRC_OPM_SEG	= 1 << 1,	/* a segment of a stream: SSN, MSN */
	MRC_OPM_PAYLOAD	= 1 << 2,	/* carries message bytes */
	MRC_OPM_RESP	= 1 << 3,	/* answers a request: MSN is its */
	MRC_OPM_RECV	= 1 << 4,	/* consumes a receive WQE */
	MRC_OPM_RETH	= 1 << 5,	/* extension: address, R_Key */
	MRC_OPM_IMM	= 1 << 6,	/* extension: immediate or key */
	MRC_OPM_ATOMIC	= 1 << 7,	/* extension: address, key, operands */
	MRC_OPM_DETH	= 1 << 8,	/* extension: Q_Key, source QP */
	MRC_OPM_ACK	= 1 << 9,	/* extension: a path's ACK */
	MRC_OPM_NAK	= 1 << 10,	/* extension: syndrome, refused SSN */
	MRC_OPM_REQ	= 1 << 11,	/* a request the responder answers */
};

/* Byte lengths of the transport header and of each extension. */
#define MRC_HDR_LEN		32
#define MRC_RETH_LEN		16
#define MRC_IMM_LEN		4
#define MRC_ATOMIC_LEN		32
#define MRC_DETH_LEN		8
#define MRC_ACK_LEN		48
#define MRC_NAK_LEN		8
#define MRC_ATOMIC_VALUE_LEN	8	/* an ATOMIC_RESP's payload */
#define MRC_MAX_HDRS_LEN	(MRC_HDR_LEN + MRC_ACK_LEN)

struct mrc_opcode_info {
	const char *name;
	u16 mask;		/* enum mrc_op_mask */
	u8 length;		/* transport header and extensions */
};

/* Indexed by opcode; an entry with no name is not an opcode. */
extern const struct mrc_opcode_info mrc_opcode[MRC_NUM_OPCODES];

/* enum mrc_nak.syndrome */
enum mrc_syndrome {
	MRC_NAK_RNR		= 0x01,	/* no receive WQE posted */
	MRC_NAK_INVALID_REQ	= 0x02,	/* malformed or unsupported */
	MRC_NAK_REMOTE_ACCESS	= 0x03,	/* R_Key, bounds or rights */
	MRC_NAK_REMOTE_OP	= 0x04,	/* the responder failed */
};

/* The transport header, in every packet. */
struct mrc_hdr {
	u8 flags;		/* MRC_F_* */
	u8 opcode;		/* enum mrc_opcode */
	u8 path;		/* the sender's path index; ACK: the path acked */
	u32 conn;		/* the receiver's connection identifier */
	u32 seq;		/* the transmission's path sequence */
	u8 floor_delta;		/* seq minus the sender's floor */
	u16 stream;
	u32 ssn;		/* the segment's stream sequence */
	u32 msn;		/* its message; a response: the request's */
	u32 offset;		/* its first byte within the message */
	u32 msg_len;		/* the whole message's length */
};

struct mrc_reth {
	u64 va;			/* the message's first byte, remotely */
	u32 rkey;
};

struct mrc_atomic {
	u64 va;
	u32 rkey;
	u64 swap_add;		/* CMP_SWP: the new value; FETCH_ADD: addend */
	u64 compare;		/* CMP_SWP: the expected value */
};

struct mrc_deth {
	u32 qkey;
	u32 src_qpn;
};

struct mrc_ack_info {
	struct mrc_path_ack path;	/* of the header's path */
	u16 share;		/* of MRC_FAIR_FULL, granted to the sender */
	u32 capacity_mbps;	/* the receiver's inbound capacity */
};

struct mrc_nak {
	u8 syndrome;		/* enum mrc_syndrome */
	u8 arg;			/* RNR: the timer, in IB's encoding */
	u32 ssn;		/* the segment refused, in the sender's stream */
};

/* A packet as its fields; which extensions hold is the opcode's mask. */
struct mrc_pkt {
	struct mrc_hdr hdr;
	union {
		struct mrc_reth reth;
		struct mrc_atomic atomic;
		struct mrc_deth deth;
		struct mrc_ack_info ack;
		struct mrc_nak nak;
	};
	u32 imm;		/* immediate data, or SEND_INV's key */
	const u8 *payload;	/* parse: into the buffer parsed */
	u32 payload_len;
};

/* Why a packet was refused: each has a counter. */
enum mrc_wire_error {
	MRC_WIRE_OK,
	MRC_WIRE_SHORT,		/* shorter than its headers */
	MRC_WIRE_VERSION,
	MRC_WIRE_OPCODE,	/* not in the table */
	MRC_WIRE_RESERVED,	/* a reserved bit or field is not 0 */
	MRC_WIRE_PATH,		/* path index past MRC_MAX_PATHS */
	MRC_WIRE_FLOOR,		/* floor more than MRC_MAX_FLOOR_DELTA back */
	MRC_WIRE_PAYLOAD,	/* bytes on an opcode that carries none */
	MRC_WIRE_BOUNDS,	/* offset, length and address do not fit */
	MRC_WIRE_SYNDROME,	/* a NAK's syndrome is not one of ours */
	MRC_WIRE_NUM_ERRORS,
};

enum mrc_wire_error mrc_wire_parse(const u8 *buf, u32 len, struct mrc_pkt *pkt);
u32 mrc_wire_build(const struct mrc_pkt *pkt, u8 *buf, u32 room);
const char *mrc_wire_error_name(enum mrc_wire_error err);

#endif /* MRC_WIRE_H */
