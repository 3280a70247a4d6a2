#!/bin/bash
# Builds the driver inside a kernel tree, as it would be merged: kernel/
# copied into Debian's linux-source-6.1 as drivers/infiniband/sw/metaroce
# with the top-level Kconfig, hooked into drivers/infiniband/Kconfig and
# drivers/infiniband/sw/Makefile, the uapi headers in include/uapi/rdma,
# configured from Debian's own config with RDMA_METAROCE=m, and compiled
# there with W=1 and sparse (C=2: every file, every run). Any warning of
# the compiler or of sparse fails it. Prints one TAP line.
#
#   scripts/intree-build.sh [LOGFILE]
#
# The extracted and prepared tree is cached in $METAROCE_CACHE (default
# /var/cache/metaroce), keyed by the linux-source-6.1 package version and
# the config it started from; only the driver is rebuilt on later runs.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
CACHE=${METAROCE_CACHE:-/var/cache/metaroce}
log=${1:-$TOP/build/intree.log}
tarball=/usr/src/linux-source-6.1.tar.xz
mkdir -p "$(dirname "$log")"

fail() {
	echo "not ok - in-tree build: $*"
	exit 1
}

[[ -f $tarball ]] || fail "no $tarball (apt-get install linux-source-6.1)"
srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
config=$(ls /boot/config-6.1.*-amd64 2>/dev/null | sort -V | tail -n 1)
[[ -n $config ]] || fail "no Debian 6.1 config in /boot (linux-image-amd64)"
key=$srcver-$(sha256sum "$config" | cut -c1-12)
tree=$CACHE/linux-source-$key/linux-source-6.1
drv=$tree/drivers/infiniband/sw/metaroce

(
	set -e
	if [[ ! -f $tree/.metaroce-prepared ]]; then
		echo "# extracting $tarball into $tree"
		find "$CACHE" -maxdepth 1 -name 'linux-source-*' -exec rm -rf {} + 2>/dev/null || true
		mkdir -p "$(dirname "$tree")"
		tar -xJf "$tarball" -C "$(dirname "$tree")"
		cp "$config" "$tree/.config"
		# Debian's config names its signing certificates, which the
		# source package does not carry; the driver needs none of them.
		"$tree/scripts/config" --file "$tree/.config" \
			--set-str SYSTEM_TRUSTED_KEYS "" \
			--set-str SYSTEM_REVOCATION_KEYS "" \
			--module RDMA_METAROCE
		printf '\nsource "drivers/infiniband/sw/metaroce/Kconfig"\n' \
			>>"$tree/drivers/infiniband/Kconfig"
		printf 'obj-$(CONFIG_RDMA_METAROCE)\t\t+= metaroce/\n' \
			>>"$tree/drivers/infiniband/sw/Makefile"
		mkdir -p "$drv"
		cp "$TOP/Kconfig" "$drv/Kconfig"
		make -s -C "$tree" olddefconfig
		# The host tools too, with the driver's W=1 (a change of flags
		# rebuilds them): genksyms's grammar makes bison warn under
		# W=1, and what follows "### the driver" is the driver's alone.
		make -s -C "$tree" -j"$(nproc)" W=1 prepare scripts
		touch "$tree/.metaroce-prepared"
	fi

	# The driver as it is now: sources, Kconfig, uapi headers.
	rsync -a -c --delete --exclude '*.o' --exclude '.*.cmd' \
		--exclude '*.mod*' --exclude '*.ko' --exclude 'modules.order' \
		--exclude Kconfig \
		--include 'core/' --include 'soft/' --include '*.c' --include '*.h' \
		--include Kbuild --include Makefile \
		--exclude '*' \
		"$TOP/kernel/" "$drv/"
	cp "$TOP/Kconfig" "$drv/Kconfig"
	cp "$TOP"/include/uapi/rdma/metaroce_*.h "$tree/include/uapi/rdma/"
	make -s -C "$tree" olddefconfig
	grep -qx 'CONFIG_RDMA_METAROCE=m' "$tree/.config" || {
		echo "RDMA_METAROCE=m did not survive olddefconfig:"
		grep RDMA_METAROCE "$tree/.config" || true
		exit 1
	}
	echo "### the driver"
	make -C "$tree" -j"$(nproc)" W=1 C=2 drivers/infiniband/sw/metaroce/
) >"$log" 2>&1
rc=$?
if ((rc)); then
	tail -n 30 "$log"
	fail "failed (log: $log)"
fi

# What the compiler and sparse said about the driver (the kernel's own
# host tools, built on the first run, have warnings of their own).
driver_log=$(sed -n '/^### the driver$/,$p' "$log")
warnings=$(grep -cE '(warning|error):' <<<"$driver_log")
if ((warnings)); then
	grep -E '(warning|error):' <<<"$driver_log" | head -n 30
	fail "$warnings warnings from the compiler or sparse (log: $log)"
fi
echo "ok - in-tree build in linux-source-$srcver (W=1, sparse): no warnings"
