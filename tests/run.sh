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

# Under ThreadSanitizer only the tests that drive the threaded code (compression,
# restore pipeline, frisbee and frisbeed) run; a race is an error at once.
TSAN_UNITS="test_zip test_unzip test_io test_pool"
TSAN_SCRIPTS="roundtrip corrupt mc_basic mc_loss mc_fail mc_upload mc_forge mc_master_hostile mc_hostile"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"

picked() {	# picked NAME LIST: NAME is in LIST, or no subset applies
	[ "$tsan" = 0 ] && return 0
	case " $2 " in *" $1 "*) return 0 ;; esac
	return 1
}

for b in "$@"; do
	bdir="$top/$b"
	[ -d "$bdir/bin" ] || { echo "run.sh: $bdir/bin missing; build first" >&2; exit 2; }
	san=0 tsan=0
	case $b in *tsan*) san=1 tsan=1 ;; *san*) san=1 ;; esac
	if [ "$tsan" = 1 ]; then
		# a kernel whose address-space layout ThreadSanitizer cannot work with
		# makes every program fail at start: say so instead of failing each test
		if ! "$bdir/tests/test_err" >"$logdir/tsan-probe.log" 2>&1 &&
		   grep -q 'FATAL: ThreadSanitizer' "$logdir/tsan-probe.log"; then
			skip=$((skip + 1))
			printf 'SKIP %s: ThreadSanitizer cannot run here: %s\n' "$b" \
				"$(grep -m1 'FATAL: ThreadSanitizer' "$logdir/tsan-probe.log" | cut -c1-100)"
			continue
		fi
		echo "($b: the threaded tests only: $TSAN_UNITS $TSAN_SCRIPTS)"
	fi
	for t in "$bdir"/tests/test_*; do
		[ -x "$t" ] || continue
		picked "$(basename "$t")" "$TSAN_UNITS" || continue
		name="$b/$(basename "$t")"; log="$logdir/$(echo "$name" | tr / _).log"
		t0=$(date +%s)
		CMOCKA_MESSAGE_OUTPUT=TAP timeout 300 "$t" >"$log" 2>&1; rc=$?
		secs=$(($(date +%s) - t0))
		count "$name" "$log" "$rc"
	done
	for s in "$top"/tests/cli/*.sh; do
		[ -f "$s" ] || continue
		picked "$(basename "$s" .sh)" "$TSAN_SCRIPTS" || continue
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
