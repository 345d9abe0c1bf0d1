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
TSAN_UNITS="test_zip test_unzip test_io test_pool"	# the Makefile's TSAN_UNITS too
TSAN_SCRIPTS="roundtrip corrupt mc_basic mc_loss mc_fail mc_upload mc_forge mc_master_hostile mc_hostile"
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"

picked() {	# picked NAME LIST: NAME is in LIST, or no subset applies
	[ "$tsan" = 0 ] && return 0
	case " $2 " in *" $1 "*) return 0 ;; esac
	return 1
}

# Tests that assert no timing and make no network namespace (file work, fuzzing, parsers)
# run in a second lane beside the others, niced (NDZ_LANE_NICE, 5) so the timed ones come
# first for a processor: on 2 processors the suite takes about the first lane's time.
# (At 10 the lane starved on a machine loaded 15 deep: 5.7 min for corrupt, 38 s
# unniced.) NDZ_LANES=1: one lane.
# (Not package.sh: it checks the source tree is untouched while it runs, and a test
# beside it may make tests/tools/__pycache__.)
# (test_mcsim: a simulated clock, no threads or sockets; 160 s under ASan that were the
# first lane's longest test, in the lane that finished last.)
LANE2="test_zip test_unzip test_mcsim trust corrupt roundtrip orig fuzz_smoke valgrind vectors
	errcheck layers docs seed blockdev mc_cli fs_btrfs fs_damaged fs_damaged_ext
	fs_damaged_other fs_disk fs_exfat fs_ext fs_fat fs_ffs fs_lvm fs_ntfs fs_swap
	fs_wholedisk fs_xfs"
[ "${NDZ_LANES:-2}" = 1 ] && LANE2=""

# run_job BUILD unit|cli PATH: one test file, its log in $logdir, its exit status and
# seconds beside it (LOG.rc, LOG.secs); $NICE before it, and then twice the time allowed
# (a hang's bound: niced on a busy machine a test may wait long for a processor)
run_job() {
	_b=$1 _bdir="$top/$1" _san=0
	case $_b in *san*) _san=1 ;; esac
	_name="$_b/$(basename "$3" .sh)"; _log="$logdir/$(echo "$_name" | tr / _).log"
	_t0=$(date +%s) _x=1
	[ -n "$NICE" ] && _x=2
	if [ "$2" = unit ]; then
		CMOCKA_MESSAGE_OUTPUT=TAP $NICE timeout $((300 * _x)) "$3" >"$_log" 2>&1
	else
		NDZ_TOP="$top" NDZ_BIN="$_bdir/bin" NDZ_BUILD="$_bdir" NDZ_SANITIZED=$_san \
			$NICE timeout $((900 * _x)) sh "$3" </dev/null >"$_log" 2>&1
	fi
	echo $? >"$_log.rc"
	echo $(($(date +%s) - _t0)) >"$_log.secs"
}
# counted BUILD PATH: count() the test file run_job ran
counted() {
	name="$1/$(basename "$2" .sh)"; log="$logdir/$(echo "$name" | tr / _).log"
	secs=$(cat "$log.secs")
	count "$name" "$log" "$(cat "$log.rc")"
	rm -f "$log.rc" "$log.secs"
}

# the plan: BUILD KIND PATH a line, in lane 1 or lane 2 (what it says to fd 4)
: >"$logdir/lane1" && : >"$logdir/lane2" || exit 2
exec 4>&1
for b in "$@"; do
	bdir="$top/$b"
	[ -d "$bdir/bin" ] || { echo "run.sh: $bdir/bin missing; build first" >&2; exit 2; }
	tsan=0
	case $b in *tsan*) tsan=1 ;; esac
	if [ "$tsan" = 1 ]; then
		# a kernel whose address-space layout ThreadSanitizer cannot work with
		# makes every program fail at start: say so instead of failing each test
		if ! "$bdir/tests/test_err" >"$logdir/tsan-probe.log" 2>&1 &&
		   grep -q 'FATAL: ThreadSanitizer' "$logdir/tsan-probe.log"; then
			skip=$((skip + 1))
			printf 'SKIP %s: ThreadSanitizer cannot run here: %s\n' "$b" \
				"$(grep -m1 'FATAL: ThreadSanitizer' "$logdir/tsan-probe.log" | cut -c1-100)" >&4
			continue
		fi
		echo "($b: the threaded tests only: $TSAN_UNITS $TSAN_SCRIPTS)" >&4
		# (make check builds only these unit tests there: one missing is a failure)
		for u in $TSAN_UNITS; do
			[ -x "$bdir/tests/$u" ] && continue
			fail=$((fail + 1)) failed_names="$failed_names $b/$u"
			printf 'FAIL %s/%s: not built\n' "$b" "$u" >&4
		done
	fi
	for t in "$bdir"/tests/test_*; do
		[ -x "$t" ] || continue
		picked "$(basename "$t")" "$TSAN_UNITS" || continue
		printf '%s unit %s\n' "$b" "$t"
	done
	for s in "$top"/tests/cli/*.sh; do
		[ -f "$s" ] || continue
		picked "$(basename "$s" .sh)" "$TSAN_SCRIPTS" || continue
		printf '%s cli %s\n' "$b" "$s"
	done
done >"$logdir/plan"
lane2=" $(echo $LANE2) "
while read -r b kind path; do
	case $lane2 in
	*" $(basename "$path" .sh) "*) echo "$b $kind $path" >>"$logdir/lane2" ;;
	*) echo "$b $kind $path" >>"$logdir/lane1" ;;
	esac
done <"$logdir/plan"
lane2_pid=""
if [ -s "$logdir/lane2" ]; then
	echo "(beside the others, niced: $(awk '{ n = split($3, p, "/"); sub(/\.sh$/, "", p[n]); printf "%s%s/%s", s, $1, p[n]; s = " " }' "$logdir/lane2"))"
	( NICE="nice -n ${NDZ_LANE_NICE:-5}"
	  # first the older frisbee and frisbeed two tests of the first lane run against
	  # (tests/oldbin.sh): built here they are no part of the first lane's time
	  for b in "$@"; do
		case $b in *san*) continue ;; esac
		$NICE sh "$top/tests/oldbin.sh" "$top/$b" >"$logdir/oldbin-$b.log" 2>&1
	  done
	  while read -r b kind path <&3; do run_job "$b" "$kind" "$path"; done 3<"$logdir/lane2" ) &
	lane2_pid=$!
	trap 'kill $lane2_pid 2>/dev/null' EXIT
	trap 'exit 130' INT TERM HUP
fi
NICE=""
while read -r b kind path <&3; do
	run_job "$b" "$kind" "$path"
	counted "$b" "$path"
done 3<"$logdir/lane1"
if [ -n "$lane2_pid" ]; then
	wait "$lane2_pid"
	trap - EXIT
	while read -r b kind path <&3; do counted "$b" "$path"; done 3<"$logdir/lane2"
fi
[ -n "$failed_names" ] && echo "failed:$failed_names"
[ "$skip" != 0 ] && echo "($skip test files skipped)"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
