#!/bin/bash
# Stock perftest over MetaRoCE: every bandwidth and latency program (the
# atomic ones with both operations), all message sizes (-a), several QPs
# (-q 4), both directions (-b), and connection setup through rdma_cm (-R). Runs between two VMs (vmrun --vms
# 2: VM 0 serves, VM 1 connects) or, in one VM, between two network
# namespaces.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/guest.sh"
source "$(dirname "$0")/../lib/topo.sh"
source "$(dirname "$0")/../lib/perftest.sh"

TIMEOUT=${PERFTEST_TIMEOUT:-120}
# The server's address between namespaces (perftest_vm_run finds VM 0's).
SERVER_IP=10.0.0.2

setup() {
	metaroce_load
	modprobe rdma_ucm
	if ((VM_COUNT == 2)); then
		vm_link_setup
		rdma link add mr0 type metaroce netdev "$(vm_link_if 0)"
		wait_until 10 eval 'gids mr0 | grep -q ffff:0ac8'
	else
		topo_pair ns1 ns2
		ip netns exec ns1 rdma link add mr1 type metaroce netdev veth0
		ip netns exec ns2 rdma link add mr2 type metaroce netdev veth0
		wait_until 10 eval 'gids mr1 | grep -q ffff:0a00:0001'
		wait_until 10 eval 'gids mr2 | grep -q ffff:0a00:0002'
	fi
}

# pair TOOL ARGS...: TOOL as server and client with ARGS; both must exit 0
# and report results. A run perftest_worth_rerun says was spoilt by
# emulation's clock or a rejected connect is repeated, up to three times in
# all, visibly.
pair() {
	local attempt log=/tmp/perftest-pair.log

	for attempt in 1 2 3; do
		if pair_once "$attempt" "$@" >"$log" 2>&1; then
			cat "$log"
			return 0
		fi
		cat "$log"
		# Between two VMs both sides must agree: pair_once says so.
		grep -q "^again$" "$log" || return 1
		echo "perftest could not calibrate its clock or connect: running again"
	done
	return 1
}

# pair_once ATTEMPT TOOL ARGS...: one run; each test and attempt has its
# own port (tests run in subshells, so it comes from the test number).
pair_once() {
	local tool=$2 out rc=0 srv_rc=0 port=$((18600 + 4 * _tap_num + $1)) r=0
	shift 2
	if ((VM_COUNT == 2)); then
		perftest_vm_run "$port" mr0 "$TIMEOUT" "$tool" "$@" || r=$?
		if ((PERFTEST_RC)); then
			perftest_errors "$PERFTEST_OUT"
		else
			echo "$PERFTEST_OUT" | tail -n 4
		fi
		((r == 2)) && { echo again; return 1; }
		# The client reports; a READ latency server prints no numbers.
		((r == 0)) && { ((VM_INDEX == 0)) || perftest_results "$PERFTEST_OUT"; }
		return
	fi
	ip netns exec ns2 timeout "$TIMEOUT" "$tool" -d mr2 -p "$port" "$@" \
		>/tmp/perftest-server.log 2>&1 &
	local srv=$!
	ip netns exec ns2 bash -c "$(declare -f wait_until perftest_wait_listening); \
		perftest_wait_listening $port $*"
	out=$(ip netns exec ns1 timeout "$TIMEOUT" "$tool" -d mr1 -p "$port" \
	      "$@" "$SERVER_IP" 2>&1) || rc=$?
	# A client that failed leaves the server waiting for it.
	((rc == 0)) || { busybox sleep 2; kill "$srv" 2>/dev/null || true; }
	wait "$srv" || srv_rc=$?
	echo "server exit $srv_rc, client exit $rc"
	if ((rc == 0 && srv_rc == 0)); then
		echo "$out" | tail -n 4
		perftest_results "$out"
		return
	fi
	if perftest_worth_rerun <<<"$out" ||
		perftest_worth_rerun /tmp/perftest-server.log; then
		echo again
		return 1
	fi
	perftest_errors "$out"
	echo "--- server:"
	perftest_errors "$(cat /tmp/perftest-server.log)"
	return 1
}

# Sizes up to 1 MiB keep the all-sizes runs short under emulation.
ALL=(-a -x 1 -n 5)
BW_ALL=(-a -x 1 -n 5)

tap_plan 21
run_test "setup" setup
for tool in ib_write_bw ib_read_bw ib_send_bw; do
	run_test "$tool: all sizes (-a)" pair "$tool" "${BW_ALL[@]}"
	run_test "$tool: 4 QPs (-q 4)" pair "$tool" -x 1 -q 4 -s 65536 -n 200
	run_test "$tool: bidirectional (-b)" pair "$tool" -x 1 -b -s 65536 -n 200
done
for tool in ib_write_lat ib_read_lat ib_send_lat; do
	run_test "$tool: all sizes (-a)" pair "$tool" "${ALL[@]}"
done
run_test "ib_write_bw over rdma_cm (-R)" pair ib_write_bw -R -s 65536 -n 200
run_test "ib_send_bw over rdma_cm (-R)" pair ib_send_bw -R -s 4096 -n 200
run_test "ib_read_lat over rdma_cm (-R)" pair ib_read_lat -R -s 64 -n 200
# Atomics: one 8-byte READ-like exchange each, both operations.
for op in FETCH_AND_ADD CMP_AND_SWAP; do
	run_test "ib_atomic_bw -A $op" pair ib_atomic_bw -x 1 -A "$op" -n 2000
	run_test "ib_atomic_lat -A $op" pair ib_atomic_lat -x 1 -A "$op" -n 1000
done
run_test "ib_write_lat, 8 bytes, 1000 iterations" pair ib_write_lat -x 1 -s 8 -n 1000
tap_finish
