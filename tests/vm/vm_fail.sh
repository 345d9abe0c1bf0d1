#!/bin/sh
# The boot environment's failures, three VMs at once: no image server, a wrong image
# name, a disk smaller than the image. Each must say why on its serial console, retry
# as told, and end in its failure action, never in a reboot as if the disk were done.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
. "$NDZ_TOP/tests/vm/vmlib.sh"
vm_begin big 64
cat >"$T/m.conf" <<CONF
pool 239.192.78.0/29
ports 5200-5207
idle-timeout 30
image big $T/big.ndz allow 10.77.0.0/24
CONF
mkdir -p "$T/run"
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -c "$T/m.conf" -r "$T/run" \
	2>"$T/master.log" &
VM_PIDS="$VM_PIDS $!"
common="ndz.after=reboot ndz.onfail=poweroff ndz.timeout=5"
vm_disk "$T/nosrv.disk" 64; cp "$T/nosrv.disk" "$T/nosrv.orig"
vm_disk "$T/noimg.disk" 64; cp "$T/noimg.disk" "$T/noimg.orig"
vm_disk "$T/small.disk" 32; cp "$T/small.disk" "$T/small.orig"
# nobody listens on port 9 of the server: the master does not answer
VM_TIMEOUT=240 vm_start nosrv "$T/nosrv.disk" "ndz.master=$VM_SRV:9 ndz.image=big ndz.retries=1 $common"
VM_TIMEOUT=240 vm_start noimg "$T/noimg.disk" "ndz.master=$VM_SRV ndz.image=nosuch ndz.retries=0 $common"
VM_TIMEOUT=240 vm_start small "$T/small.disk" "ndz.master=$VM_SRV ndz.image=big ndz.retries=0 ndz.zero=1 $common"
for v in nosrv noimg small; do vm_wait "$v"; done
for v in nosrv noimg small; do
	echo "# $v: $(grep -E "^ndz: .*(DHCP on|network:|attempt|receiving)" "$T/$v.con" | tr "\n" " ")"
done

r=$(vm_result nosrv)
check "no server: the console says so ($r)" [ "$r" = "failed: frisbee: no answer from master $VM_SRV:9" ]
check "no server: it retried once, saying why" grep -q "attempt 1 failed: frisbee: no answer from master $VM_SRV:9; trying again" "$T/nosrv.con"
r=$(vm_result noimg)
check "wrong image name: the console says so ($r)" [ "$r" = "failed: frisbee: master $VM_SRV:3563: image 'nosuch': unknown image" ]
r=$(vm_result small)
check "disk smaller than the image: refused ($r)" sh -c "echo \"\$1\" | grep -Eq \"^failed: frisbee: /dev/vda: target too small for the image \\(33554432 bytes, image 'big' of master [0-9.:]+ needs 67108864\\)\"" _ "$r"
for v in nosrv noimg small; do
	check "$v: powered off (ndz.onfail), not rebooted" sh -c "grep -q 'reboot: Power down' '$T/$v.con' && ! grep -q 'reboot: Restarting' '$T/$v.con' && [ \"\$(cat '$T/$v.qrc')\" = 0 ]"
	check "$v: the disk is untouched" cmp -s "$T/$v.orig" "$T/$v.disk"
	check "$v: no success line" sh -c "! grep -q '^NDZ-RESULT: ok' '$T/$v.con'"
done
done_testing
