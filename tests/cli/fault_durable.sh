#!/bin/sh
# Nothing reported done that is not on the disk, and nothing left behind that we made:
# imageunzip's target file system turning read-only between the last write and the
# flush (trigger_fs_error on ext4 mounted errors=remount-ro), its target unlinked
# mid-restore, imagezip's source file cut while being read, and a restore into a new
# file stopped by SIGTERM, SIGINT or SIGHUP.
# The windows are hit without timing: imageunzip reads its image from a FIFO the test
# holds open, so after the last chunk it waits for the end of its input (it must see
# that nothing follows) with everything written and nothing flushed yet; imagezip
# writes its image into a FIFO nobody reads, so it stops once the pipe is full.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/fs-lib.sh"
command -v mkfifo >/dev/null || skip_all "mkfifo missing"

# the source: random data, a run of zeros, a text-like tail
head -c 2500000 /dev/urandom >"$T/src"
head -c 600000 /dev/zero >>"$T/src"
yes "ndz durable test line" | head -c 1000000 >>"$T/src"
"$IMAGEZIP" -q -r "$T/src" "$T/img.ndz" || { not_ok "imagezip the source"; done_testing; }

# unzip_held TARGET [OPTIONS...]: start imageunzip on the image from the FIFO $T/in,
# held open by the test on descriptor 3 (sets $UPID); the image goes in with feed,
# the input ends with release
unzip_held() {
	_t=$1
	shift
	rm -f "$T/in"
	mkfifo "$T/in"
	env --default-signal=INT,HUP "$IMAGEUNZIP" "$@" - "$_t" <"$T/in" 2>"$T/e" &
	UPID=$!
	exec 3>"$T/in"
}
feed() { cat "$1" >&3; }
# has_open PID FILE: process PID holds FILE open
has_open() {
	for _f in /proc/"$1"/fd/*; do
		[ "$(readlink "$_f" 2>/dev/null)" = "$2" ] && return 0
	done
	return 1
}
release() { exec 3>&-; wait "$UPID"; }

# 1. the target's file system turns read-only after the last write, before the flush
if [ "$(id -u)" = 0 ] && [ -d /sys/fs/ext4 ] && can_loop_mount ext4 64M mkfs.ext4 -q -F; then
	truncate -s 64M "$T/ext4.img"
	mkfs.ext4 -q -F "$T/ext4.img" >/dev/null 2>&1
	if loop_mount ext4 "$T/ext4.img" "$T/m" errors=remount-ro; then
		dev=$(losetup -n -O NAME -j "$T/ext4.img" | head -n 1)
		unzip_held "$T/m/out" -v
		feed "$T/img.ndz"
		check "ro: everything written before the flush" wait_until 60 cmp -s "$T/src" "$T/m/out"
		echo 1 >"/sys/fs/ext4/${dev#/dev/}/trigger_fs_error"
		release
		rc=$?
		check "ro: imageunzip exits 1 (exit $rc)" test "$rc" = 1
		check "ro: it says the flush failed, and why" \
			grep -q 'out: flush failed: Read-only file system' "$T/e"
		if grep -q 'bytes written' "$T/e"; then
			not_ok "ro: no success summary"
			sed 's/^/# /' "$T/e"
		else
			ok "ro: no success summary"
		fi
		umount "$T/m"
	else
		not_ok "mount ext4 errors=remount-ro"
	fi
else
	echo "# skipped: a read-only turn needs root, loop devices and ext4"
fi

# 2. the target file unlinked mid-restore
unzip_held "$T/gone" -v
feed "$T/img.ndz"
check "unlinked: everything written" wait_until 60 cmp -s "$T/src" "$T/gone"
rm -f "$T/gone"
release
rc=$?
check "unlinked: imageunzip exits 1 (exit $rc)" test "$rc" = 1
check "unlinked: it says the file was removed" \
	grep -q 'gone: flush failed: the file was removed while being written' "$T/e"

# 3. signals during a restore into a new file: the file goes, the signal ends us
head -c 1048576 "$T/img.ndz" >"$T/img.head"
for sig in TERM:15 INT:2 HUP:1; do
	num=${sig#*:} sig=${sig%:*}
	rm -f "$T/new"
	unzip_held "$T/new"
	feed "$T/img.head"
	if wait_until 30 has_open "$UPID" "$T/new"; then
		kill -"$num" "$UPID"
		release
		rc=$?
		check "SIG$sig: imageunzip dies of it (exit $rc)" \
			test "$rc" = $((128 + num))
		check "SIG$sig: the file it created is removed" test ! -e "$T/new"
	else
		not_ok "SIG$sig: imageunzip created its target"
		release
	fi
done
# an existing target is left as it is: never removed
head -c 4100000 /dev/zero | tr '\0' '\132' >"$T/old"
unzip_held "$T/old"
feed "$T/img.head"
wait_until 30 has_open "$UPID" "$T/old"
kill -TERM "$UPID"
release
check "SIGTERM: an existing target stays" test -f "$T/old"
# a failure after creating the file removes it too (the input ends early)
rm -f "$T/new"
unzip_held "$T/new"
feed "$T/img.head"
release
rc=$?
check "cut input: exit 1, the file it created is removed (exit $rc)" \
	sh -c "[ $rc = 1 ] && [ ! -e '$T/new' ]"

# 4. imagezip's source cut while being read: an error, never zeros for the lost part
head -c 48M /dev/urandom >"$T/big"
rm -f "$T/out"
mkfifo "$T/out"
"$IMAGEZIP" -r -j 1 "$T/big" - >"$T/out" 2>"$T/ze" &
ZPID=$!
exec 4<"$T/out"   # open, never read: imagezip stops when the pipe is full
read_so_far() { awk '/^rchar/ { print $2 }' "/proc/$ZPID/io" 2>/dev/null; }
# it opens the source (its size is taken then), reads and stops: what it has read
# stays the same for a second
wait_until 30 has_open "$ZPID" "$T/big"
prev=-1
for _i in $(seq 1 100); do
	now=$(read_so_far)
	[ "$now" = "$prev" ] && break
	prev=$now
	sleep 1
done
if [ -n "$now" ] && [ "$now" -lt 25000000 ]; then
	ok "imagezip held by its output after reading $now bytes"
else
	not_ok "imagezip held by its output (read ${now:-?} bytes)"
fi
truncate -s 32M "$T/big"
cat <&4 >"$T/cut.ndz" &
CPID=$!
exec 4<&-
wait "$ZPID"
rc=$?
wait "$CPID"
check "cut source: imagezip exits 1 (exit $rc)" test "$rc" = 1
check "cut source: it says where the file ended" \
	grep -q 'big: ends at byte 33554432, before its stated size' "$T/ze"
done_testing
