#!/bin/sh
# Linux swap: only the header page is imaged; a swap area holding a hibernation
# image is kept whole.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mkswap blkid

SIZE=$((16 * MIB))
img="$T/s.img"
dirty "$img" $SIZE
mkswap -q -L ndzswap "$img" >/dev/null 2>&1 || { not_ok "mkswap"; done_testing; }
check "imagezip" "$IMAGEZIP" "$img" "$T/s.ndz"
check "image is one chunk" test "$(fsize "$T/s.ndz")" = $MIB
pattern "$T/t.img" $SIZE
check "imageunzip" "$IMAGEUNZIP" "$T/s.ndz" "$T/t.img"
check "header page identical" cmp -s -n 4096 "$img" "$T/t.img"
check "restored swap is recognized with its label" \
	sh -c "blkid -p -o value -s LABEL '$T/t.img' | grep -qx ndzswap"
"$IMAGEZIP" -i "$img" >"$T/info"
check "-i: swap with 4096 bytes used" grep -q "swap \[linux swap\] used 4096 " "$T/info"

# a hibernation image: the signature replaced, everything kept
printf 'S1SUSPEND\0' | dd of="$img" bs=1 seek=4086 conv=notrunc status=none
check "imagezip (hibernated)" "$IMAGEZIP" "$img" "$T/h.ndz"
pattern "$T/t.img" $SIZE
"$IMAGEUNZIP" "$T/h.ndz" "$T/t.img"
check "hibernated swap restored whole" cmp -s "$img" "$T/t.img"
done_testing
