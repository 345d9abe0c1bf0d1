# Set-up shared by the network benchmarks (sourced after `set -u` with the script's
# arguments): the build given as $1, the test helpers (a scratch directory $T removed
# on exit, the namespace LAN), REPS from $2 (default 3) and bench/common.sh (median, now).
[ $# -ge 1 ] || { echo "usage: $0 BUILD [REPS]" >&2; exit 2; }
NDZ_TOP=$(cd "$(dirname "$0")/.." && pwd)
NDZ_BUILD=$(cd "$1" && pwd)
NDZ_BIN="$NDZ_BUILD/bin"
export NDZ_TOP NDZ_BIN NDZ_BUILD
REPS=${2:-3}
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_usable || { echo "bench: needs root, network namespaces and nftables" >&2; exit 1; }
. "$NDZ_TOP/bench/common.sh"

# bench_out NAME: OUT, a scratch directory in memory (/dev/shm/NAME.PID), removed at exit
bench_out() {
	OUT=/dev/shm/$1.$$
	mkdir -p "$OUT"
	at_exit "rm -rf $OUT"
}

# bench_image: $T/img.ndz, a raw image of MIB - 1 MiB of random data ($T/src):
# incompressible, so every tool moves the same bytes
bench_image() {
	head -c $((MIB * 1048576 - 1048576)) /dev/urandom >"$T/src"
	"$IMAGEZIP" -q -r "$T/src" "$T/img.ndz"
}
