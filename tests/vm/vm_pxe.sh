#!/bin/sh
# Network boot as documented: QEMU's own iPXE ROM gets DHCP and TFTP from dnsmasq run
# with doc/pxe/dnsmasq.conf, runs doc/pxe/boot.ipxe, boots the environment from TFTP
# and reloads the disk from the master. Only addresses and paths are adapted.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
. "$NDZ_TOP/tests/vm/vmlib.sh"
vm_prepare
rom=""
for r in /usr/share/qemu/efi-virtio.rom /usr/lib/ipxe/qemu/efi-virtio.rom; do
	[ -f "$r" ] && rom=$r
done
[ -n "$rom" ] || skip_all "QEMU's iPXE ROM for virtio-net is missing (apt-get install ipxe-qemu)"
mkdir -p "$T/tftp/ndz"
cp "$VM_MFS/vmlinuz" "$VM_MFS/initramfs.cpio.gz" "$T/tftp/ndz/"
sed "s|^set master .*|set master $VM_SRV|; s|^set image .*|set image pxe|;
     s|^set console .*|set console console=ttyS0 panic=-1|;
     s|^set extra .*|set extra ndz.zero=1 ndz.after=poweroff ndz.onfail=poweroff|" \
	"$NDZ_TOP/doc/pxe/boot.ipxe" >"$T/tftp/boot.ipxe"
sed "s|^interface=.*|interface=eth0|; s|^dhcp-range=.*|dhcp-range=10.77.0.100,10.77.0.199,255.255.255.0,1h|;
     s|^tftp-root=.*|tftp-root=$T/tftp|" "$NDZ_TOP/doc/pxe/dnsmasq.conf" >"$T/dnsmasq.conf"
check "dnsmasq accepts doc/pxe/dnsmasq.conf" sh -c "dnsmasq --test --conf-file='$T/dnsmasq.conf' >/dev/null 2>&1"
vm_lan "$T/dnsmasq.conf" || { not_ok "namespace LAN"; done_testing; }
vm_fs pxe 32 || { not_ok "make the source file system and its image"; done_testing; }
printf 'pool 239.192.79.0/29\nports 5300-5307\nidle-timeout 30\nimage pxe %s allow 10.77.0.0/24\n' \
	"$T/pxe.ndz" >"$T/m.conf"
mkdir -p "$T/run"
ip netns exec "${NETNS_PFX}srv" "$NDZ_BIN/mfrisbeed" -c "$T/m.conf" -r "$T/run" \
	2>"$T/master.log" &
VM_PIDS="$VM_PIDS $!"
vm_disk "$T/pxe.disk" 32
t0=$(date +%s)
VM_PXE=1 VM_TIMEOUT=300 vm_start pxe "$T/pxe.disk" ""
vm_wait pxe
secs=$(( $(date +%s) - t0 ))
check "iPXE fetched the script and the environment by TFTP" sh -c \
	"grep -q 'sent .*/boot.ipxe' '$T/dnsmasq.log' && grep -q 'sent .*/initramfs.cpio.gz' '$T/dnsmasq.log'"
r=$(vm_result pxe)
check "the network-booted VM reloads its disk and says ok in $secs s ($r)" sh -c "echo \"\$1\" | grep -q '^ok: '" _ "$r"
check "the disk is the source, byte for byte" cmp -s "$T/pxe.src" "$T/pxe.disk"
check "it powered off" grep -q 'reboot: Power down' "$T/pxe.con"
[ "$_failed" = 0 ] || tail -n 8 "$T/dnsmasq.log" | sed 's/^/# dnsmasq: /'
done_testing
