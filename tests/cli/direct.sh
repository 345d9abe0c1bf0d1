#!/bin/sh
# Direct writes (O_DIRECT, issue 36): imageunzip and frisbee restore past the page cache
# onto a loop block device (the default there), onto an ext4 file and a tmpfs file with
# --direct, and onto a ramfs file that refuses O_DIRECT (written through the cache);
# into a partition whose start is not on the device's 4096-byte block (the edges go
# through the cache), with -z over old contents, seeded (--seed --verify: the reads see
# what was written), stored with -r, and into the null device (-r, a benchmark's sink).
# Every target is compared byte for byte; a device that fails its writes (a loop device
# over a file on a full tmpfs) still makes both exit 1. -v says how the bytes went.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
[ "$(id -u)" = 0 ] && command -v losetup >/dev/null && command -v sfdisk >/dev/null &&
	command -v mkfs.ext4 >/dev/null || skip_all "needs root, losetup, sfdisk and mkfs.ext4"
[ -x "$IMAGEZIP" ] || skip_all "imagezip not built"

MIB=6
# the source: random, a run of zeros the image skips, text-like, random
head -c $((2 << 20)) /dev/urandom >"$T/src"
head -c $((1 << 20)) /dev/zero >>"$T/src"
yes "ndz direct test line" | head -c $((2 << 20)) >>"$T/src"
head -c $((1 << 20)) /dev/urandom >>"$T/src"
SRCB=$(stat -c %s "$T/src")
"$IMAGEZIP" -q "$T/src" "$T/img.ndz" || { not_ok "imagezip the source"; done_testing; }

# loopdev FILE [LOSETUP OPTIONS]: LOOP is a loop device over FILE, detached at exit
loopdev() {
	_f=$1
	shift
	LOOP=$(losetup -f --show "$@" "$_f") || return 1
	at_exit "losetup -d $LOOP"
}
# garbage FILE MIB: FILE holds MIB MiB of 0xa5
garbage() { head -c $(($2 << 20)) /dev/zero | tr '\000' '\245' >"$1"; }
# same_at DEV OFFSET: DEV holds the source at byte OFFSET
same_at() { cmp -s -n "$SRCB" "$T/src" "$2" 2>/dev/null ||
	{ dd if="$1" bs=512 skip=$(($2 / 512)) count=$((SRCB / 512)) status=none |
	  cmp -s - "$T/src"; }; }
# direct LOG: the -v line says bytes went direct (DIRECT for sh -c)
DIRECT="grep -q 'writes: [1-9][0-9]* bytes direct'"
direct() { eval "$DIRECT" '"$1"'; }

# ---- imageunzip ----
# 1. a loop device: direct by default
truncate -s 16M "$T/dev1" && loopdev "$T/dev1" && L1=$LOOP || { not_ok "loop device"; done_testing; }
"$IMAGEUNZIP" -v "$T/img.ndz" "$L1" 2>"$T/e1"; rc=$?
check "unzip onto a loop device: exit 0, byte-identical (exit $rc)" \
	sh -c "[ $rc = 0 ] && cmp -s -n $SRCB '$T/src' '$L1'"
check "unzip onto a loop device: written direct by default" direct "$T/e1"
"$IMAGEUNZIP" -v --no-direct "$T/img.ndz" "$L1" 2>"$T/e1b"; rc=$?
check "unzip --no-direct: exit 0, through the cache" \
	sh -c "[ $rc = 0 ] && grep -q 'direct writes off' '$T/e1b' && cmp -s -n $SRCB '$T/src' '$L1'"

# 2. -z over old contents: the zeros the image skips are written too
garbage "$T/g" 16 && dd if="$T/g" of="$L1" bs=1M status=none conv=fsync
"$IMAGEUNZIP" -v -z "$T/img.ndz" "$L1" 2>"$T/e2"; rc=$?
check "unzip -z onto a loop device of old bytes: exit 0, byte-identical (exit $rc)" \
	sh -c "[ $rc = 0 ] && cmp -s -n $SRCB '$T/src' '$L1' && $DIRECT '$T/e2'"

# 3. seeded: the target changed in a few places, then --seed --verify (reads past the cache)
dd if=/dev/urandom of="$L1" bs=4096 seek=300 count=3 conv=notrunc,fsync status=none
dd if=/dev/urandom of="$L1" bs=512 seek=9000 count=1 conv=notrunc,fsync status=none
"$IMAGEUNZIP" -v --seed --verify "$T/img.ndz" "$L1" 2>"$T/e3"; rc=$?
check "unzip --seed --verify onto a loop device: exit 0, byte-identical (exit $rc)" \
	sh -c "[ $rc = 0 ] && cmp -s -n $SRCB '$T/src' '$L1' && grep -q 'verified' '$T/e3'"
check "unzip --seed: only what differed written, direct" \
	sh -c "$DIRECT '$T/e3' && grep -q '(2 held by the target' '$T/e3'"
[ "$rc" = 0 ] || sed 's/^/# /' "$T/e3"

# 4. a partition at sector 63 (not on a 4096-byte block) of a device with 4096-byte
# sectors: every write's edges go through the cache, its middle direct
truncate -s 16M "$T/disk4"
echo 'start=63, size=24000, type=83' | sfdisk -q "$T/disk4" >/dev/null 2>&1
if loopdev "$T/disk4" --sector-size 4096 2>/dev/null; then
	L4=$LOOP
	garbage "$T/g" 8 && dd if="$T/g" of="$L4" bs=1M seek=1 status=none conv=fsync
	"$IMAGEUNZIP" -v -z -s 1 "$T/img.ndz" "$L4" 2>"$T/e4"; rc=$?
	check "unzip -s 1 (sector 63) onto a 4096-byte-sector device: exit 0 (exit $rc)" test "$rc" = 0
	check "partition at 63: byte-identical at byte 32256" same_at "$L4" 32256
	check "partition at 63: the blocks direct, the edges through the cache" \
		sh -c "$DIRECT '$T/e4' && grep -q '(4096-byte blocks' '$T/e4' &&
		       ! grep -q ', 0 through the page cache' '$T/e4'"
	check "partition at 63: the MBR before it is kept" \
		sh -c "[ \"\$(dd if='$L4' bs=1 skip=510 count=2 status=none | od -An -tx1 | tr -d ' ')\" = 55aa ]"
	[ "$rc" = 0 ] || sed 's/^/# /' "$T/e4"
else
	echo "# skipped: losetup --sector-size 4096"
fi

# 5. files: ext4 (new and overwritten), tmpfs, ramfs (refuses O_DIRECT)
mkdir -p "$T/ext4" "$T/tmpfs" "$T/ramfs"
truncate -s 64M "$T/ext4.img" && mkfs.ext4 -q -F "$T/ext4.img" >/dev/null 2>&1 &&
	loopdev "$T/ext4.img" && mount "$LOOP" "$T/ext4" && at_exit "umount '$T/ext4'" ||
	not_ok "mount ext4"
mount -t tmpfs -o size=32M ndztmp "$T/tmpfs" && at_exit "umount '$T/tmpfs'" || not_ok "mount tmpfs"
mount -t ramfs ndzram "$T/ramfs" && at_exit "umount '$T/ramfs'" || not_ok "mount ramfs"
for fs in ext4 tmpfs ramfs; do
	"$IMAGEUNZIP" -v --direct "$T/img.ndz" "$T/$fs/new" 2>"$T/e5"; rc=$?
	check "unzip --direct to a new file on $fs: exit 0, byte-identical (exit $rc)" \
		sh -c "[ $rc = 0 ] && cmp -s '$T/src' '$T/$fs/new'"
	case $fs in
	ramfs) check "ramfs: refused, written through the cache" \
		grep -q 'writes through the page cache (its file system refuses O_DIRECT)' "$T/e5" ;;
	*) check "$fs: written direct" direct "$T/e5" ;;
	esac
	garbage "$T/$fs/old" $MIB
	"$IMAGEUNZIP" -v -z --direct "$T/img.ndz" "$T/$fs/old" 2>"$T/e5"; rc=$?
	check "unzip -z --direct over an old file on $fs: exit 0, byte-identical (exit $rc)" \
		sh -c "[ $rc = 0 ] && cmp -s '$T/src' '$T/$fs/old'"
	rm -f "$T/$fs/new" "$T/$fs/old"
done

# 6. a device whose writes fail: a loop device over a file on a full 4 MiB tmpfs
mkdir -p "$T/tiny"
if mount -t tmpfs -o size=4M ndztiny "$T/tiny"; then
	at_exit "umount '$T/tiny'"
	truncate -s 16M "$T/tiny/back"
	loopdev "$T/tiny/back" && L6=$LOOP
	"$IMAGEUNZIP" -v "$T/img.ndz" "$L6" 2>"$T/e6"; rc=$?
	check "unzip onto a device that fails its writes: exit 1 (exit $rc)" test "$rc" = 1
	check "... saying where and why" grep -q "$L6: write error at byte" "$T/e6"
	check "... no success summary" sh -c "! grep -q 'bytes written' '$T/e6'"
else
	not_ok "mount a tiny tmpfs"
fi

# ---- frisbee, in a namespace LAN ----
if netns_usable; then
	netns_lan && netns_host srv 1 && netns_host c1 11 || { not_ok "namespace LAN"; done_testing; }
	# fris NAME TARGET [OPTIONS...]: serve the image once, frisbee into TARGET; rc in $T/c1.rc
	fris() {
		_name=$1 _t=$2
		shift 2
		: >"$T/c1.log"
		mc_server srv "$T/img.ndz" -W "$MC_RATE" -T 5
		mc_client c1 "$_t" -v -T 10 "$@"
		mc_wait
		kill "$MC_SRV_PID" 2>/dev/null
		wait "$MC_SRV_PID" 2>/dev/null
		cp "$T/c1.log" "$T/f.$_name"
	}
	dd if=/dev/zero of="$L1" bs=1M count=16 status=none conv=fsync
	fris dev "$L1"
	check "frisbee onto a loop device: exit 0, byte-identical, direct" \
		sh -c "[ $(mc_rc c1) = 0 ] && cmp -s -n $SRCB '$T/src' '$L1' && $DIRECT '$T/f.dev'"
	garbage "$T/g" 16 && dd if="$T/g" of="$L1" bs=1M status=none conv=fsync
	fris zero "$L1" -z
	check "frisbee -z over old bytes: exit 0, byte-identical, direct" \
		sh -c "[ $(mc_rc c1) = 0 ] && cmp -s -n $SRCB '$T/src' '$L1' && $DIRECT '$T/f.zero'"
	dd if=/dev/urandom of="$L1" bs=4096 seek=700 count=2 conv=notrunc,fsync status=none
	fris seed "$L1" --seed --verify
	check "frisbee --seed --verify onto a loop device: exit 0, byte-identical" \
		sh -c "[ $(mc_rc c1) = 0 ] && cmp -s -n $SRCB '$T/src' '$L1'"
	[ "$(mc_rc c1)" = 0 ] || sed 's/^/# /' "$T/f.seed"
	IMGB=$(stat -c %s "$T/img.ndz")
	fris raw "$L1" -r
	check "frisbee -r onto a loop device: exit 0, the image stored, direct" \
		sh -c "[ $(mc_rc c1) = 0 ] && cmp -s -n $IMGB '$T/img.ndz' '$L1' && $DIRECT '$T/f.raw'"
	fris null /dev/null -r
	check "frisbee -r into /dev/null: exit 0" test "$(mc_rc c1)" = 0
	for fs in ext4 tmpfs; do
		fris "$fs" "$T/$fs/new" --direct
		check "frisbee --direct to a file on $fs: exit 0, byte-identical, direct" \
			sh -c "[ $(mc_rc c1) = 0 ] && cmp -s '$T/src' '$T/$fs/new' && $DIRECT '$T/f.$fs'"
		rm -f "$T/$fs/new"
	done
	if [ -n "${L6:-}" ]; then
		fris fail "$L6"
		check "frisbee onto a device that fails its writes: exit 1 ($(mc_rc c1))" \
			test "$(mc_rc c1)" = 1
		check "... saying where" grep -q "$L6: write error at byte" "$T/f.fail"
	fi
else
	echo "# skipped frisbee: network namespaces unavailable"
fi
done_testing
