#!/bin/sh
# A whole disk as a RHEL-family installer lays it out: GPT with an EFI system
# partition (FAT32), an XFS /boot and an LVM2 physical volume holding an XFS root
# and a swap LV, over a disk of stale random bytes. As in fs_lvm.sh there is no
# device-mapper here, so the LVs are written into the VG's metadata with
# vgcfgrestore and the filesystems built in files and copied to their extents.
# imagezip must find each piece, skip the free space of all of them, and the
# restore onto 0xa5 must check clean with each filesystem's own checker.
if [ -z "${NDZ_MNTNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 &&
   unshare -m --propagation private true 2>/dev/null; then
	NDZ_MNTNS=1 exec unshare -m --propagation private sh "$0" "$@"
fi
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need sfdisk pvcreate vgcreate vgcfgbackup vgcfgrestore losetup mkfs.xfs xfs_repair mkfs.vfat \
	fsck.vfat mcopy mkswap dd
[ "$(id -u)" = 0 ] || skip_all "pvcreate needs root (a loop device)"
export LVM_SUPPRESS_FD_WARNINGS=1
export TEST_DIR="$T" TEST_DEV=none QA_CHECK_FS=1      # small XFS, as fstests makes them

# partitions in MiB: ESP 1..41, /boot 41..105, PV 105..361; disk 362 MiB (GPT backup at the end)
ESP_S=1 ESP_N=40 BOOT_S=41 BOOT_N=64 PV_S=105 PV_N=256 DISK=362
mkfiles "$T/src" 20 500
keep=""; i=1; while [ $i -le 20 ]; do keep="$keep f$i"; i=$((i + 1)); done

# the disk and its GPT
dirty "$T/disk" $((DISK * MIB))
printf 'label: gpt\nstart=%s, size=%s, type=U\nstart=%s, size=%s, type=L\nstart=%s, size=%s, type=E6D6D379-F507-44C2-A23C-238F2A3DF928\n' \
	$((ESP_S * 2048)) $((ESP_N * 2048)) $((BOOT_S * 2048)) $((BOOT_N * 2048)) \
	$((PV_S * 2048)) $((PV_N * 2048)) | sfdisk -q "$T/disk" >/dev/null 2>&1 ||
	{ not_ok "sfdisk"; done_testing; }

# ESP: FAT32 with files
dirty "$T/esp" $((ESP_N * MIB))
# FAT32 needs 65525 clusters or more: 512-byte clusters
mkfs.vfat -F 32 -s 1 "$T/esp" >/dev/null 2>&1 || not_ok "mkfs.vfat"
for f in f1 f2 f3; do MTOOLS_SKIP_CHECK=1 mcopy -i "$T/esp" "$T/src/$f" "::/$f" || not_ok "mcopy"; done
# /boot: XFS filled at mkfs time
{
	echo /dev/null; echo 0 0; echo "d--755 0 0"
	for f in "$T"/src/*; do echo "${f##*/} ---644 0 0 $f"; done
	echo '$'
} >"$T/proto"
dirty "$T/boot" $((BOOT_N * MIB))
mkfs.xfs -q -f -K -p "$T/proto" "$T/boot" >"$T/mk.log" 2>&1 || { cat "$T/mk.log"; not_ok "mkfs.xfs /boot"; }

# the PV: pvcreate/vgcreate on a loop device, LVs root (160 MiB) and swap (16 MiB) in its metadata
dirty "$T/pv" $((PV_N * MIB))
L=$(losetup -f --show "$T/pv") || skip_all "no loop device"
at_exit "for l in \$(losetup -n -O NAME -j '$T/pv'); do losetup -d \$l; done"
lvm_() { "$@" --devices "$L" >"$T/lvm.log" 2>&1 || { cat "$T/lvm.log"; return 1; }; }
if ! lvm_ pvcreate -ff -y "$L" || ! lvm_ vgcreate -s 1M rhel "$L" ||
   ! lvm_ vgcfgbackup -f "$T/vg.txt" rhel; then
	not_ok "pvcreate, vgcreate, vgcfgbackup"; done_testing
fi
pestart=$(( $(sed -n 's/^[[:space:]]*pe_start = \([0-9]*\).*/\1/p' "$T/vg.txt") * 512 ))
lv() {	# NAME EXTENTS PV_EXTENT
	printf '\t\t%s {\n\t\t\tid = "%s"\n' "$1" \
		"$(echo XXXXXX-XXXX-XXXX-XXXX-XXXX-XXXX-XXXXXX | sed "s/X/$4/g")"
	printf '\t\t\tstatus = ["READ", "WRITE", "VISIBLE"]\n\t\t\tflags = []\n\t\t\tsegment_count = 1\n'
	printf '\t\t\tsegment1 {\n\t\t\t\tstart_extent = 0\n\t\t\t\textent_count = %s\n' "$2"
	printf '\t\t\t\ttype = "striped"\n\t\t\t\tstripe_count = 1\n'
	printf '\t\t\t\tstripes = [\n\t\t\t\t\t"pv0", %s\n\t\t\t\t]\n\t\t\t}\n\t\t}\n' "$3"
}
{
	sed '$d' "$T/vg.txt" | sed '/^}$/,$d'
	printf '\tlogical_volumes {\n'
	lv root 160 0 a
	lv swap 16 160 b
	printf '\t}\n}\n'
} >"$T/vg2.txt"
check "vgcfgrestore takes the LVs" lvm_ vgcfgrestore -f "$T/vg2.txt" rhel
losetup -d "$L"
dirty "$T/root" $((160 * MIB))
mkfs.xfs -q -f -K -p "$T/proto" "$T/root" >"$T/mk.log" 2>&1 || { cat "$T/mk.log"; not_ok "mkfs.xfs root"; }
dirty "$T/swap" $((16 * MIB))
mkswap "$T/swap" >/dev/null 2>&1 || not_ok "mkswap"
dd if="$T/root" of="$T/pv" bs=$MIB seek=$((pestart / MIB)) conv=notrunc status=none
dd if="$T/swap" of="$T/pv" bs=$MIB seek=$((pestart / MIB + 160)) conv=notrunc status=none

# the pieces into the disk
dd if="$T/esp" of="$T/disk" bs=$MIB seek=$ESP_S conv=notrunc status=none
dd if="$T/boot" of="$T/disk" bs=$MIB seek=$BOOT_S conv=notrunc status=none
dd if="$T/pv" of="$T/disk" bs=$MIB seek=$PV_S conv=notrunc status=none

"$IMAGEZIP" -i "$T/disk" >"$T/info" 2>&1
sed 's/^/# /' "$T/info"
check "-i: GPT" grep -qi "gpt" "$T/info"
check "-i: the ESP is FAT" grep -q "^ *1: .*fat" "$T/info"
check "-i: /boot is XFS" grep -q "^ *2: .*xfs" "$T/info"
check "-i: the PV, its root LV XFS and its swap LV" \
	grep -q "^ *3: .*type linux-lvm .*lvm \[LVM2 PV of VG rhel.*LV root: xfs.*LV swap: linux swap" "$T/info"
used=$(used_bytes "$T/disk")
check "free space of every piece skipped ($used bytes of $((DISK * MIB)))" \
	test "$used" -lt $((DISK * MIB / 4))
"$IMAGEZIP" "$T/disk" "$T/disk.ndz" 2>"$T/err" || { not_ok "imagezip"; cat "$T/err"; }
check "imagezip says nothing" test ! -s "$T/err"
smaller "$T/disk.ndz" "$T/disk" "$used" "disk"
pattern "$T/tgt" $((DISK * MIB))
check "imageunzip" "$IMAGEUNZIP" "$T/disk.ndz" "$T/tgt"
check "both GPT headers and tables restored" sh -c \
	"cmp -s -n $((34 * 512)) '$T/disk' '$T/tgt' &&
	 cmp -s -i $((DISK * MIB - 33 * 512)) '$T/disk' '$T/tgt'"
dd if="$T/tgt" of="$T/esp.out" bs=$MIB skip=$ESP_S count=$ESP_N status=none
dd if="$T/tgt" of="$T/boot.out" bs=$MIB skip=$BOOT_S count=$BOOT_N status=none
dd if="$T/tgt" of="$T/root.out" bs=$MIB skip=$((PV_S + pestart / MIB)) count=160 status=none
dd if="$T/tgt" of="$T/swap.out" bs=$MIB skip=$((PV_S + pestart / MIB + 160)) count=16 status=none
check "ESP: fsck.vfat -n clean" quiet fsck.vfat -n "$T/esp.out"
rm -rf "$T/out"; mkdir "$T/out"
for f in f1 f2 f3; do MTOOLS_SKIP_CHECK=1 mcopy -i "$T/esp.out" "::/$f" "$T/out/$f" 2>/dev/null; done
check "ESP: its files read back identical" same_files "$T/src" "$T/out" f1 f2 f3
for p in boot root; do
	# shellcheck disable=SC2086
	xfs_restored "$p" "$T/$p.out" $keep
done
check "swap LV: its header restored" cmp -s -n 4096 "$T/swap" "$T/swap.out"
check "the PV's label and metadata restored" cmp -s -n "$pestart" "$T/pv" \
	"$(dd if="$T/tgt" of="$T/pvhead" bs=$MIB skip=$PV_S count=$((pestart / MIB)) status=none; echo "$T/pvhead")"
check "the PV's free extents were not written" \
	sh -c "dd if='$T/tgt' bs=$MIB skip=$((PV_S + pestart / MIB + 200)) count=4 status=none |
	       tr -d '\245' | wc -c | grep -qx 0"
done_testing
