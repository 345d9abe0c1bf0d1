#!/bin/sh
# The object store (doc/SITES.md, "An object store"): a real single-node Ceph (mon, OSD,
# radosgw from Debian; tests/ceph/ceph.sh) in the parent network's namespace; a master
# there takes an upload and puts it in the store (image, index); a site master with the
# store and no parent fetches it for three frisbee clients in its site (real multicast):
# byte-identical, each chunk from the store once. With CEPH_SHORT=1 (the case `make
# check` runs) that is all; else (`make check-ceph`) also: a corrupted object refused,
# an image signed elsewhere checked against site-key, bad credentials said, an upload
# at the site put in the store with an index made there.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require nft
command -v ceph-mon >/dev/null && command -v ceph-osd >/dev/null && command -v radosgw >/dev/null ||
	skip_all "ceph-mon, ceph-osd, radosgw not installed (tests/install-deps.sh)"
. "$NDZ_TOP/tests/ceph/ceph.sh"
S3TOOL="$NDZ_BUILD/tests/helpers/s3tool"
. "$NDZ_TOP/tests/sitesnet.sh"
sites_net 2 || { not_ok "the namespaces: a parent net, two site nets, a router"; done_testing; }

at_exit ceph_stop
ceph_start "$T/ceph" "${NETNS_PFX}par" 10.78.0.1 2>"$T/ceph.err" ||
	{ not_ok "a single-node Ceph starts: $(cat "$T/ceph.err")"; done_testing; }
ok "a single-node Ceph (mon, memstore OSD, radosgw) runs in the parent's namespace at $CEPH_S3"
printf 'access-key %s\nsecret-key %s\n' "$CEPH_KEY" "$CEPH_SECRET" >"$T/cred" && chmod 600 "$T/cred"
s3() { in_ns par "$S3TOOL" "$CEPH_S3" ndz "$T/cred" "$@"; }
s3 mkbucket 2>"$T/mkb.err" || { not_ok "a bucket: $(cat "$T/mkb.err")"; done_testing; }

mkdir -p "$T/pup" "$T/pcache" "$T/sup1"
{ "$NDZ_BIN/imagekey" generate -o "$T/k" && "$NDZ_BIN/imagekey" generate -o "$T/k2"; } >/dev/null 2>&1 ||
	{ not_ok "imagekey generate"; done_testing; }
mc_image a "$MC_MIB" a || { not_ok "make image a"; done_testing; }
[ -n "$MC_RAW" ] && skip_all "imagezip not built"
rm -f "$T/a.ndz.index" "$T/a.ndz.manifest"     # made at the master, from the upload
chunks=$(( $(stat -c %s "$T/a.ndz") / 1048576 ))
store="store $CEPH_S3
store-bucket ndz
store-prefix lab/
store-credentials $T/cred"
cat >"$T/par.conf" <<CONF
upload-dir $T/pup allow 10.78.0.0/16 upload 10.78.0.0/16
imagedir $T/pcache allow 10.78.0.0/16
site-cache $T/pcache
$store
CONF
# site 1 rechecks every second (a HEAD of the index); site 2 has a parent too (the
# store first: the parent is not asked for what the store has)
SITE_POOL=50
site_conf 1 "$store" "site-cache-size 1G
site-recheck 1
upload-dir $T/sup1 allow 10.78.1.0/24 upload 10.78.1.0/24"
site_conf 2 "$store
parent $PARENT" "site-cache-size 1G
site-key $T/k.pub"
SITES_V=-vv sites_start 2

# 1. an upload at the parent's master: checked, stored, put in the store with an index
# (made there) and without the manifest an older version left
s3 put lab/a.ndz.manifest "$T/par.conf" 2>/dev/null || not_ok "an old manifest of a in the store"
in_ns par "$NDZ_BIN/frisbee-upload" -M 10.78.0.1 -I a "$T/a.ndz" 2>"$T/up.err"; rc=$?
wait_until 60 grep -q 'site: upload a stored in store' "$T/par.log"
s3 get lab/a.ndz >"$T/a.store" 2>"$T/get.err"
s3 get lab/a.ndz.index >"$T/a.index" 2>>"$T/get.err"
check "an upload at a master with a store: stored, and put in the store whole with an index ($rc: $(cat "$T/up.err" "$T/get.err"))" \
	sh -c "[ $rc = 0 ] && cmp -s '$T/a.ndz' '$T/pup/a.ndz' && cmp -s '$T/a.ndz' '$T/a.store' &&
	       [ -s '$T/a.index' ] && grep -q 'site: upload a stored in store $CEPH_S3/ndz/lab/' '$T/par.log'"
s3 head lab/a.ndz.manifest >/dev/null 2>"$T/head.err"; rc=$?
check "... and the old manifest is gone from the store ($rc: $(cat "$T/head.err"))" \
	sh -c "[ $rc != 0 ] && grep -q 'HEAD lab/a.ndz.manifest: not found (HTTP 404' '$T/head.err'"

# 2. three clients at site 1 ask for a, which only the store has
for c in 1 2 3; do
	fclient "c1$c" 1 a "$T/out1$c" 90
done
mc_wait
good=$(identical "$T/a.src" c11:"$T/out11" c12:"$T/out12" c13:"$T/out13")
check "three clients at a site with a store: 3 byte-identical targets ($good)" [ "$good" = 3 ]
line=$(grep "site: a fetched:" "$T/m1.log")
check "the site fetched a from the store once, each of its $chunks chunks once ($line)" \
	sh -c "[ \$(grep -c 'site: a fetched:' '$T/m1.log') = 1 ] &&
	       echo '$line' | grep -q 'fetched: $chunks chunks; $chunks chunks, $(( chunks * 1048576 )) bytes from the parent, 0 refused' &&
	       grep -q 'site: a asked: fetching it from store $CEPH_S3/ndz/lab/' '$T/m1.log'"
# the store's own access log: a's bytes went to the site once (GETs by range, 206)
served_a() {
	grep '10.78.1.1 - ndz .*"GET /ndz/lab/a.ndz HTTP/1.1" 206 ' "$T/ceph/log/client.rgw.log" |
		sed 's/.*" 206 \([0-9]*\) .*/\1/' | awk '{ t += $1 } END { print t + 0 }'
}
wait_until 10 sh -c "[ \$(grep -c 'GET /ndz/lab/a.ndz HTTP' '$T/ceph/log/client.rgw.log') -ge 1 ]"
sleep 1
check "radosgw's log: the store served a's $(( chunks * 1048576 )) bytes to the site once ($(served_a))" \
	[ "$(served_a)" = $(( chunks * 1048576 )) ]
check "... and keeps it with its index" \
	sh -c "cmp -s '$T/a.ndz' '$T/cache1/a.ndz' && cmp -s '$T/a.index' '$T/cache1/a.ndz.index'"

# 2b. a recheck of a, unchanged in the store: a HEAD of its index (its size and ETag, as
# the fetch found them), no GET
rgw_log() { grep -c "10.78.1.1 - ndz .*\"$1 /ndz/lab/a.ndz.index HTTP/1.1\" 200 " "$T/ceph/log/client.rgw.log"; }
gets=$(rgw_log GET) heads=$(rgw_log HEAD)
sleep 1.5
fclient c12 1 a "$T/again" 90
mc_wait
wait_until 20 grep -q 'site: a: the same at store' "$T/m1.log"
sleep 1
g2=$(rgw_log GET) h2=$(rgw_log HEAD)
check "a recheck of a, the same in the store: a HEAD of its index ($heads, then $h2), no GET ($gets, then $g2)" \
	sh -c "[ \"\$(cat '$T/c12.rc')\" = 0 ] && cmp -s '$T/a.src' '$T/again' && [ $h2 -gt $heads ] &&
	       [ $g2 = $gets ] && grep -q 'site: a: the same at store' '$T/m1.log'"

if [ "${CEPH_SHORT:-0}" = 0 ]; then
	# 3. a corrupted object: chunk 1's data damaged in the store, its index intact
	MC_ZIP_OPTS= mc_image bad 4 bad || not_ok "make image bad"
	"$NDZ_BIN/imagekey" index "$T/bad.ndz" >/dev/null 2>&1 || [ -s "$T/bad.ndz.index" ] ||
		not_ok "index of bad"
	cp "$T/bad.ndz" "$T/bad.orig"
	flip "$T/bad.ndz" $(( 1048576 + 4096 + 100 ))
	s3 put lab/bad.ndz "$T/bad.ndz" && s3 put lab/bad.ndz.index "$T/bad.ndz.index" ||
		not_ok "put bad in the store"
	in_ns c11 "$FRISBEE" -M 10.78.1.1 -I bad -T 20 "$T/badout" 2>"$T/bad.err"; rc=$?
	check "a corrupted object: the client fails ($rc: $(cat "$T/bad.err"))" \
		sh -c "[ $rc != 0 ] && ! cmp -s '$T/bad.src' '$T/badout'"
	check "... the site refused chunk 1 three times, said why, and keeps nothing of it" \
		sh -c "[ \$(grep -c 'site: bad from store .*: chunk 1: .*: refused (try [123] of 3)' '$T/m1.log') = 3 ] &&
		       grep -q 'fetch of bad failed: .*3 times' '$T/m1.log' &&
		       [ ! -e '$T/cache1/bad.ndz' ] && [ ! -e '$T/cache1/bad.ndz.part' ]"
	# the object mended in the store: fetched again at the next ask (after the 10 s a failure is told)
	s3 put lab/bad.ndz "$T/bad.orig" || not_ok "put bad mended"
	sleep 10
	in_ns c11 "$FRISBEE" -M 10.78.1.1 -I bad -T 60 "$T/badout2" 2>"$T/bad2.err"; rc=$?
	check "... mended in the store: fetched again and identical ($rc)" \
		sh -c "[ $rc = 0 ] && cmp -s '$T/bad.src' '$T/badout2'"

	# 4. a signed image in the store: site 2 (site-key) checks it; one signed by another key is refused
	MC_ZIP_OPTS="--sign $T/k.sec" mc_image s 3 s || not_ok "make image s"
	s3 put lab/s.ndz "$T/s.ndz" && s3 put lab/s.ndz.manifest "$T/s.ndz.manifest" &&
		s3 put lab/s.ndz.index "$T/s.ndz.index" || not_ok "put s in the store"
	cp "$T/s.ndz" "$T/f.ndz" && cp "$T/s.ndz.index" "$T/f.ndz.index" &&
		"$NDZ_BIN/imagekey" sign -k "$T/k2.sec" "$T/f.ndz" >/dev/null 2>&1 &&
		s3 put lab/f.ndz "$T/f.ndz" && s3 put lab/f.ndz.manifest "$T/f.ndz.manifest" &&
		s3 put lab/f.ndz.index "$T/f.ndz.index" || not_ok "put f (another key) in the store"
	for c in 1 2 3; do
		fclient "c2$c" 2 s "$T/s2$c" 90
	done
	mc_wait
	good=$(identical "$T/s.src" c21:"$T/s21" c22:"$T/s22" c23:"$T/s23")
	check "a signed image from the store at a site with site-key: 3 identical targets, manifest kept ($good)" \
		sh -c "[ $good = 3 ] && cmp -s '$T/s.ndz.manifest' '$T/cache2/s.ndz.manifest'"
	n=$(grep -c "site 10\.78\.2\.1: [a-z0-9]* \(chunks\|index\|manifest\|identity\)" "$T/par.log")
	check "... the store first: site 2's parent was asked for nothing ($n requests)" [ "$n" = 0 ]
	in_ns c21 "$FRISBEE" -M 10.78.2.1 -I f -T 10 "$T/fout" 2>"$T/f.err"; rc=$?
	check "an image signed by another key in the store: refused at the site with site-key ($rc)" \
		sh -c "[ $rc != 0 ] && grep -q 'fetch of f failed: index of f from store .*another key' '$T/m2.log' &&
		       [ ! -e '$T/cache2/f.ndz' ]"

	# 5. an upload at site 1 goes up to the store, an index made there
	MC_ZIP_OPTS= mc_image up1 2 up1 || not_ok "make image up1"
	in_ns c11 "$NDZ_BIN/frisbee-upload" -M 10.78.1.1 -I up1 "$T/up1.ndz" 2>"$T/up1.err"; rc=$?
	wait_until 60 grep -q 'site: upload up1 stored in store' "$T/m1.log"
	s3 get lab/up1.ndz >"$T/up1.store" 2>/dev/null
	check "an upload at a site is stored there and in the store, identical, with an index ($rc)" \
		sh -c "[ $rc = 0 ] && cmp -s '$T/up1.ndz' '$T/sup1/up1.ndz' && cmp -s '$T/up1.ndz' '$T/up1.store' &&
		       s3() { ip netns exec '${NETNS_PFX}par' '$S3TOOL' '$CEPH_S3' ndz '$T/cred' \"\$@\"; };
		       [ \$(s3 head lab/up1.ndz.index) -gt 0 ]"
	# ... unsigned: site 2, whose site-key wants every image signed, refuses it
	in_ns c22 "$FRISBEE" -M 10.78.2.1 -I up1 -T 10 "$T/up1out" 2>"$T/up1out.err"; rc=$?
	check "... an unsigned image in the store: refused at a site with site-key ($rc)" \
		sh -c "[ $rc != 0 ] && grep -q 'fetch of up1 failed: index of up1 from store .*: the content index is not signed' '$T/m2.log'"

	# 5b. a big object goes in parts (a multipart upload, 5 MiB parts here, 64 MiB in
	# the masters) and reads back whole and by range
	head -c $(( 12 * 1048576 + 12345 )) /dev/urandom >"$T/big.bin"
	s3 put lab/big.bin "$T/big.bin" 5242880 2>"$T/mp.err"; rc=$?
	s3 get lab/big.bin >"$T/big.back" 2>>"$T/mp.err"
	s3 get lab/big.bin 10485760 1048576 >"$T/big.range" 2>>"$T/mp.err"
	check "a multipart upload: 3 parts, read back identical, whole and by range ($rc: $(cat "$T/mp.err"))" \
		sh -c "[ $rc = 0 ] && cmp -s '$T/big.bin' '$T/big.back' &&
		       tail -c +10485761 '$T/big.bin' | head -c 1048576 | cmp -s - '$T/big.range' &&
		       [ \$(grep -c '\"PUT /ndz/lab/big.bin?partNumber=[123]&uploadId=' '$T/ceph/log/client.rgw.log') = 3 ]"

	# 5c. a put anew in the store (another image under the same name, its index last):
	# the next recheck's HEAD finds another ETag, and site 1 fetches the new version
	MC_ZIP_OPTS= mc_image a2 "$MC_MIB" a2 || not_ok "make image a2"
	"$NDZ_BIN/imagekey" index "$T/a2.ndz" >/dev/null 2>&1 || [ -s "$T/a2.ndz.index" ] ||
		not_ok "index of a2"
	s3 put lab/a.ndz "$T/a2.ndz" && s3 put lab/a.ndz.index "$T/a2.ndz.index" ||
		not_ok "put a anew in the store"
	sleep 1.5
	in_ns c13 "$FRISBEE" -M 10.78.1.1 -I a -T 60 "$T/a3" 2>"$T/a3.err"; rc=$?
	wait_until 30 grep -q 'site: a updated' "$T/m1.log"
	in_ns c13 "$FRISBEE" -M 10.78.1.1 -I a -T 60 "$T/a4" 2>"$T/a4.err"; rc2=$?
	check "a put anew in the store reaches the site by its recheck: the next client gets it ($rc $rc2)" \
		sh -c "[ $rc = 0 ] && [ $rc2 = 0 ] && grep -q 'site: a changed at store' '$T/m1.log' &&
		       cmp -s '$T/a2.ndz' '$T/cache1/a.ndz' && cmp -s '$T/a2.src' '$T/a4'"

	# 6. wrong credentials: said, with the store's own code
	printf 'access-key %s\nsecret-key %s\n' "$CEPH_KEY" wrongsecret >"$T/cred"
	in_ns c12 "$FRISBEE" -M 10.78.1.1 -I s -T 10 "$T/sout" 2>"$T/s.err"; rc=$?
	check "wrong store credentials: the fetch fails and says so ($rc)" \
		sh -c "[ $rc != 0 ] && grep -q 'fetch of s failed: store .*: GET lab/s.ndz.index: refused (HTTP 403, SignatureDoesNotMatch' '$T/m1.log'"
fi

sites_stop
[ -n "${STORE_KEEP:-}" ] && cp "$T"/*.log "$T/ceph/log/"* "$STORE_KEEP"/ 2>/dev/null
done_testing
