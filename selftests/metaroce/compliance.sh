#!/bin/bash
# The MetaRoCE conformance suite (docs/compliance.md) against the kernel soft-NIC: the device
# under test mr1 on veth0 in ns1 (10.0.0.1); metaroce-compliance's UDP sockets in ns2
# (10.0.0.2, and 10.0.0.3 for the wrong-source-address case), where it crafts packets with
# the libsoftmetaroce codec. The tool itself runs in the root namespace, where it drives mr1's
# QPs through libibverbs and reads mr1's counters in sysfs (a namespace of `ip netns exec`
# only shows a counter-less compat device). One TAP test per case. One process runs them all
# (starting one takes seconds on the debug kernel); it logs "metaroce-compliance: case NAME" in
# the kernel's log before each, so that a kernel report is pinned on the case that caused it.
# If the tool dies, the case it was in fails and a new process goes on with the rest.
#
#   COMPLIANCE_CASES="case ..."   run only these (default: metaroce-compliance --list)
#   COMPLIANCE_VERBOSE=1          log every packet sent and received
#   METAROCE_TOOLS_DIR            where the tools were built (default build/userspace/tools)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/topo.sh"

TOP=$(cd "$METAROCE_SELFTESTS/../.." && pwd)
TOOLS_DIR=${METAROCE_TOOLS_DIR:-$TOP/build/userspace/tools}
if [[ -x $TOOLS_DIR/metaroce-compliance/metaroce-compliance ]]; then
	COMPLIANCE=$TOOLS_DIR/metaroce-compliance/metaroce-compliance
else
	COMPLIANCE=$(command -v metaroce-compliance)
fi
# Generous: TCG emulation is slow, the debug kernel slower still.
TIME_SCALE=${COMPLIANCE_TIME_SCALE:-$([[ -n $METAROCE_DEBUG_KERNEL ]] && echo 6 || echo 3)}

setup() {
	[[ -x $COMPLIANCE ]] || {
		echo "metaroce-compliance not built (looked in $TOOLS_DIR and PATH)"
		return 1
	}
	metaroce_load
	topo_pair ns1 ns2
	ip -n ns2 addr add 10.0.0.3/24 dev veth0
	ip netns exec ns1 rdma link add mr1 type metaroce netdev veth0
	wait_until 10 eval 'gids mr1 | grep -q ffff:0a00:0001'
	ip netns exec ns1 busybox ping -c 1 -W 2 10.0.0.2 >/dev/null
	ip netns exec ns1 busybox ping -c 1 -W 2 10.0.0.3 >/dev/null
}

# run_cases CASE...: one metaroce-compliance process for CASE...; its output, as
# comment lines, also in $OUT.
run_cases() {
	timeout -k 10 $((60 * $# + 120)) "$COMPLIANCE" -d mr1 --netns ns2 --dut-ip 10.0.0.1 \
		--local 10.0.0.2 --alt-ip 10.0.0.3 --time-scale "$TIME_SCALE" \
		${COMPLIANCE_VERBOSE:+-v} "$@" 2>&1 | tee "$OUT" | sed -u 's/^/# /'
	return "${PIPESTATUS[0]}"
}

# report_cases: a TAP result per case, from the tool's verdicts (in $LOG), the
# cases it died in and the kernel reports logged during each.
report_cases() {
	local name line verdict
	local -A result report
	while read -r verdict name; do
		result[$name]=$verdict
	done < <(sed -nE 's/^(ok|not ok) [0-9]+ - ([^ ]+)( # (SKIP).*)?$/\1\4 \2/p' "$LOG" |
		sed 's/^not ok/fail/; s/^okSKIP/skip/')
	while IFS=$'\t' read -r name line; do
		[[ -n $name ]] || name=setup
		report[$name]+="$line"$'\n'
	done < <(dmesg_reports_by_step "metaroce-compliance: case ")
	for name in "${CASES[@]}"; do
		if [[ -n ${report[$name]:-} ]]; then
			echo "# kernel report in dmesg during $name:"
			printf '%s' "${report[$name]}" | head -n 50 | sed 's/^/#   /'
			tap_not_ok "$name" "kernel report"
			continue
		fi
		case ${result[$name]:-} in
		ok) tap_ok "$name" ;;
		skip) tap_skip_result "$name" ;;
		fail) tap_not_ok "$name" ;;
		*) tap_not_ok "$name" "$(grep -F "$name: " "$DIED" || echo "did not run")" ;;
		esac
	done
	if [[ -n ${report[setup]:-} ]]; then
		echo "# kernel report in dmesg before the first case:"
		printf '%s' "${report[setup]}" | head -n 50 | sed 's/^/#   /'
		tap_not_ok "before the first case" "kernel report"
	fi
}

# run_all: every case, going on after the one a dead tool was in.
run_all() {
	local rc name i left=("${CASES[@]}")
	: >"$LOG"
	: >"$DIED"
	while ((${#left[@]})); do
		run_cases "${left[@]}"
		rc=$?
		cat "$OUT" >>"$LOG"
		((rc == 0 || rc == 1)) && return
		# It died (a signal, a timeout): in the first case it gave no verdict
		# for, as it runs them in order.
		for i in "${!left[@]}"; do
			grep -qE "^(ok|not ok) [0-9]+ - ${left[i]}( |\$)" "$OUT" || break
		done
		name=${left[i]}
		if ! grep -qE '^(ok|not ok) [0-9]+ - ' "$OUT" &&
			! grep -qF "# $name: " "$OUT"; then
			echo "metaroce-compliance exit status $rc before any case" >>"$DIED"
			return
		fi
		echo "$name: died (exit status $rc)" >>"$DIED"
		left=("${left[@]:i+1}")
	done
}

teardown() {
	rdma link del mr1
	topo_cleanup
}

if [[ -n ${COMPLIANCE_CASES:-} ]]; then
	read -ra CASES <<<"$COMPLIANCE_CASES"
else
	mapfile -t CASES < <("$COMPLIANCE" --list)
fi
LOG=/tmp/metaroce-compliance.log
OUT=/tmp/metaroce-compliance.run
DIED=/tmp/metaroce-compliance.died

tap_plan $((${#CASES[@]} + 2))
run_test "setup: mr1 in ns1, the harness in ns2" setup
dmesg_mark
run_all
report_cases
run_test "teardown" teardown
tap_finish
