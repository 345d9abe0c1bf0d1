#!/bin/sh
# The boot environment on a real virtual machine: QEMU boots mfs/ (kernel + initramfs),
# gets an address by DHCP from dnsmasq, reloads its virtio disk from frisbeed in a
# network namespace and powers off; the disk must then be the source, byte for byte.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
. "$NDZ_TOP/tests/vm/vmlib.sh"
# one real VM in `make check` is enough: the plain build's; the sanitized builds' run in
# `make check-vm SANITIZE=...` (tests/vm/run.sh, NDZ_SLOW=1)
[ "${NDZ_SANITIZED:-0}" = 1 ] && [ "${NDZ_SLOW:-0}" != 1 ] &&
	skip_all "the VM runs once in make check, in the plain build (make check-vm SANITIZE=... runs it here)"
vm_prepare
ok "boot environment built ($(( $(wc -c <"$VM_MFS/initramfs.cpio.gz") / 1024 )) KiB initramfs; $VM_ACCEL)"
vm_lan || { not_ok "namespace LAN"; done_testing; }
# a 48 MiB ext4 with 12 MiB of files; its free space is zeros, so with ndz.zero=1 the
# reloaded disk must equal it exactly
vm_fs fs1 48 || { not_ok "make the source file system and its image"; done_testing; }
vm_disk "$T/vm1.disk" 48
in_ns srv "$FRISBEED" -m "$MC_GROUP" -p "$MC_PORT" -W 400M -T 0 -q "$T/fs1.ndz" \
	2>"$T/srv.log" &
VM_PIDS="$VM_PIDS $!"
vm_run 100 vm1 "$T/vm1.disk" \
	"ndz.group=$MC_GROUP ndz.port=$MC_PORT ndz.zero=1 ndz.after=poweroff ndz.onfail=poweroff ndz.retries=0 ndz.timeout=20"
res=$(vm_result vm1)
check "the VM reports success on its console ($res)" sh -c "echo '$res' | grep -q '^ok: '"
check "the VM powered itself off in $VM_SECS s (qemu exit $(cat "$T/vm1.qrc"))" \
	sh -c "[ \"$(cat "$T/vm1.qrc")\" = 0 ] && grep -q 'reboot: Power down' '$T/vm1.con'"
check "it got its address by DHCP" grep -q 'network: eth0 10.77.0.1[0-9][0-9]/' "$T/vm1.con"
check "the reloaded disk is the source, byte for byte" cmp -s "$T/fs1.src" "$T/vm1.disk"
check "e2fsck -fn finds the reloaded disk clean" sh -c "e2fsck -fn '$T/vm1.disk' >'$T/fsck.log' 2>&1"
b=$(vm_time vm1 'receiving') e=$(vm_time vm1 'flushing')
echo "# boot to frisbee ${b:-?} s, transfer to flushed $(awk -v a="${b:-0}" -v b="${e:-0}" 'BEGIN { print b - a }') s (guest clock)"
if [ "$_failed" != 0 ]; then
	cat "$T/dnsmasq.log" 2>/dev/null | tail -n 5 | sed "s/^/# dnsmasq: /"
	echo "# console of vm1:"; tr -d '\r' <"$T/vm1.con" | grep -v '^\[' | tail -n 20 | sed 's/^/#   /'
fi
done_testing
