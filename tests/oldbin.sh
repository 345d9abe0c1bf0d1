# The older revision's frisbee and frisbeed that tests run against the new ones
# (tests/cli/mc_jumbo.sh, mc_seed_repair.sh). Sourced by them (after tests/lib.sh), or
# run by tests/run.sh before the suite, to build them beside it:
#   sh tests/oldbin.sh BUILDDIR
# shellcheck shell=sh

# the last commit before BLOCKS (doc/PROTOCOL.md, "BLOCKS and CAPS")
OLD_REV=a8964b5

# old_bin REV: NDZ_OLD_BIN names a directory holding a frisbee and a frisbeed of REV:
# NDZ_OLD_BIN as the caller gave it, or, in the plain build of a git checkout, REV's
# two programs built once and kept in $NDZ_BUILD/old-REV for the next test that asks
# (make check starts from an empty build/, so a CI run builds them once, not once a
# test; one build at a time, under flock). False, with a "# " line saying why, when
# there are none.
old_bin() {
	_rev=$1
	if [ -n "${NDZ_OLD_BIN:-}" ]; then
		[ -x "$NDZ_OLD_BIN/frisbee" ] && [ -x "$NDZ_OLD_BIN/frisbeed" ] && return 0
		echo "# NDZ_OLD_BIN=$NDZ_OLD_BIN holds no frisbee and frisbeed"
		return 1
	fi
	[ "${NDZ_SANITIZED:-0}" = 0 ] && [ -n "${NDZ_BUILD:-}" ] &&
		git -C "$NDZ_TOP" cat-file -e "$_rev^{commit}" 2>/dev/null || return 1
	_kept="$NDZ_BUILD/old-$_rev"
	flock "$NDZ_BUILD/old-$_rev.lock" sh -c '
		kept=$1 rev=$2
		[ -x "$kept/frisbee" ] && [ -x "$kept/frisbeed" ] && exit 0
		tmp=$(mktemp -d "$kept.XXXXXX") || exit 1
		if git -C "$NDZ_TOP" archive "$rev" | tar -x -C "$tmp" &&
		   make -C "$tmp" -s -j2 build/bin/frisbee build/bin/frisbeed >"$tmp/make.log" 2>&1; then
			rm -rf "$kept" && mkdir "$kept" &&
				cp "$tmp/build/bin/frisbee" "$tmp/build/bin/frisbeed" "$kept/"
			rc=$?
		else
			echo "# building $rev failed: $(tail -3 "$tmp/make.log" 2>/dev/null)"
			rc=1
		fi
		rm -rf "$tmp"
		exit $rc' sh "$_kept" "$_rev" || return 1
	NDZ_OLD_BIN=$_kept
}

if [ "$(basename "$0")" = oldbin.sh ]; then
	[ $# = 1 ] || { echo "usage: sh tests/oldbin.sh BUILDDIR" >&2; exit 2; }
	NDZ_TOP=$(cd "$(dirname "$0")/.." && pwd)
	NDZ_BUILD=$(cd "$1" && pwd) || exit 2
	export NDZ_TOP
	old_bin "$OLD_REV"
fi
