// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * End-to-end smoke test of the provider on a real MetaRoCE device (run in
 * the test VMs; exits 77 = skipped when there is none).  Uses only the
 * public libibverbs API, through libibverbs' normal provider loading.
 *
 * Two RC QPs on the same device are connected to each other (loopback
 * through the port's RoCEv2 GID) and exercise both posting APIs:
 *  - the ibv_qp_ex API (ibv_wr_send / _imm, ibv_wr_rdma_write / _imm,
 *    ibv_wr_rdma_read, SGE lists and inline data), which perftest 4.5 never
 *    uses on a non-mlx5/EFA device;
 *  - ibv_post_send / ibv_post_recv;
 * plus ibv_resize_cq with completions pending, and a UD QP pair with an
 * address handle.
 *
 * Environment: METAROCE_IBDEV=<name> picks the device (default: the first
 * whose node_desc starts with "metaroce"), METAROCE_GID_INDEX=<n> the GID
 * (default: the first RoCEv2 GID).
 */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define SKIP 77
#define PORT 1
#define BUF_SIZE 65536
#define QKEY 0x11111111u
#define GRH_LEN 40

static int failures;

#define CHECK(cond)                                                            \
	do {                                                                   \
		if (!(cond)) {                                                 \
			fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__,       \
				__LINE__, #cond);                              \
			failures++;                                            \
		}                                                              \
	} while (0)

#define DIE(...)                                                               \
	do {                                                                   \
		fprintf(stderr, __VA_ARGS__);                                  \
		exit(1);                                                       \
	} while (0)

struct side {
	struct ibv_qp *qp;
	struct ibv_qp_ex *qpx;
	struct ibv_cq *scq, *rcq;
	struct ibv_mr *mr;
	char *buf;
};

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static union ibv_gid gid;
static int gid_index = -1;

static bool is_metaroce(struct ibv_device *dev)
{
	const char *want = getenv("METAROCE_IBDEV");
	char path[IBV_SYSFS_PATH_MAX + 16], desc[64] = "";
	FILE *f;

	if (want)
		return strcmp(want, ibv_get_device_name(dev)) == 0;
	snprintf(path, sizeof(path), "%s/node_desc", dev->ibdev_path);
	f = fopen(path, "r");
	if (!f)
		return false;
	if (!fgets(desc, sizeof(desc), f))
		desc[0] = 0;
	fclose(f);
	return strncmp(desc, "metaroce", 8) == 0;
}

static void pick_gid(void)
{
	struct ibv_gid_entry entry;
	const char *env = getenv("METAROCE_GID_INDEX");
	int i;

	if (env)
		gid_index = atoi(env);
	for (i = 0; gid_index < 0 && i < 16; i++) {
		if (ibv_query_gid_ex(ctx, PORT, i, &entry, 0))
			continue;
		if (entry.gid_type == IBV_GID_TYPE_ROCE_V2)
			gid_index = i;
	}
	if (gid_index < 0)
		DIE("no RoCEv2 GID on port %d (set METAROCE_GID_INDEX)\n", PORT);
	if (ibv_query_gid(ctx, PORT, gid_index, &gid))
		DIE("ibv_query_gid(%d): %s\n", gid_index, strerror(errno));
}

/* Waits for @n completions on @cq (5 s at most). */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	struct timespec start, now;
	int got = 0, ret;

	clock_gettime(CLOCK_MONOTONIC, &start);
	while (got < n) {
		ret = ibv_poll_cq(cq, n - got, wc + got);
		if (ret < 0)
			DIE("ibv_poll_cq: %d\n", ret);
		got += ret;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec - start.tv_sec > 5) {
			fprintf(stderr, "timeout: %d of %d completions\n", got,
				n);
			failures++;
			break;
		}
	}
	return got;
}

static void make_side(struct side *s, enum ibv_qp_type type)
{
	struct ibv_qp_init_attr_ex attr = {
		.qp_type = type,
		.cap = {
			.max_send_wr = 16, .max_recv_wr = 16,
			.max_send_sge = 2, .max_recv_sge = 2,
			.max_inline_data = 64,
		},
		.comp_mask = IBV_QP_INIT_ATTR_PD |
			     IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = pd,
		.send_ops_flags = IBV_QP_EX_WITH_SEND |
				  IBV_QP_EX_WITH_SEND_WITH_IMM,
	};

	if (type == IBV_QPT_RC)
		attr.send_ops_flags |= IBV_QP_EX_WITH_RDMA_WRITE |
				       IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
				       IBV_QP_EX_WITH_RDMA_READ;
	s->buf = calloc(1, BUF_SIZE);
	s->scq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
	s->rcq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (!s->buf || !s->scq || !s->rcq)
		DIE("ibv_create_cq: %s\n", strerror(errno));
	s->mr = ibv_reg_mr(pd, s->buf, BUF_SIZE,
			   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ);
	if (!s->mr)
		DIE("ibv_reg_mr: %s\n", strerror(errno));
	attr.send_cq = s->scq;
	attr.recv_cq = s->rcq;
	s->qp = ibv_create_qp_ex(ctx, &attr);
	if (!s->qp)
		DIE("ibv_create_qp_ex: %s\n", strerror(errno));
	CHECK(attr.cap.max_send_wr >= 16 && attr.cap.max_inline_data >= 64);
	s->qpx = ibv_qp_to_qp_ex(s->qp);
	CHECK(s->qpx != NULL);
}

static void connect_rc(struct side *s, uint32_t remote_qpn)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = PORT,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE |
				   IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};

	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		DIE("RC INIT: %s\n", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = remote_qpn;
	a.rq_psn = 100;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = (uint8_t)gid_index;
	a.ah_attr.grh.hop_limit = 64;
	a.ah_attr.port_num = PORT;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_AV |
				     IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				     IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				     IBV_QP_MIN_RNR_TIMER))
		DIE("RC RTR: %s\n", strerror(errno));
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = 100;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
				     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		DIE("RC RTS: %s\n", strerror(errno));
}

static void post_recv(struct side *s, uint64_t wr_id, size_t offset,
		      uint32_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)s->buf + offset,
		.length = len,
		.lkey = s->mr->lkey,
	};
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge,
				  .num_sge = 1 }, *bad;

	if (ibv_post_recv(s->qp, &wr, &bad))
		DIE("ibv_post_recv: %s\n", strerror(errno));
}

static void test_rc(void)
{
	struct side a = {}, b = {};
	struct ibv_qp_ex *x;
	struct ibv_wc wc[8];
	struct ibv_sge sgl[2];
	struct ibv_send_wr wr = {}, *bad;
	char inl[] = "inline via ibv_wr_set_inline_data";
	int i, n;

	make_side(&a, IBV_QPT_RC);
	make_side(&b, IBV_QPT_RC);
	connect_rc(&a, b.qp->qp_num);
	connect_rc(&b, a.qp->qp_num);
	x = a.qpx;

	for (i = 0; i < 4096; i++)
		a.buf[i] = (char)i;
	memset(a.buf + 8192, 'R', 1000);	/* B reads this back */
	memset(b.buf + 16384, 'Q', 1000);	/* A reads this */
	post_recv(&b, 1, 32768, 4096);
	post_recv(&b, 2, 36864, 4096);
	post_recv(&b, 3, 40960, 4096);

	/* One batch through the ibv_qp_ex API. */
	sgl[0] = (struct ibv_sge){ (uintptr_t)a.buf, 1000, a.mr->lkey };
	sgl[1] = (struct ibv_sge){ (uintptr_t)a.buf + 1000, 24, a.mr->lkey };
	ibv_wr_start(x);
	x->wr_id = 11;
	x->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(x);
	ibv_wr_set_sge_list(x, 2, sgl);			/* 1024 bytes */
	x->wr_id = 12;
	ibv_wr_send_imm(x, htobe32(0x1234));
	ibv_wr_set_inline_data(x, inl, sizeof(inl));
	x->wr_id = 13;
	ibv_wr_rdma_write(x, b.mr->rkey, (uintptr_t)b.buf);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf, 4096);
	x->wr_id = 14;
	ibv_wr_rdma_write_imm(x, b.mr->rkey, (uintptr_t)b.buf + 4096,
			      htobe32(0x5678));
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 8192, 1000);
	x->wr_id = 15;
	ibv_wr_rdma_read(x, b.mr->rkey, (uintptr_t)b.buf + 16384);
	ibv_wr_set_sge(x, a.mr->lkey, (uintptr_t)a.buf + 20480, 1000);
	CHECK(ibv_wr_complete(x) == 0);

	n = poll_n(a.scq, wc, 5);
	for (i = 0; i < n; i++) {
		CHECK(wc[i].status == IBV_WC_SUCCESS);
		CHECK(wc[i].wr_id == (uint64_t)(11 + i));
	}
	if (n == 5) {
		CHECK(wc[0].opcode == IBV_WC_SEND);
		CHECK(wc[2].opcode == IBV_WC_RDMA_WRITE);
		CHECK(wc[4].opcode == IBV_WC_RDMA_READ);
	}
	n = poll_n(b.rcq, wc, 3);
	if (n == 3) {
		CHECK(wc[0].wr_id == 1 && wc[0].opcode == IBV_WC_RECV &&
		      wc[0].byte_len == 1024 && !(wc[0].wc_flags & IBV_WC_WITH_IMM));
		CHECK(wc[1].wr_id == 2 && wc[1].byte_len == sizeof(inl) &&
		      (wc[1].wc_flags & IBV_WC_WITH_IMM) &&
		      wc[1].imm_data == htobe32(0x1234));
		CHECK(wc[2].wr_id == 3 &&
		      wc[2].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
		      wc[2].imm_data == htobe32(0x5678));
		CHECK(wc[0].qp_num == b.qp->qp_num);
	}
	CHECK(memcmp(b.buf + 32768, a.buf, 1024) == 0);
	CHECK(memcmp(b.buf + 36864, inl, sizeof(inl)) == 0);
	CHECK(memcmp(b.buf, a.buf, 4096) == 0);
	CHECK(memcmp(b.buf + 4096, a.buf + 8192, 1000) == 0);
	CHECK(memcmp(a.buf + 20480, b.buf + 16384, 1000) == 0);

	/* The same QP through ibv_post_send, inline and not. */
	post_recv(&b, 4, 45056, 4096);
	post_recv(&b, 5, 49152, 4096);
	sgl[0] = (struct ibv_sge){ (uintptr_t)a.buf + 100, 48, a.mr->lkey };
	wr.wr_id = 21;
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE;
	wr.sg_list = sgl;
	wr.num_sge = 1;
	CHECK(ibv_post_send(a.qp, &wr, &bad) == 0);
	wr.wr_id = 22;
	wr.send_flags = IBV_SEND_SIGNALED;
	CHECK(ibv_post_send(a.qp, &wr, &bad) == 0);
	n = poll_n(a.scq, wc, 2);
	for (i = 0; i < n; i++)
		CHECK(wc[i].status == IBV_WC_SUCCESS);

	/* Resize the receive CQ, most likely with both completions in it. */
	nanosleep(&(struct timespec){ 0, 200000000 }, NULL);
	CHECK(ibv_resize_cq(b.rcq, 64) == 0);
	CHECK(b.rcq->cqe >= 64);
	n = poll_n(b.rcq, wc, 2);
	if (n == 2) {
		CHECK(wc[0].wr_id == 4 && wc[0].byte_len == 48);
		CHECK(wc[1].wr_id == 5 && wc[1].byte_len == 48);
	}
	CHECK(memcmp(b.buf + 45056, a.buf + 100, 48) == 0);
	CHECK(memcmp(b.buf + 49152, a.buf + 100, 48) == 0);

	/* A batch that fails posts nothing. */
	ibv_wr_start(x);
	ibv_wr_set_sge(x, a.mr->lkey, 0, 0);	/* no WQE to apply to */
	CHECK(ibv_wr_complete(x) == EINVAL);
	ibv_wr_start(x);
	x->wr_id = 99;
	ibv_wr_send(x);
	ibv_wr_abort(x);
	CHECK(ibv_poll_cq(a.scq, 1, wc) == 0);

	CHECK(ibv_destroy_qp(a.qp) == 0 && ibv_destroy_qp(b.qp) == 0);
	CHECK(ibv_dereg_mr(a.mr) == 0 && ibv_dereg_mr(b.mr) == 0);
	CHECK(ibv_destroy_cq(a.scq) == 0 && ibv_destroy_cq(a.rcq) == 0);
	CHECK(ibv_destroy_cq(b.scq) == 0 && ibv_destroy_cq(b.rcq) == 0);
	free(a.buf);
	free(b.buf);
}

static void ud_to_rts(struct side *s)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.port_num = PORT,
		.qkey = QKEY,
	};

	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
				     IBV_QP_PORT | IBV_QP_QKEY))
		DIE("UD INIT: %s\n", strerror(errno));
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE))
		DIE("UD RTR: %s\n", strerror(errno));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(s->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		DIE("UD RTS: %s\n", strerror(errno));
}

static void test_ud(void)
{
	struct side a = {}, b = {};
	struct ibv_ah_attr ah_attr = {
		.is_global = 1,
		.grh = { .dgid = gid, .sgid_index = (uint8_t)gid_index,
			 .hop_limit = 64 },
		.port_num = PORT,
	};
	struct ibv_sge sge;
	struct ibv_send_wr wr = {}, *bad;
	struct ibv_wc wc[2];
	struct ibv_ah *ah;
	int n;

	make_side(&a, IBV_QPT_UD);
	make_side(&b, IBV_QPT_UD);
	ud_to_rts(&a);
	ud_to_rts(&b);
	ah = ibv_create_ah(pd, &ah_attr);
	if (!ah)
		DIE("ibv_create_ah: %s\n", strerror(errno));
	memset(a.buf, 'U', 256);
	post_recv(&b, 1, 0, GRH_LEN + 256);
	post_recv(&b, 2, 4096, GRH_LEN + 256);

	ibv_wr_start(a.qpx);
	a.qpx->wr_id = 31;
	a.qpx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(a.qpx);
	ibv_wr_set_ud_addr(a.qpx, ah, b.qp->qp_num, QKEY);
	ibv_wr_set_sge(a.qpx, a.mr->lkey, (uintptr_t)a.buf, 256);
	CHECK(ibv_wr_complete(a.qpx) == 0);

	sge = (struct ibv_sge){ (uintptr_t)a.buf, 128, a.mr->lkey };
	wr.wr_id = 32;
	wr.opcode = IBV_WR_SEND_WITH_IMM;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.imm_data = htobe32(77);
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.wr.ud.ah = ah;
	wr.wr.ud.remote_qpn = b.qp->qp_num;
	wr.wr.ud.remote_qkey = QKEY;
	CHECK(ibv_post_send(a.qp, &wr, &bad) == 0);

	n = poll_n(a.scq, wc, 2);
	CHECK(n == 2 && wc[0].status == IBV_WC_SUCCESS &&
	      wc[1].status == IBV_WC_SUCCESS);
	n = poll_n(b.rcq, wc, 2);
	if (n == 2) {
		CHECK(wc[0].status == IBV_WC_SUCCESS &&
		      wc[0].byte_len == GRH_LEN + 256 &&
		      (wc[0].wc_flags & IBV_WC_GRH) &&
		      wc[0].src_qp == a.qp->qp_num);
		CHECK(wc[1].byte_len == GRH_LEN + 128 &&
		      (wc[1].wc_flags & IBV_WC_WITH_IMM) &&
		      wc[1].imm_data == htobe32(77));
	}
	CHECK(memcmp(b.buf + GRH_LEN, a.buf, 256) == 0);

	CHECK(ibv_destroy_ah(ah) == 0);
	CHECK(ibv_destroy_qp(a.qp) == 0 && ibv_destroy_qp(b.qp) == 0);
	CHECK(ibv_dereg_mr(a.mr) == 0 && ibv_dereg_mr(b.mr) == 0);
	CHECK(ibv_destroy_cq(a.scq) == 0 && ibv_destroy_cq(a.rcq) == 0);
	CHECK(ibv_destroy_cq(b.scq) == 0 && ibv_destroy_cq(b.rcq) == 0);
	free(a.buf);
	free(b.buf);
}

int main(void)
{
	struct ibv_device **list;
	struct ibv_device *dev = NULL;
	int i, num;

	list = ibv_get_device_list(&num);
	for (i = 0; list && i < num && !dev; i++)
		if (is_metaroce(list[i]))
			dev = list[i];
	if (!dev) {
		printf("skipped: no MetaRoCE device\n");
		return SKIP;
	}
	ctx = ibv_open_device(dev);
	if (!ctx)
		DIE("ibv_open_device(%s): %s\n", ibv_get_device_name(dev),
		    strerror(errno));
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		DIE("ibv_alloc_pd: %s\n", strerror(errno));
	pick_gid();

	test_rc();
	test_ud();

	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("ok: %s RC and UD, ibv_qp_ex and ibv_post_send\n",
	       ibv_get_device_name(dev));
	return 0;
}
