#!/bin/bash
# Builds metaroce.ko and the in-kernel test client metaroce_ktest.ko for
# another kernel than the one `make` targets (the VM suites' debug kernel),
# in a directory of their own so the default build is left as it is.
#
#   scripts/build-for-kernel.sh KVER OUTDIR [--install]
#
# OUTDIR/kernel/metaroce.ko and OUTDIR/ktest/metaroce_ktest.ko; --install
# also puts metaroce.ko into /lib/modules/KVER/updates (for `modprobe`).
# Warnings are errors, as in CI.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
kver=${1:?KVER}
out=${2:?OUTDIR}
kdir=/lib/modules/$kver/build
[[ -d $kdir ]] || {
	echo "build-for-kernel: no build tree at $kdir" >&2
	exit 1
}

mkdir -p "$out/kernel" "$out/ktest"
# rsync -c: unchanged sources keep their time stamps, so kbuild rebuilds
# only what changed.
rsync -a -c --delete --exclude '*.o' --exclude '*.ko' --exclude '.*.cmd' \
	--exclude '*.mod*' --exclude 'Module.symvers' --exclude 'modules.order' \
	"$TOP/kernel/" "$out/kernel/"
rsync -a -c "$TOP/selftests/metaroce/ktest/"{Makefile,metaroce_ktest.c} "$out/ktest/"
make -s -C "$out/kernel" KDIR="$kdir" KVER="$kver" WERROR=1 \
	METAROCE_UAPI="$TOP/include" modules
make -s -C "$out/ktest" KDIR="$kdir" KVER="$kver" WERROR=1 modules
if [[ ${3:-} == --install ]]; then
	install -D -m 644 "$out/kernel/metaroce.ko" \
		"/lib/modules/$kver/updates/metaroce.ko"
	depmod -a "$kver"
fi
