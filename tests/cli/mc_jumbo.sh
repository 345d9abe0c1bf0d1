#!/bin/sh
# Datagrams of several blocks (doc/PROTOCOL.md, "BLOCKS and CAPS", "SPAN"): on a
# 9000-byte MTU the group gets SPANs of 8928 bytes, with GRO on and off; on 1500 SPANs
# of 1440 (datagrams of 1460), GRO on and off; a client that takes one block (an older
# one, or --max-datagram 1044) makes the group fall back to BLOCKs; a path that drops
# large datagrams falls back, not stalls (its client steps to a 1500 MTU's SPANs, not
# to BLOCKs); 1% loss with 8 clients at 9000 and 4 at 1500. Every target
# byte-identical. NDZ_OLD_BIN=DIR (a frisbee and frisbeed of the protocol before
# BLOCKS) adds old-against-new runs.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
. "$NDZ_TOP/tests/oldbin.sh"
netns_require
netns_clients 8
mc_image a "$MC_MIB" 7 || { not_ok "make image"; done_testing; }

# lan MTU [HOSTS...]: every host (and its port) at MTU
lan() {
	_m=$1
	for _h in srv c1 c2 c3 c4 c5 c6 c7 c8; do netns_mtu "$_h" "$_m" || return 1; done
}

# run NAME N [SERVER OPTIONS...]: N clients (options in CLIENT_OPTS, binary CLIENT_BIN),
# then the server (binary SERVER_BIN); counts the good targets into GOOD
run() {
	_name=$1 _cnt=$2; shift 2
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log "$T/srv.log"
	_i=1
	while [ $_i -le "$_cnt" ]; do
		# shellcheck disable=SC2086
		FRISBEE=${CLIENT_BIN:-$FRISBEE} mc_client "c$_i" "$T/out$_i" -T 15 -vv ${CLIENT_OPTS:-}
		_i=$((_i + 1))
	done
	_i=1
	while [ $_i -le "$_cnt" ]; do mc_joined "c$_i"; _i=$((_i + 1)); done
	FRISBEED=${SERVER_BIN:-$FRISBEED} mc_server srv "${IMAGE:-$T/a.ndz}" -W "$MC_RATE" -T 30 \
		--stats-json "$T/$_name.json" "$@"
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	GOOD=0 _i=1
	while [ $_i -le "$_cnt" ]; do
		[ "$(mc_rc "c$_i")" = 0 ] && mc_same "$T/a.src" "$T/out$_i" && GOOD=$((GOOD + 1))
		_i=$((_i + 1))
	done
}
# dgrams NAME: datagrams the server sent; blocks NAME: blocks and repairs it sent
dgrams() { json_num "$T/$1.json" datagrams_sent; }
blocks() { echo $(( $(json_num "$T/$1.json" blocks_sent) + $(json_num "$T/$1.json" repairs_sent) )); }
group() { json_num "$T/$1.json" group_blocks; }
# multi NAME: the group took BLOCKS of 8: far fewer datagrams than blocks
# (not a ratio to meet: a client starved past the step-down window on a loaded machine
# steps down and probes up again, so fewer than half, not about an eighth)
multi() { [ "$(dgrams "$1")" -lt $(( $(blocks "$1") / 2 )) ]; }
# single NAME: one block a datagram throughout
single() { [ "$(dgrams "$1")" = "$(blocks "$1")" ] && [ "$(group "$1")" = 1 ]; }
skip() { ok "$* # SKIP"; }
# spans NAME SIZE: the server sent SPANs, of SIZE bytes at the end, in fewer datagrams
# than blocks (a SPAN carries more than a block)
spans() {
	[ "$(json_num "$T/$1.json" spans_sent)" -gt 0 ] 2>/dev/null &&
		[ "$(json_num "$T/$1.json" span_size)" = "$2" ] &&
		[ "$(dgrams "$1")" -lt "$(blocks "$1")" ]
}
nospan() { [ "$(json_num "$T/$1.json" spans_sent)" = 0 ]; }
# stepped_up NAME: the group fell to one block a datagram and rose again to 8 (the server's counts)
stepped_up() {
	[ "$(json_num "$T/$1.json" group_down)" -ge 1 ] 2>/dev/null &&
		[ "$(json_num "$T/$1.json" group_up)" -ge 1 ] 2>/dev/null && [ "$(group "$1")" = 8 ]
}

lan 9000 || { not_ok "MTU 9000 on the LAN"; done_testing; }
for gro in off on; do
	gro_ok=1
	for h in c1 c2 c3; do netns_gro_path "$h" "$gro" || gro_ok=0; done
	if [ "$gro" = on ] && [ "$gro_ok" = 0 ]; then
		skip "GRO on: ethtool missing or refused"
		continue
	fi
	opts=""
	[ "$gro" = off ] && opts=--no-gro
	CLIENT_OPTS=$opts run "j$gro" 3
	check "MTU 9000, GRO $gro: 3 clients byte-identical ($GOOD good)" [ "$GOOD" = 3 ]
	if [ "$gro" = on ]; then
		check "MTU 9000, GRO on: the socket took UDP GRO" grep -q 'coalesced (UDP GRO)' "$T/c1.log"
	else
		check "MTU 9000, GRO off: the socket did not" sh -c "! grep -q 'coalesced' '$T/c1.log'"
	fi
	check "MTU 9000, GRO $gro: large datagrams ($(dgrams "j$gro") datagrams for $(blocks "j$gro") blocks)" \
		multi "j$gro"
	check "MTU 9000, GRO $gro: SPANs of 8928 bytes ($(json_num "$T/j$gro.json" spans_sent) sent)" \
		spans "j$gro" 8928
	check "MTU 9000, GRO $gro: the clients took SPANs" grep -q 'told the server we take datagrams of 8972 bytes, SPANs too' "$T/c1.log"
done

# a signed and encrypted image, one client from the start and one that joins late
if [ -x "$IMAGEZIP" ] && [ -z "$MC_RAW" ] &&
	"$NDZ_BIN/imagekey" -q generate -o "$T/k" && "$NDZ_BIN/imagekey" -q generate -e -o "$T/ek" &&
	"$IMAGEZIP" -q -r --sign "$T/k.sec" --encrypt "$T/ek.key" "$T/a.src" "$T/se.ndz"; then
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log "$T/srv.log"
	mc_client c1 "$T/out1" -T 15 -vv --key "$T/k.pub" --key "$T/ek.key"
	mc_joined c1
	mc_server srv "$T/se.ndz" -W 60M -T 30 --stats-json "$T/se.json"
	sleep 0.5
	mc_client c2 "$T/out2" -T 15 -vv --key "$T/k.pub" --key "$T/ek.key"
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	check "MTU 9000, signed and encrypted, one client late: both byte-identical" \
		sh -c "[ \"$(mc_rc c1)\" = 0 ] && [ \"$(mc_rc c2)\" = 0 ] && cmp -s '$T/a.src' '$T/out1' && cmp -s '$T/a.src' '$T/out2'"
	check "MTU 9000, signed and encrypted: SPANs" spans se 8928
else
	skip "signed and encrypted: imagezip or imagekey unavailable"
fi

# -W auto finds the rate with BLOCKS as with BLOCKs
run auto 2 -W auto:500M
check "MTU 9000, -W auto: 2 clients byte-identical ($GOOD good)" [ "$GOOD" = 2 ]
check "MTU 9000, -W auto: SPANs" spans auto 8928

# a client that takes one block a datagram: the group falls back to BLOCKs
CLIENT_OPTS="--max-datagram 1044" run old1 1
check "one client --max-datagram 1044: byte-identical" [ "$GOOD" = 1 ]
check "one client --max-datagram 1044: one block a datagram" single old1
check "one client --max-datagram 1044: no SPAN" nospan old1
# one that takes 1500-byte datagrams: SPANs of 1440 for the group
CLIENT_OPTS="--max-datagram 1472" run mid1 1
check "one client --max-datagram 1472 at 9000: byte-identical" [ "$GOOD" = 1 ]
check "one client --max-datagram 1472 at 9000: SPANs of 1440" spans mid1 1440
# and a server that sends one block a datagram: as before BLOCKS
run srvold 2 --max-datagram 1044
check "frisbeed --max-datagram 1044: 2 clients byte-identical ($GOOD good)" [ "$GOOD" = 2 ]
check "frisbeed --max-datagram 1044: one block a datagram" single srvold
check "frisbeed --max-datagram 1044: no CAPS asked for" sh -c "! grep -q 'told the server' '$T/c1.log'"

# builds of the protocol before BLOCKS: each side old in turn. NDZ_OLD_BIN, or in
# the plain build of a git checkout the last commit before BLOCKS (tests/oldbin.sh)
old_bin "$OLD_REV"
if [ -n "${NDZ_OLD_BIN:-}" ] && [ -x "$NDZ_OLD_BIN/frisbee" ] && [ -x "$NDZ_OLD_BIN/frisbeed" ]; then
	# an old client and a new one under a new server: the group falls back
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log "$T/srv.log"
	FRISBEE="$NDZ_OLD_BIN/frisbee" mc_client c1 "$T/out1" -T 15 -vv
	mc_client c2 "$T/out2" -T 15 -vv
	mc_joined c1 c2
	mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30 --stats-json "$T/mixed.json"
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	check "old frisbee and new frisbee, new frisbeed at 9000: both byte-identical" \
		sh -c "[ \"$(mc_rc c1)\" = 0 ] && [ \"$(mc_rc c2)\" = 0 ] && cmp -s '$T/a.src' '$T/out1' && cmp -s '$T/a.src' '$T/out2'"
	check "old frisbee in the group: one block a datagram" [ "$(group mixed)" = 1 ]
	check "old frisbee in the group: no SPAN" nospan mixed
	SERVER_BIN="$NDZ_OLD_BIN/frisbeed" run oldsrv 2
	check "new frisbee, old frisbeed: 2 clients byte-identical ($GOOD good)" [ "$GOOD" = 2 ]
	check "new frisbee, old frisbeed: no CAPS sent to it" sh -c "! grep -q 'told the server' '$T/c1.log'"

	# the old client done and gone (LEAVE), a new one comes: back to BLOCKS of 8
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log "$T/srv.log"
	FRISBEE="$NDZ_OLD_BIN/frisbee" mc_client c1 "$T/out1" -T 15 -vv
	mc_joined c1
	mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30 --stats-json "$T/left.json"
	mc_wait
	mc_client c2 "$T/out2" -T 15 -vv
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	check "old frisbee left, then a new one: both byte-identical" \
		sh -c "[ \"$(mc_rc c1)\" = 0 ] && [ \"$(mc_rc c2)\" = 0 ] && cmp -s '$T/a.src' '$T/out1' && cmp -s '$T/a.src' '$T/out2'"
	check "old frisbee left: the group stepped down, then up again to BLOCKS of 8" stepped_up left
	# (the image twice: once a block a datagram, once in BLOCKS of 8 but the odd one)
	check "old frisbee left: the second sending in BLOCKS ($(dgrams left) datagrams for $(blocks left) blocks)" \
		[ $(( $(dgrams left) * 10 )) -lt $(( $(blocks left) * 7 )) ]

	# the old client killed mid-way (no LEAVE): lost after --lost-timeout; a new one
	# that comes after that gets BLOCKS of 8
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log "$T/srv.log"
	FRISBEE="$NDZ_OLD_BIN/frisbee" mc_client c1 "$T/out1" -T 15 -vv
	mc_joined c1
	mc_server srv "$T/a.ndz" -W 8M -T 30 --lost-timeout 1 --stats-json "$T/lost.json"
	OLDPID=""
	wait_until 20 sh -c "[ \$(du -k '$T/out1' 2>/dev/null | cut -f1) -gt 0 ]" &&
		OLDPID=$(FRISBEE="$NDZ_OLD_BIN/frisbee" frisbee_pid "$T/out1")
	[ -n "$OLDPID" ] && kill -KILL "$OLDPID"
	mc_wait
	sleep 2                # past --lost-timeout: the server takes it for lost
	mc_client c2 "$T/out2" -T 15 -vv
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	check "old frisbee killed mid-way, then a new one: byte-identical" \
		sh -c "[ -n '$OLDPID' ] && [ \"$(mc_rc c2)\" = 0 ] && cmp -s '$T/a.src' '$T/out2'"
	check "old frisbee lost: the group stepped back up to BLOCKS of 8" stepped_up lost
	check "old frisbee lost: the server counts it lost" [ "$(json_num "$T/lost.json" lost)" = 1 ]

	# a new client beside an old one: having had no BLOCKS for 0.7 s after a request
	# it tells the server it takes one block (as for a path that drops large ones);
	# the old one killed and lost, its probes (the large size again after 2 s, 4 s,
	# ...) bring the group back up to BLOCKS of 8 (issue #36)
	# (the old one receiving first, the new one joining it: the new one's requests
	# are answered by one-block datagrams for as long as the old one is there, which
	# is until the new one stepped down; started together, which of them the server
	# heard first decided whether it had to, and once it did not)
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log "$T/srv.log"
	mc_server srv "$T/a.ndz" -W 4M -T 30 --lost-timeout 1 --stats-json "$T/beside.json"
	FRISBEE="$NDZ_OLD_BIN/frisbee" mc_client c1 "$T/out1" -T 15 -vv
	OLDPID=""
	wait_until 20 sh -c "[ \$(du -k '$T/out1' 2>/dev/null | cut -f1) -gt 0 ]" &&
		OLDPID=$(FRISBEE="$NDZ_OLD_BIN/frisbee" frisbee_pid "$T/out1")
	mc_client c2 "$T/out2" -T 15 -vv
	wait_until 20 grep -q 'asking for one block a datagram' "$T/c2.log"
	[ -n "$OLDPID" ] && kill -KILL "$OLDPID"
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	check "new frisbee beside an old one that is killed: byte-identical" \
		sh -c "[ -n '$OLDPID' ] && [ \"$(mc_rc c2)\" = 0 ] && cmp -s '$T/a.src' '$T/out2'"
	check "new frisbee beside an old one: it stepped down" \
		grep -q 'asking for one block a datagram' "$T/c2.log"
	check "new frisbee beside an old one, the old lost: the group stepped back up to BLOCKS of 8" \
		stepped_up beside
	check "new frisbee beside an old one: the server counts the old one lost" \
		[ "$(json_num "$T/beside.json" lost)" = 1 ]
	# (the group also rises when the new client leaves: what shows the probe is that
	# the client said the large size again after stepping down, and much of the rest
	# went in BLOCKS: a probe fails while the old one is not yet lost, the next comes
	# 4 s later)
	check "new frisbee beside an old one: after stepping down it said 8972 bytes again" \
		sh -c "sed -n '/asking for one block a datagram/,\$p' '$T/c2.log' | grep -q 'we take datagrams of 8972 bytes'"
	check "new frisbee beside an old one, the old lost: the rest in BLOCKS ($(dgrams beside) datagrams for $(blocks beside) blocks)" \
		[ $(( $(dgrams beside) * 10 )) -lt $(( $(blocks beside) * 8 )) ]
else
	skip "old against new: no build of the protocol before BLOCKS (NDZ_OLD_BIN, or a git checkout holding $OLD_REV)"
fi

# a path that drops large datagrams: c2's interface says 9000, its link 1500 (with
# the signed image when there is one: its manifest comes over that path first)
netns_mtu c2 9000 1500 && netns_nofrag c2 || not_ok "a 1500-byte link to c2"
if [ -e "$T/se.ndz" ]; then
	ln -sf "$T/se.ndz" "$T/drop.ndz" && ln -sf "$T/se.ndz.manifest" "$T/drop.ndz.manifest"
	CLIENT_OPTS="--key $T/k.pub --key $T/ek.key" IMAGE="$T/drop.ndz" run drop 2
else
	run drop 2
fi
check "a link that drops large datagrams: both clients byte-identical ($GOOD good)" [ "$GOOD" = 2 ]
# (the client steps to a 1500 MTU's payload first: the group gets SPANs of 1440 bytes
# in datagrams of 1460, which its link takes, not BLOCKs of 1044)
check "a link that drops large datagrams: that client stepped down to 1472 bytes first" \
	sh -c "grep -m1 'asking for' '$T/c2.log' | grep -q 'asking for datagrams of 1472 bytes'"
check "a link that drops large datagrams: its count of steps to 1472 bytes" \
	grep -Eq 'stepped down: [1-9][0-9]* times to datagrams of 1472 bytes' "$T/c2.log"
check "a link that drops large datagrams: the group fell back from BLOCKS of 8" [ "$(group drop)" = 1 ]
smin=$(json_num "$T/drop.json" span_min)
check "a link that drops large datagrams: then SPANs of at most 1440 bytes ($smin; $(json_num "$T/drop.json" spans_sent) SPANs sent)" \
	sh -c "[ \"$smin\" -gt 1024 ] && [ \"$smin\" -le 1440 ] && [ \"$(json_num "$T/drop.json" spans_sent)\" -gt 0 ]" 2>/dev/null
netns_mtu c2 9000
netns_frag c2

# 1% loss at 8 clients, on 9000
for h in c1 c2 c3 c4 c5 c6 c7 c8; do netns_loss "$h" 1; done
run loss 8
check "MTU 9000, 1% loss, 8 clients: all byte-identical ($GOOD good)" [ "$GOOD" = 8 ]
echo "# loss: $(dgrams loss) datagrams, $(json_num "$T/loss.json" offloaded) offloaded, $(json_num "$T/loss.json" repairs_sent) repairs, $(json_num "$T/loss.json" blocks_sent) blocks"
# repairs go in offload sends (runs of one size) as the blocks do, not one by one: all
# but a lone datagram here and there went in runs (the LAN cuts each run into datagrams
# at the server's interface, netns.sh, so the loss rule still drops them one by one)
check "MTU 9000, 1% loss, 8 clients: repairs sent ($(json_num "$T/loss.json" repairs_sent))" \
	[ "$(json_num "$T/loss.json" repairs_sent)" -gt 0 ]
check "MTU 9000, 1% loss, 8 clients: SPANs" spans loss 8928
check "MTU 9000, 1% loss, 8 clients: REPAIRS (several repairs a datagram: $(json_num "$T/loss.json" multi_repairs_sent))" \
	[ "$(json_num "$T/loss.json" multi_repairs_sent)" -gt 0 ]
off=$(json_num "$T/loss.json" offloaded)
check "MTU 9000, 1% loss: blocks and repairs in offload runs ($off of $(dgrams loss) datagrams)" \
	[ $(( ${off:-0} * 10 )) -ge $(( $(dgrams loss) * 9 )) -a "${off:-0}" -gt 0 ]
if [ -n "${NDZ_OLD_BIN:-}" ] && [ -x "$NDZ_OLD_BIN/frisbee" ]; then
	# an old client in the group at 1% loss: it gets REPAIRs, one a datagram
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log "$T/srv.log"
	FRISBEE="$NDZ_OLD_BIN/frisbee" mc_client c1 "$T/out1" -T 15 -vv
	mc_client c2 "$T/out2" -T 15 -vv
	mc_client c3 "$T/out3" -T 15 -vv
	mc_joined c1 c2 c3
	mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30 --stats-json "$T/lossold.json" -v
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	check "MTU 9000, 1% loss, an old frisbee and two new: all byte-identical" \
		sh -c "[ \"$(mc_rc c1)\" = 0 ] && [ \"$(mc_rc c2)\" = 0 ] && [ \"$(mc_rc c3)\" = 0 ] && cmp -s '$T/a.src' '$T/out1' && cmp -s '$T/a.src' '$T/out2' && cmp -s '$T/a.src' '$T/out3'"
	# no REPAIRS nor SPAN while the old one (c1, 10.77.0.11) is in the group: when it
	# left before the new ones were done, their last datagrams may be SPANs (a new
	# client that stepped down to 1472 bytes takes them), so only when it left last
	# must there be none
	old_last=0
	grep 'leave from' "$T/srv.log" | tail -1 | grep -q 'from 10\.77\.0\.11 ' && old_last=1
	check "MTU 9000, 1% loss, an old frisbee: REPAIRs ($(json_num "$T/lossold.json" repairs_sent)), no REPAIRS, no SPAN ($(json_num "$T/lossold.json" multi_repairs_sent), $(json_num "$T/lossold.json" spans_sent); the old one left last: $old_last)" \
		sh -c "[ \"$(json_num "$T/lossold.json" repairs_sent)\" -gt 0 ] && { [ $old_last = 0 ] || { [ \"$(json_num "$T/lossold.json" multi_repairs_sent)\" = 0 ] && [ \"$(json_num "$T/lossold.json" spans_sent)\" = 0 ]; }; }"
fi
for h in c1 c2 c3 c4 c5 c6 c7 c8; do netns_noloss "$h"; done

# on 1500: SPANs of 1440 bytes, datagrams of 1460 (not BLOCKs of 1044), GRO on and off
lan 1500
for gro in off on; do
	gro_ok=1
	for h in c1 c2; do netns_gro_path "$h" "$gro" || gro_ok=0; done
	if [ "$gro" = on ] && [ "$gro_ok" = 0 ]; then
		skip "MTU 1500, GRO on: ethtool missing or refused"
		continue
	fi
	opts=""
	[ "$gro" = off ] && opts=--no-gro
	CLIENT_OPTS=$opts run "small$gro" 2
	check "MTU 1500, GRO $gro: 2 clients byte-identical ($GOOD good)" [ "$GOOD" = 2 ]
	check "MTU 1500, GRO $gro: SPANs of 1440 bytes ($(json_num "$T/small$gro.json" spans_sent) SPANs, $(dgrams "small$gro") datagrams for $(blocks "small$gro") blocks)" \
		spans "small$gro" 1440
	# every datagram but repairs and a run's last is 1460 bytes: the bytes say so
	check "MTU 1500, GRO $gro: datagrams of 1460 bytes ($(json_num "$T/small$gro.json" bytes_sent) bytes in $(dgrams "small$gro"))" \
		[ $(( $(json_num "$T/small$gro.json" bytes_sent) / $(dgrams "small$gro") )) -gt 1300 ]
	check "MTU 1500, GRO $gro: the clients took SPANs" grep -q 'told the server we take datagrams of 1472 bytes, SPANs too' "$T/c1.log"
done
# a client that takes a BLOCK only: the group falls back to BLOCKs
CLIENT_OPTS="--max-datagram 1044" run small1k 2
check "MTU 1500, --max-datagram 1044: byte-identical ($GOOD good)" [ "$GOOD" = 2 ]
check "MTU 1500, --max-datagram 1044: one block a datagram, no SPAN" sh -c "[ \"$(dgrams small1k)\" = \"$(blocks small1k)\" ] && [ \"$(json_num "$T/small1k.json" spans_sent)\" = 0 ]"
if [ -n "${NDZ_OLD_BIN:-}" ] && [ -x "$NDZ_OLD_BIN/frisbee" ] && [ -x "$NDZ_OLD_BIN/frisbeed" ]; then
	# an old client beside a new one at 1500: BLOCKs for the group; an old server
	rm -f "$T"/c*.rc "$T"/out* "$T"/c*.log "$T/srv.log"
	FRISBEE="$NDZ_OLD_BIN/frisbee" mc_client c1 "$T/out1" -T 15 -vv
	mc_client c2 "$T/out2" -T 15 -vv
	mc_joined c1 c2
	mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30 --stats-json "$T/mixed1500.json"
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	check "MTU 1500, old frisbee and new frisbee, new frisbeed: both byte-identical" \
		sh -c "[ \"$(mc_rc c1)\" = 0 ] && [ \"$(mc_rc c2)\" = 0 ] && cmp -s '$T/a.src' '$T/out1' && cmp -s '$T/a.src' '$T/out2'"
	check "MTU 1500, old frisbee in the group: BLOCKs, no SPAN" nospan mixed1500
	SERVER_BIN="$NDZ_OLD_BIN/frisbeed" run oldsrv1500 2
	check "MTU 1500, new frisbee, old frisbeed: 2 clients byte-identical ($GOOD good)" [ "$GOOD" = 2 ]
	check "MTU 1500, new frisbee, old frisbeed: no CAPS sent to it" sh -c "! grep -q 'told the server' '$T/c1.log'"
else
	skip "MTU 1500, old against new: no build of the protocol before BLOCKS"
fi
# 1% loss at 4 clients, on 1500
for h in c1 c2 c3 c4; do netns_loss "$h" 1; done
run loss1500 4
check "MTU 1500, 1% loss, 4 clients: all byte-identical ($GOOD good)" [ "$GOOD" = 4 ]
check "MTU 1500, 1% loss, 4 clients: SPANs of 1440 ($(json_num "$T/loss1500.json" spans_sent) SPANs, $(json_num "$T/loss1500.json" repairs_sent) repairs)" \
	spans loss1500 1440
for h in c1 c2 c3 c4; do netns_noloss "$h"; done
done_testing
