# The test vectors' recipe, sourced by tests/tools/make-vectors.sh (which made the
# files of doc/vectors once) and tests/cli/vectors.sh (which checks them). POSIX sh
# and awk only, so that any machine makes the very same source bytes.
# shellcheck shell=sh

# the images' UUIDs: fixed, so that imagezip makes the same image again
VEC_UUID_ZSTD=6e647a00-7665-4374-8f72-000000000001
VEC_UUID_ZLIB=6e647a00-7665-4374-8f72-000000000002
VEC_UUID_AES=6e647a00-7665-4374-8f72-000000000003
VEC_UUID_XCHACHA=6e647a00-7665-4374-8f72-000000000004

# vec_lines FROM TO: lines FROM to TO-1 of text, 45 bytes each
vec_lines() {
	awk -v a="$1" -v b="$2" 'BEGIN { for (i = a; i < b; i++)
		printf "ndz test vector, line %05d of 05000: %08x\n", i,
			(i * 40503) % 65536 * 32768 + i % 32768 }'
}

# vec_source: the source on stdout, 300,563 bytes (not a whole number of sectors):
# 2500 lines, 64 KiB of zeros, 2500 lines, a last line
vec_source() {
	vec_lines 0 2500
	head -c 65536 /dev/zero
	vec_lines 2500 5000
	printf 'end of the ndz test vector\n'
}
