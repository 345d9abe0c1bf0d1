#!/bin/sh
# Benchmark of range repairs (issue 32): BENCH_CLIENTS (8) clients hold the same v1 of an
# ext4 (BENCH_DISK_MB, 160 MiB, about 90 MiB of files) and reload v2 (a few 4 KiB blocks
# rewritten in every random file: pieces of most chunks change, no chunk whole) with
# frisbee --seed at BENCH_LOSS (1) % loss on each client's input (nftables, from when it has
# the content index on), frisbeed -W BENCH_RATE (5M: slow enough that the clients' first
# requests for a chunk merge in the server's queue, so the count is of the repairs' work).
# Side by side in each of REPS rounds: range repairs on (frisbeed's default) and off
# (frisbeed --no-range-repair, which announces no FEATURES bit 5: the clients ask for the
# blocks they lost by PREQUEST). Reported, medians of REPS: the server's datagram payload
# bytes (--stats-json bytes_sent) and datagrams, over the union of the blocks of the pieces
# the clients lack (tests/tools/ndzindex.py, from the disks' bytes) x 1024 bytes, and the
# range repairs sent and blocks the clients rebuilt from them.
# Usage: bench/range-repair.sh BUILD [REPS]   (root; appends to BENCH_OUT, default
# bench/range-repair-results.txt)
set -u
. "$(dirname "$0")/netbench.sh"
DISK_MB=${BENCH_DISK_MB:-160}
NCL=${BENCH_CLIENTS:-8}
LOSS=${BENCH_LOSS:-1}
RATE=${BENCH_RATE:-5M}
OUTF=${BENCH_OUT:-$NDZ_TOP/bench/range-repair-results.txt}
command -v mkfs.ext4 >/dev/null && command -v python3 >/dev/null ||
	{ echo "bench: needs mkfs.ext4 and python3" >&2; exit 1; }
netns_lan && netns_host srv 1 || { echo "bench: no namespace LAN" >&2; exit 1; }
i=1
while [ $i -le "$NCL" ]; do netns_host "c$i" $((10 + i)) || exit 1; i=$((i + 1)); done
MNT="$T/mnt"
mkdir -p "$MNT"
export MNT
# in_mnt IMG SCRIPT: the tests' (a mount namespace of its own)
. "$NDZ_TOP/tests/seedfs.sh"
cat >"$T/fill.sh" <<'EOF'
for d in 1 2 3 4 5 6; do
	mkdir "$MNT/d$d"
	for f in 1 2 3 4 5 6 7 8; do
		head -c $(( (f * 97 + d * 31) % 400 * 1024 + 1000 * 1024 )) /dev/urandom >"$MNT/d$d/r$f"
		yes "range repair $d $f" | head -c 600000 >"$MNT/d$d/t$f"
	done
done
EOF
cat >"$T/change.sh" <<'EOF'
for d in 1 2 3 4 5 6; do
	for f in 1 2 3 4 5 6 7 8; do
		for k in 1 2 3; do
			dd if=/dev/urandom of="$MNT/d$d/r$f" bs=4096 count=1 conv=notrunc \
				seek=$(( (d * 37 + f * 11 + k * 71) % 240 )) 2>/dev/null || exit 1
		done
	done
done
EOF
truncate -s "${DISK_MB}M" "$T/fs.img" && mkfs.ext4 -q -F -b 4096 "$T/fs.img" &&
	in_mnt "$T/fs.img" "$T/fill.sh" && "$IMAGEZIP" -q "$T/fs.img" "$T/v1.ndz" &&
	in_mnt "$T/fs.img" "$T/change.sh" && "$IMAGEZIP" -q "$T/fs.img" "$T/v2.ndz" &&
	"$IMAGEUNZIP" -q "$T/v1.ndz" "$T/v1ref" && "$IMAGEUNZIP" -q "$T/v2.ndz" "$T/v2ref" ||
	{ echo "bench: set-up failed" >&2; exit 1; }
rm -f "$T/fs.img"
set -- $(python3 - "$T/v2.ndz.index" "$T/v2ref" "$T/v1ref" <<'PY'
import os, sys
sys.path.insert(0, os.environ['NDZ_TOP'] + '/tests/tools')
import ndzindex
ix = ndzindex.read(sys.argv[1])
a, b = os.open(sys.argv[2], os.O_RDONLY), os.open(sys.argv[3], os.O_RDONLY)
written, partial, pblocks, whole, need = ndzindex.plan(ix, range(len(ix.entries)), a, b)
print(len(ix.entries), partial, whole, written, len(need))
PY
)
NCH=$1 PART=$2 WHOLE=$3 PIECES=$4 UNION=$5

# one NAME [FRISBEED OPTIONS]: the reload; "bytes datagrams range_sent rebuilt failed"
one() {
	_name=$1; shift
	i=1
	while [ $i -le "$NCL" ]; do
		cp "$T/v1ref" "$T/t$i"; : >"$T/c$i.log"; netns_noloss "c$i"; i=$((i + 1))
	done
	sync
	mc_server srv "$T/v2.ndz" -W "$RATE" -T 20 --stats-json "$T/$_name.json" "$@"
	i=1
	while [ $i -le "$NCL" ]; do
		mc_client "c$i" "$T/t$i" --seed -T 20 -C 128 -v; i=$((i + 1))
	done
	i=1
	while [ $i -le "$NCL" ]; do
		wait_until 20 grep -q 'content index of' "$T/c$i.log"
		netns_loss "c$i" "$LOSS"; i=$((i + 1))
	done
	mc_wait
	kill -TERM "$MC_SRV_PID"; wait "$MC_SRV_PID"
	_f=0 _r=0 i=1
	while [ $i -le "$NCL" ]; do
		netns_noloss "c$i"
		[ "$(mc_rc "c$i")" = 0 ] && [ -z "$(python3 "$T/chunks.py" "$T/v2.ndz.index" "$T/v2ref" "$T/t$i")" ] ||
			_f=$((_f + 1))
		_x=$(sed -n 's/.*; [0-9]* range repairs, \([0-9]*\) blocks rebuilt from them.*/\1/p' "$T/c$i.log" | tail -1)
		_r=$((_r + ${_x:-0}))
		i=$((i + 1))
	done
	echo "$(json_num "$T/$_name.json" bytes_sent) $(json_num "$T/$_name.json" datagrams_sent) $(json_num "$T/$_name.json" range_repairs_sent) $_r $_f"
}
mc_chunks_py
START=$(date -u '+%Y-%m-%d %H:%M UTC')
LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
: >"$T/on" ; : >"$T/off"
r=1
while [ "$r" -le "$REPS" ]; do
	one on >>"$T/on"
	one off --no-range-repair >>"$T/off"
	r=$((r + 1))
done
col() { awk -v k="$2" '{ print $k }' "$1" | median; }
ub=$((UNION * 1024))
{
	echo "# bench/range-repair.sh, $START, $NCL clients, ${LOSS}% loss, frisbeed -W $RATE, $REPS rounds (on, off side by side)"
	echo "# machine: $(nproc) cores, load before: $LOAD"
	echo "# image: $NCH chunks; each client lacks the same $PIECES pieces of $PART chunks ($WHOLE whole): $UNION blocks (union)"
	echo "# runs on  (bytes datagrams range_repairs rebuilt failed): $(tr '\n' ';' <"$T/on")"
	echo "# runs off (bytes datagrams range_repairs rebuilt failed): $(tr '\n' ';' <"$T/off")"
	for m in on off; do
		b=$(col "$T/$m" 1)
		printf '%-40s %12s bytes %6s datagrams  %.3fx the union  %5s range repairs  %5s rebuilt  %s failed\n' \
			"range repairs $m" "$b" "$(col "$T/$m" 2)" "$(echo "$b / $ub" | bc -l)" \
			"$(col "$T/$m" 3)" "$(col "$T/$m" 4)" "$(awk '{ s += $5 } END { print s }' "$T/$m")"
	done
} | tee -a "$OUTF"
