#!/bin/sh
# Restores against the disk they write to: imageunzip, and frisbee fed by a frisbeed
# on this host, each writing a zlib and a zstd image of 1 GiB of this machine's
# binaries and text to a new file, fsync included, beside dd conv=fdatasync of the
# same bytes to the same file system, in one run. Reports medians of RUNS runs:
# seconds, the ratio dd time / restore time (1.0 = the disk's speed), and CPU seconds
# (user+sys, from /usr/bin/time) per restored GiB (frisbee's own; frisbeed's CPU
# seconds per GiB are reported in a column of their own).
# frisbeed and frisbee talk over a veth pair between two network namespaces (NET=veth,
# root): a LAN that is no slower than the programs. NET=loop is the old setup, one
# frisbeed -L and the client in this namespace: the datagrams then also leave by this
# host's own interface, whose speed (a VM's virtio NIC here: a few hundred Mbit/s and a
# VM exit per send) becomes the restore's.
# Usage: bench/restore.sh [BUILD_DIR] (env: RUNS=3, SIZE_MB=1024, BENCH_DIR=/var/tmp
#        (where the target is written), FRISBEE=1 (0: imageunzip only), RATE=10G
#        (frisbeed -W; 10G: uncapped here), NET=veth|loop; BUILD_DIR may be absolute)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
case ${1:-build} in
/*) bin="$1/bin" ;;
*) bin="$top/${1:-build}/bin" ;;
esac
runs=${RUNS:-3}
size_mb=${SIZE_MB:-1024}
frisbee=${FRISBEE:-1}
rate=${RATE:-10G}
net=${NET:-veth}
dir=$(mktemp -d "${BENCH_DIR:-/var/tmp}/ndz-restore.XXXXXX")
srv=
ns=ndz$(($$ % 10000))
sns= cns=
cleanup() {
	[ -z "$srv" ] || kill "$srv" 2>/dev/null
	rm -rf "$dir"
	if [ "$net" = veth ]; then
		ip netns del "$ns-rs" 2>/dev/null
		ip netns del "$ns-rc" 2>/dev/null
	fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM
if [ "$frisbee" != 0 ] && [ "$net" = veth ]; then
	# two namespaces, one veth pair, multicast routed onto it
	ip netns add "$ns-rs" && ip netns add "$ns-rc" &&
	ip link add "${ns}v0" netns "$ns-rs" type veth peer name "${ns}v1" netns "$ns-rc" &&
	ip -n "$ns-rs" addr add 10.201.0.1/24 dev "${ns}v0" &&
	ip -n "$ns-rc" addr add 10.201.0.2/24 dev "${ns}v1" &&
	ip -n "$ns-rs" link set "${ns}v0" up && ip -n "$ns-rc" link set "${ns}v1" up &&
	ip -n "$ns-rs" route add 224.0.0.0/4 dev "${ns}v0" &&
	ip -n "$ns-rc" route add 224.0.0.0/4 dev "${ns}v1" ||
		{ echo "bench: cannot make the namespaces (root?)" >&2; exit 1; }
	sns="ip netns exec $ns-rs" cns="ip netns exec $ns-rc"
	loop=
else
	loop=-L
fi
. "$top/bench/common.sh"
load0=$(cut -d" " -f1-3 /proc/loadavg)

make_input
"$bin/imagezip" -q -r --codec zlib "$dir/in" "$dir/zlib.ndz"
"$bin/imagezip" -q -r --codec zstd "$dir/in" "$dir/zstd.ndz"
echo "images: zlib $(stat -c %s "$dir/zlib.ndz") bytes, zstd $(stat -c %s "$dir/zstd.ndz") bytes"
echo "target: a new file in $(df -P "$dir" | awk 'NR == 2 { print $1 " on " $6 }')"
[ "$frisbee" = 0 ] || echo "frisbee: NET=$net, frisbeed -W $rate"
group="239.$(($$ % 200 + 20)).$(($$ >> 8 & 255)).$(($$ % 250 + 1))"
port=$((3564 + $$ % 20000))

# one NAME CMD: CMD writes $dir/target from scratch; appends "wall cpu" to $dir/NAME.r
one() {
	name=$1
	shift
	rm -f "$dir/target"
	sync
	/usr/bin/time -f "%e %U %S" -o "$dir/time" sh -c "$*"
	awk '{ print $1, $2 + $3 }' "$dir/time" >>"$dir/$name.r"
}
# serve IMAGE: a frisbeed for it in the background (srv: its pid)
serve() {
	$sns "$bin/frisbeed" -q $loop -m "$group" -p "$port" -W "$rate" -T 0 "$1" &
	srv=$!
	sleep 0.3
}
# unserve NAME: stop it, appending its CPU seconds to $dir/NAME.s
unserve() {
	awk '{ print ($14 + $15) / 100 }' "/proc/$srv/stat" >>"$dir/$1.s"
	kill "$srv"
	wait "$srv" 2>/dev/null || true
	srv=
}
check_target() {
	cmp -s "$dir/in" "$dir/target" || { echo "bench: $1 restored wrong bytes" >&2; exit 1; }
}

cat "$dir/in" "$dir/zlib.ndz" "$dir/zstd.ndz" >/dev/null   # inputs come from the page cache
mb=$((bytes / 1048576))
methods="dd unzip-zlib unzip-zstd"
[ "$frisbee" = 0 ] || methods="$methods frisbee-zlib frisbee-zstd"
i=0
while [ $i -lt "$runs" ]; do
	one dd "dd if='$dir/in' of='$dir/target' bs=1M count=$mb conv=fdatasync status=none"
	for c in zlib zstd; do
		one "unzip-$c" "'$bin/imageunzip' -q '$dir/$c.ndz' '$dir/target'"
		[ $i -gt 0 ] || check_target "imageunzip $c"
		if [ "$frisbee" != 0 ]; then
			serve "$dir/$c.ndz"
			one "frisbee-$c" "$cns timeout 300 '$bin/frisbee' -q -m $group -p $port '$dir/target'"
			unserve "frisbee-$c"
			[ $i -gt 0 ] || check_target "frisbee $c"
		fi
	done
	i=$((i + 1))
done
rm -f "$dir/target"

med() { cut -d' ' -f"$2" "$dir/$1.r" | median; }
dd_s=$(med dd 1)
gib=$(echo "$bytes / 1073741824" | bc -l)
echo
echo "== restore of $bytes bytes with fsync, median of $runs runs; load before: $load0"
printf '%-14s %8s %9s %10s %12s %12s\n' method seconds MB/s "dd/method" "CPU s/GiB" \
	"server s/GiB"
for m in $methods; do
	s=$(med "$m" 1)
	cpu=$(med "$m" 2)
	sv=-
	[ -f "$dir/$m.s" ] && sv=$(printf '%.2f' "$(echo "$(median <"$dir/$m.s") / $gib" | bc -l)")
	printf '%-14s %8.2f %9.1f %10.2f %12.2f %12s\n' "$m" "$s" "$(mbs "$s")" \
		"$(echo "$dd_s / $s" | bc -l)" "$(echo "$cpu / $gib" | bc -l)" "$sv"
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
