#!/bin/sh
# make install honours PREFIX, DESTDIR, SYSCONFDIR and SYSTEMDUNITDIR and installs all
# the man pages refer to; make uninstall removes what it installed, an edited
# configuration excepted.
. "$NDZ_TOP/tests/lib.sh"
[ "$NDZ_SANITIZED" = 1 ] && skip_all "install is tested with the plain build"
# A copy of the build directory: the -W rebuild below relinks every program, and other
# tests run the build's own programs meanwhile (a program mid-link is not executable:
# a CI run's corrupt.sh got "Permission denied" from imageunzip).
o=$T/build
mkdir -p "$o" && (cd "$NDZ_BUILD" && tar -cf - --exclude=./test-logs --exclude=./mfs --exclude='./old-*' .) | (cd "$o" && tar -xpf -) ||
	{ not_ok "copy $NDZ_BUILD to $o"; done_testing; }
R=$T/root P=$T/root/opt/ndz
# make -s says nothing but errors (no CC/LD lines)
src=$(cd "$NDZ_TOP" && ls lib/core/*.c | head -n 1)
out=$(make -s -C "$NDZ_TOP" O="$o" -W "$src" all 2>&1)
check "make -s rebuilds in silence${out:+ (said: $(echo "$out" | head -n 2 | tr '\n' ' '))}" [ -z "$out" ]
make -s -C "$NDZ_TOP" O="$o" install PREFIX=/opt/ndz DESTDIR="$R" >"$T/log" 2>&1
check "make install PREFIX=/opt/ndz DESTDIR=... succeeds" test $? -eq 0 || cat "$T/log"
for p in imagezip imageunzip frisbeed frisbee mfrisbeed imagekey frisbee-upload ndzctl; do
	check "$p installed under DESTDIR/PREFIX/bin and runs" \
		sh -c "'$P/bin/$p' --version | grep -q '^$p '"
	s=1; case $p in frisbee* | mfrisbeed | ndzctl) s=8 ;; esac
	check "$p.$s installed under DESTDIR/PREFIX/share/man/man$s" test -f "$P/share/man/man$s/$p.$s"
	check "bash completion for $p installed" \
		grep -q "complete .* $p\( \|$\)" "$P/share/bash-completion/completions/$p"
done
for m in man5/mfrisbeed.conf.5 man7/ndz-mfs.7; do
	check "$m installed" test -f "$P/share/man/$m"
done
for d in FORMAT.md PROTOCOL.md IMPLEMENTATION.md PXE.md FILESYSTEMS.md HTTP.md SITES.md README.md mfrisbeed.conf.example \
	pxe/boot.ipxe pxe/dnsmasq.conf pxe/dnsmasq-lab.conf pxe/pxelinux.cfg/default; do
	check "doc $d installed" test -s "$P/share/doc/ndz/$d"
done
check "the boot environment's builder, its init and DHCP script are installed, executable" \
	sh -c "[ -x '$P/share/ndz/mfs/build.sh' ] && [ -x '$P/share/ndz/mfs/init' ] && [ -x '$P/share/ndz/mfs/udhcpc.script' ]"
check "the installed builder runs (usage, exit 2)" \
	sh -c "'$P/share/ndz/mfs/build.sh' 2>/dev/null; [ \$? = 2 ]"
# the builder needs ndzctl (a lab's ask and report): without it, a loud refusal before
# anything is fetched or written
mkdir -p "$T/bin-no-ctl"
for p in frisbee imageunzip imagezip frisbee-upload; do cp "$P/bin/$p" "$T/bin-no-ctl/"; done
"$P/share/ndz/mfs/build.sh" -c "$T/mfs-cache" "$T/bin-no-ctl" "$T/mfs-out" 2>"$T/err"; rc=$?
check "the builder without ndzctl in BINDIR: exit 1, says why, writes nothing ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q 'no ndzctl in $T/bin-no-ctl: a boot environment without it cannot run a lab task' '$T/err' &&
		[ ! -e '$T/mfs-out' ] && [ ! -e '$T/mfs-cache' ]"
# with a kernel already in a cache (the VM tests' or make mfs's), the installed builder
# leaves only its two files in OUTDIR (its tree in a temporary directory, removed)
mc=${NDZ_MFS_CACHE:-$NDZ_TOP/build/mfs/cache}
kd=$(ls -d "$mc"/kernel-*/.done 2>/dev/null | head -n 1)
if [ -n "$kd" ] && [ -x "$mc/busybox/bin/busybox" ]; then
	kv=${kd%/.done}; kv=${kv##*/kernel-}
	NDZ_MFS_KERNEL_PKG=linux-image-$kv "$P/share/ndz/mfs/build.sh" -c "$mc" "$P/bin" "$T/mfs-out" \
		>"$T/mfs.log" 2>&1; rc=$?
	check "the installed builder makes the environment; OUTDIR holds vmlinuz and initramfs.cpio.gz only ($rc)" \
		sh -c "[ $rc = 0 ] && [ \"\$(ls -A '$T/mfs-out' | tr '\n' ' ')\" = 'initramfs.cpio.gz vmlinuz ' ]" ||
		cat "$T/mfs.log"
	check "... with ndzctl in it" sh -c "zcat '$T/mfs-out/initramfs.cpio.gz' | cpio -t --quiet 2>/dev/null | grep -qx bin/ndzctl"
else
	echo "# the builder's full run skipped: no kernel in $mc yet (make mfs, or the VM tests, fetch one)"
fi
check "the systemd unit goes to PREFIX/lib/systemd/system with the installed paths" \
	grep -q '^ExecStart=/opt/ndz/bin/mfrisbeed -c /opt/ndz/etc/ndz/mfrisbeed.conf ' \
	"$P/lib/systemd/system/mfrisbeed.service"
check "the system user ndz is declared in PREFIX/lib/sysusers.d" \
	grep -q '^u ndz ' "$P/lib/sysusers.d/ndz.conf"
check "SYSCONFDIR/ndz/mfrisbeed.conf is installed (PREFIX/etc by default)" \
	test -f "$P/etc/ndz/mfrisbeed.conf"
mkdir -p "$T/images"
sed "s|/var/lib/ndz/images|$T/images|; s|/var/lib/ndz/lab|$T/lab|" "$P/etc/ndz/mfrisbeed.conf" >"$T/m.conf"
"$P/bin/mfrisbeed" -n -c "$T/m.conf" -r "$T/run" 2>"$T/err"; rc=$?
check "the installed configuration without its lab directory fails mfrisbeed --check, naming it ($rc)" \
	sh -c "[ $rc = 1 ] && grep -q 'lab state $T/lab/state: directory $T/lab: No such file' '$T/err'"
mkdir -p "$T/lab"
"$P/bin/mfrisbeed" -n -c "$T/m.conf" -r "$T/run" 2>"$T/err"; rc=$?
check "the installed configuration passes mfrisbeed --check (its directories made), warning it serves nothing ($rc)" \
	sh -c "[ $rc = 0 ] && grep -q 'serves nothing' '$T/err'"
# the lab's state survives a reboot: a kept directory, the unit's StateDirectory
check "the installed configuration keeps the lab state in /var/lib/ndz/lab" \
	grep -q '^lab-state /var/lib/ndz/lab/state$' "$P/etc/ndz/mfrisbeed.conf"
check "the unit makes /var/lib/ndz/lab (StateDirectory) and the images directory" \
	grep -q '^StateDirectory=ndz/images ndz/lab$' "$P/lib/systemd/system/mfrisbeed.service"
missing=""
for k in http-listen pxe-dir pxe-args lab-state token-file admin-listen group-window node-timeout; do
	grep -q "^#\{0,1\}$k " "$P/etc/ndz/mfrisbeed.conf" || missing="$missing $k"
done
check "the installed configuration shows the lab's keys${missing:+; missing:$missing}" [ -z "$missing" ]
# --check opens every image: the sample's two, made by the installed imagezip
head -c 65536 /dev/zero >"$T/src"
mkdir -p "$T/class"
for i in debian12 lab-win; do "$P/bin/imagezip" -q "$T/src" "$T/$i.ndz"; done
check "the sample configuration passes mfrisbeed --check" \
	sh -c "sed 's|/srv/ndz/classroom|$T/class|; s|/srv/ndz/|$T/|; s|/var/lib/ndz/lab|$T/lab|' '$P/share/doc/ndz/mfrisbeed.conf.example' >'$T/m.conf' && '$P/bin/mfrisbeed' -n -c '$T/m.conf'"
check "nothing installed outside DESTDIR/PREFIX" \
	sh -c "[ -z \"\$(find '$R' -mindepth 1 -maxdepth 1 ! -name opt)\" ]"
echo "# edited" >>"$P/etc/ndz/mfrisbeed.conf"
make -s -C "$NDZ_TOP" O="$o" install PREFIX=/opt/ndz DESTDIR="$R" >"$T/log" 2>&1
check "a second make install keeps an edited configuration" \
	grep -q '^# edited$' "$P/etc/ndz/mfrisbeed.conf"
make -s -C "$NDZ_TOP" O="$o" uninstall PREFIX=/opt/ndz DESTDIR="$R" >"$T/log" 2>&1
check "make uninstall removes everything but the edited configuration" \
	sh -c "[ \"\$(find '$R' -type f)\" = '$P/etc/ndz/mfrisbeed.conf' ]" ||
	find "$R" -type f
# a package's layout: PREFIX=/usr puts the configuration in /etc; both dirs overridable
make -s -C "$NDZ_TOP" O="$o" install PREFIX=/usr DESTDIR="$T/pkg" \
	SYSTEMDUNITDIR=/lib/systemd/system >"$T/log" 2>&1
check "PREFIX=/usr: configuration in /etc/ndz, unit in SYSTEMDUNITDIR, reading /etc/ndz" \
	sh -c "[ -f '$T/pkg/etc/ndz/mfrisbeed.conf' ] && grep -q '^ExecStart=/usr/bin/mfrisbeed -c /etc/ndz/mfrisbeed.conf ' '$T/pkg/lib/systemd/system/mfrisbeed.service'"
make -s -C "$NDZ_TOP" O="$o" install PREFIX=/usr DESTDIR="$T/pkg2" SYSCONFDIR=/etc/x >"$T/log" 2>&1
check "SYSCONFDIR=/etc/x: the configuration and the unit follow it" \
	sh -c "[ -f '$T/pkg2/etc/x/ndz/mfrisbeed.conf' ] && grep -q ' -c /etc/x/ndz/mfrisbeed.conf ' '$T/pkg2/usr/lib/systemd/system/mfrisbeed.service'"
done_testing
