#!/bin/sh
# Benchmark: imagezip/imageunzip against partclone (+ gzip -4, + pigz -4, + zstd -3
# -T2) on the same ext4, NTFS, XFS, btrfs and exFAT filesystems, made here (NDZ_BENCH_FS=
# "ext4 xfs" picks some): 256 MiB each (NDZ_BENCH_MIB), about half full of real files (blobs
# of /usr), free space dirty (random bytes). XFS, btrfs and exFAT also against imagezip -r
# (how they were imaged before). "ext4used" (not in the default set): an ext4 filled
# through a loop mount, as a system that ran leaves it, its journal holding the history.
# Time and image size (and, for ndz images, the bytes used: without the last chunk's padding),
# medians of 3 runs, ratios to the first method (partclone|gzip -4).
# Usage: sh bench/fs.sh [BUILD_DIR]   (default build; NDZ_BENCH_METHODS: a subset of
#        "pc-gzip pc-pigz ndz pc-zstd ndz-zstd ndz-zstd-kj", in order, the first the base;
#        ndz-zstd-kj: zstd with --keep-journal)
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/${1:-build}/bin"
export PATH="$PATH:/usr/sbin:/sbin"
METHODS=${NDZ_BENCH_METHODS:-pc-gzip pc-pigz ndz pc-zstd ndz-zstd}
for c in "$bin/imagezip" "$bin/imageunzip" mke2fs mkntfs ntfscp partclone.ext4 \
	 partclone.ntfs gzip pigz zstd e2fsck ntfsfix mkfs.xfs partclone.xfs xfs_repair \
	 mkfs.btrfs partclone.btrfs btrfs mkfs.exfat partclone.exfat mount.exfat-fuse fsck.exfat; do
	command -v "$c" >/dev/null 2>&1 || { echo "bench/fs.sh: $c missing" >&2; exit 1; }
done
MIB=$((${NDZ_BENCH_MIB:-256}))
RUNS=${NDZ_BENCH_RUNS:-3}
T=$(mktemp -d "${TMPDIR:-/var/tmp}/ndz-bench.XXXXXX")
trap 'rm -rf "$T"' EXIT INT TERM

now() { date +%s.%N; }
# median of the numbers on stdin
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

# ---- test data: blobs of real files, about 45% of the filesystem ----
want=$((MIB * 1024 * 1024 * 45 / 100))
mkdir -p "$T/data"
find /usr/lib /usr/share /usr/bin -type f -size +4k 2>/dev/null | sort >"$T/list"
i=0 total=0
while [ $total -lt $want ]; do
	i=$((i + 1))
	# 8 MiB blobs, each the concatenation of consecutive files
	sed -n "$(( (i - 1) * 300 + 1 )),$(( i * 300 ))p" "$T/list" | tr '\n' '\0' |
		xargs -0 cat 2>/dev/null | head -c $((8 * 1048576)) >"$T/data/blob$i"
	s=$(stat -c %s "$T/data/blob$i")
	[ "$s" -gt 0 ] || { rm -f "$T/data/blob$i"; break; }
	total=$((total + s))
done

make_ext() {
	head -c $((MIB * 1048576)) /dev/urandom >"$T/ext4.img"
	mke2fs -q -F -E nodiscard -t ext4 -d "$T/data" "$T/ext4.img" >/dev/null 2>&1
}
# the same files copied in through a mount: the journal body holds their metadata
make_ext4used() {
	head -c $((MIB * 1048576)) /dev/urandom >"$T/ext4used.img"
	mke2fs -q -F -E nodiscard -t ext4 "$T/ext4used.img" >/dev/null 2>&1
	mkdir -p "$T/mnt"
	mount -o loop "$T/ext4used.img" "$T/mnt" || return 1
	cp "$T"/data/* "$T/mnt/"
	umount "$T/mnt"
	# a copy of the mount in another mount namespace (ip netns exec) keeps the
	# filesystem, and its last writes, until released: wait for the loop device to go
	_w=0
	while [ -n "$(losetup -n -O NAME -j "$T/ext4used.img")" ] && [ $_w -lt 300 ]; do
		sleep 0.1; _w=$((_w + 1))
	done
}
make_ntfs() {
	head -c $((MIB * 1048576)) /dev/urandom >"$T/ntfs.img"
	mkntfs -q -F -f "$T/ntfs.img" >/dev/null 2>&1
	for f in "$T"/data/*; do ntfscp -q "$T/ntfs.img" "$f" "$(basename "$f")" >/dev/null 2>&1; done
}
# XFS filled at mkfs time (-p protofile); the fstests variables let mkfs.xfs make
# one under its 300 MB minimum when NDZ_BENCH_MIB asks for that
make_xfs() {
	head -c $((MIB * 1048576)) /dev/urandom >"$T/xfs.img"
	{ echo /dev/null; echo 0 0; echo "d--755 0 0"
	  for f in "$T"/data/*; do echo "${f##*/} ---644 0 0 $f"; done; echo '$'; } >"$T/proto"
	TEST_DIR="$T" TEST_DEV=none QA_CHECK_FS=1 \
		mkfs.xfs -q -f -K -p "$T/proto" "$T/xfs.img" >/dev/null 2>&1
}
make_btrfs() {
	head -c $((MIB * 1048576)) /dev/urandom >"$T/btrfs.img"
	mkfs.btrfs -q -f -K --rootdir "$T/data" "$T/btrfs.img" >/dev/null 2>&1
}
# exFAT filled through exfat-fuse on a loop device (this kernel may have no exfat module)
make_exfat() {
	head -c $((MIB * 1048576)) /dev/urandom >"$T/exfat.img"
	mkfs.exfat "$T/exfat.img" >/dev/null 2>&1
	_l=$(losetup -f --show "$T/exfat.img") || return 1
	mkdir -p "$T/mnt"
	if mount.exfat-fuse "$_l" "$T/mnt" >/dev/null 2>&1; then
		cp "$T"/data/* "$T/mnt/" 2>/dev/null
		umount "$T/mnt"
	else
		echo "bench/fs.sh: cannot mount exFAT through FUSE: its files are missing" >&2
	fi
	losetup -d "$_l"
}
FSES=${NDZ_BENCH_FS:-ext4 ntfs xfs btrfs exfat}
for fs in $FSES; do
	case $fs in ext4) make_ext ;; ext4used) make_ext4used ;; ntfs) make_ntfs ;; xfs) make_xfs ;; btrfs) make_btrfs ;;
	exfat) make_exfat ;; esac
done

# one METHOD on filesystem FS: prints "zip_seconds unzip_seconds image_bytes"
run_once() {
	fs=$1 m=$2 src="$T/$1.img" img="$T/img" tgt="$T/tgt"
	rm -f "$img"	# the last method's image: imagezip replaces only an image
	pc=partclone.${fs%used}
	head -c $((MIB * 1048576)) /dev/zero | tr '\000' '\245' >"$tgt"
	sync
	t0=$(now)
	case $m in
	ndz) "$bin/imagezip" -q --codec zlib "$src" "$img" ;;
	ndz-zstd) "$bin/imagezip" -q --codec zstd "$src" "$img" ;;
	ndz-zstd-kj) "$bin/imagezip" -q --codec zstd --keep-journal "$src" "$img" ;;
	ndz-raw) "$bin/imagezip" -q -r "$src" "$img" ;;
	pc-zstd) $pc -q -c -s "$src" -o - -L "$T/pc.log" 2>/dev/null | zstd -q -3 -T2 >"$img" ;;
	pc-gzip) $pc -q -c -s "$src" -o - -L "$T/pc.log" 2>/dev/null | gzip -4 >"$img" ;;
	pc-pigz) $pc -q -c -s "$src" -o - -L "$T/pc.log" 2>/dev/null | pigz -4 >"$img" ;;
	esac
	t1=$(now)
	case $m in
	ndz | ndz-zstd | ndz-zstd-kj | ndz-raw) "$bin/imageunzip" -q "$img" "$tgt" ;;
	pc-zstd) zstd -q -dc "$img" | $pc -q -r -s - -O "$tgt" -L "$T/pc.log" >/dev/null 2>&1 ;;
	pc-gzip) gzip -dc "$img" | $pc -q -r -s - -O "$tgt" -L "$T/pc.log" >/dev/null 2>&1 ;;
	pc-pigz) pigz -dc "$img" | $pc -q -r -s - -O "$tgt" -L "$T/pc.log" >/dev/null 2>&1 ;;
	esac
	t2=$(now)
	case $fs in
	ext4 | ext4used) e2fsck -fn "$tgt" >/dev/null 2>&1 || echo "bench/fs.sh: $m on $fs: restore not clean" >&2 ;;
	xfs) xfs_repair -n "$tgt" >/dev/null 2>&1 || echo "bench/fs.sh: $m on $fs: restore not clean" >&2 ;;
	exfat) fsck.exfat -n "$tgt" >/dev/null 2>&1 || echo "bench/fs.sh: $m on $fs: restore not clean" >&2 ;;
	btrfs) btrfs check --readonly "$tgt" >/dev/null 2>&1 ||
		echo "bench/fs.sh: $m on $fs: restore not clean" >&2 ;;
	ntfs) if ! ntfsfix -n "$tgt" >"$T/fix" 2>&1; then
		if grep -q "alternate boot sector... BAD" "$T/fix"; then
			echo "bench/fs.sh: $m on $fs: backup boot sector not restored" >&2
		else
			echo "bench/fs.sh: $m on $fs: restore not clean" >&2
		fi
	      fi ;;
	esac
	size=$(stat -c %s "$img") used=$size
	case $m in
	# an ndz image's last chunk is padded to 1 MiB: "used" leaves that padding out
	# (its header area plus data_len, the little-endian field at offset 88, are kept)
	ndz | ndz-zstd | ndz-zstd-kj | ndz-raw)
		dl=$(od -An -tu4 -j $((size - 1048576 + 88)) -N4 "$img" | tr -d ' ')
		used=$((size - 1048576 + 4096 + dl)) ;;
	esac
	awk -v a="$t0" -v b="$t1" -v c="$t2" -v s="$size" -v u="$used" \
		'BEGIN { printf "%.3f %.3f %d %d\n", b - a, c - b, s, u }'
	rm -f "$img" "$tgt"
}

echo "filesystems: ${MIB} MiB each, data $((total / 1048576)) MiB of /usr files, free space random;" \
     "$(nproc) cores; medians of $RUNS runs"
printf '%-8s %-22s %12s %12s %9s %9s %8s %8s %8s %8s\n' fs method image_bytes used_bytes zip_s unzip_s \
	size_x used_x zip_x unzip_x
for fs in $FSES; do
	first=1
	ms=$METHODS
	case $fs in xfs|btrfs|exfat) ms="$ms ndz-raw" ;; esac
	for m in $ms; do
		: >"$T/res"
		r=0
		while [ $r -lt "$RUNS" ]; do run_once $fs $m >>"$T/res"; r=$((r + 1)); done
		z=$(awk '{ print $1 }' "$T/res" | median)
		u=$(awk '{ print $2 }' "$T/res" | median)
		s=$(awk '{ print $3 }' "$T/res" | median)
		us=$(awk '{ print $4 }' "$T/res" | median)
		if [ $first = 1 ]; then bz=$z bu=$u bs=$s bus=$us first=0; fi
		name=$m
		case $m in pc-gzip) name="partclone|gzip-4" ;; pc-pigz) name="partclone|pigz-4" ;;
			   ndz) name="imagezip --codec zlib" ;; pc-zstd) name="partclone|zstd-3-T2" ;;
			   ndz-zstd) name="imagezip --codec zstd" ;;
			   ndz-zstd-kj) name="imagezip --keep-journal" ;; ndz-raw) name="imagezip -r" ;; esac
		printf '%-8s %-22s %12s %12s %9.2f %9.2f %8.3f %8.3f %8.2f %8.2f\n' $fs "$name" "$s" "$us" \
			"$z" "$u" \
			"$(awk -v a="$s" -v b="$bs" 'BEGIN { print a / b }')" \
			"$(awk -v a="$us" -v b="$bus" 'BEGIN { print a / b }')" \
			"$(awk -v a="$z" -v b="$bz" 'BEGIN { print a / b }')" \
			"$(awk -v a="$u" -v b="$bu" 'BEGIN { print a / b }')"
	done
done
echo "used_bytes: an ndz image without its last chunk's padding to 1 MiB; size_x, used_x, zip_x, unzip_x: relative to ${METHODS%% *} on the same filesystem (lower is better)"
