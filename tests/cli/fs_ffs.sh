#!/bin/sh
# BSD FFS (UFS1, UFS2) made by makefs: the cylinder groups' free-fragment bitmaps
# decide; everything they call allocated must come back identical.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need makefs gzip

SIZE=$((32 * MIB))
mkfiles "$T/src" 20 700

run() {	# run NAME MAKEFS-OPTIONS
	name=$1
	img="$T/$name.img"; tgt="$T/$name.tgt"; ndz="$T/$name.ndz"
	if ! makefs -t ffs -f 32 -o "$2" -s $SIZE "$img" "$T/src" >"$T/mk.log" 2>&1; then
		cat "$T/mk.log"
		not_ok "$name: makefs -o $2"; return
	fi
	# makefs leaves free space zeroed: nothing outside the bitmaps' allocation may be non-zero
	check "$name: free fragments hold only zeros" \
		sh -c "'$SCANDUMP' -Z '$img' | grep -qx 'nonzero-free 0'"
	# now make free space dirty, as on a used disk
	"$SCANDUMP" -l "$img" | awk '$1 == "range" { print $2, $3 }' >"$T/alloc"
	dirty "$T/junk" $SIZE
	awk -v s=$((SIZE / 512)) 'BEGIN { p = 0 } { if ($1 > p) print p, $1 - p; p = $1 + $2 }
		END { if (p < s) print p, s - p }' "$T/alloc" | head -40 | while read -r a n; do
		dd if="$T/junk" of="$img" bs=512 skip="$a" seek="$a" count="$n" conv=notrunc status=none
	done
	check "$name: imagezip" "$IMAGEZIP" "$img" "$ndz"
	pattern "$tgt" $SIZE
	check "$name: imageunzip" "$IMAGEUNZIP" "$ndz" "$tgt"
	check "$name: every allocated fragment identical" \
		sh -c "'$SCANDUMP' -X '$tgt' '$img' | grep -qx 'alloc-diff 0'"
	"$SCANDUMP" -l "$tgt" | grep '^range' >"$T/r.tgt"
	grep '^range' "$T/alloc" >/dev/null 2>&1 || "$SCANDUMP" -l "$img" | grep '^range' >"$T/r.src"
	"$SCANDUMP" -l "$img" | grep '^range' >"$T/r.src"
	check "$name: restored bitmaps describe the same allocation" cmp -s "$T/r.src" "$T/r.tgt"
	smaller "$ndz" "$img" "$(used_bytes "$img")" "$name"
	"$IMAGEZIP" -i "$img" >"$T/info"
	check "$name: -i names it" grep -q "ufs \[$3" "$T/info"
	rm -f "$img" "$tgt" "$ndz"
}

run ufs2 version=2 UFS2
run ufs1 version=1 UFS1
run ufs2-4k version=2,bsize=4096,fsize=512 "UFS2, 4096-byte blocks, 512-byte"
done_testing
