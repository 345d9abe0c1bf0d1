#!/bin/sh
# frisbeed and frisbee command lines: help, version, usage errors, bad images and
# addresses refused with a clear message before any packet is sent.
. "$NDZ_TOP/tests/lib.sh"

expect() {	# expect DESC STATUS PATTERN CMD...: exit status and a stderr/stdout pattern
	d=$1 st=$2 pat=$3; shift 3
	"$@" >"$T/out" 2>&1; rc=$?
	if [ "$rc" = "$st" ] && grep -q -- "$pat" "$T/out"; then ok "$d"; else
		not_ok "$d (exit $rc)"; sed 's/^/# /' "$T/out"; fi
}

expect "frisbeed --help" 0 "Usage: frisbeed" "$FRISBEED" --help
expect "frisbeed --version" 0 "[0-9]" "$FRISBEED" --version
expect "frisbee --help" 0 "Usage: frisbee" "$FRISBEE" --help
expect "frisbee --version" 0 "[0-9]" "$FRISBEE" --version
expect "frisbeed without an image" 2 "expected one IMAGE" "$FRISBEED"
expect "frisbee -z with --discard" 2 "exclude each other" "$FRISBEE" -z --discard -m 239.1.1.1 -p 5000 "$T/x"
expect "frisbee --max-datagram past a UDP payload" 2 "max-datagram" "$FRISBEE" --max-datagram 70000 -m 239.1.1.1 -p 5000 "$T/x"
expect "frisbeed --max-datagram not a number" 2 "max-datagram" "$FRISBEED" --max-datagram 9k x
expect "frisbeed -W garbage" 2 "bad bandwidth" "$FRISBEED" -W 12q x
expect "frisbeed -b without -g" 2 "go together" "$FRISBEED" -b 16 x
expect "frisbeed -p out of range" 2 "-p" "$FRISBEED" -p 70000 x
expect "frisbee without -m/-p" 2 "required" "$FRISBEE" "$T/t"
expect "frisbee bad -S" 2 "bad IPv4 address" "$FRISBEE" -m 239.1.2.3 -p 4000 -S foo "$T/t"
expect "frisbee -C too small" 2 "-C" "$FRISBEE" -m 239.1.2.3 -p 4000 -C 0 "$T/t"
expect "frisbee unknown option" 2 "Try" "$FRISBEE" --bogus
expect "frisbee --group/--port are -m/-p" 2 "10.1.2.3: not an IPv4 multicast address" \
	"$FRISBEE" --group 10.1.2.3 --port 4000 "$T/t"
expect "frisbee --cache checked like -C" 2 "-C" "$FRISBEE" -m 239.1.2.3 -p 4000 --cache 0 "$T/t"
expect "frisbeed --bandwidth checked like -W" 2 "bad bandwidth" "$FRISBEED" --bandwidth 12q x
expect "frisbee non-multicast group" 2 "10.1.2.3: not an IPv4 multicast address" \
	"$FRISBEE" -m 10.1.2.3 -p 4000 "$T/t"

"$NDZ_BUILD/tests/helpers/mkfakeimg" "$T/img" 3 1
expect "frisbeed non-multicast group" 2 "10.1.2.3: not an IPv4 multicast address" \
	"$FRISBEED" -m 10.1.2.3 "$T/img"
expect "frisbeed unknown interface" 1 "nosuchif0: no such interface" \
	"$FRISBEED" -m 239.1.2.3 -i nosuchif0 "$T/img"
expect "frisbee unknown interface address" 1 "192.0.2.77: no such interface" \
	"$FRISBEE" -m 239.1.2.3 -p 4000 -i 192.0.2.77 "$T/t"
expect "frisbeed missing image" 1 "$T/nope" "$FRISBEED" "$T/nope"
head -c 1048576 /dev/urandom >"$T/junk"
expect "frisbeed refuses a non-image" 1 "$T/junk: chunk 0: not an image" "$FRISBEED" "$T/junk"
head -c 1000 "$T/img" >"$T/short"
expect "frisbeed refuses a partial chunk" 1 "$T/short: chunk 0: truncated chunk" "$FRISBEED" "$T/short"
head -c 2097152 "$T/img" >"$T/cut"
expect "frisbeed refuses an image missing its last chunk" 1 "$T/cut: missing chunk" \
	"$FRISBEED" "$T/cut"
done_testing
