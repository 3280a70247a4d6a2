/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-2-Clause) */
/*
 * MetaRoCE user/kernel ABI: the driver-private data exchanged through
 * uverbs udata, and the layout of the queues the kernel and the libibverbs
 * provider share through mmap.
 *
 * Shared, unmodified, by the kernel module, the rdma-core provider, the
 * eBPF programs and the C++ userspace.
 *
 * Queues. Send queues, receive queues and completion queues are rings of
 * fixed-size entries after a one-page header (struct metaroce_queue_hdr).
 * Indices are free running 32-bit counters; an entry's slot is
 * index & (num_entries - 1). The producer writes the entry, then publishes
 * it by storing producer + 1 with release semantics; the consumer reads
 * the producer index with acquire semantics. The kernel never trusts what
 * user space wrote: it copies each entry before using it and checks it.
 */
#ifndef METAROCE_ABI_H
#define METAROCE_ABI_H

#include <linux/types.h>

/* Bumped on any incompatible change to what follows. */
#define METAROCE_UVERBS_ABI_VERSION 1

/*
 * The driver id the kernel reports for MetaRoCE devices (uverbs
 * RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID) and the provider puts in its commands.
 * It lies outside the kernel's enum rdma_driver_id, so no other provider
 * claims the device.
 */
#define METAROCE_DRIVER_ID 0x4d52

/*
 * The provider also recognises a MetaRoCE device by this node description,
 * which the driver sets and does not let anyone change.
 */
#define METAROCE_NODE_DESC "metaroce"

/* Size of the header before the entries of a queue. */
#define METAROCE_QUEUE_HDR_SIZE 4096

struct metaroce_queue_hdr {
	__u32	producer;	/* written only by the producer */
	__u32	pad0[15];
	__u32	consumer;	/* written only by the consumer */
	__u32	pad1[15];
	/*
	 * Send queue: set by the kernel when its transmit engine has gone
	 * idle and needs a doorbell (a POST_SEND command with no work
	 * requests) to notice new entries. Completion queue: unused.
	 */
	__u32	doorbell_needed;
	__u32	pad2[15];
};

/* Scatter/gather element, as in a work request. */
struct metaroce_sge {
	__aligned_u64	addr;
	__u32		length;
	__u32		lkey;
};

/*
 * metaroce_send_wqe.opcode: the IB_UVERBS_WR_* value of the request.
 * BIND_MW and LOCAL_INV (of a type 2 window's key) came with memory
 * windows; they use fields that were reserved, so the ABI version stayed:
 * a kernel without windows has no alloc_mw and never sees them.
 */

/* metaroce_send_wqe.flags */
#define METAROCE_WQE_SIGNALED	0x01	/* IBV_SEND_SIGNALED */
#define METAROCE_WQE_SOLICITED	0x02	/* IBV_SEND_SOLICITED */
#define METAROCE_WQE_INLINE	0x04	/* IBV_SEND_INLINE: data in sge[] area */
#define METAROCE_WQE_FENCE	0x08	/* IBV_SEND_FENCE */

/*
 * A send work request: a 64-byte head and then either num_sge SGEs or
 * inline_len bytes of inline data, padded to the queue's stride.
 */
struct metaroce_send_wqe {
	__aligned_u64	wr_id;
	__u32		opcode;
	__u32		flags;
	__u32		num_sge;
	__u32		inline_len;
	union {
		__be32		imm_data;	/* *_WITH_IMM */
		__u32		invalidate_rkey; /* SEND_WITH_INV, LOCAL_INV */
	};
	__u32		reserved0;
	union {
		struct {
			__aligned_u64	remote_addr;
			__u32		rkey;
			__u32		reserved;
		} rdma;
		/*
		 * BIND_MW: the window's range and new R_Key (the window's
		 * key with the consumer's low 8 bits: the bits above them
		 * must be the window's), and any key it had (the kernel
		 * finds the window by the bits above the low 8).
		 */
		struct {
			__aligned_u64	addr;
			__u32		rkey;
			__u32		mw_rkey;
		} bind;
		struct {
			__u32		ah;	/* AH handle from create_ah */
			__u32		remote_qpn;
			__u32		remote_qkey;
			__u32		reserved;
		} ud;
	};
	union {
		__u32		reserved1[4];
		/*
		 * ATOMIC_CMP_AND_SWP, ATOMIC_FETCH_AND_ADD (with rdma above):
		 * the compare value or the addend, and the swap value.
		 */
		struct {
			__aligned_u64	compare_add;
			__aligned_u64	swap;
		} atomic;
		/*
		 * BIND_MW (with bind above): the window's length (0 unbinds a
		 * type 1 window), the MR it is bound to, and its rights
		 * (IB_UVERBS_ACCESS_* bits).
		 */
		struct {
			__aligned_u64	length;
			__u32		mr_lkey;
			__u32		access;
		} bind_mr;
	};
	/* followed by the SGEs or the inline data */
};

/* A receive work request: a 16-byte head and num_sge SGEs. */
struct metaroce_recv_wqe {
	__aligned_u64	wr_id;
	__u32		num_sge;
	__u32		reserved;
	/* followed by the SGEs */
};

/* metaroce_cqe.flags */
#define METAROCE_CQE_WITH_IMM	0x01	/* imm_data is valid */
#define METAROCE_CQE_GRH	0x02	/* a network header precedes the data */
#define METAROCE_CQE_WITH_INV	0x04	/* invalidated_rkey is valid */

/* metaroce_cqe.network_hdr_type: enum rdma_network_type values */
#define METAROCE_NETWORK_IPV4	2	/* RDMA_NETWORK_IPV4 */
#define METAROCE_NETWORK_IPV6	3	/* RDMA_NETWORK_IPV6 */

/* A completion: 64 bytes. status and opcode use the ibv_wc_* values. */
struct metaroce_cqe {
	__aligned_u64	wr_id;
	__u32		status;		/* enum ibv_wc_status */
	__u32		opcode;		/* enum ibv_wc_opcode */
	__u32		vendor_err;
	__u32		byte_len;
	union {
		__be32		imm_data;
		__u32		invalidated_rkey;	/* METAROCE_CQE_WITH_INV */
	};
	__u32		qp_num;
	__u32		src_qp;
	__u32		flags;		/* METAROCE_CQE_* */
	__u16		pkey_index;
	__u8		network_hdr_type;
	__u8		reserved0;
	__u8		smac[6];
	__u16		vlan_id;
	__u32		reserved1[3];
};

/* ibv_get_context() response. */
struct metaroce_alloc_context_resp {
	__u32	abi_version;	/* METAROCE_UVERBS_ABI_VERSION */
	__u32	reserved;
};

/* Where a queue is: mmap() the context's fd at 'offset' for 'size' bytes. */
struct metaroce_queue_info {
	__aligned_u64	offset;
	__u32		size;		/* header plus entries, in bytes */
	__u32		num_entries;	/* a power of two */
	__u32		entry_size;	/* the stride, a power of two */
	__u32		reserved;
};

struct metaroce_create_cq_resp {
	struct metaroce_queue_info	cq;
};

struct metaroce_resize_cq_resp {
	struct metaroce_queue_info	cq;
};

struct metaroce_create_qp_resp {
	struct metaroce_queue_info	sq;
	struct metaroce_queue_info	rq;	/* all zero on an SRQ */
	__u32	max_inline_data;
	__u32	reserved;
};

struct metaroce_create_srq_resp {
	struct metaroce_queue_info	rq;	/* recv WQEs, as an RQ's */
};

struct metaroce_create_ah_resp {
	__u32	ah;		/* handle to put in metaroce_send_wqe.ud.ah */
	__u32	reserved;
};

#endif /* METAROCE_ABI_H */
