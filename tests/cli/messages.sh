#!/bin/sh
# Messages and refusals an operator meets (issue 25): multicast groups in the link-local
# control block, source and output being one file, mfrisbeed --check opening the images,
# address lists written "a, b", and the master saying who was denied and why.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
MFRISBEED="$NDZ_BIN/mfrisbeed"
UPLOAD="$NDZ_BIN/frisbee-upload"

# -m in 224.0.0.0/24 (all-hosts, routers) or not multicast at all: usage errors
head -c 65536 /dev/urandom >"$T/src"
"$IMAGEZIP" -q "$T/src" "$T/x.ndz" || not_ok "make an image"
# (a server that takes the group serves on: cut it short, the test fails, not hangs)
timeout 10 "$FRISBEED" -m 224.0.0.1 -p 5000 "$T/x.ndz" 2>"$T/err"; rc=$?
check "frisbeed -m 224.0.0.1 (all-hosts): exit 2, the control block named ($rc)" \
	sh -c "[ $rc = 2 ] && grep -q '^frisbeed: -m 224.0.0.1: in 224.0.0.0/24, the link-local control block' '$T/err'"
timeout 10 "$FRISBEE" -m 224.0.0.251 -p 5000 -T 2 "$T/out" 2>"$T/err"; rc=$?
check "frisbee -m 224.0.0.251: exit 2, nothing created ($rc)" \
	sh -c "[ $rc = 2 ] && grep -q '^frisbee: -m 224.0.0.251: in 224.0.0.0/24' '$T/err' && [ ! -e '$T/out' ]"
timeout 10 "$FRISBEE" -m 10.1.2.3 -p 5000 -T 2 "$T/out" 2>"$T/err"; rc=$?
check "frisbee -m 10.1.2.3: exit 2, not multicast ($rc)" \
	sh -c "[ $rc = 2 ] && grep -q '^frisbee: -m 10.1.2.3: not an IPv4 multicast address' '$T/err'"

# SOURCE and IMAGE, IMAGE and TARGET: one file by any name is refused, nothing written
cp "$T/x.ndz" "$T/keep.ndz"
ln -s "$T/x.ndz" "$T/sym.ndz"
ln "$T/x.ndz" "$T/hard.ndz"
timeout 60 "$IMAGEUNZIP" "$T/sym.ndz" "$T/hard.ndz" 2>"$T/err"; rc=$?
check "imageunzip IMAGE TARGET, a symlink and a hard link of one file: exit 2, image intact ($rc)" \
	sh -c "[ $rc = 2 ] && grep -q 'are the same file' '$T/err' && cmp -s '$T/x.ndz' '$T/keep.ndz'"
timeout 60 "$IMAGEUNZIP" - "$T/x.ndz" <"$T/x.ndz" 2>"$T/err"; rc=$?
check "imageunzip - TARGET, stdin the target: exit 2, image intact ($rc)" \
	sh -c "[ $rc = 2 ] && grep -q 'are the same file' '$T/err' && cmp -s '$T/x.ndz' '$T/keep.ndz'"
cp "$T/src" "$T/src.keep"
"$IMAGEZIP" -f "$T/src" "$T/./src" 2>"$T/err"; rc=$?
check "imagezip -f SOURCE SOURCE: exit 2, source intact ($rc)" \
	sh -c "[ $rc = 2 ] && grep -q 'are the same file' '$T/err' && cmp -s '$T/src' '$T/src.keep'"
if [ "$(id -u)" = 0 ] && L=$(losetup -f --show "$T/x.ndz" 2>/dev/null); then
	at_exit '[ -z "$L" ] || losetup -d "$L"'
	"$IMAGEUNZIP" -f "$L" "$T/x.ndz" 2>"$T/err"; rc=$?
	check "imageunzip of a loop device onto its backing file: exit 2, image intact ($rc)" \
		sh -c "[ $rc = 2 ] && grep -q 'are the same file' '$T/err' && cmp -s '$T/x.ndz' '$T/keep.ndz'"
	"$IMAGEUNZIP" -f "$T/sym.ndz" "$L" 2>"$T/err"; rc=$?
	check "imageunzip of a file onto the loop device it backs: exit 2, image intact ($rc)" \
		sh -c "[ $rc = 2 ] && grep -q 'are the same file' '$T/err' && cmp -s '$T/x.ndz' '$T/keep.ndz'"
	losetup -d "$L" && L=""
else
	ok "# SKIP loop devices need root"
	ok "# SKIP loop devices need root"
fi
"$IMAGEUNZIP" "$T/x.ndz" "$T/restored" && cmp -s "$T/src" "$T/restored"
check "different files still restore" [ $? = 0 ]

# mfrisbeed --check: every image opened; a pool in the control block; lists "a, b"
"$IMAGEZIP" -q --to-orig "$T/src" "$T/orig.ndz" || not_ok "make an original-format image"
head -c 3000000 /dev/urandom >"$T/raw.img"
cat >"$T/c.conf" <<CONF
image good $T/x.ndz allow 10.0.0.0/8, 192.168.1.0/24 ,172.16.0.1
image old $T/orig.ndz allow 10.0.0.0/8
image typo $T/x.nzd allow 10.0.0.0/8
image raw $T/raw.img allow 10.0.0.0/8
image nobody $T/x.ndz
CONF
"$MFRISBEED" -n -c "$T/c.conf" 2>"$T/err"; rc=$?
check "--check: exit 1 ($rc)" [ $rc = 1 ]
check "--check names the misspelled path" \
	grep -qx "mfrisbeed: image typo: $T/x.nzd: No such file or directory" "$T/err"
check "--check names the file that is no image" \
	grep -qx "mfrisbeed: image raw: $T/raw.img: not an image (no chunk header at its start)" "$T/err"
check "--check warns about an image no address may fetch" \
	grep -qx "mfrisbeed: warning: image nobody: no allow list: no address may fetch it" "$T/err"
check "--check takes ours and the original format, and 'allow a, b ,c' (only 2 errors)" \
	sh -c "[ \$(grep -c '^mfrisbeed: image ' '$T/err') = 2 ]"
grep -v -e '^image typo' -e '^image raw' -e '^image nobody' "$T/c.conf" >"$T/c2.conf"
"$MFRISBEED" -n -c "$T/c2.conf" 2>"$T/err"; rc=$?
check "--check of the good images: exit 0, silent ($rc)" sh -c "[ $rc = 0 ] && [ ! -s '$T/err' ]"
printf 'pool 224.0.0.0/24\nimage good %s allow 10.0.0.0/8\n' "$T/x.ndz" >"$T/c3.conf"
"$MFRISBEED" -n -c "$T/c3.conf" 2>"$T/err"; rc=$?
check "pool 224.0.0.0/24: exit 1, the control block named ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q \"c3.conf:1: bad pool '224.0.0.0/24': it holds part of 224.0.0.0/24\" '$T/err'"
printf 'image good %s allow 10.0.0.1,\n' "$T/x.ndz" >"$T/c4.conf"
"$MFRISBEED" -n -c "$T/c4.conf" 2>"$T/err"; rc=$?
check "'allow 10.0.0.1,': exit 1, the list syntax shown ($rc)" \
	sh -c "[ $rc = 1 ] && grep -qF 'c4.conf:1: empty entry in an address list (ADDR[/LEN],ADDR[/LEN],...)' '$T/err'"

# the master: who was denied and why; names no image can have; a raw disk uploaded
"$FRISBEE" -M 127.0.0.1:9 -I "my image" "$T/out" 2>"$T/err"; rc=$?
check "frisbee -I 'my image': exit 2, not a valid image name ($rc)" \
	sh -c "[ $rc = 2 ] && grep -q \"^frisbee: -I: 'my image' is not a valid image name (1 to 64 letters\" '$T/err'"
"$UPLOAD" -M 127.0.0.1:9 -I "my image" "$T/x.ndz" 2>"$T/err"; rc=$?
check "frisbee-upload -I 'my image': exit 2, not a valid image name ($rc)" \
	sh -c "[ $rc = 2 ] && grep -q \"not a valid image name (1 to 64 letters\" '$T/err'"
truncate -s 4G "$T/disk.raw"
"$UPLOAD" -w 2 -M 127.0.0.1:9 -I disk "$T/disk.raw" 2>"$T/err"; rc=$?
check "frisbee-upload of a raw 4 GiB disk: exit 1, 'not an image' before connecting ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q '^frisbee-upload: $T/disk.raw: not an image (no chunk header' '$T/err'"
rm -f "$T/disk.raw"
netns_require
SRV=10.77.0.1
netns_lan && netns_host srv 1 && netns_host c1 11 && netns_host c2 12 ||
	{ not_ok "namespace LAN"; done_testing; }
mkdir -p "$T/up" "$T/run"
cat >"$T/m.conf" <<CONF
pool 239.192.9.0/29
ports 5300-5307
quota 10M
upload-dir $T/up allow 10.77.0.12 upload 10.77.0.12
image a $T/x.ndz allow 10.77.0.12, 10.77.0.13
CONF
ip netns exec "${NETNS_PFX}srv" "$MFRISBEED" -c "$T/m.conf" -r "$T/run" -v 2>"$T/m.log" &
MPID=$!
at_exit "kill $MPID 2>/dev/null"
wait_until 3 master_listens
in_ns c1 timeout 60 "$FRISBEE" -M "$SRV" -I a -T 5 "$T/out1" 2>"$T/err"; rc=$?
check "a denied GET: exit 1, the client's address and the missing rule named ($rc)" \
	sh -c "[ $rc = 1 ] && grep -qx \"frisbee: master $SRV:3563: image 'a': access denied: no allow rule matches 10.77.0.11 for image 'a'\" '$T/err'"
check "the master's log says the same" \
	grep -q "10.77.0.11 asks for a: access denied: no allow rule matches 10.77.0.11 for image 'a'" "$T/m.log"
in_ns c1 "$UPLOAD" -w 5 -M "$SRV" -I a "$T/x.ndz" 2>"$T/err"; rc=$?
check "a denied upload: refused, the uploader's address named ($rc)" \
	sh -c "[ $rc != 0 ] && grep -q \"access denied: no upload rule matches 10.77.0.11 for image 'a'\" '$T/err'"
in_ns c2 "$UPLOAD" -w 5 -M "$SRV" -I a "$T/x.ndz" 2>"$T/err"; rc=$?
check "an upload from the allowed host is still refused for 'a' (no upload list), not lost ($rc)" \
	sh -c "[ $rc != 0 ] && grep -q 'no upload rule matches 10.77.0.12' '$T/err'"
in_ns c2 "$UPLOAD" -w 5 -M "$SRV" -I new "$T/x.ndz" 2>"$T/err"; rc=$?
check "an upload of a new name from the allowed host is stored ($rc)" \
	sh -c "[ $rc = 0 ] && cmp -s '$T/x.ndz' '$T/up/new.ndz'"
kill "$MPID" 2>/dev/null
wait "$MPID" 2>/dev/null
done_testing
