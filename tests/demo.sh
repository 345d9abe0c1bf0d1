#!/bin/sh
# make demo: a real ext4 filesystem with files, imaged, restored and checked end to end;
# then, when the multicast tools are built, served to three clients in a namespace LAN.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin="$top/${1:-build}/bin"
work=$(mktemp -d "${TMPDIR:-/tmp}/ndz-demo.XXXXXX")
trap 'rm -rf "$work"' EXIT
say() { printf '\n== %s\n' "$*"; }

say "making a 64 MiB ext4 filesystem holding this project's sources and some of /usr/share/doc"
mkdir -p "$work/files/doc"
cp -r "$top/lib" "$top/imagezip" "$top/imageunzip" "$work/files/"
# About 25 MB of real documents, whatever this machine has.
for d in /usr/share/doc/*; do
	[ "$(du -sm "$work/files" | cut -f1)" -lt 25 ] || break
	cp -r "$d" "$work/files/doc/" 2>/dev/null || true
done
head -c 4000000 /dev/urandom >"$work/files/random.bin"
du -sh "$work/files" | sed 's/^/   content: /'
truncate -s 64M "$work/disk.img"
mke2fs -q -F -t ext4 -d "$work/files" "$work/disk.img"

say "imagezip disk.img disk.ndz"
"$bin/imagezip" -v "$work/disk.img" "$work/disk.ndz"
ls -l "$work/disk.img" "$work/disk.ndz" | awk '{printf "   %-12s %s bytes\n", $NF, $5}' |
	sed "s|$work/||"

say "imageunzip disk.ndz restored.img (onto a target full of junk, with -z)"
head -c 67108864 /dev/zero | tr '\0' '\377' >"$work/restored.img"
"$bin/imageunzip" -v -z "$work/disk.ndz" "$work/restored.img"

say "checking"
cmp "$work/disk.img" "$work/restored.img" && echo "   restored image is byte-identical to the source"
e2fsck -fn "$work/restored.img" >/dev/null 2>&1 && echo "   e2fsck -fn: clean"

if [ -x "$bin/frisbeed" ] && [ -x "$bin/frisbee" ] && [ -f "$top/tests/demo-multicast.sh" ]; then
	say "multicast: frisbeed serving disk.ndz to three frisbee clients"
	sh "$top/tests/demo-multicast.sh" "${1:-build}" "$work/disk.ndz" "$work/disk.img"
fi
say "demo done"
