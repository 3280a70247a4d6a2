#!/bin/bash
# make bench: MetaRoCE and the kernel's rxe side by side on the same
# two-VM link (QEMU, -netdev dgram on 127.0.0.1), several repetitions:
# throughput and latency on the clean link, then throughput under loss
# (0.1% to 10%) and reordering, each pair of throughput runs followed by
# one TCP stream (iperf3) as the link's reference. Prints medians and
# ratios and writes docs/results/bench.md and docs/results/loss-sweep.png.
# Performance is only ever compared within one run. Each repetition boots
# its own VMs: a VM whose emulated NIC stops transmitting (seen twice)
# spoils that repetition only. Which device runs first alternates between
# repetitions.
#
#   BENCH_REPS=3 BENCH_DURATION=8 BENCH_LOSSES="0.1 1 5 10" scripts/bench.sh
#   BENCH_LOSSES= scripts/bench.sh        # clean link only
#   METAROCE_PROTOCOL=2 scripts/bench.sh  # MetaRoCE on protocol v2
#
# Then what people run on RDMA (UCX, Open MPI, libfabric, qperf, NVMe over
# RDMA: the consumers and nvme suites) on mr0 and rxe0 side by side, into
# docs/results/consumers.md (BENCH_CONSUMERS=0 leaves it out).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
OUT=${BENCH_OUT:-$TOP/docs/results}
cd "$TOP"

reps=${BENCH_REPS:-3}
env_args=(--env BENCH_REPS=1
	--env "BENCH_DURATION=${BENCH_DURATION:-8}"
	--env "BENCH_LOSSES=${BENCH_LOSSES-0.1 1 5 10}")
[[ -z ${METAROCE_PROTOCOL:-} ]] ||
	env_args+=(--env "METAROCE_PROTOCOL=$METAROCE_PROTOCOL")
if [[ ${1:-} != --installed ]]; then
	env_args+=(--env "METAROCE_KO=$TOP/kernel/metaroce.ko"
		--env "RDMAV_DRIVERS=$BUILD/userspace/provider/libmetaroce")
fi
run_dir=$(mktemp -d)
: >"$run_dir/bench-results.txt"
for rep in $(seq "$reps"); do
	first=rxe0
	((rep % 2)) || first=mr0
	echo "== repetition $rep of $reps ($first first)"
	selftests/vm/vmrun --vms 2 --links 1 --timeout 1800 \
		--keep-scratch "$run_dir/rep$rep" "${env_args[@]}" \
		--env "BENCH_FIRST=$first" -- \
		selftests/bench/perf.sh | grep -v '^\[vm0\]' ||
		echo "# repetition $rep: the VMs did not finish cleanly"
	cat "$run_dir/rep$rep/bench-results.txt" \
		>>"$run_dir/bench-results.txt" 2>/dev/null || true
done
mkdir -p "$OUT"
/usr/bin/python3 scripts/bench_report.py "$run_dir/bench-results.txt" "$OUT"

if [[ ${BENCH_CONSUMERS:-1} != 0 ]]; then
	echo "== consumers and NVMe over RDMA, mr0 and rxe0 side by side"
	RXE_BASELINE=1 selftests/run.sh "$@" \
		consumers nvme | tee "$run_dir/consumers.log" |
		grep -E '^(\[vm1\] )?(not ok|ok|selftests:)' || true
	{
		echo "# Consumers on mr0 and rxe0, side by side"
		echo
		echo "From \`make bench\` ($(date -u +%Y-%m-%d)): the consumers and nvme suites"
		echo "with RXE_BASELINE=1, one run, two VMs under QEMU TCG. \"fails\": no figure."
		sed -n 's/^\[vm1\] # \(|.*|\)$/\1/p' "$run_dir/consumers.log" |
			awk '/^\| test \|/ { print "" } { print }'
	} >"$OUT/consumers.md"
	echo "== wrote $OUT/consumers.md"
fi
rm -rf "$run_dir"
