// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Unit tests of the provider's data path, compiled together with
 * metaroce_post.c, metaroce_poll.c, metaroce_cq_ex.c and metaroce_wqe.c:
 * ring arithmetic, WQE and CQE formats, ibv_post_send()/ibv_post_recv(), the ibv_qp_ex
 * work-request API, ibv_poll_cq(), the ibv_cq_ex poll API and the
 * doorbell protocol.
 *
 * The rings live in ordinary memory and the test plays the kernel: it
 * reads WQEs, moves consumer indices, writes CQEs and sets doorbell_needed.
 * The doorbell commands (ibv_cmd_post_send/recv, normally from libibverbs)
 * are defined here and count calls.  No device, no libibverbs needed.
 */
#include <endian.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metaroce.h"

static int failures;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, \
				__LINE__, #cond);                              \
			__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);    \
		}                                                              \
	} while (0)

#define CHECK_EQ(a, b)                                                         \
	do {                                                                   \
		unsigned long long _a = (unsigned long long)(a);               \
		unsigned long long _b = (unsigned long long)(b);               \
		if (_a != _b) {                                                \
			fprintf(stderr,                                        \
				"%s:%d: CHECK failed: %s == %s (%llu != %llu)\n", \
				__FILE__, __LINE__, #a, #b, _a, _b);           \
			__atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);    \
		}                                                              \
	} while (0)

/* --- the doorbell commands ------------------------------------------------ */

static unsigned int sq_doorbells, rq_doorbells;
static int doorbell_ret;

int ibv_cmd_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr)
{
	(void)qp;
	(void)bad_wr;
	CHECK(wr == NULL);	/* a doorbell carries no work requests */
	__atomic_fetch_add(&sq_doorbells, 1, __ATOMIC_RELAXED);
	return doorbell_ret;
}

int ibv_cmd_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr)
{
	(void)qp;
	(void)bad_wr;
	CHECK(wr == NULL);
	__atomic_fetch_add(&rq_doorbells, 1, __ATOMIC_RELAXED);
	return doorbell_ret;
}

/* --- rings in ordinary memory --------------------------------------------- */

static void *alloc_ring(struct metaroce_ring *ring, uint32_t num_entries,
			uint32_t stride, uint32_t start_index)
{
	struct metaroce_queue_info info = {
		.size = METAROCE_QUEUE_HDR_SIZE + num_entries * stride,
		.num_entries = num_entries,
		.entry_size = stride,
	};
	void *mem;

	CHECK(metaroce_queue_info_valid(&info, 16));
	mem = aligned_alloc(4096, (info.size + 4095) & ~4095u);
	if (!mem)
		abort();
	/* Stale slot contents must not leak into WQEs. */
	memset(mem, 0xa5, info.size);
	memset(mem, 0, METAROCE_QUEUE_HDR_SIZE);
	metaroce_ring_init(ring, mem, &info);
	/* Start anywhere, e.g. just before the u32 wrap. */
	ring->index = start_index;
	ring->hdr->producer = start_index;
	ring->hdr->consumer = start_index;
	return mem;
}

struct test_qp_cfg {
	enum ibv_qp_type type;
	uint32_t sq_entries, sq_stride, rq_entries, rq_stride;
	uint32_t max_sge, max_inline;
	bool sig_all;
	uint64_t send_ops;	/* 0: no ibv_qp_ex API */
	uint32_t start_index;
};

static struct metaroce_qp *make_qp(const struct test_qp_cfg *cfg)
{
	struct metaroce_qp *qp = calloc(1, sizeof(*qp));

	if (!qp)
		abort();
	qp->vqp.qp.qp_type = cfg->type;
	qp->vqp.qp.state = IBV_QPS_RTS;
	alloc_ring(&qp->sq.ring, cfg->sq_entries, cfg->sq_stride,
		   cfg->start_index);
	alloc_ring(&qp->rq.ring, cfg->rq_entries, cfg->rq_stride,
		   cfg->start_index);
	qp->sq.max_sge = cfg->max_sge;
	qp->rq.max_sge = cfg->max_sge;
	qp->sq_caps.qp_type = cfg->type;
	qp->sq_caps.max_sge = cfg->max_sge;
	qp->sq_caps.max_inline = cfg->max_inline;
	qp->sq_caps.sig_all = cfg->sig_all;
	pthread_spin_init(&qp->sq.lock, PTHREAD_PROCESS_PRIVATE);
	pthread_spin_init(&qp->rq.lock, PTHREAD_PROCESS_PRIVATE);
	if (cfg->send_ops)
		metaroce_qp_init_wr_api(qp, cfg->send_ops);
	return qp;
}

static void free_qp(struct metaroce_qp *qp)
{
	pthread_spin_destroy(&qp->sq.lock);
	pthread_spin_destroy(&qp->rq.lock);
	free(qp->sq.ring.hdr);
	free(qp->rq.ring.hdr);
	free(qp);
}

static const struct test_qp_cfg rc_cfg = {
	.type = IBV_QPT_RC,
	.sq_entries = 8, .sq_stride = 128,	/* 64 head + 4 SGEs / 64 bytes */
	.rq_entries = 8, .rq_stride = 64,	/* 16 head + 3 SGEs */
	.max_sge = 3, .max_inline = 64,
	.send_ops = METAROCE_RC_SEND_OPS,
	.start_index = 0xfffffffdu,		/* wraps during the tests */
};

static const struct test_qp_cfg ud_cfg = {
	.type = IBV_QPT_UD,
	.sq_entries = 4, .sq_stride = 128,
	.rq_entries = 4, .rq_stride = 64,
	.max_sge = 2, .max_inline = 32,
	.send_ops = METAROCE_UD_SEND_OPS,
};

static struct metaroce_send_wqe *sq_wqe(struct metaroce_qp *qp, uint32_t idx)
{
	return metaroce_ring_slot(&qp->sq.ring, idx);
}

static struct metaroce_sge *wqe_sge(struct metaroce_send_wqe *wqe)
{
	return (struct metaroce_sge *)(wqe + 1);
}

static uint32_t producer(const struct metaroce_ring *ring)
{
	return __atomic_load_n(&ring->hdr->producer, __ATOMIC_ACQUIRE);
}

/* The kernel completes @n WQEs. */
static void kernel_consume(struct metaroce_ring *ring, uint32_t n)
{
	__atomic_store_n(&ring->hdr->consumer, ring->hdr->consumer + n,
			 __ATOMIC_RELEASE);
}

/* --- ring arithmetic ------------------------------------------------------ */

static void test_queue_info(void)
{
	struct metaroce_queue_info ok = {
		.offset = 4096, .size = 4096 + 16 * 64,
		.num_entries = 16, .entry_size = 64,
	};
	struct metaroce_queue_info bad;

	CHECK(metaroce_queue_info_valid(&ok, 64));
	CHECK(!metaroce_queue_info_valid(&ok, 65));	/* slots too small */
	bad = ok;
	bad.num_entries = 0;
	CHECK(!metaroce_queue_info_valid(&bad, 16));
	bad = ok;
	bad.num_entries = 12;				/* not a power of 2 */
	CHECK(!metaroce_queue_info_valid(&bad, 16));
	bad = ok;
	bad.size -= 1;					/* mapping too short */
	CHECK(!metaroce_queue_info_valid(&bad, 16));
	bad = ok;
	bad.entry_size = 68;				/* misaligned slots */
	CHECK(!metaroce_queue_info_valid(&bad, 16));
	bad = ok;
	bad.num_entries = 1u << 31;			/* overflow in u32 */
	bad.entry_size = 1u << 4;
	CHECK(!metaroce_queue_info_valid(&bad, 16));
}

static void test_ring_wrap(void)
{
	struct metaroce_ring ring;
	void *mem = alloc_ring(&ring, 4, 64, 0xfffffffeu);

	CHECK_EQ(metaroce_ring_free(&ring, ring.index), 4);
	CHECK(metaroce_ring_slot(&ring, 0xfffffffeu) ==
	      (uint8_t *)mem + METAROCE_QUEUE_HDR_SIZE + 2 * 64);
	CHECK(metaroce_ring_slot(&ring, 0x00000001u) ==
	      (uint8_t *)mem + METAROCE_QUEUE_HDR_SIZE + 1 * 64);
	metaroce_ring_publish(&ring, 0x00000002u);	/* 4 past 0xfffffffe */
	CHECK_EQ(ring.hdr->producer, 2);
	CHECK_EQ(metaroce_ring_free(&ring, ring.index), 0);
	kernel_consume(&ring, 3);
	CHECK_EQ(metaroce_ring_free(&ring, ring.index), 3);
	/* A consumer ahead of the producer is nonsense: no room. */
	ring.hdr->consumer = 5;
	CHECK_EQ(metaroce_ring_free(&ring, ring.index), 0);

	/* Consumer side. */
	ring.index = 0xffffffffu;
	ring.hdr->producer = 0x00000001u;
	CHECK_EQ(metaroce_ring_avail(&ring), 2);
	metaroce_ring_consume(&ring, 2);
	CHECK_EQ(ring.index, 1);
	CHECK_EQ(ring.hdr->consumer, 1);
	ring.hdr->producer = 100;			/* bogus: > a ring ahead */
	CHECK_EQ(metaroce_ring_avail(&ring), 0);
	free(mem);
}

/* --- ibv_post_send -------------------------------------------------------- */

static void test_post_send_rc(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	uint32_t p0 = qp->sq.ring.index;
	struct ibv_sge sg[2] = {
		{ .addr = 0x1000, .length = 100, .lkey = 7 },
		{ .addr = 0x2000, .length = 200, .lkey = 8 },
	};
	struct ibv_send_wr wr[3] = {}, *bad = NULL;
	struct metaroce_send_wqe *w;

	wr[0].wr_id = 11;
	wr[0].opcode = IBV_WR_SEND;
	wr[0].send_flags = IBV_SEND_SIGNALED | IBV_SEND_SOLICITED;
	wr[0].sg_list = sg;
	wr[0].num_sge = 2;
	wr[0].next = &wr[1];
	wr[1].wr_id = 12;
	wr[1].opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr[1].send_flags = IBV_SEND_FENCE;
	wr[1].imm_data = htobe32(0xdeadbeef);
	wr[1].wr.rdma.remote_addr = 0xabcdef0123ull;
	wr[1].wr.rdma.rkey = 0x55;
	wr[1].sg_list = sg;
	wr[1].num_sge = 1;
	wr[1].next = &wr[2];
	wr[2].wr_id = 13;
	wr[2].opcode = IBV_WR_RDMA_READ;
	wr[2].wr.rdma.remote_addr = 0x99;
	wr[2].wr.rdma.rkey = 0x66;
	wr[2].num_sge = 0;

	sq_doorbells = 0;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, wr, &bad), 0);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 3);
	CHECK_EQ(qp->sq.ring.index, p0 + 3);
	CHECK_EQ(sq_doorbells, 0);	/* kernel engine busy: no syscall */

	w = sq_wqe(qp, p0);
	CHECK_EQ(w->wr_id, 11);
	CHECK_EQ(w->opcode, IBV_WR_SEND);
	CHECK_EQ(w->flags, METAROCE_WQE_SIGNALED | METAROCE_WQE_SOLICITED);
	CHECK_EQ(w->num_sge, 2);
	CHECK_EQ(w->inline_len, 0);
	CHECK_EQ(w->imm_data, 0);
	CHECK_EQ(w->rdma.remote_addr, 0);
	CHECK_EQ(w->reserved0, 0);
	CHECK_EQ(w->reserved1[3], 0);
	CHECK_EQ(wqe_sge(w)[0].addr, 0x1000);
	CHECK_EQ(wqe_sge(w)[0].length, 100);
	CHECK_EQ(wqe_sge(w)[0].lkey, 7);
	CHECK_EQ(wqe_sge(w)[1].addr, 0x2000);
	CHECK_EQ(wqe_sge(w)[1].lkey, 8);

	w = sq_wqe(qp, p0 + 1);
	CHECK_EQ(w->opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
	CHECK_EQ(w->flags, METAROCE_WQE_FENCE);
	CHECK_EQ(w->imm_data, htobe32(0xdeadbeef));
	CHECK_EQ(w->rdma.remote_addr, 0xabcdef0123ull);
	CHECK_EQ(w->rdma.rkey, 0x55);
	CHECK_EQ(w->num_sge, 1);

	w = sq_wqe(qp, p0 + 2);
	CHECK_EQ(w->wr_id, 13);
	CHECK_EQ(w->opcode, IBV_WR_RDMA_READ);
	CHECK_EQ(w->flags, 0);
	CHECK_EQ(w->num_sge, 0);
	CHECK_EQ(w->rdma.rkey, 0x66);

	/* The engine went idle: the next post rings exactly once. */
	qp->sq.ring.hdr->doorbell_needed = 1;
	wr[2].next = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr[2], &bad), 0);
	CHECK_EQ(sq_doorbells, 1);
	/* Nothing posted, nothing rung. */
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, NULL, &bad), 0);
	CHECK_EQ(sq_doorbells, 1);
	free_qp(qp);
}

static void test_post_send_inline(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	uint32_t p0 = qp->sq.ring.index;
	char a[40], b[24], big[65];
	struct ibv_sge sg[2] = {
		{ .addr = (uintptr_t)a, .length = sizeof(a), .lkey = 0 },
		{ .addr = (uintptr_t)b, .length = sizeof(b), .lkey = 0 },
	};
	struct ibv_sge sg_big = { .addr = (uintptr_t)big, .length = sizeof(big) };
	struct ibv_send_wr wr = {}, *bad = NULL;
	struct metaroce_send_wqe *w;

	memset(a, 'a', sizeof(a));
	memset(b, 'b', sizeof(b));
	memset(big, 'x', sizeof(big));
	wr.wr_id = 1;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_INLINE;
	wr.sg_list = sg;
	wr.num_sge = 2;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr, &bad), 0);
	w = sq_wqe(qp, p0);
	CHECK_EQ(w->flags, METAROCE_WQE_INLINE);
	CHECK_EQ(w->num_sge, 0);
	CHECK_EQ(w->inline_len, 64);
	CHECK(memcmp(w + 1, a, sizeof(a)) == 0);
	CHECK(memcmp((char *)(w + 1) + sizeof(a), b, sizeof(b)) == 0);

	/* 65 bytes > max_inline: rejected, nothing posted. */
	wr.sg_list = &sg_big;
	wr.num_sge = 1;
	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 1);

	/* An inline READ makes no sense. */
	wr.opcode = IBV_WR_RDMA_READ;
	wr.sg_list = sg;
	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr);

	/* Zero bytes inline, no buffer at all. */
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.sg_list = NULL;
	wr.num_sge = 0;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr, &bad), 0);
	w = sq_wqe(qp, p0 + 1);
	CHECK_EQ(w->flags, METAROCE_WQE_INLINE);
	CHECK_EQ(w->inline_len, 0);
	free_qp(qp);
}

static void test_post_send_errors(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	uint32_t p0 = qp->sq.ring.index;
	struct ibv_sge sg[4] = {};
	struct ibv_send_wr wr[3] = {}, *bad;

	wr[0].opcode = IBV_WR_SEND;
	wr[0].next = &wr[1];
	wr[1].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;	/* not supported */
	wr[1].next = &wr[2];
	wr[2].opcode = IBV_WR_SEND;

	/* The WRs before the bad one are posted, the rest are not. */
	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, wr, &bad), EINVAL);
	CHECK(bad == &wr[1]);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 1);

	wr[1].opcode = IBV_WR_SEND;
	wr[1].sg_list = sg;
	wr[1].num_sge = 4;				/* > max_sge */
	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr[1], &bad), EINVAL);
	CHECK(bad == &wr[1]);

	wr[1].num_sge = -1;
	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr[1], &bad), EINVAL);

	wr[1].num_sge = 0;
	wr[1].send_flags = IBV_SEND_IP_CSUM;
	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr[1], &bad), EINVAL);

	/* A bind that names no window. */
	wr[1].send_flags = 0;
	wr[1].opcode = IBV_WR_BIND_MW;
	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr[1], &bad), EINVAL);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 1);
	free_qp(qp);
}

/*
 * A window grants remote rights only: a zero-based one (or any unknown
 * bit) fails the post, before the kernel could fail the QP for it; local
 * write, which applications pass out of habit, is dropped.
 */
static void test_post_bind_rights(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	uint32_t p0 = qp->sq.ring.index;
	struct ibv_mw mw = { .rkey = 0x80000a00, .type = IBV_MW_TYPE_1 };
	struct ibv_mr mr = { .lkey = 0x1234 };
	struct ibv_send_wr wr = {}, *bad;
	struct metaroce_send_wqe *w;

	wr.opcode = IBV_WR_BIND_MW;
	wr.bind_mw.mw = &mw;
	wr.bind_mw.rkey = 0x80000a01;
	wr.bind_mw.bind_info.mr = &mr;
	wr.bind_mw.bind_info.addr = 0x1000;
	wr.bind_mw.bind_info.length = 64;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ |
					       IBV_ACCESS_ZERO_BASED;
	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr);
	CHECK_EQ(producer(&qp->sq.ring), p0);

	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_READ |
					       IBV_ACCESS_LOCAL_WRITE;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr, &bad), 0);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 1);
	w = sq_wqe(qp, p0);
	CHECK_EQ(w->bind_mr.access, IBV_ACCESS_REMOTE_READ);
	CHECK_EQ(w->bind.rkey, 0x80000a01);
	CHECK_EQ(w->bind.mw_rkey, 0x80000a00);
	CHECK_EQ(w->bind_mr.mr_lkey, 0x1234);
	free_qp(qp);
}

static void test_post_send_full(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	uint32_t p0 = qp->sq.ring.index;
	struct ibv_send_wr wr[9] = {}, *bad;
	int i;

	for (i = 0; i < 9; i++) {
		wr[i].wr_id = i;
		wr[i].opcode = IBV_WR_SEND;
		wr[i].next = i < 8 ? &wr[i + 1] : NULL;
	}
	/* 8 slots: the ninth does not fit. */
	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, wr, &bad), ENOMEM);
	CHECK(bad == &wr[8]);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 8);

	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr[8], &bad), ENOMEM);
	CHECK(bad == &wr[8]);

	/* The kernel completes 2; 2 more fit, a third does not. */
	kernel_consume(&qp->sq.ring, 2);
	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr[6], &bad), ENOMEM);
	CHECK(bad == &wr[8]);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 10);
	CHECK_EQ(sq_wqe(qp, p0 + 8)->wr_id, 6);	/* reused slot 0 */
	CHECK_EQ(sq_wqe(qp, p0 + 9)->wr_id, 7);
	free_qp(qp);
}

static void test_post_send_ud(void)
{
	struct metaroce_qp *qp = make_qp(&ud_cfg);
	struct metaroce_ah ah = { .ah_num = 77 };
	struct ibv_sge sg = { .addr = 0x10, .length = 20, .lkey = 3 };
	struct ibv_send_wr wr = {}, *bad;
	struct metaroce_send_wqe *w;

	wr.wr_id = 5;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.imm_data = htobe32(42);
	wr.sg_list = &sg;
	wr.num_sge = 1;
	wr.wr.ud.ah = &ah.ibv_ah;
	wr.wr.ud.remote_qpn = 0x123456;
	wr.wr.ud.remote_qkey = 0x11111111;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr, &bad), 0);
	w = sq_wqe(qp, 0);
	CHECK_EQ(w->opcode, IBV_WR_SEND_WITH_IMM);
	CHECK_EQ(w->imm_data, htobe32(42));
	CHECK_EQ(w->ud.ah, 77);
	CHECK_EQ(w->ud.remote_qpn, 0x123456);
	CHECK_EQ(w->ud.remote_qkey, 0x11111111);
	CHECK_EQ(w->ud.reserved, 0);
	CHECK_EQ(w->num_sge, 1);

	wr.opcode = IBV_WR_RDMA_WRITE;			/* RC only */
	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr, &bad), EINVAL);
	CHECK(bad == &wr);
	wr.opcode = IBV_WR_SEND;
	wr.wr.ud.ah = NULL;				/* no destination */
	bad = NULL;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr, &bad), EINVAL);
	CHECK_EQ(producer(&qp->sq.ring), 1);
	free_qp(qp);
}

static void test_post_send_sig_all(void)
{
	struct test_qp_cfg cfg = rc_cfg;
	struct metaroce_qp *qp;
	struct ibv_send_wr wr = { .opcode = IBV_WR_SEND }, *bad;

	cfg.sig_all = true;
	qp = make_qp(&cfg);
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr, &bad), 0);
	CHECK_EQ(sq_wqe(qp, cfg.start_index)->flags, METAROCE_WQE_SIGNALED);
	free_qp(qp);
}

static void test_post_send_doorbell_error(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	struct ibv_send_wr wr[2] = {}, *bad = NULL;

	wr[0].opcode = IBV_WR_SEND;
	wr[0].next = &wr[1];
	wr[1].opcode = IBV_WR_SEND;
	qp->sq.ring.hdr->doorbell_needed = 1;
	doorbell_ret = EIO;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, wr, &bad), EIO);
	CHECK(bad == &wr[0]);
	doorbell_ret = 0;
	free_qp(qp);
}

/* --- ibv_post_recv -------------------------------------------------------- */

static void test_post_recv(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	uint32_t p0 = qp->rq.ring.index;
	struct ibv_sge sg[4] = {
		{ .addr = 0x100, .length = 1, .lkey = 1 },
		{ .addr = 0x200, .length = 2, .lkey = 2 },
		{ .addr = 0x300, .length = 3, .lkey = 3 },
	};
	struct ibv_recv_wr wr[9] = {}, *bad;
	struct metaroce_recv_wqe *w;
	struct metaroce_sge *s;
	int i;

	wr[0].wr_id = 21;
	wr[0].sg_list = sg;
	wr[0].num_sge = 3;
	wr[0].next = &wr[1];
	wr[1].wr_id = 22;
	sq_doorbells = 0;
	rq_doorbells = 0;
	CHECK_EQ(metaroce_post_recv(&qp->vqp.qp, wr, &bad), 0);
	CHECK_EQ(producer(&qp->rq.ring), p0 + 2);
	CHECK_EQ(rq_doorbells, 0);
	w = metaroce_ring_slot(&qp->rq.ring, p0);
	s = (struct metaroce_sge *)(w + 1);
	CHECK_EQ(w->wr_id, 21);
	CHECK_EQ(w->num_sge, 3);
	CHECK_EQ(w->reserved, 0);
	CHECK_EQ(s[2].addr, 0x300);
	CHECK_EQ(s[2].length, 3);
	CHECK_EQ(s[2].lkey, 3);
	w = metaroce_ring_slot(&qp->rq.ring, p0 + 1);
	CHECK_EQ(w->wr_id, 22);
	CHECK_EQ(w->num_sge, 0);

	/* Too many SGEs. */
	wr[1].sg_list = sg;
	wr[1].num_sge = 4;
	wr[1].next = NULL;
	bad = NULL;
	CHECK_EQ(metaroce_post_recv(&qp->vqp.qp, &wr[1], &bad), EINVAL);
	CHECK(bad == &wr[1]);

	/* In the error state the kernel wants a doorbell to flush them. */
	qp->rq.ring.hdr->doorbell_needed = 1;
	wr[1].num_sge = 1;
	CHECK_EQ(metaroce_post_recv(&qp->vqp.qp, &wr[1], &bad), 0);
	CHECK_EQ(rq_doorbells, 1);
	CHECK_EQ(sq_doorbells, 0);

	/* Full after 8. */
	for (i = 0; i < 9; i++) {
		wr[i].num_sge = 0;
		wr[i].next = i < 8 ? &wr[i + 1] : NULL;
	}
	bad = NULL;
	CHECK_EQ(metaroce_post_recv(&qp->vqp.qp, wr, &bad), ENOMEM);
	CHECK(bad == &wr[5]);			/* 3 were posted already */
	CHECK_EQ(producer(&qp->rq.ring), p0 + 8);

	/* No receives in RESET (C10-97.2.1). */
	kernel_consume(&qp->rq.ring, 8);
	qp->vqp.qp.state = IBV_QPS_RESET;
	bad = NULL;
	CHECK_EQ(metaroce_post_recv(&qp->vqp.qp, &wr[8], &bad), EINVAL);
	CHECK(bad == &wr[8]);
	CHECK_EQ(producer(&qp->rq.ring), p0 + 8);
	free_qp(qp);
}

/* --- the ibv_qp_ex API ---------------------------------------------------- */

static void test_wr_api_ops(void)
{
	struct test_qp_cfg cfg = rc_cfg;
	struct metaroce_qp *qp;
	struct ibv_qp_ex *qpx;

	cfg.send_ops = IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_RDMA_READ;
	qp = make_qp(&cfg);
	qpx = &qp->vqp.qp_ex;
	CHECK(qp->vqp.comp_mask & VERBS_QP_EX);
	CHECK(qpx->wr_send && qpx->wr_rdma_read);
	CHECK(!qpx->wr_send_imm && !qpx->wr_rdma_write &&
	      !qpx->wr_rdma_write_imm);
	CHECK(!qpx->wr_atomic_cmp_swp && !qpx->wr_atomic_fetch_add &&
	      !qpx->wr_bind_mw && !qpx->wr_local_inv && !qpx->wr_send_inv &&
	      !qpx->wr_send_tso && !qpx->wr_set_xrc_srqn &&
	      !qpx->wr_atomic_write);
	CHECK(qpx->wr_start && qpx->wr_complete && qpx->wr_abort &&
	      qpx->wr_set_sge && qpx->wr_set_sge_list &&
	      qpx->wr_set_inline_data && qpx->wr_set_inline_data_list &&
	      qpx->wr_set_ud_addr);
	free_qp(qp);

	cfg.send_ops = 0;
	qp = make_qp(&cfg);
	CHECK(!(qp->vqp.comp_mask & VERBS_QP_EX));
	free_qp(qp);
}

static void test_wr_api_rc(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	uint32_t p0 = qp->sq.ring.index;
	struct ibv_sge sgl[2] = {
		{ .addr = 0x5000, .length = 50, .lkey = 5 },
		{ .addr = 0x6000, .length = 60, .lkey = 6 },
	};
	char data[10] = "0123456789";
	struct ibv_data_buf bufs[2] = {
		{ .addr = data, .length = 4 },
		{ .addr = data + 4, .length = 6 },
	};
	struct metaroce_send_wqe *w;

	sq_doorbells = 0;
	qp->sq.ring.hdr->doorbell_needed = 1;
	ibv_wr_start(qpx);

	qpx->wr_id = 1;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, 9, 0x9000, 90);

	qpx->wr_id = 2;
	/* perftest passes IBV_SEND_INLINE too; the setter decides. */
	qpx->wr_flags = IBV_SEND_INLINE;
	ibv_wr_rdma_write(qpx, 0x77, 0x123456789ull);
	ibv_wr_set_inline_data(qpx, data, sizeof(data));

	qpx->wr_id = 3;
	qpx->wr_flags = IBV_SEND_FENCE;
	ibv_wr_rdma_read(qpx, 0x88, 0x42);
	ibv_wr_set_sge_list(qpx, 2, sgl);

	qpx->wr_id = 4;
	qpx->wr_flags = IBV_SEND_SOLICITED;
	ibv_wr_send_imm(qpx, htobe32(7));
	ibv_wr_set_inline_data_list(qpx, 2, bufs);

	qpx->wr_id = 5;
	qpx->wr_flags = 0;
	ibv_wr_rdma_write_imm(qpx, 0x99, 0x1000, htobe32(8));
	ibv_wr_set_sge(qpx, 1, 2, 3);

	/* Nothing visible before wr_complete(). */
	CHECK_EQ(producer(&qp->sq.ring), p0);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 5);
	CHECK_EQ(sq_doorbells, 1);

	w = sq_wqe(qp, p0);
	CHECK_EQ(w->wr_id, 1);
	CHECK_EQ(w->opcode, IBV_WR_SEND);
	CHECK_EQ(w->flags, METAROCE_WQE_SIGNALED);
	CHECK_EQ(w->num_sge, 1);
	CHECK_EQ(wqe_sge(w)[0].addr, 0x9000);
	CHECK_EQ(wqe_sge(w)[0].length, 90);
	CHECK_EQ(wqe_sge(w)[0].lkey, 9);

	w = sq_wqe(qp, p0 + 1);
	CHECK_EQ(w->wr_id, 2);
	CHECK_EQ(w->opcode, IBV_WR_RDMA_WRITE);
	CHECK_EQ(w->flags, METAROCE_WQE_INLINE);
	CHECK_EQ(w->rdma.remote_addr, 0x123456789ull);
	CHECK_EQ(w->rdma.rkey, 0x77);
	CHECK_EQ(w->inline_len, 10);
	CHECK_EQ(w->num_sge, 0);
	CHECK(memcmp(w + 1, data, 10) == 0);

	w = sq_wqe(qp, p0 + 2);
	CHECK_EQ(w->opcode, IBV_WR_RDMA_READ);
	CHECK_EQ(w->flags, METAROCE_WQE_FENCE);
	CHECK_EQ(w->rdma.rkey, 0x88);
	CHECK_EQ(w->num_sge, 2);
	CHECK_EQ(wqe_sge(w)[1].addr, 0x6000);
	CHECK_EQ(wqe_sge(w)[1].lkey, 6);

	w = sq_wqe(qp, p0 + 3);
	CHECK_EQ(w->opcode, IBV_WR_SEND_WITH_IMM);
	CHECK_EQ(w->flags, METAROCE_WQE_SOLICITED | METAROCE_WQE_INLINE);
	CHECK_EQ(w->imm_data, htobe32(7));
	CHECK_EQ(w->inline_len, 10);
	CHECK(memcmp(w + 1, data, 10) == 0);

	w = sq_wqe(qp, p0 + 4);
	CHECK_EQ(w->opcode, IBV_WR_RDMA_WRITE_WITH_IMM);
	CHECK_EQ(w->imm_data, htobe32(8));
	CHECK_EQ(w->rdma.rkey, 0x99);
	CHECK_EQ(w->num_sge, 1);

	/* An empty batch posts and rings nothing. */
	ibv_wr_start(qpx);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(sq_doorbells, 1);
	free_qp(qp);
}

static void test_wr_api_abort(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	uint32_t p0 = qp->sq.ring.index;

	ibv_wr_start(qpx);
	qpx->wr_id = 100;
	qpx->wr_flags = 0;
	ibv_wr_send(qpx);
	ibv_wr_set_sge(qpx, 1, 1, 1);
	ibv_wr_abort(qpx);
	CHECK_EQ(producer(&qp->sq.ring), p0);
	CHECK_EQ(qp->sq.ring.index, p0);

	/* The lock was released and the slot is reused. */
	ibv_wr_start(qpx);
	qpx->wr_id = 101;
	ibv_wr_send(qpx);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 1);
	CHECK_EQ(sq_wqe(qp, p0)->wr_id, 101);
	CHECK_EQ(sq_wqe(qp, p0)->num_sge, 0);
	free_qp(qp);
}

/* Runs one batch that fails; checks that nothing of it is posted. */
#define CHECK_BATCH_FAILS(qp, qpx, err, ...)                                   \
	do {                                                                   \
		uint32_t _p = producer(&(qp)->sq.ring);                        \
		ibv_wr_start(qpx);                                             \
		qpx->wr_id = 0;                                                \
		qpx->wr_flags = 0;                                             \
		__VA_ARGS__;                                                   \
		CHECK_EQ(ibv_wr_complete(qpx), err);                           \
		CHECK_EQ(producer(&(qp)->sq.ring), _p);                        \
		CHECK_EQ((qp)->sq.ring.index, _p);                             \
	} while (0)

static void test_wr_api_errors(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	struct metaroce_ah ah = { .ah_num = 1 };
	struct ibv_sge sgl[4] = {};
	char big[65] = {};
	int i;

	/* A setter with no WQE to apply to. */
	CHECK_BATCH_FAILS(qp, qpx, EINVAL, ibv_wr_set_sge(qpx, 1, 1, 1));
	/* Good WQE, then a bad one: the whole batch is dropped. */
	CHECK_BATCH_FAILS(qp, qpx, EINVAL, ibv_wr_send(qpx);
			  ibv_wr_send(qpx); ibv_wr_set_sge_list(qpx, 4, sgl));
	CHECK_BATCH_FAILS(qp, qpx, EINVAL, ibv_wr_send(qpx);
			  ibv_wr_set_inline_data(qpx, big, sizeof(big)));
	CHECK_BATCH_FAILS(qp, qpx, EINVAL, ibv_wr_rdma_read(qpx, 1, 1);
			  ibv_wr_set_inline_data(qpx, big, 1));
	/* UD addressing on an RC QP. */
	CHECK_BATCH_FAILS(qp, qpx, EINVAL, ibv_wr_send(qpx);
			  ibv_wr_set_ud_addr(qpx, &ah.ibv_ah, 1, 1));
	/* Unsupported flags. */
	CHECK_BATCH_FAILS(qp, qpx, EINVAL, qpx->wr_flags = IBV_SEND_IP_CSUM;
			  ibv_wr_send(qpx));
	/* More WQEs than slots; the first error sticks. */
	CHECK_BATCH_FAILS(qp, qpx, ENOMEM, for (i = 0; i < 9; i++) {
		ibv_wr_send(qpx);
		ibv_wr_set_sge(qpx, 1, 1, 1);
	});
	CHECK_BATCH_FAILS(qp, qpx, ENOMEM, for (i = 0; i < 9; i++)
		ibv_wr_send(qpx);
		ibv_wr_set_sge_list(qpx, 4, sgl));

	/* Exactly full is fine. */
	ibv_wr_start(qpx);
	for (i = 0; i < 8; i++)
		ibv_wr_send(qpx);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(metaroce_ring_free(&qp->sq.ring, qp->sq.ring.index), 0);
	free_qp(qp);
}

static void test_wr_api_ud(void)
{
	struct metaroce_qp *qp = make_qp(&ud_cfg);
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	struct metaroce_ah ah = { .ah_num = 1234 };
	struct metaroce_send_wqe *w;

	CHECK(qpx->wr_send && qpx->wr_send_imm && !qpx->wr_rdma_write &&
	      !qpx->wr_rdma_read && !qpx->wr_rdma_write_imm);

	/* perftest's order: opcode, address, data. */
	ibv_wr_start(qpx);
	qpx->wr_id = 9;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qpx);
	ibv_wr_set_ud_addr(qpx, &ah.ibv_ah, 0xabc, 0x11111111);
	ibv_wr_set_sge(qpx, 4, 0x4000, 40);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	w = sq_wqe(qp, 0);
	CHECK_EQ(w->wr_id, 9);
	CHECK_EQ(w->ud.ah, 1234);
	CHECK_EQ(w->ud.remote_qpn, 0xabc);
	CHECK_EQ(w->ud.remote_qkey, 0x11111111);
	CHECK_EQ(w->num_sge, 1);

	CHECK_BATCH_FAILS(qp, qpx, EINVAL, ibv_wr_send(qpx);
			  ibv_wr_set_ud_addr(qpx, NULL, 1, 1));
	free_qp(qp);
}

/* --- ibv_poll_cq ---------------------------------------------------------- */

static struct metaroce_cq *make_cq(uint32_t entries, uint32_t start)
{
	struct metaroce_cq *cq = calloc(1, sizeof(*cq));

	if (!cq)
		abort();
	alloc_ring(&cq->ring, entries, sizeof(struct metaroce_cqe), start);
	pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE);
	return cq;
}

static void free_cq(struct metaroce_cq *cq)
{
	pthread_spin_destroy(&cq->lock);
	free(cq->ring.hdr);
	free(cq);
}

/* The kernel adds a completion. */
static void kernel_cqe(struct metaroce_cq *cq, const struct metaroce_cqe *cqe)
{
	uint32_t p = cq->ring.hdr->producer;

	memcpy(metaroce_ring_slot(&cq->ring, p), cqe, sizeof(*cqe));
	__atomic_store_n(&cq->ring.hdr->producer, p + 1, __ATOMIC_RELEASE);
}

static void test_poll_cq(void)
{
	struct metaroce_cq *cq = make_cq(4, 0xfffffffeu);
	struct metaroce_cqe cqe = {};
	struct ibv_wc wc[8];
	int i;

	memset(wc, 0xee, sizeof(wc));
	CHECK_EQ(metaroce_poll_cq(&cq->vcq.cq, 8, wc), 0);

	for (i = 0; i < 3; i++) {
		memset(&cqe, 0, sizeof(cqe));
		cqe.wr_id = 1000 + i;
		cqe.status = i == 2 ? IBV_WC_WR_FLUSH_ERR : IBV_WC_SUCCESS;
		cqe.opcode = i == 0 ? IBV_WC_RECV : IBV_WC_RDMA_WRITE;
		cqe.vendor_err = i == 2 ? 0x33 : 0;
		cqe.byte_len = 100 + i;
		cqe.qp_num = 0x20 + i;
		cqe.src_qp = 0x30 + i;
		cqe.pkey_index = 0;
		if (i == 0) {
			cqe.flags = METAROCE_CQE_WITH_IMM | METAROCE_CQE_GRH;
			cqe.imm_data = htobe32(0xcafe);
		}
		kernel_cqe(cq, &cqe);
	}

	CHECK_EQ(metaroce_poll_cq(&cq->vcq.cq, 2, wc), 2);
	CHECK_EQ(cq->ring.hdr->consumer, 0);		/* wrapped */
	CHECK_EQ(wc[0].wr_id, 1000);
	CHECK_EQ(wc[0].status, IBV_WC_SUCCESS);
	CHECK_EQ(wc[0].opcode, IBV_WC_RECV);
	CHECK_EQ(wc[0].byte_len, 100);
	CHECK_EQ(wc[0].qp_num, 0x20);
	CHECK_EQ(wc[0].src_qp, 0x30);
	CHECK_EQ(wc[0].wc_flags, IBV_WC_WITH_IMM | IBV_WC_GRH);
	CHECK_EQ(wc[0].imm_data, htobe32(0xcafe));
	CHECK_EQ(wc[0].slid, 0);
	CHECK_EQ(wc[0].sl, 0);
	CHECK_EQ(wc[0].dlid_path_bits, 0);
	CHECK_EQ(wc[1].wr_id, 1001);
	CHECK_EQ(wc[1].opcode, IBV_WC_RDMA_WRITE);
	CHECK_EQ(wc[1].wc_flags, 0);
	CHECK_EQ(wc[1].imm_data, 0);

	CHECK_EQ(metaroce_poll_cq(&cq->vcq.cq, 8, wc), 1);
	CHECK_EQ(wc[0].wr_id, 1002);
	CHECK_EQ(wc[0].status, IBV_WC_WR_FLUSH_ERR);
	CHECK_EQ(wc[0].vendor_err, 0x33);
	CHECK_EQ(cq->ring.hdr->consumer, 1);
	CHECK_EQ(metaroce_poll_cq(&cq->vcq.cq, 8, wc), 0);
	CHECK_EQ(metaroce_poll_cq(&cq->vcq.cq, 0, wc), 0);
	CHECK_EQ(metaroce_poll_cq(&cq->vcq.cq, -1, wc), 0);

	/* A full ring: all 4 entries. */
	for (i = 0; i < 4; i++) {
		cqe.wr_id = 2000 + i;
		kernel_cqe(cq, &cqe);
	}
	CHECK_EQ(metaroce_poll_cq(&cq->vcq.cq, 8, wc), 4);
	CHECK_EQ(wc[3].wr_id, 2003);

	cq->broken = true;
	kernel_cqe(cq, &cqe);
	CHECK_EQ(metaroce_poll_cq(&cq->vcq.cq, 8, wc), -1);
	free_cq(cq);
}

/*
 * A datagram's network header type is in wc.sl, as mlx5 reports it on
 * RoCE (UCX finds the destination GID by it); nothing else carries one.
 */
static void test_wc_network_header(void)
{
	static const struct {
		uint32_t flags;
		uint8_t type;
		uint8_t sl;
	} cases[] = {
		{ METAROCE_CQE_GRH, METAROCE_NETWORK_IPV4, METAROCE_WC_SL_IPV4 },
		{ METAROCE_CQE_GRH, METAROCE_NETWORK_IPV6, METAROCE_WC_SL_IPV6 },
		{ METAROCE_CQE_GRH, 0, 0 },
		{ 0, METAROCE_NETWORK_IPV4, 0 },
	};
	struct metaroce_cqe cqe;
	struct ibv_wc wc;
	size_t i;

	CHECK_EQ(METAROCE_WC_SL_IPV4, 2);
	CHECK_EQ(METAROCE_WC_SL_IPV6, 1);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&cqe, 0, sizeof(cqe));
		memset(&wc, 0xee, sizeof(wc));
		cqe.flags = cases[i].flags;
		cqe.network_hdr_type = cases[i].type;
		metaroce_cqe_to_wc(&cqe, &wc);
		CHECK_EQ(wc.sl, cases[i].sl);
	}
}

/*
 * A SEND with invalidate carries the key where immediate data would be; a
 * receive completion reports the key the peer's SEND invalidated.
 */
static void test_send_with_invalidate(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	uint32_t p0 = qp->sq.ring.index;
	struct ibv_send_wr wr = {}, *bad = NULL;
	struct metaroce_send_wqe *w;
	struct metaroce_cqe cqe = {};
	struct ibv_wc wc;

	wr.wr_id = 21;
	wr.opcode = IBV_WR_SEND_WITH_INV;
	wr.invalidate_rkey = 0x12345678;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr, &bad), 0);
	w = sq_wqe(qp, p0);
	CHECK_EQ(w->opcode, IBV_WR_SEND_WITH_INV);
	CHECK_EQ(w->invalidate_rkey, 0x12345678);
	CHECK_EQ(w->rdma.rkey, 0);

	/* The same through ibv_wr_send_inv() (rc_cfg has every RC op). */
	CHECK(qp->vqp.qp_ex.wr_send_inv);
	ibv_wr_start(&qp->vqp.qp_ex);
	qp->vqp.qp_ex.wr_id = 22;
	qp->vqp.qp_ex.wr_flags = 0;
	ibv_wr_send_inv(&qp->vqp.qp_ex, 0x87654321);
	ibv_wr_set_sge(&qp->vqp.qp_ex, 9, 0x9000, 90);
	CHECK_EQ(ibv_wr_complete(&qp->vqp.qp_ex), 0);
	w = sq_wqe(qp, p0 + 1);
	CHECK_EQ(w->wr_id, 22);
	CHECK_EQ(w->opcode, IBV_WR_SEND_WITH_INV);
	CHECK_EQ(w->invalidate_rkey, 0x87654321);
	CHECK_EQ(w->num_sge, 1);
	free_qp(qp);

	cqe.opcode = IBV_WC_RECV;
	cqe.flags = METAROCE_CQE_WITH_INV;
	cqe.invalidated_rkey = 0xabcdef01;
	memset(&wc, 0xee, sizeof(wc));
	metaroce_cqe_to_wc(&cqe, &wc);
	CHECK_EQ(wc.wc_flags, IBV_WC_WITH_INV);
	CHECK_EQ(wc.invalidated_rkey, 0xabcdef01);
}

/* --- the ibv_cq_ex poll API ------------------------------------------------ */

static struct metaroce_cq *make_cq_ex(uint32_t entries, uint32_t start,
				      uint64_t wc_flags)
{
	struct metaroce_cq *cq = make_cq(entries, start);

	metaroce_cq_init_poll_ex(cq, wc_flags);
	return cq;
}

/* Whether a batch still holds the CQ lock (a poller would have to wait). */
static bool cq_locked(struct metaroce_cq *cq)
{
	if (pthread_spin_trylock(&cq->lock))
		return true;
	pthread_spin_unlock(&cq->lock);
	return false;
}

/* One CQE of each kind the kernel writes, read back through ibv_cq_ex. */
static void test_cq_ex_poll(void)
{
	struct metaroce_cq *cq = make_cq_ex(8, 0xfffffffdu,
					    METAROCE_CQ_WC_FLAGS);
	struct ibv_cq_ex *x = &cq->vcq.cq_ex;
	struct ibv_poll_cq_attr attr = {};
	struct metaroce_cqe cqe;
	uint32_t c0 = cq->ring.index;

	CHECK(x->read_byte_len && x->read_imm_data && x->read_qp_num &&
	      x->read_src_qp && x->read_slid && x->read_sl &&
	      x->read_dlid_path_bits && x->read_wc_flags);
	CHECK(!x->read_completion_ts && !x->read_cvlan && !x->read_flow_tag);

	/* Empty: ENOENT, and no batch was started. */
	CHECK_EQ(ibv_start_poll(x, &attr), ENOENT);
	CHECK(!cq_locked(cq));

	/* A SEND completed on the send queue of QP 0x11. */
	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = 501;
	cqe.opcode = IBV_WC_SEND;
	cqe.qp_num = 0x11;
	kernel_cqe(cq, &cqe);
	/* A SEND with immediate received (on an SRQ: the QP is still named). */
	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = 502;
	cqe.opcode = IBV_WC_RECV;
	cqe.byte_len = 4000;
	cqe.qp_num = 0x12;
	cqe.flags = METAROCE_CQE_WITH_IMM;
	cqe.imm_data = htobe32(0xfeedbeef);
	kernel_cqe(cq, &cqe);
	/* A SEND with invalidate received. */
	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = 503;
	cqe.opcode = IBV_WC_RECV;
	cqe.byte_len = 7;
	cqe.qp_num = 0x12;
	cqe.flags = METAROCE_CQE_WITH_INV;
	cqe.invalidated_rkey = 0x00abcd01;
	kernel_cqe(cq, &cqe);
	/* A datagram over IPv4 from QP 0x77. */
	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = 504;
	cqe.opcode = IBV_WC_RECV;
	cqe.byte_len = 40 + 64;
	cqe.qp_num = 0x13;
	cqe.src_qp = 0x77;
	cqe.flags = METAROCE_CQE_GRH;
	cqe.network_hdr_type = METAROCE_NETWORK_IPV4;
	kernel_cqe(cq, &cqe);
	/* A WRITE with immediate received. */
	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = 505;
	cqe.opcode = IBV_WC_RECV_RDMA_WITH_IMM;
	cqe.byte_len = 600;
	cqe.qp_num = 0x12;
	cqe.flags = METAROCE_CQE_WITH_IMM;
	cqe.imm_data = htobe32(42);
	kernel_cqe(cq, &cqe);
	/* A WRITE the peer refused. */
	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = 506;
	cqe.status = IBV_WC_REM_ACCESS_ERR;
	cqe.opcode = IBV_WC_RDMA_WRITE;
	cqe.vendor_err = 0x44;
	cqe.qp_num = 0x11;
	kernel_cqe(cq, &cqe);

	CHECK_EQ(ibv_start_poll(x, &attr), 0);
	CHECK(cq_locked(cq));
	CHECK_EQ(x->wr_id, 501);
	CHECK_EQ(x->status, IBV_WC_SUCCESS);
	CHECK_EQ(ibv_wc_read_opcode(x), IBV_WC_SEND);
	CHECK_EQ(ibv_wc_read_qp_num(x), 0x11);
	CHECK_EQ(ibv_wc_read_wc_flags(x), 0);
	CHECK_EQ(ibv_wc_read_vendor_err(x), 0);

	CHECK_EQ(ibv_next_poll(x), 0);
	CHECK_EQ(x->wr_id, 502);
	CHECK_EQ(ibv_wc_read_opcode(x), IBV_WC_RECV);
	CHECK_EQ(ibv_wc_read_byte_len(x), 4000);
	CHECK_EQ(ibv_wc_read_wc_flags(x), IBV_WC_WITH_IMM);
	CHECK_EQ(ibv_wc_read_imm_data(x), htobe32(0xfeedbeef));
	CHECK_EQ(ibv_wc_read_qp_num(x), 0x12);
	CHECK_EQ(ibv_wc_read_src_qp(x), 0);

	CHECK_EQ(ibv_next_poll(x), 0);
	CHECK_EQ(x->wr_id, 503);
	CHECK_EQ(ibv_wc_read_wc_flags(x), IBV_WC_WITH_INV);
	CHECK_EQ(ibv_wc_read_invalidated_rkey(x), 0x00abcd01);
	CHECK_EQ(ibv_wc_read_byte_len(x), 7);

	CHECK_EQ(ibv_next_poll(x), 0);
	CHECK_EQ(x->wr_id, 504);
	CHECK_EQ(ibv_wc_read_wc_flags(x), IBV_WC_GRH);
	CHECK_EQ(ibv_wc_read_src_qp(x), 0x77);
	CHECK_EQ(ibv_wc_read_sl(x), METAROCE_WC_SL_IPV4);
	CHECK_EQ(ibv_wc_read_byte_len(x), 104);
	CHECK_EQ(ibv_wc_read_slid(x), 0);
	CHECK_EQ(ibv_wc_read_dlid_path_bits(x), 0);

	CHECK_EQ(ibv_next_poll(x), 0);
	CHECK_EQ(x->wr_id, 505);
	CHECK_EQ(ibv_wc_read_opcode(x), IBV_WC_RECV_RDMA_WITH_IMM);
	CHECK_EQ(ibv_wc_read_imm_data(x), htobe32(42));
	CHECK_EQ(ibv_wc_read_byte_len(x), 600);

	CHECK_EQ(ibv_next_poll(x), 0);
	CHECK_EQ(x->wr_id, 506);
	CHECK_EQ(x->status, IBV_WC_REM_ACCESS_ERR);
	CHECK_EQ(ibv_wc_read_vendor_err(x), 0x44);
	CHECK_EQ(ibv_wc_read_opcode(x), IBV_WC_RDMA_WRITE);

	/* The end: ENOENT, the batch still open, nothing given back yet. */
	CHECK_EQ(ibv_next_poll(x), ENOENT);
	CHECK_EQ(x->wr_id, 506);
	CHECK(cq_locked(cq));
	CHECK_EQ(cq->ring.hdr->consumer, c0);
	ibv_end_poll(x);
	CHECK(!cq_locked(cq));
	CHECK_EQ(cq->ring.index, c0 + 6);
	CHECK_EQ(cq->ring.hdr->consumer, c0 + 6);		/* wrapped */
	CHECK_EQ(ibv_start_poll(x, &attr), ENOENT);

	/* Another entry arrives during a batch: next_poll() finds it. */
	memset(&cqe, 0, sizeof(cqe));
	cqe.wr_id = 507;
	kernel_cqe(cq, &cqe);
	CHECK_EQ(ibv_start_poll(x, &attr), 0);
	CHECK_EQ(x->wr_id, 507);
	CHECK_EQ(ibv_next_poll(x), ENOENT);
	cqe.wr_id = 508;
	kernel_cqe(cq, &cqe);
	CHECK_EQ(ibv_next_poll(x), 0);
	CHECK_EQ(x->wr_id, 508);
	ibv_end_poll(x);
	CHECK_EQ(cq->ring.hdr->consumer, c0 + 8);

	/* attr->comp_mask has no bits defined yet. */
	attr.comp_mask = 1;
	kernel_cqe(cq, &cqe);
	CHECK_EQ(ibv_start_poll(x, &attr), EINVAL);
	CHECK(!cq_locked(cq));
	attr.comp_mask = 0;

	/* The same CQ polled with ibv_poll_cq(), as libibverbs allows. */
	{
		struct ibv_wc wc;

		memset(&wc, 0xee, sizeof(wc));
		CHECK_EQ(metaroce_poll_cq(ibv_cq_ex_to_cq(x), 1, &wc), 1);
		CHECK_EQ(wc.wr_id, 508);
		CHECK_EQ(cq->ring.hdr->consumer, c0 + 9);
	}

	/* A CQ whose ring cannot be seen (resize failed): EIO, no batch. */
	cq->broken = true;
	kernel_cqe(cq, &cqe);
	CHECK_EQ(ibv_start_poll(x, &attr), EIO);
	CHECK(!cq_locked(cq));
	free_cq(cq);
}

/*
 * The ring header is user-writable: a producer index from anywhere but
 * the kernel must neither make the provider read past the ring nor give
 * back slots it never read, and the consumer index in the header is only
 * a copy of ours.
 */
static void test_cq_ex_garbage_indices(void)
{
	struct metaroce_cq *cq = make_cq_ex(4, 0xfffffffeu, IBV_WC_EX_WITH_BYTE_LEN);
	struct ibv_cq_ex *x = &cq->vcq.cq_ex;
	struct ibv_poll_cq_attr attr = {};
	struct metaroce_cqe cqe = {};
	uint32_t c0 = cq->ring.index;
	int i;

	/* More than a ring ahead: nothing is there. */
	cq->ring.hdr->producer = c0 + 5;
	CHECK_EQ(ibv_start_poll(x, &attr), ENOENT);
	cq->ring.hdr->producer = c0 - 1;
	CHECK_EQ(ibv_start_poll(x, &attr), ENOENT);
	cq->ring.hdr->producer = 0x80000000u;
	CHECK_EQ(ibv_start_poll(x, &attr), ENOENT);
	CHECK_EQ(cq->ring.index, c0);

	/* Two real entries, and a scribbled consumer index. */
	cq->ring.hdr->producer = c0;
	for (i = 0; i < 2; i++) {
		cqe.wr_id = 600 + i;
		cqe.byte_len = 10 + i;
		kernel_cqe(cq, &cqe);
	}
	cq->ring.hdr->consumer = 0x12345678;
	CHECK_EQ(ibv_start_poll(x, &attr), 0);
	CHECK_EQ(x->wr_id, 600);
	/* The producer jumps beyond the ring mid-batch: nothing more. */
	cq->ring.hdr->producer = c0 + 100;
	CHECK_EQ(ibv_next_poll(x), ENOENT);
	/* It goes back behind what was read: still nothing. */
	cq->ring.hdr->producer = c0;
	CHECK_EQ(ibv_next_poll(x), ENOENT);
	ibv_end_poll(x);
	/* Only the one entry read is given back, from our own index. */
	CHECK_EQ(cq->ring.index, c0 + 1);
	CHECK_EQ(cq->ring.hdr->consumer, c0 + 1);

	cq->ring.hdr->producer = c0 + 2;
	CHECK_EQ(ibv_start_poll(x, &attr), 0);
	CHECK_EQ(x->wr_id, 601);
	CHECK_EQ(ibv_wc_read_byte_len(x), 11);
	CHECK_EQ(ibv_next_poll(x), ENOENT);
	ibv_end_poll(x);
	CHECK_EQ(cq->ring.hdr->consumer, c0 + 2);
	free_cq(cq);
}

/* What ibv_create_cq_ex() accepts, and the callbacks each wc_flags gets. */
static void test_cq_ex_attrs(void)
{
	static const struct {
		uint64_t wc_flags;
		uint32_t comp_mask, flags;
		int err;
	} cases[] = {
		{ 0, 0, 0, 0 },
		{ IBV_WC_STANDARD_FLAGS, 0, 0, 0 },
		{ IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, 0, 0, EOPNOTSUPP },
		{ IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK, 0, 0,
		  EOPNOTSUPP },
		{ IBV_WC_EX_WITH_CVLAN, 0, 0, EOPNOTSUPP },
		{ IBV_WC_EX_WITH_FLOW_TAG, 0, 0, EOPNOTSUPP },
		{ IBV_WC_EX_WITH_TM_INFO, 0, 0, EOPNOTSUPP },
		{ IBV_WC_EX_WITH_BYTE_LEN | (1ull << 40), 0, 0, EOPNOTSUPP },
		{ 0, IBV_CQ_INIT_ATTR_MASK_FLAGS,
		  IBV_CREATE_CQ_ATTR_SINGLE_THREADED, 0 },
		{ 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, 0, 0 },
		{ 0, IBV_CQ_INIT_ATTR_MASK_FLAGS,
		  IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN, EOPNOTSUPP },
		{ 0, IBV_CQ_INIT_ATTR_MASK_FLAGS, 1u << 7, EOPNOTSUPP },
		/* Flags without the mask bit are not looked at. */
		{ 0, 0, 0xffffffffu, 0 },
		{ 0, IBV_CQ_INIT_ATTR_MASK_PD, 0, EOPNOTSUPP },
		{ 0, 1u << 2, 0, EINVAL },
		{ 0, 1u << 31, 0, EINVAL },
	};
	struct ibv_cq_init_attr_ex attr;
	struct metaroce_cq *cq;
	size_t i;
	int err;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memset(&attr, 0, sizeof(attr));
		attr.cqe = 16;
		attr.wc_flags = cases[i].wc_flags;
		attr.comp_mask = cases[i].comp_mask;
		attr.flags = cases[i].flags;
		err = metaroce_cq_ex_check(&attr);
		if (err != cases[i].err)
			fprintf(stderr, "attribute case %zu:\n", i);
		CHECK_EQ(err, cases[i].err);
	}

	/* Only the fields asked for get a read_*() callback. */
	cq = make_cq_ex(4, 0, IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_SL);
	CHECK(cq->vcq.cq_ex.start_poll && cq->vcq.cq_ex.next_poll &&
	      cq->vcq.cq_ex.end_poll && cq->vcq.cq_ex.read_opcode &&
	      cq->vcq.cq_ex.read_vendor_err && cq->vcq.cq_ex.read_wc_flags);
	CHECK(cq->vcq.cq_ex.read_imm_data && cq->vcq.cq_ex.read_sl);
	CHECK(!cq->vcq.cq_ex.read_byte_len && !cq->vcq.cq_ex.read_qp_num &&
	      !cq->vcq.cq_ex.read_src_qp && !cq->vcq.cq_ex.read_slid &&
	      !cq->vcq.cq_ex.read_dlid_path_bits);
	free_cq(cq);
}

/* IBV_CREATE_CQ_ATTR_SINGLE_THREADED: the same results, no lock taken. */
static void test_cq_ex_single_threaded(void)
{
	struct metaroce_cq *cq = make_cq_ex(4, 0, METAROCE_CQ_WC_FLAGS);
	struct ibv_cq_ex *x = &cq->vcq.cq_ex;
	struct ibv_poll_cq_attr attr = {};
	struct metaroce_cqe cqe = {};
	struct ibv_wc wc;

	cq->single_threaded = true;
	cqe.wr_id = 700;
	kernel_cqe(cq, &cqe);
	cqe.wr_id = 701;
	kernel_cqe(cq, &cqe);
	CHECK_EQ(ibv_start_poll(x, &attr), 0);
	CHECK(!cq_locked(cq));
	CHECK_EQ(x->wr_id, 700);
	ibv_end_poll(x);
	CHECK_EQ(metaroce_poll_cq(&cq->vcq.cq, 4, &wc), 1);
	CHECK_EQ(wc.wr_id, 701);
	CHECK_EQ(ibv_start_poll(x, &attr), ENOENT);
	CHECK_EQ(cq->ring.hdr->consumer, 2);
	free_cq(cq);
}

/* --- SRQs ------------------------------------------------------------------ */

static void test_post_srq_recv(void)
{
	struct metaroce_srq *srq = calloc(1, sizeof(*srq));
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	struct ibv_sge sg = { .addr = 0x100, .length = 1, .lkey = 1 };
	struct ibv_recv_wr wr[5] = {}, *bad = NULL;
	struct metaroce_recv_wqe *w;
	uint32_t p0;
	int i;

	if (!srq)
		abort();
	alloc_ring(&srq->rq.ring, 4, 64, 0xfffffffeu);
	pthread_spin_init(&srq->rq.lock, PTHREAD_PROCESS_PRIVATE);
	srq->rq.max_sge = 1;
	p0 = srq->rq.ring.index;
	for (i = 0; i < 5; i++) {
		wr[i].wr_id = 40 + i;
		wr[i].sg_list = &sg;
		wr[i].num_sge = 1;
		wr[i].next = i < 4 ? &wr[i + 1] : NULL;
	}
	/* Four fit; the fifth finds the ring full; no doorbell either way. */
	rq_doorbells = 0;
	CHECK_EQ(metaroce_post_srq_recv(&srq->ibv_srq, wr, &bad), ENOMEM);
	CHECK(bad == &wr[4]);
	CHECK_EQ(producer(&srq->rq.ring), p0 + 4);
	CHECK_EQ(rq_doorbells, 0);
	w = metaroce_ring_slot(&srq->rq.ring, p0 + 3);
	CHECK_EQ(w->wr_id, 43);
	CHECK_EQ(w->num_sge, 1);

	/* The kernel takes two; too many SGEs stops the chain there. */
	srq->rq.ring.hdr->consumer = p0 + 2;
	wr[0].num_sge = 2;
	bad = NULL;
	CHECK_EQ(metaroce_post_srq_recv(&srq->ibv_srq, wr, &bad), EINVAL);
	CHECK(bad == &wr[0]);
	CHECK_EQ(producer(&srq->rq.ring), p0 + 4);

	/* A QP on an SRQ has no receive queue of its own. */
	qp->vqp.qp.srq = &srq->ibv_srq;
	wr[0].num_sge = 1;
	bad = NULL;
	CHECK_EQ(metaroce_post_recv(&qp->vqp.qp, wr, &bad), EINVAL);
	CHECK(bad == &wr[0]);
	free_qp(qp);
	pthread_spin_destroy(&srq->rq.lock);
	free(srq->rq.ring.hdr);
	free(srq);
}

/* --- concurrency ---------------------------------------------------------- */

#define POSTERS 4
#define POSTS_PER_THREAD 20000

struct post_ctx {
	struct metaroce_qp *qp;
	unsigned int id;
};

/* Alternates ibv_post_send() chains and ibv_qp_ex batches. */
static void *poster(void *arg)
{
	struct post_ctx *pc = arg;
	struct ibv_qp_ex *qpx = &pc->qp->vqp.qp_ex;
	uint64_t seq = 0;

	while (seq < POSTS_PER_THREAD) {
		uint64_t id = ((uint64_t)pc->id << 32) | seq;

		if (seq & 1) {
			struct ibv_send_wr wr[2] = {}, *bad = NULL;
			int n = seq + 1 < POSTS_PER_THREAD ? 2 : 1;
			int ret;

			wr[0].wr_id = id;
			wr[0].opcode = IBV_WR_SEND;
			wr[0].next = n == 2 ? &wr[1] : NULL;
			wr[1].wr_id = id + 1;
			wr[1].opcode = IBV_WR_RDMA_WRITE;
			ret = metaroce_post_send(&pc->qp->vqp.qp, wr, &bad);
			if (!ret) {
				seq += n;
			} else {
				CHECK_EQ(ret, ENOMEM);
				if (bad == &wr[1])
					seq++;
				sched_yield();
			}
		} else {
			ibv_wr_start(qpx);
			qpx->wr_id = id;
			qpx->wr_flags = IBV_SEND_SIGNALED;
			ibv_wr_rdma_read(qpx, 1, seq);
			ibv_wr_set_sge(qpx, pc->id, seq, 1);
			if (!ibv_wr_complete(qpx))
				seq++;
			else
				sched_yield();
		}
	}
	return NULL;
}

/* The kernel: takes WQEs in order, checks them, completes them. */
static void *sq_consumer(void *arg)
{
	struct metaroce_qp *qp = arg;
	struct metaroce_queue_hdr *hdr = qp->sq.ring.hdr;
	uint64_t next[POSTERS] = {};
	uint32_t cons = hdr->consumer;
	unsigned long done = 0, spins = 0;

	while (done < (unsigned long)POSTERS * POSTS_PER_THREAD) {
		uint32_t prod = __atomic_load_n(&hdr->producer,
						__ATOMIC_ACQUIRE);

		if (prod == cons) {
			/* Idle: ask for a doorbell now and then. */
			if (!(++spins & 0xff))
				__atomic_store_n(&hdr->doorbell_needed, 1,
						 __ATOMIC_RELAXED);
			sched_yield();
			continue;
		}
		__atomic_store_n(&hdr->doorbell_needed, 0, __ATOMIC_RELAXED);
		for (; cons != prod; cons++, done++) {
			/* Copy the slot first, as the kernel does. */
			struct {
				struct metaroce_send_wqe head;
				struct metaroce_sge sge[4];
			} copy;
			const struct metaroce_send_wqe *w = &copy.head;
			unsigned int t;

			_Static_assert(sizeof(copy) == 128, "rc_cfg stride");
			memcpy(&copy, sq_wqe(qp, cons), sizeof(copy));
			t = (unsigned int)(w->wr_id >> 32);

			if (t >= POSTERS) {
				CHECK(t < POSTERS);
				continue;
			}
			/* Each poster's WQEs arrive in its order. */
			CHECK_EQ(w->wr_id & 0xffffffffu, next[t]);
			next[t] = (w->wr_id & 0xffffffffu) + 1;
			if (w->opcode == IBV_WR_RDMA_READ) {
				CHECK_EQ(w->num_sge, 1);
				CHECK_EQ(w->flags, METAROCE_WQE_SIGNALED);
				CHECK_EQ(copy.sge[0].lkey, t);
			}
		}
		__atomic_store_n(&hdr->consumer, cons, __ATOMIC_RELEASE);
	}
	return NULL;
}

static void test_concurrent_posts(void)
{
	struct test_qp_cfg cfg = rc_cfg;
	struct post_ctx pc[POSTERS];
	pthread_t th[POSTERS], kernel;
	struct metaroce_qp *qp;
	int i;

	cfg.sq_entries = 64;
	qp = make_qp(&cfg);
	pthread_create(&kernel, NULL, sq_consumer, qp);
	for (i = 0; i < POSTERS; i++) {
		pc[i].qp = qp;
		pc[i].id = (unsigned int)i;
		pthread_create(&th[i], NULL, poster, &pc[i]);
	}
	for (i = 0; i < POSTERS; i++)
		pthread_join(th[i], NULL);
	pthread_join(kernel, NULL);
	CHECK_EQ(producer(&qp->sq.ring),
		 cfg.start_index + POSTERS * POSTS_PER_THREAD);
	free_qp(qp);
}

#define POLLERS 2
#define CQES 200000

struct poll_ctx {
	struct metaroce_cq *cq;
	bool ex;		/* polls with the ibv_cq_ex API */
	unsigned char *seen;
	unsigned long got;
	unsigned long *total;
};

/* Up to @ne completions through start/next/end_poll, as ibv_poll_cq(). */
static int poll_ex(struct ibv_cq_ex *x, int ne, struct ibv_wc *wc)
{
	struct ibv_poll_cq_attr attr = {};
	int n = 0;

	if (ibv_start_poll(x, &attr))
		return 0;
	do {
		wc[n].wr_id = x->wr_id;
		wc[n].status = x->status;
		wc[n].byte_len = ibv_wc_read_byte_len(x);
		n++;
	} while (n < ne && !ibv_next_poll(x));
	ibv_end_poll(x);
	return n;
}

static void *poller(void *arg)
{
	struct poll_ctx *pc = arg;
	struct ibv_wc wc[5];
	uint64_t last = 0;
	bool first = true;
	int n, i;

	while (__atomic_load_n(pc->total, __ATOMIC_RELAXED) < CQES) {
		if (pc->ex)
			n = poll_ex(&pc->cq->vcq.cq_ex, 5, wc);
		else
			n = metaroce_poll_cq(&pc->cq->vcq.cq, 5, wc);
		CHECK(n >= 0);
		for (i = 0; i < n; i++) {
			CHECK(wc[i].wr_id < CQES);
			if (wc[i].wr_id >= CQES)
				continue;
			/* Increasing per poller; each CQE seen once. */
			CHECK(first || wc[i].wr_id > last);
			first = false;
			last = wc[i].wr_id;
			pc->seen[wc[i].wr_id]++;
			CHECK_EQ(wc[i].byte_len, (uint32_t)wc[i].wr_id * 3);
		}
		if (!n)
			sched_yield();
		pc->got += (unsigned long)n;
		__atomic_fetch_add(pc->total, (unsigned long)n,
				   __ATOMIC_RELAXED);
	}
	return NULL;
}

static void *cq_producer(void *arg)
{
	struct metaroce_cq *cq = arg;
	struct metaroce_queue_hdr *hdr = cq->ring.hdr;
	struct metaroce_cqe cqe = {};
	uint32_t prod = hdr->producer;
	uint64_t i;

	for (i = 0; i < CQES;) {
		/* Like the kernel: only into slots the consumer freed. */
		if (prod - __atomic_load_n(&hdr->consumer, __ATOMIC_ACQUIRE) >=
		    cq->ring.num_entries) {
			sched_yield();
			continue;
		}
		cqe.wr_id = i;
		cqe.byte_len = (uint32_t)i * 3;
		memcpy(metaroce_ring_slot(&cq->ring, prod), &cqe, sizeof(cqe));
		__atomic_store_n(&hdr->producer, ++prod, __ATOMIC_RELEASE);
		i++;
	}
	return NULL;
}

/* One thread polls with ibv_poll_cq(), the other with the ibv_cq_ex API. */
static void test_concurrent_polls(void)
{
	struct metaroce_cq *cq = make_cq_ex(16, 0xffffff00u,
					    METAROCE_CQ_WC_FLAGS);
	unsigned char *seen[POLLERS];
	struct poll_ctx pc[POLLERS];
	pthread_t th[POLLERS], kernel;
	unsigned long total = 0;
	unsigned long i;
	int t;

	for (t = 0; t < POLLERS; t++) {
		seen[t] = calloc(CQES, 1);
		if (!seen[t])
			abort();
		pc[t] = (struct poll_ctx){ .cq = cq, .ex = t == 1,
					   .seen = seen[t], .total = &total };
		pthread_create(&th[t], NULL, poller, &pc[t]);
	}
	pthread_create(&kernel, NULL, cq_producer, cq);
	pthread_join(kernel, NULL);
	for (t = 0; t < POLLERS; t++)
		pthread_join(th[t], NULL);

	CHECK_EQ(pc[0].got + pc[1].got, CQES);
	for (i = 0; i < CQES; i++)
		CHECK_EQ(seen[0][i] + seen[1][i], 1);
	for (t = 0; t < POLLERS; t++)
		free(seen[t]);
	free_cq(cq);
}

/* --- atomics -------------------------------------------------------------- */

static void test_post_send_atomic(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	uint32_t p0 = qp->sq.ring.index;
	struct ibv_sge sg = { .addr = 0x7000, .length = 8, .lkey = 3 };
	struct ibv_sge sg2[2] = {
		{ .addr = 0x7000, .length = 4, .lkey = 3 },
		{ .addr = 0x7004, .length = 4, .lkey = 3 },
	};
	struct ibv_send_wr wr[2] = {}, *bad = NULL;
	struct metaroce_send_wqe *w;

	wr[0].wr_id = 21;
	wr[0].opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
	wr[0].send_flags = IBV_SEND_SIGNALED;
	wr[0].wr.atomic.remote_addr = 0x10008;
	wr[0].wr.atomic.rkey = 0x44;
	wr[0].wr.atomic.compare_add = 0x1111222233334444ull;
	wr[0].wr.atomic.swap = 0x5555666677778888ull;
	wr[0].sg_list = &sg;
	wr[0].num_sge = 1;
	wr[0].next = &wr[1];
	wr[1].wr_id = 22;
	wr[1].opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
	wr[1].send_flags = IBV_SEND_FENCE;
	wr[1].wr.atomic.remote_addr = 0x20000;
	wr[1].wr.atomic.rkey = 0x45;
	wr[1].wr.atomic.compare_add = 3;
	wr[1].sg_list = &sg;
	wr[1].num_sge = 1;

	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, wr, &bad), 0);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 2);
	w = sq_wqe(qp, p0);
	CHECK_EQ(w->wr_id, 21);
	CHECK_EQ(w->opcode, IBV_WR_ATOMIC_CMP_AND_SWP);
	CHECK_EQ(w->flags, METAROCE_WQE_SIGNALED);
	CHECK_EQ(w->rdma.remote_addr, 0x10008);
	CHECK_EQ(w->rdma.rkey, 0x44);
	CHECK_EQ(w->atomic.compare_add, 0x1111222233334444ull);
	CHECK_EQ(w->atomic.swap, 0x5555666677778888ull);
	CHECK_EQ(w->num_sge, 1);
	CHECK_EQ(wqe_sge(w)[0].addr, 0x7000);
	CHECK_EQ(wqe_sge(w)[0].length, 8);
	CHECK_EQ(wqe_sge(w)[0].lkey, 3);
	w = sq_wqe(qp, p0 + 1);
	CHECK_EQ(w->opcode, IBV_WR_ATOMIC_FETCH_AND_ADD);
	CHECK_EQ(w->flags, METAROCE_WQE_FENCE);
	CHECK_EQ(w->rdma.remote_addr, 0x20000);
	CHECK_EQ(w->rdma.rkey, 0x45);
	CHECK_EQ(w->atomic.compare_add, 3);
	CHECK_EQ(w->atomic.swap, 0);

	/* The result needs exactly one 8-byte SGE, and cannot be inline. */
	wr[1].next = NULL;
	sg.length = 4;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr[1], &bad), EINVAL);
	CHECK(bad == &wr[1]);
	sg.length = 8;
	wr[1].sg_list = sg2;
	wr[1].num_sge = 2;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr[1], &bad), EINVAL);
	wr[1].num_sge = 0;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr[1], &bad), EINVAL);
	wr[1].sg_list = &sg;
	wr[1].num_sge = 1;
	wr[1].send_flags = IBV_SEND_INLINE;
	CHECK_EQ(metaroce_post_send(&qp->vqp.qp, &wr[1], &bad), EINVAL);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 2);
	free_qp(qp);

	/* RC only. */
	CHECK(!metaroce_send_opcode_ok(IBV_QPT_UD,
				       IBV_WR_ATOMIC_FETCH_AND_ADD));
	CHECK(metaroce_send_opcode_ok(IBV_QPT_RC, IBV_WR_ATOMIC_CMP_AND_SWP));
}

static void test_wr_api_atomic(void)
{
	struct metaroce_qp *qp = make_qp(&rc_cfg);
	struct ibv_qp_ex *qpx = &qp->vqp.qp_ex;
	uint32_t p0 = qp->sq.ring.index;
	struct metaroce_send_wqe *w;

	CHECK(qpx->wr_atomic_cmp_swp && qpx->wr_atomic_fetch_add);
	ibv_wr_start(qpx);
	qpx->wr_id = 31;
	qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_atomic_cmp_swp(qpx, 0x66, 0x3000, 5, 6);
	ibv_wr_set_sge(qpx, 2, 0x8000, 8);
	qpx->wr_id = 32;
	qpx->wr_flags = 0;
	ibv_wr_atomic_fetch_add(qpx, 0x67, 0x3008, 9);
	ibv_wr_set_sge(qpx, 2, 0x8008, 8);
	CHECK_EQ(ibv_wr_complete(qpx), 0);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 2);
	w = sq_wqe(qp, p0);
	CHECK_EQ(w->wr_id, 31);
	CHECK_EQ(w->opcode, IBV_WR_ATOMIC_CMP_AND_SWP);
	CHECK_EQ(w->rdma.rkey, 0x66);
	CHECK_EQ(w->rdma.remote_addr, 0x3000);
	CHECK_EQ(w->atomic.compare_add, 5);
	CHECK_EQ(w->atomic.swap, 6);
	CHECK_EQ(w->num_sge, 1);
	CHECK_EQ(wqe_sge(w)[0].length, 8);
	w = sq_wqe(qp, p0 + 1);
	CHECK_EQ(w->opcode, IBV_WR_ATOMIC_FETCH_AND_ADD);
	CHECK_EQ(w->rdma.remote_addr, 0x3008);
	CHECK_EQ(w->atomic.compare_add, 9);
	CHECK_EQ(w->atomic.swap, 0);

	/* A 4-byte SGE fails the batch; nothing is posted. */
	ibv_wr_start(qpx);
	ibv_wr_atomic_fetch_add(qpx, 0x67, 0x3008, 1);
	ibv_wr_set_sge(qpx, 2, 0x8008, 4);
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	/* So does inline data, and no SGE at all. */
	ibv_wr_start(qpx);
	ibv_wr_atomic_fetch_add(qpx, 0x67, 0x3008, 1);
	ibv_wr_set_inline_data(qpx, w, 8);
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	ibv_wr_start(qpx);
	ibv_wr_atomic_cmp_swp(qpx, 0x67, 0x3008, 1, 2);
	CHECK_EQ(ibv_wr_complete(qpx), EINVAL);
	CHECK_EQ(producer(&qp->sq.ring), p0 + 2);
	free_qp(qp);
}

static void test_poll_atomic(void)
{
	struct metaroce_cqe cqe = {
		.wr_id = 5, .opcode = IBV_WC_FETCH_ADD, .byte_len = 8,
	};
	struct ibv_wc wc;

	metaroce_cqe_to_wc(&cqe, &wc);
	CHECK_EQ(wc.opcode, IBV_WC_FETCH_ADD);
	CHECK_EQ(wc.byte_len, 8);
	cqe.opcode = IBV_WC_COMP_SWAP;
	metaroce_cqe_to_wc(&cqe, &wc);
	CHECK_EQ(wc.opcode, IBV_WC_COMP_SWAP);
}

int main(void)
{
	test_queue_info();
	test_ring_wrap();
	test_post_send_rc();
	test_post_send_inline();
	test_post_send_errors();
	test_post_send_full();
	test_post_bind_rights();
	test_post_send_ud();
	test_post_send_sig_all();
	test_post_send_doorbell_error();
	test_post_recv();
	test_wr_api_ops();
	test_wr_api_rc();
	test_wr_api_abort();
	test_wr_api_errors();
	test_wr_api_ud();
	test_post_send_atomic();
	test_wr_api_atomic();
	test_poll_atomic();
	test_poll_cq();
	test_wc_network_header();
	test_send_with_invalidate();
	test_cq_ex_poll();
	test_cq_ex_garbage_indices();
	test_cq_ex_attrs();
	test_cq_ex_single_threaded();
	test_post_srq_recv();
	test_concurrent_posts();
	test_concurrent_polls();

	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("ok: provider data path\n");
	return 0;
}
