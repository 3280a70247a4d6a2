#!/bin/bash
# vmrun bench self-test: a kernel report (a "Call Trace:", made harmlessly
# with sysrq-l: backtrace of all active CPUs) fails the test case in which
# it happens (tap.sh's dmesg check) and the vmrun run (guest dmesg scan).
set -euo pipefail
# shellcheck source=../../lib/tap.sh
source "$(dirname "$0")/../../lib/tap.sh"

backtrace() { echo l >/proc/sysrq-trigger; }

tap_plan 3
run_test "before" true
run_test "sysrq-l backtrace" backtrace
run_test "after" true
tap_finish
