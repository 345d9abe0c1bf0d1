#!/bin/sh
# imagezip and imageunzip against gzip -4, pigz -4 and gunzip on the same input
# (>= 512 MiB of this machine's binaries and text), 1 and 2 threads, medians of N runs.
# Usage: bench/zip.sh [BUILD_DIR] (env: RUNS=3, SIZE_MB=512, BENCH_DIR=scratch dir)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/${1:-build}/bin"
runs=${RUNS:-3}
size_mb=${SIZE_MB:-512}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/ndz-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
command -v pigz >/dev/null || { echo "bench: pigz missing (apt-get install pigz)" >&2; exit 1; }

. "$top/bench/common.sh"
make_input

row() { printf '%-34s %8.2f s %9s MB/s %12s bytes\n' "$1" "$2" "$(mbs "$2")" "$3"; }

sync
cat "$dir/in" >/dev/null	# both sides read from the page cache
echo
echo "== compression (median of $runs runs)"
z1=$(time_it z1 "'$bin/imagezip' -r -j 1 '$dir/in' '$dir/img1'"); s_z1=$(stat -c %s "$dir/img1")
z2=$(time_it z2 "'$bin/imagezip' -r -j 2 '$dir/in' '$dir/img2'"); s_z2=$(stat -c %s "$dir/img2")
g1=$(time_it g1 "gzip -4 -c '$dir/in' >'$dir/in.gz'"); s_g1=$(stat -c %s "$dir/in.gz")
p1=$(time_it p1 "pigz -4 -p 1 -c '$dir/in' >'$dir/in.p1.gz'"); s_p1=$(stat -c %s "$dir/in.p1.gz")
p2=$(time_it p2 "pigz -4 -p 2 -c '$dir/in' >'$dir/in.p2.gz'"); s_p2=$(stat -c %s "$dir/in.p2.gz")
row "imagezip -j 1" "$z1" "$s_z1"
row "imagezip -j 2" "$z2" "$s_z2"
row "gzip -4" "$g1" "$s_g1"
row "pigz -4 -p 1" "$p1" "$s_p1"
row "pigz -4 -p 2" "$p2" "$s_p2"

echo
echo "== decompression to a file (median of $runs runs)"
u1=$(time_it u1 "rm -f '$dir/o1'; '$bin/imageunzip' -j 1 '$dir/img2' '$dir/o1'")
u2=$(time_it u2 "rm -f '$dir/o2'; '$bin/imageunzip' -j 2 '$dir/img2' '$dir/o2'")
gu=$(time_it gu "gunzip -c '$dir/in.gz' >'$dir/o3'")
pu=$(time_it pu "pigz -d -c '$dir/in.p2.gz' >'$dir/o4'")
cmp -s "$dir/in" "$dir/o2" || { echo "bench: imageunzip output differs!" >&2; exit 1; }
row "imageunzip -j 1 (incl. fsync)" "$u1" "-"
row "imageunzip -j 2 (incl. fsync)" "$u2" "-"
row "gunzip -c > file" "$gu" "-"
row "pigz -d -c > file" "$pu" "-"

echo
echo "== ratios"
r() { echo "scale=2; $1 / $2" | bc -l; }
echo "imagezip -j 2 speed-up over -j 1:          $(r "$z1" "$z2")x"
echo "imagezip -j 1 speed vs gzip -4:            $(r "$g1" "$z1")x"
echo "imagezip -j 2 speed vs pigz -4 -p 2:       $(r "$p2" "$z2")x"
echo "imagezip -j 2 size vs imagezip -j 1:       $(r "$s_z2" "$s_z1")"
echo "imagezip size vs gzip -4:                  $(r "$s_z1" "$s_g1")"
echo "imageunzip -j 2 speed vs gunzip:           $(r "$gu" "$u2")x"
echo "imageunzip -j 2 speed-up over -j 1:        $(r "$u1" "$u2")x"
