#!/bin/sh
# Sites, updates (doc/SITES.md, "Updates"): an image replaced at the parent under the
# same name reaches a site that holds the old version. A GET at the site after its
# site-recheck interval is answered from the cache and makes the site ask the parent
# for the image's index; a changed index fetches the new version (only the chunks the
# site does not hold), which replaces the old one for new sessions. With the parent cut
# off, the site keeps serving what it holds and says so once. A recheck asks the
# parent for the image's identity (80 bytes), the index only when it changed; an older
# parent without that request is asked for the index, said once. A site with a store
# and a parent asks the parent when the store fails.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require nft python3 curl

. "$NDZ_TOP/tests/sitesnet.sh"
sites_net 1 || { not_ok "the namespaces: a parent net, a site net, a router"; done_testing; }
[ -x "$IMAGEZIP" ] || skip_all "imagezip not built"

mkdir -p "$T/par" "$T/new"
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
changed_chunks "$T/par/x.ndz.index" "$T/new/x.ndz.index"
check "x2 differs from x in some chunks, not all ($nchanged of $chunks)" \
	sh -c "[ $nchanged -ge 1 ] && [ $nchanged -lt $chunks ]"

cat >"$T/par.conf" <<CONF
upload-dir $T/par allow 10.78.0.0/16 upload 10.78.0.1
CONF
site_conf 1 "parent $PARENT" "site-report 3600
site-recheck 1
http-listen 127.0.0.1:8080"
SITES_V=-vv sites_start 1

# get HOST TARGET [IMAGE]: frisbee -M the site's master for x (or IMAGE); its status in
# $T/HOST.rc
get() {
	rm -f "$T/$1.rc"
	fclient "$1" 1 "${3:-x}" "$2"
	mc_wait
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
# asked WHAT FROM: the parent's log from line FROM on: how often it served x's WHAT
# (identity, index) to the site
asked() { tail -n +"$2" "$T/par.log" | grep -c "site 10\.78\.1\.1: x $1: [0-9]* bytes served"; }
# said N PATTERN: the site's log has N lines matching PATTERN (grep)
said() { [ "$(grep -c "$2" "$T/m1.log")" -ge "$1" ]; }

# 1. the site fetches x and serves it
get c11 "$T/t1"
check "x at the site: a byte-identical target (v1)" \
	sh -c "[ \"\$(cat '$T/c11.rc')\" = 0 ] && cmp -s '$T/x.src' '$T/t1'"

# 1b. x unchanged: a GET after the interval makes the site recheck it, which costs the
# image's identity (80 bytes), not its index
sleep 1.5
from=$(( $(wc -l <"$T/par.log") + 1 ))
nsame=$(grep -c 'site: x: the same at' "$T/m1.log")
get c12 "$T/t1b"
poll 30 said $(( nsame + 1 )) 'site: x: the same at'
ni=$(asked identity "$from") nx=$(asked index "$from")
check "a recheck of x, unchanged: the parent sent its identity ($ni), not its index ($nx)" \
	sh -c "[ \"\$(cat '$T/c12.rc')\" = 0 ] && cmp -s '$T/x.src' '$T/t1b' && [ '$ni' -ge 1 ] && [ '$nx' = 0 ] &&
	       [ \$(grep -c 'site: x: the same at' '$T/m1.log') -gt $nsame ]"

# 2. x replaced at the parent (same name), and the parent cut off: the site serves
# what it holds, and says once that it could not ask
mv "$T/new/x.ndz.index" "$T/new/x.ndz.manifest" "$T/new/x.ndz" "$T/par/"
sites_cut 1
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
sites_uncut
sleep 1.5
from=$(( $(wc -l <"$T/par.log") + 1 ))
get c11 "$T/t4"
check "a GET at the site is answered (v1 or v2, whole)" \
	sh -c "[ \"\$(cat '$T/c11.rc')\" = 0 ] && { cmp -s '$T/x.src' '$T/t4' || cmp -s '$T/x2.src' '$T/t4'; }"
poll 30 grep -q "site: x updated: $chunks chunks" "$T/m1.log"
check "the site fetched x's new version from the parent: only its $nchanged changed chunks" \
	grep -q "site: x updated: $chunks chunks; $nchanged chunks, $(( nchanged * 1048576 )) bytes from the parent, 0 refused, $(( chunks - nchanged )) reused" "$T/m1.log"
served 1 x "$from" >"$T/got"
check "... the parent served it exactly those chunks ($(tr '\n' ' ' <"$T/got"))" cmp -s "$T/got" "$T/changed"
ni=$(asked identity "$from") nx=$(asked index "$from")
check "... its identity told the change, then its index came ($ni identities, $nx indexes)" \
	sh -c "[ '$ni' -ge 1 ] && [ '$nx' -ge 1 ]"
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

# 5. an older parent, which knows no identity request (it answers MALFORMED and closes,
# as a master before it did): the site asks it once, then for the index at each
# recheck, and says so once. The older parent: the SITE requests it knew (index,
# manifest, chunks) answered from $T/par by a script beside the parent, each logged
cat >"$T/oldparent.py" <<'PY'
import os, socket, struct, sys, threading
d, log = sys.argv[1], open(sys.argv[2], 'a', buffering=1)
def reply(c, rid, status, body=b''):
    c.sendall(struct.pack('<IBBHIQ', 0x435a444e, 1, 0x88, status, rid, len(body)) + body)
def serve(c):
    with c:
        while True:
            h = b''
            while len(h) < 24:
                k = c.recv(24 - len(h))
                if not k:
                    return
                h += k
            magic, ver, typ, n, rid, what, _, first, count = struct.unpack('<IBBHIB3sII', h)
            name = c.recv(n).decode()
            log.write('%s %d\n' % (name, what))
            path = os.path.join(d, name + '.ndz')
            if what not in (1, 2, 3):      # a request it does not know: MALFORMED, closed
                reply(c, rid, 5)
                return
            if what == 3:
                with open(path, 'rb') as f:
                    f.seek(first << 20)
                    reply(c, rid, 0, f.read(count << 20))
                continue
            try:
                reply(c, rid, 0, open(path + ('.index' if what == 1 else '.manifest'), 'rb').read())
            except FileNotFoundError:
                reply(c, rid, 1)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(('10.78.0.1', 3564))
s.listen(8)
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
in_ns par python3 "$T/oldparent.py" "$T/par" "$T/old.log" 2>"$T/old.err" &
OLDPID=$!
at_exit "kill $OLDPID 2>/dev/null"
wait_until 5 sh -c "ip netns exec '${NETNS_PFX}par' ss -ltn | grep -q '10.78.0.1:3564 '"
sed -i "s/^parent .*/parent $PARENT:3564/" "$T/site1.conf"
kill -HUP "$MPID_m1"
wait_until 5 sh -c "[ \$(grep -c 'site1.conf reloaded' '$T/m1.log') -ge 1 ]"
nsame=$(grep -c 'site: x: the same at' "$T/m1.log") mfrom=$(( $(wc -l <"$T/m1.log") + 1 ))
for k in 1 2 3; do
	sleep 1.5
	get c12 "$T/t8"
	poll 30 said $(( nsame + k )) 'site: x: the same at'
done
nident=$(grep -c '^x 5$' "$T/old.log") nindex=$(grep -c '^x 1$' "$T/old.log")
nsaid=$(grep -c "site: x: parent $PARENT:3564: no identity requests (an older master); its rechecks ask for the whole index (said once)" "$T/m1.log")
check "an older parent: asked its identity once ($nident), then the index at each of 3 rechecks ($nindex), said once ($nsaid)" \
	sh -c "[ '$nident' = 1 ] && [ '$nindex' = 3 ] && [ '$nsaid' = 1 ] &&
	       [ \$(grep -c 'site: x: the same at $PARENT:3564' '$T/m1.log') = 3 ]"
check "... no error said, nothing updated, the client served" \
	sh -c "! tail -n +$mfrom '$T/m1.log' | grep -q 'recheck of x\|x: .*again in' && [ \"\$(cat '$T/c12.rc')\" = 0 ] &&
	       cmp -s '$T/x3.src' '$T/t8' && [ \$(grep -c 'site: x updated' '$T/m1.log') = 2 ]"
kill "$OLDPID"

# 6. a store and a parent: the store first, the parent when the store fails (here: no
# store listens at its address); said once. y: a new image only the parent has
MC_ZIP_OPTS='' mc_image y 2 y || not_ok "make image y"
mv "$T/y.ndz" "$T/par/"
kill -HUP "$MPID_par"
wait_until 5 sh -c "[ \$(grep -c 'par.conf reloaded' '$T/par.log') -ge 1 ]"
printf 'access-key k\nsecret-key s\n' >"$T/cred" && chmod 600 "$T/cred"
cat >>"$T/site1.conf" <<CONF
store http://$PARENT:1
store-bucket ndz
store-credentials $T/cred
CONF
sed -i "s/^parent .*/parent $PARENT/" "$T/site1.conf"
kill -HUP "$MPID_m1"
wait_until 5 sh -c "[ \$(grep -c 'site1.conf reloaded' '$T/m1.log') -ge 2 ]"
get c13 "$T/t9" y
check "a store that fails and a parent: y from the parent, byte-identical" \
	sh -c "[ \"\$(cat '$T/c13.rc')\" = 0 ] && cmp -s '$T/y.src' '$T/t9' &&
	       grep -q 'site: y fetched: ' '$T/m1.log' && cmp -s '$T/par/y.ndz' '$T/cache1/y.ndz'"
sleep 1.5
get c11 "$T/t10" y
poll 30 said 1 "site: y: the same at $PARENT\$"
nsaid=$(grep -c "the store failed (store http://$PARENT:1/ndz: .*); asking the parent $PARENT (said once until the store answers)" "$T/m1.log")
check "... and rechecked there; the store's failure said once ($nsaid)" \
	sh -c "[ '$nsaid' = 1 ] && [ \"\$(cat '$T/c11.rc')\" = 0 ] && cmp -s '$T/y.src' '$T/t10'"

sites_stop
[ -n "${SITES_KEEP:-}" ] && cp "$T"/*.log "$SITES_KEEP"/
done_testing
