#!/bin/bash
# Self-test of the VM test bench (vmrun, the guest init, selftests/lib).
# Runs on the host; prints TAP.  Takes about a minute or two under TCG.
#
# Usage: selftests/vm/test-bench.sh     (KVER, VM_ACCEL, ... as for vmrun)
#        selftests/vm/test-bench.sh --host  (only the tests that boot no VM:
#                                            the kernel report scan; make check)
set -euo pipefail

VM_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$VM_DIR/../.." && pwd)
BENCH=$VM_DIR/bench
VMRUN=$VM_DIR/vmrun

# shellcheck source=../lib/tap.sh
source "$REPO/selftests/lib/tap.sh"
# shellcheck disable=SC2034 # used by tap.sh
TAP_DMESG_CHECK=0 # the host's kernel log is not ours to judge

# The kernel vmrun boots by default (same rule as vmrun's).
expected_kver() {
	"$REPO/scripts/target-kernel.sh" --vm
}
KVER=${KVER:-$(expected_kver)}
export KVER

# Run directories of the runs that are meant to fail (vmrun keeps those).
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# Host-side unit test of the kernel report scan on sample logs.
test_dmesg_scan() {
	# shellcheck source=../lib/dmesg.sh
	source "$REPO/selftests/lib/dmesg.sh"
	local out rc=0
	out=$(dmesg_scan "$BENCH/dmesg-clean.txt") || rc=$?
	[[ $rc == 0 && -z $out ]]
	rc=0
	out=$(dmesg_scan <"$BENCH/dmesg-reports.txt") || rc=$?
	[[ $rc == 1 ]]
	diff -u "$BENCH/dmesg-reports.expected" <(printf '%s\n' "$out")
}

# Reports pinned on the step a tool logged before them (compliance.sh).
test_dmesg_by_step() {
	source "$REPO/selftests/lib/dmesg.sh"
	local out rc=0
	# shellcheck disable=SC2317 # called by dmesg_reports_by_step
	dmesg() {
		printf '%s\n' "[1.0] BUG: before the mark" "[1.5] the-mark" \
			"[2.0] tool: case aaa" "[2.1] nothing" "[3.0] tool: case bbb" \
			"[3.1] BUG: KASAN: slab-out-of-bounds in x" "[4.0] tool: case ccc" \
			"[5.0] metaroce: loading out-of-tree module taints kernel."
	}
	DMESG_MARK=the-mark
	out=$(dmesg_reports_by_step "tool: case ") || rc=$?
	unset -f dmesg
	[[ $rc == 1 ]]
	[[ $out == "bbb"$'\t'"[3.1] BUG: KASAN: slab-out-of-bounds in x" ]]
}

test_one_vm() {
	cd "$REPO"
	"$VMRUN" --env "VMRUN_TEST_ENV=a b" -- "$BENCH/one-vm.sh" "$KVER" "$REPO"
}

test_two_vms() {
	"$VMRUN" --vms 2 --links 2 -- "$BENCH/two-vm.sh"
}

test_exit_status() {
	local rc=0
	"$VMRUN" --keep-scratch "$WORK/exit3" -- "$BENCH/exit3.sh" || rc=$?
	[[ $rc == 3 && $(<"$WORK/exit3/vm0/status") == 3 ]]
}

# A kernel report fails the test case it happens in and the whole run.
test_kernel_report() {
	local dir=$WORK/report rc=0
	"$VMRUN" --keep-scratch "$dir/run" -- "$BENCH/kernel-report.sh" 2>&1 |
		tee "$WORK/report.out" || rc=$?
	[[ $rc == 1 ]]
	grep -q '^ok 1 - before' "$WORK/report.out"
	grep -q '^not ok 2 - sysrq-l backtrace # kernel report' "$WORK/report.out"
	grep -q '^ok 3 - after' "$WORK/report.out"
	grep -q 'Call Trace:' "$dir/run/vm0/dmesg-reports.txt"
	grep -q 'Call Trace:' "$dir/run/vm0/dmesg.txt"
}

test_timeout() {
	local rc=0
	"$VMRUN" --timeout 15 --keep-scratch "$WORK/timeout" -- "$BENCH/sleep.sh" || rc=$?
	[[ $rc == 124 ]]
}

# A kernel crash ends the VM at once and vmrun says so.
test_panic() {
	local rc=0
	"$VMRUN" --keep-scratch "$WORK/panic" -- "$BENCH/panic.sh" 2>&1 |
		tee "$WORK/panic.out" || rc=$?
	[[ $rc == 125 ]]
	grep -q 'kernel reports on the console' "$WORK/panic.out"
	! grep -q 'crashed while booting' "$WORK/panic.out"
}

# A guest that never starts the script (here: no vmrun_init on the kernel
# command line) is named as crashed while booting (selftests/run.sh runs
# such a suite once more).
test_boot_crash() {
	local rc=0
	VM_QEMU_ARGS="-append panic=-1" "$VMRUN" --timeout 60 \
		--keep-scratch "$WORK/boot" -- "$BENCH/exit3.sh" 2>&1 |
		tee "$WORK/boot.out" || rc=$?
	[[ $rc == 125 && ! -f $WORK/boot/vm0/started ]]
	grep -q 'crashed while booting, before the script started' "$WORK/boot.out"
}

host_only=$([[ ${1:-} == --host ]] && echo 1 || true)
tap_plan $([[ -n $host_only ]] && echo 2 || echo 9)
run_test "dmesg scan of sample logs" test_dmesg_scan
run_test "dmesg reports pinned on steps" test_dmesg_by_step
[[ -n $host_only ]] && { tap_finish; exit; }
run_test "one VM: kernel, mounts, modprobe, netns topologies" test_one_vm
run_test "two VMs: links, rendezvous, ping" test_two_vms
run_test "exit status 3 is passed through" test_exit_status
run_test "kernel report fails the test and the run" test_kernel_report
run_test "timeout gives 124" test_timeout
run_test "kernel panic gives 125" test_panic
run_test "a guest that never starts the script: crashed while booting, 125" test_boot_crash
tap_finish
