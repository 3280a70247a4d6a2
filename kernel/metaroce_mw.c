// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Memory windows (ibv_alloc_mw()): an rkey that grants remote access to a
 * range of a user MR, with rights of its own, bound and unbound without
 * registering anything. The SQ carries out a bind (IB_WR_BIND_MW, also what
 * ibv_bind_mw() posts for a type 1 window) in its order, as it does
 * LOCAL_INV (soft_local_op()). A type 1 window is bound to its PD, a type 2
 * window to the QP that bound it: only that QP's peer may use its key, and
 * LOCAL_INV, a SEND with invalidate on that QP or a new bind after one of
 * them ends the binding. The checks are the IBA's (C10-72 to C10-75,
 * o10-36.2.x, o10-37.2.x); zero-based windows are not supported.
 *
 * A bound window holds a reference on its MR and counts in its num_mw: the
 * MR cannot be deregistered or re-registered (-EBUSY) until every window
 * bound to it is unbound or deallocated.
 *
 * Lookups of a window's key and every access through it (metaroce_mr.c)
 * hold its binding's lock under RCU: once an unbind returns, nothing reads
 * or writes the memory through the key it ended, and an access accepted
 * under an old key fails if the window has another since.
 */
#include <linux/random.h>

#include "metaroce_loc.h"

#define MW_KEY_SHIFT	8
#define MW_INDEX_MASK	(2 * METAROCE_MAX_MW - 1)
#define MW_INDEX_LIMIT	XA_LIMIT(1, MW_INDEX_MASK)

/* The rights a window may grant. */
#define MW_ACCESS	(IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_WRITE | \
			 IB_ACCESS_REMOTE_ATOMIC)

static u32 mw_index(u32 key)
{
	return (key >> MW_KEY_SHIFT) & MW_INDEX_MASK;
}

/* Whether @a and @b are keys of the same window, whatever their low bits. */
static bool mw_key_same(u32 a, u32 b)
{
	return !((a ^ b) >> MW_KEY_SHIFT);
}

int metaroce_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata)
{
	struct metaroce_dev *mdev = to_mdev(ibmw->device);
	struct metaroce_mw *mw = to_mmw(ibmw);
	struct metaroce_mw_bind *b;
	u32 index, next;
	int err;

	if (ibmw->type != IB_MW_TYPE_1 && ibmw->type != IB_MW_TYPE_2)
		return -EINVAL;
	err = metaroce_obj_charge(mdev, METAROCE_OBJ_MW);
	if (err)
		return err;
	b = kzalloc(sizeof(*b), GFP_KERNEL_ACCOUNT);
	if (!b) {
		err = -ENOMEM;
		goto err_uncharge;
	}
	spin_lock_init(&b->lock);
	b->pd = ibmw->pd;
	b->type = ibmw->type;

	BUILD_BUG_ON(!is_power_of_2(METAROCE_MAX_MW));
	BUILD_BUG_ON(METAROCE_KEY_MW <= ((u32)MW_INDEX_MASK << MW_KEY_SHIFT));
	next = get_random_u32_inclusive(1, MW_INDEX_MASK);
	err = xa_alloc_cyclic(&mdev->mws, &index, NULL, MW_INDEX_LIMIT, &next,
			      GFP_KERNEL);
	if (err < 0)
		goto err_free;
	b->rkey = (get_random_u32() & ~(MW_INDEX_MASK << MW_KEY_SHIFT)) |
		  index << MW_KEY_SHIFT | METAROCE_KEY_MW;
	ibmw->rkey = b->rkey;
	mw->b = b;
	xa_store(&mdev->mws, index, b, GFP_KERNEL);
	return 0;

err_free:
	kfree(b);
err_uncharge:
	metaroce_obj_uncharge(mdev, METAROCE_OBJ_MW);
	return err;
}

/* Ends @b's binding, under its lock; the caller drops the MR returned. */
static struct metaroce_mr *mw_unbind_locked(struct metaroce_mw_bind *b)
{
	struct metaroce_mr *mr = b->mr;

	b->bound = false;
	b->mr = NULL;
	b->length = 0;
	b->access = 0;
	b->qp_serial = 0;
	return mr;
}

static void mw_drop_mr(struct metaroce_mr *mr)
{
	if (!mr)
		return;
	atomic_dec(&mr->num_mw);
	metaroce_mr_put(mr);
}

/* Deallocation ends the binding: the key finds nothing from then on. */
int metaroce_dealloc_mw(struct ib_mw *ibmw)
{
	struct metaroce_dev *mdev = to_mdev(ibmw->device);
	struct metaroce_mw_bind *b = to_mmw(ibmw)->b;
	struct metaroce_mr *mr;
	unsigned long flags;

	xa_erase(&mdev->mws, mw_index(b->rkey));
	spin_lock_irqsave(&b->lock, flags);
	/* A bind that found it before the erase must not bind it again. */
	b->dead = true;
	mr = mw_unbind_locked(b);
	spin_unlock_irqrestore(&b->lock, flags);
	mw_drop_mr(mr);
	/* Lookups that found it may still look, under RCU. */
	kfree_rcu(b, rcu);
	metaroce_obj_uncharge(mdev, METAROCE_OBJ_MW);
	return 0;
}

/* The checks of a bind to a nonzero range of @mr (C10-73 to C10-75). */
static bool bind_mr_ok(const struct metaroce_mr *mr, struct ib_pd *pd,
		       u64 addr, u64 length, int access)
{
	if (mr->fr || mr->is_dma || !mr->umem || metaroce_mr_revoked(mr) ||
	    mr->ibmr.pd != pd)
		return false;
	if (!(mr->access & IB_ACCESS_MW_BIND))
		return false;
	if ((access & (IB_ACCESS_REMOTE_WRITE | IB_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IB_ACCESS_LOCAL_WRITE))
		return false;
	return addr >= mr->iova && length <= mr->length &&
	       addr - mr->iova <= mr->length - length;
}

/*
 * IB_WR_BIND_MW from @qp: binds the window the WQE names to the range of
 * the MR, with the new key and rights. A type 1 window may be bound again
 * (the new binding replaces the old) or unbound with length 0; a type 2
 * window must be unbound, and is bound to @qp. -EINVAL if a check fails;
 * nothing changes then.
 */
int metaroce_mw_bind(struct metaroce_qp *qp,
		     const struct metaroce_send_wqe *wqe)
{
	struct metaroce_dev *mdev = qp->mdev;
	struct ib_pd *pd = qp->ibqp.pd;
	u64 addr = wqe->bind.addr, length = wqe->bind_mr.length;
	int access = wqe->bind_mr.access;
	u32 rkey = wqe->bind.rkey;
	struct metaroce_mr *mr = NULL, *old = NULL;
	struct metaroce_mw_bind *b;
	unsigned long flags;
	int err = -EINVAL;

	if (!metaroce_key_is_mw(rkey) || !mw_key_same(rkey, wqe->bind.mw_rkey) ||
	    (access & ~MW_ACCESS))
		return -EINVAL;
	if (length) {
		mr = metaroce_mr_get(mdev, wqe->bind_mr.mr_lkey);
		if (!mr)
			return -EINVAL;
		if (!bind_mr_ok(mr, pd, addr, length, access))
			goto out_put;
	}

	rcu_read_lock();
	b = xa_load(&mdev->mws, mw_index(rkey));
	if (!b)
		goto out_unlock_rcu;
	spin_lock_irqsave(&b->lock, flags);
	/* C10-72: the window, the QP (and the MR, above) share a PD. */
	if (b->dead || !mw_key_same(b->rkey, rkey) || b->pd != pd)
		goto out_unlock;
	if (b->type == IB_MW_TYPE_2 && (b->bound || !length))
		goto out_unlock;
	/* Its dereg may have begun since bind_mr_ok(). */
	if (length && !metaroce_mr_take_window(mr))
		goto out_unlock;
	old = mw_unbind_locked(b);
	b->rkey = rkey;
	if (length) {
		b->mr = mr;
		mr = NULL;		/* the binding's reference now */
		b->addr = addr;
		b->length = length;
		b->access = access;
		if (b->type == IB_MW_TYPE_2)
			b->qp_serial = qp->serial;
		b->bound = true;
	}
	err = 0;
out_unlock:
	spin_unlock_irqrestore(&b->lock, flags);
out_unlock_rcu:
	rcu_read_unlock();
	mw_drop_mr(old);
out_put:
	if (mr)
		metaroce_mr_put(mr);
	return err;
}

/*
 * Whether @rkey is the key in force of a type 2 window bound to @qp
 * (@remote: a SEND with invalidate must come on that QP) or in its PD.
 */
static bool may_invalidate(const struct metaroce_mw_bind *b,
			   const struct metaroce_qp *qp, u32 rkey, bool remote)
{
	return b->type == IB_MW_TYPE_2 && b->bound && b->rkey == rkey &&
	       b->pd == qp->ibqp.pd && (!remote || b->qp_serial == qp->serial);
}

bool metaroce_mw_may_invalidate(struct metaroce_qp *qp, u32 rkey, bool remote)
{
	struct metaroce_mw_bind *b;
	unsigned long flags;
	bool ok = false;

	rcu_read_lock();
	b = xa_load(&qp->mdev->mws, mw_index(rkey));
	if (b) {
		spin_lock_irqsave(&b->lock, flags);
		ok = may_invalidate(b, qp, rkey, remote);
		spin_unlock_irqrestore(&b->lock, flags);
	}
	rcu_read_unlock();
	return ok;
}

/*
 * LOCAL_INV (@remote false) or a SEND with invalidate of @rkey, a type 2
 * window's key: ends its binding. -EINVAL if @rkey is not one
 * metaroce_mw_may_invalidate() allows.
 */
int metaroce_mw_invalidate(struct metaroce_qp *qp, u32 rkey, bool remote)
{
	struct metaroce_mr *mr = NULL;
	struct metaroce_mw_bind *b;
	unsigned long flags;
	int err = -EINVAL;

	rcu_read_lock();
	b = xa_load(&qp->mdev->mws, mw_index(rkey));
	if (b) {
		spin_lock_irqsave(&b->lock, flags);
		if (may_invalidate(b, qp, rkey, remote)) {
			mr = mw_unbind_locked(b);
			err = 0;
		}
		spin_unlock_irqrestore(&b->lock, flags);
	}
	rcu_read_unlock();
	mw_drop_mr(mr);
	return err;
}

static bool window_covers(const struct metaroce_mw_bind *b, u64 addr, u64 len)
{
	return addr >= b->addr && len <= b->length &&
	       addr - b->addr <= b->length - len;
}

/*
 * The MR a request to @qp may reach through window key @rkey, for @access
 * to [@addr, @addr + @len), referenced; NULL if the window is not bound
 * with that key, is of another PD, is a type 2 window bound to another QP,
 * or does not grant the rights on the range.
 */
struct metaroce_mr *metaroce_mw_resolve(struct metaroce_qp *qp, u32 rkey,
					u64 addr, u64 len, int access)
{
	struct metaroce_mr *mr = NULL;
	struct metaroce_mw_bind *b;
	unsigned long flags;

	rcu_read_lock();
	b = xa_load(&qp->mdev->mws, mw_index(rkey));
	if (b) {
		spin_lock_irqsave(&b->lock, flags);
		if (b->bound && b->rkey == rkey && b->pd == qp->ibqp.pd &&
		    (b->type == IB_MW_TYPE_1 || b->qp_serial == qp->serial) &&
		    (b->access & access) == access &&
		    window_covers(b, addr, len)) {
			mr = b->mr;
			/* The binding holds one: this cannot be the first. */
			refcount_inc(&mr->ref);
		}
		spin_unlock_irqrestore(&b->lock, flags);
	}
	rcu_read_unlock();
	if (mr)
		/* As mr_find(): the reference before the ->revoked check. */
		smp_mb__after_atomic();
	return mr;
}

/*
 * Starts an access through window key @key to @mr, in an RCU read-side
 * critical section: the binding, locked, if @key still binds the window to
 * @mr, with @access on [@addr, @addr + @len); else NULL, nothing locked.
 * The caller unlocks it when the bytes are moved.
 */
struct metaroce_mw_bind *metaroce_mw_access_lock(const struct metaroce_mr *mr,
						 u32 key, u64 addr, u64 len,
						 int access,
						 unsigned long *flags)
	__acquires(mr)
{
	struct metaroce_mw_bind *b = xa_load(&mr->mdev->mws, mw_index(key));

	if (b) {
		spin_lock_irqsave(&b->lock, *flags);
		if (b->bound && b->rkey == key && b->mr == mr &&
		    (b->access & access) == access &&
		    window_covers(b, addr, len))
			return b;
		spin_unlock_irqrestore(&b->lock, *flags);
	}
	/*
	 * For sparse, an access starts either way: mr_access_end() ends the
	 * ones that found no binding without unlocking anything.
	 */
	__acquire(mr);
	return NULL;
}
