# Shared helpers for tests/cli/*.sh: TAP output, a scratch directory removed on exit.
# shellcheck shell=sh
set -u
: "${NDZ_TOP:?}" "${NDZ_BIN:?}"
T=$(mktemp -d "${TMPDIR:-/tmp}/ndz-test.XXXXXX")
_n=0
_cleanups=""
at_exit() { _cleanups="$1; $_cleanups"; }
_finish() {
	rc=$?
	eval "$_cleanups" >/dev/null 2>&1
	rm -rf "$T"
	exit $rc
}
trap _finish EXIT
trap 'exit 130' INT TERM HUP
_failed=0
ok() { _n=$((_n + 1)); echo "ok $_n - $*"; }
not_ok() { _n=$((_n + 1)); echo "not ok $_n - $*"; _failed=1; }
# check DESC CMD...: runs CMD, ok when it exits 0
check() { d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; fi; }
skip_all() { echo "skip: $*"; exit 77; }
done_testing() { exit $_failed; }
# wait_until SECONDS CMD...: poll CMD every 0.1 s; false when it never held
wait_until() {
	_w=$(($1 * 10))
	shift
	while ! "$@"; do
		_w=$((_w - 1))
		[ $_w -gt 0 ] || return 1
		sleep 0.1
	done
}
# python3 through a pyenv shim (a script asking pyenv which one to run) took 0.7 s a
# call on a loaded machine, and tests call it dozens of times, some in wait_until
# loops: the interpreter the shim would run here, found once, goes first in PATH
case $(command -v python3 2>/dev/null) in
*/shims/python3)
	_py=$(pyenv which python3 2>/dev/null) && [ -x "$_py" ] &&
		PATH="$(dirname "$_py"):$PATH" && export PATH ;;
esac
IMAGEZIP="$NDZ_BIN/imagezip"
IMAGEUNZIP="$NDZ_BIN/imageunzip"
FRISBEED="$NDZ_BIN/frisbeed"
FRISBEE="$NDZ_BIN/frisbee"
