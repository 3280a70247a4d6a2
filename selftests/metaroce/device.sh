#!/bin/bash
# Device lifecycle: the metaroce module, "rdma link" devices on Ethernet
# netdevs (in any namespace), GIDs and port state following the netdev,
# the provider (ibv_devices, ibv_devinfo), every bad input, and leaks over
# many add/delete and load/unload cycles. One VM.
source "$(dirname "$0")/lib.sh"

setup_veth() {
	ip link add veth0 type veth peer name veth1
	ip link set veth0 up
	ip link set veth1 up
	ip addr add 10.9.0.1/24 dev veth0
}

test_load() {
	metaroce_load
	grep -q '^metaroce ' /proc/modules
}

# With the module installed, "rdma link add" loads it through its
# rdma-link-metaroce alias.
test_autoload() {
	[[ -z $METAROCE_KO ]] || tap_skip "testing the build tree, not installed"
	metaroce_unload
	ip link add vauto0 type veth peer name vauto1
	rdma link add mra type metaroce netdev vauto0
	grep -q '^metaroce ' /proc/modules
	rdma link delete mra
	ip link del vauto0
}

test_link_add() {
	setup_veth
	rdma link add mr0 type metaroce netdev veth0
	rdma link show
	rdma link show mr0/1 | grep -q 'netdev veth0'
	[[ $(port_state mr0) == ACTIVE ]]
	[[ $(cat /sys/class/infiniband/mr0/node_desc) == metaroce ]]
	[[ $(cat /sys/class/infiniband/mr0/metaroce/engine) == soft ]]
}

test_provider() {
	ibv_devices | tee /dev/stderr | grep -qw mr0
	ibv_devinfo -d mr0 | tee /dev/stderr >/tmp/devinfo
	grep -q 'link_layer:.*Ethernet' /tmp/devinfo
	grep -q 'state:.*PORT_ACTIVE' /tmp/devinfo
	grep -q 'active_mtu:.*1024' /tmp/devinfo
	ibv_devinfo -v -d mr0 | grep -q 'GID\[ *1\]:.*10.9.0.1'
}

test_gids_follow_addresses() {
	gids mr0 | grep -q '^0000:0000:0000:0000:0000:ffff:0a09:0001$'
	ip addr add 10.9.1.1/24 dev veth0
	wait_until 5 eval 'gids mr0 | grep -q ffff:0a09:0101'
	ip addr add fd00:9::1/64 dev veth0 nodad
	wait_until 5 eval 'gids mr0 | grep -q "^fd00:0009:"'
	ip addr del 10.9.1.1/24 dev veth0
	wait_until 5 eval '! gids mr0 | grep -q ffff:0a09:0101'
	ip addr del fd00:9::1/64 dev veth0
	wait_until 5 eval '! gids mr0 | grep -q "^fd00:0009:"'
}

test_port_follows_carrier() {
	ip link set veth1 down
	wait_until 5 eval '[[ $(port_state mr0) == DOWN ]]'
	ip link set veth1 up
	wait_until 5 eval '[[ $(port_state mr0) == ACTIVE ]]'
	ip link set veth0 down
	wait_until 5 eval '[[ $(port_state mr0) == DOWN ]]'
	rdma link show mr0/1 | grep -q 'physical_state DISABLED'
	ip link set veth0 up
	wait_until 5 eval '[[ $(port_state mr0) == ACTIVE ]]'
}

test_mtu_follows_netdev() {
	ip link set veth0 mtu 9000
	ibv_devinfo -d mr0 | grep -q 'active_mtu:.*4096'
	ip link set veth0 mtu 1500
	ibv_devinfo -d mr0 | grep -q 'active_mtu:.*1024'
}

test_bad_unknown_netdev() {
	rdma_link_add_fails "No such device" mrx type metaroce netdev nosuchdev
}

test_bad_not_ethernet() {
	rdma_link_add_fails "Invalid argument" mrx type metaroce netdev lo
	ip link add ipip0 type ipip local 10.9.0.1 remote 10.9.0.2
	rdma_link_add_fails "Invalid argument" mrx type metaroce netdev ipip0
	ip link del ipip0
}

test_bad_duplicate_name() {
	ip link add veth2 type veth peer name veth3
	rdma_link_add_fails "File exists" mr0 type metaroce netdev veth2
	ip link del veth2
}

test_bad_second_device_on_netdev() {
	rdma_link_add_fails "Device or resource busy" mr9 type metaroce \
		netdev veth0
}

test_bad_name() {
	rdma_link_add_fails "Invalid argument" 'mr%d' type metaroce netdev veth1
	expect_fail rdma_dev_exists mr9
	expect_fail rdma_dev_exists mrx
}

test_link_delete() {
	rdma link delete mr0
	expect_fail rdma_dev_exists mr0
	expect_fail eval "ibv_devices | grep -qw mr0"
}

test_netns() {
	ip netns add ns1
	ip link add vns0 type veth peer name vns1 netns ns1
	ip -n ns1 link set vns1 up
	ip link set vns0 up
	ip -n ns1 addr add 10.9.2.2/24 dev vns1
	ip netns exec ns1 rdma link add mr1 type metaroce netdev vns1
	# rdma names the netdev only inside the netdev's own namespace.
	ip netns exec ns1 rdma link show mr1/1 | grep -q 'netdev vns1'
	wait_until 5 eval 'gids mr1 | grep -q ffff:0a09:0202'
	[[ $(port_state mr1) == ACTIVE ]]
	# The namespace's netdev goes away with the namespace: so does mr1.
	ip netns del ns1
	wait_until 10 eval '! rdma_dev_exists mr1'
}

# dmesg_since LINES PATTERN: PATTERN in what the kernel logged after its
# first LINES lines.
dmesg_since() {
	dmesg | tail -n +"$(($1 + 1))" | grep -q "$2"
}

# A protocol 2 device shares its link's speed among its senders (veth
# reports 10000 Mbit/s), or rx_capacity_mbps when that is set.
test_fair_share_capacity() {
	local n

	metaroce_unload
	n=$(dmesg | wc -l)
	METAROCE_PROTOCOL=2 metaroce_load
	rdma link add mr0 type metaroce netdev veth0
	dmesg_since "$n" 'metaroce: veth0: senders share 10000 Mbit/s$'
	rdma link delete mr0
	metaroce_unload
	n=$(dmesg | wc -l)
	METAROCE_PROTOCOL=2 metaroce_load rx_capacity_mbps=2500
	rdma link add mr0 type metaroce netdev veth0
	dmesg_since "$n" 'metaroce: veth0: senders share 2500 Mbit/s$'
	rdma link delete mr0
	metaroce_unload
	metaroce_load
}

test_netdev_unregister() {
	rdma link add mr0 type metaroce netdev veth0
	ip link del veth0
	wait_until 10 eval '! rdma_dev_exists mr0'
}

test_rmmod_with_devices() {
	setup_veth
	rdma link add mr0 type metaroce netdev veth0
	rdma link add mr1 type metaroce netdev veth1
	metaroce_unload
	expect_fail rdma_dev_exists mr0
	expect_fail rdma_dev_exists mr1
	[[ ! -d /sys/module/metaroce ]]
	metaroce_load
}

# slab_growth_kb TYPE NETDEV CYCLES: unreclaimable slab growth over CYCLES
# add/delete cycles of a device of link TYPE.
slab_growth_kb() {
	local type=$1 ndev=$2 cycles=$3 before after i

	rdma link add "${type}0" type "$type" netdev "$ndev"
	rdma link delete "${type}0"
	before=$(settled_slab_kb)
	for i in $(seq "$cycles"); do
		rdma link add "${type}0" type "$type" netdev "$ndev"
		rdma link delete "${type}0"
	done
	after=$(settled_slab_kb)
	echo $((after - before))
}

# ib_core and sysfs keep some memory per device name ever used (kernfs
# nodes, dentries, xarray nodes); the kernel's own rxe, measured the same
# way in the same VM, is the baseline. A leaked device would be several kB
# a cycle on top of it.
test_add_delete_cycles() {
	local ours theirs

	ours=$(slab_growth_kb metaroce veth0 "$ADD_DELETE_CYCLES")
	echo "unreclaimable slab growth over $ADD_DELETE_CYCLES metaroce cycles: $ours kB"
	[[ $(cat /sys/module/metaroce/refcnt) == 0 ]]
	if modprobe rdma_rxe; then
		theirs=$(slab_growth_kb rxe veth0 "$ADD_DELETE_CYCLES")
		echo "same for rxe (baseline): $theirs kB"
		modprobe -r rdma_rxe
	else
		theirs=64
	fi
	((ours <= theirs + 64))
}

test_load_unload_cycles() {
	local before after i

	metaroce_unload
	metaroce_load
	metaroce_unload
	before=$(settled_slab_kb)
	for i in $(seq "$LOAD_UNLOAD_CYCLES"); do
		metaroce_load
		rdma link add mr0 type metaroce netdev veth0
		metaroce_unload
	done
	after=$(settled_slab_kb)
	echo "unreclaimable slab: $before kB before, $after kB after $LOAD_UNLOAD_CYCLES cycles"
	((after - before < 128))
	metaroce_load
}

ADD_DELETE_CYCLES=$(repeat_count 25)
LOAD_UNLOAD_CYCLES=$(repeat_count 20)
tap_plan 21
run_test "module loads" test_load
run_test "rdma link add loads the installed module" test_autoload
run_test "rdma link add on an Ethernet netdev" test_link_add
run_test "provider: ibv_devices, ibv_devinfo" test_provider
run_test "GIDs follow the netdev's addresses" test_gids_follow_addresses
run_test "port state follows carrier and admin state" test_port_follows_carrier
run_test "active MTU follows the netdev MTU" test_mtu_follows_netdev
run_test "unknown netdev: ENODEV" test_bad_unknown_netdev
run_test "non-Ethernet netdev: EINVAL" test_bad_not_ethernet
run_test "duplicate device name: EEXIST" test_bad_duplicate_name
run_test "second device on a netdev: EBUSY" test_bad_second_device_on_netdev
run_test "invalid device name: EINVAL" test_bad_name
run_test "rdma link delete" test_link_delete
run_test "device on a netdev in another namespace" test_netns
run_test "a v2 device shares its link's speed (fair share)" test_fair_share_capacity
run_test "unregistering the netdev removes the device" test_netdev_unregister
run_test "rmmod with devices present" test_rmmod_with_devices
run_test "$ADD_DELETE_CYCLES add/delete cycles leak nothing" test_add_delete_cycles
run_test "$LOAD_UNLOAD_CYCLES load/unload cycles leak nothing" test_load_unload_cycles
run_test "module unloads" metaroce_unload
run_test "module reloads" metaroce_load
tap_finish
