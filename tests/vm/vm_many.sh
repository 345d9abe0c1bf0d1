#!/bin/sh
# Three VMs reload their disks at once from one session of the image master: each asks
# mfrisbeed (ndz.master=, ndz.image=) and all three must end byte-identical.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
. "$NDZ_TOP/tests/vm/vmlib.sh"
vm_begin lab 64
cat >"$T/m.conf" <<CONF
pool 239.192.77.0/29
ports 5100-5107
max-sessions 4
idle-timeout 30
rate 400M
image lab $T/lab.ndz allow 10.77.0.0/24
CONF
mkdir -p "$T/run"
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -c "$T/m.conf" -r "$T/run" -v \
	2>"$T/master.log" &
VM_PIDS="$VM_PIDS $!"
t0=$(date +%s)
for i in 1 2 3; do
	vm_disk "$T/d$i.disk" 64
	VM_TIMEOUT=240 vm_start "vm$i" "$T/d$i.disk" \
		"ndz.master=$VM_SRV ndz.image=lab ndz.zero=1 ndz.after=poweroff ndz.onfail=poweroff ndz.timeout=30"
done
for i in 1 2 3; do vm_wait "vm$i"; done
secs=$(( $(date +%s) - t0 ))
good=0
for i in 1 2 3; do
	r=$(vm_result "vm$i")
	case $r in ok:*) ;; *) echo "# vm$i: ${r:-no result}" ;; esac
	case $r in ok:*) cmp -s "$T/lab.src" "$T/d$i.disk" && good=$((good + 1)) ;; esac
done
check "three VMs at once: 3 report ok and hold the source byte for byte ($good, $secs s)" [ "$good" = 3 ]
check "all three powered off" sh -c "for i in 1 2 3; do grep -q 'reboot: Power down' \"$T/vm\$i.con\" || exit 1; done"
for i in 1 2 3; do
	check "e2fsck -fn finds disk $i clean" sh -c "e2fsck -fn '$T/d$i.disk' >/dev/null 2>&1"
done
n=$(in_ns srv "$NDZ_BIN/mfrisbeed" --status "$VM_SRV" | grep -o '"sessions_started": [0-9]*')
check "one session served all three ($n)" [ "$n" = '"sessions_started": 1' ]
for i in 1 2 3; do
	echo "# vm$i: boot to frisbee $(vm_time "vm$i" receiving) s, flushed at $(vm_time "vm$i" flushing) s"
done
done_testing
