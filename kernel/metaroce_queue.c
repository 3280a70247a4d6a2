// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Allocation of shared rings and their mmap entries.
 */
#include <linux/log2.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <rdma/uverbs_ioctl.h>

#include "metaroce_queue.h"
#include "metaroce_loc.h"

/*
 * Zeroed memory that remap_vmalloc_range() can map (VM_USERMAP), charged
 * to the current memory cgroup. vmalloc_user() would do, but charges
 * nobody. Failing is better than waking the OOM killer for a user that
 * asked for too much. vfree() releases it: VM_MAP_PUT_PAGES hands the
 * pages and their array over to the mapping.
 */
static void *alloc_accounted_user(size_t size)
{
	const gfp_t gfp = GFP_KERNEL_ACCOUNT | __GFP_RETRY_MAYFAIL |
			  __GFP_NOWARN;
	unsigned int i, n = size >> PAGE_SHIFT;
	struct page **pages;
	void *addr;

	pages = kvmalloc_array(n, sizeof(*pages), gfp);
	if (!pages)
		return NULL;
	for (i = 0; i < n; i++) {
		pages[i] = alloc_page(gfp | __GFP_ZERO);
		if (!pages[i])
			goto err;
	}
	addr = vmap(pages, n, VM_MAP | VM_USERMAP | VM_MAP_PUT_PAGES,
		    PAGE_KERNEL);
	if (addr)
		return addr;
err:
	while (i--)
		__free_page(pages[i]);
	kvfree(pages);
	return NULL;
}

/*
 * A ring of at least @min_slots slots of at least @min_slot_size bytes.
 * @user: mapped by a user process, whose memory cgroup pays for it.
 */
int metaroce_queue_init(struct metaroce_queue *q, u32 min_slots,
			u32 min_slot_size, bool user)
{
	u32 num_slots, slot_size;
	size_t size;

	memset(q, 0, sizeof(*q));
	/* Callers check their limits; these keep the arithmetic in range. */
	if (min_slots > METAROCE_QUEUE_MAX_SLOTS || !min_slot_size ||
	    min_slot_size > PAGE_SIZE)
		return -EINVAL;
	num_slots = roundup_pow_of_two(max(min_slots, 1U));
	slot_size = roundup_pow_of_two(min_slot_size);
	size = PAGE_ALIGN(METAROCE_QUEUE_HDR_SIZE +
			  (size_t)num_slots * slot_size);

	/* Both zero the memory and make it mappable. */
	q->hdr = user ? alloc_accounted_user(size) : vmalloc_user(size);
	if (!q->hdr)
		return -ENOMEM;
	q->slots = (void *)q->hdr + METAROCE_QUEUE_HDR_SIZE;
	q->num_slots = num_slots;
	q->slot_size = slot_size;
	q->size = size;
	return 0;
}

struct metaroce_mmap_entry {
	struct rdma_user_mmap_entry rdma_entry;
	void *addr;
};

/*
 * Once exposed, the buffer belongs to its mmap entry and is freed by
 * metaroce_mmap_free() when the last user of the entry is gone.
 */
void metaroce_queue_cleanup(struct metaroce_queue *q)
{
	if (q->mmap_entry)
		rdma_user_mmap_entry_remove(q->mmap_entry);
	else
		vfree(q->hdr);
	q->hdr = NULL;
	q->mmap_entry = NULL;
}

/* Makes the queue mappable by the context's process; fills @info. */
int metaroce_queue_expose(struct metaroce_queue *q, struct ib_ucontext *uctx,
			  struct metaroce_queue_info *info)
{
	struct metaroce_mmap_entry *entry;
	int err;

	entry = kzalloc(sizeof(*entry), GFP_KERNEL_ACCOUNT);
	if (!entry)
		return -ENOMEM;
	entry->addr = q->hdr;
	err = rdma_user_mmap_entry_insert(uctx, &entry->rdma_entry, q->size);
	if (err) {
		kfree(entry);
		return err;
	}
	q->mmap_entry = &entry->rdma_entry;

	memset(info, 0, sizeof(*info));
	info->offset = rdma_user_mmap_get_offset(&entry->rdma_entry);
	info->size = q->size;
	info->num_entries = q->num_slots;
	info->entry_size = q->slot_size;
	return 0;
}

/* ib_device_ops.mmap */
int metaroce_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma)
{
	struct rdma_user_mmap_entry *rdma_entry;
	struct metaroce_mmap_entry *entry;
	int err;

	rdma_entry = rdma_user_mmap_entry_get(uctx, vma);
	if (!rdma_entry)
		return -EINVAL;
	entry = container_of(rdma_entry, struct metaroce_mmap_entry,
			     rdma_entry);
	err = remap_vmalloc_range(vma, entry->addr, 0);
	rdma_user_mmap_entry_put(rdma_entry);
	return err;
}

/* ib_device_ops.mmap_free: the entry is removed and nobody maps it. */
void metaroce_mmap_free(struct rdma_user_mmap_entry *rdma_entry)
{
	struct metaroce_mmap_entry *entry =
		container_of(rdma_entry, struct metaroce_mmap_entry, rdma_entry);

	vfree(entry->addr);
	kfree(entry);
}
