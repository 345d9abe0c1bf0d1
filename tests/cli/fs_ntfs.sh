#!/bin/sh
# NTFS made by mkntfs and filled by ntfscp: free clusters from $Bitmap are left
# out, pagefile.sys/hiberfil.sys contents skipped unless --keep-pagefile, and the
# backup boot sector at the end of the volume is kept.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mkntfs ntfscp ntfscat ntfsfix gzip

SIZE=$((48 * MIB))
img="$T/n.img"
mkfiles "$T/src" 24 900
dirty "$img" $SIZE        # mkntfs -f does not clear the volume: free space stays dirty
mkntfs -q -F -f -c 4096 "$img" >/dev/null 2>&1 || { not_ok "mkntfs"; done_testing; }
for f in "$T"/src/*; do ntfscp -q "$img" "$f" "$(basename "$f")" >/dev/null 2>&1; done
# overwrite some files with short ones: their old clusters are free and stale
for i in 2 5 8; do
	echo short >"$T/src/f$i"
	ntfscp -q "$img" "$T/src/f$i" "f$i" >/dev/null 2>&1
done
dirty "$T/pagefile" $((6 * MIB))
ntfscp -q "$img" "$T/pagefile" pagefile.sys >/dev/null 2>&1
check "source is clean" quiet ntfsfix -n "$img"

restore() {	# restore NAME NDZ: onto a patterned target, then the checks
	tgt="$T/$1.tgt"
	pattern "$tgt" $SIZE
	check "$1: imageunzip" "$IMAGEUNZIP" "$2" "$tgt"
	if ntfsfix -n "$tgt" >"$T/fix" 2>&1 && grep -q "alternate boot sector... OK" "$T/fix"; then
		ok "$1: ntfsfix -n clean, backup boot sector OK"
	else
		not_ok "$1: ntfsfix -n"; cat "$T/fix"
	fi
	bad=0
	for f in "$T"/src/*; do
		ntfscat "$tgt" "$(basename "$f")" 2>/dev/null | cmp -s - "$f" || { bad=1; echo "# differs: $f"; }
	done
	check "$1: every file reads back identical (ntfscat)" test $bad = 0
	check "$1: backup boot sector identical" cmp -s "$T/last.src" "$(tail -c 512 "$tgt" >"$T/last.tgt"; echo "$T/last.tgt")"
}
tail -c 512 "$img" >"$T/last.src"

check "imagezip" "$IMAGEZIP" "$img" "$T/a.ndz"
restore default "$T/a.ndz"
ntfscat "$T/default.tgt" pagefile.sys 2>/dev/null | cmp -s - "$T/pagefile"
check "default: pagefile.sys contents left out" test $? != 0
smaller "$T/a.ndz" "$img" "$(used_bytes "$img")" "default"
rm -f "$T/default.tgt"

check "imagezip --keep-pagefile" "$IMAGEZIP" --keep-pagefile "$img" "$T/k.ndz"
restore keep "$T/k.ndz"
ntfscat "$T/keep.tgt" pagefile.sys 2>/dev/null | cmp -s - "$T/pagefile"
check "--keep-pagefile: pagefile.sys identical" test $? = 0
check "--keep-pagefile: image is bigger" test "$(fsize "$T/k.ndz")" -gt "$(fsize "$T/a.ndz")"
rm -f "$T/keep.tgt"

"$IMAGEZIP" -i "$img" >"$T/info"
check "-i: ntfs with used and free bytes" grep -q "ntfs \[NTFS 3.1, 4096-byte clusters, page/hibernation files skipped\] used" "$T/info"
done_testing
