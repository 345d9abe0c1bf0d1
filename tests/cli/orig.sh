#!/bin/sh
# Original Frisbee (Emulab) images: every image of the reference corpus restores
# to what the original imageunzip restored (size and SHA-256 in corpus.tsv), from
# a file and from stdin, with -n, -z and -s N; damaged variants are each a clear
# error with nothing of the damaged chunk written.
. "$NDZ_TOP/tests/lib.sh"
C=1048576

# The whole corpus when ../shared is beside the clone, else the fixtures' subset.
R="${NDZ_ORIG_CORPUS:-$NDZ_TOP/../shared/reference/frisbee-images}"
if [ -f "$R/corpus.tsv" ]; then
	cp "$R"/*.ndz "$R"/*.key "$R"/*.skey "$R/corpus.tsv" "$T"/
else
	R="$NDZ_TOP/tests/fixtures/orig"
	cp "$R/corpus.tsv" "$T"/
	for f in "$R"/*.ndz.gz; do
		gzip -dc "$f" >"$T/$(basename "$f" .gz)"
	done
fi
cd "$T" || exit 1

sha() { sha256sum "$1" | cut -c1-64; }
field() { grep -P "^$1\t" corpus.tsv | cut -f"$2"; }
keys_for() {
	case $1 in
	*enc*) echo "--orig-key enc.key" ;;
	*sig*) echo "--orig-pubkey $1.ndz.skey" ;;
	esac
}
# put32 FILE OFFSET VALUE: a little-endian u32 in place
put32() {
	printf "$(printf '\\%03o\\%03o\\%03o\\%03o' $(($3 & 255)) $(($3 >> 8 & 255)) \
		$(($3 >> 16 & 255)) $(($3 >> 24 & 255)))" |
		dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}
get32() { od -An -tu4 -j "$2" -N4 "$1" | tr -d ' '; }

# 1. every image, restored to a fresh file from the file and from stdin
for name in $(tail -n +2 corpus.tsv | cut -f1); do
	[ -f "$name.ndz" ] || continue
	want=$(field "$name" 14)
	wbytes=$(field "$name" 13)
	rm -f out.bin
	# shellcheck disable=SC2046
	if "$IMAGEUNZIP" $(keys_for "$name") "$name.ndz" out.bin 2>err &&
	   [ "$(sha out.bin)" = "$want" ] && [ "$(stat -c %s out.bin)" = "$wbytes" ]; then
		ok "$name: restore equals the original's"
	else
		not_ok "$name: restore equals the original's ($(cat err))"
	fi
	rm -f out.bin
	# shellcheck disable=SC2046
	if "$IMAGEUNZIP" $(keys_for "$name") - out.bin <"$name.ndz" 2>err &&
	   [ "$(sha out.bin)" = "$want" ]; then
		ok "$name: restore from stdin equals the original's"
	else
		not_ok "$name: restore from stdin equals the original's ($(cat err))"
	fi
	# shellcheck disable=SC2046
	check "$name: -n verifies it" "$IMAGEUNZIP" -n $(keys_for "$name") "$name.ndz"
done

# 2. -z over a file full of 0xaa: the gaps become zeros, the rest is the restore
name=ext2-frag.F0.v3
n=$(field $name 13)
head -c "$n" /dev/zero | tr '\0' '\252' >full.bin
"$IMAGEUNZIP" -z $name.ndz full.bin 2>err
check "-z: the gaps are zeroed, same bytes as a fresh restore" \
	test "$(sha full.bin)" = "$(field $name 14)"

# 3. -s 1: the disklabel gets the slice's start added to its partition offsets
name=disk-bsd.s1.v3
truncate -s 32M disk.img
printf 'label: dos\nstart=2048, size=32768, type=a5\n' | sfdisk -q disk.img >/dev/null 2>&1
if "$IMAGEUNZIP" -s 1 $name.ndz disk.img 2>err; then
	l=$(((2048 + 1) * 512))
	# a: offset 0 -> 2048; b: 24576 -> 26624; c: 0 -> 2048
	check "-s 1: partition a starts at the slice" test "$(get32 disk.img $((l + 148 + 4)))" = 2048
	check "-s 1: partition b moved by the slice's start" \
		test "$(get32 disk.img $((l + 164 + 4)))" = 26624
	x=$(od -An -tu2 -v -j $l -N 276 disk.img | tr -s ' ' '\n' | grep . |
	    { s=0; while read -r v; do s=$((s ^ v)); done; echo $s; })
	check "-s 1: the label's checksum is valid" test "$x" = 0
	# everything else is the plain restore's
	rm -f plain.bin
	"$IMAGEUNZIP" $name.ndz plain.bin
	dd if=disk.img bs=512 skip=2048 count=6400 2>/dev/null >slice.bin
	check "-s 1: only the label differs from a plain restore" \
		test "$(cmp -l plain.bin slice.bin | awk '$1 < 512 || $1 > 788' | wc -l)" = 0
	# --to-orig keeps the relocation: the converted image restores into the slice
	# the same, label relocated at the right offsets
	rm -f conv.ndz
	"$IMAGEZIP" -q --from-image --to-orig $name.ndz conv.ndz 2>err
	rc=$?
	nrel=$(get32 conv.ndz 32)
	rtype=$(get32 conv.ndz $((36 + 8 * $(get32 conv.ndz 20))))
	check "--to-orig of a relocating image: no warning, its relocation in chunk 0" \
		sh -c "[ $rc = 0 ] && [ ! -s err ] && [ '$nrel' = 1 ] && [ '$rtype' = 1 ]"
	cp disk.img disk2.img
	dd if=/dev/zero of=disk2.img bs=512 seek=2048 count=32768 conv=notrunc 2>/dev/null
	"$IMAGEUNZIP" -s 1 conv.ndz disk2.img 2>err
	rc=$?
	check "--to-orig: partition b of the converted label moved by the slice's start" \
		sh -c "[ $rc = 0 ] && [ '$(get32 disk2.img $((l + 164 + 4)))' = 26624 ]"
	check "--to-orig: the converted slice restores as the original's, label and all" \
		cmp -s disk.img disk2.img
else
	not_ok "-s 1 restore into slice 1 ($(cat err))"
fi

# 4. damaged variants: the error names the chunk; its regions stay 0xaa.
# mk NAME BASE: a copy of BASE to damage
mk() { cp "$2.ndz" "$1.ndz"; }
# expect CASE REGEX CHECKOFF CHECKLEN BASE: from a file and from stdin, exit 1,
# the message, and CHECKLEN bytes at CHECKOFF of the target still 0xaa
expect() {
	for mode in file stdin; do
		n=$(field "$5" 13)
		head -c "$n" /dev/zero | tr '\0' '\252' >tgt.bin
		if [ $mode = file ]; then
			"$IMAGEUNZIP" "$1.ndz" tgt.bin 2>err
		else
			"$IMAGEUNZIP" - tgt.bin <"$1.ndz" 2>err
		fi
		rc=$?
		kept=$(dd if=tgt.bin bs=512 skip=$(($3 / 512)) count=$(($4 / 512)) 2>/dev/null |
		       tr -d '\252' | wc -c)
		if [ $rc = 1 ] && grep -Eq "$2" err && [ "$kept" = 0 ]; then
			ok "$1 ($mode): refused, nothing of the chunk written"
		else
			not_ok "$1 ($mode): rc $rc, $kept bytes written, message: $(cat err)"
		fi
	done
}
F=ext2-frag.F0.v3
# chunk 1 of $F: regions from sector 4410, the first 4 sectors long
R1=$((4410 * 512))

mk magic $F; put32 magic.ndz $C 0x12345678
expect magic "chunk 1: not an image \(bad magic\)" $R1 2048 $F

mk nregions $F; put32 nregions.ndz $((C + 20)) 2000
expect nregions "chunk 1: malformed chunk header: 2000 regions" $R1 2048 $F

mk overlap $F; put32 overlap.ndz $((C + 36 + 8)) 4411
expect overlap "chunk 1: region outside the image or out of order: region 1 .*overlaps" \
	$R1 2048 $F

mk pastlast $F; put32 pastlast.ndz $((C + 36 + 330 * 8 + 4)) 99999
expect pastlast "chunk 1: region outside .*region 330 .*past the chunk's last sector" \
	$R1 2048 $F

mk outside $F; put32 outside.ndz $((C + 36)) 4000
expect outside "chunk 1: region outside .*region 0 .*before the chunk's first sector" \
	$R1 2048 $F

mk zlibcut $F; put32 zlibcut.ndz $((C + 4)) 70000
expect zlibcut "chunk 1: (corrupt compressed data|decompressed length)" $R1 2048 $F

# chunk 1 of another image: it does not chain with chunk 0
O=odd.f.v3
head -c $C $F.ndz >other.ndz; tail -c +$((C + 1)) $O.ndz >>other.ndz
expect other "chunk 1: region outside .*does not start where the chunk before ends" \
	$R1 2048 $F

# a relocation outside the chunk's regions (odd.f.v3's short sector, chunk 1)
mk reloc $O; put32 reloc.ndz $((C + 36 + 8 + 4)) 99999
expect reloc "chunk 1: region outside .*relocation 0 .*outside the chunk's regions" \
	$((4659 * 512)) 4096 $O

# written on a big-endian host: its magic reads backwards
mk bigend $F
printf 'iiik' | dd of=bigend.ndz bs=1 conv=notrunc 2>/dev/null
expect bigend "big-endian host, not supported" 0 4096 $F

# V1 written big-endian: its magic reads the same, its other fields do not
if [ -f mixed6m.v1.ndz ]; then
	mk bigend1 mixed6m.v1
	printf '\000\000\020\000' | dd of=bigend1.ndz bs=1 seek=16 conv=notrunc 2>/dev/null
	expect bigend1 "big-endian host, not supported" 0 4096 mixed6m.v1
fi

# V4: another image id in chunk 1; encrypted without a key; a forged signature
if [ -f mixed6m.v4.ndz ]; then
	mk otherid mixed6m.v4; printf 'X' | dd of=otherid.ndz bs=1 seek=$((C + 328)) \
		conv=notrunc 2>/dev/null
	expect otherid "chunk 1: chunk belongs to another image: another image id" \
		$((5356 * 512)) 4096 mixed6m.v4
	rm -f out.bin
	"$IMAGEUNZIP" mixed6m.v4.enc.ndz out.bin 2>err
	check "v4 encrypted without its key: refused, no target left" \
		sh -c "[ $? = 1 ] && grep -q 'encrypted and no key' err && [ ! -e out.bin ]"
	mk forged mixed6m.v4.sig
	printf 'X' | dd of=forged.ndz bs=1 seek=$((C + 5000)) conv=notrunc 2>/dev/null
	head -c 6291456 /dev/zero | tr '\0' '\252' >tgt.bin
	"$IMAGEUNZIP" --orig-pubkey mixed6m.v4.sig.ndz.skey forged.ndz tgt.bin 2>err
	rc=$?
	kept=$(dd if=tgt.bin bs=512 skip=5356 count=8 2>/dev/null | tr -d '\252' | wc -c)
	check "v4 signed, a data byte changed: refused, nothing of it written" \
		sh -c "[ $rc = 1 ] && grep -q 'signature does not match' err && [ $kept = 0 ]"
	check "v4 signed: the RSA-512 warning" grep -q "RSA-512" err
fi

# 5. --orig-pubkey means every chunk carries a signature that verifies under it:
# anything else is refused, nothing of the unsigned chunk written (target 0xa5)
if [ -f mixed6m.v4.sig.ndz.skey ]; then
	cp mixed6m.v4.sig.ndz.skey pk.skey
else                                   # the corpus's public key: any key will do here
	printf '%s\n%s\n' B0F6366C849BFDD82A02ACEEDE6C1FDD776111BF3ABC785475D61E8AF800\
3C462542347964392ED918C127C73EDFF4041A3E621643AFAC81FB0F5D71DDD57ECF 11 >pk.skey
fi
a5() { head -c "$1" /dev/zero | tr '\0' '\245' >tgt.bin; }
# untouched OFF LEN: LEN bytes at OFF of tgt.bin are still 0xa5 (sector multiples)
untouched() {
	[ "$(dd if=tgt.bin bs=512 skip=$(($1 / 512)) count=$(($2 / 512)) 2>/dev/null |
	     tr -d '\245' | wc -c)" = 0 ]
}
for name in $(tail -n +2 corpus.tsv | cut -f1); do
	[ -f "$name.ndz" ] || continue
	v=$(field "$name" 3)
	[ "$v" -lt 4 ] || continue
	n=$(field "$name" 13)
	a5 "$n"
	"$IMAGEUNZIP" -q --orig-pubkey pk.skey "$name.ndz" tgt.bin 2>err
	rc=$?
	check "--orig-pubkey, $name (V$v, cannot be signed): refused, nothing written" \
		sh -c "[ $rc = 1 ] && grep -q 'version $v image cannot be signed' err &&
		       [ \$(tr -d '\245' <tgt.bin | wc -c) = 0 ]"
done
if [ -f mixed6m.v4.sig.ndz ]; then
	K="--orig-pubkey mixed6m.v4.sig.ndz.skey"
	n=$(field mixed6m.v4.sig 13)
	a5 "$n"
	# shellcheck disable=SC2086
	"$IMAGEUNZIP" -q $K mixed6m.v4.ndz tgt.bin 2>err
	rc=$?
	check "--orig-pubkey, an unsigned V4 image: refused, nothing written" \
		sh -c "[ $rc = 1 ] && grep -q 'chunk 0 has no signature' err &&
		       [ \$(tr -d '\245' <tgt.bin | wc -c) = 0 ]"
	# chunk 1 of the signed image swapped for the unsigned image's (same id, regions)
	head -c $C mixed6m.v4.sig.ndz >swap1.ndz; tail -c +$((C + 1)) mixed6m.v4.ndz >>swap1.ndz
	# chunk 1's regions, from its header: [start, start + count) sectors each
	nr=$(get32 swap1.ndz $((C + 20)))
	for mode in file stdin; do
		a5 "$n"
		# shellcheck disable=SC2086
		if [ $mode = file ]; then
			"$IMAGEUNZIP" -q $K swap1.ndz tgt.bin 2>err
		else
			"$IMAGEUNZIP" -q $K - tgt.bin <swap1.ndz 2>err
		fi
		rc=$?
		kept=yes i=0
		while [ $i -lt "$nr" ]; do
			st=$(get32 swap1.ndz $((C + 344 + 8 * i)))
			ct=$(get32 swap1.ndz $((C + 344 + 8 * i + 4)))
			untouched $((st * 512)) $((ct * 512)) || kept=no
			i=$((i + 1))
		done
		check "--orig-pubkey, signed V4 with chunk 1 unsigned ($mode): refused, nothing of chunk 1 written" \
			sh -c "[ $rc = 1 ] && [ $nr -gt 0 ] && [ $kept = yes ] &&
			       grep -q 'chunk 1: image is not signed: chunk has no signature' err"
	done
	# and the other way round: chunk 0 unsigned, chunk 1 signed
	head -c $C mixed6m.v4.ndz >swap0.ndz; tail -c +$((C + 1)) mixed6m.v4.sig.ndz >>swap0.ndz
	a5 "$n"
	# shellcheck disable=SC2086
	"$IMAGEUNZIP" -q $K swap0.ndz tgt.bin 2>err
	check "--orig-pubkey, signed V4 with chunk 0 unsigned: refused, nothing written" \
		sh -c "[ $? = 1 ] && [ \$(tr -d '\245' <tgt.bin | wc -c) = 0 ]"
	# a signed chunk under another key: its signature does not verify
	printf '%s\n%s\n' C3A5000000000000000000000000000000000000000000000000000000000000\
00000000000000000000000000000000000000000000000000000000000000F1 11 >other.skey
	a5 "$n"
	"$IMAGEUNZIP" -q --orig-pubkey other.skey mixed6m.v4.sig.ndz tgt.bin 2>err
	check "--orig-pubkey of another key: refused" \
		sh -c "[ $? = 1 ] && grep -q 'signature does not match' err"
	# properly signed: the original's restore, onto the 0xa5 target too
	a5 "$n"
	# shellcheck disable=SC2086
	"$IMAGEUNZIP" -q $K mixed6m.v4.sig.ndz tgt.bin 2>err
	check "--orig-pubkey, signed V4: restores as the original's" \
		sh -c "[ $? = 0 ] && [ '$(sha tgt.bin)' = '$(field mixed6m.v4.sig 14)' ]"
fi

# 6. conversion: original -> ours (signed) -> original V3, each restoring the same
IMAGEKEY="$NDZ_BIN/imagekey"
"$IMAGEKEY" -q generate -o sk || not_ok "imagekey generate"
for name in $(tail -n +2 corpus.tsv | cut -f1); do
	[ -f "$name.ndz" ] || continue
	case $name in *enc*) ok_key="--orig-key enc.key" ;; *) ok_key="" ;; esac
	want=$(field "$name" 14)
	rm -f ours.ndz ours.ndz.manifest v3.ndz r1.bin r2.bin
	# shellcheck disable=SC2086
	if "$IMAGEZIP" -q --from-image $ok_key --sign sk.sec "$name.ndz" ours.ndz 2>err &&
	   "$IMAGEUNZIP" -k sk.pub ours.ndz r1.bin 2>>err && [ "$(sha r1.bin)" = "$want" ]; then
		ok "$name: converted to ours and signed, the same restore"
	else
		not_ok "$name: converted to ours and signed, the same restore ($(cat err))"
	fi
	if "$IMAGEZIP" -q --from-image --to-orig ours.ndz v3.ndz 2>err &&
	   "$IMAGEUNZIP" v3.ndz r2.bin 2>>err && [ "$(sha r2.bin)" = "$want" ] &&
	   [ "$(get32 v3.ndz 0)" = $((0x6969696b)) ] && [ "$(get32 v3.ndz 16)" = 4096 ]; then
		ok "$name: back to original V3, the same restore"
	else
		not_ok "$name: back to original V3, the same restore ($(cat err))"
	fi
done
# the original imagezip's own layout: chunk 0 of a 469-region image byte for byte
rm -f v3.ndz
"$IMAGEZIP" -q --from-image --to-orig ext2-frag.F0.v3.ndz v3.ndz
check "V3 writer: chunk 0 of ext2-frag is the original imagezip's, byte for byte" \
	sh -c "head -c $C v3.ndz | cmp -s - ext2-frag.F0.v3.ndz -n $C"
# every chunk zero padded past its data
sz=$(get32 v3.ndz $((C + 4)))
check "V3 writer: zero padding after the data" \
	test "$(tail -c +$((C + 4096 + sz + 1)) v3.ndz | tr -d '\0' | wc -c)" = 0
# what V3 cannot address is refused before anything is written
truncate -s $((4294967296 * 512 + 512)) big.bin
rm -f big.ndz
"$IMAGEZIP" -q -r --to-orig big.bin big.ndz 2>err
check "V3 writer: a source past 2^32 sectors refused" \
	sh -c "[ $? = 1 ] && grep -q 'addresses 2^32 sectors' err && [ ! -e big.ndz ]"
rm -f big.bin
"$IMAGEKEY" sign -k sk.sec -m o.manifest odd.f.v3.ndz 2>err
check "imagekey sign: an original image is sent to the converter" \
	sh -c "[ $? = 1 ] && grep -q 'convert and sign it' err && [ ! -e o.manifest ]"
check "--to-orig refuses --sign" sh -c "! '$IMAGEZIP' -q --to-orig --sign sk.sec odd.f.v3.ndz x.ndz 2>/dev/null"

done_testing
