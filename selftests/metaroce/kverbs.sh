#!/bin/bash
# In-kernel verbs: metaroce_ktest (selftests/metaroce/ktest) drives RC QPs
# through ib_post_send/ib_post_recv (or ib_post_srq_recv: srq=1), registers
# memory by fast registration as storage protocols do, and checks every byte: between two devices in two network namespaces joined by veth,
# and on one device talking to itself (loopback). One VM.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/topo.sh"

# METAROCE_KTEST: the client built for another kernel (selftests/run.sh).
KTEST=${METAROCE_KTEST:-$METAROCE_SELFTESTS/ktest/metaroce_ktest.ko}

ktest() {
	insmod "$KTEST" "$@"
	rmmod metaroce_ktest
}

setup() {
	metaroce_load
	topo_pair ns1 ns2
	ip netns exec ns1 rdma link add mr1 type metaroce netdev veth0
	ip netns exec ns2 rdma link add mr2 type metaroce netdev veth0
	wait_until 5 eval 'gids mr1 | grep -q ffff:0a00:0001'
	wait_until 5 eval 'gids mr2 | grep -q ffff:0a00:0002'
}

counters() {
	rdma statistic show link "$1/1"
}

test_two_namespaces() {
	ktest dev_a=mr1 dev_b=mr2
	counters mr1
	counters mr2
}

test_loopback() {
	ktest dev_a=mr1 dev_b=mr1
}

test_srq() {
	ktest dev_a=mr1 dev_b=mr2 srq=1
}

# The key of an invalidated registration reaches nothing.
test_stale_key() {
	ktest dev_a=mr1 dev_b=mr2 stale=1
	ktest dev_a=mr1 dev_b=mr1 stale=1
}

test_teardown() {
	rdma link delete mr1
	rdma link delete mr2
	topo_cleanup
	metaroce_unload
}

tap_plan 6
run_test "setup: two namespaces, two devices" setup
run_test "kernel ULP: SEND/WRITE/READ between namespaces" test_two_namespaces
run_test "kernel ULP: SEND/WRITE/READ on one device (loopback)" test_loopback
run_test "kernel ULP: receives from an SRQ (ib_post_srq_recv)" test_srq
run_test "kernel ULP: a WRITE with an invalidated fast-registration key fails" test_stale_key
run_test "teardown" test_teardown
tap_finish
