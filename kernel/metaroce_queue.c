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

int metaroce_queue_init(struct metaroce_queue *q, u32 min_slots,
			u32 min_slot_size)
{
	u32 num_slots = roundup_pow_of_two(max(min_slots, 1U));
	u32 slot_size = roundup_pow_of_two(min_slot_size);
	size_t size = METAROCE_QUEUE_HDR_SIZE + (size_t)num_slots * slot_size;

	memset(q, 0, sizeof(*q));
	/* vmalloc_user zeroes the memory and makes it mappable. */
	q->hdr = vmalloc_user(PAGE_ALIGN(size));
	if (!q->hdr)
		return -ENOMEM;
	q->slots = (void *)q->hdr + METAROCE_QUEUE_HDR_SIZE;
	q->num_slots = num_slots;
	q->slot_size = slot_size;
	q->size = PAGE_ALIGN(size);
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

	entry = kzalloc(sizeof(*entry), GFP_KERNEL);
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
