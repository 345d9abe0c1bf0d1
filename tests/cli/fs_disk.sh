#!/bin/sh
# Whole MBR and GPT disks mixing ext4, NTFS, FFS in a BSD slice, swap and an
# unknown type; a single partition restored into another disk's partition.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mke2fs e2fsck debugfs mkntfs ntfscp ntfscat ntfsfix makefs mkswap sfdisk sgdisk fdisk \
	mkfs.fat fsck.fat mcopy

DISK=$((160 * MIB))
P=$((32 * MIB))
mkfiles "$T/src" 16 500
names=$(cd "$T/src" && ls)

# the filesystems, each made over random bytes
dirty "$T/ext.img" $P
mke2fs -q -F -E nodiscard -t ext4 -d "$T/src" "$T/ext.img" >/dev/null 2>&1
dirty "$T/ntfs.img" $P
mkntfs -q -F -f "$T/ntfs.img" >/dev/null 2>&1
for f in "$T"/src/*; do ntfscp -q "$T/ntfs.img" "$f" "$(basename "$f")" >/dev/null 2>&1; done
makefs -t ffs -f 32 -o version=2 -s $P "$T/ufs.img" "$T/src" >/dev/null 2>&1
dirty "$T/swap.img" $((16 * MIB))
mkswap -q "$T/swap.img" >/dev/null 2>&1
dirty "$T/esp.img" $((8 * MIB))
mkfs.fat "$T/esp.img" >/dev/null 2>&1
mcopy -i "$T/esp.img" "$T/src/f1" ::/BOOTX64.EFI

check_ext() {	# check_ext DESC DISK START: e2fsck and every file
	extract "$2" "$3" $((P / 512)) "$T/x.ext"
	check "$1: ext4 checks clean" quiet e2fsck -fn "$T/x.ext"
	rm -rf "$T/out"; mkdir "$T/out"
	debugfs -R "rdump / $T/out" "$T/x.ext" >/dev/null 2>&1
	# shellcheck disable=SC2086
	check "$1: ext4 files identical" same_files "$T/src" "$T/out" $names
	rm -f "$T/x.ext"
}
check_ntfs() {	# check_ntfs DESC DISK START
	extract "$2" "$3" $((P / 512)) "$T/x.ntfs"
	check "$1: ntfs checks clean" quiet ntfsfix -n "$T/x.ntfs"
	bad=0
	for f in $names; do
		ntfscat "$T/x.ntfs" "$f" 2>/dev/null | cmp -s - "$T/src/$f" || bad=1
	done
	check "$1: ntfs files identical" test $bad = 0
	rm -f "$T/x.ntfs"
}
check_ufs() {	# check_ufs DESC DISK START
	extract "$2" "$3" $((P / 512)) "$T/x.ufs"
	check "$1: ufs allocated fragments identical" \
		sh -c "'$SCANDUMP' -X '$T/x.ufs' '$T/ufs.img' | grep -qx 'alloc-diff 0'"
	rm -f "$T/x.ufs"
}
same_range() {	# same_range A B START_SECTOR SECTORS
	cmp -s -i $(($3 * 512)) -n $(($4 * 512)) "$1" "$2"
}

# ---- MBR: primaries, a FreeBSD slice with a disklabel, logical partitions ----
mbr="$T/mbr.disk"
dirty "$mbr" $DISK
sfdisk -q "$mbr" >/dev/null 2>&1 <<'SF'
label: dos
start=2048, size=65536, type=83
start=67584, size=65536, type=7
start=133120, size=81920, type=a5
start=215040, type=5
start=217088, size=32768, type=82
start=251904, size=32768, type=da
SF
# a BSD disklabel in the slice (fdisk's nested BSD mode): a = UFS2, b = swap
printf 'b\ny\nn\na\n133136\n198671\nn\nb\n198672\n215039\nt\na\n7\nt\nb\n1\nw\n' |
	fdisk "$mbr" >/dev/null 2>&1
put "$mbr" 2048 "$T/ext.img"
put "$mbr" 67584 "$T/ntfs.img"
put "$mbr" 133136 "$T/ufs.img"
put "$mbr" 217088 "$T/swap.img"
"$IMAGEZIP" -i "$mbr" >"$T/info" 2>&1
check "mbr: -i sees the slice's UFS2 and swap" \
	sh -c "grep -q '3a: .*ufs \[UFS2' '$T/info' && grep -q '3b: .*freebsd-swap' '$T/info'"
check "mbr: -i sees logical partitions" sh -c "grep -q '^  5: .*swap \[linux swap\]' '$T/info' && grep -q '^  6: .*raw' '$T/info'"
if "$IMAGEZIP" "$mbr" "$T/mbr.ndz" 2>"$T/err"; then ok "mbr: imagezip"; else not_ok "mbr: imagezip"; cat "$T/err"; fi
check "mbr: warns about the unknown partition only" \
	sh -c "grep -c warning '$T/err' | grep -qx 1 && grep -q 'partition 6' '$T/err'"
pattern "$T/t.disk" $DISK
check "mbr: imageunzip" "$IMAGEUNZIP" "$T/mbr.ndz" "$T/t.disk"
check "mbr: table and boot-code gap identical" same_range "$mbr" "$T/t.disk" 0 2048
sfdisk -d "$mbr" | sed -n 's/^[^ ]* : //p' >"$T/tab.src"
sfdisk -d "$T/t.disk" | sed -n 's/^[^ ]* : //p' >"$T/tab.tgt"
check "mbr: partition tables (with logical ones) identical" cmp -s "$T/tab.src" "$T/tab.tgt"
check "mbr: BSD boot area and label identical" same_range "$mbr" "$T/t.disk" 133120 16
check_ext mbr "$T/t.disk" 2048
check_ntfs mbr "$T/t.disk" 67584
check_ufs mbr "$T/t.disk" 133136
check "mbr: swap header identical" same_range "$mbr" "$T/t.disk" 217088 8
check "mbr: unknown partition identical" same_range "$mbr" "$T/t.disk" 251904 32768
check "mbr: BSD swap skipped" sh -c "! cmp -s -i $((198672 * 512)) -n 1048576 '$mbr' '$T/t.disk'"
used=$(used_bytes "$mbr")
smaller "$T/mbr.ndz" "$mbr" "$used" "mbr"
rm -f "$T/t.disk"

# BSD partitions inside the slice addressed by letter: 3a left out, 3b taken raw
"$IMAGEZIP" -i -I 3a -R 3b -R 3c "$mbr" >"$T/info" 2>"$T/err"
check "mbr: -I 3a and -R 3b show in -i" \
	sh -c "grep -q '3a: .*ignored' '$T/info' && grep -q '3b: .*raw' '$T/info'"
check "mbr: -R 3c names nothing: a warning" grep -q -- '-R 3c: no such partition here; ignored' "$T/err"
if "$IMAGEZIP" -q -I 3a -R 3b "$mbr" "$T/bsd.ndz"; then ok "mbr: imagezip -I 3a -R 3b"; else not_ok "mbr: imagezip -I 3a -R 3b"; fi
pattern "$T/t.disk" $DISK
check "mbr: imageunzip -I 3a -R 3b image" "$IMAGEUNZIP" "$T/bsd.ndz" "$T/t.disk"
check "mbr: with -R 3b the BSD swap is restored" same_range "$mbr" "$T/t.disk" 198672 16368
check "mbr: with -I 3a the UFS is not written" \
	sh -c "! cmp -s -i $((133136 * 512)) -n 65536 '$mbr' '$T/t.disk' &&
	       [ \"\$(dd if='$T/t.disk' bs=512 skip=133136 count=128 2>/dev/null | tr -d '\\245' | wc -c)\" = 0 ]"
check_ext "mbr -I 3a" "$T/t.disk" 2048
rm -f "$T/t.disk" "$T/bsd.ndz"

# the long names: --fs forces a type (ext read as FAT fails, so it goes raw, and
# nothing else is probed), --raw-part keeps every byte, --ignore-part writes nothing
"$IMAGEZIP" -i --fs 1=fat --raw-part 5 --ignore-part 2 "$mbr" >"$T/info" 2>"$T/err"
check "mbr: --fs 1=fat: partition 1 is read as FAT, not probed as ext" \
	sh -c "grep -q '^  1: .* raw .*(fat: no boot sector; taking it raw)\$' '$T/info' &&
	       grep -q 'partition 1: fat: no boot sector; taking it raw' '$T/err'"
check "mbr: --raw-part 5 and --ignore-part 2 show in -i" \
	sh -c "grep -q '^  5: .* raw .*(raw as asked)' '$T/info' && grep -q '^  2: .* ignored ' '$T/info'"
if "$IMAGEZIP" -q --raw-part 5 --ignore-part 2 "$mbr" "$T/long.ndz"; then
	ok "mbr: imagezip --raw-part 5 --ignore-part 2"
else
	not_ok "mbr: imagezip --raw-part 5 --ignore-part 2"
fi
pattern "$T/t.disk" $DISK
check "mbr: imageunzip --raw-part/--ignore-part image" "$IMAGEUNZIP" "$T/long.ndz" "$T/t.disk"
check "mbr: with --raw-part 5 all of the swap is restored" same_range "$mbr" "$T/t.disk" 217088 32768
check "mbr: with --ignore-part 2 the NTFS is not written" \
	sh -c "[ \"\$(dd if='$T/t.disk' bs=512 skip=67584 count=65536 2>/dev/null | tr -d '\\245' | wc -c)\" = 0 ]"
check_ext "mbr --ignore-part 2" "$T/t.disk" 2048
rm -f "$T/t.disk" "$T/long.ndz"

# ---- GPT: a FreeBSD partition holding the same disklabel (its offsets are
# absolute, so it sits where the MBR slice did), an EFI system partition ----
gpt="$T/gpt.disk"
dirty "$gpt" $DISK
sgdisk -n 1:2048:+32M -t 1:8300 -n 2:67584:+32M -t 2:0700 -n 3:133120:215039 -t 3:a500 \
	-n 4:215040:+16M -t 4:8200 -n 5:247808:+16M -t 5:5e3f1c2a-44a2-4f6b-9f53-0d1c2b3a4f50 \
	-n 6:280576:+8M -t 6:ef00 "$gpt" >/dev/null 2>&1
put "$gpt" 2048 "$T/ext.img"
put "$gpt" 67584 "$T/ntfs.img"
dd if="$mbr" of="$gpt" bs=512 skip=133120 seek=133120 count=16 conv=notrunc status=none
put "$gpt" 133136 "$T/ufs.img"
put "$gpt" 215040 "$T/swap.img"
put "$gpt" 280576 "$T/esp.img"
"$IMAGEZIP" -i "$gpt" >"$T/info" 2>&1
check "gpt: -i sees the FreeBSD partition's disklabel" \
	sh -c "grep -q '3a: .*ufs \[UFS2' '$T/info' && grep -q '3b: .*freebsd-swap' '$T/info'"
if "$IMAGEZIP" "$gpt" "$T/gpt.ndz" 2>"$T/err"; then ok "gpt: imagezip"; else not_ok "gpt: imagezip"; cat "$T/err"; fi
pattern "$T/t.disk" $DISK
check "gpt: imageunzip" "$IMAGEUNZIP" "$T/gpt.ndz" "$T/t.disk"
check "gpt: sgdisk -v finds no problems" sh -c "sgdisk -v '$T/t.disk' | grep -q 'No problems found'"
check "gpt: backup table identical" same_range "$gpt" "$T/t.disk" $((DISK / 512 - 33)) 33
check_ext gpt "$T/t.disk" 2048
check_ntfs gpt "$T/t.disk" 67584
check "gpt: BSD boot area and label identical" same_range "$gpt" "$T/t.disk" 133120 16
check_ufs gpt "$T/t.disk" 133136
check "gpt: unknown partition identical" same_range "$gpt" "$T/t.disk" 247808 32768
extract "$T/t.disk" 280576 16384 "$T/x.esp"
check "gpt: EFI system partition checks clean" quiet fsck.fat -n "$T/x.esp"
mcopy -i "$T/x.esp" ::/BOOTX64.EFI "$T/x.efi"
check "gpt: EFI loader identical" cmp -s "$T/src/f1" "$T/x.efi"
smaller "$T/gpt.ndz" "$gpt" "$(used_bytes "$gpt")" "gpt"

# ---- one partition into another disk's partition, at another offset ----
"$IMAGEZIP" -i -s 1 "$mbr" >"$T/info"
check "-s 1 -i: a partition image" grep -q "imaging partition 1 alone (start sector 2048" "$T/info"
check "-s 1: imagezip" "$IMAGEZIP" -s 1 "$mbr" "$T/p1.ndz"
cp "$T/t.disk" "$T/before"
check "-s 2: imageunzip into gpt partition 2" quiet "$IMAGEUNZIP" -s 2 "$T/p1.ndz" "$T/t.disk"
check_ext "-s into partition 2" "$T/t.disk" 67584
check "-s: nothing written before the partition" same_range "$T/before" "$T/t.disk" 0 67584
check "-s: nothing written after the image" same_range "$T/before" "$T/t.disk" 133120 $((DISK / 512 - 133120))
if "$IMAGEUNZIP" -s 4 "$T/p1.ndz" "$T/t.disk" 2>"$T/err"; then
	not_ok "-s 4: a too small partition is refused"
else
	check "-s 4: a too small partition is refused" grep -q "partition 4: target too small" "$T/err"
fi
"$IMAGEUNZIP" -s 9 "$T/p1.ndz" "$T/t.disk" 2>"$T/err"
check "-s 9: no such partition" sh -c "[ $? = 1 ] && grep -q 'partition 9: no such partition' '$T/err'"
cp "$T/t.disk" "$T/before"
"$IMAGEUNZIP" -s 4 "$T/p1.ndz" "$T/t.disk" 2>/dev/null
check "-s: a refusal writes nothing" cmp -s "$T/before" "$T/t.disk"
"$IMAGEZIP" -s 4 "$mbr" "$T/ext.ndz" 2>"$T/err"
check "imagezip -s 4 (extended) is refused" grep -q "partition 4: is an extended partition" "$T/err"
"$IMAGEUNZIP" "$T/p1.ndz" "$T/t.disk" 2>"$T/err"
check "a partition image onto a partitioned disk without -s: warned" grep -q "holds a partition table" "$T/err"
done_testing
