#!/bin/sh
# Round trips on real data: imagezip then imageunzip (file, stdin, stdout), cmp.
. "$NDZ_TOP/tests/lib.sh"
ZR="$NDZ_BUILD/tests/helpers/zipranges"

# Mixed input: random, zeros, text (our own sources), odd tail.
mk_mixed() {
	{
		head -c 3000000 /dev/urandom
		head -c 2000000 /dev/zero
		cat "$NDZ_TOP"/lib/*/*.c "$NDZ_TOP"/lib/*/*.h "$NDZ_TOP"/imagezip/*.c
		head -c 5000000 /dev/zero | tr '\0' 'a'
		head -c 777 /dev/urandom
	} >"$1"
}

roundtrip() {	# name file [imagezip options]
	name=$1 f=$2; shift 2
	rm -f "$T/rt.ndz" "$T/rt.out"
	if ! "$IMAGEZIP" "$@" "$f" "$T/rt.ndz"; then not_ok "$name: imagezip"; return; fi
	if ! "$IMAGEUNZIP" "$T/rt.ndz" "$T/rt.out"; then not_ok "$name: imageunzip"; return; fi
	check "$name: restored file identical" cmp -s "$f" "$T/rt.out"
}

mk_mixed "$T/mixed"
head -c 6000000 /dev/urandom >"$T/rand"
for n in 0 1 511 512 513 4096 1048575 1048576 1048577 3145735; do
	head -c "$n" /dev/urandom >"$T/s$n"
done
head -c 512 /dev/zero >"$T/onesector"

# Every codec over the same inputs.
for codec in zlib zstd; do
	C="--codec $codec"
	if [ $codec = zlib ]; then lo=0 hi=9; else lo=1 hi=19; fi
	roundtrip "$codec: mixed input" "$T/mixed" $C
	roundtrip "$codec: mixed input, level $hi" "$T/mixed" $C -z $hi
	roundtrip "$codec: mixed input, level $lo" "$T/mixed" $C -z $lo

	# The image does not depend on the thread count.
	for j in 1 2 5; do
		"$IMAGEZIP" $C -j $j --uuid 0123456789abcdef0123456789abcdef "$T/mixed" "$T/j$j.ndz"
	done
	check "$codec: same image with 1, 2 and 5 threads" \
		sh -c "cmp -s '$T/j1.ndz' '$T/j2.ndz' && cmp -s '$T/j1.ndz' '$T/j5.ndz'"
	check "$codec: image size is a whole number of 1 MiB chunks" \
		test $(($(stat -c %s "$T/j1.ndz") % 1048576)) -eq 0

	# Sizes around the sector and chunk boundaries, empty and one sector.
	for n in 0 1 511 512 513 4096 1048575 1048576 1048577 3145735; do
		roundtrip "$codec: random input of $n bytes" "$T/s$n" $C
	done
	roundtrip "$codec: one zero sector" "$T/onesector" $C

	# Incompressible data spills over many chunks and still fills them.
	roundtrip "$codec: 6 MB of random data" "$T/rand" $C
done
"$IMAGEZIP" -q --codec zstd "$T/mixed" - | "$IMAGEUNZIP" - "$T/p.out"
check "zstd: imagezip to stdout piped into imageunzip from stdin" cmp -s "$T/mixed" "$T/p.out"
"$IMAGEZIP" -q --codec zstd -z 0 "$T/mixed" "$T/bad.ndz" 2>/dev/null
check "zstd: level 0 is a usage error" test $? -eq 2
"$IMAGEZIP" -q --codec zlib -z 10 "$T/mixed" "$T/bad.ndz" 2>/dev/null
check "zlib: level 10 is a usage error" test $? -eq 2
"$IMAGEZIP" -q --codec lz4 "$T/mixed" "$T/bad.ndz" 2>/dev/null
check "an unknown codec is a usage error" test $? -eq 2

# stdout and stdin.
rm -f "$T/p.out"
"$IMAGEZIP" "$T/mixed" - | "$IMAGEUNZIP" - "$T/p.out"
check "imagezip to stdout piped into imageunzip from stdin" cmp -s "$T/mixed" "$T/p.out"

# An existing larger target: only the image's bytes change.
head -c 20000000 /dev/zero | tr '\0' 'Z' >"$T/bigger"
cp "$T/bigger" "$T/bigger.orig"
"$IMAGEZIP" "$T/s1048577" "$T/small.ndz"
"$IMAGEUNZIP" "$T/small.ndz" "$T/bigger"
check "restore into a larger file: the image's bytes written" \
	sh -c "head -c 1048577 '$T/bigger' | cmp -s - '$T/s1048577'"
check "restore into a larger file: the rest untouched" \
	cmp -s -i 1048577 "$T/bigger" "$T/bigger.orig"
check "restore into a larger file: size kept" test "$(stat -c %s "$T/bigger")" = 20000000

# Gaps: an image of chosen ranges restored over a patterned target.
head -c 8388608 /dev/urandom >"$T/gapsrc"
"$ZR" "$T/gapsrc" "$T/gaps.ndz" 0:100 1000:3000 9000:50 16000:384
head -c 8388608 /dev/zero | tr '\0' '\252' >"$T/pattern"
cp "$T/pattern" "$T/skip.out"
"$IMAGEUNZIP" "$T/gaps.ndz" "$T/skip.out"
cp "$T/pattern" "$T/zero.out"
"$IMAGEUNZIP" -z "$T/gaps.ndz" "$T/zero.out"
# Expected results built with dd from the source.
cp "$T/pattern" "$T/skip.want"
head -c 8388608 /dev/zero >"$T/zero.want"
for r in 0:100 1000:3000 9000:50 16000:384; do
	s=${r%:*} c=${r#*:}
	dd if="$T/gapsrc" of="$T/skip.want" bs=512 skip="$s" seek="$s" count="$c" conv=notrunc 2>/dev/null
	dd if="$T/gapsrc" of="$T/zero.want" bs=512 skip="$s" seek="$s" count="$c" conv=notrunc 2>/dev/null
done
check "gaps are skipped by default (old data stays)" cmp -s "$T/skip.want" "$T/skip.out"
check "-z zero-fills the gaps, lead and trail included" cmp -s "$T/zero.want" "$T/zero.out"
# --discard punches the gaps out of a file: they read as zeros and take no space
cp "$T/pattern" "$T/discard.out"
"$IMAGEUNZIP" --discard "$T/gaps.ndz" "$T/discard.out"
check "--discard: the gaps of a file become holes that read as zeros" \
	cmp -s "$T/zero.want" "$T/discard.out"
check "--discard: the file takes less space than its size ($(du -k "$T/discard.out" | cut -f1) KiB)" \
	test "$(du -k "$T/discard.out" | cut -f1)" -lt 7000
"$IMAGEUNZIP" -z --discard "$T/gaps.ndz" "$T/discard.out" 2>"$T/err"
check "-z with --discard: exit 2 and says why" \
	sh -c "test $? = 2 && grep -q 'exclude each other' '$T/err'"
rm -f "$T/new.out"
"$IMAGEUNZIP" "$T/gaps.ndz" "$T/new.out"
check "a new target file is created at the image's size with zeros in the gaps" \
	cmp -s "$T/zero.want" "$T/new.out"

# A multi-GiB sparse source: holes cost nothing, data around them survives.
if [ "$NDZ_SANITIZED" = 1 ]; then gib=1; else gib=2; fi
truncate -s "${gib}G" "$T/sparse"
echo "needle in the middle" | dd of="$T/sparse" bs=1 seek=700000001 conv=notrunc 2>/dev/null
head -c 300000 /dev/urandom | dd of="$T/sparse" bs=4096 seek=200000 conv=notrunc 2>/dev/null
printf 'tail' | dd of="$T/sparse" bs=1 seek=$((gib * 1073741824 - 4)) conv=notrunc 2>/dev/null
"$IMAGEZIP" "$T/sparse" "$T/sparse.ndz"
check "${gib} GiB sparse source: image under 8 MiB" test "$(stat -c %s "$T/sparse.ndz")" -le 8388608
rm -f "$T/sparse.out"
"$IMAGEUNZIP" "$T/sparse.ndz" "$T/sparse.out"
check "${gib} GiB sparse source restored identical" cmp -s "$T/sparse" "$T/sparse.out"
check "${gib} GiB sparse restore stays sparse (under 16 MiB on disk)" \
	test "$(du -k "$T/sparse.out" | cut -f1)" -lt 16384
rm -f "$T/sparse" "$T/sparse.out"

# Verify mode writes nothing.
rm -f "$T/none"
"$IMAGEUNZIP" -n "$T/rt.ndz"
check "-n verifies a good image" test $? -eq 0
"$IMAGEUNZIP" -n "$T/rt.ndz" "$T/none" 2>/dev/null
check "-n with a TARGET does not create it" test ! -e "$T/none"

done_testing
