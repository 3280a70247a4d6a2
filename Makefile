# MetaRoCE top-level build.
#
#   make deps       install every package the build and tests need (apt)
#   make            build the kernel module, the userspace and the eBPF objects
#   make check      host unit tests, then the selftests in QEMU VMs
#   make run        the main job: ib_write_bw over MetaRoCE between two hosts
#   make bench      MetaRoCE against the kernel's rxe, side by side
#   make install / uninstall
#
# Variables: KVER / KDIR (target kernel), WERROR=1 (warnings are errors),
# BUILD (build directory, default ./build).

BUILD ?= $(CURDIR)/build
KVER ?= $(shell scripts/target-kernel.sh)
KDIR ?= /lib/modules/$(KVER)/build
WERROR ?=
JOBS ?= $(shell nproc)

CMAKE_BUILD := $(BUILD)/userspace
CMAKE_FLAGS := -DMETAROCE_WERROR=$(if $(WERROR),ON,OFF)

export KVER

all: kernel userspace ebpf

deps:
	scripts/install-deps.sh

kernel:
	$(MAKE) -C kernel KDIR=$(KDIR) KVER=$(KVER) WERROR=$(WERROR)
	$(MAKE) -C selftests/metaroce/ktest KDIR=$(KDIR) KVER=$(KVER) \
		WERROR=$(WERROR)

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

.PHONY: all deps kernel userspace ebpf install uninstall check check-host \
	check-vm check-vm-debug debug-kernel run bench clean
