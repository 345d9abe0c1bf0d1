#!/bin/sh
# Btrfs on one device made by mkfs.btrfs over random bytes, filled at mkfs time
# (--rootdir) and, where this machine mounts btrfs, through a loop mount
# (subvolumes, snapshots, deleted files). Only the first MiB, the superblock
# copies and what the extent tree allocates (at each DUP stripe) are imaged;
# after a restore onto 0xa5, btrfs check --readonly and every file read back (a
# read-only mount, or btrfs restore). Damaged metadata or a second device: raw.
# Mount in a mount namespace of our own: a mount made in the shared one is
# copied into namespaces other programs create meanwhile, and its filesystem
# then lives on (log not yet closed) after our umount.
if [ -z "${NDZ_MNTNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 &&
   unshare -m --propagation private true 2>/dev/null; then
	NDZ_MNTNS=1 exec unshare -m --propagation private sh "$0" "$@"
fi
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mkfs.btrfs btrfs od dd

SIZE=$((160 * MIB))
mkfiles "$T/src" 24 700
mkfiles "$T/more" 6 900
for f in "$T"/more/f*; do mv "$f" "$T/more/g${f##*/f}"; done

can_mount=0
can_loop_mount btrfs "$SIZE" mkfs.btrfs -q -f && can_mount=1
[ $can_mount = 1 ] || echo "# cannot mount btrfs here: files checked through btrfs restore only"

# bmount IMG DIR [ro] / bumount IMG DIR: through a loop device, detached after
bmount() { loop_mount btrfs "$@"; }
bumount() { loop_umount "$@"; }

all=$(cd "$T/src" && ls)

# run NAME MKFS-ARGS...
run() {
	name=$1; shift
	img="$T/$name.img"; ndz="$T/$name.ndz"; tgt="$T/$name.tgt"
	dirty "$img" "$SIZE"
	if ! mkfs.btrfs -q -f -K "$@" --rootdir "$T/src" "$img" >"$T/mk.log" 2>&1; then
		not_ok "$name: mkfs.btrfs $*"; cat "$T/mk.log"; return
	fi
	keep=$all
	mounted=0
	if [ $can_mount = 1 ]; then
		if bmount "$img" "$T/m"; then
			btrfs -q subvolume create "$T/m/sub" >/dev/null
			cp "$T"/more/g* "$T/m/sub/"
			btrfs -q subvolume snapshot "$T/m" "$T/m/snap" >/dev/null
			rm -f "$T/m/f4" "$T/m/f8" "$T/m/f12" "$T/m/sub/g2"
			bumount "$img" "$T/m"
			mounted=1
			keep=$(echo "$all" | grep -v -x -e f4 -e f8 -e f12)
		else
			not_ok "$name: mount the source"
		fi
	fi
	check "$name: source is clean" quiet btrfs check --readonly "$img"
	if ! "$IMAGEZIP" "$img" "$ndz" 2>"$T/err"; then
		not_ok "$name: imagezip"; cat "$T/err"; return
	fi
	if [ -s "$T/err" ]; then not_ok "$name: imagezip says nothing"; cat "$T/err"
	else ok "$name: imagezip says nothing"; fi
	"$IMAGEZIP" -i "$img" >"$T/info" 2>&1
	check "$name: -i names it btrfs" grep -q "btrfs \[btrfs, " "$T/info"
	# (mkfs.btrfs --rootdir grows a file that is too small for what it holds)
	pattern "$tgt" "$(fsize "$img")"
	check "$name: imageunzip" "$IMAGEUNZIP" "$ndz" "$tgt"
	if btrfs check --readonly "$tgt" >"$T/fsck" 2>&1; then ok "$name: btrfs check clean"
	else not_ok "$name: btrfs check"; head -20 "$T/fsck"; fi
	if [ $mounted = 1 ]; then
		if bmount "$tgt" "$T/r" ro; then
			# shellcheck disable=SC2086
			check "$name: every file reads back identical (mount)" \
				same_files "$T/src" "$T/r" $keep
			check "$name: snapshot keeps the deleted files" \
				same_files "$T/src" "$T/r/snap" f4 f8 f12
			check "$name: subvolume files read back" \
				same_files "$T/more" "$T/r/sub" g1 g3 g4 g5 g6
			check "$name: deleted files stay deleted" test ! -e "$T/r/f4"
			bumount "$tgt" "$T/r"
		else
			not_ok "$name: restored filesystem mounts"
		fi
	else
		rm -rf "$T/out"; mkdir "$T/out"
		btrfs restore -q "$tgt" "$T/out" >/dev/null 2>&1
		# shellcheck disable=SC2086
		check "$name: every file reads back identical (btrfs restore)" \
			same_files "$T/src" "$T/out" $keep
	fi
	random_kept "$name" "$img" "$ndz"
	rm -f "$img" "$ndz" "$tgt"
}

run default
run dup-data -d dup -m dup
if [ "${NDZ_SANITIZED:-0}" != 1 ]; then
	run single-64k-nodes -d single -m single -n 65536
fi

# (made over zeros: a raw image of them is quick to make)
base="$T/d.img"
truncate -s "$SIZE" "$base"
mkfs.btrfs -q -f -K --rootdir "$T/src" "$base" >/dev/null 2>&1
cp "$base" "$T/b.img"; poke "$T/b.img" $((65536 + 0x90)) 001
damaged "$T/b.img" "damaged superblock" "btrfs: superblock checksum"
# the chunk tree's root block: one byte of its items
cr=$(od -An -t u8 -j $((65536 + 0x58)) -N 8 "$base" | tr -d ' ')
# map the chunk root through the system chunk of the superblock dump
sys=$(btrfs inspect-internal dump-super -f "$base" 2>/dev/null |
	awk '/SYSTEM/ { f = 1 } f && $1 == "stripe" && $2 == 0 { print $6; exit }')
slog=$(btrfs inspect-internal dump-super -f "$base" 2>/dev/null |
	awk '/item [0-9]+ key \(FIRST_CHUNK_TREE CHUNK_ITEM/ { gsub(/\)/, "", $6); print $6; exit }')
if [ -n "$sys" ] && [ -n "$slog" ]; then
	cp "$base" "$T/b.img"; poke "$T/b.img" $((sys + cr - slog + 200)) 377
	damaged "$T/b.img" "damaged chunk tree block" "btrfs: tree block .*checksum"
else
	not_ok "chunk root located (sys=$sys slog=$slog)"
fi
rm -f "$base" "$T/b.img"

# inside an MBR disk, partition type 0x83: found by probing; -S 1=btrfs too
if command -v sfdisk >/dev/null 2>&1; then
	p="$T/p.img" dk="$T/dk.img"
	dirty "$p" "$SIZE"
	mkfs.btrfs -q -f -K --rootdir "$T/src" "$p" >/dev/null 2>&1
	psz=$(fsize "$p")
	truncate -s $((MIB + psz)) "$dk"
	mbr_part "$dk" "$p" 83
	"$IMAGEZIP" -i "$dk" >"$T/info"
	check "MBR partition: -i names it" grep -q "^ *1: .*btrfs \[btrfs, " "$T/info"
	"$IMAGEZIP" -S 1=btrfs -i "$dk" >"$T/info" 2>&1
	check "-S 1=btrfs works" grep -q "btrfs \[btrfs, " "$T/info"
	mbr_restored "$dk" "$T/dk.ndz" "$T/t.img"
	extract "$T/t.img" 2048 $((psz / 512)) "$T/p2.img"
	check "MBR partition: btrfs check clean" quiet btrfs check --readonly "$T/p2.img"
	rm -f "$p" "$dk" "$T/dk.ndz" "$T/t.img" "$T/p2.img"
else
	echo "# sfdisk not installed: no MBR-partition check"
fi

# two devices: raw with a warning
truncate -s "$SIZE" "$T/a.img" "$T/c.img"
if mkfs.btrfs -q -f -K -d single -m single "$T/a.img" "$T/c.img" >/dev/null 2>&1; then
	damaged "$T/a.img" "second device" "spans 2 devices"
else
	echo "# mkfs.btrfs cannot make a two-device filesystem in files here"
fi
rm -f "$T/a.img" "$T/c.img"
done_testing
