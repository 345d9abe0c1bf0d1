#!/bin/sh
# Uploads to the image master: frisbee-upload then frisbee -M of what was uploaded;
# the master gives each its content index (IMAGE.index: what imagekey index makes of
# it), so a frisbee --seed from it skips chunks; corrupt, truncated, killed and
# stalled uploads leave nothing (no image, no index) and replace nothing;
# a session of the old image keeps serving it; busy, denied and quota refusals.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
UPLOAD="$NDZ_BIN/frisbee-upload"
out=$("$UPLOAD" --help); rc=$?
check "frisbee-upload --help: exit 0, usage on stdout" sh -c "[ $rc = 0 ] && echo \"\$1\" | grep -q '^Usage: frisbee-upload'" _ "$out"
out=$("$UPLOAD" --version); rc=$?
check "frisbee-upload --version: exit 0, names the version" sh -c "[ $rc = 0 ] && echo \"\$1\" | grep -Eq '^frisbee-upload \(ndz\) [0-9]+\.'" _ "$out"
"$UPLOAD" -M 127.0.0.1 x.ndz 2>"$T/err"; rc=$?
check "frisbee-upload without -I: exit 2 and says so" eval "[ $rc = 2 ] && grep -q '^frisbee-upload: -M HOST and -I NAME are required' '$T/err'"
"$UPLOAD" -M 127.0.0.1 -I x "$T/none.ndz" 2>"$T/err"; rc=$?
check "frisbee-upload of a missing file: exit 1 and names it" eval "[ $rc = 1 ] && grep -q '^frisbee-upload: $T/none.ndz: No such file' '$T/err'"
netns_require
MFRISBEED="$NDZ_BIN/mfrisbeed"
SRV=10.77.0.1
netns_lan && netns_host srv 1 || { not_ok "namespace LAN"; done_testing; }
netns_host c1 11 && netns_host c2 12 && netns_host c3 13 && netns_host far 99 ||
	{ not_ok "hosts"; done_testing; }
mkdir -p "$T/up" "$T/run"
for n in a b; do
	mc_image "$n" "$MC_MIB" "$n" || { not_ok "make image $n"; done_testing; }
done
cat >"$T/m.conf" <<CONF
# uploads from c1 and c3 into $T/up; downloads for the /27
pool 239.192.5.0/29
ports 5200-5207
max-sessions 4
idle-timeout 2
upload-dir $T/up allow 10.77.0.0/27 upload 10.77.0.11,10.77.0.13 rate 24M
image fixed $T/a.ndz allow 10.77.0.0/27
upload-timeout 2
max-uploads 4
CONF
ip netns exec "${NETNS_PFX}srv" "$MFRISBEED" -c "$T/m.conf" -r "$T/run" -v 2>"$T/m.log" &
MPID=$!
wait_until 2 master_listens
# up HOST NAME FILE|-: frisbee-upload from HOST; its stderr in $T/err, exit status in rc
up() { in_ns "$1" "$UPLOAD" -w 10 -M "$SRV" -I "$2" "$3" 2>"$T/err"; rc=$?; }
# fetch HOST NAME TARGET: frisbee -M in the background, exit status into $T/HOST.rc
fetch() {
	( in_ns "$1" "$FRISBEE" $MC_RAW -M "$SRV" -I "$2" -T 10 "$3" 2>>"$T/$1.log"
	  echo $? >"$T/$1.rc" ) &
	MC_PIDS="$MC_PIDS $!"
}
status() { in_ns c1 "$MFRISBEED" --status "$SRV"; }
# gold_uploading: the master's status shows an upload of gold under way
gold_uploading() { status | grep -q '"uploading": \[{"image": "gold"'; }
# half_up ERR: frisbee-upload of gold from c1 reading the fifo (its pid in upid, its
# stderr in ERR), fed half an image; the fifo stays open on fd 3
half_up() {
	ip netns exec "${NETNS_PFX}c1" "$UPLOAD" -w 10 -M "$SRV" -I gold "$T/fifo" 2>"$1" &
	upid=$!
	exec 3>"$T/fifo"
	cat "$T/half" >&3
}
# only these files (NAME.ndz, NAME.ndz.index) in the upload directory, no temporary file
only() { [ "$(ls -A "$T/up" | tr '\n' ' ')" = "$* " ]; }
# gone: wait (at most 4 s) until no upload runs and no temporary file is left
gone() {
	for _k in $(seq 40); do
		status >"$T/st.json"
		grep -q '"uploading": \[\]' "$T/st.json" && only "$@" && return 0
		sleep 0.1
	done
	return 1
}
msg() { cat "$T/err"; }

# a new image through a pipe, then served to a client
t0=$(date +%s)
mkfifo "$T/fifo"
cat "$T/b.ndz" >"$T/fifo" &
up c1 gold - <"$T/fifo"
check "upload through a pipe: exit 0, silent ($rc)" eval "[ $rc = 0 ] && [ ! -s '$T/err' ]"
check "the stored image is the uploaded one, nothing else left" \
	eval "cmp -s '$T/b.ndz' '$T/up/gold.ndz' && only gold.ndz gold.ndz.index"
"$NDZ_BIN/imagekey" -q index -x "$T/b.index" "$T/up/gold.ndz" 2>/dev/null ||
	not_ok "imagekey index of the stored image"
check "... its content index, the very bytes imagekey index makes of it" \
	cmp -s "$T/b.index" "$T/up/gold.ndz.index"
fetch c2 gold "$T/out1"
mc_wait
check "frisbee -M of the uploaded image: byte-identical restore" \
	eval "[ \"$(mc_rc c2)\" = 0 ] && mc_same '$T/b.src' '$T/out1'"
# the session's own counts (frisbeed rewrites them once a second); the client has
# left with its image: done, no longer a receiver
sent=0
for k in $(seq 15); do
	sent=$(status | tee "$T/st.json" |
		grep -o '"image": "gold", [^}]*"receivers": 0, "bytes_sent": [0-9]*' | sed 's/.*: //')
	[ "${sent:-0}" -ge "$(stat -c %s "$T/b.ndz")" ] && break
	sleep 0.1
done
check "status counts the session's bytes sent (${sent:-none}) and its client done" \
	eval "[ \"${sent:-0}\" -ge \"$(stat -c %s "$T/b.ndz")\" ] &&
	      grep -q '\"image\": \"gold\", [^]]*\"active\": 0, \"done\": 1, ' '$T/st.json'"

if [ -z "$MC_RAW" ]; then            # a real image (imagezip built): seeded again
	in_ns c2 "$FRISBEE" -M "$SRV" -I gold --seed -T 10 "$T/out1" 2>"$T/seed.log"; rc=$?
	n=$(sed -n 's/.*; \([0-9]*\) chunks skipped (held by the target).*/\1/p' "$T/seed.log" |
		tail -1)
	check "frisbee --seed of it onto that restore: exit 0, ${n:-no} chunks skipped ($rc)" \
		sh -c "[ $rc = 0 ] && cmp -s '$T/b.src' '$T/out1' && [ '${n:-0}' -gt 0 ]"
fi

# replaced while a session serves it: the session keeps the old image, new clients get the new
rm -f "$T"/c*.rc
fetch c2 gold "$T/out2"
sleep 0.3
up c1 gold "$T/a.ndz"
check "upload of a file over a served image: exit 0 ($rc: $(msg))" [ "$rc" = 0 ]
"$NDZ_BIN/imagekey" -q index -x "$T/a.index" "$T/up/gold.ndz" 2>/dev/null ||
	not_ok "imagekey index of the new image"
check "... the index replaced with the new image's" cmp -s "$T/a.index" "$T/up/gold.ndz.index"
status >"$T/st1.json"
check "the running session is marked replaced" grep -q '"image": "gold", .*"replaced": true' "$T/st1.json"
fetch c3 gold "$T/out3"
mc_wait
check "the old session's client got the old image" eval "[ \"$(mc_rc c2)\" = 0 ] && mc_same '$T/b.src' '$T/out2'"
check "a new client got the new image" eval "[ \"$(mc_rc c3)\" = 0 ] && mc_same '$T/a.src' '$T/out3'"

# bad uploads: each rejected with its reason, nothing left, the old image kept
cp "$T/b.ndz" "$T/flip.ndz"
size=$(stat -c %s "$T/b.ndz")
printf '\377' | dd of="$T/flip.ndz" bs=1 seek=$(( size / 2 + 4097 )) conv=notrunc 2>/dev/null
up c1 gold - <"$T/flip.ndz"
check "one byte flipped mid-stream: exit 1, rejected with the chunk named ($(msg))" \
	eval "[ $rc = 1 ] && grep -Eq \"^frisbee-upload: master $SRV:3563: image 'gold': not a sound image: upload: chunk [0-9]+: bad data checksum\" '$T/err'"
check "... nothing left, the old image kept" eval "only gold.ndz gold.ndz.index && cmp -s '$T/a.ndz' '$T/up/gold.ndz' &&
	      cmp -s '$T/a.index' '$T/up/gold.ndz.index'"
head -c $(( size / 2 )) "$T/b.ndz" >"$T/half"
up c1 gold - <"$T/half"
check "truncated upload: exit 1, rejected ($(msg))" \
	eval "[ $rc = 1 ] && grep -q \"not a sound image: upload: chunk [0-9]*: truncated chunk\" '$T/err'"
check "... nothing left, the old image kept" eval "only gold.ndz gold.ndz.index && cmp -s '$T/a.ndz' '$T/up/gold.ndz' &&
	      cmp -s '$T/a.index' '$T/up/gold.ndz.index'"
half_up "$T/err.k"
wait_until 3 gold_uploading
kill -9 "$upid"; wait "$upid" 2>/dev/null
exec 3>&-
check "killed uploader: nothing left, the old image kept" \
	eval "gone gold.ndz gold.ndz.index && cmp -s '$T/a.ndz' '$T/up/gold.ndz' &&
	      cmp -s '$T/a.index' '$T/up/gold.ndz.index'"
half_up "$T/err"
t1=$(date +%s)
wait "$upid"; rc=$?
exec 3>&-
check "stalled uploader: cut off after $(( $(date +%s) - t1 )) s, exit 1 ($(msg))" \
	eval "[ $rc = 1 ] && grep -q 'the upload went quiet for too long: nothing received for 2 s, after [0-9]* bytes$' '$T/err' && [ $(( $(date +%s) - t1 )) -le 20 ]"
check "... nothing left, the old image kept" eval "gone gold.ndz gold.ndz.index && cmp -s '$T/a.ndz' '$T/up/gold.ndz' &&
	      cmp -s '$T/a.index' '$T/up/gold.ndz.index'"
rm -f "$T/c2.rc"
fetch c2 gold "$T/out4"
mc_wait
check "after the failed uploads the previous image is still served" \
	eval "[ \"$(mc_rc c2)\" = 0 ] && mc_same '$T/a.src' '$T/out4'"

# refusals before any byte: exit 3 with the reason
up far gold "$T/b.ndz"
check "a host the upload list does not name: exit 3, access denied ($(msg))" \
	eval "[ $rc = 3 ] && [ \"\$(msg)\" = \"frisbee-upload: master $SRV:3563: image 'gold': access denied: no upload rule matches 10.77.0.99 for image 'gold'\" ]"
up c1 fixed "$T/b.ndz"
check "an image without an upload list: exit 3, access denied" \
	eval "[ $rc = 3 ] && grep -q \"image 'fixed': access denied\" '$T/err'"
# two uploads to one name: the first holds it, the second is refused; the first wins
half_up "$T/err.1"
wait_until 3 gold_uploading
t1=$(date +%s%N)
r1=$(in_ns c2 "$NDZ_BUILD/tests/helpers/ctlask" "$SRV" 3563 fixed)
t2=$(date +%s%N)
check "a GET while an upload runs is answered in $(( (t2 - t1) / 1000000 )) ms ($r1)" \
	eval "echo '$r1' | grep -q '^ok ' && [ $(( (t2 - t1) / 1000000 )) -lt 5000 ]"
up c3 gold "$T/b.ndz"
tail -c +$(( size / 2 + 1 )) "$T/b.ndz" >&3
exec 3>&-
wait "$upid"; rc1=$?
check "two uploads to one name: the second is refused, exit 3 ($rc: $(msg))" \
	eval "[ $rc = 3 ] && grep -q \"image 'gold': another upload to that image is running\" '$T/err'"
check "... and the first wins: exit $rc1, the image is the new one" \
	eval "[ $rc1 = 0 ] && cmp -s '$T/b.ndz' '$T/up/gold.ndz' && only gold.ndz gold.ndz.index &&
	      cmp -s '$T/b.index' '$T/up/gold.ndz.index'"

# quota: checked against the declared size before, and during a stream of unknown size
used=$(cat "$T"/up/* | wc -c)
echo "quota $(( used + size / 2 ))" >>"$T/m.conf"
kill -HUP "$MPID"
sleep 0.3
up c1 big "$T/b.ndz"
check "quota exceeded by the declared size: exit 3, refused ($(msg))" \
	eval "[ $rc = 3 ] && grep -q \"image 'big': upload quota exceeded\$\" '$T/err'"
cat "$T/b.ndz" >"$T/fifo" &
up c1 big - <"$T/fifo"
check "quota exceeded mid-stream: exit 1, rejected ($(msg))" \
	eval "[ $rc = 1 ] && grep -q \"image 'big': upload quota exceeded: upload: chunk [0-9]*: past the quota\" '$T/err'"
check "... nothing left" only gold.ndz gold.ndz.index
status >"$T/st2.json"
check "uploads are counted (3 stored, 5 rejected, 3 refused; far refused at connect)" grep -q \
	'"uploads": 11, "uploads_stored": 3, "uploads_rejected": 5, "uploads_refused": 3, "tcp_denied": 1, ' "$T/st2.json"
check "the master's log names each rejection" \
	eval "[ \$(grep -c '^mfrisbeed: upload of [a-z]* from 10.77.0.11 rejected: ' '$T/m.log') = 5 ]"
kill -TERM "$MPID"; wait "$MPID"; rc=$?
check "mfrisbeed exits 0 on SIGTERM ($(( $(date +%s) - t0 )) s in all)" [ "$rc" = 0 ]
done_testing
