#!/bin/sh
# Reloading at the grain of a piece (issue 32, doc/FORMAT.md "Pieces"): a disk with an
# MBR partition holding a real ext4 (mkfs.ext4 at an offset), changed at random places
# through a loop mount at that offset and through debugfs; imageunzip --seed from the
# image file must read and write exactly the pieces whose bytes changed. Which pieces
# changed is worked out here, from the content index's bytes as FORMAT.md lays them
# out and the two disks, with nothing of ndz.
# Our loop mounts in a mount namespace of our own: one another program makes meanwhile
# ("ip netns exec") would copy them and keep the file systems mounted after we unmount.
[ -n "${NDZ_OWN_MNT_NS:-}" ] || exec env NDZ_OWN_MNT_NS=1 unshare -m --propagation private sh "$0" "$@"
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
need mkfs.ext4 e2fsck debugfs sfdisk python3 cmp mount
IMAGEKEY="$NDZ_BIN/imagekey"
OFF=1048576

# pieces.py INDEX A B: "pieces chunks clen total" - of the index's pieces, how many
# have bytes (where they go on disk, clipped to the source size) that differ between
# disks A and B, in how many chunks, the sum of their compressed lengths, and the
# number of pieces in those chunks.
cat >"$T/pieces.py" <<'PY'
import os, sys
sys.path.insert(0, os.environ['NDZ_TOP'] + '/tests/tools')
import ndzindex
ix = ndzindex.read(sys.argv[1])
assert ix.version == 2
A, B = os.open(sys.argv[2], os.O_RDONLY), os.open(sys.argv[3], os.O_RDONLY)
changed, chunks, clen, total = 0, 0, 0, 0
for c in range(len(ix.entries)):
    diff = ndzindex.lacking(ix, c, A, B)
    if diff:
        changed += len(diff); chunks += 1; clen += sum(cl for _, cl in diff)
        total += len(ix.pieces[c])
print(changed, chunks, clen, total)
PY
# summary LOGFILE: "held restored patched written pieces bytes" of imageunzip -v
# (six "none" when there is no summary: the run failed, and every check on it fails)
summary() {
	_s=$(sed -n 's/.*(\([0-9]*\) held by the target, \([0-9]*\) restored, \([0-9]*\) patched: \([0-9]*\) of \([0-9]*\) pieces written, \([0-9]*\) bytes of them read).*/\1 \2 \3 \4 \5 \6/p' "$1")
	echo "${_s:-none none none none none none}"
}

truncate -s 80M "$T/disk"
printf 'label: dos\nstart=2048, type=83\n' | sfdisk -q "$T/disk" || skip_all "sfdisk failed"
mkfs.ext4 -q -F -E offset=$OFF "$T/disk" 65536 >/dev/null 2>&1 || skip_all "mkfs.ext4 failed"
MNT="$T/mnt"; mkdir "$MNT"
mount -o loop,offset=$OFF "$T/disk" "$MNT" || skip_all "cannot loop-mount"
at_exit "umount '$MNT' 2>/dev/null"
i=1; while [ $i -le 8 ]; do
	head -c $((2000000 + i * 91000)) /dev/urandom >"$MNT/r$i"
	find /usr/share/doc -type f 2>/dev/null | head -300 | xargs cat 2>/dev/null |
		head -c 1500000 >"$MNT/t$i"
	i=$((i + 1))
done
umount "$MNT"
"$IMAGEKEY" -q generate -o "$T/k" >/dev/null 2>&1
"$IMAGEZIP" -q --sign "$T/k.sec" "$T/disk" "$T/A.ndz" ||
	{ not_ok "imagezip"; done_testing; }
check "the index lists pieces (version 2)" \
	python3 -c "import struct,sys; sys.exit(struct.unpack_from('<H', open('$T/A.ndz.index','rb').read(), 8)[0] != 2)"
"$IMAGEUNZIP" -q "$T/A.ndz" "$T/R"

# change COPY N: random places, N-seeded: a file's blocks rewritten in its middle
# through the mount, one file added, one removed; then debugfs zaps a block of another
change() {
	mount -o loop,offset=$OFF "$1" "$MNT" || return 1
	f=$(( $2 % 8 + 1 )); g=$(( ($2 + 3) % 8 + 1 )); h=$(( ($2 + 5) % 8 + 1 ))
	dd if=/dev/urandom of="$MNT/r$f" bs=4096 seek=$(( ($2 * 37) % 400 )) count=3 \
		conv=notrunc 2>/dev/null
	head -c $(( 50000 + $2 * 20000 )) /dev/urandom >"$MNT/new$2"
	rm -f "$MNT/t$g"
	umount "$MNT" || return 1
	debugfs -w -R "zap_block -f /r$h -p $(( $2 * 17 % 250 + 1 )) $(( $2 * 13 % 300 ))" \
		"$1?offset=$OFF" >/dev/null 2>&1
}

for n in 1 2 3; do
	cp "$T/R" "$T/D$n"
	change "$T/D$n" "$n" || { not_ok "change $n"; continue; }
	set -- $(python3 "$T/pieces.py" "$T/A.ndz.index" "$T/R" "$T/D$n")
	want=$1 wchunks=$2 wclen=$3 wpieces=$4
	cp "$T/D$n" "$T/S"
	"$IMAGEUNZIP" -v --seed -k "$T/k.pub" "$T/A.ndz" "$T/S" 2>"$T/log"
	rc=$?
	set -- $(summary "$T/log")
	check "change $n: exit 0, the image on the target, e2fsck clean" \
		sh -c "test $rc = 0 && '$IMAGEKEY' -q verify --target '$T/S' -k '$T/k.pub' '$T/A.ndz' &&
		       e2fsck -fn '$T/S?offset=$OFF' >/dev/null 2>&1"
	check "change $n: exactly the $want changed pieces written ($4), in $wchunks chunks ($3), none whole ($2)" \
		test "$4" = "$want" -a "$3" = "$wchunks" -a "$2" = 0 -a "$want" -gt 0
	check "change $n: bytes read = their frames + a header each ($6 = $wclen + $wchunks x 4096)" \
		test "$6" = $(( wclen + wchunks * 4096 ))
	check "change $n: pieces of those chunks counted ($5 = $wpieces)" test "$5" = "$wpieces"
done

# From standard input: every chunk read, the same pieces written.
cp "$T/D1" "$T/S"
set -- $(python3 "$T/pieces.py" "$T/A.ndz.index" "$T/R" "$T/S"); want=$1
"$IMAGEUNZIP" -v --seed --index "$T/A.ndz.index" - "$T/S" <"$T/A.ndz" 2>"$T/log"
set -- $(summary "$T/log")
check "from standard input: the $want changed pieces written ($4), the image on it" \
	sh -c "test '$4' = '$want' -a '$2' = 0 && '$IMAGEKEY' -q verify --target '$T/S' '$T/A.ndz'"

# Seed disks that hold something else: garbage, another filesystem, a shorter file.
head -c $((80 * 1048576)) /dev/urandom >"$T/G"
total=$(python3 -c "import struct; print(struct.unpack_from('<I', open('$T/A.ndz.index','rb').read(), 40)[0])")
"$IMAGEUNZIP" -v --seed "$T/A.ndz" "$T/G" 2>"$T/log"
set -- $(summary "$T/log")
check "garbage: every chunk restored whole ($2 of $total), none patched ($3), the image on it" \
	sh -c "test '$2' = '$total' -a '$3' = 0 && '$IMAGEKEY' -q verify --target '$T/G' '$T/A.ndz'"
truncate -s 80M "$T/O"
printf 'label: dos\nstart=2048, type=83\n' | sfdisk -q "$T/O"
mkfs.ext4 -q -F -E offset=$OFF "$T/O" 65536 >/dev/null 2>&1
mount -o loop,offset=$OFF "$T/O" "$MNT" && head -c 9000000 /dev/urandom >"$MNT/other" &&
	umount "$MNT"
"$IMAGEUNZIP" -v --seed "$T/A.ndz" "$T/O" 2>"$T/log"
set -- $(summary "$T/log")
check "another filesystem: the image on it, some pieces held ($4 of $5 written)" \
	sh -c "'$IMAGEKEY' -q verify --target '$T/O' '$T/A.ndz' && e2fsck -fn '$T/O?offset=$OFF' >/dev/null 2>&1"
head -c $((30 * 1048576)) "$T/R" >"$T/short"
"$IMAGEUNZIP" -q --seed "$T/A.ndz" "$T/short" 2>"$T/log"
check "a shorter file: refused, as without --seed" \
	sh -c "test $? != 0 && grep -q 'too small' '$T/log'"

# A signed index with one piece digest changed, under --key: refused, nothing patched.
cp "$T/A.ndz.index" "$T/good"
python3 -c "
import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[-64 - 64 + 40] ^= 1
open(sys.argv[1], 'wb').write(b)" "$T/A.ndz.index"
cp "$T/D1" "$T/S"
"$IMAGEUNZIP" -v --seed -k "$T/k.pub" "$T/A.ndz" "$T/S" 2>"$T/log"
set -- $(summary "$T/log")
check "a tampered signed index under --key: refused, every chunk restored whole" \
	sh -c "grep -q 'content index signature' '$T/log' && test '$3' = 0 -a '$1' = 0 &&
	       '$IMAGEKEY' -q verify --target '$T/S' -x '$T/good' '$T/A.ndz'"
# The same without --key, onto the image (so the chunk is patched, not restored whole):
# the piece whose digest is wrong cannot match what is decoded.
cp "$T/R" "$T/S2"
"$IMAGEUNZIP" -q --seed "$T/A.ndz" "$T/S2" 2>"$T/log"
check "a wrong piece digest without --key: exit 1, the piece named" \
	sh -c "test $? = 1 && grep -q 'does not match the content index' '$T/log'"
cp "$T/good" "$T/A.ndz.index"

# Killed part-way (a restore fed n chunks on its standard input, then killed), onto
# garbage, then run again with --seed from the file: it fetches exactly the chunks
# still lacking, counted beforehand (onto garbage, whole), and the image is on it.
for s in 1 2; do
	head -c $((80 * 1048576)) /dev/urandom >"$T/K"
	n=$(( (s * 7919 + $$) % (total - 2) + 1 ))
	rm -f "$T/fifo"; mkfifo "$T/fifo"
	"$IMAGEUNZIP" -q - "$T/K" <"$T/fifo" &
	pid=$!
	exec 3>"$T/fifo"
	dd if="$T/A.ndz" bs=1048576 count=$n 2>/dev/null >&3
	sleep 0.5
	kill -9 $pid 2>/dev/null
	wait $pid 2>/dev/null
	exec 3>&-
	set -- $(python3 "$T/pieces.py" "$T/A.ndz.index" "$T/R" "$T/K"); left=$2
	"$IMAGEUNZIP" -v --seed "$T/A.ndz" "$T/K" 2>"$T/log"
	set -- $(summary "$T/log")
	check "killed after $n of $total chunks, rerun: the $left chunks lacking fetched ($2 + $3), the image on it" \
		sh -c "test '$2' != none && test \$(($2 + $3)) = '$left' -a '$left' -lt '$total' -a '$left' -gt 0 &&
		       '$IMAGEKEY' -q verify --target '$T/K' '$T/A.ndz'"
done
rm -f "$T/fifo"
done_testing
