/* SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause */
/*
 * The transport core (docs/protocol-v2.md) is context-free C: the same
 * files build into metaroce.ko and into the host library its tests link.
 * This header gives both the kernel's fixed-width types.
 */
#ifndef MRC_TYPES_H
#define MRC_TYPES_H

#ifdef __KERNEL__
#include <linux/types.h>
#include <linux/string.h>
#else
#include <linux/types.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef __u8 u8;
typedef __u16 u16;
typedef __u32 u32;
typedef __u64 u64;
typedef __s8 s8;
typedef __s32 s32;
#endif

/* Serial-number arithmetic on 32-bit path sequences: a - b as signed. */
static inline s32 mrc_seq_diff(u32 a, u32 b)
{
	return (s32)(a - b);
}

#endif /* MRC_TYPES_H */
