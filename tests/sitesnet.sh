# The network of the sites tests and benchmark (sourced after tests/netns.sh): a parent
# network and site networks joined by a router namespace that forwards unicast and
# drops multicast; and the masters the sites tests run on it (site_conf, sites_start,
# sites_stop), their clients (fclient) and what they share. Everything is removed at
# exit (netns_cleanup, the masters by their pids).
# shellcheck shell=sh
at_exit netns_cleanup
PARENT=10.78.0.1
MFRISBEED=${MFRISBEED:-$NDZ_BIN/mfrisbeed}

# ns NAME: a namespace of ours
ns() {
	ip netns add "$NETNS_PFX$1" || return 1
	NETNS_LIST="$NETNS_PFX$1 $NETNS_LIST"
	ip -n "$NETNS_PFX$1" link set lo up
}
_v=0
# wire A IFA ADDRA B IFB [ADDRB]: a veth between namespaces A and B (B's end unaddressed
# when ADDRB is empty: a bridge port)
wire() {
	_v=$((_v + 1))
	ip link add "s$$v$_v" netns "$NETNS_PFX$1" type veth peer name "t$$v$_v" \
		netns "$NETNS_PFX$4" || return 1
	ip -n "$NETNS_PFX$1" link set "s$$v$_v" name "$2" &&
		ip -n "$NETNS_PFX$4" link set "t$$v$_v" name "$5" &&
		ip -n "$NETNS_PFX$1" addr add "$3" dev "$2" && ip -n "$NETNS_PFX$1" link set "$2" up &&
		ip -n "$NETNS_PFX$4" link set "$5" up || return 1
	if [ -n "${6:-}" ]; then
		ip -n "$NETNS_PFX$4" addr add "$6" dev "$5" || return 1
	else
		ip -n "$NETNS_PFX$4" link set "$5" master br0
	fi
}
# host NAME NET N: host 10.78.NET.N on site NET's bridge, routed by 10.78.NET.254
host() {
	ns "$1" && wire "$1" eth0 "10.78.$2.$3/24" "br$2" "p$3" &&
		ip -n "$NETNS_PFX$1" route add default via "10.78.$2.254" &&
		ip -n "$NETNS_PFX$1" route add 224.0.0.0/4 dev eth0
}
# sites_net N: the router rt, the parent par (10.78.0.1) and N sites, each a bridge
# with its master mS (10.78.S.1) and clients cS1..cS3 (10.78.S.11-13)
sites_net() {
	ns rt && ns par || return 1
	ip netns exec "${NETNS_PFX}rt" sysctl -qw net.ipv4.ip_forward=1 || return 1
	# the router forwards unicast only: multicast stays inside each site
	ip netns exec "${NETNS_PFX}rt" nft -f - <<NFT || return 1
table inet nomc {
	chain forward {
		type filter hook forward priority 0; policy accept;
		ip daddr 224.0.0.0/4 drop
	}
}
NFT
	wire par eth0 "$PARENT/24" rt eth0 10.78.0.254/24 &&
		ip -n "${NETNS_PFX}par" route add default via 10.78.0.254 || return 1
	for s in $(seq "$1"); do
		ns "br$s" && ip -n "${NETNS_PFX}br$s" link add br0 type bridge mcast_snooping 0 &&
			ip -n "${NETNS_PFX}br$s" link set br0 up &&
			wire rt "eth$s" "10.78.$s.254/24" "br$s" "r$s" &&
			host "m$s" "$s" 1 || return 1
		for c in 1 2 3; do
			host "c$s$c" "$s" "1$c" || return 1
		done
	done
}

# new_chunks OLD NEW: the chunks of NEW's content index whose entry (first, last, regions,
# digest; pieces when both have them) no entry of OLD has (doc/FORMAT.md, "The content
# index"), one number a line
new_chunks() {
	python3 - "$1" "$2" <<'PY'
import struct, sys
def entries(path):
    b = open(path, 'rb').read()
    ver, = struct.unpack_from('<H', b, 8)
    n, r = struct.unpack_from('<II', b, 40)
    p = struct.unpack_from('<I', b, 56)[0] if ver == 2 else 0
    out, off = [], 64
    for i in range(n):
        first, last, cnt = struct.unpack_from('<QQI', b, off)
        dig = b[off + 24:off + 56]
        regs = b[off + 56:off + 56 + 12 * cnt]
        out.append([first, last, regs, dig, []])
        off += 56 + 12 * cnt
    for k in range(p):
        c, = struct.unpack_from('<I', b, off)
        out[c][4].append(b[off + 4:off + 24] + b[off + 32:off + 64])
        off += 64
    return out
def same(a, b):
    return a[:4] == b[:4] and (not a[4] or not b[4] or a[4] == b[4])
old, new = entries(sys.argv[1]), entries(sys.argv[2])
for i, e in enumerate(new):
    if not any(same(o, e) for o in old):
        print(i)
PY
}

# site_conf S UPSTREAM [LINES]: $T/siteS.conf, the configuration of site S's master
# (10.78.S.1): its pool 239.192.(SITE_POOL + S).0/29 (SITE_POOL: 40), its cache $T/cacheS,
# also the imagedir its clients (10.78.S.0/24) get images from and may make it fetch,
# site-name siteS; then UPSTREAM (a parent line, store lines or both) and LINES
site_conf() {
	mkdir -p "$T/cache$1" "$T/run$1" || return 1
	cat >"$T/site$1.conf" <<CONF
pool 239.192.$(( ${SITE_POOL:-40} + $1 )).0/29
ports 5000-5007
idle-timeout 2
rate $MC_RATE
imagedir $T/cache$1 allow 10.78.$1.0/24
site-cache $T/cache$1
site-allow 10.78.$1.0/24
site-name site$1
$2
${3:-}
CONF
}

# sites_master NS CONF RUN: mfrisbeed in namespace NS (its options SITES_V, -v unless
# set), its log $T/NS.log, its pid in MPID_NS, killed at exit; 0 once it listens
sites_master() {
	mkdir -p "$3" || return 1
	# shellcheck disable=SC2086
	ip netns exec "$NETNS_PFX$1" "$MFRISBEED" -c "$2" -r "$3" ${SITES_V:--v} --log-time \
		2>>"$T/$1.log" &
	eval "MPID_$1=$!"
	at_exit "kill \$MPID_$1 2>/dev/null"
	wait_until 5 sh -c "ip netns exec '$NETNS_PFX$1' ss -lun | grep -q ':3563 '"
}

# sites_start N: the parent's master (par, $T/par.conf, $T/run0) and site masters m1..mN
# ($T/siteS.conf, $T/runS); the test ends there when one does not listen
sites_start() {
	SITES_N=$1
	sites_master par "$T/par.conf" "$T/run0" ||
		{ not_ok "the parent's master listens: $(cat "$T/par.log")"; done_testing; }
	for _s in $(seq "$1"); do
		sites_master "m$_s" "$T/site$_s.conf" "$T/run$_s" ||
			{ not_ok "site $_s's master listens: $(cat "$T/m$_s.log")"; done_testing; }
	done
}

# sites_stop: SIGTERM to the masters sites_start started; checks that each stops with 0
# and that no sanitizer report is in their logs
sites_stop() {
	# shellcheck disable=SC2154 # MPID_*: set by sites_master's eval
	_pids=$MPID_par _logs="'$T/par.log'" _rcs='' _want=0
	for _s in $(seq "$SITES_N"); do
		eval "_pids=\"\$_pids \$MPID_m$_s\""
		_logs="$_logs '$T/m$_s.log'"
		_want="${_want}0"
	done
	# shellcheck disable=SC2086
	kill -TERM $_pids
	for _p in $_pids; do
		wait "$_p"
		_rcs="$_rcs$?"
	done
	check "the masters stop on SIGTERM ($_rcs)" [ "$_rcs" = "$_want" ]
	check "no sanitizer report in the masters' logs" \
		sh -c "! grep -l 'Sanitizer\|runtime error' $_logs"
}

# fclient HOST SITE IMAGE TARGET [SECONDS]: frisbee -M site SITE's master for IMAGE, in
# the background (mc_wait waits); its status in $T/HOST.rc, its messages in $T/HOST.log
fclient() {
	( in_ns "$1" "$FRISBEE" -M "10.78.$2.1" -I "$3" -T "${5:-60}" "$4" 2>>"$T/$1.log"
	  echo $? >"$T/$1.rc" ) &
	MC_PIDS="$MC_PIDS $!"
}

# flip FILE OFFSET: the byte at OFFSET made another (its complement)
flip() {
	_b=$(dd if="$1" bs=1 skip="$2" count=1 2>/dev/null | od -An -tu1 | tr -d ' ')
	printf "\\$(printf %03o $((255 - _b)))" | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null
}

# served SITE IMAGE [FROM]: the chunks of IMAGE the parent served site SITE, from line
# FROM of its log on (1), one a line, sorted
served() {
	tail -n +"${3:-1}" "$T/par.log" |
		sed -n "s/.*site 10\.78\.$1\.1: $2 chunks \([0-9]*\)-\([0-9]*\): [0-9]* bytes served/\1 \2/p" |
		while read -r _f _l; do seq "$_f" "$_l"; done | sort -n
}

# identical SRC HOST:TARGET...: how many of the clients HOST ended with 0 and a TARGET
# byte-identical to SRC
identical() {
	_src=$1 _good=0
	shift
	for _ht; do
		[ "$(mc_rc "${_ht%%:*}")" = 0 ] && mc_same "$_src" "${_ht#*:}" && _good=$((_good + 1))
	done
	echo "$_good"
}

# changed_chunks OLD NEW: new_chunks of the two indexes into $T/changed, their count
# into nchanged; the test ends there when they cannot be read
changed_chunks() {
	new_chunks "$1" "$2" >"$T/changed" || { not_ok "read the indexes"; done_testing; }
	# shellcheck disable=SC2034 # for the test that calls it
	nchanged=$(wc -l <"$T/changed")
}

# sites_cut S: the router resets site S's connections to the parent's control port
# (sites_uncut: no more)
sites_cut() {
	ip netns exec "${NETNS_PFX}rt" nft -f - <<NFT
table inet cut {
	chain forward {
		type filter hook forward priority -1; policy accept;
		ip saddr 10.78.$1.0/24 ip daddr $PARENT tcp dport 3563 reject with tcp reset
	}
}
NFT
}
sites_uncut() { ip netns exec "${NETNS_PFX}rt" nft delete table inet cut; }
