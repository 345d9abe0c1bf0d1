#!/bin/sh
# The image master: three images to six clients through on-demand sessions, refusals,
# a master killed mid-transfer and restarted, a request flood, configuration errors.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
# the master as a Unix tool (these need no network)
out=$("$NDZ_BIN/mfrisbeed" --help); rc=$?
check "mfrisbeed --help: exit 0, usage on stdout" sh -c "[ $rc = 0 ] && echo \"\$1\" | grep -q '^Usage: mfrisbeed'" _ "$out"
out=$("$NDZ_BIN/mfrisbeed" --version); rc=$?
check "mfrisbeed --version: exit 0, names the version" sh -c "[ $rc = 0 ] && echo \"\$1\" | grep -Eq '^mfrisbeed \(ndz\) [0-9]+\.'" _ "$out"
"$NDZ_BIN/mfrisbeed" --no-such-option 2>/dev/null; rc1=$?
"$NDZ_BIN/mfrisbeed" 2>"$T/err"; rc2=$?
check "mfrisbeed: unknown option or no -c: exit 2 ($rc1, $rc2)" \
	sh -c "[ $rc1 = 2 ] && [ $rc2 = 2 ] && grep -q '^mfrisbeed: -c CONFIG is required' '$T/err'"
netns_require
MFRISBEED="$NDZ_BIN/mfrisbeed"
CTLASK="$NDZ_BUILD/tests/helpers/ctlask"
SRV=10.77.0.1
netns_clients 6
netns_host far 99 || not_ok "host far"
netns_host stranger 200 || not_ok "host stranger"
MIB=$(( MC_MIB / 3 ))
mkdir -p "$T/dir" "$T/run"
for n in a b c slow; do
	mc_image "$n" "$MIB" "$n" || { not_ok "make image $n"; done_testing; }
done
mv "$T/c.ndz" "$T/dir/c.ndz"
[ -z "$MC_RAW" ] || ln -sf "$T/dir/c.ndz" "$T/c.src"

cat >"$T/m.conf" <<CONF
# the test's master: images for 10.77.0.0/27 only
pool 239.192.1.0/29
ports 5000-5007
max-sessions 3
idle-timeout 2
rate $MC_RATE
total-rate $(( ${MC_RATE%M} * 2 ))M
image a $T/a.ndz allow 10.77.0.0/27
image b $T/b.ndz allow 10.77.0.0/27,10.77.0.99/32
imagedir $T/dir allow 10.77.0.0/27
image slow $T/slow.ndz allow 10.77.0.0/27 rate 16M
image gone $T/gone.ndz allow 10.77.0.0/27
CONF

# master NAME CONF [OPTIONS...]: start mfrisbeed in srv; its pid in MPID
master() {
	_m=$1 _c=$2; shift 2
	ip netns exec "${NETNS_PFX}srv" "$MFRISBEED" -c "$_c" "$@" 2>>"$T/$_m.log" &
	MPID=$!
	for _k in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
		in_ns srv ss -lun 2>/dev/null | grep -q "${MPORT:-:3563} " && return 0
		sleep 0.1
	done
}
# status HOST [PORT]: the master's status JSON, asked from HOST
status() { in_ns "$1" "$MFRISBEED" --status "$SRV${2:+:$2}"; }
# nsessions JSON: how many sessions it lists
nsessions() { grep -o '"pid": ' "$1" | wc -l; }
# fclient HOST IMAGE TARGET [MASTER]: frisbee -M in the background
fclient() {
	_h=$1 _i=$2 _t=$3; shift 3
	( in_ns "$_h" "$FRISBEE" $MC_RAW -M "${1:-$SRV}" -I "$_i" -T 10 "$_t" \
		2>>"$T/$_h.log"; echo $? >"$T/$_h.rc" ) &
	MC_PIDS="$MC_PIDS $!"
}

master m "$T/m.conf" -r "$T/run" -v
t0=$(date +%s)
fclient c1 a "$T/out1"; fclient c2 a "$T/out2"
fclient c3 b "$T/out3"; fclient c4 b "$T/out4"
fclient c5 c "$T/out5"; fclient c6 c "$T/out6"
# the status while all three run, each with its two clients (read after the transfers,
# it lacked a session whose clients had finished 2 s before the others': its idle
# timeout)
three() {
	status c1 >"$T/st1.json" && [ "$(nsessions "$T/st1.json")" = 3 ] || return 1
	for _x in a b c; do
		grep -q "\"image\": \"$_x\", .*\"clients\": 2" "$T/st1.json" || return 1
	done
}
wait_until 60 three
mc_wait
good=0
for i in 1 2 3 4 5 6; do
	img=$(echo a a b b c c | cut -d' ' -f$i)
	[ "$(mc_rc "c$i")" = 0 ] && mc_same "$T/$img.src" "$T/out$i" && good=$((good + 1))
done
check "six clients, three images, all at once: 6 byte-identical targets ($good)" [ "$good" = 6 ]
check "exactly three sessions were started" grep -q '"sessions_started": 3,' "$T/st1.json"
check "status lists clients of the sessions" grep -q '"image": "a", .*"clients": 2' "$T/st1.json"
# the total cap, divided among the running sessions: three get 2/3 of the per-image rate each
r=${MC_RATE%M}000000
rates=$(grep -o '"rate_bps": [0-9]*, "clients"' "$T/st1.json" | tr -dc '0-9\n' | sort -n | tr '\n' ' ')
check "per-image rate and total cap: sessions at $rates" \
	[ "$rates" = "$(( r * 2 / 3 )) $(( r * 2 / 3 )) $(( r * 2 / 3 )) " ]
# every session leaves after its idle timeout and gives its address back
k=0
while [ $k -lt 80 ]; do
	status c1 >"$T/st2.json"
	[ "$(nsessions "$T/st2.json")" = 0 ] && break
	sleep 0.1; k=$((k + 1))
done
check "after the idle timeout: 0 sessions, 3 ended ($(( $(date +%s) - t0 )) s)" \
	sh -c "[ $(nsessions "$T/st2.json") = 0 ] && grep -q '\"sessions_ended\": 3,' '$T/st2.json'"

# refusals: exact message and exit status
head -c 65536 /dev/urandom >"$T/small.out"
cp "$T/small.out" "$T/small.orig"
t1=$(date +%s)
in_ns c1 "$FRISBEE" -M "$SRV" -I a -T 60 "$T/small.out" 2>"$T/err"; rc=$?
check "a target smaller than the image the master names: exit 1 at once (not at -T), says so, target untouched ($(cat "$T/err"))" \
	sh -c "[ $rc = 1 ] && [ $(( $(date +%s) - t1 )) -lt 50 ] && grep -q '^frisbee: $T/small.out: target too small for the image (65536 bytes, image .a. of master $SRV needs [0-9]*)\$' '$T/err' && cmp -s '$T/small.out' '$T/small.orig'"
in_ns c1 "$FRISBEE" -M "$SRV" -I nope "$T/x" 2>"$T/err"; rc=$?
check "unknown image: exit 1 and says so" sh -c "[ $rc = 1 ] && [ \"\$(cat '$T/err')\" = \"frisbee: master $SRV:3563: image 'nope': unknown image\" ]"
in_ns far "$FRISBEE" -M "$SRV" -I a "$T/x" 2>"$T/err"; rc=$?
check "denied image: exit 1 and says so" sh -c "[ $rc = 1 ] && [ \"\$(cat '$T/err')\" = \"frisbee: master $SRV:3563: image 'a': access denied: no allow rule matches 10.77.0.99 for image 'a'\" ]"
status stranger >"$T/out" 2>"$T/err"; rc=$?
check "a host no image allows is refused, its address named ($(cat "$T/err"))" sh -c "[ $rc = 1 ] && [ ! -s '$T/out' ] && [ \"\$(cat '$T/err')\" = 'mfrisbeed: master $SRV:3563: access denied: no image allows 10.77.0.200' ]"
junk=$(in_ns c1 "$CTLASK" "$SRV" 3563 --junk | tr '\n' ' ')
check "junk is dropped unanswered, a bad request answered malformed ($junk)" \
	[ "$junk" = "none malformed request " ]
status c1 >"$T/stx.json"
check "junk and malformed requests are counted" \
	grep -q '"malformed": 1, "dropped": 1,' "$T/stx.json"
check "refusals are counted (2 denied, 1 unknown)" sh -c "grep -q '\"unknown\": 1, \"denied\": 2,' '$T/stx.json'"
in_ns c1 "$FRISBEE" -M "$SRV" -I gone "$T/x" 2>"$T/err"; rc=$?
check "an image that cannot be opened: exit 1 and says so" sh -c "[ $rc = 1 ] && [ \"\$(cat '$T/err')\" = \"frisbee: master $SRV:3563: image 'gone': the server could not start a session\" ]"
check "... and the master's log names the file" grep -q "^mfrisbeed: $T/gone.ndz: " "$T/m.log"
t1=$(date +%s)
in_ns c1 "$FRISBEE" -M "$SRV:9" -I a "$T/x" 2>"$T/err"; rc=$?
check "no master: exit 1 after $(( $(date +%s) - t1 )) s, and says so" sh -c "[ $rc = 1 ] && [ \"\$(cat '$T/err')\" = 'frisbee: no answer from master $SRV:9' ] && [ $(( $(date +%s) - t1 )) -le 20 ]"

in_ns c1 "$FRISBEE" -M "$SRV:0" -I a "$T/x" 2>"$T/err"; rc=$?
check "a bad master address: exit 2 and says so" sh -c "[ $rc = 2 ] && [ \"\$(cat '$T/err')\" = \"frisbee: bad master address '$SRV:0' (HOST[:PORT])\" ]"

# a second master with a pool of one address, a third allowing one session
sed 's|^pool .*|pool 239.192.2.0/32|; s|^max-sessions .*|max-sessions 4|' "$T/m.conf" >"$T/pool.conf"
sed 's|^pool .*|pool 239.192.3.0/29|; s|^max-sessions .*|max-sessions 1|' "$T/m.conf" >"$T/one.conf"
mpid=$MPID
# a decoy on the address the pool will hand out, serving another image from the
# same host: a client sent there by the master must still load the image it asked for
ip netns exec "${NETNS_PFX}srv" "$FRISBEED" -m 239.192.2.0 -p 5000 -T 6 -q "$T/b.ndz" &
decoy=$!
MPORT=:3600 master pool "$T/pool.conf" -r "$T/run-pool" -l 0.0.0.0:3600
r1=$(in_ns c1 "$CTLASK" "$SRV" 3600 a) r2=$(in_ns c1 "$CTLASK" "$SRV" 3600 b)
check "pool of one: the first image gets it, from the server's address ($r1)" \
	[ "$r1" = "ok 239.192.2.0 5000 $SRV" ]
check "pool of one: the second image finds it exhausted" [ "$r2" = "multicast address pool exhausted" ]
rm -f "$T/c2.rc"
fclient c2 a "$T/out8" "$SRV:3600"
mc_wait
check "a client ignores another image's server on its group" \
	sh -c "[ \"$(mc_rc c2)\" = 0 ] && cmp -s '$T/a.src' '$T/out8'"
kill -TERM $decoy; wait $decoy
mpid2=$MPID
MPORT=:3601 master one "$T/one.conf" -r "$T/run-one" -l 0.0.0.0:3601
in_ns c1 "$CTLASK" "$SRV" 3601 a >/dev/null
in_ns c1 "$FRISBEE" -M "$SRV:3601" -I b "$T/x" 2>"$T/err"; rc=$?
check "too many sessions: exit 1 and says so" sh -c "[ $rc = 1 ] && [ \"\$(cat '$T/err')\" = \"frisbee: master $SRV:3601: image 'b': too many sessions\" ]"
kill -TERM $MPID; kill -TERM $mpid2; wait $MPID $mpid2
# (refusals are logged always: pool exhausted, too many sessions)
check "a master without -v prints nothing but refusals" \
	sh -c "! grep -v '^mfrisbeed: refused: ' '$T/pool.log' '$T/one.log' &&
	       grep -q \"^mfrisbeed: refused: 10.77.0.11 asks for b: too many sessions: \" '$T/one.log'"
MPID=$mpid

# the master killed mid-transfer: its session goes on; restarted, it adopts it
rm -f "$T"/c*.rc
fclient c1 slow "$T/slow1"; fclient c2 slow "$T/slow2"
sleep 0.7
{ kill -9 "$MPID"; wait "$MPID"; } 2>/dev/null
master m2 "$T/m.conf" -r "$T/run" -v
status c3 >"$T/st3.json"
check "restarted master adopts the running session" grep -q '"image": "slow", .*"adopted": true' "$T/st3.json"
fclient c3 a "$T/out7"
# the groups while both sessions run (a short session ends 2 s after its last client,
# which on a loaded host can come before the slow clients are done)
g1="" g2=""
for k in $(seq 100); do
	status c3 >"$T/st4.json"
	g1=$(grep -o '"image": "slow", "pid": [0-9]*, "group": "[0-9.]*"' "$T/st4.json" | sed 's/.*group": //')
	g2=$(grep -o '"image": "a", "pid": [0-9]*, "group": "[0-9.]*"' "$T/st4.json" | sed 's/.*group": //')
	[ -n "$g1" ] && [ -n "$g2" ] && break
	sleep 0.1
done
mc_wait
rcs="$(mc_rc c1)$(mc_rc c2)"
check "master killed mid-transfer: both clients exit 0 ($rcs)" [ "$rcs" = 00 ]
check "master killed mid-transfer: both targets byte-identical" \
	sh -c "cmp -s '$T/slow.src' '$T/slow1' && cmp -s '$T/slow.src' '$T/slow2'"
check "restarted master serves a new request" sh -c "[ \"$(mc_rc c3)\" = 0 ] && cmp -s '$T/a.src' '$T/out7'"
check "the new session did not take the adopted one's address ($g1 vs $g2)" \
	sh -c "[ -n '$g1' ] && [ -n '$g2' ] && [ '$g1' != '$g2' ]"

# a burst of 1,000 requests from one host
in_ns c6 "$CTLASK" "$SRV" 3563 a,b,c,slow,nope 1000 >"$T/burst" &
bp=$!
t1=$(date +%s%N)
status c5 >"$T/st5.json"; rc=$?
t2=$(date +%s%N)
wait $bp
# answered at all during the burst, within a bound a loaded host keeps (1,000 requests
# served one after the other before it would take far longer)
check "during a burst another host's request is answered in $(( (t2 - t1) / 1000000 )) ms" \
	sh -c "[ $rc = 0 ] && [ $(( (t2 - t1) / 1000000 )) -lt 5000 ]"
status c5 >"$T/st6.json"
check "the burst is rate-limited ($(cat "$T/burst"))" sh -c \
	"[ \$(sed -n 's/.*\"rate_limited\": \([0-9]*\).*/\1/p' '$T/st6.json') -ge 900 ]"
check "sessions stay at the limit (at most 3: $(nsessions "$T/st6.json"))" [ "$(nsessions "$T/st6.json")" -le 3 ]

# configuration errors name file and line; the master refuses to start
printf 'pool 239.192.1.0/24\nports 5000-5010\nbogus 1\n' >"$T/bad.conf"
"$MFRISBEED" -n -c "$T/bad.conf" 2>"$T/err"; rc=$?
check "config error: file:line and exit 1" sh -c "[ $rc = 1 ] && [ \"\$(cat '$T/err')\" = \"mfrisbeed: $T/bad.conf:3: unknown keyword 'bogus'\" ]"
printf 'image x %s allow 10.0.0.0/33\n' "$T/a.ndz" >"$T/bad2.conf"
"$MFRISBEED" -c "$T/bad2.conf" -r "$T/run-bad" 2>"$T/err"; rc=$?
check "config error at start: exit 1, bad prefix named" sh -c "[ $rc = 1 ] && [ \"\$(cat '$T/err')\" = \"mfrisbeed: $T/bad2.conf:1: bad address or prefix (ADDR or ADDR/LEN, e.g. 10.0.0.0/8) '10.0.0.0/33'\" ]"
"$MFRISBEED" -n -c "$T/m.conf" 2>"$T/err"; rc=$?
check "--check opens every image: exit 1, the missing one named, only it ($rc)" sh -c \
	"[ $rc = 1 ] && grep -qx 'mfrisbeed: image gone: $T/gone.ndz: No such file or directory' '$T/err' && [ \$(grep -c '^mfrisbeed: image ' '$T/err') = 1 ]"
grep -v '^image gone ' "$T/m.conf" >"$T/m-nogone.conf"
check "a good configuration passes --check" "$MFRISBEED" -n -c "$T/m-nogone.conf"

# SIGHUP: a broken file is reported and the old configuration kept; a good one taken
cp "$T/m.conf" "$T/m.conf.good"
echo "rate fast" >>"$T/m.conf"
kill -HUP "$MPID"; sleep 0.3
r1=$(in_ns c1 "$CTLASK" "$SRV" 3563 a)
check "SIGHUP with a broken file: reported" grep -q "^mfrisbeed: $T/m.conf:13: bad rate (bits/s, at least 8k) 'fast'; keeping the old configuration$" "$T/m2.log"
check "SIGHUP with a broken file: the old configuration still serves ($r1)" sh -c "echo '$r1' | grep -q '^ok '"
sed 's/^max-sessions 3$/max-sessions 8/' "$T/m.conf.good" >"$T/m.conf"
echo "image e $T/b.ndz allow 10.77.0.0/27" >>"$T/m.conf"
kill -HUP "$MPID"; sleep 0.3
r1=$(in_ns c1 "$CTLASK" "$SRV" 3563 e)
check "SIGHUP with a good file: the new image is served ($r1)" sh -c "echo '$r1' | grep -q '^ok '"
kill -TERM "$MPID"; wait "$MPID"; rc=$?
check "mfrisbeed exits 0 on SIGTERM" [ "$rc" = 0 ]
done_testing
