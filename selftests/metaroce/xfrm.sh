#!/bin/bash
# MetaRoCE under an IPsec ESP transport-mode SA between two namespaces
# (ns1:veth0 10.0.0.1 mr1 <-> ns2:veth0 10.0.0.2 mr2). Zero-copy transmit
# hands the registered pages themselves to the stack; ESP encrypts an skb
# in place when it can, so unless the skb says its fragments are shared
# (SKBFL_SHARED_FRAG) the sender's buffer is encrypted under the user's
# feet. metaroce-xfer checks every byte at the receiver and, afterwards,
# that the sender's source buffers are unchanged (WRITE, SEND: the client's
# slots; READ: the server's).
#
# Over veth, the receiver would decrypt the same pages in place again and
# hide the damage; a packet socket on each side holds a clone of every
# packet received, so ESP input copies and what the sender's ESP did stays
# visible. (A tc mirred mirror is not enough: its clone is freed before
# ESP input runs.) Messages of
# 1000 bytes: one packet each (batches of several are segmented, and so
# copied, before ESP). One VM.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/topo.sh"

XFER=${XFER:-$(command -v metaroce-xfer ||
	echo "$METAROCE_SELFTESTS/../../build/userspace/tools/metaroce-xfer/metaroce-xfer")}
MSGS=${MSGS:-50}
SIZE=1000
KEY1=0x$(printf '%08x' {1..5})
KEY2=0x$(printf '%08x' {6..10})

# sa NS SRC DST SPI KEY DIR: an ESP transport SA SRC -> DST and its policy.
sa() {
	local ns=$1 src=$2 dst=$3 spi=$4 key=$5 dir=$6
	ip -n "$ns" xfrm state add src "$src" dst "$dst" proto esp spi "$spi" \
		reqid "$spi" mode transport aead 'rfc4106(gcm(aes))' "$key" 128
	ip -n "$ns" xfrm policy add src "$src" dst "$dst" dir "$dir" \
		tmpl src "$src" dst "$dst" proto esp reqid "$spi" mode transport
}

# hold_clones NS: a packet socket on veth0 that never reads: every packet
# veth0 receives is cloned into its queue (64 MiB of it) before IP sees it.
hold_clones() {
	topo_exec "$1" /usr/bin/python3 -c '
import socket, time
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))
s.setsockopt(socket.SOL_SOCKET, 33, 64 << 20)  # SO_RCVBUFFORCE
s.bind(("veth0", 0))
time.sleep(3600)' >/dev/null 2>&1 &
	echo $! >>/tmp/xfrm-holders
}

setup() {
	[[ -x $XFER ]] || { echo "no $XFER (build with make)"; return 1; }
	modprobe esp4
	metaroce_load
	topo_pair ns1 ns2
	sa ns1 10.0.0.1 10.0.0.2 0x101 "$KEY1" out
	sa ns1 10.0.0.2 10.0.0.1 0x102 "$KEY2" in
	sa ns2 10.0.0.1 10.0.0.2 0x101 "$KEY1" in
	sa ns2 10.0.0.2 10.0.0.1 0x102 "$KEY2" out
	hold_clones ns1
	hold_clones ns2
	topo_exec ns1 busybox ping -c 1 -W 5 10.0.0.2
	topo_exec ns1 rdma link add mr1 type metaroce netdev veth0
	topo_exec ns2 rdma link add mr2 type metaroce netdev veth0
	wait_until 10 eval 'gids mr1 | grep -q ffff:0a00:0001'
	wait_until 10 eval 'gids mr2 | grep -q ffff:0a00:0002'
}

# xfer OP: one verified transfer from ns1 (client) to ns2, through ESP.
xfer() {
	local op=$1 port=$((19000 + RANDOM % 1000)) rc=0
	topo_exec ns2 "$XFER" -d mr2 -o "$op" -p "$port" -n "$MSGS" -s "$SIZE" \
		>/tmp/xfer-server.log 2>&1 &
	local srv=$!
	topo_exec ns1 "$XFER" -d mr1 -o "$op" -p "$port" -n "$MSGS" -s "$SIZE" \
		10.0.0.2 || rc=$?
	wait "$srv" || rc=$?
	cat /tmp/xfer-server.log
	ip -n ns1 -s xfrm state
	ip -n ns2 -s xfrm state
	grep . /proc/net/xfrm_stat | grep -v ' 0$' || true
	return "$rc"
}

test_esp_carries() {
	# A ping goes through both SAs (see their packet counts).
	topo_exec ns1 busybox ping -c 2 -W 5 10.0.0.2
	ip -n ns1 -s xfrm state | tee /dev/stderr |
		grep -qE '[1-9][0-9]*\(packets\)'
}

test_write() {
	xfer write
}

test_send() {
	xfer send
}

test_read() {
	xfer read
}

test_cleanup() {
	# shellcheck disable=SC2046
	kill $(cat /tmp/xfrm-holders) 2>/dev/null || true
	topo_cleanup
	metaroce_unload
}

tap_plan 6
run_test "setup: ESP transport SAs between ns1 and ns2" setup
run_test "the SAs carry the traffic" test_esp_carries
run_test "WRITE over ESP: data intact, source unchanged" test_write
run_test "SEND over ESP: data intact, source unchanged" test_send
run_test "READ over ESP: data intact, responder's source unchanged" test_read
run_test "cleanup" test_cleanup
tap_finish
