#!/bin/sh
# Multicast seeded reloads at the grain of a piece (issue 32): frisbee --seed asks for,
# and the server sends, only the blocks of the pieces a target lacks (and the chunk's
# header), and frisbee patches exactly those pieces. A real ext4 imaged here, restored
# to client targets, each changed at random places through a loop mount and through
# debugfs; which pieces changed, and so which blocks each client needs, is worked out
# here from the index's bytes as doc/FORMAT.md lays them out and the disks' bytes
# (wanted.py, nothing of ndz). One client: the blocks it received, the blocks the server
# sent and the pieces written are exactly those; four clients with different changes:
# the server sent exactly the union; a tampered signed index under --key (a full
# reload); a reload killed and resumed fetches exactly what the killed run left.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
. "$NDZ_TOP/tests/seedfs.sh"
IMAGEKEY="$NDZ_BIN/imagekey"
[ -x "$IMAGEZIP" ] && [ -x "$IMAGEKEY" ] || skip_all "imagezip or imagekey not built"
seedfs_lan

mc_chunks_py
diffchunks() { python3 "$T/chunks.py" "$T/fs.ndz.index" "$1" "$2"; }
# same TARGET: it holds the image over the allocated ranges, and e2fsck finds it clean
same() { [ -z "$(diffchunks "$T/pristine" "$1")" ] && e2fsck -fn "$1" >/dev/null 2>&1; }
good() { [ "$(mc_rc "$1")" = 0 ] && same "$2"; }
cat >"$T/wanted.py" <<'PY'
# wanted.py INDEX BASE TARGET...: for each TARGET (a disk that held BASE's image and was
# changed), what a seeded reload must fetch, worked out from the index's bytes as
# doc/FORMAT.md lays them out and the two disks' bytes (tests/tools/ndzindex.py): a
# chunk none of whose pieces differ is held; one whose pieces all differ (or that has
# fewer than 2) is fetched whole (1024 blocks); else its header's blocks and those of
# the differing pieces' frames. One line per target:
#   "written PIECES partial CHUNKS pblocks BLOCKS whole CHUNKS blocks TOTAL"
# then "union BLOCKS": the (chunk, block) pairs some target needs.
import os, sys
sys.path.insert(0, os.environ['NDZ_TOP'] + '/tests/tools')
import ndzindex
ix = ndzindex.read(sys.argv[1])
base = os.open(sys.argv[2], os.O_RDONLY)
union = set()
for t in sys.argv[3:]:
    T = os.open(t, os.O_RDONLY)
    written, partial, pblocks, whole, need = ndzindex.plan(ix, range(len(ix.entries)), base, T)
    union |= need
    print('written', written, 'partial', partial, 'pblocks', pblocks, 'whole', whole,
          'blocks', pblocks + 1024 * whole)
print('union', len(union))
PY
# wanted TARGET...: wanted.py's lines against the pristine restore
wanted() { python3 "$T/wanted.py" "$T/fs.ndz.index" "$T/pristine" "$@"; }
# field LINE NAME: the number after NAME in LINE
field() { echo "$1" | sed -n "s/.*\<$2 \([0-9]*\).*/\1/p"; }
# patched LOG: "chunks pieces blocks" the result line says were patched in part
patched() {
	_p=$(sed -n 's/.*, \([0-9]*\) patched (\([0-9]*\) pieces written, \([0-9]*\) blocks asked for them).*/\1 \2 \3/p' "$1" | tail -1)
	echo "${_p:-none none none}"
}
# got LOG: blocks received and rebuilt from repairs, together
got() {
	sed -n 's/.*), \([0-9]*\) blocks received, [0-9]* repairs (\([0-9]*\) blocks rebuilt).*/\1 \2/p' "$1" |
		tail -1 | awk '{ print $1 + $2 }'
}

# The file system: 128 MiB, about 70 MiB of files (random and text), through a mount.
seedfs_make "$T/fs.img" 128 4 1500 400 1200000 "seed pieces" && [ -n "$(debugfs -R 'ls /d4' "$T/fs.img" 2>/dev/null | grep r6)" ] ||
	{ not_ok "make and fill ext4"; done_testing; }
"$IMAGEKEY" -q generate -o "$T/k" || not_ok "imagekey generate"
"$IMAGEZIP" -q "$T/fs.img" "$T/fs.ndz" && [ -s "$T/fs.ndz.index" ] ||
	{ not_ok "imagezip writes the image and its index"; done_testing; }
NCH=$(python3 -c "import struct,sys; print(struct.unpack_from('<I', open(sys.argv[1],'rb').read(), 40)[0])" "$T/fs.ndz.index")
# the index is served after the image's chunks (doc/PROTOCOL.md): the blocks it fills
IXB=$(( ($(stat -c %s "$T/fs.ndz.index") + 1023) / 1024 ))
"$IMAGEUNZIP" -q "$T/fs.ndz" "$T/pristine" || not_ok "full restore"
check "the pristine restore is clean and the image ($NCH chunks)" same "$T/pristine"

# change TARGET N: random places, N-seeded: through a loop mount a few blocks rewritten
# in a file's middle (for N >= 3 also the first 1.2 MiB of another, so some chunks
# differ in every piece), a small file added, one removed; then debugfs rewrites a
# block of another file in place (zap_block) and sets an inode's time
cat >"$T/change.sh" <<'EOF'
n=$1 r=$2
f=$(( n % 6 + 1 )); g=$(( (n + 2) % 6 + 1 ))
dd if=/dev/urandom of="$MNT/d$n/r$f" bs=4096 seek=$(( (n * 37 + r) % 300 )) count=2 \
	conv=notrunc 2>/dev/null || exit 1
head -c $(( 30000 + (n * 7919 + r) % 60000 )) /dev/urandom >"$MNT/d$n/new$n" || exit 1
if [ "$n" -ge 3 ]; then
	dd if=/dev/urandom of="$MNT/d$n/r$g" bs=4096 count=$(( 300 + n * 20 )) conv=notrunc \
		2>/dev/null || exit 1
fi
rm "$MNT/d$(( n % 4 + 1 ))/t$g"
EOF
change() {
	in_mnt "$1" "$T/change.sh" "$2" $$ || return 1
	f=$(( $2 % 6 + 1 )); h=$(( ($2 + 4) % 6 + 1 ))
	debugfs -w -R "zap_block -f /d$(( ($2 + 1) % 4 + 1 ))/r$h -p $(( ($2 * 17 + $$) % 250 + 1 )) $(( ($2 * 13 + $$) % 300 ))" \
		"$1" >/dev/null 2>&1 &&
	debugfs -w -R "set_inode_field /d$2/t$f mtime 20250101" "$1" >/dev/null 2>&1
}
for i in 1 2 3 4; do
	cp "$T/pristine" "$T/t$i" && change "$T/t$i" "$i" || not_ok "change target $i"
done
cp "$T/t1" "$T/solo"
wanted "$T/t1" "$T/t2" "$T/t3" "$T/t4" >"$T/want"
for i in 1 2 3 4; do sed -n "${i}p" "$T/want" >"$T/want$i"; done
UNION=$(field "$(tail -1 "$T/want")" union)
echo "# wanted (pieces written, chunks patched, their blocks, chunks whole, blocks):"
sed 's/^/#   /' "$T/want"
w1=$(cat "$T/want1")
check "the changes leave client 1 some chunks to patch by pieces ($(field "$w1" partial))" \
	[ "$(field "$w1" partial)" -gt 0 ]

# 1. one client: exactly the blocks of the pieces it lacks received and sent, exactly
# those pieces written
mc_server srv "$T/fs.ndz" -W "$MC_RATE" -T 20 --stats-json "$T/stats1.json"
mc_client c1 "$T/solo" --seed --verify -T 10
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
check "one client: exit 0, the image again (verified), e2fsck clean" good c1 "$T/solo"
set -- $(patched "$T/c1.log")
check "one client: $(field "$w1" partial) chunks patched ($1), exactly the $(field "$w1" written) changed pieces written ($2)" \
	[ "$1" = "$(field "$w1" partial)" ] && [ "$2" = "$(field "$w1" written)" ]
check "one client: it asked for exactly their frames' and headers' blocks ($3 = $(field "$w1" pblocks))" \
	[ "$3" = "$(field "$w1" pblocks)" ]
check "one client: received exactly those and $(field "$w1" whole) whole chunks ($(got "$T/c1.log") = $(field "$w1" blocks))" \
	[ "$(got "$T/c1.log")" = "$(field "$w1" blocks)" ]
d=$(json_num "$T/stats1.json" distinct_blocks)
check "one client: the server sent exactly those blocks and the index's ($d = $(field "$w1" blocks) + $IXB)" \
	[ "$d" = $(( $(field "$w1" blocks) + IXB )) ]
: >"$T/c1.log"

# 2. four clients at once, each with its own changes: each patched exactly its pieces,
# the server sent exactly the union of the blocks they need
mc_server srv "$T/fs.ndz" -W "$MC_RATE" -T 20 --stats-json "$T/stats4.json"
for i in 1 2 3 4; do mc_client "c$i" "$T/t$i" --seed -T 10; done
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
ok=0 exact=0
for i in 1 2 3 4; do
	good "c$i" "$T/t$i" && ok=$((ok + 1))
	set -- $(patched "$T/c$i.log")
	w=$(cat "$T/want$i")
	[ "$2" = "$(field "$w" written)" ] && [ "$1" = "$(field "$w" partial)" ] && exact=$((exact + 1))
done
check "four clients: all exit 0 with the image again, e2fsck clean ($ok good)" [ "$ok" = 4 ]
check "four clients: each wrote exactly its changed pieces ($exact of 4)" [ "$exact" = 4 ]
d=$(json_num "$T/stats4.json" distinct_blocks)
sent=$(json_num "$T/stats4.json" blocks_sent)
echo "# four clients: the server sent $sent blocks, $d distinct; the union they need: $UNION and $IXB of the index"
check "four clients: the server sent exactly the union of the blocks they need ($d = $UNION + $IXB)" \
	[ "$d" = $(( UNION + IXB )) ]
g=$(json_num "$T/stats4.json" gathers)
check "four clients: the server held its first sending for their requests (--gather: $g holds)" \
	[ "${g:-0}" -ge 1 ]
for i in 1 2 3 4; do : >"$T/c$i.log"; done

# 3. --key: a signed image; its index with one piece digest changed is refused (its
# signature): nothing skipped or patched, a full reload, correct
mkdir "$T/signed"
"$IMAGEZIP" -q --sign "$T/k.sec" "$T/fs.img" "$T/signed/fs.ndz" || not_ok "signed image"
python3 -c "
import sys; b = bytearray(open(sys.argv[1], 'rb').read()); b[-64 - 64 + 40] ^= 1
open(sys.argv[1], 'wb').write(b)" "$T/signed/fs.ndz.index"
cp "$T/pristine" "$T/t2" && change "$T/t2" 2 || not_ok "change target"
mc_server srv "$T/signed/fs.ndz" -W "$MC_RATE" -T 20
mc_client c2 "$T/t2" --seed --key "$T/k.pub" -T 10
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
set -- $(patched "$T/c2.log")
check "--key, tampered index: correct result" good c2 "$T/t2"
check "--key, tampered index: refused with a warning, nothing patched ($1) or skipped" \
	sh -c "grep -q 'content index' '$T/c2.log' && [ '$1' = 0 ] &&
	       grep -q '; 0 chunks skipped' '$T/c2.log'"

# 4. a reload killed mid-way, started again with --seed: it fetches exactly what the
# killed run left lacking (worked out after the kill) and patches exactly those pieces;
# the target: client 3's changes, every other chunk's first piece garbage, and every
# fourth chunk all garbage (fetched whole)
cp "$T/t3" "$T/t5" && python3 - "$T/fs.ndz.index" "$T/t5" <<'PY' || not_ok "garbage"
import os, struct, sys
d = open(sys.argv[1], 'rb').read()
n = struct.unpack_from('<I', d, 40)[0]
at, t = 64, open(sys.argv[2], 'r+b')
for i in range(n):
    first, last, nr = struct.unpack_from('<QQI', d, at)
    s0 = struct.unpack_from('<Q', d, at + 56)[0] if nr else 0
    if i % 4 == 1:
        for j in range(nr):
            s, c = struct.unpack_from('<QI', d, at + 56 + 12 * j)
            t.seek(s * 512); t.write(os.urandom(c * 512))
    elif i % 2 and nr:
        t.seek(s0 * 512); t.write(os.urandom(4096))
    at += 56 + 12 * nr
PY
echo "# before: $(wanted "$T/t5" >"$T/w5" && head -1 "$T/w5")"
mc_server srv "$T/fs.ndz" -W 20M -T 20
mc_client c4 "$T/t5" -T 10
sleep 4
# shellcheck disable=SC2046
kill -KILL $(ip netns pids "${NETNS_PFX}c4") 2>/dev/null
mc_wait
w=$(wanted "$T/t5" >"$T/w5" && head -1 "$T/w5")
: >"$T/c4.log"
mc_client c4 "$T/t5" --seed -T 10
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
set -- $(patched "$T/c4.log")
check "killed and resumed: exit 0, the image, e2fsck clean" good c4 "$T/t5"
check "killed and resumed: the killed run left chunks lacking ($(field "$w" whole) whole, $(field "$w" partial) in part)" \
	[ "$(field "$w" whole)" -gt 0 ] && [ "$(field "$w" partial)" -gt 0 ]
check "killed and resumed: exactly the $(field "$w" blocks) blocks lacking fetched ($(got "$T/c4.log")), the $(field "$w" written) pieces written ($2)" \
	[ "$(got "$T/c4.log")" = "$(field "$w" blocks)" ] && [ "$2" = "$(field "$w" written)" ]
done_testing
