#!/bin/bash
# make run: ib_write_bw over MetaRoCE between two hosts. The build machine's
# own kernel cannot load modules, so the two hosts are QEMU VMs booted from
# the installed Debian kernel and joined back to back by an Ethernet link.
#   RUN_ARGS="-s 4096 -n 5000" scripts/run-write-bw.sh [--installed]
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
cd "$TOP"

env_args=()
[[ -n ${RUN_ARGS:-} ]] && env_args+=(--env "RUN_ARGS=$RUN_ARGS")
if [[ ${1:-} != --installed ]]; then
	env_args+=(--env "METAROCE_KO=$TOP/kernel/metaroce.ko"
		--env "RDMAV_DRIVERS=$BUILD/userspace/provider/libmetaroce")
fi
selftests/vm/vmrun --vms 2 --links 1 --timeout 600 "${env_args[@]}" \
	-- selftests/bench/write_bw.sh 2>&1 | grep -v '^\[vm0\]'
