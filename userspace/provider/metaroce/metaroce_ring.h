/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The provider's view of a ring shared with the kernel through mmap (see
 * include/uapi/rdma/metaroce_abi.h): a struct metaroce_queue_hdr page, then
 * num_entries slots of 'stride' bytes.  Indices are free-running u32; the
 * side that owns an index keeps the true value here and only publishes it
 * to the header.
 *
 * Only depends on the uapi header, so the ring arithmetic can be unit
 * tested without libibverbs.
 */
#ifndef METAROCE_RING_H
#define METAROCE_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <rdma/metaroce_abi.h>

_Static_assert(sizeof(struct metaroce_queue_hdr) <= METAROCE_QUEUE_HDR_SIZE,
	       "queue header larger than its page");
_Static_assert(sizeof(struct metaroce_sge) == 16, "uapi: sge");
_Static_assert(sizeof(struct metaroce_send_wqe) == 64, "uapi: send wqe head");
_Static_assert(sizeof(struct metaroce_recv_wqe) == 16, "uapi: recv wqe head");
_Static_assert(sizeof(struct metaroce_cqe) == 64, "uapi: cqe");

struct metaroce_ring {
	struct metaroce_queue_hdr *hdr;	/* start of the mapping */
	uint8_t *slots;			/* hdr + METAROCE_QUEUE_HDR_SIZE */
	uint32_t num_entries;		/* a power of two */
	uint32_t stride;		/* bytes per slot */
	/*
	 * The index this side owns: the producer of a send/receive queue,
	 * the consumer of a completion queue.
	 */
	uint32_t index;
	size_t map_size;		/* length of the mapping */
};

/*
 * Checks what the kernel says about a queue before it is mapped and
 * indexed: a power-of-two number of slots, 8-byte aligned slots that hold
 * at least min_entry_size bytes, and a mapping that covers them all.
 */
static inline bool metaroce_queue_info_valid(const struct metaroce_queue_info *info,
					     uint32_t min_entry_size)
{
	uint64_t need;

	if (!info->num_entries || (info->num_entries & (info->num_entries - 1)))
		return false;
	if (info->entry_size < min_entry_size || info->entry_size % 8)
		return false;
	need = METAROCE_QUEUE_HDR_SIZE +
	       (uint64_t)info->num_entries * info->entry_size;
	return info->size >= need;
}

/*
 * Sets up @ring over a mapping of @info at @base (validated beforehand).
 * The caller then sets ->index from the header field it owns.
 */
static inline void metaroce_ring_init(struct metaroce_ring *ring, void *base,
				      const struct metaroce_queue_info *info)
{
	ring->hdr = base;
	ring->slots = (uint8_t *)base + METAROCE_QUEUE_HDR_SIZE;
	ring->num_entries = info->num_entries;
	ring->stride = info->entry_size;
	ring->map_size = info->size;
	ring->index = 0;
}

/*
 * mmap()s the queue described by @info from the uverbs command fd and sets
 * up @ring over it (metaroce_ring.c).  Returns 0 or a positive errno
 * (EPROTO if @info is not a queue with slots of min_entry_size bytes).
 */
int metaroce_ring_map(int cmd_fd, const struct metaroce_queue_info *info,
		      uint32_t min_entry_size, struct metaroce_ring *ring);
/* Unmaps a ring set up by metaroce_ring_map(); no-op for an empty one. */
void metaroce_ring_unmap(struct metaroce_ring *ring);

static inline void *metaroce_ring_slot(const struct metaroce_ring *ring,
				       uint32_t index)
{
	return ring->slots +
	       (size_t)(index & (ring->num_entries - 1)) * ring->stride;
}

/* --- producer side (send and receive queues) --------------------------- */

/* The SGEs a receive slot of @ring holds, at most @want. */
static inline uint32_t metaroce_ring_recv_sges(const struct metaroce_ring *ring,
					       uint32_t want)
{
	uint32_t fit = (ring->stride - sizeof(struct metaroce_recv_wqe)) /
		       sizeof(struct metaroce_sge);

	return want < fit ? want : fit;
}

/*
 * Free slots for a producer whose next entry is @index: the kernel
 * publishes its consumer index with a release store as it completes
 * entries, so after this acquire load the slots it freed may be reused.
 * A consumer that is not in [index - num_entries, index] means no room.
 */
static inline uint32_t metaroce_ring_free(const struct metaroce_ring *ring,
					  uint32_t index)
{
	uint32_t used = index - __atomic_load_n(&ring->hdr->consumer,
						__ATOMIC_ACQUIRE);

	return used <= ring->num_entries ? ring->num_entries - used : 0;
}

/* Makes every entry before @index visible to the kernel. */
static inline void metaroce_ring_publish(struct metaroce_ring *ring,
					 uint32_t index)
{
	ring->index = index;
	__atomic_store_n(&ring->hdr->producer, index, __ATOMIC_RELEASE);
}

/*
 * Whether the kernel asks for a doorbell after entries were published.
 * The full barrier orders the producer store before the flag load; the
 * kernel sets the flag, does a full barrier, then re-reads the producer,
 * so at least one side sees the other's store.
 */
static inline bool metaroce_ring_doorbell_needed(const struct metaroce_ring *ring)
{
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	return __atomic_load_n(&ring->hdr->doorbell_needed, __ATOMIC_RELAXED);
}

/* --- consumer side (completion queues) --------------------------------- */

/* Entries the kernel has published and we have not consumed. */
static inline uint32_t metaroce_ring_avail(const struct metaroce_ring *ring)
{
	uint32_t avail = __atomic_load_n(&ring->hdr->producer,
					 __ATOMIC_ACQUIRE) - ring->index;

	/* A producer more than a ring ahead is bogus; never read past it. */
	return avail <= ring->num_entries ? avail : 0;
}

/* Gives @n consumed entries back to the kernel (after reading them). */
static inline void metaroce_ring_consume(struct metaroce_ring *ring, uint32_t n)
{
	ring->index += n;
	__atomic_store_n(&ring->hdr->consumer, ring->index, __ATOMIC_RELEASE);
}

#endif /* METAROCE_RING_H */
