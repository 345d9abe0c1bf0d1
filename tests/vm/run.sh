#!/bin/sh
# Runs the slow virtual-machine tests (tests/vm/vm_*.sh) against one build directory
# (`make check-vm`) and ends with one line: N passed, N failed, N skipped.
top=$(cd "$(dirname "$0")/../.." && pwd)
exec sh "$top/tests/slowrun.sh" "${1:-build}" "" 900 "$top"/tests/vm/vm_*.sh
