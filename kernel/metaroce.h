/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * MetaRoCE: core objects of the soft RDMA device.
 *
 * A metaroce_dev is one ib_device bound to one Ethernet netdev. The verbs
 * layer owns it; the transport behind it is reached only through the
 * NIC-engine interface (metaroce_engine.h).
 */
#ifndef METAROCE_H
#define METAROCE_H

#include <linux/netdevice.h>
#include <linux/list.h>
#include <linux/xarray.h>
#include <rdma/ib_verbs.h>
#include <uapi/rdma/metaroce_abi.h>
#include <uapi/rdma/metaroce_wire.h>

#include "metaroce_queue.h"

struct mrc_fair_rx;
#include "metaroce_counters.h"

#define METAROCE_PORT		1
#define METAROCE_GID_TBL_LEN	128
#define METAROCE_VENDOR_ID	0xffffff
#define METAROCE_VENDOR_PART_ID	0x4d52	/* "MR" */
#define METAROCE_HW_VER		1
#define METAROCE_FW_VER		((u64)METAROCE_UVERBS_ABI_VERSION << 32)

/* Resource limits advertised through ib_query_device(). */
#define METAROCE_MAX_QP		BIT(16)
#define METAROCE_MAX_QP_WR	BIT(14)
#define METAROCE_MAX_SGE	16
#define METAROCE_MAX_CQ		BIT(16)
/* rxm, libfabric's RDM layer, asks for 2^18 CQEs by default. */
#define METAROCE_MAX_CQE	(BIT(20) - 1)
#define METAROCE_MAX_MR		BIT(20)
#define METAROCE_MAX_MW		BIT(16)
/* Pages of a fast-registration MR: 2 MiB in 4 KiB pages. */
#define METAROCE_MAX_FR_PAGES	512
#define METAROCE_MAX_PD		BIT(16)
#define METAROCE_MAX_AH		BIT(16)
#define METAROCE_MAX_SRQ	BIT(16)
#define METAROCE_MAX_SRQ_WR	BIT(16)
#define METAROCE_MAX_RD_ATOMIC	128
#define METAROCE_MAX_MR_SIZE	BIT_ULL(40)
#define METAROCE_MAX_MSG_SIZE	BIT(31)

#define METAROCE_MAX_INLINE	256
#define METAROCE_MIN_QPN	2	/* 0 and 1 are the SMI and GSI QPs */
#define METAROCE_GSI_QPN	1

/*
 * Headers that wrap each packet's payload, at their largest: IPv6, UDP
 * and the MetaRoCE transport headers. The path MTU leaves room for them.
 */
#define METAROCE_MAX_HDR_LEN	(40 + 8 + METAROCE_BTH_LEN + METAROCE_DETH_LEN)

struct metaroce_engine_ops;

/* Object types counted against the device's limits (metaroce_limits.c). */
enum metaroce_obj {
	METAROCE_OBJ_QP,
	METAROCE_OBJ_CQ,
	METAROCE_OBJ_MR,
	METAROCE_OBJ_PD,
	METAROCE_OBJ_AH,
	METAROCE_OBJ_SRQ,
	METAROCE_OBJ_MW,
	METAROCE_NUM_OBJ
};

struct metaroce_dev {
	struct ib_device ib_dev;
	/* Held (netdev_hold) from creation until dealloc_driver. */
	struct net_device *ndev;
	netdevice_tracker ndev_tracker;

	/* Entry in the module's device registry (metaroce_main.c). */
	struct list_head registry;

	struct ib_device_attr attr;
	/* Objects that exist, and the most there may be (attr's max_*). */
	atomic_t obj_count[METAROCE_NUM_OBJ];
	atomic_t zc_skbs;		/* skbs with pages of its MRs */
	u32 obj_limit[METAROCE_NUM_OBJ];
	/*
	 * Port state and MTU are read live from the netdev; this is only the
	 * state last announced with a port event (written under RTNL).
	 */
	enum ib_port_state reported_port_state;

	/* Set once the engine has opened the device. */
	const struct metaroce_engine_ops *engine;

	/* Objects found by number: QPN, MR key index, user AH handle. */
	struct xarray qps;
	u32 next_qpn;
	struct xarray mrs;
	struct xarray mws;		/* memory windows, by rkey index */
	atomic64_t qp_serial;		/* last QP's ->serial */
	struct xarray ahs;
	u32 next_ah;

	/* Paths per connection (sysfs: metaroce/paths). */
	unsigned int num_paths;
	/* Wire protocol version, fixed at creation (module parameter). */
	u8 protocol;
	/* Protocol 2: the senders to this device and their shares. */
	struct mrc_fair_rx *fair;
	spinlock_t fair_lock;		/* fair */

	/* Connections that sent data in the last millisecond (fair share). */
	u32 fs_epoch;
	u32 fs_active;
	atomic_t fs_count;

	struct metaroce_counters __percpu *counters;
	struct dentry *debugfs;
};

struct metaroce_ucontext {
	struct ib_ucontext ibuc;
};

struct metaroce_pd {
	struct ib_pd ibpd;
};

/*
 * A memory region. Its key is random bits above its index in mdev->mrs;
 * lkey == rkey. References: one for the registration, one for each user (a
 * work request in flight, a packet being placed). The last put releases
 * the pages, and frees the MR after an RCU grace period (lookups run under
 * RCU).
 *
 * A reference keeps the memory, not the right to use it: deregistration
 * revokes the MR (->revoked), and from then on every access through it
 * fails, whoever holds it (see metaroce_mr_revoke()).
 */
/*
 * A fast-registration MR's translation (ib_alloc_mr()): ib_map_mr_sg()
 * stages page addresses, IB_WR_REG_MR puts them in force with a key and
 * rights, IB_WR_LOCAL_INV or a SEND with invalidate ends that.
 */
struct metaroce_frmr {
	/*
	 * The registration in force (these fields and the MR's key, access,
	 * iova and length) against every access through it: one that holds
	 * the lock sees the registration whole, and none outlives its end.
	 */
	spinlock_t lock;
	bool valid;
	u32 max_pages;
	u32 nstaged;			/* staged by ib_map_mr_sg() */
	u32 npages;			/* in force */
	unsigned int page_shift;	/* of the registration in force */
	u64 *staged;			/* kernel virtual page addresses */
	u64 *pages;
};

struct metaroce_mr {
	struct ib_mr ibmr;
	struct metaroce_dev *mdev;
	refcount_t ref;
	struct work_struct release_work;
	struct rcu_head rcu;
	/*
	 * What lookups match (lkey and rkey are the same). A fast-registration
	 * MR's changes with each registration; its consumer changes the
	 * ib_mr's before it posts one.
	 */
	u32 key;
	/* DMA MR of in-kernel users: addresses are kernel virtual addresses. */
	bool is_dma;
	bool revoked;			/* deregistered: no access at all */
	/* A rereg put another MR in its place (metaroce_rereg_user_mr()). */
	bool replaced;
	atomic_t zc_skbs;		/* skbs with its pages (metaroce_zc.c) */
	int access;			/* IB_ACCESS_* */
	u64 iova;
	u64 length;
	struct ib_umem *umem;
	struct page **pages;		/* the pinned pages, in order */
	unsigned long npages;
	unsigned int page_offset;	/* of iova within pages[0] */
	struct metaroce_frmr *fr;	/* fast registration; else NULL */
	atomic_t num_mw;		/* windows bound to it */
	bool closing;			/* dereg or rereg under way */
};

/*
 * A memory window's binding. Lookups (mdev->mws, by the index in its
 * rkey) and accesses through it run under RCU and hold ->lock while they
 * look at it, so it is freed after a grace period (the ib_mw it belongs
 * to is not: ib_core frees that).
 */
struct metaroce_mw_bind {
	spinlock_t lock;		/* the fields below, against accesses */
	struct rcu_head rcu;
	struct ib_pd *pd;
	enum ib_mw_type type;
	u32 rkey;			/* the key in force (or last) */
	bool bound;
	bool dead;			/* deallocated: never bound again */
	struct metaroce_mr *mr;		/* bound: holds a reference */
	u64 addr;
	u64 length;
	int access;			/* IB_ACCESS_REMOTE_* */
	u64 qp_serial;			/* type 2: the QP it is bound to */
};

struct metaroce_mw {
	struct ib_mw ibmw;
	struct metaroce_mw_bind *b;
};

/* MW rkeys have this bit set, MR keys never (the tables differ). */
#define METAROCE_KEY_MW		BIT(31)

static inline bool metaroce_key_is_mw(u32 key)
{
	return key & METAROCE_KEY_MW;
}

struct metaroce_cq {
	struct ib_cq ibcq;
	spinlock_t lock;		/* producers and kernel pollers */
	struct metaroce_queue queue;
	bool is_user;
	u8 notify;			/* IB_CQ_SOLICITED or IB_CQ_NEXT_COMP */
	bool overflowed;
};

/* Where packets go: the network part of an address vector. */
struct metaroce_av {
	enum rdma_network_type net_type;	/* RDMA_NETWORK_IPV4 or _IPV6 */
	union {
		struct {
			__be32 saddr4;
			__be32 daddr4;
		};
		struct {
			struct in6_addr saddr6;
			struct in6_addr daddr6;
		};
	};
	u8 dmac[ETH_ALEN];
	u8 traffic_class;
	u8 hop_limit;
	u32 flow_label;
};

struct metaroce_ah {
	struct ib_ah ibah;
	struct metaroce_av av;
	u32 handle;			/* user AHs: key in mdev->ahs */
};

/*
 * A shared receive queue. Its ring is the same as an RQ's; the QPs that
 * use it move each WQE they take into a private ring of their own
 * (metaroce_srq_take()), where it belongs to the message it was taken for
 * until that completes, whatever is lost or repeated on the way.
 */
struct metaroce_srq {
	struct ib_srq ibsrq;
	struct metaroce_dev *mdev;
	bool is_user;
	spinlock_t lock;		/* takers: the packet path of its QPs */
	spinlock_t post_lock;		/* in-kernel posters */
	struct metaroce_queue queue;
	u32 max_sge;
	u32 limit;			/* armed while non-zero */
};

/*
 * Receive WQEs a QP on an SRQ holds at once: one per message it can have
 * in flight (a message is one packet at least, the window SACK-sized).
 */
#define METAROCE_SRQ_QP_SLOTS	METAROCE_SACK_BITS

struct metaroce_soft_qp;

struct metaroce_qp {
	struct ib_qp ibqp;
	struct metaroce_dev *mdev;
	/*
	 * The packet path looks QPs up by number and holds a reference while
	 * it works on one; destroy waits for those to drop.
	 */
	refcount_t ref;
	struct completion released;
	/* Never reused, unlike QPNs: what a type 2 MW is bound to. */
	u64 serial;

	struct mutex modify_lock;	/* serialises modify and query */
	spinlock_t state_lock;		/* state changes, from any context */
	enum ib_qp_state state;		/* READ_ONCE from the packet path */
	struct ib_qp_attr attr;		/* as last modified, for query */
	struct metaroce_av av;		/* RC: the peer */
	u32 mtu;			/* payload bytes per packet */

	bool is_user;
	bool sq_sig_all;
	struct metaroce_queue sq;
	struct metaroce_queue rq;
	spinlock_t sq_post_lock;	/* in-kernel posters of the SQ */
	spinlock_t rq_post_lock;	/* in-kernel posters of the RQ */
	u32 max_send_sge;
	u32 max_recv_sge;
	u32 max_inline;
	struct metaroce_cq *scq;
	struct metaroce_cq *rcq;

	/* The engine's own state for this QP. */
	struct metaroce_soft_qp *soft;
};

static inline struct metaroce_dev *to_mdev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct metaroce_dev, ib_dev);
}

static inline struct metaroce_pd *to_mpd(struct ib_pd *ibpd)
{
	return container_of(ibpd, struct metaroce_pd, ibpd);
}

static inline struct metaroce_mw *to_mmw(struct ib_mw *ibmw)
{
	return container_of(ibmw, struct metaroce_mw, ibmw);
}

static inline struct metaroce_mr *to_mmr(struct ib_mr *ibmr)
{
	return container_of(ibmr, struct metaroce_mr, ibmr);
}

/* Whether @mr was deregistered; accesses check it inside RCU (metaroce_mr.c). */
static inline bool metaroce_mr_revoked(const struct metaroce_mr *mr)
{
	return READ_ONCE(mr->revoked);
}

static inline struct metaroce_cq *to_mcq(struct ib_cq *ibcq)
{
	return container_of(ibcq, struct metaroce_cq, ibcq);
}

static inline struct metaroce_ah *to_mah(struct ib_ah *ibah)
{
	return container_of(ibah, struct metaroce_ah, ibah);
}

static inline struct metaroce_qp *to_mqp(struct ib_qp *ibqp)
{
	return container_of(ibqp, struct metaroce_qp, ibqp);
}

static inline struct metaroce_srq *to_msrq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct metaroce_srq, ibsrq);
}

/* The SRQ @qp receives from, or NULL if it has an RQ of its own. */
static inline struct metaroce_srq *metaroce_qp_srq(const struct metaroce_qp *qp)
{
	return qp->ibqp.srq ? to_msrq(qp->ibqp.srq) : NULL;
}

/*
 * Kernel-owned send rings (in-kernel users) keep the AH of a datagram WQE
 * as a pointer in the reserved words; user rings name it by handle.
 */
static inline void metaroce_wqe_set_kernel_ah(struct metaroce_send_wqe *wqe,
					      struct metaroce_ah *ah)
{
	BUILD_BUG_ON(sizeof(wqe->reserved1) < sizeof(ah));
	memcpy(wqe->reserved1, &ah, sizeof(ah));
}

static inline struct metaroce_ah *
metaroce_wqe_kernel_ah(const struct metaroce_send_wqe *wqe)
{
	struct metaroce_ah *ah;

	memcpy(&ah, wqe->reserved1, sizeof(ah));
	return ah;
}

/* Kernel-owned send rings keep a REG_MR's new key and rights there too. */
static inline void metaroce_wqe_set_kernel_reg(struct metaroce_send_wqe *wqe,
					       u32 key, u32 access)
{
	wqe->reserved1[0] = key;
	wqe->reserved1[1] = access;
}

static inline void metaroce_wqe_kernel_reg(const struct metaroce_send_wqe *wqe,
					   u32 *key, u32 *access)
{
	*key = wqe->reserved1[0];
	*access = wqe->reserved1[1];
}

static inline void metaroce_qp_put(struct metaroce_qp *qp)
{
	if (refcount_dec_and_test(&qp->ref))
		complete(&qp->released);
}

/*
 * Object lifetime, the same for every object the packet path finds by
 * number (QPs; MRs, whose last user frees them): erase it from its table,
 * drop the table's reference, wait for the last user, and free the memory
 * only after an RCU grace period, since lookups run under RCU.
 *
 * The wait for the last user of @what number @id: a user that does not let
 * go within seconds is a bug, reported once; the wait goes on, since
 * freeing what is in use would be worse.
 */
static inline void metaroce_wait_last_user(struct completion *released,
					   const char *what, u32 id)
{
	if (wait_for_completion_timeout(released, 10 * HZ))
		return;
	WARN_ONCE(1, "metaroce: %s %u still in use 10 s after destroy\n",
		  what, id);
	wait_for_completion(released);
}

#endif /* METAROCE_H */
