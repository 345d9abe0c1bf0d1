# Timing helpers shared by the bench scripts (sourced). The caller sets dir (a
# scratch directory), runs (how many times each command runs) and bytes (the
# input size, for MB/s).
now() { date +%s.%N; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
# time_it NAME CMD: runs CMD $runs times, prints the median seconds
time_it() {
	shift
	: >"$dir/t"
	i=0
	while [ $i -lt "$runs" ]; do
		t0=$(now); sh -c "$*"; t1=$(now)
		echo "$t1 - $t0" | bc -l >>"$dir/t"
		i=$((i + 1))
	done
	median <"$dir/t"
}
mbs() { echo "scale=1; $bytes / 1000000 / $1" | bc -l; }
