#!/bin/sh
# The master's HTTP endpoint (lib/mserve/http) with a real mfrisbeed serving a real
# image to real frisbees in the namespace LAN: /status.json and /metrics during a
# transfer (the metrics parsed by prometheus_client's parser and checked against the
# JSON), the token on actions, and a hostile crowd (garbage, a wrong method, a huge
# header, a client sending one byte a second, 1,000 connections at once) while the
# multicast and control paths keep working. The page in a browser: http_browser.sh.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_usable || skip_all "network namespaces, veth, bridge or nft unavailable (needs root)"
# Debian's python3 (python3-prometheus-client), not one a PATH puts first
PY=python3
[ -x /usr/bin/python3 ] && PY=/usr/bin/python3
$PY -c 'import prometheus_client.parser' 2>/dev/null ||
	skip_all "python3-prometheus-client missing (tests/install-deps.sh)"
MFRISBEED="$NDZ_BIN/mfrisbeed"
SRV=10.77.0.1 HP=8080
netns_lan && netns_host srv 1 || { not_ok "namespace LAN"; done_testing; }
for h in c1 c2 c3 c4; do netns_host "$h" $(( 10 + ${h#c} )) || not_ok "host $h"; done
mc_image a 6 a || { not_ok "make image a"; done_testing; }
printf 's3cret-token-%s\n' "$$" >"$T/token"
chmod 600 "$T/token"
cat >"$T/m.conf" <<CONF
pool 239.192.7.0/29
ports 5400-5407
idle-timeout 3
image a $T/a.ndz allow 10.77.0.0/24 rate 12M
http-listen 0.0.0.0:$HP
token-file $T/token
CONF

# the helper: HTTP by hand (the hostile parts need raw sockets anyway)
cat >"$T/h.py" <<'PY'
import json, resource, socket, sys, time, urllib.request, urllib.error
from prometheus_client.parser import text_string_to_metric_families

def get(url, token=None, method="GET"):
    req = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    if token is not None:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

def raw(host, port, data, wait=5):
    s = socket.create_connection((host, port), timeout=wait)
    try:
        s.sendall(data)
    except OSError:
        pass
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except OSError:
        pass
    s.close()
    return out.decode("latin-1")

cmd, base = sys.argv[1], sys.argv[2]
host, port = base.split("//")[1].split(":")
port = int(port)
if cmd == "metrics":
    # /metrics parsed, then checked against /status.json asked right after
    st, text = get(base + "/metrics")
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    st2, js = get(base + "/status.json")
    j = json.loads(js)
    def val(name, **labels):
        for f in fams.values():
            for s in f.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    return s.value
        raise KeyError(name + str(labels))
    c = j["counters"]
    bad = []
    def same(what, a, b):
        if a != b:
            bad.append("%s: %s vs %s" % (what, a, b))
    same("status", (st, st2), (200, 200))
    same("sessions", val("ndz_sessions"), len(j["sessions"]))
    for s in j["sessions"]:
        same("receivers of " + s["image"], val("ndz_session_receivers", image=s["image"]),
             s["receivers"])
        same("clients of " + s["image"], val("ndz_session_clients_total", image=s["image"]),
             s["clients"])
        b = val("ndz_session_bytes_sent_total", image=s["image"])
        if not 0 < b <= s["bytes_sent"]:
            bad.append("bytes sent %s vs %s" % (b, s["bytes_sent"]))
    same("gets", val("ndz_requests_total", type="get"), c["get"])
    same("ok", val("ndz_replies_total", result="ok"), c["ok"])
    same("started", val("ndz_sessions_started_total"), c["sessions_started"])
    same("uploads", val("ndz_uploads_total", result="stored"), c["uploads_stored"])
    same("config reloads", val("ndz_config_reloads_total", result="ok"), c["config_reloads"])
    for k in ("malformed", "dropped", "rate_limited", "denied", "tcp_denied", "tcp_busy"):
        same(k, val("ndz_failures_total", reason=k), c[k])
    for f in fams.values():
        if not f.name.startswith("ndz_") or not f.documentation or f.type == "unknown":
            bad.append("no HELP/TYPE or prefix: " + f.name)
    print("; ".join(bad) if bad else "ok %d families, %d sessions" % (len(fams), len(j["sessions"])))
elif cmd == "actions":
    # POST without a token, with a bad one, with the right one
    tok = open(sys.argv[3]).read().strip()
    r = [get(base + "/reload-config", method="POST")[0],
         get(base + "/reload-config", "wrong", method="POST")[0],
         get(base + "/reload-config", tok + "x", method="POST")[0],
         get(base + "/status.json", tok, method="DELETE")[0],
         get(base + "/reload-config", tok, method="POST")[0]]
    print(" ".join(map(str, r)))
elif cmd == "garbage":
    r = [raw(host, port, b"\x00\xff garbage \r\n\r\n")[:12],
         raw(host, port, b"PUT / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")[:12],
         raw(host, port, b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (100 * 1024) +
             b"\r\nConnection: close\r\n\r\n")[:12]]
    print("|".join(x.strip() or "closed" for x in r))
elif cmd == "slow":
    # one byte a second, for argv[3] seconds
    s = socket.create_connection((host, port), timeout=30)
    req = b"GET /status.json HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"s" * 200
    for i in range(int(sys.argv[3])):
        try:
            s.send(req[i:i + 1])
        except OSError:
            print("closed after %d bytes" % i)
            sys.exit(0)
        time.sleep(1)
    print("open after %s bytes" % sys.argv[3])
elif cmd == "crowd":
    # 1,000 connections at once, held for argv[3] seconds
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    conns = []
    for i in range(1000):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect((host, port))
        except BlockingIOError:
            pass
        conns.append(s)
    open(sys.argv[4], "w").write("up\n")
    time.sleep(int(sys.argv[3]))
    print(len(conns))
elif cmd == "get":
    st, body = get(base + sys.argv[3])
    print(st)
    sys.stdout.write(body)
PY
H="$PY $T/h.py"
URL="http://$SRV:$HP"

ip netns exec "${NETNS_PFX}srv" "$MFRISBEED" -c "$T/m.conf" -r "$T/run" -v 2>>"$T/m.log" &
MPID=$!
at_exit "kill $MPID 2>/dev/null"
wait_until 5 sh -c "ip netns exec '${NETNS_PFX}srv' ss -ltn | grep -q ':$HP '"
check "mfrisbeed listens for HTTP on :$HP" sh -c "ip netns exec '${NETNS_PFX}srv' ss -ltn | grep -q ':$HP '"
in_ns c1 $H get "$URL" / >"$T/page"
check "GET / is the status page" sh -c "head -1 '$T/page' | grep -qx 200 && grep -q 'fetch(.status.json' '$T/page'"

# a transfer at 12 Mbit/s: about 4 s
( in_ns c1 "$FRISBEE" $MC_RAW -M "$SRV" -I a -T 20 "$T/out1" 2>"$T/c1.log"; echo $? >"$T/c1.rc" ) &
C1=$!
receiving() {
	in_ns c2 $H get "$URL" /status.json >"$T/st.json" 2>/dev/null
	grep -q '"image": "a", .*"receivers": 1, ' "$T/st.json"
}
wait_until 10 receiving
check "during the transfer /status.json shows the session with its receiver" receiving
out=$(in_ns c2 $H metrics "$URL" 2>&1)
check "/metrics parses (prometheus_client) and agrees with /status.json: $out" \
	sh -c "echo '$out' | grep -q '^ok .* 1 sessions'"
st=$(in_ns c2 "$MFRISBEED" --status "$SRV")
# the same keys at every level (values move on); the HTTP status adds the lab's section
same_keys() {
	python3 - "$1" "$2" <<'PY'
import json, sys
def shape(v):
    if isinstance(v, dict):
        return {k: shape(x) for k, x in v.items()}
    if isinstance(v, list):
        return [shape(x) for x in v]
    return type(v).__name__
a = json.loads(sys.argv[1])
b = json.loads(open(sys.argv[2]).read().split("\n")[1])
b.pop("lab", None)
sys.exit(0 if shape(a) == shape(b) else 1)
PY
}
status_same() { same_keys "$st" "$T/st.json" && grep -q '"lab": *{"nodes": *\[' "$T/st.json"; }
check "/status.json is the STATUS JSON (the same keys; and the lab's section)" status_same

# the hostile crowd, while the transfer goes on: a slow client, then 1,000 connections
in_ns c4 $H slow "$URL" 12 >"$T/slow" 2>&1 &
SLOW=$!
in_ns c3 $H crowd "$URL" 8 "$T/crowd.up" >"$T/crowd" 2>&1 &
CROWD=$!
wait_until 10 test -s "$T/crowd.up"
g=$(in_ns c2 $H garbage "$URL" 2>&1)
check "garbage, a wrong method and a 100 KiB header are refused ($g)" \
	sh -c "echo '$g' | grep -Eq '^(HTTP/1.1 400|closed)\|HTTP/1.1 405\|HTTP/1.1 (431|413|400)'"
r=$(in_ns c2 $H get "$URL" /status.json 2>/dev/null | head -1)
check "during the crowd another host is answered ($r)" [ "$r" = 200 ]
r=$(in_ns srv $H get "http://127.0.0.1:$HP" /metrics 2>/dev/null | head -1)
check "... and the master itself over 127.0.0.1 ($r)" [ "$r" = 200 ]
in_ns c2 "$MFRISBEED" --status "$SRV" >"$T/st2.json" 2>&1
check "the control port answers during the crowd (mfrisbeed --status)" grep -q '"sessions": \[' "$T/st2.json"
( in_ns c2 "$FRISBEE" $MC_RAW -M "$SRV" -I a -T 20 "$T/out2" 2>"$T/c2.log"; echo $? >"$T/c2.rc" ) &
C2=$!
a=$(in_ns c2 $H actions "$URL" "$T/token" 2>&1)
check "actions: 401 without a token, with a wrong one, one too long; 405 for DELETE; 200 with it ($a)" \
	[ "$a" = "401 401 401 405 200" ]
wait $C1 $C2
check "a frisbee that began before the crowd completes byte-identical" \
	sh -c "[ \"\$(cat '$T/c1.rc')\" = 0 ] && cmp -s '$T/a.src' '$T/out1'" || cat "$T/c1.log"
check "a frisbee that began during the crowd completes byte-identical" \
	sh -c "[ \"\$(cat '$T/c2.rc')\" = 0 ] && cmp -s '$T/a.src' '$T/out2'" || cat "$T/c2.log"
wait $SLOW $CROWD
check "the crowd held its 1,000 connections ($(cat "$T/crowd"))" grep -qx 1000 "$T/crowd"
# (its 1,000 connections may take the endpoint a moment to close: the per-host limit)
crowd_host_answered() {
	r=$(in_ns c3 $H get "$URL" /metrics 2>/dev/null | grep -c '^ndz_')
	[ "$r" -gt 20 ]
}
wait_until 15 crowd_host_answered
check "after the crowd the endpoint answers the crowd's host again ($r samples)" crowd_host_answered
in_ns c2 "$MFRISBEED" --status "$SRV" >"$T/st3.json"
check "the one good action took: 1 reload, 0 bad ones" \
	grep -q '"config_reloads": 1, "bad_config_reloads": 0,' "$T/st3.json"
check "the master is still running" kill -0 "$MPID"
kill -TERM "$MPID"; wait "$MPID"
check "mfrisbeed stops on SIGTERM with its HTTP endpoint" [ $? = 0 ]
check "the master's log has no sanitizer report" \
	sh -c "! grep -Eq 'ERROR: AddressSanitizer|runtime error|LeakSanitizer' '$T/m.log'"
done_testing
