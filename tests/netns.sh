# A private LAN of network namespaces for the multicast tests; sourced after tests/lib.sh.
# A bridge in a namespace of its own; each host (server, clients, a rogue) is a
# namespace joined to it by a veth pair, with an address in 10.77.0.0/24 and the
# multicast route on its veth. Everything is removed at exit, even on failure.
# shellcheck shell=sh

NETNS_PFX="ndz$$-"
NETNS_BR="${NETNS_PFX}br"
NETNS_LIST=""
# a group and port of our own, so concurrent runs never meet
MC_GROUP="239.$(( ($$ >> 16) % 200 + 20 )).$(( ($$ >> 8) % 256 )).$(( $$ % 250 + 1 ))"
MC_PORT=$(( 3564 + $$ % 20000 ))

netns_cleanup() {
	for _ns in $NETNS_LIST; do
		ip netns pids "$_ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "$_ns" 2>/dev/null
	done
	NETNS_LIST=""
}

# netns_usable: 0 when namespaces, veths, bridges and nftables work here.
netns_usable() {
	[ "$(id -u)" = 0 ] || return 1
	command -v ip >/dev/null && command -v nft >/dev/null || return 1
	ip netns add "${NETNS_PFX}probe" 2>/dev/null || return 1
	_ok=0
	ip netns exec "${NETNS_PFX}probe" nft add table inet probe 2>/dev/null &&
		ip -n "${NETNS_PFX}probe" link add probe0 type bridge 2>/dev/null || _ok=1
	ip netns del "${NETNS_PFX}probe"
	return $_ok
}

# netns_require [CMD...]: skip the whole test unless namespaces work here and each
# CMD is installed.
netns_require() {
	netns_usable || skip_all "network namespaces, veth, bridge or nft unavailable (needs root)"
	for _cmd in "$@"; do
		command -v "$_cmd" >/dev/null || skip_all "$_cmd missing"
	done
}

# netns_lan: create the bridge namespace. Call once before netns_host.
netns_lan() {
	at_exit netns_cleanup
	ip netns add "$NETNS_BR" || return 1
	NETNS_LIST="$NETNS_LIST $NETNS_BR"
	ip -n "$NETNS_BR" link add br0 type bridge mcast_snooping 0 &&
		ip -n "$NETNS_BR" link set br0 up
}

_netns_n=0
# netns_host NAME ADDR: a namespace ${NETNS_PFX}NAME on the LAN with address 10.77.0.ADDR.
netns_host() {
	_ns="$NETNS_PFX$1"
	_netns_n=$((_netns_n + 1))
	ip netns add "$_ns" || return 1
	NETNS_LIST="$_ns $NETNS_LIST"
	eval "_port_$1=p$_netns_n"
	ip link add "ndz$$h$_netns_n" netns "$_ns" type veth peer name "p$_netns_n" \
		netns "$NETNS_BR" || return 1
	ip -n "$_ns" link set "ndz$$h$_netns_n" name eth0 &&
		ip -n "$NETNS_BR" link set "p$_netns_n" master br0 up &&
		ip -n "$_ns" link set lo up &&
		ip -n "$_ns" addr add "10.77.0.$2/24" brd + dev eth0 &&
		ip -n "$_ns" link set eth0 up &&
		ip -n "$_ns" route add 224.0.0.0/4 dev eth0 || return 1
	# Cut a sender's GSO batch into datagrams here, as a NIC would, so a loss rule drops
	# single datagrams, not whole batches (best effort: old kernels lack the setting).
	ip -n "$_ns" link set dev eth0 gso_max_segs 1 2>/dev/null || true
}

# netns_lab: the lab tests' LAN: the master srv (SRV=10.77.0.1) and the nodes n1
# (10.77.0.11) and n2 (10.77.0.12); the test ends when the LAN cannot be made.
netns_lab() {
	SRV=10.77.0.1
	netns_lan && netns_host srv 1 && netns_host n1 11 && netns_host n2 12 ||
		{ not_ok "namespace LAN"; done_testing; }
}

# netns_clients N: the LAN with the server srv (10.77.0.1) and clients c1..cN
# (10.77.0.11 on); the test ends when the LAN or the server cannot be made.
netns_clients() {
	netns_lan && netns_host srv 1 || { not_ok "namespace LAN"; done_testing; }
	_ci=1
	while [ "$_ci" -le "$1" ]; do
		netns_host "c$_ci" $((10 + _ci)) || not_ok "host c$_ci"
		_ci=$((_ci + 1))
	done
}

# in_ns NAME CMD...: run CMD inside host NAME.
in_ns() { _nsn="$NETNS_PFX$1"; shift; ip netns exec "$_nsn" "$@"; }

# master_listens: 0 when host srv listens on TCP port 3563 (mfrisbeed's, for uploads)
master_listens() { in_ns srv ss -ltn 2>/dev/null | grep -q ":3563 "; }

# rogue_start LOG CMD ARGS...: CMD ARGS on host rogue in the background (its pid in
# ROGUE_PID), output to LOG; it has half a second to start
rogue_start() {
	_log=$1
	shift
	in_ns rogue "$@" >"$_log" 2>&1 &
	ROGUE_PID=$!
	sleep 0.5
}

# rogue_end: the clients, then the rogue, then the server have ended
rogue_end() {
	mc_wait
	wait "$ROGUE_PID"
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
}

# netns_loss NAME PERCENT: drop PERCENT% (may be fractional, e.g. 0.5) of UDP arriving at NAME.
netns_loss() {
	_per_mille=$(awk -v p="$2" 'BEGIN { printf "%d", p * 10 }')
	in_ns "$1" nft -f - <<NFT
table inet ndzloss {
	chain input {
		type filter hook input priority 0; policy accept;
		meta l4proto udp numgen random mod 1000 < $_per_mille drop
	}
}
NFT
}

# netns_noloss NAME: remove the loss rules of NAME.
netns_noloss() { in_ns "$1" nft delete table inet ndzloss 2>/dev/null; true; }

# netns_shape NAME RATE: the LAN delivers to NAME at most RATE (tc syntax, e.g. 20mbit).
netns_shape() {
	eval "_p=\$_port_$1"
	ip netns exec "$NETNS_BR" tc qdisc replace dev "$_p" root tbf rate "$2" burst 32k \
		latency 50ms
}

# netns_mtu NAME MTU [PORT_MTU]: host NAME's interface takes MTU, its port on the
# bridge PORT_MTU (default the same): a smaller PORT_MTU is a link on the way that
# drops larger frames (the bridge forwards nothing past a port's MTU).
netns_mtu() {
	eval "_p=\$_port_$1"
	ip -n "$NETNS_BR" link set dev "$_p" mtu "${3:-$2}" &&
		in_ns "$1" ip link set dev eth0 mtu "$2"
}

# netns_nofrag NAME: drop IP fragments arriving at NAME, before reassembly: with a
# smaller port MTU (netns_mtu) a link on the way that drops large datagrams, as a
# switch does with jumbo frames (this bridge would cut them into fragments instead).
netns_nofrag() {
	in_ns "$1" nft -f - <<NFT
table ip ndznofrag {
	chain pre {
		type filter hook prerouting priority -500; policy accept;
		ip frag-off & 0x3fff != 0 drop
	}
}
NFT
}

# netns_frag NAME: remove the rule of netns_nofrag.
netns_frag() { in_ns "$1" nft delete table ip ndznofrag 2>/dev/null; true; }

# netns_gro NAME on|off: generic receive offload on host NAME's interface (needs
# ethtool; 1 when it cannot be set).
netns_gro() {
	command -v ethtool >/dev/null || return 1
	in_ns "$1" ethtool -K eth0 gro "$2" >/dev/null 2>&1
}

# netns_tx_bytes NAME: bytes sent by NAME's interface so far.
netns_tx_bytes() { in_ns "$1" cat /sys/class/net/eth0/statistics/tx_bytes; }
netns_rx_packets() { in_ns "$1" cat /sys/class/net/eth0/statistics/rx_packets; }

# ---- multicast test helpers ----
MKFAKEIMG="${NDZ_BUILD:-}/tests/helpers/mkfakeimg"
MCROGUE="${NDZ_BUILD:-}/tests/helpers/mcrogue"
MC_RAW=""

# mc_image NAME MIB SEED: make an image $T/NAME.ndz of about MIB MiB whose restored
# content is $T/NAME.src. With imagezip built, a real image of compressible and random
# data; otherwise a fake image received with --raw (then NAME.src is the image itself).
mc_image() {
	src="$T/$1.src" img="$T/$1.ndz"
	if [ -x "$IMAGEZIP" ] && [ -z "${MC_FORCE_RAW:-}" ]; then
		# half random, half text-like: each chunk is compressed to something real
		head -c $(( $2 * 1024 * 512 )) /dev/urandom >"$src.r" &&
			yes "ndz multicast test $3 line" | head -c $(( $2 * 1024 * 1024 )) >"$src.t" &&
			cat "$src.r" "$src.t" "$src.r" >"$src" && rm -f "$src.r" "$src.t" &&
			"$IMAGEZIP" -q -r ${MC_ZIP_OPTS:-} "$src" "$img"
	else
		MC_RAW="--raw"
		"$MKFAKEIMG" "$img" "$2" "$3" && ln -sf "$img" "$src"
	fi
}

# mc_same SRC TARGET: the target holds exactly the source's bytes.
mc_same() { cmp -s "$1" "$2"; }

# NDZ_MC_NOREPAIR=1: every server and client of the mc_* tests runs --no-repair, so
# the suite also covers the protocol without repair blocks (tests/cli/mc_norepair.sh).
MC_NOREPAIR=""
[ "${NDZ_MC_NOREPAIR:-0}" = 1 ] && MC_NOREPAIR=--no-repair

# mc_server NAME IMAGE [OPTIONS...]: start frisbeed in host NAME; sets MC_SRV_PID.
mc_server() {
	_h=$1 _i=$2; shift 2
	# ip netns exec execs the program, so $! is frisbeed itself
	# shellcheck disable=SC2086
	ip netns exec "$NETNS_PFX$_h" "$FRISBEED" -m "$MC_GROUP" -p "$MC_PORT" $MC_NOREPAIR "$@" "$_i" \
		2>>"$T/$_h.log" &
	MC_SRV_PID=$!
	# wait until it listens (its socket is bound to the group)
	for _k in 1 2 3 4 5 6 7 8 9 10; do
		in_ns "$_h" ss -lun 2>/dev/null | grep -q ":$MC_PORT " && return 0
		sleep 0.1
	done
	return 0
}

# mc_client NAME TARGET [OPTIONS...]: start frisbee in host NAME in the background;
# its pid is appended to MC_PIDS, its exit status goes to $T/NAME.rc.
MC_PIDS=""
mc_client() {
	_h=$1 _t=$2; shift 2
	# shellcheck disable=SC2086
	( in_ns "$_h" "$FRISBEE" $MC_RAW $MC_NOREPAIR -m "$MC_GROUP" -p "$MC_PORT" "$@" "$_t" \
		2>>"$T/$_h.log"; echo $? >"$T/$_h.rc" ) &
	MC_PIDS="$MC_PIDS $!"
}

# mc_joined NAME...: wait (up to 10 s) until each client NAME, started with -vv, has sent
# a JOIN: it is then listening, and the server's announcement will reach it.
mc_joined() {
	for _h in "$@"; do
		_k=0
		while ! grep -q 'join sent' "$T/$_h.log" 2>/dev/null && [ $_k -lt 100 ]; do
			sleep 0.1; _k=$((_k + 1))
		done
	done
}

# mc_wait: wait for every client started so far.
mc_wait() { for _p in $MC_PIDS; do wait "$_p"; done; MC_PIDS=""; }

# mc_rc NAME: the exit status of client NAME (or "none").
mc_rc() { cat "$T/$1.rc" 2>/dev/null || echo none; }

# json_num FILE KEY: a number from frisbeed's --stats-json output.
json_num() { sed -n "s/.*\"$2\": \([0-9.]*\).*/\1/p" "$1"; }

# mc_scale: sizes and rates shrink under the sanitizers, which are several times slower.
if [ "${NDZ_SANITIZED:-0}" = 1 ]; then MC_MIB=6 MC_RATE=150M; else MC_MIB=12 MC_RATE=300M; fi

# mc_chunks_py: write $T/chunks.py; "python3 $T/chunks.py INDEX A B" prints the chunks
# whose region bytes (clipped to the source size) differ between files A and B (a short
# read differs), one a line: our own reader of the index (doc/FORMAT.md).
mc_chunks_py() {
	cat >"$T/chunks.py" <<'EOF'
import struct, sys
ix = open(sys.argv[1], "rb").read()
n, r, src = struct.unpack_from("<IIQ", ix, 40)
a, b = open(sys.argv[2], "rb"), open(sys.argv[3], "rb")
off = 64
for i in range(n):
    first, last, k = struct.unpack_from("<QQI", ix, off)
    off += 56
    same = True
    for j in range(k):
        start, count = struct.unpack_from("<QI", ix, off)
        off += 12
        lo, hi = start * 512, min((start + count) * 512, src)
        if lo < hi:
            a.seek(lo); b.seek(lo)
            if a.read(hi - lo) != b.read(hi - lo):
                same = False
    if not same:
        print(i)
EOF
}

# frisbee_pid TARGET: the pid of the frisbee writing TARGET (empty when none). pgrep
# picks the candidates: a loop over every /proc entry in the shell took seconds on a
# busy machine with many processes, and the transfer a test meant to interrupt was
# over by then.
frisbee_pid() {
	_fx=$(readlink -f "$FRISBEE")
	for _p in $(pgrep -f -- " $1\$"); do
		[ "$(readlink "/proc/$_p/exe" 2>/dev/null)" = "$_fx" ] &&
			tr '\0' ' ' <"/proc/$_p/cmdline" 2>/dev/null | grep -q " $1 \$" &&
			{ echo "$_p"; return 0; }
	done
	return 1
}

# strace_release PID: end at once the hold of a system call that "strace -D ... -e
# inject=CALL:delay_enter=..." keeps process PID in: its tracer (strace -D: not PID's
# parent, so PID lives on) killed, the kernel lets the call go on. A test holds a call
# for as long as a loaded machine may need and releases it when done, not waiting the
# hold out.
strace_release() {
	_tp=$(sed -n 's/^TracerPid:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null)
	[ -n "$_tp" ] && [ "$_tp" != 0 ] &&
		[ "$(basename "$(readlink "/proc/$_tp/exe" 2>/dev/null)")" = strace ] &&
		kill -KILL "$_tp"
}

# netns_gro_path NAME on|off: GRO that coalesces on host NAME: its interface's GRO (as
# netns_gro) and, when on, TCP segmentation offload off on its port of the bridge. A
# veth hands a frame to the receiving side's NAPI (where GRO runs) only when the sending
# side has no TSO, or the frame still belongs to a local socket (not so once the bridge
# forwarded it); otherwise every frame is delivered alone, GRO on or not (kernel 6.18).
netns_gro_path() {
	netns_gro "$1" "$2" || return 1
	eval "_p=\$_port_$1"
	_tso=on; [ "$2" = on ] && _tso=off
	ip netns exec "$NETNS_BR" ethtool -K "$_p" tso "$_tso" >/dev/null 2>&1
}
