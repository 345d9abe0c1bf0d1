#!/bin/sh
# The programs as Unix tools: help, version, usage errors, exit codes, no partial
# output on failure, memory bounded by imageunzip -m.
. "$NDZ_TOP/tests/lib.sh"

for p in "$IMAGEZIP" "$IMAGEUNZIP"; do
	n=$(basename "$p")
	out=$("$p" --help); rc=$?
	check "$n --help exits 0 and prints usage on stdout" \
		sh -c "[ $rc -eq 0 ] && echo \"\$1\" | grep -q '^Usage: $n'" _ "$out"
	out=$("$p" --version); rc=$?
	check "$n --version exits 0 and names the version" \
		sh -c "[ $rc -eq 0 ] && echo \"\$1\" | grep -Eq '^$n \\(ndz\\) [0-9]+\\.[0-9]+'" _ "$out"
	"$p" --no-such-option >"$T/o" 2>"$T/e"; rc=$?
	check "$n: unknown option exits 2 with a hint" \
		sh -c "[ $rc -eq 2 ] && grep -q -- '--help' '$T/e' && [ ! -s '$T/o' ]"
	"$p" >"$T/o" 2>"$T/e"; rc=$?
	check "$n: missing arguments exit 2" test $rc -eq 2
done

head -c 3000000 /dev/urandom >"$T/src"

# Quiet unless asked: a good run prints nothing at all (-r: random data is no
# filesystem, which imagezip would otherwise warn about).
"$IMAGEZIP" -r "$T/src" "$T/img" >"$T/o" 2>"$T/e"
check "imagezip is silent on success" sh -c "[ ! -s '$T/o' ] && [ ! -s '$T/e' ]"
"$IMAGEUNZIP" "$T/img" "$T/out" >"$T/o" 2>"$T/e"
check "imageunzip is silent on success" sh -c "[ ! -s '$T/o' ] && [ ! -s '$T/e' ]"
"$IMAGEUNZIP" -v "$T/img" "$T/out2" 2>"$T/e"
check "imageunzip -v prints a summary" grep -q "3 chunks, 3000000 bytes written" "$T/e"

"$IMAGEZIP" -z 20 "$T/src" "$T/x" 2>"$T/e"; rc=$?
check "imagezip -z 20 is a usage error naming the option" \
	sh -c "[ $rc -eq 2 ] && grep -q -- '-z' '$T/e' && [ ! -e '$T/x' ]"

# A failed imagezip leaves nothing under the final name (nor a temporary file).
"$IMAGEZIP" "$T/no-such-source" "$T/x" 2>"$T/e"; rc=$?
check "imagezip of a missing source: exit 1, named error, no image" \
	sh -c "[ $rc -eq 1 ] && grep -q 'no-such-source' '$T/e' && [ ! -e '$T/x' ]"
mkfifo "$T/fifo"
"$IMAGEZIP" "$T/fifo" "$T/x" 2>"$T/e"; rc=$?
check "imagezip of a fifo: exit 1, not a file or device" \
	sh -c "[ $rc -eq 1 ] && grep -q 'not a regular file or block device' '$T/e'"
# Killed half-way: a slow source (a big file, one thread) stopped by SIGTERM.
head -c 200000000 /dev/urandom >"$T/bigsrc" 2>/dev/null
"$IMAGEZIP" -j 1 -z 9 "$T/bigsrc" "$T/killed.ndz" &
pid=$!
sleep 0.5
kill -TERM $pid 2>/dev/null
wait $pid; rc=$?
check "imagezip killed mid-way exits non-zero" test $rc -ne 0
check "imagezip killed mid-way leaves neither the image nor a temporary" \
	sh -c "! ls '$T' | grep -q '^killed.ndz'"
rm -f "$T/bigsrc"
# Writing to a full device fails with the device named.
if [ -w /dev/full ]; then
	"$IMAGEZIP" "$T/src" - >/dev/full 2>"$T/e"; rc=$?
	check "imagezip to a full stdout: exit 1 with a write error" \
		sh -c "[ $rc -eq 1 ] && grep -q 'write error' '$T/e'"
fi

# A failed restore into a file it created removes that file.
head -c 1000000 "$T/img" >"$T/trunc.ndz"
cat "$T/trunc.ndz" | "$IMAGEUNZIP" - "$T/new" 2>"$T/e"; rc=$?
check "imageunzip from a truncated stdin: exit 1, chunk named, no target left" \
	sh -c "[ $rc -eq 1 ] && grep -q 'chunk 0: truncated chunk' '$T/e' && [ ! -e '$T/new' ]"

# Progress on a terminal (script(1) gives stderr a pty): imageunzip -o redraws as the
# restore goes, not once at the end. The image comes in two parts a second apart, so
# a redraw must fall between them; from a file the last line says 100%.
if command -v script >/dev/null 2>&1; then
	head -c 4000000 /dev/urandom >"$T/p.src"
	"$IMAGEZIP" -r "$T/p.src" "$T/p.ndz"
	cat >"$T/p.sh" <<EOF
{ head -c 2097152 '$T/p.ndz'; sleep 1; tail -c +2097153 '$T/p.ndz'; } |
	'$IMAGEUNZIP' -o - '$T/p.out'
EOF
	script -qfec "sh '$T/p.sh'" /dev/null >"$T/p.tty" 2>&1 </dev/null
	draws=$(tr '\r' '\n' <"$T/p.tty" | grep -c 'imageunzip:')
	check "imageunzip -o redraws its progress line during a restore ($draws draws)" \
		test "$draws" -ge 3
	check "imageunzip -o from stdin restored the image" cmp -s "$T/p.src" "$T/p.out"
	rm -f "$T/p.out"
	script -qfec "'$IMAGEUNZIP' -o '$T/p.ndz' '$T/p.out'" /dev/null >"$T/p.tty" 2>&1 </dev/null
	check "imageunzip -o from a file ends at 100%" \
		sh -c "tr '\r' '\n' <'$T/p.tty' | grep 'imageunzip:' | tail -n 1 | grep -q '100.0%'"
fi

# Peak memory stays under -m (measured by the kernel: getrusage via time -f %M).
if [ "$NDZ_SANITIZED" != 1 ] && [ -x /usr/bin/time ]; then
	{ head -c 40000000 /dev/urandom; head -c 60000000 /dev/zero; } >"$T/m.src"
	"$IMAGEZIP" --codec zlib "$T/m.src" "$T/m.ndz"
	"$IMAGEZIP" --codec zstd "$T/m.src" "$T/mz.ndz"
	# (zstd touches all of its 4 MiB jobs: at 16 MiB imageunzip runs one decoder)
	for mib in zlib:16 zlib:32 zlib:128 zstd:16 zstd:32 zstd:128; do
		img="$T/m.ndz"
		[ "${mib%%:*}" = zlib ] || img="$T/mz.ndz"
		c=${mib%%:*} mib=${mib#*:}
		rm -f "$T/m.out"
		/usr/bin/time -f %M -o "$T/rss" "$IMAGEUNZIP" -m $mib "$img" "$T/m.out"
		kb=$(tail -n 1 "$T/rss")
		check "imageunzip -m $mib, $c: peak RSS ${kb} KiB <= $((mib * 1024)) KiB" \
			sh -c "[ $kb -le $((mib * 1024)) ] && cmp -s '$T/m.src' '$T/m.out'"
	done
	rm -f "$T/m.out"
	/usr/bin/time -f %M -o "$T/rss" sh -c "cat '$T/m.ndz' | '$IMAGEUNZIP' - '$T/m.out'"
	kb=$(tail -n 1 "$T/rss")
	check "imageunzip from stdin, default -m 128: peak RSS ${kb} KiB <= 131072 KiB" \
		test "$kb" -le 131072
fi

done_testing
