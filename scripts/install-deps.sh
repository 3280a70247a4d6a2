#!/usr/bin/env bash
# Installs, from Debian's archive, every package the build, the tests and the
# VM bench need. Idempotent: does nothing when all are present.
set -euo pipefail

packages=(
	# target kernel (the VM boots it) and headers to build the module
	linux-image-amd64 linux-headers-amd64
	# Debian 12's other kernel, 6.12: the module is built for it too
	# (make kernel-6.12). Its headers pull in its image; the default
	# kernel stays linux-image-amd64's (scripts/target-kernel.sh).
	linux-headers-6.12-amd64
	# VM bench
	qemu-system-x86 busybox-static kmod iproute2 ethtool
	# RDMA userspace: libibverbs, providers, tools, perftest
	rdma-core ibverbs-utils ibverbs-providers perftest
	libibverbs-dev librdmacm-dev rdmacm-utils
	# what consumers run (selftests/metaroce/consumers.sh)
	ucx-utils libfabric-bin qperf openmpi-bin libopenmpi-dev
	# NVMe over RDMA (selftests/metaroce/nvme.sh)
	nvme-cli fio
	# eBPF
	bpftool libbpf-dev libelf-dev zlib1g-dev clang llvm
	# userspace build and tests
	build-essential cmake googletest libgtest-dev libclang-rt-14-dev
	# benchmarks and plots
	iperf3 gnuplot-nox
	# building for other kernels (scripts/build-for-kernel.sh)
	rsync
	# Debian packages (make deb) and their install test: DKMS, lintian
	debhelper dh-dkms dkms lintian fakeroot openssl
	# the in-tree build (scripts/intree-build.sh): the kernel source and
	# what its build needs, and sparse
	linux-source-6.1 flex bison bc libssl-dev sparse
)

missing=()
for pkg in "${packages[@]}"; do
	status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
	[ "$status" = installed ] || missing+=("$pkg")
done

if [ ${#missing[@]} -eq 0 ]; then
	echo "deps: all ${#packages[@]} packages installed"
	exit 0
fi

echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
