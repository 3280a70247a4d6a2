#!/bin/bash
# Teardown under traffic: QP destroy, MR deregistration and CQ destroy (a
# process killed mid-transfer), "rdma link delete", the netdev deleted
# under the device, the network namespace deleted and "rmmod metaroce",
# each several times while real RC traffic runs over 2% loss (retransmit
# and ACK timers armed) and junk UDP floods the device's port from another
# namespace. Checks that nothing hangs (every step is bounded and a
# process that outlives its SIGKILL fails the test), that a process
# holding the device (an idle ibv_rc_pingpong server) does not block the
# device's removal, that the module unloads at the end, and, through
# vmrun's dmesg scan, that the kernel reports nothing. One VM.
#
#   TEARDOWN_ITERS   iterations of each teardown (default 2; more on demand)
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/topo.sh"

ITERS=${TEARDOWN_ITERS:-2}
XFER=${XFER:-$(command -v metaroce-xfer ||
	echo "$METAROCE_SELFTESTS/../../build/userspace/tools/metaroce-xfer/metaroce-xfer")}
TOOLS=(ib_write_bw ib_send_bw ib_read_bw xfer)
# How long a teardown step may take before it counts as a hang.
STEP_LIMIT=${TEARDOWN_STEP_LIMIT:-30}
LOG=/tmp/teardown
mkdir -p "$LOG"

# Each test runs in a subshell: what outlives one is found through files.
SRV=
CLI=
HOLDER=

# Namespaces ns1 (mr1 on veth0, 10.0.0.1) and ns2 (mr2, 10.0.0.2): the
# devices and their link, and the loss that keeps retransmit timers busy.
net_up() {
	ip netns list | grep -qw ns1 || topo_ns ns1
	ip netns list | grep -qw ns2 || topo_ns ns2
	if ! ip -n ns1 link show veth0 >/dev/null 2>&1; then
		topo_veth ns1 veth0 ns2 veth0
		topo_addr ns1 veth0 10.0.0.1/24 fd00::1/64
		topo_addr ns2 veth0 10.0.0.2/24 fd00::2/64
		ip netns exec ns1 tc qdisc add dev veth0 root netem loss 2%
	fi
	rdma_dev_exists mr1 ||
		ip netns exec ns1 rdma link add mr1 type metaroce netdev veth0
	rdma_dev_exists mr2 ||
		ip netns exec ns2 rdma link add mr2 type metaroce netdev veth0
	wait_until 10 eval 'gids mr1 | grep -q ffff:0a00:0001'
	wait_until 10 eval 'gids mr2 | grep -q ffff:0a00:0002'
}

net_down() {
	ip netns del ns1 2>/dev/null || true
	ip netns del ns2 2>/dev/null || true
	device_gone mr1
	device_gone mr2
}

# The junk flood at ns2's port, from ns1, for the whole suite.
flood_start() {
	# Not through a python3 shim on PATH: one exec, the system's own.
	ip netns exec ns1 /usr/bin/python3 "$METAROCE_SELFTESTS/junkflood.py" \
		10.0.0.2 --qpns 1-128 >>"$LOG/flood.log" 2>&1 &
	echo $! >"$LOG/flood.pid"
}

flood_stop() {
	reap flood "$(cat "$LOG/flood.pid" 2>/dev/null)"
	rm -f "$LOG/flood.pid"
}

# gone PID: the process has exited (or is a zombie nobody reaped yet).
gone() {
	[[ ! -e /proc/$1 ]] || grep -q '^State:.*Z' "/proc/$1/status" 2>/dev/null
}

# reap NAME PID: SIGKILL PID and wait, bounded, for it to be gone. A
# process that survives SIGKILL is stuck in the kernel: show where.
reap() {
	local name=$1 pid=$2
	[[ -n $pid ]] || return 0
	kill -9 "$pid" 2>/dev/null || true
	if ! wait_until "$STEP_LIMIT" gone "$pid"; then
		echo "$name (pid $pid) still there ${STEP_LIMIT}s after SIGKILL:"
		cat "/proc/$pid/stack" 2>/dev/null || true
		return 1
	fi
	wait "$pid" 2>/dev/null || true
}

counter() {
	cat "/sys/class/infiniband/$1/ports/1/hw_counters/$2" 2>/dev/null || echo 0
}

# junk DEV: packets DEV dropped as malformed, of another version or for
# no QP.
junk() {
	echo $(($(counter "$1" rx_malformed) + $(counter "$1" rx_bad_version) +
		$(counter "$1" rx_unknown_qp)))
}

# traffic_start TOOL: TOOL serving in ns2 and connecting from ns1 (both
# holding their device: QPs, CQs, MRs), until data flows into mr2.
traffic_start() {
	local tool=$1 port=$((18000 + RANDOM % 2000)) rx
	local srv_cmd cli_cmd
	if [[ $tool == xfer ]]; then
		srv_cmd=("$XFER" -o write -s 16384 -D 600 -p "$port")
	else
		srv_cmd=("$tool" -x 1 -q 2 -s 16384 -D 600 -p "$port")
	fi
	cli_cmd=("${srv_cmd[@]}")
	rx=$(counter mr2 rx_packets)
	ip netns exec ns2 "${srv_cmd[@]}" -d mr2 >"$LOG/srv.log" 2>&1 &
	SRV=$!
	wait_until 30 eval "ip netns exec ns2 ss -Hltn 'sport = :$port' |
		grep -q LISTEN"
	ip netns exec ns1 "${cli_cmd[@]}" -d mr1 10.0.0.2 \
		>"$LOG/cli.log" 2>&1 &
	CLI=$!
	if ! wait_until 60 eval '(($(counter mr2 rx_packets) > rx + 200))'; then
		echo "$tool: no traffic"
		tail -n 5 "$LOG/srv.log" "$LOG/cli.log"
		return 1
	fi
	echo "$tool: traffic flowing ($(($(counter mr2 rx_packets) - rx)) packets into mr2)"
}

traffic_stop() {
	local rc=0
	reap server "$SRV" || rc=1
	reap client "$CLI" || rc=1
	SRV=
	CLI=
	return $rc
}

# bounded NAME CMD...: CMD in the background, done within STEP_LIMIT.
# Returns 1 if it is still running then; it is left to finish (the
# caller releases what blocks it).
bounded() {
	local name=$1
	shift
	"$@" >"$LOG/step.log" 2>&1 &
	BOUNDED=$!
	if ! wait_until "$STEP_LIMIT" gone "$BOUNDED"; then
		echo "$name: still blocked after ${STEP_LIMIT}s:"
		cat "/proc/$BOUNDED/stack" 2>/dev/null || true
		return 1
	fi
	wait "$BOUNDED" || { cat "$LOG/step.log"; return 1; }
}

# device_gone DEV: DEV is removed within STEP_LIMIT.
device_gone() {
	wait_until "$STEP_LIMIT" eval "! rdma_dev_exists $1"
}

test_setup() {
	metaroce_load
	modprobe rdma_ucm
	net_up
	flood_start
	if ! wait_until 30 eval '(($(junk mr2) > 100))'; then
		echo "no flood:"
		cat "$LOG/flood.log"
		return 1
	fi
	echo "flood: $(junk mr2) junk packets counted by mr2 so far"
}

# Killing a process mid-transfer destroys its QPs, MRs and CQs while its
# peer keeps sending and the flood keeps looking QPs up.
test_kill_mid_transfer() {
	local i tool
	for ((i = 0; i < ITERS * 2; i++)); do
		tool=${TOOLS[i % ${#TOOLS[@]}]}
		traffic_start "$tool"
		# Alternate which side goes first.
		if ((i % 2)); then
			reap client "$CLI"
			reap server "$SRV"
		else
			reap server "$SRV"
			busybox sleep 1
			reap client "$CLI"
		fi
		SRV=
		CLI=
	done
}

# "rdma link delete" of a device in use; then the device comes back.
test_link_delete_under_traffic() {
	local i rc=0
	for ((i = 0; i < ITERS; i++)); do
		traffic_start "${TOOLS[i % ${#TOOLS[@]}]}"
		if ! bounded "rdma link delete mr2 (iteration $i)" \
			rdma link delete mr2; then
			rc=1
		fi
		traffic_stop
		device_gone mr2
		net_up
		((rc == 0)) || return 1
	done
}

# The veth pair deleted under both devices.
test_netdev_delete_under_traffic() {
	local i rc=0
	for ((i = 0; i < ITERS; i++)); do
		traffic_start "${TOOLS[(i + 1) % ${#TOOLS[@]}]}"
		if ! bounded "ip link del veth0 (iteration $i)" \
			ip -n ns2 link del veth0 ||
			! device_gone mr2 || ! device_gone mr1; then
			echo "the devices did not go with their netdev (iteration $i)"
			rc=1
		fi
		traffic_stop
		device_gone mr2
		device_gone mr1
		# The flood lost its route; start it again.
		flood_stop
		net_up
		flood_start
		((rc == 0)) || return 1
	done
}

# ns2 deleted while its device carries traffic: the namespace goes when
# the last process in it (the server) is killed; the client in ns1 keeps
# sending to the vanished device until then and after.
test_netns_delete_under_traffic() {
	local i rc=0
	for ((i = 0; i < ITERS; i++)); do
		traffic_start "${TOOLS[(i + 2) % ${#TOOLS[@]}]}"
		ip netns del ns2
		reap server "$SRV"
		SRV=
		device_gone mr2 || { echo "mr2 outlived ns2 (iteration $i)"; rc=1; }
		reap client "$CLI"
		CLI=
		device_gone mr2
		flood_stop
		net_down
		net_up
		flood_start
		((rc == 0)) || return 1
	done
}

# holder_start DEV: a process outside the device's namespace holding DEV
# open with a QP, CQ and MR (an ibv_rc_pingpong server nobody connects to).
holder_start() {
	ibv_rc_pingpong -d "$1" -g 1 -p 18515 >"$LOG/holder.log" 2>&1 &
	HOLDER=$!
	wait_until 30 eval "ss -Hltn 'sport = :18515' | grep -q LISTEN"
}

holder_stop() {
	reap holder "$HOLDER"
	HOLDER=
}

# An open user context must not keep a device from being removed: the
# device is disassociated from it (its rings zapped, its verbs failing).
test_open_context_link_delete() {
	local rc=0
	holder_start mr2
	bounded "rdma link delete mr2 with a context open" \
		rdma link delete mr2 || rc=1
	device_gone mr2 || rc=1
	# The holder survives the removal of its device.
	[[ -e /proc/$HOLDER ]] || { echo "the holder died"; rc=1; }
	holder_stop
	device_gone mr2
	net_up
	return $rc
}

test_open_context_netns_delete() {
	local rc=0
	holder_start mr2
	flood_stop
	ip netns del ns2
	device_gone mr2 || { echo "mr2 kept by an open context"; rc=1; }
	holder_stop
	net_down
	net_up
	flood_start
	return $rc
}

# rmmod with devices carrying traffic and flooded. With user contexts
# open, rmmod must still unload the module (they are disassociated).
test_rmmod_under_traffic() {
	local i rc=0
	for ((i = 0; i < ITERS; i++)); do
		traffic_start "${TOOLS[(i + 3) % ${#TOOLS[@]}]}"
		if ! bounded "rmmod metaroce (iteration $i)" rmmod metaroce; then
			echo "rmmod failed with contexts open (iteration $i)"
			rc=1
		fi
		traffic_stop
		# Without disassociation only now can it go.
		[[ -d /sys/module/metaroce ]] && metaroce_unload
		[[ ! -d /sys/module/metaroce ]]
		metaroce_load
		net_up
		((rc == 0)) || return 1
	done
}

test_unload() {
	echo "flood: $(junk mr2) junk packets counted by mr2 since it was added"
	holder_stop
	traffic_stop
	flood_stop
	net_down
	bounded "rmmod metaroce" rmmod metaroce
	[[ ! -d /sys/module/metaroce ]]
}

tap_plan 9
run_test "setup: two devices, traffic, junk flood" test_setup
run_test "QP/MR/CQ destroy: process killed mid-transfer, x$((ITERS * 2))" \
	test_kill_mid_transfer
run_test "rdma link delete under traffic, x$ITERS" \
	test_link_delete_under_traffic
run_test "netdev deleted under traffic, x$ITERS" \
	test_netdev_delete_under_traffic
run_test "netns deleted under traffic, x$ITERS" \
	test_netns_delete_under_traffic
run_test "rdma link delete with a user context open" \
	test_open_context_link_delete
run_test "netns deleted with a user context open" \
	test_open_context_netns_delete
run_test "rmmod under traffic, x$ITERS" test_rmmod_under_traffic
run_test "module unloads at the end" test_unload
tap_finish
