#!/bin/sh
# Restores against the disk they write to: imageunzip, and frisbee fed by a local
# frisbeed (multicast looped back on this host), each writing a zlib and a zstd image
# of 1 GiB of this machine's binaries and text to a new file, fsync included, beside
# dd conv=fdatasync of the same bytes to the same file system, in one run. Reports
# medians of RUNS runs: seconds, the ratio dd time / restore time (1.0 = the disk's
# speed), and CPU seconds (user+sys, from /usr/bin/time) per restored GiB.
# Usage: bench/restore.sh [BUILD_DIR] (env: RUNS=3, SIZE_MB=1024, BENCH_DIR=/var/tmp
#        (where the target is written), FRISBEE=1 (0: imageunzip only), RATE=1G (frisbeed -W))
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/${1:-build}/bin"
runs=${RUNS:-3}
size_mb=${SIZE_MB:-1024}
frisbee=${FRISBEE:-1}
rate=${RATE:-1G}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/ndz-restore.XXXXXX")
srv=
trap '[ -z "$srv" ] || kill "$srv" 2>/dev/null; rm -rf "$dir"' EXIT
. "$top/bench/common.sh"
load0=$(cut -d" " -f1-3 /proc/loadavg)

make_input
"$bin/imagezip" -q -r --codec zlib "$dir/in" "$dir/zlib.ndz"
"$bin/imagezip" -q -r --codec zstd "$dir/in" "$dir/zstd.ndz"
echo "images: zlib $(stat -c %s "$dir/zlib.ndz") bytes, zstd $(stat -c %s "$dir/zstd.ndz") bytes"
echo "target: a new file in $(df -P "$dir" | awk 'NR == 2 { print $1 " on " $6 }')"
group="239.$(($$ % 200 + 20)).$(($$ >> 8 & 255)).$(($$ % 250 + 1))"
port=$((3564 + $$ % 20000))

# one NAME CMD: CMD writes $dir/target from scratch; appends "wall cpu" to $dir/NAME.r
one() {
	name=$1
	shift
	rm -f "$dir/target"
	sync
	/usr/bin/time -f "%e %U %S" -o "$dir/time" sh -c "$*"
	awk '{ print $1, $2 + $3 }' "$dir/time" >>"$dir/$name.r"
}
# serve IMAGE: a frisbeed for it in the background (srv: its pid)
serve() {
	"$bin/frisbeed" -q -L -m "$group" -p "$port" -W "$rate" -T 0 "$1" &
	srv=$!
	sleep 0.3
}
unserve() { kill "$srv"; wait "$srv" 2>/dev/null || true; srv=; }
check_target() {
	cmp -s "$dir/in" "$dir/target" || { echo "bench: $1 restored wrong bytes" >&2; exit 1; }
}

cat "$dir/in" "$dir/zlib.ndz" "$dir/zstd.ndz" >/dev/null   # inputs come from the page cache
mb=$((bytes / 1048576))
methods="dd unzip-zlib unzip-zstd"
[ "$frisbee" = 0 ] || methods="$methods frisbee-zlib frisbee-zstd"
i=0
while [ $i -lt "$runs" ]; do
	one dd "dd if='$dir/in' of='$dir/target' bs=1M count=$mb conv=fdatasync status=none"
	for c in zlib zstd; do
		one "unzip-$c" "'$bin/imageunzip' -q '$dir/$c.ndz' '$dir/target'"
		[ $i -gt 0 ] || check_target "imageunzip $c"
		if [ "$frisbee" != 0 ]; then
			serve "$dir/$c.ndz"
			one "frisbee-$c" "timeout 300 '$bin/frisbee' -q -m $group -p $port '$dir/target'"
			unserve
			[ $i -gt 0 ] || check_target "frisbee $c"
		fi
	done
	i=$((i + 1))
done
rm -f "$dir/target"

med() { cut -d' ' -f"$2" "$dir/$1.r" | median; }
dd_s=$(med dd 1)
gib=$(echo "$bytes / 1073741824" | bc -l)
echo
echo "== restore of $bytes bytes with fsync, median of $runs runs; load before: $load0"
printf '%-14s %8s %9s %10s %12s\n' method seconds MB/s "dd/method" "CPU s/GiB"
for m in $methods; do
	s=$(med "$m" 1)
	cpu=$(med "$m" 2)
	printf '%-14s %8.2f %9.1f %10.2f %12.2f\n' "$m" "$s" "$(mbs "$s")" \
		"$(echo "$dd_s / $s" | bc -l)" "$(echo "$cpu / $gib" | bc -l)"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
