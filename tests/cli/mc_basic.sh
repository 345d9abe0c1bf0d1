#!/bin/sh
# Multicast: 1, 4 and 8 clients in a namespace LAN all end byte-identical to the source.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require
netns_clients 8
mc_image a "$MC_MIB" 1 || { not_ok "make image"; done_testing; }

for n in 1 4 8; do
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log
	# clients first: they wait for the server, whose announcement starts them together
	i=1
	while [ $i -le $n ]; do mc_client "c$i" "$T/out$i" -T 10 -vv; i=$((i + 1)); done
	i=1
	while [ $i -le $n ]; do mc_joined "c$i"; i=$((i + 1)); done
	mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30 --stats-json "$T/stats$n.json"
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
check "client prints a one-line summary, its rate labelled" grep -q 'chunks in .* s (image .* MB/s received), .* blocks received, .* duplicates, .* requests sent' "$T/c1.log"
# at 0% loss each block goes out once whatever the number of clients
sent=$(json_num "$T/stats8.json" blocks_sent) distinct=$(json_num "$T/stats8.json" distinct_blocks)
# (a guard against runaway re-sending, not a figure: on a machine loaded several times
# over its cores a client descheduled past the re-request delay asks again (1.14 seen
# under two suites at once, sanitized; 2.14 under ThreadSanitizer, whose 8 clients on 2
# cores drop what they cannot read in time); bench/multicast.sh measures the real
# figure, 1.000 on an idle machine)
most=150
[ "${NDZ_SANITIZED:-0}" = 1 ] && most=400
check "8 clients, no loss: server sends each block a bounded number of times ($sent sent, $distinct distinct, at most $most%)" \
	[ "$sent" -le $(( distinct * most / 100 )) ]

# a zstd image goes through frisbeed and frisbee like a zlib one
if [ -z "${MC_FORCE_RAW:-}" ]; then
	MC_ZIP_OPTS="--codec zstd" mc_image z "$MC_MIB" 2 || not_ok "make zstd image"
	check "the zstd image has codec 2" [ "$(od -An -tu2 -j52 -N2 "$T/z.ndz" | tr -d ' ')" = 2 ]
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log
	mc_client c1 "$T/out1" -T 10 -vv
	mc_joined c1
	mc_server srv "$T/z.ndz" -W "$MC_RATE" -T 30
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	check "zstd image: the client exits 0 with a byte-identical target" \
		sh -c "[ \"$(mc_rc c1)\" = 0 ] && cmp -s '$T/z.src' '$T/out1'"
fi

# pacing: bursts of 8 packets every millisecond are 8 * 1072 * 8 bits/ms = 68.6 Mbit/s
rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log
mc_server srv "$T/a.ndz" -b 8 -g 1000 -T 30 --stats-json "$T/statsb.json"
mc_client c1 "$T/out1" --timeout 10 --request-ahead 3 --cache 8
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
rate=$(json_num "$T/statsb.json" rate_bps); rate=${rate%.*}
check "-b 8 -g 1000: correct target" sh -c "[ \"$(mc_rc c1)\" = 0 ] && cmp -s '$T/a.src' '$T/out1'"
# the cap is a bound the pacer must keep on any host; how close to it a run gets depends
# on the host's load (bench/ measures it), so below only a stall fails
check "-b 8 -g 1000: achieved $rate bit/s, at most the cap (68.6M) and not stalled" \
	[ "$rate" -le 70000000 ] && [ "$rate" -ge 10000000 ]

# the idle timeout: nobody comes, the server leaves after -T
t0=$(date +%s)
in_ns srv "$FRISBEED" -m "$MC_GROUP" -p "$MC_PORT" -T 1 "$T/a.ndz" 2>"$T/idle.log"
rc=$? t1=$(date +%s)
check "idle timeout: frisbeed exits 0 after -T 1 without clients, not hung ($((t1 - t0)) s)" \
	[ "$rc" = 0 ] && [ $((t1 - t0)) -le 20 ]
check "idle timeout: statistics at exit" grep -q '^frisbeed: 0 clients, ' "$T/idle.log"
# the same by long option names, quiet: nothing on stderr at all
in_ns srv "$FRISBEED" --group "$MC_GROUP" --port "$MC_PORT" --idle-timeout 1 --quiet \
	"$T/a.ndz" 2>"$T/idleq.log"
rc=$?
check "--quiet --idle-timeout 1: exit 0 and no output" [ "$rc" = 0 ] && [ ! -s "$T/idleq.log" ]
done_testing
