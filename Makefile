# MetaRoCE top-level build.
#
#   make deps       install every package the build and tests need (apt)
#   make            build the kernel module, the userspace and the eBPF objects;
#                   the module also for Debian's 6.12 when its headers are
#                   installed (make kernel-6.12)
#   make check      host unit tests, then the selftests in QEMU VMs
#   make check-vm-6.12  the selftests in VMs booting Debian's 6.12 (not part
#                   of make check; VM_KERNEL=FILE for an image not in /boot)
#   make run        the main job: ib_write_bw over MetaRoCE between two hosts
#   make bench      MetaRoCE against the kernel's rxe, side by side
#   make install / uninstall
#   make deb        Debian packages (metaroce-dkms, ibverbs-provider-metaroce,
#                   metaroce-tools) in $(BUILD)/deb, checked by lintian
#
# Variables: KVER / KDIR (target kernel), WERROR=1 (warnings are errors),
# BUILD (build directory, default ./build).

BUILD ?= $(CURDIR)/build
KVER ?= $(shell scripts/target-kernel.sh)
KDIR ?= /lib/modules/$(KVER)/build
WERROR ?=
JOBS ?= $(shell nproc)

# Debian 12's other kernel, 6.12 (linux-headers-6.12-amd64, installed by
# make deps): the version its headers meta package points to, if installed.
# The module and the ktest module are built for it in $(BUILD)/kernel-KVER,
# warnings as errors; the default build above stays the one for KVER.
KVER_612 ?= $(shell dpkg-query -W -f='$${Depends}' linux-headers-6.12-amd64 \
	2>/dev/null | sed -n 's/^linux-headers-\([^ ,|]*\).*/\1/p')

CMAKE_BUILD := $(BUILD)/userspace
CMAKE_FLAGS := -DMETAROCE_WERROR=$(if $(WERROR),ON,OFF)

export KVER

all: kernel $(if $(KVER_612),kernel-6.12) userspace ebpf

deps:
	scripts/install-deps.sh

kernel:
	$(MAKE) -C kernel KDIR=$(KDIR) KVER=$(KVER) WERROR=$(WERROR)
	$(MAKE) -C selftests/metaroce/ktest KDIR=$(KDIR) KVER=$(KVER) \
		WERROR=$(WERROR)

kernel-6.12:
	@test -n "$(KVER_612)" || { \
		echo "kernel-6.12: linux-headers-6.12-amd64 is not installed (make deps)" >&2; \
		exit 1; }
	scripts/build-for-kernel.sh $(KVER_612) $(BUILD)/kernel-$(KVER_612)

userspace:
	cmake -S userspace -B $(CMAKE_BUILD) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(CMAKE_BUILD) -j $(JOBS)

ebpf:
	$(MAKE) -C ebpf BUILD=$(BUILD)/ebpf WERROR=$(WERROR)

install: all
	$(MAKE) -C kernel KDIR=$(KDIR) KVER=$(KVER) modules_install
	depmod -a $(KVER)
	cmake --install $(CMAKE_BUILD)
	$(MAKE) -C ebpf BUILD=$(BUILD)/ebpf install

# Debian packages, built from a clean copy of the tree (scripts/build-deb.sh).
deb:
	scripts/build-deb.sh $(BUILD)/deb

uninstall:
	rm -f /lib/modules/$(KVER)/updates/metaroce.ko
	depmod -a $(KVER)
	xargs -r rm -f < $(CMAKE_BUILD)/install_manifest.txt 2>/dev/null || true
	$(MAKE) -C ebpf BUILD=$(BUILD)/ebpf uninstall

# INSTALLED=1: test what "make install" put on the host instead of the
# build tree.
INSTALLED ?=
TEST_FLAGS := $(if $(INSTALLED),--installed)

# Everything: host unit tests, sanitizers and fuzzing, the VM selftests.
check: deps all
	scripts/check.sh $(TEST_FLAGS)

check-host: userspace
	cd $(CMAKE_BUILD) && ctest --output-on-failure -j $(JOBS)

check-vm: all
	selftests/run.sh $(TEST_FLAGS)

# The VM suites on Debian's 6.12 (not part of make check yet).
check-vm-6.12: kernel-6.12 userspace ebpf
	selftests/run.sh --kver $(KVER_612) $(TEST_FLAGS)

# The VM suites on the debug kernel (KASAN, lockdep, kmemleak, ...).
debug-kernel:
	scripts/debug-kernel.sh build

check-vm-debug: all debug-kernel
	selftests/run.sh --debug-kernel $(TEST_FLAGS)

run: deps all
	scripts/run-write-bw.sh $(TEST_FLAGS)

bench: deps all
	scripts/bench.sh $(TEST_FLAGS)

clean:
	$(MAKE) -C kernel KDIR=$(KDIR) clean
	$(MAKE) -C selftests/metaroce/ktest KDIR=$(KDIR) clean
	rm -rf $(BUILD)

.PHONY: all deps deb kernel kernel-6.12 check-vm-6.12 userspace ebpf install uninstall check check-host \
	check-vm check-vm-debug debug-kernel run bench clean
