// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Device lifetime: creation on "rdma link add", registration with ib_core,
 * teardown, and the port following its netdev (carrier, MTU, removal).
 */
#include <linux/ethtool.h>
#include <linux/if_arp.h>
#include <linux/rtnetlink.h>
#include <net/addrconf.h>

#include "metaroce_loc.h"
#include "core/mrc_fair.h"
#include "metaroce_engine.h"

static void init_device_attr(struct metaroce_dev *mdev)
{
	struct ib_device_attr *attr = &mdev->attr;

	attr->fw_ver = METAROCE_FW_VER;
	attr->vendor_id = METAROCE_VENDOR_ID;
	attr->vendor_part_id = METAROCE_VENDOR_PART_ID;
	attr->hw_ver = METAROCE_HW_VER;
	addrconf_addr_eui48((u8 *)&attr->sys_image_guid, mdev->ndev->dev_addr);
	attr->max_mr_size = METAROCE_MAX_MR_SIZE;
	attr->page_size_cap = PAGE_SIZE;
	attr->max_qp_wr = METAROCE_MAX_QP_WR;
	attr->device_cap_flags = IB_DEVICE_SYS_IMAGE_GUID |
				 IB_DEVICE_PORT_ACTIVE_EVENT |
				 IB_DEVICE_RC_RNR_NAK_GEN |
				 IB_DEVICE_MEM_MGT_EXTENSIONS |
				 IB_DEVICE_MEM_WINDOW |
				 IB_DEVICE_MEM_WINDOW_TYPE_2B;
	/* Lets "rdma link delete" unregister the device. */
	attr->kernel_cap_flags = IBK_ALLOW_USER_UNREG;
	attr->max_send_sge = METAROCE_MAX_SGE;
	attr->max_recv_sge = METAROCE_MAX_SGE;
	attr->max_sge_rd = METAROCE_MAX_SGE;
	attr->max_cqe = METAROCE_MAX_CQE;
	attr->max_srq_wr = METAROCE_MAX_SRQ_WR;
	attr->max_srq_sge = METAROCE_MAX_SGE;
	attr->max_qp_rd_atom = METAROCE_MAX_RD_ATOMIC;
	attr->max_qp_init_rd_atom = METAROCE_MAX_RD_ATOMIC;
	/* Atomics run on the CPU (cmpxchg64): atomic against the host too. */
	attr->atomic_cap = IB_ATOMIC_HCA;
	attr->masked_atomic_cap = IB_ATOMIC_NONE;
	attr->max_pkeys = 1;
	attr->local_ca_ack_delay = 15;
	attr->max_fast_reg_page_list_len = METAROCE_MAX_FR_PAGES;
	/* max_qp, max_cq, max_mr, max_pd, max_ah: what creation enforces. */
	metaroce_limits_init(mdev);
}

/*
 * The largest IB MTU whose packets, with all headers, fit the netdev MTU:
 * its RC packets carry its segment size, its UD packets the MTU itself.
 */
enum ib_mtu metaroce_active_mtu(const struct metaroce_dev *mdev)
{
	int payload = READ_ONCE(mdev->ndev->mtu) - METAROCE_MAX_HDR_LEN;
	enum ib_mtu mtu;

	for (mtu = IB_MTU_4096; mtu > IB_MTU_256; mtu--)
		if (metaroce_segment_size(ib_mtu_enum_to_int(mtu)) <= payload)
			break;
	return mtu;
}

/* The port is active while the netdev is up and has carrier. */
enum ib_port_state metaroce_port_state(const struct metaroce_dev *mdev)
{
	struct net_device *ndev = mdev->ndev;

	return netif_running(ndev) && netif_carrier_ok(ndev) ?
	       IB_PORT_ACTIVE : IB_PORT_DOWN;
}

static void dispatch_port_event(struct metaroce_dev *mdev,
				enum ib_event_type type)
{
	struct ib_event ev = {
		.device = &mdev->ib_dev,
		.element.port_num = METAROCE_PORT,
		.event = type,
	};

	ib_dispatch_event(&ev);
}

/* Called under RTNL on every netdev state change. */
static void report_port_state(struct metaroce_dev *mdev)
{
	enum ib_port_state state = metaroce_port_state(mdev);

	if (state == mdev->reported_port_state)
		return;
	mdev->reported_port_state = state;
	dispatch_port_event(mdev, state == IB_PORT_ACTIVE ?
			    IB_EVENT_PORT_ACTIVE : IB_EVENT_PORT_ERR);
	dev_info(&mdev->ib_dev.dev, "port %s\n",
		 state == IB_PORT_ACTIVE ? "active" : "down");
}

/*
 * The inbound capacity a v2 device shares among its senders (protocol-v2.md
 * section 10): the module parameter if set, else the link's speed; 0 (no
 * grants) when the link does not know it. Called under RTNL.
 */
static u32 rx_capacity(struct metaroce_dev *mdev)
{
	struct ethtool_link_ksettings ks;

	if (metaroce_rx_capacity_mbps)
		return metaroce_rx_capacity_mbps;
	if (__ethtool_get_link_ksettings(mdev->ndev, &ks) ||
	    ks.base.speed == (u32)SPEED_UNKNOWN)
		return 0;
	return ks.base.speed;
}

static void update_rx_capacity(struct metaroce_dev *mdev)
{
	bool changed;
	u32 mbps;

	if (!mdev->fair)
		return;
	mbps = rx_capacity(mdev);
	spin_lock_bh(&mdev->fair_lock);
	changed = mdev->fair->capacity_mbps != mbps;
	mrc_fair_rx_set_capacity(mdev->fair, mbps);
	spin_unlock_bh(&mdev->fair_lock);
	if (changed)
		pr_info("metaroce: %s: senders share %u Mbit/s%s\n",
			mdev->ndev->name, mbps, mbps ? "" : " (speed unknown)");
}

static int metaroce_netdev_event(struct notifier_block *nb,
				 unsigned long event, void *arg)
{
	struct net_device *ndev = netdev_notifier_info_to_dev(arg);
	struct metaroce_dev *mdev;

	mdev = metaroce_get_dev_by_netdev(ndev);
	if (!mdev)
		return NOTIFY_DONE;

	switch (event) {
	case NETDEV_UNREGISTER:
		/* The netdev waits for our reference; drop it soon. */
		ib_unregister_device_queued(&mdev->ib_dev);
		break;
	case NETDEV_UP:
	case NETDEV_DOWN:
	case NETDEV_CHANGE:
		report_port_state(mdev);
		update_rx_capacity(mdev);
		break;
	default:
		break;
	}

	ib_device_put(&mdev->ib_dev);
	return NOTIFY_OK;
}

static struct notifier_block metaroce_netdev_notifier = {
	.notifier_call = metaroce_netdev_event,
};

int metaroce_notifier_init(void)
{
	return register_netdevice_notifier(&metaroce_netdev_notifier);
}

void metaroce_notifier_exit(void)
{
	unregister_netdevice_notifier(&metaroce_netdev_notifier);
}

/*
 * ib_device_ops.dealloc_driver: ib_core is done with the device. Also the
 * undo of a failed metaroce_dev_add(), through ib_dealloc_device(), so it
 * copes with a device that got only part of the way.
 */
void metaroce_dealloc_driver(struct ib_device *ibdev)
{
	struct metaroce_dev *mdev = to_mdev(ibdev);

	metaroce_debugfs_remove(mdev);
	if (mdev->engine)
		mdev->engine->dev_close(mdev);
	/*
	 * The last MR puts queued their releases (some from packets that
	 * left a qdisc late); ib_umem_release() uses the ib_device, which
	 * ib_core frees after we return.
	 */
	metaroce_zc_drain(mdev);
	kfree(mdev->fair);
	flush_workqueue(metaroce_wq);
	free_percpu(mdev->counters);
	xa_destroy(&mdev->ahs);
	xa_destroy(&mdev->mws);
	xa_destroy(&mdev->mrs);
	xa_destroy(&mdev->qps);
	/*
	 * Off the registry before the netdev goes: the receive path's walk
	 * (loopback packets) reads mdev->ndev under RCU.
	 */
	metaroce_registry_remove(mdev);
	synchronize_rcu();
	netdev_put(mdev->ndev, &mdev->ndev_tracker);
}

static void init_ib_device(struct metaroce_dev *mdev)
{
	struct ib_device *ibdev = &mdev->ib_dev;

	strscpy(ibdev->node_desc, METAROCE_NODE_DESC, sizeof(ibdev->node_desc));
	ibdev->node_type = RDMA_NODE_IB_CA;
	ibdev->phys_port_cnt = 1;
	ibdev->num_comp_vectors = num_possible_cpus();
	ibdev->local_dma_lkey = 0;
	addrconf_addr_eui48((u8 *)&ibdev->node_guid, mdev->ndev->dev_addr);
	/*
	 * ib_core leaves these commands off unless asked: the provider uses
	 * POST_SEND/POST_RECV with no work requests as doorbells.
	 */
	ibdev->uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
				  BIT_ULL(IB_USER_VERBS_CMD_POST_RECV) |
				  BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
}

static bool netdev_is_going_away(struct net_device *ndev)
{
	bool gone;

	rtnl_lock();
	gone = ndev->reg_state != NETREG_REGISTERED;
	rtnl_unlock();
	return gone;
}

int metaroce_dev_add(const char *ibdev_name, struct net_device *ndev)
{
	struct metaroce_dev *mdev;
	struct ib_device *other;
	int err;

	if (ndev->type != ARPHRD_ETHER) {
		pr_err("metaroce: %s is not an Ethernet device\n", ndev->name);
		return -EINVAL;
	}

	other = ib_device_get_by_name(ibdev_name, RDMA_DRIVER_UNKNOWN);
	if (other) {
		ib_device_put(other);
		pr_err("metaroce: an RDMA device named %s exists\n", ibdev_name);
		return -EEXIST;
	}

	mdev = ib_alloc_device(metaroce_dev, ib_dev);
	if (!mdev)
		return -ENOMEM;
	/* From here on, ib_dealloc_device() undoes everything. */
	ib_set_device_ops(&mdev->ib_dev, &metaroce_dev_ops);
	INIT_LIST_HEAD(&mdev->registry);
	mdev->ndev = ndev;
	netdev_hold(ndev, &mdev->ndev_tracker, GFP_KERNEL);
	xa_init_flags(&mdev->qps, XA_FLAGS_ALLOC);
	xa_init_flags(&mdev->mrs, XA_FLAGS_ALLOC1);
	xa_init_flags(&mdev->mws, XA_FLAGS_ALLOC1);
	xa_init_flags(&mdev->ahs, XA_FLAGS_ALLOC1);
	mdev->num_paths = metaroce_default_paths;
	mdev->protocol = metaroce_protocol;
	spin_lock_init(&mdev->fair_lock);
	if (mdev->protocol == 2) {
		mdev->fair = kzalloc(sizeof(*mdev->fair), GFP_KERNEL);
		if (!mdev->fair) {
			err = -ENOMEM;
			goto err_dealloc;
		}
		/* rx_capacity() sets the rate once RTNL is held */
		mrc_fair_rx_init(mdev->fair, 0);
	}
	init_device_attr(mdev);
	init_ib_device(mdev);

	mdev->counters = alloc_percpu(struct metaroce_counters);
	if (!mdev->counters) {
		err = -ENOMEM;
		goto err_dealloc;
	}

	err = metaroce_registry_add(mdev);
	if (err) {
		pr_err("metaroce: %s already carries an RDMA device\n",
		       ndev->name);
		goto err_dealloc;
	}

	err = metaroce_soft_engine.dev_open(mdev);
	if (err)
		goto err_dealloc;
	mdev->engine = &metaroce_soft_engine;

	rtnl_lock();
	mdev->reported_port_state = metaroce_port_state(mdev);
	update_rx_capacity(mdev);
	rtnl_unlock();

	err = ib_device_set_netdev(&mdev->ib_dev, ndev, METAROCE_PORT);
	if (err)
		goto err_dealloc;
	metaroce_debugfs_add(mdev, ibdev_name);

	err = ib_register_device(&mdev->ib_dev, ibdev_name, NULL);
	if (err) {
		/* ib_core says ENFILE for a name taken since our check. */
		if (err == -ENFILE)
			err = -EEXIST;
		goto err_dealloc;
	}

	/*
	 * A NETDEV_UNREGISTER that came before the device was registered
	 * found nothing to remove; catch it here. From now on the netdev
	 * notifier sees the device.
	 */
	if (netdev_is_going_away(ndev)) {
		ib_unregister_device_queued(&mdev->ib_dev);
		return -ENODEV;
	}
	return 0;

err_dealloc:
	ib_dealloc_device(&mdev->ib_dev);
	return err;
}
