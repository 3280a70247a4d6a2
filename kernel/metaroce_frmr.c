// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Fast-registration MRs, the way in-kernel storage protocols (NVMe over
 * RDMA, NFS over RDMA, iSER) register memory: ib_alloc_mr() makes one with
 * no translation, ib_map_mr_sg() stages the pages of a scatterlist,
 * IB_WR_REG_MR puts them in force under a new key (the consumer chose its
 * low 8 bits), and IB_WR_LOCAL_INV or a peer's SEND with invalidate ends
 * that registration. The SQ carries out REG_MR and LOCAL_INV in its order
 * (soft_local_op()).
 *
 * Every access through such an MR holds its frmr lock and checks there that
 * the registration it found is still in force (metaroce_mr.c): once an
 * invalidation returns, nothing reads or writes the pages it covered, and
 * a holder of an old key cannot reach the pages of a new registration.
 */
#include <linux/log2.h>

#include "metaroce_loc.h"

void metaroce_frmr_free(struct metaroce_frmr *fr)
{
	if (!fr)
		return;
	kvfree(fr->staged);
	kvfree(fr->pages);
	kfree(fr);
}

static struct metaroce_frmr *frmr_alloc(u32 max_pages)
{
	struct metaroce_frmr *fr = kzalloc(sizeof(*fr), GFP_KERNEL);

	if (!fr)
		return NULL;
	spin_lock_init(&fr->lock);
	fr->max_pages = max_pages;
	fr->staged = kvcalloc(max_pages, sizeof(u64), GFP_KERNEL);
	fr->pages = kvcalloc(max_pages, sizeof(u64), GFP_KERNEL);
	if (!fr->staged || !fr->pages) {
		metaroce_frmr_free(fr);
		return NULL;
	}
	return fr;
}

struct ib_mr *metaroce_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
				u32 max_num_sg)
{
	struct metaroce_dev *mdev = to_mdev(ibpd->device);
	struct metaroce_mr *mr;
	int err;

	if (type != IB_MR_TYPE_MEM_REG)
		return ERR_PTR(-EOPNOTSUPP);
	if (!max_num_sg || max_num_sg > METAROCE_MAX_FR_PAGES)
		return ERR_PTR(-EINVAL);
	mr = metaroce_mr_alloc(mdev, 0, GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->fr = frmr_alloc(max_num_sg);
	if (!mr->fr) {
		err = -ENOMEM;
		goto err_free;
	}
	err = metaroce_mr_publish(mr);
	if (err)
		goto err_free;
	return &mr->ibmr;

err_free:
	metaroce_frmr_free(mr->fr);
	kfree(mr);
	metaroce_obj_uncharge(mdev, METAROCE_OBJ_MR);
	return ERR_PTR(err);
}

static int frmr_stage_page(struct ib_mr *ibmr, u64 addr)
{
	struct metaroce_frmr *fr = to_mmr(ibmr)->fr;

	if (fr->nstaged >= fr->max_pages)
		return -ENOMEM;
	fr->staged[fr->nstaged++] = addr;
	return 0;
}

/*
 * Stages the pages of @sg (kernel virtual addresses: the device does virt
 * DMA); the registration in force, if any, is not touched.
 */
int metaroce_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg,
		       int sg_nents, unsigned int *sg_offset)
{
	struct metaroce_mr *mr = to_mmr(ibmr);

	if (!mr->fr)
		return -EINVAL;
	mr->fr->nstaged = 0;
	return ib_sg_to_pages(ibmr, sg, sg_nents, sg_offset, frmr_stage_page);
}

/* Whether the staged pages hold [iova, iova + length) at @page_size each. */
static bool frmr_staged_cover(const struct metaroce_mr *mr, u32 page_size)
{
	u64 first = mr->ibmr.iova & (page_size - 1);

	return page_size >= SZ_512 && is_power_of_2(page_size) &&
	       mr->ibmr.length <= METAROCE_MAX_MR_SIZE &&
	       first + mr->ibmr.length <= (u64)mr->fr->nstaged * page_size;
}

/*
 * IB_WR_REG_MR: puts the staged pages in force with @key and @access. The
 * MR must be of @pd, have no registration in force, and @key differ from
 * its keys in the consumer's 8 bits at most. -EINVAL otherwise.
 */
int metaroce_frmr_register(struct metaroce_mr *mr, struct ib_pd *pd, u32 key,
			   int access)
{
	struct metaroce_frmr *fr = mr->fr;
	unsigned long flags;
	int err = -EINVAL;

	spin_lock_irqsave(&fr->lock, flags);
	if (mr->ibmr.pd != pd || fr->valid || metaroce_mr_revoked(mr) ||
	    !metaroce_mr_key_same_mr(key, mr->key) ||
	    !frmr_staged_cover(mr, mr->ibmr.page_size))
		goto out;
	memcpy(fr->pages, fr->staged, fr->nstaged * sizeof(u64));
	fr->npages = fr->nstaged;
	fr->page_shift = ilog2(mr->ibmr.page_size);
	mr->iova = mr->ibmr.iova;
	mr->length = mr->ibmr.length;
	WRITE_ONCE(mr->access, access);
	/* Lookups by the new key find it from here on. */
	WRITE_ONCE(mr->key, key);
	WRITE_ONCE(fr->valid, true);
	err = 0;
out:
	spin_unlock_irqrestore(&fr->lock, flags);
	return err;
}

/*
 * Ends the registration of @mr in force with @key (IB_WR_LOCAL_INV, or a
 * SEND with invalidate, for QPs of @pd). -EINVAL if there is none.
 */
int metaroce_frmr_invalidate(struct metaroce_mr *mr, struct ib_pd *pd,
			     u32 key)
{
	struct metaroce_frmr *fr = mr->fr;
	unsigned long flags;
	int err = -EINVAL;

	spin_lock_irqsave(&fr->lock, flags);
	if (mr->ibmr.pd == pd && fr->valid && mr->key == key) {
		WRITE_ONCE(fr->valid, false);
		err = 0;
	}
	spin_unlock_irqrestore(&fr->lock, flags);
	return err;
}

/* Whether @mr is a fast-registration MR of @pd in force with @key. */
bool metaroce_frmr_valid_with(struct metaroce_mr *mr, struct ib_pd *pd,
			      u32 key)
{
	return mr->fr && mr->ibmr.pd == pd && READ_ONCE(mr->fr->valid) &&
	       READ_ONCE(mr->key) == key;
}
