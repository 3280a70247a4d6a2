/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Declarations shared between the files of the module, grouped by the
 * file that defines them.
 */
#ifndef METAROCE_LOC_H
#define METAROCE_LOC_H

#include "metaroce.h"
#include "metaroce_compat.h"

/* metaroce_main.c: module state and the registry of live devices */
extern struct workqueue_struct *metaroce_wq;
extern unsigned int metaroce_default_paths;
extern unsigned int metaroce_protocol;
extern unsigned int metaroce_rx_capacity_mbps;
struct metaroce_dev *metaroce_get_dev_by_netdev(struct net_device *ndev);
struct metaroce_dev *metaroce_get_dev_for_skb(struct sk_buff *skb);
int metaroce_registry_add(struct metaroce_dev *mdev);
void metaroce_registry_remove(struct metaroce_dev *mdev);

/* metaroce_dev.c: device creation, attributes, port state */
int metaroce_dev_add(const char *ibdev_name, struct net_device *ndev);
enum ib_port_state metaroce_port_state(const struct metaroce_dev *mdev);
enum ib_mtu metaroce_active_mtu(const struct metaroce_dev *mdev);
void metaroce_dealloc_driver(struct ib_device *ibdev);
int metaroce_notifier_init(void);
void metaroce_notifier_exit(void);

/* metaroce_limits.c: object counts against the advertised limits */
void metaroce_limits_init(struct metaroce_dev *mdev);
int metaroce_obj_charge(struct metaroce_dev *mdev, enum metaroce_obj type);
void metaroce_obj_uncharge(struct metaroce_dev *mdev, enum metaroce_obj type);

/* metaroce_debugfs.c */
void metaroce_debugfs_init(void);
void metaroce_debugfs_exit(void);
void metaroce_debugfs_add(struct metaroce_dev *mdev, const char *name);
void metaroce_debugfs_remove(struct metaroce_dev *mdev);

/* metaroce_sysfs.c: per-device tunables */
extern const struct attribute_group metaroce_attr_group;

/* metaroce_verbs.c: the ib_device_ops glue */
extern const struct ib_device_ops metaroce_dev_ops;

/* metaroce_counters.c */
struct rdma_hw_stats *metaroce_alloc_hw_port_stats(struct ib_device *ibdev,
						   u32 port_num);
int metaroce_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
			  u32 port, int index);

/* metaroce_queue.c: mmap of the shared rings */
int metaroce_mmap(struct ib_ucontext *uctx, struct vm_area_struct *vma);
void metaroce_mmap_free(struct rdma_user_mmap_entry *rdma_entry);

/* metaroce_mw.c: memory windows */
int metaroce_alloc_mw(struct ib_mw *ibmw, struct ib_udata *udata);
int metaroce_dealloc_mw(struct ib_mw *ibmw);
int metaroce_mw_bind(struct metaroce_qp *qp,
		     const struct metaroce_send_wqe *wqe);
bool metaroce_mw_may_invalidate(struct metaroce_qp *qp, u32 rkey,
				bool remote);
int metaroce_mw_invalidate(struct metaroce_qp *qp, u32 rkey, bool remote);
struct metaroce_mr *metaroce_mw_resolve(struct metaroce_qp *qp, u32 rkey,
					u64 addr, u64 len, int access);
struct metaroce_mw_bind *metaroce_mw_access_lock(const struct metaroce_mr *mr,
						 u32 key, u64 addr, u64 len,
						 int access,
						 unsigned long *flags)
	__acquires(mr);

/* metaroce_mr.c */
struct ib_mr *metaroce_get_dma_mr(struct ib_pd *ibpd, int access);
struct ib_mr *metaroce_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				   u64 iova, int access,
				   struct ib_udata *udata);
int metaroce_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata);
struct ib_mr *metaroce_rereg_user_mr(struct ib_mr *ibmr, int flags, u64 start,
				     u64 length, u64 iova, int access,
				     struct ib_pd *pd, struct ib_udata *udata);
struct metaroce_mr *metaroce_mr_get(struct metaroce_dev *mdev, u32 key);
struct metaroce_mr *metaroce_rkey_get(struct metaroce_qp *qp, u32 rkey,
				      u64 addr, u64 len, int access);
void metaroce_mr_put(struct metaroce_mr *mr);
bool metaroce_mr_take_window(struct metaroce_mr *mr);
bool metaroce_mr_allows(const struct metaroce_mr *mr, struct ib_pd *pd,
			u64 addr, u64 len, int access);
int metaroce_mr_copy_from_skb(const struct metaroce_mr *mr, u32 key, u64 addr,
			      const struct sk_buff *skb, int skb_offset,
			      u32 len);
int metaroce_mr_copy_from_buf(const struct metaroce_mr *mr, u32 key, u64 addr,
			      const void *buf, u32 len);
int metaroce_mr_copy_to_buf(const struct metaroce_mr *mr, u32 key, u64 addr,
			    void *buf, u32 len);
int metaroce_mr_atomic(const struct metaroce_mr *mr, u32 key, u64 addr, u8 op,
		       u64 swap_add, u64 compare, u64 *orig);
bool metaroce_mr_key_same_mr(u32 a, u32 b);
struct metaroce_mr *metaroce_mr_alloc(struct metaroce_dev *mdev, int access,
				      gfp_t gfp);
int metaroce_mr_publish(struct metaroce_mr *mr);

/* metaroce_frmr.c: fast registration */
struct ib_mr *metaroce_alloc_mr(struct ib_pd *ibpd, enum ib_mr_type type,
				u32 max_num_sg);
int metaroce_map_mr_sg(struct ib_mr *ibmr, struct scatterlist *sg,
		       int sg_nents, unsigned int *sg_offset);
void metaroce_frmr_free(struct metaroce_frmr *fr);
struct metaroce_mr *metaroce_frmr_get(struct metaroce_dev *mdev, u32 key);
int metaroce_frmr_register(struct metaroce_mr *mr, struct ib_pd *pd, u32 key,
			   int access);
int metaroce_frmr_invalidate(struct metaroce_mr *mr, struct ib_pd *pd,
			     u32 key);
bool metaroce_frmr_valid_with(struct metaroce_mr *mr, struct ib_pd *pd,
			      u32 key);
int metaroce_mr_attach_to_skb(struct metaroce_mr *mr, u64 addr,
			      struct sk_buff *skb, u32 len);

/* metaroce_zc.c */
int metaroce_zc_track(struct sk_buff *skb, struct metaroce_mr *mr);
void metaroce_zc_wait(struct metaroce_mr *mr);
void metaroce_zc_drain(struct metaroce_dev *mdev);

/* metaroce_cq.c */
int metaroce_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
		       struct metaroce_cq_uarg *uarg);
int metaroce_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata);
int metaroce_resize_cq(struct ib_cq *ibcq, int cqe, struct ib_udata *udata);
int metaroce_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags);
int metaroce_poll_cq(struct ib_cq *ibcq, int num_entries, struct ib_wc *wc);
int metaroce_cq_post(struct metaroce_cq *cq, const struct metaroce_cqe *cqe,
		     bool solicited);

/* metaroce_ah.c */
int metaroce_av_from_attr(struct metaroce_av *av,
			  const struct rdma_ah_attr *attr);
int metaroce_ah_lookup(struct metaroce_dev *mdev, u32 handle,
		       struct ib_pd *pd, struct metaroce_av *av);
int metaroce_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init_attr,
		       struct ib_udata *udata);
int metaroce_destroy_ah(struct ib_ah *ibah, u32 flags);

/* metaroce_qp.c */
int metaroce_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *init,
		       struct ib_udata *udata);
int metaroce_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		       struct ib_udata *udata);
int metaroce_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
		      struct ib_qp_init_attr *init);
int metaroce_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata);
struct metaroce_qp *metaroce_qp_get(struct metaroce_dev *mdev, u32 qpn);
void metaroce_qp_fail(struct metaroce_qp *qp);
void metaroce_qp_event(struct metaroce_qp *qp, enum ib_event_type type);

/* metaroce_srq.c */
int metaroce_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
			struct ib_udata *udata);
int metaroce_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
			enum ib_srq_attr_mask mask, struct ib_udata *udata);
int metaroce_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr);
int metaroce_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata);
int metaroce_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			   const struct ib_recv_wr **bad_wr);
bool metaroce_srq_take(struct metaroce_srq *srq, struct metaroce_queue *dst);

/* metaroce_post.c */
int metaroce_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		       const struct ib_send_wr **bad_wr);
int metaroce_post_recv_wqe(struct metaroce_queue *q, u32 max_sge,
			   const struct ib_recv_wr *wr);
int metaroce_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
		       const struct ib_recv_wr **bad_wr);

/* metaroce_rx.c: packets from the network */
void metaroce_rx(struct metaroce_dev *mdev, struct sk_buff *skb);

/* metaroce_net.c: per-network-namespace UDP endpoint of the soft-NIC */
extern unsigned short metaroce_udp_port;
int metaroce_net_init(void);
void metaroce_net_exit(void);
int metaroce_net_open(struct net *net);

#endif /* METAROCE_LOC_H */
