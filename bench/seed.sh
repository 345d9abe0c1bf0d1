#!/bin/sh
# Benchmark of seeded reloads (issue 23): an ext4 file system in a file (BENCH_DISK_MB, 2 GiB)
# filled with real files of /usr (BENCH_FILL bytes, 1.2 GB) through a loop mount, imaged with
# imagezip (which writes IMAGE.index), restored with imageunzip ("base"), then copies of it
# each changed through a loop mount by BENCH_PCT (2) % of the used bytes (a third of it files
# rewritten in place, a third deleted, a third added), a different change per client.
# Measures, medians of REPS runs, the page cache dropped before every timed run:
#  1. reload with frisbee --seed of client 1's changed disk vs a full reload (frisbee without
#     --seed), frisbeed -W BENCH_RATE (100M), one client, in a namespace LAN;
#  2. server bytes (its interface) for BENCH_CLIENTS (8) clients with different changes, all
#     --seed, vs the chunks they lack together (found by bench/seed.py comparing each changed
#     disk with base over the index's regions, byte by byte: independent of the digests);
#  3. imageunzip --seed onto client 1's changed disk vs casync extract --seed of the same data
#     (casync make of base; extract into a new file, client 1's changed disk as its --seed:
#     casync cannot write onto its own seed, "Stale file handle"):
#     time, and bytes read from the source (read syscalls on the image and its index, or on
#     the chunk store and the .caibx, counted by strace -y in one extra run of each);
#  4. CPU s/GiB of imagekey verify --target (the seed scan) on base; a full reload onto a
#     disk of zeros (every chunk differs) with and without --seed, frisbee and imageunzip;
#  5. imageunzip --verify vs imageunzip, onto the same allocated file.
# Usage: bench/seed.sh BUILD [REPS]   (root; writes the figures to BENCH_OUT, default
# bench/seed-results.txt; scratch in BENCH_DIR, default /var/tmp; BENCH_ONLY=multi: the set-up
# and the N-client part only; BENCH_ONLY=local: no multicast, only 3 to 5 with a plain
# restore onto client 1's disk beside them and imageunzip -v's count of pieces; BENCH_ONLY=wire:
# the set-up, 1 (full and --seed, client 1) and 2 only, with the blocks of the pieces each
# client lacks, and their union, found by bench/seed.py pieces from the disks' bytes).
# BENCH_OLD=DIR (a build directory: DIR/bin/frisbee, DIR/bin/frisbeed): the N-client part runs
# with those too, in turn with BUILD's in each repetition, and its rows come side by side.
set -u
. "$(dirname "$0")/netbench.sh"
IMAGEKEY="$NDZ_BIN/imagekey"
DISK_MB=${BENCH_DISK_MB:-2048}
FILL=${BENCH_FILL:-1200000000}
PCT=${BENCH_PCT:-2}
NCL=${BENCH_CLIENTS:-8}
[ "${BENCH_ONLY:-}" = local ] && NCL=1
RATE=${BENCH_RATE:-100M}
OUTF=${BENCH_OUT:-$NDZ_TOP/bench/seed-results.txt}
PY="python3 $NDZ_TOP/bench/seed.py"
case ${BENCH_ONLY:-} in wire|multi) ;; *) false ;; esac || command -v casync >/dev/null ||
	{ echo "bench: needs casync (apt-get install casync)" >&2; exit 1; }
command -v strace >/dev/null || { echo "bench: needs strace" >&2; exit 1; }
D=$(mktemp -d "${BENCH_DIR:-/var/tmp}/ndz-seed.XXXXXX")
at_exit "umount $D/mnt 2>/dev/null; rm -rf $D"
mkdir "$D/mnt"
: >"$OUTF"
say() { echo "$*" | tee -a "$OUTF"; }
die() { echo "bench: $*" >&2; exit 1; }
drop() { sync; echo 3 >/proc/sys/vm/drop_caches; }
now() { date +%s.%N; }
med() { median <"$D/$1"; }
ratio() { printf '%.3f' "$(echo "$1 / $2" | bc -l)"; }
t0all=$(now)

netns_lan && netns_host srv 1 || exit 1
i=1; while [ $i -le "$NCL" ]; do netns_host "c$i" $((10 + i)) || exit 1; i=$((i + 1)); done

# mnt_do IMG CMD...: run CMD with IMG's file system mounted on $D/mnt, then unmount it
# and detach the loop device before returning (so the file holds a clean file system)
mnt_do() {
	_img=$1; shift
	_dev=$(losetup -f --show "$_img") || return 1
	mount "$_dev" "$D/mnt" || { losetup -d "$_dev"; return 1; }
	"$@"; _rc=$?
	umount "$D/mnt"; losetup -d "$_dev"; sync
	return $_rc
}
used_bytes() { df -B1 --output=used "$D/mnt" | tail -1; }

say "# bench/seed.sh, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git -C "$NDZ_TOP" rev-parse --short HEAD 2>/dev/null)"
say "# machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(free -g | awk '/Mem:/ { print $2 }') GiB RAM, $(uname -r); scratch on $(df -P "$D" | awk 'NR == 2 { print $1 }') ($(findmnt -n -o FSTYPE -T "$D")); load before: $(cut -d' ' -f1-3 /proc/loadavg)"
say "# $REPS runs each, medians; the page cache dropped (sync; echo 3 > /proc/sys/vm/drop_caches) before every timed run"

# ---- 1. the disk, its image, the restored disk and the changed copies
truncate -s "${DISK_MB}M" "$D/src.img" && mkfs.ext4 -q -F "$D/src.img" || die "mkfs"
mnt_do "$D/src.img" $PY fill "$D/mnt" "$FILL" >/dev/null || die "fill"
USED=$(mnt_do "$D/src.img" used_bytes)
e2fsck -fn "$D/src.img" >/dev/null 2>&1 || die "src.img is not clean after the fill"
IMG="$D/img.ndz" IDX="$D/img.ndz.index"
t=$(now); "$IMAGEZIP" -q "$D/src.img" "$IMG" || die imagezip; tz=$(echo "$(now) - $t" | bc)
[ -f "$IDX" ] || die "imagezip wrote no index"
"$IMAGEUNZIP" -q "$IMG" "$D/base.img" || die imageunzip
SCAN=$($PY bytes "$IDX")
NCH=$(($(stat -c %s "$IMG") / 1048576))
CHG=$((USED * PCT / 100))
say "# disk: ${DISK_MB} MiB ext4, $USED bytes used (df) after copying files of /usr; image: $NCH chunks, $(stat -c %s "$IMG") bytes (imagezip ${tz} s), index $(stat -c %s "$IDX") bytes; the chunks' regions: $SCAN bytes"
i=1
while [ $i -le "$NCL" ]; do
	cp --sparse=always "$D/base.img" "$D/c$i.img" &&
		mnt_do "$D/c$i.img" $PY change "$D/mnt" "$i" "$CHG" || die "change $i"
	$PY lacking "$IDX" "$D/base.img" "$D/c$i.img" >"$D/lack$i"
	n=$("$IMAGEKEY" verify --target "$D/c$i.img" "$IMG" 2>&1 | sed -n 's/.* \([0-9]*\) of [0-9]* chunks differ.*/\1/p')
	[ "${n:-0}" = "$(wc -l <"$D/lack$i")" ] ||
		say "# MISMATCH: client $i lacks $(wc -l <"$D/lack$i") chunks by comparison, imagekey verify --target says ${n:-0}"
	i=$((i + 1))
done
sort -nu "$D"/lack* >"$D/union"
NU=$(wc -l <"$D/union")
say "# changes: $CHG bytes per client (1/3 rewritten in place, 1/3 deleted, 1/3 added), client k with seed k; chunks lacking (regions differing from base, compared byte by byte): $(for i in $(seq "$NCL"); do printf '%s ' "$(wc -l <"$D/lack$i")"; done)(clients 1..$NCL), union of all $NU; imagekey verify --target counted the same for each unless a MISMATCH line says otherwise"
i=1; while [ $i -le "$NCL" ]; do $PY save "$IDX" "$D/c$i.img" "$D/u$i" "$D/union"; i=$((i + 1)); done
undo() { $PY load "$D/c$1.img" "$D/u$1"; }

# ---- frisbee runs
counters() { netns_tx_bytes srv; }
SPID=
serve() {
	ip netns exec "${NETNS_PFX}srv" "$FRISBEED" -q -m "$MC_GROUP" -p "$MC_PORT" -W "$RATE" -T 0 \
		"$IMG" 2>>"$D/srv.log" &
	SPID=$!
	for _k in 1 2 3 4 5 6 7 8 9 10; do
		in_ns srv ss -lun 2>/dev/null | grep -q ":$MC_PORT " && break
		sleep 0.1
	done
}
unserve() { kill -TERM "$SPID"; wait "$SPID" 2>/dev/null; SPID=; }
# fris N OPTS: clients 1..N reload $D/TARGETk (TARGET in $tgt: c or z) with OPTS;
# appends "seconds tx_bytes" to $D/$name
fris() {
	_n=$1; shift
	serve
	# BENCH_PCAP=DIR (N-client runs): the first 200 bytes of the datagrams the server sends and
	# gets (tcpdump in its namespace), the clients' start time, their -v logs and UDP drop counters, into DIR
	# (bench/seed-pcap.py breaks a capture down)
	_cap=
	if [ -n "${BENCH_PCAP:-}" ] && [ "$_n" -gt 1 ]; then
		mkdir -p "$BENCH_PCAP"; _cap=$BENCH_PCAP/$name.$r
		for i in $(seq "$_n"); do in_ns "c$i" nstat -az UdpRcvbufErrors UdpInErrors >"$_cap.nstat0.c$i" 2>&1; done
		# (a background job of sh ignores SIGINT: the pid of tcpdump itself, through exec)
		sh -c 'echo $$ >"$1.tdpid"; exec ip netns exec "$2" tcpdump -i eth0 -s 200 -B 16384 \
			-w "$1.pcap" udp' sh "$_cap" "${NETNS_PFX}srv" 2>"$_cap.tcpdump" &
		_cpid=$!; sleep 1
	fi
	tx0=$(counters)
	_t0=$(now)
	[ -n "$_cap" ] && echo "$_t0" >"$_cap.t0"
	pids=
	i=1
	while [ $i -le "$_n" ]; do
		# shellcheck disable=SC2086
		( in_ns "c$i" timeout 600 "$FRISBEE" -m "$MC_GROUP" -p "$MC_PORT" "$@" "$D/$tgt$i.img" \
			2>>"$D/fc$i.log"; echo $? >"$D/fc$i.rc" ) &
		pids="$pids $!"
		i=$((i + 1))
	done
	for p in $pids; do wait "$p"; done
	_t1=$(now)
	unserve
	if [ -n "$_cap" ]; then
		sleep 0.5; kill -INT "$(cat "$_cap.tdpid")"; wait "$_cpid" 2>/dev/null
		for i in $(seq "$_n"); do
			cp "$D/fc$i.log" "$_cap.fc$i.log"
			in_ns "c$i" nstat -az UdpRcvbufErrors UdpInErrors >"$_cap.nstat1.c$i" 2>&1
		done
		cp "$D/srv.log" "$_cap.srv.log"
	fi
	_bad=0
	tail -1 "$D/fc1.log" >"$D/$name.sum"
	i=1; while [ $i -le "$_n" ]; do
		if [ "$(cat "$D/fc$i.rc")" != 0 ]; then
			# keep the logs of a failed run (the scratch directory goes at exit)
			_keep=/var/tmp/ndz-seed-fail.$$.$name.$(date +%H%M%S)
			mkdir -p "$_keep" && cp "$D"/fc*.log "$D/srv.log" "$_keep/"
			say "# FAILED: $name, frisbee $* client $i of $_n: $(tail -1 "$D/fc$i.log") (logs in $_keep)"
			_bad=$((_bad + 1))
		fi
		i=$((i + 1))
	done
	i=1; while [ $i -le "$_n" ]; do : >"$D/fc$i.log"; i=$((i + 1)); done
	: >"$D/srv.log"
	echo "$(echo "$_t1 - $_t0" | bc) $(($(counters) - tx0)) $_bad" >>"$D/$name"
}
zero_z() { dd if=/dev/zero of="$D/z1.img" bs=4M count=$((DISK_MB / 4)) conv=notrunc,fdatasync status=none; }
check() {   # check DISK WHAT: the disk holds the image (imagekey) and is e2fsck clean
	"$IMAGEKEY" -q verify --target "$1" "$IMG" || say "# WRONG: $2: $1 does not hold the image"
	e2fsck -fn "$1" >/dev/null 2>&1 || say "# WRONG: $2: $1 is not e2fsck clean"
}
ONLY=${BENCH_ONLY:-}   # multi: only the set-up and the N-client part; local: no multicast
zero_z
r=1
[ "$ONLY" = multi ] || [ "$ONLY" = local ] && r=$((REPS + 1))
while [ $r -le "$REPS" ]; do
	tgt=z name=full; drop; fris 1
	undo 1; tgt=c name=seed1; drop; fris 1 --seed
	[ $r = 1 ] && check "$D/c1.img" "frisbee --seed"
	if [ "$ONLY" != wire ]; then
		zero_z; tgt=z name=seedzero; drop; fris 1 --seed
		[ $r = 1 ] && check "$D/z1.img" "frisbee --seed onto zeros"
	fi
	r=$((r + 1))
done
if [ "$ONLY" = wire ]; then
	cut -d' ' -f1 "$D/full" >"$D/full.t"; cut -d' ' -f2 "$D/full" >"$D/full.b"
	cut -d' ' -f1 "$D/seed1" >"$D/seed1.t"; cut -d' ' -f2 "$D/seed1" >"$D/seed1.b"
elif [ "$ONLY" != multi ] && [ "$ONLY" != local ]; then
	cut -d' ' -f1 "$D/full" >"$D/full.t"; cut -d' ' -f2 "$D/full" >"$D/full.b"
	cut -d' ' -f1 "$D/seed1" >"$D/seed1.t"; cut -d' ' -f2 "$D/seed1" >"$D/seed1.b"
	cut -d' ' -f1 "$D/seedzero" >"$D/seedzero.t"
fi
r=1
[ "$ONLY" = local ] && r=$((REPS + 1))
while [ $r -le "$REPS" ]; do
	i=1; while [ $i -le "$NCL" ]; do undo $i; i=$((i + 1)); done
	tgt=c name=multi; drop; fris "$NCL" --seed ${BENCH_PCAP:+-v}
	if [ $r = 1 ]; then i=1; while [ $i -le "$NCL" ]; do check "$D/c$i.img" "client $i of $NCL"; i=$((i + 1)); done; fi
	if [ -n "${BENCH_OLD:-}" ]; then
		_nf=$FRISBEE _nfd=$FRISBEED
		FRISBEE=$BENCH_OLD/bin/frisbee FRISBEED=$BENCH_OLD/bin/frisbeed
		i=1; while [ $i -le "$NCL" ]; do undo $i; i=$((i + 1)); done
		tgt=c name=multiold; drop; fris "$NCL" --seed
		FRISBEE=$_nf FRISBEED=$_nfd
	fi
	r=$((r + 1))
done
if [ -n "${BENCH_OLD:-}" ]; then
	cut -d' ' -f1 "$D/multiold" >"$D/multiold.t"; cut -d' ' -f2 "$D/multiold" >"$D/multiold.b"
fi
if [ "$ONLY" != local ]; then
cut -d' ' -f1 "$D/multi" >"$D/multi.t"; cut -d' ' -f2 "$D/multi" >"$D/multi.b"
[ "$ONLY" = multi ] || say "# client 1's last summary line, 1 client --seed: $(cat "$D/seed1.sum")"
say "# client 1's last summary line, $NCL clients --seed: $(cat "$D/multi.sum")"
MBAD=$(awk '{ s += $3 } END { print s + 0 }' "$D/multi")
fi
row() { printf '%-64s %12s %10s %8s\n' "$1" "$2" "$3" "$4" | tee -a "$OUTF"; }
if [ "$ONLY" = wire ]; then
	# what each client's pieces need, from the disks' bytes (undo: the changed disks again)
	i=1; args=
	while [ $i -le "$NCL" ]; do undo $i; args="$args $D/c$i.img:$D/lack$i"; i=$((i + 1)); done
	# shellcheck disable=SC2086
	$PY pieces "$IDX" "$D/base.img" $args >"$D/pieces"
	PU=$(sed -n 's/^union //p' "$D/pieces")
	P1=$(sed -n '1s/.* blocks \([0-9]*\)$/\1/p' "$D/pieces")
	IXB=$(( ($(stat -c %s "$IDX") + 1023) / 1024 * 1024 ))
	say "# the blocks of the pieces each client lacks (bench/seed.py pieces): $(head -n "$NCL" "$D/pieces" | tr '\n' ';')"
	say "# client 1's last summary line, 1 client --seed: $(cat "$D/seed1.sum")"
	say "# runs 1 client (s, server bytes, failed): full $(tr '\n' ';' <"$D/full") seed $(tr '\n' ';' <"$D/seed1")"
	say "# runs $NCL clients (s, server bytes, clients failed): $(tr '\n' ';' <"$D/multi")"
	say ""
	say "== seeded reloads over the wire, medians of $REPS; disk ${DISK_MB} MiB, $PCT% of used bytes changed"
	printf '%-64s %12s %10s %8s\n' measure value ratio goal | tee -a "$OUTF"
	row "frisbee full reload, 1 client, -W $RATE: s" "$(med full.t)" "" ""
	row "frisbee --seed reload of client 1 (lacks $(wc -l <"$D/lack1") chunks): s" "$(med seed1.t)" \
		"$(ratio "$(med seed1.t)" "$(med full.t)")" "<=0.10"
	row "  server bytes, full / seed" "$(med full.b) / $(med seed1.b)" "" ""
	row "  seed: server bytes vs its pieces' blocks ($P1 x 1 KiB) and the index ($IXB)" "" \
		"$(ratio "$(med seed1.b)" $((P1 * 1024 + IXB)))" ""
	row "$NCL clients --seed, different changes: s ($MBAD clients failed)" "$(med multi.t)" "" ""
	row "  server bytes vs union of the pieces they lack ($PU x 1 KiB blocks)" "$(med multi.b)" \
		"$(ratio "$(med multi.b)" $((PU * 1024)))" "<=1.1"
	row "  same, with the index's blocks ($IXB bytes)" "" \
		"$(ratio "$(med multi.b)" $((PU * 1024 + IXB)))" ""
	if [ -n "${BENCH_OLD:-}" ]; then
		say "# runs $NCL clients, BENCH_OLD=$BENCH_OLD (s, server bytes, clients failed): $(tr '\n' ';' <"$D/multiold")"
		say "# client 1's last summary line, $NCL clients --seed, old build: $(cat "$D/multiold.sum")"
		row "  old build ($BENCH_OLD): s" "$(med multiold.t)" "" ""
		row "  old build: server bytes vs union of the pieces they lack" "$(med multiold.b)" \
			"$(ratio "$(med multiold.b)" $((PU * 1024)))" "<=1.1"
		row "  old build: same, with the index's blocks" "" \
			"$(ratio "$(med multiold.b)" $((PU * 1024 + IXB)))" ""
	fi
	say "# the whole bench: $(printf '%.0f' "$(echo "$(now) - $t0all" | bc)") s; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
	exit 0
fi
if [ "$ONLY" = multi ]; then
	say "# runs (s, server bytes, clients failed): $(tr '\n' ';' <"$D/multi")"
	row "$NCL clients --seed, different changes: s ($MBAD clients failed)" "$(med multi.t)" "" ""
	row "  server bytes vs union of lacking chunks ($NU x 1 MiB)" "$(med multi.b)" \
		"$(ratio "$(med multi.b)" $((NU * 1048576)))" "<=1.1"
	row "  same, over the floor ($NU x 1 MiB x 1.061 headers)" "" \
		"$(ratio "$(med multi.b)" "$(echo "$NU * 1048576 * 1.061" | bc)")" ""
	exit 0
fi

# ---- imageunzip --seed vs casync extract
# rd_bytes LOG PATTERN: bytes returned by read syscalls on fds whose path matches PATTERN
rd_bytes() {
	grep -E "^[0-9]+ +(read|pread64|readv|preadv|preadv2)\([0-9]+<$2" "$1" |
		sed -n 's/.*= \([0-9][0-9]*\)$/\1/p' | awk '{ s += $1 } END { print s + 0 }'
}
t=$(now)
casync make --store="$D/store" "$D/base.caibx" "$D/base.img" >/dev/null || die "casync make"
tc=$(echo "$(now) - $t" | bc)
say "# casync make of base.img: $tc s; store $(du -sb "$D/store" | cut -f1) bytes in $(find "$D/store" -name '*.cacnk' | wc -l) chunks (casync's defaults: sha512-256, zstd, 64 KiB average)"
r=1
while [ $r -le "$REPS" ]; do
	undo 1; drop
	/usr/bin/time -f "%e %U %S" -o "$D/time" "$IMAGEUNZIP" -q --seed "$IMG" "$D/c1.img" || die "imageunzip --seed"
	cut -d' ' -f1 "$D/time" >>"$D/iu.t"
	[ $r = 1 ] && check "$D/c1.img" "imageunzip --seed"
	undo 1; drop
	/usr/bin/time -f "%e %U %S" -o "$D/time" "$IMAGEUNZIP" -q "$IMG" "$D/c1.img" || die "imageunzip onto c1"
	cut -d' ' -f1 "$D/time" >>"$D/iup.t"
	undo 1; rm -f "$D/cas.img"; drop
	/usr/bin/time -f "%e %U %S" -o "$D/time" casync extract --store="$D/store" --seed="$D/c1.img" \
		"$D/base.caibx" "$D/cas.img" || die "casync extract"
	cut -d' ' -f1 "$D/time" >>"$D/ca.t"
	[ $r = 1 ] && { cmp -s "$D/cas.img" "$D/base.img" || die "casync extract: cas.img is not base.img"; }
	r=$((r + 1))
done
undo 1; drop
strace -f -y -e trace=read,pread64,readv,preadv,preadv2 -o "$D/iu.strace" \
	"$IMAGEUNZIP" -q --seed "$IMG" "$D/c1.img" || die "imageunzip --seed (strace)"
IUB=$(rd_bytes "$D/iu.strace" "$D/img\\.ndz")
undo 1; drop
"$IMAGEUNZIP" -v --seed "$IMG" "$D/c1.img" 2>"$D/iu.sum" || die "imageunzip -v --seed"
say "# imageunzip -v --seed onto client 1's disk: $(tail -1 "$D/iu.sum")"
undo 1; rm -f "$D/cas.img"; drop
strace -f -y -e trace=read,pread64,readv,preadv,preadv2 -o "$D/ca.strace" \
	casync extract --store="$D/store" --seed="$D/c1.img" "$D/base.caibx" "$D/cas.img" ||
	die "casync extract (strace)"
CAB=$(rd_bytes "$D/ca.strace" "$D/(store|base\\.caibx)")
undo 1

# ---- hashing cost, a full reload onto zeros with and without the seed, --verify
r=1
while [ $r -le "$REPS" ]; do
	drop
	/usr/bin/time -f "%e %U %S" -o "$D/time" "$IMAGEKEY" -q verify --target "$D/base.img" "$IMG" ||
		die "imagekey verify --target base.img"
	awk '{ print $2 + $3 }' "$D/time" >>"$D/scan.cpu"; cut -d' ' -f1 "$D/time" >>"$D/scan.t"
	drop
	/usr/bin/time -f "%e" -o "$D/time" "$IMAGEUNZIP" -q "$IMG" "$D/z1.img" || die imageunzip
	cat "$D/time" >>"$D/iuz.t"
	drop
	/usr/bin/time -f "%e" -o "$D/time" "$IMAGEUNZIP" -q --verify "$IMG" "$D/z1.img" || die "imageunzip --verify"
	cat "$D/time" >>"$D/iuv.t"
	zero_z; drop
	/usr/bin/time -f "%e" -o "$D/time" "$IMAGEUNZIP" -q --seed "$IMG" "$D/z1.img" || die "imageunzip --seed onto zeros"
	cat "$D/time" >>"$D/iusz.t"
	zero_z; drop
	/usr/bin/time -f "%e" -o "$D/time" "$IMAGEUNZIP" -q "$IMG" "$D/z1.img" || die "imageunzip onto zeros"
	cat "$D/time" >>"$D/iuzz.t"
	r=$((r + 1))
done

gib=$(echo "$SCAN / 1073741824" | bc -l)
say ""
say "== seeded reloads, medians of $REPS; disk ${DISK_MB} MiB, $PCT% of used bytes changed"
printf '%-64s %12s %10s %8s\n' measure value ratio goal | tee -a "$OUTF"
row() { printf '%-64s %12s %10s %8s\n' "$1" "$2" "$3" "$4" | tee -a "$OUTF"; }
if [ "$ONLY" != local ]; then
row "frisbee full reload, 1 client, -W $RATE: s" "$(med full.t)" "" ""
row "frisbee --seed reload of client 1 (lacks $(wc -l <"$D/lack1") chunks): s" "$(med seed1.t)" \
	"$(ratio "$(med seed1.t)" "$(med full.t)")" "<=0.15"
row "  server bytes, full / seed" "$(med full.b) / $(med seed1.b)" "" ""
row "$NCL clients --seed, different changes: s ($MBAD clients failed)" "$(med multi.t)" "" ""
row "  server bytes vs union of lacking chunks ($NU x 1 MiB)" "$(med multi.b)" \
	"$(ratio "$(med multi.b)" $((NU * 1048576)))" "<=1.1"
row "  same, over the floor ($NU x 1 MiB x 1.061 headers)" "" \
	"$(ratio "$(med multi.b)" "$(echo "$NU * 1048576 * 1.061" | bc)")" ""
fi
row "imageunzip onto client 1's disk (no seed): s" "$(med iup.t)" "" ""
row "imageunzip --seed onto client 1's disk: s" "$(med iu.t)" "$(ratio "$(med iu.t)" "$(med iup.t)")" "<=0.10"
row "casync extract --seed=(client 1's disk), into a new file: s" "$(med ca.t)" \
	"$(ratio "$(med iu.t)" "$(med ca.t)")" "<1"
row "  bytes read from the source: imageunzip (image+index) / casync (store+caibx)" "$IUB / $CAB" \
	"$(ratio "$IUB" "$CAB")" "<1"
row "seed scan (imagekey verify --target base): s / CPU s/GiB" \
	"$(med scan.t) / $(printf '%.2f' "$(echo "$(med scan.cpu) / $gib" | bc -l)")" "" "say"
[ "$ONLY" = local ] || row "frisbee --seed onto zeros vs full reload: s" "$(med seedzero.t)" \
	"$(ratio "$(med seedzero.t)" "$(med full.t)")" "<=1.05"
row "imageunzip --seed onto zeros vs imageunzip onto zeros: s" "$(med iusz.t) / $(med iuzz.t)" \
	"$(ratio "$(med iusz.t)" "$(med iuzz.t)")" "<=1.05"
row "imageunzip --verify vs imageunzip (allocated file): s" "$(med iuv.t) / $(med iuz.t)" \
	"$(ratio "$(med iuv.t)" "$(med iuz.t)")" "say"
say "# the whole bench: $(printf '%.0f' "$(echo "$(now) - $t0all" | bc)") s; load after: $(cut -d' ' -f1-3 /proc/loadavg)"
