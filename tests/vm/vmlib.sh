# Helpers for the virtual-machine tests: the boot environment built from NDZ_BIN, a
# LAN of namespaces (tests/netns.sh) with DHCP, and QEMU guests on tap devices.
# Sourced after tests/lib.sh and tests/netns.sh.
# shellcheck shell=sh

VM_SRV=10.77.0.1
VM_PIDS=""
VM_ACCEL=tcg

# vm_prepare: everything a VM test needs, or skip_all with the reason. Builds the boot
# environment into $VM_MFS (the kernel cache is shared between build directories).
vm_prepare() {
	command -v qemu-system-x86_64 >/dev/null ||
		skip_all "qemu-system-x86_64 missing (apt-get install qemu-system-x86)"
	netns_require
	[ -c /dev/net/tun ] || skip_all "/dev/net/tun missing: no tap devices"
	command -v dnsmasq >/dev/null || skip_all "dnsmasq missing (apt-get install dnsmasq-base)"
	VM_MFS="$NDZ_BUILD/mfs"
	if ! sh "$NDZ_TOP/mfs/build.sh" -c "${NDZ_MFS_CACHE:-$NDZ_TOP/build/mfs/cache}" \
		"$NDZ_BIN" "$VM_MFS" >"$T/mfs-build.log" 2>&1; then
		if grep -q 'no kernel' "$T/mfs-build.log"; then
			skip_all "$(grep 'no kernel' "$T/mfs-build.log")"
		fi
		not_ok "build the boot environment: $(tail -n 3 "$T/mfs-build.log" | tr '\n' ' ')"
		done_testing
	fi
	vm_accel
}

# vm_accel: KVM when it really runs a kernel here (it may exist and hang), else TCG.
# NDZ_VM_ACCEL=tcg|kvm decides without probing.
vm_accel() {
	VM_ACCEL=${NDZ_VM_ACCEL:-}
	[ -n "$VM_ACCEL" ] && return 0
	VM_ACCEL=tcg
	[ -w /dev/kvm ] || return 0
	: >"$T/kvm-probe.log"
	# qemu itself in the background (not under timeout), so that killing $! kills it
	qemu-system-x86_64 -accel kvm -m 128 -nodefaults -display none -no-reboot \
		-serial "file:$T/kvm-probe.log" -kernel "$VM_MFS/vmlinuz" \
		-append "console=ttyS0 panic=-1" </dev/null >/dev/null 2>&1 &
	_pp=$!
	at_exit "kill -9 $_pp 2>/dev/null"
	_k=0
	while [ $_k -lt 30 ] && ! grep -q 'Linux version' "$T/kvm-probe.log"; do
		sleep 0.1; _k=$((_k + 1))
	done
	grep -q 'Linux version' "$T/kvm-probe.log" && VM_ACCEL=kvm
	kill -9 $_pp 2>/dev/null; wait $_pp 2>/dev/null
	return 0
}

# vm_lan [CONF]: the bridge, a server host "srv" (10.77.0.1) and dnsmasq giving
# 10.77.0.100-199 (or configured by CONF)
vm_lan() {
	netns_lan && netns_host srv 1 || return 1
	at_exit vm_kill
	if [ $# = 1 ]; then
		set -- --conf-file="$1"
	else
		set -- --conf-file=/dev/null --port=0 --interface=eth0 --bind-interfaces \
			--dhcp-range=10.77.0.100,10.77.0.199,255.255.255.0,1h
	fi
	in_ns srv dnsmasq "$@" --keep-in-foreground --user=root --dhcp-leasefile="$T/leases" \
		--pid-file="$T/dnsmasq.pid" --log-facility="$T/dnsmasq.log" --log-dhcp \
		>"$T/dnsmasq.out" 2>&1 &
	VM_PIDS="$VM_PIDS $!"
}

_vm_n=0
# vm_start NAME DISK APPEND [QEMU OPTIONS...]: boot the environment in a VM with DISK as
# its virtio disk and a virtio NIC (MAC VM_MAC, else one of its own) on a tap of the LAN;
# its serial console goes to $T/NAME.con, its exit status to $T/NAME.qrc. Killed after
# VM_TIMEOUT seconds.
vm_start() {
	_name=$1 _disk=$2 _app=$3; shift 3
	_vm_n=$((_vm_n + 1))
	_tap="tap$_vm_n"
	ip -n "$NETNS_BR" tuntap add "$_tap" mode tap &&
		ip -n "$NETNS_BR" link set "$_tap" master br0 up || return 1
	: >"$T/$_name.con"
	# VM_PXE=1: boot from the NIC (QEMU's iPXE ROM) instead of our kernel
	if [ -n "${VM_PXE:-}" ]; then
		set -- -boot order=n "$@"
	else
		set -- -kernel "$VM_MFS/vmlinuz" -initrd "$VM_MFS/initramfs.cpio.gz" \
			-append "console=ttyS0 panic=-1 $_app" "$@"
	fi
	(
		date +%s.%N >"$T/$_name.start"
		ip netns exec "$NETNS_BR" timeout -s KILL "${VM_TIMEOUT:-90}" qemu-system-x86_64 \
			-accel "$VM_ACCEL" -m "${VM_MEM:-512}" -smp 1 -nodefaults -display none \
			-no-reboot -monitor none -serial "file:$T/$_name.con" \
			-drive "file=$_disk,format=raw,if=virtio" \
			-netdev "tap,id=n0,ifname=$_tap,script=no,downscript=no" \
			-device "virtio-net-pci,netdev=n0,mac=${VM_MAC:-52:54:00:77:01:$(printf %02x $_vm_n)}" \
			"$@" </dev/null >"$T/$_name.qemu" 2>&1
		echo $? >"$T/$_name.qrc"
		date +%s.%N >"$T/$_name.end"
	) &
	VM_PIDS="$VM_PIDS $!"
	eval "_vmpid_$_name=$!"
}

# vm_wait NAME: wait for VM NAME to end (vm_start's timeout bounds it)
vm_wait() { eval "wait \$_vmpid_$1"; }

# vm_stop NAME: end VM NAME now (its subshell runs timeout, which passes TERM to qemu)
vm_stop() {
	_sp=$(eval echo "\$_vmpid_$1")
	for _c in $(ps -o pid= --ppid "$_sp"); do kill -TERM "$_c" 2>/dev/null; done
	vm_wait "$1" 2>/dev/null
}

# vm_result NAME: the NDZ-RESULT line of VM NAME's console, without the prefix
vm_result() { tr -d '\r' <"$T/$1.con" | sed -n 's/^NDZ-RESULT: //p' | tail -n 1; }

# vm_time NAME WHAT: the guest's uptime on its first console line containing WHAT
vm_time() { sed -n "s/^ndz: \[ *\([0-9.]*\)\] .*$2.*/\1/p" "$T/$1.con" | head -n 1; }

vm_kill() {
	for _p in $VM_PIDS; do kill -9 "$_p" 2>/dev/null; done
	[ -f "$T/dnsmasq.pid" ] && kill "$(cat "$T/dnsmasq.pid")" 2>/dev/null
	true
}

# vm_fs NAME MIB: an ext4 file system $T/NAME.src of MIB MiB holding random and text
# files, made by mke2fs -d, and its image $T/NAME.ndz made by imagezip
vm_fs() {
	mkdir -p "$T/$1.d/sub"
	head -c $(( $2 * 1024 * 128 )) /dev/urandom >"$T/$1.d/random.bin"
	yes "ndz vm test $1" | head -c $(( $2 * 1024 * 128 )) >"$T/$1.d/sub/text.txt"
	date >"$T/$1.d/stamp"
	truncate -s "${2}M" "$T/$1.src"
	mke2fs -q -F -t ext4 -L "$1" -d "$T/$1.d" "$T/$1.src" >/dev/null &&
		"$IMAGEZIP" -q "$T/$1.src" "$T/$1.ndz"
}

# vm_run TIMEOUT NAME DISK CMDLINE: vm_start NAME (VM_TIMEOUT=TIMEOUT) and wait for
# it to end; how many seconds that took in VM_SECS
vm_run() {
	_vt0=$(date +%s)
	VM_TIMEOUT=$1 vm_start "$2" "$3" "$4"
	vm_wait "$2"
	VM_SECS=$(( $(date +%s) - _vt0 ))
}

# vm_begin NAME MIB: vm_prepare, the LAN, and the file system NAME of MIB MiB with its
# image (vm_fs); the test ends when the LAN or the image cannot be made.
vm_begin() {
	vm_prepare
	vm_lan || { not_ok "namespace LAN"; done_testing; }
	vm_fs "$1" "$2" || { not_ok "make the source file system and its image"; done_testing; }
}

# vm_disk FILE MIB: a disk of MIB MiB full of garbage, so nothing passes by accident
vm_disk() { head -c $(( $2 * 1024 * 1024 )) /dev/urandom >"$1"; }
