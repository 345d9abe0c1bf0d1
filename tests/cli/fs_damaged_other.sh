#!/bin/sh
# Damaged filesystems whose allocation map calls free a block that is in use:
# the block must still be imaged (the union of the map and what references it),
# with a warning, so that after a restore onto 0xa5 every file reads back
# identical through the filesystem's own tools. btrfs: a tree's root block the
# extent tree does not list; swap: a hibernation image; FAT: clusters of files
# the table calls free; NTFS: clusters of files $Bitmap calls free, a volume
# marked dirty with a clean $LogFile.
# Mount (btrfs, to make a subvolume) in a mount namespace of our own, as
# fs_btrfs.sh does.
if [ -z "${NDZ_MNTNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 &&
   unshare -m --propagation private true 2>/dev/null; then
	NDZ_MNTNS=1 exec unshare -m --propagation private sh "$0" "$@"
fi
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mkfs.btrfs btrfs mkswap mkfs.fat fsck.fat mcopy mmd mshowfat mkntfs ntfscp ntfscat ntfsinfo \
	od dd awk
BTRFSEDIT="$NDZ_BUILD/tests/helpers/btrfsedit"

mkfiles "$T/src" 16 300
all=$(cd "$T/src" && ls)

# zip_unzip NAME IMG WARNING [IMAGEZIP-ARGS]: imagezip exits 0 filesystem-aware
# with WARNING, and the image restores onto a 0xa5-filled $T/t.img
zip_unzip() {
	# shellcheck disable=SC2086
	"$IMAGEZIP" ${4:-} "$2" "$T/d.ndz" 2>"$T/err"; rc=$?
	check "$1: imagezip exits 0" test $rc = 0
	if grep -q "$3" "$T/err"; then ok "$1: warns ($3)"
	else not_ok "$1: warns ($3)"; cat "$T/err"; fi
	if grep -q "taking it raw" "$T/err"; then not_ok "$1: stays filesystem-aware"; cat "$T/err"
	else ok "$1: stays filesystem-aware"; fi
	pattern "$T/t.img" "$(fsize "$2")"
	check "$1: imageunzip" "$IMAGEUNZIP" "$T/d.ndz" "$T/t.img"
	rm -f "$T/d.ndz"
}

# same_at NAME A B OFFSET BYTES: A and B hold the same bytes there
same_at() {
	dd if="$2" bs=4096 iflag=skip_bytes,count_bytes skip="$4" count="$5" status=none >"$T/a.blk"
	dd if="$3" bs=4096 iflag=skip_bytes,count_bytes skip="$4" count="$5" status=none >"$T/b.blk"
	check "$1" cmp -s "$T/a.blk" "$T/b.blk"
}

# ---- btrfs: a subvolume's root block left out of the extent tree ----
# (subvolume 256 made through a loop mount, the same files in it; where this
# machine cannot mount btrfs, the top-level subvolume, tree 5)
img="$T/b.img"
dirty "$img" $((160 * MIB))
mkfs.btrfs -q -f -K --rootdir "$T/src" "$img" >/dev/null 2>&1 || not_ok "mkfs.btrfs"
tree=5 tkey=FS_TREE
if can_loop_mount btrfs $((160 * MIB)) mkfs.btrfs -q -f && loop_mount btrfs "$img" "$T/m"; then
	btrfs -q subvolume create "$T/m/sub" >/dev/null && cp "$T"/src/* "$T/m/sub/" &&
		tree=256 tkey=256
	loop_umount "$img" "$T/m" || tree=5
fi
[ $tree = 5 ] && echo "# cannot mount btrfs here: the top-level subvolume's root block is dropped"
dt() { btrfs inspect-internal dump-tree "$@" "$img" 2>/dev/null; }
root=$(dt -t root | awk -v k="($tkey" '$1 == "item" && $4 == k && $5 == "ROOT_ITEM" { f = 1; next }
	f { for (i = 1; i < NF; i++) if ($i == "bytenr") { print $(i + 1); exit } }')
ns=$(btrfs inspect-internal dump-super "$img" | awk '$1 == "nodesize" { print $2 }')
# the extent tree leaf that lists it, and the item
# shellcheck disable=SC2046 # split into fields on purpose
set -- $(dt -t extent | awk -v x="$root" '$1 == "leaf" && $3 == "items" { l = $2 }
	$1 == "item" && $4 == "(" x { print l, $2; exit }')
leaf=${1:-} item=${2:-}
# logical -> byte offsets of every copy, through the chunk tree
phys() {
	dt -t chunk | awk -v x="$1" '/CHUNK_ITEM/ { s = $6; sub(/\)/, "", s); s += 0 }
		$1 == "length" { len = $2 + 0 }
		$1 == "stripe" && x >= s && x < s + len { printf "%.0f\n", $6 + x - s }'
}
lphys=$(phys "$leaf") rphys=$(phys "$root")
if [ -n "$root" ] && [ -n "$leaf" ] && [ -n "$lphys" ] && [ -n "$rphys" ]; then
	# shellcheck disable=SC2086
	# (imaged with -F 4k below: a lone tree block among used ones would otherwise
	# be kept as part of a free run shorter than 32 KiB, hiding its loss)
	"$BTRFSEDIT" "$img" dropitem "$ns" "$item" $lphys &&
		"$BTRFSEDIT" "$img" sbused "-$ns"
	check "btrfs: the extent tree no longer lists the root block" \
		sh -c "! btrfs inspect-internal dump-tree -t extent '$img' | grep -q '($root METADATA_ITEM\|($root EXTENT_ITEM'"
	rm -rf "$T/out"; mkdir "$T/out"
	btrfs restore -r $tree "$img" "$T/out" >/dev/null 2>&1
	# shellcheck disable=SC2086
	check "btrfs: source files of tree $tree read back (btrfs restore)" \
		same_files "$T/src" "$T/out" $all
	zip_unzip "btrfs" "$img" "1 tree block reached from the roots is missing from the extent tree (the first at logical $root, of tree $tree); imaging it too" "-F 4k"
	for p in $rphys; do
		same_at "btrfs: root block copy at $p restored" "$img" "$T/t.img" "$p" "$ns"
	done
	rm -rf "$T/out"; mkdir "$T/out"
	btrfs restore -r $tree "$T/t.img" "$T/out" >/dev/null 2>&1
	# shellcheck disable=SC2086
	check "btrfs: every file of tree $tree reads back identical (btrfs restore)" \
		same_files "$T/src" "$T/out" $all
	btrfs check --readonly "$img" 2>&1 | grep -v -i -e uuid -e "^checking\|^\[" >"$T/c1"
	btrfs check --readonly "$T/t.img" 2>&1 | grep -v -i -e uuid -e "^checking\|^\[" >"$T/c2"
	check "btrfs: btrfs check finds the same as on the source" cmp -s "$T/c1" "$T/c2"
else
	not_ok "btrfs: root block located (root=$root leaf=$leaf item=$item)"
fi
rm -f "$img" "$T/t.img"

# ---- swap holding a hibernation image: every page kept, with a warning ----
# hib NAME OFFSET BYTES WHOSE: mkswap over random pages (the image), then the mark
hib() {
	img="$T/s.img"
	dirty "$img" $((8 * MIB))
	mkswap -q "$img" >/dev/null 2>&1 || { not_ok "$1: mkswap"; return; }
	# shellcheck disable=SC2059 # the mark is given as printf escapes
	printf "$3" | dd of="$img" bs=1 seek="$2" conv=notrunc status=none
	zip_unzip "$1" "$img" "holds $4 hibernation image; taking the whole area$"
	check "$1: every page of the image restored" cmp -s "$img" "$T/t.img"
	rm -f "$img" "$T/t.img"
}
hib "swap S1SUSPEND" 4086 'S1SUSPEND\0' "the kernel's"
hib "swap LINHIB0001" 4086 'LINHIB0001' "the kernel's"
hib "swap TuxOnIce" 0 '\355\303\002\351\230\126\345\014' "TuxOnIce's"

# fat_image: $img, a fresh 32 MiB FAT16 file system (4 sectors a cluster) on a
# dirty file; fat_tables_back: the restored disk $T/t.img given back the tables
# of $T/f.orig (rs, fatsz: where they start and how long each is), then every
# file on it copied out into $T/out (mcopy: it only reads the image)
fat_image() {
	img="$T/f.img"
	dirty "$img" $((32 * MIB))
	mkfs.fat -F 16 -s 4 "$img" >/dev/null 2>&1 || not_ok "mkfs.fat"
}
fat_tables_back() {
	dd if="$T/f.orig" of="$T/t.img" bs=512 skip="$rs" seek="$rs" count=$((2 * fatsz)) \
		conv=notrunc status=none
	rm -rf "$T/out"; mkdir "$T/out"
	mcopy -s -i "$T/t.img" ::/ "$T/out/" >/dev/null 2>&1
}

# ---- FAT: clusters in use that the table calls free ----
# f2's whole chain (only its directory entry names it: the first cluster, then
# the file's size laid out contiguously), the last 20 clusters of f5 (the chain
# runs into a free entry before the size is covered), the directory d's only
# cluster and the whole chain of f11 in it (reached through d alone). Each run
# is longer than the 32 KiB of free space imagezip keeps anyway.
fat_image
for f in f1 f2 f3 f4 f5 f6 f7 f8; do mcopy -i "$img" "$T/src/$f" ::/; done
mmd -i "$img" ::/d
for f in f9 f10 f11 f12; do mcopy -i "$img" "$T/src/$f" ::/d/; done
cp "$img" "$T/f.orig"
rs=$(od -An -t u2 -j 14 -N 2 "$img" | tr -d ' ')
fatsz=$(od -An -t u2 -j 22 -N 2 "$img" | tr -d ' ')
# span NAME: the first and last cluster of a file or directory laid out in one piece
span() { mshowfat -i "$img" "::/$1" | awk -F '[<>-]' '{ print $2, ($3 == "" ? $2 : $3) }'; }
free_entries() {	# free_entries FIRST LAST: zero their entries in both tables
	for k in 0 1; do
		dd if=/dev/zero of="$img" bs=1 count=$((2 * ($2 - $1 + 1))) \
			seek=$(((rs + k * fatsz) * 512 + 2 * $1)) conv=notrunc status=none
	done
}
# shellcheck disable=SC2046 # split into fields on purpose
set -- $(span f2); a2=${1:-} b2=${2:-}
# shellcheck disable=SC2046 # split into fields on purpose
set -- $(span f5); b5=${2:-}
# shellcheck disable=SC2046 # split into fields on purpose
set -- $(span d); cd=${1:-}
# shellcheck disable=SC2046 # split into fields on purpose
set -- $(span d/f11); a11=${1:-} b11=${2:-}
if [ -n "$b2" ] && [ -n "$b5" ] && [ -n "$cd" ] && [ -n "$b11" ]; then
	free_entries "$a2" "$b2"; free_entries $((b5 - 19)) "$b5"
	free_entries "$cd" "$cd"; free_entries "$a11" "$b11"
	n=$((b2 - a2 + 1 + 20 + 1 + b11 - a11 + 1))
	check "fat: fsck.fat finds the damage" sh -c "! fsck.fat -n '$img' >/dev/null 2>&1"
	zip_unzip "fat" "$img" "$n clusters the allocation table calls free are reached by a chain or a directory entry (the first: cluster $a2); imaging them too"
	# the damage undone on the restored disk: its tables from before
	fat_tables_back
	check "fat: tables put back, fsck.fat -n clean" quiet fsck.fat -n "$T/t.img"
	check "fat: every file reads back identical (mcopy)" same_files "$T/src" "$T/out" \
		f1 f2 f3 f4 f5 f6 f7 f8
	check "fat: every file of the directory reads back identical (mcopy)" \
		same_files "$T/src" "$T/out/d" f9 f10 f11 f12
else
	not_ok "fat: clusters located (f2 $b2, f5 $b5, d $cd, f11 $b11)"
fi
rm -f "$img" "$T/f.orig" "$T/t.img"

# ---- FAT: the dirty bit set and the second table copy disagreeing with the first ----
# (f2's chain freed in copy 0 alone): one line says both, the union of the copies
fat_image
for f in f1 f2 f3 f4; do mcopy -i "$img" "$T/src/$f" ::/; done
cp "$img" "$T/f.orig"
rs=$(od -An -t u2 -j 14 -N 2 "$img" | tr -d ' ')
fatsz=$(od -An -t u2 -j 22 -N 2 "$img" | tr -d ' ')
# shellcheck disable=SC2046 # split into fields on purpose
set -- $(span f2); a2=${1:-} b2=${2:-}
if [ -n "$b2" ]; then
	dd if=/dev/zero of="$img" bs=1 count=$((2 * (b2 - a2 + 1))) \
		seek=$((rs * 512 + 2 * a2)) conv=notrunc status=none
	printf '\001' | dd of="$img" bs=1 seek=37 conv=notrunc status=none
	check "fat dirty, copies differ: fsck.fat finds the damage" \
		sh -c "! fsck.fat -n '$img' >/dev/null 2>&1"
	zip_unzip "fat dirty, copies differ" "$img" \
		"f.img: fat: not cleanly unmounted (dirty bit set); allocation table copy 1 differs from copy 0; imaging what either calls in use; taking the union$"
	check "fat dirty, copies differ: one line" test "$(wc -l <"$T/err")" = 1
	"$IMAGEZIP" -i "$img" >"$T/info" 2>/dev/null
	check "fat dirty, copies differ: -i says it too" \
		grep -q "fat \[.*(fat: not cleanly unmounted (dirty bit set); allocation table copy 1 differs" "$T/info"
	fat_tables_back
	check "fat dirty, copies differ: every file reads back identical (mcopy)" \
		same_files "$T/src" "$T/out" f1 f2 f3 f4
else
	not_ok "fat dirty: f2 located"
fi
rm -f "$img" "$T/f.orig" "$T/t.img"

# ---- NTFS: clusters of a file that $Bitmap calls free ----
img="$T/n.img"
dirty "$img" $((24 * MIB))
mkntfs -q -F -f -c 4096 "$img" >/dev/null 2>&1 || not_ok "mkntfs"
for f in $all; do ntfscp -q "$img" "$T/src/$f" "$f" >/dev/null 2>&1; done
# first_run ARGS: LCN and length of the first run of the unnamed $DATA ntfsinfo shows
first_run() {
	ntfsinfo "$@" -v "$img" 2>/dev/null |
		awk '/Runlist:/ { f = 1; next } f && NF == 3 { print $2, $3; exit }'
}
# shellcheck disable=SC2046 # split into fields on purpose
set -- $(first_run -i 6); bm=${1:-}
# shellcheck disable=SC2046 # split into fields on purpose
set -- $(first_run -F /f8); lcn=${1:-} len=${2:-}
if [ -n "$bm" ] && [ -n "$lcn" ] && [ -n "$len" ]; then
	# the bitmap bytes that lie wholly inside the file's first run
	b0=$(((lcn + 7) / 8)) b1=$(((lcn + len) / 8))
	dd if=/dev/zero of="$img" bs=1 count=$((b1 - b0)) seek=$((bm * 4096 + b0)) \
		conv=notrunc status=none
	ntfscat "$img" f8 2>/dev/null | cmp -s - "$T/src/f8"
	check "ntfs: the damaged source still reads f8 (ntfscat)" test $? = 0
	zip_unzip "ntfs" "$img" "$((8 * (b1 - b0))) clusters \$Bitmap calls free are in use by MFT record [0-9]* and others; imaging them too"
	bad=0
	for f in $all; do
		ntfscat "$T/t.img" "$f" 2>/dev/null | cmp -s - "$T/src/$f" || { bad=1; echo "# differs: $f"; }
	done
	check "ntfs: every file reads back identical (ntfscat)" test $bad = 0
else
	not_ok "ntfs: runs located (\$Bitmap at $bm, f8 at $lcn+$len)"
fi
rm -f "$img" "$T/t.img"

# ---- NTFS marked dirty, its $LogFile clean: the union, not raw ----
# ntfs_dirty IMG: VOLUME_IS_DIRTY set in $Volume's VOLUME_INFORMATION (MFT record
# 3) and in its copy in $MFTMirr, which ntfs-3g compares
u() { od -An -t "u$2" -j "$1" -N "$2" "$img" | tr -d ' '; }
ntfs_dirty() {
	img=$1
	bps=$(u 11 2); spc=$(u 13 1); mft=$(u 48 8); cpr=$(u 64 1)
	cs=$((bps * spc))
	if [ "$cpr" -gt 127 ]; then rs=$((1 << (256 - cpr))); else rs=$((cpr * cs)); fi
	rec=$((mft * cs + 3 * rs))
	a=$((rec + $(u $((rec + 20)) 2)))
	while [ "$(u "$a" 4)" != 112 ]; do
		[ "$(u "$a" 4)" = 4294967295 ] && return 1
		a=$((a + $(u $((a + 4)) 4)))
	done
	f=$((a + $(u $((a + 20)) 2) + 10))
	[ $(((f - rec) % bps)) -lt $((bps - 2)) ] || return 1
	v=$(( $(u "$f" 1) | 1 ))
	for at in "$f" $((f - mft * cs + $(u 56 8) * cs)); do
		printf "\\$(printf %o $v)" | dd of="$img" bs=1 seek="$at" conv=notrunc status=none
	done
}
img="$T/n.img"
dirty "$img" $((24 * MIB))
mkntfs -q -F -f -c 4096 "$img" >/dev/null 2>&1 || not_ok "mkntfs"
for f in $all; do ntfscp -q "$img" "$T/src/$f" "$f" >/dev/null 2>&1; done
clean=$(used_bytes "$img")
if ntfs_dirty "$img"; then
	zip_unzip "ntfs dirty" "$img" "n.img: ntfs: volume marked dirty (\$LogFile clean); taking the union$"
	check "ntfs dirty: one line" test "$(wc -l <"$T/err")" = 1
	check "ntfs dirty: the image as large as the clean volume's" test "$(used_bytes "$img")" = "$clean"
	bad=0
	for f in $all; do
		ntfscat -f "$T/t.img" "$f" 2>/dev/null | cmp -s - "$T/src/$f" || { bad=1; echo "# differs: $f"; }
	done
	check "ntfs dirty: every file reads back identical (ntfscat -f)" test $bad = 0
else
	not_ok "ntfs dirty: \$Volume's flags located"
fi
rm -f "$img" "$T/t.img"
done_testing
