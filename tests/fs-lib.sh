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
