#!/bin/bash
# Helpers shared by the MetaRoCE selftests (run inside vmrun guests).
#
# Which module and provider are tested:
#   METAROCE_KO     path of a built metaroce.ko to insmod (its dependencies
#                   are modprobed first); empty: modprobe the installed one
#   RDMAV_DRIVERS   libibverbs' list of extra providers; selftests/run.sh
#                   points it at the build tree unless --installed
#   METAROCE_PROTOCOL  wire protocol of the devices (the module's protocol
#                   parameter); empty: the module's default
# shellcheck source=../lib/tap.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib/tap.sh"

METAROCE_KO=${METAROCE_KO:-}
# Set by selftests/run.sh when the VM runs the debug kernel.
METAROCE_DEBUG_KERNEL=${METAROCE_DEBUG_KERNEL:-}
METAROCE_SELFTESTS=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

metaroce_load() {
	local dep
	[[ -d /sys/module/metaroce ]] && return 0
	set -- ${METAROCE_PROTOCOL:+protocol=$METAROCE_PROTOCOL} "$@"
	if [[ -z $METAROCE_KO ]]; then
		modprobe metaroce "$@"
	else
		for dep in $(modinfo -F depends "$METAROCE_KO" | tr , ' '); do
			modprobe "$dep"
		done
		insmod "$METAROCE_KO" "$@"
	fi || return
	[[ -z ${METAROCE_PROTOCOL:-} ]] ||
		grep -qx "$METAROCE_PROTOCOL" /sys/module/metaroce/parameters/protocol
}

metaroce_unload() {
	[[ -d /sys/module/metaroce ]] || return 0
	rmmod metaroce
}

# wait_until SECONDS CMD...: poll CMD every 0.1 s until it succeeds.
wait_until() {
	local deadline=$((SECONDS + $1))
	shift
	until "$@"; do
		((SECONDS < deadline)) || return 1
		busybox sleep 0.1
	done
}

# rdma_dev_exists NAME
rdma_dev_exists() {
	[[ -e /sys/class/infiniband/$1 ]]
}

# port_state DEV: ACTIVE, DOWN, ... as rdma link shows it.
port_state() {
	rdma link show "$1/1" | sed -n 's/.* state \([A-Z_]*\) .*/\1/p'
}

# gids DEV: the non-zero GIDs of port 1.
gids() {
	grep -hv '^0000:0000:0000:0000:0000:0000:0000:0000$' \
		/sys/class/infiniband/"$1"/ports/1/gids/* 2>/dev/null
}

# rdma_link_add_fails ERRNO_TEXT ARGS...: "rdma link add ARGS" must fail
# with the given error text (e.g. "File exists").
rdma_link_add_fails() {
	local want=$1 out
	shift
	if out=$(rdma link add "$@" 2>&1); then
		echo "rdma link add $* succeeded"
		return 1
	fi
	echo "rdma link add $*: $out"
	[[ $out == *"$want"* ]]
}

# unreclaimable slab in kB (leak checks).
slab_kb() {
	sed -n 's/^SUnreclaim: *\([0-9]*\) kB/\1/p' /proc/meminfo
}

# settled_slab_kb: unreclaimable slab once frees deferred by RCU (batched
# for up to 5 s) have drained: the lowest of samples over 8 s.
settled_slab_kb() {
	local low cur i

	low=$(slab_kb)
	for i in $(seq 16); do
		busybox sleep 0.5
		cur=$(slab_kb)
		((cur < low)) && low=$cur
	done
	echo "$low"
}

# repeat_count N: N, or a fifth of it (at least 2) on the debug kernel, where
# every exec and every device registration costs ten times as much: loops
# that repeat the same thing to show nothing accumulates stay meaningful
# with fewer rounds.
repeat_count() {
	if [[ -n $METAROCE_DEBUG_KERNEL ]]; then
		echo $(($1 / 5 > 2 ? $1 / 5 : 2))
	else
		echo "$1"
	fi
}
