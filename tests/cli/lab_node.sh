#!/bin/sh
# ndzctl node, the lab node in C (what the boot environment runs): against a real
# mfrisbeed in namespaces it asks, runs the task (frisbee or imagezip, read through
# their --report-fd channel), reports progress and the result: no task (exit 3), a
# reload (ok with the bytes, the disk byte for byte), a capture (stored, restores
# byte for byte) and a reload onto a disk too small (failed, the reason reported).
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
CTL="$NDZ_BIN/ndzctl"
"$CTL" node 52:54:00:00:00:01 "$T/d" 2>"$T/err"; rc=$?
check "node without -m HOST: exit 2 ($rc)" \
	sh -c "[ $rc = 2 ] && grep -q 'node needs -m HOST' '$T/err'"
"$CTL" -m 127.0.0.1 node 52:54:00:00:00:01 2>"$T/err"; rc=$?
check "node without DISK: exit 2 ($rc)" test $rc = 2
"$CTL" --retries 1 status 2>"$T/err"; rc=$?
check "a node option with another command: exit 2 ($rc)" \
	sh -c "[ $rc = 2 ] && grep -q 'go with node' '$T/err'"

netns_require
[ -x "$IMAGEZIP" ] || skip_all "imagezip not built"
netns_lab
M1=52:54:00:00:00:01 M2=52:54:00:00:00:02
mkdir -p "$T/run" "$T/up"
head -c $(( 2 * 1024 * 1024 )) /dev/urandom >"$T/src.r"
yes "ndz lab node test line" | head -c $(( 4 * 1024 * 1024 )) >"$T/src.t"
cat "$T/src.r" "$T/src.t" "$T/src.r" >"$T/src"
"$IMAGEZIP" -q -r "$T/src" "$T/gold.ndz" || { not_ok "imagezip the source"; done_testing; }
cat >"$T/m.conf" <<CONF
pool 239.192.3.0/29
ports 5100-5107
idle-timeout 2
image gold $T/gold.ndz allow 10.77.0.0/24
upload-dir $T/up allow 10.77.0.0/24 upload 10.77.0.0/24
CONF
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -v -c "$T/m.conf" -r "$T/run" \
	2>>"$T/m.log" &
MPID=$!
at_exit 'kill $MPID 2>/dev/null'
wait_until 5 test -S "$T/run/admin" || { not_ok "the master starts"; cat "$T/m.log"; done_testing; }
ctl() { "$CTL" -m "$T/run/admin" "$@"; }
# node HOST MAC DISK [OPTIONS...]: ndzctl node in HOST (frisbee and imagezip from the
# build); the result line in $T/out, the messages in $T/err, the status in rc
node() {
	_h=$1 _m=$2 _d=$3; shift 3
	in_ns "$_h" env PATH="$NDZ_BIN:$PATH" "$CTL" -m $SRV node --timeout 10 "$@" "$_m" "$_d" \
		>"$T/out" 2>"$T/err"; rc=$?
}
ctl nodes add $M1 pc1 >/dev/null && ctl nodes add $M2 pc2 >/dev/null ||
	not_ok "nodes add"
json() { ctl status --json >"$T/s.json" && grep -q "$1" "$T/s.json"; }

# no task: nothing run, nothing written, exit 3
node n1 $M1 "$T/d1"
check "no task: exit 3, no result line, no disk made ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 3 ] && [ ! -s '$T/out' ] && grep -q '^ndzctl: no task' '$T/err' && [ ! -e '$T/d1' ]"

# a reload: frisbee from the master's session (onto a file it makes), the result
# with the bytes received
ctl reload pc1 gold >/dev/null
node n1 $M1 "$T/d1"
check "reload: exit 0, the result line ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 0 ] && grep -q \"^NDZ-RESULT: ok: image 'gold' of master $SRV written to $T/d1 in \" '$T/out'"
check "reload: the disk is the source byte for byte" cmp -s "$T/src" "$T/d1"
check "reload: the console says the task and that the result was reported" \
	sh -c "grep -q '^ndzctl: task: reload gold' '$T/err' && grep -q '^ndzctl: result reported to master $SRV' '$T/err'"
size=$(stat -c %s "$T/gold.ndz")
check "reload: the master has ok with the image's bytes ($size)" \
	json "\"mac\":\"$M1\".*\"last\":{\"ok\":true,\"task\":\"reload\",\"image\":\"gold\",\"bytes\":$size,"
check "... and logs it" grep -q "node $M1: reload gold: ok, $size bytes in" "$T/m.log"

# a capture: imagezip --upload, stored by the master, restores byte for byte
ctl capture pc1 cap >/dev/null
node n1 $M1 "$T/d1" --opts "-r"
check "capture: exit 0, the result line ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 0 ] && grep -q \"^NDZ-RESULT: ok: $T/d1 captured as image 'cap' of master $SRV in \" '$T/out'"
"$IMAGEUNZIP" -q "$T/up/cap.ndz" "$T/cap.out" 2>/dev/null
check "capture: the stored image restores to the disk byte for byte" cmp -s "$T/src" "$T/cap.out"
check "capture: the master has ok with the disk bytes read ($(stat -c %s "$T/src"))" \
	json "\"mac\":\"$M1\".*\"last\":{\"ok\":true,\"task\":\"capture\",\"image\":\"cap\",\"bytes\":$(stat -c %s "$T/src"),"

# a capture whose --opts are not a capture's: failed, the reason reported, nothing stored
ctl capture pc1 bad >/dev/null
node n1 $M1 "$T/d1" --opts "-r,--zero"
check "capture, a bad --opts word: exit 1, the reason ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 1 ] && grep -q \"^NDZ-RESULT: failed: ndzctl: --opts: '--zero' is not an option of a capture\" '$T/out'"
ctl status --json >"$T/s.json"
check "... the master has the reason, nothing stored" \
	sh -c "grep -q \"'--zero' is not an option\" '$T/s.json' && [ ! -e '$T/up/bad.ndz' ]"

# a reload onto a disk too small: failed, the reason reported, the disk untouched
dd if=/dev/urandom of="$T/small" bs=1024 count=1024 2>/dev/null
cp "$T/small" "$T/small.orig"
LOOP=$(losetup -f --show "$T/small" 2>/dev/null)
if [ -n "$LOOP" ]; then
	at_exit "losetup -d $LOOP"
	ctl reload pc2 gold >/dev/null
	node n2 $M2 "$LOOP" --retries 1
	check "too small: exit 1, the reason on the result line ($rc: $(cat "$T/out"))" \
		sh -c "[ $rc = 1 ] && grep -q '^NDZ-RESULT: failed: frisbee: $LOOP: target too small for the image' '$T/out'"
	check "too small: tried again once (--retries 1)" grep -q '^ndzctl: warning: attempt 1 failed' "$T/err"
	check "too small: the master has the same reason" \
		json "\"mac\":\"$M2\".*\"state\":\"failed\".*\"last\":{\"ok\":false,\"task\":\"reload\",\"image\":\"gold\",[^}]*\"reason\":\"frisbee: $LOOP: target too small for the image"
	check "too small: the disk untouched" cmp -s "$T/small.orig" "$T/small"
else
	ok "# skip too small: no loop device"
fi

# a capture the master refuses (no upload rule for the name): its reason, reported
ctl capture pc2 gold >/dev/null
node n2 $M2 "$T/d1" --opts "-r"
check "capture over a served image: exit 1, the master's reason ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 1 ] && grep -q \"^NDZ-RESULT: failed: capture: master $SRV:3563: image 'gold'\" '$T/out'"
check "... the served image untouched" sh -c "\"$IMAGEUNZIP\" -q -n '$T/gold.ndz'"

# the task given (the boot environment without a lab): nothing asked or reported
"$CTL" -m 127.0.0.1 node - "$T/d" 2>"$T/err"; rc=$?
check "node - without --task: exit 2 ($rc)" sh -c "[ $rc = 2 ] && grep -q 'needs --task' '$T/err'"
"$CTL" node --task capture --group 239.1.1.1 --port 5 - "$T/d" 2>"$T/err"; rc=$?
check "node - capture from a group: exit 2 ($rc)" test $rc = 2
node n1 - "$T/d1" --task reload --image gold --seed
check "given reload --seed onto the reloaded disk: ok, every chunk held ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 0 ] && grep -Eq \"^NDZ-RESULT: ok: image 'gold' of master $SRV written to $T/d1 in [0-9.]+ s, ([0-9]+) of \\1 chunks skipped\" '$T/out' && ! grep -q 'result reported' '$T/err'"
check "... the disk is still the source" cmp -s "$T/src" "$T/d1"
node n1 - "$T/d1" --task capture --image cap2 --opts "-r,-z,9"
"$IMAGEUNZIP" -q "$T/up/cap2.ndz" "$T/cap2.out" 2>/dev/null
check "given capture (-r -z 9): ok, stored, restores byte for byte ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 0 ] && grep -q \"^ndzctl: stored as image 'cap2' on $SRV\" '$T/err' && cmp -s '$T/src' '$T/cap2.out'"
in_ns srv "$FRISBEED" -m 239.192.4.1 -p 5200 "$T/gold.ndz" 2>"$T/fd.log" &
FPID=$!
at_exit "kill $FPID 2>/dev/null"
rm -f "$T/d2"
in_ns n2 env PATH="$NDZ_BIN:$PATH" "$CTL" node --timeout 10 --task reload --group 239.192.4.1 \
	--port 5200 --server $SRV --zero - "$T/d2" >"$T/out" 2>"$T/err"; rc=$?
check "given reload from a frisbeed's group: ok ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 0 ] && grep -q \"^NDZ-RESULT: ok: group 239.192.4.1 port 5200 written to $T/d2 in \" '$T/out' && cmp -s '$T/src' '$T/d2'"
kill $FPID 2>/dev/null

# the master gone: no answer to the ask, exit 4, the reason on the result line
kill $MPID; wait $MPID 2>/dev/null
node n1 $M1 "$T/d1"
check "no master: exit 4, a failed result line ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 4 ] && grep -q '^NDZ-RESULT: failed: ' '$T/out'"
done_testing
