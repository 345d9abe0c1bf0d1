#!/bin/sh
# Signed and encrypted images against plain, on the same input in one run: imageunzip
# -n and a restore to a file (plain, --key with the signed manifest, an encrypted image
# with its key, both), then frisbee to one client in a namespace LAN (plain, --key,
# encrypted) when run as root. Medians of N runs. Goal (issue 8): at most 5% slower
# signed, 10% encrypted.
# Usage: bench/trust.sh [BUILD_DIR] (env: RUNS=3, SIZE_MB=256, BENCH_DIR=scratch dir,
#        BENCH_MIB=64 and BENCH_RATE=500M for frisbee, BENCH_NET=0 to skip it)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$top/${1:-build}" && pwd)
bin="$build/bin"
runs=${RUNS:-3}
size_mb=${SIZE_MB:-256}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/ndz-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
. "$top/bench/common.sh"
make_input
pct() { echo "scale=1; ($1 - $2) * 100 / $2" | bc -l; }
row() { printf '%-40s %7.3f s %8s MB/s %7s%%\n' "$1" "$2" "$(mbs "$2")" "$(pct "$2" "$3")"; }

"$bin/imagekey" -q generate -o "$dir/k" && "$bin/imagekey" -q generate -e -o "$dir/ek" || exit 1
for codec in zlib zstd; do
	z="$bin/imagezip -q -r -j 2 --codec $codec"
	$z "$dir/in" "$dir/plain.ndz" && $z --sign "$dir/k.sec" "$dir/in" "$dir/signed.ndz" &&
		$z --encrypt "$dir/ek.key" "$dir/in" "$dir/enc.ndz" &&
		$z --encrypt "$dir/ek.key" --sign "$dir/k.sec" "$dir/in" "$dir/both.ndz" || exit 1
	echo
	echo "== $codec: $(($(stat -c %s "$dir/plain.ndz") / 1048576)) chunks plain," \
	     "$(($(stat -c %s "$dir/enc.ndz") / 1048576)) encrypted; median of $runs runs; %: vs plain"
	cat "$dir"/*.ndz >/dev/null
	u="$bin/imageunzip -q -j 2"
	p=$(time_it p "$u -n '$dir/plain.ndz'")
	s=$(time_it s "$u -n --key '$dir/k.pub' '$dir/signed.ndz'")
	e=$(time_it e "$u -n --key '$dir/ek.key' '$dir/enc.ndz'")
	b=$(time_it b "$u -n --key '$dir/k.pub' --key '$dir/ek.key' '$dir/both.ndz'")
	row "imageunzip -n, plain" "$p" "$p"
	row "imageunzip -n --key PUB, signed" "$s" "$p"
	row "imageunzip -n --key KEY, encrypted" "$e" "$p"
	row "imageunzip -n, signed and encrypted" "$b" "$p"
	p=$(time_it p "rm -f '$dir/out'; $u '$dir/plain.ndz' '$dir/out'")
	s=$(time_it s "rm -f '$dir/out'; $u --key '$dir/k.pub' '$dir/signed.ndz' '$dir/out'")
	e=$(time_it e "rm -f '$dir/out'; $u --key '$dir/ek.key' '$dir/enc.ndz' '$dir/out'")
	b=$(time_it b "rm -f '$dir/out'; $u --key '$dir/k.pub' --key '$dir/ek.key' '$dir/both.ndz' '$dir/out'")
	cmp -s "$dir/in" "$dir/out" || { echo "bench: restore differs!" >&2; exit 1; }
	row "imageunzip to a file, plain" "$p" "$p"
	row "imageunzip to a file, signed" "$s" "$p"
	row "imageunzip to a file, encrypted" "$e" "$p"
	row "imageunzip to a file, signed and encrypted" "$b" "$p"
done

[ "${BENCH_NET:-1}" = 0 ] && exit 0
[ "$(id -u)" = 0 ] || { echo "frisbee part skipped: needs root"; exit 0; }
NDZ_TOP=$top NDZ_BIN=$bin NDZ_BUILD=$build
export NDZ_TOP NDZ_BIN NDZ_BUILD
. "$top/tests/lib.sh"
. "$top/tests/netns.sh"
netns_usable && netns_lan && netns_host srv 1 && netns_host c1 11 ||
	{ echo "frisbee part skipped: no namespace LAN"; exit 0; }
mib=${BENCH_MIB:-64}
rate=${BENCH_RATE:-500M}
head -c $((mib * 1048576)) "$dir/in" >"$T/src"
"$IMAGEZIP" -q -r "$T/src" "$T/p.ndz" && "$IMAGEZIP" -q -r --sign "$dir/k.sec" "$T/src" "$T/s.ndz" &&
	"$IMAGEZIP" -q -r --encrypt "$dir/ek.key" "$T/src" "$T/e.ndz" || exit 1
bytes=$(stat -c %s "$T/src")
one() {	# IMAGE [frisbee options]: seconds for one client, start to finish
	img=$1; shift
	mc_server srv "$img" -W "$rate" -T 30
	t0=$(now)
	in_ns c1 "$FRISBEE" -q -m "$MC_GROUP" -p "$MC_PORT" -T 10 "$@" "$T/out" 2>>"$T/c1.log" ||
		echo "bench: frisbee failed: $(tail -1 "$T/c1.log")" >&2
	t1=$(now)
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	cmp -s "$T/src" "$T/out" || echo "bench: frisbee target differs!" >&2
	rm -f "$T/out"
	echo "$t1 - $t0" | bc -l
}
med() { i=0; while [ $i -lt "$runs" ]; do one "$@"; i=$((i + 1)); done | median; }
echo
echo "== frisbee, one client, ${mib} MiB at $rate (median of $runs runs; %: vs plain)"
p=$(med "$T/p.ndz")
s=$(med "$T/s.ndz" --key "$dir/k.pub")
e=$(med "$T/e.ndz" --key "$dir/ek.key")
row "frisbee, plain" "$p" "$p"
row "frisbee --key PUB (manifest from frisbeed)" "$s" "$p"
row "frisbee --key KEY, encrypted" "$e" "$p"
