#!/bin/sh
# The two codecs side by side on the same input (>= 512 MiB of this machine's
# binaries and text): imagezip zlib -4 against zstd -3 (time, size), imageunzip -n
# of each, and the zlib decoder against the one before libdeflate, which is the
# imageunzip of BASE (the main branch before zstd and libdeflate came in) built in
# a scratch directory. Medians of N runs.
# Usage: bench/codec.sh [BUILD_DIR] (env: RUNS=3, SIZE_MB=512, BENCH_DIR=scratch dir,
#        BASE=547fcf3^1: the git revision of the old decoder)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/${1:-build}/bin"
runs=${RUNS:-3}
size_mb=${SIZE_MB:-512}
base=${BASE:-547fcf3^1}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/ndz-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT

echo "old zlib decoder: imageunzip of $base ($(git -C "$top" rev-parse --short "$base")), built in $dir/old"
mkdir "$dir/old"
git -C "$top" archive "$base" | tar -x -C "$dir/old"
make -C "$dir/old" -j2 all >/dev/null 2>&1 || { echo "bench: building $base failed" >&2; exit 1; }
old="$dir/old/build/bin"

. "$top/bench/common.sh"
make_input

row() { printf '%-36s %8.2f s %9s MB/s %12s bytes\n' "$1" "$2" "$(mbs "$2")" "$3"; }
r() { echo "scale=2; $1 / $2" | bc -l; }

sync
cat "$dir/in" >/dev/null	# every run reads from the page cache
echo
echo "== compression, -j 2 (median of $runs runs)"
zl=$(time_it zl "'$bin/imagezip' -q -r -j 2 --codec zlib -z 4 '$dir/in' '$dir/zlib.ndz'")
s_zl=$(stat -c %s "$dir/zlib.ndz")
zs=$(time_it zs "'$bin/imagezip' -q -r -j 2 --codec zstd '$dir/in' '$dir/zstd.ndz'")
s_zs=$(stat -c %s "$dir/zstd.ndz")
row "imagezip --codec zlib -z 4" "$zl" "$s_zl"
row "imagezip --codec zstd (level 3)" "$zs" "$s_zs"

echo
echo "== imageunzip -n, verify only, -j 2 (median of $runs runs)"
ul=$(time_it ul "'$bin/imageunzip' -n '$dir/zlib.ndz'")
us=$(time_it us "'$bin/imageunzip' -n '$dir/zstd.ndz'")
uo=$(time_it uo "'$old/imageunzip' -n '$dir/zlib.ndz'")
row "zlib image, libdeflate decoder" "$ul" "-"
row "zstd image" "$us" "-"
row "zlib image, old decoder ($base)" "$uo" "-"
rm -f "$dir/out"
"$bin/imageunzip" -q "$dir/zstd.ndz" "$dir/out"
cmp -s "$dir/in" "$dir/out" || { echo "bench: zstd restore differs!" >&2; exit 1; }

echo
echo "== ratios"
echo "zstd compression speed vs zlib -4:           $(r "$zl" "$zs")x"
echo "zstd image size vs zlib -4:                  $(r "$s_zs" "$s_zl")"
echo "imageunzip -n zstd speed vs zlib (new):      $(r "$ul" "$us")x"
echo "imageunzip -n zlib new decoder vs old:       $(r "$uo" "$ul")x"
