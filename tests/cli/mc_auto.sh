#!/bin/sh
# frisbeed -W auto behind links of a rate it is not told (tc tbf on each client's port):
# every client byte-identical, most of the link used, few blocks sent twice.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require tc
netns_clients 3
mc_image a "$MC_MIB" 9 || { not_ok "make image"; done_testing; }
# a link well below the server's own reach, so the link is what limits
link=40
for i in 1 2 3; do netns_shape "c$i" "${link}mbit" || skip_all "tc tbf unavailable"; done

for i in 1 2 3; do mc_client "c$i" "$T/out$i" -T 20 -vv; done
mc_joined c1 c2 c3
t0=$(date +%s%N)
mc_server srv "$T/a.ndz" -W auto:400M -T 30 --stats-json "$T/auto.json" -vv
mc_wait
t1=$(date +%s%N)
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
good=0
for i in 1 2 3; do
	[ "$(mc_rc "c$i")" = 0 ] && mc_same "$T/a.src" "$T/out$i" && good=$((good + 1))
done
check "-W auto behind ${link} Mbit/s: 3 clients byte-identical ($good good)" [ "$good" = 3 ]
bytes=$(stat -c %s "$T/a.ndz")
ms=$(( (t1 - t0) / 1000000 ))
# goodput against the link; bench/adaptive.sh measures it properly (goal 0.9), this
# only guards against a controller that stalls or floods (CI machines are loaded)
pct=$(( bytes * 8 / ms * 100 / (link * 1000) ))
# Only a controller that stalls or floods fails here: a loaded host's clients lose
# packets by themselves (seen: 45-51% lost by sanitized clients at load 7), and then
# they, not the link, are the limit; the goodput goal is bench/adaptive.sh's.
least=20 low=5000000
check "-W auto: ${ms} ms, goodput ${pct}% of the link (at least ${least}%)" [ "$pct" -ge "$least" ]
sent=$(json_num "$T/auto.json" blocks_sent)
distinct=$(json_num "$T/auto.json" distinct_blocks)
repairs=$(json_num "$T/auto.json" repairs_sent)
most=300
check "-W auto: $sent blocks and $repairs repairs for $distinct (at most $most%)" \
	[ $(( (sent + repairs) * 100 )) -le $(( distinct * most )) ]
check "-W auto: the rate changed" grep -q 'rate .* Mbit/s' "$T/srv.log"
# the start (50 Mbit/s) overshoots the link, so some requests tell how late losses come
late=$(sed -n 's/.*losses known \([0-9]*\) ms late.*/\1/p' "$T/srv.log" | sort -n | tail -1)
check "-W auto: measured how late losses are reported (at most ${late:-no} ms, 1-5000)" \
	[ "${late:-0}" -ge 1 ] && [ "${late:-0}" -le 5000 ]
rate=$(json_num "$T/auto.json" auto_rate_bps)
check "-W auto: ends near the link ($rate bit/s, $((low / 1000000))-90 Mbit/s)" \
	[ "$rate" -ge "$low" ] && [ "$rate" -le 90000000 ]
done_testing
