#!/bin/sh
# Benchmark: CPU seconds per GiB received (frisbee --raw, the protocol's own cost without
# decompression or disk writes) and sent (frisbeed), one client in a namespace LAN, at a
# fixed rate so that both runs move the same packets at the same pace. Medians of REPS.
# Usage: bench/cpu.sh BUILD [REPS]   (root; env BENCH_MIB (default 128), BENCH_RATE (500M);
# BENCH_OLD_FRISBEE=PATH and BENCH_OLD_FRISBEED=PATH also measure those binaries, in turn
# with BUILD's, in the same run)
set -u
. "$(dirname "$0")/netbench.sh"
MIB=${BENCH_MIB:-128}
RATE=${BENCH_RATE:-500M}
netns_lan && netns_host srv 1 && netns_host c1 11 || exit 1
# cut the server's GSO batches into datagrams at its interface, as a NIC would
in_ns srv ip link set dev eth0 gso_max_segs 1 || exit 1
bench_out ndzcpu
bench_image || exit 1
GIB=$(echo "$(stat -c %s "$T/img.ndz") / 1073741824" | bc -l)
: >"$T/runs"
: >"$T/runs-old"
# one RUNS-FILE FRISBEE FRISBEED
one() {
	rm -f "$OUT/o"
	in_ns c1 /usr/bin/time -f '%U %S' -o "$T/ctime" "$2" --raw -q -m "$MC_GROUP" \
		-p "$MC_PORT" -T 30 "$OUT/o" 2>>"$T/c1.log" &
	cpid=$!
	sleep 0.3
	ip netns exec "${NETNS_PFX}srv" /usr/bin/time -f '%U %S' -o "$T/stime" "$3" \
		-m "$MC_GROUP" -p "$MC_PORT" -W "$RATE" -T 1 -q "$T/img.ndz" 2>>"$T/srv.log" &
	spid=$!
	wait "$cpid"
	wait "$spid"           # it exits 1 s after the client left
	cmp -s "$T/img.ndz" "$OUT/o" || echo "bench: run $r: the copy differs" >&2
	c=$(awk '{ print $1 + $2 }' "$T/ctime") s=$(awk '{ print $1 + $2 }' "$T/stime")
	echo "$(echo "$c / $GIB" | bc -l) $(echo "$s / $GIB" | bc -l)" >>"$1"
}
r=1; while [ $r -le "$REPS" ]; do
	one "$T/runs" "$FRISBEE" "$FRISBEED"
	[ -n "${BENCH_OLD_FRISBEE:-}" ] &&
		one "$T/runs-old" "$BENCH_OLD_FRISBEE" "${BENCH_OLD_FRISBEED:-$FRISBEED}"
	r=$((r + 1))
done
[ -n "${BENCH_OLD_FRISBEE:-}" ] &&
	printf 'old: frisbee --raw receive: %.2f CPU s/GiB; frisbeed send: %.2f CPU s/GiB (%s, %s)\n' \
		"$(cut -d' ' -f1 "$T/runs-old" | median)" "$(cut -d' ' -f2 "$T/runs-old" | median)" \
		"$BENCH_OLD_FRISBEE" "${BENCH_OLD_FRISBEED:-$FRISBEED}"
printf 'frisbee --raw receive: %.2f CPU s/GiB; frisbeed send: %.2f CPU s/GiB (%s, %s MiB, median of %s; load %s)\n' \
	"$(cut -d' ' -f1 "$T/runs" | median)" "$(cut -d' ' -f2 "$T/runs" | median)" "$RATE" "$MIB" \
	"$REPS" "$(cut -d' ' -f1 /proc/loadavg)"
