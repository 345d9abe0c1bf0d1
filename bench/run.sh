#!/bin/sh
# make bench: every benchmark in bench/, each side by side with its peer tools.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
b=${1:-build}
rc=0
for s in zip codec fs multicast linerate master seed range-repair lab; do
	[ -f "$top/bench/$s.sh" ] || continue
	echo "######## bench/$s.sh"
	sh "$top/bench/$s.sh" "$b" || rc=1
done
exit $rc
