#!/bin/bash
# make bench: MetaRoCE and the kernel's rxe side by side on the same
# two-VM link (QEMU, -netdev dgram on 127.0.0.1), several repetitions:
# throughput and latency on the clean link, then throughput under loss
# (0.1% to 10%) and reordering. Prints medians and ratios and writes
# docs/results/bench.md and docs/results/loss-sweep.png. Performance is
# only ever compared within one run.
#
#   BENCH_REPS=3 BENCH_DURATION=8 BENCH_LOSSES="0.1 1 5 10" scripts/bench.sh
#   BENCH_LOSSES= scripts/bench.sh        # clean link only
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
OUT=${BENCH_OUT:-$TOP/docs/results}
cd "$TOP"

env_args=(--env "BENCH_REPS=${BENCH_REPS:-3}"
	--env "BENCH_DURATION=${BENCH_DURATION:-8}"
	--env "BENCH_LOSSES=${BENCH_LOSSES-0.1 1 5 10}")
if [[ ${1:-} != --installed ]]; then
	env_args+=(--env "METAROCE_KO=$TOP/kernel/metaroce.ko"
		--env "RDMAV_DRIVERS=$BUILD/userspace/provider/libmetaroce")
fi
run_dir=$(mktemp -d)
selftests/vm/vmrun --vms 2 --links 1 --timeout 3600 --keep-scratch "$run_dir" \
	"${env_args[@]}" -- selftests/bench/perf.sh | grep -v '^\[vm0\]'
mkdir -p "$OUT"
/usr/bin/python3 scripts/bench_report.py "$run_dir/bench-results.txt" "$OUT"
rm -rf "$run_dir"
