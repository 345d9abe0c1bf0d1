# A real single-node Ceph for the object-store tests: one mon, one OSD (memstore),
# radosgw (beast) speaking S3 on 127.0.0.1, all under one directory, no system files.
# Sourced. ceph_start DIR: started, S3 user made; sets CEPH_S3 (http://127.0.0.1:PORT),
# CEPH_KEY, CEPH_SECRET. ceph_stop: every daemon ended (by its pid), DIR removed.
# A daemon that does not come up: ceph_start says which, with its log's tail, and fails.

ceph_port() {   # a free TCP port on 127.0.0.1
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

ceph_fail() {
	echo "ceph: $1" >&2
	[ -n "$2" ] && [ -f "$2" ] && tail -n 15 "$2" >&2
	return 1
}

ceph_start() {
	CEPH_DIR=$1
	mkdir -p "$CEPH_DIR/mon" "$CEPH_DIR/osd" "$CEPH_DIR/run" "$CEPH_DIR/log" || return 1
	fsid=$(cat /proc/sys/kernel/random/uuid)
	monport=$(ceph_port)
	rgwport=$(ceph_port)
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
rgw frontends = beast endpoint=127.0.0.1:$rgwport
rgw data = $CEPH_DIR/rgw
rgw dns name = 127.0.0.1
CONF
	: > "$CEPH_DIR/keyring"
	monmaptool --create --addv a "[v2:127.0.0.1:$monport]" --fsid "$fsid" "$CEPH_DIR/monmap" >/dev/null ||
		return $(ceph_fail "monmaptool failed")
	ceph-mon --mkfs -i a --monmap "$CEPH_DIR/monmap" >"$CEPH_DIR/log/mkfs.out" 2>&1 ||
		return $(ceph_fail "ceph-mon --mkfs failed" "$CEPH_DIR/log/mkfs.out")
	ceph-mon -i a || return $(ceph_fail "ceph-mon did not start" "$CEPH_DIR/log/mon.a.log")
	timeout 10 ceph -s >/dev/null 2>&1 || return $(ceph_fail "the mon does not answer" "$CEPH_DIR/log/mon.a.log")
	osdid=$(timeout 20 ceph osd create) || return $(ceph_fail "ceph osd create failed")
	mkdir -p "$CEPH_DIR/osd/osd.$osdid"
	ceph-osd -i "$osdid" --mkfs >"$CEPH_DIR/log/osdmkfs.out" 2>&1 ||
		return $(ceph_fail "ceph-osd --mkfs failed" "$CEPH_DIR/log/osdmkfs.out")
	ceph-osd -i "$osdid" || return $(ceph_fail "ceph-osd did not start" "$CEPH_DIR/log/osd.$osdid.log")
	n=0
	until timeout 10 ceph osd stat 2>/dev/null | grep -q '1 up'; do
		n=$((n + 1)); [ $n -lt 120 ] || return $(ceph_fail "osd.$osdid never came up" "$CEPH_DIR/log/osd.$osdid.log")
		sleep 0.5
	done
	radosgw -n client.rgw || return $(ceph_fail "radosgw did not start" "$CEPH_DIR/log/client.rgw.log")
	CEPH_S3=http://127.0.0.1:$rgwport
	n=0
	until curl -s -o /dev/null "$CEPH_S3/"; do
		n=$((n + 1)); [ $n -lt 240 ] || return $(ceph_fail "radosgw never answered on $CEPH_S3" "$CEPH_DIR/log/client.rgw.log")
		sleep 0.5
	done
	CEPH_KEY=ndztestkey$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')
	CEPH_SECRET=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
	timeout 60 radosgw-admin user create --uid=ndz --display-name=ndz --access-key="$CEPH_KEY" \
		--secret-key="$CEPH_SECRET" >"$CEPH_DIR/log/user.out" 2>&1 ||
		return $(ceph_fail "radosgw-admin user create failed" "$CEPH_DIR/log/user.out")
	return 0
}

ceph_stop() {
	[ -n "$CEPH_DIR" ] && [ -d "$CEPH_DIR" ] || return 0
	for p in "$CEPH_DIR"/run/*.pid; do
		[ -f "$p" ] || continue
		pid=$(cat "$p")
		kill "$pid" 2>/dev/null
	done
	for p in "$CEPH_DIR"/run/*.pid; do
		[ -f "$p" ] || continue
		pid=$(cat "$p"); n=0
		while kill -0 "$pid" 2>/dev/null && [ $n -lt 50 ]; do sleep 0.2; n=$((n + 1)); done
		kill -9 "$pid" 2>/dev/null
	done
	rm -rf "$CEPH_DIR"
	CEPH_DIR=
}
