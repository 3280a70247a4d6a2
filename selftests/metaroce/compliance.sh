#!/bin/bash
# The MetaRoCE conformance suite (docs/compliance.md) against the kernel soft-NIC: the device
# under test mr1 on veth0 in ns1 (10.0.0.1); metaroce-compliance's UDP sockets in ns2
# (10.0.0.2, and 10.0.0.3 for the wrong-source-address case), where it crafts packets with
# the libsoftmetaroce codec. The tool itself runs in the root namespace, where it drives mr1's
# QPs through libibverbs and reads mr1's counters in sysfs (a namespace of `ip netns exec`
# only shows a counter-less compat device). One TAP test per case, so that a kernel report in
# dmesg is pinned on the case that caused it.
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
# Generous: TCG emulation is slow.
TIME_SCALE=${COMPLIANCE_TIME_SCALE:-3}

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

compliance_case() {
	timeout 120 "$COMPLIANCE" -d mr1 --netns ns2 --dut-ip 10.0.0.1 --local 10.0.0.2 \
		--alt-ip 10.0.0.3 --time-scale "$TIME_SCALE" ${COMPLIANCE_VERBOSE:+-v} "$1"
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

tap_plan $((${#CASES[@]} + 2))
run_test "setup: mr1 in ns1, the harness in ns2" setup
for name in "${CASES[@]}"; do
	run_test "$name" compliance_case "$name"
done
run_test "teardown" teardown
tap_finish
