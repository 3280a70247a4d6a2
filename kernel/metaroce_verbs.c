// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * The ib_device_ops glue: argument checks and object bookkeeping for the
 * verbs; everything that moves packets goes through the NIC engine.
 */
#include <linux/ethtool.h>
#include <rdma/ib_mad.h>
#include <rdma/ib_user_verbs.h>

#include "metaroce_loc.h"

static int metaroce_query_device(struct ib_device *ibdev,
				 struct ib_device_attr *attr,
				 struct ib_udata *uhw)
{
	if (uhw->inlen || uhw->outlen)
		return -EINVAL;

	*attr = to_mdev(ibdev)->attr;
	return 0;
}

static int metaroce_query_port(struct ib_device *ibdev, u32 port_num,
			       struct ib_port_attr *attr)
{
	struct metaroce_dev *mdev = to_mdev(ibdev);
	enum ib_port_state state = metaroce_port_state(mdev);

	/* The caller has zeroed *attr. */
	attr->state = state;
	attr->max_mtu = IB_MTU_4096;
	attr->active_mtu = metaroce_active_mtu(mdev);
	attr->gid_tbl_len = METAROCE_GID_TBL_LEN;
	attr->port_cap_flags = IB_PORT_CM_SUP;
	attr->max_msg_sz = METAROCE_MAX_MSG_SIZE;
	attr->pkey_tbl_len = 1;
	attr->max_vl_num = 1;
	if (state == IB_PORT_ACTIVE)
		attr->phys_state = IB_PORT_PHYS_STATE_LINK_UP;
	else if (dev_get_flags(mdev->ndev) & IFF_UP)
		attr->phys_state = IB_PORT_PHYS_STATE_POLLING;
	else
		attr->phys_state = IB_PORT_PHYS_STATE_DISABLED;

	return ib_get_eth_speed(ibdev, port_num, &attr->active_speed,
				&attr->active_width);
}

static int metaroce_query_pkey(struct ib_device *ibdev, u32 port_num,
			       u16 index, u16 *pkey)
{
	if (index)
		return -EINVAL;
	*pkey = IB_DEFAULT_PKEY_FULL;
	return 0;
}

static int metaroce_get_port_immutable(struct ib_device *ibdev, u32 port_num,
				       struct ib_port_immutable *immutable)
{
	/*
	 * Addressing (GIDs from the netdev's IP addresses, rdma_cm route
	 * resolution) is RoCEv2's; the wire protocol is MetaRoCE's own.
	 */
	immutable->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
	immutable->pkey_tbl_len = 1;
	immutable->gid_tbl_len = METAROCE_GID_TBL_LEN;
	immutable->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer metaroce_get_link_layer(struct ib_device *ibdev,
						    u32 port_num)
{
	return IB_LINK_LAYER_ETHERNET;
}

static void metaroce_get_dev_fw_str(struct ib_device *ibdev, char *str)
{
	snprintf(str, IB_FW_VERSION_NAME_MAX, "%u.0.0",
		 METAROCE_UVERBS_ABI_VERSION);
}

static int metaroce_alloc_ucontext(struct ib_ucontext *ibuc,
				   struct ib_udata *udata)
{
	struct metaroce_alloc_context_resp resp = {
		.abi_version = METAROCE_UVERBS_ABI_VERSION,
	};

	if (udata->outlen < sizeof(resp))
		return udata->outlen ? -EINVAL : 0;
	return ib_copy_to_udata(udata, &resp, sizeof(resp));
}

static void metaroce_dealloc_ucontext(struct ib_ucontext *ibuc)
{
}

/*
 * The device goes away (rdma link delete, netdev or namespace removal,
 * rmmod) while a process holds a context open: with this op ib_core does
 * not wait for the process to close the device. By now it has destroyed
 * every object of the context, so the engine no longer touches their
 * rings. The process's ring mappings stay: ib_core zaps only the PFN maps
 * it tracks (device memory that vanishes), while ours are vmalloc pages
 * that each mapping holds a reference on (remap_vmalloc_range()), freed
 * with the last unmap. The process sees stale rings, no new completions,
 * EIO from every command and IB_EVENT_DEVICE_FATAL. Nothing is left to
 * release here.
 */
static void metaroce_disassociate_ucontext(struct ib_ucontext *ibuc)
{
}

static int metaroce_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	return metaroce_obj_charge(to_mdev(ibpd->device), METAROCE_OBJ_PD);
}

static int metaroce_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	metaroce_obj_uncharge(to_mdev(ibpd->device), METAROCE_OBJ_PD);
	return 0;
}

const struct ib_device_ops metaroce_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = (enum rdma_driver_id)METAROCE_DRIVER_ID,
	.uverbs_abi_ver = METAROCE_UVERBS_ABI_VERSION,

	.alloc_hw_port_stats = metaroce_alloc_hw_port_stats,
	.alloc_mr = metaroce_alloc_mr,
	.alloc_mw = metaroce_alloc_mw,
	.alloc_pd = metaroce_alloc_pd,
	.alloc_ucontext = metaroce_alloc_ucontext,
	.create_ah = metaroce_create_ah,
	.create_cq = metaroce_create_cq,
	.create_qp = metaroce_create_qp,
	.create_srq = metaroce_create_srq,
	.create_user_ah = metaroce_create_ah,
	.dealloc_driver = metaroce_dealloc_driver,
	.dealloc_mw = metaroce_dealloc_mw,
	.dealloc_pd = metaroce_dealloc_pd,
	.dealloc_ucontext = metaroce_dealloc_ucontext,
	.dereg_mr = metaroce_dereg_mr,
	.disassociate_ucontext = metaroce_disassociate_ucontext,
	.destroy_ah = metaroce_destroy_ah,
	.destroy_cq = metaroce_destroy_cq,
	.destroy_qp = metaroce_destroy_qp,
	.destroy_srq = metaroce_destroy_srq,
	.device_group = &metaroce_attr_group,
	.get_dev_fw_str = metaroce_get_dev_fw_str,
	.get_dma_mr = metaroce_get_dma_mr,
	.get_hw_stats = metaroce_get_hw_stats,
	.get_link_layer = metaroce_get_link_layer,
	.get_port_immutable = metaroce_get_port_immutable,
	.map_mr_sg = metaroce_map_mr_sg,
	.mmap = metaroce_mmap,
	.mmap_free = metaroce_mmap_free,
	.modify_qp = metaroce_modify_qp,
	.modify_srq = metaroce_modify_srq,
	.poll_cq = metaroce_poll_cq,
	.post_recv = metaroce_post_recv,
	.post_send = metaroce_post_send,
	.post_srq_recv = metaroce_post_srq_recv,
	.query_device = metaroce_query_device,
	.query_pkey = metaroce_query_pkey,
	.query_port = metaroce_query_port,
	.query_qp = metaroce_query_qp,
	.query_srq = metaroce_query_srq,
	.reg_user_mr = metaroce_reg_user_mr,
	.req_notify_cq = metaroce_req_notify_cq,
	.rereg_user_mr = metaroce_rereg_user_mr,
	.resize_cq = metaroce_resize_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, metaroce_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, metaroce_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_mw, metaroce_mw, ibmw),
	INIT_RDMA_OBJ_SIZE(ib_pd, metaroce_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, metaroce_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, metaroce_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, metaroce_ucontext, ibuc),
};
