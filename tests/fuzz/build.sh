#!/bin/sh
# Builds every tests/fuzz/fuzz_*.c with clang's libFuzzer, ASan and UBSan against
# lib/ and fs/, into build/fuzz/; with --run SECONDS also runs each one that long.
#
#   sh tests/fuzz/build.sh [--out DIR] [--run SECONDS] [NAME...]
#
# NAME (e.g. fuzz_chunk) limits the build and the run to those targets.
# tests/fuzz/NAME.flags, when present, holds extra libFuzzer options for the run;
# tests/fuzz/corpus/NAME/, when present, seeds the run's corpus.
# Exit status: 0 all built (and ran clean), 1 a build failed or a fuzzer found a bug,
# 2 usage.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
out="$top/build/fuzz"
run=""
usage() { echo "usage: $0 [--out DIR] [--run SECONDS] [NAME...]" >&2; exit 2; }
while [ $# -gt 0 ]; do
	case $1 in
	--out) [ $# -ge 2 ] || usage; out=$2; shift 2 ;;
	--run) [ $# -ge 2 ] || usage; run=$2; shift 2 ;;
	-h|--help) usage ;;
	-*) usage ;;
	*) break ;;
	esac
done
case $run in *[!0-9]*) usage ;; esac

CC=${CC:-clang}
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
CFLAGS="-std=gnu11 -g -O1 -Wall -Wextra -pthread -D_GNU_SOURCE"
CPPFLAGS="-I$top/lib -I$top/fs"
LIBS="-lisal -lntfs-3g -lext2fs -lcom_err -lsodium -lnettle -lcrypto -lzstd -ldeflate -lz -lm -pthread"

if ! command -v "$CC" >/dev/null 2>&1; then
	echo "fuzz: $CC not found" >&2
	exit 1
fi
mkdir -p "$out/obj" || exit 1

# The library once, instrumented for coverage, as an archive so each target
# pulls in only what it uses. NDZ_FUZZ_JOBS compilers at once (the processors).
jobs=${NDZ_FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
srcs=""
for src in "$top"/lib/*/*.c "$top"/fs/*.c; do
	case $src in "$top"/lib/cli/*) continue ;; esac	# the programs' own, not the library
	[ -f "$src" ] || continue
	srcs="$srcs ${src#"$top"/}"
done
# one compiler a source; a failure says which and makes xargs exit non-zero
export CC CFLAGS SAN CPPFLAGS top out
# shellcheck disable=SC2016,SC2086
printf '%s\n' $srcs | xargs -r -P "$jobs" -I{} sh -c '
	obj="$out/obj/$(echo "$1" | tr / _ | sed "s/\.c\$/.o/")"
	nice $CC $CFLAGS $SAN -fsanitize=fuzzer-no-link $CPPFLAGS -c -o "$obj" "$top/$1" ||
		{ echo "fuzz: compiling $1 failed" >&2; exit 1; }' sh {} || exit 1
objs=""
for rel in $srcs; do
	objs="$objs $out/obj/$(echo "$rel" | tr / _ | sed 's/\.c$/.o/')"
done
rm -f "$out/libndzfuzz.a"
# shellcheck disable=SC2086
[ -z "$objs" ] || ar rcs "$out/libndzfuzz.a" $objs || exit 1

targets=""
if [ $# -gt 0 ]; then
	for n in "$@"; do
		[ -f "$top/tests/fuzz/$n.c" ] || { echo "fuzz: no tests/fuzz/$n.c" >&2; exit 2; }
		targets="$targets $n"
	done
else
	for src in "$top"/tests/fuzz/fuzz_*.c; do
		[ -f "$src" ] && targets="$targets $(basename "$src" .c)"
	done
fi
[ -n "$targets" ] || { echo "fuzz: no targets" >&2; exit 1; }

failed=""
export LIBS
# shellcheck disable=SC2016,SC2086
printf '%s\n' $targets | xargs -r -P "$jobs" -I{} sh -c '
	printf "  FUZZ    %s\n" "$1"
	nice $CC $CFLAGS $SAN -fsanitize=fuzzer $CPPFLAGS -o "$out/$1" \
		"$top/tests/fuzz/$1.c" "$out/libndzfuzz.a" $LIBS ||
		{ echo "fuzz: building $1 failed" >&2; exit 1; }' sh {} || exit 1
[ -n "$run" ] || exit 0

for n in $targets; do
	corpus="$out/corpus/$n"
	mkdir -p "$corpus"
	if [ -d "$top/tests/fuzz/corpus/$n" ]; then
		cp -f "$top/tests/fuzz/corpus/$n"/* "$corpus"/ 2>/dev/null
	fi
	extra=""
	[ -f "$top/tests/fuzz/$n.flags" ] && extra=$(cat "$top/tests/fuzz/$n.flags")
	log="$out/$n.log"
	# shellcheck disable=SC2086
	if nice "$out/$n" -max_total_time="$run" -timeout=20 -rss_limit_mb=2048 \
		-artifact_prefix="$out/$n-" $extra "$corpus" >"$log" 2>&1; then
		printf 'fuzz: %s ran %ss clean: %s\n' "$n" "$run" \
			"$(grep -E '^(#[0-9]+|Done)' "$log" | tail -n 1)"
	else
		printf 'fuzz: %s FAILED (log %s)\n' "$n" "$log" >&2
		grep -E 'ERROR|SUMMARY|Test unit written|artifact' "$log" | head -n 10 >&2
		failed="$failed $n"
	fi
done
[ -z "$failed" ] || { echo "fuzz: failed:$failed" >&2; exit 1; }
exit 0
