#!/bin/sh
# Benchmark: the lab (issue 24) in a namespace LAN.
# 1. The master (mfrisbeed) under N simulated nodes (bench/labsim.c, built here against
#    BUILD's libndz.a: the lab messages through lib/master's node side): N nodes added
#    with ndzctl in one group, `ndzctl reload GROUP IMAGE`, then each node asks (on a
#    "wait" asks again), reports progress once a second, then ok. The master's CPU
#    (utime + stime of /proc/PID/stat) per second of wall time and its RSS (VmRSS,
#    VmHWM) over SECONDS, against the same master idle (no nodes) for as long; the
#    round trips the nodes saw; /status.json, /metrics and / by curl (size, time).
# 2. A group starts together: NC frisbee clients, each in its own namespace, "boot" at
#    random offsets within 2 s (the first at 0) and load one image from the master:
#    (a) today: each runs `frisbee -M SRV -I IMAGE` as it boots; (b) lab: the nodes are
#    a group given `ndzctl reload GROUP IMAGE` (group-window 5); each, as it boots,
#    runs `ndzctl -m SRV ask MAC` (which asks again while told to wait) and on
#    "reload IMAGE" runs frisbee -M, then reports ok. The bytes the server's interface
#    sent / image bytes (frisbee's floor is 1.061: headers), the session's own
#    bytes_sent (master --status, taken after the last client is done) / image bytes,
#    and the time from the first boot to the last client done; medians of REPS runs,
#    the ways taking turns on the same boot offsets. (c) lab100: as lab, but the node
#    asks again 100 ms after a "wait" (tests/helpers/labnode, when built), whatever
#    wait time the master says (it says up to 1 s): what a shorter wait would give.
#    (0) together: today's way with every node booting at the same instant: the floor.
#    Variants "NC:LOSS" (loss: % of UDP dropped at each
#    client, tests/netns.sh's netns_loss).
# Usage: bench/lab.sh BUILD [REPS]   (root; env BENCH_PARTS="sim group", BENCH_NODES
# (100), BENCH_SECONDS (60), BENCH_MIB (source MiB of /usr binaries and text, 192),
# BENCH_RATE (Mbit/s, 100), BENCH_VARIANTS ("8:0 8:1 16:1"), BENCH_SPREAD (s, 2),
# BENCH_WAYS ("together today lab lab100"))
set -u
. "$(dirname "$0")/netbench.sh"
PARTS=${BENCH_PARTS:-"sim group"}
NODES=${BENCH_NODES:-100}
SECS=${BENCH_SECONDS:-60}
MIB=${BENCH_MIB:-192}
RATE=${BENCH_RATE:-100}
VARIANTS=${BENCH_VARIANTS:-"8:0 8:1 16:1"}
SPREAD=${BENCH_SPREAD:-2}
WAYS=${BENCH_WAYS:-"together today lab lab100"}
LABNODE="$NDZ_BUILD/tests/helpers/labnode"
[ -x "$LABNODE" ] || WAYS=$(echo "$WAYS" | sed 's/lab100//')
CTL="$NDZ_BIN/ndzctl"
SRV=10.77.0.1
HZ=$(getconf CLK_TCK)
maxc=0
for v in $VARIANTS; do [ "${v%%:*}" -gt $maxc ] && maxc=${v%%:*}; done
netns_lan && netns_host srv 1 && netns_host sim 2 || exit 1
i=1; while [ $i -le $maxc ]; do netns_host "c$i" $((10 + i)) || exit 1; i=$((i + 1)); done
bench_out ndzlab
echo "# bench/lab.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs, load average before:" \
	"$(cut -d' ' -f1-3 /proc/loadavg)"

MPID=""
at_exit 'kill $MPID 2>/dev/null'
# master CONF: a fresh master (run directory $T/run) in host srv; MPID its pid
master() {
	[ -n "$MPID" ] && { kill "$MPID"; wait "$MPID" 2>/dev/null; }
	rm -rf "$T/run"; mkdir -p "$T/run"
	ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -c "$1" -r "$T/run" 2>>"$T/m.log" &
	MPID=$!
	wait_until 5 test -S "$T/run/admin"
}
ctl() { "$CTL" -m "$T/run/admin" "$@"; }
cpu() { awk '{ print $14 + $15 }' "/proc/$MPID/stat"; }
kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$MPID/status"; }
# mac PREFIX K: PREFIX:hi:lo with hi:lo = K
mac() { printf '%s:%02x:%02x' "$1" $(($2 >> 8)) $(($2 & 255)); }

sim_part() {
	LIBS=$(sed -n 's/^LIBS = //p' "$NDZ_TOP/Makefile")
	# shellcheck disable=SC2086
	cc -O2 -std=gnu11 -Wall -Wextra -D_GNU_SOURCE -I"$NDZ_TOP/lib" -I"$NDZ_TOP/fs" -pthread \
		-o "$T/labsim" "$NDZ_TOP/bench/labsim.c" "$NDZ_BUILD/libndz.a" $LIBS ||
		{ echo "bench: labsim does not build against $NDZ_BUILD" >&2; return 1; }
	: >"$T/lab.ndz"
	cat >"$T/sim.conf" <<CONF
image lab $T/lab.ndz allow 10.77.0.0/24
group-window 5
node-timeout 60
http-listen $SRV:8080
CONF
	master "$T/sim.conf" || { echo "bench: the master does not start" >&2; cat "$T/m.log"; return 1; }
	echo
	echo "== 1. the master under $NODES simulated nodes (labsim in its own namespace), ${SECS} s windows"
	sleep 2
	# window NAME: the master's CPU over SECS s (RSS sampled each second)
	window() {
		_c0=$(cpu) _t0=$(now) _peak=0 _k=0
		while [ $_k -lt "$SECS" ]; do
			sleep 1
			_r=$(kib VmRSS); [ "$_r" -gt $_peak ] && _peak=$_r
			_k=$((_k + 1))
		done
		_c1=$(cpu) _t1=$(now)
		printf '%-34s CPU %6.2f ms per s (%5.2f%% of a core; %d ticks of 1/%d s in %.1f s); RSS %s KiB now, %s KiB most sampled, VmHWM %s KiB\n' \
			"$1" "$(echo "($_c1 - $_c0) * 1000 / $HZ / ($_t1 - $_t0)" | bc -l)" \
			"$(echo "($_c1 - $_c0) * 100 / $HZ / ($_t1 - $_t0)" | bc -l)" \
			$((_c1 - _c0)) "$HZ" "$(echo "$_t1 - $_t0" | bc -l)" "$(kib VmRSS)" "$_peak" "$(kib VmHWM)"
	}
	window "idle, no nodes:"
	k=1
	while [ $k -le "$NODES" ]; do
		ctl -q nodes add "$(mac 52:54:00:aa "$k")" "n$k" sim || return 1
		k=$((k + 1))
	done
	window "idle, $NODES nodes known, no task:"
	ctl reload sim lab || return 1
	# the nodes report for SECS + 20 s: the CPU window from 5 s in, then the HTTP fetches
	in_ns sim "$T/labsim" "$SRV" 52:54:00:aa "$NODES" $((SECS + 20)) >"$T/sim.out" 2>"$T/sim.err" &
	spid=$!
	sleep 5
	# shellcheck disable=SC2046 # the counts on one line
	echo "after 5 s, node states:" $(ctl status --json | grep -o '"state":"[a-z]*"' | sort | uniq -c |
		sed 's/"state":"\([a-z]*\)"/\1/')
	window "$NODES nodes, a report each a s:"
	for p in status.json metrics ""; do
		: >"$T/curl"
		k=0
		while [ $k -lt 20 ]; do
			in_ns sim curl -s -o /dev/null -w '%{size_download} %{time_total}\n' \
				"http://$SRV:8080/$p" >>"$T/curl"
			k=$((k + 1))
		done
		printf 'GET /%-12s %7d bytes, time median %.1f ms, max %.1f ms (20 fetches, curl -w time_total)\n' \
			"$p" "$(cut -d' ' -f1 "$T/curl" | sort -n | tail -1)" \
			"$(cut -d' ' -f2 "$T/curl" | median | awk '{ print $1 * 1000 }')" \
			"$(cut -d' ' -f2 "$T/curl" | sort -n | tail -1 | awk '{ print $1 * 1000 }')"
	done
	echo "after the fetches: RSS $(kib VmRSS) KiB, VmHWM $(kib VmHWM) KiB"
	wait $spid || echo "bench: labsim: some calls failed (see below)" >&2
	sed 's/^/labsim: /' "$T/sim.out"
	head -5 "$T/sim.err"
	sleep 1
	echo "after the results: RSS $(kib VmRSS) KiB, VmHWM $(kib VmHWM) KiB"
	echo "results: $(ctl status --json | grep -o '"last":{"ok":true' | wc -l) of $NODES nodes ok"
	window "after, $NODES nodes done, idle:"
}

group_part() {
	# shellcheck disable=SC2034 # make_input's parameters (bench/common.sh)
	dir=$T size_mb=$MIB
	make_input >/dev/null
	"$IMAGEZIP" -q -r "$T/in" "$T/img.ndz" || return 1
	IMGB=$(stat -c %s "$T/img.ndz")
	cat >"$T/grp.conf" <<CONF
pool 239.192.9.0/26
ports 5300-5363
idle-timeout 2
rate ${RATE}M
image img $T/img.ndz allow 10.77.0.0/24
group-window 5
CONF
	master "$T/grp.conf" || { echo "bench: the master does not start" >&2; cat "$T/m.log"; return 1; }
	echo
	echo "== 2. a group starts together: the image ${MIB} MiB of /usr binaries and text," \
		"$IMGB bytes compressed ($((IMGB / 1048576)) chunks); session rate $RATE Mbit/s;" \
		"boots within $SPREAD s; group-window 5 s; medians of $REPS runs"
	printf '%-8s %3s %5s %8s %8s %8s %8s %8s %8s %6s\n' way n loss time_s tx/img max sess/img max spread_s failed
	for v in $VARIANTS; do
		n=${v%%:*} loss=${v#*:}
		# group "room": exactly the n nodes of this variant
		i=1
		while [ $i -le $maxc ]; do
			g=room; [ $i -gt "$n" ] && g=spare
			ctl -q nodes add "$(mac 52:54:00:77 $i)" "c$i" $g || return 1
			i=$((i + 1))
		done
		i=1
		while [ $i -le "$n" ]; do
			netns_noloss "c$i"
			[ "$loss" != 0 ] && netns_loss "c$i" "$loss"
			i=$((i + 1))
		done
		for w in $WAYS; do : >"$T/$w"; done
		r=1
		while [ $r -le "$REPS" ]; do
			for w in $WAYS; do grun $w "$n" $r >>"$T/$w"; done
			r=$((r + 1))
		done
		for w in $WAYS; do
			printf '%-8s %3s %4s%% %8.2f %8.3f %8.3f %8.3f %8.3f %8.2f %6s\n' "$w" "$n" "$loss" \
				"$(cut -d' ' -f1 "$T/$w" | median)" \
				"$(cut -d' ' -f2 "$T/$w" | median | awk -v b="$IMGB" '{ print $1 / b }')" \
				"$(cut -d' ' -f2 "$T/$w" | sort -n | tail -1 | awk -v b="$IMGB" '{ print $1 / b }')" \
				"$(cut -d' ' -f3 "$T/$w" | median | awk -v b="$IMGB" '{ print $1 / b }')" \
				"$(cut -d' ' -f3 "$T/$w" | sort -n | tail -1 | awk -v b="$IMGB" '{ print $1 / b }')" \
				"$(cut -d' ' -f5 "$T/$w" | median)" \
				"$(awk '{ s += $4 } END { print s }' "$T/$w")"
		done
		i=1; while [ $i -le "$n" ]; do netns_noloss "c$i"; i=$((i + 1)); done
	done
}

# grun WAY N RUN: one run; prints "seconds tx_bytes session_bytes failures"
grun() {
	way=$1 n=$2
	rm -f "$OUT"/o* "$T"/g*.rc "$T"/g*.s0
	[ "$way" != today ] && { ctl -q reload room img || return 1; }
	# offsets: N random points in [0, SPREAD) s, shifted so the first is 0; the same
	# for both ways of one run
	awk -v n="$n" -v s="$SPREAD" -v seed="$$$3" -v w="$way" 'BEGIN { srand(seed); m = s
		for (i = 1; i <= n; i++) { o[i] = rand() * s; if (o[i] < m) m = o[i] }
		for (i = 1; i <= n; i++) printf "%.3f\n", w == "together" ? 0 : o[i] - m }' >"$T/offs"
	tx0=$(netns_tx_bytes srv)
	t0=$(now)
	pids=""
	i=1
	for off in $(cat "$T/offs"); do
		m=$(mac 52:54:00:77 $i)
		(
			sleep "$off"
			if [ "$way" = lab ]; then
				a=$(in_ns "c$i" "$CTL" -m $SRV ask "$m" 2>>"$T/g$i.log")
				[ "$a" = "reload img" ] || { echo "c$i: told '$a'" >>"$T/g$i.log"; echo 1 >"$T/g$i.rc"; exit; }
			elif [ "$way" = lab100 ]; then
				while a=$(in_ns "c$i" "$LABNODE" $SRV "$m" ask 2>>"$T/g$i.log"); do
					case $a in "wait "*) sleep 0.1 ;; *) break ;; esac
				done
				case $a in "reload img"*) ;; *) echo "c$i: told '$a'" >>"$T/g$i.log"; echo 1 >"$T/g$i.rc"; exit ;; esac
			fi
			s0=$(now)
			echo "$s0" >"$T/g$i.s0"
			in_ns "c$i" timeout 120 "$FRISBEE" -q -M $SRV -I img -T 30 "$OUT/o$i" 2>>"$T/g$i.log"
			rc=$?
			if [ "$way" != today ]; then
				ms=$(echo "($(now) - $s0) * 1000 / 1" | bc)
				if [ $rc = 0 ]; then
					in_ns "c$i" "$CTL" -m $SRV report "$m" ok "$(stat -c %s "$OUT/o$i")" "$ms" 0 \
						2>>"$T/g$i.log"
				else
					in_ns "c$i" "$CTL" -m $SRV report "$m" failed "frisbee exit $rc" 2>>"$T/g$i.log"
				fi
			fi
			echo $rc >"$T/g$i.rc"
		) &
		pids="$pids $!"
		i=$((i + 1))
	done
	for p in $pids; do wait "$p"; done
	t1=$(now)
	sb=$(in_ns sim "$NDZ_BIN/mfrisbeed" --status $SRV 2>/dev/null |
		grep -o '"image": "img"[^}]*"bytes_sent": [0-9]*' | sed 's/.*"bytes_sent": //' | tail -1)
	sleep 3                        # the session ends (idle-timeout 2)
	tx1=$(netns_tx_bytes srv)
	bad=0
	i=1
	while [ $i -le "$n" ]; do
		{ [ "$(cat "$T/g$i.rc" 2>/dev/null)" = 0 ] && cmp -s "$T/in" "$OUT/o$i"; } || bad=$((bad + 1))
		i=$((i + 1))
	done
	sp=$(cat "$T"/g*.s0 | sort -n | awk 'NR == 1 { a = $1 } { b = $1 } END { print b - a }')
	echo "$(echo "$t1 - $t0" | bc -l) $((tx1 - tx0)) ${sb:-0} $bad $sp"
}

for p in $PARTS; do
	case $p in
	sim) sim_part ;;
	group) group_part ;;
	esac
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
