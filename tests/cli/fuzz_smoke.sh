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
for f in "$NDZ_TOP"/tests/fuzz/fuzz_*.c; do
	[ -f "$f" ] || continue
	n=$(basename "$f" .c)
	if [ ! -x "$out/$n" ]; then
		not_ok "$n: not built"
		continue
	fi
	extra=""
	[ -f "$NDZ_TOP/tests/fuzz/$n.flags" ] && extra=$(cat "$NDZ_TOP/tests/fuzz/$n.flags")
	mkdir -p "$out/corpus-$n"
	seeds="$NDZ_TOP/tests/fuzz/corpus/$n"
	[ -d "$seeds" ] && cp -f "$seeds"/* "$out/corpus-$n"/ 2>/dev/null
	# shellcheck disable=SC2086
	if nice "$out/$n" -max_total_time="$secs" -timeout=20 -rss_limit_mb=2048 \
		-artifact_prefix="$out/$n-" $extra "$out/corpus-$n" >"$out/$n.log" 2>&1; then
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
