#!/bin/sh
# Demo: IMAGE served by frisbeed to three frisbee clients in a private namespace LAN,
# each restored target compared with SOURCE. Usage: demo-multicast.sh BUILD IMAGE SOURCE
# (needs root for the namespaces; prints what it does; exit 0 when all three match).
set -u
[ $# = 3 ] || { echo "usage: $0 BUILD IMAGE SOURCE" >&2; exit 2; }
NDZ_TOP=$(cd "$(dirname "$0")/.." && pwd)
NDZ_BUILD=$(cd "$1" && pwd)
NDZ_BIN="$NDZ_BUILD/bin"
img=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
src=$(cd "$(dirname "$3")" && pwd)/$(basename "$3")
export NDZ_TOP NDZ_BIN NDZ_BUILD
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
if ! netns_usable; then
	echo "demo-multicast: skipped (needs root, network namespaces and nftables)"
	exit 0
fi
netns_lan && netns_host server 1 || { echo "demo-multicast: cannot make the LAN" >&2; exit 1; }
for i in 1 2 3; do netns_host "client$i" $((10 + i)) || exit 1; done
netns_loss client3 2
echo "== multicast: $(basename "$img") ($(( $(stat -c %s "$img") / 1048576 )) chunks)" \
	"served on $MC_GROUP:$MC_PORT to 3 clients in namespaces; client3 loses 2% of packets"
# the clients wait for the server; its announcement starts them together
mc_client client1 "$T/target1" -T 10
mc_client client2 "$T/target2" -T 10
mc_client client3 "$T/target3" -T 10
sleep 0.3
mc_server server "$img" -W 200M -T 30 -v --stats-json "$T/stats.json"
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
fail=0
for i in 1 2 3; do
	sed -n 's/^frisbee: /   client'$i': /p' "$T/client$i.log"
	if [ "$(mc_rc "client$i")" = 0 ] && cmp -s "$src" "$T/target$i"; then
		echo "   client$i: target identical to $(basename "$src")"
	else
		echo "   client$i: FAILED (exit $(mc_rc "client$i"))"; fail=1
		sed 's/^/     | /' "$T/client$i.log"
	fi
done
sed -n 's/^frisbeed: \([0-9]* clients\)/   server: \1/p' "$T/server.log"
exit $fail
