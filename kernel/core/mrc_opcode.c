// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The per-opcode table (protocol-v2.md section 7): what each packet
 * carries and means. The parser, the builder and the engine's send and
 * receive paths all ask it, so an opcode's rules are written once.
 */
#include "mrc_wire.h"

#define SEG_DATA	(MRC_OPM_SEQ | MRC_OPM_SEG | MRC_OPM_PAYLOAD)

const struct mrc_opcode_info mrc_opcode[MRC_NUM_OPCODES] = {
	[MRC_OP_SEND] = {
		.name = "SEND",
		.mask = SEG_DATA | MRC_OPM_RECV,
		.length = MRC_HDR_LEN,
	},
	[MRC_OP_SEND_IMM] = {
		.name = "SEND_IMM",
		.mask = SEG_DATA | MRC_OPM_RECV | MRC_OPM_IMM,
		.length = MRC_HDR_LEN + MRC_IMM_LEN,
	},
	[MRC_OP_SEND_INV] = {
		.name = "SEND_INV",
		.mask = SEG_DATA | MRC_OPM_RECV | MRC_OPM_IMM,
		.length = MRC_HDR_LEN + MRC_IMM_LEN,
	},
	[MRC_OP_WRITE] = {
		.name = "WRITE",
		.mask = SEG_DATA | MRC_OPM_RETH,
		.length = MRC_HDR_LEN + MRC_RETH_LEN,
	},
	[MRC_OP_WRITE_IMM] = {
		.name = "WRITE_IMM",
		.mask = SEG_DATA | MRC_OPM_RETH | MRC_OPM_IMM | MRC_OPM_RECV,
		.length = MRC_HDR_LEN + MRC_RETH_LEN + MRC_IMM_LEN,
	},
	[MRC_OP_READ_REQ] = {
		.name = "READ_REQ",
		.mask = MRC_OPM_SEQ | MRC_OPM_SEG | MRC_OPM_REQ | MRC_OPM_RETH,
		.length = MRC_HDR_LEN + MRC_RETH_LEN,
	},
	[MRC_OP_READ_RESP] = {
		.name = "READ_RESP",
		.mask = SEG_DATA | MRC_OPM_RESP,
		.length = MRC_HDR_LEN,
	},
	[MRC_OP_CMP_SWP] = {
		.name = "CMP_SWP",
		.mask = MRC_OPM_SEQ | MRC_OPM_SEG | MRC_OPM_REQ |
			MRC_OPM_ATOMIC,
		.length = MRC_HDR_LEN + MRC_ATOMIC_LEN,
	},
	[MRC_OP_FETCH_ADD] = {
		.name = "FETCH_ADD",
		.mask = MRC_OPM_SEQ | MRC_OPM_SEG | MRC_OPM_REQ |
			MRC_OPM_ATOMIC,
		.length = MRC_HDR_LEN + MRC_ATOMIC_LEN,
	},
	[MRC_OP_ATOMIC_RESP] = {
		.name = "ATOMIC_RESP",
		.mask = SEG_DATA | MRC_OPM_RESP,
		.length = MRC_HDR_LEN,
	},
	[MRC_OP_NAK] = {
		.name = "NAK",
		.mask = MRC_OPM_SEQ | MRC_OPM_SEG | MRC_OPM_RESP | MRC_OPM_NAK,
		.length = MRC_HDR_LEN + MRC_NAK_LEN,
	},
	[MRC_OP_UD_SEND] = {
		.name = "UD_SEND",
		.mask = MRC_OPM_PAYLOAD | MRC_OPM_RECV | MRC_OPM_DETH,
		.length = MRC_HDR_LEN + MRC_DETH_LEN,
	},
	[MRC_OP_UD_SEND_IMM] = {
		.name = "UD_SEND_IMM",
		.mask = MRC_OPM_PAYLOAD | MRC_OPM_RECV | MRC_OPM_DETH |
			MRC_OPM_IMM,
		.length = MRC_HDR_LEN + MRC_DETH_LEN + MRC_IMM_LEN,
	},
	[MRC_OP_ACK] = {
		.name = "ACK",
		.mask = MRC_OPM_ACK,
		.length = MRC_HDR_LEN + MRC_ACK_LEN,
	},
};
