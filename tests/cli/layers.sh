#!/bin/sh
# lib/ keeps its layers (tests/tools/layers.py): no include runs up a layer, no include
# circle among lib/ and fs/ files, no program includes another program's file, lib/ctl
# needs lib/core only, and no client program (any but mfrisbeed) includes the master's
# rooms (lib/master, lib/mserve). The
# checker is first shown each fault in a small tree of its own, so that it can fail.
. "$NDZ_TOP/tests/lib.sh"
[ "${NDZ_SANITIZED:-0}" = 0 ] || skip_all "reads the sources only; the plain build runs it"
L=$NDZ_TOP/tests/tools/layers.py
command -v python3 >/dev/null || skip_all "no python3"

# tree DIR: a clean small tree (core, mcast and a program), the checker's baseline
tree() {
	rm -rf "$1" && mkdir -p "$1/lib/core" "$1/lib/mcast" "$1/prog" "$1/other" || exit 1
	printf '#include "a.h"\n' >"$1/lib/core/a.c"; : >"$1/lib/core/a.h"
	printf '#include "core/a.h"\n#include "b.h"\n' >"$1/lib/mcast/b.c"; : >"$1/lib/mcast/b.h"
	printf '#include "mcast/b.h"\n#include "p.h"\n' >"$1/prog/p.c"; : >"$1/prog/p.h"
	: >"$1/other/o.h"
}
# fails NAME WHAT MESSAGE: the checker fails on the tree $T/NAME (exit 1) and its
# output says MESSAGE
fails() {
	python3 "$L" "$T/$1" >"$T/$1.out"; _rc=$?
	check "$2 fails (exit $_rc)" [ "$_rc" = 1 ]
	check "... and names it" grep -q "$3" "$T/$1.out"
}

tree "$T/ok"
check "a clean tree passes" python3 "$L" "$T/ok"

tree "$T/up"; printf '#include "mcast/b.h"\n' >>"$T/up/lib/core/a.c"
fails up "an include up a layer" 'lib/core/a.c: includes lib/mcast/b.h: runs up a layer'

tree "$T/circle"; printf '#include "c.h"\n' >>"$T/circle/lib/mcast/b.h"
printf '#include "b.h"\n' >"$T/circle/lib/mcast/c.h"
fails circle "an include circle" 'include circle: lib/mcast/b -> lib/mcast/c -> lib/mcast/b'

tree "$T/cross"; printf '#include "../other/o.h"\n' >>"$T/cross/prog/p.c"
fails cross "a program including another's file" "prog/p.c: includes other/o.h, another program's file"

# the master's rooms: mfrisbeed may include them, a client may not
rooms() {
	tree "$1"; mkdir -p "$1/lib/ctl" "$1/lib/master" "$1/lib/mserve" "$1/mfrisbeed" || exit 1
	printf '#include "core/a.h"\n' >"$1/lib/ctl/w.h"
	printf '#include "ctl/w.h"\n' >"$1/lib/master/d.h"
	printf '#include "master/d.h"\n' >"$1/lib/mserve/s.h"
	printf '#include "mserve/s.h"\n#include "master/d.h"\n' >"$1/mfrisbeed/m.c"
	printf '#include "ctl/w.h"\n' >>"$1/prog/p.c"
}
rooms "$T/rooms"
check "mfrisbeed including lib/mserve and lib/master passes" python3 "$L" "$T/rooms"

rooms "$T/client"; printf '#include "master/d.h"\n' >>"$T/client/prog/p.c"
fails client "a client program including lib/master" 'prog/p.c: includes lib/master/d.h: a client includes lib/ctl, not lib/master'

rooms "$T/client2"; printf '#include "mserve/s.h"\n' >>"$T/client2/prog/p.c"
fails client2 "a client program including lib/mserve" 'prog/p.c: includes lib/mserve/s.h: a client includes lib/ctl, not lib/mserve'

rooms "$T/ctlup"; printf '#include "mcast/b.h"\n' >>"$T/ctlup/lib/ctl/w.h"
fails ctlup "lib/ctl including more than lib/core" 'lib/ctl/w.h: includes lib/mcast/b.h: runs up a layer'

python3 "$L" "$NDZ_TOP" >"$T/top.out"; rc=$?
check "the project's tree keeps its layers$(sed 's/^/; /' "$T/top.out" | head -5 | tr -d '\n')" [ "$rc" = 0 ]
done_testing
