#!/bin/sh
# Multicast: clients joining 0-5 s apart, some mid-transfer, some after the others are done.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require
netns_clients 4
mc_image a "$MC_MIB" 3 || { not_ok "make image"; done_testing; }

# slow enough that one image takes about 3 s, so the second and third join mid-way
rate=$(( MC_MIB * 8 * 1100 / 3 ))k
# (the server names its interface, client 1 gives its address)
mc_server srv "$T/a.ndz" -W "$rate" -T 30 -i eth0 --stats-json "$T/stats.json"
mc_client c1 "$T/out1" -T 10 -i 10.77.0.11
sleep 1
mc_client c2 "$T/out2" -T 10
sleep 1.5
mc_client c3 "$T/out3" -T 10
sleep 2.5
mc_client c4 "$T/out4" -T 10
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
for i in 1 2 3 4; do
	check "client $i (joined at its own time) completes byte-identical" \
		sh -c "[ \"$(mc_rc "c$i")\" = 0 ] && cmp -s '$T/a.src' '$T/out$i'"
done
check "server counted 4 clients" [ "$(json_num "$T/stats.json" clients)" = 4 ]
done_testing
