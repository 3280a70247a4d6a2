#!/bin/bash
# The main job (make run): two hosts, each a VM with one MetaRoCE device on
# its Ethernet link to the other; VM 0 runs the ib_write_bw server, VM 1
# the client, which prints the result.
source "$(dirname "$0")/../metaroce/lib.sh"
source "$(dirname "$0")/../lib/guest.sh"
set -e

vm_link_setup
metaroce_load
rdma link add mr0 type metaroce netdev "$(vm_link_if 0)"
wait_until 10 eval 'gids mr0 | grep -q ffff:0ac8'
if ((VM_INDEX == 1)); then
	rdma link show mr0/1
	ibv_devinfo -d mr0 | grep -E 'hca_id|transport|state|active_mtu|link_layer'
fi

if ((VM_INDEX == 0)); then
	ib_write_bw -d mr0 -x 1 ${RUN_ARGS:--s 65536 -D 10} >/dev/null &
	wait_until 30 eval "ss -Hltn 'sport = :18515' | grep -q LISTEN"
	vm_publish server-up 1
	wait $!
else
	vm_wait server-up >/dev/null
	ib_write_bw -d mr0 -x 1 ${RUN_ARGS:--s 65536 -D 10} "$(vm_link_ip 0 0)"
	rdma statistic show link mr0/1
fi
