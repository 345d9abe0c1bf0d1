#!/bin/sh
# make install honours PREFIX, DESTDIR, SYSCONFDIR and SYSTEMDUNITDIR and installs all
# the man pages refer to; make uninstall removes what it installed, an edited
# configuration excepted.
. "$NDZ_TOP/tests/lib.sh"
[ "$NDZ_SANITIZED" = 1 ] && skip_all "install is tested with the plain build"
o=$(basename "$NDZ_BUILD")
R=$T/root P=$T/root/opt/ndz
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
for d in FORMAT.md PROTOCOL.md IMPLEMENTATION.md PXE.md FILESYSTEMS.md README.md mfrisbeed.conf.example \
	pxe/boot.ipxe pxe/dnsmasq.conf pxe/dnsmasq-lab.conf pxe/pxelinux.cfg/default; do
	check "doc $d installed" test -s "$P/share/doc/ndz/$d"
done
check "the boot environment's builder, its init and DHCP script are installed, executable" \
	sh -c "[ -x '$P/share/ndz/mfs/build.sh' ] && [ -x '$P/share/ndz/mfs/init' ] && [ -x '$P/share/ndz/mfs/udhcpc.script' ]"
check "the installed builder runs (usage, exit 2)" \
	sh -c "'$P/share/ndz/mfs/build.sh' 2>/dev/null; [ \$? = 2 ]"
check "the systemd unit goes to PREFIX/lib/systemd/system with the installed paths" \
	grep -q '^ExecStart=/opt/ndz/bin/mfrisbeed -c /opt/ndz/etc/ndz/mfrisbeed.conf ' \
	"$P/lib/systemd/system/mfrisbeed.service"
check "the system user ndz is declared in PREFIX/lib/sysusers.d" \
	grep -q '^u ndz ' "$P/lib/sysusers.d/ndz.conf"
check "SYSCONFDIR/ndz/mfrisbeed.conf is installed (PREFIX/etc by default)" \
	test -f "$P/etc/ndz/mfrisbeed.conf"
mkdir -p "$T/images"
check "the installed configuration passes mfrisbeed --check (its upload-dir made)" \
	sh -c "sed 's|/var/lib/ndz/images|$T/images|' '$P/etc/ndz/mfrisbeed.conf' >'$T/m.conf' && '$P/bin/mfrisbeed' -n -c '$T/m.conf'"
# --check opens every image: the sample's two, made by the installed imagezip
head -c 65536 /dev/zero >"$T/src"
mkdir -p "$T/class"
for i in debian12 lab-win; do "$P/bin/imagezip" -q "$T/src" "$T/$i.ndz"; done
check "the sample configuration passes mfrisbeed --check" \
	sh -c "sed 's|/srv/ndz/classroom|$T/class|; s|/srv/ndz/|$T/|' '$P/share/doc/ndz/mfrisbeed.conf.example' >'$T/m.conf' && '$P/bin/mfrisbeed' -n -c '$T/m.conf'"
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
