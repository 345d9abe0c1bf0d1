#!/bin/sh
# PXE by the master: a real mfrisbeed on 127.0.0.1 serves the generic iPXE script,
# each node's own by MAC (the boot environment while its task is pending, the local
# disk when it has none, its task is done or failed, or it is unknown), and the
# files of its pxe-dir byte for byte; bad MACs are 400, names that leave the
# directory and links are 404; serving a script changes nothing in the lab; every
# script served is logged. The scripts are checked line by line here; a real iPXE
# runs them in tests/vm/vm_pxe_lab.sh.
. "$NDZ_TOP/tests/lib.sh"
command -v curl >/dev/null || skip_all "curl missing"
command -v ss >/dev/null || skip_all "ss missing (iproute2)"
CTL="$NDZ_BIN/ndzctl"
M1=52:54:00:00:00:01 M2=52:54:00:00:00:02 M9=52:54:00:00:00:99
# a control port free for UDP and TCP (the master's; not the default, so scripts name it)
CP=$(python3 -c 'import socket
for p in range(20000 + __import__("os").getpid() % 20000, 65000):
    try:
        t = socket.socket(); t.bind(("127.0.0.1", p)); u = socket.socket(type=socket.SOCK_DGRAM)
        u.bind(("127.0.0.1", p)); t.close(); u.close(); print(p); break
    except OSError:
        pass') || skip_all "no free port"
mkdir -p "$T/run" "$T/pxe"
: >"$T/ubuntu.ndz"
head -c 3145728 /dev/urandom >"$T/pxe/vmlinuz"
head -c 1000001 /dev/urandom >"$T/pxe/initramfs.cpio.gz"
echo "not for nodes" >"$T/secret"
ln -s /etc/passwd "$T/pxe/passwd"
ln -s ../secret "$T/pxe/up"
mkdir "$T/pxe/sub"
echo hidden >"$T/pxe/.hidden"
cat >"$T/m.conf" <<CONF
image ubuntu $T/ubuntu.ndz allow 127.0.0.0/8
http-listen 127.0.0.1:0
pxe-dir $T/pxe
pxe-args console=ttyS0,115200   ndz.after=reboot # the serial line
CONF
"$NDZ_BIN/mfrisbeed" -v -c "$T/m.conf" -r "$T/run" -l 127.0.0.1:$CP 2>"$T/m.log" &
MPID=$!
at_exit 'kill $MPID 2>/dev/null'
A="$T/run/admin"
wait_until 5 test -S "$A" || { not_ok "the master starts"; cat "$T/m.log"; done_testing; }
# the HTTP port: the master's listening TCP socket that is not its control port
hport() { ss -Hltnp 2>/dev/null | grep "pid=$MPID," | awk '{ print $4 }' | sed 's/.*://' |
	grep -vx "$CP" | head -1; }
wait_until 5 sh -c "[ -n \"\$(ss -Hltnp | grep 'pid=$MPID,' | awk '{print \$4}' | grep -v ':$CP\$')\" ]"
HP=$(hport)
check "the master listens for HTTP on a port of its own ($HP)" test -n "$HP"
U="http://127.0.0.1:$HP"
ctl() { "$CTL" -m "$A" "$@"; }
# get PATH: the body into $T/body, the status code on stdout
get() { curl -s --path-as-is -o "$T/body" -w '%{http_code}' "$U$1"; }
# line N of the last body
line() { sed -n "${1}p" "$T/body"; }
logged() { wait_until 3 grep -q -- "$1" "$T/m.log"; }

# the generic script
code=$(get /boot.ipxe)
check "GET /boot.ipxe: 200 ($code)" test "$code" = 200
check "/boot.ipxe starts with #!ipxe" test "$(line 1)" = "#!ipxe"
check "/boot.ipxe chains this node's own script by its MAC, relative to its own URL" \
	test "$(line 3)" = 'chain /boot/${netX/mac:hexhyp} || echo ndz: no boot script from the master for ${netX/mac}'
check "/boot.ipxe exits to the next boot device when that fails" test "$(line 4)" = exit
check "/boot.ipxe has four lines" test "$(wc -l <"$T/body")" = 4
check "the generic script is logged" logged "pxe: 127.0.0.1: the generic boot script"

# an unknown node boots its local disk
code=$(get /boot/$M9)
check "GET /boot/MAC of an unknown node: 200 ($code)" test "$code" = 200
check "unknown node: an echo saying why" \
	test "$(line 3)" = "echo ndz: $M9 is not a node of this lab: booting the local disk"
check "unknown node: exit (the next boot device)" test "$(line 4)" = exit
check "unknown node: logged" logged "pxe: node $M9 at 127.0.0.1: boot script: the local disk (unknown node)"

ctl nodes add $M1 pc1 room >/dev/null && ctl nodes add $M2 pc2 room >/dev/null
code=$(get /boot/$M1)
check "a node without a task: boot local ($code)" sh -c "[ $code = 200 ] &&
	[ \"\$(sed -n 3p '$T/body')\" = 'echo ndz: no task for $M1: booting the local disk' ] &&
	[ \"\$(sed -n 4p '$T/body')\" = exit ]"

# a pending reload: the boot environment, and the lab unchanged by the GETs
ctl reload room ubuntu >/dev/null
ctl nodes list --json >"$T/before.json"
check "before: pc1 pending" grep -q "\"mac\":\"$M1\"[^}]*\"state\":\"pending\"" "$T/before.json"
code=$(get /boot/$M1)
cp "$T/body" "$T/env.ipxe"
check "pending reload: 200 ($code)" test "$code" = 200
check "pending reload: #!ipxe" test "$(line 1)" = "#!ipxe"
check "pending reload: an echo naming the task" \
	test "$(line 3)" = "echo ndz: reload ubuntu for $M1: loading the boot environment"
KLINE="kernel $U/pxe/vmlinuz initrd=initramfs.cpio.gz ndz.lab=1 ndz.master=127.0.0.1:$CP ndz.mac=$M1 console=ttyS0,115200 ndz.after=reboot || goto failed"
check "pending reload: the kernel line (URL, initrd name, ndz.lab, ndz.master with the control port, ndz.mac, pxe-args)" \
	test "$(line 4)" = "$KLINE"
check "pending reload: the initrd line" \
	test "$(line 5)" = "initrd $U/pxe/initramfs.cpio.gz || goto failed"
check "pending reload: boot, then on failure wait and reboot (ask again)" \
	test "$(sed -n '6,10p' "$T/body" | tr '\n' '|')" = "boot || goto failed|:failed|echo ndz: the boot environment did not start: trying again in 10 s|sleep 10|reboot|"
check "pending reload: ten lines" test "$(wc -l <"$T/body")" = 10
# each line is one iPXE command: no quote, '\', ';', '&&' or a '||' but the one at its end
check "pending reload: nothing iPXE would read as its own in the parameters" \
	sh -c "! sed -n 4p '$T/body' | sed 's/ || goto failed\$//' | grep -q '[\"\\\\;|&]'"
get /boot/$M1 >/dev/null
get /boot/$(echo $M1 | tr : - | tr a-f A-F) >/dev/null
check "a MAC with '-' (iPXE's hexhyp), any case: the same script" cmp -s "$T/body" "$T/env.ipxe"
ctl nodes list --json >"$T/after.json"
check "three GETs later pc1 is still pending: a script is no ask" \
	grep -q "\"mac\":\"$M1\"[^}]*\"state\":\"pending\"" "$T/after.json"
check "... and the lab is exactly as before" cmp -s "$T/before.json" "$T/after.json"
check "the boot environment's script is logged" \
	logged "pxe: node $M1 at 127.0.0.1: boot script: the boot environment (reload ubuntu)"

# the environment asks (running), reports ok: the next boot is local
out=$("$CTL" -m 127.0.0.1:$CP ask $M1)
check "the environment asks at ndz.master: reload ubuntu ($out)" test "$out" = "reload ubuntu"
code=$(get /boot/$M1)
check "running: still the boot environment (a node rebooted mid-reload starts again)" \
	sh -c "[ $code = 200 ] && [ \"\$(sed -n 4p '$T/body')\" = '$KLINE' ]"
"$CTL" -m 127.0.0.1:$CP report $M1 ok 1000 1234 3
code=$(get /boot/$M1)
check "after ndzctl report ok: boot local ($code)" sh -c "[ $code = 200 ] &&
	[ \"\$(sed -n 3p '$T/body')\" = 'echo ndz: no task for $M1: booting the local disk' ] &&
	[ \"\$(sed -n 4p '$T/body')\" = exit ]"

# failed: boot local, saying so
"$CTL" -m 127.0.0.1:$CP ask $M2 >/dev/null
"$CTL" -m 127.0.0.1:$CP report $M2 failed "disk too small"
code=$(get /boot/$M2)
check "after ndzctl report failed: boot local, saying so ($code)" sh -c "[ $code = 200 ] &&
	[ \"\$(sed -n 3p '$T/body')\" = 'echo ndz: reload ubuntu failed for $M2 (ndzctl status says why): booting the local disk' ] &&
	[ \"\$(sed -n 4p '$T/body')\" = exit ]"
check "the failed node's script is logged" \
	logged "pxe: node $M2 at 127.0.0.1: boot script: the local disk (task failed)"

# bad MACs
for bad in 52:54:00:00:00 52:54:00:00:00:0g 52:54:00:00:00:01:02 nothing "52:54:00:00:00:01%20x" ""; do
	code=$(get "/boot/$bad")
	check "GET /boot/$bad: 400 ($code)" test "$code" = 400
done
check "a bad MAC is logged with the address" logged "refused: 127.0.0.1 pxe: GET /boot/nothing: not a MAC address"
code=$(get /bootx)
check "GET /bootx: 404 ($code)" test "$code" = 404

# the pxe-dir's files, byte for byte, streamed; nothing else
code=$(get /pxe/vmlinuz)
check "GET /pxe/vmlinuz: 200 ($code)" test "$code" = 200
check "/pxe/vmlinuz is the file byte for byte (3 MiB)" cmp -s "$T/body" "$T/pxe/vmlinuz"
code=$(get /pxe/initramfs.cpio.gz)
check "/pxe/initramfs.cpio.gz byte for byte ($code)" sh -c "[ $code = 200 ] && cmp -s '$T/body' '$T/pxe/initramfs.cpio.gz'"
len=$(curl -s -I "$U/pxe/vmlinuz" | tr -d '\r' | sed -n 's/^Content-Length: //Ip')
check "HEAD /pxe/vmlinuz: its length ($len)" test "$len" = 3145728
for p in /pxe/../secret /pxe/%2e%2e/secret /pxe/%2E%2E /pxe/.. /pxe/../ /pxe/ /pxe/sub /pxe/sub/ \
	/pxe/.hidden /pxe/passwd /pxe/up /pxe/nothere /pxe/vmlinuz/ "/pxe/vml%00inuz" /pxe//vmlinuz \
	"/pxe/..%2fsecret" "/pxe/%2fetc%2fpasswd"; do
	code=$(get "$p")
	check "GET $p: 404 ($code)" sh -c "[ $code = 404 ] && ! grep -q 'root:' '$T/body' && ! grep -q 'not for nodes' '$T/body'"
done
# refusals are logged at most 5 a second for each rule, the rest counted: after the
# burst above, ask for the link again until its line is there
refused_link() {
	get /pxe/passwd >/dev/null
	grep -q -- "refused: 127.0.0.1 pxe: GET /pxe/passwd: pxe file $T/pxe/passwd: a symbolic link (not followed)" "$T/m.log"
}
check "a refused file is logged with the reason (not only with -v)" wait_until 5 refused_link
check "... and the burst summed up" wait_until 3 grep -Eq '[0-9]+ more refused \(pxe\)' "$T/m.log"

# SIGHUP: new pxe-args and pxe-url apply to the next script; no pxe-dir: /pxe/ is 404
cat >"$T/m.conf" <<CONF
image ubuntu $T/ubuntu.ndz allow 127.0.0.0/8
http-listen 127.0.0.1:0
pxe-url http://10.9.9.9/ndz
pxe-local sanboot
CONF
ctl reload pc1 ubuntu >/dev/null
kill -HUP $MPID
wait_until 5 grep -q "reloaded" "$T/m.log"
code=$(get /boot/$M1)
check "after SIGHUP: pxe-url in the kernel and initrd lines, no pxe-args ($code)" sh -c "[ $code = 200 ] &&
	[ \"\$(sed -n 4p '$T/body')\" = 'kernel http://10.9.9.9/ndz/vmlinuz initrd=initramfs.cpio.gz ndz.lab=1 ndz.master=127.0.0.1:$CP ndz.mac=$M1 || goto failed' ] &&
	[ \"\$(sed -n 5p '$T/body')\" = 'initrd http://10.9.9.9/ndz/initramfs.cpio.gz || goto failed' ]"
code=$(get /boot/$M9)
check "after SIGHUP: pxe-local sanboot ($code)" sh -c "[ $code = 200 ] &&
	[ \"\$(sed -n 4p '$T/body')\" = 'sanboot --no-describe --drive 0x80 || exit' ]"
code=$(get /pxe/vmlinuz)
check "after SIGHUP without pxe-dir: /pxe/vmlinuz is 404 ($code)" test "$code" = 404
check "the endpoint's own pages still answer" sh -c "[ \$(curl -s -o /dev/null -w '%{http_code}' '$U/status.json') = 200 ]"
kill $MPID
wait $MPID 2>/dev/null
check "the master's log has no sanitizer report" sh -c "! grep -q 'Sanitizer' '$T/m.log'"

# a full lab (1024 nodes, long names, each with a failed result and a long reason full
# of quotes) still fits /status.json whole: its state file written, a master started on it
mkdir -p "$T/run2"
awk 'BEGIN {
	r = ""; for (i = 0; i < 160; i++) r = r "\"";
	print "# ndz lab state 1";
	for (k = 0; k < 1024; k++)
		printf "52:54:01:00:%02x:%02x n%060d group-%056d reload image-%055d - failed 1 failed reload image-%055d 0 0 0 1795670358 %s\n",
			int(k / 256), k % 256, k, k % 7, k % 3, k % 3, r
}' >"$T/run2/lab"
sed 's/^pxe-args .*//' "$T/m.conf" >"$T/m2.conf"
"$NDZ_BIN/mfrisbeed" -c "$T/m2.conf" -r "$T/run2" -l 127.0.0.1:$CP 2>"$T/m2.log" &
MPID=$!
wait_until 5 test -S "$T/run2/admin" &&
	wait_until 5 sh -c "[ -n \"\$(ss -Hltnp | grep 'pid=$MPID,' | awk '{print \$4}' | grep -v ':$CP\$')\" ]"
U="http://127.0.0.1:$(hport)"
curl -s -o "$T/full.json" "$U/status.json"
n=$(python3 -c 'import json, sys
d = json.load(open(sys.argv[1]))
print(sum(1 for x in d["lab"]["nodes"] if len(x["last"]["reason"]) == 160))' "$T/full.json" 2>&1)
check "a lab of 1024 nodes with long results: /status.json holds them all ($n, $(wc -c <"$T/full.json") bytes)" test "$n" = 1024
kill $MPID
wait $MPID 2>/dev/null

# doc/pxe/dnsmasq-lab.conf, as shipped and in its proxy-DHCP variant, is a config dnsmasq takes
D="$NDZ_TOP/doc/pxe/dnsmasq-lab.conf"
if command -v dnsmasq >/dev/null || [ -x /usr/sbin/dnsmasq ]; then
	DM=$(command -v dnsmasq || echo /usr/sbin/dnsmasq)
	check "dnsmasq --test takes doc/pxe/dnsmasq-lab.conf" sh -c "'$DM' --test -C '$D' 2>&1 | grep -q 'syntax check OK'"
	sed -e 's/^dhcp-range=10.0.0.100/#&/' -e 's/^#\(dhcp-range=10.0.0.0,proxy\)/\1/' \
		-e 's/^#\(pxe-service=\)/\1/' "$D" >"$T/proxy.conf"
	check "... and its proxy-DHCP variant (2 pxe-service lines, dhcp-range proxy)" sh -c "
		[ \$(grep -c '^pxe-service=' '$T/proxy.conf') = 2 ] && grep -q '^dhcp-range=10.0.0.0,proxy\$' '$T/proxy.conf' &&
		! grep -q '^dhcp-range=10.0.0.100' '$T/proxy.conf' && '$DM' --test -C '$T/proxy.conf' 2>&1 | grep -q 'syntax check OK'"
	check "dnsmasq-lab.conf sends iPXE to the master's /boot.ipxe" grep -q '^dhcp-boot=tag:ipxe,http://.*/boot.ipxe$' "$D"
else
	ok "# SKIP dnsmasq missing: doc/pxe/dnsmasq-lab.conf not checked"
fi
done_testing
