/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Declarations of the libibverbs *private provider interface* used by the
 * MetaRoCE provider when it is built outside an rdma-core source tree.
 *
 * Debian's libibverbs-dev ships no provider header, so this file declares,
 * in our own words, the subset we rely on.  Every structure below must have
 * exactly the layout that rdma-core v44 (libibverbs/driver.h,
 * libibverbs/kern-abi.h) gives it, because libibverbs allocates, reads and
 * writes these objects itself.  The interface is the one exported under the
 * symbol version IBVERBS_PRIVATE_34 of libibverbs.so.1; any other PABI number
 * means a different layout and this header must not be used with it.
 *
 * When the provider is compiled inside rdma-core, <infiniband/driver.h> is
 * used instead (see driver_compat.h) and this file is not included.
 *
 * Compile-time checks at the end pin the layouts that were verified against
 * the v44 headers (see docs/notes-rdma-core-abi.md).
 */
#ifndef METAROCE_VERBS_ABI_H
#define METAROCE_VERBS_ABI_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <errno.h>
#include <time.h>
#include <sys/types.h>

#include <infiniband/verbs.h>		/* public verbs + struct verbs_context */
#include <rdma/ib_user_verbs.h>		/* kernel write() ABI structs */
#include <rdma/ib_user_ioctl_verbs.h>	/* enum rdma_driver_id */

/* The private ABI generation this header describes. */
#define IBVERBS_PABI_VERSION 34

#ifndef container_of
#define container_of(ptr, type, member) \
	((type *)((char *)(ptr) - offsetof(type, member)))
#endif

/* ------------------------------------------------------------------------ */
/* Device discovery and matching                                            */
/* ------------------------------------------------------------------------ */

/* Values of verbs_match_ent.kind; a zeroed entry ends a table. */
enum {
	VERBS_MATCH_SENTINEL = 0,
	VERBS_MATCH_PCI = 1,
	VERBS_MATCH_MODALIAS = 2,
	VERBS_MATCH_DRIVER_ID = 3,
};

struct verbs_match_ent {
	void *driver_data;
	union {
		const char *modalias;	/* fnmatch() pattern */
		uint64_t driver_id;	/* enum rdma_driver_id value */
	} u;
	uint16_t vendor;		/* PCI kind only */
	uint16_t device;		/* PCI kind only */
	uint8_t kind;
};

#define VERBS_DRIVER_ID(_id) \
	{ .u.driver_id = (_id), .kind = VERBS_MATCH_DRIVER_ID }
#define VERBS_MODALIAS_MATCH(_pattern, _data) \
	{ .driver_data = (void *)(_data), .u.modalias = (_pattern), \
	  .kind = VERBS_MATCH_MODALIAS }

/* Bits of verbs_sysfs_dev.flags (which lazily-read fields are valid). */
enum {
	VSYSFS_READ_MODALIAS = 1 << 0,
	VSYSFS_READ_NODE_GUID = 1 << 1,
};

/* Doubly linked list hook used internally by libibverbs (ccan list_node). */
struct metaroce_abi_list_node {
	void *next;
	void *prev;
};

/*
 * One uverbs device found by libibverbs (netlink or sysfs scan).  Allocated
 * and owned by libibverbs; the provider only reads it.
 */
struct verbs_sysfs_dev {
	struct metaroce_abi_list_node entry;
	void *provider_data;
	/* Entry of the provider's table that matched, or NULL.  Rewritten for
	 * each provider tried, but only when that provider has a table. */
	const struct verbs_match_ent *match;
	unsigned int flags;
	char sysfs_name[IBV_SYSFS_NAME_MAX];	/* "uverbs0" */
	dev_t sysfs_cdev;
	char ibdev_name[IBV_SYSFS_NAME_MAX];	/* "mr0" */
	char ibdev_path[IBV_SYSFS_PATH_MAX];	/* "/sys/class/infiniband/mr0" */
	char modalias[512];
	uint64_t node_guid;
	uint32_t driver_id;	/* RDMA_NLDEV_ATTR_UVERBS_DRIVER_ID, else 0 */
	enum ibv_node_type node_type;
	int ibdev_idx;
	uint32_t num_ports;
	uint32_t abi_ver;	/* the kernel's ib_device_ops.uverbs_abi_ver */
	struct timespec time_created;
};

struct verbs_device;

/* What a provider registers.  Layout is part of IBVERBS_PRIVATE_34. */
struct verbs_device_ops {
	const char *name;

	/* Accepted range of verbs_sysfs_dev.abi_ver. */
	uint32_t match_min_abi_version;
	uint32_t match_max_abi_version;
	const struct verbs_match_ent *match_table;
	const struct verbs_device_ops **static_providers;

	/* Called after the table lookup, whatever its outcome; decides. */
	bool (*match_device)(struct verbs_sysfs_dev *sysfs_dev);

	struct verbs_context *(*alloc_context)(struct ibv_device *device,
					       int cmd_fd, void *private_data);
	struct verbs_context *(*import_context)(struct ibv_device *device,
						int cmd_fd);

	struct verbs_device *(*alloc_device)(struct verbs_sysfs_dev *sysfs_dev);
	void (*uninit_device)(struct verbs_device *device);
};

/* Embedded first in the provider's device object (provider allocates). */
struct verbs_device {
	struct ibv_device device;
	const struct verbs_device_ops *ops;
	atomic_int refcount;
	struct metaroce_abi_list_node entry;
	struct verbs_sysfs_dev *sysfs;
	uint64_t core_support;
};

static inline struct verbs_device *
verbs_get_device(const struct ibv_device *dev)
{
	return container_of(dev, struct verbs_device, device);
}

/* ------------------------------------------------------------------------ */
/* Wrapper objects shared with the core code                                */
/* ------------------------------------------------------------------------ */

struct verbs_xrcd {
	struct ibv_xrcd xrcd;
	uint32_t comp_mask;
	uint32_t handle;
};

struct verbs_srq {
	struct ibv_srq srq;
	enum ibv_srq_type srq_type;
	struct verbs_xrcd *xrcd;
	struct ibv_cq *cq;
	uint32_t srq_num;
};

enum ibv_mr_type {
	IBV_MR_TYPE_MR,
	IBV_MR_TYPE_NULL_MR,
	IBV_MR_TYPE_IMPORTED_MR,
	IBV_MR_TYPE_DMABUF_MR,
};

struct verbs_mr {
	struct ibv_mr ibv_mr;
	enum ibv_mr_type mr_type;
	int access;
};

static inline struct verbs_mr *verbs_get_mr(struct ibv_mr *mr)
{
	return container_of(mr, struct verbs_mr, ibv_mr);
}

enum verbs_qp_mask {
	VERBS_QP_XRCD = 1 << 0,
	VERBS_QP_EX = 1 << 1,
};

struct verbs_qp {
	union {
		struct ibv_qp qp;
		struct ibv_qp_ex qp_ex;
	};
	uint32_t comp_mask;
	struct verbs_xrcd *xrcd;
};

struct verbs_cq {
	union {
		struct ibv_cq cq;
		struct ibv_cq_ex cq_ex;
	};
};

/* cmd_flags of ibv_cmd_create_cq_ex() */
enum create_cq_cmd_flags {
	CREATE_CQ_CMD_FLAGS_TS_IGNORED_EX = 1 << 0,
};

/* Result of ibv_query_gid_type() */
enum ibv_gid_type_sysfs {
	IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
	IBV_GID_TYPE_SYSFS_ROCE_V2,
};

/* ------------------------------------------------------------------------ */
/* The context operation table                                              */
/* ------------------------------------------------------------------------ */

/*
 * verbs_set_ops() reads EVERY member of this structure (copying the non-NULL
 * ones), so the full v44 member list must be declared, in v44 order
 * (alphabetical).  Members left NULL keep libibverbs' EOPNOTSUPP defaults.
 */
struct verbs_context_ops {
	int (*advise_mr)(struct ibv_pd *pd, enum ibv_advise_mr_advice advice,
			 uint32_t flags, struct ibv_sge *sg_list,
			 uint32_t num_sges);
	struct ibv_dm *(*alloc_dm)(struct ibv_context *context,
				   struct ibv_alloc_dm_attr *attr);
	struct ibv_mw *(*alloc_mw)(struct ibv_pd *pd, enum ibv_mw_type type);
	struct ibv_mr *(*alloc_null_mr)(struct ibv_pd *pd);
	struct ibv_pd *(*alloc_parent_domain)(
		struct ibv_context *context,
		struct ibv_parent_domain_init_attr *attr);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *context);
	struct ibv_td *(*alloc_td)(struct ibv_context *context,
				   struct ibv_td_init_attr *init_attr);
	void (*async_event)(struct ibv_context *context,
			    struct ibv_async_event *event);
	int (*attach_counters_point_flow)(struct ibv_counters *counters,
					  struct ibv_counter_attach_attr *attr,
					  struct ibv_flow *flow);
	int (*attach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid,
			    uint16_t lid);
	int (*bind_mw)(struct ibv_qp *qp, struct ibv_mw *mw,
		       struct ibv_mw_bind *mw_bind);
	int (*close_xrcd)(struct ibv_xrcd *xrcd);
	void (*cq_event)(struct ibv_cq *cq);
	struct ibv_ah *(*create_ah)(struct ibv_pd *pd, struct ibv_ah_attr *attr);
	struct ibv_counters *(*create_counters)(
		struct ibv_context *context,
		struct ibv_counters_init_attr *init_attr);
	struct ibv_cq *(*create_cq)(struct ibv_context *context, int cqe,
				    struct ibv_comp_channel *channel,
				    int comp_vector);
	struct ibv_cq_ex *(*create_cq_ex)(struct ibv_context *context,
					  struct ibv_cq_init_attr_ex *init_attr);
	struct ibv_flow *(*create_flow)(struct ibv_qp *qp,
					struct ibv_flow_attr *flow_attr);
	struct ibv_flow_action *(*create_flow_action_esp)(
		struct ibv_context *context,
		struct ibv_flow_action_esp_attr *attr);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd,
				    struct ibv_qp_init_attr *attr);
	struct ibv_qp *(*create_qp_ex)(struct ibv_context *context,
				       struct ibv_qp_init_attr_ex *attr);
	struct ibv_rwq_ind_table *(*create_rwq_ind_table)(
		struct ibv_context *context,
		struct ibv_rwq_ind_table_init_attr *init_attr);
	struct ibv_srq *(*create_srq)(struct ibv_pd *pd,
				      struct ibv_srq_init_attr *attr);
	struct ibv_srq *(*create_srq_ex)(struct ibv_context *context,
					 struct ibv_srq_init_attr_ex *attr);
	struct ibv_wq *(*create_wq)(struct ibv_context *context,
				    struct ibv_wq_init_attr *attr);
	int (*dealloc_mw)(struct ibv_mw *mw);
	int (*dealloc_pd)(struct ibv_pd *pd);
	int (*dealloc_td)(struct ibv_td *td);
	int (*dereg_mr)(struct verbs_mr *vmr);
	int (*destroy_ah)(struct ibv_ah *ah);
	int (*destroy_counters)(struct ibv_counters *counters);
	int (*destroy_cq)(struct ibv_cq *cq);
	int (*destroy_flow)(struct ibv_flow *flow);
	int (*destroy_flow_action)(struct ibv_flow_action *action);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*destroy_rwq_ind_table)(struct ibv_rwq_ind_table *table);
	int (*destroy_srq)(struct ibv_srq *srq);
	int (*destroy_wq)(struct ibv_wq *wq);
	int (*detach_mcast)(struct ibv_qp *qp, const union ibv_gid *gid,
			    uint16_t lid);
	void (*free_context)(struct ibv_context *context);
	int (*free_dm)(struct ibv_dm *dm);
	int (*get_srq_num)(struct ibv_srq *srq, uint32_t *srq_num);
	struct ibv_dm *(*import_dm)(struct ibv_context *context,
				    uint32_t dm_handle);
	struct ibv_mr *(*import_mr)(struct ibv_pd *pd, uint32_t mr_handle);
	struct ibv_pd *(*import_pd)(struct ibv_context *context,
				    uint32_t pd_handle);
	int (*modify_cq)(struct ibv_cq *cq, struct ibv_modify_cq_attr *attr);
	int (*modify_flow_action_esp)(struct ibv_flow_action *action,
				      struct ibv_flow_action_esp_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask);
	int (*modify_qp_rate_limit)(struct ibv_qp *qp,
				    struct ibv_qp_rate_limit_attr *attr);
	int (*modify_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			  int attr_mask);
	int (*modify_wq)(struct ibv_wq *wq, struct ibv_wq_attr *attr);
	struct ibv_qp *(*open_qp)(struct ibv_context *context,
				  struct ibv_qp_open_attr *attr);
	struct ibv_xrcd *(*open_xrcd)(struct ibv_context *context,
				      struct ibv_xrcd_init_attr *attr);
	int (*poll_cq)(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
	int (*post_recv)(struct ibv_qp *qp, struct ibv_recv_wr *wr,
			 struct ibv_recv_wr **bad_wr);
	int (*post_send)(struct ibv_qp *qp, struct ibv_send_wr *wr,
			 struct ibv_send_wr **bad_wr);
	int (*post_srq_ops)(struct ibv_srq *srq, struct ibv_ops_wr *op,
			    struct ibv_ops_wr **bad_op);
	int (*post_srq_recv)(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			     struct ibv_recv_wr **bad_wr);
	int (*query_device_ex)(struct ibv_context *context,
			       const struct ibv_query_device_ex_input *input,
			       struct ibv_device_attr_ex *attr,
			       size_t attr_size);
	int (*query_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	int (*query_port)(struct ibv_context *context, uint8_t port_num,
			  struct ibv_port_attr *port_attr);
	int (*query_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			int attr_mask, struct ibv_qp_init_attr *init_attr);
	int (*query_qp_data_in_order)(struct ibv_qp *qp, enum ibv_wr_opcode op,
				      uint32_t flags);
	int (*query_rt_values)(struct ibv_context *context,
			       struct ibv_values_ex *values);
	int (*query_srq)(struct ibv_srq *srq, struct ibv_srq_attr *attr);
	int (*read_counters)(struct ibv_counters *counters,
			     uint64_t *counters_value, uint32_t ncounters,
			     uint32_t flags);
	struct ibv_mr *(*reg_dm_mr)(struct ibv_pd *pd, struct ibv_dm *dm,
				    uint64_t dm_offset, size_t length,
				    unsigned int access);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset,
					size_t length, uint64_t iova, int fd,
					int access);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t length,
				 uint64_t hca_va, int access);
	int (*req_notify_cq)(struct ibv_cq *cq, int solicited_only);
	int (*rereg_mr)(struct verbs_mr *vmr, int flags, struct ibv_pd *pd,
			void *addr, size_t length, int access);
	int (*resize_cq)(struct ibv_cq *cq, int cqe);
	int (*set_ece)(struct ibv_qp *qp, struct ibv_ece *ece);
	void (*unimport_dm)(struct ibv_dm *dm);
	void (*unimport_mr)(struct ibv_mr *mr);
	void (*unimport_pd)(struct ibv_pd *pd);
};

#define METAROCE_ABI_NUM_CONTEXT_OPS 76

/* ------------------------------------------------------------------------ */
/* Registration, context set-up, logging                                    */
/* ------------------------------------------------------------------------ */

/* The PABI number is part of the symbol name as well as its version. */
void verbs_register_driver_34(const struct verbs_device_ops *ops);
#define verbs_register_driver verbs_register_driver_34

/*
 * Shared-object providers register from a constructor run by dlopen().
 * (rdma-core's version also emits an alias for static linking, which an
 * out-of-tree plugin does not need.)
 */
#define PROVIDER_DRIVER(_provider, _ops)                                       \
	static void __attribute__((constructor))                               \
	_provider##_register_provider(void)                                    \
	{                                                                      \
		verbs_register_driver(&(_ops));                                \
	}

/*
 * Allocates alloc_size zeroed bytes, initialises the verbs_context found
 * context_offset bytes into them, and takes ownership of cmd_fd (closed on
 * failure).  driver_id is put into every ioctl header and must equal the
 * kernel device's ib_device_ops.driver_id.
 */
void *_verbs_init_and_alloc_context(struct ibv_device *device, int cmd_fd,
				    size_t alloc_size,
				    struct verbs_context *context_offset,
				    uint32_t driver_id);

#define verbs_init_and_alloc_context(_ibdev, _cmd_fd, _drv_ctx, _member,       \
				     _driver_id)                               \
	((__typeof__(_drv_ctx))_verbs_init_and_alloc_context(                  \
		(_ibdev), (_cmd_fd), sizeof(*(_drv_ctx)),                      \
		(struct verbs_context *)(uintptr_t)offsetof(                   \
			__typeof__(*(_drv_ctx)), _member),                     \
		(_driver_id)))

/* Releases what _verbs_init_and_alloc_context set up (not the memory). */
void verbs_uninit_context(struct verbs_context *context);
/* Installs the non-NULL members of ops on the context. */
void verbs_set_ops(struct verbs_context *vctx,
		   const struct verbs_context_ops *ops);
void verbs_init_cq(struct ibv_cq *cq, struct ibv_context *context,
		   struct ibv_comp_channel *channel, void *cq_context);

enum {
	VERBS_LOG_LEVEL_NONE,
	VERBS_LOG_ERR,
	VERBS_LOG_WARN,
	VERBS_LOG_INFO,
	VERBS_LOG_DEBUG,
};

/* Printed only when VERBS_LOG_LEVEL >= level (to VERBS_LOG_FILE). */
void __verbs_log(struct verbs_context *ctx, uint32_t level,
		 const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#define verbs_log(_ctx, _level, _fmt, ...)                                     \
	do {                                                                   \
		int _saved_errno = errno;                                      \
		__verbs_log((_ctx), (_level), "%s: %s:%d: " _fmt,              \
			    (_ctx)->context.device->name, __func__, __LINE__,  \
			    ##__VA_ARGS__);                                    \
		errno = _saved_errno;                                          \
	} while (0)
#define verbs_err(_ctx, _fmt, ...) \
	verbs_log(_ctx, VERBS_LOG_ERR, _fmt, ##__VA_ARGS__)
#define verbs_warn(_ctx, _fmt, ...) \
	verbs_log(_ctx, VERBS_LOG_WARN, _fmt, ##__VA_ARGS__)
#define verbs_info(_ctx, _fmt, ...) \
	verbs_log(_ctx, VERBS_LOG_INFO, _fmt, ##__VA_ARGS__)
#define verbs_debug(_ctx, _fmt, ...) \
	verbs_log(_ctx, VERBS_LOG_DEBUG, _fmt, ##__VA_ARGS__)

/* Reads <ibdev_path>/<printf(fnfmt)>; strips the trailing newline.
 * Returns the length read, or -1. */
int ibv_read_ibdev_sysfs_file(char *buf, size_t size,
			      struct verbs_sysfs_dev *sysfs_dev,
			      const char *fnfmt, ...)
	__attribute__((format(printf, 4, 5)));
int ibv_query_gid_type(struct ibv_context *context, uint8_t port_num,
		       unsigned int index, enum ibv_gid_type_sysfs *type);

/* ------------------------------------------------------------------------ */
/* write() command buffers                                                  */
/* ------------------------------------------------------------------------ */

/*
 * A legacy command buffer is the uverbs header immediately followed by the
 * kernel's core request struct; driver-private request data (udata) follows
 * the core struct with no gap.  Responses are the kernel's core response
 * struct followed by driver-private response data.  The ibv_cmd_*() helpers
 * take (cmd, total cmd size) and (resp, total resp size) and treat the bytes
 * past the core structs as udata.
 */
struct ex_hdr {
	struct ib_uverbs_cmd_hdr hdr;
	struct ib_uverbs_ex_cmd_hdr ex_hdr;
};

#define METAROCE_ABI_WRITE_CMD(_name, _core)                                   \
	struct _name {                                                         \
		struct ib_uverbs_cmd_hdr hdr;                                  \
		struct _core core_payload;                                     \
	};                                                                     \
	_Static_assert(sizeof(struct _name) ==                                 \
			       sizeof(struct ib_uverbs_cmd_hdr) +              \
				       sizeof(struct _core),                   \
		       "padding in " #_name)

#define METAROCE_ABI_WRITE_CMD_EX(_name, _core)                                \
	struct _name {                                                         \
		struct ex_hdr hdr;                                             \
		struct _core core_payload;                                     \
	};                                                                     \
	_Static_assert(sizeof(struct _name) ==                                 \
			       sizeof(struct ex_hdr) + sizeof(struct _core),   \
		       "padding in " #_name)

METAROCE_ABI_WRITE_CMD(ibv_get_context, ib_uverbs_get_context);
METAROCE_ABI_WRITE_CMD(ibv_query_device, ib_uverbs_query_device);
METAROCE_ABI_WRITE_CMD(ibv_query_port, ib_uverbs_query_port);
METAROCE_ABI_WRITE_CMD(ibv_alloc_pd, ib_uverbs_alloc_pd);
METAROCE_ABI_WRITE_CMD(ibv_reg_mr, ib_uverbs_reg_mr);
METAROCE_ABI_WRITE_CMD(ibv_rereg_mr, ib_uverbs_rereg_mr);
METAROCE_ABI_WRITE_CMD(ibv_alloc_mw, ib_uverbs_alloc_mw);
METAROCE_ABI_WRITE_CMD(ibv_create_cq, ib_uverbs_create_cq);
METAROCE_ABI_WRITE_CMD(ibv_resize_cq, ib_uverbs_resize_cq);
METAROCE_ABI_WRITE_CMD(ibv_create_qp, ib_uverbs_create_qp);
METAROCE_ABI_WRITE_CMD(ibv_query_qp, ib_uverbs_query_qp);
METAROCE_ABI_WRITE_CMD(ibv_modify_qp, ib_uverbs_modify_qp);
METAROCE_ABI_WRITE_CMD(ibv_create_srq, ib_uverbs_create_srq);
METAROCE_ABI_WRITE_CMD(ibv_create_xsrq, ib_uverbs_create_xsrq);
METAROCE_ABI_WRITE_CMD(ibv_modify_srq, ib_uverbs_modify_srq);
METAROCE_ABI_WRITE_CMD(ibv_query_srq, ib_uverbs_query_srq);
METAROCE_ABI_WRITE_CMD_EX(ibv_query_device_ex, ib_uverbs_ex_query_device);
METAROCE_ABI_WRITE_CMD_EX(ibv_create_cq_ex, ib_uverbs_ex_create_cq);
METAROCE_ABI_WRITE_CMD_EX(ibv_create_qp_ex, ib_uverbs_ex_create_qp);
METAROCE_ABI_WRITE_CMD_EX(ibv_modify_qp_ex, ib_uverbs_ex_modify_qp);

/* ------------------------------------------------------------------------ */
/* Command helpers (all return 0 or a positive errno; none sets errno)      */
/* ------------------------------------------------------------------------ */

int ibv_cmd_get_context(struct verbs_context *context,
			struct ibv_get_context *cmd, size_t cmd_size,
			struct ib_uverbs_get_context_resp *resp,
			size_t resp_size);
int ibv_cmd_query_device_any(struct ibv_context *context,
			     const struct ibv_query_device_ex_input *input,
			     struct ibv_device_attr_ex *attr, size_t attr_size,
			     struct ib_uverbs_ex_query_device_resp *resp,
			     size_t *resp_size);
int ibv_cmd_query_port(struct ibv_context *context, uint8_t port_num,
		       struct ibv_port_attr *port_attr,
		       struct ibv_query_port *cmd, size_t cmd_size);

int ibv_cmd_alloc_pd(struct ibv_context *context, struct ibv_pd *pd,
		     struct ibv_alloc_pd *cmd, size_t cmd_size,
		     struct ib_uverbs_alloc_pd_resp *resp, size_t resp_size);
int ibv_cmd_dealloc_pd(struct ibv_pd *pd);

int ibv_cmd_reg_mr(struct ibv_pd *pd, void *addr, size_t length,
		   uint64_t hca_va, int access, struct verbs_mr *vmr,
		   struct ibv_reg_mr *cmd, size_t cmd_size,
		   struct ib_uverbs_reg_mr_resp *resp, size_t resp_size);
int ibv_cmd_rereg_mr(struct verbs_mr *vmr, uint32_t flags, void *addr,
		     size_t length, uint64_t hca_va, int access,
		     struct ibv_pd *pd, struct ibv_rereg_mr *cmd,
		     size_t cmd_size, struct ib_uverbs_rereg_mr_resp *resp,
		     size_t resp_size);
int ibv_cmd_dereg_mr(struct verbs_mr *vmr);
int ibv_cmd_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type,
		     struct ibv_mw *mw, struct ibv_alloc_mw *cmd,
		     size_t cmd_size, struct ib_uverbs_alloc_mw_resp *resp,
		     size_t resp_size);
int ibv_cmd_dealloc_mw(struct ibv_mw *mw);

int ibv_cmd_create_cq(struct ibv_context *context, int cqe,
		      struct ibv_comp_channel *channel, int comp_vector,
		      struct ibv_cq *cq, struct ibv_create_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_create_cq_resp *resp,
		      size_t resp_size);
int ibv_cmd_create_cq_ex(struct ibv_context *context,
			 const struct ibv_cq_init_attr_ex *cq_attr,
			 struct verbs_cq *cq, struct ibv_create_cq_ex *cmd,
			 size_t cmd_size,
			 struct ib_uverbs_ex_create_cq_resp *resp,
			 size_t resp_size, uint32_t cmd_flags);
int ibv_cmd_resize_cq(struct ibv_cq *cq, int cqe, struct ibv_resize_cq *cmd,
		      size_t cmd_size, struct ib_uverbs_resize_cq_resp *resp,
		      size_t resp_size);
int ibv_cmd_req_notify_cq(struct ibv_cq *cq, int solicited_only);
int ibv_cmd_poll_cq(struct ibv_cq *cq, int ne, struct ibv_wc *wc);
int ibv_cmd_destroy_cq(struct ibv_cq *cq);

int ibv_cmd_create_qp(struct ibv_pd *pd, struct ibv_qp *qp,
		      struct ibv_qp_init_attr *attr, struct ibv_create_qp *cmd,
		      size_t cmd_size, struct ib_uverbs_create_qp_resp *resp,
		      size_t resp_size);
int ibv_cmd_create_qp_ex(struct ibv_context *context, struct verbs_qp *qp,
			 struct ibv_qp_init_attr_ex *attr_ex,
			 struct ibv_create_qp *cmd, size_t cmd_size,
			 struct ib_uverbs_create_qp_resp *resp,
			 size_t resp_size);
int ibv_cmd_create_qp_ex2(struct ibv_context *context, struct verbs_qp *qp,
			  struct ibv_qp_init_attr_ex *attr_ex,
			  struct ibv_create_qp_ex *cmd, size_t cmd_size,
			  struct ib_uverbs_ex_create_qp_resp *resp,
			  size_t resp_size);
int ibv_cmd_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *qp_attr,
		     int attr_mask, struct ibv_qp_init_attr *qp_init_attr,
		     struct ibv_query_qp *cmd, size_t cmd_size);
int ibv_cmd_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
		      int attr_mask, struct ibv_modify_qp *cmd,
		      size_t cmd_size);
int ibv_cmd_modify_qp_ex(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			 int attr_mask, struct ibv_modify_qp_ex *cmd,
			 size_t cmd_size,
			 struct ib_uverbs_ex_modify_qp_resp *resp,
			 size_t resp_size);
int ibv_cmd_destroy_qp(struct ibv_qp *qp);
int ibv_cmd_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
		      struct ibv_send_wr **bad_wr);
int ibv_cmd_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr,
		      struct ibv_recv_wr **bad_wr);

int ibv_cmd_create_srq(struct ibv_pd *pd, struct ibv_srq *srq,
		       struct ibv_srq_init_attr *attr,
		       struct ibv_create_srq *cmd, size_t cmd_size,
		       struct ib_uverbs_create_srq_resp *resp,
		       size_t resp_size);
int ibv_cmd_create_srq_ex(struct ibv_context *context, struct verbs_srq *srq,
			  struct ibv_srq_init_attr_ex *attr_ex,
			  struct ibv_create_xsrq *cmd, size_t cmd_size,
			  struct ib_uverbs_create_srq_resp *resp,
			  size_t resp_size);
int ibv_cmd_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		       int srq_attr_mask, struct ibv_modify_srq *cmd,
		       size_t cmd_size);
int ibv_cmd_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *srq_attr,
		      struct ibv_query_srq *cmd, size_t cmd_size);
int ibv_cmd_destroy_srq(struct ibv_srq *srq);
int ibv_cmd_post_srq_recv(struct ibv_srq *srq, struct ibv_recv_wr *wr,
			  struct ibv_recv_wr **bad_wr);

int ibv_cmd_create_ah(struct ibv_pd *pd, struct ibv_ah *ah,
		      struct ibv_ah_attr *attr,
		      struct ib_uverbs_create_ah_resp *resp, size_t resp_size);
int ibv_cmd_destroy_ah(struct ibv_ah *ah);
int ibv_cmd_attach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			 uint16_t lid);
int ibv_cmd_detach_mcast(struct ibv_qp *qp, const union ibv_gid *gid,
			 uint16_t lid);

/* ------------------------------------------------------------------------ */
/* Layout checks                                                            */
/* ------------------------------------------------------------------------ */

_Static_assert(offsetof(struct verbs_device, device) == 0,
	       "ibv_device must start verbs_device");
_Static_assert(sizeof(struct verbs_context_ops) ==
		       METAROCE_ABI_NUM_CONTEXT_OPS * sizeof(void (*)(void)),
	       "verbs_context_ops must hold exactly the v44 member list");
_Static_assert(offsetof(struct verbs_context_ops, alloc_pd) ==
		       5 * sizeof(void (*)(void)), "ops order");
_Static_assert(offsetof(struct verbs_context_ops, free_context) ==
		       39 * sizeof(void (*)(void)), "ops order");
_Static_assert(offsetof(struct verbs_context_ops, query_device_ex) ==
		       58 * sizeof(void (*)(void)), "ops order");
_Static_assert(offsetof(struct verbs_context_ops, query_port) ==
		       60 * sizeof(void (*)(void)), "ops order");
_Static_assert(offsetof(struct verbs_context_ops, unimport_pd) ==
		       75 * sizeof(void (*)(void)), "ops order");
_Static_assert(offsetof(struct verbs_qp, qp) == 0 &&
		       offsetof(struct ibv_qp_ex, qp_base) == 0,
	       "verbs_qp layout");
_Static_assert(offsetof(struct verbs_mr, ibv_mr) == 0, "verbs_mr layout");

/* Kernel ABI sizes are architecture independent. */
_Static_assert(sizeof(struct ibv_get_context) == 16, "cmd size");
_Static_assert(sizeof(struct ibv_query_port) == 24, "cmd size");
_Static_assert(sizeof(struct ibv_alloc_pd) == 16, "cmd size");
_Static_assert(sizeof(struct ex_hdr) == 24, "ex_hdr size");

#if defined(__x86_64__) || defined(__aarch64__)
/* LP64 Linux layouts, verified against rdma-core v44 driver.h. */
_Static_assert(sizeof(struct verbs_match_ent) == 24, "match_ent size");
_Static_assert(offsetof(struct verbs_sysfs_dev, match) == 24, "sysfs_dev");
_Static_assert(offsetof(struct verbs_sysfs_dev, sysfs_name) == 36,
	       "sysfs_dev");
_Static_assert(offsetof(struct verbs_sysfs_dev, ibdev_name) == 112,
	       "sysfs_dev");
_Static_assert(offsetof(struct verbs_sysfs_dev, ibdev_path) == 176,
	       "sysfs_dev");
_Static_assert(offsetof(struct verbs_sysfs_dev, driver_id) == 952,
	       "sysfs_dev");
_Static_assert(offsetof(struct verbs_sysfs_dev, abi_ver) == 968,
	       "sysfs_dev");
_Static_assert(sizeof(struct verbs_sysfs_dev) == 992, "sysfs_dev size");
_Static_assert(sizeof(struct verbs_device_ops) == 72, "device_ops size");
_Static_assert(offsetof(struct verbs_device, ops) == sizeof(struct ibv_device),
	       "verbs_device");
_Static_assert(sizeof(struct verbs_device) == sizeof(struct ibv_device) + 48,
	       "verbs_device size");
#endif

#endif /* METAROCE_VERBS_ABI_H */
