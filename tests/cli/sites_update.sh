#!/bin/sh
# Sites, updates (doc/SITES.md, "Updates"): an image replaced at the parent under the
# same name reaches a site that holds the old version. A GET at the site after its
# site-recheck interval is answered from the cache and makes the site ask the parent
# for the image's index; a changed index fetches the new version (only the chunks the
# site does not hold), which replaces the old one for new sessions. With the parent cut
# off, the site keeps serving what it holds and says so once.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require nft python3 curl
MFRISBEED="$NDZ_BIN/mfrisbeed"

. "$NDZ_TOP/tests/sitesnet.sh"
sites_net 1 || { not_ok "the namespaces: a parent net, a site net, a router"; done_testing; }
[ -x "$IMAGEZIP" ] || skip_all "imagezip not built"

mkdir -p "$T/par" "$T/new" "$T/cache1" "$T/run0" "$T/run1"
"$NDZ_BIN/imagekey" generate -o "$T/k" >/dev/null 2>&1 || { not_ok "imagekey generate"; done_testing; }
# x: the first version; x2: x with 200 KiB of its first MiBs and 100 KiB of its last
# made other bytes
MC_ZIP_OPTS="--sign $T/k.sec"
mc_image x "$MC_MIB" x || { not_ok "make image x"; done_testing; }
cp "$T/x.src" "$T/x2.src"
head -c 204800 /dev/urandom | dd of="$T/x2.src" bs=1024 seek=1100 conv=notrunc 2>/dev/null
head -c 102400 /dev/urandom | dd of="$T/x2.src" bs=1024 seek=$(( MC_MIB * 1536 + 300 )) conv=notrunc 2>/dev/null
"$IMAGEZIP" -q -r --sign "$T/k.sec" "$T/x2.src" "$T/new/x.ndz" || { not_ok "make image x2"; done_testing; }
mv "$T/x.ndz" "$T/x.ndz.index" "$T/x.ndz.manifest" "$T/par/"
chunks=$(( $(stat -c %s "$T/new/x.ndz") / 1048576 ))
new_chunks "$T/par/x.ndz.index" "$T/new/x.ndz.index" >"$T/changed" ||
	{ not_ok "read the indexes"; done_testing; }
nchanged=$(wc -l <"$T/changed")
check "x2 differs from x in some chunks, not all ($nchanged of $chunks)" \
	sh -c "[ $nchanged -ge 1 ] && [ $nchanged -lt $chunks ]"

cat >"$T/par.conf" <<CONF
upload-dir $T/par allow 10.78.0.0/16 upload 10.78.0.1
CONF
cat >"$T/site1.conf" <<CONF
pool 239.192.41.0/29
ports 5000-5007
idle-timeout 2
rate $MC_RATE
imagedir $T/cache1 allow 10.78.1.0/24
parent $PARENT
site-cache $T/cache1
site-allow 10.78.1.0/24
site-name site1
site-report 3600
site-recheck 1
http-listen 127.0.0.1:8080
CONF
# master NS CONF RUN: mfrisbeed -v in NS, its log $T/NS.log, its pid in MPID_NS
master() {
	ip netns exec "$NETNS_PFX$1" "$MFRISBEED" -c "$2" -r "$3" -vv --log-time 2>>"$T/$1.log" &
	eval "MPID_$1=$!"
	wait_until 5 sh -c "ip netns exec '$NETNS_PFX$1' ss -lun | grep -q ':3563 '"
}
master par "$T/par.conf" "$T/run0" && master m1 "$T/site1.conf" "$T/run1" ||
	{ not_ok "the masters listen: $(cat "$T/par.log" "$T/m1.log")"; done_testing; }
at_exit 'kill $MPID_par $MPID_m1 2>/dev/null'

# get HOST TARGET: frisbee -M the site's master for x; its status in $T/HOST.rc
get() {
	rm -f "$T/$1.rc"
	( in_ns "$1" "$FRISBEE" -M 10.78.1.1 -I x -T 60 "$2" 2>>"$T/$1.log"; echo $? >"$T/$1.rc" )
}
# counter NAME: the site's counter NAME in its /status.json
counter() {
	in_ns m1 curl -s -m 5 http://127.0.0.1:8080/status.json |
		python3 -c "import json,sys; print(json.load(sys.stdin)['site']['$1'])" 2>/dev/null
}
# poll SECONDS CMD...: CMD every half second until it holds or SECONDS (wall clock)
# have passed (CMD may take a while: wait_until counts its tries)
poll() {
	_end=$(( $(date +%s) + $1 ))
	shift
	until "$@"; do
		[ "$(date +%s)" -lt "$_end" ] || return 1
		sleep 0.5
	done
}
# served FROM: the chunks of x the parent served the site, from line FROM of its log
# on, one a line, sorted
served() {
	tail -n +"$1" "$T/par.log" |
		sed -n "s/.*site 10\.78\.1\.1: x chunks \([0-9]*\)-\([0-9]*\): [0-9]* bytes served/\1 \2/p" |
		while read -r f l; do seq "$f" "$l"; done | sort -n
}

# 1. the site fetches x and serves it
get c11 "$T/t1"
check "x at the site: a byte-identical target (v1)" \
	sh -c "[ \"\$(cat '$T/c11.rc')\" = 0 ] && cmp -s '$T/x.src' '$T/t1'"

# 2. x replaced at the parent (same name), and the parent cut off: the site serves
# what it holds, and says once that it could not ask
mv "$T/new/x.ndz.index" "$T/new/x.ndz.manifest" "$T/new/x.ndz" "$T/par/"
ip netns exec "${NETNS_PFX}rt" nft -f - <<NFT
table inet cut {
	chain forward {
		type filter hook forward priority -1; policy accept;
		ip saddr 10.78.1.0/24 ip daddr $PARENT tcp dport 3563 reject with tcp reset
	}
}
NFT
sleep 1.5
get c12 "$T/t2"
check "the parent cut off: the client still gets v1, byte-identical" \
	sh -c "[ \"\$(cat '$T/c12.rc')\" = 0 ] && cmp -s '$T/x.src' '$T/t2'"
poll 30 grep -q "site: recheck of x: .*; the held images are served (said once)" "$T/m1.log"
sleep 1.5
get c13 "$T/t3"
failed_ge2() { [ "$(counter recheck_failed)" -ge 2 ] 2>/dev/null; }
poll 30 failed_ge2
nf=$(counter recheck_failed) said=$(grep -c 'site: recheck of x' "$T/m1.log")
check "... again after another recheck (v1; $nf rechecks failed, said $said time)" \
	sh -c "[ \"\$(cat '$T/c13.rc')\" = 0 ] && cmp -s '$T/x.src' '$T/t3' &&
	       [ '$nf' -ge 2 ] && [ '$said' = 1 ]"
nu=$(counter site_updates)
check "... and nothing was updated ($nu updates)" sh -c "[ '$nu' = 0 ] &&
	! cmp -s '$T/cache1/x.ndz' '$T/par/x.ndz'"

# 3. the link back: the next GET (answered from the cache) makes the site fetch the new
# version, only its changed chunks; the next client gets v2
ip netns exec "${NETNS_PFX}rt" nft delete table inet cut
sleep 1.5
from=$(( $(wc -l <"$T/par.log") + 1 ))
get c11 "$T/t4"
check "a GET at the site is answered (v1 or v2, whole)" \
	sh -c "[ \"\$(cat '$T/c11.rc')\" = 0 ] && { cmp -s '$T/x.src' '$T/t4' || cmp -s '$T/x2.src' '$T/t4'; }"
poll 30 grep -q "site: x updated: $chunks chunks" "$T/m1.log"
check "the site fetched x's new version from the parent: only its $nchanged changed chunks" \
	grep -q "site: x updated: $chunks chunks; $nchanged chunks, $(( nchanged * 1048576 )) bytes from the parent, 0 refused, $(( chunks - nchanged )) reused" "$T/m1.log"
served "$from" >"$T/got"
check "... the parent served it exactly those chunks ($(tr '\n' ' ' <"$T/got"))" cmp -s "$T/got" "$T/changed"
nu=$(counter site_updates)
check "... its copy is the parent's, byte for byte, and counted ($nu updates)" \
	sh -c "cmp -s '$T/par/x.ndz' '$T/cache1/x.ndz' && [ '$nu' = 1 ]"
get c12 "$T/t5"
check "the next client gets v2, byte-identical" \
	sh -c "[ \"\$(cat '$T/c12.rc')\" = 0 ] && cmp -s '$T/x2.src' '$T/t5'"

# 4. an admin uploads x anew at the parent (the image alone, unsigned): the signed
# index and manifest of the version it replaces go (the parent makes the new one's
# index as it stores the upload), and the site gets the new version
cp "$T/x2.src" "$T/x3.src"
head -c 102400 /dev/urandom | dd of="$T/x3.src" bs=1024 seek=2000 conv=notrunc 2>/dev/null
cp "$T/par/x.ndz.index" "$T/x2.index"
in_ns par "$IMAGEZIP" -q -r --upload 10.78.0.1:x "$T/x3.src" 2>"$T/up.err"; rc=$?
check "x uploaded anew at the parent: its old manifest gone, the index beside it its own ($rc: $(cat "$T/up.err"))" \
	sh -c "[ $rc = 0 ] && [ ! -e '$T/par/x.ndz.manifest' ] && [ -s '$T/par/x.ndz.index' ] &&
	       ! cmp -s '$T/x2.index' '$T/par/x.ndz.index'"
sleep 1.5
get c13 "$T/t6"
poll 30 sh -c "[ \"\$(grep -c 'site: x updated' '$T/m1.log')\" = 2 ]"
n3=$(sed -n "s/.*site: x updated: $chunks chunks; \([0-9]*\) chunks, .*/\1/p" "$T/m1.log" | tail -n 1)
check "the site fetched the uploaded version, not all of it ($n3 of $chunks chunks)" \
	sh -c "[ -n '$n3' ] && [ '$n3' -ge 1 ] && [ '$n3' -lt $chunks ] &&
	       cmp -s '$T/par/x.ndz' '$T/cache1/x.ndz'"
get c11 "$T/t7"
check "the next client gets it, byte-identical" \
	sh -c "[ \"\$(cat '$T/c11.rc')\" = 0 ] && cmp -s '$T/x3.src' '$T/t7'"

kill -TERM $MPID_par $MPID_m1
wait $MPID_par; r0=$?; wait $MPID_m1; r1=$?
check "the masters stop on SIGTERM ($r0 $r1)" [ "$r0$r1" = 00 ]
check "no sanitizer report in the masters' logs" \
	sh -c "! grep -l 'Sanitizer\|runtime error' '$T/par.log' '$T/m1.log'"
[ -n "${SITES_KEEP:-}" ] && cp "$T"/*.log "$SITES_KEEP"/
done_testing
