// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Memory regions: registration, key lookup, access checks, and moving
 * bytes between packets and registered memory.
 *
 * Revocation: after ibv_dereg_mr returns, nothing reads or writes memory
 * through the MR, although work requests, READ parts and packets being
 * placed may still hold references to it. Every access (the copies and
 * attach below) checks ->revoked inside an RCU read-side critical section
 * that lasts until the bytes are moved; metaroce_mr_revoke() sets the flag
 * and waits for a grace period, so each access either ended before
 * deregistration returns or sees the flag and fails with -EACCES. The
 * callers turn that into the access error of their operation.
 */
#include <linux/highmem.h>
#include <linux/random.h>
#include <linux/skbuff.h>
#include <linux/vmalloc.h>
#include <rdma/ib_umem.h>

#include "metaroce_loc.h"

/*
 * A key is a random number with the MR's index in the table in bits 8 and
 * up; the index is itself taken at a random free place. The low 8 bits are
 * the consumer's on a fast-registration MR (ib_update_fast_reg_key()).
 * Index 0 is never used, so no key is 0 (the local DMA lkey); the indexes
 * leave room for every MR the device advertises. Bit 31 is clear: keys
 * with it set are memory windows' (metaroce_mw.c), never lkeys.
 */
#define MR_KEY_SHIFT	8
#define MR_INDEX_MASK	(2 * METAROCE_MAX_MR - 1)
#define MR_INDEX_LIMIT	XA_LIMIT(1, MR_INDEX_MASK)

static u32 mr_index(u32 key)
{
	return (key >> MR_KEY_SHIFT) & MR_INDEX_MASK;
}

/* Whether @a and @b are keys of the same MR, whatever their low 8 bits. */
bool metaroce_mr_key_same_mr(u32 a, u32 b)
{
	return !((a ^ b) >> MR_KEY_SHIFT);
}

static void mr_release_work(struct work_struct *work)
{
	struct metaroce_mr *mr = container_of(work, struct metaroce_mr,
					      release_work);

	kvfree(mr->pages);
	ib_umem_release(mr->umem);
	metaroce_frmr_free(mr->fr);
	/* metaroce_mr_get() may still be looking at it, under RCU. */
	kfree_rcu(mr, rcu);
}

/* May be called from softirq: the release itself may sleep, so defer it. */
void metaroce_mr_put(struct metaroce_mr *mr)
{
	if (refcount_dec_and_test(&mr->ref))
		queue_work(metaroce_wq, &mr->release_work);
}

/*
 * Finds the MR whose key matches @key in the bits @mask selects and takes a
 * reference, or returns NULL.
 */
static struct metaroce_mr *mr_find(struct metaroce_dev *mdev, u32 key,
				   u32 mask)
{
	struct metaroce_mr *mr;

	rcu_read_lock();
	mr = xa_load(&mdev->mrs, mr_index(key));
	if (mr && (((READ_ONCE(mr->key) ^ key) & mask) ||
		   !refcount_inc_not_zero(&mr->ref)))
		mr = NULL;
	rcu_read_unlock();
	if (mr)
		/* Reference before ->revoked check; see metaroce_mr_revoke() */
		smp_mb__after_atomic();
	return mr;
}

/* Finds the MR with key @key and takes a reference, or returns NULL. */
struct metaroce_mr *metaroce_mr_get(struct metaroce_dev *mdev, u32 key)
{
	return mr_find(mdev, key, ~0U);
}

/*
 * Finds the fast-registration MR that @key, whatever its consumer-owned
 * low 8 bits, is a key of, and takes a reference; NULL if there is none.
 */
struct metaroce_mr *metaroce_frmr_get(struct metaroce_dev *mdev, u32 key)
{
	struct metaroce_mr *mr = mr_find(mdev, key, ~0U << MR_KEY_SHIFT);

	if (mr && !mr->fr) {
		metaroce_mr_put(mr);
		return NULL;
	}
	return mr;
}

static bool mr_covers(const struct metaroce_mr *mr, u64 addr, u64 len)
{
	return addr >= mr->iova && len <= mr->length &&
	       addr - mr->iova <= mr->length - len;
}

/*
 * The MR a request to @qp may reach with R_Key @rkey (an MR's or a memory
 * window's) for @access (IB_ACCESS_REMOTE_*) to [@addr, @addr + @len),
 * referenced; NULL if the key grants no such access. Each access through
 * it checks again (mr_access_begin()).
 */
struct metaroce_mr *metaroce_rkey_get(struct metaroce_qp *qp, u32 rkey,
				      u64 addr, u64 len, int access)
{
	struct metaroce_mr *mr;

	if (metaroce_key_is_mw(rkey))
		return metaroce_mw_resolve(qp, rkey, addr, len, access);
	mr = metaroce_mr_get(qp->mdev, rkey);
	if (mr && !metaroce_mr_allows(mr, qp->ibqp.pd, addr, len, access)) {
		metaroce_mr_put(mr);
		mr = NULL;
	}
	return mr;
}

/* What an access holds between mr_access_begin() and mr_access_end(). */
struct mr_access {
	unsigned long flags;
	struct metaroce_mw_bind *mw;	/* through a window's key */
};

/*
 * Starts an access to [@addr, @addr + @len) of @mr by a holder that found
 * it with @key: false if it was revoked, or, on a fast-registration MR, if
 * the registration @key named has ended or no longer covers the range, or,
 * @key being a memory window's, if the window no longer binds it to @mr
 * with @access (IB_ACCESS_REMOTE_*) on the range. Either way the caller
 * ends with mr_access_end(), without sleeping in between. Callers return
 * before this for zero bytes: a zero-length SGE holds no MR.
 */
static bool mr_access_begin(const struct metaroce_mr *mr, u32 key, u64 addr,
			    u32 len, int access, struct mr_access *a)
	__acquires(RCU) __acquires(a)
{
	rcu_read_lock();
	a->mw = NULL;
	if (metaroce_key_is_mw(key)) {
		a->mw = metaroce_mw_access_lock(mr, key, addr, len, access,
						&a->flags);
		return a->mw && !metaroce_mr_revoked(mr);
	}
	if (!mr->fr) {
		__acquire(a);	/* for sparse: an access, with no lock */
		return !metaroce_mr_revoked(mr);
	}
	spin_lock_irqsave(&mr->fr->lock, a->flags);
	return !metaroce_mr_revoked(mr) && mr->fr->valid && mr->key == key &&
	       mr_covers(mr, addr, len);
}

static void mr_access_end(const struct metaroce_mr *mr, u32 key,
			  struct mr_access *a)
	__releases(a) __releases(RCU)
{
	if (a->mw)
		spin_unlock_irqrestore(&a->mw->lock, a->flags);
	else if (mr->fr && !metaroce_key_is_mw(key))
		spin_unlock_irqrestore(&mr->fr->lock, a->flags);
	else
		__release(a);	/* an access that took no lock */
	rcu_read_unlock();
}

/*
 * Checks that [addr, addr + len) lies in @mr, that @mr belongs to @pd and
 * that it grants @access (IB_ACCESS_* bits; 0 for a local read). On a
 * fast-registration MR this is a first look: each access checks again.
 */
bool metaroce_mr_allows(const struct metaroce_mr *mr, struct ib_pd *pd,
			u64 addr, u64 len, int access)
{
	if (mr->ibmr.pd != pd)
		return false;
	if (mr->fr && !READ_ONCE(mr->fr->valid))
		return false;
	if ((READ_ONCE(mr->access) & access) != access)
		return false;
	if (mr->is_dma)
		return true;
	return mr_covers(mr, addr, len);
}

static struct page *kernel_page(void *vaddr)
{
	return is_vmalloc_addr(vaddr) ? vmalloc_to_page(vaddr) :
					virt_to_page(vaddr);
}

/*
 * The page that holds byte @addr of @mr, the offset of it there, and how
 * many bytes from there on are contiguous in the MR (*@room).
 */
static struct page *mr_page(const struct metaroce_mr *mr, u64 addr,
			    unsigned int *offset, u32 *room)
{
	void *vaddr;
	u64 pos;

	if (mr->is_dma) {
		vaddr = (void *)(uintptr_t)addr;
		*offset = offset_in_page(vaddr);
		*room = PAGE_SIZE - *offset;
		return kernel_page(vaddr);
	}
	if (mr->fr) {
		/* Registered pages are kernel virtual addresses (virt DMA). */
		u64 mask = BIT_ULL(mr->fr->page_shift) - 1;

		pos = addr - mr->iova + (mr->iova & mask);
		vaddr = (void *)(uintptr_t)(mr->fr->pages[pos >>
							  mr->fr->page_shift] +
					    (pos & mask));
		*offset = offset_in_page(vaddr);
		*room = min_t(u64, PAGE_SIZE - *offset, mask + 1 - (pos & mask));
		return kernel_page(vaddr);
	}
	pos = addr - mr->iova + mr->page_offset;
	*offset = pos & (PAGE_SIZE - 1);
	*room = PAGE_SIZE - *offset;
	return mr->pages[pos >> PAGE_SHIFT];
}

/* Walks [addr, addr + len) of an MR one page-sized piece at a time. */
struct mr_cursor {
	const struct metaroce_mr *mr;
	u64 addr;
	u32 left;
};

static bool mr_next_piece(struct mr_cursor *c, struct page **page,
			  unsigned int *offset, u32 *chunk)
{
	u32 room;

	if (!c->left)
		return false;
	*page = mr_page(c->mr, c->addr, offset, &room);
	*chunk = min(c->left, room);
	c->addr += *chunk;
	c->left -= *chunk;
	return true;
}

/*
 * The copies below move @len bytes between @addr in @mr, which their caller
 * found with @key and checked, and a packet or a buffer. -EACCES if @mr was
 * revoked or its registration ended (mr_access_begin()).
 */

int metaroce_mr_copy_from_skb(const struct metaroce_mr *mr, u32 key, u64 addr,
			      const struct sk_buff *skb, int skb_offset,
			      u32 len)
{
	struct mr_cursor c = { mr, addr, len };
	struct mr_access a = {};
	unsigned int offset;
	struct page *page;
	int err = 0;
	u32 chunk;

	if (!len)
		return 0;
	if (!mr_access_begin(mr, key, addr, len,
			     IB_ACCESS_REMOTE_WRITE, &a)) {
		mr_access_end(mr, key, &a);
		return -EACCES;
	}
	while (mr_next_piece(&c, &page, &offset, &chunk)) {
		void *dst = kmap_local_page(page);

		err = skb_copy_bits(skb, skb_offset, dst + offset, chunk);
		kunmap_local(dst);
		if (err)
			break;
		skb_offset += chunk;
	}
	mr_access_end(mr, key, &a);
	return err;
}

int metaroce_mr_copy_from_buf(const struct metaroce_mr *mr, u32 key, u64 addr,
			      const void *buf, u32 len)
{
	struct mr_cursor c = { mr, addr, len };
	struct mr_access a = {};
	unsigned int offset;
	struct page *page;
	u32 chunk;

	if (!len)
		return 0;
	if (!mr_access_begin(mr, key, addr, len,
			     IB_ACCESS_REMOTE_WRITE, &a)) {
		mr_access_end(mr, key, &a);
		return -EACCES;
	}
	while (mr_next_piece(&c, &page, &offset, &chunk)) {
		memcpy_to_page(page, offset, buf, chunk);
		buf += chunk;
	}
	mr_access_end(mr, key, &a);
	return 0;
}

int metaroce_mr_copy_to_buf(const struct metaroce_mr *mr, u32 key, u64 addr,
			    void *buf, u32 len)
{
	struct mr_cursor c = { mr, addr, len };
	struct mr_access a = {};
	unsigned int offset;
	struct page *page;
	u32 chunk;

	if (!len)
		return 0;
	if (!mr_access_begin(mr, key, addr, len,
			     IB_ACCESS_REMOTE_READ, &a)) {
		mr_access_end(mr, key, &a);
		return -EACCES;
	}
	while (mr_next_piece(&c, &page, &offset, &chunk)) {
		memcpy_from_page(buf, page, offset, chunk);
		buf += chunk;
	}
	mr_access_end(mr, key, &a);
	return 0;
}

/*
 * Executes an atomic on the 64-bit word at @addr of @mr, found with @key
 * and checked: @op is METAROCE_OP_ATOMIC_CMP_SWP (stores @swap_add if the
 * word equals @compare) or METAROCE_OP_ATOMIC_FETCH_ADD; the value the word
 * held before is left in *@orig. The same checks as the copies, -EACCES.
 * An aligned word never crosses a page; one whose mapping is not aligned
 * (a user MR whose iova and buffer differ modulo 8) is refused, -EINVAL,
 * since a CPU's compare-and-exchange needs an aligned word.
 */
int metaroce_mr_atomic(const struct metaroce_mr *mr, u32 key, u64 addr, u8 op,
		       u64 swap_add, u64 compare, u64 *orig)
{
	struct mr_access a = {};
	unsigned int offset;
	struct page *page;
	u64 *word, old;
	void *vaddr;
	u32 room;
	int err = 0;

	if (!mr_access_begin(mr, key, addr, METAROCE_ATOMIC_LEN,
			     IB_ACCESS_REMOTE_ATOMIC, &a)) {
		mr_access_end(mr, key, &a);
		return -EACCES;
	}
	page = mr_page(mr, addr, &offset, &room);
	if (offset % METAROCE_ATOMIC_LEN || room < METAROCE_ATOMIC_LEN) {
		err = -EINVAL;
		goto out;
	}
	vaddr = kmap_local_page(page);
	word = vaddr + offset;
	if (op == METAROCE_OP_ATOMIC_CMP_SWP) {
		old = cmpxchg64(word, compare, swap_add);
	} else {
		u64 seen = READ_ONCE(*word);

		do {
			old = seen;
			seen = cmpxchg64(word, old, old + swap_add);
		} while (seen != old);
	}
	kunmap_local(vaddr);
	*orig = old;
out:
	mr_access_end(mr, key, &a);
	return err;
}

/*
 * Attaches @len bytes at @addr of @mr to @skb as page fragments, without
 * copying. Returns -EMSGSIZE when the skb has no fragment slots left,
 * -EACCES if @mr was revoked, -ENOMEM; the caller then copies.
 *
 * The pages are the user's (or page cache a read-only MR maps): the skb
 * carries a metaroce_zc (metaroce_zc.c), which marks its fragments shared
 * (whatever would write them in place copies them first) and makes
 * deregistration wait until the packet is gone. Only the application's own
 * sends attach; a READ response, which the peer can ask for at any time
 * and as often as it likes, is copied. So is a fast-registration MR's
 * memory: its registration may end in softirq, where nothing can wait for
 * packets to leave (-EOPNOTSUPP).
 */
int metaroce_mr_attach_to_skb(struct metaroce_mr *mr, u64 addr,
			      struct sk_buff *skb, u32 len)
{
	struct mr_cursor c = { mr, addr, len };
	struct mr_access a = {};
	unsigned int offset;
	struct page *page;
	int err = 0;
	u32 chunk;

	if (!len)
		return 0;
	if (mr->fr)
		return -EOPNOTSUPP;
	if (!mr_access_begin(mr, 0, addr, len, 0, &a)) {
		mr_access_end(mr, 0, &a);
		return -EACCES;
	}
	err = metaroce_zc_track(skb, mr);
	while (!err && mr_next_piece(&c, &page, &offset, &chunk)) {
		int nr = skb_shinfo(skb)->nr_frags;

		if (nr >= MAX_SKB_FRAGS) {
			err = -EMSGSIZE;
			break;
		}
		get_page(page);
		skb_fill_page_desc(skb, nr, page, offset, chunk);
		skb->len += chunk;
		skb->data_len += chunk;
		skb->truesize += chunk;
	}
	mr_access_end(mr, 0, &a);
	return err;
}

/* An MR not counted against the device's limit (see metaroce_mr_alloc()). */
static struct metaroce_mr *mr_new(struct metaroce_dev *mdev, int access,
				  gfp_t gfp)
{
	struct metaroce_mr *mr = kzalloc(sizeof(*mr), gfp);

	if (!mr)
		return NULL;
	mr->mdev = mdev;
	mr->access = access;
	refcount_set(&mr->ref, 1);
	INIT_WORK(&mr->release_work, mr_release_work);
	return mr;
}

/* @gfp: GFP_KERNEL_ACCOUNT for a user's MR (its memory cgroup pays). */
struct metaroce_mr *metaroce_mr_alloc(struct metaroce_dev *mdev, int access,
				      gfp_t gfp)
{
	struct metaroce_mr *mr;

	if (metaroce_obj_charge(mdev, METAROCE_OBJ_MR))
		return NULL;
	mr = mr_new(mdev, access, gfp);
	if (!mr)
		metaroce_obj_uncharge(mdev, METAROCE_OBJ_MR);
	return mr;
}

/* Gives @mr its key and makes it findable. */
int metaroce_mr_publish(struct metaroce_mr *mr)
{
	struct metaroce_dev *mdev = mr->mdev;
	u32 index, next;
	int err;

	BUILD_BUG_ON(!is_power_of_2(METAROCE_MAX_MR));
	next = get_random_u32_inclusive(1, MR_INDEX_MASK);
	err = xa_alloc_cyclic(&mdev->mrs, &index, NULL, MR_INDEX_LIMIT,
			      &next, GFP_KERNEL);
	if (err < 0)
		return err;
	BUILD_BUG_ON(METAROCE_KEY_MW <= ((u32)MR_INDEX_MASK << MR_KEY_SHIFT));
	mr->key = (get_random_u32() &
		   ~(MR_INDEX_MASK << MR_KEY_SHIFT | METAROCE_KEY_MW)) |
		  index << MR_KEY_SHIFT;
	mr->ibmr.lkey = mr->key;
	mr->ibmr.rkey = mr->key;
	xa_store(&mdev->mrs, index, mr, GFP_KERNEL);
	return 0;
}

struct ib_mr *metaroce_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct metaroce_dev *mdev = to_mdev(ibpd->device);
	struct metaroce_mr *mr = metaroce_mr_alloc(mdev, access, GFP_KERNEL);
	int err;

	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->is_dma = true;
	mr->length = U64_MAX;
	err = metaroce_mr_publish(mr);
	if (err) {
		kfree(mr);
		metaroce_obj_uncharge(mdev, METAROCE_OBJ_MR);
		return ERR_PTR(err);
	}
	return &mr->ibmr;
}

/* Pins the user's [@start, @start + @length) as @mr's memory at @iova. */
static int mr_pin_user(struct metaroce_dev *mdev, struct metaroce_mr *mr,
		       u64 start, u64 length, u64 iova, int access)
{
	struct sg_page_iter iter;
	unsigned long i = 0;

	mr->iova = iova;
	mr->length = length;
	mr->umem = ib_umem_get(&mdev->ib_dev, start, length, access);
	if (IS_ERR(mr->umem)) {
		int err = PTR_ERR(mr->umem);

		mr->umem = NULL;
		return err;
	}
	mr->npages = ib_umem_num_pages(mr->umem);
	/* One pointer per page: 2 MiB for each GiB the user pins. */
	mr->pages = kvcalloc(max(mr->npages, 1UL), sizeof(*mr->pages),
			     GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL |
			     __GFP_NOWARN);
	if (!mr->pages)
		return -ENOMEM;
	for_each_sgtable_page(&mr->umem->sgt_append.sgt, &iter, 0) {
		if (WARN_ON_ONCE(i >= mr->npages))
			break;
		mr->pages[i++] = sg_page_iter_page(&iter);
	}
	mr->page_offset = ib_umem_offset(mr->umem);
	return 0;
}

struct ib_mr *metaroce_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				   u64 iova, int access, struct ib_udata *udata)
{
	struct metaroce_dev *mdev = to_mdev(ibpd->device);
	struct metaroce_mr *mr;
	int err;

	if (length > METAROCE_MAX_MR_SIZE)
		return ERR_PTR(-EINVAL);

	mr = metaroce_mr_alloc(mdev, access, GFP_KERNEL_ACCOUNT);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	err = mr_pin_user(mdev, mr, start, length, iova, access);
	if (err)
		goto err_free;
	err = metaroce_mr_publish(mr);
	if (err)
		goto err_free;
	return &mr->ibmr;

err_free:
	mr_release_work(&mr->release_work);
	metaroce_obj_uncharge(mdev, METAROCE_OBJ_MR);
	return ERR_PTR(err);
}

/*
 * Ends every access through @mr: once this returns, no copy to or from its
 * memory runs and none starts (they fail with -EACCES), and no packet that
 * carries its pages is left to send. May sleep.
 *
 * Every access is made by the holder of a reference. If the registration's
 * is the only one left, no access is running, and a lookup that found the
 * MR just before it left the table reads the flag after taking its
 * reference (metaroce_mr_get()), so it sees it: no grace period is needed,
 * which keeps the deregistration of idle MRs (a process exiting with many)
 * from waiting one each (a packet holding its pages holds a reference too).
 * Otherwise an access may be under way: wait for it, then for the packets.
 */
static void metaroce_mr_revoke(struct metaroce_mr *mr)
{
	WRITE_ONCE(mr->revoked, true);
	/* The flag before the count; pairs with metaroce_mr_get(). */
	smp_mb();
	if (refcount_read(&mr->ref) > 1) {
		synchronize_rcu();
		/* Packets built before carry its pages: let them leave. */
		metaroce_zc_wait(mr);
	} else {
		smp_mb();	/* a holder that let go did so after its access */
	}
}

/*
 * Binding a window to @mr (in the requester's worker) races with its
 * deregistration: each side writes its own mark, then reads the other's,
 * so at least one of them sees the other. A window is never left bound
 * to an MR whose dereg or rereg went ahead (IBA: EBUSY while windows are
 * bound to it).
 */
bool metaroce_mr_take_window(struct metaroce_mr *mr)
{
	atomic_inc(&mr->num_mw);
	smp_mb__after_atomic();	/* num_mw before closing; pairs below */
	if (!READ_ONCE(mr->closing) && !metaroce_mr_revoked(mr))
		return true;
	atomic_dec(&mr->num_mw);
	return false;
}

static int mr_close_to_windows(struct metaroce_mr *mr)
{
	WRITE_ONCE(mr->closing, true);
	smp_mb();	/* closing before num_mw; pairs with take_window */
	if (!atomic_read(&mr->num_mw))
		return 0;
	WRITE_ONCE(mr->closing, false);
	return -EBUSY;
}

int metaroce_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct metaroce_mr *mr = to_mmr(ibmr);

	/* IBA: not while memory windows are bound to it (metaroce_mw.c). */
	if (mr_close_to_windows(mr))
		return -EBUSY;
	/*
	 * New lookups fail; work requests in flight keep their reference (the
	 * last of them frees the MR, after a grace period), but revoked, they
	 * can no longer reach its memory. An MR a rereg replaced was revoked
	 * then, and its table slot and its count are its successor's.
	 */
	if (!mr->replaced) {
		xa_erase(&mr->mdev->mrs, mr_index(mr->key));
		metaroce_mr_revoke(mr);
		metaroce_obj_uncharge(mr->mdev, METAROCE_OBJ_MR);
	}
	metaroce_mr_put(mr);
	return 0;
}

/*
 * ibv_rereg_mr: a new registration of the MR's memory (IB_MR_REREG_TRANS:
 * of [@start, @start + @length) at @iova), in @pd (IB_MR_REREG_PD), with
 * @access (IB_MR_REREG_ACCESS); what the flags leave out stays as it was.
 *
 * The registration is replaced, not changed in place: a new MR with the
 * same key takes the old one's slot in the table, so lookups find it from
 * then on, and the old one is revoked as deregistration revokes an MR.
 * Whatever still holds the old one (a work request, a READ part, a packet
 * being placed, a zero-copy packet) was checked against the old
 * translation, PD and rights and is held to them: once this returns it
 * can no longer reach the memory, and none of it reaches the new
 * registration. ib_core puts the returned MR in the old one's place and
 * deregisters the old one (metaroce_dereg_mr(), which then only drops the
 * registration's reference).
 *
 * On failure the old registration is left as it was. The new MR takes
 * over the old one's count against the device limit, and its pages unless
 * the translation changes; a new translation is pinned and charged (to
 * the process's locked memory and memory cgroup) as reg_mr does, while
 * the old one's pages stay pinned until the last holder of the old MR is
 * gone.
 */
struct ib_mr *metaroce_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				     u64 length, u64 iova, int access,
				     struct ib_pd *pd, struct ib_udata *udata)
{
	struct metaroce_mr *old = to_mmr(ibmr);
	struct metaroce_dev *mdev = old->mdev;
	struct metaroce_mr *mr;
	void *prev;
	int err;

	/* Fast-registration and DMA MRs: not user MRs, no translation here. */
	if (old->is_dma || old->fr || !old->umem)
		return ERR_PTR(-EOPNOTSUPP);
	if (flags & ~IB_MR_REREG_SUPPORTED)
		return ERR_PTR(-EOPNOTSUPP);
	if (!(flags & IB_MR_REREG_ACCESS))
		access = old->access;
	if (!(flags & IB_MR_REREG_PD))
		pd = ibmr->pd;
	/*
	 * Pages pinned for reading may not be the process's to write (the
	 * zero page, a read-only file's page cache): made writable, the same
	 * range is pinned again, for writing.
	 */
	if (!(flags & IB_MR_REREG_TRANS) && ib_access_writable(access) &&
	    !old->umem->writable) {
		start = old->umem->address;
		length = old->length;
		iova = old->iova;
		flags |= IB_MR_REREG_TRANS;
	}
	if ((flags & IB_MR_REREG_TRANS) && length > METAROCE_MAX_MR_SIZE)
		return ERR_PTR(-EINVAL);
	/* Windows bound to it would keep the old registration's memory. */
	if (mr_close_to_windows(old))
		return ERR_PTR(-EBUSY);

	mr = mr_new(mdev, access, GFP_KERNEL_ACCOUNT);
	if (!mr) {
		WRITE_ONCE(old->closing, false);
		return ERR_PTR(-ENOMEM);
	}
	if (flags & IB_MR_REREG_TRANS) {
		err = mr_pin_user(mdev, mr, start, length, iova, access);
		if (err)
			goto err_free;
	} else {
		/* The old MR's pages, owned by it until it is revoked. */
		mr->iova = old->iova;
		mr->length = old->length;
		mr->pages = old->pages;
		mr->npages = old->npages;
		mr->page_offset = old->page_offset;
	}
	/* What lookups check, before any can find it; ib_core sets them too. */
	mr->ibmr.device = &mdev->ib_dev;
	mr->ibmr.pd = pd;
	mr->ibmr.type = IB_MR_TYPE_USER;
	mr->ibmr.iova = mr->iova;
	mr->ibmr.length = mr->length;
	mr->key = old->key;
	mr->ibmr.lkey = mr->key;
	mr->ibmr.rkey = mr->key;

	/* The slot is there: replacing its entry allocates nothing. */
	prev = xa_store(&mdev->mrs, mr_index(mr->key), mr, GFP_KERNEL);
	if (xa_is_err(prev)) {
		err = xa_err(prev);
		goto err_free;
	}
	WARN_ON_ONCE(prev != old);
	old->replaced = true;
	metaroce_mr_revoke(old);
	if (!(flags & IB_MR_REREG_TRANS)) {
		/* Revoked, the old MR no longer reads them. */
		mr->umem = old->umem;
		old->umem = NULL;
		old->pages = NULL;
	}
	return &mr->ibmr;

err_free:
	if (!(flags & IB_MR_REREG_TRANS))
		mr->pages = NULL;
	mr_release_work(&mr->release_work);
	WRITE_ONCE(old->closing, false);
	return ERR_PTR(err);
}
