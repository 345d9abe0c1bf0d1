#!/bin/sh
# The image master against hostile peers and a stray file: idle TCP connections from
# a host nothing allows are refused at once, an allowed host's are bounded and cut off
# after request-timeout, while an allowed uploader uploads and --status answers; a file
# in the upload directory whose name is no image name is skipped (at start, on reload,
# after a restart), and an upload is reported stored only when it is served.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require
MFRISBEED="$NDZ_BIN/mfrisbeed"
UPLOAD="$NDZ_BIN/frisbee-upload"
TCPIDLE="$NDZ_BUILD/tests/helpers/tcpidle"
SRV=10.77.0.1
netns_lan && netns_host srv 1 || { not_ok "namespace LAN"; done_testing; }
# c1 uploads, c2 may only download, far is allowed nothing
netns_host c1 11 && netns_host c2 12 && netns_host far 99 || { not_ok "hosts"; done_testing; }
MIB=$(( MC_MIB / 3 ))
mkdir -p "$T/up" "$T/run"
for n in a b c; do
	mc_image "$n" "$MIB" "$n" || { not_ok "make image $n"; done_testing; }
done
cp "$T/a.ndz" "$T/up/good.ndz"
# only keys the master had before: the limits are the defaults (request-timeout 5,
# max-pending 16, max-pending-host 4)
cat >"$T/m.conf" <<CONF
pool 239.192.6.0/29
ports 5300-5307
idle-timeout 2
upload-dir $T/up allow 10.77.0.0/27 upload 10.77.0.11
max-uploads 2
CONF
master() {
	ip netns exec "${NETNS_PFX}srv" "$MFRISBEED" -c "$T/m.conf" -r "$T/run" -vv 2>>"$T/m.log" &
	MPID=$!
	wait_until 5 master_listens
}
stop() { kill -TERM "$MPID" 2>/dev/null; wait "$MPID"; }
at_exit 'kill -TERM $MPID 2>/dev/null'
status() { in_ns "$1" "$MFRISBEED" --status "$SRV"; }
# up NAME FILE: frisbee-upload from c1; stderr in $T/err, exit status in rc
up() { in_ns c1 "$UPLOAD" -w 10 -M "$SRV" -I "$1" "$2" 2>"$T/err"; rc=$?; }
# fetch HOST NAME TARGET: frisbee -M; exit status in rc
fetch() { in_ns "$1" "$FRISBEE" $MC_RAW -M "$SRV" -I "$2" -T 20 "$3" 2>>"$T/$1.log"; rc=$?; }
# connected FILE: wait (at most 10 s) until a tcpidle has made its connections
connected() { for _k in $(seq 100); do grep -q '^connected' "$1" 2>/dev/null && return 0; sleep 0.1; done; return 1; }

master || { not_ok "the master starts"; done_testing; }

# idle connections: 8 from far (nothing allows it), 6 from c2 (allowed, holds 4 at most)
[ -x "$TCPIDLE" ] || { not_ok "tcpidle helper"; done_testing; }
in_ns far "$TCPIDLE" "$SRV" 3563 8 15 >"$T/far.idle" &
fpid=$!
connected "$T/far.idle"
in_ns c2 "$TCPIDLE" "$SRV" 3563 6 20 >"$T/c2.idle" &
cpid=$!
connected "$T/c2.idle"
# while they are (or would be) held: an upload and a status from c1
t1=$(date +%s)
up fresh "$T/c.ndz"
t2=$(date +%s)
check "an allowed upload while idle connections are open: exit 0 in $((t2 - t1)) s ($(cat "$T/err"))" \
	eval "[ $rc = 0 ] && [ $((t2 - t1)) -le 20 ] && cmp -s '$T/c.ndz' '$T/up/fresh.ndz'"
status c1 >"$T/st1.json"; rc=$?
t3=$(date +%s)
check "--status answers while idle connections are open (exit $rc, $((t3 - t2)) s)" \
	eval "[ $rc = 0 ] && grep -q '\"images\": \\[' '$T/st1.json' && [ $((t3 - t2)) -le 10 ]"
fetch c2 fresh "$T/out.fresh"
check "the upload is served at once: frisbee fetches it (exit $rc)" \
	eval "[ $rc = 0 ] && mc_same '$T/c.src' '$T/out.fresh'"
wait "$fpid" "$cpid"
check "far's 8 connections are all refused at once, access denied" \
	eval "[ \$(grep -Ec '^conn [0-9]+: closed after [0-4]\\.[0-9] s, status 2$' '$T/far.idle') = 8 ]"
check "c2: 2 of its 6 connections are refused at once, too many waiting (status 13)" \
	eval "[ \$(grep -Ec '^conn [56]: closed after [0-4]\\.[0-9] s, status 13$' '$T/c2.idle') = 2 ]"
check "c2: the other 4 are closed by the master after request-timeout, unanswered" \
	eval "[ \$(grep -Ec '^conn [1-4]: closed after ([4-9]|1[0-9])\\.[0-9] s, status -$' '$T/c2.idle') = 4 ]"
status c1 >"$T/st2.json"
check "status counts them: 8 denied, 2 busy, 4 quiet" \
	grep -q '"tcp_denied": 8, "tcp_busy": 2, "tcp_quiet": 4,' "$T/st2.json"
out=$(in_ns far "$MFRISBEED" --status "$SRV" 2>&1); rc=$?
check "--status from far: exit 1, access denied ($out)" \
	eval "[ $rc = 1 ] && [ \"\$out\" = 'mfrisbeed: master $SRV:3563: access denied: no image allows 10.77.0.99' ]"
in_ns c2 "$TCPIDLE" "$SRV" 3563 1 20 dribble >"$T/drip.idle"
check "a request dribbled a byte a second is cut off at request-timeout ($(tail -1 "$T/drip.idle"))" \
	grep -Eq '^conn 1: closed after [4-9]\.[0-9] s, status -$' "$T/drip.idle"

# a file of a bad name appears, the configuration is reloaded: later uploads are still served
cp "$T/b.ndz" "$T/up/Win 10.ndz"
kill -HUP "$MPID"
sleep 0.5
kill -HUP "$MPID"
up fresh2 "$T/b.ndz"
check "upload after 'Win 10.ndz' appeared: exit 0 ($(cat "$T/err"))" [ "$rc" = 0 ]
fetch c2 fresh2 "$T/out.fresh2"
check "... and it is served: frisbee fetches it (exit $rc)" \
	eval "[ $rc = 0 ] && mc_same '$T/b.src' '$T/out.fresh2'"
check "the skipped file is named once in the log, for two reloads and an upload" \
	eval "[ \$(grep -c \"^mfrisbeed: warning: $T/up/Win 10.ndz: skipped: not an image name\" '$T/m.log') = 1 ]"
check "no reload failed" eval "! grep -q 'keeping the old configuration' '$T/m.log'"

# an upload that cannot be served (the configuration no longer loads): not "stored"
cp "$T/m.conf" "$T/m.conf.good"
echo "max-uploads lots" >>"$T/m.conf"
up fresh3 "$T/a.ndz"
check "an upload the master cannot serve: exit 1, says why ($(cat "$T/err"))" \
	eval "[ $rc = 1 ] && grep -q \"image 'fresh3': .*stored as $T/up/fresh3.ndz, but not served: the configuration does not load: $T/m.conf:6: bad max-uploads\" '$T/err'"
mv "$T/m.conf.good" "$T/m.conf"

# a restart with the bad name there: starts, serves the good images, says what it skips
stop
: >"$T/m.log"
master; started=$?
check "a restarted master starts with 'Win 10.ndz' in the upload directory" \
	eval "[ $started = 0 ] && kill -0 $MPID"
check "... says it skips it" \
	grep -q "^mfrisbeed: warning: $T/up/Win 10.ndz: skipped: not an image name" "$T/m.log"
fetch c2 fresh "$T/out.fresh3"
check "... and serves what was uploaded before (exit $rc)" \
	eval "[ $rc = 0 ] && mc_same '$T/c.src' '$T/out.fresh3'"
fetch c2 good "$T/out.good"
check "... and the directory's other image (exit $rc)" \
	eval "[ $rc = 0 ] && mc_same '$T/a.src' '$T/out.good'"
stop
check "mfrisbeed exits 0 on SIGTERM" [ "$?" = 0 ]
done_testing
