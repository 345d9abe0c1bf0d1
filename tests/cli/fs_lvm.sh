#!/bin/sh
# An LVM2 physical volume made by pvcreate and vgcreate on a loop device over
# random bytes. This machine (and CI) may lack device-mapper, so no LV can be
# created or activated: the LVs are written into the VG's metadata with LVM's
# own tools (vgcfgbackup, a logical_volumes section added, vgcfgrestore), and
# the filesystems are built in files and copied to the LVs' extents:
#   lva  XFS, one segment        lvb  ext4, two segments, out of order on the PV
#   lvc  swap, one segment       lvd  no filesystem (kept whole)
#   lve  btrfs (mixed block groups), one segment
# Free extents and the free space inside lva/lvb/lvc/lve are skipped; after a
# restore onto 0xa5 the LVs are put together again from the target and checked
# with xfs_repair -n / e2fsck -fn, their files compared. A damaged lvb gets one
# warning line naming it (the union; raw with a journal to replay). Damaged
# metadata takes the PV raw with a warning and restores byte for byte.
# Mount (XFS, read-only, to compare its files) in a mount namespace of our own,
# as fs_xfs.sh does.
if [ -z "${NDZ_MNTNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 &&
   unshare -m --propagation private true 2>/dev/null; then
	NDZ_MNTNS=1 exec unshare -m --propagation private sh "$0" "$@"
fi
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need pvcreate vgcreate vgcfgbackup vgcfgrestore losetup mkfs.xfs xfs_repair mke2fs e2fsck \
	debugfs mkswap mkfs.btrfs btrfs od dd gzip
[ "$(id -u)" = 0 ] || skip_all "pvcreate needs root (a loop device)"
export LVM_SUPPRESS_FD_WARNINGS=1
# mkfs.xfs makes small filesystems only when run the way fstests runs it
export TEST_DIR="$T" TEST_DEV=none QA_CHECK_FS=1

EXT=$MIB                               # vgcreate -s 1M
PV=$((200 * MIB))
PESTART=$MIB                           # LVM's default data alignment
mkfiles "$T/src" 30 700
keep=""; i=1; while [ $i -le 30 ]; do keep="$keep f$i"; i=$((i + 1)); done

# the PV over stale random bytes, its VG, and the LVs in its metadata
dirty "$T/pv.img" $PV
L=$(losetup -f --show "$T/pv.img") || skip_all "no loop device"
# detach by file: the number may belong to someone else once we let it go
at_exit "for l in \$(losetup -n -O NAME -j '$T/pv.img'); do losetup -d \$l; done"
lvm_() { "$@" --devices "$L" >"$T/lvm.log" 2>&1 || { cat "$T/lvm.log"; return 1; }; }
if ! lvm_ pvcreate -ff -y --metadatacopies 2 "$L" || ! lvm_ vgcreate -s 1M ndzvg "$L" ||
   ! lvm_ vgcfgbackup -f "$T/vg.txt" ndzvg; then
	not_ok "pvcreate, vgcreate, vgcfgbackup"; done_testing
fi
grep -q "pe_start = $((PESTART / 512))\$" "$T/vg.txt" || { not_ok "pe_start is 1 MiB"; done_testing; }
# two metadata copies: the second one after the last extent
pecount=$(sed -n 's/^[[:space:]]*pe_count = \([0-9]*\).*/\1/p' "$T/vg.txt")

# seg N LV_EXTENT COUNT PV_EXTENT / lv NAME SEGMENTS
seg() {
	printf '\t\t\tsegment%s {\n\t\t\t\tstart_extent = %s\n\t\t\t\textent_count = %s\n' "$1" "$2" "$3"
	printf '\t\t\t\ttype = "striped"\n\t\t\t\tstripe_count = 1\n'
	printf '\t\t\t\tstripes = [\n\t\t\t\t\t"pv0", %s\n\t\t\t\t]\n\t\t\t}\n' "$4"
}
lv() {
	printf '\t\t%s {\n\t\t\tid = "%s"\n' "$1" \
		"$(echo XXXXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXXXX | sed "s/X/${1#lv}/g")"
	printf '\t\t\tstatus = ["READ", "WRITE", "VISIBLE"]\n\t\t\tflags = []\n'
	printf '\t\t\tsegment_count = %s\n' "$2"
}
# layout in 1 MiB extents (198 of them): lvb(16..31) at 5, lva at 30, lvc at 100, lvb(0..15) at 120,
# lvd at 140, lve at 150; free: 0-4, 21-29, 94-99, 104-119, 136-139, 146-149, 190-198
{
	sed '$d' "$T/vg.txt" | sed '/^}$/,$d'
	printf '\tlogical_volumes {\n'
	lv lva 1; seg 1 0 64 30; printf '\t\t}\n'
	lv lvb 2; seg 1 0 16 120; seg 2 16 16 5; printf '\t\t}\n'
	lv lvc 1; seg 1 0 4 100; printf '\t\t}\n'
	lv lvd 1; seg 1 0 6 140; printf '\t\t}\n'
	lv lve 1; seg 1 0 40 150; printf '\t\t}\n'
	printf '\t}\n}\n'
} >"$T/vg2.txt"
check "vgcfgrestore takes the LVs (no --force)" lvm_ vgcfgrestore -f "$T/vg2.txt" ndzvg
losetup -d "$L"

# the filesystems, built in files, copied to their extents (1 MiB each)
at() { echo $((PESTART + $1 * EXT)); }
# copy FILE FROM_MIB COUNT_MIB PV_EXTENT: pieces of an LV into the PV
copy() { dd if="$1" of="$T/pv.img" bs=$MIB skip="$2" count="$3" seek=$(($(at "$4") / MIB)) \
	    conv=notrunc status=none; }
# gather IMG LV_FILE PIECES...: an LV put together again ("from,count,pv_extent")
gather() {
	: >"$2"
	_img=$1; _out=$2; shift 2
	for _p; do
		IFS=, read -r _f _c _e <<-EOF
		$_p
		EOF
		dd if="$_img" of="$_out" bs=$MIB skip=$(($(at "$_e") / MIB)) seek="$_f" count="$_c" \
		   conv=notrunc status=none
	done
}
{
	echo /dev/null; echo 0 0; echo "d--755 0 0"
	for f in "$T"/src/*; do echo "${f##*/} ---644 0 0 $f"; done
	echo '$'
} >"$T/proto"
dirty "$T/lva" $((64 * MIB))
mkfs.xfs -q -f -K -p "$T/proto" "$T/lva" >"$T/mk.log" 2>&1 || { cat "$T/mk.log"; not_ok "mkfs.xfs"; }
dirty "$T/lvb" $((32 * MIB))
mke2fs -q -F -E nodiscard -t ext4 -d "$T/src" "$T/lvb" >"$T/mk.log" 2>&1 ||
	{ cat "$T/mk.log"; not_ok "mke2fs"; }
dirty "$T/lvc" $((4 * MIB))
mkswap "$T/lvc" >/dev/null 2>&1 || not_ok "mkswap"
copy "$T/lva" 0 64 30
copy "$T/lvb" 0 16 120
copy "$T/lvb" 16 16 5
copy "$T/lvc" 0 4 100
dirty "$T/lve" $((40 * MIB))
mkfs.btrfs -q -f -K -M --rootdir "$T/src" "$T/lve" >"$T/mk.log" 2>&1 ||
	{ cat "$T/mk.log"; not_ok "mkfs.btrfs"; }
copy "$T/lve" 0 40 150

# the scan
"$IMAGEZIP" -i "$T/pv.img" >"$T/info" 2>&1
sed 's/^/# /' "$T/info"
check "-i names the VG" grep -q "lvm \[LVM2 PV of VG ndzvg, 1024 KiB extents" "$T/info"
check "-i: lva holds XFS" grep -q "LV lva: xfs" "$T/info"
check "-i: lvb holds ext4" grep -q "LV lvb: ext4" "$T/info"
check "-i: lvc holds swap" grep -q "LV lvc: linux swap" "$T/info"
check "-i: lvd kept whole" grep -q "LV lvd: kept whole: no filesystem" "$T/info"
check "-i: lve holds btrfs" grep -q "LV lve: btrfs" "$T/info"
used=$(used_bytes "$T/pv.img")
check "free extents and free space in the LVs skipped ($used bytes of $PV)" \
	test "$used" -lt $((PV / 3))

"$IMAGEZIP" "$T/pv.img" "$T/pv.ndz" 2>"$T/err" || { not_ok "imagezip"; cat "$T/err"; }
check "imagezip says nothing" test ! -s "$T/err"
pattern "$T/tgt" $PV
check "imageunzip" "$IMAGEUNZIP" "$T/pv.ndz" "$T/tgt"
check "label, metadata and all before pe_start restored" \
	cmp -s -n $PESTART "$T/pv.img" "$T/tgt"
check "the second metadata area, after extent $pecount, restored" \
	cmp -s -i $((PESTART + pecount * EXT)) "$T/pv.img" "$T/tgt"
gather "$T/tgt" "$T/lva.out" 0,64,30
gather "$T/tgt" "$T/lvb.out" 0,16,120 16,16,5
gather "$T/tgt" "$T/lvc.out" 0,4,100
gather "$T/tgt" "$T/lvd.out" 0,6,140
gather "$T/pv.img" "$T/lvd.in" 0,6,140
gather "$T/tgt" "$T/lve.out" 0,40,150
# shellcheck disable=SC2086
xfs_restored lva "$T/lva.out" $keep
if e2fsck -fn "$T/lvb.out" >"$T/fsck" 2>&1; then ok "lvb (two segments): e2fsck -fn clean"
else not_ok "lvb: e2fsck -fn"; head -20 "$T/fsck"; fi
rm -rf "$T/out"; mkdir "$T/out"
debugfs -R "rdump / $T/out" "$T/lvb.out" >/dev/null 2>&1
# shellcheck disable=SC2086
check "lvb: every file reads back identical" same_files "$T/src" "$T/out" $keep
check "lvc: swap header restored" cmp -s -n 4096 "$T/lvc" "$T/lvc.out"
check "lvd (no filesystem) restored whole" cmp -s "$T/lvd.in" "$T/lvd.out"
if btrfs check --readonly "$T/lve.out" >"$T/fsck" 2>&1; then ok "lve: btrfs check clean"
else not_ok "lve: btrfs check"; head -20 "$T/fsck"; fi
rm -rf "$T/out"; mkdir "$T/out"
btrfs restore "$T/lve.out" "$T/out" >/dev/null 2>&1
# shellcheck disable=SC2086
check "lve: every file reads back identical (btrfs restore)" same_files "$T/src" "$T/out" $keep
check "a free extent was not written" \
	sh -c "dd if='$T/tgt' bs=$MIB skip=$(($(at 110) / MIB)) count=1 status=none |
	       tr -d '\245' | wc -c | grep -qx 0"
smaller "$T/pv.ndz" "$T/pv.img" "$used" "PV"

# lvb damaged (unclean, a stale descriptor checksum): one line names the LV and
# its filesystem, the union; then a journal to replay: that LV alone goes raw
cp "$T/pv.img" "$T/pv.orig"
printf 'ssv state 0\nset_bg 1 checksum 0xdead\n' >"$T/cmds"
debugfs -w -f "$T/cmds" "$T/lvb" >/dev/null 2>&1
copy "$T/lvb" 0 16 120
copy "$T/lvb" 16 16 5
"$IMAGEZIP" "$T/pv.img" "$T/pv.ndz" 2>"$T/err"
check "lvb damaged: imagezip exits 0" test $? = 0
check "lvb damaged: one line" test "$(wc -l <"$T/err")" = 1
check "lvb damaged: the LV named, the union" grep -q \
	"pv.img: LV lvb: ext: group 1: descriptor checksum does not match; not cleanly unmounted; taking the union$" "$T/err"
pattern "$T/tgt" $PV
"$IMAGEUNZIP" "$T/pv.ndz" "$T/tgt" 2>/dev/null
gather "$T/tgt" "$T/lvb.out" 0,16,120 16,16,5
rm -rf "$T/out"; mkdir "$T/out"
debugfs -n -R "rdump / $T/out" "$T/lvb.out" >/dev/null 2>&1
# shellcheck disable=SC2086
check "lvb damaged: every file reads back identical" same_files "$T/src" "$T/out" $keep
debugfs -n -w -R "feature needs_recovery" "$T/lvb" >/dev/null 2>&1
copy "$T/lvb" 0 16 120
"$IMAGEZIP" -i "$T/pv.img" >"$T/info" 2>"$T/err"
check "lvb with a journal to replay: one line" test "$(wc -l <"$T/err")" = 1
check "lvb with a journal to replay: the LV raw" grep -q \
	"pv.img: LV lvb: ext: journal needs recovery; taking it raw$" "$T/err"
check "lvb with a journal to replay: -i says the same" grep -q \
	"(LV lvb: ext: journal needs recovery; taking it raw)" "$T/info"
mv "$T/pv.orig" "$T/pv.img"
rm -rf "$T/tgt" "$T/pv.ndz" "$T"/*.out "$T/lva" "$T/lvb" "$T/lve" "$T/lvd.in" "$T/out"

# the PV as MBR partition 1 (type 0x8e): found by probing, -S 1=lvm too
if command -v sfdisk >/dev/null 2>&1; then
	dk="$T/dk.img"
	truncate -s $((MIB + PV)) "$dk"
	mbr_part "$dk" "$T/pv.img" 8e
	"$IMAGEZIP" -i "$dk" >"$T/info" 2>&1
	check "MBR partition: -i names the VG and the LVs" \
		grep -q "^ *1: .*lvm \[LVM2 PV of VG ndzvg, .*LV lvb: ext4" "$T/info"
	check "MBR partition: as much skipped" test "$(used_bytes "$dk")" -lt $((PV / 3))
	"$IMAGEZIP" -S 1=lvm -i "$dk" >"$T/info" 2>&1
	check "-S 1=lvm works" grep -q "lvm \[LVM2 PV of VG ndzvg" "$T/info"
	mbr_restored "$dk" "$T/dk.ndz" "$T/tgt"
	dd if="$T/tgt" of="$T/lvb.out" bs=$MIB skip=$((1 + 1 + 120)) count=16 status=none
	dd if="$T/tgt" of="$T/lvb.out" bs=$MIB skip=$((1 + 1 + 5)) seek=16 count=16 status=none
	check "MBR partition: lvb e2fsck -fn clean" quiet e2fsck -fn "$T/lvb.out"
	rm -f "$dk" "$T/dk.ndz" "$T/tgt" "$T/lvb.out"
else
	echo "# sfdisk not installed: no MBR-partition check"
fi

# damaged metadata: one byte of the text changed, its checksum no longer matches
mda=4096
roff=$(od -An -t u8 -j $((mda + 40)) -N 8 "$T/pv.img" | tr -d ' ')
printf 'X' | dd of="$T/pv.img" bs=1 seek=$((mda + roff + 40)) conv=notrunc status=none
"$IMAGEZIP" "$T/pv.img" "$T/bad.ndz" 2>"$T/err"
check "damaged metadata: imagezip succeeds" test $? = 0
check "damaged metadata: a warning naming the checksum" grep -q "lvm: metadata .*checksum mismatch" "$T/err"
pattern "$T/tgt" $PV
"$IMAGEUNZIP" "$T/bad.ndz" "$T/tgt" 2>/dev/null
check "damaged metadata: restores byte for byte" cmp -s "$T/pv.img" "$T/tgt"
done_testing
