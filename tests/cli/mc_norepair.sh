#!/bin/sh
# The multicast tests that exercise loss and joining, once more with servers and
# clients that neither send nor ask for repair blocks (the protocol as it was before
# them, which a mixed network still speaks).
. "$NDZ_TOP/tests/lib.sh"
. "$NDZ_TOP/tests/netns.sh"
netns_require
export NDZ_MC_NOREPAIR=1
for t in mc_join mc_slow; do
	echo "# $t without repair blocks"
	sh "$NDZ_TOP/tests/cli/$t.sh" | sed "s/^\(not ok\|ok\) [0-9]* - /\1 - without repair: $t: /"
done | awk '/^(ok|not ok) - / { n++; sub(/ - /, " " n " - "); fail += /^not ok/ } { print }
	END { exit fail ? 1 : 0 }'
