#!/bin/sh
# Sites, the second cut (doc/SITES.md): a newer version of an image is fetched only
# where it differs from what a site holds (the chunks its content index says are
# new; a held chunk is rebuilt and checked as a fetched one, and a tampered one is
# fetched instead); a site reports a change in its lab at once (its heartbeat set
# far longer than the test); a capture at one site goes up to the parent and is
# reloaded at the other, byte-identical.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require nft python3

. "$NDZ_TOP/tests/sitesnet.sh"
sites_net 2 || { not_ok "the namespaces: a parent net, two site nets, a router"; done_testing; }
[ -x "$IMAGEZIP" ] || skip_all "imagezip not built"

mkdir -p "$T/par" "$T/pup" "$T/sup2"
"$NDZ_BIN/imagekey" generate -o "$T/k" >/dev/null 2>&1 || { not_ok "imagekey generate"; done_testing; }
# a: the first version; a2: a with 200 KiB of its first MiBs made other bytes (a new
# version, the rest as it was); both signed
MC_ZIP_OPTS="--sign $T/k.sec"
mc_image a "$MC_MIB" a || { not_ok "make image a"; done_testing; }
cp "$T/a.src" "$T/a2.src"
head -c 204800 /dev/urandom | dd of="$T/a2.src" bs=1024 seek=1100 conv=notrunc 2>/dev/null
"$IMAGEZIP" -q -r --sign "$T/k.sec" "$T/a2.src" "$T/a2.ndz" || { not_ok "make image a2"; done_testing; }
mv "$T/a.ndz" "$T/a.ndz.index" "$T/a.ndz.manifest" "$T/a2.ndz" "$T/a2.ndz.index" \
	"$T/a2.ndz.manifest" "$T/par/"
chunks=$(( $(stat -c %s "$T/par/a2.ndz") / 1048576 ))

changed_chunks "$T/par/a.ndz.index" "$T/par/a2.ndz.index"
check "a2 differs from a in some chunks, not all ($nchanged of $chunks)" \
	sh -c "[ $nchanged -ge 1 ] && [ $nchanged -lt $(( chunks - 2 )) ]"

cat >"$T/par.conf" <<CONF
imagedir $T/par allow 10.78.0.0/16
upload-dir $T/pup allow 10.78.0.0/16 upload 10.78.2.1
CONF
site_conf 1 "parent $PARENT" "site-report 3600"
site_conf 2 "parent $PARENT" "site-report 3600
site-key $T/k.pub
upload-dir $T/sup2 allow 10.78.2.0/24 upload 10.78.2.0/24"
sites_start 2

# 1. each site fetches a, whole
fclient c11 1 a "$T/a1"
fclient c21 2 a "$T/a2"
mc_wait
check "a at both sites: byte-identical targets" \
	sh -c "[ \"\$(cat '$T/c11.rc' '$T/c21.rc')\" = '0
0' ] && cmp -s '$T/a.src' '$T/a1' && cmp -s '$T/a.src' '$T/a2'"

# 2. a chunk of a that a2 has too, tampered in each site's cache (site 1 checks by the
# index and checksums, site 2 by the signed manifest): rebuilt, it fails its check and
# is fetched; a site never serves it
t1=$(seq 0 $(( chunks - 1 )) | grep -vxF -f "$T/changed" | tail -n 2 | head -n 1)
t2=$(seq 0 $(( chunks - 1 )) | grep -vxF -f "$T/changed" | tail -n 3 | head -n 1)
flip "$T/cache1/a.ndz" $(( t1 * 1048576 + 4096 + 300 ))
flip "$T/cache2/a.ndz" $(( t2 * 1048576 + 4096 + 300 ))
{ cat "$T/changed"; echo "$t1"; } | sort -n >"$T/want1"
{ cat "$T/changed"; echo "$t2"; } | sort -n >"$T/want2"

# 3. the new version at both sites: only what they do not hold comes from the parent
fclient c12 1 a2 "$T/b1"
fclient c22 2 a2 "$T/b2"
mc_wait
for s in 1 2; do
	check "a2 at site $s: a byte-identical target (frisbee: $(cat "$T/c${s}2.rc") $(tail -n 1 "$T/c${s}2.log" 2>/dev/null))" \
		sh -c "[ \"\$(cat '$T/c${s}2.rc')\" = 0 ] && cmp -s '$T/a2.src' '$T/b$s'"
	served "$s" a2 >"$T/got$s"
	check "site $s fetched exactly a2's new chunks and the tampered one ($(tr '\n' ' ' <"$T/got$s")| $(tr '\n' ' ' <"$T/want$s"))" \
		cmp -s "$T/got$s" "$T/want$s"
	nw=$(wc -l <"$T/want$s")
	check "... and took the other $(( chunks - nw )) from a, held there" \
		grep -q "site: a2 fetched: $chunks chunks; $nw chunks, $(( nw * 1048576 )) bytes from the parent, 0 refused, $(( chunks - nw )) reused" "$T/m$s.log"
	check "... its copy of a2 is the parent's, byte for byte (the rebuilt chunks too)" \
		cmp -s "$T/par/a2.ndz" "$T/cache$s/a2.ndz"
done
check "the tampered chunks were refused, each at its site" \
	sh -c "grep -q 'site: a2: chunk $t1 from chunk $t1 of .*a.ndz not used: .*; fetched' '$T/m1.log' &&
	       grep -q 'site: a2: chunk $t2 from chunk $t2 of .*a.ndz not used: .*; fetched' '$T/m2.log'"

# 4. a change at a site reaches the parent at once: the heartbeat is an hour
# seen_at_parent NAME: the parent's nodes list shows node NAME of site 1
seen_at_parent() {
	"$NDZ_BIN/ndzctl" -m "$T/run0/admin" nodes list 2>/dev/null | grep -qE "^site1 +02:00:00:00:01:0[0-9] +$1 "
}
# heard_site1: site 1's first report (sent 2 s after its start) is at the parent
heard_site1() {
	"$NDZ_BIN/ndzctl" -m "$T/run0/admin" --json nodes list 2>/dev/null | grep -q '"site": "site1"'
}
wait_until 20 heard_site1 || not_ok "site 1's first report at the parent"
"$NDZ_BIN/ndzctl" -m "$T/run1/admin" nodes add 02:00:00:00:01:01 node11 >/dev/null ||
	not_ok "ndzctl nodes add at site 1"
wait_until 20 seen_at_parent node11
check "a node added at site 1 shows at the parent with no heartbeat due" seen_at_parent node11
"$NDZ_BIN/ndzctl" -m "$T/run1/admin" nodes add 02:00:00:00:01:02 node12 >/dev/null ||
	not_ok "ndzctl nodes add at site 1"
wait_until 20 seen_at_parent node12
check "... and a second change too" seen_at_parent node12

# 4b. the parent finds a node's site from the report's decoded fields: by name, by MAC
out=$("$NDZ_BIN/ndzctl" -m "$T/run0/admin" reload node12 a 2>&1); rc=$?
check "a reload at the parent for node12 goes to site 1 ($rc: $out)" \
	sh -c "[ $rc = 0 ] && echo '$out' | grep -q 'sent to site site1 (10.78.1.1)'"
out=$("$NDZ_BIN/ndzctl" -m "$T/run0/admin" reload 02:00:00:00:01:01 a 2>&1); rc=$?
check "... and for node11 named by its MAC ($rc: $out)" \
	sh -c "[ $rc = 0 ] && echo '$out' | grep -q 'sent to site site1'"

# 5. a capture at site 2 (imagezip --upload to its master): checked there and at the
# parent, then reloaded at site 1 (fetched from the parent, its index made there)
head -c $(( MC_MIB * 262144 )) /dev/urandom >"$T/cap.src"
yes "a capture at a site" | head -c $(( MC_MIB * 262144 )) >>"$T/cap.src"
in_ns c23 "$IMAGEZIP" -q -r --upload 10.78.2.1:cap1 "$T/cap.src" 2>"$T/cap.err"; rc=$?
wait_until 30 grep -q 'site: upload cap1 stored at the parent' "$T/m2.log"
check "a capture at site 2 is stored there and at the parent ($rc: $(cat "$T/cap.err"))" \
	sh -c "[ $rc = 0 ] && cmp -s '$T/sup2/cap1.ndz' '$T/pup/cap1.ndz' &&
	       grep -q 'cap1 from 10.78.2.1 stored' '$T/par.log'"
fclient c13 1 cap1 "$T/cap1"
mc_wait
check "... and reloaded at site 1, byte-identical" \
	sh -c "[ \"\$(cat '$T/c13.rc')\" = 0 ] && cmp -s '$T/cap.src' '$T/cap1' &&
	       grep -q 'site: cap1 fetched' '$T/m1.log'"

sites_stop
[ -n "${SITES_KEEP:-}" ] && cp "$T"/*.log "$SITES_KEEP"/
done_testing
