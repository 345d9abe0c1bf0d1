#!/bin/sh
# The image master with sessions slow to answer (a stand-in frisbeed that answers
# STATUS, HOLD and RATE only after 10 s): the master asks them without its lock, so
# while /status.json waits on them a GET is still answered at once, and the status
# page itself waits about one question's time (1 s), not one per session. With the
# lock held across those waits (the master before lib/mserve) the GET waited for the
# whole status page, and the page for each slow session in turn.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require
command -v curl >/dev/null || skip_all "no curl"
MFRISBEED="$NDZ_BIN/mfrisbeed"
CTLASK="$NDZ_BUILD/tests/helpers/ctlask"
FAKESESS="$NDZ_BUILD/tests/helpers/fakesess"
MKFAKEIMG="$NDZ_BUILD/tests/helpers/mkfakeimg"
SRV=10.77.0.1 HP=8080 SLOW=10 BOUND_MS=2000
netns_clients 1
mkdir -p "$T/run"
for i in s1 s2 s3 s4 b; do
	"$MKFAKEIMG" "$T/$i.ndz" 2 "$i" || { not_ok "make image $i"; done_testing; }
done
{
	echo "pool 239.192.9.0/29"
	echo "ports 5500-5507"
	echo "idle-timeout 60"
	echo "http-listen 0.0.0.0:$HP"
	for i in s1 s2 s3 s4 b; do echo "image $i $T/$i.ndz allow 10.77.0.0/27"; done
} >"$T/m.conf"

NDZ_FAKESESS=slow:$SLOW ip netns exec "${NETNS_PFX}srv" "$MFRISBEED" -c "$T/m.conf" \
	-r "$T/run" -F "$FAKESESS" -v 2>>"$T/m.log" &
MPID=$!
wait_until 5 sh -c "ip netns exec '${NETNS_PFX}srv' ss -lun | grep -q ':3563 '" &&
	wait_until 5 sh -c "ip netns exec '${NETNS_PFX}srv' ss -ltn | grep -q ':$HP '" ||
	not_ok "the master listens"

ms() { echo $(( $(date +%s%N) / 1000000 )); }
# get NAME: ask for NAME from c1; prints "MS ANSWER", MS the milliseconds it took
get() { _t=$(ms); _a=$(in_ns c1 "$CTLASK" "$SRV" 3563 "$1"); echo "$(( $(ms) - _t )) $_a"; }

n=0
for i in s1 s2 s3 s4; do
	case $(get $i) in *" ok 239.192.9."*) n=$((n + 1)) ;; esac
done
check "four GETs start four sessions slow to answer ($n)" [ "$n" = 4 ]

# the status page, asked in the background: it waits on the four slow sessions
t0=$(ms)
( in_ns c1 curl -s -m 30 -o "$T/status.json" "http://$SRV:$HP/status.json"
  echo "$(( $(ms) - t0 ))" >"$T/status.ms" ) &
SPID=$!
sleep 0.3
g1=$(get b)
g2=$(get s1)
wait "$SPID"
sms=$(cat "$T/status.ms" 2>/dev/null || echo 99999)
echo "# GET b: $g1; GET s1 (asked to hold): $g2; /status.json: $sms ms" >&2
check "a GET for a new image while the status page waits on slow sessions: answered within $BOUND_MS ms ($g1)" \
	sh -c "echo '$g1' | grep -q ' ok 239.192.9.' && [ ${g1%% *} -lt $BOUND_MS ]"
check "a GET for a slow session (its HOLD unanswered: taken as held) within $BOUND_MS ms ($g2)" \
	sh -c "echo '$g2' | grep -q ' ok 239.192.9.' && [ ${g2%% *} -lt $BOUND_MS ]"
check "the status page with four sessions $SLOW s slow to answer: within $BOUND_MS ms ($sms ms)" \
	[ "$sms" -lt "$BOUND_MS" ]
check "... and whole: the sessions listed" \
	sh -c "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if len(d[\"sessions\"]) >= 4 else 1)' '$T/status.json'"

kill -TERM "$MPID"; wait "$MPID"; rc=$?
check "mfrisbeed exits 0 on SIGTERM ($rc)" [ "$rc" = 0 ]
check "the master's log has no sanitizer report" sh -c "! grep -q 'Sanitizer' '$T/m.log'"
[ "$_failed" = 0 ] || sed "s/^/# /" "$T/m.log" >&2
done_testing
