#!/bin/bash
# Resource exhaustion by an unprivileged user: metaroce-limits (userspace/
# tools/metaroce-limits) runs as nobody, inside a cgroup v2 with memory.max,
# and creates QPs, CQs and MRs at the largest attributes until creation
# fails. Creation must fail with an errno (not an OOM kill, not a host out
# of memory); the memory must have been charged to the cgroup; once the
# program is gone (destroying what it made, or just exiting) the device's
# objects (rdma resource show) and MemAvailable are back where they were.
# Then the advertised limits: with max_qp etc. lowered through the module
# parameters, creating max_X + 1 objects fails at exactly max_X, and PDs
# and AHs also at the default maxima. One VM.
#
# Environment: METAROCE_LIMITS (the program; default: next to the provider
# RDMAV_DRIVERS names, else build/userspace/tools/metaroce-limits),
# METAROCE_LIMITS_MEM (memory.max of the cgroup, default 64M).
source "$(dirname "$0")/lib.sh"

TOP=$(cd "$METAROCE_SELFTESTS/../.." && pwd)
if [[ -n ${METAROCE_LIMITS:-} ]]; then
	BIN=$METAROCE_LIMITS
elif [[ -n ${RDMAV_DRIVERS:-} && -d $(dirname "$RDMAV_DRIVERS") ]]; then
	BIN=$(dirname "$RDMAV_DRIVERS")/../tools/metaroce-limits/metaroce-limits
else
	BIN=$TOP/build/userspace/tools/metaroce-limits/metaroce-limits
fi
MEM=${METAROCE_LIMITS_MEM:-64M}
CG=/sys/fs/cgroup/metaroce-limits
OUT=/tmp/metaroce-limits.out
# The lowered limits of the second device, mr1.
SMALL=48
# Objects the kernel keeps on a device of its own (the GSI QP and its CQ
# and PD): the baseline the counts come back to. rdma resource show counts
# no AHs.
declare -A BASE
COUNTED="pd cq qp mr ctx"

setup() {
	[[ -x $BIN ]] || { echo "no $BIN (build with make)"; return 1; }
	metaroce_load
	ip link add veth0 type veth peer name veth1
	ip link set veth0 up
	ip link set veth1 up
	ip addr add 10.9.0.1/24 dev veth0
	ip addr add 10.9.1.1/24 dev veth1
	rdma link add mr0 type metaroce netdev veth0
	wait_until 10 eval 'gids mr0 | grep -q ffff:0a09:0001'
	# The provider opens /dev/infiniband/uverbs* (ib_uverbs makes them
	# 0666) and reads sysfs: nothing more for an unprivileged user.
	ls -l /dev/infiniband/
	rdma system show
	echo "RLIMIT_MEMLOCK: $(ulimit -l) kB"
	echo +memory >/sys/fs/cgroup/cgroup.subtree_control
	mkdir -p "$CG"
	echo "$MEM" >"$CG/memory.max"
	[[ ! -e $CG/memory.swap.max ]] || echo 0 >"$CG/memory.swap.max"
	echo "cgroup $CG: memory.max $(cat "$CG/memory.max")"
	local k
	: >/tmp/metaroce-limits.base
	for k in $COUNTED; do
		echo "BASE[$k]=$(res_count mr0 "$k")" >>/tmp/metaroce-limits.base
	done
	cat /tmp/metaroce-limits.base
}

# res_count DEV KIND: the device's objects of KIND (rdma resource show).
res_count() {
	rdma resource show "$1" | sed -n "s/.* $2 \([0-9]*\).*/\1/p"
}

load_base() {
	# shellcheck disable=SC1091
	source /tmp/metaroce-limits.base
}

MEM_SLACK_KB=$((32 << 10))

mem_available_kb() {
	sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo
}

oom_kills() {
	sed -n 's/^oom_kill \([0-9]*\)/\1/p' /proc/vmstat
}

cg_oom_kills() {
	sed -n 's/^oom_kill \([0-9]*\)/\1/p' "$CG/memory.events"
}

# as_user [--cgroup] CMD...: CMD as nobody (optionally in the cgroup).
as_user() {
	local cg=
	if [[ $1 == --cgroup ]]; then
		cg=$CG
		shift
	fi
	bash -c '[[ -z $1 ]] || echo $$ >"$1/cgroup.procs"; shift
		exec setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"' \
		_ "$cg" "$@"
}

# field NAME: NAME=VALUE from the program's output line.
field() {
	sed -n "s/.* $1=\([0-9]*\).*/\1/p" "$OUT" | head -1
}

# counts_back KIND...: every device object count back at its baseline.
counts_back() {
	local k n
	for k in "$@"; do
		n=$(res_count mr0 "$k")
		[[ $n == "${BASE[$k]}" ]] || return 1
	done
}

test_unprivileged() {
	load_base
	as_user "$BIN" -d mr0 -k pd -n 1 | tee "$OUT"
	[[ $(field created) == 1 ]]
}

# exhaust KIND CAP EST_MIB ARGS...: KIND at the largest attributes in the
# cgroup, held while the memory is measured, then left for the kernel to
# clean up (-l) or destroyed. EST_MIB: the kernel memory one object takes.
exhaust() {
	local kind=$1 cap=$2 est=$3 avail0 avail1 avail2 ooms0 ooms cgooms0
	local cur peak created err pid fifo=/tmp/metaroce-limits.fifo
	shift 3
	load_base
	avail0=$(mem_available_kb)
	ooms0=$(oom_kills)
	cgooms0=$(cg_oom_kills)
	rm -f "$fifo"
	mkfifo "$fifo"
	as_user --cgroup "$BIN" -d mr0 -k "$kind" -a max -n "$cap" -H "$@" \
		<"$fifo" >"$OUT" &
	pid=$!
	exec 9>"$fifo"
	if ! wait_until 300 grep -q holding "$OUT"; then
		exec 9>&-
		wait "$pid" || true
		cat "$OUT"
		echo "the program did not get to hold (killed?)"
		return 1
	fi
	cat "$OUT"
	cur=$(cat "$CG/memory.current")
	avail1=$(mem_available_kb)
	echo "holding: $(res_count mr0 "$kind") ${kind}s on mr0," \
	     "cgroup memory.current $((cur >> 20)) MiB (max $MEM)," \
	     "MemAvailable down $(((avail0 - avail1) >> 10)) MiB"
	exec 9>&-
	wait "$pid"
	created=$(field created)
	err=$(field errno)
	peak=$(cat "$CG/memory.peak" 2>/dev/null || echo 0)
	wait_until 30 counts_back $COUNTED || true
	wait_until 30 eval '(( $(mem_available_kb) > avail0 - MEM_SLACK_KB ))' || true
	avail2=$(mem_available_kb)
	ooms=$(($(oom_kills) - ooms0))
	echo "created $created ${kind}s of ~$est MiB each (cap $cap), errno $err;" \
	     "cgroup peak $((peak >> 20)) MiB; MemAvailable $((avail0 >> 10)) ->" \
	     "$((avail1 >> 10)) -> $((avail2 >> 10)) MiB; OOM kills: $ooms," \
	     "$(($(cg_oom_kills) - cgooms0)) of them in the cgroup"
	rdma resource show mr0
	# No OOM kill anywhere, in the cgroup or out of it.
	((ooms == 0))
	# Creation failed, and with ENOMEM (12), before the cap.
	((created < cap)) && ((err == 12))
	# What was made fits the cgroup: it was charged there.
	((created * est <= 2 * (${MEM%M} + est)))
	counts_back $COUNTED
	# The memory came back, within MEM_SLACK_KB: MemAvailable also moves
	# with the page cache and deferred frees (17 MiB short once, on a loaded
	# host, with every object gone). Leaked objects show in counts_back.
	((avail2 > avail0 - MEM_SLACK_KB))
}

test_qps_in_cgroup() {
	# Two 8 MiB rings and ~15 MiB of state each.
	exhaust qp 8 31 -l
}

test_cqs_in_cgroup() {
	exhaust cq 16 16
}

test_mrs_in_cgroup() {
	# 1 MiB each: RLIMIT_MEMLOCK (or the cgroup) stops it.
	exhaust mr 1024 1 -s 1048576 -l
}

# limit_holds DEV KIND [CAP]: as nobody, KIND on DEV until failure: it
# fails with ENOMEM once the device holds exactly its advertised maximum.
limit_holds() {
	local dev=$1 kind=$2 cap=${3:-} fifo=/tmp/metaroce-limits.fifo pid
	local held limit kernel_pds
	kernel_pds=$(res_count "$dev" pd)
	rm -f "$fifo"
	mkfifo "$fifo"
	as_user "$BIN" -d "$dev" -k "$kind" -a min ${cap:+-n "$cap"} -H -l \
		<"$fifo" >"$OUT" &
	pid=$!
	exec 9>"$fifo"
	wait_until 600 grep -q holding "$OUT" || { exec 9>&-; cat "$OUT"; return 1; }
	# AHs are not in rdma resource show; the kernel has none of its own.
	# Each kernel PD has an internal DMA MR (the device has no local DMA
	# lkey) that the driver counts and rdma resource show does not.
	if [[ $kind == ah ]]; then
		held=$(field created)
	elif [[ $kind == mr ]]; then
		held=$(($(res_count "$dev" mr) + kernel_pds))
	else
		held=$(res_count "$dev" "$kind")
	fi
	exec 9>&-
	wait "$pid"
	cat "$OUT"
	limit=$(field limit)
	echo "$dev holds $held ${kind}s (limit $limit)"
	[[ $(field errno) == 12 ]] && ((held == limit))
}

# mr1 on veth1 with every limit $SMALL (the parameters are read when a
# device is added).
small_device() {
	local k p
	declare -A saved
	for k in qp cq mr pd ah; do
		p=/sys/module/metaroce/parameters/max_$k
		if [[ ! -w $p ]]; then
			echo "no module parameter max_$k: the limits cannot be lowered"
			return 1
		fi
		saved[$k]=$(cat "$p")
		echo "$SMALL" >"$p"
	done
	rdma link add mr1 type metaroce netdev veth1
	for k in qp cq mr pd ah; do
		echo "${saved[$k]}" >/sys/module/metaroce/parameters/max_$k
	done
	ibv_devinfo -v -d mr1 | grep -E 'max_(qp|cq|mr|pd|ah):'
	ibv_devinfo -v -d mr1 | grep -qE "max_qp:[[:space:]]+$SMALL\$"
}

test_small_device() {
	small_device
}

test_limit_qp() {
	rdma_dev_exists mr1 || small_device
	limit_holds mr1 qp $((SMALL + 1))
}

test_limit_cq() {
	rdma_dev_exists mr1 || small_device
	limit_holds mr1 cq $((SMALL + 1))
}

test_limit_mr() {
	rdma_dev_exists mr1 || small_device
	limit_holds mr1 mr $((SMALL + 1))
}

test_limit_pd() {
	limit_holds mr0 pd $(($(ibv_devinfo -v -d mr0 | sed -n 's/.*max_pd:[[:space:]]*//p') + 1))
}

test_limit_ah() {
	limit_holds mr0 ah $(($(ibv_devinfo -v -d mr0 | sed -n 's/.*max_ah:[[:space:]]*//p') + 1))
}

test_nothing_left() {
	load_base
	wait_until 30 counts_back $COUNTED
	rdma resource show
	rdma link delete mr0
	! rdma_dev_exists mr1 || rdma link delete mr1
	metaroce_unload
}

tap_plan 12
run_test "setup: device, cgroup ($MEM), nobody" setup
run_test "an unprivileged user opens the device" test_unprivileged
run_test "QPs at the largest attributes: ENOMEM in the cgroup, nothing left" test_qps_in_cgroup
run_test "CQs at the largest attributes: ENOMEM in the cgroup, nothing left" test_cqs_in_cgroup
run_test "MRs until RLIMIT_MEMLOCK: ENOMEM, nothing left" test_mrs_in_cgroup
run_test "limits lowered by module parameters (max_qp=$SMALL ...)" test_small_device
run_test "max_qp + 1 QPs: ENOMEM at max_qp" test_limit_qp
run_test "max_cq + 1 CQs: ENOMEM at max_cq" test_limit_cq
run_test "max_mr + 1 MRs: ENOMEM at max_mr" test_limit_mr
run_test "max_pd + 1 PDs (default limit): ENOMEM at max_pd" test_limit_pd
run_test "max_ah + 1 AHs (default limit): ENOMEM at max_ah" test_limit_ah
run_test "nothing left; the devices and the module go" test_nothing_left
tap_finish
