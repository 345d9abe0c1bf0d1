#!/bin/sh
# Builds the memory-filesystem boot environment (a kernel and an initramfs) from
# Debian's packages and our programs: mfs/build.sh [-c CACHE] BINDIR OUTDIR.
#
# The kernel (the package linux-image-amd64 depends on) and busybox-static are
# fetched with `apt-get download` and unpacked with `dpkg-deb -x` into CACHE
# (default /var/cache/ndz/mfs for root, else ${XDG_CACHE_HOME:-~/.cache}/ndz/mfs;
# `make mfs` gives build/mfs/cache), never installed on this host; a second run
# reuses them. NDZ_MFS_DEBS=DIR takes the .deb files from DIR instead of apt
# (offline builds). The initramfs tree is put together in a temporary directory,
# removed at the end. Writes only OUTDIR/vmlinuz and OUTDIR/initramfs.cpio.gz, and
# prints their sizes. BINDIR must hold frisbee, imageunzip, imagezip and ndzctl
# (the lab's ask and report): a boot environment without one cannot do its work.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
cache=""
while getopts c: o; do
	case $o in
	c) cache=$OPTARG ;;
	*) echo "usage: mfs/build.sh [-c CACHE] BINDIR OUTDIR" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# = 2 ] || { echo "usage: mfs/build.sh [-c CACHE] BINDIR OUTDIR" >&2; exit 2; }
die() { echo "mfs/build.sh: $*" >&2; exit 1; }
bindir=$(cd "$1" && pwd) || die "$1: no such directory (BINDIR: where the programs are)"
# the programs the boot environment runs: checked before anything is fetched
for p in frisbee imageunzip imagezip ndzctl; do
	[ -x "$bindir/$p" ] && continue
	case $p in
	ndzctl) die "no ndzctl in $bindir: a boot environment without it cannot run a lab task (ndz.lab=1); it is in the package ndz (make all builds it)" ;;
	*) die "no $p in $bindir (the package ndz; or make all first)" ;;
	esac
done
mkdir -p "$2"
out=$(cd "$2" && pwd)
if [ -z "$cache" ]; then
	if [ "$(id -u)" = 0 ]; then
		cache=/var/cache/ndz/mfs
	else
		cache=${XDG_CACHE_HOME:-${HOME:?HOME is not set: give -c CACHE}/.cache}/ndz/mfs
	fi
fi
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
case $cache/ in "$out"/*) echo "  MFS     note: the cache $cache is inside $out" ;; esac
for t in dpkg-deb depmod cpio gzip ldd; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install dpkg kmod cpio gzip libc-bin)"
done

# Disk and network drivers a real machine needs; their dependencies come from
# modules.dep. Drivers with no device present are never loaded (see init).
MODULES="virtio_pci virtio_blk virtio_net virtio_scsi
	ahci ata_piix sd_mod nvme megaraid_sas mpt3sas
	e1000 e1000e igb ixgbe i40e bnxt_en mlx4_en mlx5_core r8169 tg3 vmxnet3"

# fetch PKG: the .deb of PKG in $cache/debs (apt-get download, or NDZ_MFS_DEBS)
fetch() {
	mkdir -p "$cache/debs"
	set -- "$1" "$(ls "$cache/debs/$1"_*.deb 2>/dev/null | head -n 1)"
	[ -n "$2" ] && { echo "$2"; return 0; }
	if [ -n "${NDZ_MFS_DEBS:-}" ]; then
		cp "$(ls "$NDZ_MFS_DEBS/$1"_*.deb | head -n 1)" "$cache/debs/" ||
			die "no $1 .deb in $NDZ_MFS_DEBS"
	else
		(cd "$cache/debs" && apt-get download -q "$1" >/dev/null 2>"$cache/apt.err") ||
			die "apt-get download $1 failed: $(tail -n 1 "$cache/apt.err")"
	fi
	ls "$cache/debs/$1"_*.deb | head -n 1
}

# the kernel package that linux-image-amd64 currently depends on
kpkg=${NDZ_MFS_KERNEL_PKG:-$(apt-cache depends linux-image-amd64 2>/dev/null |
	sed -n 's/^ *Depends: \(linux-image-[0-9][^ ]*\)$/\1/p' | head -n 1)}
[ -n "$kpkg" ] || kpkg=$(ls "$cache/debs" 2>/dev/null | sed -n 's/^\(linux-image-[0-9][^_]*\)_.*/\1/p' | head -n 1)
[ -n "$kpkg" ] || die "cannot tell which kernel package linux-image-amd64 depends on"
kver=${kpkg#linux-image-}
kdir=$cache/kernel-$kver

# The kernel and the closure of the modules above, kept in the cache; the rest of
# the package (about 400 MB unpacked) is removed again.
# Without apt (offline), the same kernel installed on this host will do.
if [ ! -f "$kdir/.done" ]; then
	rm -rf "$kdir" "$kdir.full"
	if deb=$(fetch "$kpkg"); then
		echo "  MFS     unpacking $kpkg"
		dpkg-deb -x "$deb" "$kdir.full"
		ksrc=$kdir.full
		mdir=lib/modules/$kver
		[ -d "$ksrc/$mdir" ] || mdir=usr/lib/modules/$kver
		depmod -b "$ksrc" "$kver" 2>/dev/null || depmod -b "$ksrc/usr" "$kver"
	elif [ -r "/boot/vmlinuz-$kver" ] && [ -f "/lib/modules/$kver/modules.dep" ]; then
		echo "  MFS     no apt: using this host's $kpkg"
		ksrc="" mdir=/lib/modules/$kver
	else
		die "no kernel: apt-get download $kpkg failed and it is not installed here"
	fi
	mkdir -p "$kdir/modules"
	cp "$ksrc/boot/vmlinuz-$kver" "$kdir/vmlinuz"
	cp "$ksrc/$mdir/modules.builtin" "$ksrc/$mdir/modules.builtin.modinfo" \
		"$ksrc/$mdir/modules.order" "$kdir/modules/"
	need=""
	for m in $MODULES; do
		line=$(grep -E "(^|/)$m\.ko(\.[a-z]+)?:" "$ksrc/$mdir/modules.dep") ||
			die "module $m is not in $kpkg"
		need="$need ${line%%:*} ${line#*:}"
	done
	for f in $(echo "$need" | tr ' ' '\n' | sort -u); do
		mkdir -p "$kdir/modules/$(dirname "$f")"
		cp "$ksrc/$mdir/$f" "$kdir/modules/$f"
	done
	rm -rf "$kdir.full" "$cache"/debs/linux-image-*.deb   # 70 MB no longer needed
	touch "$kdir/.done"
fi

bb=$cache/busybox
if [ ! -x "$bb/bin/busybox" ]; then
	rm -rf "$bb" "$bb.full"
	if deb=$(fetch busybox-static); then
		# only the binary: the Makefile includes every *.d under the build directory
		dpkg-deb -x "$deb" "$bb.full"
		mkdir -p "$bb/bin" && mv "$bb.full/bin/busybox" "$bb/bin/busybox"
		rm -rf "$bb.full"
	elif dpkg-query -W -f='${Status}' busybox-static 2>/dev/null | grep -q 'ok installed'; then
		mkdir -p "$bb/bin" && cp /bin/busybox "$bb/bin/busybox"
	fi
fi
[ -x "$bb/bin/busybox" ] || die "busybox-static has no bin/busybox"

# the initramfs tree, in a temporary directory removed however the build ends
root=$(mktemp -d "${TMPDIR:-/tmp}/ndz-mfs.XXXXXX")
trap 'rm -rf "$root"' EXIT
trap 'exit 1' HUP INT TERM
mkdir -p "$root/bin" "$root/sbin" "$root/etc" "$root/proc" "$root/sys" "$root/dev" \
	"$root/tmp" "$root/run" "$root/lib/modules/$kver" "$root/usr/share/udhcpc"
cp "$bb/bin/busybox" "$root/bin/busybox"
cp -R "$kdir/modules/." "$root/lib/modules/$kver/"
depmod -b "$root" "$kver"
cp "$here/init" "$root/init"
cp "$here/udhcpc.script" "$root/usr/share/udhcpc/default.script"
chmod 755 "$root/init" "$root/usr/share/udhcpc/default.script"
progs=""
for p in frisbee imagezip imageunzip frisbee-upload ndzctl; do
	[ -x "$bindir/$p" ] || continue
	cp "$bindir/$p" "$root/bin/$p"
	progs="$progs $p"
done
# exactly the shared libraries ldd names, and the loader, at the paths it names
for p in $progs; do
	ldd "$bindir/$p" | sed -n 's/.*=> \(\/[^ ]*\) .*/\1/p; s/^[[:space:]]*\(\/[^ ]*\) .*/\1/p'
done | sort -u | while read -r lib; do
	mkdir -p "$root$(dirname "$lib")"
	cp -L "$lib" "$root$lib"
done
echo "ndz-mfs $kver built $(date -u +%Y-%m-%dT%H:%MZ) with:$progs" >"$root/etc/ndz-mfs-release"

cp "$kdir/vmlinuz" "$out/vmlinuz"
(cd "$root" && find . | LC_ALL=C sort | cpio -o -H newc -R 0:0 --quiet) |
	gzip -9 >"$out/initramfs.cpio.gz.tmp"
mv "$out/initramfs.cpio.gz.tmp" "$out/initramfs.cpio.gz"
# what an earlier builder left in OUTDIR (its tree; its cache, when it was the default)
rm -rf "$out/root"
printf '  MFS     %s: vmlinuz %s KiB, initramfs.cpio.gz %s KiB (%s KiB unpacked)\n' "$out" \
	$(( $(wc -c <"$out/vmlinuz") / 1024 )) $(( $(wc -c <"$out/initramfs.cpio.gz") / 1024 )) \
	"$(du -sk "$root" | cut -f1)"
