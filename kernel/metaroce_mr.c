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
 * A key is a random number with the MR's index in the table in its low
 * bits; the index is itself taken at a random free place. Index 0 is never
 * used, so no key is 0 (the local DMA lkey); the indexes leave room for
 * every MR the device advertises.
 */
#define MR_INDEX_MASK	(2 * METAROCE_MAX_MR - 1)
#define MR_INDEX_LIMIT	XA_LIMIT(1, MR_INDEX_MASK)

static u32 mr_index(u32 key)
{
	return key & MR_INDEX_MASK;
}

static void mr_release_work(struct work_struct *work)
{
	struct metaroce_mr *mr = container_of(work, struct metaroce_mr,
					      release_work);

	kvfree(mr->pages);
	ib_umem_release(mr->umem);
	/* metaroce_mr_get() may still be looking at it, under RCU. */
	kfree_rcu(mr, rcu);
}

/* May be called from softirq: the release itself may sleep, so defer it. */
void metaroce_mr_put(struct metaroce_mr *mr)
{
	if (refcount_dec_and_test(&mr->ref))
		queue_work(metaroce_wq, &mr->release_work);
}

/* Finds the MR with key @key and takes a reference, or returns NULL. */
struct metaroce_mr *metaroce_mr_get(struct metaroce_dev *mdev, u32 key)
{
	struct metaroce_mr *mr;

	rcu_read_lock();
	mr = xa_load(&mdev->mrs, mr_index(key));
	if (mr && (mr->ibmr.lkey != key || !refcount_inc_not_zero(&mr->ref)))
		mr = NULL;
	rcu_read_unlock();
	if (mr)
		/* Reference before ->revoked check; see metaroce_mr_revoke() */
		smp_mb__after_atomic();
	return mr;
}

/*
 * Starts an access to @mr's memory: false if it was revoked. Either way the
 * caller ends with rcu_read_unlock(), without sleeping in between. Callers
 * return before this for zero bytes: a zero-length SGE holds no MR.
 */
static bool mr_access_begin(const struct metaroce_mr *mr)
	__acquires(RCU)
{
	rcu_read_lock();
	return !metaroce_mr_revoked(mr);
}

/*
 * Checks that [addr, addr + len) lies in @mr, that @mr belongs to @pd and
 * that it grants @access (IB_ACCESS_* bits; 0 for a local read).
 */
bool metaroce_mr_allows(const struct metaroce_mr *mr, struct ib_pd *pd,
			u64 addr, u64 len, int access)
{
	if (mr->ibmr.pd != pd)
		return false;
	if ((mr->access & access) != access)
		return false;
	if (mr->is_dma)
		return true;
	return addr >= mr->iova && len <= mr->length &&
	       addr - mr->iova <= mr->length - len;
}

/* The page that holds byte @addr of @mr, and the offset of it there. */
static struct page *mr_page(const struct metaroce_mr *mr, u64 addr,
			    unsigned int *offset)
{
	void *vaddr;
	u64 pos;

	if (mr->is_dma) {
		vaddr = (void *)(uintptr_t)addr;
		*offset = offset_in_page(vaddr);
		return is_vmalloc_addr(vaddr) ? vmalloc_to_page(vaddr) :
						virt_to_page(vaddr);
	}
	pos = addr - mr->iova + mr->page_offset;
	*offset = pos & (PAGE_SIZE - 1);
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
	if (!c->left)
		return false;
	*page = mr_page(c->mr, c->addr, offset);
	*chunk = min_t(u32, c->left, PAGE_SIZE - *offset);
	c->addr += *chunk;
	c->left -= *chunk;
	return true;
}

/*
 * Copies @len bytes at @skb_offset of @skb to @addr in @mr (checked).
 * -EACCES if @mr was revoked.
 */
int metaroce_mr_copy_from_skb(const struct metaroce_mr *mr, u64 addr,
			      const struct sk_buff *skb, int skb_offset,
			      u32 len)
{
	struct mr_cursor c = { mr, addr, len };
	unsigned int offset;
	struct page *page;
	int err = 0;
	u32 chunk;

	if (!len)
		return 0;
	if (!mr_access_begin(mr)) {
		rcu_read_unlock();
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
	rcu_read_unlock();
	return err;
}

/* Copies @len bytes of @buf to @addr in @mr (checked); -EACCES if revoked. */
int metaroce_mr_copy_from_buf(const struct metaroce_mr *mr, u64 addr,
			      const void *buf, u32 len)
{
	struct mr_cursor c = { mr, addr, len };
	unsigned int offset;
	struct page *page;
	u32 chunk;

	if (!len)
		return 0;
	if (!mr_access_begin(mr)) {
		rcu_read_unlock();
		return -EACCES;
	}
	while (mr_next_piece(&c, &page, &offset, &chunk)) {
		memcpy_to_page(page, offset, buf, chunk);
		buf += chunk;
	}
	rcu_read_unlock();
	return 0;
}

/* Copies @len bytes at @addr of @mr into @buf (checked); -EACCES if revoked. */
int metaroce_mr_copy_to_buf(const struct metaroce_mr *mr, u64 addr,
			    void *buf, u32 len)
{
	struct mr_cursor c = { mr, addr, len };
	unsigned int offset;
	struct page *page;
	u32 chunk;

	if (!len)
		return 0;
	if (!mr_access_begin(mr)) {
		rcu_read_unlock();
		return -EACCES;
	}
	while (mr_next_piece(&c, &page, &offset, &chunk)) {
		memcpy_from_page(buf, page, offset, chunk);
		buf += chunk;
	}
	rcu_read_unlock();
	return 0;
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
 * and as often as it likes, is copied.
 */
int metaroce_mr_attach_to_skb(struct metaroce_mr *mr, u64 addr,
			      struct sk_buff *skb, u32 len)
{
	struct mr_cursor c = { mr, addr, len };
	unsigned int offset;
	struct page *page;
	int err = 0;
	u32 chunk;

	if (!len)
		return 0;
	if (!mr_access_begin(mr)) {
		rcu_read_unlock();
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
	rcu_read_unlock();
	return err;
}

/* @gfp: GFP_KERNEL_ACCOUNT for a user's MR (its memory cgroup pays). */
static struct metaroce_mr *mr_alloc(struct metaroce_dev *mdev, int access,
				    gfp_t gfp)
{
	struct metaroce_mr *mr;

	if (metaroce_obj_charge(mdev, METAROCE_OBJ_MR))
		return NULL;
	mr = kzalloc(sizeof(*mr), gfp);
	if (!mr) {
		metaroce_obj_uncharge(mdev, METAROCE_OBJ_MR);
		return NULL;
	}
	mr->mdev = mdev;
	mr->access = access;
	refcount_set(&mr->ref, 1);
	INIT_WORK(&mr->release_work, mr_release_work);
	return mr;
}

/* Gives @mr its key and makes it findable. */
static int mr_publish(struct metaroce_mr *mr)
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
	mr->ibmr.lkey = (get_random_u32() & ~MR_INDEX_MASK) | index;
	mr->ibmr.rkey = mr->ibmr.lkey;
	xa_store(&mdev->mrs, index, mr, GFP_KERNEL);
	return 0;
}

struct ib_mr *metaroce_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct metaroce_dev *mdev = to_mdev(ibpd->device);
	struct metaroce_mr *mr = mr_alloc(mdev, access, GFP_KERNEL);
	int err;

	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->is_dma = true;
	mr->length = U64_MAX;
	err = mr_publish(mr);
	if (err) {
		kfree(mr);
		metaroce_obj_uncharge(mdev, METAROCE_OBJ_MR);
		return ERR_PTR(err);
	}
	return &mr->ibmr;
}

static int mr_pin_pages(struct metaroce_mr *mr)
{
	struct sg_page_iter iter;
	unsigned long i = 0;

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

	mr = mr_alloc(mdev, access, GFP_KERNEL_ACCOUNT);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->iova = iova;
	mr->length = length;

	mr->umem = ib_umem_get(&mdev->ib_dev, start, length, access);
	if (IS_ERR(mr->umem)) {
		err = PTR_ERR(mr->umem);
		mr->umem = NULL;
		goto err_free;
	}
	err = mr_pin_pages(mr);
	if (err)
		goto err_free;
	err = mr_publish(mr);
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

int metaroce_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct metaroce_mr *mr = to_mmr(ibmr);

	/*
	 * New lookups fail; work requests in flight keep their reference (the
	 * last of them frees the MR, after a grace period), but revoked, they
	 * can no longer reach its memory.
	 */
	xa_erase(&mr->mdev->mrs, mr_index(ibmr->lkey));
	metaroce_mr_revoke(mr);
	metaroce_obj_uncharge(mr->mdev, METAROCE_OBJ_MR);
	metaroce_mr_put(mr);
	return 0;
}
