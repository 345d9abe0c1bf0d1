#!/bin/sh
# The tools under valgrind: no leaks, no invalid accesses, on success and on failure.
. "$NDZ_TOP/tests/lib.sh"
[ "$NDZ_SANITIZED" = 1 ] && skip_all "valgrind runs on the plain build only"
command -v valgrind >/dev/null || skip_all "valgrind not installed"
VG="valgrind -q --leak-check=full --show-leak-kinds=definite,indirect,possible
    --errors-for-leak-kinds=definite,indirect,possible --error-exitcode=99"

vg() {	# DESC EXPECTED_EXIT CMD... (stdin from $VG_IN, stdout to $VG_OUT)
	d=$1 want=$2; shift 2
	# shellcheck disable=SC2086
	$VG "$@" <"${VG_IN:-/dev/null}" >"${VG_OUT:-$T/vg.out}" 2>"$T/vg.err"; rc=$?
	if [ $rc -eq "$want" ]; then ok "$d (exit $rc)"; else
		not_ok "$d (exit $rc, wanted $want)"; sed 's/^/# /' "$T/vg.err" | head -n 30; fi
}

{ head -c 1500000 /dev/urandom; head -c 2000000 /dev/zero; cat "$NDZ_TOP"/lib/*/*.c; } >"$T/src"
vg "imagezip -j 2" 0 "$IMAGEZIP" -j 2 "$T/src" "$T/img"
VG_OUT="$T/img1" vg "imagezip -j 1 to stdout" 0 "$IMAGEZIP" -j 1 "$T/src" -
vg "imageunzip to a new file" 0 "$IMAGEUNZIP" "$T/img" "$T/out"
check "valgrind run restored the data" cmp -s "$T/src" "$T/out"
vg "imageunzip -z onto an existing file" 0 "$IMAGEUNZIP" -z "$T/img" "$T/out"
vg "imageunzip -n" 0 "$IMAGEUNZIP" -n "$T/img"
cat "$T/img" >"$T/bad"
printf 'X' | dd of="$T/bad" bs=1 seek=$((1048576 + 5000)) conv=notrunc 2>/dev/null
vg "imageunzip of a corrupt image (error path)" 1 "$IMAGEUNZIP" "$T/bad" "$T/out2"
head -c 1500000 "$T/img" >"$T/trunc"
VG_IN="$T/trunc" vg "imageunzip of a truncated image from stdin" 1 "$IMAGEUNZIP" - "$T/out3"
VG_IN="$T/img1" vg "imageunzip from stdin" 0 "$IMAGEUNZIP" - "$T/out4"
check "valgrind run from stdin restored the data" cmp -s "$T/src" "$T/out4"
vg "imagezip of a missing source" 1 "$IMAGEZIP" "$T/missing" "$T/x"
vg "imagezip --codec zstd -j 2" 0 "$IMAGEZIP" --codec zstd -j 2 "$T/src" "$T/zimg"
vg "imageunzip of a zstd image" 0 "$IMAGEUNZIP" "$T/zimg" "$T/zout"
check "valgrind run restored the zstd image's data" cmp -s "$T/src" "$T/zout"
cat "$T/zimg" >"$T/zbad"
printf 'X' | dd of="$T/zbad" bs=1 seek=$((1048576 + 5000)) conv=notrunc 2>/dev/null
vg "imageunzip of a corrupt zstd image (error path)" 1 "$IMAGEUNZIP" "$T/zbad" "$T/zout2"
done_testing
