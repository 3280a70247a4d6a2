#!/bin/bash
# Every verb and its error paths from user space: metaroce-verbs-test
# (userspace/tests/verbs, GoogleTest) against two MetaRoCE devices in two
# network namespaces joined by veth (mr1 on ns1's veth0, mr2 on ns2's), and
# on one device talking to itself. The program runs once; each of its cases
# is one TAP result named Suite.Case, so a failure names the case. One VM.
#
#   verbs.sh [GTEST_ARGS...]     e.g. verbs.sh --gtest_filter='RcError.*'
#
# Environment: METAROCE_VERBS_TEST (the program; default: next to the
# provider RDMAV_DRIVERS names, else build/userspace/tests/verbs),
# METAROCE_VERBS_TIMEOUT (seconds for one run of the program, default 600),
# METAROCE_VERBS_BIG_MIB, METAROCE_VERBS_TIME_SCALE, METAROCE_VERBS_HAMMER_S
# (passed on), METAROCE_VERBS_RERUN_FAILED (1: a failed case runs once more
# on its own, and passes, visibly, only if that run passes).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/topo.sh"

TOP=$(cd "$METAROCE_SELFTESTS/../.." && pwd)
# The debug kernel moves data several times slower (an 8 MiB WRITE took
# over 20 s): give the program's deadlines and the run room for it.
if [[ -n $METAROCE_DEBUG_KERNEL ]]; then
	export METAROCE_VERBS_TIME_SCALE=${METAROCE_VERBS_TIME_SCALE:-6}
	METAROCE_VERBS_TIMEOUT=${METAROCE_VERBS_TIMEOUT:-2400}
fi
if [[ -n ${METAROCE_VERBS_TEST:-} ]]; then
	BIN=$METAROCE_VERBS_TEST
elif [[ -n ${RDMAV_DRIVERS:-} && -d $(dirname "$RDMAV_DRIVERS") ]]; then
	BIN=$(dirname "$RDMAV_DRIVERS")/../tests/verbs/metaroce-verbs-test
else
	BIN=$TOP/build/userspace/tests/verbs/metaroce-verbs-test
fi
LOG=/tmp/metaroce-verbs-test.log
LIST=/tmp/metaroce-verbs-test.list
CRASHED=/tmp/metaroce-verbs-test.crashed
GTEST_ARGS=("$@")

setup() {
	[[ -x $BIN ]] || { echo "no $BIN (build with make)"; return 1; }
	metaroce_load
	topo_pair ns1 ns2
	ip netns exec ns1 rdma link add mr1 type metaroce netdev veth0
	ip netns exec ns2 rdma link add mr2 type metaroce netdev veth0
	wait_until 10 eval 'gids mr1 | grep -q ffff:0a00:0001'
	wait_until 10 eval 'gids mr2 | grep -q ffff:0a00:0002'
	rdma link show
}

# The cases, as Suite.Case, one a line.
list_cases() {
	"$BIN" --gtest_list_tests "${GTEST_ARGS[@]}" | awk '
		/^[^ ]/ { suite = $1; next }
		/^  / { print suite $1 }'
}

# The verdict of each case that finished: "OK|FAILED|SKIPPED name" lines
# from the program's output @1.
verdicts() {
	awk '/^\[ *(OK|FAILED|SKIPPED) *\] .* \([0-9]+ ms\)$/ {
		v = $0; sub(/^\[ */, "", v); sub(/ *\].*/, "", v)
		n = $0; sub(/^\[[^]]*\] /, "", n)
		sub(/ \([0-9]+ ms\)$/, "", n); sub(/, where GetParam.*/, "", n)
		print v, n
	}' "$1"
}

# Runs the program over every case. Should it die (a crash, the timeout),
# the case it was in is recorded in $CRASHED and it runs again over the
# cases left, up to 5 times. Passes if it never died: the cases' own
# verdicts are their TAP results.
run_all() {
	local rc attempt=0 died=0 out=/tmp/metaroce-verbs-test.run name filter
	local -A done_
	: >"$LOG"
	: >"$CRASHED"
	while ((attempt < 5)); do
		attempt=$((attempt + 1))
		filter=
		while read -r name; do
			[[ -n ${done_[$name]:-} ]] && continue
			grep -qxF "$name" "$CRASHED" && continue
			filter+=${filter:+:}$name
		done <"$LIST"
		[[ -n $filter ]] || break
		METAROCE_DEV_A=mr1 METAROCE_DEV_B=mr2 \
			METAROCE_VERBS_NETDEV_MTU_A="ip -n ns1 link set dev veth0 mtu" \
			METAROCE_VERBS_QDISC_A="tc -n ns1 qdisc ACTION dev veth0 root" \
			timeout -k 10 "${METAROCE_VERBS_TIMEOUT:-600}" \
			"$BIN" --gtest_color=no "${GTEST_ARGS[@]}" \
			--gtest_filter="$filter" 2>&1 | tee "$out"
		rc=${PIPESTATUS[0]}
		cat "$out" >>"$LOG"
		echo "metaroce-verbs-test exit status $rc"
		# 0: all passed, 1: some case failed; anything else: it died.
		((rc == 0 || rc == 1)) && break
		died=1
		while read -r _ name; do
			done_[$name]=1
		done < <(verdicts "$out")
		name=$(sed -n 's/^\[ RUN      \] //p' "$out" | tail -n 1)
		[[ -n $name && -z ${done_[$name]:-} ]] || break
		echo "$name exit status $rc" >>"$CRASHED"
		echo "--- $name died (exit status $rc); going on with the rest"
	done
	((died == 0))
}

# Runs case $1 once more on its own; its output goes to the log.
rerun_case() {
	local out=/tmp/metaroce-verbs-test.rerun rc
	echo "--- $1 failed: running it once more on its own"
	METAROCE_DEV_A=mr1 METAROCE_DEV_B=mr2 \
		METAROCE_VERBS_NETDEV_MTU_A="ip -n ns1 link set dev veth0 mtu" \
		METAROCE_VERBS_QDISC_A="tc -n ns1 qdisc ACTION dev veth0 root" \
		timeout -k 10 "${METAROCE_VERBS_TIMEOUT:-600}" \
		"$BIN" --gtest_color=no --gtest_filter="$1" >"$out" 2>&1
	rc=$?
	sed 's/^/# /' "$out"
	return "$rc"
}

# One TAP result per case, from the program's output.
report_cases() {
	local name v why
	local -A verdict
	while read -r v name; do
		verdict[$name]=$v
	done < <(verdicts "$LOG")
	while read -r name; do
		case ${verdict[$name]:-} in
		OK) tap_ok "$name" ;;
		SKIPPED) tap_skip_result "$name" ;;
		FAILED)
			if [[ ${METAROCE_VERBS_RERUN_FAILED:-} == 1 ]] &&
				rerun_case "$name"; then
				tap_ok "$name (failed, then passed on its own)"
			else
				tap_not_ok "$name"
			fi
			;;
		*)
			why=$(grep -F "$name exit status" "$CRASHED" | tail -n 1)
			if [[ -n $why ]]; then
				tap_not_ok "$name" "died: ${why#"$name "}"
			else
				tap_not_ok "$name" "did not run"
			fi
			;;
		esac
	done <"$LIST"
}

teardown() {
	rdma link delete mr1
	rdma link delete mr2
	topo_cleanup
	metaroce_unload
}

run_test "setup: two namespaces, two devices" setup
if [[ -x $BIN ]] && list_cases >"$LIST" && [[ -s $LIST ]]; then
	run_test "metaroce-verbs-test ran to the end ($(wc -l <"$LIST") cases)" \
		run_all
	report_cases
else
	tap_not_ok "metaroce-verbs-test lists its cases" "no $BIN?"
fi
run_test "teardown" teardown
tap_finish
