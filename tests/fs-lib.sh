# Helpers for the filesystem tests (tests/cli/fs_*.sh): test data, patterned
# targets, size checks. Source after tests/lib.sh.
# shellcheck shell=sh
SCANDUMP="$NDZ_BUILD/tests/helpers/scandump"
export PATH="$PATH:/usr/sbin:/sbin"
MIB=1048576

need() {
	for c; do command -v "$c" >/dev/null 2>&1 || skip_all "$c not installed"; done
}

# pattern FILE BYTES: a target full of 0xa5, so skipped sectors cannot pass for zeros
pattern() { head -c "$2" /dev/zero | tr '\000' '\245' >"$1"; }

# dirty FILE BYTES: random bytes, the stale data free space holds on a used disk
dirty() { head -c "$2" /dev/urandom >"$1"; }

# mkfiles DIR COUNT MAXKIB: random and text files of assorted sizes
mkfiles() {
	mkdir -p "$1"
	_i=1
	while [ "$_i" -le "$2" ]; do
		_sz=$(( (_i * 7919 * 13) % ($3 * 1024) + 1 ))
		if [ $((_i % 3)) = 0 ]; then
			seq 1 $((_sz / 4 + 1)) | head -c "$_sz" >"$1/f$_i"
		else
			head -c "$_sz" /dev/urandom >"$1/f$_i"
		fi
		_i=$((_i + 1))
	done
}

fsize() { stat -c %s "$1"; }

# extract DISK START_SECTOR SECTORS OUT: copy one partition out of a disk file
extract() { dd if="$1" of="$4" bs=512 skip="$2" count="$3" status=none; }

# put DISK START_SECTOR FILE: write a filesystem image into a disk at a partition
put() { dd if="$3" of="$1" bs=512 seek="$2" conv=notrunc status=none; }

# smaller IMAGE SOURCE USED_BYTES: the image beats raw gzip -4 of SOURCE by about
# the free share (used/total of the raw size, +10%, +2 MiB for chunk rounding)
smaller() {
	_img=$(fsize "$1")
	_gz=$(gzip -4 -c "$2" | wc -c)
	_tot=$(fsize "$2")
	_lim=$(awk -v g="$_gz" -v u="$3" -v t="$_tot" 'BEGIN { printf "%d", g * u / t * 1.1 + 2 * 1048576 }')
	if [ "$_img" -le "$_lim" ]; then
		ok "$4: image $_img bytes <= $_lim (raw gzip -4: $_gz)"
	else
		not_ok "$4: image $_img bytes > $_lim (raw gzip -4: $_gz)"
	fi
}

# used_bytes SOURCE [ARGS]: bytes the scan puts into the image
used_bytes() { "$SCANDUMP" "$@" 2>/dev/null | sed -n 's/^image //p'; }

# same_files SRCDIR OUTDIR NAMES...: every named file reads back identical
same_files() {
	_s=$1 _o=$2
	shift 2
	_bad=0
	for _f; do cmp -s "$_s/$_f" "$_o/$_f" || { echo "# differs: $_f"; _bad=1; }; done
	return $_bad
}

# quiet CMD...: run CMD without output (for check)
quiet() { "$@" >/dev/null 2>&1; }

# can_loop_mount TYPE SIZE MKFS...: true when we (root) can make a TYPE filesystem
# with MKFS (given the image file last) and mount it through a loop device here
can_loop_mount() {
	_t=$1 _s=$2
	shift 2
	[ "$(id -u)" = 0 ] && command -v losetup >/dev/null 2>&1 || return 1
	_ok=1
	truncate -s "$_s" "$T/probe.img"
	if "$@" "$T/probe.img" >/dev/null 2>&1 &&
	   _l=$(losetup -f --show "$T/probe.img" 2>/dev/null); then
		mkdir -p "$T/m"
		if mount -t "$_t" "$_l" "$T/m" 2>/dev/null; then
			_ok=0
			umount "$T/m"
		fi
		losetup -d "$_l"
	fi
	rm -f "$T/probe.img"
	return $_ok
}

# loop_mount TYPE IMG DIR [OPTIONS]: mount IMG on DIR through a loop device; at
# exit it is unmounted and whatever still backs IMG detached, should the test
# stop before loop_umount
loop_mount() {
	loop_mount_by "mount -t $1" "$2" "$3" "${4:-}"
}

# loop_mount_by CMD IMG DIR [OPTIONS]: loop_mount with the mount command CMD (split
# into words, e.g. a FUSE helper) called as CMD [-o OPTIONS] DEVICE DIR
loop_mount_by() {
	_l=$(losetup -f --show "$2" 2>/dev/null) || return 1
	mkdir -p "$3"
	if ! $1 ${4:+-o "$4"} "$_l" "$3" >/dev/null 2>&1; then
		losetup -d "$_l"
		return 1
	fi
	at_exit "umount '$3' 2>/dev/null; for l in \$(losetup -n -O NAME -j '$2'); do losetup -d \$l; done"
}

# loop_umount IMG DIR: unmount and detach. umount can return before the
# filesystem lets go of its device (a copy of the mount in another mount
# namespace is released later): wait until the loop device is gone, which is
# when the filesystem's last write is surely on IMG
loop_umount() {
	umount "$2" || return 1
	for _l in $(losetup -n -O NAME -j "$1"); do losetup -d "$_l"; done
	_w=0
	while [ -n "$(losetup -n -O NAME -j "$1")" ]; do
		[ $_w -ge 200 ] && { echo "# $1: loop device still busy"; return 1; }
		sleep 0.1
		_w=$((_w + 1))
	done
}

# xfs_restored NAME IMG FILE...: the restored XFS IMG is clean by xfs_repair -n and,
# when this machine mounts XFS v5 (read-only, through a loop device), holds each FILE
# as $T/src does
xfs_restored() {
	_xn=$1 _ximg=$2
	shift 2
	if xfs_repair -n "$_ximg" >"$T/fsck" 2>&1; then ok "$_xn: xfs_repair -n clean"
	else not_ok "$_xn: xfs_repair -n"; head -20 "$T/fsck"; fi
	mkdir -p "$T/m"
	_xl=$(losetup -f --show -r "$_ximg" 2>/dev/null) || return 0
	at_exit "umount '$T/m' 2>/dev/null; for l in \$(losetup -n -O NAME -j '$_ximg'); do losetup -d \$l; done"
	if mount -t xfs -o ro "$_xl" "$T/m" 2>/dev/null; then
		check "$_xn: every file reads back identical" same_files "$T/src" "$T/m" "$@"
		umount "$T/m"
	else
		echo "# cannot mount XFS here: the files of $_xn not compared"
	fi
	losetup -d "$_xl"
}

# mbr_part DISK PART TYPE: PART's bytes as partition 1 of DISK's MBR, at sector 2048,
# of partition type TYPE (hex)
mbr_part() {
	printf 'start=2048, size=%d, type=%s\n' $(( $(fsize "$2") / 512 )) "$3" |
		sfdisk -q "$1" >/dev/null 2>&1
	put "$1" 2048 "$2"
}

# mbr_restored DISK NDZ TARGET: DISK imaged into NDZ and restored onto TARGET, a
# patterned file of DISK's size
mbr_restored() {
	check "MBR partition: imagezip" "$IMAGEZIP" "$1" "$2"
	pattern "$3" "$(fsize "$1")"
	check "MBR partition: imageunzip" "$IMAGEUNZIP" "$2" "$3"
}

# random_kept NAME IMG NDZ: IMG is random bytes where it is used (incompressible), so
# a raw image would be about IMG's size and NDZ must be about what the scan keeps
# (+2 MiB of chunk rounding), at most an eighth of IMG; cheaper than smaller, which
# gzips IMG
random_kept() {
	_used=$(used_bytes "$2") _sz=$(fsize "$3")
	check "$1: image $_sz bytes <= kept $_used + 10% + 2 MiB" \
		test "$_sz" -le $((_used + _used / 10 + 2 * MIB))
	check "$1: image at most an eighth of the raw filesystem" \
		test $((_sz * 8)) -le "$(fsize "$2")"
}

# poke FILE OFFSET OCTAL-BYTE...: overwrite bytes in place, each given as its octal
# digits (001, 377)
# shellcheck disable=SC2059 # the bytes are octal escapes, given as the format
poke() { _f=$1 _o=$2; shift 2; printf "$(printf '\\%s' "$@")" |
	dd of="$_f" bs=1 seek="$_o" conv=notrunc status=none; }

# damaged IMG NAME MESSAGE: imagezip takes the damaged IMG raw, warning MESSAGE, and
# the image restores it byte for byte onto a patterned target
damaged() {
	"$IMAGEZIP" "$1" "$T/bad.ndz" 2>"$T/err"
	if grep -q "$3.*taking it raw" "$T/err"; then ok "$2: raw with a warning"
	else not_ok "$2: raw with a warning"; cat "$T/err"; fi
	pattern "$T/t.img" "$(fsize "$1")"
	"$IMAGEUNZIP" "$T/bad.ndz" "$T/t.img"
	check "$2: restored byte for byte" cmp -s "$1" "$T/t.img"
	rm -f "$T/bad.ndz" "$T/t.img"
}
