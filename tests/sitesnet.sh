# The network of the sites tests and benchmark (sourced after tests/netns.sh): a parent
# network and site networks joined by a router namespace that forwards unicast and
# drops multicast. Everything is removed at exit (netns_cleanup).
# shellcheck shell=sh
at_exit netns_cleanup
PARENT=10.78.0.1

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
