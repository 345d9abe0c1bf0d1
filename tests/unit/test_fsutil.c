/* Unit tests for fs/fsutil.c: the modules' error formatter and bitmap runs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/err.h"
#include "fsutil.h"

static void test_bad(void **state)
{
	struct ndz_error err = { 0 };

	(void)state;
	assert_int_equal(ndz_fs_bad(&err, "xfs", "AG %u: %s", 3u, "bad AGF"), NDZ_EFS);
	assert_int_equal(err.code, NDZ_EFS);
	assert_string_equal(ndz_error_msg(&err), "xfs: AG 3: bad AGF");
	/* the first error wins */
	assert_int_equal(ndz_fs_bad(&err, "ufs", "later"), NDZ_EFS);
	assert_string_equal(ndz_error_msg(&err), "xfs: AG 3: bad AGF");
	assert_int_equal(ndz_fs_bad(NULL, "fat", "no context"), NDZ_EFS);
}

/* The runs of bits equal to set in [first, end), bit by bit, as a reference. */
static size_t naive_runs(const uint8_t *map, uint64_t first, uint64_t end, int set,
			 uint64_t *out)
{
	size_t n = 0;

	for (uint64_t i = first; i < end;) {
		uint64_t j;

		if (ndz_fs_bit(map, i) != set) {
			i++;
			continue;
		}
		for (j = i; j < end && ndz_fs_bit(map, j) == set; j++)
			;
		out[n++] = i;
		out[n++] = j;
		i = j;
	}
	return n;
}

static void check_runs(const uint8_t *map, uint64_t first, uint64_t end, int set)
{
	uint64_t want[2 * 1024], pos = first, a, b;
	size_t n = naive_runs(map, first, end, set, want), k = 0;

	while (ndz_fs_next_run(map, &pos, end, set, &a, &b)) {
		assert_true(k + 1 < n);
		assert_int_equal(a, want[k]);
		assert_int_equal(b, want[k + 1]);
		assert_int_equal(pos, b);
		k += 2;
	}
	assert_int_equal(k, n);
	assert_int_equal(pos, end);
}

static void test_bits(void **state)
{
	const uint8_t map[2] = { 0x05, 0x80 };

	(void)state;
	assert_int_equal(ndz_fs_bit(map, 0), 1);
	assert_int_equal(ndz_fs_bit(map, 1), 0);
	assert_int_equal(ndz_fs_bit(map, 2), 1);
	assert_int_equal(ndz_fs_bit(map, 15), 1);
	assert_int_equal(ndz_fs_bit(map, 14), 0);
}

static void test_runs_edges(void **state)
{
	uint8_t ones[8], zeros[8];
	uint64_t pos, a, b;

	(void)state;
	memset(ones, 0xff, sizeof(ones));
	memset(zeros, 0, sizeof(zeros));
	/* all set: one run, cut at end even inside a byte */
	pos = 3;
	assert_int_equal(ndz_fs_next_run(ones, &pos, 61, 1, &a, &b), 1);
	assert_int_equal(a, 3);
	assert_int_equal(b, 61);
	assert_int_equal(ndz_fs_next_run(ones, &pos, 61, 1, &a, &b), 0);
	assert_int_equal(pos, 61);
	/* none set: no run; runs of clear bits instead */
	pos = 0;
	assert_int_equal(ndz_fs_next_run(zeros, &pos, 64, 1, &a, &b), 0);
	assert_int_equal(pos, 64);
	pos = 0;
	assert_int_equal(ndz_fs_next_run(zeros, &pos, 64, 0, &a, &b), 1);
	assert_int_equal(a, 0);
	assert_int_equal(b, 64);
	/* an empty or inverted range */
	pos = 10;
	assert_int_equal(ndz_fs_next_run(ones, &pos, 10, 1, &a, &b), 0);
	assert_int_equal(pos, 10);
	/* a bit past end is never read as part of a run */
	zeros[1] = 0x01;
	pos = 0;
	assert_int_equal(ndz_fs_next_run(zeros, &pos, 8, 1, &a, &b), 0);
}

static void test_runs_random(void **state)
{
	uint8_t map[64];

	(void)state;
	srandom(7);
	for (int round = 0; round < 500; round++) {
		uint64_t first = (uint64_t)(random() % 64), end = (uint64_t)(random() % 513);
		int density = (int)(random() % 4);

		for (size_t i = 0; i < sizeof(map); i++) {
			/* long runs of whole bytes, and mixed bytes, in turn */
			long r = random();

			map[i] = density == 0 ? (uint8_t)r : (r % 4) < 2 ? 0x00 : (r % 4) == 2 ? 0xff :
				 (uint8_t)(r >> 8);
		}
		check_runs(map, first, end, 1);
		check_runs(map, first, end, 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad),
		cmocka_unit_test(test_bits),
		cmocka_unit_test(test_runs_edges),
		cmocka_unit_test(test_runs_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
