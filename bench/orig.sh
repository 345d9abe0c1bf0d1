#!/bin/sh
# bench/orig.sh: restoring and converting an original Frisbee (V3) image of about
# 1 GiB of source: imageunzip -j 1 (one decoder, as the original's one inflate
# thread) and with every core, to a fresh file under TMPDIR; imagezip --from-image
# (original -> ours, zstd) and --to-orig (ours -> V3), each checked by restoring
# and comparing SHA-256 with the source. The V3 image is made by our V3 writer,
# whose layout is the original imagezip's (tests/cli/orig.sh compares a chunk
# byte for byte); its data: 1/4 random, 1/2 text, 1/4 zeros.
# Usage: sh bench/orig.sh [BUILD_DIR] [MIB]   (default build, 1024)
set -u
B=${1:-build}/bin
MIB=${2:-1024}
D=$(mktemp -d "${TMPDIR:-/tmp}/ndz-bench-orig.XXXXXX")
trap 'rm -rf "$D"' EXIT
now() { date +%s.%N; }
secs() { echo "$2 - $1" | bc; }
q=$((MIB / 4))
{
	head -c $((q << 20)) /dev/urandom
	yes "ndz bench orig: the quick brown fox jumps over the lazy dog 0123456789" |
		head -c $((2 * q << 20))
	head -c $((q << 20)) /dev/zero
} >"$D/src"
want=$(sha256sum <"$D/src" | cut -c1-64)
"$B/imagezip" -q -r --to-orig "$D/src" "$D/v3.ndz" || exit 1
rm -f "$D/src"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
echo "# source $MIB MiB; original V3 image $(($(stat -c %s "$D/v3.ndz") >> 20)) MiB"
for j in 1 $(nproc); do
	rm -f "$D/out"
	t0=$(now); "$B/imageunzip" -j "$j" "$D/v3.ndz" "$D/out"; t1=$(now)
	ok=$([ "$(sha256sum <"$D/out" | cut -c1-64)" = "$want" ] && echo same || echo DIFFERENT)
	echo "restore V3 -j $j: $(secs "$t0" "$t1") s, $(echo "($t1 - $t0) * 1024 / $MIB" | bc -l |
		cut -c1-5) s/GiB, restore $ok"
done
rm -f "$D/out"
t0=$(now); "$B/imagezip" -q --from-image "$D/v3.ndz" "$D/ours.ndz"; t1=$(now)
"$B/imageunzip" "$D/ours.ndz" "$D/out"
ok=$([ "$(sha256sum <"$D/out" | cut -c1-64)" = "$want" ] && echo same || echo DIFFERENT)
echo "convert V3 -> ours (zstd): $(secs "$t0" "$t1") s, $(($(stat -c %s "$D/ours.ndz") >> 20)) MiB, restore $ok"
rm -f "$D/out" "$D/v3b.ndz"
t0=$(now); "$B/imagezip" -q --from-image --to-orig "$D/ours.ndz" "$D/v3b.ndz"; t1=$(now)
"$B/imageunzip" "$D/v3b.ndz" "$D/out"
ok=$([ "$(sha256sum <"$D/out" | cut -c1-64)" = "$want" ] && echo same || echo DIFFERENT)
echo "convert ours -> V3: $(secs "$t0" "$t1") s, restore $ok, $(cmp -s "$D/v3.ndz" "$D/v3b.ndz" &&
	echo "byte-identical to the first V3" || echo "differs from the first V3")"
