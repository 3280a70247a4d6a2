#!/bin/bash
# Runs several one-VM selftest suites one after the other in one VM (inside
# the guest, from selftests/run.sh), so that a slow kernel boots once: the
# debug kernel takes about a minute to boot and another to scan for leaks at
# the end of a run, under TCG.
#
#   run-suites.sh SECONDS SCRIPT...
#
# Each SCRIPT runs with a limit of SECONDS, between the lines
#   ### suite begin SCRIPT
#   ### suite end SCRIPT status N
# which selftests/run.sh cuts the console log at. Between two suites,
# whatever one may have left is removed (network namespaces, links, RDMA
# devices, the modules), so that each starts as in a fresh VM.
set -u

limit=${1:?}
shift

# Back to a freshly booted VM's state: no namespaces but the initial one,
# no links but the VM's NICs and lo, no RDMA devices, no RDMA modules.
reset_guest() {
	local ns dev name

	for ns in $(ip netns list 2>/dev/null | awk '{ print $1 }'); do
		ip netns del "$ns" 2>/dev/null
	done
	for dev in $(rdma -j link show 2>/dev/null | grep -o '"ifname":"[^"]*"' |
		cut -d'"' -f4 | cut -d/ -f1 | sort -u); do
		rdma link delete "$dev" 2>/dev/null
	done
	for dev in /sys/class/net/*; do
		name=${dev##*/}
		[[ $name == lo || " ${VM_IFS:-} " == *" $name "* ]] && continue
		ip link del "$name" 2>/dev/null
	done
	for name in metaroce_ktest metaroce rdma_rxe; do
		[[ -d /sys/module/$name ]] && rmmod "$name" 2>/dev/null
	done
	return 0
}

for script in "$@"; do
	echo "### suite begin $script"
	timeout --kill-after=10 "$limit" /bin/bash "$script" </dev/null
	status=$?
	echo "### suite end $script status $status"
	reset_guest
done
exit 0
