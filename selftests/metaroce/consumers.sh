#!/bin/bash
# What people run on RDMA, between two VMs, on MetaRoCE and on the kernel's
# rxe side by side: UCX (ucx_info, ucx_perftest over rc_verbs and ud_verbs,
# UCT's atomics over rc_verbs, and with UCX's own choice of transports),
# Open MPI over UCX (a program of ours that checks every element it moves,
# one rank per VM), libibverbs' SRQ pingpong (data checked), qperf over
# rdma_cm, and libfabric's verbs provider (msg endpoints, and RDM endpoints
# over ofi_rxm at its default universe size; data checked).
#
# Two VMs joined by two links (vmrun --vms 2 --links 2): mr0 on link 0, rxe0
# on link 1, so that rdma_cm finds each device by its own address. VM 0
# serves, VM 1 connects. Every program runs on mr0 and then, unless
# RXE_BASELINE=0, on rxe0 with the same arguments. mr0 must pass; an rxe0
# run that fails is reported as a skip that says why (the table in
# docs/compatibility.md shows both; make bench runs them).
# Each run's figure (bandwidth, latency) is printed as "# figure: DEV TEST
# VALUE UNIT" and collected in $VM_SCRATCH/consumers-figures.txt; the last
# test prints them as a table.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/guest.sh"
source "$(dirname "$0")/side_by_side.sh"

TIMEOUT=${CONSUMERS_TIMEOUT:-180}
FIGURES=$VM_SCRATCH/consumers-figures.txt
MPI_DIR=$(cd "$(dirname "$0")/mpi" && pwd)

# The index of DEV's RoCEv2 GID for its link's IPv4 address.
gid_index() {
	local dir=/sys/class/infiniband/$1/ports/1 want i
	want=$(dev_ipv4_gid "$1")
	for ((i = 0; i < 16; i++)); do
		[[ $(cat "$dir/gids/$i" 2>/dev/null) == "$want" &&
			$(cat "$dir/gid_attrs/types/$i" 2>/dev/null) == "RoCE v2" ]] &&
			{ echo "$i"; return 0; }
	done
	echo "no RoCE v2 GID for $want on $1" >&2
	return 1
}

setup() {
	side_by_side_setup
	modprobe rdma_ucm
	wait_until 10 gid_index mr0
	wait_until 10 gid_index rxe0
	((VM_INDEX == 1)) && : >"$FIGURES"
	return 0
}

# duo PORT SERVER... -- CLIENT...: SERVER in VM 0 and, once it listens on
# TCP PORT, CLIENT in VM 1. Sets DUO_OUT to this VM's output; returns 0 in
# both VMs if both sides exited 0. With DUO_DAEMON=1 the server is a daemon
# (qperf) that is stopped once the client is done.
duo() {
	local port=$1 rc=0 peer srv=() pid out=/tmp/duo.$1.out
	shift
	while [[ $1 != -- ]]; do
		srv+=("$1")
		shift
	done
	shift
	if ((VM_INDEX == 0)); then
		timeout "$TIMEOUT" "${srv[@]}" >"$out" 2>&1 &
		pid=$!
		wait_until 30 eval "ss -Hltn 'sport = :$port' | grep -q LISTEN" ||
			echo "the server does not listen on $port"
		vm_publish "duo.$port" up
		if [[ -n ${DUO_DAEMON:-} ]]; then
			VM_WAIT_TIMEOUT=$((TIMEOUT + 30)) \
				vm_wait "duo.$port.rc.1" >/dev/null || true
			kill "$pid" 2>/dev/null || true
			wait "$pid" || true
		else
			wait "$pid" || rc=$?
		fi
		DUO_OUT=$(<"$out")
	else
		vm_wait "duo.$port" >/dev/null
		DUO_OUT=$(timeout "$TIMEOUT" "$@" 2>&1) || rc=$?
	fi
	vm_publish "duo.$port.rc.$VM_INDEX" "$rc"
	peer=$(VM_WAIT_TIMEOUT=$((TIMEOUT + 30)) \
		vm_wait "duo.$port.rc.$VM_PEER_INDEX") || peer=1
	echo "exit status: this VM $rc, the other $peer"
	((rc == 0 && peer == 0))
}

# outcome DEV STATUS: mr0 passes or fails; rxe0 passes or skips, saying why.
outcome() {
	local dev=$1 status=$2
	((status == 0)) && return 0
	echo "$DUO_OUT" | grep -iE "error|fail|unable|couldn|timeout" | head -n 8
	echo "$DUO_OUT" | tail -n 8
	[[ $dev == mr0 ]] && return 1
	tap_skip "rxe fails this (output above)"
}

# A port per test: both VMs number their tests alike.
port() { echo $((20000 + 10 * _tap_num + ${1:-0})); }

ucx_lists_transports() {
	local dev=$1 out
	out=$(ucx_info -d)
	local tl
	for tl in rc_verbs ud_verbs; do
		grep -A1 "Transport: $tl\$" <<<"$out" | grep -q "Device: $dev:1" ||
			{ echo "ucx_info -d lists no $tl on $dev:1"; outcome "$dev" 1; }
	done
	echo "ucx_info -d: rc_verbs and ud_verbs on $dev:1"
}

# ucx DEV TLS TEST SIZE ITERS [ARGS...]: ucx_perftest TEST with UCX_TLS=TLS
# ("default": UCX's own choice) on DEV only; its figure is labelled TLS, or
# UCX_LABEL.
ucx() {
	local dev=$1 tls=$2 test=$3 size=$4 iters=$5 p env rc=0 final label
	shift 5
	label=${UCX_LABEL:-$tls}
	p=$(port)
	# A UD endpoint that hears nothing gives up after 10 s, not 30 (rxe).
	env=(env UCX_NET_DEVICES="$dev:1" UCX_UD_TIMEOUT=10s)
	[[ $tls != default ]] && env+=(UCX_TLS="$tls")
	duo "$p" "${env[@]}" ucx_perftest -p "$p" -- \
		"${env[@]}" ucx_perftest "$(server_ip "$dev")" -p "$p" \
		-t "$test" -s "$size" -n "$iters" "$@" || rc=$?
	outcome "$dev" "$rc"
	((VM_INDEX == 1)) || return 0
	final=$(awk '$1 == "Final:"' <<<"$DUO_OUT")
	echo "$final"
	# The "overall" columns: over the whole run (an "average" is over the
	# last report interval, and -nan when no iteration ended in it).
	if [[ $test == *lat || $test == fadd || $test == cswap ]]; then
		figure "$dev" "ucx_perftest $test $size B ($label)" \
			"$(awk '{ print $5 }' <<<"$final")" us
	else
		figure "$dev" "ucx_perftest $test $size B ($label)" \
			"$(awk '{ print $7 }' <<<"$final")" MB/s
	fi
}

# ucx_lossy DEV TLS TEST SIZE ITERS [ARGS...]: ucx with 1% loss each way,
# and the share of the lossless run's figure it kept.
ucx_lossy() {
	local dev=$1 tls=$2 test=$3 size=$4
	UCX_LABEL="$tls, 1% loss" lossy "$dev" ucx "$@"
	kept "$dev" "ucx_perftest $test $size B ($tls)" \
		"ucx_perftest $test $size B ($tls, 1% loss)"
}

srq_pingpong() {
	local dev=$1 p gid rc=0
	p=$(port)
	gid=$(gid_index "$dev")
	duo "$p" ibv_srq_pingpong -d "$dev" -g "$gid" -p "$p" -c -n 500 -- \
		ibv_srq_pingpong -d "$dev" -g "$gid" -p "$p" -c -n 500 \
		"$(server_ip "$dev")" || rc=$?
	outcome "$dev" "$rc"
	grep -E "Mbit/sec|usec/iter" <<<"$DUO_OUT"
	figure "$dev" "ibv_srq_pingpong 4096 B" \
		"$(awk '/usec\/iter/ { print $(NF - 1) }' <<<"$DUO_OUT")" us/iter
}

qperf_rc() {
	local dev=$1 p rc=0 t
	p=$(port)
	DUO_DAEMON=1 duo "$p" qperf -lp "$p" -- \
		qperf -lp "$p" -cm1 -t 3 "$(server_ip "$dev")" \
		rc_bw rc_lat rc_rdma_write_bw rc_rdma_read_bw || rc=$?
	# qperf exits 0 when a test fails: each must report its number.
	if ((VM_INDEX == 1 && rc == 0)); then
		for t in rc_bw rc_lat rc_rdma_write_bw rc_rdma_read_bw; do
			grep -A1 "^$t:" <<<"$DUO_OUT" | grep -qE "(bw|latency) +=" ||
				{ echo "qperf $t gave no result"; rc=1; }
		done
	fi
	outcome "$dev" "$rc"
	echo "$DUO_OUT"
	((VM_INDEX == 1)) || return 0
	# qperf picks the unit: "bw = 13.2 MB/sec", "latency = 1.52 ms".
	for t in rc_bw rc_lat rc_rdma_write_bw rc_rdma_read_bw; do
		figure "$dev" "qperf $t" $(grep -A1 "^$t:" <<<"$DUO_OUT" |
			awk '$2 == "=" { print $3, $4 }')
	done
}

# fi_pp DEV EP PROVIDER: fi_pingpong, every size up to 1 MiB, data checked.
fi_pp() {
	local dev=$1 ep=$2 prov=$3 p rc=0 last
	p=$(port)
	duo "$p" fi_pingpong -p "$prov" -e "$ep" -d "$dev" -B "$p" -c -- \
		fi_pingpong -p "$prov" -e "$ep" -d "$dev" -P "$p" -c \
		"$(server_ip "$dev")" || rc=$?
	outcome "$dev" "$rc"
	last=$(grep -E '^[0-9]+[kmg]? ' <<<"$DUO_OUT" | tail -n 1)
	echo "$last"
	figure "$dev" "fi_pingpong $ep $(awk '{ print $1 }' <<<"$last") B" \
		"$(awk '{ print $6 }' <<<"$last")" MB/s
}

# mpi DEV: mpi_check (mpi/mpi_check.c: ping-pong, MPI_Allreduce,
# MPI_Alltoall, every element checked) as two ranks, one per VM, over
# Open MPI's pml ucx on DEV; mpirun in VM 0 starts the other rank through
# mpi/vm-rsh, which VM 1 serves.
mpi() {
	local dev=$1 bin=$VM_SCRATCH/mpi_check rc=0 out
	command -v mpirun >/dev/null || tap_skip "Open MPI is not installed"
	if ((VM_INDEX == 1)); then
		rm -f "$VM_SCRATCH/rsh/STOP"
		"$MPI_DIR/vm-rsh" --serve &
		rc=$(VM_WAIT_TIMEOUT=$((TIMEOUT + 30)) vm_wait "mpi.$dev.done") ||
			rc=1
		touch "$VM_SCRATCH/rsh/STOP"
		wait
		DUO_OUT="(mpirun's output is in vm0's log)"
		outcome "$dev" "$rc"
		return 0
	fi
	[[ -x $bin ]] || mpicc -O2 -o "$bin" "$MPI_DIR/mpi_check.c"
	out=$(VM_WAIT_TIMEOUT=$TIMEOUT timeout "$TIMEOUT" mpirun --allow-run-as-root \
		-np 2 --host "$(vm_link_ip 0 0):1,$(vm_link_ip 0 1):1" \
		--mca plm_rsh_agent "$MPI_DIR/vm-rsh" \
		--mca plm_rsh_no_tree_spawn 1 \
		--mca oob_tcp_if_include 10.200.0.0/24 \
		--mca pml ucx --mca osc ucx --mca btl self \
		-x UCX_NET_DEVICES="$dev:1" -x UCX_UD_TIMEOUT=10s \
		"$bin" 2>&1) || rc=$?
	grep -q "^mpi_check: PASS" <<<"$out" || rc=1
	vm_publish "mpi.$dev.done" "$rc"
	echo "$out"
	DUO_OUT=$out
	outcome "$dev" "$rc"
	FIGURE_VM=0 figure "$dev" "Open MPI ping-pong 1 MiB" \
		"$(awk '/^ping-pong 1048576 bytes/ { print $4 }' <<<"$out")" us
}

tap_plan $((1 + 17 * ${#DEVS[@]} + 1))
run_test "setup: mr0 on link 0, rxe0 on link 1" setup
for dev in "${DEVS[@]}"; do
	run_test "$dev: ucx_info -d lists rc_verbs and ud_verbs" ucx_lists_transports "$dev"
	run_test "$dev: ucx_perftest tag_bw 64 KiB over rc (rc_verbs, ud_verbs aux)" \
		ucx "$dev" rc tag_bw 65536 500
	run_test "$dev: ucx_perftest ucp_put_bw 64 KiB over rc" \
		ucx "$dev" rc ucp_put_bw 65536 500
	run_test "$dev: ucx_perftest tag_lat 8 B over rc" ucx "$dev" rc tag_lat 8 1000
	run_test "$dev: ucx_perftest am_lat 8 B, UCT rc_verbs" \
		ucx "$dev" rc_verbs am_lat 8 1000 -x rc_verbs -d "$dev:1"
	run_test "$dev: ucx_perftest fadd 8 B, UCT rc_verbs (the device's atomics)" \
		ucx "$dev" rc_verbs fadd 8 1000 -x rc_verbs -d "$dev:1"
	run_test "$dev: ucx_perftest cswap 8 B, UCT rc_verbs (the device's atomics)" \
		ucx "$dev" rc_verbs cswap 8 1000 -x rc_verbs -d "$dev:1"
	run_test "$dev: ucx_perftest put_bw 64 KiB, UCT rc_verbs" \
		ucx "$dev" rc_verbs put_bw 65536 500 -x rc_verbs -d "$dev:1" -D zcopy
	run_test "$dev: ucx_perftest put_bw 64 KiB, UCT rc_verbs, 1% loss each way" \
		ucx_lossy "$dev" rc_verbs put_bw 65536 200 -x rc_verbs -d "$dev:1" \
		-D zcopy
	run_test "$dev: ucx_perftest tag_bw 64 KiB over rc, 1% loss each way" \
		ucx_lossy "$dev" rc tag_bw 65536 200
	run_test "$dev: ucx_perftest tag_bw 4 KiB over ud_verbs" \
		ucx "$dev" ud_verbs tag_bw 4096 500
	run_test "$dev: ucx_perftest tag_bw 64 KiB, UCX's default transports" \
		ucx "$dev" default tag_bw 65536 500
	run_test "$dev: Open MPI (pml ucx): ping-pong, MPI_Allreduce, MPI_Alltoall, checked" \
		mpi "$dev"
	run_test "$dev: ibv_srq_pingpong, data checked" srq_pingpong "$dev"
	run_test "$dev: qperf -cm1 rc_bw rc_lat rc_rdma_write_bw rc_rdma_read_bw" \
		qperf_rc "$dev"
	run_test "$dev: fi_pingpong verbs msg, data checked" fi_pp "$dev" msg verbs
	run_test "$dev: fi_pingpong verbs;ofi_rxm rdm at the default universe size" \
		fi_pp "$dev" rdm "verbs;ofi_rxm"
done
run_test "figures" figures_table
tap_finish
