/* Unit tests for lib/master/sitecache: a site's fetch state and its cache's evictions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "master/sitecache.h"

static void test_fetch_state(void **state)
{
	struct ndz_sitefetch f;
	struct ndz_error e = { 0 };
	uint32_t first = 99;

	(void)state;
	assert_int_equal(ndz_sitefetch_init(&f, 0, &e), NDZ_EINVAL);
	assert_int_equal(ndz_sitefetch_init(&f, 10, &e), 0);
	assert_false(ndz_sitefetch_done(&f));
	/* nothing here: the whole image, in runs of at most max */
	assert_int_equal(ndz_sitefetch_next(&f, 0, 4, &first), 4);
	assert_int_equal(first, 0);
	ndz_sitefetch_mark(&f, 0);
	ndz_sitefetch_mark(&f, 1);
	ndz_sitefetch_mark(&f, 1);                 /* again: counted once */
	ndz_sitefetch_mark(&f, 10);                /* past the end: ignored */
	assert_int_equal(f.have, 2);
	assert_true(ndz_sitefetch_has(&f, 1));
	assert_false(ndz_sitefetch_has(&f, 2));
	assert_false(ndz_sitefetch_has(&f, 10));
	ndz_sitefetch_mark(&f, 4);
	/* a run stops at a chunk already here */
	assert_int_equal(ndz_sitefetch_next(&f, 0, 16, &first), 2);
	assert_int_equal(first, 2);
	/* asked from a later chunk (where clients are), it starts there */
	assert_int_equal(ndz_sitefetch_next(&f, 5, 16, &first), 5);
	assert_int_equal(first, 5);
	for (uint32_t i = 5; i < 10; i++)
		ndz_sitefetch_mark(&f, i);
	/* from past what is missing: wraps to the start */
	assert_int_equal(ndz_sitefetch_next(&f, 7, 16, &first), 2);
	assert_int_equal(first, 2);
	ndz_sitefetch_mark(&f, 2);
	ndz_sitefetch_mark(&f, 3);
	assert_true(ndz_sitefetch_done(&f));
	assert_int_equal(ndz_sitefetch_next(&f, 0, 16, &first), 0);
	ndz_sitefetch_release(&f);
	ndz_sitefetch_release(&f);                 /* released twice: fine */
}

static void test_cache_fits(void **state)
{
	struct ndz_sitecache_entry c[] = { { "a", 100, 1, 0, 0 }, { "b", 100, 2, 0, 0 } };
	struct ndz_error e = { 0 };
	size_t out[2], n = 9;

	(void)state;
	assert_int_equal(ndz_sitecache_evict(c, 2, 100, 300, out, &n, &e), 0);
	assert_int_equal(n, 0);
	/* unbounded */
	assert_int_equal(ndz_sitecache_evict(c, 2, 1u << 30, 0, out, &n, &e), 0);
	assert_int_equal(n, 0);
	/* empty */
	assert_int_equal(ndz_sitecache_evict(NULL, 0, 300, 300, out, &n, &e), 0);
	assert_int_equal(n, 0);
}

static void test_cache_lru(void **state)
{
	/* used: c oldest, then a, then b, d newest */
	struct ndz_sitecache_entry c[] = { { "a", 100, 5, 0, 0 }, { "b", 100, 7, 0, 0 },
					   { "c", 100, 3, 0, 0 }, { "d", 100, 9, 0, 0 } };
	struct ndz_error e = { 0 };
	size_t out[4], n;

	(void)state;
	assert_int_equal(ndz_sitecache_evict(c, 4, 100, 400, out, &n, &e), 0);
	assert_int_equal(n, 1);
	assert_int_equal(out[0], 2);               /* c */
	assert_int_equal(ndz_sitecache_evict(c, 4, 150, 400, out, &n, &e), 0);
	assert_int_equal(n, 2);
	assert_int_equal(out[0], 2);               /* c, then a */
	assert_int_equal(out[1], 0);
}

static void test_cache_pin_in_use(void **state)
{
	/* a oldest but pinned, b next but served now: c goes, then d */
	struct ndz_sitecache_entry c[] = { { "a", 100, 1, 1, 0 }, { "b", 100, 2, 0, 1 },
					   { "c", 100, 3, 0, 0 }, { "d", 100, 4, 0, 0 } };
	struct ndz_error e = { 0 };
	size_t out[4], n = 9;

	(void)state;
	assert_int_equal(ndz_sitecache_evict(c, 4, 200, 400, out, &n, &e), 0);
	assert_int_equal(n, 2);
	assert_int_equal(out[0], 2);
	assert_int_equal(out[1], 3);
	/* the kept ones and the new one do not fit: refused, nothing evicted */
	assert_int_equal(ndz_sitecache_evict(c, 4, 201, 400, out, &n, &e), NDZ_ECACHEFULL);
	assert_int_equal(n, 0);
	assert_non_null(strstr(ndz_error_msg(&e), "pinned or in use"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fetch_state),
		cmocka_unit_test(test_cache_fits),
		cmocka_unit_test(test_cache_lru),
		cmocka_unit_test(test_cache_pin_in_use),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
