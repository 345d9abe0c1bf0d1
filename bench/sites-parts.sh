#!/bin/sh
# Benchmark parts of bench/sites.sh for the second cut of sites (doc/SITES.md), chosen
# by BENCH_PART (bench/sites.sh passes them here):
#   version  a site holding an image asks for a newer version with 2% of its source
#            changed (one run of bytes at a random place): the bytes it fetches upstream
#            against the whole image's, and the fetch's time against a whole fetch's;
#   scale    2 sites x 8 clients (multicast inside each site from its site master) against
#            one master serving all 16 clients by unicast: frisbee has no unicast mode,
#            so each client fetches the image over TCP from the parent as a site master
#            does (bench/sitefetch.c) and restores it with imageunzip; the time until
#            all 16 targets are written, and the bytes the parent sent;
#   report   1,000 simulated nodes (bench/labsim.c) over 4 sites, each site master
#            reporting its 250 to the parent: the parent's CPU and memory.
# Links: the router's ports into the sites shaped to BENCH_LINK Mbit/s (default 100).
# Usage: BENCH_PART=version|scale|report bench/sites.sh BUILD [REPS] (root; env
# BENCH_MIB (default 32), BENCH_LINK, BENCH_SECS (report: the CPU window, default 20))
set -u
. "$(dirname "$0")/netbench.sh"
. "$NDZ_TOP/tests/sitesnet.sh"
MIB=${BENCH_MIB:-32}
LINK=${BENCH_LINK:-100}
SECS=${BENCH_SECS:-20}
PART=${BENCH_PART:-version}
HZ=$(getconf CLK_TCK)
LIBS=$(sed -n 's/^LIBS = //p' "$NDZ_TOP/Makefile")
bench_out ndzsites2
mkdir -p "$T/par" "$T/run0"
# max-pending: the unicast part's 16 clients connect at once
printf 'imagedir %s allow 10.78.0.0/16\nmax-pending 64\nmax-pending-host 8\n' "$T/par" >"$T/par.conf"

# build PROG: bench/PROG.c against the build, as $T/PROG
build() {
	# shellcheck disable=SC2086
	cc -O2 -std=gnu11 -Wall -Wextra -D_GNU_SOURCE -I"$NDZ_TOP/lib" -I"$NDZ_TOP/fs" -pthread \
		-o "$T/$1" "$NDZ_TOP/bench/$1.c" "$NDZ_BUILD/libndz.a" $LIBS ||
		{ echo "bench: $1 does not build against $NDZ_BUILD" >&2; exit 1; }
}
# master NS CONF RUN: mfrisbeed in NS (log $T/NS.log), its pid in MPID_NS, listening
master() {
	mkdir -p "$3"
	ip netns exec "$NETNS_PFX$1" "$NDZ_BIN/mfrisbeed" -c "$2" -r "$3" -v 2>"$T/$1.log" &
	eval "MPID_$1=$!"
	at_exit "kill $! 2>/dev/null"
	wait_until 10 sh -c "ip netns exec '$NETNS_PFX$1' ss -lun | grep -q ':3563 '" ||
		{ echo "bench: the master in $1 does not start:" >&2; cat "$T/$1.log" >&2; return 1; }
}
# site S: site S's master (cache $T/cacheS), reporting as siteS
site() {
	mkdir -p "$T/cache$1"
	cat >"$T/site$1.conf" <<CONF
pool 239.192.$((60 + $1)).0/29
ports 5000-5007
idle-timeout 1
rate 500M
imagedir $T/cache$1 allow 10.78.$1.0/24
parent $PARENT
site-cache $T/cache$1
site-allow 10.78.$1.0/24
site-name site$1
${2:-}
CONF
	master "m$1" "$T/site$1.conf" "$T/run$1"
}
shape() {
	for s in $(seq "$1"); do
		ip netns exec "${NETNS_PFX}rt" tc qdisc replace dev "eth$s" root tbf rate "${LINK}mbit" \
			burst 64k latency 100ms || exit 1
	done
}
tx() { in_ns "$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }
# fetched SITE NAME: the "site: NAME fetched: ..." line of site SITE's log, once there
fetched() {
	wait_until 120 grep -q "site: $2 fetched:" "$T/m$1.log"
	grep "site: $2 fetched:" "$T/m$1.log"
}

version_part() {
	sites_net 1 && shape 1 || exit 1
	bench_image || exit 1
	IMGB=$(stat -c %s "$T/img.ndz")
	ln "$T/img.ndz" "$T/par/v0.ndz" && ln "$T/img.ndz.index" "$T/par/v0.ndz.index" || exit 1
	srcb=$(stat -c %s "$T/src")
	run=$((srcb / 50))
	k=1; while [ $k -le "$REPS" ]; do
		cp "$T/src" "$T/v.src"
		at=$(( $(od -An -tu4 -N4 /dev/urandom) % ((srcb - run) / 4096) * 4096 ))
		head -c "$run" /dev/urandom | dd of="$T/v.src" bs=4096 seek=$((at / 4096)) conv=notrunc \
			2>/dev/null
		"$IMAGEZIP" -q -r "$T/v.src" "$T/par/v$k.ndz" || exit 1
		cp "$T/v.src" "$T/v$k.src"
		k=$((k + 1))
	done
	master par "$T/par.conf" "$T/run0" && site 1 || exit 1
	echo "# image: $((IMGB / 1048576)) chunks ($IMGB bytes, unsigned); a new version: $run bytes (2% of the source) made other at a random place; parent-site link ${LINK} Mbit/s; $(nproc) cores; $REPS runs"
	: >"$T/whole"; : >"$T/vbytes"; : >"$T/vtime"; : >"$T/vchunks"; : >"$T/wire"
	in_ns c11 "$FRISBEE" -q -M 10.78.1.1 -I v0 -T 120 "$OUT/t" 2>>"$T/c.log" ||
		echo "v0: frisbee failed" >&2
	line=$(fetched 1 v0)
	echo "$line" | sed -n 's/.*, in \([0-9.]*\) s;.*/\1/p' >>"$T/whole"
	k=1; while [ $k -le "$REPS" ]; do
		tx0=$(tx rt eth1)
		in_ns c11 "$FRISBEE" -q -M 10.78.1.1 -I "v$k" -T 120 "$OUT/t" 2>>"$T/c.log" ||
			echo "v$k: frisbee failed" >&2
		cmp -s "$OUT/t" "$T/v$k.src" || echo "v$k: the target differs" >&2
		line=$(fetched 1 "v$k")
		tx1=$(tx rt eth1)
		ixb=$(stat -c %s "$T/par/v$k.ndz.index")
		echo "$line" | sed -n 's/.* chunks; \([0-9]*\) chunks, .*/\1/p' >>"$T/vchunks"
		b=$(echo "$line" | sed -n 's/.* chunks, \([0-9]*\) bytes from the parent.*/\1/p')
		echo "($b + $ixb) / $IMGB" | bc -l >>"$T/vbytes"
		echo "($tx1 - $tx0) / $IMGB" | bc -l >>"$T/wire"
		echo "$line" | sed -n 's/.*, in \([0-9.]*\) s;.*/\1/p' >>"$T/vtime"
		echo "run $k: $line" | sed 's/^\(run [0-9]*: \).*site: /\1/'
		k=$((k + 1))
	done
	printf 'new version, fetched upstream (chunks + index): median x%.4f of the image (%s of %d chunks; the whole image: x1.0000 + index)\n' \
		"$(median <"$T/vbytes")" "$(median <"$T/vchunks")" $((IMGB / 1048576))
	printf 'new version, bytes into the site network (TCP/IP included): median x%.4f of the image\n' \
		"$(median <"$T/wire")"
	printf 'fetch at the site: new version median %.2f s; the whole image (v0, once) %.2f s\n' \
		"$(median <"$T/vtime")" "$(cat "$T/whole")"
}

scale_part() {
	sites_net 2 && shape 2 || exit 1
	for s in 1 2; do
		for c in 4 5 6 7 8; do
			host "c$s$c" "$s" "1$c" || exit 1
		done
	done
	build sitefetch
	# each run an image of its own bytes: a site reuses the chunks of images it holds
	k=1; while [ $k -le "$REPS" ]; do
		bench_image && mv "$T/src" "$T/src$k" &&
			ln "$T/img.ndz" "$T/par/s$k.ndz" && ln "$T/img.ndz.index" "$T/par/s$k.ndz.index" &&
			mv "$T/img.ndz" "$T/par/u$k.ndz" && mv "$T/img.ndz.index" "$T/par/u$k.ndz.index" ||
			exit 1
		k=$((k + 1))
	done
	IMGB=$(stat -c %s "$T/par/s1.ndz")
	master par "$T/par.conf" "$T/run0" && site 1 && site 2 || exit 1
	echo "# image: $((IMGB / 1048576)) chunks ($IMGB bytes, unsigned, random data); router ports into the sites ${LINK} Mbit/s each; 8 clients a site; $(nproc) cores; $REPS runs"
	: >"$T/st"; : >"$T/sb"; : >"$T/ut"; : >"$T/ub"
	k=1; while [ $k -le "$REPS" ]; do
		# sites: the 16 clients ask their site masters at once
		rm -f "$OUT"/t*
		b0=$(tx par eth0)
		t0=$(now)
		pids=""
		for s in 1 2; do
			for c in 1 2 3 4 5 6 7 8; do
				in_ns "c$s$c" "$FRISBEE" -q -M "10.78.$s.1" -I "s$k" -T 300 "$OUT/t$s$c" \
					2>>"$T/c.log" &
				pids="$pids $!"
			done
		done
		bad=0
		for p in $pids; do wait "$p" || bad=$((bad + 1)); done
		t1=$(now)
		b1=$(tx par eth0)
		for f in "$OUT"/t*; do cmp -s "$f" "$T/src$k" || bad=$((bad + 1)); done
		[ $bad = 0 ] || echo "run $k, sites: $bad clients failed or differ" >&2
		echo "$t1 - $t0" | bc -l >>"$T/st"
		echo "($b1 - $b0) / $IMGB" | bc -l >>"$T/sb"
		rm -f "$OUT"/t*
		# unicast: the 16 clients fetch from the parent, each its own copy, then restore
		b0=$(tx par eth0)
		t0=$(now)
		pids=""
		for s in 1 2; do
			for c in 1 2 3 4 5 6 7 8; do
				in_ns "c$s$c" sh -c "'$T/sitefetch' $PARENT u$k '$OUT/i$s$c' >/dev/null &&
					'$IMAGEUNZIP' -q '$OUT/i$s$c' '$OUT/t$s$c' && rm -f '$OUT/i$s$c'" \
					2>>"$T/c.log" &
				pids="$pids $!"
			done
		done
		bad=0
		for p in $pids; do wait "$p" || bad=$((bad + 1)); done
		t1=$(now)
		b1=$(tx par eth0)
		for f in "$OUT"/t*; do cmp -s "$f" "$T/src$k" || bad=$((bad + 1)); done
		[ $bad = 0 ] || echo "run $k, unicast: $bad clients failed or differ" >&2
		echo "$t1 - $t0" | bc -l >>"$T/ut"
		echo "($b1 - $b0) / $IMGB" | bc -l >>"$T/ub"
		echo "run $k: sites $(tail -1 "$T/st" | cut -c1-6) s, unicast $(tail -1 "$T/ut" | cut -c1-6) s"
		k=$((k + 1))
		sleep 2
	done
	st=$(median <"$T/st") ut=$(median <"$T/ut")
	printf '2 sites x 8 clients (site masters, multicast in each site): median %.2f s until all 16 targets written; the parent sent x%.3f of the image\n' \
		"$st" "$(median <"$T/sb")"
	printf 'one master, 16 clients by unicast (TCP chunk fetch + imageunzip): median %.2f s; the parent sent x%.3f of the image\n' \
		"$ut" "$(median <"$T/ub")"
	printf 'unicast / sites: time x%.2f, upstream bytes x%.2f\n' "$(echo "$ut / $st" | bc -l)" \
		"$(echo "$(median <"$T/ub") / $(median <"$T/sb")" | bc -l)"
}

report_part() {
	NODES=250
	sites_net 4 || exit 1
	build labsim
	: >"$T/lab.ndz"
	: >"$T/par/lab.ndz"            # a parent needs an image of its own
	master par "$T/par.conf" "$T/run0" || exit 1
	for s in 1 2 3 4; do
		# the simulated nodes share one address: no per-host limit
		site "$s" "image lab $T/lab.ndz allow 10.78.$s.0/24
node-timeout 60
lab-host-rate 100000
lab-host-burst 100000" || exit 1
	done
	for s in 1 2 3 4; do
		k=1
		while [ $k -le $NODES ]; do
			printf 'nodes add 52:54:00:0%d:%02x:%02x n%d-%d sim\n' "$s" $((k >> 8)) $((k & 255)) "$s" "$k"
			k=$((k + 1))
		done >"$T/add$s"
		while read -r a b c d e; do
			"$NDZ_BIN/ndzctl" -q -m "$T/run$s/admin" "$a" "$b" "$c" "$d" "$e" || exit 1
		done <"$T/add$s"
	done
	cpu() { awk '{ print $14 + $15 }' "/proc/$MPID_par/stat"; }
	kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$MPID_par/status"; }
	listed() {
		[ "$("$NDZ_BIN/ndzctl" -m "$T/run0/admin" nodes list 2>/dev/null | grep -c '^site[1-4] ')" = 1000 ]
	}
	wait_until 30 listed || echo "bench: the parent does not list the 1000 nodes" >&2
	echo "# 4 sites x $NODES simulated nodes (labsim, a report each a second per node), each site master reporting to the parent at once on a change and every 2 s; CPU window ${SECS} s; $(nproc) cores; $REPS runs"
	# window FILE: the parent's CPU (ms a s) over SECS s into FILE.cpu, RSS into FILE.rss
	window() {
		_c0=$(cpu) _t0=$(now)
		sleep "$SECS"
		_c1=$(cpu) _t1=$(now)
		echo "($_c1 - $_c0) * 1000 / $HZ / ($_t1 - $_t0)" | bc -l >>"$1.cpu"
		kib VmRSS >>"$1.rss"
	}
	window "$T/idle"
	k=1; while [ $k -le "$REPS" ]; do
		pids=""
		for s in 1 2 3 4; do
			"$NDZ_BIN/ndzctl" -q -m "$T/run$s/admin" reload sim lab >/dev/null || exit 1
			in_ns "c${s}1" "$T/labsim" "10.78.$s.1" "52:54:00:0$s" $NODES $((SECS + 10)) \
				>"$T/sim$s.out" 2>"$T/sim$s.err" &
			pids="$pids $!"
		done
		sleep 5
		window "$T/busy"
		for p in $pids; do wait "$p" || echo "run $k: labsim: some calls failed" >&2; done
		echo "run $k: parent CPU $(tail -1 "$T/busy.cpu" | cut -c1-6) ms/s, RSS $(tail -1 "$T/busy.rss") KiB"
		k=$((k + 1))
		sleep 3
	done
	listed || echo "bench: the parent's list is not 1000 nodes after the runs" >&2
	printf 'parent, 4 sites x %d nodes known, no task: CPU %.2f ms a second (%.2f%% of a core), RSS %s KiB\n' \
		$NODES "$(cat "$T/idle.cpu")" "$(echo "$(cat "$T/idle.cpu") / 10" | bc -l)" "$(cat "$T/idle.rss")"
	printf 'parent, 1000 nodes reloading (each reporting once a second to its site): CPU median %.2f ms a second (%.2f%% of a core), RSS median %s KiB, VmHWM %s KiB\n' \
		"$(median <"$T/busy.cpu")" "$(echo "$(median <"$T/busy.cpu") / 10" | bc -l)" \
		"$(median <"$T/busy.rss")" "$(kib VmHWM)"
	sed 's/^/labsim site 1: /' "$T/sim1.out" | tail -4
}

case $PART in
version) version_part ;;
scale) scale_part ;;
report) report_part ;;
*) echo "bench: BENCH_PART: version, scale or report" >&2; exit 2 ;;
esac
[ -n "${BENCH_KEEP:-}" ] && cp "$T"/*.log "$BENCH_KEEP"/
exit 0
