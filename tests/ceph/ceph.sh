# A real single-node Ceph for the object-store tests: one mon and one OSD (memstore) on
# 127.0.0.1, radosgw (beast) speaking S3, all under one directory, no system files; run
# in the network namespace NS when given (the test's own), else in ours.
# Sourced. ceph_start DIR [NS RGWADDR]: started, an S3 user made; sets CEPH_S3
# (http://RGWADDR:7480, or 127.0.0.1 and a free port), CEPH_KEY, CEPH_SECRET. ceph_stop:
# every daemon ended (by the pid it was started with), DIR removed. A daemon that does not
# come up: ceph_start says which, with its log's tail, and fails.

ceph_port() {   # a free TCP port on 127.0.0.1
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ceph_fail() {
	echo "ceph: $1" >&2
	[ -n "$2" ] && [ -f "$2" ] && tail -n 15 "$2" >&2
	return 1
}

# ceph_run CMD...: CMD in the cluster's namespace
ceph_run() {
	if [ -n "$CEPH_NS" ]; then ip netns exec "$CEPH_NS" "$@"; else "$@"; fi
}

# ceph_daemon NAME CMD...: CMD in the foreground, in the background, its pid kept
ceph_daemon() {
	_name=$1; shift
	if [ -n "$CEPH_NS" ]; then
		ip netns exec "$CEPH_NS" "$@" -f >>"$CEPH_DIR/log/$_name.out" 2>&1 &
	else
		"$@" -f >>"$CEPH_DIR/log/$_name.out" 2>&1 &
	fi
	echo $! >>"$CEPH_DIR/pids"
}

ceph_start() {
	CEPH_DIR=$1 CEPH_NS=${2:-}
	mkdir -p "$CEPH_DIR/mon" "$CEPH_DIR/osd" "$CEPH_DIR/run" "$CEPH_DIR/log" || return 1
	fsid=$(cat /proc/sys/kernel/random/uuid)
	if [ -n "$CEPH_NS" ]; then
		ceph_run ip link set lo up
		monport=6789 rgwport=7480 rgwaddr=$3
	else
		monport=$(ceph_port) rgwport=$(ceph_port) rgwaddr=127.0.0.1
	fi
	CEPH_CONF=$CEPH_DIR/ceph.conf
	export CEPH_CONF
	cat > "$CEPH_CONF" <<CONF
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$monport
mon initial members = a
public network = 127.0.0.0/8
auth cluster required = none
auth service required = none
auth client required = none
run dir = $CEPH_DIR/run
admin socket = $CEPH_DIR/run/\$name.asok
log file = $CEPH_DIR/log/\$name.log
pid file = $CEPH_DIR/run/\$name.pid
keyring = $CEPH_DIR/keyring
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
mon allow pool size one = true
mon warn on pool no redundancy = false
client mount timeout = 30
ms mon client mode = crc secure
ms client mode = crc secure
ms mon service mode = crc secure
ms mon cluster mode = crc secure
ms service mode = crc secure
ms cluster mode = crc secure
rados mon op timeout = 30
rados osd op timeout = 30
mon max pg per osd = 1000
osd objectstore = memstore
memstore device bytes = 1073741824
osd data = $CEPH_DIR/osd/\$name
mon data = $CEPH_DIR/mon/\$name
osd crush chassis type = 0
osd crush update on start = true
ms bind ipv4 = true
ms bind ipv6 = false
[client.rgw]
rgw frontends = beast endpoint=$rgwaddr:$rgwport
rgw data = $CEPH_DIR/rgw
rgw dns name = 127.0.0.1
CONF
	: > "$CEPH_DIR/keyring"
	monmaptool --create --addv a "[v2:127.0.0.1:$monport]" --fsid "$fsid" "$CEPH_DIR/monmap" >/dev/null ||
		return $(ceph_fail "monmaptool failed")
	ceph-mon --mkfs -i a --monmap "$CEPH_DIR/monmap" >"$CEPH_DIR/log/mkfs.out" 2>&1 ||
		return $(ceph_fail "ceph-mon --mkfs failed" "$CEPH_DIR/log/mkfs.out")
	ceph_daemon mon ceph-mon -i a
	ceph_run timeout 20 ceph -s >/dev/null 2>&1 || return $(ceph_fail "the mon does not answer" "$CEPH_DIR/log/mon.a.log")
	osdid=$(ceph_run timeout 20 ceph osd create) || return $(ceph_fail "ceph osd create failed")
	mkdir -p "$CEPH_DIR/osd/osd.$osdid"
	ceph_run ceph-osd -i "$osdid" --mkfs >"$CEPH_DIR/log/osdmkfs.out" 2>&1 ||
		return $(ceph_fail "ceph-osd --mkfs failed" "$CEPH_DIR/log/osdmkfs.out")
	ceph_daemon osd ceph-osd -i "$osdid"
	n=0
	until ceph_run timeout 10 ceph osd stat 2>/dev/null | grep -q '1 up'; do
		n=$((n + 1)); [ $n -lt 120 ] || return $(ceph_fail "osd.$osdid never came up" "$CEPH_DIR/log/osd.$osdid.log")
		sleep 0.5
	done
	ceph_daemon rgw radosgw -n client.rgw
	CEPH_S3=http://$rgwaddr:$rgwport
	n=0
	until ceph_run curl -s -o /dev/null "$CEPH_S3/"; do
		n=$((n + 1)); [ $n -lt 240 ] || return $(ceph_fail "radosgw never answered on $CEPH_S3" "$CEPH_DIR/log/client.rgw.log")
		sleep 0.5
	done
	CEPH_KEY=ndztestkey$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
	CEPH_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	ceph_run timeout 60 radosgw-admin user create --uid=ndz --display-name=ndz --access-key="$CEPH_KEY" \
		--secret-key="$CEPH_SECRET" >"$CEPH_DIR/log/user.out" 2>&1 ||
		return $(ceph_fail "radosgw-admin user create failed" "$CEPH_DIR/log/user.out")
	return 0
}

ceph_stop() {
	[ -n "${CEPH_DIR:-}" ] && [ -d "$CEPH_DIR" ] || return 0
	_pids=$(cat "$CEPH_DIR/pids" 2>/dev/null)
	# radosgw first, the OSD, the mon last: each by the pid it was started with
	for pid in $(echo "$_pids" | tac); do
		kill "$pid" 2>/dev/null
		n=0
		while kill -0 "$pid" 2>/dev/null && [ $n -lt 50 ]; do sleep 0.1; n=$((n + 1)); done
		kill -9 "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	rm -rf "$CEPH_DIR"
	CEPH_DIR=
}
