#!/bin/bash
# Kernel log (dmesg) report scanning, shared by the vmrun guest init and
# tests (through tap.sh).  Source it; it defines:
#
#   dmesg_scan [FILE]  print the kernel report lines of FILE (default: stdin),
#                      i.e. lines matching dmesg-patterns.txt and not
#                      dmesg-ignore.txt; return 1 if there are any, else 0
#                      (2 if FILE cannot be read).
#   dmesg_mark         write a unique marker line into the kernel log.
#   dmesg_check        scan the kernel log written since the last dmesg_mark
#                      (the whole log if none); same output/status as
#                      dmesg_scan.  Returns 0 if dmesg cannot be read.
#
# Markers (rather than `dmesg -C`) keep the whole log for the final scan and
# for the saved dmesg.txt.  vmrun boots with printk.devkmsg=on so that writes
# to /dev/kmsg are not rate limited.

DMESG_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
DMESG_PATTERNS=${DMESG_PATTERNS:-$DMESG_LIB_DIR/dmesg-patterns.txt}
DMESG_IGNORE=${DMESG_IGNORE:-$DMESG_LIB_DIR/dmesg-ignore.txt}
DMESG_MARK=

# Under TCG emulation every exec of a dynamically linked program costs
# ~0.1 s, so the pattern files are read with bash builtins, once, and a scan
# runs a single grep.

# _dmesg_read_patterns FILE ARRAY: ARRAY=(the patterns of FILE).
_dmesg_read_patterns() {
	local -n _out=$2
	local line
	_out=()
	while IFS= read -r line || [[ -n $line ]]; do
		[[ $line =~ ^[[:space:]]*(#|$) ]] || _out+=("$line")
	done <"$1"
}
_dmesg_patterns=()
_dmesg_ignore=()
_dmesg_read_patterns "$DMESG_PATTERNS" _dmesg_patterns
_dmesg_read_patterns "$DMESG_IGNORE" _dmesg_ignore
_dmesg_grep_args=()
for _p in "${_dmesg_patterns[@]}"; do
	_dmesg_grep_args+=(-e "$_p")
done
unset _p

# _dmesg_drop_ignored: read report candidates (grep output) on stdin, drop
# the ignored ones, print the rest; return 1 if any.  An ignored WARNING's
# "Call Trace:" (the next candidate, within a second of it) is part of the
# same report and is dropped with it.
_dmesg_drop_ignored() {
	local line pat found=0 warned=
	while IFS= read -r line; do
		if [[ -n $warned && $line =~ ^\[\ *([0-9]+)\.[0-9]+\]\ Call\ Trace: ]] &&
			((BASH_REMATCH[1] - warned <= 1)); then
			warned=
			continue
		fi
		warned=
		for pat in "${_dmesg_ignore[@]}"; do
			[[ $line =~ $pat ]] || continue
			[[ $line =~ ^\[\ *([0-9]+)\.[0-9]+\]\ WARNING: ]] &&
				warned=${BASH_REMATCH[1]}
			continue 2
		done
		printf '%s\n' "$line"
		found=1
	done
	return "$found"
}

# shellcheck disable=SC2120 # FILE is optional
dmesg_scan() {
	local found
	# grep: 0 = found, 1 = nothing found, 2 = error.
	found=$(grep -E "${_dmesg_grep_args[@]}" -- "${1:--}") || (($? == 1)) || return 2
	[[ -n $found ]] || return 0
	_dmesg_drop_ignored <<<"$found"
}

dmesg_mark() {
	DMESG_MARK="selftest-dmesg-mark-$$-$RANDOM$RANDOM"
	# "<6>": log at info level, below the console loglevel.
	echo "<6>$DMESG_MARK" 2>/dev/null >/dev/kmsg || DMESG_MARK=
}

dmesg_check() {
	local log line lines=() mark=()
	log=$(dmesg 2>/dev/null) || return 0
	# One grep picks the report lines and the mark; keep what follows the
	# mark.  (Cutting the log at the mark with ${log#*mark} is quadratic.)
	[[ -n $DMESG_MARK ]] && mark=(-e "$DMESG_MARK")
	while IFS= read -r line; do
		if [[ -n $DMESG_MARK && $line == *"$DMESG_MARK"* ]]; then
			lines=()
		else
			lines+=("$line")
		fi
	done < <(grep -E "${mark[@]}" "${_dmesg_grep_args[@]}" <<<"$log")
	((${#lines[@]} > 0)) || return 0
	printf '%s\n' "${lines[@]}" | _dmesg_drop_ignored
}

# dmesg_reports_by_step PREFIX: the kernel reports logged since the last
# dmesg_mark, each as "STEP<tab>LINE", where STEP is what followed PREFIX on
# the last line that contained PREFIX before the report (a tool logs
# "PREFIX<step>" to /dev/kmsg before each step; empty before the first).
# Returns 1 if there are any, else 0.
dmesg_reports_by_step() {
	local prefix=$1 log line step='' mark=() reports=()
	log=$(dmesg 2>/dev/null) || return 0
	[[ -n $DMESG_MARK ]] && mark=(-e "$DMESG_MARK")
	while IFS= read -r line; do
		if [[ -n $DMESG_MARK && $line == *"$DMESG_MARK"* ]]; then
			step=''
			reports=()
		elif [[ $line == *"$prefix"* ]]; then
			step=${line#*"$prefix"}
		elif [[ -n $(_dmesg_drop_ignored <<<"$line") ]]; then
			reports+=("$step"$'\t'"$line")
		fi
	done < <(grep -E "${mark[@]}" -e "$prefix" "${_dmesg_grep_args[@]}" <<<"$log")
	((${#reports[@]} > 0)) || return 0
	printf '%s\n' "${reports[@]}"
	return 1
}
