#!/bin/bash
# make check: every test, with one summary line at the end.
#   1. host unit tests (CTest: the provider, libsoftmetaroce; the kernel
#      report scan of the VM tests on sample logs)
#   2. libsoftmetaroce under AddressSanitizer and UBSan (clang), and the
#      codec fuzzer for a bounded time (CHECK_FUZZ_SECONDS, default 30)
#   3. the Debian packages (make deb, lintian clean) and the in-tree build
#      of the driver in linux-source-6.1 (W=1, sparse)
#   4. the VM selftests (selftests/run.sh), which boot Debian's 6.1 (the
#      package suite among them), then a subset on Debian's 6.12
#      (CHECK_612_SUITES; none when its headers are not installed).
#      RXE_BASELINE=0 runs consumers and nvme on mr0 only, not also on rxe
#      (a quicker run; CI runs both).
# Each section's heading says when it started (minutes:seconds into check).
# Pass --installed to test what "make install" put on the host.
set -uo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$TOP/build}
JOBS=$(nproc)
cd "$TOP"

passed=0
failed=0

# section NAME: a heading with the time since check started.
section() {
	printf '=== %s [%d:%02d]\n' "$1" $((SECONDS / 60)) $((SECONDS % 60))
}

# count PASSED FAILED: add to the totals.
count() {
	passed=$((passed + $1))
	failed=$((failed + $2))
}

# ctest_counts LOG: "P F" from CTest's "N% tests passed, F tests failed out
# of T" line (one failure when there is no such line).
ctest_counts() {
	local line total fail
	line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$1" | tail -n 1)
	if [[ -z $line ]]; then
		echo "0 1"
		return
	fi
	fail=$(sed -E 's/.* ([0-9]+) tests? failed out of.*/\1/' <<<"$line")
	total=$(sed -E 's/.*out of ([0-9]+).*/\1/' <<<"$line")
	echo "$((total - fail)) $fail"
}

section "host unit tests"
(cd "$BUILD/userspace" && ctest --output-on-failure -j "$JOBS") 2>&1 |
	tee "$BUILD/ctest.log"
count $(ctest_counts "$BUILD/ctest.log")

section "kernel report scan (the VM tests' dmesg rules, on sample logs)"
selftests/vm/test-bench.sh --host 2>&1 | tee "$BUILD/test-bench.log"
count "$(grep -cE '^ok [0-9]+' "$BUILD/test-bench.log")" \
	"$(grep -cE '^not ok [0-9]+' "$BUILD/test-bench.log")"

# fuzz NAME BINARY CORPUS LOG: a bounded libFuzzer run, one result.
fuzz() {
	if "$2" -max_total_time="${CHECK_FUZZ_SECONDS:-30}" "$3" >"$4" 2>&1; then
		echo "$1: $(grep -Eo 'Done [0-9]+ runs in [0-9]+ second' "$4" |
			tail -n 1), no crash"
		count 1 0
	else
		tail -n 30 "$4"
		echo "$1: FAILED (log: $4)"
		count 0 1
	fi
}

section "libsoftmetaroce and the transport core with ASan and UBSan (clang), fuzzers"
san=$BUILD/sanitize
if CC=clang CXX=clang++ cmake -S userspace -B "$san" -DMETAROCE_SANITIZE=ON \
	-DMETAROCE_FUZZ=ON -DMETAROCE_WERROR=ON >"$BUILD/sanitize.log" 2>&1 &&
	cmake --build "$san" -j "$JOBS" --target softmetaroce_tests \
		softmetaroce_v2_tests mrcore_tests mrcore_differential_tests \
		softmetaroce_codec_fuzz softmetaroce_seed_corpus \
		softmetaroce_codec_replay mrcore_wire_fuzz \
		>>"$BUILD/sanitize.log" 2>&1; then
	(cd "$san" && ctest -L 'softmetaroce|mrcore' -j "$JOBS") 2>&1 |
		tee "$BUILD/ctest-sanitize.log" | tail -n 3
	count $(ctest_counts "$BUILD/ctest-sanitize.log")

	corpus=$(mktemp -d)
	"$san"/libsoftmetaroce/softmetaroce_seed_corpus "$corpus" >/dev/null
	fuzz "codec fuzz" "$san"/libsoftmetaroce/softmetaroce_codec_fuzz \
		"$corpus" "$BUILD/fuzz.log"
	rm -rf "$corpus"
	# protocol v2's parser, from an empty corpus (its comparisons guide it)
	corpus=$(mktemp -d)
	fuzz "v2 parser fuzz" "$san"/transport/mrcore_wire_fuzz "$corpus" \
		"$BUILD/wire-fuzz.log"
	rm -rf "$corpus"
else
	tail -n 30 "$BUILD/sanitize.log"
	echo "sanitizer build FAILED"
	count 0 1
fi

section "Debian packages (make deb, lintian)"
if scripts/build-deb.sh "$BUILD/deb" >"$BUILD/deb.log" 2>&1; then
	grep -E '\.deb$' "$BUILD/deb.log"
	echo "ok - make deb: packages built, lintian reports no error or warning"
	count 1 0
else
	tail -n 30 "$BUILD/deb.log"
	echo "not ok - make deb (log: $BUILD/deb.log)"
	count 0 1
fi

section "in-tree build (linux-source-6.1, W=1, sparse)"
scripts/intree-build.sh "$BUILD/intree.log" | tee "$BUILD/intree.out"
count "$(grep -cE '^ok ' "$BUILD/intree.out")" "$(grep -cE '^not ok ' "$BUILD/intree.out")"

# selftests_counts LOG: add run.sh's summary line of LOG to the totals.
selftests_counts() {
	local line
	line=$(grep -E '^selftests: [0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
	if [[ -n $line ]]; then
		count $(sed -E 's/selftests: ([0-9]+) passed, ([0-9]+) failed/\1 \2/' <<<"$line")
	else
		count 0 1
	fi
}

section "VM selftests"
selftests/run.sh "$@" | tee "$BUILD/selftests.log"
selftests_counts "$BUILD/selftests.log"

kver_612=$(dpkg-query -W -f='${Depends}' linux-headers-6.12-amd64 2>/dev/null |
	sed -n 's/^linux-headers-\([^ ,|]*\).*/\1/p')
if [[ -n $kver_612 ]]; then
	section "VM selftests on Debian's 6.12 ($kver_612)"
	# shellcheck disable=SC2086 # a list of suite names
	selftests/run.sh "$@" --kver "$kver_612" \
		${CHECK_612_SUITES:-device verbs perftest-netns loss} |
		tee "$BUILD/selftests-6.12.log"
	selftests_counts "$BUILD/selftests-6.12.log"
fi

section "end"
echo "check: $passed passed, $failed failed"
((failed == 0))
