#!/bin/sh
# Benchmark: a site master fetching images from its parent (doc/SITES.md), in the
# namespaces of tests/cli/sites.sh (a parent network, one site network, a router
# forwarding unicast only; the router's link to the site shaped to BENCH_LINK).
# Each run asks the site, from one client, for an image it does not hold (a new
# name and new random bytes each run), and reports:
# 1. bytes the site fetched upstream per image: the chunk bytes the site's log
#    counts plus the index and manifest, over the image file's size (goal <= 1.02);
#    and the bytes the router sent into the site network (TCP/IP headers included,
#    nothing else crosses it) over the image's size;
# 2. time from the client's ask (frisbee -M starting) to the first chunk written to
#    its target (goal <= 2 s for the first block; a chunk is 1024 blocks), with the
#    whole fetch's time beside it.
# Usage: bench/sites.sh BUILD [REPS]   (root; env BENCH_MIB (default 64), BENCH_LINK
# (Mbit/s, default 100)). BENCH_PART=version|scale|report: the parts of
# bench/sites-parts.sh instead (a new version's fetch, 2 sites x 8 clients against
# unicast, 1,000 simulated nodes reporting through 4 sites).
set -u
case ${BENCH_PART:-} in
"") ;;
*) exec sh "$(dirname "$0")/sites-parts.sh" "$@" ;;
esac
. "$(dirname "$0")/netbench.sh"
. "$NDZ_TOP/tests/sitesnet.sh"
MIB=${BENCH_MIB:-64}
LINK=${BENCH_LINK:-100}
sites_net 1 || exit 1
ip netns exec "${NETNS_PFX}rt" tc qdisc replace dev eth1 root tbf rate "${LINK}mbit" \
	burst 64k latency 100ms || exit 1
bench_out ndzsites
mkdir -p "$T/par" "$T/cache" "$T/run0" "$T/run1"
# each run an image of its own random bytes: a site reuses the chunks of images it
# holds (doc/SITES.md), so the same bytes under a new name would not be fetched
k=1; while [ $k -le "$REPS" ]; do
	bench_image && mv "$T/img.ndz" "$T/par/i$k.ndz" && mv "$T/img.ndz.index" "$T/par/i$k.ndz.index" &&
		mv "$T/src" "$T/src$k" || exit 1
	k=$((k + 1))
done
IMGB=$(stat -c %s "$T/par/i1.ndz")
IXB=$(stat -c %s "$T/par/i1.ndz.index")
echo "imagedir $T/par allow 10.78.0.0/16" >"$T/par.conf"
cat >"$T/site.conf" <<CONF
pool 239.192.61.0/29
ports 5000-5007
idle-timeout 1
rate 500M
imagedir $T/cache allow 10.78.1.0/24
parent 10.78.0.1
site-cache $T/cache
site-allow 10.78.1.0/24
CONF
ip netns exec "${NETNS_PFX}par" "$NDZ_BIN/mfrisbeed" -c "$T/par.conf" -r "$T/run0" -q 2>"$T/par.log" &
PPID_=$!
ip netns exec "${NETNS_PFX}m1" "$NDZ_BIN/mfrisbeed" -c "$T/site.conf" -r "$T/run1" -v 2>"$T/m1.log" &
SPID=$!
at_exit "kill $PPID_ $SPID"
for k in $(seq 30); do
	in_ns m1 ss -lun | grep -q ':3563 ' && in_ns par ss -lun | grep -q ':3563 ' && break
	sleep 0.1
done
echo "# image: $((IMGB / 1048576)) chunks ($IMGB bytes, index $IXB bytes, unsigned); parent-site link ${LINK} Mbit/s; $(nproc) cores; $REPS runs"
: >"$T/first"; : >"$T/ratio"; : >"$T/wire"; : >"$T/whole"
k=1; while [ $k -le "$REPS" ]; do
	rm -f "$OUT/f"
	tx0=$(in_ns rt cat /sys/class/net/eth1/statistics/tx_bytes)
	t0=$(now)
	in_ns c11 "$FRISBEE" -q -M 10.78.1.1 -I "i$k" -T 60 "$OUT/f" 2>>"$T/c.log" &
	p=$!
	while [ ! -s "$OUT/f" ] || [ "$(du -k "$OUT/f" | cut -f1)" = 0 ]; do
		kill -0 $p 2>/dev/null || break
		sleep 0.002
	done
	t1=$(now)
	wait $p || echo "run $k: frisbee failed" >&2
	cmp -s "$OUT/f" "$T/src$k" || echo "run $k: the target differs" >&2
	for w in $(seq 100); do grep -q "site: i$k fetched" "$T/m1.log" && break; sleep 0.1; done
	tx1=$(in_ns rt cat /sys/class/net/eth1/statistics/tx_bytes)
	line=$(grep "site: i$k fetched" "$T/m1.log")
	got=$(echo "$line" | sed -n 's/.* chunks, \([0-9]*\) bytes from the parent.*/\1/p')
	secs=$(echo "$line" | sed -n 's/.*, in \([0-9.]*\) s;.*/\1/p')
	echo "$t1 - $t0" | bc -l >>"$T/first"
	echo "($got + $IXB) / $IMGB" | bc -l >>"$T/ratio"
	echo "($tx1 - $tx0) / $IMGB" | bc -l >>"$T/wire"
	echo "$secs" >>"$T/whole"
	k=$((k + 1))
	sleep 1.5
done
printf 'fetched upstream per image (chunks + index, payload): median x%.4f, worst x%.4f of the image (goal <= 1.02)\n' \
	"$(median <"$T/ratio")" "$(sort -n "$T/ratio" | tail -1)"
printf 'bytes into the site network (TCP/IP included): median x%.4f of the image\n' "$(median <"$T/wire")"
printf 'ask to first chunk written at the client: median %.3f s, worst %.3f s (goal <= 2 s to the first block)\n' \
	"$(median <"$T/first")" "$(sort -n "$T/first" | tail -1)"
printf 'whole fetch at the site: median %.1f s (%.0f Mbit/s of chunk bytes)\n' \
	"$(median <"$T/whole")" "$(echo "$IMGB * 8 / $(median <"$T/whole") / 1000000" | bc -l)"
