/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The NIC-engine interface: the only way the verbs layer reaches the
 * transport. The soft-NIC (metaroce_soft.c and the files it names) runs
 * MetaRoCE in the kernel over a plain Ethernet netdev; a hardware backend
 * (a programmable NIC) provides the same operations and takes over the
 * data path where present.
 *
 * What the verbs layer owns and an engine may read: the rings of each QP
 * and CQ (struct metaroce_queue), the MR table (metaroce_mr_get()), the
 * AH table (metaroce_ah_lookup()), and the QP's attributes. An engine
 * reports back only through metaroce_cq_post(), metaroce_qp_fail()
 * and metaroce_qp_event().
 */
#ifndef METAROCE_ENGINE_H
#define METAROCE_ENGINE_H

#include <rdma/ib_verbs.h>

struct metaroce_dev;
struct metaroce_qp;

struct metaroce_engine_ops {
	const char *name;

	/*
	 * Prepare the engine for a new device before it is registered with
	 * ib_core (soft-NIC: make sure the UDP endpoint exists in the
	 * netdev's network namespace). Returns 0 or a negative errno.
	 */
	int (*dev_open)(struct metaroce_dev *mdev);
	/* Undo dev_open; called once the device can carry no traffic. */
	void (*dev_close)(struct metaroce_dev *mdev);

	/* A QP's rings exist; set up the engine's state for it. */
	int (*qp_create)(struct metaroce_qp *qp);
	/* The QP is unreachable from the network; release everything. */
	void (*qp_destroy)(struct metaroce_qp *qp);
	/*
	 * The QP went from @old to @new (attributes already applied). Called
	 * in process context for modify_qp, and from any context when the
	 * engine itself fails a QP (then @new is IB_QPS_ERR).
	 */
	int (*qp_state_changed)(struct metaroce_qp *qp, enum ib_qp_state old,
				enum ib_qp_state new);
	/* In SQD: whether every work request taken has completed. */
	bool (*sq_drained)(struct metaroce_qp *qp);
	/* New entries in the send ring (or, in ERR, something to flush). */
	void (*sq_doorbell)(struct metaroce_qp *qp);
	/* New entries in the receive ring. */
	void (*rq_doorbell)(struct metaroce_qp *qp);
};

/* The software engine, always available. */
extern const struct metaroce_engine_ops metaroce_soft_engine;

#endif /* METAROCE_ENGINE_H */
