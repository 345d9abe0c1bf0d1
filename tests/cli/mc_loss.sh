#!/bin/sh
# Multicast under loss injected with nftables on the clients' input: 1% and 10%.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_usable || skip_all "network namespaces, veth, bridge or nft unavailable (needs root)"
netns_lan && netns_host srv 1 || { not_ok "namespace LAN"; done_testing; }
for i in 1 2 3 4; do netns_host "c$i" $((10 + i)) || not_ok "host c$i"; done
mc_image a "$MC_MIB" 2 || { not_ok "make image"; done_testing; }

for loss in 1 10; do
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log
	for i in 1 2 3 4; do netns_noloss "c$i"; netns_loss "c$i" "$loss"; done
	for i in 1 2 3 4; do mc_client "c$i" "$T/out$i" -T 10 -vv; done
	mc_joined c1 c2 c3 c4
	mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30 --stats-json "$T/stats$loss.json"
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	good=0
	for i in 1 2 3 4; do
		[ "$(mc_rc "c$i")" = 0 ] && mc_same "$T/a.src" "$T/out$i" && good=$((good + 1))
	done
	check "$loss% loss: 4 clients byte-identical ($good good)" [ "$good" = 4 ]
	sent=$(json_num "$T/stats$loss.json" blocks_sent)
	distinct=$(json_num "$T/stats$loss.json" distinct_blocks)
	# 4 clients with independent loss p need about 1 - (1-p)^4 of the blocks again.
	# A guard against runaway re-sending, with room for a loaded or sanitized run;
	# the 1.15x target at 1% is measured by bench/multicast.sh.
	limit=$(( loss == 1 ? 130 : 200 ))
	check "$loss% loss: server sent $sent blocks for $distinct (limit ${limit}%)" \
		[ "$sent" -le $(( distinct * limit / 100 )) ]
	check "$loss% loss: clients re-requested" grep -q '[1-9][0-9]* requests sent' "$T/c1.log"
done
done_testing
