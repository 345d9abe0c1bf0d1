#!/bin/sh
# Benchmark (issue 36): a zstd image through frisbee to a file, the network not the
# bound: disk bytes per second (server start to frisbee's exit, which follows the
# flush) and frisbee's user + system CPU seconds per GiB written, at MTU 9000 with
# GRO; beside it imageunzip restoring the same image from a local file (no network).
# Both decompress with the online cores (frisbee has no -j: its restorer's default).
# Each onto a new file in BENCH_DIR and onto a loop block device (over a file there,
# --direct-io=on: the loop device writes its file past the page cache, as a disk
# takes its writes), through the page cache (--no-direct) and past it (--direct).
# Source: the first MIB MiB of a tar of /usr/lib (real binaries and text), zstd -z 3.
# Usage: bench/linerate-disk.sh BUILD [REPS]  (root; env BENCH_MIB (default 512),
# BENCH_RATE (default 4000: Mbit/s), BENCH_DIR (default /var/tmp: the target's file
# system; not tmpfs, so the bytes reach a disk), BENCH_TARGETS (default "file blk"),
# BENCH_MODES (default "buffered direct"))
set -u
. "$(dirname "$0")/netbench.sh"
MIB=${BENCH_MIB:-512}
RATE=${BENCH_RATE:-4000}
DIR=${BENCH_DIR:-/var/tmp}
netns_lan && netns_host srv 1 && netns_host c1 11 || exit 1
netns_mtu srv 9000 && netns_mtu c1 9000 || exit 1
netns_gro_path c1 on || echo "# GRO could not be set"
TARGETS=${BENCH_TARGETS:-"file blk"}
MODES=${BENCH_MODES:-"buffered direct"}
W=$(mktemp -d "$DIR/ndzdisk.XXXXXX") || exit 1
at_exit "rm -rf $W"
tar cf - /usr/lib 2>/dev/null | head -c $((MIB * 1048576)) >"$T/src"
"$IMAGEZIP" -q -r --codec zstd "$T/src" "$T/img.ndz" || exit 1
SRCB=$(stat -c %s "$T/src") IMGB=$(stat -c %s "$T/img.ndz")
# the block device: a loop device over a file of the source's size (rounded up a MiB)
BLK=""
case $TARGETS in *blk*)
	truncate -s $(((SRCB / 1048576 + 1) * 1048576)) "$W/blk" &&
		BLK=$(losetup -f --show --direct-io=on "$W/blk") || exit 1
	at_exit "losetup -d $BLK" ;;
esac
GIB=$(echo "$SRCB / 1073741824" | bc -l)
echo "# source $((SRCB / 1048576)) MiB, image $((IMGB / 1048576)) MiB (zstd); target in $DIR" \
	"($(df -T "$DIR" | awk 'NR == 2 { print $2 }')); $(nproc) cores; $REPS runs each; ${RATE} Mbit/s"
cpu() { awk '{ print $1 + $2 }' "$1"; }

# one TOOL TARGET MODE: prints "disk_MiB_per_s client_s_per_GiB ok"
one() {
	dst="$W/o" flag=--no-direct
	[ "$3" = direct ] && flag=--direct
	rm -f "$W/o"
	[ "$2" = blk ] && dst=$BLK
	case $1 in
	frisbee)
		in_ns c1 /usr/bin/time -f '%U %S' -o "$T/ct" "$FRISBEE" -q $flag -m "$MC_GROUP" \
			-p "$MC_PORT" -T 30 "$dst" 2>>"$T/c1.log" &
		cpid=$!
		sleep 0.3
		t0=$(now)
		in_ns srv "$FRISBEED" -m "$MC_GROUP" -p "$MC_PORT" -W "${RATE}M" -T 1 -q \
			"$T/img.ndz" 2>>"$T/srv.log" &
		spid=$!
		wait "$cpid"; rc=$?; t1=$(now)
		wait "$spid" ;;
	imageunzip)
		t0=$(now)
		/usr/bin/time -f '%U %S' -o "$T/ct" "$NDZ_BIN/imageunzip" -q $flag "$T/img.ndz" \
			"$dst" 2>>"$T/unzip.log"
		rc=$?; t1=$(now) ;;
	esac
	ok=0; [ "$rc" = 0 ] && cmp -s -n "$SRCB" "$T/src" "$dst" && ok=1
	echo "$(echo "$SRCB / 1048576 / ($t1 - $t0)" | bc -l) $(echo "$(cpu "$T/ct") / $GIB" | bc -l) $ok"
}

printf '%-11s %-5s %-9s %12s %14s %6s\n' tool dst writes disk_MiB/s client_s/GiB good
for target in $TARGETS; do
	for mode in $MODES; do
		for tool in frisbee imageunzip; do
			: >"$T/runs"
			r=1; while [ $r -le "$REPS" ]; do
				# an earlier run's writes on the disk, not in the way
				[ "$target" = blk ] && dd if=/dev/zero of="$BLK" bs=1M count=1 \
					oflag=direct status=none
				sync
				one "$tool" "$target" "$mode" >>"$T/runs"; r=$((r + 1))
			done
			printf '%-11s %-5s %-9s %12.1f %14.3f %3s/%s\n' "$tool" "$target" "$mode" \
				"$(cut -d' ' -f1 "$T/runs" | median)" \
				"$(cut -d' ' -f2 "$T/runs" | median)" \
				"$(awk '{ s += $3 } END { print s }' "$T/runs")" "$REPS"
		done
	done
done
