#!/bin/sh
# Runs every unit test and every tests/cli/*.sh script against each build directory
# given (e.g. build build-san) and ends with one line: N passed, N failed.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 1 ] || set -- build
pass=0 fail=0 skip=0 failed_names=""
logdir="$top/build/test-logs"
mkdir -p "$logdir"

count() {	# count TAP lines of one log; a non-zero exit without "not ok" is a failure
	name=$1 log=$2 rc=$3
	p=$(grep -c '^ok ' "$log")
	f=$(grep -c '^not ok ' "$log")
	if [ "$rc" = 77 ]; then
		skip=$((skip + 1))
		printf 'SKIP %s: %s\n' "$name" "$(grep -m1 -i 'skip' "$log" | cut -c1-120)"
		return
	fi
	if [ "$rc" != 0 ] && [ "$f" = 0 ]; then f=1; fi
	if [ "$p" = 0 ] && [ "$f" = 0 ]; then f=1; echo "no test ran" >>"$log"; fi
	pass=$((pass + p)); fail=$((fail + f))
	if [ "$f" != 0 ]; then
		failed_names="$failed_names $name"
		printf 'FAIL %s (%s passed, %s failed, %ss; log %s)\n' "$name" "$p" "$f" "$secs" "$log"
		grep -E '^not ok ' "$log" | head -n 20
		tail -n 25 "$log" | sed 's/^/    | /'
	else
		printf 'PASS %s (%s, %ss)\n' "$name" "$p" "$secs"
	fi
}

for b in "$@"; do
	bdir="$top/$b"
	[ -d "$bdir/bin" ] || { echo "run.sh: $bdir/bin missing; build first" >&2; exit 2; }
	san=0; case $b in *san*) san=1 ;; esac
	for t in "$bdir"/tests/test_*; do
		[ -x "$t" ] || continue
		name="$b/$(basename "$t")"; log="$logdir/$(echo "$name" | tr / _).log"
		t0=$(date +%s)
		CMOCKA_MESSAGE_OUTPUT=TAP timeout 300 "$t" >"$log" 2>&1; rc=$?
		secs=$(($(date +%s) - t0))
		count "$name" "$log" "$rc"
	done
	for s in "$top"/tests/cli/*.sh; do
		[ -f "$s" ] || continue
		name="$b/$(basename "$s" .sh)"; log="$logdir/$(echo "$name" | tr / _).log"
		t0=$(date +%s)
		NDZ_TOP="$top" NDZ_BIN="$bdir/bin" NDZ_BUILD="$bdir" NDZ_SANITIZED=$san \
			timeout 900 sh "$s" </dev/null >"$log" 2>&1; rc=$?
		secs=$(($(date +%s) - t0))
		count "$name" "$log" "$rc"
	done
done
[ -n "$failed_names" ] && echo "failed:$failed_names"
[ "$skip" != 0 ] && echo "($skip test files skipped)"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
