#!/bin/sh
# Multicast: nothing reported done that is not on the disk, nothing left behind.
# frisbee's target file system turning read-only between the last write and the flush
# (the flush held back at its entry by strace, the error triggered then: a real EROFS
# from the kernel), its target unlinked mid-transfer, the file it created removed after
# a failure and on SIGTERM, INT and HUP (an existing one kept); frisbeed stopping with a
# clear message when its image is cut or overwritten under it; and frisbee -T bounding
# a client whose chunks never check out (a forger racing a server that has stopped).
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
MCFORGE="$NDZ_BUILD/tests/helpers/mcforge"
[ -x "$MCFORGE" ] && [ -x "$IMAGEZIP" ] || skip_all "mcforge helper or imagezip not built"
netns_require
netns_lan && netns_host srv 1 && netns_host c1 11 && netns_host rogue 66 ||
	{ not_ok "namespace LAN"; done_testing; }
mc_image a 4 1 || { not_ok "make image"; done_testing; }

# has_open PID FILE: process PID holds FILE open
has_open() {
	for _f in /proc/"$1"/fd/*; do
		[ "$(readlink "$_f" 2>/dev/null)" = "$2" ] && return 0
	done
	return 1
}
# client TARGET [OPTIONS...]: frisbee in c1 in the background, signals at their
# defaults (sets $FPID; its exit status goes to $T/c1.rc)
client() {
	_t=$1
	shift
	rm -f "$T/c1.rc"
	( in_ns c1 env --default-signal=INT,HUP "$FRISBEE" -m "$MC_GROUP" -p "$MC_PORT" "$@" \
		"$_t" 2>>"$T/c1.log"; echo $? >"$T/c1.rc" ) &
	MC_PIDS="$MC_PIDS $!"
	FPID=""
	wait_until 20 frisbee_pid "$_t" >/dev/null && FPID=$(frisbee_pid "$_t")
}
server_stop() {
	kill -CONT "$MC_SRV_PID" 2>/dev/null
	kill -TERM "$MC_SRV_PID" 2>/dev/null
	wait "$MC_SRV_PID"
}
fresh() { rm -f "$T/c1.rc" "$T/c1.log" "$T/srv.log" "$T/new"; MC_PIDS=""; }
# when_open TARGET CMD...: CMD once the client holds TARGET open (never when it does not)
when_open() {
	_wt=$1
	shift
	if [ -n "$FPID" ] && wait_until 20 has_open "$FPID" "$_wt"; then "$@"; fi
}
# interrupted TARGET TIMEOUT CMD...: a.ndz served, the client writing TARGET (-T
# TIMEOUT), CMD once it holds TARGET open; then the client and the server have ended
interrupted() {
	_it=$1 _ito=$2
	shift 2
	mc_server srv "$T/a.ndz" -W 4M -T 60
	client "$_it" -T "$_ito"
	when_open "$_it" "$@"
	mc_wait
	server_stop
}
# (for when_open: the server and the client of the moment)
pause_server() { kill -STOP "$MC_SRV_PID"; }
signal_client() { kill -"$1" "$FPID"; }

# 1. the target's file system turns read-only between the last write and the flush
if ! command -v strace >/dev/null; then
	echo "# skipped: the read-only turn before frisbee's flush needs strace"
elif [ "$(uname -m)" != x86_64 ]; then
	echo "# skipped: the read-only turn before frisbee's flush: fsync's number is x86_64's"
elif ! [ -d /sys/fs/ext4 ] || ! can_loop_mount ext4 64M mkfs.ext4 -q -F; then
	echo "# skipped: the read-only turn needs loop devices and ext4"
else
	truncate -s 64M "$T/ext4.img"
	mkfs.ext4 -q -F "$T/ext4.img" >/dev/null 2>&1
	if loop_mount ext4 "$T/ext4.img" "$T/m" errors=remount-ro; then
		dev=$(losetup -n -O NAME -j "$T/ext4.img" | head -n 1)
		fresh
		mc_server srv "$T/a.ndz" -W 50M -T 60 -v
		# strace -D holds fsync at its entry for up to 60 s, released (strace_release)
		# once the file system turned read-only; leaks are not looked for under it
		( in_ns c1 env ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" strace -D -f -qq \
			-o /dev/null -e trace=fsync -e inject=fsync:delay_enter=60s \
			"$FRISBEE" -m "$MC_GROUP" -p "$MC_PORT" -T 30 "$T/m/out" \
			2>>"$T/c1.log"; echo $? >"$T/c1.rc" ) &
		MC_PIDS="$MC_PIDS $!"
		wait_until 30 frisbee_pid "$T/m/out" >/dev/null && FPID=$(frisbee_pid "$T/m/out")
		# x86_64 fsync is system call 74
		if [ -n "$FPID" ] && wait_until 60 sh -c "grep -qs '^74 ' /proc/$FPID/task/*/syscall"; then
			ok "ro: frisbee reached its flush"
			check "ro: everything was written before it" cmp -s "$T/a.src" "$T/m/out"
			echo 1 >"/sys/fs/ext4/${dev#/dev/}/trigger_fs_error"
		else
			not_ok "ro: frisbee reached its flush"
		fi
		[ -n "$FPID" ] && strace_release "$FPID"
		mc_wait
		wait_until 10 grep -q 'leave from 10.77.0.11' "$T/srv.log"
		server_stop
		check "ro: frisbee exits 1 (exit $(mc_rc c1))" [ "$(mc_rc c1)" = 1 ]
		check "ro: it says the flush failed, and why" \
			grep -q 'out: flush failed: Read-only file system' "$T/c1.log"
		check "ro: no success summary" sh -c "! grep -q 'chunks in' '$T/c1.log'"
		check "ro: frisbeed logs the client's leave as failed" \
			grep -q 'leave from 10.77.0.11 (client [0-9a-f]*, failed)' "$T/srv.log"
		umount "$T/m"
	else
		not_ok "mount ext4 errors=remount-ro"
	fi
fi

# 2. the target unlinked mid-transfer
fresh
interrupted "$T/gone" 20 rm -f "$T/gone"
check "unlinked: frisbee exits 1 (exit $(mc_rc c1))" [ "$(mc_rc c1)" = 1 ]
check "unlinked: it says the file was removed" \
	grep -q 'gone: flush failed: the file was removed while being written' "$T/c1.log"

# 3. a failure after creating the target: the server goes away
fresh
interrupted "$T/new" 2 pause_server
check "server gone: frisbee exits 1 (exit $(mc_rc c1))" [ "$(mc_rc c1)" = 1 ]
check "server gone: the file it created is removed" test ! -e "$T/new"

# 4. signals: a file it created goes, an existing one stays
for sig in TERM:15 INT:2 HUP:1; do
	num=${sig#*:} sig=${sig%:*}
	fresh
	interrupted "$T/new" 20 signal_client "$num"
	check "SIG$sig: frisbee dies of it (exit $(mc_rc c1))" [ "$(mc_rc c1)" = $((128 + num)) ]
	check "SIG$sig: the file it created is removed" test ! -e "$T/new"
done
fresh
head -c 9000000 /dev/zero >"$T/old"
interrupted "$T/old" 20 signal_client TERM
check "SIGTERM: an existing target stays" test -f "$T/old"

# 5. frisbeed's image cut, or overwritten by another image, while it serves it
head -c 8388608 /dev/urandom >"$T/b.src"
"$IMAGEZIP" -q -r "$T/b.src" "$T/b.ndz" || not_ok "make a second image"
for how in cut overwritten; do
	fresh
	cp "$T/a.ndz" "$T/served.ndz"
	mc_server srv "$T/served.ndz" -W 4M -T 60
	client "$T/new" -T 5
	if [ $how = cut ]; then
		when_open "$T/new" truncate -s 1M "$T/served.ndz"
	else
		when_open "$T/new" cp "$T/b.ndz" "$T/served.ndz"
	fi
	wait_until 30 sh -c "! kill -0 $MC_SRV_PID 2>/dev/null"
	kill -0 "$MC_SRV_PID" 2>/dev/null && not_ok "$how: frisbeed still serving after 30 s"
	server_stop
	rc=$?
	mc_wait
	check "$how: frisbeed stops with exit 1 (exit $rc)" [ "$rc" = 1 ]
	if [ $how = cut ]; then
		check "$how: it says the image shrank" grep -q \
			'served.ndz: chunk [0-9]*: unexpected end of input (the file shrank while served); stopping' \
			"$T/srv.log"
	else
		check "$how: it says the image changed" grep -q \
			'served.ndz: chunk [0-9]*: .* (the file changed while served); stopping' "$T/srv.log"
	fi
	check "$how: the client fails (exit $(mc_rc c1)) and removes its target" \
		sh -c "[ '$(mc_rc c1)' = 1 ] && [ ! -e '$T/new' ]"
done

# 6. -T bounds chunks that never check out: the server stops once the client is under
# way; a forger spoofing its address answers every request with chunks of another image
tr 'a-z' 'A-Z' <"$T/a.src" >"$T/f.src"
"$IMAGEZIP" -q -r "$T/f.src" "$T/f.ndz" || not_ok "make the forged image"
fresh
mc_server srv "$T/a.ndz" -W 4M -T 60
# (for 600 s, far longer than the client may take on a loaded host; stopped below)
in_ns rogue "$MCFORGE" "$MC_GROUP" "$MC_PORT" 600 20000 10.77.0.1 "$T/f.ndz" \
	>"$T/rogue.out" 2>&1 &
rpid=$!
at_exit "kill $rpid"
sleep 0.5
client "$T/new" -T 3 -S 10.77.0.1
when_open "$T/new" pause_server
wait_until 50 test -e "$T/c1.rc"
[ -e "$T/c1.rc" ] || { [ -n "$FPID" ] && kill -KILL "$FPID"; }
mc_wait
# the forger sends until stopped: a client that waited for its silence did not give up
check "never checks out: frisbee ended while the forger still sent" kill -0 "$rpid"
kill "$rpid" 2>/dev/null
wait "$rpid"
server_stop
check "never checks out: frisbee gives up, exit 1 (exit $(mc_rc c1))" [ "$(mc_rc c1)" = 1 ]
check "never checks out: it says why" \
	grep -q 'no chunk checked out for 3 s: [0-9]* complete chunks failed their checks' "$T/c1.log"
check "never checks out: the file it created is removed" test ! -e "$T/new"
done_testing
