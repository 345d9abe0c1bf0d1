#!/bin/sh
# Multicast of original Frisbee images: frisbeed serves them as they are, frisbee
# restores each to what the original imageunzip restored (corpus.tsv), and a
# version 1 image, whose chunks cannot be placed out of order, is a clear error.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require
netns_lan && netns_host srv 1 && netns_host c1 11 || { not_ok "namespace LAN"; done_testing; }

R="${NDZ_ORIG_CORPUS:-$NDZ_TOP/../shared/reference/frisbee-images}"
if [ -f "$R/corpus.tsv" ]; then
	cp "$R"/*.ndz "$R/corpus.tsv" "$T"/
else
	R="$NDZ_TOP/tests/fixtures/orig"
	cp "$R/corpus.tsv" "$T"/
	for f in "$R"/*.ndz.gz; do gzip -dc "$f" >"$T/$(basename "$f" .gz)"; done
fi
field() { grep -P "^$1\t" "$T/corpus.tsv" | cut -f"$2"; }

for name in odd.f.v3 ext2-frag.F0.v3 disk-mbr.whole.v3 mixed6m.v4 mixed6m.v1; do
	[ -f "$T/$name.ndz" ] || continue
	rm -f "$T"/c1.rc "$T/out" "$T/c1.log"
	mc_client c1 "$T/out" -T 10 -vv
	mc_joined c1
	mc_server srv "$T/$name.ndz" -W "$MC_RATE" -T 30
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	if [ "$name" = mixed6m.v1 ]; then
		check "$name: refused with a reason" sh -c "[ \"$(mc_rc c1)\" = 1 ] &&
			grep -q 'version 1 image out of order' '$T/c1.log'"
		continue
	fi
	got=$(sha256sum "$T/out" 2>/dev/null | cut -c1-64)
	check "$name: the client's restore equals the original's" \
		sh -c "[ \"$(mc_rc c1)\" = 0 ] && [ '$got' = '$(field $name 14)' ]"
done

# a V4 Blowfish-encrypted image: with its key file the same restore
if [ -f "$T/mixed6m.v4.enc.ndz" ]; then
	cp "$R/enc.key" "$T/"
	rm -f "$T"/c1.rc "$T/out" "$T/c1.log"
	mc_client c1 "$T/out" -T 10 -vv --orig-key "$T/enc.key"
	mc_joined c1
	mc_server srv "$T/mixed6m.v4.enc.ndz" -W "$MC_RATE" -T 30
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	got=$(sha256sum "$T/out" 2>/dev/null | cut -c1-64)
	check "mixed6m.v4.enc: with --orig-key the client's restore equals the original's" \
		sh -c "[ \"$(mc_rc c1)\" = 0 ] && [ '$got' = '$(field mixed6m.v4.enc 14)' ]"
fi

# the master: an original image by name, on demand
SRV=10.77.0.1
mkdir -p "$T/run"
cat >"$T/m.conf" <<CONF
pool 239.192.1.0/29
ports 5000-5007
idle-timeout 2
rate $MC_RATE
image old $T/odd.f.v3.ndz allow 10.77.0.0/24
CONF
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -c "$T/m.conf" -r "$T/run" \
	2>>"$T/m.log" &
MPID=$!
at_exit "kill $MPID 2>/dev/null"
k=0
while ! in_ns srv ss -lun 2>/dev/null | grep -q ":3563 " && [ $k -lt 50 ]; do
	sleep 0.1; k=$((k + 1))
done
rm -f "$T/out"
in_ns c1 "$FRISBEE" -M "$SRV" -I old -T 10 "$T/out" 2>>"$T/c1.log"
rc=$?
got=$(sha256sum "$T/out" 2>/dev/null | cut -c1-64)
check "mfrisbeed: an original image by name restores as the original's" \
	sh -c "[ $rc = 0 ] && [ '$got' = '$(field odd.f.v3 14)' ]"
kill "$MPID"; wait "$MPID" 2>/dev/null

done_testing
