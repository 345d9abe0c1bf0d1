#!/bin/sh
# The lab seeds by lineage: a node whose disk last held image A (an ok reload or
# capture, or part of it after a failed reload) gets a seeded, verified reload of A's
# next version (the same name, or an image captured over a disk that held A), a full
# one of an unrelated image; --full (and "full" in POST /lab) overrides; what the
# disks hold survives a master restart. End to end in namespaces: the master and
# ndzctl node reload a real ext4 image, then a changed version of it, seeded (chunks
# skipped, verified, the disk byte for byte the new version).
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
CTL="$NDZ_BIN/ndzctl"
"$CTL" -m "$T/none" capture pc1 x --full 2>"$T/err"; rc=$?
check "--full with capture: exit 2 ($rc)" \
	sh -c "[ $rc = 2 ] && grep -q -- '--full, --zero and --verify go with reload' '$T/err'"
"$CTL" -m "$T/none" reload pc1 x --full --seed 2>"$T/err"; rc=$?
check "--full with --seed: exit 2 ($rc)" sh -c "[ $rc = 2 ] && grep -q 'seeds or is full' '$T/err'"
"$CTL" --help | grep -q -- '--full' && ok "--help names --full" || not_ok "--help names --full"

netns_require mkfs.ext4 debugfs
[ -x "$IMAGEZIP" ] || skip_all "imagezip not built"
netns_lab
M1=52:54:00:00:00:01 M2=52:54:00:00:00:02 M3=52:54:00:00:00:03
mkdir -p "$T/run" "$T/up" "$T/src"

# a real ext4 of incompressible files and text; v2 adds a file with debugfs (new
# blocks, the bitmaps, inode table and directory they touch)
head -c $(( 6 * 1024 * 1024 )) /dev/urandom >"$T/src/a"
head -c $(( 6 * 1024 * 1024 )) /dev/urandom >"$T/src/b"
yes "ndz lab seed test line" | head -c $(( 4 * 1024 * 1024 )) >"$T/src/t"
truncate -s 32M "$T/v1.img"
mkfs.ext4 -q -F -b 4096 -d "$T/src" "$T/v1.img" >/dev/null 2>&1 ||
	{ not_ok "mkfs.ext4 -d"; done_testing; }
cp "$T/v1.img" "$T/v2.img"
head -c $(( 1024 * 1024 )) /dev/urandom >"$T/new"
debugfs -w -R "write $T/new new" "$T/v2.img" >/dev/null 2>&1 || not_ok "debugfs write"
"$IMAGEZIP" -q "$T/v1.img" "$T/v1.ndz" && "$IMAGEZIP" -q "$T/v2.img" "$T/v2.ndz" ||
	{ not_ok "imagezip v1 and v2"; done_testing; }
cp "$T/v1.ndz" "$T/lab.ndz" && cp "$T/v1.ndz.index" "$T/lab.ndz.index"
: >"$T/other.ndz"
cat >"$T/m.conf" <<CONF
pool 239.192.5.0/29
ports 5300-5307
idle-timeout 2
image lab $T/lab.ndz allow 10.77.0.0/24
image other $T/other.ndz allow 10.77.0.0/24
upload-dir $T/up allow 10.77.0.0/24 upload 10.77.0.0/24
CONF
master() {
	ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -v -c "$T/m.conf" -r "$T/run" \
		2>>"$T/m.log" &
	MPID=$!
	wait_until 5 test -S "$T/run/admin"
}
at_exit 'kill $MPID 2>/dev/null'
master || { not_ok "the master starts"; cat "$T/m.log"; done_testing; }
ctl() { "$CTL" -m "$T/run/admin" "$@"; }
# node HOST MAC DISK: ndzctl node in HOST; the result line in $T/out, status in rc
node() {
	in_ns "$1" env PATH="$NDZ_BIN:$PATH" "$CTL" -m $SRV node --timeout 10 "$2" "$3" \
		>"$T/out" 2>"$T/err"; rc=$?
}
# line MAC: the node's JSON object of nodes list --json
seed_of() { ctl nodes list --json | sed 's/{"mac"/\n{"mac"/g' | grep "\"mac\":\"$1\"" |
	sed -n 's/.*"seed":"\([a-z]*\)".*/\1/p'; }
disk_of() { ctl nodes list --json | sed 's/{"mac"/\n{"mac"/g' | grep "\"mac\":\"$1\"" |
	sed -n 's/.*"disk":\(null\|{[^}]*}\).*/\1/p'; }
skipped() { sed -n 's/.*, \([0-9]*\) of \([0-9]*\) chunks skipped.*/\1 \2/p' "$T/out"; }
ctl nodes add $M1 pc1 room >/dev/null && ctl nodes add $M2 pc2 room >/dev/null &&
	ctl nodes add $M3 pc3 >/dev/null || not_ok "nodes add"

# a disk not known: the first reload is full
ctl reload room lab >/dev/null
check "nothing known of the disks: full ($(seed_of $M1), $(disk_of $M1))" \
	sh -c "[ '$(seed_of $M1)' = no ] && [ '$(disk_of $M1)' = null ]"
node n1 $M1 "$T/d1"
check "pc1 reloads v1 full: ok ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 0 ] && grep -q '^NDZ-RESULT: ok: ' '$T/out' && ! grep -q 'skipped' '$T/out'"
node n2 $M2 "$T/d2"
check "pc2 too ($rc)" test $rc = 0
"$IMAGEUNZIP" -q "$T/v1.ndz" "$T/ref1" 2>/dev/null
check "both disks are v1 byte for byte" sh -c "cmp -s '$T/ref1' '$T/d1' && cmp -s '$T/ref1' '$T/d2'"
check "the disks hold lab, whole ($(disk_of $M1))" \
	test "$(disk_of $M1)" = '{"image":"lab","partial":false}'
ctl status --json >/dev/null
check "the state file has what pc1's disk holds, with the image's uuid" \
	grep -Eq "^disk $M1 no lab [0-9a-f]{32} lab whole\$" "$T/run/lab"

# the next version of lab (the same name, a new file): seeded and verified by default
# (a session of lab still running would serve the file it holds open)
wait_until 20 grep -q "session of lab ended" "$T/m.log" || not_ok "the session of v1 ends"
mv "$T/lab.ndz" "$T/lab.v1" && cp "$T/v2.ndz.index" "$T/lab.ndz.index" &&
	cp "$T/v2.ndz" "$T/lab.ndz" || not_ok "lab replaced by v2"
out=$(ctl reload pc1 lab)
check "reload pc1 lab says it seeds ($out)" \
	test "$out" = "reload lab: 1 node (1 seeded: its disk holds the image's lineage)"
check "reload pc1 lab: the task seeds by lineage ($(seed_of $M1))" test "$(seed_of $M1)" = lineage
check "... nodes list shows it: --seed --verify (lineage), the disk" \
	sh -c "'$CTL' -m '$T/run/admin' nodes list | grep '^$M1' | grep 'reload lab --seed --verify (lineage)' | grep -q ' lab '"
out=$(in_ns n1 "$CTL" -m $SRV ask $M1 2>/dev/null)
check "... the node is told seed and verify ($out)" test "$out" = "reload lab seed verify"
node n1 $M1 "$T/d1"
set -- $(skipped)
check "pc1 seeded: ok, verified, some chunks skipped and not all ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 0 ] && grep -q ', verified\$' '$T/out' && [ '${1:-0}' -gt 0 ] && [ '${1:-0}' -lt '${2:-0}' ]"
"$IMAGEUNZIP" -q "$T/v2.ndz" "$T/ref2" 2>/dev/null
check "pc1's disk is v2 byte for byte" cmp -s "$T/ref2" "$T/d1"
check "the master has the chunks skipped (${1:-?})" \
	sh -c "ctl() { '$CTL' -m '$T/run/admin' \"\$@\"; }; ctl nodes list --json | grep -q '\"mac\":\"$M1\".*\"last\":{\"ok\":true,\"task\":\"reload\",\"image\":\"lab\",[^}]*\"skipped\":${1:-x},'"

# --full overrides: every chunk written
ctl reload pc2 lab --full >/dev/null
check "reload pc2 lab --full: full ($(seed_of $M2))" test "$(seed_of $M2)" = full
out=$(in_ns n2 "$CTL" -m $SRV ask $M2 2>/dev/null)
check "... the node is told no seed ($out)" test "$out" = "reload lab"
node n2 $M2 "$T/d2"
check "pc2 full: ok, nothing skipped ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 0 ] && ! grep -q 'skipped' '$T/out' && cmp -s '$T/ref2' '$T/d2'"

# an unrelated image: full
ctl reload pc1 other >/dev/null
check "reload pc1 other (unrelated): full ($(seed_of $M1))" test "$(seed_of $M1)" = no

# a capture over a disk that held lab is lab's next version, whatever its name
debugfs -w -R "rm a" "$T/d1" >/dev/null 2>&1
head -c $(( 512 * 1024 )) /dev/urandom >"$T/new3"
debugfs -w -R "write $T/new3 new3" "$T/d1" >/dev/null 2>&1 || not_ok "debugfs on d1"
ctl capture pc1 golden >/dev/null
node n1 $M1 "$T/d1"
check "pc1 captured as golden ($rc: $(cat "$T/out"))" test $rc = 0
# the master made golden's content index as it stored the capture: no imagekey step
check "golden stored with its content index" test -s "$T/up/golden.ndz.index"
check "... images info says so" \
	sh -c "'$CTL' -m '$T/run/admin' images info golden | grep -qx 'index: *$T/up/golden.ndz.index'"
check "golden is of lab's lineage" \
	sh -c "'$CTL' -m '$T/run/admin' nodes list --json | grep -q '\"lineages\":{\"golden\":\"lab\"}'"
ctl reload pc2 golden >/dev/null
cp "$T/d2" "$T/ref3"                   # what a full reload onto the same disk gives
check "reload pc2 golden: seeded by lineage ($(seed_of $M2))" test "$(seed_of $M2)" = lineage
node n2 $M2 "$T/d2"
set -- $(skipped)
check "pc2 seeded with golden: ok, verified, chunks skipped ($rc: $(cat "$T/out"))" \
	sh -c "[ $rc = 0 ] && grep -q ', verified\$' '$T/out' && [ '${1:-0}' -gt 0 ]"
"$IMAGEUNZIP" -q "$T/up/golden.ndz" "$T/ref3" 2>/dev/null
check "pc2's disk is what a full reload of golden makes of it, byte for byte" \
	cmp -s "$T/ref3" "$T/d2"

# a restart: what the disks hold and the lineages come back
ctl reload pc3 lab >/dev/null
kill $MPID; wait $MPID 2>/dev/null
master || { not_ok "the master starts again"; done_testing; }
check "after a restart: pc2 holds golden ($(disk_of $M2))" \
	test "$(disk_of $M2)" = '{"image":"golden","partial":false}'
check "... pc3's task still full, nothing known of its disk ($(seed_of $M3))" \
	test "$(seed_of $M3)" = no
ctl reload pc2 lab >/dev/null
check "... a reload of lab on pc2 (holding golden, of lab's lineage) seeds ($(seed_of $M2))" \
	test "$(seed_of $M2)" = lineage
ctl reload pc2 other >/dev/null
check "... of other does not ($(seed_of $M2))" test "$(seed_of $M2)" = no
ctl cancel room >/dev/null
done_testing
