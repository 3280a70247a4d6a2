// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * In-kernel verbs client for MetaRoCE: proves that a kernel ULP can use the
 * device through ib_post_send()/ib_post_recv(). Loading the module connects
 * an RC QP on device @dev_a to one on @dev_b (the same name twice: a
 * loopback on one device), runs SEND, SEND with immediate, WRITE, WRITE
 * with immediate and READ with every byte checked, then fast registration
 * as storage protocols use it (ib_alloc_mr, ib_map_mr_sg, IB_WR_REG_MR,
 * IB_WR_LOCAL_INV, IB_WR_SEND_WITH_INV; atomics on the registration), then
 * a WRITE with a bad rkey that must fail with a remote access error. With
 * srq=1 both QPs receive from a shared receive queue (ib_create_srq,
 * ib_post_srq_recv). With stale=1 that last WRITE uses the key of an
 * invalidated registration instead.
 * The load fails (-EIO) if any check fails; the log says which.
 *
 *   insmod metaroce_ktest.ko dev_a=mr0 dev_b=mr1 [srq=1]
 */
#include <linux/module.h>
#include <linux/delay.h>
#include <linux/etherdevice.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/random.h>
#include <linux/scatterlist.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_cache.h>

MODULE_DESCRIPTION("MetaRoCE in-kernel verbs test client");
MODULE_LICENSE("Dual BSD/GPL");

static char *dev_a = "mr0";
module_param(dev_a, charp, 0444);
static char *dev_b = "mr0";
module_param(dev_b, charp, 0444);
static bool srq;
module_param(srq, bool, 0444);
static bool stale;
module_param(stale, bool, 0444);

#define BUF_SIZE	(256 * 1024)
#define POLL_MS		10000
/*
 * Fast registration on b: FR_LEN bytes at an odd offset of b's buffer,
 * spanning pages, behind an MR only REG_MR gives a translation.
 */
#define FR_OFFSET	100
#define FR_LEN		(5 * PAGE_SIZE + 1000)

struct side {
	struct ib_device *dev;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_qp *qp;
	struct ib_srq *srq;		/* receives come from it, if set */
	const struct ib_gid_attr *gid;
	u8 mac[ETH_ALEN];
	u8 *buf;			/* registered through the PD's DMA MR */
};

static int find_ipv4_gid(struct side *s)
{
	int i;

	for (i = 0; i < 16; i++) {
		const struct ib_gid_attr *attr = rdma_get_gid_attr(s->dev, 1, i);

		if (IS_ERR(attr))
			continue;
		if (ipv6_addr_v4mapped((struct in6_addr *)attr->gid.raw)) {
			s->gid = attr;
			return 0;
		}
		rdma_put_gid_attr(attr);
	}
	return -ENOENT;
}

static int side_open(struct side *s, const char *name)
{
	struct ib_qp_init_attr init = {
		.cap = {
			.max_send_wr = 64, .max_recv_wr = 64,
			.max_send_sge = 2, .max_recv_sge = 2,
			.max_inline_data = 64,
		},
		.sq_sig_type = IB_SIGNAL_ALL_WR,
		.qp_type = IB_QPT_RC,
	};
	struct net_device *ndev;

	s->dev = ib_device_get_by_name(name, RDMA_DRIVER_UNKNOWN);
	if (!s->dev)
		return -ENODEV;
	if (find_ipv4_gid(s))
		return -ENOENT;
	rcu_read_lock();
	ndev = rdma_read_gid_attr_ndev_rcu(s->gid);
	if (!IS_ERR(ndev))
		ether_addr_copy(s->mac, ndev->dev_addr);
	rcu_read_unlock();
	if (IS_ERR(ndev))
		return PTR_ERR(ndev);

	s->pd = ib_alloc_pd(s->dev, IB_PD_UNSAFE_GLOBAL_RKEY);
	if (IS_ERR(s->pd))
		return PTR_ERR(s->pd);
	s->cq = ib_alloc_cq(s->dev, NULL, 256, 0, IB_POLL_DIRECT);
	if (IS_ERR(s->cq))
		return PTR_ERR(s->cq);
	if (srq) {
		struct ib_srq_init_attr srq_init = {
			.attr = { .max_wr = 64, .max_sge = 2 },
			.srq_type = IB_SRQT_BASIC,
		};

		s->srq = ib_create_srq(s->pd, &srq_init);
		if (IS_ERR(s->srq))
			return PTR_ERR(s->srq);
		init.srq = s->srq;
	}
	init.send_cq = s->cq;
	init.recv_cq = s->cq;
	s->qp = ib_create_qp(s->pd, &init);
	if (IS_ERR(s->qp))
		return PTR_ERR(s->qp);
	s->buf = kzalloc(BUF_SIZE, GFP_KERNEL);
	return s->buf ? 0 : -ENOMEM;
}

static void side_close(struct side *s)
{
	kfree(s->buf);
	if (!IS_ERR_OR_NULL(s->qp))
		ib_destroy_qp(s->qp);
	if (!IS_ERR_OR_NULL(s->srq))
		ib_destroy_srq(s->srq);
	if (!IS_ERR_OR_NULL(s->cq))
		ib_free_cq(s->cq);
	if (!IS_ERR_OR_NULL(s->pd))
		ib_dealloc_pd(s->pd);
	if (s->gid)
		rdma_put_gid_attr(s->gid);
	if (s->dev)
		ib_device_put(s->dev);
}

static int connect_qp(struct side *s, struct side *peer, u32 sq_psn,
		      u32 rq_psn)
{
	struct ib_qp_attr attr = {
		.qp_state = IB_QPS_INIT,
		.port_num = 1,
		.qp_access_flags = IB_ACCESS_REMOTE_WRITE |
				   IB_ACCESS_REMOTE_READ |
				   IB_ACCESS_REMOTE_ATOMIC,
	};
	int err;

	err = ib_modify_qp(s->qp, &attr, IB_QP_STATE | IB_QP_PKEY_INDEX |
			   IB_QP_PORT | IB_QP_ACCESS_FLAGS);
	if (err)
		return err;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTR;
	attr.path_mtu = IB_MTU_1024;
	attr.dest_qp_num = peer->qp->qp_num;
	attr.rq_psn = rq_psn;
	attr.max_dest_rd_atomic = 16;
	attr.min_rnr_timer = 1;
	attr.ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&attr.ah_attr, 1);
	rdma_ah_set_grh(&attr.ah_attr, (union ib_gid *)&peer->gid->gid, 0,
			s->gid->index, 64, 0);
	ether_addr_copy(attr.ah_attr.roce.dmac, peer->mac);
	err = ib_modify_qp(s->qp, &attr, IB_QP_STATE | IB_QP_AV |
			   IB_QP_PATH_MTU | IB_QP_DEST_QPN | IB_QP_RQ_PSN |
			   IB_QP_MAX_DEST_RD_ATOMIC | IB_QP_MIN_RNR_TIMER);
	if (err)
		return err;

	memset(&attr, 0, sizeof(attr));
	attr.qp_state = IB_QPS_RTS;
	attr.sq_psn = sq_psn;
	attr.timeout = 14;
	attr.retry_cnt = 7;
	attr.rnr_retry = 7;
	attr.max_rd_atomic = 16;
	return ib_modify_qp(s->qp, &attr, IB_QP_STATE | IB_QP_SQ_PSN |
			    IB_QP_TIMEOUT | IB_QP_RETRY_CNT |
			    IB_QP_RNR_RETRY | IB_QP_MAX_QP_RD_ATOMIC);
}

/* Waits for the completion of @wr_id on @s; returns its status or -ETIME. */
static int wait_wc(struct side *s, u64 wr_id, struct ib_wc *out)
{
	unsigned long deadline = jiffies + msecs_to_jiffies(POLL_MS);
	struct ib_wc wc;

	while (time_before(jiffies, deadline)) {
		if (ib_poll_cq(s->cq, 1, &wc) == 1) {
			if (wc.wr_id != wr_id) {
				pr_err("metaroce_ktest: %s: completion %llu, expected %llu (status %d)\n",
				       s->dev->name, wc.wr_id, wr_id, wc.status);
				return -EPROTO;
			}
			if (out)
				*out = wc;
			return wc.status;
		}
		usleep_range(100, 200);
	}
	pr_err("metaroce_ktest: %s: no completion for %llu\n", s->dev->name,
	       wr_id);
	return -ETIME;
}

static int post_recv(struct side *s, u64 wr_id, u32 offset, u32 len)
{
	struct ib_sge sge = {
		.addr = (uintptr_t)s->buf + offset,
		.length = len,
		.lkey = s->pd->local_dma_lkey,
	};
	struct ib_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 };

	if (s->srq)
		return ib_post_srq_recv(s->srq, &wr, NULL);
	return ib_post_recv(s->qp, &wr, NULL);
}

static int post_rdma(struct side *s, enum ib_wr_opcode op, u64 wr_id,
		     u32 offset, u32 len, u64 remote, u32 rkey, __be32 imm)
{
	struct ib_sge sge = {
		.addr = (uintptr_t)s->buf + offset,
		.length = len,
		.lkey = s->pd->local_dma_lkey,
	};
	struct ib_rdma_wr wr = {
		.wr = {
			.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
			.opcode = op, .send_flags = IB_SEND_SIGNALED,
			.ex.imm_data = imm,
		},
		.remote_addr = remote,
		.rkey = rkey,
	};

	return ib_post_send(s->qp, &wr.wr, NULL);
}

static int check_bytes(const char *what, const u8 *got, const u8 *want,
		       u32 len)
{
	u32 i;

	for (i = 0; i < len; i++) {
		if (got[i] != want[i]) {
			pr_err("metaroce_ktest: %s: byte %u is %#x, expected %#x\n",
			       what, i, got[i], want[i]);
			return -EIO;
		}
	}
	return 0;
}

/* a sends @len bytes to b; with @imm, as SEND with immediate. */
static int test_send(struct side *a, struct side *b, u32 len, bool imm)
{
	struct ib_wc wc;
	int err;

	get_random_bytes(a->buf, len);
	memset(b->buf, 0, len + 16);
	err = post_recv(b, 100, 0, BUF_SIZE);
	err = err ?: post_rdma(a, imm ? IB_WR_SEND_WITH_IMM : IB_WR_SEND, 1, 0,
			       len, 0, 0, cpu_to_be32(0xfeedbeef));
	err = err ?: wait_wc(a, 1, NULL);
	err = err ?: wait_wc(b, 100, &wc);
	if (err)
		return err;
	if (wc.byte_len != len || wc.opcode != IB_WC_RECV ||
	    !!(wc.wc_flags & IB_WC_WITH_IMM) != imm ||
	    (imm && wc.ex.imm_data != cpu_to_be32(0xfeedbeef))) {
		pr_err("metaroce_ktest: send %u: bad receive completion\n",
		       len);
		return -EIO;
	}
	return check_bytes("send", b->buf, a->buf, len);
}

static int test_write(struct side *a, struct side *b, u32 len, bool imm)
{
	struct ib_wc wc;
	int err;

	get_random_bytes(a->buf, len);
	memset(b->buf, 0, len);
	if (imm)
		err = post_recv(b, 200, 0, 0);
	else
		err = 0;
	err = err ?: post_rdma(a, imm ? IB_WR_RDMA_WRITE_WITH_IMM :
			       IB_WR_RDMA_WRITE, 2, 0, len, (uintptr_t)b->buf,
			       b->pd->unsafe_global_rkey, cpu_to_be32(7));
	err = err ?: wait_wc(a, 2, NULL);
	if (!err && imm) {
		err = wait_wc(b, 200, &wc);
		if (!err && (wc.opcode != IB_WC_RECV_RDMA_WITH_IMM ||
			     wc.ex.imm_data != cpu_to_be32(7) ||
			     wc.byte_len != len))
			err = -EIO;
	}
	return err ?: check_bytes("write", b->buf, a->buf, len);
}

static int test_read(struct side *a, struct side *b, u32 len)
{
	int err;

	get_random_bytes(b->buf, len);
	memset(a->buf, 0, len);
	err = post_rdma(a, IB_WR_RDMA_READ, 3, 0, len, (uintptr_t)b->buf,
			b->pd->unsafe_global_rkey, 0);
	err = err ?: wait_wc(a, 3, NULL);
	return err ?: check_bytes("read", a->buf, b->buf, len);
}

/*
 * A WRITE with a key b does not have (or, @stale_key, one whose
 * registration ended) fails with a remote access error.
 */
static int test_bad_rkey(struct side *a, struct side *b, u32 stale_key)
{
	int status;

	status = post_rdma(a, IB_WR_RDMA_WRITE, 4, 0, 64,
			   (uintptr_t)b->buf + FR_OFFSET,
			   stale_key ?: b->pd->unsafe_global_rkey ^ 0x55, 0);
	status = status ?: wait_wc(a, 4, NULL);
	if (status != IB_WC_REM_ACCESS_ERR) {
		pr_err("metaroce_ktest: bad rkey: status %d, expected %d\n",
		       status, IB_WC_REM_ACCESS_ERR);
		return -EIO;
	}
	return 0;
}

struct frwr {
	struct ib_mr *mr;
	struct scatterlist sg;
	bool mapped;
};

static int frwr_setup(struct side *b, struct frwr *f)
{
	f->mr = ib_alloc_mr(b->pd, IB_MR_TYPE_MEM_REG, 16);
	if (IS_ERR(f->mr))
		return PTR_ERR(f->mr);
	sg_init_one(&f->sg, b->buf + FR_OFFSET, FR_LEN);
	if (ib_dma_map_sg(b->dev, &f->sg, 1, DMA_BIDIRECTIONAL) != 1)
		return -ENOMEM;
	f->mapped = true;
	return 0;
}

static void frwr_teardown(struct side *b, struct frwr *f)
{
	if (f->mapped)
		ib_dma_unmap_sg(b->dev, &f->sg, 1, DMA_BIDIRECTIONAL);
	if (!IS_ERR_OR_NULL(f->mr))
		ib_dereg_mr(f->mr);
}

/* Maps the buffer and registers it under the next key, as ULPs do. */
static int frwr_register(struct side *b, struct frwr *f, u64 wr_id)
{
	struct ib_reg_wr wr = {
		.wr = {
			.wr_id = wr_id, .opcode = IB_WR_REG_MR,
			.send_flags = IB_SEND_SIGNALED,
		},
		.mr = f->mr,
		.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE |
			  IB_ACCESS_REMOTE_READ | IB_ACCESS_REMOTE_ATOMIC,
	};
	struct ib_wc wc;
	int n, err;

	n = ib_map_mr_sg(f->mr, &f->sg, 1, NULL, PAGE_SIZE);
	if (n != 1)
		return n < 0 ? n : -EIO;
	ib_update_fast_reg_key(f->mr, ib_inc_rkey(f->mr->rkey));
	wr.key = f->mr->rkey;
	err = ib_post_send(b->qp, &wr.wr, NULL);
	err = err ?: wait_wc(b, wr_id, &wc);
	if (!err && wc.opcode != IB_WC_REG_MR)
		err = -EIO;
	return err;
}

/* a WRITEs the whole registration, then READs a piece across pages. */
static int frwr_write_read(struct side *a, struct side *b, struct frwr *f)
{
	u32 piece = 2 * PAGE_SIZE, at = PAGE_SIZE - 50;
	int err;

	get_random_bytes(a->buf, FR_LEN);
	memset(b->buf, 0, FR_OFFSET + FR_LEN + 64);
	err = post_rdma(a, IB_WR_RDMA_WRITE, 10, 0, FR_LEN, f->mr->iova,
			f->mr->rkey, 0);
	err = err ?: wait_wc(a, 10, NULL);
	err = err ?: check_bytes("frwr write", b->buf + FR_OFFSET, a->buf,
				 FR_LEN);
	if (err)
		return err;
	/* Nothing lands outside the registration. */
	if (memchr_inv(b->buf, 0, FR_OFFSET) ||
	    memchr_inv(b->buf + FR_OFFSET + FR_LEN, 0, 64)) {
		pr_err("metaroce_ktest: frwr write: bytes outside the MR\n");
		return -EIO;
	}
	get_random_bytes(b->buf + FR_OFFSET + at, piece);
	memset(a->buf, 0, piece);
	err = post_rdma(a, IB_WR_RDMA_READ, 11, 0, piece, f->mr->iova + at,
			f->mr->rkey, 0);
	err = err ?: wait_wc(a, 11, NULL);
	return err ?: check_bytes("frwr read", a->buf, b->buf + FR_OFFSET + at,
				  piece);
}

static int post_atomic(struct side *a, enum ib_wr_opcode op, u64 wr_id,
		       u64 remote, u32 rkey, u64 compare_add, u64 swap)
{
	struct ib_sge sge = {
		.addr = (uintptr_t)a->buf, .length = sizeof(u64),
		.lkey = a->pd->local_dma_lkey,
	};
	struct ib_atomic_wr wr = {
		.wr = {
			.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
			.opcode = op, .send_flags = IB_SEND_SIGNALED,
		},
		.remote_addr = remote,
		.rkey = rkey,
		.compare_add = compare_add,
		.swap = swap,
	};

	return ib_post_send(a->qp, &wr.wr, NULL);
}

/*
 * a fetch-adds and compare-swaps a word of the registration on the second
 * page; the result comes back in a's buffer, the word changes in b's.
 */
static int frwr_atomic(struct side *a, struct side *b, struct frwr *f)
{
	/* The word's address, iova + at, is a multiple of 8. */
	u32 at = PAGE_SIZE + 60;
	u64 *word = (u64 *)(b->buf + FR_OFFSET + at), *res = (u64 *)a->buf;
	struct ib_wc wc;
	int err;

	*word = 0x1122334455667788ULL;
	*res = 0;
	err = post_atomic(a, IB_WR_ATOMIC_FETCH_AND_ADD, 13, f->mr->iova + at,
			  f->mr->rkey, 8, 0);
	err = err ?: wait_wc(a, 13, &wc);
	if (!err && (wc.opcode != IB_WC_FETCH_ADD || wc.byte_len != 8 ||
		     *res != 0x1122334455667788ULL ||
		     *word != 0x1122334455667790ULL))
		err = -EIO;
	err = err ?: post_atomic(a, IB_WR_ATOMIC_CMP_AND_SWP, 14,
				 f->mr->iova + at, f->mr->rkey,
				 0x1122334455667790ULL, 42);
	err = err ?: wait_wc(a, 14, &wc);
	if (!err && (wc.opcode != IB_WC_COMP_SWAP ||
		     *res != 0x1122334455667790ULL || *word != 42))
		err = -EIO;
	if (err)
		pr_err("metaroce_ktest: frwr atomic: %d (result %#llx, word %#llx)\n",
		       err, *res, *word);
	return err;
}

static int frwr_local_inv(struct side *b, struct frwr *f, u64 wr_id)
{
	struct ib_send_wr wr = {
		.wr_id = wr_id, .opcode = IB_WR_LOCAL_INV,
		.send_flags = IB_SEND_SIGNALED,
		.ex.invalidate_rkey = f->mr->rkey,
	};
	struct ib_wc wc;
	int err;

	err = ib_post_send(b->qp, &wr, NULL);
	err = err ?: wait_wc(b, wr_id, &wc);
	if (!err && wc.opcode != IB_WC_LOCAL_INV)
		err = -EIO;
	return err;
}

/* a SENDs with invalidate of b's registration; b's receive reports it. */
static int frwr_send_inv(struct side *a, struct side *b, struct frwr *f)
{
	struct ib_sge sge = {
		.addr = (uintptr_t)a->buf, .length = 32,
		.lkey = a->pd->local_dma_lkey,
	};
	struct ib_send_wr wr = {
		.wr_id = 12, .sg_list = &sge, .num_sge = 1,
		.opcode = IB_WR_SEND_WITH_INV, .send_flags = IB_SEND_SIGNALED,
		.ex.invalidate_rkey = f->mr->rkey,
	};
	struct ib_wc wc;
	int err;

	err = post_recv(b, 112, BUF_SIZE / 2, 64);
	err = err ?: ib_post_send(a->qp, &wr, NULL);
	err = err ?: wait_wc(a, 12, NULL);
	err = err ?: wait_wc(b, 112, &wc);
	if (err)
		return err;
	if (!(wc.wc_flags & IB_WC_WITH_INVALIDATE) ||
	    wc.ex.invalidate_rkey != f->mr->rkey || wc.byte_len != 32) {
		pr_err("metaroce_ktest: send with invalidate: flags %#x key %#x, expected %#x\n",
		       wc.wc_flags, wc.ex.invalidate_rkey, f->mr->rkey);
		return -EIO;
	}
	return 0;
}

/*
 * Register, use, invalidate locally, register under the next key, use,
 * invalidate remotely, register again (which only an invalidated MR
 * allows), use. Returns the key of the last registration, invalidated, in
 * *@stale_key.
 */
static int test_frwr(struct side *a, struct side *b, u32 *stale_key)
{
	struct frwr f = {};
	int err;

	err = frwr_setup(b, &f);
	err = err ?: frwr_register(b, &f, 20);
	err = err ?: frwr_write_read(a, b, &f);
	err = err ?: frwr_atomic(a, b, &f);
	err = err ?: frwr_local_inv(b, &f, 21);
	err = err ?: frwr_register(b, &f, 22);
	err = err ?: frwr_write_read(a, b, &f);
	err = err ?: frwr_send_inv(a, b, &f);
	err = err ?: frwr_register(b, &f, 23);
	err = err ?: frwr_write_read(a, b, &f);
	err = err ?: frwr_local_inv(b, &f, 24);
	if (!err)
		*stale_key = f.mr->rkey;
	frwr_teardown(b, &f);
	return err;
}

static int run_tests(struct side *a, struct side *b)
{
	static const u32 sizes[] = { 0, 1, 1000, 1024, 5000, 65536, BUF_SIZE };
	u32 stale_key = 0;
	int i, err;

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		err = test_send(a, b, min_t(u32, sizes[i], BUF_SIZE - 16),
				i & 1);
		if (err)
			return pr_err("metaroce_ktest: send %u failed: %d\n",
				      sizes[i], err), err;
		err = test_write(a, b, max(sizes[i], 1U), i & 1);
		if (err)
			return pr_err("metaroce_ktest: write %u failed: %d\n",
				      sizes[i], err), err;
		err = test_read(a, b, max(sizes[i], 1U));
		if (err)
			return pr_err("metaroce_ktest: read %u failed: %d\n",
				      sizes[i], err), err;
	}
	err = test_frwr(a, b, &stale_key);
	if (err)
		return pr_err("metaroce_ktest: fast registration failed: %d\n",
			      err), err;
	return test_bad_rkey(a, b, stale ? stale_key : 0);
}

static int __init metaroce_ktest_init(void)
{
	struct side a = {}, b = {};
	int err;

	err = side_open(&a, dev_a);
	err = err ?: side_open(&b, dev_b);
	if (err) {
		pr_err("metaroce_ktest: setup failed: %d\n", err);
		goto out;
	}
	/* a's PSNs wrap during the tests. */
	err = connect_qp(&a, &b, 0xfffff0, 0x123);
	err = err ?: connect_qp(&b, &a, 0x123, 0xfffff0);
	if (err) {
		pr_err("metaroce_ktest: connect failed: %d\n", err);
		goto out;
	}
	err = run_tests(&a, &b);
	if (!err)
		pr_info("metaroce_ktest: PASS (%s <-> %s%s)\n", dev_a, dev_b,
			srq ? ", SRQ" : "");
out:
	side_close(&b);
	side_close(&a);
	return err ? -EIO : 0;
}

static void __exit metaroce_ktest_exit(void)
{
}

module_init(metaroce_ktest_init);
module_exit(metaroce_ktest_exit);
