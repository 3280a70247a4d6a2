#!/bin/bash
# NVMe over RDMA between two VMs, on MetaRoCE and on the kernel's rxe side
# by side: the kernel's NVMe target (nvmet, nvmet-rdma) in VM 0 exports a
# memory-backed null_blk namespace per device through nvmet's configfs; the
# kernel's NVMe host (nvme-rdma) in VM 1 connects to it with nvme-cli and
# fio writes it and reads every block back, checking a crc32c of each
# (randwrite 4 KiB, write 128 KiB; direct I/O through libaio), without loss
# and with netem dropping 1% of the packets each VM sends; then the host
# disconnects and the target takes its export down.
#
# Two VMs joined by two links (vmrun --vms 2 --links 2): mr0 on link 0, rxe0
# on link 1, each with its own subsystem and port (VM 0's address on the
# device's link, port 4420). Every step runs on mr0 and then, unless
# RXE_BASELINE=0, on rxe0. mr0 must pass; an rxe0 step that fails is
# reported as a skip that says why.
# A step runs in one VM; the other waits for its exit status and reports it
# too, so both VMs fail a failed step. fio's exit status, its error count
# and the amount it wrote and read back decide a fio step; fio, nvme connect
# and nvme disconnect run under timeouts, and the controller gives up on a
# dead link (ctrl-loss-tmo), so that a hang fails the step rather than the
# suite. Each fio run's write bandwidth is printed as "# figure: DEV TEST
# VALUE UNIT" and collected in $VM_SCRATCH/nvme-figures.txt, with the share
# of it the lossy run kept; the last test prints them as a table. The last
# but one unloads every module the suite loaded, which fails if anything
# was left behind.
#
# nvme-rdma takes only devices with IB_DEVICE_MEM_MGT_EXTENSIONS (fast
# registration: IB_WR_REG_MR, local and remote invalidation).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/../lib/guest.sh"
source "$(dirname "$0")/side_by_side.sh"

# Seconds a fio run may take (the VMs may be emulated: TCG, one vCPU each),
# without loss and with 1% loss; six times longer on the debug kernel.
slow=$([[ -n $METAROCE_DEBUG_KERNEL ]] && echo 6 || echo 1)
TIMEOUT=${NVME_TIMEOUT:-$((150 * slow))}
LOSSY_TIMEOUT=${NVME_LOSSY_TIMEOUT:-$((120 * slow))}
FIGURES=$VM_SCRATCH/nvme-figures.txt
NVMET=/sys/kernel/config/nvmet
# One host identity per VM, so that the target sees the same host each time.
HOSTID=5e1f7e57-0000-4000-8000-00000000000$VM_INDEX
HOSTNQN=nqn.2014-08.org.nvmexpress:uuid:$HOSTID
# The namespaces: null_blk devices holding what is written to them.
NS_GB=1

# A device's target (VM 0) address, its subsystem's NQN, its nvmet port
# and the null_blk device it exports.
target_ip() { server_ip "$1"; }
nqn() { echo "nqn.2024-01.org.metaroce:selftest-$1"; }
port_id() { echo $(($(dev_link "$1") + 1)); }
nullb() { echo "/dev/nullb$(dev_link "$1")"; }

setup() {
	side_by_side_setup
	if ((VM_INDEX == 0)); then
		# vmrun's guest does not mount configfs.
		modprobe configfs
		mountpoint -q /sys/kernel/config ||
			mount -t configfs configfs /sys/kernel/config
		modprobe null_blk nr_devices=${#DEVS[@]} memory_backed=1 gb=$NS_GB
		modprobe nvmet
		modprobe nvmet-rdma
		[[ -d $NVMET/subsystems ]]
		ls -l /dev/nullb*
	else
		modprobe nvme-rdma
		[[ -c /dev/nvme-fabrics ]]
		: >"$FIGURES"
	fi
}

# step VM DEV FUNC [ARGS...]: FUNC runs (with set -e) in VM VM, which
# publishes its exit status; the other VM waits for it. Both end the test
# with it: a pass, a failure, or on rxe0 a skip.
step() {
	local who=$1 dev=$2 key=step.$_tap_num rc=0
	shift 2
	if ((VM_INDEX == who)); then
		# Run in the background: in "(...) || rc=$?" set -e would be off.
		(
			set -e
			"$@"
		) &
		wait $! || rc=$?
		vm_publish "$key" "$rc"
	else
		rc=$(VM_WAIT_TIMEOUT=$((TIMEOUT + 120)) vm_wait "$key") || rc=1
		echo "vm$who: exit status $rc"
	fi
	((rc == 0)) && return 0
	if ((rc == KSFT_SKIP)); then
		# The skipping VM has given its reason.
		((VM_INDEX == who)) && exit "$KSFT_SKIP"
		tap_skip "skipped in vm$who"
	fi
	[[ $dev == mr0 ]] && return 1
	tap_skip "rxe fails this (see vm$who's output)"
}

# export_ns DEV (VM 0): subsystem NQN with namespace 1 on DEV's null_blk,
# any host allowed, on an rdma port at VM 0's address on DEV's link.
export_ns() {
	local dev=$1 nqn s p ip
	nqn=$(nqn "$dev") ip=$(target_ip "$dev")
	s=$NVMET/subsystems/$nqn p=$NVMET/ports/$(port_id "$dev")
	mkdir "$s"
	echo 1 >"$s/attr_allow_any_host"
	mkdir "$s/namespaces/1"
	echo -n "$(nullb "$dev")" >"$s/namespaces/1/device_path"
	echo 1 >"$s/namespaces/1/enable"
	mkdir "$p"
	echo rdma >"$p/addr_trtype"
	echo ipv4 >"$p/addr_adrfam"
	echo "$ip" >"$p/addr_traddr"
	echo 4420 >"$p/addr_trsvcid"
	# The link enables the port: nvmet-rdma listens on ip:4420.
	ln -s "$s" "$p/subsystems/$nqn"
	echo "$nqn: namespace 1 = $(<"$s/namespaces/1/device_path"), port $(port_id "$dev") = rdma $ip:4420"
	rdma resource show cm_id | grep "$ip:4420" ||
		{ echo "no rdma_cm listener on $ip:4420"; return 1; }
	rdma resource show cm_id | grep "$ip:4420" | grep -q "link $dev/" ||
		{ echo "the listener on $ip:4420 is not on $dev"; return 1; }
}

# unexport DEV (VM 0): the port's link to the subsystem, the port, the
# namespace and the subsystem, whatever of them is there.
unexport() {
	local dev=$1 nqn s p
	nqn=$(nqn "$dev")
	s=$NVMET/subsystems/$nqn p=$NVMET/ports/$(port_id "$dev")
	[[ -L $p/subsystems/$nqn ]] && rm "$p/subsystems/$nqn"
	[[ -d $p ]] && rmdir "$p"
	if [[ -d $s/namespaces/1 ]]; then
		echo 0 >"$s/namespaces/1/enable"
		rmdir "$s/namespaces/1"
	fi
	[[ -d $s ]] && rmdir "$s"
	[[ ! -e $s && ! -e $p ]]
	echo "$nqn and port $(port_id "$dev") removed"
}

# ctrls NQN: the host's controllers (nvmeN) of subsystem NQN.
ctrls() {
	local d
	for d in /sys/class/nvme/nvme*; do
		[[ -f $d/subsysnqn && $(<"$d/subsysnqn") == "$1" ]] && echo "${d##*/}"
	done
	return 0
}

# ns_blk NQN: the block device (nvmeXnY) of NQN's namespace, found through
# the subsystem (native multipath) or the controller; hidden per-path
# devices (nvmeXcYnZ) have no /dev node and are not it.
ns_blk() {
	local d n
	for d in /sys/class/nvme-subsystem/* /sys/class/nvme/*; do
		[[ -f $d/subsysnqn && $(<"$d/subsysnqn") == "$1" ]] || continue
		for n in "$d"/nvme*n*; do
			n=${n##*/}
			[[ $n =~ ^nvme[0-9]+n[0-9]+$ && -b /dev/$n ]] &&
				{ echo "$n"; return 0; }
		done
	done
	return 1
}

no_ctrl() { [[ -z $(ctrls "$1") ]]; }
blk_gone() { [[ ! -e /sys/block/$1 && ! -b /dev/$1 ]]; }

# connect DEV (VM 1): nvme connect to DEV's subsystem; its namespace's block
# device appears, with the size of the target's null_blk device.
connect() {
	local dev=$1 nqn blk size rc=0 out lines
	nqn=$(nqn "$dev")
	rm -f "/tmp/nvme.$dev.blk"
	lines=$(dmesg | wc -l)
	# A controller that lost its link gives up after 30 s (default: 600 s),
	# so that I/O on a dead link fails in bounded time.
	out=$(timeout -k 5 60 nvme connect -t rdma -a "$(target_ip "$dev")" \
		-s 4420 -n "$nqn" --hostnqn="$HOSTNQN" --hostid="$HOSTID" \
		--ctrl-loss-tmo=30 --reconnect-delay=2 2>&1) || rc=$?
	echo "nvme connect: ${out:-(no output)}"
	if ((rc != 0)); then
		echo "nvme connect failed with exit status $rc; the kernel says:"
		dmesg | tail -n +$((lines + 1)) | head -n 10
		dmesg | tail -n +$((lines + 1)) |
			grep -q "infiniband $dev: Memory registrations not supported" &&
			echo "nvme-rdma refuses $dev: no fast registration (IB_DEVICE_MEM_MGT_EXTENSIONS)"
		return 1
	fi
	echo "controllers: $(ctrls "$nqn")"
	wait_until 30 ns_blk "$nqn" >/dev/null ||
		{ echo "no block device for $nqn after 30 s"; return 1; }
	blk=$(ns_blk "$nqn")
	size=$(($(<"/sys/block/$blk/size") * 512))
	echo "$nqn: /dev/$blk, $size bytes, transport $(<"/sys/class/nvme/$(ctrls "$nqn" | head -n 1)/transport")"
	((size == NS_GB << 30)) ||
		{ echo "the namespace has $size bytes, the target's device $((NS_GB << 30))"; return 1; }
	echo "$blk" >"/tmp/nvme.$dev.blk"
}

# fio_verify DEV RW BS_KIB SIZE_KIB [LOSSLESS] (VM 1): fio writes SIZE_KIB
# of DEV's namespace in BS_KIB blocks (RW: randwrite or write), then reads
# every block back and checks its crc32c; the write bandwidth is the figure.
# LOSSLESS: the name of the lossless run's figure, for the share kept.
fio_verify() {
	local dev=$1 rw=$2 bs=$3 size=$4 lossless=${5:-} blk out rc=0 terse
	local err wkb rkb bw name lines limit
	blk=$(cat "/tmp/nvme.$dev.blk" 2>/dev/null) ||
		{ echo "no namespace connected on $dev (the connect test failed)"; return 1; }
	[[ -b /dev/$blk ]] || { echo "/dev/$blk is gone"; return 1; }
	name="fio $rw $bs KiB${lossless:+, 1% loss}"
	limit=$([[ -n $lossless ]] && echo "$LOSSY_TIMEOUT" || echo "$TIMEOUT")
	lines=$(dmesg | wc -l)
	out=$(timeout -k 10 "$limit" fio --name=verify --filename="/dev/$blk" \
		--ioengine=libaio --direct=1 --iodepth=16 --rw="$rw" \
		--bs="${bs}k" --size="${size}k" --verify=crc32c --do_verify=1 \
		--verify_fatal=1 --verify_state_save=0 --output-format=terse --terse-version=3 2>&1) || rc=$?
	terse=$(grep '^3;' <<<"$out" | head -n 1)
	grep -v '^3;' <<<"$out" | head -n 20
	# What the host's NVMe and RDMA drivers said meanwhile (error
	# recovery, reconnects, timeouts): the first of each kind.
	dmesg | tail -n +$((lines + 1)) | grep -E 'nvme|rdma|infiniband' |
		grep -vE 'requeuing I/O|callbacks suppressed' |
		awk '{ k = $0; sub(/^\[[ 0-9.]*\] /, "", k); gsub(/[0-9]+/, "N", k) }
		     !seen[k]++' | head -n 12
	if ((rc != 0)); then
		((rc == 124 || rc == 137)) && echo "fio did not finish within ${limit}s"
		echo "fio exit status $rc"
		return 1
	fi
	[[ -n $terse ]] || { echo "no result line from fio"; return 1; }
	IFS=';' read -r -a f <<<"$terse"
	# Fields (terse version 3, from 1): 5 error, 6 KiB read, 47 KiB
	# written, 48 write bandwidth in KiB/s.
	err=${f[4]} rkb=${f[5]} wkb=${f[46]} bw=${f[47]}
	echo "fio: error $err, $wkb KiB written at $bw KiB/s, $rkb KiB read back and checked"
	((err == 0)) || { echo "fio reports error $err"; return 1; }
	((wkb == size)) || { echo "fio wrote $wkb KiB, not $size"; return 1; }
	((rkb >= wkb)) || { echo "fio checked only $rkb of the $wkb KiB it wrote"; return 1; }
	figure "$dev" "$name" "$(awk -v b="$bw" 'BEGIN { printf "%.2f", b * 1.024 / 1000 }')" MB/s
	[[ -z $lossless ]] || kept "$dev" "$lossless" "$name"
}

# disconnect DEV (VM 1): nvme disconnect removes the one controller of
# DEV's subsystem and its block device.
disconnect() {
	local dev=$1 nqn blk out rc=0
	nqn=$(nqn "$dev")
	blk=$(cat "/tmp/nvme.$dev.blk" 2>/dev/null) || blk=
	[[ -n $blk ]] || echo "no namespace connected on $dev (the connect test failed)"
	out=$(timeout -k 5 60 nvme disconnect -n "$nqn" 2>&1) || rc=$?
	echo "nvme disconnect: $out"
	((rc == 0)) || { echo "nvme disconnect: exit status $rc"; return 1; }
	[[ -n $blk ]] || return 1
	[[ $out == *"disconnected 1 controller"* ]] ||
		{ echo "expected one controller to go"; return 1; }
	wait_until 30 no_ctrl "$nqn" ||
		{ echo "controller $(ctrls "$nqn") still there after 30 s"; return 1; }
	wait_until 10 blk_gone "$blk" ||
		{ echo "/dev/$blk still there"; return 1; }
	rm -f "/tmp/nvme.$dev.blk"
	echo "no controller of $nqn, /dev/$blk gone"
}

# teardown: each VM takes down what it set up: the host's controllers and
# nvme-rdma, the target's exports, nvmet-rdma, nvmet and null_blk, then
# both RDMA devices and their modules. A module that does not unload (still
# in use) fails it.
teardown() {
	local dev nqn rc=0
	vm_barrier teardown || true
	if ((VM_INDEX == 1)); then
		for dev in "${DEVS[@]}"; do
			nqn=$(nqn "$dev")
			no_ctrl "$nqn" && continue
			echo "$nqn still connected: disconnecting"
			rc=1
			timeout -k 5 60 nvme disconnect -n "$nqn" || true
		done
		rmmod nvme_rdma || rc=1
	else
		for dev in "${DEVS[@]}"; do
			[[ -e $NVMET/subsystems/$(nqn "$dev") || -e $NVMET/ports/$(port_id "$dev") ]] ||
				continue
			echo "$(nqn "$dev") still exported: removing it"
			rc=1
			unexport "$dev" || true
		done
		rmmod nvmet_rdma || rc=1
		rmmod nvmet || rc=1
		rmmod null_blk || rc=1
	fi
	side_by_side_teardown || rc=1
	lsmod | grep -E '^(nvme|nvmet|null_blk|rdma_rxe|metaroce)' || true
	return "$rc"
}

# Sizes (KiB): every block is written and read back once per run. Less
# under loss, and a quarter of that on rxe, which stalls for its
# retransmission timeout on each loss (1 MiB of 4 KiB writes took it 111 s
# in CI). The figures are rates, so the share kept compares like with like.
SMALL=16384 LARGE=65536 SMALL_LOSSY=1024 LARGE_LOSSY=4096
lossy_kib() { [[ $1 == mr0 ]] && echo "$2" || echo $(($2 / 4)); }

tap_plan $((1 + 8 * ${#DEVS[@]} + 2))
run_test "setup: mr0 on link 0, rxe0 on link 1, nvmet (vm0), nvme-rdma (vm1)" setup
for dev in "${DEVS[@]}"; do
	run_test "$dev: nvmet exports a null_blk namespace over rdma at $(target_ip "$dev"):4420" \
		step 0 "$dev" export_ns "$dev"
	run_test "$dev: nvme connect -t rdma, the namespace's block device appears" \
		step 1 "$dev" connect "$dev"
	run_test "$dev: fio randwrite 4 KiB, crc32c verified" \
		step 1 "$dev" fio_verify "$dev" randwrite 4 $SMALL
	run_test "$dev: fio write 128 KiB, crc32c verified" \
		step 1 "$dev" fio_verify "$dev" write 128 $LARGE
	run_test "$dev: fio randwrite 4 KiB, crc32c verified, 1% loss each way" \
		lossy "$dev" step 1 "$dev" fio_verify "$dev" randwrite 4 \
		"$(lossy_kib "$dev" $SMALL_LOSSY)" \
		"fio randwrite 4 KiB"
	run_test "$dev: fio write 128 KiB, crc32c verified, 1% loss each way" \
		lossy "$dev" step 1 "$dev" fio_verify "$dev" write 128 \
		"$(lossy_kib "$dev" $LARGE_LOSSY)" \
		"fio write 128 KiB"
	run_test "$dev: nvme disconnect removes the controller and the block device" \
		step 1 "$dev" disconnect "$dev"
	run_test "$dev: nvmet export removed (port link, port, namespace, subsystem)" \
		step 0 "$dev" unexport "$dev"
done
run_test "teardown: nvme-rdma, nvmet-rdma, nvmet, null_blk, mr0, rxe0 unload" teardown
run_test "figures" figures_table
tap_finish
