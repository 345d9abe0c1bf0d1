#!/bin/sh
# The runner of a slow group (tests/vm/run.sh, tests/ceph/run.sh: `make check-vm`,
# `make check-ceph`): runs each SCRIPT against one build directory, with the same
# environment as tests/run.sh and NDZ_SLOW=1 (a case `make check` runs in the plain build
# only runs here in any build), and ends with one line: N passed, N failed, N skipped.
# Usage: slowrun.sh BUILD PREFIX TIMEOUT_S SCRIPT...   (PREFIX names the logs: BUILD/PREFIXNAME)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
b=$1 prefix=$2 limit=$3
shift 3
bdir="$top/$b"
[ -d "$bdir/bin" ] || { echo "$0: $bdir/bin missing; build first" >&2; exit 2; }
case $b in *san*) san=1 ;; *) san=0 ;; esac
logdir="$top/build/test-logs"
mkdir -p "$logdir"
pass=0 fail=0 skip=0
for s in "$@"; do
	name="$b/$prefix$(basename "$s" .sh)"; log="$logdir/$(echo "$name" | tr / _).log"
	t0=$(date +%s)
	NDZ_TOP="$top" NDZ_BIN="$bdir/bin" NDZ_BUILD="$bdir" NDZ_SANITIZED=$san NDZ_SLOW=1 \
		timeout "$limit" sh "$s" </dev/null >"$log" 2>&1; rc=$?
	secs=$(($(date +%s) - t0))
	p=$(grep -c '^ok ' "$log") f=$(grep -c '^not ok ' "$log")
	if [ "$rc" = 77 ]; then
		skip=$((skip + 1)); printf 'SKIP %s: %s\n' "$name" "$(grep -m1 '^skip' "$log")"
		continue
	fi
	[ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
	[ "$p" = 0 ] && [ "$f" = 0 ] && f=1
	pass=$((pass + p)); fail=$((fail + f))
	if [ "$f" != 0 ]; then
		printf 'FAIL %s (%s passed, %s failed, %ss; log %s)\n' "$name" "$p" "$f" "$secs" "$log"
		grep -E '^not ok ' "$log"
	else
		printf 'PASS %s (%s, %ss)\n' "$name" "$p" "$secs"
	fi
	grep '^# ' "$log" | head -n 12
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
