#!/bin/sh
# Runs the slow virtual-machine tests (tests/vm/vm_*.sh) against one build directory
# (`make check-vm`) and ends with one line: N passed, N failed, N skipped.
top=$(cd "$(dirname "$0")/../.." && pwd)
# a sanitized build's vm_reload.sh too: `make check` runs it in the plain build only
case ${1:-build} in
*san*) set -- "${1:-build}" "$top"/tests/vm/vm_*.sh "$top/tests/cli/vm_reload.sh" ;;
*) set -- "${1:-build}" "$top"/tests/vm/vm_*.sh ;;
esac
b=$1; shift
exec sh "$top/tests/slowrun.sh" "$b" "" 900 "$@"
