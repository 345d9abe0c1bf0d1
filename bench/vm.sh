#!/bin/sh
# Benchmark: the boot environment on QEMU VMs, from power-on (QEMU started) to the disk
# reloaded and the VM powered off, for 1 VM and for 3 VMs at once from one mfrisbeed
# session; split into transfer (frisbee's start to the disk flushed, from the guest's
# own NDZ-RESULT line) and boot+rest (the remainder: firmware, kernel, drivers, DHCP,
# power-off). Medians of REPS runs; also the environment's size and the host's load.
# Usage: bench/vm.sh BUILD [REPS]   (root; BENCH_MIB: the ext4's size, default 128)
set -u
. "$(dirname "$0")/netbench.sh"
MIB=${BENCH_MIB:-128}
. "$NDZ_TOP/tests/vm/vmlib.sh"
vm_prepare
vm_lan || exit 1
vm_fs b "$MIB" || exit 1
cat >"$T/m.conf" <<CONF
pool 239.192.80.0/29
ports 5400-5407
idle-timeout 20
rate 1G
total-rate 1G
image b $T/b.ndz allow 10.77.0.0/24
CONF
mkdir -p "$T/run"
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -c "$T/m.conf" -r "$T/run" 2>"$T/m.log" &
VM_PIDS="$VM_PIDS $!"
echo "# bench/vm.sh $1 $REPS, $(date -u '+%Y-%m-%d %H:%M') UTC, $(nproc) cores, accel $VM_ACCEL," \
	"load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# environment: vmlinuz $(( $(wc -c <"$VM_MFS/vmlinuz") / 1024 )) KiB," \
	"initramfs.cpio.gz $(( $(wc -c <"$VM_MFS/initramfs.cpio.gz") / 1024 )) KiB"
echo "# image: ext4 of $MIB MiB holding $((MIB / 4)) MiB of files, $(( $(wc -c <"$T/b.ndz") / 1024 )) KiB as b.ndz;" \
	"VMs: 512 MiB, 1 vCPU, virtio disk and NIC, DHCP, ndz.zero=1"
printf '%-4s %9s %9s %10s %5s\n' vms total_s boot_s transfer_s ok
for n in 1 3; do
	: >"$T/tot" ; : >"$T/boot" ; : >"$T/xfer"
	okc=0
	r=0
	while [ $r -lt "$REPS" ]; do
		r=$((r + 1))
		i=0
		while [ $i -lt "$n" ]; do
			i=$((i + 1))
			vm_disk "$T/d$i.disk" "$MIB"
			VM_TIMEOUT=400 vm_start "r$r$n$i" "$T/d$i.disk" \
				"ndz.master=$VM_SRV ndz.image=b ndz.zero=1 ndz.after=poweroff ndz.onfail=poweroff quiet"
		done
		i=0
		while [ $i -lt "$n" ]; do
			i=$((i + 1))
			vm_wait "r$r$n$i"
			# the VMs of one run end at different times; each is timed on its own
			tot=$(echo "$(cat "$T/r$r$n$i.end") - $(cat "$T/r$r$n$i.start")" | bc -l)
			x=$(vm_result "r$r$n$i" | sed -n 's/^ok: .* in \([0-9.]*\) s$/\1/p')
			if [ -n "$x" ] && cmp -s "$T/b.src" "$T/d$i.disk"; then
				okc=$((okc + 1))
				echo "$tot" >>"$T/tot"; echo "$x" >>"$T/xfer"
				echo "$tot - $x" | bc -l >>"$T/boot"
			fi
		done
	done
	printf '%-4s %9.1f %9.1f %10.1f %5s\n' "$n" "$(median <"$T/tot")" "$(median <"$T/boot")" \
		"$(median <"$T/xfer")" "$okc/$((n * REPS))"
done
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
