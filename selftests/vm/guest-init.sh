#!/bin/bash
# Stage-2 init of the vmrun guest: PID 1 after the initramfs switch_root'ed
# into the host root (read-only, 9p).  Run by the host's /bin/bash.
#
# The stage-1 init (initramfs-init) has mounted everything (API file systems,
# writable tmpfs dirs, /scratch).  This script brings up lo and the virtio
# NICs, runs the test script with the environment vmrun wrote
# into /scratch/vmN/config.sh, scans dmesg for kernel reports, stores the
# results in /scratch/vmN/ and powers the VM off.  It must always reach the
# power-off, so it does not use `set -e`; a failed setup step is reported and
# the script still runs (and most likely fails, which is what we want).
#
# Files in /scratch/vmN/ (N = VM index; /scratch is the host run directory):
#   config.sh          written by vmrun: VM_* settings, script, args, env
#   started            written here as the script starts (a VM without it
#                      crashed while booting)
#   status             written here: the script's exit status
#   dmesg.txt          written here: the whole kernel log after the script
#   dmesg-reports.txt  written here: kernel report lines found in it (if any)
#   done               written here last: the VM has finished (for the peer)
set -u
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/../lib" && pwd)

log() { echo "vmrun guest: $*"; }

# Power off at once (reboot(2) through busybox; sysrq "o" as a fallback).
# Should both fail, init exits: panic=-1 and -no-reboot end QEMU.
power_off() {
	busybox sync
	busybox poweroff -f
	echo o >/proc/sysrq-trigger
	sleep 60
	exit 1
}

# --- which VM are we? ------------------------------------------------------
VM_INDEX=0
for arg in $(</proc/cmdline); do
	case "$arg" in
	vmrun_index=*) VM_INDEX=${arg#vmrun_index=} ;;
	esac
done

OUT=/scratch/vm$VM_INDEX
# shellcheck source=/dev/null
source "$OUT/config.sh" || {
	log "cannot read $OUT/config.sh"
	power_off
}

echo "vm$VM_INDEX" >/proc/sys/kernel/hostname
busybox ip link set lo up # static busybox: much faster to exec under TCG

# --- NICs: find the interface of each link by its MAC address ------------
link_env=()
if ((VM_LINKS > 0)); then
	modprobe virtio_net || log "modprobe virtio_net failed"
	ifs=()
	for ((l = 0; l < VM_LINKS; l++)); do
		ifname=
		for dev in /sys/class/net/*; do
			if [[ $(<"$dev/address") == "${VM_MACS[l]}" ]]; then
				ifname=${dev##*/}
			fi
		done
		[[ -n $ifname ]] || log "no interface with MAC ${VM_MACS[l]} (link $l)"
		ifs+=("$ifname")
		link_env+=("VM_IF$l=$ifname" "VM_MAC$l=${VM_MACS[l]}"
			"VM_PEER_MAC$l=${VM_PEER_MACS[l]}")
	done
	link_env+=("VM_IFS=${ifs[*]}")
fi

# --- kmemleak (debug kernel) -------------------------------------------------
# Leaks from the boot are not the test's: forget them before it starts.
KMEMLEAK=/sys/kernel/debug/kmemleak
[[ -w $KMEMLEAK ]] && echo clear >"$KMEMLEAK"

# --- run the script ----------------------------------------------------------
cd "$VM_CWD" || {
	log "cannot cd to $VM_CWD, using /"
	cd /
}
echo started >"$OUT/started"
# `timeout` (without --foreground) runs the script in its own process group
# and kills the whole group: the guest stops the script a bit before the host
# kills QEMU, so that dmesg is still saved.  Then sysrq-w logs blocked tasks.
env -i "${VM_ENV[@]}" "${link_env[@]}" \
	VM_INDEX="$VM_INDEX" VM_PEER_INDEX=$((VM_COUNT > 1 ? 1 - VM_INDEX : VM_INDEX)) \
	VM_COUNT="$VM_COUNT" VM_LINKS="$VM_LINKS" VM_SCRATCH=/scratch VM_OUT="$OUT" \
	"$(command -v timeout)" --kill-after=5 "$VM_SCRIPT_TIMEOUT" /bin/bash "$VM_SCRIPT" "${VM_ARGS[@]}" \
	</dev/null
status=$?
if ((status == 124 || status == 137)); then
	log "script timed out after ${VM_SCRIPT_TIMEOUT}s; blocked tasks go to dmesg"
	echo w >/proc/sysrq-trigger
	status=124
fi
echo "$status" >"$OUT/status"

# --- kernel report scan --------------------------------------------------------
# kmemleak reports an object only once it has been unreferenced for a few
# seconds and a scan saw it; two scans apart make sure. Found leaks go to the
# log ("kmemleak: N new suspected memory leaks") and their traces to
# kmemleak.txt.
if [[ -w $KMEMLEAK ]]; then
	echo scan >"$KMEMLEAK"
	sleep 6
	echo scan >"$KMEMLEAK"
	cat "$KMEMLEAK" >"$OUT/kmemleak.txt"
	[[ -s $OUT/kmemleak.txt ]] || rm -f "$OUT/kmemleak.txt"
fi
# shellcheck source=../lib/dmesg.sh
source "$LIB_DIR/dmesg.sh"
dmesg >"$OUT/dmesg.txt"
if ! dmesg_scan "$OUT/dmesg.txt" >"$OUT/dmesg-reports.txt"; then
	log "KERNEL REPORTS FOUND in dmesg (whole log: vm$VM_INDEX/dmesg.txt):"
	head -n 100 "$OUT/dmesg-reports.txt"
else
	rm -f "$OUT/dmesg-reports.txt"
fi

echo "done" >"$OUT/done"
power_off
