#!/bin/sh
# The master's systemd unit: it verifies, rates at most 3.0 in systemd-analyze security,
# and mfrisbeed serves, takes uploads and starts sessions under the same constraints
# where this host can emulate them without systemd as PID 1: an unprivileged user with
# no capabilities and no_new_privs, the file system read-only but for the run and the
# upload directory; under strace, every system call and socket family the master and
# its sessions use is one the unit's filters allow.
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
command -v systemd-analyze >/dev/null || skip_all "systemd-analyze missing (apt-get install systemd)"
MFRISBEED="$NDZ_BIN/mfrisbeed"
UPLOAD="$NDZ_BIN/frisbee-upload"
mkdir -p "$T/u" "$T/man/man5" "$T/man/man8"
sed -e "s|@BINDIR@|$NDZ_BIN|g" -e "s|@SYSCONFDIR@|/etc|g" "$NDZ_TOP/doc/mfrisbeed.service.in" \
	>"$T/u/mfrisbeed.service"
# Documentation= names man pages: verify runs man on them, so ours are on MANPATH
cp "$NDZ_TOP"/doc/*.8 "$T/man/man8/" && cp "$NDZ_TOP"/doc/*.5 "$T/man/man5/"
(cd "$T/u" && MANPATH="$T/man" systemd-analyze verify ./mfrisbeed.service) >"$T/verify" 2>&1
check "systemd-analyze verify accepts the unit" sh -c "[ $? = 0 ] && [ ! -s '$T/verify' ]" ||
	cat "$T/verify"
(cd "$T/u" && systemd-analyze security --offline=yes ./mfrisbeed.service) >"$T/sec" 2>&1
x=$(sed -n 's/.*Overall exposure level for mfrisbeed.service: \([0-9.]*\) .*/\1/p' "$T/sec")
check "systemd-analyze security --offline: exposure $x, at most 3.0" \
	sh -c "[ -n '$x' ] && awk -v x='$x' 'BEGIN { exit !(x <= 3.0) }'"
(cd "$T/u" && systemd-analyze security --offline=yes --threshold=30 ./mfrisbeed.service) \
	>/dev/null 2>&1
check "systemd-analyze security --threshold=30 passes" test $? = 0
check "the unit runs the master as the system user ndz, whom sysusers.d creates" \
	sh -c "grep -q '^User=ndz$' '$T/u/mfrisbeed.service' && grep -q '^u ndz ' '$NDZ_TOP/doc/ndz.sysusers'"
check "the unit reads the configuration in /etc/ndz" \
	grep -q "^ExecStart=$NDZ_BIN/mfrisbeed -c /etc/ndz/mfrisbeed.conf " "$T/u/mfrisbeed.service"
check "the unit makes the upload directory and the lab state of the shipped configuration writable" \
	sh -c "grep -Eq '^StateDirectory=(.* )?ndz/images( |$)' '$T/u/mfrisbeed.service' &&
		grep -Eq '^StateDirectory=(.* )?ndz/lab( |$)' '$T/u/mfrisbeed.service' &&
		grep -q '^lab-state /var/lib/ndz/lab/' '$NDZ_TOP/doc/mfrisbeed.conf' &&
		grep -q '^upload-dir /var/lib/ndz/images' '$NDZ_TOP/doc/mfrisbeed.conf'"

# The emulation: what the unit allows mfrisbeed and its frisbeed children.
# without namespaces the checks above still count
netns_usable || { echo "# emulation part skipped: network namespaces, veth, bridge or nft unavailable (needs root)"; done_testing; }
command -v setpriv >/dev/null && command -v unshare >/dev/null ||
	{ echo "# emulation part skipped: setpriv or unshare missing (util-linux)"; done_testing; }
SRV=10.77.0.1 NOBODY=65534
netns_lan && netns_host srv 1 && netns_host c1 11 && netns_host c2 12 ||
	{ not_ok "namespace LAN"; done_testing; }
mkdir -p "$T/up" "$T/run" "$T/trace"
chown "$NOBODY:$NOBODY" "$T/up" "$T/run" "$T/trace" && chmod 755 "$T"
for n in a b; do mc_image "$n" "$MC_MIB" "$n" || { not_ok "make image $n"; done_testing; }; done
chmod 644 "$T"/*.ndz
cat >"$T/m.conf" <<CONF
pool 239.192.6.0/29
ports 5300-5307
idle-timeout 30
upload-dir $T/up allow 10.77.0.0/24 upload 10.77.0.12
image a $T/a.ndz allow 10.77.0.0/24
http-listen $SRV:8080
CONF
# sandbox HOST CMD...: CMD in namespace HOST as uid/gid 65534 without capabilities,
# / read-only but for the run and upload directories (the unit's User=,
# CapabilityBoundingSet=, NoNewPrivileges=, ProtectSystem=strict and its writable paths,
# ProtectProc=invisible and ProcSubset=pid)
sandbox() {
	_sb=$NETNS_PFX$1; shift
	unshare -m sh -c 'mount --make-rprivate / && mount --bind "$1" "$1" &&
		mount --bind "$2" "$2" && mount --bind "$3" "$3" && mount -o remount,bind,ro / &&
		mount -t proc -o hidepid=invisible,subset=pid proc /proc &&
		shift 3 && exec ip netns exec "$0" setpriv --reuid=65534 --regid=65534 \
			--clear-groups --no-new-privs --inh-caps=-all --bounding-set=-all "$@"' \
		"$_sb" "$T/run" "$T/up" "$T/trace" "$@"
}
sandbox srv sh -c "touch '$T/x'; touch '$T/run/x'" 2>/dev/null
check "the sandbox is real: only the run and upload directories can be written" \
	sh -c "[ ! -e '$T/x' ] && [ -e '$T/run/x' ]"
rm -f "$T/run/x"
# under strace (when there is one), to compare its system calls with the unit's filter
STRACE=""
command -v strace >/dev/null && STRACE="strace -f -qq -o $T/trace/log"
# shellcheck disable=SC2086
sandbox srv $STRACE "$MFRISBEED" -c "$T/m.conf" -r "$T/run" -i eth0 -v 2>"$T/m.log" &
MPID=$!
at_exit "kill $MPID"
wait_until 5 master_listens
( in_ns c1 "$FRISBEE" $MC_RAW -M "$SRV" -I a -T 20 "$T/out1" 2>"$T/c1.log"; echo $? >"$T/c1.rc" ) &
wait $!
check "a client fetches an image from the sandboxed master byte-identical" \
	sh -c "[ \"\$(cat '$T/c1.rc')\" = 0 ] && cmp -s '$T/a.src' '$T/out1'" || cat "$T/c1.log" "$T/m.log"
# its HTTP endpoint (lib/mserve/http) works inside the sandbox
in_ns c1 python3 -c 'import sys, urllib.request as u; sys.stdout.write(u.urlopen("http://10.77.0.1:8080/metrics", timeout=5).read().decode())' >"$T/metrics" 2>&1
check "the sandboxed master's HTTP endpoint answers /metrics" grep -q '^ndz_sessions ' "$T/metrics" || cat "$T/metrics"
# the session this master started (its pid in the run directory's state file)
spid=$(awk 'NR == 1 { print $1 }' "$T/run/sessions" 2>/dev/null)
uid=$(ps -o uid= -p "${spid:-0}" 2>/dev/null | tr -d ' ')
check "the session's frisbeed runs unprivileged too (uid $uid)" [ "$uid" = "$NOBODY" ]
in_ns c2 "$UPLOAD" -w 20 -M "$SRV" -I up1 "$T/b.ndz" 2>"$T/up.log"
rc=$?
check "an upload into the writable upload directory is stored" \
	sh -c "[ $rc = 0 ] && cmp -s '$T/b.ndz' '$T/up/up1.ndz'" || cat "$T/up.log" "$T/m.log"
( in_ns c1 "$FRISBEE" $MC_RAW -M "$SRV" -I up1 -T 20 "$T/out2" 2>"$T/c1b.log"; echo $? >"$T/c1b.rc" ) &
wait $!
check "the uploaded image is served by a new session" \
	sh -c "[ \"\$(cat '$T/c1b.rc')\" = 0 ] && cmp -s '$T/b.src' '$T/out2'" || cat "$T/c1b.log"
# a restarted master (the unit's Restart=, or systemctl restart) adopts the sessions
mpid=""
for p in $(ip netns pids "${NETNS_PFX}srv"); do
	[ "$(cat /proc/"$p"/comm 2>/dev/null)" = mfrisbeed ] && mpid=$p
done
kill -TERM "$mpid" 2>/dev/null
for _ in $(seq 50); do kill -0 "$mpid" 2>/dev/null || break; sleep 0.1; done
sandbox srv "$MFRISBEED" -c "$T/m.conf" -r "$T/run" -i eth0 -v 2>"$T/m2.log" &
M2PID=$!
wait_until 5 master_listens
in_ns c1 "$MFRISBEED" --status "$SRV" >"$T/st.json" 2>&1
check "a master restarted in the same sandbox adopts the running sessions" \
	grep -q '"adopted": true' "$T/st.json" || cat "$T/st.json" "$T/m2.log"
# stop the masters, the sessions and strace (which then writes out all it saw)
ip netns pids "${NETNS_PFX}srv" | xargs -r kill -TERM
wait "$MPID" "$M2PID"
if [ -n "$STRACE" ]; then
	# what the unit's SystemCallFilter= lets through: @system-service minus the groups
	# it denies, nested groups expanded
	expand() {
		for _g in "$@"; do
			case $_g in
			@*) expand $(systemd-analyze syscall-filter "$_g" |
				sed -n 's/^    \([@a-z0-9_-]*\)$/\1/p') ;;
			*) echo "$_g" ;;
			esac
		done
	}
	# shellcheck disable=SC2046
	expand $(sed -n 's/^SystemCallFilter=~//p' "$T/u/mfrisbeed.service") | sort -u >"$T/deny"
	# shellcheck disable=SC2046
	expand $(sed -n 's/^SystemCallFilter=\([^~].*\)/\1/p' "$T/u/mfrisbeed.service") |
		sort -u | comm -23 - "$T/deny" >"$T/allow"
	sed -n 's/^[0-9]* *\([a-z0-9_]*\)(.*/\1/p' "$T/trace/log" | sort -u >"$T/used"
	out=$(comm -23 "$T/used" "$T/allow" | tr '\n' ' ')
	check "the master and its sessions made $(wc -l <"$T/used") kinds of system call, all allowed by SystemCallFilter=${out:+; not: $out}" \
		sh -c "[ -s '$T/used' ] && [ -z '$out' ]"
	fams=$(sed -n 's/.* socket(\(AF_[A-Z0-9]*\),.*/\1/p' "$T/trace/log" | sort -u | tr '\n' ' ')
	check "their sockets are of the families RestrictAddressFamilies= allows ($fams)" \
		sh -c "[ -n '$fams' ] && for f in $fams; do grep -q \"^RestrictAddressFamilies=.*\$f\" '$T/u/mfrisbeed.service' || exit 1; done"
fi
done_testing
