#!/bin/sh
# Damaged ext2/3/4 made with debugfs: blocks in use that the bitmap calls free
# (freed under a file, reached through indirect blocks, a zeroed bitmap, an inode
# table marked free), an inode with links marked free, stale descriptor and bitmap
# checksums, a journal block shared with a file. imagezip images the union of the
# bitmap and what the inodes and the fixed metadata use (or the whole filesystem
# raw), says so in one line naming the filesystem, and every file reads back.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mke2fs debugfs e2fsck dumpe2fs

P=$((16 * MIB))
mkfiles "$T/src" 12 400

# mkext FILE SIZE MKE2FS-ARGS...: random bytes (stale data) under a new filesystem
mkext() {
	f=$1 sz=$2; shift 2
	dirty "$f" "$sz"
	mke2fs -q -F -E nodiscard "$@" -d "$T/src" "$f" >/dev/null 2>&1
}

# dbg IMG CMD...: debugfs -w, each argument one request
dbg() {
	_img=$1; shift
	: >"$T/cmds"
	for _c; do echo "$_c" >>"$T/cmds"; done
	debugfs -w -f "$T/cmds" "$_img" >/dev/null 2>&1
}

# agree IMG: every group's free count (and the superblock's) rewritten from the
# block bitmap, the descriptor checksums recomputed: the damage then passes the
# free count checks (dumpe2fs lists free clusters by their first blocks)
agree() {
	dumpe2fs "$1" 2>/dev/null | awk '
		/^Block size:/ { bs = $3 } /^Cluster size:/ { cs = $3 }
		/^Group [0-9]+:/ { g = $2; sub(":", "", g) }
		/^  Free blocks:/ {
			r = (cs ? cs / bs : 1); n = 0
			sub(/^  Free blocks: */, ""); k = split($0, v, ", *")
			for (i = 1; i <= k; i++) {
				if (v[i] == "") continue
				if (split(v[i], ab, "-") == 2) n += (ab[2] - ab[1]) / r + 1; else n++
			}
			t += n
			printf "set_bg %s free_blocks_count %d\nset_bg %s checksum calc\n", g, n, g
		}
		END { printf "ssv free_blocks_count %d\n", t * (cs ? cs / bs : 1) }' >"$T/cmds"
	debugfs -w -f "$T/cmds" "$1" >/dev/null 2>&1
}

# freeb_file IMG PATH: every block of PATH (data and indirect) marked free, the
# counts and checksums rewritten to agree
freeb_file() {
	debugfs -R "blocks $2" "$1" 2>/dev/null | tr ' ' '\n' | sed -n 's/^\([0-9][0-9]*\)$/freeb \1/p' >"$T/cmds"
	[ -s "$T/cmds" ] || { echo "# $2: no blocks"; return 1; }
	debugfs -w -f "$T/cmds" "$1" >/dev/null 2>&1
	agree "$1"
}

# fsck_out IMG: e2fsck -fn's findings, without the image's name
fsck_out() { e2fsck -fn "$1" 2>&1 | sed "s|$1|IMG|g" | grep -v '^e2fsck [0-9]'; }

# damaged NAME IMG WARNING: imagezip exits 0 and warns (WARNING "": says nothing); after imageunzip onto a
# 0xa5-filled target every file reads back as debugfs reads it on the source, and
# e2fsck -fn finds on the restore what it finds on the source
# (IZ_ARGS: more imagezip options)
damaged() {
	n=$1 img=$2 w=$3
	# shellcheck disable=SC2086
	"$IMAGEZIP" ${IZ_ARGS:-} "$img" "$T/d.ndz" 2>"$T/err"; rc=$?
	check "$n: imagezip exits 0" test $rc = 0
	check "$n: one line of warning" test "$(wc -l <"$T/err")" -le 1
	if [ -z "$w" ]; then
		check "$n: nothing to warn about" test ! -s "$T/err"
	elif grep -q "$w" "$T/err"; then ok "$n: warns ($w)"
	else not_ok "$n: warns ($w)"; cat "$T/err"; fi
	pattern "$T/d.tgt" "$(fsize "$img")"
	"$IMAGEUNZIP" "$T/d.ndz" "$T/d.tgt" 2>/dev/null
	rm -rf "$T/a" "$T/b"; mkdir "$T/a" "$T/b"
	debugfs -n -R "rdump / $T/a" "$img" >/dev/null 2>&1
	debugfs -n -R "rdump / $T/b" "$T/d.tgt" >/dev/null 2>&1
	check "$n: the source holds the files" test -s "$T/a/f5"
	if diff -r "$T/a" "$T/b" >"$T/diff" 2>&1; then ok "$n: every file reads back identical"
	else not_ok "$n: every file reads back identical"; head -5 "$T/diff"; fi
	fsck_out "$img" >"$T/fa"; fsck_out "$T/d.tgt" >"$T/fb"
	if cmp -s "$T/fa" "$T/fb"; then ok "$n: e2fsck -fn finds the same on the restore"
	else not_ok "$n: e2fsck -fn finds the same on the restore"; diff "$T/fa" "$T/fb" | head -8; fi
	rm -f "$T/d.ndz" "$T/d.tgt"
}

INUSE="blocks in use by inodes free"
META="blocks of the filesystem's own metadata free"

# a file's blocks freed, counts and checksums agreeing (metadata_csum: silent)
mkext "$T/e" $P -t ext4 -O metadata_csum
freeb_file "$T/e" /f5 && freeb_file "$T/e" /f11
damaged "ext4 metadata_csum, a file's blocks freed" "$T/e" "$INUSE"

mkext "$T/e" $P -t ext4 -b 4096 -O bigalloc -C 16384
freeb_file "$T/e" /f5 && freeb_file "$T/e" /f11
damaged "ext4 bigalloc, a file's clusters freed" "$T/e" "$INUSE"

# indirect-mapped files: data, indirect and double indirect blocks freed
mkext "$T/e" $P -t ext2 -b 1024
freeb_file "$T/e" /f5 && freeb_file "$T/e" /f11
damaged "ext2, an indirect-mapped file's blocks freed" "$T/e" "$INUSE"

mkext "$T/e" $P -t ext3 -b 1024
freeb_file "$T/e" /f5 && freeb_file "$T/e" /f11
damaged "ext3, an indirect-mapped file's blocks freed" "$T/e" "$INUSE"

# a block pointer set to a free block: the file reads that block's (stale) bytes
mkext "$T/e" $P -t ext2 -b 1024
fb=$(debugfs -R "ffb 1 8000" "$T/e" 2>/dev/null | sed -n 's/.*: *\([0-9][0-9]*\).*/\1/p')
dbg "$T/e" "set_inode_field /f5 block[1] $fb"
damaged "ext2, set_inode_field block[1] to a free block" "$T/e" "$INUSE"

# the superblock says unclean, with errors recorded: warnings, and the union
mkext "$T/e" $P -t ext4
freeb_file "$T/e" /f5
dbg "$T/e" "ssv state 0" "ssv error_count 3"
damaged "ext4 not cleanly unmounted, errors recorded" "$T/e" "not cleanly unmounted"
check "ext4 not cleanly unmounted, errors recorded: warns of the errors" \
	grep -q "ext: not cleanly unmounted; the superblock records 3 errors;.*; taking the union" "$T/err"

# a triple indirect block whose every entry points at itself names a billion
# blocks: the walk gives up in time and takes the filesystem raw
mkext "$T/e" $P -t ext2 -b 1024
fb=$(debugfs -R "ffb 1 8000" "$T/e" 2>/dev/null | sed -n 's/.*: *\([0-9][0-9]*\).*/\1/p')
le=$(printf '\\%o\\%o\\%o\\%o' $((fb & 255)) $((fb >> 8 & 255)) $((fb >> 16 & 255)) $((fb >> 24)))
: >"$T/self"; i=0; while [ $i -lt 256 ]; do printf "$le" >>"$T/self"; i=$((i + 1)); done
dd if="$T/self" of="$T/e" bs=1024 seek="$fb" conv=notrunc status=none
dbg "$T/e" "set_inode_field /f5 block[TIND] $fb"
# (e2fsck -fn walks it for ever: the restore is compared byte for byte instead)
n="ext2, a triple indirect block pointing at itself"
timeout 300 "$IMAGEZIP" "$T/e" "$T/d.ndz" 2>"$T/err"
check "$n: imagezip exits 0 in time" test $? = 0
check "$n: warns and takes it raw" grep -q "inodes map more blocks than the filesystem holds.*; taking it raw" "$T/err"
pattern "$T/d.tgt" $P
"$IMAGEUNZIP" "$T/d.ndz" "$T/d.tgt" 2>/dev/null
check "$n: restored byte for byte" cmp -s "$T/e" "$T/d.tgt"
rm -f "$T/d.ndz" "$T/d.tgt"

# a cleared inode references nothing; its blocks stay marked in the bitmap, so
# they are imaged as the bitmap says (e2fsck would free them), with a warning
mkext "$T/e" $P -t ext4
dbg "$T/e" "clri /f7"
damaged "ext4, clri on a file" "$T/e" \
	"ext: inode [0-9]*: in use in the inode bitmap without links; the block bitmap marks [0-9]* blocks that no inode or metadata uses; imaging them; taking the union"
check "ext4, clri: the image is not raw" test "$(used_bytes "$T/e")" -lt $((P / 2))

# the bitmap zeroed, its group's free count and checksum rewritten to agree: the
# filesystem's own metadata is imaged whatever the bitmap says
mkext "$T/e" $((64 * MIB)) -t ext4 -b 4096 -O ^metadata_csum,uninit_bg,^resize_inode
bb=$(dumpe2fs "$T/e" 2>/dev/null | sed -n 's/.*Block bitmap at \([0-9]*\).*/\1/p' | head -1)
dd if=/dev/zero of="$T/e" bs=4096 seek="$bb" count=1 conv=notrunc status=none
dbg "$T/e" "set_bg 0 free_blocks_count 16384" "ssv free_blocks_count 16384" "set_bg 0 checksum calc"
damaged "ext4, a zeroed bitmap with the counts rewritten" "$T/e" "$META"

# an inode table marked free
mkext "$T/e" $P -t ext4 -b 4096
it=$(dumpe2fs "$T/e" 2>/dev/null | sed -n 's/.*Inode table at \([0-9]*\)-.*/\1/p' | head -1)
dbg "$T/e" "freeb $it 8"
agree "$T/e"
damaged "ext4, an inode table marked free" "$T/e" "$META"

# a cleared group descriptor checksum on top of freed blocks: the descriptor still
# places its group's bitmaps and inode table, so the union, not raw
mkext "$T/e" $P -t ext4 -b 4096
freeb_file "$T/e" /f5
dbg "$T/e" "set_bg 0 checksum 0"
damaged "ext4, a cleared group descriptor checksum" "$T/e" \
	"e: ext: group 0: descriptor checksum does not match;.*; taking the union"
check "ext4, a cleared descriptor checksum: the image is not raw" \
	test "$(used_bytes "$T/e")" -lt $((P / 2))

# only stale descriptor checksums (e2fsck finds nothing else): the image is the
# same size as the undamaged filesystem's
for feat in metadata_csum ^metadata_csum,uninit_bg; do
	mkext "$T/e" $P -t ext4 -b 1024 -O "$feat"
	clean=$(used_bytes "$T/e")
	dbg "$T/e" "set_bg 0 checksum 0xdead" "set_bg 1 checksum 0xbeef"
	damaged "ext4 $feat, stale descriptor checksums alone" "$T/e" \
		"ext: group 0 and others: descriptor checksum does not match; taking the union"
	check "ext4 $feat, stale descriptor checksums: the image is as large as the undamaged one" \
		test "$(used_bytes "$T/e")" = "$clean"
	"$IMAGEZIP" -i "$T/e" >"$T/info" 2>/dev/null
	check "ext4 $feat, stale descriptor checksums: -i says it too" \
		grep -q "(ext: group 0 and others: descriptor checksum does not match; taking the union)" "$T/info"
done

# a stale descriptor that calls in-use inodes unused (its itable_unused raised) and
# the files' blocks freed: the inode bitmap says otherwise, the whole table is read
mkext "$T/e" $P -t ext4 -b 4096 -O ^metadata_csum,uninit_bg
freeb_file "$T/e" /f5 && freeb_file "$T/e" /f11
ipg=$(dumpe2fs -h "$T/e" 2>/dev/null | sed -n 's/^Inodes per group: *//p')
dbg "$T/e" "set_bg 0 itable_unused $((ipg - 11))"
damaged "ext4, a stale descriptor hiding in-use inodes" "$T/e" \
	"the inode bitmap uses inodes the descriptor calls unused; reading the whole inode table;.*blocks in use by inodes free.*; taking the union"

# inodes with links marked free in the inode bitmap, a deletion time set and their
# blocks freed: e2fsck keeps them, so their blocks are data; with short free runs
# dropped (-F 512) nothing of them may come back as the target's old bytes
mkext "$T/e" $P -t ext4 -b 1024
freeb_file "$T/e" /f5 && freeb_file "$T/e" /f11
dbg "$T/e" "freei /f5" "freei /f11" "sif /f5 dtime 1600000000" "sif /f11 dtime 1600000000"
check "links but free: debugfs calls /f5 free" \
	sh -c "debugfs -R 'testi /f5' '$T/e' 2>/dev/null | grep -q 'not in use'"
IZ_ARGS="-F 512" damaged "ext4, inodes with links marked free, -F 512" "$T/e" \
	"ext: .*inode [0-9]* and others: links but free in the inode bitmap; imaging what each maps;.*; taking the union"
"$IMAGEZIP" -i -F 512 "$T/e" >"$T/info" 2>"$T/err"
check "ext4, inodes with links marked free: -i prints the warning" \
	grep -q "links but free in the inode bitmap" "$T/err"
check "ext4, inodes with links marked free: -i notes it on the filesystem's line" \
	grep -q "type none (0x0): ext .*(ext: .*links but free in the inode bitmap.*; taking the union)" "$T/info"

# a block bitmap that fails its checksum (metadata_csum), the file's blocks freed
mkext "$T/e" $P -t ext4 -b 4096 -O metadata_csum
freeb_file "$T/e" /f5
dbg "$T/e" "set_bg 0 block_bitmap_csum 0xdead" "set_bg 0 checksum calc"
damaged "ext4, a block bitmap failing its checksum" "$T/e" \
	"ext: the block bitmap fails its checksum;.*; taking the union"

# the superblock says errors (state 2) and names an orphan although clean
mkext "$T/e" $P -t ext4
freeb_file "$T/e" /f5
dbg "$T/e" "ssv state 3" "ssv last_orphan 12"
damaged "ext4 marked with errors, an orphan named" "$T/e" \
	"ext: marked as having errors; orphan list not empty (inode 12);.*; taking the union"

# blocks marked in the bitmap that nothing uses, an inode marked in use that no
# name reaches (e2fsck's "+" bitmap differences): said, and imaged as marked
mkext "$T/e" $P -t ext4 -b 1024
fb=$(debugfs -R "ffb 1 9000" "$T/e" 2>/dev/null | sed -n 's/.*: *\([0-9][0-9]*\).*/\1/p')
fi=$(debugfs -R "stat /f7" "$T/e" 2>/dev/null | sed -n 's/^Inode: *\([0-9][0-9]*\).*/\1/p')
dbg "$T/e" "setb $fb 40" "rm /f7" "seti <$fi>"
agree "$T/e"
damaged "ext4, blocks and an inode marked that nothing uses" "$T/e" \
	"ext: .*inode $fi: in use in the inode bitmap without links;.* the block bitmap marks 40 blocks that no inode or metadata uses; imaging them; taking the union"

# a source path past 79 characters is named whole
long="$T/a-directory-name-of-some-length/another-directory-name-of-some-length/and-a-third-one-to-pass-eighty"
mkdir -p "$long"
mkext "$long/damaged-ext4.img" $P -t ext4
dbg "$long/damaged-ext4.img" "set_bg 1 checksum 0xdead"
"$IMAGEZIP" "$long/damaged-ext4.img" "$T/d.ndz" 2>"$T/err"
check "a long source path: the warning names it whole" \
	grep -q "^imagezip: warning: $long/damaged-ext4.img: ext: group 1: descriptor" "$T/err"
rm -rf "$T/a-directory-name-of-some-length" "$T/d.ndz"

# a journal block shared with a file: the clean journal's body is zeroed, but not
# where the file reads it
mkext "$T/e" $P -t ext3 -b 1024
jb=$(debugfs -R "bmap <8> 100" "$T/e" 2>/dev/null)
head -c 1024 /dev/urandom | dd of="$T/e" bs=1024 seek="$jb" conv=notrunc status=none
dbg "$T/e" "set_inode_field /f5 block[0] $jb"
damaged "ext3, a journal block shared with a file" "$T/e" "journal blocks are used by something else too"
done_testing
