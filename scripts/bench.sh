#!/bin/bash
# make bench: MetaRoCE and the kernel's rxe side by side on the same
# two-VM link (QEMU, -netdev dgram on 127.0.0.1), several repetitions,
# medians and ratios. Performance is only ever compared within one run.
#
#   BENCH_REPS=5 BENCH_DURATION=8 scripts/bench.sh [--installed]
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
cd "$TOP"

env_args=(--env "BENCH_REPS=${BENCH_REPS:-3}"
	--env "BENCH_DURATION=${BENCH_DURATION:-8}")
if [[ ${1:-} != --installed ]]; then
	env_args+=(--env "METAROCE_KO=$TOP/kernel/metaroce.ko"
		--env "RDMAV_DRIVERS=$BUILD/userspace/provider/libmetaroce")
fi
selftests/vm/vmrun --vms 2 --links 1 --timeout 1800 "${env_args[@]}" \
	-- selftests/bench/perf.sh
