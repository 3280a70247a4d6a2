#!/bin/bash
# vmrun bench self-test, single VM: is this a usable test machine?
# Run by test-bench.sh as: vmrun --env VMRUN_TEST_ENV="a b" -- one-vm.sh KVER CWD
set -euo pipefail
LIB=$(dirname "$0")/../../lib
# shellcheck source=../../lib/tap.sh
source "$LIB/tap.sh"
# shellcheck source=../../lib/topo.sh
source "$LIB/topo.sh"

want_kver=$1
want_cwd=$2

# The host may have no iputils-ping: use busybox's then.
if command -v ping >/dev/null; then PING=(ping); else PING=(busybox ping); fi

test_kernel() {
	echo "uname -r: $(uname -r), hostname: $(hostname)"
	[[ $(uname -r) == "$want_kver" ]]
	# A VM, not the host container: our own PID 1 and the QEMU machine.
	grep -q QEMU /sys/class/dmi/id/sys_vendor
	[[ $(readlink /proc/1/exe) == */bash ]]
}

test_root_readonly() {
	expect_fail touch /usr/vmrun-write-test
	expect_fail touch "$PWD/vmrun-write-test"
	grep -q ' /usr 9p ro,' /proc/mounts
}

test_writable_dirs() {
	local d
	for d in /tmp /var/tmp /run /var/log /dev/shm /scratch; do
		echo "test" >"$d/vmrun-write-test"
		rm "$d/vmrun-write-test"
	done
}

test_modprobe() {
	modprobe rdma_rxe
	grep -q '^rdma_rxe ' /proc/modules
	rmmod rdma_rxe
	expect_fail grep -q '^rdma_rxe ' /proc/modules
}

test_netns() {
	ip netns add vmrun-test
	ip netns exec vmrun-test ip link show lo
	ip netns del vmrun-test
}

test_topo_pair() {
	topo_pair a b
	topo_exec a "${PING[@]}" -c 1 -W 2 10.0.0.2
	topo_exec b "${PING[@]}" -6 -c 1 -W 2 fd00::1
	topo_cleanup
}

test_topo_switch() {
	topo_switch 3
	topo_exec h1 "${PING[@]}" -c 1 -W 2 10.1.3.2
	topo_exec h3 "${PING[@]}" -6 -c 1 -W 2 fd00:1:2::2
	topo_cleanup
}

test_topo_multipath() {
	topo_multipath 2
	topo_exec h1 ip route show 10.255.0.2
	topo_exec h1 "${PING[@]}" -c 2 -W 2 -I 10.255.0.1 10.255.0.2
	topo_cleanup
}

test_debugfs_bpffs() {
	grep -q ' /sys/kernel/debug debugfs ' /proc/mounts
	grep -q ' /sys/fs/bpf bpf ' /proc/mounts
	[[ -e /sys/kernel/tracing/trace ]]
}

test_env() {
	echo "PWD=$PWD VM_INDEX=$VM_INDEX VM_COUNT=$VM_COUNT VMRUN_TEST_ENV=$VMRUN_TEST_ENV"
	[[ $PWD == "$want_cwd" ]]
	[[ $VMRUN_TEST_ENV == "a b" && $VM_INDEX == 0 && $VM_COUNT == 1 ]]
	[[ -n $PATH && -n $HOME ]]
}

tap_plan 10
run_test "kernel $want_kver in a VM" test_kernel
run_test "host root is read-only" test_root_readonly
run_test "tmpfs dirs and /scratch are writable" test_writable_dirs
run_test "modprobe/rmmod rdma_rxe" test_modprobe
run_test "ip netns add" test_netns
run_test "topo_pair ping" test_topo_pair
run_test "topo_switch ping" test_topo_switch
run_test "topo_multipath ping" test_topo_multipath
run_test "debugfs, tracefs, bpffs" test_debugfs_bpffs
run_test "cwd and env passed" test_env
tap_finish
