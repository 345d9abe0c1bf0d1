#!/bin/sh
# FAT12/16/32 made by mkfs.fat over random bytes, filled by mcopy: only clusters
# the allocation table uses are imaged; fsck.fat and every file after a restore.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mkfs.fat fsck.fat mcopy mdel

mkfiles "$T/src" 12 400
run() {	# run BITS SIZE MKFS-ARGS...
	bits=$1 name=fat$1 size=$2
	shift 2
	img="$T/$name.img"
	dirty "$img" "$size"
	mkfs.fat "$@" "$img" >/dev/null 2>&1 || { not_ok "$name: mkfs.fat $*"; return; }
	for f in "$T"/src/*; do mcopy -i "$img" "$f" "::/$(basename "$f")"; done
	mdel -i "$img" ::/f3 ::/f6 ::/f9
	check "$name: source is clean" quiet fsck.fat -n "$img"
	check "$name: imagezip" "$IMAGEZIP" "$img" "$T/$name.ndz"
	pattern "$T/t.img" "$size"
	check "$name: imageunzip" "$IMAGEUNZIP" "$T/$name.ndz" "$T/t.img"
	check "$name: fsck.fat -n clean" quiet fsck.fat -n "$T/t.img"
	rm -rf "$T/out"; mkdir "$T/out"
	mcopy -s -i "$T/t.img" ::/ "$T/out/" >/dev/null 2>&1
	check "$name: every file reads back identical" same_files "$T/src" "$T/out" \
		f1 f2 f4 f5 f7 f8 f10 f11 f12
	smaller "$T/$name.ndz" "$img" "$(used_bytes "$img")" "$name"
	"$IMAGEZIP" -i "$img" >"$T/info"
	check "$name: -i names it" grep -q "fat \[FAT$bits," "$T/info"
	rm -f "$img" "$T/t.img" "$T/$name.ndz"
}
run 12 $((8 * MIB)) -F 12
run 16 $((32 * MIB)) -F 16
run 32 $((64 * MIB)) -F 32 -s 1

# an allocation table that does not start with the media byte: raw, with a warning
img="$T/bad.img"
dirty "$img" $((8 * MIB))
mkfs.fat -F 12 "$img" >/dev/null 2>&1
rs=$(od -An -t u2 -j 14 -N 2 "$img" | tr -d ' ')
printf '\001' | dd of="$img" bs=1 seek=$((rs * 512)) conv=notrunc status=none
printf '\001' | dd of="$img" bs=1 seek=$((rs * 512 + $(od -An -t u2 -j 22 -N 2 "$img" | tr -d ' ') * 512)) conv=notrunc status=none
"$IMAGEZIP" "$img" "$T/bad.ndz" 2>"$T/err"
check "damaged table: raw with a warning" grep -q "media byte; taking it raw" "$T/err"
pattern "$T/t.img" $((8 * MIB))
"$IMAGEUNZIP" "$T/bad.ndz" "$T/t.img"
check "damaged table: restored byte for byte" cmp -s "$img" "$T/t.img"
done_testing
