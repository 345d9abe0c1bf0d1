#!/bin/sh
# Damaged superblocks, bitmaps and partition tables: the damaged part is taken raw
# with a warning, or with a warning its allocation is the union of its maps and what
# its metadata uses (or the backup GPT used); never a crash, never a lost block.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mke2fs dumpe2fs debugfs mkntfs ntfscp makefs sfdisk sgdisk e2fsck

P=$((16 * MIB))
mkfiles "$T/src" 8 300

# poke FILE OFFSET OCTAL-BYTES: overwrite bytes in place
poke() { printf "$3" | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }
u32() { od -An -t u4 -j "$2" -N 4 "$1" | tr -d ' '; }

# raw_case NAME FILE WARNING [BYTES]: imagezip succeeds, warns, and the restore is
# byte-identical (in the first BYTES: space outside partitions is not imaged)
raw_case() {
	"$IMAGEZIP" "$2" "$T/d.ndz" 2>"$T/err"; rc=$?
	check "$1: imagezip exits 0" test $rc = 0
	if grep -q "$3" "$T/err"; then ok "$1: warns ($3)"; else not_ok "$1: warns ($3)"; cat "$T/err"; fi
	pattern "$T/d.tgt" "$(fsize "$2")"
	"$IMAGEUNZIP" "$T/d.ndz" "$T/d.tgt" 2>/dev/null
	check "$1: restored byte for byte" cmp -s -n "${4:-$(fsize "$2")}" "$2" "$T/d.tgt"
	rm -f "$T/d.ndz" "$T/d.tgt"
}

mkext() {	# mkext FILE MKE2FS-ARGS...
	f=$1; shift
	dirty "$f" $P
	mke2fs -q -F -E nodiscard "$@" -d "$T/src" "$f" >/dev/null 2>&1
}

# ---- ext ----
mkext "$T/e1" -t ext4
poke "$T/e1" 1080 '\000\000'
raw_case "ext4 bad superblock magic" "$T/e1" "no filesystem recognized"

mkext "$T/e2" -t ext4 -b 1024
bb=$(dumpe2fs "$T/e2" 2>/dev/null | sed -n 's/.*Block bitmap at \([0-9]*\).*/\1/p' | head -1)
poke "$T/e2" $((bb * 1024 + 300)) '\125\125\125\125'
# a bitmap that fails its checksum is still read: the union, with the warning
"$IMAGEZIP" "$T/e2" "$T/d.ndz" 2>"$T/err"
check "ext4 block bitmap checksum: imagezip exits 0" test $? = 0
check "ext4 block bitmap checksum: one line says it and what was done" \
	grep -q "e2: ext: .*the block bitmap fails its checksum.*; taking the union$" "$T/err"
pattern "$T/d.tgt" $P
"$IMAGEUNZIP" "$T/d.ndz" "$T/d.tgt" 2>/dev/null
mkdir "$T/r2a" "$T/r2b"
debugfs -n -R "rdump / $T/r2a" "$T/e2" >/dev/null 2>&1
debugfs -n -R "rdump / $T/r2b" "$T/d.tgt" >/dev/null 2>&1
check "ext4 block bitmap checksum: every file reads back identical" \
	sh -c "test -s '$T/r2a/f1' && diff -r '$T/r2a' '$T/r2b'"
check "ext4 block bitmap checksum: not taken raw" test "$(used_bytes "$T/e2")" -lt $((P / 2))
rm -f "$T/d.ndz" "$T/d.tgt"

mkext "$T/e3" -t ext2 -b 1024
bb=$(dumpe2fs "$T/e3" 2>/dev/null | sed -n 's/.*Block bitmap at \([0-9]*\).*/\1/p' | head -1)
poke "$T/e3" $((bb * 1024 + 20)) '\000\000\000\000'
# free counts that disagree with the bitmap: a warning, and the union of the bitmap
# and what the inodes and metadata use (tests/cli/fs_damaged_ext.sh has more)
"$IMAGEZIP" "$T/e3" "$T/d.ndz" 2>"$T/err"
check "ext2 bitmap against free counts: imagezip exits 0" test $? = 0
check "ext2 bitmap against free counts: warns" grep -q "group 0: free count disagrees with the bitmap" "$T/err"
pattern "$T/d.tgt" $P
"$IMAGEUNZIP" "$T/d.ndz" "$T/d.tgt" 2>/dev/null
mkdir "$T/r3a" "$T/r3b"
debugfs -R "rdump / $T/r3a" "$T/e3" >/dev/null 2>&1
debugfs -R "rdump / $T/r3b" "$T/d.tgt" >/dev/null 2>&1
check "ext2 bitmap against free counts: every file reads back identical" \
	sh -c "test -s '$T/r3a/f1' && diff -r '$T/r3a' '$T/r3b'"
e2fsck -fn "$T/e3" 2>&1 | grep -v "$T/e3" >"$T/f3a"
e2fsck -fn "$T/d.tgt" 2>&1 | grep -v "$T/d.tgt" >"$T/f3b"
check "ext2 bitmap against free counts: e2fsck -fn finds the same on the restore" cmp -s "$T/f3a" "$T/f3b"
rm -f "$T/d.ndz" "$T/d.tgt"

mkext "$T/e4" -t ext4
debugfs -w -R "feature needs_recovery" "$T/e4" >/dev/null 2>&1
raw_case "ext4 journal needing recovery" "$T/e4" "journal needs recovery"

mkext "$T/e5" -t ext4
poke "$T/e5" $((1024 + 4)) '\377\377\377\017'    # blocks count far beyond the file
raw_case "ext4 larger than its partition" "$T/e5" "ext:"

# ---- NTFS ----
dirty "$T/n1" $P
mkntfs -q -F -f -c 4096 "$T/n1" >/dev/null 2>&1
mft=$(od -An -t u8 -j 48 -N 8 "$T/n1" | tr -d ' ')
poke "$T/n1" $((mft * 4096)) 'XXXX'
raw_case "ntfs bad \$MFT record" "$T/n1" "ntfs: cannot read the volume"

dirty "$T/n2" $P
mkntfs -q -F -f "$T/n2" >/dev/null 2>&1
poke "$T/n2" 40 '\000\000\000\001'    # total sectors: 16 GiB on a 16 MiB volume
raw_case "ntfs larger than its partition" "$T/n2" "ntfs"

# ---- FFS ----
mkufs() { makefs -t ffs -f 32 -o version=2 -s $P "$1" "$T/src" >/dev/null 2>&1; }
cgoff() {	# byte offset of cylinder group 0 (makefs puts the UFS2 superblock at 8192)
	echo $(( $(u32 "$1" $((8192 + 12))) * $(u32 "$1" $((8192 + 52))) ))
}
mkufs "$T/u1"
poke "$T/u1" $(( $(cgoff "$T/u1") + 4 )) '\000\000'
raw_case "ufs bad cylinder group magic" "$T/u1" "cylinder group 0: bad magic"

mkufs "$T/u2"
cg=$(cgoff "$T/u2")
fo=$(u32 "$T/u2" $((cg + 96)))
poke "$T/u2" $((cg + fo + 1500)) '\000'     # free fragments marked in use
raw_case "ufs free map against free counts" "$T/u2" "free counts disagree"

mkufs "$T/u3"
poke "$T/u3" $((8192 + 44)) '\377\377\000\000'   # ncg
raw_case "ufs superblock cylinder group count" "$T/u3" "ufs:"

mkufs "$T/u4"
poke "$T/u4" $((8192 + 48)) '\000\000\001\000'   # bsize 65536 with fsize 1024, frag 8
raw_case "ufs superblock block size" "$T/u4" "bad block or fragment size"

# not cleanly unmounted (fs_clean 0): said in one line, read as usual
mkufs "$T/u5"
clean=$(used_bytes "$T/u5")
poke "$T/u5" $((8192 + 209)) '\000'
"$IMAGEZIP" "$T/u5" "$T/d.ndz" 2>"$T/err"
check "ufs not cleanly unmounted: imagezip exits 0" test $? = 0
check "ufs not cleanly unmounted: one line" sh -c \
	"test \"\$(wc -l <'$T/err')\" = 1 && grep -q 'u5: ufs: not cleanly unmounted; taking what its maps mark in use\$' '$T/err'"
check "ufs not cleanly unmounted: as large as the clean one's image" \
	test "$(used_bytes "$T/u5")" = "$clean"
rm -f "$T/d.ndz"

# ---- partition tables ----
mkext "$T/p.ext" -t ext4
mkdisk() {	# mkdisk FILE SFDISK-SCRIPT: 40 MiB, the ext4 above in partition 1
	dirty "$1" $((40 * MIB))
	printf "$2" | sfdisk -q "$1" >/dev/null 2>&1
	put "$1" 2048 "$T/p.ext"
}
mkdisk "$T/m1" 'label: dos\nstart=2048, size=32768, type=83\n'
poke "$T/m1" $((446 + 12)) '\000\000\377\377'
raw_case "mbr partition beyond the disk" "$T/m1" "partition beyond the disk; taking the whole disk raw"

mkdisk "$T/m2" 'label: dos\nstart=2048, size=32768, type=83\nstart=36864, type=5\nstart=38912, size=2048, type=83\n'
ebr=36864
poke "$T/m2" $((ebr * 512 + 446 + 16 + 4)) '\005'
poke "$T/m2" $((ebr * 512 + 446 + 16 + 8)) '\000\000\000\000\000\010\000\000'
raw_case "mbr logical partitions in a loop" "$T/m2" "broken chain"

mkdisk "$T/m3" 'label: dos\nstart=2048, size=32768, type=a5\n'
poke "$T/m3" $((2048 * 512 + 512)) 'WEV\202'
poke "$T/m3" $((2048 * 512 + 512 + 132)) 'WEV\202'
poke "$T/m3" $((2048 * 512 + 512 + 138)) '\010\000'
raw_case "bsd disklabel bad checksum" "$T/m3" "partition 1: malformed partition table: bad disklabel checksum; taking it raw" $(((2048 + 32768) * 512))

dirty "$T/g1" $((40 * MIB))
sgdisk -n 1:2048:+16M -t 1:8300 "$T/g1" >/dev/null 2>&1
put "$T/g1" 2048 "$T/p.ext"
poke "$T/g1" $((512 + 40)) '\001'
"$IMAGEZIP" "$T/g1" "$T/g.ndz" 2>"$T/err"
check "gpt damaged primary: imagezip exits 0" test $? = 0
check "gpt damaged primary: says the backup is used" grep -q "primary GPT damaged (bad header checksum), backup used" "$T/err"
check "gpt damaged primary: still filesystem-aware" test "$(fsize "$T/g.ndz")" -lt $((20 * MIB))
pattern "$T/g.tgt" $((40 * MIB))
"$IMAGEUNZIP" "$T/g.ndz" "$T/g.tgt"
extract "$T/g.tgt" 2048 32768 "$T/g.ext"
check "gpt damaged primary: ext4 restored clean" quiet e2fsck -fn "$T/g.ext"

poke "$T/g1" $((40 * MIB - 512 + 40)) '\001'
raw_case "gpt both headers damaged" "$T/g1" "backup: bad header checksum; taking the whole disk raw"

# refusals are clear errors
"$IMAGEZIP" -s 7 "$T/m3" "$T/x.ndz" 2>"$T/err"
check "-s with no such partition: exit 1" test $? = 1
check "-s with no such partition: says so" grep -q "partition 7: no such partition" "$T/err"
"$IMAGEZIP" -s 1 "$T/m1" "$T/x.ndz" 2>"$T/err"
check "-s on a malformed table: exit 1 naming it" sh -c "[ $? = 1 ] && grep -q 'malformed partition table' '$T/err'"
check "no image left behind" test ! -e "$T/x.ndz"
done_testing
