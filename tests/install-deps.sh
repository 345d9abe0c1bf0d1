#!/bin/sh
# Installs the Debian packages the build and the tests need, when missing (root only).
set -u
PKGS="build-essential zlib1g-dev libzstd-dev libdeflate-dev libisal-dev libsodium-dev libssl-dev nettle-dev libcmocka-dev libext2fs-dev
      libmicrohttpd-dev libcurl4-openssl-dev chromium python3-prometheus-client nodejs
      ceph-mon ceph-osd ceph-common radosgw curl
      ntfs-3g ntfs-3g-dev e2fsprogs makefs fdisk gdisk dosfstools exfatprogs exfat-fuse xfsprogs btrfs-progs lvm2 mtools
      util-linux pigz iproute2 nftables ethtool iperf3
      valgrind time bc clang libclang-rt-14-dev partclone udpcast procps kmod
      qemu-system-x86 ipxe-qemu dnsmasq-base cpio
      dpkg-dev debhelper fakeroot lintian bash-completion systemd"
# --build: only what compiling needs (make check installs the rest while it builds)
[ "${1:-}" = --build ] && PKGS=$(echo $PKGS | tr ' ' '\n' | grep -E '^build-essential$|-dev$')
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' ||
		missing="$missing $p"
done
# npm drives the browser test (puppeteer-core); a nodejs that brings its own npm is kept
[ "${1:-}" = --build ] || command -v npm >/dev/null 2>&1 || missing="$missing npm"
[ -z "$missing" ] && exit 0
if [ "$(id -u)" != 0 ]; then
	echo "install-deps: missing packages:$missing (run as root to install them)" >&2
	exit 1
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
# shellcheck disable=SC2086
apt-get install -y -qq $missing >/dev/null 2>&1 || {
	apt-get update -qq && apt-get install -y -qq $missing >/dev/null
} || { echo "install-deps: apt-get failed for:$missing" >&2; exit 1; }
