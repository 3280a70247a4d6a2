// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Mapping the kernel's queues: each create (or resize) response names a
 * queue by a struct metaroce_queue_info, an mmap offset and length on the
 * context's command fd.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/types.h>

#include "metaroce_ring.h"

int metaroce_ring_map(int cmd_fd, const struct metaroce_queue_info *info,
		      uint32_t min_entry_size, struct metaroce_ring *ring)
{
	off_t offset = (off_t)info->offset;
	void *base;

	if (!metaroce_queue_info_valid(info, min_entry_size) || offset < 0 ||
	    (uint64_t)offset != info->offset)
		return EPROTO;

	base = mmap(NULL, info->size, PROT_READ | PROT_WRITE, MAP_SHARED,
		    cmd_fd, offset);
	if (base == MAP_FAILED)
		return errno;
	metaroce_ring_init(ring, base, info);
	return 0;
}

void metaroce_ring_unmap(struct metaroce_ring *ring)
{
	if (ring->hdr)
		munmap(ring->hdr, ring->map_size);
	memset(ring, 0, sizeof(*ring));
}
