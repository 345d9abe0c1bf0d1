# Input and timing helpers shared by the bench scripts (sourced). The caller sets
# dir (a scratch directory), size_mb and runs (how many times each command runs);
# make_input sets bytes (the input size, for MB/s).

# make_input: $dir/in, size_mb MiB of this machine's binaries and text
make_input() {
	echo "input: ${size_mb} MiB of binaries and text from /usr (ELF, .so, docs, headers)"
	find /usr/bin /usr/lib /usr/share/doc /usr/include -type f -size +1k 2>/dev/null |
		sort | xargs cat 2>/dev/null | head -c "$((size_mb * 1048576))" >"$dir/in"
	bytes=$(stat -c %s "$dir/in")
	[ "$bytes" -ge $((size_mb * 1048576)) ] || echo "note: only $bytes bytes of input found"
}
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
