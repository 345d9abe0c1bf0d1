#!/bin/sh
# The lab: ndzctl sets tasks on nodes and groups, fake nodes (tests/helpers/labnode)
# ask and report through the master's control port, the group starts together,
# results and lost nodes show in the status, Wake-on-LAN packets arrive byte for
# byte, admin requests over TCP need the token, and the state survives a restart.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
CTL="$NDZ_BIN/ndzctl"
NODE="$NDZ_BUILD/tests/helpers/labnode"
out=$("$CTL" --help); rc=$?
check "ndzctl --help: exit 0, usage on stdout" sh -c "[ $rc = 0 ] && echo \"\$1\" | grep -q '^Usage: ndzctl'" _ "$out"
out=$("$CTL" --version); rc=$?
check "ndzctl --version: exit 0, names the version" sh -c "[ $rc = 0 ] && echo \"\$1\" | grep -Eq '^ndzctl \(ndz\) [0-9]+\.'" _ "$out"
"$CTL" 2>/dev/null; rc1=$?
"$CTL" reload onlyone 2>"$T/err"; rc2=$?
"$CTL" --seed status 2>/dev/null; rc3=$?
check "ndzctl: no command, missing argument, misplaced option: exit 2 ($rc1, $rc2, $rc3)" \
	sh -c "[ $rc1 = 2 ] && [ $rc2 = 2 ] && [ $rc3 = 2 ] && grep -q 'reload takes 2 arguments, not 1' '$T/err'"
"$CTL" -m "$T/none" status 2>"$T/err"; rc=$?
check "ndzctl without a master: exit 1, says where it looked ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q \"admin socket $T/none\" '$T/err'"

netns_require
netns_lab
M1=52:54:00:00:00:01 M2=52:54:00:00:00:02 M3=52:54:00:00:00:03
mkdir -p "$T/run"
: >"$T/ubuntu.ndz"
echo "0123456789abcdef0123456789abcdef" >"$T/token"
cat >"$T/m.conf" <<CONF
image ubuntu $T/ubuntu.ndz allow 10.77.0.0/24
group-window 2
node-timeout 2
wake-interface eth0
admin-listen $SRV:3600
token-file $T/token
CONF
master() {
	ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -v -c "$T/m.conf" -r "$T/run" \
		2>>"$T/m.log" &
	MPID=$!
	wait_until 5 test -S "$T/run/admin"
}
at_exit 'kill $MPID 2>/dev/null'
master || { not_ok "the master starts"; cat "$T/m.log"; done_testing; }
A="$T/run/admin"
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -c "$T/m.conf" -r "$T/run" -l $SRV:3599 \
	2>"$T/err2"; rc=$?
check "a second master on the same run directory leaves the first's admin socket ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q 'another master answers on it' '$T/err2' && test -S '$A'"
check "the admin socket is mode 0660" test "$(stat -c %a "$A")" = 660
ctl() { "$CTL" -m "$A" "$@"; }
ask() { in_ns "$1" "$NODE" "$SRV" "$2" ask; }

ctl nodes add $M1 pc1 room >/dev/null && ctl nodes add $M2 pc2 room >/dev/null &&
	ctl nodes add $M3 pc3 >/dev/null
check "nodes add: three nodes" test "$(ctl nodes list | tail -n +2 | wc -l)" = 3
ctl nodes add 52:54:00:00:00:09 pc1 2>"$T/err"; rc=$?
check "a name twice is refused ($rc)" sh -c "[ $rc = 1 ] && grep -q \"another node is named 'pc1'\" '$T/err'"
ctl reload room nosuch 2>"$T/err"; rc=$?
check "reload of an unknown image is refused ($rc)" sh -c "[ $rc = 1 ] && grep -q \"image 'nosuch': no such image\" '$T/err'"
check "an unknown node boots local" test "$(ask n1 52:54:00:00:00:77)" = local
check "a node without a task boots local" test "$(ask n1 $M1)" = local

# Wake-on-LAN: both nodes of the group, caught on the LAN, byte for byte
: >"$T/wol"
in_ns n2 "$NODE" wolcatch 9 2 10 >>"$T/wol" &
WPID=$!
wait_until 5 grep -q listening "$T/wol"
out=$(ctl reload room ubuntu --verify --wake)
check "reload room --wake: 2 nodes, 2 woken ($out)" test "$out" = "reload ubuntu: 2 nodes, 2 woken"
wait $WPID
want() { printf 'ffffffffffff'; for _i in $(seq 16); do printf '%s' "$1" | tr -d :; done; echo; }
{ want $M1; want $M2; } >"$T/wol.want"
grep -v listening "$T/wol" | sort >"$T/wol.got"
check "the magic packets arrive byte for byte" cmp -s "$T/wol.want" "$T/wol.got"

# the group starts when both asked
out=$(ask n1 $M1)
check "the first of the group waits ($out)" sh -c "echo '$out' | grep -q '^wait '"
out2=$(ask n2 $M2)
out3=$(ask n1 $M1)
check "the last to ask starts it; the first then starts too ($out2, $out3)" \
	sh -c "[ '$out2' = 'reload ubuntu 4' ] && [ '$out3' = 'reload ubuntu 4' ]"
check "progress is accepted" test "$(in_ns n1 "$NODE" $SRV $M1 progress 500 1000)" = ok
check "the status shows the progress" sh -c "'$CTL' -m '$A' status | grep '^$M1' | grep -q ' 50%'"
check "the result is accepted" test "$(in_ns n1 "$NODE" $SRV $M1 ok 1000 1234 3)" = ok
ctl status --json >"$T/s.json"
check "status --json: pc1's result with its byte count" \
	grep -q '"mac":"52:54:00:00:00:01".*"last":{"ok":true,"task":"reload","image":"ubuntu","bytes":1000,"ms":1234,"skipped":3' "$T/s.json"
check "status --json holds the master's status too" grep -q '"master":{' "$T/s.json"
check "done: pc1 is told to boot local" test "$(ask n1 $M1)" = local
check "ndzctl ask says the same" test "$(in_ns n1 "$CTL" -m $SRV ask $M1)" = local
again=$(in_ns n1 "$NODE" $SRV $M1 ok 1000 1234 3)
check "the same result again (its answer lost, the node retried): taken ($again), changes nothing" \
	sh -c "[ '$again' = ok ] && [ \"\$(grep -c 'node $M1: reload ubuntu: ok' '$T/m.log')\" = 1 ]"
check "a second result nobody asked for is refused" \
	test "$(in_ns n1 "$NODE" $SRV $M1 ok 1 1 1)" = "no such node or group, or no task"
check "the master logs the result" grep -q "node $M1: reload ubuntu: ok, 1000 bytes in 1234 ms" "$T/m.log"

# a node given an image it cannot write reports failure with the reason
ctl reload pc3 ubuntu >/dev/null
check "pc3 starts at once (no group): ndzctl ask" \
	test "$(in_ns n2 "$CTL" -m $SRV ask $M3)" = "reload ubuntu"
in_ns n2 "$CTL" -m $SRV report $M3 failed "image 'ubuntu': target too small for the image"
check "ndzctl report failed: accepted" test $? = 0
check "status: pc3 failed with the reason" \
	sh -c "'$CTL' -m '$A' status | grep '^$M3' | grep -q \"failed.*failed: reload ubuntu: image 'ubuntu': target too small\""
check "a failed node boots local, no reload loop" test "$(ask n2 $M3)" = local
in_ns n2 "$CTL" -m $SRV report $M3 ok 1 1 1 2>"$T/err"; rc=$?
check "ndzctl report with no task: refused, exit 1 ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q 'no such node or group, or no task' '$T/err'"
"$CTL" ask $M3 2>/dev/null; rc=$?
check "ndzctl ask without -m HOST: exit 2 ($rc)" test $rc = 2

# pc2 went silent past node-timeout: lost, its task still pending
check "pc2 shows lost within the timeout" \
	wait_until 6 sh -c "'$CTL' -m '$A' status --json | grep -q '\"mac\":\"$M2\"[^}]*\"task\":\"reload\",\"image\":\"ubuntu\"[^}]*\"state\":\"lost\"'"

# admin over TCP needs the token
in_ns n1 "$CTL" -m tcp:$SRV:3600 -k "$T/token" status >/dev/null 2>&1; rc1=$?
check "admin over TCP with the token works" test $rc1 = 0
echo "fedcba9876543210fedcba9876543210" >"$T/bad"
in_ns n1 "$CTL" -m tcp:$SRV:3600 -k "$T/bad" reload room ubuntu 2>"$T/err"; rc=$?
check "a wrong token is refused ($rc)" sh -c "[ $rc = 1 ] && grep -q 'admin token does not match' '$T/err'"
out=$(in_ns n1 "$CTL" -m tcp:$SRV:3600 -k "$T/token" images list)
check "images list over TCP names ubuntu" sh -c "echo '$out' | grep -q '^ubuntu '"

# idle admin connections hold no one up: nodes are answered, the unix socket serves
: >"$T/idle"
in_ns n1 "$NDZ_BUILD/tests/helpers/tcpidle" $SRV 3600 6 4 >>"$T/idle" 2>&1 &
IPID=$!
wait_until 5 grep -q connected "$T/idle"
check "six idle admin connections: a node is still answered" test "$(ask n2 $M2)" = "reload ubuntu 4"
check "six idle admin connections: the admin socket still serves" sh -c "'$CTL' -m '$A' status >/dev/null"
wait $IPID
check "the idle connections were closed, none left open" sh -c "! grep -q ': open' '$T/idle'"

# a flood of asks from one address: dropped past its rate, others still answered
out=$(in_ns n1 "$NODE" flood $SRV 52:54:00:00:00:66 1000)
n=${out#replies }
check "1,000 asks from one address: most dropped unanswered ($out)" sh -c "[ '$n' -ge 1 ] && [ '$n' -le 100 ]"
check "... another address is still answered" test "$(ask n2 $M2)" = "reload ubuntu 4"
check "... the admin socket still serves" sh -c "'$CTL' -m '$A' status >/dev/null"
check "... the drop is logged with the address and the rule" \
	grep -q 'refused: 10.77.0.11 lab datagram over lab-host-rate (20 a second, bursts of 40): dropped' "$T/m.log"
check "... the other drops summed up once their second is over" \
	wait_until 3 grep -Eq '[0-9]+ more refused \(lab rate limit\)' "$T/m.log"
ctl status --json >"$T/s.json"
check "... and counted in the status (lab_rate_limited >= 900)" \
	sh -c "grep -Eo '\"lab_rate_limited\": *[0-9]+' '$T/s.json' | grep -Eo '[0-9]+\$' | awk '{ exit !(\$1 >= 900) }'"

# the state survives a restart
kill $MPID; wait $MPID 2>/dev/null
check "the master removed its admin socket" test ! -e "$A"
check "the state file lists three nodes" test "$(grep -Evc '^(#|disk |lineage )' "$T/run/lab")" = 3
master || not_ok "the master starts again"
ctl status --json >"$T/s2.json"
check "after a restart: pc1's result" grep -q '"mac":"52:54:00:00:00:01".*"last":{"ok":true' "$T/s2.json"
check "after a restart: pc2's task pending" \
	grep -q '"mac":"52:54:00:00:00:02"[^}]*"task":"reload","image":"ubuntu","opts":\["verify"\],"state":"pending"' "$T/s2.json"
check "after a restart: pc3 failed, with the reason" \
	grep -q '"reason":"image .ubuntu.: target too small for the image"' "$T/s2.json"
check "after a restart: pc2 asks and reloads" test "$(ask n2 $M2)" = "reload ubuntu 4"
out=$(ctl cancel room)
check "cancel room: 2 nodes ($out)" test "$out" = "cancel: 2 nodes"
check "a cancelled node boots local" test "$(ask n2 $M2)" = local
ctl nodes remove pc3 >/dev/null
check "nodes remove: two left" test "$(ctl nodes list | tail -n +2 | wc -l)" = 2
done_testing
