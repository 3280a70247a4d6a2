#!/bin/bash
# Network namespace topologies for tests inside one VM (or any scratch
# machine: it creates namespaces and veth pairs, needs root).  Source it.
#
# Every topology keeps its namespaces in TOPO_NETNS; topo_cleanup deletes
# them (their veths go with them).  Run commands in a namespace with
# `topo_exec NS CMD...` (= ip netns exec NS CMD...), or `ip -n NS ...` for ip
# itself (one exec less: under TCG emulation each exec costs ~0.1 s).  All interfaces are up,
# IPv6 addresses are added with nodad (usable at once), rp_filter is off.
#
# Addressing scheme (RFC 1918 / RFC 4193 ranges, private to the VM):
#
# topo_pair A B                     A:veth0 <--> B:veth0
#   A: 10.0.0.1/24  fd00::1/64      B: 10.0.0.2/24  fd00::2/64
#
# topo_switch N                     hI:eth0 <--> sw:hI   (I = 1..N)
#   host hI: 10.1.I.2/24  fd00:1:I::2/64, default route via sw
#   router sw: 10.1.I.1/24  fd00:1:I::1/64 on interface "hI", forwarding on
#
# topo_multipath K                  h1 ==K links== sw ==K links== h2
#   link k (1..K) h1 side:  h1:ethK 10.2.k.2/24  <->  sw:h1-k 10.2.k.1/24
#   link k (1..K) h2 side:  sw:h2-k 10.3.k.1/24  <->  h2:ethK 10.3.k.2/24
#   service addresses (on lo): h1 10.255.0.1/32, h2 10.255.0.2/32;
#   h1, sw and h2 route to them over all K links (ECMP, one nexthop per
#   link) with fib_multipath_hash_policy=1 (L4 hash: flows spread by ports).
#   Use the service addresses as endpoints (e.g. ping -I 10.255.0.1).

TOPO_NETNS=()
TOPO_FORWARDING=(net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1)

topo_exec() {
	ip netns exec "$@"
}

# topo_ns NS [SYSCTL=VALUE...]: create namespace NS with lo up, rp_filter
# off and the given sysctls.
topo_ns() {
	local ns=$1
	shift
	ip netns add "$ns"
	TOPO_NETNS+=("$ns")
	ip -n "$ns" link set lo up
	topo_exec "$ns" sysctl -qw net.ipv4.conf.all.rp_filter=0 \
		net.ipv4.conf.default.rp_filter=0 "$@"
}

# topo_veth NS_A IF_A NS_B IF_B: a veth pair between two namespaces, up.
topo_veth() {
	ip link add "$2" netns "$1" type veth peer name "$4" netns "$3"
	ip -n "$1" link set "$2" up
	ip -n "$3" link set "$4" up
}

# topo_addr NS IF ADDR4/LEN ADDR6/LEN
topo_addr() {
	ip -n "$1" addr add "$3" dev "$2"
	ip -n "$1" addr add "$4" dev "$2" nodad
}

# topo_pair NS_A NS_B: two namespaces joined by a veth pair.
topo_pair() {
	local a=$1 b=$2
	topo_ns "$a"
	topo_ns "$b"
	topo_veth "$a" veth0 "$b" veth0
	topo_addr "$a" veth0 10.0.0.1/24 fd00::1/64
	topo_addr "$b" veth0 10.0.0.2/24 fd00::2/64
}

# topo_switch N: hosts h1..hN, each with one link to the router sw.
topo_switch() {
	local n=$1 i
	topo_ns sw "${TOPO_FORWARDING[@]}"
	for ((i = 1; i <= n; i++)); do
		topo_ns "h$i"
		topo_veth "h$i" eth0 sw "h$i"
		topo_addr "h$i" eth0 "10.1.$i.2/24" "fd00:1:$i::2/64"
		topo_addr sw "h$i" "10.1.$i.1/24" "fd00:1:$i::1/64"
		ip -n "h$i" route add default via "10.1.$i.1"
		ip -n "h$i" -6 route add default via "fd00:1:$i::1"
	done
}

# topo_multipath K: h1 and h2 joined through the router sw by K parallel
# links on each side, with ECMP routes between their service addresses.
topo_multipath() {
	local k=$1 l
	local h1_hops=() sw_to_h1=() sw_to_h2=() h2_hops=()
	local l4_hash=net.ipv4.fib_multipath_hash_policy=1
	topo_ns sw "${TOPO_FORWARDING[@]}" "$l4_hash"
	topo_ns h1 "$l4_hash"
	topo_ns h2 "$l4_hash"
	ip -n h1 addr add 10.255.0.1/32 dev lo
	ip -n h2 addr add 10.255.0.2/32 dev lo
	for ((l = 1; l <= k; l++)); do
		topo_veth h1 "eth$l" sw "h1-$l"
		topo_addr h1 "eth$l" "10.2.$l.2/24" "fd00:2:$l::2/64"
		topo_addr sw "h1-$l" "10.2.$l.1/24" "fd00:2:$l::1/64"
		topo_veth sw "h2-$l" h2 "eth$l"
		topo_addr sw "h2-$l" "10.3.$l.1/24" "fd00:3:$l::1/64"
		topo_addr h2 "eth$l" "10.3.$l.2/24" "fd00:3:$l::2/64"
		h1_hops+=(nexthop via "10.2.$l.1" dev "eth$l")
		sw_to_h1+=(nexthop via "10.2.$l.2" dev "h1-$l")
		sw_to_h2+=(nexthop via "10.3.$l.2" dev "h2-$l")
		h2_hops+=(nexthop via "10.3.$l.1" dev "eth$l")
	done
	ip -n h1 route add 10.255.0.2/32 src 10.255.0.1 "${h1_hops[@]}"
	ip -n sw route add 10.255.0.1/32 "${sw_to_h1[@]}"
	ip -n sw route add 10.255.0.2/32 "${sw_to_h2[@]}"
	ip -n h2 route add 10.255.0.1/32 src 10.255.0.2 "${h2_hops[@]}"
}

# topo_ecmp K: two hosts, each with one link to its router, and K parallel
# links between the routers over which both route with ECMP and an L4
# hash, so flows (UDP source ports) spread over the K links:
#
#   h1:eth0 -- r1 ==K links== r2 -- h2:eth0
#   h1 10.4.1.2/24 (via r1 10.4.1.1)     h2 10.4.2.2/24 (via r2 10.4.2.1)
#   link k (1..K): r1:r2-k 10.5.k.1/24 <-> r2:r1-k 10.5.k.2/24
topo_ecmp() {
	local k=$1 l
	local l4_hash=net.ipv4.fib_multipath_hash_policy=1
	local r1_hops=() r2_hops=()
	topo_ns r1 "${TOPO_FORWARDING[@]}" "$l4_hash"
	topo_ns r2 "${TOPO_FORWARDING[@]}" "$l4_hash"
	topo_ns h1
	topo_ns h2
	topo_veth h1 eth0 r1 h1
	topo_addr h1 eth0 10.4.1.2/24 fd00:4:1::2/64
	topo_addr r1 h1 10.4.1.1/24 fd00:4:1::1/64
	topo_veth h2 eth0 r2 h2
	topo_addr h2 eth0 10.4.2.2/24 fd00:4:2::2/64
	topo_addr r2 h2 10.4.2.1/24 fd00:4:2::1/64
	ip -n h1 route add default via 10.4.1.1
	ip -n h2 route add default via 10.4.2.1
	for ((l = 1; l <= k; l++)); do
		topo_veth r1 "r2-$l" r2 "r1-$l"
		topo_addr r1 "r2-$l" "10.5.$l.1/24" "fd00:5:$l::1/64"
		topo_addr r2 "r1-$l" "10.5.$l.2/24" "fd00:5:$l::2/64"
		r1_hops+=(nexthop via "10.5.$l.2" dev "r2-$l")
		r2_hops+=(nexthop via "10.5.$l.1" dev "r1-$l")
	done
	ip -n r1 route add 10.4.2.0/24 "${r1_hops[@]}"
	ip -n r2 route add 10.4.1.0/24 "${r2_hops[@]}"
}

# topo_cleanup: delete the namespaces created by the topo_* functions.
topo_cleanup() {
	local ns
	for ns in "${TOPO_NETNS[@]}"; do
		ip netns del "$ns" 2>/dev/null || true
	done
	TOPO_NETNS=()
TOPO_FORWARDING=(net.ipv4.ip_forward=1 net.ipv6.conf.all.forwarding=1)
}
