#!/bin/sh
# Destructive mistakes refused before anything is written: imageunzip and frisbee onto a
# target in use (a mounted loop device, the file behind one under any name, a disk with
# a partition mounted through a loop device at an offset, a mount in another mount
# namespace), imagezip onto a device node (/dev/full, a node made here, a disk named
# with the arguments swapped), a file that is not an image or a symbolic link; --force
# overrides what it may, and an unmounted device or an old image is still accepted.
. "$NDZ_TOP/tests/lib.sh"
[ "$(id -u)" = 0 ] || skip_all "needs root for loop devices and mounts"
for t in losetup mke2fs mount umount unshare mknod sfdisk stat; do
	command -v $t >/dev/null || skip_all "$t missing"
done

# attach FILE [LOSETUP OPTIONS]: sets L; at exit whatever still backs FILE is detached
# (by its file, never by a number another test may have been given since)
attach() {
	_f=$1; shift
	L=$(losetup -f --show "$@" "$_f" 2>/dev/null) || return 1
	at_exit "for l in \$(losetup -n -O NAME -j '$_f'); do losetup -d \$l; done"
}
# mnt DEV DIR: a read-only mount (nothing but a restore could change the bytes), undone
# at exit
mnt() { mkdir -p "$2" && mount -o ro "$1" "$2" && at_exit "umount '$2'"; }

# refused DESC PATTERN FILE CMD...: CMD exits 1 with PATTERN in its message, FILE unchanged
refused() {
	_d=$1 _p=$2 _f=$3; shift 3
	cp "$_f" "$T/before"
	"$@" >"$T/out" 2>"$T/err"; _rc=$?
	if [ $_rc = 1 ] && grep -q -F -- "$_p" "$T/err" && cmp -s "$_f" "$T/before"; then
		ok "$_d"
	else
		not_ok "$_d (exit $_rc, $(cmp "$_f" "$T/before" >/dev/null 2>&1 && echo unchanged ||
			echo WRITTEN): $(head -c 300 "$T/err")"
	fi
}
# restored DESC DEV: DEV begins with the source's bytes
restored() { check "$1" cmp -s -n 4194304 "$T/src" "$2"; }

head -c 4194304 /dev/urandom >"$T/src"
"$IMAGEZIP" -q -r "$T/src" "$T/img.ndz" || { not_ok "imagezip of the source"; done_testing; }
truncate -s 16M "$T/fs.img"
mke2fs -q -F -t ext4 -E lazy_itable_init=0,lazy_journal_init=0 "$T/fs.img" ||
	{ not_ok "mke2fs"; done_testing; }
attach "$T/fs.img" || skip_all "no loop devices here"
L1=$L
mnt "$L1" "$T/m" || skip_all "cannot mount ext4 through a loop device here"

# ---- imageunzip onto what is mounted ----
refused "imageunzip onto a mounted loop device: refused, named, nothing written" \
	"$L1 is mounted on $T/m; use --force to write anyway" "$T/fs.img" \
	"$IMAGEUNZIP" "$T/img.ndz" "$L1"
refused "imageunzip onto the file behind a mounted loop device: refused" \
	"$T/fs.img backs $L1, which is mounted on $T/m" "$T/fs.img" \
	"$IMAGEUNZIP" "$T/img.ndz" "$T/fs.img"
ln "$T/fs.img" "$T/other-name"
refused "the same file under another name (a hard link): refused" \
	"$T/other-name backs $L1, which is mounted on $T/m" "$T/fs.img" \
	"$IMAGEUNZIP" "$T/img.ndz" "$T/other-name"
ln -s "$T/other-name" "$T/sym-name"
refused "the same file through a symbolic link: refused" \
	"backs $L1, which is mounted on $T/m" "$T/fs.img" \
	"$IMAGEUNZIP" -z "$T/img.ndz" "$T/sym-name"

# ---- --force, then the same device unmounted ----
"$IMAGEUNZIP" --force "$T/img.ndz" "$L1" 2>"$T/err"; rc=$?
check "imageunzip --force onto the mounted device: exit 0 ($(head -c 200 "$T/err"))" [ $rc = 0 ]
restored "imageunzip --force: the image is on the device" "$L1"
umount "$T/m"
# the kernel lets the device go when the last holder does: a copy of the mount in a
# mount namespace another test (or ip netns exec) made meanwhile, udev's probe after
# the unmount; wait for an exclusive open before asking imageunzip for one
free_dev() { python3 -c 'import os, sys; os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_EXCL))' "$1" 2>/dev/null; }
wait_until 60 free_dev "$L1" || echo "# $L1 still held 60 s after the unmount"
dd if=/dev/zero of="$L1" bs=1M count=4 conv=fsync status=none
"$IMAGEUNZIP" "$T/img.ndz" "$L1" 2>"$T/err"; rc=$?
check "an unmounted loop device is still accepted ($(head -c 200 "$T/err"))" [ $rc = 0 ]
restored "the unmounted device holds the image" "$L1"
"$IMAGEUNZIP" -f "$T/img.ndz" "$T/fs.img" 2>"$T/err"; rc=$?
check "the file behind an attached but unmounted loop device is accepted" [ $rc = 0 ]

# ---- imageunzip -s N into a disk whose partition is mounted at an offset ----
truncate -s 24M "$T/disk"
printf 'label: dos\nstart=2048, size=32768, type=83\n' | sfdisk -q "$T/disk" >/dev/null 2>&1 ||
	not_ok "sfdisk"
truncate -s 16M "$T/p1"
mke2fs -q -F -t ext4 -E lazy_itable_init=0,lazy_journal_init=0 "$T/p1"
dd if="$T/p1" of="$T/disk" bs=1M seek=1 conv=notrunc status=none
"$IMAGEZIP" -q -s 1 "$T/disk" "$T/p1.ndz" || not_ok "imagezip -s 1"
attach "$T/disk"; LD=$L
attach "$T/disk" -o 1048576 --sizelimit 16777216; LP=$L
mnt "$LP" "$T/m2" || not_ok "mount the partition through a loop device at an offset"
refused "imageunzip -s 1 into the disk's loop device, partition mounted at an offset: refused" \
	"$LD shares its backing file with $LP, which is mounted on $T/m2" "$T/disk" \
	"$IMAGEUNZIP" -s 1 "$T/p1.ndz" "$LD"
refused "imageunzip -s 1 into the disk file itself: refused" \
	"$T/disk backs $LP, which is mounted on $T/m2" "$T/disk" \
	"$IMAGEUNZIP" -s 1 "$T/p1.ndz" "$T/disk"
umount "$T/m2"
losetup -d "$LP"
# loop devices over the disk's loop device: one the target, one the mounted partition
attach "$LD"; LQ=$L
attach "$LD" -o 1048576 --sizelimit 16777216; LR=$L
mnt "$LR" "$T/m2" || not_ok "mount the partition through a loop device over a loop device"
refused "imageunzip -s 1 into a loop device over the disk's, partition mounted: refused" \
	"$LQ is backed by $LD, which backs $LR, which is mounted on $T/m2" "$T/disk" \
	"$IMAGEUNZIP" -s 1 "$T/p1.ndz" "$LQ"
umount "$T/m2"
losetup -d "$LR"
losetup -d "$LQ"
# a detach the kernel defers while something still has the device open (udev's probe
# after the unmount, on a loaded machine) leaves it backed by $LD a while: wait
detached() { [ ! -e "/sys/block/${1#/dev/}/loop/backing_file" ]; }
wait_until 60 detached "$LR" && wait_until 60 detached "$LQ" && wait_until 60 free_dev "$LD" ||
	echo "# $LR or $LQ still attached, or $LD held, after 60 s"
"$IMAGEUNZIP" -s 1 "$T/p1.ndz" "$LD" 2>"$T/err"; rc=$?
check "imageunzip -s 1 once the partition is unmounted: exit 0 ($(head -c 200 "$T/err"))" \
	[ $rc = 0 ]

# ---- a mount this process cannot see (another mount namespace): the exclusive open ----
mkdir -p "$T/m3"
cp "$T/p1" "$T/fs3.img"
attach "$T/fs3.img"; L3=$L
unshare -m --propagation private sh -c \
	"mount -o ro '$L3' '$T/m3' && touch '$T/ns.up' && exec sleep 300" 2>/dev/null &
nspid=$!
at_exit "[ -e '$T/ns.done' ] || kill $nspid"
k=0
while [ ! -e "$T/ns.up" ] && kill -0 $nspid 2>/dev/null && [ $k -lt 100 ]; do
	sleep 0.1; k=$((k + 1))
done
if [ -e "$T/ns.up" ]; then
	refused "imageunzip onto a device mounted in another mount namespace: refused" \
		"$L3 is in use (the kernel refuses an exclusive open" "$T/fs3.img" \
		"$IMAGEUNZIP" "$T/img.ndz" "$L3"
else
	echo "# cannot mount in a mount namespace of our own: exclusive open not checked"
fi
kill $nspid 2>/dev/null; wait $nspid 2>/dev/null; : >"$T/ns.done"

# ---- imagezip onto what is not an image ----
# /dev/full: in a mount namespace of our own with a /dev of our own, so that even a
# build without the check replaces nothing of the machine's
# shellcheck disable=SC2016
unshare -m --propagation private sh -c '
	mount -t tmpfs ndzdev /dev && mknod -m 666 /dev/null c 1 3 &&
	mknod -m 666 /dev/full c 1 7 && mknod -m 444 /dev/urandom c 1 9 || exit 9
	"$1" -q -r "$2" /dev/full 2>"$3/full.err"; echo $? >"$3/full.rc"
	stat -c %F /dev/full >"$3/full.type"' sh "$IMAGEZIP" "$T/src" "$T" 2>/dev/null
if [ -s "$T/full.type" ]; then
	check "imagezip onto /dev/full: exit 1, named ($(cat "$T/full.err"))" \
		sh -c "[ \"\$(cat '$T/full.rc')\" = 1 ] &&
			grep -q -F '/dev/full is a character device, not an image file' '$T/full.err'"
	check "imagezip onto /dev/full: still the device" \
		[ "$(cat "$T/full.type")" = "character special file" ]
else
	echo "# cannot make a /dev of our own: /dev/full not checked"
fi
mknod "$T/node" c 1 7
"$IMAGEZIP" -q -r --force "$T/src" "$T/node" 2>"$T/err"; rc=$?
check "imagezip --force onto a device node made here: exit 1, named" \
	sh -c "[ $rc = 1 ] && grep -q -F '$T/node is a character device, not an image file' '$T/err'"
check "the node is still a character device 1:7" \
	[ "$(stat -c '%F %t:%T' "$T/node")" = "character special file 1:7" ]
# arguments swapped: an image as the source, a disk as the image
maj=$((0x$(stat -c %t "$L1"))) min=$((0x$(stat -c %T "$L1")))
mknod "$T/sda" b "$maj" "$min"
cp "$T/fs.img" "$T/before"
"$IMAGEZIP" "$T/img.ndz" "$T/sda" 2>"$T/err"; rc=$?
check "imagezip IMAGE DISK (arguments swapped): exit 1, suggests imageunzip" \
	sh -c "[ $rc = 1 ] && grep -q -F '$T/sda is a block device, not an image file (imageunzip IMAGE DEVICE' '$T/err'"
check "arguments swapped: the disk node is still a block device, its bytes unchanged" \
	sh -c "[ \"\$(stat -c %F '$T/sda')\" = 'block special file' ] && cmp -s '$T/fs.img' '$T/before'"
ln -s "$T/sda" "$T/by-id"
"$IMAGEZIP" -f "$T/img.ndz" "$T/by-id" 2>"$T/err"; rc=$?
check "imagezip -f onto a symbolic link to a disk: exit 1, the link stays" \
	sh -c "[ $rc = 1 ] && grep -q -F 'is a link to a block device' '$T/err' && [ -L '$T/by-id' ]"

printf 'notes worth keeping\n' >"$T/notes.txt"
refused "imagezip onto an existing file that is not an image: refused, unchanged" \
	"$T/notes.txt exists and is not an image; use --force to replace it" "$T/notes.txt" \
	"$IMAGEZIP" -q -r "$T/src" "$T/notes.txt"
head -c 8192 /dev/urandom >"$T/noise"
refused "imagezip onto a file of random bytes: refused, unchanged" \
	"$T/noise exists and is not an image" "$T/noise" "$IMAGEZIP" -q -r "$T/src" "$T/noise"
cp "$T/img.ndz" "$T/real.ndz"
ln -s "$T/real.ndz" "$T/link.ndz"
refused "imagezip onto a symbolic link (to an image): refused, the image it names unchanged" \
	"$T/link.ndz is a symbolic link" "$T/real.ndz" "$IMAGEZIP" -q -r "$T/src" "$T/link.ndz"

# ---- what may be replaced ----
head -c 2097152 /dev/urandom >"$T/src2"
"$IMAGEZIP" -q -r "$T/src2" "$T/real.ndz" 2>"$T/err"; rc=$?
check "imagezip onto an existing image: exit 0 ($(head -c 200 "$T/err"))" [ $rc = 0 ]
rm -f "$T/out2"
check "the image replaced holds the new source" \
	sh -c "'$IMAGEUNZIP' -q '$T/real.ndz' '$T/out2' && cmp -s '$T/src2' '$T/out2'"
"$IMAGEZIP" -q -r --force "$T/src2" "$T/notes.txt" 2>"$T/err"; rc=$?
check "imagezip --force onto a file that is not an image: exit 0, now an image" \
	sh -c "[ $rc = 0 ] && '$IMAGEUNZIP' -n '$T/notes.txt'"
cp "$T/real.ndz" "$T/before"
"$IMAGEZIP" -q -r -f "$T/src2" "$T/link.ndz" 2>"$T/err"; rc=$?
check "imagezip -f onto a symbolic link: exit 0, the link replaced, the image it named kept" \
	sh -c "[ $rc = 0 ] && [ ! -L '$T/link.ndz' ] && '$IMAGEUNZIP' -n '$T/link.ndz' &&
		cmp -s '$T/real.ndz' '$T/before'"
: >"$T/empty.ndz"
"$IMAGEZIP" -q -r "$T/src2" "$T/empty.ndz" 2>"$T/err"; rc=$?
check "imagezip onto an empty file (mktemp's): exit 0" [ $rc = 0 ]
rm -f "$T/out3"
"$IMAGEZIP" -q -r "$T/src2" - | "$IMAGEUNZIP" -q - "$T/out3"
check "imagezip to stdout is as before" cmp -s "$T/src2" "$T/out3"
# ---- frisbee onto what is mounted, against a real server in a namespace LAN ----
# Last: every process ip netns exec starts holds a copy of the mount, which keeps the
# loop device busy a while after the unmount.
cp "$T/p1" "$T/fsf.img"
attach "$T/fsf.img"; L1=$L
mnt "$L1" "$T/mf" || not_ok "mount for frisbee"
. "$NDZ_TOP/tests/netns.sh"
if netns_usable && netns_lan && netns_host srv 1 && netns_host c1 2; then
	mc_server srv "$T/img.ndz" -T 60
	cp "$T/fsf.img" "$T/fbefore"
	rm -f "$T/c1.rc" "$T/c1.log"
	mc_client c1 "$L1" -T 20 -vv
	mc_wait
	check "frisbee onto a mounted loop device: exit 1, named, before joining" \
		sh -c "[ '$(mc_rc c1)' = 1 ] && grep -q -F '$L1 is mounted on $T/mf; use --force' \
			'$T/c1.log' && ! grep -q 'join sent' '$T/c1.log'"
	check "frisbee onto a mounted loop device: nothing written" cmp -s "$T/fsf.img" "$T/fbefore"
	rm -f "$T/c1.rc" "$T/c1.log"
	mc_client c1 "$T/fsf.img" -T 20
	mc_wait
	check "frisbee onto the file behind a mounted loop device: exit 1, named" \
		sh -c "[ '$(mc_rc c1)' = 1 ] && grep -q -F 'fsf.img backs $L1, which is mounted' '$T/c1.log'"
	check "frisbee onto that file: nothing written" cmp -s "$T/fsf.img" "$T/fbefore"
	rm -f "$T/c1.rc" "$T/c1.log"
	mc_client c1 "$L1" -T 20 --force
	mc_wait
	check "frisbee --force onto the mounted loop device: exit 0" [ "$(mc_rc c1)" = 0 ]
	restored "frisbee --force: the image is on the device" "$L1"
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
else
	echo "# network namespaces unusable: frisbee against a server not run"
	refused "frisbee onto a mounted loop device: refused before joining" \
		"$L1 is mounted on $T/mf; use --force" "$T/fsf.img" \
		unshare -n "$FRISBEE" -m 239.255.0.1 -p 9 -T 2 "$L1"
fi

done_testing
