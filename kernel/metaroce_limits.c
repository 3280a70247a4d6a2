// SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
/*
 * Per-device object limits: the maxima ib_query_device() advertises are
 * the ones creation enforces. Each object type has an atomic count on the
 * device; creating one past the limit fails with -ENOMEM, the errno the
 * verbs man pages give for "not enough resources". The limits can be
 * lowered, for the devices added afterwards, through module parameters.
 *
 * Memory is bounded separately: what a user's objects allocate is charged
 * to the memory cgroup of the process that creates them.
 */
#include <linux/moduleparam.h>

#include "metaroce_loc.h"

static unsigned int max_qp = METAROCE_MAX_QP;
module_param(max_qp, uint, 0644);
MODULE_PARM_DESC(max_qp, "QPs per device (for devices added later)");

static unsigned int max_cq = METAROCE_MAX_CQ;
module_param(max_cq, uint, 0644);
MODULE_PARM_DESC(max_cq, "CQs per device (for devices added later)");

static unsigned int max_mr = METAROCE_MAX_MR;
module_param(max_mr, uint, 0644);
MODULE_PARM_DESC(max_mr, "MRs per device (for devices added later)");

static unsigned int max_mw = METAROCE_MAX_MW;
module_param(max_mw, uint, 0644);
MODULE_PARM_DESC(max_mw, "memory windows per device (for devices added later)");

static unsigned int max_pd = METAROCE_MAX_PD;
module_param(max_pd, uint, 0644);
MODULE_PARM_DESC(max_pd, "PDs per device (for devices added later)");

static unsigned int max_ah = METAROCE_MAX_AH;
module_param(max_ah, uint, 0644);
MODULE_PARM_DESC(max_ah, "AHs per device (for devices added later)");

static unsigned int max_srq = METAROCE_MAX_SRQ;
module_param(max_srq, uint, 0644);
MODULE_PARM_DESC(max_srq, "SRQs per device (for devices added later)");

/* A parameter's value, never above what the device can index. */
static u32 limit_of(const unsigned int *param, u32 ceiling)
{
	return min_t(u32, READ_ONCE(*param), ceiling);
}

/* Fills the object limits of the device's attributes. */
void metaroce_limits_init(struct metaroce_dev *mdev)
{
	struct ib_device_attr *attr = &mdev->attr;

	attr->max_qp = limit_of(&max_qp, METAROCE_MAX_QP);
	attr->max_cq = limit_of(&max_cq, METAROCE_MAX_CQ);
	attr->max_mr = limit_of(&max_mr, METAROCE_MAX_MR);
	attr->max_mw = limit_of(&max_mw, METAROCE_MAX_MW);
	attr->max_pd = limit_of(&max_pd, METAROCE_MAX_PD);
	attr->max_ah = limit_of(&max_ah, METAROCE_MAX_AH);
	attr->max_srq = limit_of(&max_srq, METAROCE_MAX_SRQ);
	attr->max_res_rd_atom = METAROCE_MAX_RD_ATOMIC * attr->max_qp;

	mdev->obj_limit[METAROCE_OBJ_QP] = attr->max_qp;
	mdev->obj_limit[METAROCE_OBJ_CQ] = attr->max_cq;
	mdev->obj_limit[METAROCE_OBJ_MR] = attr->max_mr;
	mdev->obj_limit[METAROCE_OBJ_MW] = attr->max_mw;
	mdev->obj_limit[METAROCE_OBJ_PD] = attr->max_pd;
	mdev->obj_limit[METAROCE_OBJ_AH] = attr->max_ah;
	mdev->obj_limit[METAROCE_OBJ_SRQ] = attr->max_srq;
}

/*
 * Counts one more object of @type on @mdev. Returns 0, or -ENOMEM when the
 * device already holds its limit. Callable from any context.
 */
int metaroce_obj_charge(struct metaroce_dev *mdev, enum metaroce_obj type)
{
	if (atomic_inc_return(&mdev->obj_count[type]) >
	    mdev->obj_limit[type]) {
		atomic_dec(&mdev->obj_count[type]);
		metaroce_count(mdev, OBJ_LIMIT);
		return -ENOMEM;
	}
	return 0;
}

void metaroce_obj_uncharge(struct metaroce_dev *mdev, enum metaroce_obj type)
{
	WARN_ON_ONCE(atomic_dec_return(&mdev->obj_count[type]) < 0);
}
