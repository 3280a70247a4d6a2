#!/bin/bash
# Protocol v2 on the soft-NIC (docs/protocol-v2.md; issue 15, under way):
# the module loaded with protocol=2, and the verbs suite's cases for RC
# (SEND, WRITE, READ, atomics, with and without immediate data, inline,
# scatter-gather, deep and full queues, fences, read credits, RNR, remote
# errors and their NAKs, the retry timeout), memory regions, QP states,
# every byte checked by the cases themselves. One VM, as verbs.sh.
#
# Cases failed now and then with a retry timeout they never showed alone
# (the clock read before the QP's lock, fixed; issue 15's note), so a
# failed case still runs once more, and the log says so: a case that fails
# twice fails the suite. Not yet listed: SRQ traffic, UD, memory windows,
# rereg.
export METAROCE_PROTOCOL=2
export METAROCE_VERBS_RERUN_FAILED=1
CASES=('Topo/Rc.*' 'Mr.*' 'RcError.*' 'Topo/Atomic.*' 'QpState.*')
filter=$(IFS=:; echo "${CASES[*]}")
exec "$(dirname "$0")/verbs.sh" --gtest_filter="$filter" "$@"
