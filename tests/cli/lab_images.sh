#!/bin/sh
# ndzctl images info, remove, rename against a master in the namespace LAN: the facts
# of a signed and an unsigned image, refusals (an image line, a serving session, a
# pending task, a name taken) with exit 1 and a clear message, the files really gone
# or moved with their companions, images list agreeing, and a forced remove during a
# download that still completes byte for byte.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
CTL="$NDZ_BIN/ndzctl"
CTLASK="$NDZ_BUILD/tests/helpers/ctlask"
IMAGEKEY="$NDZ_BIN/imagekey"
"$CTL" images remove 2>/dev/null; rc1=$?
"$CTL" images rename a 2>/dev/null; rc2=$?
"$CTL" images info 'a b' 2>"$T/err"; rc3=$?
"$CTL" images list --force 2>/dev/null; rc4=$?
check "images: missing arguments, a bad name, --force misplaced: exit 2 ($rc1 $rc2 $rc3 $rc4)" \
	sh -c "[ $rc1 = 2 ] && [ $rc2 = 2 ] && [ $rc3 = 2 ] && [ $rc4 = 2 ] && grep -q 'not an image name' '$T/err'"
out=$("$CTL" --help)
check "--help names images info, remove, rename and --force" \
	sh -c 'echo "$1" | grep -q "images info NAME" && echo "$1" | grep -q "images rename NAME NEWNAME" && echo "$1" | grep -q -- "--force"' _ "$out"

netns_require
SRV=10.77.0.1
netns_clients 2
"$IMAGEKEY" -q generate -o "$T/k" || { not_ok "imagekey generate"; done_testing; }
mkdir -p "$T/dir" "$T/up" "$T/run"
MC_ZIP_OPTS="--sign $T/k.sec" mc_image golden 4 g && MC_ZIP_OPTS="--no-index" mc_image plain 1 p &&
	mc_image fixed 1 f && mc_image up1 1 u || { not_ok "make images"; done_testing; }
for f in golden.ndz golden.ndz.manifest golden.ndz.index plain.ndz; do mv "$T/$f" "$T/dir/"; done
mv "$T/up1.ndz" "$T/up1.ndz.index" "$T/up/"
check "the signed image has its manifest and index, the plain one neither" \
	sh -c "test -f '$T/dir/golden.ndz.manifest' && test -f '$T/dir/golden.ndz.index' && ! test -e '$T/dir/plain.ndz.index'"
cat >"$T/m.conf" <<CONF
pool 239.192.1.0/29
ports 5000-5007
idle-timeout 30
image fixed $T/fixed.ndz allow 10.77.0.0/24
imagedir $T/dir allow 10.77.0.0/24 rate 16M
upload-dir $T/up allow 10.77.0.0/24 upload 10.77.0.0/24
CONF
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -v -c "$T/m.conf" -r "$T/run" 2>>"$T/m.log" &
MPID=$!
at_exit 'kill $MPID 2>/dev/null'
wait_until 5 test -S "$T/run/admin" || { not_ok "the master starts"; cat "$T/m.log"; done_testing; }
ctl() { "$CTL" -m "$T/run/admin" "$@"; }
listed() { ctl images list -j | grep -q "\"name\":\"$1\""; }

# info
out=$(ctl images info golden); rc=$?
check "info of a signed image: chunks, size, its manifest and index, from the imagedir ($rc)" \
	sh -c '[ $2 = 0 ] && echo "$1" | grep -Eq "^chunks: +[1-9]" && echo "$1" | grep -Eq "^size: +[1-9][0-9]* bytes" &&
		echo "$1" | grep -q "^signed: .*golden.ndz.manifest" && echo "$1" | grep -q "^index: .*golden.ndz.index" &&
		echo "$1" | grep -q "^from: *imagedir line 5" && echo "$1" | grep -q "^sessions: *none"' _ "$out" $rc
out=$(ctl images info plain --json)
check "info --json of an unsigned image: signed false, index false, bytes the file's" \
	sh -c 'echo "$1" | grep -q "\"signed\":false" && echo "$1" | grep -q "\"index\":false" &&
		echo "$1" | grep -q "\"bytes\":$2," && echo "$1" | grep -q "\"from\":\"imagedir\""' _ "$out" "$(stat -c %s "$T/dir/plain.ndz")"
ctl images info nosuch 2>"$T/err"; rc=$?
check "info of an unknown image: exit 1 ($rc)" sh -c "[ $rc = 1 ] && grep -q \"image 'nosuch': no such image\" '$T/err'"

# an image line is the configuration's
ctl images remove fixed 2>"$T/err"; rc1=$?
ctl images rename fixed fixed2 --force 2>"$T/err2"; rc2=$?
check "remove, rename of an image line's image: refused, exit 1 ($rc1 $rc2)" \
	sh -c "[ $rc1 = 1 ] && [ $rc2 = 1 ] && grep -q \"image 'fixed' is defined by $T/m.conf line 4: edit the configuration\" '$T/err' && test -f '$T/fixed.ndz'"

# a serving session
r=$(in_ns c1 "$CTLASK" "$SRV" 3563 golden)
check "a GET starts a session of golden ($r)" sh -c "echo '$r' | grep -q '^ok '"
out=$(ctl images info golden)
check "info names the session" sh -c 'echo "$1" | grep -q "^session: *frisbeed [0-9]* on 239.192.1.0 port 5000"' _ "$out"
ctl images remove golden 2>"$T/err"; rc1=$?
ctl images rename golden golden2 2>"$T/err2"; rc2=$?
check "remove, rename while a session serves it: refused, exit 1, files kept ($rc1 $rc2)" \
	sh -c "[ $rc1 = 1 ] && [ $rc2 = 1 ] && grep -q \"image 'golden': 1 session serves it now (--force\" '$T/err' &&
		grep -q 'serves it now' '$T/err2' && test -f '$T/dir/golden.ndz' && ! test -e '$T/dir/golden2.ndz'"

# a pending task
ctl nodes add 52:54:00:00:00:01 pc1 >/dev/null && ctl reload pc1 plain >/dev/null
ctl images remove plain 2>"$T/err"; rc=$?
check "remove of an image a task names: refused, exit 1 ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q \"image 'plain': 1 node has a task to reload it\" '$T/err' && test -f '$T/dir/plain.ndz'"
ctl images rename plain golden 2>"$T/err"; rc=$?
check "rename onto an image's name: refused, exit 1 ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q \"image 'golden' already exists\" '$T/err'"
: >"$T/dir/taken.ndz.index"
ctl images rename plain taken 2>"$T/err"; rc=$?
check "rename onto a name whose companion is there: refused, nothing moved ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q 'taken.ndz.index: already there' '$T/err' && test -f '$T/dir/plain.ndz'"
out=$(ctl images rename plain plain2); rc=$?
nodes=$(ctl nodes list -j)
check "rename: the file moved, the task follows ($rc: $out)" \
	sh -c "[ $rc = 0 ] && echo '$out' | grep -q '1 reload task now name it' && test -f '$T/dir/plain2.ndz' &&
		! test -e '$T/dir/plain.ndz' && echo \"\$1\" | grep -q '\"image\":\"plain2\"'" _ "$nodes"
listed plain2 && ! listed plain; rc=$?
check "images list agrees: plain2, no plain ($rc)" test $rc = 0
out=$(ctl images remove plain2 --force); rc=$?
check "remove --force: the task cancelled, the file gone ($rc: $out)" \
	sh -c "[ $rc = 0 ] && echo '$out' | grep -q '1 reload task cancelled' && ! test -e '$T/dir/plain2.ndz'"
! listed plain2; rc=$?
check "images list agrees: no plain2 ($rc)" test $rc = 0

# a forced remove during a download: the session finishes with its client
( in_ns c2 "$FRISBEE" $MC_RAW -M "$SRV" -I golden -T 10 "$T/out" 2>>"$T/c2.log"; echo $? >"$T/c2.rc" ) &
FPID=$!
wait_until 10 test -s "$T/out"
out=$(ctl images remove golden --force); rc=$?
check "remove --force while served ($rc: $out)" \
	sh -c "[ $rc = 0 ] && echo \"\$1\" | grep -q \"1 session of 'golden' finishes with its clients\"" _ "$out"
check "its files are gone: image, manifest, index" \
	sh -c "! test -e '$T/dir/golden.ndz' && ! test -e '$T/dir/golden.ndz.manifest' && ! test -e '$T/dir/golden.ndz.index'"
wait $FPID
check "the running download completes byte for byte ($(cat "$T/c2.rc"))" \
	sh -c "[ \"\$(cat '$T/c2.rc')\" = 0 ] && cmp -s '$T/golden.src' '$T/out'"
! listed golden; rc=$?
check "images list agrees: no golden ($rc)" test $rc = 0
r=$(in_ns c1 "$CTLASK" "$SRV" 3563 golden)
check "a GET for it now: unknown image ($r)" sh -c "echo '$r' | grep -q 'unknown image'"

# an uploaded image, renamed while served (--force): the new name gets a session of its own
r=$(in_ns c1 "$CTLASK" "$SRV" 3563 up1)
out=$(ctl images rename up1 up2 --force); rc=$?
check "rename --force of an uploaded image while served ($rc: $out)" \
	sh -c "[ $rc = 0 ] && test -f '$T/up/up2.ndz' && test -f '$T/up/up2.ndz.index' && ! test -e '$T/up/up1.ndz' && ! test -e '$T/up/up1.ndz.index'"
r2=$(in_ns c1 "$CTLASK" "$SRV" 3563 up2)
listed up2 && ! listed up1; rc=$?
check "the new name is served ($r -> $r2), images list has up2, not up1 ($rc)" \
	sh -c "echo '$r2' | grep -q '^ok ' && [ $rc = 0 ]"
check "the master is still running" kill -0 $MPID
kill $MPID
done_testing
