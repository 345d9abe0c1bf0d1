#!/bin/sh
# The two codecs side by side on the same input (>= 512 MiB of this machine's
# binaries and text): imagezip zlib -4 against zstd -3 (time, size), imageunzip -n
# of each, and the zlib decoder against the one before libdeflate, which is the
# imageunzip of BASE (the main branch before zstd and libdeflate came in) built in
# a scratch directory. Medians of N runs. Compression is timed with /usr/bin/time
# too: on a shared machine CPU seconds (user + sys) say more than wall time, so
# both are given, with the load average before and after. ZBASE=<rev> also times
# the imagezip of that revision, built in the scratch directory, runs interleaved.
# BENCH_RT=1 runs the timed compressions (only those) at real-time priority
# (chrt -f 1) so that other jobs on a loaded machine do not count in their wall
# time; the kernel still leaves others 5% of each second. The decode section also
# runs PREV's imageunzip (the decoder before the copy-free pipeline, built the same
# way) and restores to a file, with wall and CPU seconds and the load average.
# Usage: bench/codec.sh [BUILD_DIR] (env: RUNS=3, SIZE_MB=512, BENCH_DIR=scratch dir,
#        BASE=547fcf3^1: the git revision of the old decoder, ZBASE=: see above,
#        PREV=503661d: the decoder before decode-in-place, ONLY=decode: skip the
#        compression timing, OUT_DIR=where the timed restores write, e.g. /dev/shm:
#        CPU without the disk)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/${1:-build}/bin"
runs=${RUNS:-3}
size_mb=${SIZE_MB:-512}
base=${BASE:-547fcf3^1}
prev=${PREV:-503661d}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/ndz-bench.XXXXXX")
trap 'rm -rf "$dir"; rm -f "${out:-}"' EXIT

echo "old zlib decoder: imageunzip of $base ($(git -C "$top" rev-parse --short "$base")), built in $dir/old"
mkdir "$dir/old"
git -C "$top" archive "$base" | tar -x -C "$dir/old"
make -C "$dir/old" -j2 all >/dev/null 2>&1 || { echo "bench: building $base failed" >&2; exit 1; }
old="$dir/old/build/bin"
echo "previous decoder: imageunzip of $prev ($(git -C "$top" rev-parse --short "$prev")), built in $dir/prev"
mkdir "$dir/prev"
git -C "$top" archive "$prev" | tar -x -C "$dir/prev"
make -C "$dir/prev" -j2 all >/dev/null 2>&1 || { echo "bench: building $prev failed" >&2; exit 1; }
pbin="$dir/prev/build/bin"
zbase=${ZBASE:-}
if [ -n "$zbase" ]; then
	echo "imagezip before: $zbase ($(git -C "$top" rev-parse --short "$zbase")), built in $dir/zbase"
	mkdir "$dir/zbase"
	git -C "$top" archive "$zbase" | tar -x -C "$dir/zbase"
	make -C "$dir/zbase" -j2 all >/dev/null 2>&1 || { echo "bench: building $zbase failed" >&2; exit 1; }
fi

. "$top/bench/common.sh"
make_input

row() { printf '%-36s %8.2f s %9s MB/s %12s bytes\n' "$1" "$2" "$(mbs "$2")" "$3"; }
r() { echo "scale=2; $1 / $2" | bc -l; }

sync
cat "$dir/in" >/dev/null	# every run reads from the page cache
echo
if [ "${ONLY:-}" = decode ]; then
	"$bin/imagezip" -q -r -j 2 --codec zlib -z 4 "$dir/in" "$dir/zlib.ndz"
	"$bin/imagezip" -q -r -j 2 --codec zstd "$dir/in" "$dir/zstd.ndz"
	s_zl=$(stat -c %s "$dir/zlib.ndz")
	s_zs=$(stat -c %s "$dir/zstd.ndz")
else
echo "== compression (median of $runs runs, interleaved): wall s, CPU s (user + sys)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
# zcase NAME BIN ARGS: one run, appending "wall cpu" to $dir/NAME.t
zcase() {
	n=$1 b=$2
	shift 2
	$rt /usr/bin/time -f '%e %U %S' -o "$dir/time" "$b" -q -r "$@" "$dir/in" "$dir/$n.ndz"
	awk '{ printf "%s %.2f\n", $1, $2 + $3 }' "$dir/time" >>"$dir/$n.t"
	stat -c %s "$dir/$n.ndz" >"$dir/$n.size"
}
rt=
[ "${BENCH_RT:-0}" = 1 ] && rt="chrt -f 1" && echo "timed at real-time priority (BENCH_RT=1)"
i=0
while [ $i -lt "$runs" ]; do
	zcase zl2 "$bin/imagezip" -j 2 --codec zlib -z 4
	zcase zs2 "$bin/imagezip" -j 2 --codec zstd
	zcase zs1 "$bin/imagezip" -j 1 --codec zstd
	if [ -n "$zbase" ]; then
		zcase bs2 "$dir/zbase/build/bin/imagezip" -j 2 --codec zstd
		zcase bs1 "$dir/zbase/build/bin/imagezip" -j 1 --codec zstd
	fi
	i=$((i + 1))
done
echo "load average after:  $(cut -d' ' -f1-3 /proc/loadavg)"
zrow() {
	w=$(cut -d' ' -f1 "$dir/$2.t" | median) c=$(cut -d' ' -f2 "$dir/$2.t" | median)
	printf '%-38s %7.2f s %7.2f s CPU %12s bytes   runs: %s\n' "$1" "$w" "$c" \
		"$(cat "$dir/$2.size")" "$(tr '\n' ' ' <"$dir/$2.t")"
	eval "w_$2=$w c_$2=$c s_$2=$(cat "$dir/$2.size")"
}
zrow "imagezip -j 2 --codec zlib -z 4" zl2
zrow "imagezip -j 2 --codec zstd (level 3)" zs2
zrow "imagezip -j 1 --codec zstd" zs1
if [ -n "$zbase" ]; then
	zrow "imagezip -j 2 --codec zstd, $zbase" bs2
	zrow "imagezip -j 1 --codec zstd, $zbase" bs1
fi
zl=$w_zl2 zs=$w_zs2 s_zl=$s_zl2 s_zs=$s_zs2
cmp_zstd() { "$bin/imagezip" -q -r -j "$1" --codec zstd --uuid "$u" "$dir/in" "$dir/j$1.ndz"; }
u=0a1b2c3d-4e5f-4a6b-8c7d-8e9fa0b1c2d3
cmp_zstd 1 && cmp_zstd 2 && cmp -s "$dir/j1.ndz" "$dir/j2.ndz" ||
	{ echo "bench: zstd image differs between -j 1 and -j 2!" >&2; exit 1; }
rm -f "$dir/j1.ndz" "$dir/j2.ndz"
cp "$dir/zl2.ndz" "$dir/zlib.ndz"
cp "$dir/zs2.ndz" "$dir/zstd.ndz"
fi

# cpu_runs NAME=CMD ...: runs every CMD once per round, $runs rounds (so load
# changes hit all alike); then $w_NAME and $c_NAME hold the median wall and CPU
# (user+sys) seconds
cpu_runs() {
	for nc in "$@"; do : >"$dir/w.${nc%%=*}"; : >"$dir/c.${nc%%=*}"; done
	i=0
	while [ $i -lt "$runs" ]; do
		for nc in "$@"; do
			n=${nc%%=*}
			/usr/bin/time -f '%e %U %S' -o "$dir/tt" sh -c "${nc#*=}"
			awk -v w="$dir/w.$n" -v c="$dir/c.$n" '{ print $1 >>w; print $2 + $3 >>c }' \
				"$dir/tt"
		done
		i=$((i + 1))
	done
	for nc in "$@"; do
		n=${nc%%=*}
		eval "w_$n=\$(median <\"\$dir/w.$n\") c_$n=\$(median <\"\$dir/c.$n\")"
	done
}
drow() { printf '%-40s %6.2f s %7s MB/s %6.2f s CPU\n' "$1" "$2" "$(mbs "$2")" "$3"; }

sync	# no writeback of the new images under the first timed runs
cat "$dir/zlib.ndz" "$dir/zstd.ndz" >/dev/null
echo
echo "== imageunzip -n, verify only, -j 2 (median of $runs interleaved runs; wall, MB/s of output, CPU user+sys)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M) UTC"
cpu_runs "nl='$bin/imageunzip' -n '$dir/zlib.ndz'" "ns='$bin/imageunzip' -n '$dir/zstd.ndz'" \
	"pl='$pbin/imageunzip' -n '$dir/zlib.ndz'" "ps='$pbin/imageunzip' -n '$dir/zstd.ndz'" \
	"ol='$old/imageunzip' -n '$dir/zlib.ndz'"
ul=$w_nl us=$w_ns uo=$w_ol
drow "zlib image, libdeflate decoder" "$w_nl" "$c_nl"
drow "zstd image" "$w_ns" "$c_ns"
drow "zlib image, previous decoder ($prev)" "$w_pl" "$c_pl"
drow "zstd image, previous decoder ($prev)" "$w_ps" "$c_ps"
drow "zlib image, old decoder ($base)" "$w_ol" "$c_ol"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M) UTC"
echo
out=${OUT_DIR:-$dir}/ndz-bench-out.$$
echo "== imageunzip to a file on $(df --output=fstype "$(dirname "$out")" | tail -1 | tr -d ' ') (imageunzip fsyncs it at the end), -j 2 (median of $runs interleaved runs)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M) UTC"
cpu_runs "fl=rm -f '$out'; '$bin/imageunzip' -q '$dir/zlib.ndz' '$out'" \
	"fs=rm -f '$out'; '$bin/imageunzip' -q '$dir/zstd.ndz' '$out'" \
	"gl=rm -f '$out'; '$pbin/imageunzip' -q '$dir/zlib.ndz' '$out'" \
	"gs=rm -f '$out'; '$pbin/imageunzip' -q '$dir/zstd.ndz' '$out'"
drow "zlib image" "$w_fl" "$c_fl"
drow "zstd image" "$w_fs" "$c_fs"
drow "zlib image, previous decoder ($prev)" "$w_gl" "$c_gl"
drow "zstd image, previous decoder ($prev)" "$w_gs" "$c_gs"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg), $(date -u +%H:%M) UTC"
rm -f "$out" "$dir/out"
"$bin/imageunzip" -q "$dir/zstd.ndz" "$dir/out"
cmp -s "$dir/in" "$dir/out" || { echo "bench: zstd restore differs!" >&2; exit 1; }
rm -f "$dir/out"
"$bin/imageunzip" -q "$dir/zlib.ndz" "$dir/out"
cmp -s "$dir/in" "$dir/out" || { echo "bench: zlib restore differs!" >&2; exit 1; }

echo
echo "== ratios"
if [ "${ONLY:-}" != decode ]; then
	echo "zstd compression speed vs zlib -4 (-j 2):    $(r "$zl" "$zs")x wall, $(r "$c_zl2" "$c_zs2")x less CPU"
	echo "zstd -j 1 -> -j 2:                           $(r "$w_zs1" "$w_zs2")x wall"
	[ -z "$zbase" ] || echo "zstd -j 2 vs $zbase:     $(r "$w_bs2" "$w_zs2")x wall, $(r "$c_bs2" "$c_zs2")x less CPU, size $(r "$s_zs2" "$s_bs2")"
fi
echo "zstd image size vs zlib -4:                  $(r "$s_zs" "$s_zl")"
echo "imageunzip -n zstd speed vs zlib (new):      $(r "$ul" "$us")x"
echo "imageunzip -n zlib new decoder vs old:       $(r "$uo" "$ul")x"
echo "imageunzip -n zstd vs zlib, CPU seconds:     $(r "$c_nl" "$c_ns")x less"
echo "imageunzip -n vs previous ($prev), CPU:    zlib $(r "$c_pl" "$c_nl")x less, zstd $(r "$c_ps" "$c_ns")x less"
echo "imageunzip -n vs previous ($prev), wall:   zlib $(r "$w_pl" "$w_nl")x, zstd $(r "$w_ps" "$w_ns")x"
echo "restore to a file vs previous, CPU:          zlib $(r "$c_gl" "$c_fl")x less, zstd $(r "$c_gs" "$c_fs")x less"
