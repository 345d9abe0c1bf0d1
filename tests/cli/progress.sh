#!/bin/sh
# Progress: --progress=json gives one object a line with the documented fields, the
# bytes only grow, a flushing phase comes before the last line, done at 100% (imagezip,
# imageunzip, and frisbee and frisbee-upload in a namespace LAN); -o into a file gives
# plain lines without \r, on a terminal a redrawn line; the summary's rate carries the
# progress's label (what bytes, which way).
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
command -v python3 >/dev/null || skip_all "python3 missing (it parses the JSON lines)"

# jcheck FILE PROGRAM OF VERB [TOTAL]: the JSON lines of FILE (others are skipped) as
# documented; prints what is wrong, if anything, and fails then. JC_NOFLUSH=1: a job
# without a flush (imageunzip -n).
cat >"$T/jcheck.py" <<'EOF'
import json, os, sys
path, prog, of, verb = sys.argv[1:5]
noflush = os.environ.get("JC_NOFLUSH") == "1"
total = int(sys.argv[5]) if len(sys.argv) > 5 else None
fields = ("program", "phase", "bytes", "bytes_total", "bytes_of", "bytes_verb", "percent",
          "rate_bytes_s", "elapsed_s", "eta_s", "chunks", "chunks_total")
def bad(why):
    print(why)
    sys.exit(1)
objs = []
for n, line in enumerate(open(path, encoding="utf-8", errors="replace"), 1):
    if "\r" in line:
        bad("line %d has a carriage return" % n)
    if not line.startswith("{"):
        continue
    try:
        objs.append(json.loads(line))
    except ValueError as e:
        bad("line %d is not JSON: %s: %r" % (n, e, line))
if len(objs) < 3 - noflush:
    bad("%d JSON lines, want at least %d" % (len(objs), 3 - noflush))
prev = None
for o in objs:
    missing = [f for f in fields if f not in o]
    if missing:
        bad("missing fields %s in %r" % (missing, o))
    if (o["program"], o["bytes_of"], o["bytes_verb"]) != (prog, of, verb):
        bad("counts %s %s %s, want %s %s %s" % (o["program"], o["bytes_of"],
            o["bytes_verb"], prog, of, verb))
    if total is not None and o["bytes_total"] != total:
        bad("bytes_total %r, want %d" % (o["bytes_total"], total))
    if prev:
        for f in ("bytes", "elapsed_s", "chunks"):
            if o[f] is not None and o[f] < prev[f]:
                bad("%s went back: %r after %r" % (f, o[f], prev[f]))
        if prev["phase"] in ("done", "failed"):
            bad("a line after the last: %r" % o)
    prev = o
phases = [o["phase"] for o in objs]
if noflush:
    if "flushing" in phases or "flush_s" in objs[-1] or phases[-1] != "done":
        bad("phases %s, last %r: want no flush, then done" % (phases, objs[-1]))
elif "flushing" not in phases:
    bad("no flushing phase in %s" % phases)
elif phases.index("flushing") == 0 or phases[phases.index("flushing") + 1:] != ["done"]:
    bad("phases %s: want the job's, then flushing, then done" % sorted(set(phases)))
last = objs[-1]
if last["percent"] != 100.0 or last["eta_s"] != 0 or last["bytes"] == 0:
    bad("last line not at 100%%: %r" % last)
if not noflush and (not isinstance(last.get("flush_s"), (int, float)) or last["flush_s"] < 0):
    bad("last line without flush_s: %r" % last)
running = [o for o in objs if o["phase"] not in ("flushing", "done")]
if not any(isinstance(o["eta_s"], (int, float)) and o["percent"] < 100 for o in running):
    bad("no line with a time left before the end: %r" % running)
print("%d lines, phases %s, last %d bytes" % (len(objs), " ".join(dict.fromkeys(phases)),
      last["bytes"]))
EOF
jcheck() { python3 "$T/jcheck.py" "$@" >"$T/jc" 2>&1; _r=$?; cat "$T/jc"; return $_r; }
# labels FILE: the rate labels in FILE ("disk MB/s written"...), one a line, sorted
labels() {
	tr '\r' '\n' <"$1" | grep -oE '(disk|image) [0-9.]+ MB/s (read|written|received|sent|checked)' |
		sed 's/ [0-9.]* MB/ MB/' | sort -u
}
# progress FILE PROG: the progress lines of PROG in FILE
progress() { grep -E "^$2: (reading|writing|receiving|sending|flushing\.\.\.|done|failed)  " "$1"; }
# plain FILE PROG: plain progress lines of PROG, no \r, a flushing one, the last done at 100%
plain() {
	! grep -q "$(printf '\r')" "$1" && progress "$1" "$2" | grep -q "^$2: flushing\.\.\. " &&
		progress "$1" "$2" | tail -n 1 | grep -q "^$2: done  100.0%"
}
# same_label SUMMARY PROGRESS WANT: both files' rates are labelled WANT, and only so
same_label() { [ "$(labels "$1")" = "$3" ] && [ "$(labels "$2")" = "$3" ]; }

# a source of 12 MiB, a third random: imagezip reads it, imageunzip writes it back
{ head -c 4194304 /dev/urandom; yes "ndz progress test line" | head -c 8388608; } >"$T/src"
"$IMAGEZIP" -r --progress=json "$T/src" "$T/img.ndz" 2>"$T/zip.json"; rc=$?
check "imagezip --progress=json: exit 0" [ "$rc" = 0 ]
alloc=$(( ($(stat -c %s "$T/src") + 511) / 512 * 512 ))
r=$(jcheck "$T/zip.json" imagezip disk read "$alloc")
check "imagezip --progress=json: disk bytes read, growing, ETA, flushing, done at 100% ($r)" \
	[ $? = 0 ]

"$IMAGEUNZIP" --progress=json "$T/img.ndz" "$T/out" 2>"$T/unzip.json"; rc=$?
check "imageunzip --progress=json: exit 0, target restored" \
	sh -c "[ $rc = 0 ] && cmp -s '$T/src' '$T/out'"
r=$(jcheck "$T/unzip.json" imageunzip disk written)
check "imageunzip --progress=json: disk bytes written, growing, ETA, flushing, done at 100% ($r)" \
	[ $? = 0 ]
check "imageunzip --progress=json: the last line counts every byte of the target" \
	sh -c "tail -n 1 '$T/unzip.json' | grep -q '\"bytes\": $(stat -c %s "$T/src"),'"
"$IMAGEUNZIP" -n -v --progress=json "$T/img.ndz" 2>"$T/verify.json"; rc=$?
r=$(JC_NOFLUSH=1 jcheck "$T/verify.json" imageunzip image checked "$(stat -c %s "$T/img.ndz")"); jc=$?
lab=$(grep "^$T/img.ndz: " "$T/verify.json" | labels /dev/stdin)
check "imageunzip -n --progress=json: exit 0, image bytes checked, growing, ETA, done at 100%, no flush, the summary so labelled ($r)" \
	[ "$rc.$jc.$lab" = "0.0.image MB/s checked" ]
"$IMAGEUNZIP" -q --progress=json "$T/img.ndz" "$T/out.q" 2>"$T/unzip.q"
check "imageunzip -q --progress=json: the JSON lines still come" \
	sh -c "grep -q '\"phase\": \"done\"' '$T/unzip.q'"

# -o with stderr a file: plain lines, no \r; the summary's rate as the progress's
rm -f "$T/out"
"$IMAGEUNZIP" -o -v "$T/img.ndz" "$T/out" 2>"$T/unzip.txt"; rc=$?
check "imageunzip -o into a file: exit 0, plain lines without a carriage return, flushing, done at 100%" \
	eval '[ $rc = 0 ] && plain "$T/unzip.txt" imageunzip'
grep "^$T/img.ndz: " "$T/unzip.txt" >"$T/unzip.sum"
progress "$T/unzip.txt" imageunzip >"$T/unzip.prog"
check "imageunzip -v: the summary's rate is labelled as the progress's: $(labels "$T/unzip.sum")" \
	same_label "$T/unzip.sum" "$T/unzip.prog" "disk MB/s written"
check "imageunzip -v: the summary says how long the flush took" grep -q ', flushed in [0-9.]* s' "$T/unzip.sum"

"$IMAGEZIP" -r -o -v "$T/src" "$T/img2.ndz" 2>"$T/zip.txt"; rc=$?
check "imagezip -o into a file: exit 0, plain lines without a carriage return, flushing, done at 100%" \
	eval '[ $rc = 0 ] && plain "$T/zip.txt" imagezip'
grep "^$T/src: " "$T/zip.txt" >"$T/zip.sum"
progress "$T/zip.txt" imagezip >"$T/zip.prog"
check "imagezip -v: the summary's rate is labelled as the progress's: $(labels "$T/zip.sum")" \
	same_label "$T/zip.sum" "$T/zip.prog" "disk MB/s read"

# on a terminal (script(1) gives stderr a pty): one line redrawn with \r, ending done at 100%
if command -v script >/dev/null 2>&1; then
	rm -f "$T/out"
	script -qfec "'$IMAGEUNZIP' -o '$T/img.ndz' '$T/out'" /dev/null >"$T/tty" 2>&1 </dev/null
	check "imageunzip -o on a terminal: redrawn in place (carriage returns), ends done at 100% with the flush's time" \
		sh -c "grep -q \"\$(printf '\r')imageunzip: \" '$T/tty' &&
			tr '\r' '\n' <'$T/tty' | grep 'imageunzip: ' | tail -n 1 |
			grep -q 'imageunzip: done  100.0%.*disk .* MB/s written.*, flushed in '"
fi

"$IMAGEUNZIP" --progress=yaml "$T/img.ndz" "$T/out.y" 2>"$T/e"; rc=$?
check "imageunzip --progress=yaml: exit 2, names the format" \
	sh -c "[ $rc = 2 ] && grep -q \"unknown format 'yaml'\" '$T/e' && [ ! -e '$T/out.y' ]"

if ! netns_usable; then
	ok "# SKIP frisbee and frisbee-upload: network namespaces unavailable (needs root)"
	done_testing
fi
netns_lan && netns_host srv 1 && netns_host c1 11 && netns_host c2 12 ||
	{ not_ok "namespace LAN"; done_testing; }
mc_image a "$MC_MIB" 1 || { not_ok "make image"; done_testing; }
isize=$(stat -c %s "$T/a.ndz")
# a rate cap makes the transfer last a few seconds, so lines come while it runs
mc_client c1 "$T/out1" -T 20 -vv --progress=json
mc_client c2 "$T/out2" -T 20 -vv -o
mc_joined c1 c2
mc_server srv "$T/a.ndz" -W 40M -T 30
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
check "frisbee --progress=json and -o: both exit 0 with the image restored" \
	sh -c "[ '$(mc_rc c1)' = 0 ] && [ '$(mc_rc c2)' = 0 ] && cmp -s '$T/a.src' '$T/out1' &&
		cmp -s '$T/a.src' '$T/out2'"
r=$(jcheck "$T/c1.log" frisbee image received "$isize")
check "frisbee --progress=json: image bytes received, growing, ETA, flushing, done at 100% ($r)" \
	[ $? = 0 ]
check "frisbee -o into a file: plain lines without a carriage return, flushing, done at 100%" \
	plain "$T/c2.log" frisbee
grep "^frisbee: [0-9]* chunks in " "$T/c2.log" >"$T/c2.sum"
progress "$T/c2.log" frisbee >"$T/c2.prog"
check "frisbee: the summary's rate is labelled as the progress's: $(labels "$T/c2.sum")" \
	same_label "$T/c2.sum" "$T/c2.prog" "image MB/s received"
check "frisbee: the summary says how long the flush took" grep -q ', flushed in [0-9.]* s' "$T/c2.sum"

# frisbee-upload: to a master that stores uploads
mkdir -p "$T/up" "$T/run"
cat >"$T/m.conf" <<CONF
pool 239.192.6.0/29
ports 5300-5307
upload-dir $T/up allow 10.77.0.0/27 upload 10.77.0.11
CONF
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -c "$T/m.conf" -r "$T/run" 2>"$T/m.log" &
at_exit "kill $! 2>/dev/null"
wait_until 5 master_listens
in_ns c1 "$NDZ_BIN/frisbee-upload" -v -w 20 --progress=json -M 10.77.0.1 -I p1 "$T/a.ndz" \
	2>"$T/up.json"; rc=$?
check "frisbee-upload --progress=json: exit 0, stored" \
	sh -c "[ $rc = 0 ] && cmp -s '$T/a.ndz' '$T/up/p1.ndz'"
r=$(jcheck "$T/up.json" frisbee-upload image sent "$isize")
check "frisbee-upload --progress=json: image bytes sent, growing, ETA, flushing, done at 100% ($r)" \
	[ $? = 0 ]
in_ns c1 "$NDZ_BIN/frisbee-upload" -v -w 20 -o -M 10.77.0.1 -I p2 "$T/a.ndz" 2>"$T/up.txt"; rc=$?
check "frisbee-upload -o into a file: exit 0, plain lines without a carriage return, flushing, done at 100%" \
	eval '[ $rc = 0 ] && plain "$T/up.txt" frisbee-upload'
grep 'stored as image' "$T/up.txt" >"$T/up.sum"
progress "$T/up.txt" frisbee-upload >"$T/up.prog"
check "frisbee-upload -v: the summary's rate is labelled as the progress's: $(labels "$T/up.sum")" \
	same_label "$T/up.sum" "$T/up.prog" "image MB/s sent"
done_testing
