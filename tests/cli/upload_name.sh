#!/bin/sh
# frisbee-upload refuses a name no image can have (".hidden", ".", "..", "my image")
# with frisbee's message and exit 2, before anything is sent: a listener on
# loopback, TCP and UDP on one port, sees no connection and no datagram (and does
# see a valid name's, so it can tell).
. "$NDZ_TOP/tests/lib.sh"
UPLOAD="$NDZ_BIN/frisbee-upload"
LPID=
at_exit 'touch "$T/stop"; [ -z "$LPID" ] || kill $LPID 2>/dev/null'

# listen: a listener in the background, its port in $PORT; seen: stop it, print
# how many connections and datagrams it got
# listen.py T: a listener on a free loopback port (TCP and UDP), written to T/port;
# on T/stop it writes how many connections and datagrams it got to T/seen (gone
# with T, or after 60 s, it ends anyway)
cat >"$T/listen.py" <<'PY'
import os, select, socket, sys, time
t = sys.argv[1]
tcp = socket.socket()
tcp.bind(("127.0.0.1", 0))
tcp.listen(8)
port = tcp.getsockname()[1]
udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
udp.bind(("127.0.0.1", port))
open(t + "/port.tmp", "w").write(str(port))
os.rename(t + "/port.tmp", t + "/port")
seen, end = 0, time.time() + 60
while os.path.isdir(t) and not os.path.exists(t + "/stop") and time.time() < end:
    for s in select.select([tcp, udp], [], [], 0.1)[0]:
        if s is tcp:
            s.accept()[0].close()
        else:
            s.recvfrom(65536)
        seen += 1
if os.path.isdir(t):
    open(t + "/seen.tmp", "w").write(str(seen))
    os.rename(t + "/seen.tmp", t + "/seen")
PY
# listen: start it, its port in $PORT; seen: stop it, print its count
listen() {
	rm -f "$T/port" "$T/stop" "$T/seen"
	python3 "$T/listen.py" "$T" </dev/null >/dev/null 2>&1 &
	LPID=$!
	k=0
	while [ ! -f "$T/port" ] && [ $k -lt 100 ]; do sleep 0.1; k=$((k + 1)); done
	PORT=$(cat "$T/port")
}
seen() {
	touch "$T/stop"
	k=0
	while [ ! -f "$T/seen" ] && [ $k -lt 100 ]; do sleep 0.1; k=$((k + 1)); done
	wait "$LPID" 2>/dev/null
	LPID=
	cat "$T/seen" 2>/dev/null || echo none
}
head -c 65536 /dev/urandom >"$T/x.bin"
"$NDZ_BIN/imagezip" -q -r "$T/x.bin" "$T/x.ndz" || not_ok "imagezip"
RULE="(1 to 64 letters, digits, '.', '_' or '-', not '.' first)"

listen
for name in .hidden . .. "my image"; do
	"$UPLOAD" -M "127.0.0.1:$PORT" -I "$name" "$T/x.ndz" 2>"$T/err"
	rc=$?
	check "frisbee-upload -I '$name': exit 2, not a valid image name ($rc)" \
		sh -c "[ $rc = 2 ] && grep -qF \"frisbee-upload: -I: '$name' is not a valid image name $RULE\" '$T/err'"
	"$UPLOAD" -M "127.0.0.1:$PORT" -I "$name" - <"$T/x.ndz" 2>"$T/err"
	rc=$?
	check "frisbee-upload -I '$name' -: exit 2 ($rc)" \
		sh -c "[ $rc = 2 ] && grep -q 'not a valid image name' '$T/err'"
done
n=$(seen)
check "nothing was sent for them ($n)" test "$n" = 0

# a valid name is sent: the listener would have seen the others'
listen
"$UPLOAD" -M "127.0.0.1:$PORT" -I ok.name -w 1 "$T/x.ndz" 2>/dev/null
n=$(seen)
check "a valid name reaches the listener ($n)" sh -c "[ '$n' != none ] && [ '$n' -ge 1 ]"

done_testing
