# Sourced by the tests that run an older revision's frisbee or frisbeed against the new
# ones (tests/cli/mc_jumbo.sh, mc_seed_repair.sh).
# shellcheck shell=sh

# old_bin REV: NDZ_OLD_BIN names a directory holding a frisbee and a frisbeed of REV:
# NDZ_OLD_BIN as the caller gave it, or, in the plain build of a git checkout, REV's
# two programs built once and kept in $NDZ_BUILD/old-REV for the next test that asks
# (make check starts from an empty build/, so a CI run builds them once, not once a
# test). False, with a "# " line saying why, when there are none.
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
	if ! [ -x "$_kept/frisbee" ] || ! [ -x "$_kept/frisbeed" ]; then
		rm -rf "$T/old" && mkdir -p "$T/old" || return 1
		if ! { git -C "$NDZ_TOP" archive "$_rev" | tar -x -C "$T/old" &&
		       make -C "$T/old" -s -j2 build/bin/frisbee build/bin/frisbeed >"$T/old.log" 2>&1; }; then
			echo "# building $_rev failed: $(tail -3 "$T/old.log" 2>/dev/null)"
			return 1
		fi
		# into place whole (a test run beside this one sees both programs or none)
		mkdir -p "$T/old/kept" && cp "$T/old/build/bin/frisbee" "$T/old/build/bin/frisbeed" "$T/old/kept/" &&
			{ mv -T "$T/old/kept" "$_kept" 2>/dev/null || [ -x "$_kept/frisbeed" ]; } || return 1
		rm -rf "$T/old"
	fi
	NDZ_OLD_BIN=$_kept
}
