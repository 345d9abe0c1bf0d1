#!/bin/sh
# Block devices (loop devices over test files): size from BLKGETSIZE64, restores onto
# a device, zero-fill with BLKZEROOUT, --discard with BLKDISCARD, a device too small
# refused before any write.
. "$NDZ_TOP/tests/lib.sh"
command -v losetup >/dev/null || skip_all "losetup missing"
[ "$(id -u)" = 0 ] || skip_all "needs root for loop devices"
L=""
loop() {	# FILE: attaches it, sets $L and registers its removal (in this shell)
	L=$(losetup -f --show "$1" 2>/dev/null) || return 1
	at_exit "losetup -d $L"
}
head -c 5000000 /dev/urandom >"$T/src"
head -c 3000000 /dev/zero >>"$T/src"
truncate -s 8M "$T/src"
loop "$T/src" || skip_all "no loop devices here"
L1=$L

"$IMAGEZIP" -r "$L1" "$T/dev.ndz"
rm -f "$T/back"
"$IMAGEUNZIP" "$T/dev.ndz" "$T/back"
check "imagezip takes a block device's size from the device" \
	test "$(stat -c %s "$T/back")" = 8388608
check "the device's image restores to the device's bytes" cmp -s "$T/src" "$T/back"

head -c 8388608 /dev/zero | tr '\0' '\125' >"$T/tgt"
loop "$T/tgt"; L2=$L
ZR="$NDZ_BUILD/tests/helpers/zipranges"
"$ZR" "$T/src" "$T/gaps.ndz" 100:200 5000:1000
"$IMAGEUNZIP" -z "$T/gaps.ndz" "$L2"
cp "$T/tgt" "$T/got"
head -c 8388608 /dev/zero >"$T/want"
dd if="$T/src" of="$T/want" bs=512 skip=100 seek=100 count=200 conv=notrunc 2>/dev/null
dd if="$T/src" of="$T/want" bs=512 skip=5000 seek=5000 count=1000 conv=notrunc 2>/dev/null
check "restore onto a block device with -z: regions written, the rest zeroed" \
	cmp -s "$T/want" "$T/got"

# --discard: a loop device passes BLKDISCARD on as holes in its file
head -c 8388608 /dev/zero | tr '\0' '\125' >"$T/dtgt"
loop "$T/dtgt"; L4=$L
"$IMAGEUNZIP" --discard "$T/gaps.ndz" "$L4"
check "--discard onto a block device: exit 0" test $? = 0
check "--discard: the regions are written" sh -c \
	"cmp -s -n 51200 -i 51200 '$T/src' '$T/dtgt' && cmp -s -n 512000 -i 2560000 '$T/src' '$T/dtgt'"
check "--discard: the rest was discarded (the loop device's file has holes: $(du -k "$T/dtgt" | cut -f1) KiB)" \
	test "$(du -k "$T/dtgt" | cut -f1)" -lt 4096

head -c 4194304 /dev/zero | tr '\0' '\125' >"$T/small"
cp "$T/small" "$T/small.orig"
loop "$T/small"; L3=$L
"$IMAGEUNZIP" "$T/dev.ndz" "$L3" 2>"$T/e"; rc=$?
check "a device smaller than the image: exit 1, target too small" \
	sh -c "[ $rc -eq 1 ] && grep -q 'target too small' '$T/e'"
check "a device smaller than the image is not written at all" cmp -s "$T/small" "$T/small.orig"
done_testing
