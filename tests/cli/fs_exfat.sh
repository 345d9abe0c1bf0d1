#!/bin/sh
# exFAT made by mkfs.exfat over random bytes, filled through exfat-fuse on a loop
# device (this kernel may have no exfat module; FUSE works where root, /dev/fuse
# and loop devices do): only the boot regions, the FAT and clusters the
# allocation bitmap marks are imaged; fsck.exfat -n and every file after a
# restore. Damaged metadata or a dirty volume goes raw with a warning.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mkfs.exfat fsck.exfat od dd

# fmount IMG DIR [ro]: mount IMG on DIR through a loop device and exfat-fuse
# (loop_umount unmounts it: exfat-fuse has written everything back by then)
fmount() {
	command -v mount.exfat-fuse >/dev/null 2>&1 || return 1
	[ "$(id -u)" = 0 ] && [ -c /dev/fuse ] || return 1
	loop_mount_by mount.exfat-fuse "$1" "$2" "${3:-}"
}

size=$((64 * MIB))
img="$T/x.img"
mkfiles "$T/src" 12 400
dirty "$img" "$size"
check "mkfs.exfat" quiet mkfs.exfat "$img"
if fmount "$img" "$T/m"; then
	filled=1
	for f in "$T"/src/*; do cp "$f" "$T/m/"; done
	rm -f "$T/m/f3" "$T/m/f6" "$T/m/f9"
	loop_umount "$img" "$T/m"
	names="f1 f2 f4 f5 f7 f8 f10 f11 f12"
else
	filled=0
	echo "# cannot mount exFAT here (no kernel exfat, no usable exfat-fuse): mkfs-only volume"
	names=""
fi
check "source is clean" quiet fsck.exfat -n "$img"
check "imagezip" "$IMAGEZIP" "$img" "$T/x.ndz"
pattern "$T/t.img" "$size"
check "imageunzip" "$IMAGEUNZIP" "$T/x.ndz" "$T/t.img"
check "fsck.exfat -n clean" quiet fsck.exfat -n "$T/t.img"
if [ $filled = 1 ]; then
	if fmount "$T/t.img" "$T/r" ro; then
		# shellcheck disable=SC2086
		check "every file reads back identical" same_files "$T/src" "$T/r" $names
		check "deleted files stay deleted" test ! -e "$T/r/f3"
		loop_umount "$T/t.img" "$T/r"
	else
		not_ok "restored volume mounts"
	fi
fi
smaller "$T/x.ndz" "$img" "$(used_bytes "$img")" "exfat"
"$IMAGEZIP" -i "$img" >"$T/info"
check "-i names it" grep -q "exfat \[exfat, 4096-byte clusters\]" "$T/info"
"$IMAGEZIP" -S 0=exfat -i "$img" >"$T/info" 2>&1
check "-S 0=exfat works" grep -q "exfat \[exfat," "$T/info"

# an empty (mkfs-only) small volume
e="$T/e.img"
dirty "$e" $((8 * MIB))
mkfs.exfat "$e" >/dev/null 2>&1
check "empty: imagezip" "$IMAGEZIP" "$e" "$T/e.ndz"
pattern "$T/t.img" $((8 * MIB))
"$IMAGEUNZIP" "$T/e.ndz" "$T/t.img"
check "empty: fsck.exfat -n clean" quiet fsck.exfat -n "$T/t.img"
smaller "$T/e.ndz" "$e" "$(used_bytes "$e")" "empty"

# 512-byte clusters: the bitmap (31 clusters) and a root directory of 60 files
# (12 clusters) are followed through FAT chains
if [ $filled = 1 ]; then
	c="$T/c.img"
	dirty "$c" "$size"
	mkfs.exfat -c 512 "$c" >/dev/null 2>&1
	mkdir -p "$T/many"
	i=1
	while [ $i -le 60 ]; do head -c $((i * 700)) /dev/urandom >"$T/many/g$i"; i=$((i + 1)); done
	if fmount "$c" "$T/m"; then
		cp "$T"/many/* "$T/m/"
		rm -f "$T/m/g7" "$T/m/g30"
		loop_umount "$c" "$T/m"
		rm -f "$T/many/g7" "$T/many/g30"
		check "chains: imagezip" "$IMAGEZIP" "$c" "$T/c.ndz"
		"$IMAGEZIP" -i "$c" >"$T/info"
		check "chains: taken as exfat" grep -q "exfat \[exfat, 512-byte" "$T/info"
		pattern "$T/t.img" "$size"
		"$IMAGEUNZIP" "$T/c.ndz" "$T/t.img"
		check "chains: fsck.exfat -n clean" quiet fsck.exfat -n "$T/t.img"
		if fmount "$T/t.img" "$T/r" ro; then
			check "chains: every file reads back identical" diff -r "$T/many" "$T/r"
			loop_umount "$T/t.img" "$T/r"
		else
			not_ok "chains: restored volume mounts"
		fi
	else
		not_ok "chains: mount"
	fi
	rm -f "$c" "$T/c.ndz"
fi

# inside an MBR disk, partition type 0x07 (NTFS/exFAT): found by probing
if command -v sfdisk >/dev/null 2>&1; then
	dk="$T/d.img"
	dirty "$dk" $((MIB + size))
	mbr_part "$dk" "$img" 7
	"$IMAGEZIP" -i "$dk" >"$T/info"
	check "MBR partition: -i names it" grep -q "^ *1: .*exfat \[exfat, 4096-byte clusters\]" "$T/info"
	mbr_restored "$dk" "$T/d.ndz" "$T/t.img"
	extract "$T/t.img" 2048 $((size / 512)) "$T/p.img"
	check "MBR partition: fsck.exfat -n clean" quiet fsck.exfat -n "$T/p.img"
	rm -f "$dk" "$T/d.ndz" "$T/p.img"
else
	echo "# sfdisk not installed: no MBR-partition check"
fi

# le32 FILE OFFSET
le32() { od -An -t u4 -j "$2" -N 4 "$1" | tr -d ' '; }

cp "$img" "$T/b.img"
poke "$T/b.img" 600 '001'      # inside sector 1: covered by the checksum
damaged "$T/b.img" "damaged boot checksum" "checksum mismatch"

cp "$img" "$T/b.img"
poke "$T/b.img" 106 '002'      # VolumeFlags: dirty (outside the checksum)
damaged "$T/b.img" "dirty volume" "dirty"

# the backup boot region fails its checksum: said in one line, the volume read as
# usual (the backup is imaged as it is), the same size as the sound one
cp "$img" "$T/b.img"
poke "$T/b.img" $((13 * 512 + 100)) 125
"$IMAGEZIP" "$T/b.img" "$T/bad.ndz" 2>"$T/err"
check "backup boot checksum: imagezip exits 0" test $? = 0
check "backup boot checksum: one line, fs-aware" sh -c \
	"test \"\$(wc -l <'$T/err')\" = 1 && grep -q 'b.img: exfat: backup boot region checksum mismatch; taking what its maps mark in use\$' '$T/err'"
check "backup boot checksum: as large as the sound volume's image" \
	test "$(used_bytes "$T/b.img")" = "$(used_bytes "$img")"
pattern "$T/t.img" "$size"
"$IMAGEUNZIP" "$T/bad.ndz" "$T/t.img"
check "backup boot checksum: the restore is the source where it was imaged" sh -c \
	"cmp -s -n $((24 * 512)) '$T/b.img' '$T/t.img'"
if [ $filled = 1 ] && fmount "$T/t.img" "$T/r" ro; then
	# shellcheck disable=SC2086
	check "backup boot checksum: every file reads back identical" same_files "$T/src" "$T/r" $names
	loop_umount "$T/t.img" "$T/r"
fi
rm -f "$T/bad.ndz" "$T/t.img"

# the root directory's bitmap entry: its first cluster made out of range
cp "$img" "$T/b.img"
heap=$(le32 "$img" 88) root=$(le32 "$img" 96) spc=$(od -An -t u1 -j 109 -N 1 "$img" | tr -d ' ')
roff=$(( (heap + ((root - 2) << spc)) * 512 ))
i=0 boff=""
while [ $i -lt 16 ]; do
	t=$(od -An -t u1 -j $((roff + 32 * i)) -N 1 "$img" | tr -d ' ')
	[ "$t" = 129 ] && { boff=$((roff + 32 * i)); break; }
	i=$((i + 1))
done
if [ -n "$boff" ]; then
	printf '\377\377\377\177' | dd of="$T/b.img" bs=1 seek=$((boff + 20)) conv=notrunc status=none
	damaged "$T/b.img" "damaged bitmap entry" "bitmap cluster out of range"
else
	not_ok "bitmap entry found in the root directory"
fi
done_testing
