#!/bin/sh
# Benchmark: three clients restoring one image while a hostile host sends 37 kinds of
# datagrams (tests/helpers/mcrogue "hostile": garbage, forged BLOCKs, SPANs and repairs
# and FEATURES and JOIN_REPLYs carrying the server's address, requests of every kind)
# at PPS a second, against the same run without it. Reports the median time until the
# last client is done (every target byte-identical, else the run counts as failed).
# Usage: bench/hostile.sh BUILD [REPS]   (root; env BENCH_MIB (32), BENCH_RATE (100M),
# BENCH_PPS (2000) override the defaults; MCROGUE_KINDS, a mask of the 37 kinds of
# tests/helpers/mcrogue.c hostile_pkt, sends only those; 0x1fffff: the 21 before SPAN)
set -u
. "$(dirname "$0")/netbench.sh"
MIB=${BENCH_MIB:-32}
RATE=${BENCH_RATE:-100M}
PPS=${BENCH_PPS:-2000}
netns_lan && netns_host srv 1 && netns_host rogue 66 || exit 1
for i in 1 2 3; do netns_host "c$i" $((10 + i)) || exit 1; done
mc_image a "$MIB" 3 || exit 1
echo "# image: $(( $(stat -c %s "$T/a.ndz") / 1048576 )) chunks, frisbeed -W $RATE, 3 clients; $REPS runs each; $(nproc) cores"

# run PPS: seconds until the last client is done, or "failed"
run() {
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log
	mc_server srv "$T/a.ndz" -W "$RATE" -T 60
	rpid=""
	if [ "$1" -gt 0 ]; then
		in_ns rogue "$MCROGUE" "$MC_GROUP" "$MC_PORT" 120 "$1" 10.77.0.1 hostile \
			>"$T/rogue.out" 2>&1 &
		rpid=$!
		sleep 0.5
	fi
	t0=$(now)
	for i in 1 2 3; do mc_client "c$i" "$T/out$i" -T 20 -v; done
	mc_wait
	t1=$(now)
	[ -n "$rpid" ] && kill "$rpid" 2>/dev/null && wait "$rpid" 2>/dev/null
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	for i in 1 2 3; do
		[ "$(mc_rc "c$i")" = 0 ] && cmp -s "$T/a.src" "$T/out$i" || { echo failed; return; }
	done
	echo "$t1 - $t0" | bc -l
}
for pps in 0 "$PPS"; do
	: >"$T/times"
	r=0
	while [ $r -lt "$REPS" ]; do run "$pps" >>"$T/times"; r=$((r + 1)); done
	printf "hostile %5s/s: median %s s (runs: %s)\n" "$pps" \
		"$(grep -v failed "$T/times" | median)" "$(tr '\n' ' ' <"$T/times")"
	grep -h 'dropped:' "$T"/c1.log | sed 's/^/#   c1 /'
done
