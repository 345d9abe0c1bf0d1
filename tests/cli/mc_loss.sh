#!/bin/sh
# Multicast under loss injected with nftables on the clients' input: 1%, 10% and 30%, with
# repair blocks (the default), with clients that do not ask for them beside those that
# do, and with a server that does not send them.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require
netns_clients 4
mc_image a "$MC_MIB" 2 || { not_ok "make image"; done_testing; }

# run NAME LOSS SERVER-OPTION CLIENT-OPTION-OF-c1-c2: one transfer to 4 clients
run() {
	name=$1 loss=$2 sopt=$3 copt=$4
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log
	for i in 1 2 3 4; do netns_noloss "c$i"; netns_loss "c$i" "$loss"; done
	for i in 1 2 3 4; do
		o=""
		[ "$i" -le 2 ] && o=$copt
		# shellcheck disable=SC2086
		mc_client "c$i" "$T/out$i" -T 10 -vv $o
	done
	mc_joined c1 c2 c3 c4
	# shellcheck disable=SC2086
	mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30 --stats-json "$T/$name.json" $sopt
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	good=0
	for i in 1 2 3 4; do
		[ "$(mc_rc "c$i")" = 0 ] && mc_same "$T/a.src" "$T/out$i" && good=$((good + 1))
	done
	check "$name: 4 clients byte-identical ($good good)" [ "$good" = 4 ]
	sent=$(json_num "$T/$name.json" blocks_sent)
	distinct=$(json_num "$T/$name.json" distinct_blocks)
	repairs=$(json_num "$T/$name.json" repairs_sent)
	# A guard against runaway re-sending only (every block at least once, and not the
	# image over and over); how much a loss rate costs is measured by bench/multicast.sh,
	# since on a loaded host late requests make any tighter ratio a race.
	check "$name: server sent $sent blocks and $repairs repairs for $distinct (not a runaway: at most 8x)" \
		[ $((sent + repairs)) -ge "$distinct" -a $((sent + repairs)) -le $(( distinct * 8 )) ]
	check "$name: clients re-requested" grep -q '[1-9][0-9]* requests sent' "$T/c3.log"
}

run "1% loss" 1 "" ""
check "1% loss: repairs sent and used" [ "$repairs" -gt 0 ]
check "1% loss: whole-chunk repairs among them" \
	[ "$(json_num "$T/1% loss.json" whole_repairs_sent)" -gt 0 ]
check "1% loss: a client rebuilt blocks from repairs" \
	grep -q '[1-9][0-9]* repairs ([1-9][0-9]* blocks rebuilt)' "$T/c1.log" "$T/c2.log" \
	"$T/c3.log" "$T/c4.log"
run "10% loss" 10 "" ""
check "10% loss: repairs sent" [ "$repairs" -gt 0 ]
run "30% loss" 30 "" ""
run "1% loss, 2 clients --no-repair" 1 "" --no-repair
check "1% loss, mixed: those without repairs got none" \
	grep -q ' 0 repairs (0 blocks rebuilt)' "$T/c1.log"
run "1% loss, 2 clients --no-whole-repair" 1 "" --no-whole-repair
check "1% loss, stripes only beside whole: those rebuilt blocks too" \
	grep -q '[1-9][0-9]* repairs ([1-9][0-9]* blocks rebuilt)' "$T/c1.log" "$T/c2.log"
run "1% loss, frisbeed --no-whole-repair" 1 --no-whole-repair ""
w=$(json_num "$T/1% loss, frisbeed --no-whole-repair.json" whole_repairs_sent)
check "frisbeed --no-whole-repair: stripe repairs only ($repairs, $w whole)" \
	[ "$repairs" -gt 0 -a "$w" = 0 ]
run "1% loss, frisbeed --no-repair" 1 --no-repair ""
check "frisbeed --no-repair: no repairs sent" [ "$repairs" = 0 ]
done_testing
