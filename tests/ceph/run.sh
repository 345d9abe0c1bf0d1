#!/bin/sh
# Runs the object-store tests against a real single-node Ceph (tests/ceph/*.sh but the
# helper ceph.sh; `make check-ceph`), the full set, and ends with one line: N passed,
# N failed, N skipped. `make check` runs the short case (tests/cli/site_store.sh).
top=$(cd "$(dirname "$0")/../.." && pwd)
set --  "${1:-build}" "ceph-" 1200 $(ls "$top"/tests/ceph/*.sh | grep -v -e '/ceph\.sh$' -e '/run\.sh$')
exec sh "$top/tests/slowrun.sh" "$@"
