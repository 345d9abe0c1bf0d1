#!/bin/sh
# make install honours PREFIX and DESTDIR; make uninstall removes what it installed.
. "$NDZ_TOP/tests/lib.sh"
[ "$NDZ_SANITIZED" = 1 ] && skip_all "install is tested with the plain build"
o=$(basename "$NDZ_BUILD")
make -s -C "$NDZ_TOP" O="$o" install PREFIX=/opt/ndz DESTDIR="$T/root" >"$T/log" 2>&1
check "make install PREFIX=/opt/ndz DESTDIR=... succeeds" test $? -eq 0
for p in imagezip imageunzip; do
	check "$p installed under DESTDIR/PREFIX/bin and runs" \
		sh -c "'$T/root/opt/ndz/bin/$p' --version | grep -q '^$p '"
	check "$p.1 installed under DESTDIR/PREFIX/share/man/man1" \
		test -f "$T/root/opt/ndz/share/man/man1/$p.1"
done
check "mfrisbeed installed and runs" \
	sh -c "'$T/root/opt/ndz/bin/mfrisbeed' --version | grep -q '^mfrisbeed '"
for m in man8/mfrisbeed.8 man5/mfrisbeed.conf.5; do
	check "$m installed" test -f "$T/root/opt/ndz/share/man/$m"
done
check "the sample configuration is installed and passes mfrisbeed --check" \
	sh -c "sed 's|/srv/ndz/classroom|$T|' '$T/root/opt/ndz/share/doc/ndz/mfrisbeed.conf.example' >'$T/m.conf' && '$T/root/opt/ndz/bin/mfrisbeed' -n -c '$T/m.conf'"
check "the systemd unit is installed with the installed binary's path" \
	grep -q '^ExecStart=/opt/ndz/bin/mfrisbeed -c ' "$T/root/opt/ndz/share/doc/ndz/mfrisbeed.service"
check "nothing installed outside DESTDIR/PREFIX" \
	sh -c "[ -z \"\$(find '$T/root' -mindepth 1 -maxdepth 1 ! -name opt)\" ]"
make -s -C "$NDZ_TOP" O="$o" uninstall PREFIX=/opt/ndz DESTDIR="$T/root" >"$T/log" 2>&1
check "make uninstall removes the programs and man pages" \
	sh -c "[ -z \"\$(find '$T/root' -type f)\" ]"
done_testing
