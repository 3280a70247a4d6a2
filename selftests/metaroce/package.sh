#!/bin/bash
# The Debian packages as an administrator gets them: installed with dpkg
# into a fresh root (selftests/run.sh does that on the host with
# scripts/package-root.sh, where DKMS builds the module for every kernel
# with headers), booted and used here, then purged from that root on the
# host (package-root.sh purge). The VM stacks the root's upper layers
# (PACKAGE_ROOT) over its own /usr, /etc and /var, with fresh writable
# layers on top. Nothing of the build tree is used: no METAROCE_KO, no
# RDMAV_DRIVERS.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/topo.sh"

PACKAGE_ROOT=${PACKAGE_ROOT:-}
PACKAGES=(metaroce-dkms ibverbs-provider-metaroce metaroce-tools)
PROVIDER_DIR=/usr/lib/x86_64-linux-gnu/libibverbs

# The kernels DKMS had to build for: every one with headers.
kernels_with_headers() {
	local dir
	for dir in /lib/modules/*/build; do
		[[ -d $dir ]] && basename "$(dirname "$dir")"
	done
}

# mount_package_root: /usr, /etc and /var become overlays of (top first) a
# fresh tmpfs, the packaged root's upper layer and the VM's own view of the
# host. The tmpfs directories under /var are mounted again on top.
mount_package_root() {
	local d
	[[ -d $PACKAGE_ROOT/usr ]] || {
		echo "PACKAGE_ROOT=$PACKAGE_ROOT has no usr/ (run through selftests/run.sh package)"
		return 1
	}
	modprobe overlay
	mkdir -p /run/pkg
	mount -t tmpfs pkg /run/pkg
	for d in usr etc var; do
		mkdir -p "/run/pkg/$d/upper" "/run/pkg/$d/work"
		mount -t overlay "pkg-$d" \
			-o "lowerdir=$PACKAGE_ROOT/$d:/$d,upperdir=/run/pkg/$d/upper,workdir=/run/pkg/$d/work" \
			"/$d"
	done
	mount -t tmpfs -o mode=1777 tmpfs /var/tmp
	mount -t tmpfs -o mode=0755 tmpfs /var/log
	# A "make install" on the host (CI runs one) put the tools in
	# /usr/local/bin, ahead of /usr/bin in PATH: hide them, in the fresh
	# layer only, so that what runs here is what the packages installed.
	rm -fv /usr/local/bin/metaroce-*
}

test_installed() {
	local pkg status
	for pkg in "${PACKAGES[@]}"; do
		status=$(dpkg-query -W -f='${db:Status-Abbrev} ${Version}' "$pkg")
		echo "$pkg: $status"
		[[ $status == "ii "* ]]
	done
	dpkg-query -L "${PACKAGES[@]}" >/tmp/package-files.txt
	grep -qx "$PROVIDER_DIR/libmetaroce-rdmav34.so" /tmp/package-files.txt
	grep -qx /etc/libibverbs.d/metaroce.driver /tmp/package-files.txt
	[[ $(cat /etc/libibverbs.d/metaroce.driver) == "driver metaroce" ]]
	grep -qx /usr/bin/metaroce-xfer /tmp/package-files.txt
	grep -qx /usr/bin/metaroce-pathstat /tmp/package-files.txt
	grep -q '^/usr/src/metaroce-[^/]*/dkms.conf$' /tmp/package-files.txt
}

# DKMS built and installed the module for every kernel with headers: the
# newest at dpkg -i, the others through the kernel's postinst hook.
test_dkms_every_kernel() {
	local kver status
	dkms status
	for kver in $(kernels_with_headers); do
		status=$(dkms status -m metaroce -k "$kver")
		[[ $status == *": installed"* ]] || {
			echo "not installed for $kver: $status"
			return 1
		}
		modinfo -k "$kver" -n metaroce | grep -q "/lib/modules/$kver/updates/dkms/metaroce.ko"
		modinfo -k "$kver" -F vermagic metaroce | grep -q "^$kver "
	done
}

# Debian's DKMS signs what it builds with its MOK key
# (/var/lib/dkms/mok.key), which Secure Boot needs enrolled (README).
test_signed() {
	local signer
	[[ -f /var/lib/dkms/mok.pub ]]
	signer=$(modinfo -F signer metaroce)
	echo "signer: $signer"
	[[ $signer == "DKMS module signing key" ]]
	openssl x509 -inform DER -in /var/lib/dkms/mok.pub -noout -subject |
		grep -q "DKMS module signing key"
}

test_modprobe() {
	[[ -z $METAROCE_KO && -z ${RDMAV_DRIVERS:-} ]]
	modprobe --show-depends metaroce | tee /tmp/depends.txt
	grep -q "^insmod /lib/modules/$(uname -r)/updates/dkms/metaroce.ko" /tmp/depends.txt
	modprobe metaroce
	[[ -d /sys/module/metaroce ]]
}

test_link_add() {
	topo_pair ns1 ns2
	ip netns exec ns1 rdma link add mr1 type metaroce netdev veth0
	ip netns exec ns2 rdma link add mr2 type metaroce netdev veth0
	wait_until 10 eval 'gids mr1 | grep -q ffff:0a00:0001'
	wait_until 10 eval 'gids mr2 | grep -q ffff:0a00:0002'
	rdma link show mr1/1 | grep -q 'state ACTIVE'
	# The packaged provider opens the device: libibverbs finds it through
	# /etc/libibverbs.d/metaroce.driver alone.
	ibv_devinfo -d mr1 | tee /tmp/devinfo.txt
	grep -q 'transport:.*InfiniBand' /tmp/devinfo.txt
	grep -q 'PORT_ACTIVE' /tmp/devinfo.txt
}

# xfer OP PORT: the packaged metaroce-xfer, server in ns2, client in ns1;
# both check every byte.
xfer() {
	local args=(-d mr2 -x 1 -o "$1" -p "$2" -s 65536 -t 8 -n 200 -T 60) spid rc=0
	ip netns exec ns2 metaroce-xfer "${args[@]}" >/tmp/xfer-server.log 2>&1 &
	spid=$!
	busybox sleep 1
	args[1]=mr1
	ip netns exec ns1 metaroce-xfer "${args[@]}" 10.0.0.2 || rc=$?
	wait "$spid" || rc=$?
	cat /tmp/xfer-server.log
	return "$rc"
}

test_transfer() {
	local path
	path=$(command -v metaroce-xfer) || true
	echo "metaroce-xfer: ${path:-not found}"
	[[ $path == /usr/bin/metaroce-xfer ]]
	xfer write 18500
	xfer read 18501
	xfer send 18502
}

# The module unloads once its devices are gone (the host then purges the
# packages from the same root: scripts/package-root.sh purge).
test_unload() {
	ip netns exec ns1 rdma link delete mr1
	ip netns exec ns2 rdma link delete mr2
	topo_cleanup
	metaroce_unload
	[[ ! -d /sys/module/metaroce ]]
}

TAP_DMESG_CHECK=1
if ! mount_package_root; then
	tap_plan 1
	tap_not_ok "the packaged root mounts"
	tap_finish
fi
run_test "dpkg: the three packages are installed, files in rdma-core's places" test_installed
run_test "DKMS built and installed the module for every kernel with headers" test_dkms_every_kernel
run_test "the module is signed with DKMS's MOK key" test_signed
run_test "modprobe loads the packaged module" test_modprobe
run_test "rdma link add; the packaged provider opens the devices" test_link_add
run_test "WRITE, READ and SEND with the packaged metaroce-xfer, every byte checked" test_transfer
run_test "rdma link delete; the module unloads" test_unload
tap_finish
