#!/bin/bash
# kselftest-style TAP output for bash tests.  Source it, then:
#
#   tap_plan 3                       # optional: "TAP version 13" + "1..3"
#   run_test "rxe loads" test_load   # run a test function (or any command)
#   run_test "ping" ping_peer 10.0.0.2
#   tap_finish                       # totals; exits 1 on any failure
#
# run_test NAME CMD [ARGS...] runs CMD in a subshell with `set -e`, its
# output (stdout and stderr) shown as "# " comment lines while it runs.
# Exit status 0 is a pass, 4 (kselftest's KSFT_SKIP) a skip, anything else a
# failure.  Inside a test, `tap_skip REASON` ends it as a skip, and
# `expect_fail CMD` checks that CMD fails.  The kernel
# log is checked after each test (dmesg_check, see dmesg.sh): a kernel report
# (BUG, WARNING, ...) during a test fails that test.  Set TAP_DMESG_CHECK=0
# to turn that off.
#
# Output:
#   TAP version 13
#   1..3
#   # <test output>
#   ok 1 - rxe loads
#   not ok 2 - ping
#   ok 3 - ipv6 # SKIP no IPv6
#   # Totals: pass:1 fail:1 xfail:0 xpass:0 skip:1 error:0
#
# The lower-level tap_ok / tap_not_ok / tap_skip_result NAME [REASON] print
# one result line and count it, for tests that do not fit run_test.

# shellcheck source=dmesg.sh
source "$(dirname "${BASH_SOURCE[0]}")/dmesg.sh"

KSFT_PASS=0
KSFT_FAIL=1
KSFT_SKIP=4

TAP_DMESG_CHECK=${TAP_DMESG_CHECK:-1}
_tap_num=0
_tap_pass=0
_tap_fail=0
_tap_skip=0
_tap_planned=
_tap_header=

_tap_print_header() {
	[[ -n $_tap_header ]] && return
	_tap_header=1
	echo "TAP version 13"
}

# tap_plan N: print the header and the plan (call it before any test).
tap_plan() {
	_tap_print_header
	_tap_planned=$1
	echo "1..$1"
}

tap_ok() {
	_tap_print_header
	_tap_num=$((_tap_num + 1))
	_tap_pass=$((_tap_pass + 1))
	echo "ok $_tap_num - $1"
}

tap_not_ok() {
	_tap_print_header
	_tap_num=$((_tap_num + 1))
	_tap_fail=$((_tap_fail + 1))
	echo "not ok $_tap_num - $1${2:+ # $2}"
}

tap_skip_result() {
	_tap_print_header
	_tap_num=$((_tap_num + 1))
	_tap_skip=$((_tap_skip + 1))
	echo "ok $_tap_num - $1 # SKIP${2:+ $2}"
}

# expect_fail CMD [ARGS...]: succeed if CMD fails.  Use it in tests instead
# of `! CMD`, which never trips `set -e`.
expect_fail() {
	! "$@"
}

# tap_skip REASON: inside a run_test test, end it as skipped.
tap_skip() {
	[[ -n ${_TAP_SKIP_FILE:-} ]] && echo "$*" >"$_TAP_SKIP_FILE"
	exit "$KSFT_SKIP"
}

# _tap_elapsed START: print "# time: S.SSs" since START ($EPOCHREALTIME).
_tap_elapsed() {
	local us=$((${EPOCHREALTIME/./} - ${1/./}))
	printf '# time: %d.%02ds\n' $((us / 1000000)) $((us % 1000000 / 10000))
}

# _tap_slow_check START: say so if the kernel log check since START took
# over 5 s (about 6 s on the debug kernel, where each exec costs 0.6 s), so
# that a slow check is not taken for a slow test.
_tap_slow_check() {
	local us=$((${EPOCHREALTIME/./} - ${1/./}))
	((us > 5000000)) && printf '# dmesg check: %d s\n' $((us / 1000000))
	return 0
}

# run_test NAME CMD [ARGS...]
run_test() {
	local name=$1 rc reason reports errexit='' start=$EPOCHREALTIME
	shift
	_tap_print_header
	_TAP_SKIP_FILE=${TMPDIR:-/tmp}/.tap-skip.$$
	: >"$_TAP_SKIP_FILE"
	[[ $TAP_DMESG_CHECK == 1 ]] && dmesg_mark

	# errexit must be off around the subshell (so that we get its status)
	# but on inside it (so that a failing command fails the test).
	[[ $- == *e* ]] && errexit=1
	set +e
	(
		set -e
		"$@"
	) 2>&1 | sed -u 's/^/# /'
	rc=${PIPESTATUS[0]}
	[[ -n $errexit ]] && set -e
	_tap_elapsed "$start"

	reason=$(<"$_TAP_SKIP_FILE")
	_TAP_SKIP_FILE=

	start=$EPOCHREALTIME reports=
	if [[ $TAP_DMESG_CHECK == 1 ]] && ! reports=$(dmesg_check); then
		[[ -n $reports ]] || reports="(dmesg_check failed)"
	fi
	_tap_slow_check "$start"
	if [[ -n $reports ]]; then
		echo "# kernel report in dmesg during this test:"
		printf '%s\n' "$reports" | head -n 50 | sed 's/^/#   /'
		tap_not_ok "$name" "kernel report"
	elif ((rc == KSFT_PASS)); then
		tap_ok "$name"
	elif ((rc == KSFT_SKIP)); then
		tap_skip_result "$name" "$reason"
	else
		echo "# exit status $rc"
		tap_not_ok "$name"
	fi
	return 0
}

# tap_finish: print the totals; exit 1 if a test failed or the plan was not
# met, else 0.
tap_finish() {
	_tap_print_header
	rm -f "${TMPDIR:-/tmp}/.tap-skip.$$"
	[[ -n $_tap_planned ]] || echo "1..$_tap_num"
	echo "# Totals: pass:$_tap_pass fail:$_tap_fail xfail:0 xpass:0 skip:$_tap_skip error:0"
	if [[ -n $_tap_planned ]] && ((_tap_num != _tap_planned)); then
		echo "# planned $_tap_planned tests but ran $_tap_num"
		exit "$KSFT_FAIL"
	fi
	((_tap_fail == 0)) || exit "$KSFT_FAIL"
	exit "$KSFT_PASS"
}
