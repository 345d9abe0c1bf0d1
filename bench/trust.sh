#!/bin/sh
# Signed and encrypted images against plain, on the same input in one run: imageunzip
# -n and a restore to a file (plain, --key with the signed manifest, an encrypted image
# with its key (AES-256-GCM, the default, and XChaCha20-Poly1305), both), then frisbee
# to one client in a namespace LAN (plain, --key, encrypted with each cipher) when run
# as root. The variants run in turn, so that other load on the
# machine falls on all alike; medians of N runs of wall and CPU (user + system)
# seconds. Goal (issue 8): at most 5% slower signed, 10% encrypted. First the cost of
# one 1 MiB chunk's hash, CRC and decryption on one thread (bench/trust-hash.c).
# Prints the date and the load average before and after.
# Usage: bench/trust.sh [BUILD_DIR] (env: RUNS=3, SIZE_MB=128, BENCH_DIR=scratch dir,
#        BENCH_MIB=64 and BENCH_RATE=500M for frisbee, BENCH_NET=0 to skip it)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$top/${1:-build}" && pwd)
bin="$build/bin"
runs=${RUNS:-3}
size_mb=${SIZE_MB:-128}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/ndz-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
. "$top/bench/common.sh"
echo "bench/trust.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average before:" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"
make_input
if cc -O2 -o "$dir/trust-hash" "$top/bench/trust-hash.c" -lsodium -lcrypto -lz 2>/dev/null; then
	echo
	echo "== one thread, 300 chunks of 1 MiB (CPU time)"
	"$dir/trust-hash" 300
fi
pct() { echo "scale=1; ($1 - $2) * 100 / $2" | bc -l; }
row() { printf '%-40s %7.3f s %8s MB/s %7s%%\n' "$1" "$2" "$(mbs "$2")" "$(pct "$2" "$3")"; }

"$bin/imagekey" -q generate -o "$dir/k" && "$bin/imagekey" -q generate -e -o "$dir/ek" || exit 1
command -v /usr/bin/time >/dev/null || { echo "bench: needs /usr/bin/time" >&2; exit 1; }
# measure NAME CMD: one run; appends wall and CPU (user + system) seconds to $dir/NAME
# (wall from the nanosecond clock: time's %e has 10 ms steps, 3% of a 0.3 s run)
measure() {
	n=$1; shift
	t0=$(date +%s%N)
	/usr/bin/time -f '%U %S' -o "$dir/tm" sh -c "$*" || echo "bench: $n failed" >&2
	t1=$(date +%s%N)
	awk -v ns=$((t1 - t0)) '{ printf "%.4f %.2f\n", ns / 1e9, $1 + $2 }' "$dir/tm" >>"$dir/m.$n"
}
col() { awk -v c="$2" '{ print $c }' "$dir/m.$1" | median; }
line() {	# LABEL NAME BASE: wall and CPU medians, and their change against BASE's
	printf '%-38s %7.3f s %7s%%   cpu %7.2f s %7s%%\n' "$1" "$(col "$2" 1)" \
		"$(pct "$(col "$2" 1)" "$(col "$3" 1)")" "$(col "$2" 2)" \
		"$(pct "$(col "$2" 2)" "$(col "$3" 2)")"
}
for codec in zlib zstd; do
	z="$bin/imagezip -q -r -j 2 --codec $codec"
	$z "$dir/in" "$dir/plain.ndz" && $z --sign "$dir/k.sec" "$dir/in" "$dir/signed.ndz" &&
		$z --encrypt "$dir/ek.key" "$dir/in" "$dir/enc.ndz" &&
		$z --cipher xchacha20 --encrypt "$dir/ek.key" "$dir/in" "$dir/encx.ndz" &&
		$z --encrypt "$dir/ek.key" --sign "$dir/k.sec" "$dir/in" "$dir/both.ndz" || exit 1
	echo
	echo "== $codec: $(($(stat -c %s "$dir/plain.ndz") / 1048576)) chunks plain," \
	     "$(($(stat -c %s "$dir/enc.ndz") / 1048576)) encrypted; the variants in turn," \
	     "median of $runs runs; %: against plain"
	cat "$dir"/*.ndz >/dev/null
	rm -f "$dir"/m.*
	u="$bin/imageunzip -q -j 2"
	sp="--key '$dir/k.pub'" ek="--key '$dir/ek.key'"
	i=0
	while [ $i -lt "$runs" ]; do
		measure np "$u -n '$dir/plain.ndz'"
		measure ns "$u -n $sp '$dir/signed.ndz'"
		measure ne "$u -n $ek '$dir/enc.ndz'"
		measure nx "$u -n $ek '$dir/encx.ndz'"
		measure nb "$u -n $sp $ek '$dir/both.ndz'"
		measure fp "rm -f '$dir/out'; $u '$dir/plain.ndz' '$dir/out'"
		measure fs "rm -f '$dir/out'; $u $sp '$dir/signed.ndz' '$dir/out'"
		measure fe "rm -f '$dir/out'; $u $ek '$dir/enc.ndz' '$dir/out'"
		measure fx "rm -f '$dir/out'; $u $ek '$dir/encx.ndz' '$dir/out'"
		measure fb "rm -f '$dir/out'; $u $sp $ek '$dir/both.ndz' '$dir/out'"
		i=$((i + 1))
	done
	cmp -s "$dir/in" "$dir/out" || { echo "bench: restore differs!" >&2; exit 1; }
	line "imageunzip -n, plain" np np
	line "imageunzip -n --key PUB, signed" ns np
	line "imageunzip -n --key KEY, AES-256-GCM" ne np
	line "imageunzip -n --key KEY, XChaCha20" nx np
	line "imageunzip -n, signed+AES-GCM" nb np
	line "imageunzip to a file, plain" fp fp
	line "imageunzip to a file, signed" fs fp
	line "imageunzip to a file, AES-256-GCM" fe fp
	line "imageunzip to a file, XChaCha20" fx fp
	line "imageunzip to a file, signed+AES-GCM" fb fp
done

loadavg_after() { echo; echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"; }
[ "${BENCH_NET:-1}" = 0 ] && { loadavg_after; exit 0; }
[ "$(id -u)" = 0 ] || { echo "frisbee part skipped: needs root"; exit 0; }
NDZ_TOP=$top NDZ_BIN=$bin NDZ_BUILD=$build
export NDZ_TOP NDZ_BIN NDZ_BUILD
. "$top/tests/lib.sh"
. "$top/tests/netns.sh"
at_exit "rm -rf '$dir'"
netns_usable && netns_lan && netns_host srv 1 && netns_host c1 11 ||
	{ echo "frisbee part skipped: no namespace LAN"; exit 0; }
mib=${BENCH_MIB:-64}
rate=${BENCH_RATE:-500M}
head -c $((mib * 1048576)) "$dir/in" >"$T/src"
"$IMAGEZIP" -q -r "$T/src" "$T/p.ndz" && "$IMAGEZIP" -q -r --sign "$dir/k.sec" "$T/src" "$T/s.ndz" &&
	"$IMAGEZIP" -q -r --encrypt "$dir/ek.key" "$T/src" "$T/e.ndz" &&
	"$IMAGEZIP" -q -r --cipher xchacha20 --encrypt "$dir/ek.key" "$T/src" "$T/x.ndz" || exit 1
bytes=$(stat -c %s "$T/src")
one() {	# NAME IMAGE [frisbee options]: wall and CPU seconds of one client into $dir/w.NAME
	n=$1 img=$2; shift 2
	mc_server srv "$img" -W "$rate" -T 30
	in_ns c1 /usr/bin/time -f '%e %U %S' -o "$dir/ft" "$FRISBEE" -q -m "$MC_GROUP" \
		-p "$MC_PORT" -T 10 "$@" "$T/out" 2>>"$T/c1.log" ||
		echo "bench: frisbee failed: $(tail -1 "$T/c1.log")" >&2
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	cmp -s "$T/src" "$T/out" || echo "bench: frisbee target differs!" >&2
	rm -f "$T/out"
	awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$dir/ft" >>"$dir/w.$n"
}
fcol() { awk -v c="$2" '{ print $c }' "$dir/w.$1" | median; }
frow() {	# LABEL NAME: wall, MB/s and CPU medians against plain's
	printf '%-32s %7.3f s %6s MB/s %6s%%   cpu %6.2f s %6s%%\n' "$1" "$(fcol "$2" 1)" \
		"$(mbs "$(fcol "$2" 1)")" "$(pct "$(fcol "$2" 1)" "$(fcol p 1)")" \
		"$(fcol "$2" 2)" "$(pct "$(fcol "$2" 2)" "$(fcol p 2)")"
}
echo
echo "== frisbee, one client, $((bytes / 1048576)) MiB at $rate (the variants in turn, median of $runs runs;"
echo "   %: against plain; --key PUB includes fetching the manifest from frisbeed)"
i=0
: >"$dir/w.p"; : >"$dir/w.s"; : >"$dir/w.e"; : >"$dir/w.x"
while [ $i -lt "$runs" ]; do
	one p "$T/p.ndz"
	one s "$T/s.ndz" --key "$dir/k.pub"
	one e "$T/e.ndz" --key "$dir/ek.key"
	one x "$T/x.ndz" --key "$dir/ek.key"
	i=$((i + 1))
done
frow "frisbee, plain" p
frow "frisbee --key PUB" s
frow "frisbee --key KEY, AES-256-GCM" e
frow "frisbee --key KEY, XChaCha20" x
loadavg_after
