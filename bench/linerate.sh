#!/bin/sh
# Benchmark (issue 36): CPU seconds per GiB at the receiving and at the sending end, one
# client in a namespace LAN, at MTU 9000 with GRO on and at MTU 1500, side by side in one
# run: frisbee/frisbeed (--raw: the protocol's own cost, no decompression or disk
# writes), frisbee --max-datagram 1044 against the same frisbeed (one block a datagram,
# as before BLOCKS), udpcast (udp-receiver/udp-sender) and iperf3 -u (unicast, nothing
# but the datagrams: the floor), each at the same rate. frisbee-null and udpcast-null:
# the same two writing into /dev/null, so that both do the same work, the network core
# only (the others write the copy to tmpfs, which iperf3 does not). Medians of REPS.
# SPAN (doc/PROTOCOL.md): "frisbee" sends SPANs where both ends take them (1440 bytes a
# datagram at 1500, 8928 at 9000); "frisbee-1k" is one block a datagram (BLOCK), what
# 1500 carried before SPAN; "frisbee-old" is frisbee and frisbeed of BENCH_OLD (a build
# of the commit before SPAN) on both sides. With BENCH_OLD, a last part sends to
# BENCH_LOSS_CLIENTS clients (default 16, 0: none) at 1% loss at MTU 1500 from the new
# and the old build in turn (BENCH_LOSS_MIB, default 64, at BENCH_LOSS_RATE Mbit/s,
# default 500): the bytes the server's interface sent per image byte; and the ratios.
# Usage: bench/linerate.sh BUILD [REPS]   (root; env BENCH_MIB (default 512),
# BENCH_RATE (default 2000: Mbit/s), BENCH_LINKS (MTU:GRO of the client's interface,
# default "9000:on 1500:off 1500:on"), BENCH_TOOLS, BENCH_OLD=BUILD)
set -u
. "$(dirname "$0")/netbench.sh"
MIB=${BENCH_MIB:-512}
RATE=${BENCH_RATE:-2000}
LINKS=${BENCH_LINKS:-"9000:on 1500:off 1500:on"}
TOOLS=${BENCH_TOOLS:-"frisbee frisbee-null frisbee-1k udpcast udpcast-null iperf3"}
command -v udp-sender >/dev/null || TOOLS=$(echo "$TOOLS" | sed 's/udpcast[a-z-]*//g')
command -v iperf3 >/dev/null || TOOLS=$(echo "$TOOLS" | sed 's/iperf3//')
OLD=${BENCH_OLD:-}
[ -n "$OLD" ] && OLD=$(cd "$OLD" && pwd)
[ -z "$OLD" ] && TOOLS=$(echo "$TOOLS" | sed 's/frisbee-old//')
LOSSN=${BENCH_LOSS_CLIENTS:-16}
[ -z "$OLD" ] && LOSSN=0
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
	frisbee|frisbee-1k|frisbee-null|frisbee-old)
		extra="" fb=$FRISBEE fbd=$FRISBEED
		[ "$1" = frisbee-1k ] && extra="--max-datagram 1044"
		[ "$1" = frisbee-old ] && fb=$OLD/bin/frisbee fbd=$OLD/bin/frisbeed
		# shellcheck disable=SC2086
		in_ns c1 /usr/bin/time -f '%U %S' -o "$T/ct" "$fb" --raw -q $extra \
			-m "$MC_GROUP" -p "$MC_PORT" -T 30 "$dst" 2>>"$T/c1.log" &
		cpid=$!
		sleep 0.3
		t0=$(now)
		ip netns exec "${NETNS_PFX}srv" /usr/bin/time -f '%U %S' -o "$T/st" "$fbd" \
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
		cm=$(cut -d' ' -f1 "$T/runs" | median)
		printf '%-12s %5s %4s %12.3f %12.3f %8.2f %3s/%s\n' "$tool" "$MTU" "$gro" \
			"$cm" "$(cut -d' ' -f2 "$T/runs" | median)" \
			"$(cut -d' ' -f3 "$T/runs" | median)" \
			"$(awk '{ s += $4 } END { print s }' "$T/runs")" "$REPS"
		eval "cpu_$(echo "${tool}_${MTU}_${gro}" | tr -c 'a-z0-9_\n' _)=$cm"
	done
	netns_gro_path c1 off
done
# ratio A B: A / B to 3 places, or - when either is missing
ratio() { [ -n "$1" ] && [ -n "$2" ] && echo "scale=3; $1 / $2" | bc -l || echo -; }
echo "# client CPU, SPAN (frisbee) over BLOCK (frisbee-1k), and over the old build:"
for link in $LINKS; do
	k=$(echo "${link%:*}_${link#*:}" | tr -c 'a-z0-9_\n' _)
	eval "a=\${cpu_frisbee_$k:-} b=\${cpu_frisbee_1k_$k:-} o=\${cpu_frisbee_old_$k:-}"
	echo "#   $link: $(ratio "$a" "$b") of BLOCK's, $(ratio "$a" "$o") of the old build's"
done

# ---- many clients at 1% loss, MTU 1500: the new build against the old ----
if [ "$LOSSN" -gt 0 ]; then
	LMIB=${BENCH_LOSS_MIB:-64}
	LRATE=${BENCH_LOSS_RATE:-500}
	head -c $((LMIB * 1048576 - 1048576)) /dev/urandom >"$T/lsrc"
	"$IMAGEZIP" -q -r "$T/lsrc" "$T/limg.ndz" || exit 1
	LBYTES=$(stat -c %s "$T/limg.ndz")
	netns_mtu srv 1500 && netns_mtu c1 1500 || exit 1
	i=2; while [ $i -le "$LOSSN" ]; do
		netns_host "c$i" $((10 + i)) && netns_mtu "c$i" 1500 || exit 1
		i=$((i + 1))
	done
	# a batch is one UDP_SEGMENT buffer, which veth would carry whole: cut it at the
	# server's interface, so that the loss rule drops datagrams one by one
	in_ns srv ip link set dev eth0 gso_max_segs 1 || exit 1
	i=1; while [ $i -le "$LOSSN" ]; do netns_loss "c$i" 1; i=$((i + 1)); done
	# lossrun BIN_DIR: "tx_bytes_per_image_byte seconds failures"
	lossrun() {
		pids=""
		i=1; while [ $i -le "$LOSSN" ]; do
			in_ns "c$i" timeout 120 "$1/frisbee" --raw -q -m "$MC_GROUP" -p "$MC_PORT" -T 30 \
				"$OUT/l$i" 2>>"$T/c$i.log" &
			pids="$pids $!"
			i=$((i + 1))
		done
		sleep 1
		tx0=$(netns_tx_bytes srv); t0=$(now)
		ip netns exec "${NETNS_PFX}srv" "$1/frisbeed" -m "$MC_GROUP" -p "$MC_PORT" \
			-W "${LRATE}M" -T 60 -q "$T/limg.ndz" 2>>"$T/srv.log" &
		spid=$!
		for p in $pids; do wait "$p"; done
		t1=$(now)
		kill -TERM "$spid"; wait "$spid"
		tx=$(( $(netns_tx_bytes srv) - tx0 ))
		bad=0
		i=1; while [ $i -le "$LOSSN" ]; do
			cmp -s "$T/limg.ndz" "$OUT/l$i" || bad=$((bad + 1))
			rm -f "$OUT/l$i"
			i=$((i + 1))
		done
		echo "$(echo "scale=4; $tx / $LBYTES" | bc -l) $(echo "$t1 - $t0" | bc) $bad"
	}
	echo "# $LOSSN clients, 1% loss each, MTU 1500, $((LBYTES / 1048576)) MiB image at ${LRATE} Mbit/s:"
	echo "# server interface bytes (headers too) per image byte"
	printf '%-12s %10s %8s %6s\n' build tx/image time_s failed
	for b in new old; do
		dir=$NDZ_BIN
		[ "$b" = old ] && dir=$OLD/bin
		: >"$T/lruns"
		r=1; while [ $r -le "$REPS" ]; do lossrun "$dir" >>"$T/lruns"; r=$((r + 1)); done
		m=$(cut -d' ' -f1 "$T/lruns" | median)
		eval "tx_$b=$m"
		printf '%-12s %10.3f %8.2f %6s\n' "$b" "$m" "$(cut -d' ' -f2 "$T/lruns" | median)" \
			"$(awk '{ s += $3 } END { print s }' "$T/lruns")"
	done
	echo "# bytes/image, new over old: $(ratio "$tx_new" "$tx_old")"
fi
echo "# load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

