// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Per-device tunables under /sys/class/infiniband/<dev>/metaroce/.
 */
#include <linux/device.h>
#include <linux/kstrtox.h>

#include "metaroce_loc.h"
#include "metaroce_engine.h"
#include "metaroce_soft.h"

static struct metaroce_dev *dev_to_mdev(struct device *dev)
{
	return rdma_device_to_drv_device(dev, struct metaroce_dev, ib_dev);
}

/* Paths per connection; applies to QPs created afterwards. */
static ssize_t paths_show(struct device *dev, struct device_attribute *attr,
			  char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(dev_to_mdev(dev)->num_paths));
}

static ssize_t paths_store(struct device *dev, struct device_attribute *attr,
			   const char *buf, size_t count)
{
	unsigned int n;
	int err = kstrtouint(buf, 0, &n);

	if (err)
		return err;
	if (n < 1 || n > SOFT_MAX_PATHS)
		return -EINVAL;
	WRITE_ONCE(dev_to_mdev(dev)->num_paths, n);
	return count;
}
static DEVICE_ATTR_RW(paths);

static ssize_t udp_port_show(struct device *dev, struct device_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%u\n", metaroce_udp_port);
}
static DEVICE_ATTR_RO(udp_port);

static ssize_t engine_show(struct device *dev, struct device_attribute *attr,
			   char *buf)
{
	struct metaroce_dev *mdev = dev_to_mdev(dev);

	return sysfs_emit(buf, "%s\n", mdev->engine ? mdev->engine->name : "");
}
static DEVICE_ATTR_RO(engine);

static struct attribute *metaroce_attrs[] = {
	&dev_attr_paths.attr,
	&dev_attr_udp_port.attr,
	&dev_attr_engine.attr,
	NULL,
};

const struct attribute_group metaroce_attr_group = {
	.name = "metaroce",
	.attrs = metaroce_attrs,
};
