#!/bin/sh
# XFS made by mkfs.xfs over random bytes and filled at mkfs time (-p protofile),
# then, for v5, through a real mount: files added, reflinked, deleted. Only what
# the free-space B+trees leave allocated is imaged; after a restore onto 0xa5,
# xfs_repair -n and every file read back (a read-only mount for v5; xfs_db's
# block maps for v4, which this kernel no longer mounts). A dirty log or damaged
# metadata goes raw with a warning and restores byte for byte.
# Mount in a mount namespace of our own: a mount made in the shared one is
# copied into namespaces other programs create meanwhile, and its filesystem
# then lives on (log not yet closed) after our umount.
if [ -z "${NDZ_MNTNS:-}" ] && [ "$(id -u)" = 0 ] && command -v unshare >/dev/null 2>&1 &&
   unshare -m --propagation private true 2>/dev/null; then
	NDZ_MNTNS=1 exec unshare -m --propagation private sh "$0" "$@"
fi
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mkfs.xfs xfs_repair xfs_db od dd
# mkfs.xfs refuses filesystems under 300 MB unless run the way fstests runs it
# (all three set); small ones keep this test quick
export TEST_DIR="$T" TEST_DEV=none QA_CHECK_FS=1

SIZE=$((64 * MIB))
mkfiles "$T/src" 24 500
# the protofile: every file of src in the root directory
{
	echo /dev/null; echo 0 0; echo "d--755 0 0"
	for f in "$T"/src/*; do echo "${f##*/} ---644 0 0 $f"; done
	echo '$'
} >"$T/proto"

# can this machine mount XFS v5 through a loop device?
can_mount=0
can_loop_mount xfs "$SIZE" mkfs.xfs -q -f -K && can_mount=1
[ $can_mount = 1 ] || echo "# cannot mount XFS here: files checked through xfs_db only"

# xmount IMG DIR [ro] / xumount IMG DIR: through a loop device, detached after
xmount() { loop_mount xfs "$@"; }
xumount() { loop_umount "$@"; }

# dbcat IMG NAME OUT: a file of the root directory rebuilt from xfs_db's block map
dbcat() {
	_bs=$(xfs_db -r -c "sb 0" -c "print blocksize" "$1" | sed 's/.* = //')
	_agb=$(xfs_db -r -c "sb 0" -c "print agblocks" "$1" | sed 's/.* = //')
	_sz=$(xfs_db -r -c "path /$2" -c "print core.size" "$1" | sed 's/.* = //')
	: >"$3"
	xfs_db -r -c "path /$2" -c "bmap" "$1" |
	awk '$1 == "data" { split($6, a, "[(/)]"); print $3, a[2], a[3], $8 }' |
	while read -r _o _ag _b _c; do
		dd if="$1" of="$3" bs="$_bs" skip=$((_ag * _agb + _b)) seek="$_o" count="$_c" \
			conv=notrunc status=none
	done
	truncate -s "$_sz" "$3"
}

# db_same IMG NAMES...: every named file, rebuilt through xfs_db, matches src
db_same() {
	_i=$1; shift
	_bad=0
	for _f; do
		dbcat "$_i" "$_f" "$T/one" && cmp -s "$T/src/$_f" "$T/one" ||
			{ echo "# differs: $_f"; _bad=1; }
	done
	return $_bad
}

all=$(cd "$T/src" && ls)
# files a mount adds (g1..g6)
mkfiles "$T/more" 6 900
for f in "$T"/more/f*; do mv "$f" "$T/more/g${f##*/f}"; done

# run NAME MKFS-ARGS...: make, fill, image, restore onto 0xa5, check
run() {
	name=$1; shift
	img="$T/$name.img"; ndz="$T/$name.ndz"; tgt="$T/$name.tgt"
	size=${RUN_SIZE:-$SIZE}
	dirty "$img" "$size"
	if ! mkfs.xfs -q -f -K "$@" -p "$T/proto" "$img" >"$T/mk.log" 2>&1; then
		not_ok "$name: mkfs.xfs $*"; cat "$T/mk.log"; return
	fi
	keep=$all
	mounted=0
	if [ $can_mount = 1 ] && ! grep -q crc=0 "$T/mk.log" && ! echo "$*" | grep -q crc=0; then
		if xmount "$img" "$T/m"; then
			# new files, a reflinked copy, deleted files: stale data in free space
			cp "$T"/more/g* "$T/m/"
			cp "$T"/more/g* "$T/src/"
			cp --reflink=always "$T/m/f2" "$T/m/r2" 2>/dev/null || cp "$T/m/f2" "$T/m/r2"
			cp "$T/src/f2" "$T/src/r2"
			rm -f "$T/m/f4" "$T/m/f8" "$T/m/f12" "$T/m/f16"
			xumount "$img" "$T/m"
			mounted=1
			keep=$(cd "$T/src" && ls | grep -v -x -e f4 -e f8 -e f12 -e f16)
		else
			not_ok "$name: mount the source"
		fi
	fi
	# with one AG there are no backup superblocks to check the geometry against
	ropt=""
	case " $* " in *agcount=1[!0-9]*) ropt="-o force_geometry" ;; esac
	# shellcheck disable=SC2086
	check "$name: source is clean" quiet xfs_repair -n $ropt "$img"
	if ! "$IMAGEZIP" "$img" "$ndz" 2>"$T/err"; then
		not_ok "$name: imagezip"; cat "$T/err"; return
	fi
	check "$name: imagezip says nothing" test ! -s "$T/err"
	"$IMAGEZIP" -i "$img" >"$T/info" 2>&1
	check "$name: -i names it xfs" grep -q "xfs \[xfs v" "$T/info"
	pattern "$tgt" "$size"
	check "$name: imageunzip" "$IMAGEUNZIP" "$ndz" "$tgt"
	if xfs_repair -n $ropt "$tgt" >"$T/fsck" 2>&1; then ok "$name: xfs_repair -n clean"
	else not_ok "$name: xfs_repair -n"; head -20 "$T/fsck"; fi
	if [ $mounted = 1 ]; then
		if xmount "$tgt" "$T/r" ro; then
			# shellcheck disable=SC2086
			check "$name: every file reads back identical (mount)" \
				same_files "$T/src" "$T/r" $keep
			check "$name: deleted files stay deleted" test ! -e "$T/r/f4"
			xumount "$tgt" "$T/r"
		else
			not_ok "$name: restored filesystem mounts"
		fi
		rm -f "$T/src/r2" "$T/src/g"*
	else
		# shellcheck disable=SC2086
		check "$name: every file reads back identical (xfs_db)" db_same "$tgt" $keep
	fi
	random_kept "$name" "$img" "$ndz"
	rm -f "$img" "$ndz" "$tgt"
}

run v5-4k-reflink -m crc=1,reflink=1 -d agcount=4
run v5-1k -b size=1024 -d agcount=4
run v5-4ksect-1ag -s size=4096 -d agcount=1
run v4-4k -m crc=0 -d agcount=3
if [ "${NDZ_SANITIZED:-0}" != 1 ]; then
	run v5-rmap-logsu -m rmapbt=1,reflink=1 -l su=32k -d agcount=2
	run v4-512-logv1 -m crc=0 -b size=512 -l version=1
	RUN_SIZE=$((128 * MIB)) run v5-8ag -d agcount=8
fi

# a log that has wrapped (several cycles) and is clean: still read
w="$T/w.img"
dirty "$w" $SIZE
mkfs.xfs -q -f -K -b size=1024 "$w" >/dev/null 2>&1
if [ $can_mount = 1 ] && xmount "$w" "$T/m"; then
	# about 3 log cycles of small creates and removes
	mkdir "$T/m/d"
	i=0
	while [ $i -lt 6000 ]; do echo $i >"$T/m/d/$i"; i=$((i + 1)); done
	sync
	rm -rf "$T/m/d"
	xumount "$w" "$T/m"
	"$IMAGEZIP" -i "$w" >"$T/info" 2>"$T/err"
	check "wrapped log: read as xfs" grep -q "xfs \[xfs v5" "$T/info"
	check "wrapped log: no warning" test ! -s "$T/err"
fi

# le32/be32 helpers for the damage below
be32() { od -An -t x1 -j "$2" -N 4 "$1" | tr -d ' \n' | { read -r h; echo $((0x$h)); }; }
# put32 FILE OFFSET VALUE: a big-endian 32-bit value
put32() { poke "$1" "$2" "$(printf '%03o' $((($3 >> 24) & 255)))" "$(printf '%03o' $((($3 >> 16) & 255)))" \
	"$(printf '%03o' $((($3 >> 8) & 255)))" "$(printf '%03o' $(($3 & 255)))"; }

# (made over zeros: a raw image of them is quick to make)
for v in 5 4; do
	base="$T/d$v.img"
	rm -f "$base"; truncate -s $((32 * MIB)) "$base"
	crc=1; [ $v = 4 ] && crc=0
	mkfs.xfs -q -f -K -m crc=$crc -d agcount=2 -p "$T/proto" "$base" >/dev/null 2>&1
	bs=$(be32 "$base" 4) agb=$(be32 "$base" 84)
	ss=$(od -An -t u2 -j 102 -N 2 --endian=big "$base" | tr -d ' ')
	agf1=$((agb * bs + ss))                 # AG 1's AGF
	# the superblock: agcount 4 -> 5 (v5: its checksum catches it first)
	cp "$base" "$T/b.img"; poke "$T/b.img" 91 005
	damaged "$T/b.img" "v$v: damaged superblock" "xfs: "
	# AG 1's free block count off by one
	cp "$base" "$T/b.img"
	fb=$(be32 "$base" $((agf1 + 52)))
	poke "$T/b.img" $((agf1 + 55)) "$(printf '%03o' $(((fb + 1) & 255)))"
	damaged "$T/b.img" "v$v: damaged AGF" "xfs: AG 1"
	# AG 1's bnobt root: one free extent's length grown by one
	cp "$base" "$T/b.img"
	root=$(be32 "$base" $((agf1 + 16)))
	hdr=16; [ $v = 5 ] && hdr=56
	rec=$((agb * bs + root * bs + hdr))
	n=$(be32 "$base" $((rec + 4)))
	poke "$T/b.img" $((rec + 7)) "$(printf '%03o' $(((n + 1) & 255)))"
	damaged "$T/b.img" "v$v: damaged free-space btree block" "xfs: AG 1"
	if [ $v = 4 ]; then
		# AG 0's first free extent grown one block down over an allocated one,
		# the AGF's free count (and longest extent) grown to match: only the
		# by-size tree still tells the truth, and it is read
		cp "$base" "$T/b.img"
		agf0=$ss
		r0=$(( $(be32 "$base" $((agf0 + 16))) * bs + hdr ))
		st=$(be32 "$base" "$r0") n=$(be32 "$base" $((r0 + 4)))
		fb=$(be32 "$base" $((agf0 + 52))) lg=$(be32 "$base" $((agf0 + 56)))
		put32 "$T/b.img" "$r0" $((st - 1))
		put32 "$T/b.img" $((r0 + 4)) $((n + 1))
		put32 "$T/b.img" $((agf0 + 52)) $((fb + 1))
		[ "$n" = "$lg" ] && put32 "$T/b.img" $((agf0 + 56)) $((lg + 1))
		damaged "$T/b.img" "v4: bnobt and AGF agree on a grown extent" "by-size"
	fi
	rm -f "$base" "$T/b.img"
done

# a dirty log: written and shut down without a clean unmount
if [ $can_mount = 1 ]; then
	dl="$T/dl.img"
	truncate -s $((32 * MIB)) "$dl"
	mkfs.xfs -q -f -K "$dl" >/dev/null 2>&1
	if xmount "$dl" "$T/m"; then
		cp "$T"/src/* "$T/m/"
		sync
		xfs_io -x -c "shutdown -f" "$T/m" >/dev/null 2>&1
		xumount "$dl" "$T/m"
		damaged "$dl" "dirty log" "log is dirty"
	else
		not_ok "dirty log: mount"
	fi
	rm -f "$dl"
fi

# inside an MBR disk, partition type 0x83: found by probing; -S 1=xfs too
if command -v sfdisk >/dev/null 2>&1; then
	p="$T/p.img" dk="$T/dk.img"
	dirty "$p" $SIZE
	mkfs.xfs -q -f -K -p "$T/proto" "$p" >/dev/null 2>&1
	truncate -s $((MIB + SIZE)) "$dk"
	mbr_part "$dk" "$p" 83
	"$IMAGEZIP" -i "$dk" >"$T/info"
	check "MBR partition: -i names it" \
		grep -q "^ *1: .*xfs \[xfs v5, 4096-byte blocks, 4 AGs\]" "$T/info"
	"$IMAGEZIP" -S 1=xfs -i "$dk" >"$T/info" 2>&1
	check "-S 1=xfs works" grep -q "xfs \[xfs v5" "$T/info"
	mbr_restored "$dk" "$T/dk.ndz" "$T/t.img"
	extract "$T/t.img" 2048 $((SIZE / 512)) "$T/p2.img"
	check "MBR partition: xfs_repair -n clean" quiet xfs_repair -n "$T/p2.img"
	rm -f "$p" "$dk" "$T/dk.ndz" "$T/t.img" "$T/p2.img"
else
	echo "# sfdisk not installed: no MBR-partition check"
fi
done_testing
