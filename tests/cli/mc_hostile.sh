#!/bin/sh
# Multicast: hostile peers against the client. 1. A forged server announcing images of
# 100 and 300 million chunks (tests/helpers/mcrogue "announce"): frisbee must not make
# room for them (its memory stays small), must keep -T, and must still take a real
# server's answer. 2. 37 kinds of hostile datagrams at 2,000/s (mcrogue "hostile": forged
# BLOCKs, repairs, FEATURES and JOIN_REPLYs carrying the server's address, requests of
# every kind): every client finishes, byte-identical, within a generous bound (the time
# it takes is in bench/hostile.sh); and the 16 kinds of SPAN, REPAIRS, RANGE_REPAIR
# (forged, another image's, off the 32-byte grain, empty, past the chunk or 2^32,
# longer than a SPAN may be or than a receiver reads, into a chunk already done),
# CAPS and RANGE_RREQUEST alone against a group taking SPANs: byte-identical (and no
# longer: nothing written outside the image), counted malformed by client and server.
# 3. Keys: a manifest signed by another key is that error at once; a forged one under
# the key's id is fetched again.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
IMAGEKEY="$NDZ_BIN/imagekey"
[ -x "$MCROGUE" ] && [ -x "$IMAGEZIP" ] || skip_all "mcrogue or imagezip not built"
[ -x /usr/bin/time ] || skip_all "/usr/bin/time (GNU time) missing"
netns_require
netns_lan && netns_host srv 1 && netns_host rogue 66 ||
	{ not_ok "namespace LAN"; done_testing; }
for i in 1 2 3; do netns_host "c$i" $((10 + i)) || not_ok "host c$i"; done
"$IMAGEKEY" -q generate -o "$T/k" && "$IMAGEKEY" -q generate -o "$T/k2" ||
	{ not_ok "imagekey generate"; done_testing; }
MC_ZIP_OPTS="--sign $T/k.sec" mc_image a "$MC_MIB" 5 || { not_ok "make image"; done_testing; }

# timed_client NAME TARGET [OPTIONS...]: as mc_client, under GNU time (at most 120 s):
# $T/NAME.time gets "max-RSS-KiB elapsed-seconds".
timed_client() {
	_h=$1 _t=$2; shift 2
	# shellcheck disable=SC2086
	( in_ns "$_h" timeout 120 /usr/bin/time -f "%M %e" -o "$T/$_h.time" \
		"$FRISBEE" $MC_NOREPAIR -m "$MC_GROUP" -p "$MC_PORT" "$@" "$_t" \
		2>>"$T/$_h.log"; echo $? >"$T/$_h.rc" ) &
	MC_PIDS="$MC_PIDS $!"
}
# (GNU time puts a line before them when the exit status is not 0)
# frisbee's most resident memory, at most (64 MiB; sanitizers add their own)
maxrss=65536
[ "${NDZ_SANITIZED:-0}" = 1 ] && maxrss=307200
rss() { _v=$(tail -n 1 "$T/$1.time" 2>/dev/null | cut -d' ' -f1); echo "${_v:-999999999}"; }
secs() { _v=$(tail -n 1 "$T/$1.time" 2>/dev/null | cut -d' ' -f2 | cut -d. -f1); echo "${_v:-999}"; }
clean() { rm -f "$T"/c*.rc "$T"/c*.log "$T"/c*.time "$T"/out* "$T"/rogue.out; }
# rogue ARGS...: mcrogue in the rogue host, in the background; sets rpid (ip netns exec
# execs it: SIGTERM reaches it)
rogue() {
	ip netns exec "${NETNS_PFX}rogue" "$MCROGUE" "$MC_GROUP" "$MC_PORT" "$@" >>"$T/rogue.out" 2>&1 &
	rpid=$!
	at_exit "kill $rpid"
}

# ---- 1. forged announcements of huge images ----
# 100 million chunks of a 100 TB source, against a 64 MiB target: more than it holds
clean
head -c $((64 << 20)) /dev/zero >"$T/small"
rogue 8 20 - announce 100000000 104857600000000
sleep 0.3
timed_client c1 "$T/small" -T 3
mc_wait
wait "$rpid"
check "100M chunks: the forger answered" grep -q 'answering a JOIN' "$T/rogue.out"
check "100M chunks, 64 MiB target: fails, naming the target's size ($(mc_rc c1))" sh -c \
	"[ \"$(mc_rc c1)\" = 1 ] && grep -q 'small: target too small for the image (67108864 bytes, the image needs 104857600000000), announced by server 10.77.0.66' '$T/c1.log'"
check "100M chunks: max RSS $(rss c1) KiB, under $maxrss KiB" [ "$(rss c1)" -lt $maxrss ]
check "100M chunks: done in $(secs c1) s, within -T 3 and a margin" [ "$(secs c1)" -lt 15 ]

# 300 million chunks of a 153.6 GB source (one sector a chunk: plausible), into a new
# file: joined, but it costs a bit a chunk, and -T counts from the announcement on
clean
rogue 8 20 - announce 300000000 153600000000
sleep 0.3
timed_client c1 "$T/out1" -T 3
mc_wait
wait "$rpid"
check "300M chunks: gives up after -T ($(mc_rc c1))" sh -c \
	"[ \"$(mc_rc c1)\" = 1 ] && grep -q 'no data from server 10.77.0.66 for 3 s' '$T/c1.log'"
check "300M chunks: max RSS $(rss c1) KiB, under $maxrss KiB" [ "$(rss c1)" -lt $maxrss ]
check "300M chunks: done in $(secs c1) s, within -T 3 and a margin" [ "$(secs c1)" -lt 15 ]
rm -f "$T/out1"

# the forger answers every JOIN, with an image of more chunks than its source size
# allows (implausible for any target), for a second before the real server starts;
# that one's answer is taken
clean
rogue 30 20 - announce 100000000 1048576
sleep 0.3
timed_client c1 "$T/out1" -T 10 -v
timed_client c2 "$T/out2" -T 10 -v -S 10.77.0.1
sleep 1
mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30
mc_wait
kill "$rpid" 2>/dev/null; wait "$rpid"
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
for i in 1 2; do
	check "a forged implausible announcement: client $i byte-identical ($(mc_rc "c$i"))" \
		sh -c "[ \"$(mc_rc "c$i")\" = 0 ] && cmp -s '$T/a.src' '$T/out$i'"
done
check "a forged implausible announcement: ignored, and said so" \
	grep -q 'server 10.77.0.66 announces an image of 100000000 chunks restoring to 1048576 bytes: more chunks than that many bytes can need; waiting for another' "$T/c1.log"

# ---- 2. 37 kinds of hostile datagrams at 2,000/s, for longer than a restore takes ----
# (3 s without them; 70 s and more before the fix, here and in bench/hostile.sh)
clean
mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 90
rogue 300 2000 10.77.0.1 hostile     # (until stopped below)
sleep 1
timed_client c1 "$T/out1" -T 20 -v
timed_client c2 "$T/out2" -T 20 -v -S 10.77.0.1
timed_client c3 "$T/out3" -T 20 -v --no-whole-repair
mc_wait
kill "$rpid"; wait "$rpid"
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
check "hostile: the host sent" grep -q 'sent [1-9][0-9]* packets' "$T/rogue.out"
for i in 1 2 3; do
	if [ "$(mc_rc "c$i")" = 0 ] && cmp -s "$T/a.src" "$T/out$i" && [ "$(secs "c$i")" -lt 100 ]; then
		ok "hostile: client $i byte-identical, in $(secs "c$i") s (under 100 s)"
	else
		not_ok "hostile: client $i byte-identical under 100 s (exit $(mc_rc "c$i"), $(secs "c$i") s)"
		sort "$T/c$i.log" | uniq -c | sort -rn | head -5 | sed 's/^/# /'
	fi
done
check "hostile: the clients counted what they dropped" \
	grep -q 'dropped: [1-9][0-9]* malformed, [1-9][0-9]* other version, [1-9][0-9]* foreign' "$T/c2.log"

# the SPAN, REPAIRS and RANGE_REPAIR kinds alone (mcrogue's 21-34; 35-36, malformed
# CAPS and RANGE_RREQUESTs, for the server, whose socket filter keeps the server's
# kinds from it), at MTU 1500 where the group takes SPANs of 1440 bytes: counted
# malformed by the clients (-v says) and the server (its statistics)
clean
mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 90 --stats-json "$T/span.json"
MCROGUE_KINDS=0x1fffe00000
export MCROGUE_KINDS
rogue 300 2000 10.77.0.1 hostile
unset MCROGUE_KINDS
sleep 1
timed_client c1 "$T/out1" -T 20 -v
timed_client c2 "$T/out2" -T 20 -v --no-whole-repair
mc_wait
kill "$rpid"; wait "$rpid"
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
check "SPAN kinds: the host sent" grep -q 'sent [1-9][0-9]* packets' "$T/rogue.out"
for i in 1 2; do
	check "SPAN kinds: client $i byte-identical, and no longer ($(mc_rc "c$i"))" \
		sh -c "[ \"$(mc_rc "c$i")\" = 0 ] && cmp -s '$T/a.src' '$T/out$i'"
	bad=$(sed -n 's/.*dropped: \([0-9]*\) malformed.*/\1/p' "$T/c$i.log" | tail -n 1)
	check "SPAN kinds: client $i counted ${bad:-no} malformed" [ "${bad:-0}" -ge 10 ]
done
check "SPAN kinds: the group took SPANs ($(json_num "$T/span.json" spans_sent))" \
	[ "$(json_num "$T/span.json" spans_sent)" -gt 0 ]
check "SPAN kinds: the server counted malformed ones ($(json_num "$T/span.json" bad_packets))" \
	[ "$(json_num "$T/span.json" bad_packets)" -gt 0 ]

# ---- 3. keys ----
id_of() { sed -n 's/^id //p' "$1"; }
clean
mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30
timed_client c1 "$T/out1" -T 30 --key "$T/k2.pub"
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
check "another key: that error at once, naming both ids ($(mc_rc c1), $(secs c1) s)" sh -c \
	"[ \"$(mc_rc c1)\" = 1 ] && [ ! -e '$T/out1' ] &&
	 grep -q 'the manifest from server 10.77.0.1: signed or encrypted with another key: manifest signed by another key (id $(id_of "$T/k.pub"), not $(id_of "$T/k2.pub"))' '$T/c1.log'"
check "another key: no advice to give --manifest" sh -c "! grep -q 'give --manifest' '$T/c1.log'"
check "another key: well before -T 30 ($(secs c1) s)" [ "$(secs c1)" -lt 20 ]

# a forger sends the manifest, one hash byte changed (right key id, bad signature), as
# block 0 of the manifest chunk from the server's address, 5,000 times a second for
# 3 s, and answers JOINs as the server would: the server is away for the first 1.5 s,
# so the forged manifest is the first one the client gets. Fetched again until it is
# the server's.
clean
chunks=$(( $(stat -c %s "$T/a.ndz") / 1048576 ))
cp "$T/a.ndz.manifest" "$T/forged.manifest"
printf '\001' | dd of="$T/forged.manifest" bs=1 seek=70 conv=notrunc 2>/dev/null
cmp -s "$T/a.ndz.manifest" "$T/forged.manifest" && printf '\002' |
	dd of="$T/forged.manifest" bs=1 seek=70 conv=notrunc 2>/dev/null
mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30
rogue 3 5000 10.77.0.1 block "$T/forged.manifest" "$chunks"
sleep 0.5
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
timed_client c1 "$T/out1" -T 20 -v --key "$T/k.pub"
sleep 1.5
mc_server srv "$T/a.ndz" -W "$MC_RATE" -T 30
mc_wait
wait "$rpid"
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
check "forged manifest: the forger sent" grep -q 'sent [1-9][0-9]* blocks' "$T/rogue.out"
check "forged manifest (the key's id, bad signature): fetched again" \
	grep -q "the manifest from server 10.77.0.1: bad manifest signature; fetching it again" "$T/c1.log"
if [ "$(mc_rc c1)" = 0 ] && cmp -s "$T/a.src" "$T/out1" &&
	grep -q "signed manifest of $chunks chunks from server 10.77.0.1: signature good" "$T/c1.log"; then
	ok "forged manifest: then the server's, and the target byte-identical"
else
	not_ok "forged manifest: then the server's, and the target byte-identical ($(mc_rc c1))"
	sort "$T/c1.log" | uniq -c | sort -rn | head -8 | sed 's/^/# /'
fi
done_testing
