#!/bin/sh
# The Debian packages: built with dpkg-buildpackage from a copy of the tracked files
# (nothing written to the source tree), lintian without errors, unpacked into a scratch
# root; the installed programs round-trip an image and multicast it in a namespace LAN.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
[ "$NDZ_SANITIZED" = 1 ] && skip_all "the packages are built and tested once, with the plain build"
for t in dpkg-buildpackage dh dpkg-deb; do
	command -v $t >/dev/null ||
		skip_all "$t missing (apt-get install dpkg-dev debhelper: tests/install-deps.sh)"
done
V=$(sed -n '1s/^[^(]*(\([^)]*\)).*/\1/p' "$NDZ_TOP/debian/changelog")
S=$T/src/ndz-$V
mkdir -p "$S"
# the tracked files as they are now, so no build directory or stray file goes in
if git -C "$NDZ_TOP" rev-parse --git-dir >/dev/null 2>&1; then
	(cd "$NDZ_TOP" && git ls-files -z | tar --null --ignore-failed-read -T - -cf -) |
		tar -xf - -C "$S"
else
	(cd "$NDZ_TOP" && tar --exclude='./build*' --exclude=./.git -cf - .) | tar -xf - -C "$S"
fi
before=$(cd "$NDZ_TOP" && git status --porcelain --ignored 2>/dev/null | sort | md5sum)
t0=$(date +%s)
(cd "$S" && dpkg-buildpackage -us -uc -b -j2) >"$T/build.log" 2>&1
rc=$?
check "dpkg-buildpackage -us -uc -b succeeds ($(( $(date +%s) - t0 )) s)" test $rc = 0 ||
	tail -n 30 "$T/build.log"
after=$(cd "$NDZ_TOP" && git status --porcelain --ignored 2>/dev/null | sort | md5sum)
check "the source tree is untouched" [ "$before" = "$after" ]
arch=$(dpkg --print-architecture)
for d in "ndz_${V}_$arch" "ndz-server_${V}_$arch" "ndz-mfs_${V}_all"; do
	check "$d.deb built" test -s "$T/src/$d.deb"
done
if command -v lintian >/dev/null; then
	lintian --fail-on error "$T/src/ndz_${V}_$arch.changes" >"$T/lintian" 2>&1
	check "lintian finds no errors" sh -c "[ $? = 0 ] && ! grep -q '^E:' '$T/lintian'" ||
		cat "$T/lintian"
	# a man page line that groff takes for a request loses its text
	check "lintian finds no groff warnings in the man pages" \
		sh -c "! grep -E 'groff-message|manpage-has-errors' '$T/lintian'" || grep groff "$T/lintian"
else
	not_ok "lintian missing (tests/install-deps.sh installs it)"
fi
R=$T/root
for d in "ndz_${V}_$arch" "ndz-server_${V}_$arch" "ndz-mfs_${V}_all"; do
	dpkg-deb -x "$T/src/$d.deb" "$R" || not_ok "dpkg-deb -x $d.deb"
done
# where each program went, and everything its man page refers to
for d in "ndz_${V}_$arch" "ndz-server_${V}_$arch" "ndz-mfs_${V}_all"; do
	dpkg-deb -c "$T/src/$d.deb" >"$T/$d.list"
done
check "ndz has the tools (ndzctl too), their man pages and the format and protocol documents" \
	sh -c "for f in usr/bin/imagezip usr/bin/imageunzip usr/bin/imagekey usr/bin/frisbee \
		usr/bin/frisbee-upload usr/bin/ndzctl usr/share/man/man8/ndzctl.8.gz \
		usr/share/man/man1/imagezip.1.gz usr/share/man/man8/frisbee.8.gz \
		usr/share/doc/ndz/FORMAT.md.gz usr/share/doc/ndz/PROTOCOL.md.gz; do
		grep -q \" \./\$f\$\" '$T/ndz_${V}_$arch.list' || { echo \"missing \$f\"; exit 1; }; done"
check "ndz-server has the servers, the unit, the user, /etc/ndz and the kept directories" \
	sh -c "for f in usr/bin/frisbeed usr/bin/mfrisbeed lib/systemd/system/mfrisbeed.service \
		var/lib/ndz/images/ var/lib/ndz/lab/ \
		usr/lib/sysusers.d/ndz.conf etc/ndz/mfrisbeed.conf usr/share/man/man8/mfrisbeed.8.gz \
		usr/share/man/man5/mfrisbeed.conf.5.gz; do
		grep -q \" \./\$f\$\" '$T/ndz-server_${V}_$arch.list' || { echo \"missing \$f\"; exit 1; }; done"
check "ndz-mfs has the builder, its man page, PXE.md (compressed when over 4 KiB) and the examples" \
	sh -c "for f in usr/share/ndz/mfs/build.sh usr/share/ndz/mfs/init usr/share/man/man7/ndz-mfs.7.gz \
		usr/share/doc/ndz-mfs/PXE.md usr/share/doc/ndz-mfs/pxe/boot.ipxe; do
		grep -Eq \" \./\$f(\.gz)?\$\" '$T/ndz-mfs_${V}_all.list' || { echo \"missing \$f\"; exit 1; }; done"
# ndz-mfs's builder runs ndzctl (a lab's ask and report) and needs it: the package
# holding it is one ndz-mfs depends on, not one it only suggests
holder=$(grep -l ' \./usr/bin/ndzctl$' "$T"/*.list | sed 's|.*/||; s|_.*||')
dep=$(dpkg-deb -f "$T/src/ndz-mfs_${V}_all.deb" Depends)
check "ndzctl's package ($holder) is a dependency of ndz-mfs ($dep)" \
	sh -c "[ -n '$holder' ] && echo '$dep' | tr ',' '\n' | grep -q '^ *$holder\( \|\$\)'"
dpkg-deb -e "$T/src/ndz-server_${V}_$arch.deb" "$T/ctl"
check "/etc/ndz/mfrisbeed.conf is a conffile" grep -qx /etc/ndz/mfrisbeed.conf "$T/ctl/conffiles"
check "the postinst creates the ndz user (systemd-sysusers)" grep -q 'systemd-sysusers.* ndz.conf' "$T/ctl/postinst"
check "the postinst gives /var/lib/ndz/lab to ndz" grep -q 'chown ndz:ndz .*/var/lib/ndz/lab' "$T/ctl/postinst"
check "the unit keeps the lab's state writable and across reboots (StateDirectory=... ndz/lab)" \
	grep -q '^StateDirectory=.*ndz/lab' "$R/lib/systemd/system/mfrisbeed.service"
check "the packaged configuration keeps the lab's state in /var/lib/ndz/lab" \
	grep -q '^lab-state /var/lib/ndz/lab/' "$R/etc/ndz/mfrisbeed.conf"
check "the unit runs the packaged master with /etc/ndz" \
	grep -q '^ExecStart=/usr/bin/mfrisbeed -c /etc/ndz/mfrisbeed.conf ' "$R/lib/systemd/system/mfrisbeed.service"
n=0
for p in imagezip imageunzip imagekey frisbee frisbee-upload frisbeed mfrisbeed ndzctl; do
	[ -f "$R/usr/share/bash-completion/completions/$p" ] && n=$((n + 1))
done
check "bash completions for all 8 programs ($n)" [ "$n" = 8 ]

# the installed programs at work
B=$R/usr/bin
check "every installed program runs" sh -c "for p in imagezip imageunzip imagekey frisbee \
	frisbee-upload frisbeed mfrisbeed ndzctl; do '$B/'\$p --version >/dev/null || exit 1; done"
mkdir -p "$T/images" "$T/lab"
check "the installed configuration passes the installed mfrisbeed --check" \
	sh -c "sed 's|/var/lib/ndz/images|$T/images|; s|/var/lib/ndz/lab|$T/lab|' '$R/etc/ndz/mfrisbeed.conf' >'$T/m.conf' && '$B/mfrisbeed' -n -c '$T/m.conf' -r '$T/run' 2>'$T/err'"
IMAGEZIP=$B/imagezip IMAGEUNZIP=$B/imageunzip FRISBEED=$B/frisbeed FRISBEE=$B/frisbee
mc_image a 4 1 || not_ok "the installed imagezip makes an image"
"$IMAGEUNZIP" -q "$T/a.ndz" "$T/a.out"
check "the installed imageunzip restores it byte-identical" \
	sh -c "[ $? = 0 ] && cmp -s '$T/a.src' '$T/a.out'"
# without namespaces the checks above still count
netns_usable || { echo "# multicast part skipped: network namespaces, veth, bridge or nft unavailable (needs root)"; done_testing; }
netns_lan && netns_host srv 1 && netns_host c1 11 && netns_host c2 12 ||
	{ not_ok "namespace LAN"; done_testing; }
mc_client c1 "$T/out1" -T 20 -vv
mc_client c2 "$T/out2" -T 20 -vv
mc_joined c1 c2
mc_server srv "$T/a.ndz" -W 200M -T 30
mc_wait
kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
check "the installed frisbeed multicasts it to two installed frisbee, byte-identical" \
	sh -c "[ \"$(mc_rc c1)\" = 0 ] && [ \"$(mc_rc c2)\" = 0 ] && cmp -s '$T/a.src' '$T/out1' && cmp -s '$T/a.src' '$T/out2'" ||
	cat "$T/c1.log" "$T/srv.log"
done_testing
