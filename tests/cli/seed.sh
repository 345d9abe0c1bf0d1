#!/bin/sh
# Reloading only what changed (issue 23): imageunzip --seed and --verify, imagekey
# index and verify --target, on a real ext4 (mkfs.ext4 -d) changed through debugfs
# by about 2% of its used bytes. The chunks that changed are counted independently
# (tests/cli/seed.sh's own reader of chunk headers, comparing bytes of the disks).
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mkfs.ext4 e2fsck debugfs python3 cmp
IMAGEKEY="$NDZ_BIN/imagekey"

# chunks.py IMAGE A B MODE: "differ total" - of IMAGE's chunks, how many write bytes
# where A and B differ: MODE regions (the bytes a chunk writes, clipped to the source
# size) or span (all of [first, last), gaps too: a -z restore). From the headers as
# doc/FORMAT.md lays them out; nothing of ndz is used.
cat >"$T/chunks.py" <<'PY'
import struct, sys
img, a, b, mode = sys.argv[1:5]
A, B = open(a, 'rb'), open(b, 'rb')
differ = total = 0
with open(img, 'rb') as f:
    while True:
        h = f.read(1048576)
        if len(h) < 4096:
            break
        sb, first, last = struct.unpack_from('<QQQ', h, 64)
        nr = struct.unpack_from('<I', h, 96)[0]
        spans = [(first, last - first)] if mode == 'span' else \
            [struct.unpack_from('<QI', h, 128 + 12 * i) for i in range(nr)]
        d = 0
        for s, c in spans:
            o = s * 512
            n = max(0, min(c * 512, sb - o))
            A.seek(o)
            B.seek(o)
            if A.read(n) != B.read(n):
                d = 1
                break
        differ += d
        total += 1
print(differ, total)
PY
chunks() { python3 "$T/chunks.py" "$@"; }
# restored LOGFILE: N of "(H held by the target, N restored)" in imageunzip -v's summary
restored() { sed -n 's/.*held by the target, \([0-9]*\) restored.*/\1/p' "$1"; }
held() { sed -n 's/.*(\([0-9]*\) held by the target.*/\1/p' "$1"; }
# fetched LOGFILE: chunks restored whole plus chunks patched piece by piece (a zstd
# image's, doc/FORMAT.md "Pieces"): the chunks the target did not hold
fetched() {
	sed -n 's/.*held by the target, \([0-9]*\) restored, \([0-9]*\) patched.*/\1 \2/p' "$1" |
		awk '{ print $1 + $2 }'
}

# The source: 64 MiB of ext4 holding about 36 MB of files (incompressible ones, so
# there are chunks enough to count).
mkdir "$T/src"
i=1; while [ $i -le 24 ]; do
	head -c $((1000000 + i * 37000)) /dev/urandom >"$T/src/f$i"
	i=$((i + 1))
done
mkfs.ext4 -q -F -d "$T/src" "$T/a.img" 64M >/dev/null 2>&1 || skip_all "mkfs.ext4 -d failed"
"$IMAGEKEY" -q generate -o "$T/k" >/dev/null 2>&1
"$IMAGEZIP" -q --sign "$T/k.sec" "$T/a.img" "$T/A.ndz"
check "imagezip wrote a signed index beside the image" \
	"$IMAGEKEY" -q verify --target "$T/a.img" -k "$T/k.pub" "$T/A.ndz"
"$IMAGEKEY" -q index -k "$T/k.sec" -x "$T/A2.index" "$T/A.ndz"
check "imagekey index gives the same bytes as imagezip" cmp -s "$T/A.ndz.index" "$T/A2.index"

# R: the full restore (with -z, so the free space is zero); D: R changed by debugfs:
# two files removed, one rewritten, two added (about 2% of the used bytes).
"$IMAGEUNZIP" -q -z "$T/A.ndz" "$T/R"
cp "$T/R" "$T/D"
head -c 300000 /dev/urandom >"$T/new1"
head -c 200000 /dev/urandom >"$T/new2"
head -c 150000 /dev/urandom >"$T/new3"
printf 'rm f3\nrm f17\nrm f9\nwrite %s f9\nwrite %s n1\nwrite %s n2\n' \
	"$T/new3" "$T/new1" "$T/new2" >"$T/cmds"
debugfs -w -f "$T/cmds" "$T/D" >/dev/null 2>&1
check "the changed disk is clean" quiet e2fsck -fn "$T/D"
set -- $(chunks "$T/A.ndz" "$T/R" "$T/D" regions); want=$1 total=$2
set -- $(chunks "$T/A.ndz" "$T/R" "$T/D" span); want_z=$1
check "some chunks changed, not all ($want of $total; -z: $want_z)" \
	test "$want" -gt 0 -a "$want" -lt "$total" -a "$want_z" -lt "$total"

# The seeded reload: only the changed chunks read and written.
cp "$T/D" "$T/S"
"$IMAGEUNZIP" -v --seed -k "$T/k.pub" "$T/A.ndz" "$T/S" 2>"$T/log"
check "--seed: chunks read from the image = chunks changed ($(fetched "$T/log") = $want)" \
	test "$(fetched "$T/log")" = "$want"
set -- $(chunks "$T/A.ndz" "$T/R" "$T/S" regions)
check "--seed: byte-identical to the full restore over the allocated ranges" test "$1" = 0
check "--seed: e2fsck clean" quiet e2fsck -fn "$T/S"
cp "$T/D" "$T/S"
"$IMAGEUNZIP" -v -z --seed --verify "$T/A.ndz" "$T/S" 2>"$T/log"
check "--seed -z: chunks restored = chunks changed over their whole span ($want_z)" \
	test "$(fetched "$T/log")" = "$want_z"
check "--seed -z --verify: the whole disk identical to a full -z restore" cmp -s "$T/R" "$T/S"
cp "$T/D" "$T/S"
"$IMAGEUNZIP" -v --seed --index "$T/A.ndz.index" - "$T/S" <"$T/A.ndz" 2>"$T/log"
set -- $(chunks "$T/A.ndz" "$T/R" "$T/S" regions)
check "--seed from stdin: $(fetched "$T/log") written = $want, the rest identical" \
	test "$(fetched "$T/log")" = "$want" -a "$1" = 0

# Seed targets that hold something else: garbage, another filesystem, too short.
head -c $((64 * MIB)) /dev/urandom >"$T/G0"
cp "$T/G0" "$T/G"
"$IMAGEUNZIP" -v -z --seed "$T/A.ndz" "$T/G" 2>"$T/log"
check "--seed onto garbage: nothing held, identical" \
	sh -c "test '$(held "$T/log")' = 0 && cmp -s '$T/R' '$T/G'"
mkdir "$T/src2"; head -c 5000000 /dev/urandom >"$T/src2/other"
mkfs.ext4 -q -F -d "$T/src2" "$T/O" 64M >/dev/null 2>&1
"$IMAGEUNZIP" -q -z --seed "$T/A.ndz" "$T/O"
check "--seed onto another filesystem: identical" cmp -s "$T/R" "$T/O"
head -c $((20 * MIB)) "$T/R" >"$T/short"
"$IMAGEUNZIP" -q -z --seed "$T/A.ndz" "$T/short" 2>/dev/null
rc=$?
if [ $rc = 0 ]; then check "--seed onto a shorter file: identical" cmp -s "$T/R" "$T/short"
else check "--seed onto a shorter file: refused as without --seed" \
	sh -c "! '$IMAGEUNZIP' -q -z '$T/A.ndz' '$T/short' 2>/dev/null"; fi

# Trust: a tampered signed index, an unsigned one, with --key: never used to skip.
cp "$T/A.ndz.index" "$T/good.index"
python3 -c "
import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[64 + 24] ^= 1
open(sys.argv[1], 'wb').write(b)" "$T/A.ndz.index"
cp "$T/R" "$T/S"
"$IMAGEUNZIP" -v --seed -k "$T/k.pub" "$T/A.ndz" "$T/S" 2>"$T/log"
check "a tampered signed index with --key: refused, nothing skipped" \
	sh -c "grep -q 'content index signature' '$T/log' && test '$(held "$T/log")' = 0"
"$IMAGEKEY" -q index -x "$T/A.ndz.index" "$T/A.ndz"
"$IMAGEUNZIP" -v --seed -k "$T/k.pub" "$T/A.ndz" "$T/S" 2>"$T/log"
check "an unsigned index with --key: not used, nothing skipped" \
	sh -c "grep -q 'not signed' '$T/log' && test '$(held "$T/log")' = 0"
"$IMAGEUNZIP" -v --seed "$T/A.ndz" "$T/S" 2>"$T/log"
check "an unsigned index without --key: used" test "$(held "$T/log")" = "$total"
check "--verify with --key and an unsigned index: refused before writing" \
	sh -c "! '$IMAGEUNZIP' -q --verify -k '$T/k.pub' '$T/A.ndz' '$T/S' 2>/dev/null"
cp "$T/good.index" "$T/A.ndz.index"

# --verify and verify --target catch a byte changed on the target after the write.
cp "$T/R" "$T/V"
off=$(python3 -c "
import struct; h = open('$T/A.ndz', 'rb').read(4096)
s, c = struct.unpack_from('<QI', h, 128 + 12 * (struct.unpack_from('<I', h, 96)[0] - 1))
print(s * 512 + c * 256)")
printf 'Z' | dd of="$T/V" bs=1 seek="$off" conv=notrunc 2>/dev/null
"$IMAGEKEY" verify --target "$T/V" -k "$T/k.pub" "$T/A.ndz" 2>"$T/log"
check "imagekey verify --target: exit 1, chunk 0 named" \
	sh -c "test $? = 1 && grep -q '1 of $total chunks differ (the first: chunk 0)' '$T/log'"
"$IMAGEUNZIP" -v --seed --verify -k "$T/k.pub" "$T/A.ndz" "$T/V" 2>"$T/log"
check "--seed --verify on it: chunk 0 written again, verified" \
	sh -c "test $? = 0 && test '$(fetched "$T/log")' = 1 && cmp -s '$T/R' '$T/V'"
# An index that disagrees with what is written (its digest of chunk 1 changed, no key):
# the restore writes the image, --verify reads it back and says chunk 1 differs.
python3 -c "
import struct, sys; b = bytearray(open(sys.argv[1], 'rb').read())
nr = struct.unpack_from('<I', b, 64 + 16)[0]; b[64 + 56 + 12 * nr + 24] ^= 1
open(sys.argv[2], 'wb').write(b)" "$T/good.index" "$T/bad.index"
"$IMAGEUNZIP" --verify --index "$T/bad.index" "$T/A.ndz" "$T/V" 2>"$T/log"
check "--verify: exit 1 naming the chunk that differs" \
	sh -c "test $? = 1 && grep -q 'the first: chunk 1)' '$T/log'"

# --verify catches a byte changed on the target after the write, before the read-back:
# imageunzip reads the image from a FIFO the test holds open, so once every chunk is
# on the target it waits for the end of its input (no timing); the byte is changed
# then, in chunk 2's last region, and the input released. Without the change: exit 0.
off2=$(python3 -c "
import struct; f = open('$T/A.ndz', 'rb'); f.seek(2 * 1048576); h = f.read(4096)
s, c = struct.unpack_from('<QI', h, 128 + 12 * (struct.unpack_from('<I', h, 96)[0] - 1))
print(s * 512 + c * 256)")
for change in no yes; do
	rm -f "$T/W" "$T/fifo"
	mkfifo "$T/fifo"
	"$IMAGEUNZIP" -z --verify --index "$T/A.ndz.index" - "$T/W" <"$T/fifo" 2>"$T/log" &
	pid=$!
	exec 3>"$T/fifo"
	cat "$T/A.ndz" >&3
	wait_until 60 cmp -s "$T/R" "$T/W" || not_ok "--verify: every chunk written ($change)"
	[ $change = yes ] && printf 'Z' | dd of="$T/W" bs=1 seek="$off2" conv=notrunc 2>/dev/null
	exec 3>&-
	wait $pid
	rc=$?
	if [ $change = no ]; then
		check "--verify, the target untouched: exit 0 (exit $rc)" test "$rc" = 0
	else
		check "--verify, a byte changed after the write: exit 1 naming chunk 2 (exit $rc)" \
			sh -c "test $rc = 1 && grep -q 'does not hold the image: 1 of $total chunks differ (the first: chunk 2)' '$T/log'"
	fi
done
rm -f "$T/W" "$T/fifo"

# Resume: a restore killed part-way (after a random number of chunks came in on its
# standard input), onto a disk of garbage, run again from the file with --seed: it reads exactly the chunks
# the target does not hold yet, counted beforehand, and the result is identical.
for seed in 1 2 3; do
	cp "$T/G0" "$T/K"
	n=$(( (seed * 7919 + $$) % (total - 2) + 1 ))
	rm -f "$T/fifo"; mkfifo "$T/fifo"
	"$IMAGEUNZIP" -q -z - "$T/K" <"$T/fifo" &
	pid=$!
	exec 3>"$T/fifo"
	dd if="$T/A.ndz" bs=1048576 count=$n 2>/dev/null >&3
	sleep 0.5
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	exec 3>&-
	set -- $(chunks "$T/A.ndz" "$T/R" "$T/K" span); missing=$1
	"$IMAGEUNZIP" -v -z --seed "$T/A.ndz" "$T/K" 2>"$T/log"
	check "resume $seed: killed after $n of $total chunks, rerun reads the $missing missing" \
		sh -c "test '$(fetched "$T/log")' = $missing -a $missing -ge $((total - n)) &&
		       cmp -s '$T/R' '$T/K'"
done
done_testing
