#!/bin/sh
# Multicast: 1, 4 and 8 clients in a namespace LAN all end byte-identical to the source.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_usable || skip_all "network namespaces, veth, bridge or nft unavailable (needs root)"
netns_lan && netns_host srv 1 || { not_ok "namespace LAN"; done_testing; }
for i in 1 2 3 4 5 6 7 8; do netns_host "c$i" $((10 + i)) || not_ok "host c$i"; done
mc_image a "$MC_MIB" 1 || { not_ok "make image"; done_testing; }

for n in 1 4 8; do
	rm -f "$T"/c*.rc "$T"/out*
	mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30 --stats-json "$T/stats$n.json"
	i=1
	while [ $i -le $n ]; do mc_client "c$i" "$T/out$i" -T 10; i=$((i + 1)); done
	mc_wait
	kill -USR1 "$MC_SRV_PID"; sleep 0.5
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"; src=$?
	check "$n client(s): statistics on SIGUSR1 and at exit" \
		[ "$(grep -c "^frisbeed: $n clients, .* blocks sent (.* re-sent), .* Mbit/s" "$T/srv.log")" = 2 ]
	: >"$T/srv.log"
	good=0 i=1
	while [ $i -le $n ]; do
		[ "$(mc_rc "c$i")" = 0 ] && mc_same "$T/a.src" "$T/out$i" && good=$((good + 1))
		i=$((i + 1))
	done
	check "$n client(s): all $n exit 0 with byte-identical targets ($good good)" [ "$good" = "$n" ]
	check "$n client(s): frisbeed exits 0 on SIGTERM" [ "$src" = 0 ]
	check "$n client(s): server saw $n clients" [ "$(json_num "$T/stats$n.json" clients)" = "$n" ]
	check "$n client(s): no bad packets" [ "$(json_num "$T/stats$n.json" bad_packets)" = 0 ]
done
check "client prints a one-line summary" grep -q 'chunks in .* s (.* MB/s), .* blocks received, .* duplicates, .* requests sent' "$T/c1.log"
# at 0% loss each block goes out about once whatever the number of clients
sent=$(json_num "$T/stats8.json" blocks_sent) distinct=$(json_num "$T/stats8.json" distinct_blocks)
check "8 clients, no loss: server sends each block about once ($sent sent, $distinct distinct)" \
	[ "$sent" -le $(( distinct * 110 / 100 )) ]
done_testing
