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
	cp "$R"/*.ndz "$R"/*.skey "$R/corpus.tsv" "$T"/
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

# --orig-pubkey: the signed V4 image restores; an unsigned one, a V3 one and the
# signed one with chunk 1 swapped for an unsigned one are refused, nothing of the
# unsigned chunk written (the target was 0xa5)
if [ -f "$T/mixed6m.v4.sig.ndz" ]; then
	C=1048576
	head -c $C "$T/mixed6m.v4.sig.ndz" >"$T/swap1.ndz"
	tail -c +$((C + 1)) "$T/mixed6m.v4.ndz" >>"$T/swap1.ndz"
	for name in mixed6m.v4.sig mixed6m.v4 mixed6m.v3 swap1; do
		rm -f "$T"/c1.rc "$T/c1.log"
		head -c 6291456 /dev/zero | tr '\0' '\245' >"$T/out"
		mc_client c1 "$T/out" -T 10 -vv --force --orig-pubkey "$T/mixed6m.v4.sig.ndz.skey"
		mc_joined c1
		mc_server srv "$T/$name.ndz" -W "$MC_RATE" -T 30
		mc_wait
		kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
		got=$(sha256sum "$T/out" 2>/dev/null | cut -c1-64)
		# chunk 1 is sectors 5356 to 12288 of mixed6m (its one region)
		left=$(dd if="$T/out" bs=512 skip=5356 count=6932 2>/dev/null | tr -d '\245' |
		       wc -c)
		case $name in
		mixed6m.v4.sig)
			check "--orig-pubkey, signed V4: the client's restore equals the original's" \
				sh -c "[ \"$(mc_rc c1)\" = 0 ] &&
				       [ '$got' = '$(field mixed6m.v4.sig 14)' ]" ;;
		swap1)
			check "--orig-pubkey, signed V4 with chunk 1 unsigned: refused, nothing of it written" \
				sh -c "[ \"$(mc_rc c1)\" = 1 ] && [ $left = 0 ] &&
				       grep -q 'chunk 1: image is not signed (chunk has no signature' '$T/c1.log'" ;;
		*)
			check "--orig-pubkey, $name: refused, nothing of chunk 1 written" \
				sh -c "[ \"$(mc_rc c1)\" = 1 ] && [ $left = 0 ] &&
				       grep -q 'chunk [01]: image is not signed' '$T/c1.log'" ;;
		esac
	done
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
