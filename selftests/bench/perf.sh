#!/bin/bash
# MetaRoCE against the kernel's rxe over the same two-VM link, in one run,
# alternating the two devices: ib_write_bw (64 KiB) and ib_write_lat (8 B)
# on the clean link, ib_write_bw again with jumbo frames (a 9000-byte netdev
# MTU, so both devices run a 4096-byte RDMA MTU, as RoCE fabrics are set
# up), then ib_write_bw under netem loss on both VMs' links (BENCH_LOSSES)
# and with reordering; after each pair of ib_write_bw runs,
# one TCP stream (iperf3) under the same condition as the link's reference.
# VM 0 runs the perftest servers, VM 1 the clients and records one line per
# run in the shared run directory (and, for each ib_write_bw run, the share
# of the data's packets the link dropped, as link_drop):
#   TEST DEVICE CONDITION VALUE
# scripts/bench.sh turns them into medians, ratios, a table and a plot.
source "$(dirname "$0")/../metaroce/lib.sh"
source "$(dirname "$0")/../lib/guest.sh"
source "$(dirname "$0")/../lib/perftest.sh"
set -e

REPS=${BENCH_REPS:-3}
DURATION=${BENCH_DURATION:-8}
LAT_ITERS=${BENCH_LAT_ITERS:-5000}
LOSSES=${BENCH_LOSSES-0.1 1 5 10}
# Which device goes first in each pair of runs: scripts/bench.sh swaps it
# between repetitions, so that neither always runs on a freshly booted VM.
if [[ ${BENCH_FIRST:-rxe0} == mr0 ]]; then
	DEVS=(mr0 rxe0)
else
	DEVS=(rxe0 mr0)
fi
RESULTS=$VM_SCRATCH/bench-results.txt

vm_link_setup
metaroce_load
modprobe rdma_rxe
ndev=$(vm_link_if 0)
rdma link add rxe0 type rxe netdev "$ndev"
rdma link add mr0 type metaroce netdev "$ndev"
wait_until 10 eval 'gids mr0 | grep -q ffff:0ac8'
wait_until 10 eval 'gids rxe0 | grep -q ffff:0ac8'
run=0

# run_pair TOOL DEV ARGS...: the server on VM 0, the client on VM 1. Sets
# PAIR_OUT to the client's output if both sides succeeded; otherwise empties
# it and shows this side's errors on stderr. A run spoilt by emulation's
# clock (perftest_worth_rerun) is repeated, up to three times in all. Not to
# be run in a subshell: the run count gives every run its own port and
# rendezvous keys.
run_pair() {
	local tool=$1 dev=$2 attempt r port
	shift 2
	run=$((run + 1))
	for attempt in 1 2 3; do
		port=$((18515 + 4 * run + attempt))
		r=0
		perftest_vm_run "$port" "$dev" 120 "$tool" -x 1 "$@" || r=$?
		((r == 2)) || break
		echo "# $tool $dev: perftest could not calibrate its clock: again" >&2
	done
	PAIR_OUT=
	if ((r == 0)); then
		((VM_INDEX == 0)) || PAIR_OUT=$PERFTEST_OUT
		return
	fi
	echo "# $tool on $dev failed (exit $PERFTEST_RC in vm$VM_INDEX):" >&2
	perftest_errors "$PERFTEST_OUT" | sed 's/^/#   /' >&2
}

# record TEST DEV CONDITION VALUE (VM 1 only): VALUE "fail" if the run failed.
record() {
	((VM_INDEX == 1)) || return 0
	echo "$1 $2 $3 ${4:-fail}" | tee -a "$RESULTS"
}

# measure_tcp CONDITION: one TCP stream (iperf3) over the same link, the
# link's own reference: what the kernel's TCP moves between these VMs under
# the same condition. Recorded in MiB/s, perftest's MB/s.
measure_tcp() {
	local port out
	run=$((run + 1))
	port=$((5201 + run))
	if ((VM_INDEX == 0)); then
		timeout $((DURATION + 60)) iperf3 -s -1 -p "$port" >/dev/null 2>&1 &
		wait_until 10 eval "ss -ltn | grep -q ':$port '" || true
		vm_barrier "tcp.$run"
		wait || true
		return
	fi
	vm_barrier "tcp.$run"
	out=$(timeout $((DURATION + 50)) iperf3 -c "$(vm_link_ip 0 0)" -p "$port" \
		-t "$DURATION" -J 2>/dev/null) || out=
	record tcp_bw tcp "$1" "$(python3 -c '
import json, sys
try:
    end = json.load(sys.stdin)["end"]["sum_received"]
    print("%.2f" % (end["bytes"] / end["seconds"] / 2**20))
except Exception:
    pass' <<<"$out")"
}

# link_packets DIRECTION: this VM's link packet count (tx or rx).
link_packets() {
	cat "/sys/class/net/$ndev/statistics/${1}_packets"
}

# record_link_drops DEV CONDITION TX_BEFORE RX_BEFORE: the share of the
# packets VM 1 (the client, the data's sender) sent in the last run that
# never reached VM 0, in percent: what the emulated link dropped, netem's
# drops included.
record_link_drops() {
	local sent received
	if ((VM_INDEX == 0)); then
		vm_publish "rx.$run" $(($(link_packets rx) - $4))
		return
	fi
	sent=$(($(link_packets tx) - $3))
	received=$(vm_wait "rx.$run")
	((sent > 0)) || return 0
	record link_drop "$1" "$2" \
		"$(awk -v s="$sent" -v r="$received" \
			'BEGIN { printf "%.1f", 100 * (s - r) / s }')"
}

# measure_bw CONDITION: one ib_write_bw run per device, then TCP.
measure_bw() {
	local dev tx rx
	for dev in "${DEVS[@]}"; do
		tx=$(link_packets tx)
		rx=$(link_packets rx)
		run_pair ib_write_bw "$dev" -s 65536 -D "$DURATION"
		record write_bw "$dev" "$1" \
			"$(awk '$1 == 65536 && NF >= 5 { print $4 }' <<<"$PAIR_OUT")"
		record_link_drops "$dev" "$1" "$tx" "$rx"
	done
	measure_tcp "$1"
}

# impair ARGS...: netem on this VM's link ("" to clear).
impair() {
	tc qdisc del dev "$ndev" root 2>/dev/null || true
	[[ -z $* ]] || tc qdisc add dev "$ndev" root netem "$@"
	vm_barrier "impair.$run"
}

# set_mtu BYTES: this VM's link MTU; returns once both devices' ports
# report the RDMA MTU that follows from it, and the peer has done the same.
set_mtu() {
	local want=1024 dev
	((${1} < 9000)) || want=4096
	ip link set "$ndev" mtu "$1"
	for dev in mr0 rxe0; do
		wait_until 10 eval "ibv_devinfo -d $dev |
			grep -q 'active_mtu:.*$want'" ||
			echo "# $dev: port MTU not $want after 10 s" >&2
	done
	vm_barrier "mtu.$1.$run"
}

# Which protocol MetaRoCE speaks here, for the report's heading.
record protocol mr0 module "$(cat /sys/module/metaroce/parameters/protocol)"
for rep in $(seq "$REPS"); do
	measure_bw clean
	for dev in "${DEVS[@]}"; do
		run_pair ib_write_lat "$dev" -s 8 -n "$LAT_ITERS"
		record write_lat "$dev" clean \
			"$(awk '$1 == 8 && NF >= 5 { print $5 }' <<<"$PAIR_OUT")"
	done
	set_mtu 9000
	measure_bw jumbo
	set_mtu 1500
	for loss in $LOSSES; do
		impair loss "$loss%"
		measure_bw "loss$loss"
	done
	if [[ -n $LOSSES ]]; then
		impair delay 1ms reorder 75% 50%
		measure_bw reorder
		impair
	fi
done
