#!/bin/sh
# Builds every libFuzzer target (tests/fuzz/build.sh) and runs each 3 s: the
# parsers of untrusted bytes must survive a short fuzzing run. Plain build only.
. "$NDZ_TOP/tests/lib.sh"

[ "${NDZ_SANITIZED:-0}" = 1 ] && skip_all "runs once, in the plain build"
command -v clang >/dev/null 2>&1 || skip_all "clang not installed"
# libFuzzer ships in libclang-rt-*-dev; probe it with a trivial target
cat >"$T/probe.c" <<'C'
#include <stddef.h>
#include <stdint.h>
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n);
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }
C
clang -fsanitize=fuzzer,address,undefined -o "$T/probe" "$T/probe.c" >/dev/null 2>&1 ||
	skip_all "clang cannot link libFuzzer (install libclang-rt-14-dev)"

secs=${NDZ_FUZZ_SECONDS:-3}
out="$T/fuzz"
check "fuzzers build" sh "$NDZ_TOP/tests/fuzz/build.sh" --out "$out"
# run1 NAME: one fuzzer its time, its exit status into $out/NAME.rc
run1() {
	extra=""
	[ -f "$NDZ_TOP/tests/fuzz/$1.flags" ] && extra=$(cat "$NDZ_TOP/tests/fuzz/$1.flags")
	mkdir -p "$out/corpus-$1"
	seeds="$NDZ_TOP/tests/fuzz/corpus/$1"
	[ -d "$seeds" ] && cp -f "$seeds"/* "$out/corpus-$1"/ 2>/dev/null
	# shellcheck disable=SC2086
	nice "$out/$1" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
		-artifact_prefix="$out/$1-" $extra "$out/corpus-$1" >"$out/$1.log" 2>&1
	echo $? >"$out/$1.rc"
}
# as many at once as there are processors (each runs its full time on one)
jobs=$(nproc 2>/dev/null || echo 1)
names="" pids=""
for f in "$NDZ_TOP"/tests/fuzz/fuzz_*.c; do
	[ -f "$f" ] || continue
	n=$(basename "$f" .c)
	names="$names $n"
	[ -x "$out/$n" ] || continue
	run1 "$n" &
	pids="$pids $!"
	# shellcheck disable=SC2086
	if [ "$(echo $pids | wc -w)" -ge "$jobs" ]; then wait $pids; pids=""; fi
done
# shellcheck disable=SC2086
wait $pids
for n in $names; do
	if [ ! -x "$out/$n" ]; then
		not_ok "$n: not built"
		continue
	fi
	if [ "$(cat "$out/$n.rc" 2>/dev/null)" = 0 ]; then
		runs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$out/$n.log" | tail -n 1)
		ok "$n: ${secs}s of fuzzing, $runs runs, no finding"
	else
		not_ok "$n: fuzzer found a problem"
		grep -E 'ERROR|SUMMARY|#[0-9]+ in ' "$out/$n.log" | head -n 20 | sed 's/^/# /'
		for a in "$out/$n"-crash-* "$out/$n"-leak-* "$out/$n"-timeout-* "$out/$n"-oom-*; do
			[ -f "$a" ] && echo "# input (base64): $(base64 -w0 "$a" | cut -c1-2000)"
		done
	fi
done
done_testing
