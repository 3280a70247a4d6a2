// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * MetaRoCE module entry: the "metaroce" rdma link type and the registry of
 * live devices.
 *
 *   rdma link add mr0 type metaroce netdev eth0
 */
#include <linux/inetdevice.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/module.h>
#include <linux/rculist.h>
#include <net/addrconf.h>
#include <rdma/rdma_netlink.h>

#include "metaroce_loc.h"
#include "metaroce_soft.h"

MODULE_AUTHOR("MetaRoCE developers");
MODULE_DESCRIPTION("MetaRoCE: loss-tolerant multipath RDMA over Ethernet");
MODULE_LICENSE("Dual BSD/GPL");

/* Transmit workers and deferred releases of all devices. */
struct workqueue_struct *metaroce_wq;

unsigned int metaroce_default_paths = SOFT_DEFAULT_PATHS;
module_param_named(paths, metaroce_default_paths, uint, 0444);
MODULE_PARM_DESC(paths,
		 "Paths per connection for new devices (1-64, default 8)");

/* Until v2 carries every verb (issue 15), v1 is the default. */
unsigned int metaroce_protocol = 1;
module_param_named(protocol, metaroce_protocol, uint, 0444);
MODULE_PARM_DESC(protocol,
		 "Wire protocol version of new devices (1 or 2, default 1)");

unsigned int metaroce_rx_capacity_mbps;
module_param_named(rx_capacity_mbps, metaroce_rx_capacity_mbps, uint, 0444);
MODULE_PARM_DESC(rx_capacity_mbps,
		 "Protocol 2: inbound capacity a device shares among its senders, Mbit/s (default 0: the link's speed)");

/*
 * Devices between metaroce_dev_add() and their dealloc_driver. Writers
 * hold registry_lock; readers (netdev events, packet receive) walk the list
 * under RCU and take a device reference with ib_device_try_get().
 */
static LIST_HEAD(registry);
static DEFINE_SPINLOCK(registry_lock);

/* Returns the device bound to @ndev with a reference held, or NULL. */
struct metaroce_dev *metaroce_get_dev_by_netdev(struct net_device *ndev)
{
	struct metaroce_dev *mdev;

	rcu_read_lock();
	list_for_each_entry_rcu(mdev, &registry, registry) {
		if (mdev->ndev == ndev && ib_device_try_get(&mdev->ib_dev)) {
			rcu_read_unlock();
			return mdev;
		}
	}
	rcu_read_unlock();
	return NULL;
}

/*
 * The device a received packet is for: the one on its netdev, or, for a
 * packet a local device sent to itself through the loopback interface,
 * the one whose netdev owns the destination address. With a reference.
 */
struct metaroce_dev *metaroce_get_dev_for_skb(struct sk_buff *skb)
{
	struct metaroce_dev *mdev = metaroce_get_dev_by_netdev(skb->dev);
	struct net *net = dev_net(skb->dev);
	struct net_device *ndev;

	if (mdev || !(skb->dev->flags & IFF_LOOPBACK))
		return mdev;

	if (skb->protocol == htons(ETH_P_IP)) {
		rcu_read_lock();
		ndev = __ip_dev_find(net, ip_hdr(skb)->daddr, false);
		mdev = ndev ? metaroce_get_dev_by_netdev(ndev) : NULL;
		rcu_read_unlock();
		return mdev;
	}

	rcu_read_lock();
	list_for_each_entry_rcu(mdev, &registry, registry) {
		if (dev_net(mdev->ndev) == net &&
		    ipv6_chk_addr(net, &ipv6_hdr(skb)->daddr, mdev->ndev, 0) &&
		    ib_device_try_get(&mdev->ib_dev)) {
			rcu_read_unlock();
			return mdev;
		}
	}
	rcu_read_unlock();
	return NULL;
}

/*
 * Claims @ndev for @mdev. Fails with -EBUSY if another device already
 * sits on it; the check and the insertion are one step so that two racing
 * "rdma link add" calls cannot both succeed.
 */
int metaroce_registry_add(struct metaroce_dev *mdev)
{
	struct metaroce_dev *other;
	int err = 0;

	spin_lock(&registry_lock);
	list_for_each_entry(other, &registry, registry) {
		if (other->ndev == mdev->ndev) {
			err = -EBUSY;
			goto out;
		}
	}
	list_add_tail_rcu(&mdev->registry, &registry);
out:
	spin_unlock(&registry_lock);
	return err;
}

/* Safe on a device that never made it onto the list. */
void metaroce_registry_remove(struct metaroce_dev *mdev)
{
	spin_lock(&registry_lock);
	if (!list_empty(&mdev->registry))
		list_del_rcu(&mdev->registry);
	spin_unlock(&registry_lock);
}

/* Unregisters every device; dealloc_driver takes each off the list. */
static void unregister_all_devices(void)
{
	struct metaroce_dev *mdev;

	for (;;) {
		spin_lock(&registry_lock);
		mdev = list_first_entry_or_null(&registry, struct metaroce_dev,
						registry);
		if (mdev)
			get_device(&mdev->ib_dev.dev);
		spin_unlock(&registry_lock);
		if (!mdev)
			break;
		/* Waits for, or performs, the unregistration. */
		ib_unregister_device(&mdev->ib_dev);
		put_device(&mdev->ib_dev.dev);
	}
	/*
	 * A queued unregistration (netdev removal) may have taken a device
	 * off the registry and still be in its dealloc_driver: ib_core keeps
	 * each device in its table until dealloc_driver has returned, and
	 * this waits for them.
	 */
	ib_unregister_driver((enum rdma_driver_id)METAROCE_DRIVER_ID);
}

static int metaroce_newlink(const char *ibdev_name, struct net_device *ndev)
{
	return metaroce_dev_add(ibdev_name, ndev);
}

static struct rdma_link_ops metaroce_link_ops = {
	.type = "metaroce",
	.newlink = metaroce_newlink,
};

static int __init metaroce_init(void)
{
	int err;

	if (!metaroce_default_paths || metaroce_default_paths > SOFT_MAX_PATHS ||
	    metaroce_protocol < 1 || metaroce_protocol > 2)
		return -EINVAL;
	metaroce_wq = alloc_workqueue("metaroce", WQ_HIGHPRI, 0);
	if (!metaroce_wq)
		return -ENOMEM;

	err = metaroce_net_init();
	if (err)
		goto err_wq;

	err = metaroce_notifier_init();
	if (err)
		goto err_net;

	metaroce_debugfs_init();
	rdma_link_register(&metaroce_link_ops);
	pr_info("metaroce: loaded (UDP port %u)\n", metaroce_udp_port);
	return 0;

err_net:
	metaroce_net_exit();
err_wq:
	destroy_workqueue(metaroce_wq);
	return err;
}

static void __exit metaroce_exit(void)
{
	rdma_link_unregister(&metaroce_link_ops);
	unregister_all_devices();
	metaroce_notifier_exit();
	metaroce_net_exit();
	metaroce_debugfs_exit();
	/* Finishes deferred MR releases. */
	destroy_workqueue(metaroce_wq);
	pr_info("metaroce: unloaded\n");
}

/* After ib_core and the UDP tunnel code when built in, as rxe does. */
late_initcall(metaroce_init);
module_exit(metaroce_exit);

MODULE_ALIAS_RDMA_LINK("metaroce");
