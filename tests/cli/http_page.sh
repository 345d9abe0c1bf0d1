#!/bin/sh
# The master's page run as an admin runs the lab from it, in a real browser
# (Debian's Chromium driven by puppeteer-core from npm; no browser is downloaded):
# nodes defined from the page, a group reload started with the admin token, the
# group waiting "k of n" while fake nodes (tests/helpers/labnode) ask, a real
# frisbee in the first node's namespace tied to its node, the bars moving as the
# nodes report, the history filling, one task cancelled, and an action without the
# token refused (403, logged with the address). Then /metrics, parsed by
# prometheus_client, counts the lab. Screenshots are kept in build/test-logs/.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_usable || skip_all "network namespaces, veth, bridge or nft unavailable (needs root)"
CHROMIUM=$(command -v chromium || command -v chromium-browser) ||
	skip_all "chromium missing (Debian package chromium, tests/install-deps.sh)"
command -v node >/dev/null && command -v npm >/dev/null ||
	skip_all "node or npm missing (tests/install-deps.sh)"
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
$PY -c 'import prometheus_client' 2>/dev/null ||
	skip_all "python3-prometheus-client missing (tests/install-deps.sh)"
# puppeteer-core once into the plain build's cache, for every build (one at a time:
# flock); never a browser download
PUP="$NDZ_TOP/build/test-cache/puppeteer"
mkdir -p "$PUP" || skip_all "cannot make $PUP"
PUP="$PUP" flock "$PUP" sh -c '[ -f "$PUP/node_modules/puppeteer-core/package.json" ] ||
	( cd "$PUP" && PUPPETEER_SKIP_DOWNLOAD=1 timeout 300 npm install --no-audit --no-fund \
		--loglevel=error puppeteer-core@25 )' >"$T/npm.log" 2>&1 ||
	skip_all "npm cannot install puppeteer-core (registry unreachable?): $(tail -1 "$T/npm.log")"
SHOTS="$NDZ_BUILD/test-logs/http_page"
rm -rf "$SHOTS" && mkdir -p "$SHOTS"
MFRISBEED="$NDZ_BIN/mfrisbeed"
NODE="$NDZ_BUILD/tests/helpers/labnode"
SRV=10.77.0.1 HP=8082
netns_lan && netns_host srv 1 && netns_host n1 11 && netns_host n2 12 && netns_host n3 13 ||
	{ not_ok "namespace LAN"; done_testing; }
mc_image a 8 a || { not_ok "make image a"; done_testing; }
echo "0123456789abcdef0123456789abcdef" >"$T/token"
cat >"$T/m.conf" <<CONF
pool 239.192.9.0/29
ports 5600-5607
idle-timeout 3
image a $T/a.ndz allow 10.77.0.0/24 rate 4M
group-window 60
node-timeout 120
wake-interface eth0
http-listen 127.0.0.1:$HP
token-file $T/token
CONF
ip netns exec "${NETNS_PFX}srv" "$MFRISBEED" -v -c "$T/m.conf" -r "$T/run" 2>>"$T/m.log" &
MPID=$!
at_exit "kill $MPID 2>/dev/null; cp '$T/m.log' '$SHOTS/mfrisbeed.log' 2>/dev/null"
wait_until 5 sh -c "ip netns exec '${NETNS_PFX}srv' ss -ltn | grep -q ':$HP '" ||
	{ not_ok "the master listens for HTTP"; cat "$T/m.log"; done_testing; }

# The driver: each step's outcome as "ok DESC" or "not ok DESC" on its stdout; what
# the nodes do comes from here too (labnode and frisbee run in their namespaces).
cat >"$T/drive.cjs" <<'JS'
'use strict';
const puppeteer = require(process.env.PUP + '/node_modules/puppeteer-core');
const { execFileSync, spawn } = require('child_process');
const E = process.env, url = 'http://127.0.0.1:' + E.HP + '/';
const M = { pc1: '52:54:00:00:00:01', pc2: '52:54:00:00:00:02', pc3: '52:54:00:00:00:03' };
const NS = { pc1: 'n1', pc2: 'n2', pc3: 'n3' };
let failed = 0;
function check(ok, desc) { console.log((ok ? 'ok ' : 'not ok ') + desc); if (!ok) failed++; }
function node(name, ...args) {      // labnode in the node's namespace: its answer
  return execFileSync('ip', ['netns', 'exec', E.NETNS_PFX + NS[name], E.LABNODE, E.SRV, M[name],
    ...args], { encoding: 'utf8', timeout: 20000 }).trim();
}
const sleep = ms => new Promise(r => setTimeout(r, ms));
async function until(page, f, arg, ms) {   // f(arg) in the page true within ms
  try { await page.waitForFunction(f, { timeout: ms || 15000, polling: 200 }, arg); return true; }
  catch (e) { return false; }
}
const text = (page, sel) => page.$eval(sel, e => e.textContent).catch(() => '');
const shot = (page, name) => page.screenshot({ path: E.SHOTS + '/' + name + '.png', fullPage: true });
async function click(page, sel) { await page.click(sel); }
async function type(page, sel, v) { await page.$eval(sel, e => { e.value = ''; }); await page.type(sel, v); }
async function msgAfter(page, sel) {   // click, then the action's answer
  await page.$eval('#msg', e => { e.textContent = ''; });
  await click(page, sel);
  await until(page, () => { const t = document.getElementById('msg').textContent; return t && t !== '…'; });
  return text(page, '#msg');
}
(async () => {
  const browser = await puppeteer.launch({ executablePath: E.CHROMIUM, headless: true,
    userDataDir: E.T + '/profile', args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
    '--no-first-run', '--window-size=1400,1000'], defaultViewport: { width: 1400, height: 1000 } });
  try {
    const page = await browser.newPage();
    await page.goto(url, { waitUntil: 'load' });
    check(await until(page, () => /updated/.test(document.getElementById('state').textContent)),
      'the page loads and reads /status.json');

    // nodes defined from the page, with the token
    await type(page, '#tok', E.TOKEN);
    let m = '';
    for (const name of ['pc1', 'pc2', 'pc3']) {
      await type(page, '#add-mac', M[name]); await type(page, '#add-name', name);
      await type(page, '#add-group', 'room');
      m += (await msgAfter(page, '#add-btn')) + '; ';
    }
    check(/node 52:54:00:00:00:03 added/.test(m), 'three nodes defined from the page (' + m + ')');
    check(await until(page, () => ['pc1', 'pc2', 'pc3'].every(n => document.getElementById('node-' + n))),
      '... and listed in the nodes table');

    // without the token: refused, nothing set
    await type(page, '#tok', '');
    await type(page, '#rl-target', 'room');
    await page.select('#rl-image', 'a');
    m = await msgAfter(page, '#rl-btn');
    check(/^403: an admin token is needed/.test(m), 'a reload without the token is refused: 403 (' + m + ')');
    await sleep(2500);
    check(!(await page.$('#task-pc1')), '... and sets no task');

    // the group reload with the token
    await type(page, '#tok', E.TOKEN);
    m = await msgAfter(page, '#rl-btn');
    check(m === 'reload a: 3 nodes', 'a group reload with the token: 3 nodes (' + m + ')');
    check(await until(page, () => document.getElementById('task-pc3') &&
      /pending/.test(document.getElementById('task-pc3').textContent)),
      '... the tasks list shows them pending');
    const byCell = await page.$eval('#task-pc1', e => e.cells[4].textContent);
    check(byCell === 'http 127.0.0.1', '... set by whom: ' + byCell);

    // the nodes ask: the first two wait for the group, k of n
    const a1 = node('pc1', 'ask'), a2 = node('pc2', 'ask');
    check(/^wait /.test(a1) && /^wait /.test(a2), 'pc1 and pc2 are told to wait (' + a1 + ', ' + a2 + ')');
    check(await until(page, () => /waiting for the group: 2 of 3/.test(document.getElementById('task-pc1').textContent)),
      '... the page says pc1 waits for its group: 2 of 3');
    await shot(page, '1-waiting');
    const a3 = node('pc3', 'ask');
    check(a3 === 'reload a 0', 'the third asks and the group starts (' + a3 + ')');
    node('pc1', 'ask'); node('pc2', 'ask');

    // a real frisbee as pc1 would run it, in pc1's namespace: its client row names pc1
    const fr = spawn('ip', ['netns', 'exec', E.NETNS_PFX + 'n1', E.FRISBEE, ...E.MC_RAW.split(' ').filter(x => x),
      '-M', E.SRV, '-I', 'a', '-T', '60', E.T + '/out1'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let frErr = ''; fr.stderr.on('data', d => { frErr += d; });
    const frDone = new Promise(r => fr.on('exit', code => r(code)));
    check(await until(page, () => [...document.querySelectorAll('#clients tr')].some(tr =>
      tr.cells[1].textContent === '10.77.0.11' && /^pc1 \(52:54:00:00:00:01\)$/.test(tr.cells[2].textContent) &&
      tr.cells[4].textContent === 'as its node'), null, 30000),
      "the real frisbee's client row is tied to node pc1 and shows no second progress figure");

    // the bars move as the nodes report
    const total = 8 * 1048576, width = n => page.$eval('#task-' + n + ' .bar > div', e => parseFloat(e.style.width)).catch(() => -1);
    node('pc1', 'progress', String(total / 4), String(total));
    node('pc2', 'progress', String(total / 2), String(total));
    check(await until(page, () => /25\.0 %/.test(document.getElementById('task-pc1').textContent)),
      "pc1's bar shows 25 %");
    const w1 = await width('pc1');
    await sleep(1000);
    node('pc1', 'progress', String(total * 3 / 4), String(total));
    check(await until(page, () => /75\.0 %/.test(document.getElementById('task-pc1').textContent)),
      "... then 75 %");
    await sleep(2200);    // a second poll: a rate and the time left
    node('pc1', 'progress', String(total * 7 / 8), String(total));
    check(await until(page, () => /bit\/s, .* left/.test(document.getElementById('task-pc1').textContent)),
      "... with its rate and the time left (" + await text(page, '#task-pc1 .bar') + ')');
    const w2 = await width('pc1');
    check(w1 > 24 && w2 > w1, 'the bar moved: ' + w1 + '% then ' + w2 + '%');
    await shot(page, '2-running');

    // pc2 finishes: its history fills, with its time; pc3 is cancelled from its row
    check(node('pc2', 'ok', String(total), '2000', '0') === 'ok', 'pc2 reports ok');
    check(await until(page, () => { const d = document.querySelector('#node-pc2 details');
      return d && /^1 result/.test(d.querySelector('summary').textContent) &&
        /ok: reload a, 8\.4 MB in 2 s/.test(d.textContent) && /\d/.test(d.querySelector('li').textContent.split(':')[0]); }),
      "pc2's history has its result with its time");
    await page.click('#task-pc3 button.cancel');
    check(await until(page, () => !document.getElementById('task-pc3') &&
      /idle/.test(document.getElementById('node-pc3').textContent)), 'pc3 cancelled from its task row: idle');
    check(node('pc3', 'ask') === 'local', '... and told to boot local');

    // pc1 ends after its frisbee
    const code = await frDone;
    check(code === 0, 'the real frisbee in n1 completes (' + code + ' ' + frErr.slice(-200) + ')');
    check(node('pc1', 'ok', String(total), '9000', '0') === 'ok', 'pc1 reports ok');
    check(await until(page, () => !document.querySelector('#tasks tr[id^="task-"]') &&
      /^pc1reload adone.*9 s/.test(document.getElementById('done-pc1').textContent) &&
      /^pc2reload adone/.test(document.getElementById('done-pc2').textContent) &&
      /1 result/.test(document.querySelector('#node-pc1 details summary').textContent)),
      'no task left; pc1 and pc2 listed done, with how long they took; pc1 has its result');
    // a second reload of pc1 and a failure: two results, newest first
    await type(page, '#rl-target', 'pc1');
    m = await msgAfter(page, '#rl-btn');
    node('pc1', 'ask');
    node('pc1', 'fail', 'disk too small');
    check(await until(page, () => { const li = document.querySelectorAll('#node-pc1 li');
      return li.length === 2 && /failed: reload a: disk too small/.test(li[0].textContent) &&
        /ok: reload a/.test(li[1].textContent); }), "pc1's history: the failure, then the success");
    // the images table: ndzctl images info's facts, and who uses the image
    check(await until(page, path => [...document.querySelectorAll('#images tr')].some(tr =>
      tr.cells[0].textContent === 'a' && /^\d*$/.test(tr.cells[2].textContent) && tr.cells[8].textContent === path &&
      tr.cells[3].textContent === 'no' && tr.cells[6].textContent === 'pc1, pc2'), E.T + '/a.ndz', 20000),
      'the images table: chunks, signed, the nodes that use it');
    // the log tail has the refusal with the address
    check(await until(page, () => /refused: \(admin token\) 127\.0\.0\.1: POST \/lab/.test(document.getElementById('log').textContent)),
      "the page's log tail shows the refused action with its address");
    await page.evaluate(() => document.querySelectorAll('details').forEach(d => { d.open = true; }));
    await shot(page, '3-history');
  } catch (e) {
    check(false, 'the driver: ' + e);
  } finally {
    await browser.close();
  }
  process.exit(failed ? 1 : 0);
})();
JS

HOME="$T/home" PUP="$PUP" HP=$HP SRV=$SRV T="$T" SHOTS="$SHOTS" CHROMIUM="$CHROMIUM" \
	TOKEN="$(cat "$T/token")" LABNODE="$NODE" FRISBEE="$FRISBEE" MC_RAW="$MC_RAW" \
	NETNS_PFX="$NETNS_PFX" timeout 300 ip netns exec "${NETNS_PFX}srv" node "$T/drive.cjs" \
	>"$T/drive.out" 2>"$T/drive.err"
grep -q . "$T/drive.out" || { not_ok "the browser driver ran ($(tail -3 "$T/drive.err"))"; done_testing; }
while IFS= read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"not ok "*) not_ok "${line#not ok }" ;;
	esac
done <"$T/drive.out"
check "the master logged the refusal with the address" \
	grep -q "127.0.0.1.*POST /lab: access denied" "$T/m.log"
check "screenshots kept ($SHOTS)" sh -c "for f in 1-waiting 2-running 3-history; do
	[ \"\$(head -c 8 '$SHOTS/'\$f.png | od -An -tx1 | tr -d ' ')\" = 89504e470d0a1a0a ] || exit 1; done"

# the JSON API itself (doc/HTTP.md): what the page does not show
ip netns exec "${NETNS_PFX}srv" $PY - "http://127.0.0.1:$HP" "$(cat "$T/token")" >"$T/api.out" 2>&1 <<'PY'
import json, sys, urllib.request, urllib.error
base, tok = sys.argv[1], sys.argv[2]
def call(path, body=None, token=tok):
    req = urllib.request.Request(base + path, data=None if body is None else
                                 (body if isinstance(body, bytes) else json.dumps(body).encode()),
                                 method="GET" if body is None else "POST")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())
out = []
st, j = call("/image/a")
out.append("info %d %s %s" % (st, j["name"], j["from"]))
out.append("nope %d" % call("/image/nope")[0])
st, j = call("/lab", {"op": "image-info", "image": "a"})
out.append("post-info %d %s" % (st, j["info"]["name"]))
st, j = call("/lab", {"op": "wake", "node": "room"})
out.append("wake %d %s" % (st, j.get("woken")))
out.append("bad-json %d" % call("/lab", b"{op: reload")[0])
out.append("bad-op %d" % call("/lab", {"op": "format-disk", "node": "pc1"})[0])
out.append("bad-key %d" % call("/lab", {"op": "cancel", "node": "pc1", "disk": "sda"})[0])
out.append("no-node %d" % call("/lab", {"op": "cancel", "node": "pc9"})[0])
out.append("no-image %d" % call("/lab", {"op": "reload", "node": "pc2", "image": "nope"})[0])
out.append("taken %d" % call("/lab", {"op": "node-add", "mac": "52:54:00:00:00:09", "name": "pc1"})[0])
out.append("no-token %d" % call("/lab", {"op": "cancel", "node": "pc1"}, token="")[0])
print(" ".join(out))
PY
check "the JSON API: facts, wake, and its refusals ($(cat "$T/api.out"))" grep -qx \
	"info 200 a image nope 404 post-info 200 a wake 200 3 bad-json 400 bad-op 400 bad-key 400 no-node 404 no-image 404 taken 409 no-token 403" \
	"$T/api.out"

# /metrics: the lab counted, parsed by a real Prometheus text parser
ip netns exec "${NETNS_PFX}srv" $PY - "http://127.0.0.1:$HP/metrics" >"$T/metrics.out" 2>&1 <<'PY'
import sys, urllib.request
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(
    urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())}
def val(name, **labels):
    for f in fams.values():
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    raise KeyError(name + str(labels))
print("nodes idle=%d failed=%d reloads ok=%d failed=%d duration count=%d le10=%d sum=%.1f "
      "types %s %s %s" % (
    val("ndz_lab_nodes", state="idle"), val("ndz_lab_nodes", state="failed"),
    val("ndz_lab_reloads_total", result="ok"), val("ndz_lab_reloads_total", result="failed"),
    val("ndz_lab_reload_duration_seconds_count"),
    val("ndz_lab_reload_duration_seconds_bucket", le="10"),
    val("ndz_lab_reload_duration_seconds_sum"),
    fams["ndz_lab_nodes"].type, fams["ndz_lab_reloads"].type,
    fams["ndz_lab_reload_duration_seconds"].type))
PY
check "/metrics counts the lab: $(cat "$T/metrics.out")" grep -qx \
	"nodes idle=2 failed=1 reloads ok=2 failed=1 duration count=2 le10=2 sum=11.0 types gauge counter histogram" \
	"$T/metrics.out"
check "the master is still running" kill -0 "$MPID"
kill -TERM "$MPID"; wait "$MPID"
check "mfrisbeed stops on SIGTERM" [ $? = 0 ]
check "the master's log has no sanitizer report" \
	sh -c "! grep -Eq 'ERROR: AddressSanitizer|runtime error|LeakSanitizer|WARNING: ThreadSanitizer' '$T/m.log'"
done_testing
