#!/bin/sh
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
#
# Host smoke test of the provider plugin without a MetaRoCE kernel device.
#
# When the kernel has no RDMA netlink (no ib_core), libibverbs falls back to
# scanning sysfs under $SYSFS_PATH.  This script builds a fake sysfs with two
# devices, "mr0" (node_desc "metaroce") and "rxe0" (another driver), inside a
# private mount namespace where /dev and /etc/libibverbs.d are replaced by
# throw-away tmpfs mounts, so nothing outside the namespace changes.  It then
# checks that:
#   - libibverbs loads the plugin given by RDMAV_DRIVERS without warnings,
#   - the provider claims mr0 and leaves rxe0 alone,
#   - opening mr0 reaches metaroce_alloc_context (the fake char device is
#     /dev/null, so the ABI check on the udata reply must refuse it).
#
# Usage: fake_sysfs_smoke.sh /abs/path/libmetaroce   (no -rdmav34.so suffix)
# Exit status 77 means "skipped" (not root, tools missing, or real RDMA
# netlink present, which makes libibverbs ignore the fake sysfs).
set -eu

provider=${1:?usage: $0 /abs/path/libmetaroce}

[ "$(id -u)" = 0 ] || { echo "skip: needs root"; exit 77; }
for tool in unshare ibv_devices ibv_devinfo mount mknod; do
	command -v "$tool" >/dev/null 2>&1 || { echo "skip: no $tool"; exit 77; }
done
if rdma dev show >/dev/null 2>&1; then
	echo "skip: RDMA netlink is available, libibverbs would not read the fake sysfs"
	exit 77
fi
[ -e "${provider}-rdmav34.so" ] || { echo "missing ${provider}-rdmav34.so"; exit 1; }

work=$(mktemp -d /tmp/metaroce-fake-sysfs.XXXXXX)
trap 'rm -rf "$work"' EXIT

mkdev() {	# mkdev <ibdev> <uverbsN> <minor> <node_desc>
	ib="$work/sys/class/infiniband/$1"
	uv="$work/sys/class/infiniband_verbs/$2"
	mkdir -p "$ib" "$uv"
	echo "$1" >"$uv/ibdev"
	echo "1:$3" >"$uv/dev"
	echo 1 >"$uv/abi_version"
	echo "1: CA" >"$ib/node_type"
	echo "$4" >"$ib/node_desc"
	echo "0000:0000:0000:000$3" >"$ib/node_guid"
}
mkdir -p "$work/sys/class/infiniband_verbs"
echo 6 >"$work/sys/class/infiniband_verbs/abi_version"
# /dev/null (1:3) and /dev/zero (1:5) stand in for the uverbs char devices.
mkdev mr0 uverbs0 3 metaroce
mkdev rxe0 uverbs1 5 "somehost rxe0"

cat >"$work/inner.sh" <<'EOF'
set -eu
mount --make-rprivate /
mount -t tmpfs fake-dev /dev
mknod -m 666 /dev/null c 1 3
mkdir /dev/infiniband
mknod -m 666 /dev/infiniband/uverbs0 c 1 3
mknod -m 666 /dev/infiniband/uverbs1 c 1 5
mount -t tmpfs fake-conf /etc/libibverbs.d	# only RDMAV_DRIVERS is loaded
export SYSFS_PATH="$WORK/sys" RDMAV_DRIVERS="$PROVIDER" IBV_SHOW_WARNINGS=1
ibv_devices >"$WORK/devices.out" 2>"$WORK/devices.err" || true
VERBS_LOG_LEVEL=4 VERBS_LOG_FILE=/proc/self/fd/2 \
	ibv_devinfo -d mr0 </dev/null >"$WORK/devinfo.out" 2>"$WORK/devinfo.err" || true
EOF
WORK="$work" PROVIDER="$provider" unshare -m sh "$work/inner.sh"

fail=0
check() {	# check <description> <command...>
	desc=$1; shift
	if "$@"; then echo "ok:   $desc"; else echo "FAIL: $desc"; fail=1; fi
}
check "plugin loaded without warnings" \
	sh -c "! grep -q \"couldn't load driver\" '$work/devices.err'"
check "mr0 listed (matched by node_desc)" grep -qw mr0 "$work/devices.out"
check "rxe0 not claimed" sh -c "! grep -qw rxe0 '$work/devices.out'"
check "rxe0 reported as unmatched" \
	grep -q "no userspace device-specific driver found for rxe0" "$work/devices.err"
check "alloc_context reached and refused the fake reply" \
	grep -q "kernel reports MetaRoCE ABI 0" "$work/devinfo.err"

if [ "$fail" != 0 ]; then
	for f in devices.out devices.err devinfo.out devinfo.err; do
		echo "--- $f"; cat "$work/$f"
	done
fi
exit "$fail"
