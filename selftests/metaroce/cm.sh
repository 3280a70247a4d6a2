#!/bin/bash
# rdma-core's example programs over MetaRoCE between two network namespaces:
# connection setup through rdma_cm (rping with data verification, ucmatose),
# and ibv_rc_pingpong / ibv_ud_pingpong with their data validation. One VM.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/topo.sh"

setup() {
	metaroce_load
	modprobe rdma_ucm
	topo_pair ns1 ns2
	ip netns exec ns1 rdma link add mr1 type metaroce netdev veth0
	ip netns exec ns2 rdma link add mr2 type metaroce netdev veth0
	wait_until 10 eval 'gids mr1 | grep -q ffff:0a00:0001'
	wait_until 10 eval 'gids mr2 | grep -q ffff:0a00:0002'
}

# pair 'SERVER CMD' 'CLIENT CMD': the server in ns2, the client in ns1;
# both must succeed.
pair() {
	local srv_rc=0 rc=0
	ip netns exec ns2 timeout 120 $1 >/tmp/cm-server.log 2>&1 &
	local srv=$!
	busybox sleep 2
	ip netns exec ns1 timeout 120 $2 >/tmp/cm-client.log 2>&1 || rc=$?
	wait "$srv" || srv_rc=$?
	tail -n 5 /tmp/cm-client.log
	echo "--- server:"
	tail -n 5 /tmp/cm-server.log
	echo "client exit $rc, server exit $srv_rc"
	((rc == 0 && srv_rc == 0))
}

test_rping() {
	# -v: each ping's data is printed and checked against the pattern.
	pair "rping -s -a 10.0.0.2 -v -C 100" "rping -c -a 10.0.0.2 -v -C 100"
	[[ $(grep -c 'ping data' /tmp/cm-client.log) == 100 ]]
}

test_ucmatose() {
	pair "ucmatose -b 10.0.0.2 -c 4 -C 20" "ucmatose -s 10.0.0.2 -c 4 -C 20"
}

test_rc_pingpong() {
	# -c: the receiver checks the data of every message.
	pair "ibv_rc_pingpong -d mr2 -g 1 -n 500 -s 4096 -c" \
		"ibv_rc_pingpong -d mr1 -g 1 -n 500 -s 4096 -c 10.0.0.2"
}

test_ud_pingpong() {
	pair "ibv_ud_pingpong -d mr2 -g 1 -n 500 -s 512 -c" \
		"ibv_ud_pingpong -d mr1 -g 1 -n 500 -s 512 -c 10.0.0.2"
}

tap_plan 5
run_test "setup" setup
run_test "rping -v -C 100 over rdma_cm, data checked" test_rping
run_test "ucmatose: 4 connections over rdma_cm" test_ucmatose
run_test "ibv_rc_pingpong with data validation" test_rc_pingpong
run_test "ibv_ud_pingpong with data validation" test_ud_pingpong
tap_finish
