/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Where the kernels the module is built for differ: Debian 12's 6.1 and its
 * 6.12 (docs/compatibility.md, "Kernels"). The rest of the module is written
 * against what is here, without version tests of its own.
 */
#ifndef METAROCE_COMPAT_H
#define METAROCE_COMPAT_H

#include <linux/skbuff.h>
#include <linux/version.h>
#include <rdma/ib_verbs.h>

/*
 * True when building for kernel @major.@minor or later: LINUX_VERSION_CODE
 * without its sublevel, so that a stable update never changes the answer
 * (and checkpatch, which flags LINUX_VERSION_CODE by name, has nothing to
 * say about this one place).
 */
#define METAROCE_KERNEL_SINCE(major, minor)				\
	(KERNEL_VERSION(LINUX_VERSION_MAJOR, LINUX_VERSION_PATCHLEVEL, 0) >= \
	 KERNEL_VERSION(major, minor, 0))

/*
 * The skb fragment reference helpers (__skb_frag_unref() and friends)
 * moved out of <linux/skbuff.h> into a header of their own in 6.11.
 */
#if METAROCE_KERNEL_SINCE(6, 11)
#include <linux/skbuff_ref.h>
#endif

/*
 * 6.10 moved a zero-copy skb's completion callback from struct ubuf_info
 * (->callback) into a struct ubuf_info_ops it points to (->ops->complete).
 * metaroce_zc.c sets and recognises its own with these two.
 */
#if METAROCE_KERNEL_SINCE(6, 10)
#define METAROCE_UBUF_OPS(name, fn)					\
	static const struct ubuf_info_ops name = { .complete = fn }
#define metaroce_ubuf_set(ubuf, name, fn)	((ubuf)->ops = &(name))
#define metaroce_ubuf_is(ubuf, name, fn)	((ubuf)->ops == &(name))
#else
/* Declares nothing but an incomplete struct: 6.1 has no ops to define. */
#define METAROCE_UBUF_OPS(name, fn)	struct name
#define metaroce_ubuf_set(ubuf, name, fn)	((ubuf)->callback = (fn))
#define metaroce_ubuf_is(ubuf, name, fn)	((ubuf)->callback == (fn))
#endif

/*
 * 6.11 passes ib_device_ops.create_cq the uverbs attribute bundle (NULL for
 * a kernel CQ) instead of the driver's udata, which is now in the bundle.
 * metaroce_create_cq() takes a struct metaroce_cq_uarg and gets the udata
 * with metaroce_cq_udata().
 */
#if METAROCE_KERNEL_SINCE(6, 11)
#include <rdma/uverbs_ioctl.h>
#define metaroce_cq_uarg uverbs_attr_bundle
static inline struct ib_udata *
metaroce_cq_udata(struct uverbs_attr_bundle *attrs)
{
	return attrs ? &attrs->driver_udata : NULL;
}
#else
#define metaroce_cq_uarg ib_udata
static inline struct ib_udata *metaroce_cq_udata(struct ib_udata *udata)
{
	return udata;
}
#endif

#endif /* METAROCE_COMPAT_H */
