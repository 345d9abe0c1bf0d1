#!/bin/sh
# Multicast: a rogue host sending forged BLOCKs and garbage to the group (targets stay
# correct), and two servers with different images on different groups at once.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require
netns_lan && netns_host srv 1 && netns_host srv2 2 && netns_host rogue 66 ||
	{ not_ok "namespace LAN"; done_testing; }
for i in 1 2 3 4; do netns_host "c$i" $((10 + i)) || not_ok "host c$i"; done
mc_image a "$MC_MIB" 5 || { not_ok "make image"; done_testing; }
mc_image b "$MC_MIB" 6 || { not_ok "make image"; done_testing; }
slow=$(( MC_MIB * 8 * 1100 / 3 ))k

# two_clients: c1 listening to anyone, c2 only to the server's address
two_clients() {
	mc_client c1 "$T/out1" -T 10 -v
	mc_client c2 "$T/out2" -T 10 -v -S 10.77.0.1
}

# both_correct WHAT: clients 1 and 2 exited 0 with image a
both_correct() {
	for i in 1 2; do
		check "$1: client $i correct" sh -c "[ \"$(mc_rc "c$i")\" = 0 ] && cmp -s '$T/a.src' '$T/out$i'"
	done
}

# 1. forged blocks from the rogue's own address, garbage, other versions, bad requests
mc_server srv "$T/a.ndz" -W "$slow" -T 30 --stats-json "$T/stats.json"
rogue_start "$T/rogue.out" "$MCROGUE" "$MC_GROUP" "$MC_PORT" 5 5000
two_clients
rogue_end
check "rogue: it really sent" grep -q 'sent [1-9]' "$T/rogue.out"
both_correct rogue
check "rogue: client counted foreign blocks" grep -q 'dropped: [0-9]* malformed, [0-9]* other version, [1-9][0-9]* foreign' "$T/c1.log"
check "rogue: server counted malformed packets" [ "$(json_num "$T/stats.json" bad_packets)" -gt 0 ]
check "rogue: server counted other versions" [ "$(json_num "$T/stats.json" bad_version)" -gt 0 ]
check "rogue: server counted requests past the image" [ "$(json_num "$T/stats.json" bad_chunk)" -gt 0 ]

# 2. forged blocks carrying the server's address: only the chunk checksums catch them
rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log
mc_server srv "$T/a.ndz" -W "$slow" -T 30
rogue_start "$T/rogue.out" "$MCROGUE" "$MC_GROUP" "$MC_PORT" 2 300 10.77.0.1
two_clients
rogue_end
both_correct "spoofed rogue"
check "spoofed rogue: bad chunks were caught and fetched again" \
	sh -c "cat '$T/c1.log' '$T/c2.log' | grep -q 'checksum; requesting it again'"

# 3. two servers, two images, two groups, the same port, at once
rm -f "$T"/c*.rc "$T"/out*
g1=$MC_GROUP
g2="239.$(( ($$ >> 16) % 200 + 20 )).$(( ($$ >> 8) % 256 )).$(( ($$ + 1) % 250 + 1 ))"
mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30
MC_GROUP=$g2 mc_server srv2 "$T/b.ndz" -W "$MC_RATE" -T 30
pid2=$MC_SRV_PID
mc_client c1 "$T/out1" -T 10
mc_client c2 "$T/out2" -T 10
MC_GROUP=$g2 mc_client c3 "$T/out3" -T 10
MC_GROUP=$g2 mc_client c4 "$T/out4" -T 10
mc_wait
kill -TERM $pid2 "$(pgrep -f "frisbeed -m $g1 ")" 2>/dev/null
for i in 1 2; do
	check "two servers: client $i got image a" sh -c "[ \"$(mc_rc "c$i")\" = 0 ] && cmp -s '$T/a.src' '$T/out$i'"
done
for i in 3 4; do
	check "two servers: client $i got image b" sh -c "[ \"$(mc_rc "c$i")\" = 0 ] && cmp -s '$T/b.src' '$T/out$i'"
done
wait
done_testing
