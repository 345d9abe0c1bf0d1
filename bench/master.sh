#!/bin/sh
# Benchmark: the image master (mfrisbeed) in a namespace LAN.
# 1. From `frisbee -M` starting to its first block: each run asks for an image with
#    no session yet (so the master starts a frisbeed; the one before has ended), and
#    the time is taken when the first chunk reaches the target file; less the time
#    one chunk takes on the wire at the session's rate, that is the first block.
#    Median and worst of REPS runs; the goal is < 0.3 s.
# 2. Four images to four groups of clients at once under a total cap: the sum of the
#    sessions' send rates (the server's transmitted bytes while all four run) against
#    the cap, and each group's time against one group alone.
# Usage: bench/master.sh BUILD [REPS]   (root; env BENCH_MIB, BENCH_CAP (Mbit/s),
# BENCH_GROUP (clients per group) override the defaults)
set -u
. "$(dirname "$0")/netbench.sh"
REPS=${2:-20}
MIB=${BENCH_MIB:-16}
CAP=${BENCH_CAP:-200}
GROUP=${BENCH_GROUP:-2}
SRV=10.77.0.1
netns_lan && netns_host srv 1 || exit 1
i=1; while [ $i -le $((4 * GROUP)) ]; do netns_host "c$i" $((10 + i)) || exit 1; i=$((i + 1)); done
bench_out ndzbench

# four images of random data (so every byte counts the same), MIB MiB each
for n in 1 2 3 4; do
	head -c $((MIB * 1048576 - 1048576)) /dev/urandom >"$T/src$n"
	"$IMAGEZIP" -q -r "$T/src$n" "$T/img$n.ndz" || exit 1
done
head -c $((3 * 1048576)) /dev/urandom >"$T/small"
"$IMAGEZIP" -q -r "$T/small" "$T/small.ndz" || exit 1
IMGB=$(stat -c %s "$T/img1.ndz")
{
	echo "pool 239.192.9.0/26"
	echo "ports 5300-5363"
	echo "max-sessions 40"
	echo "idle-timeout 1"
	echo "rate 500M"
	echo "total-rate ${CAP}M"
	echo "image g1 $T/img1.ndz allow 10.77.0.0/24"
	echo "image g2 $T/img2.ndz allow 10.77.0.0/24"
	echo "image g3 $T/img3.ndz allow 10.77.0.0/24"
	echo "image g4 $T/img4.ndz allow 10.77.0.0/24"
	k=1; while [ $k -le "$REPS" ]; do echo "image s$k $T/small.ndz allow 10.77.0.0/24"; k=$((k + 1)); done
} >"$T/m.conf"
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -c "$T/m.conf" -r "$T/run" 2>"$T/m.log" &
MPID=$!
at_exit "kill $MPID"
for k in $(seq 30); do in_ns srv ss -lun | grep -q ':3563 ' && break; sleep 0.1; done
echo "# images: $((IMGB / 1048576)) chunks each; total cap ${CAP} Mbit/s; $(nproc) cores"

# 1. start to first block, a new session each run (image sK: nobody asked for it yet)
: >"$T/first"
k=1; while [ $k -le "$REPS" ]; do
	rm -f "$OUT/f"
	t0=$(now)
	in_ns c1 "$FRISBEE" -q -M "$SRV" -I "s$k" -T 10 "$OUT/f" 2>>"$T/c.log" &
	p=$!
	while [ ! -s "$OUT/f" ] || [ "$(du -k "$OUT/f" | cut -f1)" = 0 ]; do
		kill -0 $p 2>/dev/null || break
		sleep 0.002
	done
	t1=$(now)
	wait $p || echo "run $k: frisbee failed" >&2
	echo "$t1 - $t0" | bc -l >>"$T/first"
	k=$((k + 1))
	sleep 1.3                      # the session ends: the next one runs alone at the cap
done
# one chunk on the wire at the session's rate (the whole cap: one session at a time)
chunk=$(echo "1048576 * 1.061 * 8 / ($CAP * 1000000)" | bc -l)
med=$(median <"$T/first") worst=$(sort -n "$T/first" | tail -1)
printf 'start to first chunk written (new session each run): median %.3f s, worst %.3f s (%d runs)\n' \
	"$med" "$worst" "$REPS"
printf 'start to first block (the above less one chunk at %d Mbit/s, %.3f s): median %.3f s, worst %.3f s (goal < 0.3 s)\n' \
	"$CAP" "$chunk" "$(echo "$med - $chunk" | bc -l)" "$(echo "$worst - $chunk" | bc -l)"
sleep 1.5                              # the sessions above end on their idle timeout

# 2. one group alone, then four groups at once
# group G IMAGE: GROUP clients loading IMAGE; each one's seconds into $T/tG.C
group() {
	_g=$1 _img=$2 _c=1
	while [ $_c -le "$GROUP" ]; do
		_h=$(( (_g - 1) * GROUP + _c ))
		( _t0=$(now); in_ns "c$_h" "$FRISBEE" -q -M "$SRV" -I "$_img" -T 20 "$OUT/o$_h" \
			2>>"$T/c.log" || echo "client c$_h failed" >&2
		  echo "$(now) - $_t0" | bc -l >"$T/t$_g.$_c" ) &
		PIDS="$PIDS $!"
		_c=$((_c + 1))
	done
}
gtime() { cat "$T"/t"$1".* | sort -n | tail -1; }
rates() { in_ns c1 "$NDZ_BIN/mfrisbeed" --status "$SRV" | grep -o '"rate_bps": [0-9]*, "clients"' | tr -dc '0-9\n' | tr '\n' ' '; }
PIDS=""
group 1 g1
sleep 0.3
echo "one group: session rates (bit/s): $(rates)"
wait $PIDS
alone=$(gtime 1)
sleep 1.5
rm -f "$T"/t*.*
PIDS=""
tx0=$(netns_tx_bytes srv); t0=$(now)
for g in 1 2 3 4; do group $g g$g; done
# the server's bytes while all four groups run: from 0.5 s in until the first is done
txa="" ta="" txb=$tx0 tb=$t0
while [ "$(ls "$T" | grep -c '^t[0-9]\.')" = 0 ]; do
	sleep 0.1
	txb=$(netns_tx_bytes srv); tb=$(now)
	if [ -z "$ta" ] && [ "$(echo "$tb - $t0 > 0.5" | bc -l)" = 1 ]; then
		txa=$txb ta=$tb
		echo "four groups: session rates (bit/s): $(rates)"
	fi
done
wait $PIDS
[ -n "$ta" ] && [ "$(echo "$tb - $ta > 0.2" | bc -l)" = 1 ] || { txa=$tx0 ta=$t0; }
rate=$(echo "($txb - $txa) * 8 / ($tb - $ta) / 1000000" | bc -l)
printf 'four groups under a %d Mbit/s cap: sum of send rates %.1f Mbit/s (%+.1f%% of the cap; bytes on the wire incl. headers, over %.1f s while all four ran)\n' \
	"$CAP" "$rate" "$(echo "($rate - $CAP) * 100 / $CAP" | bc -l)" "$(echo "$tb - $ta" | bc -l)"
printf 'one group alone: %.2f s; four at once: %.2f %.2f %.2f %.2f s (x%.2f of alone on average; an even share predicts x4)\n' \
	"$alone" "$(gtime 1)" "$(gtime 2)" "$(gtime 3)" "$(gtime 4)" \
	"$(echo "($(gtime 1) + $(gtime 2) + $(gtime 3) + $(gtime 4)) / 4 / $alone" | bc -l)"
k=1; while [ $k -le $((4 * GROUP)) ]; do
	cmp -s "$T/src$(( (k - 1) / GROUP + 1 ))" "$OUT/o$k" || echo "client c$k: target differs" >&2
	k=$((k + 1))
done
