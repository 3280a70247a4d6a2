#!/bin/bash
# MetaRoCE against the kernel's rxe over the same two-VM link, in one run:
# ib_write_bw (64 KiB) and ib_write_lat (8 B), BENCH_REPS repetitions each,
# alternating the two devices. VM 0 runs the perftest servers, VM 1 the
# clients; VM 1 prints the medians and the ratios. Run by scripts/bench.sh.
source "$(dirname "$0")/../metaroce/lib.sh"
source "$(dirname "$0")/../lib/guest.sh"
set -e

REPS=${BENCH_REPS:-3}
DURATION=${BENCH_DURATION:-8}
LAT_ITERS=${BENCH_LAT_ITERS:-2000}
DEVS=(rxe0 mr0)
RESULTS=$VM_SCRATCH/bench-results.txt

vm_link_setup
metaroce_load
modprobe rdma_rxe
ndev=$(vm_link_if 0)
rdma link add rxe0 type rxe netdev "$ndev"
rdma link add mr0 type metaroce netdev "$ndev"
wait_until 10 eval 'gids mr0 | grep -q ffff:0ac8'
wait_until 10 eval 'gids rxe0 | grep -q ffff:0ac8'
peer=$(vm_link_ip 0 "$VM_PEER_INDEX")

# run_pair RUN TOOL DEV ARGS...: the server here on VM 0, the client on
# VM 1, which prints the client's output.
run_pair() {
	local run=$1 tool=$2 dev=$3 port=$((18515 + $1))
	shift 3
	if ((VM_INDEX == 0)); then
		timeout 120 "$tool" -d "$dev" -x 1 -p "$port" "$@" >/dev/null &
		local pid=$!
		busybox sleep 1
		vm_publish "ready.$run" 1
		wait "$pid" || echo "server $tool on $dev failed" >&2
	else
		vm_wait "ready.$run" >/dev/null
		timeout 120 "$tool" -d "$dev" -x 1 -p "$port" "$@" "$peer"
	fi
}

run=0
: >"$RESULTS.$VM_INDEX"
for rep in $(seq "$REPS"); do
	for dev in "${DEVS[@]}"; do
		run=$((run + 1))
		out=$(run_pair $run ib_write_bw "$dev" -s 65536 -D "$DURATION")
		if ((VM_INDEX == 1)); then
			bw=$(awk '$1 == 65536 && NF >= 5 { print $4 }' <<<"$out")
			echo "write_bw $dev ${bw:-0}" | tee -a "$RESULTS"
		fi
		vm_barrier "bw.$run"

		run=$((run + 1))
		out=$(run_pair $run ib_write_lat "$dev" -s 8 -n "$LAT_ITERS")
		if ((VM_INDEX == 1)); then
			lat=$(awk '$1 == 8 && NF >= 5 { print $5 }' <<<"$out")
			echo "write_lat $dev ${lat:-0}" | tee -a "$RESULTS"
		fi
		vm_barrier "lat.$run"
	done
done

((VM_INDEX == 1)) || exit 0
# Medians per (test, device), then MetaRoCE relative to rxe.
/usr/bin/python3 - "$RESULTS" <<'PY'
import statistics, sys
vals = {}
for line in open(sys.argv[1]):
    test, dev, v = line.split()
    vals.setdefault((test, dev), []).append(float(v))
med = {k: statistics.median(v) for k, v in vals.items()}
print("\nmedians over %d runs each" % len(next(iter(vals.values()))))
for (test, dev), m in sorted(med.items()):
    unit = "MB/s" if test == "write_bw" else "us (typical)"
    print("  %-10s %-6s %10.2f %s   runs: %s" % (test, dev, m, unit,
          " ".join("%.2f" % x for x in vals[(test, dev)])))
bw = med[("write_bw", "mr0")] / max(med[("write_bw", "rxe0")], 1e-9)
lat = med[("write_lat", "mr0")] / max(med[("write_lat", "rxe0")], 1e-9)
print("ratio metaroce/rxe: write_bw %.2fx (higher is better), "
      "write_lat %.2fx (lower is better)" % (bw, lat))
PY
