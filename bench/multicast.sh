#!/bin/sh
# Benchmark: one image to 1, 4 and 8 clients in a namespace LAN, frisbeed/frisbee side by
# side with udpcast (udp-sender/udp-receiver) at the same bandwidth cap, with and without
# loss. Tool "frisbee-st" is frisbeed --no-whole-repair (repairs of stripes only, as before
# whole-chunk repairs). Tool "frisbee-nr" is frisbeed --no-repair (re-sends only, as before repair
# blocks). Reports medians of: time until every client is done, bytes the server's interface
# sent relative to the image (raw, and relative to the same tool's 1-client lossless run),
# and packets the server's interface received (control traffic).
# Usage: bench/multicast.sh BUILD [REPS]   (root; env BENCH_MIB, BENCH_RATES, BENCH_LOSSES,
# BENCH_CLIENTS, BENCH_TOOLS override the defaults; a rate of 0 is uncapped: frisbeed -W 100G,
# udp-sender without --max-bitrate; BENCH_MTU (default 1500) is every interface's MTU)
set -u
. "$(dirname "$0")/netbench.sh"
MIB=${BENCH_MIB:-32}
RATES=${BENCH_RATES:-"100 500"}
LOSSES=${BENCH_LOSSES:-"0 1"}
CLIENTS=${BENCH_CLIENTS:-"1 4 8"}
TOOLS=${BENCH_TOOLS:-"frisbee udpcast"}
TMO=${BENCH_TIMEOUT:-60}       # a run not done by then counts as failed (udpcast can hang)
command -v udp-sender >/dev/null || TOOLS=$(echo "$TOOLS" | sed 's/udpcast//')
maxc=0; for n in $CLIENTS; do [ "$n" -gt $maxc ] && maxc=$n; done
netns_lan && netns_host srv 1 || exit 1
i=1; while [ $i -le $maxc ]; do netns_host "c$i" $((10 + i)) || exit 1; i=$((i + 1)); done
MTU=${BENCH_MTU:-1500}
netns_mtu srv "$MTU" || exit 1
i=1; while [ $i -le $maxc ]; do netns_mtu "c$i" "$MTU" || exit 1; i=$((i + 1)); done
# frisbeed sends a batch as one UDP_SEGMENT buffer; a NIC cuts it into datagrams, but
# veth and the bridge would carry it whole, and a client's loss rule would drop all of
# its datagrams at once: cut it at the server's interface, so loss stays per datagram.
in_ns srv ip link set dev eth0 gso_max_segs 1 || exit 1
bench_out ndzbench
bench_image || exit 1
IMG="$T/img.ndz"
IMGB=$(stat -c %s "$IMG")
echo "# image: $((IMGB / 1048576)) chunks ($IMGB bytes); $REPS runs each; $(nproc) cores; MTU $MTU"

counters() { echo "$(netns_tx_bytes srv) $(netns_rx_packets srv)"; }

# run TOOL RATE LOSS N: prints "seconds tx_bytes rx_packets failures"
run() {
	tool=$1 rate=$2 loss=$3 n=$4
	rm -f "$OUT"/o* "$T"/c*.rc
	i=1; while [ $i -le $n ]; do
		netns_noloss "c$i"
		[ "$loss" != 0 ] && netns_loss "c$i" "$loss"
		i=$((i + 1))
	done
	set -- $(counters); tx0=$1 rx0=$2
	pids=""
	i=1; while [ $i -le $n ]; do
		if [ "$tool" != udpcast ]; then
			in_ns "c$i" timeout "$TMO" "$FRISBEE" --raw -q -m "$MC_GROUP" -p "$MC_PORT" -T 30 \
				"$OUT/o$i" 2>>"$T/c$i.log" &
		else
			in_ns "c$i" timeout "$TMO" udp-receiver --file "$OUT/o$i" --portbase "$MC_PORT" \
				--interface eth0 --nokbd --no-progress --mcast-rdv-address "$MC_GROUP" \
				>/dev/null 2>>"$T/c$i.log" &
		fi
		pids="$pids $!"
		i=$((i + 1))
	done
	sleep 0.5      # every client is waiting for the server
	t0=$(now)
	if [ "$tool" != udpcast ]; then
		nr=""
		[ "$tool" = frisbee-nr ] && nr=--no-repair
		[ "$tool" = frisbee-st ] && nr=--no-whole-repair
		# shellcheck disable=SC2086
		w=${rate}M
		[ "$rate" = 0 ] && w=100G
		ip netns exec "${NETNS_PFX}srv" "$FRISBEED" -m "$MC_GROUP" -p "$MC_PORT" \
			-W "$w" -T 60 $nr "$IMG" 2>>"$T/srv.log" &
		spid=$!
	else
		cap="--max-bitrate ${rate}m"
		[ "$rate" = 0 ] && cap=
		# shellcheck disable=SC2086
		in_ns srv timeout "$TMO" udp-sender --file "$IMG" --portbase "$MC_PORT" --interface eth0 \
			--mcast-rdv-address "$MC_GROUP" $cap \
			--min-receivers "$n" --nokbd --no-progress >/dev/null 2>>"$T/srv.log" &
		spid=$!
	fi
	for p in $pids; do wait "$p"; done
	t1=$(now)
	if [ "$tool" != udpcast ]; then kill -TERM "$spid"; fi
	wait "$spid"
	set -- $(counters)
	bad=0
	i=1; while [ $i -le $n ]; do cmp -s "$IMG" "$OUT/o$i" || bad=$((bad + 1)); i=$((i + 1)); done
	echo "$(echo "$t1 - $t0" | bc) $(($1 - tx0)) $(($2 - rx0)) $bad"
}


printf '%-10s %5s %5s %3s %9s %8s %9s %9s %6s\n' tool Mbit loss n time_s tx/img tx/base ctrl_pkts failed
for rate in $RATES; do
for loss in $LOSSES; do
for tool in $TOOLS; do
for n in $CLIENTS; do
	: >"$T/runs"
	r=1; while [ $r -le "$REPS" ]; do run "$tool" "$rate" "$loss" "$n" >>"$T/runs"; r=$((r + 1)); done
	tm=$(cut -d' ' -f1 "$T/runs" | median)
	tx=$(cut -d' ' -f2 "$T/runs" | median)
	rx=$(cut -d' ' -f3 "$T/runs" | median)
	bad=$(awk '{ s += $4 } END { print s }' "$T/runs")
	key="$tool-$rate"
	[ "$loss" = 0 ] && [ "$n" = 1 ] && eval "base_$(echo "$key" | tr - _)=$tx"
	base=$(eval "echo \${base_$(echo "$key" | tr - _):-$tx}")
	printf '%-10s %5s %4s%% %3s %9.2f %8.3f %9.3f %9.0f %6s\n' "$tool" "$rate" "$loss" "$n" "$tm" \
		"$(echo "$tx / $IMGB" | bc -l)" "$(echo "$tx / $base" | bc -l)" "$rx" "$bad"
done
done
done
done
