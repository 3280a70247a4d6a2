// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Protocol version 2's packets from and to bytes (protocol-v2.md section
 * 7). Parsing is where hostile input meets the transport: it takes any
 * bytes, refuses what no correct sender sends with a reason the caller
 * counts, and hands on only packets whose offset, length and address fit
 * together, so the layers above need not check the wire's arithmetic.
 */
#include "mrc_wire.h"

static u16 get16(const u8 *p)
{
	return (u16)(p[0] << 8 | p[1]);
}

static u32 get32(const u8 *p)
{
	return (u32)p[0] << 24 | (u32)p[1] << 16 | (u32)p[2] << 8 | p[3];
}

static u64 get64(const u8 *p)
{
	return (u64)get32(p) << 32 | get32(p + 4);
}

static void put16(u8 *p, u16 v)
{
	p[0] = v >> 8;
	p[1] = v;
}

static void put32(u8 *p, u32 v)
{
	put16(p, v >> 16);
	put16(p + 2, v);
}

static void put64(u8 *p, u64 v)
{
	put32(p, v >> 32);
	put32(p + 4, v);
}

static u16 saturate16(u32 v)
{
	return v > 0xffff ? 0xffff : v;
}

static const struct mrc_opcode_info *lookup(u8 opcode)
{
	if (opcode >= MRC_NUM_OPCODES || !mrc_opcode[opcode].name)
		return NULL;
	return &mrc_opcode[opcode];
}

/*
 * The transport header's rules, in byte order, so that a packet wrong in
 * two ways gets one answer: reserved bits and fields are 0, and so are the
 * fields the opcode does not use, so they can be given meaning later.
 */
static enum mrc_wire_error check_header(const struct mrc_hdr *h, u8 byte3,
					u16 delta, u16 mask)
{
	bool seq = mask & MRC_OPM_SEQ, ack = mask & MRC_OPM_ACK;

	if ((h->flags & ~MRC_F_ALL) || (ack && h->flags) ||
	    (!seq && (h->flags & (MRC_F_ACK_REQ | MRC_F_RETX | MRC_F_EARLY))))
		return MRC_WIRE_RESERVED;
	if (h->path >= MRC_MAX_PATHS)
		return MRC_WIRE_PATH;
	if (byte3 || (!seq && (h->seq || delta)))
		return MRC_WIRE_RESERVED;
	if (delta > MRC_MAX_FLOOR_DELTA)
		return MRC_WIRE_FLOOR;
	if (!(mask & MRC_OPM_SEG) && (h->stream || h->ssn || h->msn))
		return MRC_WIRE_RESERVED;
	if (ack && (h->offset || h->msg_len))
		return MRC_WIRE_RESERVED;
	return MRC_WIRE_OK;
}

static enum mrc_wire_error parse_ext(const u8 *p, u16 mask, struct mrc_pkt *pkt)
{
	struct mrc_ack_info *ack = &pkt->ack;
	u32 i;

	if (mask & MRC_OPM_RETH) {
		pkt->reth.va = get64(p);
		pkt->reth.rkey = get32(p + 8);
		if (get32(p + 12))
			return MRC_WIRE_RESERVED;
		p += MRC_RETH_LEN;
	} else if (mask & MRC_OPM_ATOMIC) {
		pkt->atomic.va = get64(p);
		pkt->atomic.rkey = get32(p + 8);
		if (get32(p + 12))
			return MRC_WIRE_RESERVED;
		pkt->atomic.swap_add = get64(p + 16);
		pkt->atomic.compare = get64(p + 24);
		p += MRC_ATOMIC_LEN;
	} else if (mask & MRC_OPM_DETH) {
		pkt->deth.qkey = get32(p);
		pkt->deth.src_qpn = get32(p + 4);
		p += MRC_DETH_LEN;
	} else if (mask & MRC_OPM_ACK) {
		ack->path.cum = get32(p);
		for (i = 0; i < MRC_SACK_BITS / 8; i++)
			ack->path.bits[i / 8] |= (u64)p[4 + i] << (8 * (i % 8));
		ack->path.ack_delay_us = get16(p + 36);
		ack->path.ce = get16(p + 38);
		ack->share = get16(p + 40);
		if (get16(p + 42))
			return MRC_WIRE_RESERVED;
		ack->capacity_mbps = get32(p + 44);
		p += MRC_ACK_LEN;
	} else if (mask & MRC_OPM_NAK) {
		pkt->nak.syndrome = p[0];
		pkt->nak.arg = p[1];
		pkt->nak.ssn = get32(p + 4);
		if (pkt->nak.syndrome < MRC_NAK_RNR ||
		    pkt->nak.syndrome > MRC_NAK_REMOTE_OP)
			return MRC_WIRE_SYNDROME;
		if (get16(p + 2))
			return MRC_WIRE_RESERVED;
		p += MRC_NAK_LEN;
	}
	if (mask & MRC_OPM_IMM)
		pkt->imm = get32(p);
	return MRC_WIRE_OK;
}

/*
 * A segment's bytes lie within its message, a message within the address
 * space; a packet with no bytes of a message names none.
 */
static bool fits(const struct mrc_pkt *pkt, u16 mask)
{
	const struct mrc_hdr *h = &pkt->hdr;

	if (mask & MRC_OPM_PAYLOAD) {
		if ((u64)h->offset + pkt->payload_len > h->msg_len)
			return false;
		if (!pkt->payload_len && h->msg_len)
			return false;
		/* A datagram is one packet. */
		if (!(mask & MRC_OPM_SEG) && h->offset)
			return false;
		if (!(mask & MRC_OPM_SEG) && h->msg_len != pkt->payload_len)
			return false;
	} else if (h->offset) {
		return false;
	}
	if ((mask & MRC_OPM_RETH) && pkt->reth.va + h->msg_len < pkt->reth.va)
		return false;
	if ((mask & MRC_OPM_ATOMIC) &&
	    (h->msg_len != MRC_ATOMIC_VALUE_LEN ||
	     pkt->atomic.va + MRC_ATOMIC_VALUE_LEN < pkt->atomic.va))
		return false;
	if (h->opcode == MRC_OP_ATOMIC_RESP && h->msg_len != MRC_ATOMIC_VALUE_LEN)
		return false;
	if ((mask & MRC_OPM_NAK) && h->msg_len)
		return false;
	return true;
}

enum mrc_wire_error mrc_wire_parse(const u8 *buf, u32 len, struct mrc_pkt *pkt)
{
	const struct mrc_opcode_info *op;
	struct mrc_hdr *h = &pkt->hdr;
	enum mrc_wire_error err;
	u16 delta;

	memset(pkt, 0, sizeof(*pkt));
	if (len < MRC_HDR_LEN)
		return MRC_WIRE_SHORT;
	if (buf[0] >> 4 != MRC_VERSION)
		return MRC_WIRE_VERSION;
	op = lookup(buf[1]);
	if (!op)
		return MRC_WIRE_OPCODE;
	if (len < op->length)
		return MRC_WIRE_SHORT;
	h->flags = buf[0] & 0xf;
	h->opcode = buf[1];
	h->path = buf[2];
	h->conn = get32(buf + 4);
	h->seq = get32(buf + 8);
	delta = get16(buf + 12);
	h->floor_delta = delta;
	h->stream = get16(buf + 14);
	h->ssn = get32(buf + 16);
	h->msn = get32(buf + 20);
	h->offset = get32(buf + 24);
	h->msg_len = get32(buf + 28);
	err = check_header(h, buf[3], delta, op->mask);
	if (err)
		return err;
	err = parse_ext(buf + MRC_HDR_LEN, op->mask, pkt);
	if (err)
		return err;
	pkt->payload = buf + op->length;
	pkt->payload_len = len - op->length;
	if (pkt->payload_len && !(op->mask & MRC_OPM_PAYLOAD))
		return MRC_WIRE_PAYLOAD;
	if (!fits(pkt, op->mask))
		return MRC_WIRE_BOUNDS;
	return MRC_WIRE_OK;
}

static void build_ext(const struct mrc_pkt *pkt, u16 mask, u8 *p)
{
	const struct mrc_ack_info *ack = &pkt->ack;
	u32 i;

	if (mask & MRC_OPM_RETH) {
		put64(p, pkt->reth.va);
		put32(p + 8, pkt->reth.rkey);
		put32(p + 12, 0);
		p += MRC_RETH_LEN;
	} else if (mask & MRC_OPM_ATOMIC) {
		put64(p, pkt->atomic.va);
		put32(p + 8, pkt->atomic.rkey);
		put32(p + 12, 0);
		put64(p + 16, pkt->atomic.swap_add);
		put64(p + 24, pkt->atomic.compare);
		p += MRC_ATOMIC_LEN;
	} else if (mask & MRC_OPM_DETH) {
		put32(p, pkt->deth.qkey);
		put32(p + 4, pkt->deth.src_qpn);
		p += MRC_DETH_LEN;
	} else if (mask & MRC_OPM_ACK) {
		put32(p, ack->path.cum);
		for (i = 0; i < MRC_SACK_BITS / 8; i++)
			p[4 + i] = ack->path.bits[i / 8] >> (8 * (i % 8));
		put16(p + 36, saturate16(ack->path.ack_delay_us));
		put16(p + 38, saturate16(ack->path.ce));
		put16(p + 40, ack->share);
		put16(p + 42, 0);
		put32(p + 44, ack->capacity_mbps);
		p += MRC_ACK_LEN;
	} else if (mask & MRC_OPM_NAK) {
		p[0] = pkt->nak.syndrome;
		p[1] = pkt->nak.arg;
		put16(p + 2, 0);
		put32(p + 4, pkt->nak.ssn);
		p += MRC_NAK_LEN;
	}
	if (mask & MRC_OPM_IMM)
		put32(p, pkt->imm);
}

/*
 * Writes @pkt's transport header and extensions into @buf; the caller
 * appends the payload. Returns their length, or 0 when @room is short or
 * the opcode is not one.
 */
u32 mrc_wire_build(const struct mrc_pkt *pkt, u8 *buf, u32 room)
{
	const struct mrc_hdr *h = &pkt->hdr;
	const struct mrc_opcode_info *op = lookup(h->opcode);

	if (!op || room < op->length)
		return 0;
	buf[0] = MRC_VERSION << 4 | (h->flags & MRC_F_ALL);
	buf[1] = h->opcode;
	buf[2] = h->path;
	buf[3] = 0;
	put32(buf + 4, h->conn);
	put32(buf + 8, h->seq);
	put16(buf + 12, h->floor_delta);
	put16(buf + 14, h->stream);
	put32(buf + 16, h->ssn);
	put32(buf + 20, h->msn);
	put32(buf + 24, h->offset);
	put32(buf + 28, h->msg_len);
	build_ext(pkt, op->mask, buf + MRC_HDR_LEN);
	return op->length;
}

const char *mrc_wire_error_name(enum mrc_wire_error err)
{
	static const char *const names[MRC_WIRE_NUM_ERRORS] = {
		[MRC_WIRE_OK] = "ok",
		[MRC_WIRE_SHORT] = "short",
		[MRC_WIRE_VERSION] = "version",
		[MRC_WIRE_OPCODE] = "opcode",
		[MRC_WIRE_RESERVED] = "reserved",
		[MRC_WIRE_PATH] = "path",
		[MRC_WIRE_FLOOR] = "floor",
		[MRC_WIRE_PAYLOAD] = "payload",
		[MRC_WIRE_BOUNDS] = "bounds",
		[MRC_WIRE_SYNDROME] = "syndrome",
	};

	if ((unsigned int)err >= MRC_WIRE_NUM_ERRORS)
		return "unknown";
	return names[err];
}
