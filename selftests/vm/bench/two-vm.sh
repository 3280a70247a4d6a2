#!/bin/bash
# vmrun bench self-test, two VMs: links, addresses and rendezvous.
# Run by test-bench.sh as: vmrun --vms 2 --links 2 -- two-vm.sh
set -euo pipefail
LIB=$(dirname "$0")/../../lib
# shellcheck source=../../lib/tap.sh
source "$LIB/tap.sh"
# shellcheck source=../../lib/guest.sh
source "$LIB/guest.sh"

if command -v ping >/dev/null; then PING=(ping); else PING=(busybox ping); fi

test_links() {
	local l
	echo "vm$VM_INDEX: VM_IFS='$VM_IFS'"
	[[ $VM_COUNT == 2 && $VM_LINKS == 2 && $VM_PEER_INDEX == $((1 - VM_INDEX)) ]]
	for ((l = 0; l < VM_LINKS; l++)); do
		[[ $(vm_link_if "$l") == "eth$l" ]]
		[[ $(<"/sys/class/net/eth$l/address") == "52:54:00:00:0$VM_INDEX:0$l" ]]
	done
	vm_link_setup
}

test_rendezvous() {
	vm_publish "hello.$VM_INDEX" "from vm$VM_INDEX"
	[[ $(vm_wait "hello.$VM_PEER_INDEX") == "from vm$VM_PEER_INDEX" ]]
	vm_barrier twice
	vm_barrier twice
}

test_ping() {
	local l
	vm_barrier links-up
	for ((l = 0; l < VM_LINKS; l++)); do
		"${PING[@]}" -c 1 -W 5 "$(vm_link_ip "$l" "$VM_PEER_INDEX")"
		"${PING[@]}" -6 -c 1 -W 5 "$(vm_link_ip6 "$l" "$VM_PEER_INDEX")"
	done
	# The peer answers until it has passed this barrier too.
	vm_barrier pinged
}

tap_plan 3
run_test "links eth0/eth1 with fixed MACs" test_links
run_test "publish/wait/barrier" test_rendezvous
run_test "ping the peer on every link" test_ping
tap_finish
