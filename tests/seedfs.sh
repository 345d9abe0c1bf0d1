# The set-up the multicast seeded-reload tests share (tests/cli/mc_seed_pieces.sh,
# mc_seed_repair.sh): a LAN of a server srv and clients c1..c4, and a real ext4 filled
# with files through a loop mount. Sourced after tests/lib.sh and tests/netns.sh.
# shellcheck shell=sh

# seedfs_lan: skips the test without the tools or namespaces; else the LAN, and MNT
# (exported: the scripts in_mnt runs see it)
seedfs_lan() {
	command -v mkfs.ext4 >/dev/null && command -v e2fsck >/dev/null &&
		command -v debugfs >/dev/null && command -v python3 >/dev/null ||
		skip_all "mkfs.ext4, e2fsck, debugfs or python3 missing"
	netns_usable || skip_all "network namespaces, veth, bridge or nft unavailable (needs root)"
	netns_lan && netns_host srv 1 || { not_ok "namespace LAN"; done_testing; }
	for _i in 1 2 3 4; do netns_host "c$_i" $((10 + _i)) || not_ok "host c$_i"; done
	MNT="$T/mnt"
	mkdir -p "$MNT"
	export MNT
}

# in_mnt IMG SCRIPT [ARGS]: run sh SCRIPT with IMG's file system mounted on $MNT, in a
# mount namespace of its own: a namespace another test makes meanwhile ("ip netns
# exec") copies the mounts it sees, and a copy of ours would keep the file system
# mounted (and write its superblock later) after we unmount it
in_mnt() {
	_img=$1; shift
	unshare -m --propagation private sh -c 'mount -o loop "$1" "$2" || exit 1; shift 2
		sh "$@"; r=$?; umount "$MNT" || r=1; exit $r' sh "$_img" "$MNT" "$@"
}

# seedfs_make IMG MIB DIRS KIB SPREAD TEXT WORD: a new ext4 of MIB MiB (4 KiB blocks) in
# IMG holding directories d1..dDIRS, each with random files r1..r6 of KIB KiB and up to
# SPREAD KiB more, and text files t1..t6 of TEXT bytes ("WORD D F" lines)
seedfs_make() {
	cat >"$T/fill.sh" <<'EOF'
dirs=$1 kib=$2 spread=$3 text=$4 word=$5
d=1
while [ "$d" -le "$dirs" ]; do
	mkdir "$MNT/d$d" || exit 1
	for f in 1 2 3 4 5 6; do
		head -c $(( (f * 97 + d * 31) % spread * 1024 + kib * 1024 )) /dev/urandom >"$MNT/d$d/r$f" &&
			yes "$word $d $f" | head -c "$text" >"$MNT/d$d/t$f" || exit 1
	done
	d=$((d + 1))
done
EOF
	truncate -s "${2}M" "$1" && mkfs.ext4 -q -F -b 4096 "$1" &&
		in_mnt "$1" "$T/fill.sh" "$3" "$4" "$5" "$6" "$7"
}
