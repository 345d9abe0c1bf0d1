#!/bin/sh
# Multicast: seeded reloads (frisbee --seed, issue 23). An ext4 file system made here,
# imaged, restored to client targets, each then changed differently through a loop
# mount; reloaded with --seed: every target holds the image again over its allocated
# ranges (compared byte by byte with the pristine restore, chunk region by region, by a
# reader of the index of our own), e2fsck is clean, and the server sent only chunks
# some client lacked. Also: a server without an index (a full reload), a signed index
# tampered with under --key (nothing skipped), and a reload killed and resumed.
# Our loop mounts in a mount namespace of our own: one another test makes meanwhile
# ("ip netns exec") would copy them and keep the file systems mounted after we unmount.
[ -n "${NDZ_OWN_MNT_NS:-}" ] || exec env NDZ_OWN_MNT_NS=1 unshare -m --propagation private sh "$0" "$@"
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
IMAGEKEY="$NDZ_BIN/imagekey"
[ -x "$IMAGEZIP" ] && [ -x "$IMAGEKEY" ] || skip_all "imagezip or imagekey not built"
command -v mkfs.ext4 >/dev/null && command -v e2fsck >/dev/null &&
	command -v python3 >/dev/null || skip_all "mkfs.ext4, e2fsck or python3 missing"
netns_usable || skip_all "network namespaces, veth, bridge or nft unavailable (needs root)"
netns_lan && netns_host srv 1 || { not_ok "namespace LAN"; done_testing; }
for i in 1 2 3 4; do netns_host "c$i" $((10 + i)) || not_ok "host c$i"; done
MNT="$T/mnt"
mkdir -p "$MNT"
at_exit "umount -l '$MNT' 2>/dev/null"

# chunks.py INDEX A B (tests/netns.sh)
mc_chunks_py
diffchunks() { python3 "$T/chunks.py" "$T/fs.ndz.index" "$1" "$2"; }
# same TARGET: it holds the image over the allocated ranges, and e2fsck finds it clean
same() { [ -z "$(diffchunks "$T/pristine" "$1")" ] && e2fsck -fn "$1" >/dev/null 2>&1; }
# good CLIENT TARGET: the client exited 0 and its target is the image again
good() { [ "$(mc_rc "$1")" = 0 ] && same "$2"; }
# skipped LOG: the chunks the result line says were held by the target
skipped() { sed -n 's/.*; \([0-9]*\) chunks skipped (held by the target).*/\1/p' "$1" | tail -1; }
# received LOG: the blocks the result line says were received
received() { sed -n 's/.*), \([0-9]*\) blocks received.*/\1/p' "$1" | tail -1; }

# The file system: 64 MiB, about 28 MiB of files (random and text), written through a
# loop mount.
truncate -s 64M "$T/fs.img" && mkfs.ext4 -q -F -b 4096 "$T/fs.img" &&
	mount -o loop "$T/fs.img" "$MNT" || { not_ok "make and mount ext4"; done_testing; }
for d in 1 2 3 4; do
	mkdir "$MNT/d$d"
	for f in 1 2 3 4 5; do
		head -c $(( (f * 97 + d * 31) % 400 * 1024 + 1000 * 1024 )) /dev/urandom \
			>"$MNT/d$d/r$f"
		yes "seed test $d $f" | head -c 200000 >"$MNT/d$d/t$f"
	done
done
umount "$MNT"
"$IMAGEKEY" -q generate -o "$T/k" || not_ok "imagekey generate"
"$IMAGEZIP" -q "$T/fs.img" "$T/fs.ndz" && [ -s "$T/fs.ndz.index" ] ||
	{ not_ok "imagezip writes the image and its index"; done_testing; }
NCH=$(python3 -c "import struct,sys; print(struct.unpack_from('<I', open(sys.argv[1],'rb').read(), 40)[0])" "$T/fs.ndz.index")
"$IMAGEUNZIP" -q "$T/fs.ndz" "$T/pristine" || not_ok "full restore"
check "the pristine restore is clean and the image ($NCH chunks)" same "$T/pristine"

# change TARGET N: through a loop mount, about 2% of the used bytes: a file's middle
# rewritten, a file added, one deleted, each client its own
change() {
	mount -o loop "$1" "$MNT" || return 1
	dd if=/dev/urandom of="$MNT/d$2/r$2" bs=4096 seek=20 count=48 conv=notrunc 2>/dev/null
	head -c 120000 /dev/urandom >"$MNT/d$2/new$2"
	rm -f "$MNT/d$(( $2 % 4 + 1 ))/t$2"
	umount "$MNT"
}
for i in 1 2 3 4; do
	cp "$T/pristine" "$T/t$i" && change "$T/t$i" "$i" || not_ok "change target $i"
	diffchunks "$T/pristine" "$T/t$i" >"$T/changed$i"
done
cp "$T/t1" "$T/solo"
sort -un "$T"/changed? >"$T/union"
U=$(wc -l <"$T/union")
IX=$(( ($(stat -c %s "$T/fs.ndz.index") + 1048575) / 1048576 ))
check "each target differs from the image in a few chunks ($(wc -l <"$T/changed1") \
$(wc -l <"$T/changed2") $(wc -l <"$T/changed3") $(wc -l <"$T/changed4"); $U together)" \
	[ -s "$T/changed1" ] && [ -s "$T/changed4" ] && [ "$U" -lt "$NCH" ]

# 1. one client: it fetches exactly the chunks that changed, and --verify reads all back
mc_server srv "$T/fs.ndz" -W "$MC_RATE" -T 20
mc_client c1 "$T/solo" --seed --verify -v -T 10
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
n=$(wc -l <"$T/changed1")
check "one client --seed: exit 0, the image again, e2fsck clean" good c1 "$T/solo"
check "one client --seed: skipped $(skipped "$T/c1.log") of $NCH chunks, fetched the $n changed" \
	[ "$(skipped "$T/c1.log")" = $((NCH - n)) ]
check "one client --verify: every chunk read back and checked" \
	grep -q "verified: .* holds every chunk of the image" "$T/c1.log"
: >"$T/c1.log"

# 2. four clients at once, each with its own changes
mc_server srv "$T/fs.ndz" -W "$MC_RATE" -T 20 --stats-json "$T/stats4.json"
for i in 1 2 3 4; do mc_client "c$i" "$T/t$i" --seed -T 10; done
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
good=0
for i in 1 2 3 4; do good "c$i" "$T/t$i" && good=$((good + 1)); done
check "four clients --seed: all exit 0 with the image again, e2fsck clean ($good good)" \
	[ "$good" = 4 ]
distinct=$(json_num "$T/stats4.json" distinct_blocks)
sent=$(json_num "$T/stats4.json" blocks_sent)
bytes=$(json_num "$T/stats4.json" bytes_sent)
echo "# four clients: server sent $bytes bytes ($sent blocks, $distinct distinct); the" \
	"chunks they lack together: $U of $NCH, and $IX of the index"
check "four clients: the server sent only chunks some client lacked ($distinct distinct blocks, at most $(( (U + IX) * 1024 )))" \
	[ "$distinct" -le $(( (U + IX) * 1024 )) ]
# (repeats are the protocol's answer to loss; on a loaded host they grow: a generous
# bound here, the ratio in bench/seed.sh)
check "four clients: and not all of it many times ($sent blocks sent, at most $(( (U + IX) * 3072 )))" \
	[ "$sent" -le $(( (U + IX) * 3072 )) ]
check "four clients: a full send would break the first bound ($NCH chunks > $U + $IX)" \
	[ "$NCH" -gt $(( U + IX )) ]
for i in 1 2 3 4; do : >"$T/c$i.log"; done

# 3. a server without an index (an older frisbeed, or none beside the image): a full
# reload, after a short wait for the index
ln "$T/fs.ndz" "$T/noindex.ndz"
cp "$T/pristine" "$T/t1" && change "$T/t1" 2 || not_ok "change target"
mc_server srv "$T/noindex.ndz" -W "$MC_RATE" -T 20
mc_client c1 "$T/t1" --seed -T 10
mc_client c2 "$T/noverify" --verify -T 10
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
check "no index served: a full reload, correct" good c1 "$T/t1"
check "no index served: --verify cannot check, and says so (exit $(mc_rc c2))" \
	sh -c "[ \"$(mc_rc c2)\" = 1 ] && grep -q 'verify: no content index' '$T/c2.log'"
check "no index served: nothing skipped, the client said why" \
	sh -c "[ \"$(skipped "$T/c1.log")\" = 0 ] && grep -q 'serves no content index' '$T/c1.log'"

# 4. --key: a signed index is used; one tampered with (a digest changed, so that a
# chunk the target lacks would look held) is refused: nothing skipped, correct result
mkdir "$T/signed"
"$IMAGEZIP" -q --sign "$T/k.sec" "$T/fs.img" "$T/signed/fs.ndz" || not_ok "signed image"
cp "$T/signed/fs.ndz.index" "$T/signed.index"
mc_server srv "$T/signed/fs.ndz" -W "$MC_RATE" -T 20
cp "$T/pristine" "$T/t2" && change "$T/t2" 3 || not_ok "change target"
mc_client c2 "$T/t2" --seed --key "$T/k.pub" -T 10
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
check "--key, signed index: correct" good c2 "$T/t2"
check "--key, signed index: chunks skipped ($(skipped "$T/c2.log"))" \
	[ "$(skipped "$T/c2.log")" -gt 0 ]
# the digest of a chunk the change touched becomes that of the target's bytes there:
# a forger's claim that the changed disk holds it
cat >"$T/tamper.py" <<'EOF'
import hashlib, struct, sys
ix = bytearray(open(sys.argv[1], "rb").read())
n, r, src = struct.unpack_from("<IIQ", ix, 40)
want, off, t = int(sys.argv[3]), 64, open(sys.argv[2], "rb")
for i in range(n):
    first, last, k = struct.unpack_from("<QQI", ix, off)
    h, at = hashlib.sha256(), off
    off += 56
    for j in range(k):
        start, count = struct.unpack_from("<QI", ix, off)
        off += 12
        t.seek(start * 512)
        h.update(t.read(max(0, min((start + count) * 512, src) - start * 512)))
    if i == want:
        ix[at + 24:at + 56] = h.digest()
open(sys.argv[1], "wb").write(ix)
EOF
cp "$T/pristine" "$T/t3" && change "$T/t3" 3 || not_ok "change target"
python3 "$T/tamper.py" "$T/signed/fs.ndz.index" "$T/t3" \
	"$(diffchunks "$T/pristine" "$T/t3" | tail -1)" || not_ok "tamper with the index"
mc_server srv "$T/signed/fs.ndz" -W "$MC_RATE" -T 20
mc_client c3 "$T/t3" --seed --key "$T/k.pub" -T 10
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
check "--key, tampered index: correct result" good c3 "$T/t3"
check "--key, tampered index: refused with a warning, nothing skipped" \
	sh -c "[ \"$(skipped "$T/c3.log")\" = 0 ] && grep -q 'content index' '$T/c3.log'"
cp "$T/signed.index" "$T/signed/fs.ndz.index"

# 5. a reload killed mid-way and started again with --seed: correct, and it fetches at
# most what was missing when it started again (as the test finds it) and those in flight
: >"$T/c4.log"
mc_server srv "$T/fs.ndz" -W 40M -T 20
mc_client c4 "$T/t5" -T 10
wait_until 10 test -s "$T/t5"
sleep 1.5
# shellcheck disable=SC2046
kill -KILL $(ip netns pids "${NETNS_PFX}c4") 2>/dev/null
mc_wait
miss=$(diffchunks "$T/pristine" "$T/t5" | wc -l)
: >"$T/c4.log"
mc_client c4 "$T/t5" --seed -T 10
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
check "killed and resumed: exit 0, the image, e2fsck clean" good c4 "$T/t5"
got=$(received "$T/c4.log")
check "killed and resumed: $miss of $NCH chunks missing, $got blocks fetched, at most those and 2 in flight" \
	[ "$miss" -lt "$NCH" ] && [ "${got:-99999999}" -le $(( (miss + 2) * 1024 )) ]
done_testing
