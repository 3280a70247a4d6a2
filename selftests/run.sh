#!/bin/bash
# Runs the MetaRoCE selftests in QEMU VMs (selftests/vm/vmrun) and prints a
# summary line "N passed, N failed". Each suite is a TAP script in
# selftests/metaroce/; its VM topology is given below.
#
#   selftests/run.sh [--installed] [--debug-kernel]
#                    [--kver KVER [--kernel FILE]] [SUITE...]
#
# By default the module and the provider come from the build tree (make);
# --installed tests what "make install" put on the host (modprobe metaroce,
# the provider in /etc/libibverbs.d).
#
# The VMs boot Debian's kernel. --debug-kernel (or VM_KERNEL=debug) boots
# the debug kernel instead (scripts/debug-kernel.sh: KASAN, KFENCE, UBSAN,
# lockdep, kmemleak, ...; built once, about an hour on 2 cores, and cached),
# with the module built for it (scripts/build-for-kernel.sh). It takes a
# minute to boot and another to scan for leaks at the end, so the one-VM
# suites then share one VM (selftests/vm/run-suites.sh); a suite may take
# SUITE_TIMEOUT seconds (900, on the debug kernel 3600).
#
# --kver KVER (or VM_KVER=KVER) boots another distribution kernel, e.g.
# Debian's 6.12 next to the default 6.1: /boot/vmlinuz-KVER, or --kernel
# FILE (VM_KERNEL=FILE) for an image kept elsewhere; its modules must be in
# /lib/modules/KVER, its headers in /lib/modules/KVER/build. The module and
# the in-kernel test client are built for it into BUILD/kernel-KVER
# (scripts/build-for-kernel.sh). docs/compatibility.md says how to set up
# 6.12 that way without making it the machine's default kernel.
set -uo pipefail

TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
cd "$TOP" || exit 1

# name:VMs:links:script
SUITES=(
	"device:1:0:selftests/metaroce/device.sh"
	"kverbs:1:0:selftests/metaroce/kverbs.sh"
	"cm:1:0:selftests/metaroce/cm.sh"
	"perftest-netns:1:0:selftests/metaroce/perftest.sh"
	"perftest-2vm:2:1:selftests/metaroce/perftest.sh"
	"consumers:2:2:selftests/metaroce/consumers.sh"
	"nvme:2:2:selftests/metaroce/nvme.sh"
	"verbs:1:0:selftests/metaroce/verbs.sh"
	"protocol2:1:0:selftests/metaroce/protocol2.sh"
	"interop:1:0:selftests/metaroce/interop.sh"
	"compliance:1:0:selftests/metaroce/compliance.sh"
	"loss:1:0:selftests/metaroce/loss.sh"
	"limits:1:0:selftests/metaroce/limits.sh"
	"xfrm:1:0:selftests/metaroce/xfrm.sh"
	"fuzz:1:0:selftests/metaroce/fuzz.sh"
	"teardown:1:0:selftests/metaroce/teardown.sh"
	"package:1:0:selftests/metaroce/package.sh"
)

installed=
distro=1
other_kver=${VM_KVER:-}
other_image=
case ${VM_KERNEL:-distro} in
distro) ;;
debug) distro= ;;
*) other_image=$VM_KERNEL ;;
esac
selected=()
while (($#)); do
	case $1 in
	--installed) installed=1 ;;
	--debug-kernel) distro= ;;
	--kver)
		other_kver=${2:?--kver KVER}
		shift
		;;
	--kernel)
		other_image=${2:?--kernel FILE}
		shift
		;;
	-h | --help)
		sed -n '2,/^set /{/^set /!p}' "$0"
		exit 0
		;;
	*) selected+=("$1") ;;
	esac
	shift
done
if [[ -n $other_image && -z $other_kver ]]; then
	echo "run.sh: --kernel FILE (VM_KERNEL=FILE) needs --kver KVER (VM_KVER)" >&2
	exit 2
fi

vm_env=()
kernel_args=()
ko=$TOP/kernel/metaroce.ko
if [[ -z $distro ]]; then
	dbg_kver=$(scripts/debug-kernel.sh kver) &&
		dbg_image=$(scripts/debug-kernel.sh image) &&
		scripts/build-for-kernel.sh "$dbg_kver" "$BUILD/debug-kernel" \
			${installed:+--install} || {
		echo "not ok - the debug kernel or the module for it did not build"
		echo "selftests: 0 passed, 1 failed"
		exit 1
	}
	echo "# VM kernel: $dbg_kver (debug build, $dbg_image)"
	kernel_args=(--kver "$dbg_kver" --kernel "$dbg_image")
	ko=$BUILD/debug-kernel/kernel/metaroce.ko
	vm_env+=(--env "METAROCE_KTEST=$BUILD/debug-kernel/ktest/metaroce_ktest.ko"
		--env METAROCE_DEBUG_KERNEL=1)
elif [[ -n $other_kver ]]; then
	other_build=$BUILD/kernel-$other_kver
	scripts/build-for-kernel.sh "$other_kver" "$other_build" \
		${installed:+--install} || {
		echo "not ok - the module for kernel $other_kver did not build"
		echo "selftests: 0 passed, 1 failed"
		exit 1
	}
	echo "# VM kernel: $other_kver (${other_image:-/boot/vmlinuz-$other_kver})"
	kernel_args=(--kver "$other_kver" ${other_image:+--kernel "$other_image"})
	ko=$other_build/kernel/metaroce.ko
	vm_env+=(--env "METAROCE_KTEST=$other_build/ktest/metaroce_ktest.ko")
fi
if [[ -z $installed ]]; then
	vm_env+=(--env "METAROCE_KO=$ko"
		--env "RDMAV_DRIVERS=$BUILD/userspace/provider/libmetaroce")
fi
# The fuzz suite's knobs (selftests/metaroce/fuzz.sh), e.g. FUZZ_SECONDS=600
# for a long run; RXE_BASELINE=0 runs consumers and nvme on mr0 only
# (selftests/metaroce/side_by_side.sh); METAROCE_PROTOCOL=2 runs a suite
# on protocol v2; COMPLIANCE_CASES="case ..." runs only those compliance
# cases.
for v in METAROCE_PROTOCOL COMPLIANCE_CASES RXE_BASELINE FUZZ_SECONDS FUZZ_SEED FUZZ_AVOID_KNOWN FUZZ_RATE FUZZ_ONLY FUZZ_VERBOSE_FROM; do
	[[ -n ${!v:-} ]] && vm_env+=(--env "$v=${!v}")
done

# Seconds a suite may take: the debug kernel runs them several times slower.
suite_timeout=${SUITE_TIMEOUT:-$([[ -z $distro ]] && echo 3600 || echo 900)}

passed=0
failed=0
logdir=$BUILD/selftests${other_kver:+-$other_kver}
mkdir -p "$logdir"

# The emulated NIC (QEMU 7.2's virtio-net over -netdev dgram) now and then
# stops taking packets from a guest for good: the guest logs "NETDEV
# WATCHDOG: ... transmit queue 0 timed out" every few seconds and nothing
# crosses the link again. Seen in a few of some hundred VM runs, on either
# side of the link, with no other kernel report (docs/results/README.md).
# A suite that fails with that in its log is run once more, and says so.
nic_stalled() {
	grep -qE 'NETDEV WATCHDOG: .*transmit queue [0-9]+ timed out' "$1"
}

# Debian's 6.12 under TCG with two vCPUs once took an "Oops: int3" in
# sched_clock_cpu() during its initcalls, before init ran (code patched
# with int3, the breakpoint seen by the other vCPU after it was removed).
# vmrun reports a guest that never started the script; such a suite is run
# once more too, and says so.
boot_crashed() {
	grep -q 'crashed while booting, before the script started' "$1"
}

run_suite() {
	local name=$1 vms=$2 links=$3 script=$4 log=$logdir/$1.log rc
	local p f attempt vmrun_failed retry why env=("${vm_env[@]}")

	if [[ $name == package ]]; then
		package_env || {
			failed=$((failed + 1))
			return
		}
		env=("${package_vm_env[@]}")
	fi
	for attempt in 1 2; do
		echo "=== $name ($vms VM$( ((vms > 1)) && echo s))"
		selftests/vm/vmrun --vms "$vms" ${links:+--links "$links"} \
			"${kernel_args[@]}" \
			--timeout "$suite_timeout" "${env[@]}" -- \
			"$script" 2>&1 | tee "$log"
		rc=${PIPESTATUS[0]}
		# Count TAP results (with two VMs, each VM reports its own).
		p=$(grep -cE '^(\[vm[0-9]\] )?ok [0-9]+' "$log")
		f=$(grep -cE '^(\[vm[0-9]\] )?not ok [0-9]+' "$log")
		# A timeout, a crash or a kernel report after the last test.
		vmrun_failed=$((rc != 0 && f == 0))
		((vmrun_failed)) && f=1
		retry=
		if ((f != 0 && attempt == 1)); then
			if boot_crashed "$log"; then
				retry=boot-crash
			elif nic_stalled "$log"; then
				retry=nic-stall
			fi
		fi
		if [[ -z $retry ]]; then
			((vmrun_failed)) && echo "not ok - $name: vmrun exit status $rc"
			break
		fi
		cp "$log" "$log.$retry"
		case $retry in
		boot-crash) why="the guest kernel crashed while booting" ;;
		nic-stall) why="the emulated NIC stopped transmitting (NETDEV WATCHDOG)" ;;
		esac
		echo "# $name: $why (log kept in $log.$retry): running the suite again"
	done
	passed=$((passed + p))
	failed=$((failed + f))
	[[ $name == package ]] && package_purge
}

# package_purge: dpkg --purge from the package suite's root, on the host
# (scripts/package-root.sh purge), and its checks that nothing is left.
package_purge() {
	local log=$logdir/package-purge.log
	echo "=== package: purge (host)"
	scripts/package-root.sh purge "$BUILD/package-root" 2>&1 | tee "$log"
	passed=$((passed + $(grep -cE '^ok [0-9]+' "$log")))
	failed=$((failed + $(grep -cE '^not ok [0-9]+' "$log")))
	# No result at all: the script itself failed.
	grep -qE '^(not )?ok [0-9]+' "$log" || failed=$((failed + 1))
}

# package_env: the package suite tests what the Debian packages install,
# not the build tree: the packages (make deb, built here if missing) are
# installed into an overlay root on the host (scripts/package-root.sh, where
# DKMS builds the module natively, not under emulation), and the VM stacks
# that root's upper layers over its own (PACKAGE_ROOT). Sets package_vm_env.
package_env() {
	local debs=$BUILD/deb root=$BUILD/package-root
	package_vm_env=()
	if ! compgen -G "$debs/metaroce-dkms_*.deb" >/dev/null; then
		scripts/build-deb.sh "$debs" >"$logdir/package-deb.log" 2>&1 || {
			tail -n 20 "$logdir/package-deb.log"
			echo "not ok - package: make deb failed (log: $logdir/package-deb.log)"
			return 1
		}
	fi
	scripts/package-root.sh install "$debs" "$root" >"$logdir/package-root.log" 2>&1 || {
		tail -n 30 "$logdir/package-root.log"
		echo "not ok - package: installing the packages into $root failed (log: $logdir/package-root.log)"
		return 1
	}
	package_vm_env=(--env "PACKAGE_ROOT=$root/upper")
}

# run_batch NAME:SCRIPT...: the one-VM suites given in one VM
# (selftests/vm/run-suites.sh), each with its own log and time limit; a
# suite that did not end (the VM timed out or crashed) counts as failed, and
# one the emulated NIC stalled in runs again on its own.
run_batch() {
	local each=$suite_timeout log=$logdir/batch.log rc entry name script
	local scripts=() p f section

	for entry in "$@"; do
		scripts+=("${entry#*:}")
	done
	echo "=== ${*%%:*} (1 VM, one boot)"
	selftests/vm/vmrun --vms 1 "${kernel_args[@]}" \
		--timeout $((each * $# + 300)) "${vm_env[@]}" -- \
		selftests/vm/run-suites.sh "$each" "${scripts[@]}" 2>&1 | tee "$log"
	rc=${PIPESTATUS[0]}
	for entry in "$@"; do
		name=${entry%%:*} script=${entry#*:} section=$logdir/$name.log
		sed -n "\|^### suite begin $script\$|,\|^### suite end $script |p" \
			"$log" >"$section"
		p=$(grep -cE '^ok [0-9]+' "$section")
		f=$(grep -cE '^not ok [0-9]+' "$section")
		if ! grep -qE "^### suite end $script status 0\$" "$section"; then
			((f == 0)) && echo "not ok - $name: did not end with status 0"
			((f == 0)) && f=1
			if nic_stalled "$section"; then
				echo "# $name: the emulated NIC stopped transmitting: running the suite again on its own"
				run_suite "$name" 1 "" "$script"
				continue
			fi
		fi
		passed=$((passed + p))
		failed=$((failed + f))
	done
	if ((rc != 0)) && grep -qE '^(vmrun: .*kernel reports|vmrun guest: KERNEL REPORTS)' "$log"; then
		# A report after the last test of the last suite.
		echo "not ok - ${*%%:*}: kernel report at the end of the run"
		failed=$((failed + 1))
	fi
}

# The debug kernel boots the one-VM suites once, in one batch; Debian's
# kernel, which boots in seconds, gives each its own VM.
batch=()
for suite in "${SUITES[@]}"; do
	IFS=: read -r name vms links script <<<"$suite"
	if ((${#selected[@]})) && [[ ! " ${selected[*]} " == *" $name "* ]]; then
		continue
	fi
	((links == 0)) && links=
	if [[ -z $distro && $vms == 1 && $name != package ]]; then
		batch+=("$name:$script")
		continue
	fi
	run_suite "$name" "$vms" "$links" "$script"
done
((${#batch[@]})) && run_batch "${batch[@]}"

echo "selftests: $passed passed, $failed failed"
((failed == 0))
