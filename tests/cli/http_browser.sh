#!/bin/sh
# The master's status page (lib/mserve/http) in a real browser, headless Chromium,
# during a real transfer in the namespace LAN: the DOM after the page's script ran
# names the session's image, its group and its receiver (filled in from
# /status.json: the static page has no table rows), the client's progress, the
# lab's nodes with their task and last result (the client tied to its node by its
# address), and a screenshot is taken.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_usable || skip_all "network namespaces, veth, bridge or nft unavailable (needs root)"
CHROMIUM=$(command -v chromium || command -v chromium-browser) ||
	skip_all "chromium missing (Debian package chromium, tests/install-deps.sh)"
MFRISBEED="$NDZ_BIN/mfrisbeed"
SRV=10.77.0.1 HP=8081
netns_lan && netns_host srv 1 && netns_host c1 11 || { not_ok "namespace LAN"; done_testing; }
mc_image a 8 a || { not_ok "make image a"; done_testing; }
cat >"$T/m.conf" <<CONF
pool 239.192.8.0/29
ports 5500-5507
idle-timeout 3
image a $T/a.ndz allow 10.77.0.0/24 rate 4M
http-listen 127.0.0.1:$HP
CONF
ip netns exec "${NETNS_PFX}srv" "$MFRISBEED" -c "$T/m.conf" -r "$T/run" 2>>"$T/m.log" &
MPID=$!
at_exit "kill $MPID 2>/dev/null"
# browser NAME ARGS...: headless Chromium in srv, on the page, its own profile
browser() {
	_b=$1; shift
	HOME="$T/home" timeout 60 ip netns exec "${NETNS_PFX}srv" "$CHROMIUM" --headless \
		--no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
		--user-data-dir="$T/profile-$_b" --virtual-time-budget=5000 "$@" \
		"http://127.0.0.1:$HP/" 2>>"$T/chromium.log"
}
mkdir -p "$T/home"
# a browser that cannot start here (no display libraries, a kernel it dislikes) skips
browser probe --dump-dom >"$T/probe.html" || true
grep -q '<title>mfrisbeed</title>' "$T/probe.html" ||
	skip_all "chromium does not run here: $(tail -1 "$T/chromium.log")"
# a transfer at 4 Mbit/s: about 16 s, the page is read while it runs
( in_ns c1 "$FRISBEE" $MC_RAW -M "$SRV" -I a -T 30 "$T/out1" 2>"$T/c1.log"; echo $? >"$T/c1.rc" ) &
C1=$!
wait_until 10 in_ns c1 sh -c "'$MFRISBEED' --status '$SRV' | grep -q '\"receivers\": 1, '"
# the lab: pc1 with a reload pending, pc2 with a result (it asked and reported ok)
CTL="$NDZ_BIN/ndzctl -m $T/run/admin"
M1=52:54:00:00:00:01 M2=52:54:00:00:00:02
$CTL nodes add $M1 pc1 room >/dev/null && $CTL nodes add $M2 pc2 room >/dev/null &&
	$CTL reload pc1 a --zero >/dev/null && $CTL reload pc2 a >/dev/null &&
	in_ns c1 "$NDZ_BIN/ndzctl" -m "$SRV" ask $M2 >"$T/ask.out" &&
	in_ns c1 "$NDZ_BIN/ndzctl" -m "$SRV" report $M2 ok 8388608 2000 0 ||
	not_ok "set up the lab's nodes ($(cat "$T/ask.out"))"
# the client's progress comes once a second: wait for a first report
wait_until 10 in_ns c1 sh -c "'$MFRISBEED' --status '$SRV' | grep -q '\"chunks_done\": [1-9]'"
browser dom --dump-dom >"$T/dom.html"
# the session's row: image, group, port, clients, receivers (cells the script made)
row=$(grep -o '<tr><td>a</td><td>239\.192\.8\.[0-9]*</td><td>[0-9]*</td><td>[0-9]*</td><td>[0-9]*</td>' "$T/dom.html")
check "the page's script filled in the session: image a, its group, 1 client, 1 receiver ($row)" \
	sh -c "echo '$row' | grep -q '<td>5500</td><td>1</td><td>1</td>\$'"
check "... and the images table and the counters" \
	sh -c "grep -q '<tr><td>a</td><td>[0-9.]* [kM]*B (disk [0-9.]* [kM]*B)</td>.*<td>$T/a.ndz</td></tr>' '$T/dom.html' && grep -q '<td>sessions_started</td><td>1</td>' '$T/dom.html'"
check "... and says it was updated ('1 sessions; updated')" grep -q '1 sessions; updated' "$T/dom.html"
# pc2 asked from c1's address: the client there is pc2's, its progress the node's
crow=$(grep -o '<tr><td>a</td><td>10\.77\.0\.11</td><td>[^<]*</td><td>[a-z]*</td><td>[^<]*</td>' "$T/dom.html")
check "... the client's row: its address, tied to node pc2, active, no second progress figure ($crow)" \
	sh -c "echo '$crow' | grep -q '<td>pc2 (52:54:00:00:00:02)</td><td>active</td><td>as its node</td>\$'"
check "... the node with a pending reload, in the tasks" grep -q \
	"<tr id=\"task-pc1\"><td>pc1</td><td>reload a (zero)</td><td><span>pending (the node has not asked yet)</span></td>" "$T/dom.html"
check "... and the node's last result, in the nodes and its history" sh -c "grep -q \
	'<tr id=\"node-pc2\"><td>pc2</td><td>$M2</td><td>room</td><td>10.77.0.11</td><td><span>idle</span></td><td><span class=\"ok\">ok: reload a, 8.4 MB in 2 s</span></td><td>a</td><td><details><summary>1 result</summary>' '$T/dom.html'"
ip netns exec "${NETNS_PFX}srv" python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$HP/', timeout=5).read().decode())" >"$T/static.html"
check "the page as served has no table rows: they came from the script" \
	sh -c "grep -q 'id=\"sessions\"' '$T/static.html' && ! grep -q '<td>' '$T/static.html'"
browser shot --screenshot="$T/page.png" --window-size=1200,900 >/dev/null
check "a screenshot of the page ($T/page.png, $(wc -c <"$T/page.png" 2>/dev/null) bytes)" \
	sh -c "[ \"\$(head -c 8 '$T/page.png' | od -An -tx1 | tr -d ' ')\" = 89504e470d0a1a0a ]"
# NDZ_SHOT=FILE keeps the screenshot for people to look at
[ -z "${NDZ_SHOT:-}" ] || cp "$T/page.png" "$NDZ_SHOT"
wait $C1
check "the transfer completes byte-identical" \
	sh -c "[ \"\$(cat '$T/c1.rc')\" = 0 ] && cmp -s '$T/a.src' '$T/out1'" || cat "$T/c1.log"
done_testing
