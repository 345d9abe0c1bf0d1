#!/bin/sh
# Benchmark (issue 36): CPU seconds per GiB at the receiving and at the sending end, one
# client in a namespace LAN, at MTU 9000 with GRO on and at MTU 1500, side by side in one
# run: frisbee/frisbeed (--raw: the protocol's own cost, no decompression or disk
# writes), frisbee --max-datagram 1044 against the same frisbeed (one block a datagram,
# as before BLOCKS), udpcast (udp-receiver/udp-sender) and iperf3 -u (unicast, nothing
# but the datagrams: the floor), each at the same rate. frisbee-null and udpcast-null:
# the same two writing into /dev/null, so that both do the same work, the network core
# only (the others write the copy to tmpfs, which iperf3 does not). Medians of REPS.
# Usage: bench/linerate.sh BUILD [REPS]   (root; env BENCH_MIB (default 512),
# BENCH_RATE (default 2000: Mbit/s), BENCH_LINKS (MTU:GRO of the client's interface,
# default "9000:on 1500:off 1500:on"), BENCH_TOOLS)
set -u
. "$(dirname "$0")/netbench.sh"
MIB=${BENCH_MIB:-512}
RATE=${BENCH_RATE:-2000}
LINKS=${BENCH_LINKS:-"9000:on 1500:off 1500:on"}
TOOLS=${BENCH_TOOLS:-"frisbee frisbee-null frisbee-1k udpcast udpcast-null iperf3"}
command -v udp-sender >/dev/null || TOOLS=$(echo "$TOOLS" | sed 's/udpcast[a-z-]*//g')
command -v iperf3 >/dev/null || TOOLS=$(echo "$TOOLS" | sed 's/iperf3//')
netns_lan && netns_host srv 1 && netns_host c1 11 || exit 1
bench_out ndzline
bench_image || exit 1
IMG="$T/img.ndz"
BYTES=$(stat -c %s "$IMG")
GIB=$(echo "$BYTES / 1073741824" | bc -l)
echo "# image: $((BYTES / 1048576)) MiB; $REPS runs each; $(nproc) cores; ${RATE} Mbit/s"

# cpu FILE: user + system seconds /usr/bin/time wrote
cpu() { awk '{ print $1 + $2 }' "$1"; }

# one TOOL: prints "client_s_per_GiB server_s_per_GiB seconds ok"
one() {
	rm -f "$OUT/o"
	t0=$(now)
	dst="$OUT/o"
	case $1 in *-null) dst=/dev/null ;; esac
	case $1 in
	frisbee|frisbee-1k|frisbee-null)
		extra=""
		[ "$1" = frisbee-1k ] && extra="--max-datagram 1044"
		# shellcheck disable=SC2086
		in_ns c1 /usr/bin/time -f '%U %S' -o "$T/ct" "$FRISBEE" --raw -q $extra \
			-m "$MC_GROUP" -p "$MC_PORT" -T 30 "$dst" 2>>"$T/c1.log" &
		cpid=$!
		sleep 0.3
		t0=$(now)
		ip netns exec "${NETNS_PFX}srv" /usr/bin/time -f '%U %S' -o "$T/st" "$FRISBEED" \
			-m "$MC_GROUP" -p "$MC_PORT" -W "${RATE}M" -T 1 -q "$IMG" 2>>"$T/srv.log" &
		spid=$!
		wait "$cpid"; crc=$?; t1=$(now)
		wait "$spid"
		ok=0
		if [ "$dst" = /dev/null ]; then [ "$crc" = 0 ] && ok=1
		else cmp -s "$IMG" "$OUT/o" && ok=1; fi ;;
	udpcast|udpcast-null)
		in_ns c1 /usr/bin/time -f '%U %S' -o "$T/ct" udp-receiver --file "$dst" \
			--portbase "$MC_PORT" --interface eth0 --nokbd --no-progress \
			--mcast-rdv-address "$MC_GROUP" >/dev/null 2>>"$T/c1.log" &
		cpid=$!
		sleep 0.3
		t0=$(now)
		in_ns srv /usr/bin/time -f '%U %S' -o "$T/st" timeout 120 udp-sender --file "$IMG" \
			--portbase "$MC_PORT" --interface eth0 --mcast-rdv-address "$MC_GROUP" \
			--max-bitrate "${RATE}m" --min-receivers 1 --nokbd --no-progress \
			>/dev/null 2>>"$T/srv.log" &
		spid=$!
		wait "$cpid"; crc=$?; t1=$(now)
		wait "$spid"
		ok=0
		if [ "$dst" = /dev/null ]; then [ "$crc" = 0 ] && ok=1
		else cmp -s "$IMG" "$OUT/o" && ok=1; fi ;;
	iperf3)
		# the floor: as many bytes in datagrams as large as the MTU takes, unicast
		len=$((MTU - 28))
		in_ns c1 /usr/bin/time -f '%U %S' -o "$T/ct" iperf3 -s -1 -p "$MC_PORT" \
			>/dev/null 2>>"$T/c1.log" &
		cpid=$!
		sleep 0.3
		t0=$(now)
		in_ns srv /usr/bin/time -f '%U %S' -o "$T/st" iperf3 -c 10.77.0.11 -p "$MC_PORT" \
			-u -b "${RATE}M" -l "$len" -n "$BYTES" >"$T/iperf.out" 2>>"$T/srv.log"
		t1=$(now)
		wait "$cpid"
		ok=1 ;;
	esac
	echo "$(echo "$(cpu "$T/ct") / $GIB" | bc -l) $(echo "$(cpu "$T/st") / $GIB" | bc -l)" \
		"$(echo "$t1 - $t0" | bc)" "$ok"
}

printf '%-12s %5s %4s %12s %12s %8s %6s\n' tool mtu gro client_s/GiB server_s/GiB time_s good
for link in $LINKS; do
	MTU=${link%:*} gro=${link#*:}
	netns_mtu srv "$MTU" && netns_mtu c1 "$MTU" || exit 1
	netns_gro_path c1 "$gro" || gro="$gro?"
	for tool in $TOOLS; do
		: >"$T/runs"
		r=1; while [ $r -le "$REPS" ]; do one "$tool" >>"$T/runs"; r=$((r + 1)); done
		printf '%-12s %5s %4s %12.3f %12.3f %8.2f %3s/%s\n' "$tool" "$MTU" "$gro" \
			"$(cut -d' ' -f1 "$T/runs" | median)" "$(cut -d' ' -f2 "$T/runs" | median)" \
			"$(cut -d' ' -f3 "$T/runs" | median)" \
			"$(awk '{ s += $4 } END { print s }' "$T/runs")" "$REPS"
	done
	netns_gro_path c1 off
done
