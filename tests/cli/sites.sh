#!/bin/sh
# Sites (doc/SITES.md): a parent master and two site masters on networks joined by a
# router that forwards unicast and no multicast; each site fetches an image from the
# parent on its clients' first ask, each chunk once, and serves it by multicast; a
# link cut mid-fetch is resumed; a chunk corrupted at the parent is refused.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require tc

. "$NDZ_TOP/tests/sitesnet.sh"
sites_net 2 || { not_ok "the namespaces: a parent net, two site nets, a router"; done_testing; }

mkdir -p "$T/par"
# the images are signed; site 2 checks them against the key (site-key), site 1 does not
{ "$NDZ_BIN/imagekey" generate -o "$T/k" && "$NDZ_BIN/imagekey" generate -o "$T/k2"; } >/dev/null 2>&1 ||
	{ not_ok "imagekey generate"; done_testing; }
MC_ZIP_OPTS="--sign $T/k.sec"
for n in a big bad; do
	mib=$MC_MIB
	[ $n = big ] && mib=$(( MC_MIB * 2 ))
	mc_image "$n" "$mib" "$n" || { not_ok "make image $n"; done_testing; }
	mv "$T/$n.ndz" "$T/$n.ndz.index" "$T/$n.ndz.manifest" "$T/par/" 2>/dev/null
done
[ -n "$MC_RAW" ] && skip_all "imagezip not built"
chunks=$(( $(stat -c %s "$T/par/a.ndz") / 1048576 ))
bchunks=$(( $(stat -c %s "$T/par/big.ndz") / 1048576 ))
# forged: a's bytes, signed by another key
cp "$T/par/a.ndz" "$T/par/forged.ndz" && cp "$T/par/a.ndz.index" "$T/par/forged.ndz.index" &&
	"$NDZ_BIN/imagekey" sign -k "$T/k2.sec" "$T/par/forged.ndz" >/dev/null 2>&1 ||
	{ not_ok "sign forged"; done_testing; }
# bad: chunk 1's data corrupted at the parent, its index (made before) intact
cp "$T/par/bad.ndz" "$T/bad.orig"
flip "$T/par/bad.ndz" $(( 1048576 + 4096 + 100 ))
cmp -s "$T/bad.orig" "$T/par/bad.ndz" && not_ok "corrupt bad.ndz"

mkdir -p "$T/pup" "$T/sup1"
cat >"$T/par.conf" <<CONF
imagedir $T/par allow 10.78.0.0/16
upload-dir $T/pup allow 10.78.0.0/16 upload 10.78.1.1
CONF
site_conf 1 "parent $PARENT" "site-cache-size 1G
upload-dir $T/sup1 allow 10.78.1.0/24 upload 10.78.1.0/24"
site_conf 2 "parent $PARENT" "site-cache-size 1G
site-key $T/k.pub"
sites_start 2

# 1. six clients, two sites, one image the sites do not hold yet
for s in 1 2; do
	for c in 1 2 3; do
		fclient "c$s$c" "$s" a "$T/out$s$c"
	done
done
mc_wait
good=$(identical "$T/a.src" c11:"$T/out11" c12:"$T/out12" c13:"$T/out13" c21:"$T/out21" \
	c22:"$T/out22" c23:"$T/out23")
check "six clients at two sites: 6 byte-identical targets ($good)" [ "$good" = 6 ]
for s in 1 2; do
	line=$(grep "site: a fetched:" "$T/m$s.log")
	check "site $s fetched a once, each of its $chunks chunks once ($line)" \
		sh -c "[ \$(grep -c 'site: a fetched:' '$T/m$s.log') = 1 ] &&
		       echo '$line' | grep -q 'fetched: $chunks chunks; $chunks chunks, $(( chunks * 1048576 )) bytes from the parent, 0 refused'"
	served=$(grep "site 10.78.$s.1: a chunks" "$T/par.log" | sed 's/.*: \([0-9]*\) bytes served/\1/' |
		 awk '{ t += $1 } END { print t + 0 }')
	check "the parent served site $s a's bytes once ($served of $(( chunks * 1048576 )))" \
		[ "$served" = $(( chunks * 1048576 )) ]
done
check "the sites keep a with its index and signed manifest" \
	sh -c "cmp -s '$T/par/a.ndz' '$T/cache1/a.ndz' && cmp -s '$T/par/a.ndz.index' '$T/cache2/a.ndz.index' &&
	       cmp -s '$T/par/a.ndz.manifest' '$T/cache2/a.ndz.manifest'"
check "multicast stayed inside the sites: the parent's network saw no session traffic" \
	sh -c "[ \$(ip netns exec '${NETNS_PFX}par' cat /sys/class/net/eth0/statistics/rx_packets) -lt $(( chunks * 1024 / 2 )) ]"

# 1b. the parent sees the whole lab: each site's nodes (three a site, added as a lab's
# admin would) in the parent's nodes list, with a SITE column
for s in 1 2; do
	for c in 1 2 3; do
		"$NDZ_BIN/ndzctl" -m "$T/run$s/admin" nodes add "02:00:00:00:0$s:0$c" "node$s$c" >/dev/null ||
			not_ok "ndzctl nodes add at site $s"
	done
done
# all_six: the parent's list has the six nodes, each on its site's line
all_six() {
	"$NDZ_BIN/ndzctl" -m "$T/run0/admin" nodes list >"$T/nodes.txt" 2>&1 &&
		[ "$(grep -cE '^site[12] +02:00:00:00:0[12]:0[123] +node[12][123] ' "$T/nodes.txt")" = 6 ] &&
		! grep -E '^site1 .*node2|^site2 .*node1' "$T/nodes.txt" >/dev/null
}
wait_until 15 all_six
check "the parent's ndzctl nodes list shows the six nodes of both sites with a SITE column" \
	sh -c "head -1 '$T/nodes.txt' | grep -q '^SITE  *MAC' &&
	       [ \$(grep -cE '^site[12] +02:00:00:00:0[12]:0[123] +node[12][123] ' '$T/nodes.txt') = 6 ]"
"$NDZ_BIN/ndzctl" -m "$T/run0/admin" --json nodes list >"$T/nodes.json" 2>&1
check "... and its JSON lists both sites with their labs" \
	sh -c "grep -q '\"sites\": \[{\"site\": \"site[12]\", \"addr\": \"10.78.[12].1\"' '$T/nodes.json' &&
	       [ \$(grep -o '\"name\":\"node[12][123]\"' '$T/nodes.json' | wc -l) = 6 ]"

# 1c. the parent tasks a node of site 2: the site takes the task and reports it back
out=$("$NDZ_BIN/ndzctl" -m "$T/run0/admin" reload node22 a 2>&1); rc=$?
check "ndzctl reload at the parent for a node of site 2: sent there ($rc: $out)" \
	sh -c "[ $rc = 0 ] && echo '$out' | grep -q 'sent to site site2 (10.78.2.1)'"
# tasked: the site's own list, then the parent's, show node22's reload of a
tasked() {
	"$NDZ_BIN/ndzctl" -m "$T/run2/admin" nodes list 2>/dev/null | grep -qE '^02:00:00:00:02:02 +node22 +- +reload a ' &&
		"$NDZ_BIN/ndzctl" -m "$T/run0/admin" nodes list 2>/dev/null |
		grep -qE '^site2 +02:00:00:00:02:02 +node22 +- +reload a '
}
wait_until 15 tasked
check "... site 2 has the task, and the parent's list shows it" tasked
"$NDZ_BIN/ndzctl" -m "$T/run2/admin" cancel node22 >/dev/null 2>&1
out=$("$NDZ_BIN/ndzctl" -m "$T/run0/admin" reload nosuchnode a 2>&1); rc=$?
check "a node no site has: refused at the parent ($rc: $out)" [ "$rc" != 0 ]

# 2. asked again: served from the cache, nothing fetched
fclient c12 1 a "$T/again"
mc_wait
check "asked again at site 1: identical, and not fetched again" \
	sh -c "[ \"\$(cat '$T/c12.rc')\" = 0 ] && cmp -s '$T/a.src' '$T/again' &&
	       [ \$(grep -c 'site: a fetched:' '$T/m1.log') = 1 ]" 

# 3. a chunk corrupted at the parent: refused at the site, asked again, reported
in_ns c11 "$FRISBEE" -M 10.78.1.1 -I bad -T 10 "$T/badout" 2>"$T/bad.err"; rc=$?
# refused before its session starts, or its session stopped when chunk 1 stays bad
check "a corrupted chunk from the parent: the client fails ($rc: $(cat "$T/bad.err"))" \
	sh -c "[ $rc != 0 ] && ! cmp -s '$T/bad.src' '$T/badout'"
check "... the site refused chunk 1 three times and said why" \
	sh -c "[ \$(grep -c 'site: bad from $PARENT: chunk 1: .*: refused (try [123] of 3)' '$T/m1.log') = 3 ] &&
	       grep -q 'fetch of bad failed: .*3 times' '$T/m1.log'"
check "... and keeps no image bad" sh -c "[ ! -e '$T/cache1/bad.ndz' ] && [ ! -e '$T/cache1/bad.ndz.part' ]"

# 3a. an image the parent does not have either: unknown at the site too
in_ns c11 "$FRISBEE" -M 10.78.1.1 -I nosuch -T 10 "$T/nosuch" 2>"$T/nosuch.err"; rc=$?
check "an image the parent does not have: unknown image ($rc: $(cat "$T/nosuch.err"))" \
	sh -c "[ $rc = 1 ] && grep -q \"image 'nosuch': unknown image\" '$T/nosuch.err'"

# 3b. signed by another key: refused at site 2, which checks the key
in_ns c21 "$FRISBEE" -M 10.78.2.1 -I forged -T 10 "$T/forged" 2>"$T/forged.err"; rc=$?
check "an image signed by another key: refused at the site with site-key ($rc)" \
	sh -c "[ $rc != 0 ] && grep -q 'fetch of forged failed: index of forged from $PARENT: .*another key' '$T/m2.log' &&
	       [ ! -e '$T/cache2/forged.ndz' ] && [ ! -e '$T/cache2/forged.ndz.part' ]"

# 4. the link from site 2 to the parent cut mid-fetch and restored: resumed, identical
ip netns exec "${NETNS_PFX}rt" tc qdisc replace dev eth2 root tbf rate 24mbit burst 32k latency 400ms
for c in 1 2 3; do
	fclient "c2$c" 2 big "$T/big$c"
done
# cut once the site serves big while it arrives (its first and last chunks here), and
# a few more chunks came
wait_until 30 grep -q 'site: big served while it arrives' "$T/m2.log"
sleep 1.5
# the router resets site 2's connections to the parent for 3 s (a link that drops
# quietly is found by the fetch's 10 s timeout the same way, only later)
sites_cut 2
sleep 3
sites_uncut
mc_wait
good=$(identical "$T/big.src" c21:"$T/big1" c22:"$T/big2" c23:"$T/big3")
check "a link cut mid-fetch and restored: 3 byte-identical targets ($good)" [ "$good" = 3 ]
check "... the session started before the image was whole (frisbeed --growing)" \
	sh -c "grep -q -- '--growing' '$T/run2/'* 2>/dev/null ||
	       sed -n '/site: big served while/,/site: big fetched/p' '$T/m2.log' | grep -q 'session of big'"

line=$(grep "site: big fetched:" "$T/m2.log")
asked=$(echo "$line" | sed -n 's/.*; \([0-9]*\) chunks, .*/\1/p')
check "... the fetch retried and resumed: $asked chunks asked for $bchunks ($line)" \
	sh -c "grep -q 'site: big: .*again in .* ([1-9][0-9]* of $bchunks chunks here)' '$T/m2.log' &&
	       [ -n '$asked' ] && [ '$asked' -ge $bchunks ] && [ '$asked' -le $(( bchunks + 4 )) ]"

# 4b. an upload at site 1: checked there, stored, sent on to the parent, checked again;
# a corrupt one stops at the site
MC_ZIP_OPTS= mc_image up1 2 up1 || not_ok "make image up1"
cp "$T/up1.ndz" "$T/up2.ndz"
flip "$T/up2.ndz" $(( 4096 + 100 ))
in_ns c11 "$NDZ_BIN/frisbee-upload" -M 10.78.1.1 -I up1 "$T/up1.ndz" 2>"$T/up1.err"; rc=$?
wait_until 30 grep -q 'site: upload up1 stored at the parent' "$T/m1.log"
check "an upload at a site is stored there and at the parent, identical ($rc)" \
	sh -c "[ $rc = 0 ] && cmp -s '$T/up1.ndz' '$T/sup1/up1.ndz' && cmp -s '$T/up1.ndz' '$T/pup/up1.ndz' &&
	       grep -q 'up1 from 10.78.1.1 stored' '$T/par.log'"
check "... each with its content index, the one imagezip made beside the image" \
	sh -c "cmp -s '$T/up1.ndz.index' '$T/sup1/up1.ndz.index' &&
	       cmp -s '$T/up1.ndz.index' '$T/pup/up1.ndz.index'"
in_ns c11 "$NDZ_BIN/frisbee-upload" -M 10.78.1.1 -I up2 "$T/up2.ndz" 2>"$T/up2.err"; rc=$?
sleep 1
check "a corrupt upload is rejected at the site and never reaches the parent ($rc)" \
	sh -c "[ $rc != 0 ] && [ ! -e '$T/sup1/up2.ndz' ] && [ ! -e '$T/pup/up2.ndz' ] &&
	       [ ! -e '$T/sup1/up2.ndz.index' ] && [ ! -e '$T/pup/up2.ndz.index' ] &&
	       ! grep -q 'up2' '$T/par.log'"

# 5. the cache's bound: a goes for big under a bound of big and half of a; pinned, big
# stays and a does not fit
wait_until 10 sh -c "[ \$(grep -c 'session of a ended' '$T/m1.log') -ge 2 ]"
# hup1: site 1 rereads its configuration (one more "reloaded" line)
hup1() {
	_r=$(grep -c 'site1.conf reloaded' "$T/m1.log")
	kill -HUP $MPID_m1
	wait_until 5 sh -c "[ \$(grep -c 'site1.conf reloaded' '$T/m1.log') -gt $_r ]"
}
lim=$(( $(stat -c %s "$T/par/big.ndz") + $(stat -c %s "$T/par/a.ndz") / 2 ))
sed -i "s/^site-cache-size .*/site-cache-size $lim/" "$T/site1.conf"
hup1
fclient c13 1 big "$T/big13"
mc_wait
check "a bounded cache: big fetched at site 1, identical, a evicted (least recently asked)" \
	sh -c "[ \"\$(cat '$T/c13.rc')\" = 0 ] && cmp -s '$T/big.src' '$T/big13' &&
	       grep -q 'site cache: a evicted' '$T/m1.log' && [ ! -e '$T/cache1/a.ndz' ] &&
	       [ ! -e '$T/cache1/a.ndz.index' ]"
echo "pin big" >>"$T/site1.conf"
hup1
in_ns c11 "$FRISBEE" -M 10.78.1.1 -I a -T 10 "$T/a2" 2>"$T/a2.err"; rc=$?
check "a pinned image is not evicted: a does not fit beside big, and says why ($rc)" \
	sh -c "[ $rc != 0 ] && [ -e '$T/cache1/big.ndz' ] &&
	       grep -q 'fetch of a failed: site cache .*: the site cache has no room' '$T/m1.log'"

sites_stop
[ -n "${SITES_KEEP:-}" ] && cp "$T"/*.log "$T"/nodes.* "$SITES_KEEP"/
done_testing
