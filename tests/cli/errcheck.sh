#!/bin/sh
# Every fallible library call takes an ndz_error (tests/tools/errcheck.py). The checker
# is first shown a small tree with one call that takes none and one that does, so
# that it can fail.
. "$NDZ_TOP/tests/lib.sh"
[ "${NDZ_SANITIZED:-0}" = 0 ] || skip_all "reads the headers only; the plain build runs it"
command -v python3 >/dev/null || skip_all "no python3"
E=$NDZ_TOP/tests/tools/errcheck.py

mkdir -p "$T/t/lib/core" || exit 1
cat >"$T/t/lib/core/x.h" <<'H'
/* ndz_x_good - 0 or NDZ_EIO with e set. */
int ndz_x_good(int fd, struct ndz_error *e);

/* ndz_x_bad - 0 or NDZ_EIO. */
int ndz_x_bad(int fd);

/* ndz_x_pred - 1 when fd is open, else 0. */
int ndz_x_pred(int fd);
H
python3 "$E" "$T/t" >"$T/t.out"; rc=$?
check "a call that can fail and takes no ndz_error fails the check (exit $rc)" [ "$rc" = 1 ]
check "... it is named" grep -q 'ndz_x_bad' "$T/t.out"
check "... and neither the one that takes one nor a predicate is" \
	sh -c "! grep -q 'ndz_x_good\|ndz_x_pred' '$T/t.out'"

python3 "$E" "$NDZ_TOP" >"$T/top.out"; rc=$?
check "every fallible call of lib/ takes an ndz_error$(sed 's/^/; /' "$T/top.out" | head -5 | tr -d '\n')" \
	[ "$rc" = 0 ]
done_testing
