#!/bin/sh
# The lab, end to end: tasks set with ndzctl, three VMs boot from the network (QEMU's
# iPXE, DHCP by dnsmasq with doc/pxe/dnsmasq-lab.conf) into the master's iPXE script,
# which boots the environment in lab mode (ndz.lab=1); they ask the master, reload as
# a group, report; the master shows three ok results with byte counts; a second
# network boot of each gets the local-disk script, and the environment booted
# without a task boots local too. Then a node given an
# image larger than its disk reports failed with the reason, a node killed mid-reload
# shows as lost, its task still pending, and a node told to capture uploads its disk.
# Last, a result the master will not take (the task cancelled meanwhile) leaves the
# reload as good as it was.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
. "$NDZ_TOP/tests/vm/vmlib.sh"
command -v python3 >/dev/null || skip_all "python3 missing (reads ndzctl's JSON)"
vm_prepare
HP=8080
mkdir -p "$T/tftp" "$T/pxe"
cp "$VM_MFS/vmlinuz" "$VM_MFS/initramfs.cpio.gz" "$T/pxe/"
sed "s|^interface=.*|interface=eth0|; s|^dhcp-range=10.0.0.100.*|dhcp-range=10.77.0.100,10.77.0.199,255.255.255.0,1h|;
     s|^tftp-root=.*|tftp-root=$T/tftp|; s|http://10.0.0.1:8080/|http://$VM_SRV:$HP/|" \
	"$NDZ_TOP/doc/pxe/dnsmasq-lab.conf" >"$T/dnsmasq.conf"
vm_lan "$T/dnsmasq.conf" || { not_ok "namespace LAN"; done_testing; }
vm_fs lab 64 || { not_ok "make the source file system and its image"; done_testing; }
CTL="$NDZ_BIN/ndzctl"
# "slow": the same image at 2 Mbit/s, so that a reload of it lasts half a minute
cat >"$T/m.conf" <<CONF
pool 239.192.79.0/29
ports 5300-5307
max-sessions 4
idle-timeout 30
rate 400M
image lab $T/lab.ndz allow 10.77.0.0/24
image slow $T/lab.ndz allow 10.77.0.0/24 rate 2M
upload-dir $T/up allow 10.77.0.0/24 upload 10.77.0.0/24
group-window 120
node-timeout 8
http-listen $VM_SRV:$HP
pxe-dir $T/pxe
pxe-args console=ttyS0 panic=-1 ndz.after=poweroff ndz.onfail=poweroff ndz.timeout=30
CONF
mkdir -p "$T/run" "$T/up"
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -c "$T/m.conf" -r "$T/run" -v \
	2>"$T/master.log" &
VM_PIDS="$VM_PIDS $!"
A="$T/run/admin"
wait_until 10 test -S "$A" || { not_ok "the master starts: $(tail -n 2 "$T/master.log")"; done_testing; }
ctl() { "$CTL" -m "$A" "$@"; }
M1=52:54:00:77:0a:01 M2=52:54:00:77:0a:02 M3=52:54:00:77:0a:03

# pxe_boot NAME DISK MAC: VM NAME (NIC MAC) boots from the network: the master's
# script says what (the environment with ndz.lab=1 and pxe-args, or the local disk)
pxe_boot() {
	VM_PXE=1 VM_MAC=$3 VM_TIMEOUT=300 vm_start "$1" "$2" "" -pidfile "$T/$1.pid"
}
# lab_boot NAME DISK MAC [ARGS [nomac]]: VM NAME (NIC MAC) boots the environment in lab
# mode directly (-kernel), with the parameters the master's script gives and ARGS
# (nomac: without ndz.mac, so it takes the MAC of the interface that got DHCP)
lab_boot() {
	_mac="ndz.mac=$3"
	[ "${5:-}" != nomac ] || _mac=""
	VM_MAC=$3 VM_TIMEOUT=300 vm_start "$1" "$2" \
		"ndz.lab=1 ndz.master=$VM_SRV $_mac ndz.after=poweroff ndz.onfail=poweroff ndz.timeout=30 ${4:-}" \
		-pidfile "$T/$1.pid"
}
# jnode MAC EXPR: the Python expression EXPR holds for n, node MAC's object in
# `ndzctl nodes list --json` (the JSON kept in $T/nodes.json)
jnode() {
	ctl nodes list --json >"$T/nodes.json" 2>&1 &&
		python3 -c 'import json, sys
n = [x for x in json.load(open(sys.argv[1]))["nodes"] if x["mac"] == sys.argv[2]][0]
sys.exit(0 if eval(sys.argv[3]) else 1)' "$T/nodes.json" "$1" "$2" 2>/dev/null
}
reloaded_lab() { case $1 in "ok: image 'lab' of master $VM_SRV written to /dev/vda in "*) ;; *) return 1 ;; esac; }
console() { tr -d '\r' <"$T/$1.con" | grep -q "$2"; }
# poll SECONDS CMD...: CMD every second until it holds; false when it never did
poll() {
	_p=$1
	shift
	until "$@"; do
		_p=$((_p - 1))
		[ $_p -gt 0 ] || return 1
		sleep 1
	done
}
[ -z "${NDZ_VM_KEEP:-}" ] || at_exit "mkdir -p '$NDZ_VM_KEEP' && cp '$T'/*.con '$T'/*.log '$T'/nodes.json '$T'/run/lab '$NDZ_VM_KEEP'/"

# ---- three nodes of one group reload together, and report ----
ctl nodes add $M1 pc1 room >/dev/null && ctl nodes add $M2 pc2 room >/dev/null &&
	ctl nodes add $M3 pc3 room >/dev/null
out=$(ctl reload room lab --zero 2>&1)
check "reload room lab --zero: three nodes ($out)" test "$out" = "reload lab: 3 nodes"
t0=$(date +%s)
i=0
for m in $M1 $M2 $M3; do
	i=$((i + 1))
	vm_disk "$T/d$i.disk" 64
	pxe_boot "vm$i" "$T/d$i.disk" "$m"
done
for i in 1 2 3; do vm_wait "vm$i"; done
secs=$(( $(date +%s) - t0 ))
for i in 1 2 3; do
	r=$(vm_result "vm$i")
	check "vm$i: asked, reloaded image lab: the console says ok (${r:-no result})" \
		reloaded_lab "$r"
	check "vm$i: its task came from the master" console "vm$i" "ndzctl: task: reload lab zero"
	check "vm$i: the result was reported" console "vm$i" "result reported to master $VM_SRV"
	check "vm$i: the disk is the source byte for byte" cmp -s "$T/lab.src" "$T/d$i.disk"
	check "vm$i: powered off" grep -q 'reboot: Power down' "$T/vm$i.con"
done
i=0
for m in $M1 $M2 $M3; do
	i=$((i + 1))
	check "pc$i: ok in nodes list --json, bytes > 0, ms > 0, no pending task" \
		jnode "$m" 'n["task"] == "none" and n["state"] == "idle" and n["last"]["ok"] and n["last"]["task"] == "reload" and n["last"]["image"] == "lab" and n["last"]["bytes"] > 0 and n["last"]["ms"] > 0'
done
grep -o '"mac":"[^"]*"[^{]*"last":{[^}]*}' "$T/nodes.json" | sed 's/^/# /'
n=$(in_ns srv "$NDZ_BIN/mfrisbeed" --status "$VM_SRV" | grep -o '"sessions_started": [0-9]*')
check "the group started together: one session served all three ($n)" [ "$n" = '"sessions_started": 1' ]
check "each booted the environment by the master's script (three kernels fetched)" \
	test "$(grep -c 'boot script: the boot environment (reload lab' "$T/master.log")" = 3
echo "# three VMs: ndzctl reload to all powered off after ok in $secs s (PXE, TCG)"

# ---- a second network boot of each: the local-disk script ----
for i in 1 2 3; do pxe_boot "vm${i}p" "$T/d$i.disk" "$(eval echo "\$M$i")"; done
for m in $M1 $M2 $M3; do
	check "$m booted again from the network: the master's local-disk script" \
		wait_until 150 grep -q "pxe: node $m at 10.77.0.[0-9]*: boot script: the local disk" "$T/master.log"
done
for i in 1 2 3; do vm_stop "vm${i}p"; done
check "... and no kernel was fetched for them" \
	test "$(grep -c 'boot script: the boot environment' "$T/master.log")" = 3

# NDZ_VM_LAB_GROUP_ONLY=1 (bench/lab-vm.sh): the group's reload is all
[ -z "${NDZ_VM_LAB_GROUP_ONLY:-}" ] || done_testing

# ---- the environment booted without a task (e.g. cancelled meanwhile): local ----
lab_boot vm1b "$T/d1.disk" $M1
vm_wait vm1b
check "vm1, booted again: no task, boots local" console vm1b 'ndz: .*no task: booting the local disk'
check "vm1, booted again: powered off (ndz.after), without a result line or a reload" \
	sh -c "grep -q 'reboot: Power down' '$T/vm1b.con' && ! grep -q 'NDZ-RESULT' '$T/vm1b.con' && ! grep -q receiving '$T/vm1b.con'"
check "vm1, booted again: the disk is unchanged" cmp -s "$T/lab.src" "$T/d1.disk"

# ---- failures: an image larger than the disk; a node killed mid-reload. And a capture ----
vm_disk "$T/small.disk" 32
cp "$T/small.disk" "$T/small.orig"
ctl reload pc2 lab >/dev/null && ctl reload pc3 slow --zero >/dev/null && ctl capture pc1 gold >/dev/null
pxe_boot vm2f "$T/small.disk" $M2
pxe_boot vm3k "$T/d3.disk" $M3
lab_boot vm1c "$T/d1.disk" $M1 "" nomac
# vm3k is mid-transfer once the master heard some bytes of it and not all
if poll 240 jnode $M3 'n["state"] == "running" and 0 < n["bytes"] < n["total"]'; then
	kill -9 "$(cat "$T/vm3k.pid")"
	check "vm3 killed mid-reload" true
else
	not_ok "vm3 mid-reload: $(grep -o '"mac":"'$M3'"[^{]*' "$T/nodes.json")"
fi
check "pc3 shows lost within the timeout, its task still pending" \
	poll 40 jnode $M3 'n["state"] == "lost" and n["task"] == "reload" and n["image"] == "slow"'
check "the lab's state file keeps pc3's task pending" \
	grep -q "^$M3 pc3 room reload slow zero pending " "$T/run/lab"
vm_wait vm2f
r=$(vm_result vm2f)
check "vm2, disk smaller than the image: the console says why ($r)" \
	sh -c "echo \"\$1\" | grep -q '^failed: frisbee: /dev/vda: target too small for the image'" _ "$r"
check "pc2: failed in nodes list --json, with the console's reason" \
	jnode $M2 "n['state'] == 'failed' and not n['last']['ok'] and n['last']['reason'] == '''${r#failed: }'''"
check "vm2: powered off (ndz.onfail), its disk untouched" \
	sh -c "grep -q 'reboot: Power down' '$T/vm2f.con' && cmp -s '$T/small.orig' '$T/small.disk'"
vm_wait vm1c
r=$(vm_result vm1c)
check "vm1 without ndz.mac: asked with its NIC's MAC" console vm1c "asking master $VM_SRV for the task of $M1"
check "vm1, told to capture: the console says ok ($r)" \
	sh -c "echo \"\$1\" | grep -q \"^ok: /dev/vda captured as image 'gold' of master $VM_SRV in \"" _ "$r"
check "pc1: the capture ok in nodes list --json, bytes > 0, no pending task" \
	jnode $M1 'n["task"] == "none" and n["last"]["ok"] and n["last"]["task"] == "capture" and n["last"]["image"] == "gold" and n["last"]["bytes"] > 0'
check "the captured image restores to the disk byte for byte" \
	sh -c "'$IMAGEUNZIP' -q '$T/up/gold.ndz' '$T/gold.out' && cmp -s '$T/lab.src' '$T/gold.out'"
# ---- a result the master does not take changes nothing on the node ----
vm_disk "$T/d3.disk" 64
pxe_boot vm3r "$T/d3.disk" $M3
if poll 240 jnode $M3 'n["state"] == "running" and 0 < n["bytes"] < n["total"]'; then
	out=$(ctl cancel pc3 2>&1)
	check "pc3's task cancelled mid-reload ($out)" test "$out" = "cancel: 1 node"
else
	not_ok "vm3 mid-reload again: $(grep -o '"mac":"'$M3'"[^{]*' "$T/nodes.json")"
fi
vm_wait vm3r
r=$(vm_result vm3r)
check "vm3: the reload is still ok ($r)" sh -c "case \"\$1\" in \"ok: image 'slow' \"*) exit 0 ;; esac; exit 1" _ "$r"
check "vm3: the console says the result could not be reported" \
	console vm3r "ndzctl: warning: the result could not be reported to master $VM_SRV: .*"
check "vm3: the disk is the source byte for byte, powered off (ndz.after)" \
	sh -c "cmp -s '$T/lab.src' '$T/d3.disk' && grep -q 'reboot: Power down' '$T/vm3r.con'"
echo "# the whole test: $(( $(date +%s) - t0 )) s"
done_testing
