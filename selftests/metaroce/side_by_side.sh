#!/bin/bash
# Shared by the suites that run one program on mr0 and then on the kernel's
# rxe between two VMs (consumers.sh, nvme.sh): two VMs joined by two links
# (vmrun --vms 2 --links 2), mr0 on link 0 and rxe0 on link 1, so that
# rdma_cm finds each device by its own address; VM 0 serves, VM 1 connects.
# Source it after lib.sh and guest.sh, with FIGURES set to the file that
# collects the figures ("DEV TEST VALUE UNIT" lines).
#
# The programs run on mr0, then on rxe0 as the baseline. RXE_BASELINE=0
# runs them on mr0 only, for a quicker run (rxe's half costs minutes).

# The devices the programs run on.
DEVS=(mr0)
[[ ${RXE_BASELINE:-1} == 0 ]] || DEVS+=(rxe0)

# The link a device is on, and the server's (VM 0's) address there.
dev_link() { [[ $1 == mr0 ]] && echo 0 || echo 1; }
server_ip() { vm_link_ip "$(dev_link "$1")" 0; }

# dev_ipv4_gid DEV: the GID (sysfs notation) of DEV's link's IPv4 address.
dev_ipv4_gid() {
	local a
	IFS=. read -ra a <<<"$(vm_link_ip "$(dev_link "$1")")"
	printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' \
		"${a[0]}" "${a[1]}" "${a[2]}" "${a[3]}"
}

# side_by_side_setup: mr0 on link 0, rxe0 on link 1, both with the GID of
# their link's IPv4 address; the peer's addresses resolved on both links.
side_by_side_setup() {
	metaroce_load
	modprobe rdma_rxe
	vm_link_setup
	rdma link add mr0 type metaroce netdev "$(vm_link_if 0)"
	rdma link add rxe0 type rxe netdev "$(vm_link_if 1)"
	wait_until 10 has_ipv4_gid mr0
	wait_until 10 has_ipv4_gid rxe0
	rdma link show
	busybox ping -c 1 -W 5 "$(vm_link_ip 0 "$VM_PEER_INDEX")" >/dev/null
	busybox ping -c 1 -W 5 "$(vm_link_ip 1 "$VM_PEER_INDEX")" >/dev/null
}

# side_by_side_teardown: both devices deleted, rxe and metaroce unloaded.
side_by_side_teardown() {
	local rc=0
	rdma link delete mr0 || rc=1
	rdma link delete rxe0 || rc=1
	rmmod rdma_rxe || rc=1
	metaroce_unload || rc=1
	return "$rc"
}

has_ipv4_gid() { gids "$1" | grep -qx "$(dev_ipv4_gid "$1")"; }

# lossy DEV CMD...: CMD with netem dropping 1% of the packets each VM sends
# on DEV's link, so both directions lose 1%; both VMs apply it before either
# goes on, and take it off once both are done.
lossy() {
	local dev=$1 ifc rc=0 before
	ifc=$(vm_link_if "$(dev_link "$dev")")
	shift
	before=$(hw_counters "$dev")
	tc qdisc replace dev "$ifc" root netem loss 1%
	vm_barrier loss-on || rc=1
	# In a subshell: a skip (tap_skip exits) must not leave the loss on.
	((rc != 0)) || ("$@") || rc=$?
	vm_barrier loss-off || true
	tc qdisc del dev "$ifc" root
	# How this VM's end recovered: the counters that moved.
	echo "counters of $dev in vm$VM_INDEX under loss:" \
		"$(counter_deltas "$before" "$(hw_counters "$dev")")"
	return "$rc"
}

# hw_counters DEV: "name value" lines of DEV's port 1 hardware counters.
hw_counters() {
	local f
	for f in /sys/class/infiniband/"$1"/ports/1/hw_counters/*; do
		[[ -r $f ]] && echo "${f##*/} $(<"$f")"
	done
}

# counter_deltas BEFORE AFTER: "name=delta" for each counter that moved.
counter_deltas() {
	awk 'NR == FNR { v[$1] = $2; next }
	     $2 != v[$1] { printf "%s%s=%d", sep, $1, $2 - v[$1]; sep = " " }' \
		<(echo "$1") <(echo "$2")
}

# figure DEV TEST VALUE UNIT: a measured value, recorded by the VM that
# measured it (FIGURE_VM, default 1: the client). A value that is not a
# number fails mr0 and is left out for rxe0.
figure() {
	((VM_INDEX == ${FIGURE_VM:-1})) || return 0
	if ! [[ $3 =~ ^[0-9]+(\.[0-9]+)?$ ]]; then
		echo "no figure in the output (got '$3')"
		[[ $1 == mr0 ]] && return 1
		return 0
	fi
	echo "figure: $*"
	echo "$*" >>"$FIGURES"
}

# figure_value DEV TEST: the value of DEV's figure named exactly TEST.
figure_value() {
	awk -v d="$1" -v t="$2" '$1 == d && substr($0, length(d) + 2) == t " " $(NF - 1) " " $NF {
		print $(NF - 1) }' "$FIGURES" | tail -n 1
}

# kept DEV LOSSLESS LOSSY: the share of figure LOSSLESS that LOSSY kept.
kept() {
	((VM_INDEX == ${FIGURE_VM:-1})) || return 0
	local a b
	a=$(figure_value "$1" "$2")
	b=$(figure_value "$1" "$3")
	[[ -n $a && -n $b ]] || return 0
	figure "$1" "$3, kept" "$(awk -v a="$a" -v b="$b" 'BEGIN { printf "%.0f", 100 * b / a }')" %
}

# figures_table: the figures as a table, a test a row, a column for each
# device of DEVS ("fails" where a device has none).
figures_table() {
	((VM_INDEX == 1)) || return 0
	awk -v devs="${DEVS[*]}" '
	     BEGIN { nd = split(devs, d, " ")
		     head = "| test |"; rule = "|---|"
		     for (j = 1; j <= nd; j++) { head = head " " d[j] " |"; rule = rule "---|" }
		     print head; print rule }
	     { dev = $1; unit = $NF; val = $(NF - 1); $1 = ""; $NF = ""; $(NF - 1) = "";
	       sub(/^ +/, ""); sub(/ +$/, ""); key = $0
	       if (!(key in seen)) { seen[key] = 1; order[++n] = key }
	       v[key, dev] = val " " unit }
	     END { for (i = 1; i <= n; i++) {
		     k = order[i]; row = "| " k " |"
		     for (j = 1; j <= nd; j++)
			     row = row " " ((k, d[j]) in v ? v[k, d[j]] : "fails") " |"
		     print row } }' "$FIGURES"
}
