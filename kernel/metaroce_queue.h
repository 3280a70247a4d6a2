/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Rings shared with user space through mmap (or private to the kernel for
 * in-kernel consumers): a header page, then power-of-two fixed-size slots.
 * See the layout rules in include/uapi/rdma/metaroce_abi.h.
 *
 * The kernel keeps the index it owns in kernel memory and only ever writes
 * it to the shared header; the index owned by the other side is read from
 * the header and is not trusted.
 */
#ifndef METAROCE_QUEUE_H
#define METAROCE_QUEUE_H

#include <linux/types.h>
#include <rdma/ib_verbs.h>
#include <uapi/rdma/metaroce_abi.h>

struct metaroce_queue {
	struct metaroce_queue_hdr *hdr;	/* start of the vmalloc'ed buffer */
	void *slots;
	u32 num_slots;			/* a power of two */
	u32 slot_size;			/* a power of two */
	size_t size;			/* header plus slots */
	/* The index this side owns (producer or consumer), the true one. */
	u32 own_index;
	struct rdma_user_mmap_entry *mmap_entry;	/* user queues only */
};

/* More than any queue has (METAROCE_MAX_CQE, METAROCE_MAX_QP_WR). */
#define METAROCE_QUEUE_MAX_SLOTS	BIT(20)

/* The slot a receive WQE of @max_sge SGEs needs (an RQ's or an SRQ's). */
static inline u32 metaroce_recv_wqe_size(u32 max_sge)
{
	return sizeof(struct metaroce_recv_wqe) +
	       max(max_sge, 1U) * sizeof(struct metaroce_sge);
}

/* The SGEs a receive slot of @q really holds, at most @limit. */
static inline u32 metaroce_recv_slot_sges(const struct metaroce_queue *q,
					  u32 limit)
{
	return min_t(u32, (q->slot_size - sizeof(struct metaroce_recv_wqe)) /
			  sizeof(struct metaroce_sge), limit);
}

int metaroce_queue_init(struct metaroce_queue *q, u32 min_slots,
			u32 min_slot_size, bool user);
void metaroce_queue_cleanup(struct metaroce_queue *q);
int metaroce_queue_expose(struct metaroce_queue *q, struct ib_ucontext *uctx,
			  struct metaroce_queue_info *info);

static inline void *metaroce_queue_slot(const struct metaroce_queue *q,
					u32 index)
{
	return q->slots + (size_t)(index & (q->num_slots - 1)) * q->slot_size;
}

/* The producer's index, and the entries below it visible. */
static inline u32 metaroce_queue_producer(const struct metaroce_queue *q)
{
	/* Acquire: pairs with the producer's release store. */
	return smp_load_acquire(&q->hdr->producer);
}

/* Consumer side: entries published by the producer and not yet consumed. */
static inline u32 metaroce_queue_available(const struct metaroce_queue *q)
{
	u32 avail = metaroce_queue_producer(q) - q->own_index;

	/* A producer index that runs ahead by more than the ring is bogus. */
	return avail <= q->num_slots ? avail : 0;
}

static inline void metaroce_queue_consume(struct metaroce_queue *q, u32 n)
{
	q->own_index += n;
	/* Release: the slots are reused only after we are done with them. */
	smp_store_release(&q->hdr->consumer, q->own_index);
}

/* Consumer side: drops every published entry (a QP reset). */
static inline void metaroce_queue_discard(struct metaroce_queue *q)
{
	metaroce_queue_consume(q, metaroce_queue_producer(q) - q->own_index);
}

/* Producer side: slots the consumer has freed. */
static inline u32 metaroce_queue_free_slots(const struct metaroce_queue *q)
{
	/* Acquire: the consumer is done with the slots it released. */
	u32 used = q->own_index - smp_load_acquire(&q->hdr->consumer);

	return used <= q->num_slots ? q->num_slots - used : 0;
}

static inline void metaroce_queue_produce(struct metaroce_queue *q)
{
	q->own_index++;
	/* Release: the entry is written before the consumer can see it. */
	smp_store_release(&q->hdr->producer, q->own_index);
}

/*
 * In-kernel posters (QPs of kernel users) fill rings the engine consumes;
 * their producer index lives only in the header, kernel memory then.
 */
static inline void *metaroce_queue_post_slot(const struct metaroce_queue *q)
{
	const struct metaroce_queue_hdr *hdr = q->hdr;

	/* Acquire: the engine is done with the slots it released. */
	if (hdr->producer - smp_load_acquire(&hdr->consumer) >= q->num_slots)
		return NULL;
	return metaroce_queue_slot(q, hdr->producer);
}

static inline void metaroce_queue_post_publish(struct metaroce_queue *q)
{
	/* Release: the entry is written before the engine can see it. */
	smp_store_release(&q->hdr->producer, q->hdr->producer + 1);
}

#endif /* METAROCE_QUEUE_H */
