#!/bin/sh
# A lab admin's day (issue 33): nothing fails silently. Every refusal is logged with
# the address and the rule (lab datagrams, GETs, admin over TCP, HTTP actions); a
# lab change the master cannot save is refused to ndzctl and not made; mfrisbeed -n
# and startup check the lab state can be written; -n warns of a configuration that
# serves nothing; a run directory we may not write names -r; ndzctl nodes lists, and
# the list shows a reload's options.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
CTL="$NDZ_BIN/ndzctl"
MF="$NDZ_BIN/mfrisbeed"
NODE="$NDZ_BUILD/tests/helpers/labnode"

# ---- mfrisbeed -n: the lab state and a configuration that serves nothing ----
mkdir -p "$T/up"
cat >"$T/nolab.conf" <<CONF
upload-dir $T/up allow 10.0.0.0/8 upload 10.0.9.0/24
lab-state $T/nosuchdir/state
CONF
"$MF" -n -c "$T/nolab.conf" -r "$T/run0" 2>"$T/err"; rc=$?
check "-n: a lab-state in a missing directory fails, naming it ($rc: $(head -c 200 "$T/err"))" \
	sh -c "[ $rc = 1 ] && grep -q 'lab state $T/nosuchdir/state: directory $T/nosuchdir: No such file or directory' '$T/err'"
: >"$T/sdir"
printf 'upload-dir %s allow 10.0.0.0/8\nlab-state %s/sdir/state\n' "$T/up" "$T" >"$T/nodir.conf"
"$MF" -n -c "$T/nodir.conf" -r "$T/run0" 2>"$T/err"; rc=$?
check "-n: a lab-state under a plain file fails ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q 'is not a directory' '$T/err'"
mkdir -p "$T/lab"
printf 'upload-dir %s allow 10.0.0.0/8 upload 10.0.9.0/24\nlab-state %s/lab/state\n' "$T/up" "$T" >"$T/ok.conf"
"$MF" -n -c "$T/ok.conf" -r "$T/run0" 2>"$T/err"; rc=$?
check "-n: a writable lab-state and an upload-dir with an allow list: exit 0, no warning ($rc)" \
	sh -c "[ $rc = 0 ] && [ ! -s '$T/err' ]"
printf 'upload-dir %s\n' "$T/up" >"$T/nothing.conf"
"$MF" -n -c "$T/nothing.conf" -r "$T/run0" 2>"$T/err"; rc=$?
check "-n: a configuration that serves nothing is warned of, exit 0 ($rc)" \
	sh -c "[ $rc = 0 ] && grep -q 'warning: $T/nothing.conf: serves nothing' '$T/err'"
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
	mkdir -p "$T/ro" && chmod 711 "$T" && chmod 755 "$T/ro" && chmod 644 "$T/ok.conf"
	timeout 10 setpriv --reuid=65534 --regid=65534 --clear-groups "$MF" -c "$T/ok.conf" -r "$T/ro/run" \
		-l 127.0.0.1 2>"$T/err"; rc=$?
	check "a run directory we may not make: the reason and what to do (-r DIR) ($rc)" \
		sh -c "[ $rc = 1 ] && grep -q 'run directory $T/ro/run: Permission denied (.*-r DIR' '$T/err'"
fi

# ndzctl without a master: where it looked and what to check
"$CTL" -m "$T/nomaster" status 2>"$T/err"; rc=$?
check "ndzctl without a master: exit 1, the socket, the reason and what to check ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q 'admin socket $T/nomaster: No such file or directory (is the master running?' '$T/err'"

netns_require
netns_lab
M1=52:54:00:00:00:01 M2=52:54:00:00:00:02
mkdir -p "$T/run" "$T/state"
: >"$T/ubuntu.ndz"
echo "0123456789abcdef0123456789abcdef" >"$T/token"
# n1 (10.77.0.11) is allowed, n2 (10.77.0.12) is not
cat >"$T/m.conf" <<CONF
image ubuntu $T/ubuntu.ndz allow 10.77.0.11/32
admin-listen $SRV:3600
http-listen $SRV:3680
token-file $T/token
lab-state $T/state/lab
CONF
in_ns srv timeout 10 "$MF" -c "$T/nolab.conf" -r "$T/run0" -l $SRV 2>"$T/err"; rc=$?
check "startup: a lab-state that cannot be written fails at once ($rc: $(head -c 200 "$T/err"))" \
	sh -c "[ $rc = 1 ] && grep -q 'lab state.*$T/nosuchdir/state.*No such file or directory' '$T/err'"
ip netns exec "${NETNS_PFX}srv" "$MF" -c "$T/m.conf" -r "$T/run" 2>>"$T/m.log" &
MPID=$!
at_exit 'kill $MPID 2>/dev/null'
wait_until 5 test -S "$T/run/admin" || { not_ok "the master starts"; cat "$T/m.log"; done_testing; }
A="$T/run/admin"
check "startup wrote the lab state (so it is known to be writable)" \
	grep -q '^# ndz lab state' "$T/state/lab"
ctl() { "$CTL" -m "$A" "$@"; }

# ---- refusals, logged without -v, with the address and the rule ----
in_ns n2 "$CTL" -m $SRV ask $M2 2>"$T/err"; rc=$?
check "a node no allow rule covers: ndzctl ask is denied ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q 'access denied' '$T/err'"
check "... and the master logs it, without -v: address, node and rule" \
	wait_until 3 grep -q "refused: 10.77.0.12 lab ask of node $M2: access denied: no allow or upload rule" "$T/m.log"
in_ns n2 "$NODE" $SRV $M2 ok 1 1 1 >/dev/null
check "... a report from it too" \
	wait_until 3 grep -q "refused: 10.77.0.12 lab report of node $M2: access denied" "$T/m.log"
out=$(in_ns n2 "$NDZ_BUILD/tests/helpers/ctlask" $SRV 3563 ubuntu 2>&1)
check "a GET no allow rule covers is refused ($out)" sh -c "echo '$out' | grep -q 'access denied'"
check "a GET no allow rule covers is logged with the address and the rule" \
	wait_until 5 grep -q "refused: 10.77.0.12 asks for ubuntu: access denied: no allow rule matches 10.77.0.12" "$T/m.log"
echo "fedcba9876543210fedcba9876543210" >"$T/bad"
in_ns n1 "$CTL" -m tcp:$SRV:3600 -k "$T/bad" status >/dev/null 2>&1
check "an admin request with a wrong token is logged with the address" \
	wait_until 3 grep -q "refused: 10.77.0.11 admin request over TCP (admin-listen): access denied: the token does not match" "$T/m.log"
code=$(in_ns n1 curl -s -o /dev/null -w '%{http_code}' -X POST -H 'Authorization: Bearer nottheone' \
	http://$SRV:3680/reload-config)
check "an HTTP action with a wrong token: 403 ($code)" test "$code" = 403
check "... logged with the address and the rule" \
	wait_until 3 grep -q "refused: 10.77.0.11 POST /reload-config: access denied: the token does not match" "$T/m.log"
in_ns n1 curl -s -o /dev/null -X POST http://$SRV:3680/reload-config
check "... without a token too" \
	wait_until 3 grep -q "refused: 10.77.0.11 POST /reload-config: access denied: no admin token" "$T/m.log"

# ---- ndzctl nodes, and the options a task shows ----
ctl nodes add $M1 pc1 room >/dev/null
out=$(ctl nodes 2>&1); rc=$?
check "ndzctl nodes lists the nodes ($rc)" sh -c "[ $rc = 0 ] && echo '$out' | grep -q '^$M1 *pc1 '"
ctl nodes frob 2>"$T/err"; rc=$?
check "ndzctl nodes frob: usage, naming the subcommands ($rc)" \
	sh -c "[ $rc = 2 ] && grep -q \"nodes: unknown subcommand 'frob' (add, list, remove)\" '$T/err'"
ctl reload pc1 ubuntu --zero --verify >/dev/null
check "nodes list shows the reload's options (--zero --verify)" \
	sh -c "'$CTL' -m '$A' nodes list | grep '^$M1' | grep -q 'reload ubuntu --zero --verify'"

# ---- a change the master cannot save is refused and not made ----
before=$(ctl status --json)
mv "$T/state" "$T/state.away"
ctl nodes add $M2 pc2 room 2>"$T/err" >"$T/out"; rc=$?
check "nodes add with the state unsaveable: exit 1, nothing on stdout ($rc)" \
	sh -c "[ $rc = 1 ] && [ ! -s '$T/out' ]"
check "... the message names the state file and the reason" \
	grep -q "lab state $T/state/lab cannot be saved, the change was not made: .*No such file or directory" "$T/err"
check "... and the node is not there" sh -c "! '$CTL' -m '$A' nodes list | grep -q '$M2'"
ctl cancel pc1 2>/dev/null; rc=$?
after=$(ctl status --json)
check "cancel with the state unsaveable: refused ($rc), pc1's task unchanged" \
	sh -c "[ $rc = 1 ] && [ \"\$(echo '$before' | grep -o '\"task\":\"reload\"')\" = \"\$(echo '$after' | grep -o '\"task\":\"reload\"')\" ]"
check "... the master says so too" grep -q "refused, the lab state cannot be saved" "$T/m.log"
mv "$T/state.away" "$T/state"
ctl nodes add $M2 pc2 room >/dev/null; rc=$?
check "state writable again: nodes add works and is saved ($rc)" \
	sh -c "[ $rc = 0 ] && grep -q '^$M2 pc2 room' '$T/state/lab'"
done_testing
