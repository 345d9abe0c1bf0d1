#!/bin/sh
# PXE by the master, with a real iPXE: QEMU's iPXE ROM gets DHCP from dnsmasq run with
# doc/pxe/dnsmasq-lab.conf (only addresses adapted), which points it at the master's
# /boot.ipxe; that chains the node's own script, which boots the environment from the
# master's pxe-dir with ndz.lab=1 ndz.master= ndz.mac= on the kernel's command line
# while the node has a task. With the task cancelled, the same boot gets the
# local-disk script and iPXE hands back to the firmware. The lab is not changed by
# the scripts.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
. "$NDZ_TOP/tests/vm/vmlib.sh"
vm_prepare
CTL="$NDZ_BIN/ndzctl"
MAC=52:54:00:77:01:01          # vm_start's first guest
HP=8080
mkdir -p "$T/tftp" "$T/pxe" "$T/run"
cp "$VM_MFS/vmlinuz" "$VM_MFS/initramfs.cpio.gz" "$T/pxe/"
sed "s|^interface=.*|interface=eth0|; s|^dhcp-range=10.0.0.100.*|dhcp-range=10.77.0.100,10.77.0.199,255.255.255.0,1h|;
     s|^tftp-root=.*|tftp-root=$T/tftp|; s|http://10.0.0.1:8080/|http://$VM_SRV:$HP/|" \
	"$NDZ_TOP/doc/pxe/dnsmasq-lab.conf" >"$T/dnsmasq.conf"
check "dnsmasq accepts doc/pxe/dnsmasq-lab.conf, adapted" sh -c "dnsmasq --test --conf-file='$T/dnsmasq.conf' >/dev/null 2>&1"
vm_lan "$T/dnsmasq.conf" || { not_ok "namespace LAN"; done_testing; }
: >"$T/pxe.ndz"
cat >"$T/m.conf" <<CONF
image pxe $T/pxe.ndz allow 10.77.0.0/24
http-listen $VM_SRV:$HP
pxe-dir $T/pxe
pxe-args console=ttyS0 panic=-1 ndz.onfail=poweroff
CONF
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -vv -c "$T/m.conf" -r "$T/run" \
	2>"$T/master.log" &
VM_PIDS="$VM_PIDS $!"
wait_until 5 test -S "$T/run/admin" || { not_ok "the master starts"; done_testing; }
"$CTL" -m "$T/run/admin" nodes add $MAC vm1 >/dev/null &&
	"$CTL" -m "$T/run/admin" reload vm1 pxe >/dev/null
vm_disk "$T/d.disk" 8

# the node has a task: iPXE boots the environment with the master's parameters
VM_PXE=1 VM_TIMEOUT=150 vm_start vm1 "$T/d.disk" ""
check "iPXE got the master's URL from dnsmasq-lab.conf" \
	wait_until 60 grep -q "pxe: 10.77.0.[0-9]*: the generic boot script" "$T/master.log"
check "iPXE chained its own script by MAC (\${netX/mac:hexhyp}, relative URI)" \
	wait_until 30 grep -q "pxe: node $MAC at 10.77.0.[0-9]*: boot script: the boot environment (reload pxe)" "$T/master.log"
check "iPXE fetched the kernel and the initramfs from the master's /pxe/" \
	wait_until 60 sh -c "grep -q 'pxe: 10.77.0.[0-9]*: /pxe/vmlinuz, ' '$T/master.log' &&
		grep -q 'pxe: 10.77.0.[0-9]*: /pxe/initramfs.cpio.gz, ' '$T/master.log'"
want="initrd=initramfs.cpio.gz ndz.lab=1 ndz.master=$VM_SRV ndz.mac=$MAC console=ttyS0 panic=-1 ndz.onfail=poweroff"
check "the kernel's command line is the script's ($want)" \
	wait_until 60 sh -c "tr -d '\r' <'$T/vm1.con' | grep -q 'Command line: $want\$'"
# the environment's own part (ask, reload, report) is vm_reload.sh's and mfs's; here the
# guest goes as soon as its kernel started
vm_stop vm1
check "serving the scripts changed nothing: the task is still pending" \
	sh -c "'$CTL' -m '$T/run/admin' nodes list --json | grep -q '\"mac\":\"$MAC\"[^}]*\"state\":\"pending\"'"

# a node without a task (the second guest, MAC ...:02): the local-disk script (its
# "exit" hands back to the firmware: not seen here, the firmware prints on the screen)
MAC2=52:54:00:77:01:02
"$CTL" -m "$T/run/admin" nodes add $MAC2 vm2 >/dev/null
n0=$(grep -c 'the generic boot script' "$T/master.log")
VM_PXE=1 VM_TIMEOUT=120 vm_start vm2 "$T/d.disk" ""
check "no task: the local-disk script" \
	wait_until 60 grep -q "pxe: node $MAC2 at 10.77.0.[0-9]*: boot script: the local disk (no task)" "$T/master.log"
check "no task: no kernel fetched again" test "$(grep -c '/pxe/vmlinuz, ' "$T/master.log")" = 1
check "the second guest asked for the generic script too" \
	test "$(grep -c 'the generic boot script' "$T/master.log")" -gt "$n0"
vm_stop vm2
[ "$_failed" = 0 ] || { tail -n 12 "$T/master.log" | sed 's/^/# master: /'; tail -n 5 "$T/dnsmasq.log" | sed 's/^/# dnsmasq: /'; }
done_testing
