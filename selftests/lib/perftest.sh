#!/bin/bash
# Running stock perftest programs in the test VMs: between two VMs (VM 0
# serves, VM 1 connects), with the checks and reruns the functional suite
# (metaroce/perftest.sh) and the benchmark (bench/perf.sh) share.
# Needs guest.sh and wait_until (metaroce/lib.sh).

# perftest_results OUTPUT: perftest printed at least one line of numbers.
perftest_results() {
	grep -qE '^ *[0-9]+ +[0-9]+ +[0-9.]+' <<<"$1"
}

# perftest_wait_listening PORT ARGS...: until a perftest server listens on
# PORT (its TCP port; with -R, an rdma_cm ID listening on that port).
perftest_wait_listening() {
	local port=$1
	shift
	if [[ " $* " == *" -R "* ]]; then
		wait_until 30 eval "rdma resource show cm_id |
			grep -q 'state LISTEN .*:$port '"
		return
	fi
	wait_until 30 eval "ss -Hltn 'sport = :$port' | grep -q LISTEN"
}

# perftest_worth_rerun FILE...: the perftest output there gave up on its
# clock ("Can't produce a report": perftest calibrates its cycle counter
# against the clock and refuses to report when emulation's timing noise
# spoils the fit), or (-R) its connect was rejected for want of a listener
# although the server listened (seen now and then between namespaces).
perftest_worth_rerun() {
	grep -qE "Can't produce a report|RDMA_CM_EVENT_REJECTED" "$@" 2>/dev/null
}

# perftest_errors OUTPUT: perftest's complaints, then the end of its output
# (its errors, on stderr, come before its buffered stdout).
perftest_errors() {
	grep -iE "fail|couldn|unable|error|can't" <<<"$1" || true
	echo "$1" | tail -n 15
}

# perftest_vm_run PORT DEV TIMEOUT TOOL ARGS...: one run of TOOL on device
# DEV between the two VMs, VM 0 serving on PORT. Sets PERFTEST_OUT (this
# VM's output) and PERFTEST_RC (its exit status). Returns, the same in both
# VMs: 0 if both sides exited 0, 2 if either side's output is worth a rerun,
# 1 otherwise.
perftest_vm_run() {
	local port=$1 dev=$2 limit=$3 tool=$4 rerun=0 peer
	shift 4
	PERFTEST_RC=0
	if ((VM_INDEX == 0)); then
		PERFTEST_OUT=$(timeout "$limit" "$tool" -d "$dev" -p "$port" "$@" 2>&1 &
			perftest_wait_listening "$port" "$@"
			vm_publish "srv.$port" up
			wait $!) || PERFTEST_RC=$?
	else
		vm_wait "srv.$port" >/dev/null
		PERFTEST_OUT=$(timeout "$limit" "$tool" -d "$dev" -p "$port" "$@" \
			"$(vm_link_ip 0 0)" 2>&1) || PERFTEST_RC=$?
	fi
	perftest_worth_rerun <<<"$PERFTEST_OUT" && rerun=1
	vm_publish "rc.$port.$VM_INDEX" "$PERFTEST_RC $rerun"
	peer=$(vm_wait "rc.$port.$VM_PEER_INDEX")
	((rerun || ${peer#* })) && return 2
	((PERFTEST_RC == 0 && ${peer% *} == 0))
}
