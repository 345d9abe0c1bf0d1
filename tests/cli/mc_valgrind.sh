#!/bin/sh
# frisbeed, frisbee and mfrisbeed under valgrind in a namespace LAN: no leaks or invalid
# accesses, on success (a restore under 2% loss; a load through the master) and on
# failure (the server gone, a bad image, a refusal, a broken configuration).
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
[ "$NDZ_SANITIZED" = 1 ] && skip_all "valgrind runs on the plain build only"
command -v valgrind >/dev/null || skip_all "valgrind not installed"
netns_require
VG="valgrind -q --leak-check=full --show-leak-kinds=definite,indirect,possible
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99"
netns_clients 2
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

# the master: a session started for a client, status, refusals, SIGHUP, SIGTERM
netns_noloss c2
printf 'pool 239.192.9.0/30\nidle-timeout 2\nimage a %s allow 10.77.0.0/24\n' "$T/a.ndz" >"$T/m.conf"
# shellcheck disable=SC2086
ip netns exec "${NETNS_PFX}srv" $VG "$NDZ_BIN/mfrisbeed" -c "$T/m.conf" -r "$T/run" -v \
	2>"$T/master.log" &
mpid=$!
sleep 2
# shellcheck disable=SC2086
in_ns c1 $VG "$FRISBEE" $MC_RAW -M 10.77.0.1 -I a -T 30 "$T/outm" 2>"$T/cm.log"
check "frisbee -M under valgrind: exit 0, target correct" \
	sh -c "[ $? = 0 ] && cmp -s '$T/a.src' '$T/outm'"
grep -q '==[0-9]*==' "$T/cm.log" && sed 's/^/# /' "$T/cm.log" | head -20
# shellcheck disable=SC2086
in_ns c2 $VG "$FRISBEE" -M 10.77.0.1 -I nope "$T/x" 2>"$T/cn.log"
check "frisbee -M under valgrind, unknown image: exit 1 (not 99)" [ $? = 1 ]
# shellcheck disable=SC2086
in_ns c2 $VG "$NDZ_BIN/mfrisbeed" --status 10.77.0.1 >"$T/st.json" 2>"$T/cs.log"
check "mfrisbeed --status under valgrind: exit 0, one session started" \
	sh -c "[ $? = 0 ] && grep -q '\"sessions_started\": 1,' '$T/st.json'"
echo "bogus" >>"$T/m.conf"
kill -HUP "$mpid"; sleep 1
kill -TERM "$mpid"; wait "$mpid"; mrc=$?
check "mfrisbeed under valgrind: broken reload reported, exit 0 after SIGTERM ($mrc)" \
	sh -c "[ $mrc = 0 ] && grep -q 'm.conf:4: unknown keyword .bogus.; keeping the old configuration' '$T/master.log'"
grep -q '==[0-9]*==' "$T/master.log" && sed 's/^/# /' "$T/master.log" | head -20
# shellcheck disable=SC2086
$VG "$NDZ_BIN/mfrisbeed" -c "$T/m.conf" -r "$T/run" 2>"$T/mbad.log"
check "mfrisbeed under valgrind, bad configuration: exit 1 (not 99)" [ $? = 1 ]
done_testing
