#!/bin/sh
# Benchmark: a lab's reload of three QEMU VMs, from `ndzctl reload GROUP IMAGE` to the
# master holding three ok results, side by side in one run with the same three VMs
# told the image on their kernel command line (bench/vm.sh's way: no lab, no PXE).
#   lab:    ndzctl reload; the VMs boot from the network (QEMU's iPXE, dnsmasq with
#           doc/pxe/dnsmasq-lab.conf), get the master's iPXE script and the boot
#           environment over HTTP, ask (the group starts together), reload, report.
#           Timed from the reload command to the third ok in `ndzctl nodes list`.
#   direct: -kernel/-append with ndz.master= ndz.image=; timed from the first QEMU
#           start to the third NDZ-RESULT ok.
# Both end with every disk checked against the source. Medians of REPS runs.
# Usage: bench/lab-vm.sh BUILD [REPS]   (root; BENCH_MIB: the ext4's size, default 128)
set -u
. "$(dirname "$0")/netbench.sh"
MIB=${BENCH_MIB:-128}
HP=8080
. "$NDZ_TOP/tests/vm/vmlib.sh"
vm_prepare
mkdir -p "$T/tftp" "$T/pxe" "$T/run"
cp "$VM_MFS/vmlinuz" "$VM_MFS/initramfs.cpio.gz" "$T/pxe/"
sed "s|^interface=.*|interface=eth0|; s|^dhcp-range=10.0.0.100.*|dhcp-range=10.77.0.100,10.77.0.199,255.255.255.0,1h|;
     s|^tftp-root=.*|tftp-root=$T/tftp|; s|http://10.0.0.1:8080/|http://$VM_SRV:$HP/|" \
	"$NDZ_TOP/doc/pxe/dnsmasq-lab.conf" >"$T/dnsmasq.conf"
vm_lan "$T/dnsmasq.conf" || exit 1
vm_fs b "$MIB" || exit 1
cat >"$T/m.conf" <<CONF
pool 239.192.80.0/29
ports 5400-5407
idle-timeout 5
rate 1G
total-rate 1G
image b $T/b.ndz allow 10.77.0.0/24
group-window 60
http-listen $VM_SRV:$HP
pxe-dir $T/pxe
pxe-args console=ttyS0 panic=-1 quiet ndz.zero=1 ndz.after=poweroff ndz.onfail=poweroff
CONF
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -vv --log-time -c "$T/m.conf" -r "$T/run" \
	2>"$T/m.log" &
VM_PIDS="$VM_PIDS $!"
wait_until 10 test -S "$T/run/admin" || { echo "bench: the master did not start" >&2; exit 1; }
ctl() { "$NDZ_BIN/ndzctl" -m "$T/run/admin" "$@"; }
for i in 1 2 3; do ctl nodes add "52:54:00:77:0b:0$i" "n$i" room >/dev/null || exit 1; done
# oks: how many nodes hold an ok reload result newer than Unix time $1
oks() {
	ctl nodes list --json | python3 -c 'import json, sys
print(sum(1 for n in json.load(sys.stdin)["nodes"]
          if n["last"] and n["last"]["ok"] and n["last"]["time"] >= int(sys.argv[1])))' "$1"
}
now_s() { date +%s.%N; }
# at3 FROM PATTERN: seconds from Unix time FROM to the third master log line (after
# line $L0) matching PATTERN
at3() {
	_l=$(tail -n +"$((L0 + 1))" "$T/m.log" | grep -- "$2" | sed -n 3p | cut -d' ' -f1)
	[ -n "$_l" ] && echo "$(date -d "$_l" +%s.%N) - $1" | bc -l
}
echo "# bench/lab-vm.sh $1 $REPS, $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) cores, accel $VM_ACCEL," \
	"load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# image: ext4 of $MIB MiB holding $((MIB / 4)) MiB of files, $(( $(wc -c <"$T/b.ndz") / 1024 )) KiB as b.ndz;" \
	"3 VMs: 512 MiB, 1 vCPU, virtio disk and NIC, ndz.zero=1"
: >"$T/lab" ; : >"$T/direct" ; : >"$T/p1" ; : >"$T/p2"
lab_ok=0 direct_ok=0
r=0
while [ $r -lt "$REPS" ]; do
	r=$((r + 1))
	# the lab's way
	for i in 1 2 3; do vm_disk "$T/d$i.disk" "$MIB"; done
	sleep 6                            # the last run's session has ended (idle-timeout 5)
	w=$(date +%s)
	L0=$(wc -l <"$T/m.log")
	t0=$(now_s)
	ctl reload room b >/dev/null || exit 1
	for i in 1 2 3; do
		VM_PXE=1 VM_MAC="52:54:00:77:0b:0$i" VM_TIMEOUT=600 vm_start "l$r$i" "$T/d$i.disk" ""
	done
	k=0
	while [ "$(oks "$w")" != 3 ] && [ $k -lt 1200 ]; do sleep 0.5; k=$((k + 1)); done
	t1=$(now_s)
	for i in 1 2 3; do vm_wait "l$r$i"; done
	good=0
	for i in 1 2 3; do cmp -s "$T/b.src" "$T/d$i.disk" && good=$((good + 1)); done
	if [ "$(oks "$w")" = 3 ] && [ $good = 3 ]; then
		lab_ok=$((lab_ok + 1)); echo "$t1 - $t0" | bc -l >>"$T/lab"
		at3 "$t0" 'boot script: the boot environment' >>"$T/p1"
		at3 "$t0" 'asks: reload' >>"$T/p2"
	fi
	# the same VMs told the image directly
	for i in 1 2 3; do vm_disk "$T/d$i.disk" "$MIB"; done
	sleep 6
	t0=$(now_s)
	for i in 1 2 3; do
		VM_MAC="52:54:00:77:0b:0$i" VM_TIMEOUT=600 vm_start "d$r$i" "$T/d$i.disk" \
			"ndz.master=$VM_SRV ndz.image=b ndz.zero=1 ndz.after=poweroff ndz.onfail=poweroff quiet"
	done
	last=0 good=0
	for i in 1 2 3; do
		vm_wait "d$r$i"
		# the guest's NDZ-RESULT line is out when its QEMU ends (poweroff follows at once)
		case $(vm_result "d$r$i") in ok:*) cmp -s "$T/b.src" "$T/d$i.disk" && good=$((good + 1)) ;; esac
		e=$(cat "$T/d$r$i.end")
		[ "$(echo "$e > $last" | bc -l)" = 1 ] && last=$e
	done
	if [ $good = 3 ]; then
		direct_ok=$((direct_ok + 1)); echo "$last - $t0" | bc -l >>"$T/direct"
	fi
done
printf '%-44s %9s %5s\n' way "median_s" ok
printf '%-44s %9.1f %5s\n' "lab: ndzctl reload to 3 ok (PXE, ask, report)" "$(median <"$T/lab")" "$lab_ok/$REPS"
printf '%-44s %9.1f\n' "  of which: to the 3rd iPXE script served" "$(median <"$T/p1")"
printf '%-44s %9.1f\n' "  of which: to the 3rd ask (the group starts)" "$(median <"$T/p2")"
printf '%-44s %9.1f %5s\n' "direct: QEMU start to 3 off after ok (-kernel)" "$(median <"$T/direct")" "$direct_ok/$REPS"
echo "# runs, lab: $(tr '\n' ' ' <"$T/lab")s; direct: $(tr '\n' ' ' <"$T/direct")s"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
