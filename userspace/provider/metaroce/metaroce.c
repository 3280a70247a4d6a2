// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * MetaRoCE libibverbs provider.
 *
 * libibverbs dlopen()s this plugin, the constructor at the bottom registers
 * metaroce_dev_ops, and libibverbs then offers every uverbs device it finds
 * to metaroce_match_device().  This file holds the device and context
 * plumbing and the verbs objects without queues (PD, MR, AH); see
 * metaroce.h for the others.  Verbs not set in metaroce_ctx_ops (XRC,
 * modify_cq, ...) keep the libibverbs defaults, which fail with
 * EOPNOTSUPP.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metaroce.h"

/* ------------------------------------------------------------------------ */
/* Device matching                                                          */
/* ------------------------------------------------------------------------ */

static const struct verbs_match_ent metaroce_match_table[] = {
	VERBS_DRIVER_ID(METAROCE_DRIVER_ID),
	{ .kind = VERBS_MATCH_SENTINEL },
};

/*
 * libibverbs calls this for each candidate device once the table lookup has
 * run.  A table hit means the kernel reported our private driver id over
 * netlink.  Otherwise the device is ours only if the kernel driver labelled
 * it with the MetaRoCE node description, which does not depend on the device
 * name chosen at "rdma link add" time.
 */
static bool metaroce_match_device(struct verbs_sysfs_dev *sysfs_dev)
{
	const size_t prefix_len = strlen(METAROCE_NODE_DESC);
	char desc[128];
	int len;

	if (sysfs_dev->match)
		return true;

	len = ibv_read_ibdev_sysfs_file(desc, sizeof(desc), sysfs_dev,
					"node_desc");
	if (len < 0 || (size_t)len < prefix_len)
		return false;
	return strncmp(desc, METAROCE_NODE_DESC, prefix_len) == 0;
}

static struct verbs_device *
metaroce_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	struct metaroce_device *dev;

	/* libibverbs requires the embedded ibv_device to start out zeroed. */
	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;

	dev->abi_version = sysfs_dev->abi_ver;
	return &dev->ibv_dev;
}

static void metaroce_uninit_device(struct verbs_device *verbs_device)
{
	free(to_mdev(&verbs_device->device));
}

/* ------------------------------------------------------------------------ */
/* Device and port queries                                                  */
/* ------------------------------------------------------------------------ */

static int metaroce_query_device_ex(struct ibv_context *context,
				    const struct ibv_query_device_ex_input *input,
				    struct ibv_device_attr_ex *attr,
				    size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp = {};
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(context, input, attr, attr_size, &resp,
				       &resp_size);
	if (ret)
		return ret;

	/* The kernel reports fw_ver as 16-bit major.minor.sub fields. */
	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%u.%u.%u", (unsigned int)(fw >> 32) & 0xffff,
		 (unsigned int)(fw >> 16) & 0xffff, (unsigned int)fw & 0xffff);
	return 0;
}

static int metaroce_query_port(struct ibv_context *context, uint8_t port_num,
			       struct ibv_port_attr *port_attr)
{
	struct ibv_query_port cmd = {};

	return ibv_cmd_query_port(context, port_num, port_attr, &cmd,
				  sizeof(cmd));
}

/* ------------------------------------------------------------------------ */
/* Protection domains                                                       */
/* ------------------------------------------------------------------------ */

static struct ibv_pd *metaroce_alloc_pd(struct ibv_context *context)
{
	struct ib_uverbs_alloc_pd_resp resp = {};
	struct ibv_alloc_pd cmd = {};
	struct metaroce_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;

	ret = ibv_cmd_alloc_pd(context, &pd->ibv_pd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	return &pd->ibv_pd;
}

static int metaroce_dealloc_pd(struct ibv_pd *ibpd)
{
	int ret;

	ret = ibv_cmd_dealloc_pd(ibpd);
	if (ret)
		return ret;

	free(to_mpd(ibpd));
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Memory regions                                                           */
/* ------------------------------------------------------------------------ */

static struct ibv_mr *metaroce_reg_mr(struct ibv_pd *pd, void *addr,
				      size_t length, uint64_t hca_va,
				      int access)
{
	struct ib_uverbs_reg_mr_resp resp = {};
	struct ibv_reg_mr cmd = {};
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;

	ret = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

/*
 * The kernel re-registers the MR (a new translation, PD or rights); it
 * answers with the keys, which ibv_cmd_rereg_mr() puts in the ibv_mr (the
 * kernel keeps them; see docs/compatibility.md). On failure the old
 * registration stands.
 */
static int metaroce_rereg_mr(struct verbs_mr *vmr, int flags,
			     struct ibv_pd *pd, void *addr, size_t length,
			     int access)
{
	struct ib_uverbs_rereg_mr_resp resp = {};
	struct ibv_rereg_mr cmd = {};
	int ret;

	ret = ibv_cmd_rereg_mr(vmr, flags, addr, length, (uintptr_t)addr,
			       access, pd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret)
		errno = ret;
	return ret;
}

static int metaroce_dereg_mr(struct verbs_mr *vmr)
{
	int ret;

	ret = ibv_cmd_dereg_mr(vmr);
	if (ret)
		return ret;

	free(vmr);
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Memory windows                                                           */
/* ------------------------------------------------------------------------ */

/*
 * The kernel gives the window its first rkey.  Binds go through the SQ
 * (IBV_WR_BIND_MW); the kernel checks them when the SQ gets there.
 */
static struct ibv_mw *metaroce_alloc_mw(struct ibv_pd *pd,
					enum ibv_mw_type type)
{
	struct ib_uverbs_alloc_mw_resp resp = {};
	struct ibv_alloc_mw cmd = {};
	struct ibv_mw *mw;
	int ret;

	mw = calloc(1, sizeof(*mw));
	if (!mw)
		return NULL;

	ret = ibv_cmd_alloc_mw(pd, type, mw, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(mw);
		errno = ret;
		return NULL;
	}
	return mw;
}

static int metaroce_dealloc_mw(struct ibv_mw *mw)
{
	int ret;

	ret = ibv_cmd_dealloc_mw(mw);
	if (ret)
		return ret;

	free(mw);
	return 0;
}

/*
 * ibv_bind_mw() of a type 1 window: posts the bind with the next key, as
 * other providers do, and gives the window that key once it is posted
 * (the bind itself completes, or fails, in SQ order).
 */
static int metaroce_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw,
			    struct ibv_mw_bind *mw_bind)
{
	const struct ibv_mw_bind_info *info = &mw_bind->bind_info;
	struct ibv_send_wr wr = {};
	struct ibv_send_wr *bad_wr;
	int ret;

	if (mw->type != IBV_MW_TYPE_1)
		return EINVAL;
	if (info->length && (!info->mr || info->mr->pd != mw->pd))
		return EINVAL;

	wr.wr_id = mw_bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = mw_bind->send_flags;
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info = *info;

	ret = metaroce_post_send(qp, &wr, &bad_wr);
	if (ret)
		return ret;
	mw->rkey = wr.bind_mw.rkey;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Address handles                                                          */
/* ------------------------------------------------------------------------ */

/*
 * The kernel resolves the address (GID, MAC) and returns a handle that UD
 * send WQEs name the destination by.
 */
static struct ibv_ah *metaroce_create_ah(struct ibv_pd *pd,
					 struct ibv_ah_attr *attr)
{
	struct metaroce_cmd_create_ah_resp resp = {};
	struct metaroce_ah *ah;
	int ret;

	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;

	ret = ibv_cmd_create_ah(pd, &ah->ibv_ah, attr, &resp.ibv_resp,
				sizeof(resp));
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}
	ah->ah_num = resp.drv_payload.ah;
	return &ah->ibv_ah;
}

static int metaroce_destroy_ah(struct ibv_ah *ibah)
{
	int ret;

	ret = ibv_cmd_destroy_ah(ibah);
	if (ret)
		return ret;

	free(to_mah(ibah));
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Contexts                                                                 */
/* ------------------------------------------------------------------------ */

static void metaroce_free_context(struct ibv_context *ibctx)
{
	struct metaroce_context *ctx = to_mctx(ibctx);

	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
}

static const struct verbs_context_ops metaroce_ctx_ops = {
	.alloc_mw = metaroce_alloc_mw,
	.alloc_pd = metaroce_alloc_pd,
	.bind_mw = metaroce_bind_mw,
	.create_ah = metaroce_create_ah,
	.create_cq = metaroce_create_cq,
	.create_cq_ex = metaroce_create_cq_ex,
	.create_qp = metaroce_create_qp,
	.create_qp_ex = metaroce_create_qp_ex,
	.create_srq = metaroce_create_srq,
	.dealloc_mw = metaroce_dealloc_mw,
	.dealloc_pd = metaroce_dealloc_pd,
	.dereg_mr = metaroce_dereg_mr,
	.destroy_ah = metaroce_destroy_ah,
	.destroy_cq = metaroce_destroy_cq,
	.destroy_qp = metaroce_destroy_qp,
	.destroy_srq = metaroce_destroy_srq,
	.free_context = metaroce_free_context,
	.modify_qp = metaroce_modify_qp,
	.modify_srq = metaroce_modify_srq,
	.poll_cq = metaroce_poll_cq,
	.post_recv = metaroce_post_recv,
	.post_send = metaroce_post_send,
	.post_srq_recv = metaroce_post_srq_recv,
	.query_device_ex = metaroce_query_device_ex,
	.query_port = metaroce_query_port,
	.query_qp = metaroce_query_qp,
	.query_srq = metaroce_query_srq,
	.reg_mr = metaroce_reg_mr,
	.rereg_mr = metaroce_rereg_mr,
	/* Arms the kernel CQ; the event arrives on the completion channel. */
	.req_notify_cq = ibv_cmd_req_notify_cq,
	.resize_cq = metaroce_resize_cq,
};

static struct verbs_context *metaroce_alloc_context(struct ibv_device *ibdev,
						    int cmd_fd,
						    void *private_data)
{
	struct metaroce_get_context_resp resp = {};
	struct ibv_get_context cmd = {};
	struct metaroce_context *ctx;
	int ret;

	(void)private_data;

	/* Owns cmd_fd from here on: closed on failure or by uninit. */
	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, ibv_ctx,
					   METAROCE_VERBS_DRIVER_ID);
	if (!ctx)
		return NULL;

	ret = ibv_cmd_get_context(&ctx->ibv_ctx, &cmd, sizeof(cmd),
				  &resp.ibv_resp, sizeof(resp));
	if (ret) {
		errno = ret;
		goto err_uninit;
	}

	if (resp.drv_payload.abi_version != METAROCE_UVERBS_ABI_VERSION) {
		verbs_err(&ctx->ibv_ctx,
			  "kernel reports MetaRoCE ABI %u, provider speaks %u\n",
			  resp.drv_payload.abi_version,
			  METAROCE_UVERBS_ABI_VERSION);
		errno = EPROTO;
		goto err_uninit;
	}
	ctx->kernel_abi_version = resp.drv_payload.abi_version;

	verbs_set_ops(&ctx->ibv_ctx, &metaroce_ctx_ops);
	return &ctx->ibv_ctx;

err_uninit:
	verbs_uninit_context(&ctx->ibv_ctx);
	free(ctx);
	return NULL;
}

static const struct verbs_device_ops metaroce_dev_ops = {
	.name = "metaroce",
	/* Checked by libibverbs against ib_device_ops.uverbs_abi_ver. */
	.match_min_abi_version = METAROCE_UVERBS_ABI_VERSION,
	.match_max_abi_version = METAROCE_UVERBS_ABI_VERSION,
	.match_table = metaroce_match_table,
	.match_device = metaroce_match_device,
	.alloc_device = metaroce_alloc_device,
	.uninit_device = metaroce_uninit_device,
	.alloc_context = metaroce_alloc_context,
};
PROVIDER_DRIVER(metaroce, metaroce_dev_ops);
