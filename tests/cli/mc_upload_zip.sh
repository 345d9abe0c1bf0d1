#!/bin/sh
# imagezip --upload: a capture sent to the image master in one process; the image it
# stores restores byte-identical, with its content index beside it (the bytes imagekey
# index makes of it: a frisbee --seed from the master skips chunks); an encrypted one
# is stored with none and a log line; a refusal, a rejection (quota) and a master
# killed mid-upload give a non-zero exit with one error, the master's reason, and
# store nothing, neither image nor index.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
out=$("$IMAGEZIP" --help); rc=$?
check "imagezip --help names --upload" sh -c "[ $rc = 0 ] && echo \"\$1\" | grep -q -- '--upload HOST\[:PORT\]:NAME'" _ "$out"
head -c 65536 /dev/urandom >"$T/small"
"$IMAGEZIP" -r --upload 127.0.0.1:x "$T/small" "$T/small.ndz" 2>"$T/err"; rc=$?
check "--upload with an IMAGE too: exit 2 and says so" \
	eval "[ $rc = 2 ] && grep -q '^imagezip: --upload: expected SOURCE only, got 2 arguments' '$T/err'"
"$IMAGEZIP" -r --upload 127.0.0.1 "$T/small" 2>"$T/err"; rc=$?
check "--upload without a NAME: exit 2 and says so" \
	eval "[ $rc = 2 ] && grep -q \"^imagezip: --upload: '127.0.0.1' is not HOST\[:PORT\]:NAME\" '$T/err'"
"$IMAGEZIP" -r --upload '127.0.0.1:my image' "$T/small" 2>"$T/err"; rc=$?
check "--upload of a name no image can have: exit 2 and says so" \
	eval "[ $rc = 2 ] && grep -q \"^imagezip: --upload: 'my image' is not a valid image name\" '$T/err'"
netns_require
MFRISBEED="$NDZ_BIN/mfrisbeed"
SRV=10.77.0.1
netns_lan && netns_host srv 1 || { not_ok "namespace LAN"; done_testing; }
netns_host c1 11 && netns_host far 99 || { not_ok "hosts"; done_testing; }
mkdir -p "$T/up" "$T/run"
# a disk of text and random data: chunks compressed to something real
head -c $(( 3 * 1024 * 1024 )) /dev/urandom >"$T/disk.r"
yes "ndz upload test line" | head -c $(( 4 * 1024 * 1024 )) >"$T/disk.t"
cat "$T/disk.r" "$T/disk.t" "$T/disk.r" >"$T/disk"
head -c $(( 24 * 1024 * 1024 )) /dev/urandom >"$T/big"
cat >"$T/m.conf" <<CONF
pool 239.192.5.0/29
ports 5210-5217
idle-timeout 2
upload-dir $T/up allow 10.77.0.0/27 upload 10.77.0.11
upload-timeout 5
CONF
ip netns exec "${NETNS_PFX}srv" "$MFRISBEED" -c "$T/m.conf" -r "$T/run" -v 2>"$T/m.log" &
MPID=$!
wait_until 2 master_listens
# zip HOST NAME SOURCE [OPTIONS...]: imagezip --upload from HOST; stderr in $T/err, status in rc
zip() {
	zh=$1 zn=$2 zs=$3; shift 3
	in_ns "$zh" "$IMAGEZIP" "$@" --wait 10 --upload "$SRV:$zn" "$zs" 2>"$T/err"; rc=$?
}
msg() { cat "$T/err"; }
# one line: the one error
one() { [ "$(wc -l <"$T/err")" = 1 ]; }
status() { in_ns c1 "$MFRISBEED" --status "$SRV"; }
only() { [ "$(ls -A "$T/up" | tr '\n' ' ')" = "$* " ]; }

zip c1 gold "$T/disk" -r -v
check "imagezip --upload: exit 0, says it was stored ($rc: $(msg))" \
	eval "[ $rc = 0 ] && grep -q \"^stored as image 'gold' on $SRV\$\" '$T/err'"
"$IMAGEUNZIP" -q "$T/up/gold.ndz" "$T/restored" 2>"$T/uz.err"; rc=$?
check "the stored image restores byte-identical, its index beside it, nothing else left" \
	eval "[ $rc = 0 ] && cmp -s '$T/disk' '$T/restored' && only gold.ndz gold.ndz.index"
"$NDZ_BIN/imagekey" -q index -x "$T/ref.index" "$T/up/gold.ndz" || not_ok "imagekey index gold"
check "... the index is the very bytes imagekey index makes of the stored image" \
	cmp -s "$T/ref.index" "$T/up/gold.ndz.index"
check "... with a zstd chunk's pieces (version 2)" \
	sh -c "[ \"\$(od -An -tu2 -j8 -N2 '$T/up/gold.ndz.index' | tr -d ' ')\" = 2 ]"
check "... the master said nothing of a missing index" \
	sh -c "! grep -q 'no content index' '$T/m.log'"
# a seeded reload from the master: the target holds the disk but for its last MiB
cp "$T/disk" "$T/seeded"
head -c 1048576 /dev/urandom | dd of="$T/seeded" bs=1M seek=9 conv=notrunc 2>/dev/null
in_ns c1 "$FRISBEE" -M "$SRV" -I gold --seed -T 10 "$T/seeded" 2>"$T/seed.log"; rc=$?
n=$(sed -n 's/.*; \([0-9]*\) chunks skipped (held by the target).*/\1/p' "$T/seed.log" | tail -1)
check "frisbee --seed from the master: exit 0, the disk again, ${n:-no} chunks skipped ($rc)" \
	sh -c "[ $rc = 0 ] && cmp -s '$T/disk' '$T/seeded' && [ '${n:-0}' -gt 0 ]"
"$IMAGEZIP" -q -r --uuid 0123456789abcdef0123456789abcdef "$T/disk" "$T/local.ndz"
zip c1 gold2 "$T/disk" -r -q --uuid 0123456789abcdef0123456789abcdef
check "... the very bytes imagezip writes into a file ($rc)" \
	eval "[ $rc = 0 ] && cmp -s '$T/local.ndz' '$T/up/gold2.ndz'"
check "... and its index the very bytes imagezip writes beside it" \
	cmp -s "$T/local.ndz.index" "$T/up/gold2.ndz.index"

# an encrypted image: the master cannot read it, so it has no index, and says so; over
# an image that had one, the old index goes
"$NDZ_BIN/imagekey" -q generate -e -o "$T/ek" || not_ok "imagekey generate -e"
zip c1 sealed "$T/disk" -r -q --encrypt "$T/ek.key"
check "encrypted upload: exit 0, stored with no index ($rc: $(msg))" \
	eval "[ $rc = 0 ] && [ -s '$T/up/sealed.ndz' ] && [ ! -e '$T/up/sealed.ndz.index' ]"
check "... the master's log says why" \
	grep -q "^sealed: stored with no content index: sealed: an encrypted image" "$T/m.log"
cp "$T/up/gold2.ndz.index" "$T/gold2.index"
zip c1 gold2 "$T/disk" -r -q --encrypt "$T/ek.key"
check "an encrypted image over one with an index: exit 0, the stale index removed ($rc)" \
	eval "[ $rc = 0 ] && only gold.ndz gold.ndz.index gold2.ndz sealed.ndz"
rm -f "$T/up/sealed.ndz"
cp "$T/local.ndz" "$T/up/gold2.ndz" && cp "$T/gold2.index" "$T/up/gold2.ndz.index"

zip far gold "$T/disk" -r -q
check "a host no upload rule names: exit 1, the master's reason, one line ($rc: $(msg))" \
	eval "[ $rc = 1 ] && one && [ \"\$(msg)\" = \"imagezip: master $SRV:3563: image 'gold': access denied: no upload rule matches 10.77.0.99 for image 'gold'\" ]"
check "... the stored image untouched" eval "only gold.ndz gold.ndz.index gold2.ndz gold2.ndz.index && cmp -s '$T/local.ndz' '$T/up/gold2.ndz'"

# every chunk sent, then imagezip fails (its manifest cannot be written): the upload is
# canceled and the master, which saw a stray byte after the last chunk, stores nothing
"$NDZ_BIN/imagekey" -q generate -o "$T/k" || not_ok "imagekey generate"
zip c1 cut "$T/disk" -r -q --sign "$T/k.sec" --manifest "$T/no/such/dir/cut.manifest"
check "imagezip failing after its last chunk: exit 1, its own error, one line ($rc: $(msg))" \
	eval "[ $rc = 1 ] && one && grep -q '^imagezip: $T/no/such/dir/cut.manifest' '$T/err'"
check "... the master stored nothing" wait_until 4 only gold.ndz gold.ndz.index gold2.ndz gold2.ndz.index
check "... and says why" wait_until 4 grep -q "upload of cut from 10.77.0.11 rejected: .*data after the image's last chunk" "$T/m.log"

used=$(cat "$T"/up/* | wc -c)
echo "quota $(( used + 2 * 1024 * 1024 ))" >>"$T/m.conf"
kill -HUP "$MPID"
sleep 0.3
zip c1 big "$T/disk" -r -q
check "quota exceeded mid-stream: exit 1, the master's reason, one line ($rc: $(msg))" \
	eval "[ $rc = 1 ] && one && grep -q \"^imagezip: master $SRV:3563: image 'big': upload quota exceeded: upload: chunk [0-9]*: past the quota\" '$T/err'"
check "... nothing stored" only gold.ndz gold.ndz.index gold2.ndz gold2.ndz.index
sed -i '/^quota /d' "$T/m.conf"
kill -HUP "$MPID"
sleep 0.3

# the master killed mid-upload: a slow link keeps the upload running meanwhile
netns_shape srv 8mbit
( in_ns c1 "$IMAGEZIP" -q -r --wait 10 --upload "$SRV:late" "$T/big" 2>"$T/err"; echo $? >"$T/rc" ) &
zpid=$!
for k in $(seq 50); do status 2>/dev/null | grep -q '"uploading": \[{"image": "late"' && break; sleep 0.1; done
check "the upload runs" eval "status | grep -q '\"uploading\": \[{\"image\": \"late\"'"
kill -9 "$MPID"; wait "$MPID" 2>/dev/null
wait "$zpid"
rc=$(cat "$T/rc")
check "master killed mid-upload: exit 1, one error naming the master ($rc: $(msg))" \
	eval "[ $rc = 1 ] && one && grep -q \"^imagezip: master $SRV:3563: image 'late': \" '$T/err'"
check "... nothing stored under its name, image or index" \
	eval "[ ! -e '$T/up/late.ndz' ] && [ ! -e '$T/up/late.ndz.index' ]"
done_testing
