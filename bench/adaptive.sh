#!/bin/sh
# Benchmark: frisbeed -W auto behind links of a rate it is not told (tc tbf on every
# client's port), against fixed caps just under the link and twice over it. Reports
# medians of: time, goodput (image bytes / time) over the link rate, and what the
# server sent (blocks and repairs) over the image's blocks, and where the time went
# (server start to first packet, empty queue, tail, the rate the pacer held).
# Usage: bench/adaptive.sh BUILD [REPS]   (root; env BENCH_MIB (default 64),
# BENCH_LINK (Mbit/s, default 100), BENCH_CLIENTS (default 4), BENCH_RATES (default
# "auto 95%-of-link 2x-link"), BENCH_TRACE=FILE: append -W auto's per-interval decisions,
# BENCH_MAIN=FILE: another frisbeed (e.g. main's) run first as "auto (main)", interleaved
# run by run with this build's -W auto for an A/B on a shared host)
set -u
. "$(dirname "$0")/netbench.sh"
MIB=${BENCH_MIB:-64}
SRV=
LINK=${BENCH_LINK:-100}
N=${BENCH_CLIENTS:-4}
netns_lan && netns_host srv 1 || exit 1
i=1; while [ $i -le "$N" ]; do
	netns_host "c$i" $((10 + i)) && netns_shape "c$i" "${LINK}mbit" || exit 1
	i=$((i + 1))
done
VV=-q
[ -n "${BENCH_TRACE:-}" ] && VV=-vv
bench_out ndzadapt
bench_image || exit 1
IMGB=$(stat -c %s "$T/img.ndz")

# run RATE: prints "seconds goodput/link sent/image goodput-while-sending/link start_s
# empty_s tail_s paced_mbit"
# (start: server start to its first packet; empty: seconds of the sending time the
# server had nothing queued; tail: last packet to the last client done; paced: what the
# server sent, IP and UDP headers counted as its cap counts them, over the sending time
# less the empty time)
run() {
	rm -f "$OUT"/o* "$T/s.json" "$T/srv.log"
	pids=""
	i=1; while [ $i -le "$N" ]; do
		in_ns "c$i" "$FRISBEE" --raw -q -m "$MC_GROUP" -p "$MC_PORT" -T 30 "$OUT/o$i" \
			2>>"$T/c$i.log" &
		pids="$pids $!"
		i=$((i + 1))
	done
	sleep 0.5
	t0=$(date +%s.%N)
	ip netns exec "${NETNS_PFX}srv" "${SRV:-$FRISBEED}" -m "$MC_GROUP" -p "$MC_PORT" -W "$1" -T 1 $VV \
		--stats-json "$T/s.json" "$T/img.ndz" 2>>"$T/srv.log" &
	spid=$!
	for p in $pids; do wait "$p"; done
	t1=$(date +%s.%N)
	wait "$spid"
	[ -n "${BENCH_TRACE:-}" ] && { echo "## -W $1"; grep 'rate .* at' "$T/srv.log"; } >>"$BENCH_TRACE"
	i=1; while [ $i -le "$N" ]; do
		cmp -s "$T/img.ndz" "$OUT/o$i" || echo "bench: client $i differs" >&2
		i=$((i + 1))
	done
	sent=$(( $(json_num "$T/s.json" blocks_sent) + $(json_num "$T/s.json" repairs_sent) ))
	secs=$(echo "$t1 - $t0" | bc -l)
	ssend=$(json_num "$T/s.json" seconds_sending)
	first=$(json_num "$T/s.json" seconds_to_first)
	empty=$(json_num "$T/s.json" seconds_empty)
	bps=$(json_num "$T/s.json" rate_bps)
	echo "$secs $(echo "$IMGB * 8 / $secs / ($LINK * 1000000)" | bc -l) $(echo "$sent * 1024 / $IMGB" | bc -l)" \
		"$(echo "$IMGB * 8 / $ssend / ($LINK * 1000000)" | bc -l) $first $empty" \
		"$(echo "$secs - $first - $ssend" | bc -l) $(echo "$bps * $ssend / ($ssend - $empty) / 1000000" | bc -l)"
}

echo "# $N clients behind ${LINK} Mbit/s tbf links; image $((IMGB / 1048576)) MiB; medians of $REPS; load $(cut -d' ' -f1 /proc/loadavg)"
# goodput/link: image bytes over the time from the server's start to the last client's
# end (join and start-up included); send/link: the same over the server's sending time
# (first to last packet). The image is 1024/1082 of what the link carries (headers), so
# 0.946 is a full link.
printf '%-12s %8s %12s %10s %11s %7s %7s %7s %7s\n' rate time_s goodput/link send/link sent/image \
	start_s empty_s tail_s paced
row() {
	printf '%-12s %8.2f %12.3f %10.3f %11.3f %7.2f %7.2f %7.2f %7.1f\n' "$1" \
		"$(cut -d' ' -f1 "$T/runs" | median)" \
		"$(cut -d' ' -f2 "$T/runs" | median)" "$(cut -d' ' -f4 "$T/runs" | median)" \
		"$(cut -d' ' -f3 "$T/runs" | median)" "$(cut -d' ' -f5 "$T/runs" | median)" \
		"$(cut -d' ' -f6 "$T/runs" | median)" "$(cut -d' ' -f7 "$T/runs" | median)" \
		"$(cut -d' ' -f8 "$T/runs" | median)"
}
if [ -n "${BENCH_MAIN:-}" ]; then
	# A/B: main's -W auto and this build's, one run of each in turn
	: >"$T/runs.main"
	: >"$T/runs"
	r=1; while [ $r -le "$REPS" ]; do
		SRV=$BENCH_MAIN
		run auto >>"$T/runs.main"
		SRV=
		run auto >>"$T/runs"
		r=$((r + 1))
	done
	mv "$T/runs" "$T/runs.auto"
	mv "$T/runs.main" "$T/runs"
	row "auto (main)"
	mv "$T/runs.auto" "$T/runs"
	row auto
fi
for rate in ${BENCH_RATES:-auto "$((LINK * 95 / 100))M" "$((LINK * 2))M"}; do
	[ -n "${BENCH_MAIN:-}" ] && [ "$rate" = auto ] && continue
	: >"$T/runs"
	r=1; while [ $r -le "$REPS" ]; do run "$rate" >>"$T/runs"; r=$((r + 1)); done
	row "$rate"
done
