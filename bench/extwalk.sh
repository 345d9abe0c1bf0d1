#!/bin/sh
# Benchmark: what the ext inode walk (issue 21) costs on a clean 1 GiB ext4 about 60%
# full of real files (a tree of /usr files, copied as they are, many small ones),
# free space dirty. Times imagezip and the scan alone (tests/helpers/scandump) with
# the build before the walk and the build with it, medians of 3 runs each.
# Usage: sh bench/extwalk.sh BUILD_BEFORE BUILD_AFTER   (build directories)
set -u
[ $# = 2 ] || { echo "usage: sh bench/extwalk.sh BUILD_BEFORE BUILD_AFTER" >&2; exit 2; }
export PATH="$PATH:/usr/sbin:/sbin"
MIB=${NDZ_BENCH_MIB:-1024}
RUNS=${NDZ_BENCH_RUNS:-3}
T=$(mktemp -d "${TMPDIR:-/var/tmp}/ndz-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM

now() { date +%s.%N; }
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# real files, as they are, up to 60% of the filesystem: /usr/share's (many small
# ones: the inode walk's worst case per byte) first, then /usr/lib's
want=$((MIB * 1048576 * 60 / 100))
for d in /usr/share /usr/lib; do
	find "$d" -xdev -type f -printf '%s %p\n' 2>/dev/null | sort -k2
done | awk -v w="$want" '{ t += $1; if (t > w) exit; sub(/^[0-9]+ /, ""); print }' >"$T/list"
mkdir "$T/data"
tar -cf - -T "$T/list" 2>/dev/null | tar -xf - -C "$T/data"
files=$(wc -l <"$T/list")
head -c $((MIB * 1048576)) /dev/urandom >"$T/ext4.img"
mke2fs -q -F -E nodiscard -t ext4 -d "$T/data" "$T/ext4.img" >/dev/null 2>&1 || exit 1
rm -rf "$T/data"
used=$(dumpe2fs -h "$T/ext4.img" 2>/dev/null | awk -F: '
	/^Block count/ { c = $2 } /^Free blocks/ { f = $2 } /^Block size/ { b = $2 }
	END { printf "%d", (c - f) * b / 1048576 }')

# the two builds run in turn, RUNS times, so that a busy machine weighs on both alike
for r in $(seq "$RUNS"); do
	for k in 1 2; do
		eval b=\$$k
		t0=$(now); "$b/bin/imagezip" "$T/ext4.img" "$T/o$k.ndz" 2>/dev/null; t1=$(now)
		"$b/tests/helpers/scandump" "$T/ext4.img" >/dev/null 2>&1; t2=$(now)
		echo "$t0 $t1 $t2" | awk '{ printf "%.3f %.3f\n", $2 - $1, $3 - $2 }' >>"$T/t$k"
	done
done
echo "ext4 ${MIB} MiB, ${used} MiB used by $files files of /usr; $(nproc) cores; medians of $RUNS runs"
printf '%10s %10s %14s  %s\n' zip_s scan_s image_bytes build
for k in 1 2; do
	eval b=\$$k
	z=$(cut -d' ' -f1 "$T/t$k" | median)
	s=$(cut -d' ' -f2 "$T/t$k" | median)
	printf '%10s %10s %14s  %s\n' "$z" "$s" "$(stat -c %s "$T/o$k.ndz")" "$b"
done
