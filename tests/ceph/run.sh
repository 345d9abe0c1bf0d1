#!/bin/sh
# Runs the object-store tests against a real single-node Ceph (tests/ceph/*.sh but the
# helper ceph.sh; `make check-ceph`), the full set, and ends with one line: N passed,
# N failed, N skipped. `make check` runs the short case (tests/cli/site_store.sh).
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
b=${1:-build}
bdir="$top/$b"
[ -d "$bdir/bin" ] || { echo "tests/ceph/run.sh: $bdir/bin missing; build first" >&2; exit 2; }
case $b in *san*) san=1 ;; *) san=0 ;; esac
logdir="$top/build/test-logs"
mkdir -p "$logdir"
pass=0 fail=0 skip=0
for s in "$top"/tests/ceph/*.sh; do
	case $s in */ceph.sh|*/run.sh) continue ;; esac
	name="$b/ceph-$(basename "$s" .sh)"; log="$logdir/$(echo "$name" | tr / _).log"
	t0=$(date +%s)
	NDZ_TOP="$top" NDZ_BIN="$bdir/bin" NDZ_BUILD="$bdir" NDZ_SANITIZED=$san \
		timeout 1200 sh "$s" </dev/null >"$log" 2>&1; rc=$?
	secs=$(($(date +%s) - t0))
	p=$(grep -c '^ok ' "$log") f=$(grep -c '^not ok ' "$log")
	if [ "$rc" = 77 ]; then
		skip=$((skip + 1)); printf 'SKIP %s: %s\n' "$name" "$(grep -m1 '^skip' "$log")"
		continue
	fi
	[ "$rc" != 0 ] && [ "$f" = 0 ] && f=1
	pass=$((pass + p)); fail=$((fail + f))
	if [ "$f" != 0 ]; then
		printf 'FAIL %s (%s passed, %s failed, %ss; log %s)\n' "$name" "$p" "$f" "$secs" "$log"
		grep -E '^not ok ' "$log"
	else
		printf 'PASS %s (%s, %ss)\n' "$name" "$p" "$secs"
	fi
done
echo "$pass passed, $fail failed, $skip skipped"
[ "$fail" = 0 ]
