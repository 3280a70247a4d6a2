#!/bin/bash
# Interoperability: the kernel soft-NIC against the C++ model (libsoftmetaroce) speaking the
# wire protocol over real UDP. Two network namespaces joined by a veth pair: the kernel device
# mr1 on veth0 in ns1 (10.0.0.1), metaroce-peer (the model) on UDP port 4793 in ns2
# (10.0.0.2). metaroce-interop drives the kernel QP; the two meet over a TCP exchange and run
# WRITEs (and a WRITE with immediate), READs and SENDs in both directions, every byte and
# completion checked by both sides, without and with injected loss.
#
# Tools: $METAROCE_TOOLS_DIR (default build/userspace/tools), else the installed ones.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/topo.sh"

TOP=$(cd "$METAROCE_SELFTESTS/../.." && pwd)
TOOLS_DIR=${METAROCE_TOOLS_DIR:-$TOP/build/userspace/tools}
TIMEOUT=${INTEROP_TIMEOUT:-240}
KERNEL_IP=10.0.0.1
PEER_IP=10.0.0.2

tool() {
	if [[ -x $TOOLS_DIR/$1/$1 ]]; then
		echo "$TOOLS_DIR/$1/$1"
	else
		command -v "$1"
	fi
}
PEER=$(tool metaroce-peer)
INTEROP=$(tool metaroce-interop)

setup() {
	[[ -x $PEER && -x $INTEROP ]] || {
		echo "metaroce-peer or metaroce-interop not built (looked in $TOOLS_DIR and PATH)"
		return 1
	}
	metaroce_load
	topo_pair ns1 ns2
	ip netns exec ns1 rdma link add mr1 type metaroce netdev veth0
	wait_until 10 eval 'gids mr1 | grep -q ffff:0a00:0001'
	# The peer's address must be resolvable before the kernel sends to it.
	ip netns exec ns1 busybox ping -c 1 -W 2 "$PEER_IP" >/dev/null
}

# counter NAME: a counter of mr1.
counter() {
	cat "/sys/class/infiniband/mr1/ports/1/hw_counters/$1" 2>/dev/null || echo 0
}

# rejected: packets mr1 dropped as malformed, of another version, for an unknown QP, a QP in
# the wrong state, or from the wrong peer.
rejected() {
	echo $(($(counter rx_malformed) + $(counter rx_bad_version) + $(counter rx_unknown_qp) +
		$(counter rx_bad_qp_state) + $(counter rx_bad_peer)))
}

# transfer KERNEL_ROLE LOSS_PCT SIZE COUNT [SEED]: one transfer between the kernel QP (in
# KERNEL_ROLE) and metaroce-peer (in the other role), the peer dropping LOSS_PCT percent of
# what it sends and receives. Both sides must verify everything.
transfer() {
	local kernel_role=$1 loss=$2 size=$3 count=$4 seed=${5:-1} peer_role port
	local peer_rc=0 kernel_rc=0 retx0 reread0 rto0 bad0 bad
	[[ $kernel_role == target ]] && peer_role=initiator || peer_role=target
	port=$((18700 + _tap_num))
	retx0=$(counter retransmits)
	reread0=$(counter rereads)
	rto0=$(counter rto_expired)
	bad0=$(rejected)
	ip netns exec ns2 timeout "$TIMEOUT" "$PEER" --role "$peer_role" --local "$PEER_IP" \
		--listen "$PEER_IP:$port" --size "$size" --count "$count" --loss "$loss" \
		--seed "$seed" --timeout "$((TIMEOUT - 10))" >/tmp/interop-peer.log 2>&1 &
	local peer_pid=$!
	ip netns exec ns1 timeout "$TIMEOUT" "$INTEROP" -d mr1 --role "$kernel_role" \
		--local "$KERNEL_IP" --connect "$PEER_IP:$port" --size "$size" --count "$count" \
		--timeout "$((TIMEOUT - 10))" || kernel_rc=$?
	wait "$peer_pid" || peer_rc=$?
	cat /tmp/interop-peer.log
	echo "kernel side: retransmits +$(($(counter retransmits) - retx0))" \
		"rereads +$(($(counter rereads) - reread0))" \
		"rto_expired +$(($(counter rto_expired) - rto0))"
	echo "metaroce-interop exit $kernel_rc, metaroce-peer exit $peer_rc"
	# Everything the model sent was valid and addressed right.
	bad=$(($(rejected) - bad0))
	((bad == 0)) || echo "the kernel rejected $bad packets of the model (malformed, bad peer, ...)"
	((kernel_rc == 0 && peer_rc == 0 && bad == 0))
}

teardown() {
	rdma link del mr1
	topo_cleanup
}

tap_plan 8
run_test "setup: mr1 in ns1, metaroce-peer's address in ns2" setup
run_test "kernel -> model: WRITE, READ, SEND (64 KiB x 8)" transfer initiator 0 65536 8
run_test "model -> kernel: WRITE, READ, SEND (64 KiB x 8)" transfer target 0 65536 8
run_test "kernel -> model, 2% loss" transfer initiator 2 65536 8 11
run_test "model -> kernel, 2% loss" transfer target 2 65536 8 12
run_test "kernel -> model, 5% loss, odd sizes" transfer initiator 5 10007 20 13
run_test "model -> kernel, 5% loss, odd sizes" transfer target 5 10007 20 14
run_test "teardown" teardown
tap_finish
