/*
 * lib/core/bufpool: bounded, reused, shared by threads; and the restore pipeline's
 * ndz_unzip_put_owned giving a pool buffer back exactly once.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec/unzip.h"
#include "core/bufpool.h"
#include "core/err.h"
#include "core/format.h"

static void test_bounded_and_reused(void **state)
{
	struct ndz_bufpool *p;
	uint8_t *a, *b, *c;
	unsigned n, taken;

	(void)state;
	assert_int_equal(ndz_bufpool_create(100, 2, &p, NULL), 0);
	assert_int_equal(ndz_bufpool_size(p), 100);
	ndz_bufpool_stats(p, &n, &taken);
	assert_int_equal(n, 0);                /* none allocated before they are needed */
	a = ndz_bufpool_try_get(p, NULL);
	b = ndz_bufpool_get(p, NULL);
	assert_non_null(a);
	assert_non_null(b);
	assert_ptr_not_equal(a, b);
	memset(a, 1, 100);
	memset(b, 2, 100);
	assert_null(ndz_bufpool_try_get(p, NULL));   /* at most 2 */
	ndz_bufpool_stats(p, &n, &taken);
	assert_int_equal(n, 2);
	assert_int_equal(taken, 2);
	ndz_bufpool_put(p, a);
	ndz_bufpool_put(p, NULL);
	c = ndz_bufpool_try_get(p, NULL);
	assert_ptr_equal(c, a);                /* reused, not a new one */
	ndz_bufpool_release(p, b);
	ndz_bufpool_put(p, c);
	ndz_bufpool_stats(p, &n, &taken);
	assert_int_equal(n, 2);
	assert_int_equal(taken, 0);
	ndz_bufpool_free(p);
	ndz_bufpool_free(NULL);
}

static void test_bad_options(void **state)
{
	struct ndz_bufpool *p = (struct ndz_bufpool *)1;
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_bufpool_create(0, 2, &p, &e), NDZ_EINVAL);
	assert_null(p);
	assert_int_equal(e.code, NDZ_EINVAL);
	assert_int_equal(ndz_bufpool_create(10, 0, &p, NULL), NDZ_EINVAL);
}

struct giver {
	struct ndz_bufpool *p;
	uint8_t *buf;
	int gave;
};

static void *give_later(void *arg)
{
	struct giver *g = arg;

	usleep(20000);
	g->gave = 1;
	ndz_bufpool_put(g->p, g->buf);
	return NULL;
}

/* ndz_bufpool_get waits for a buffer another thread gives back. */
static void test_get_waits(void **state)
{
	struct giver g = { 0 };
	pthread_t t;
	uint8_t *b;

	(void)state;
	assert_int_equal(ndz_bufpool_create(64, 1, &g.p, NULL), 0);
	g.buf = ndz_bufpool_get(g.p, NULL);
	assert_non_null(g.buf);
	assert_int_equal(pthread_create(&t, NULL, give_later, &g), 0);
	b = ndz_bufpool_get(g.p, NULL);
	assert_true(g.gave);
	assert_ptr_equal(b, g.buf);
	pthread_join(t, NULL);
	ndz_bufpool_put(g.p, b);
	ndz_bufpool_free(g.p);
}

static int released;

static void count_release(void *ctx, uint8_t *buf)
{
	released++;
	ndz_bufpool_put(ctx, buf);
}

/*
 * ndz_unzip_put_owned takes the buffer: it comes back through release exactly once,
 * refused (no header) or after the pipeline failed, and none is left out at the end.
 */
static void test_unzip_put_owned_releases(void **state)
{
	struct ndz_unzip_opts uo;
	struct ndz_unzip *u;
	struct ndz_bufpool *p;
	uint8_t *b;
	unsigned n, taken;
	int rc;

	(void)state;
	assert_int_equal(ndz_bufpool_create(NDZ_CHUNK_SIZE, 2, &p, NULL), 0);
	ndz_unzip_opts_init(&uo);
	uo.verify_only = 1;
	uo.threads = 1;
	assert_int_equal(ndz_unzip_create(NULL, &uo, &u, NULL), 0);
	b = ndz_bufpool_get(p, NULL);
	assert_int_equal(ndz_unzip_put_owned(u, b, NULL, 0, count_release, p), 0);
	assert_int_equal(released, 1);
	/* a chunk that is none: the pipeline fails, and a buffer put then comes back */
	b = ndz_bufpool_get(p, NULL);
	memset(b, 0xee, NDZ_CHUNK_SIZE);
	assert_true(ndz_unzip_put(u, b, NULL, 0, NULL) < 0);
	rc = ndz_unzip_put_owned(u, b, NULL, 0, count_release, p);
	assert_true(rc < 0);
	assert_int_equal(released, 2);
	ndz_unzip_free(u);
	ndz_bufpool_stats(p, &n, &taken);
	assert_int_equal(taken, 0);
	ndz_bufpool_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bounded_and_reused),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_get_waits),
		cmocka_unit_test(test_unzip_put_owned_releases),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
