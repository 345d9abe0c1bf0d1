#!/bin/sh
# The master's view of its sessions' clients: three clients, one finishes, one is killed
# mid-transfer (SIGKILL: no LEAVE), one runs on; --status shows each one's progress and
# state (done, lost, active), "receivers" counts only the active ones, and a refused
# request is in the master's log with its time, address and rule.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
out=$("$NDZ_BIN/mfrisbeed" --help)
check "mfrisbeed --help lists --syslog, --log-time and --lost-timeout" \
	sh -c "echo \"\$1\" | grep -q -- '--syslog' && echo \"\$1\" | grep -q -- '--log-time' &&
	       echo \"\$1\" | grep -q -- '--lost-timeout'" _ "$out"
out=$("$NDZ_BIN/frisbeed" --help)
check "frisbeed --help lists --syslog, --log-time and --lost-timeout" \
	sh -c "echo \"\$1\" | grep -q -- '--syslog' && echo \"\$1\" | grep -q -- '--log-time' &&
	       echo \"\$1\" | grep -q -- '--lost-timeout'" _ "$out"
netns_usable || skip_all "network namespaces, veth, bridge or nft unavailable (needs root)"
MFRISBEED="$NDZ_BIN/mfrisbeed"
SRV=10.77.0.1
netns_lan && netns_host srv 1 || { not_ok "namespace LAN"; done_testing; }
for i in 1 2 3; do netns_host "c$i" $((10 + i)) || not_ok "host c$i"; done
netns_host far 99 || not_ok "host far"
mc_image fast 2 fast || { not_ok "make image fast"; done_testing; }
mc_image slow "$MC_MIB" slow || { not_ok "make image slow"; done_testing; }
# slow: about 8 s at MC_MIB Mbit/s for an image of about MC_MIB MiB
cat >"$T/m.conf" <<CONF
pool 239.192.1.0/29
ports 5000-5007
idle-timeout 30
rate $MC_RATE
image fast $T/fast.ndz allow 10.77.0.0/27
image slow $T/slow.ndz allow 10.77.0.0/27 rate ${MC_MIB}M
CONF
mkdir -p "$T/run"
ip netns exec "${NETNS_PFX}srv" "$MFRISBEED" -c "$T/m.conf" -r "$T/run" --log-time \
	--lost-timeout 3 2>>"$T/m.log" &
MPID=$!
wait_until 5 sh -c "ip netns exec '${NETNS_PFX}srv' ss -lun | grep -q ':3563 '" ||
	not_ok "the master listens"
status() { in_ns c1 "$MFRISBEED" --status "$SRV" >"$T/st.json" 2>>"$T/st.err"; }
fclient() {
	( in_ns "$1" "$FRISBEE" $MC_RAW -M "$SRV" -I "$2" -T 10 "$T/out-$1" \
		2>>"$T/$1.log"; echo $? >"$T/$1.rc" ) &
	MC_PIDS="$MC_PIDS $!"
}
t0=$(date +%s)
fclient c2 slow; fclient c3 slow
# the running ones report progress: the master shows it per client
progress() {
	status && grep -Eq '"address": "10\.77\.0\.13", "state": "active", "chunks_done": [1-9]' \
		"$T/st.json" && grep -Eq '"address": "10\.77\.0\.12", "state": "active"' "$T/st.json"
}
wait_until 20 progress
check "during the run: --status shows c3 active with progress > 0 ($(grep -o '"address": "10.77.0.13"[^}]*' "$T/st.json"))" \
	grep -Eq '"address": "10\.77\.0\.13", "state": "active", "chunks_done": [1-9][0-9]*, "chunks_total": [1-9][0-9]*, "bytes_written": [1-9][0-9]*, "write_bps": [1-9]' "$T/st.json"
check "during the run: the slow session counts two receivers" \
	grep -q '"image": "slow", [^]]*"receivers": 2, "bytes_sent": [0-9]*, "active": 2, "done": 0, "failed": 0, "lost": 0, "client_list": \[{' "$T/st.json"
# c2 killed mid-transfer: no LEAVE, silent
ip netns pids "${NETNS_PFX}c2" | xargs -r kill -9
tk=$(date +%s)
fclient c1 fast
lost() {
	status && grep -q '"address": "10\.77\.0\.12", "state": "lost"' "$T/st.json" &&
		grep -q '"address": "10\.77\.0\.11", "state": "done"' "$T/st.json"
}
wait_until 10 lost
tl=$(( $(date +%s) - tk ))
check "killed c2 shows lost within the timeout (3 s; $tl s), c1 done" lost
check "the slow session: receivers 1 (c3 only), 1 active, 1 lost" \
	grep -q '"image": "slow", [^]]*"receivers": 1, "bytes_sent": [0-9]*, "active": 1, "done": 0, "failed": 0, "lost": 1, ' "$T/st.json"
check "the fast session: receivers 0, 1 done" \
	grep -q '"image": "fast", [^]]*"receivers": 0, "bytes_sent": [0-9]*, "active": 0, "done": 1, "failed": 0, "lost": 0, ' "$T/st.json"
check "c3 still active meanwhile" grep -q '"address": "10\.77\.0\.13", "state": "active"' "$T/st.json"
# a refused request: logged with an ISO time, the address and the rule
in_ns far "$FRISBEE" -M "$SRV" -I slow -T 3 "$T/x" 2>"$T/far.err"; rc=$?
check "a host outside the allow prefixes is refused (exit $rc)" [ "$rc" = 1 ]
wait_until 3 grep -q "refused: 10.77.0.99" "$T/m.log"
check "the master's log: the refusal with its ISO time, address and rule ($(grep 'refused: 10.77.0.99' "$T/m.log" | head -1))" \
	grep -Eq "^20[0-9]{2}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\.[0-9]{3}Z mfrisbeed: refused: 10\.77\.0\.99 asks for slow: access denied: no allow rule matches 10\.77\.0\.99 for image 'slow'" "$T/m.log"
# c3 goes to the end and is done
mc_wait
check "c1 and c3 exit 0, byte-identical ($(mc_rc c1) $(mc_rc c3))" \
	sh -c "[ $(mc_rc c1) = 0 ] && [ $(mc_rc c3) = 0 ] && cmp -s '$T/fast.src' '$T/out-c1' && cmp -s '$T/slow.src' '$T/out-c3'"
status
check "after: c3 done, c2 still lost, no receivers" \
	sh -c "grep -q '\"address\": \"10.77.0.13\", \"state\": \"done\"' '$T/st.json' &&
	       grep -q '\"address\": \"10.77.0.12\", \"state\": \"lost\"' '$T/st.json' &&
	       grep -q '\"image\": \"slow\", [^]]*\"receivers\": 0, ' '$T/st.json'"
check "the whole run under 90 s ($(( $(date +%s) - t0 )) s)" [ $(( $(date +%s) - t0 )) -lt 90 ]
kill -TERM "$MPID"; wait "$MPID"
done_testing
