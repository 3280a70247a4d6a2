/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * Selects where the libibverbs provider interface comes from.
 *
 *  - Inside an rdma-core tree (providers/metaroce): the real
 *    <infiniband/driver.h>, which matches whatever libibverbs is being built.
 *  - Standalone build against an installed libibverbs (our CMake sets
 *    METAROCE_STANDALONE_ABI): verbs_abi.h, our declaration of the v44
 *    IBVERBS_PRIVATE_34 interface.
 *
 * Provider sources include only this header (via metaroce.h), never
 * verbs_abi.h or driver.h directly, so the same .c files build both ways.
 */
#ifndef METAROCE_DRIVER_COMPAT_H
#define METAROCE_DRIVER_COMPAT_H

#ifdef METAROCE_STANDALONE_ABI
#include "verbs_abi.h"
#else
#include <infiniband/driver.h>
#endif

#include <rdma/metaroce_abi.h>

/*
 * Command and response wrappers carrying MetaRoCE udata.  The driver struct
 * must start exactly where the kernel's core struct ends: uverbs hands the
 * bytes past the core struct to the kernel driver as udata, and implicit
 * padding here would shift them.  Use the ibv_cmd / ibv_resp / drv_payload
 * member names that rdma-core providers use.
 */
#define METAROCE_DRV_CMD(_name, _core_cmd, _drv_cmd)                           \
	struct _name {                                                         \
		struct _core_cmd ibv_cmd;                                      \
		struct _drv_cmd drv_payload;                                   \
	};                                                                     \
	_Static_assert(sizeof(struct _name) ==                                 \
			       sizeof(struct _core_cmd) +                      \
				       sizeof(struct _drv_cmd),                \
		       "implicit padding in " #_name)

#define METAROCE_DRV_RESP(_name, _core_resp, _drv_resp)                        \
	struct _name {                                                         \
		struct _core_resp ibv_resp;                                    \
		struct _drv_resp drv_payload;                                  \
	};                                                                     \
	_Static_assert(sizeof(struct _name) ==                                 \
			       sizeof(struct _core_resp) +                     \
				       sizeof(struct _drv_resp),               \
		       "implicit padding in " #_name)

#endif /* METAROCE_DRIVER_COMPAT_H */
