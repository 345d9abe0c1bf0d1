#!/bin/sh
# The image master and a session at the end of its idle timeout: a GET answered with
# a session makes it stay for the client (HOLD); one that is ending is replaced by a
# new session at once, not named to a client that would then wait its whole -T.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require
MFRISBEED="$NDZ_BIN/mfrisbeed"
CTLASK="$NDZ_BUILD/tests/helpers/ctlask"
FAKESESS="$NDZ_BUILD/tests/helpers/fakesess"
SRV=10.77.0.1
netns_clients 1
mkdir -p "$T/run" "$T/run-fake"
mc_image a "$(( MC_MIB / 4 + 1 ))" a || { not_ok "make image a"; done_testing; }

cat >"$T/m.conf" <<CONF
pool 239.192.4.0/29
ports 5100-5107
idle-timeout 4
rate $MC_RATE
image a $T/a.ndz allow 10.77.0.0/27
CONF

# master NAME PORT [OPTIONS...]: mfrisbeed in srv on PORT; its pid in MPID
master() {
	_m=$1 _p=$2; shift 2
	ip netns exec "${NETNS_PFX}srv" "$MFRISBEED" -c "$T/m.conf" -l "0.0.0.0:$_p" "$@" \
		2>>"$T/$_m.log" &
	MPID=$!
	wait_until 5 sh -c "ip netns exec '${NETNS_PFX}srv' ss -lun | grep -q ':$_p '"
}
# pids JSON: the sessions' frisbeed pids, in one line
pids() { grep -o '"pid": [0-9]*' "$1" | tr -dc '0-9\n' | paste -sd' '; }

# 1. A session asked to hold stays its idle timeout (4 s) from the GET. Each round:
# the last client has left (the session's idle clock runs from there); 3 s later a
# GET names the session; 2.5 s after the GET (5.5 s after the last packet: without
# the hold it would have left at 4 s) a client joins it directly: it must be there.
master m 3563 -r "$T/run" -v
in_ns c1 "$FRISBEE" $MC_RAW -M "$SRV" -I a -T 10 "$T/out0" 2>>"$T/c1.log"; rc=$?
check "the first client starts the session: exit 0, byte-identical" \
	sh -c "[ $rc = 0 ] && cmp -s '$T/a.src' '$T/out0'"
in_ns c1 "$MFRISBEED" --status "$SRV" >"$T/st0.json"
first=$(pids "$T/st0.json")
good=0
for r in 1 2 3; do
	sleep 3
	ans=$(in_ns c1 "$CTLASK" "$SRV" 3563 a)
	grp=$(echo "$ans" | cut -d' ' -f2) port=$(echo "$ans" | cut -d' ' -f3)
	sleep 2.5
	in_ns c1 "$FRISBEE" $MC_RAW -m "$grp" -p "$port" -T 10 "$T/out$r" 2>>"$T/c1.log"; rc=$?
	[ "$rc" = 0 ] && cmp -s "$T/a.src" "$T/out$r" && good=$((good + 1))
	echo "# round $r: GET '$ans', client exit $rc" >&2
done
check "three clients joining 2.5 s after the GET (5.5 s after the session's last packet, idle timeout 4 s): 3 byte-identical ($good)" \
	[ "$good" = 3 ]
in_ns c1 "$MFRISBEED" --status "$SRV" >"$T/st1.json"
check "... all from the one session the first client started (pids '$first', now '$(pids "$T/st1.json")')" \
	sh -c "[ -n '$first' ] && [ '$(pids "$T/st1.json")' = '$first' ] && grep -q '\"sessions_started\": 1,' '$T/st1.json'"
kill -TERM "$MPID"; wait "$MPID"

# 2. A session that answers it is ending (a stand-in that says so to its first HOLD,
# then exits, as a frisbeed that has just decided to leave idle): the master ends it
# and starts a new one for the GET, on the address that has come free.
master f 3600 -r "$T/run-fake" -F "$FAKESESS" -v
a1=$(in_ns c1 "$CTLASK" "$SRV" 3600 a)
in_ns c1 "$MFRISBEED" --status "$SRV:3600" >"$T/f1.json"
a2=$(in_ns c1 "$CTLASK" "$SRV" 3600 a)
in_ns c1 "$MFRISBEED" --status "$SRV:3600" >"$T/f2.json"
p1=$(pids "$T/f1.json") p2=$(pids "$T/f2.json")
check "a GET starts a session ($a1, pid $p1)" sh -c "echo '$a1' | grep -q '^ok 239.192.4.0 5100 ' && [ -n '$p1' ]"
check "the next GET, the session ending: a new session, at once, on the freed address ($a2, pid $p2)" \
	sh -c "[ '$a2' = '$a1' ] && [ -n '$p2' ] && [ '$p2' != '$p1' ] &&
	       grep -q '\"sessions_started\": 2, \"sessions_ended\": 1,' '$T/f2.json'"
check "... and the master says so" grep -q "session of a: frisbeed $p1 has ended; a new one for the request$" "$T/f.log"
kill -TERM "$MPID"; wait "$MPID"
[ "$_failed" = 0 ] || sed "s/^/# /" "$T/f.log" "$T/m.log" >&2
done_testing
