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
	for ns in $NETNS_LIST; do
		ip netns pids "$ns" 2>/dev/null | xargs -r kill -9 2>/dev/null
		ip netns del "$ns" 2>/dev/null
	done
	NETNS_LIST=""
}

# netns_usable: 0 when namespaces, veths, bridges and nftables work here.
netns_usable() {
	[ "$(id -u)" = 0 ] || return 1
	command -v ip >/dev/null && command -v nft >/dev/null || return 1
	ip netns add "${NETNS_PFX}probe" 2>/dev/null || return 1
	ok=0
	ip netns exec "${NETNS_PFX}probe" nft add table inet probe 2>/dev/null &&
		ip -n "${NETNS_PFX}probe" link add probe0 type bridge 2>/dev/null || ok=1
	ip netns del "${NETNS_PFX}probe"
	return $ok
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
	ns="$NETNS_PFX$1"
	_netns_n=$((_netns_n + 1))
	ip netns add "$ns" || return 1
	NETNS_LIST="$ns $NETNS_LIST"
	ip link add "ndz$$h$_netns_n" netns "$ns" type veth peer name "p$_netns_n" \
		netns "$NETNS_BR" || return 1
	ip -n "$ns" link set "ndz$$h$_netns_n" name eth0 &&
		ip -n "$NETNS_BR" link set "p$_netns_n" master br0 up &&
		ip -n "$ns" link set lo up &&
		ip -n "$ns" addr add "10.77.0.$2/24" brd + dev eth0 &&
		ip -n "$ns" link set eth0 up &&
		ip -n "$ns" route add 224.0.0.0/4 dev eth0
}

# in_ns NAME CMD...: run CMD inside host NAME.
in_ns() { n="$NETNS_PFX$1"; shift; ip netns exec "$n" "$@"; }

# netns_loss NAME PERCENT: drop PERCENT% (may be fractional, e.g. 0.5) of UDP arriving at NAME.
netns_loss() {
	per_mille=$(awk -v p="$2" 'BEGIN { printf "%d", p * 10 }')
	in_ns "$1" nft -f - <<NFT
table inet ndzloss {
	chain input {
		type filter hook input priority 0; policy accept;
		meta l4proto udp numgen random mod 1000 < $per_mille drop
	}
}
NFT
}

# netns_noloss NAME: remove the loss rules of NAME.
netns_noloss() { in_ns "$1" nft delete table inet ndzloss 2>/dev/null; true; }

# netns_tx_bytes NAME: bytes sent by NAME's interface so far.
netns_tx_bytes() { in_ns "$1" cat /sys/class/net/eth0/statistics/tx_bytes; }
netns_rx_packets() { in_ns "$1" cat /sys/class/net/eth0/statistics/rx_packets; }
