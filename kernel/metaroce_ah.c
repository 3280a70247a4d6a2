// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Address handles and address vectors: where a QP's packets go, derived
 * from RoCEv2-style GIDs (IPv4-mapped or IPv6 addresses of the netdev).
 */
#include <net/addrconf.h>
#include <rdma/ib_addr.h>

#include "metaroce_loc.h"

#define AH_HANDLE_LIMIT	XA_LIMIT(1, U32_MAX)

/* Fills @av from @attr. Returns -EINVAL for anything we cannot reach. */
int metaroce_av_from_attr(struct metaroce_av *av,
			  const struct rdma_ah_attr *attr)
{
	const struct ib_global_route *grh;
	const struct ib_gid_attr *sgid_attr;
	union {
		struct sockaddr_in v4;
		struct sockaddr_in6 v6;
	} src, dst;

	if (!(rdma_ah_get_ah_flags(attr) & IB_AH_GRH))
		return -EINVAL;
	grh = rdma_ah_read_grh(attr);
	sgid_attr = grh->sgid_attr;
	if (!sgid_attr)
		return -EINVAL;

	memset(av, 0, sizeof(*av));
	av->net_type = rdma_gid_attr_network_type(sgid_attr);
	rdma_gid2ip((struct sockaddr *)&src, &sgid_attr->gid);
	rdma_gid2ip((struct sockaddr *)&dst, &grh->dgid);

	switch (av->net_type) {
	case RDMA_NETWORK_IPV4:
		if (dst.v4.sin_family != AF_INET)
			return -EINVAL;
		av->saddr4 = src.v4.sin_addr.s_addr;
		av->daddr4 = dst.v4.sin_addr.s_addr;
		break;
	case RDMA_NETWORK_IPV6:
		if (dst.v6.sin6_family != AF_INET6)
			return -EINVAL;
		av->saddr6 = src.v6.sin6_addr;
		av->daddr6 = dst.v6.sin6_addr;
		break;
	default:
		return -EINVAL;
	}

	ether_addr_copy(av->dmac, attr->roce.dmac);
	av->traffic_class = grh->traffic_class;
	av->hop_limit = grh->hop_limit;
	/* 20 bits on the wire: the rest would land in the version field. */
	av->flow_label = grh->flow_label & IB_GRH_FLOWLABEL_MASK;
	return 0;
}

/*
 * User AHs are named by a handle in work requests. The engine looks the
 * handle up from the packet path, so what it reads is a copy freed by RCU.
 */
struct metaroce_ah_handle {
	struct metaroce_av av;
	struct ib_pd *pd;
	struct rcu_head rcu;
};

/* Copies the AV of user AH @handle if it belongs to @pd. */
int metaroce_ah_lookup(struct metaroce_dev *mdev, u32 handle,
		       struct ib_pd *pd, struct metaroce_av *av)
{
	struct metaroce_ah_handle *h;
	int err = -EINVAL;

	rcu_read_lock();
	h = xa_load(&mdev->ahs, handle);
	if (h && h->pd == pd) {
		*av = h->av;
		err = 0;
	}
	rcu_read_unlock();
	return err;
}

static int ah_publish(struct metaroce_dev *mdev, struct metaroce_ah *ah,
		      struct ib_udata *udata)
{
	struct metaroce_create_ah_resp resp = {};
	struct metaroce_ah_handle *h;
	int err;

	if (udata->outlen < sizeof(resp))
		return -EINVAL;
	/* Charged to the creator's memory cgroup, like everything it makes. */
	h = kmalloc(sizeof(*h), GFP_ATOMIC | __GFP_ACCOUNT);
	if (!h)
		return -ENOMEM;
	h->av = ah->av;
	h->pd = ah->ibah.pd;
	err = xa_alloc_cyclic(&mdev->ahs, &ah->handle, h, AH_HANDLE_LIMIT,
			      &mdev->next_ah, GFP_ATOMIC);
	if (err < 0) {
		kfree(h);
		return err;
	}
	resp.ah = ah->handle;
	err = ib_copy_to_udata(udata, &resp, sizeof(resp));
	if (err) {
		/* Another thread's WQE may name the handle already. */
		xa_erase(&mdev->ahs, ah->handle);
		kfree_rcu(h, rcu);
	}
	return err;
}

int metaroce_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init_attr,
		       struct ib_udata *udata)
{
	struct metaroce_dev *mdev = to_mdev(ibah->device);
	struct metaroce_ah *ah = to_mah(ibah);
	int err;

	err = metaroce_av_from_attr(&ah->av, init_attr->ah_attr);
	if (err)
		return err;
	err = metaroce_obj_charge(mdev, METAROCE_OBJ_AH);
	if (err || !udata)
		return err;
	err = ah_publish(mdev, ah, udata);
	if (err)
		metaroce_obj_uncharge(mdev, METAROCE_OBJ_AH);
	return err;
}

int metaroce_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	struct metaroce_ah *ah = to_mah(ibah);
	struct metaroce_ah_handle *h;

	metaroce_obj_uncharge(to_mdev(ibah->device), METAROCE_OBJ_AH);
	if (!ah->handle)
		return 0;
	h = xa_erase(&to_mdev(ibah->device)->ahs, ah->handle);
	if (h)
		kfree_rcu(h, rcu);
	return 0;
}
