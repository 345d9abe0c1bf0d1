#!/bin/sh
# frisbeed and frisbee under valgrind in a namespace LAN: no leaks or invalid accesses,
# on success (a restore under 2% loss) and on failure (the server gone, a bad image).
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
[ "$NDZ_SANITIZED" = 1 ] && skip_all "valgrind runs on the plain build only"
command -v valgrind >/dev/null || skip_all "valgrind not installed"
netns_usable || skip_all "network namespaces, veth, bridge or nft unavailable (needs root)"
VG="valgrind -q --leak-check=full --show-leak-kinds=definite,indirect,possible
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99"
netns_lan && netns_host srv 1 || { not_ok "namespace LAN"; done_testing; }
for i in 1 2; do netns_host "c$i" $((10 + i)) || not_ok "host c$i"; done
mc_image a 4 8 || { not_ok "make image"; done_testing; }
netns_loss c2 2

# shellcheck disable=SC2086
ip netns exec "${NETNS_PFX}srv" $VG "$FRISBEED" -m "$MC_GROUP" -p "$MC_PORT" -W 40M -T 30 \
	--stats-json "$T/stats.json" "$T/a.ndz" 2>"$T/srv.log" &
spid=$!
sleep 2
for i in 1 2; do
	# shellcheck disable=SC2086
	( in_ns "c$i" $VG "$FRISBEE" $MC_RAW -m "$MC_GROUP" -p "$MC_PORT" -T 30 -z "$T/out$i" \
		2>"$T/c$i.log"; echo $? >"$T/c$i.rc" ) &
done
while [ ! -f "$T/c1.rc" ] || [ ! -f "$T/c2.rc" ]; do sleep 0.2; done
kill -TERM "$spid"; wait "$spid"; src=$?
for i in 1 2; do
	check "frisbee $i under valgrind: exit 0, target correct" \
		sh -c "[ \"$(cat "$T/c$i.rc")\" = 0 ] && cmp -s '$T/a.src' '$T/out$i'"
	grep -q '==[0-9]*==' "$T/c$i.log" && sed 's/^/# /' "$T/c$i.log" | head -20
done
check "frisbeed under valgrind: exit 0 after SIGTERM" [ "$src" = 0 ]
grep -q '==[0-9]*==' "$T/srv.log" && sed 's/^/# /' "$T/srv.log" | head -20

# failure paths: nobody answers; a bad image
# shellcheck disable=SC2086
in_ns c1 $VG "$FRISBEE" -m "$MC_GROUP" -p "$MC_PORT" -T 1 "$T/none" 2>"$T/none.log"
check "frisbee under valgrind, no server: exit 1 (not 99)" [ $? = 1 ]
head -c 1048576 /dev/urandom >"$T/junk"
# shellcheck disable=SC2086
$VG "$FRISBEED" "$T/junk" 2>"$T/junk.log"
check "frisbeed under valgrind, not an image: exit 1 (not 99)" [ $? = 1 ]
done_testing
