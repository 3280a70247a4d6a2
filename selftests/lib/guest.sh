#!/bin/bash
# Helpers for test scripts that run inside vmrun guests.  Source it:
#   source "$(dirname "$0")/../lib/guest.sh"
#
# Environment set by vmrun (selftests/vm/guest-init.sh):
#   VM_INDEX, VM_PEER_INDEX  this VM (0 or 1) and the other one
#   VM_COUNT                 number of VMs (1 or 2)
#   VM_LINKS                 number of links between the two VMs (0 if 1 VM)
#   VM_IFS                   interface names of the links, in link order
#   VM_IF<L>                 interface name of link L (eth0, eth1, ...)
#   VM_MAC<L>, VM_PEER_MAC<L> MAC addresses of link L here and on the peer
#                            (52:54:00:00:0V:0L for VM V, link L)
#   VM_SCRATCH               /scratch: the host run directory, shared by both
#                            VMs (read-write, 9p); VM_OUT: /scratch/vmN
#   VM_TIMEOUT               the vmrun time limit in seconds
#
# Two-VM rendezvous goes through files in /scratch/rendezvous (9p with
# cache=mmap: a file written by one VM is visible to the other at once):
#   vm_publish KEY VALUE     make VALUE available to both VMs under KEY
#   vm_wait KEY              wait until KEY is published; print its VALUE
#   vm_barrier NAME          wait until both VMs have reached barrier NAME
# Waiting fails after VM_WAIT_TIMEOUT seconds (default 120), or at once when
# the peer VM has already finished (so a failed peer does not cause a hang).
# With one VM, vm_barrier returns at once and vm_wait sees vm_publish's keys.
#
# Link addressing (deterministic; use vm_link_setup or these values):
#   link L, VM V: 10.200.L.(V+1)/24 and fd00:200:L::(V+1)/64

VM_INDEX=${VM_INDEX:-0}
VM_PEER_INDEX=${VM_PEER_INDEX:-0}
VM_COUNT=${VM_COUNT:-1}
VM_LINKS=${VM_LINKS:-0}
VM_SCRATCH=${VM_SCRATCH:-/scratch}
VM_WAIT_TIMEOUT=${VM_WAIT_TIMEOUT:-120}
VM_RENDEZVOUS=$VM_SCRATCH/rendezvous

# Polling runs often; under TCG emulation a dynamically linked binary takes
# ~100 ms to exec, the static busybox ~15 ms: use busybox's mv and sleep.
_vm_bb() {
	if command -v busybox >/dev/null; then busybox "$@"; else "$@"; fi
}

# vm_publish KEY VALUE: written to a temp file and renamed, so a reader never
# sees a partial value.  KEY: a file name ([A-Za-z0-9._-]).
vm_publish() {
	local key=$1 value=$2 tmp
	tmp=$VM_RENDEZVOUS/.$key.$VM_INDEX.tmp
	[[ -d $VM_RENDEZVOUS ]] || mkdir -p "$VM_RENDEZVOUS"
	printf '%s\n' "$value" >"$tmp"
	_vm_bb mv -f "$tmp" "$VM_RENDEZVOUS/$key"
}

# vm_wait KEY: print the value published under KEY once it is there.
vm_wait() {
	local key=$1 file=$VM_RENDEZVOUS/$1 deadline=$((SECONDS + VM_WAIT_TIMEOUT))
	local peer_done=$VM_SCRATCH/vm$VM_PEER_INDEX/done
	until [[ -f $file ]]; do
		# The peer's "done" means it will publish nothing more.
		if ((VM_COUNT > 1)) && [[ -f $peer_done && ! -f $file ]]; then
			echo "vm_wait $key: vm$VM_PEER_INDEX finished without publishing it" >&2
			return 1
		fi
		if ((SECONDS >= deadline)); then
			echo "vm_wait $key: timed out after ${VM_WAIT_TIMEOUT}s" >&2
			return 1
		fi
		_vm_bb sleep 0.02
	done
	echo "$(<"$file")"
}

# vm_barrier NAME: both VMs publish NAME.<index> and wait for each other's.
# A barrier may be passed several times: the Nth pass of NAME in one VM
# meets the Nth pass in the other (the count is kept in /tmp, per VM).
vm_barrier() {
	local name=$1 count_file=/tmp/.vm_barrier.$1 count=0
	((VM_COUNT > 1)) || return 0
	[[ -f $count_file ]] && count=$(<"$count_file")
	count=$((count + 1))
	echo "$count" >"$count_file"
	vm_publish "barrier.$name.$count.$VM_INDEX" "$VM_INDEX"
	vm_wait "barrier.$name.$count.$VM_PEER_INDEX" >/dev/null
}

# vm_link_if L: interface name of link L.
vm_link_if() {
	local var=VM_IF$1
	[[ -n ${!var:-} ]] || {
		echo "vm_link_if: no link $1 (VM_LINKS=$VM_LINKS)" >&2
		return 1
	}
	echo "${!var}"
}

# vm_link_ip L [V] / vm_link_ip6 L [V]: the address of VM V (default: this
# VM) on link L, without prefix length (/24 and /64).
vm_link_ip() { echo "10.200.$1.$((${2:-$VM_INDEX} + 1))"; }
vm_link_ip6() { echo "fd00:200:$1::$((${2:-$VM_INDEX} + 1))"; }

# vm_link_setup: bring all links up with their addresses (IPv6 without DAD,
# so the address is usable at once).
vm_link_setup() {
	local l dev
	for ((l = 0; l < VM_LINKS; l++)); do
		dev=$(vm_link_if "$l") || return 1
		ip addr add "$(vm_link_ip "$l")/24" dev "$dev"
		ip addr add "$(vm_link_ip6 "$l")/64" dev "$dev" nodad
		ip link set "$dev" up
	done
}
