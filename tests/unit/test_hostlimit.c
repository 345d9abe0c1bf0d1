/* Unit tests for lib/master/hostlimit: per-address token buckets on a fake clock, LRU eviction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "master/hostlimit.h"

#define MS 1000000ull

static struct ndz_hostlimit h;

static unsigned burst_of(uint32_t addr, unsigned tries, uint64_t now)
{
	unsigned ok = 0;

	for (unsigned k = 0; k < tries; k++)
		ok += (unsigned)ndz_hostlimit_ok(&h, addr, now);
	return ok;
}

static void test_rate(void **state)
{
	uint32_t a = htonl(0x0a000001), b = htonl(0x0a000002);
	uint64_t t0 = 5000 * MS;

	(void)state;
	ndz_hostlimit_init(&h, 20, 40);
	/* a burst of 40, then nothing until the bucket refills */
	assert_int_equal(burst_of(a, 1000, t0), 40);
	assert_int_equal(ndz_hostlimit_ok(&h, a, t0 + 10 * MS), 0);
	/* 20 a second: one every 50 ms */
	assert_int_equal(burst_of(a, 5, t0 + 50 * MS), 1);
	assert_int_equal(burst_of(a, 100, t0 + 1050 * MS), 20);
	/* another address is not touched by a's flood */
	assert_int_equal(burst_of(b, 40, t0 + 1050 * MS), 40);
	/* a quiet host gets its whole burst back, no more */
	assert_int_equal(burst_of(a, 1000, t0 + 60000 * MS), 40);
}

static void test_lru(void **state)
{
	uint64_t t = 1000 * MS, after = t + (NDZ_HOSTLIMIT_SLOTS + 50) * 1000ull;
	uint32_t newcomer = NDZ_HOSTLIMIT_SLOTS + 100;

	(void)state;
	ndz_hostlimit_init(&h, 20, 40);
	/* address 1 floods; then the table fills with the others, a microsecond apart */
	assert_int_equal(burst_of(htonl(1), 100, t), 40);
	for (uint32_t k = 2; k <= NDZ_HOSTLIMIT_SLOTS; k++)
		assert_int_equal(ndz_hostlimit_ok(&h, htonl(k), t + k * 1000), 1);
	assert_true(ndz_hostlimit_tracked(&h, htonl(1)));
	/* address 1 heard again (dropped: its bucket is kept) is now the most recent */
	assert_int_equal(ndz_hostlimit_ok(&h, htonl(1), after), 0);
	/* a newcomer takes the place of the least recently heard: address 2 */
	assert_int_equal(ndz_hostlimit_ok(&h, htonl(newcomer), after + 1000), 1);
	assert_true(ndz_hostlimit_tracked(&h, htonl(newcomer)));
	assert_false(ndz_hostlimit_tracked(&h, htonl(2)));
	assert_true(ndz_hostlimit_tracked(&h, htonl(1)));
	assert_true(ndz_hostlimit_tracked(&h, htonl(3)));
	/* ... and address 1 still has no tokens */
	assert_int_equal(ndz_hostlimit_ok(&h, htonl(1), after + 2000), 0);
}

static void test_set(void **state)
{
	uint32_t a = htonl(0x0a000009);

	(void)state;
	ndz_hostlimit_init(&h, 20, 40);
	assert_int_equal(burst_of(a, 100, 0), 40);
	/* a reloaded configuration: 200 a second, bursts of 400, for a host tracked too */
	ndz_hostlimit_set(&h, 200, 400, 0);
	assert_int_equal(burst_of(a, 1000, 1000 * MS), 200);
	assert_int_equal(burst_of(a, 1000, 3000 * MS), 400);
	/* a smaller burst cuts what was earned */
	ndz_hostlimit_set(&h, 20, 10, 10000 * MS);
	assert_int_equal(burst_of(a, 1000, 10000 * MS), 10);
}

static void test_least(void **state)
{
	(void)state;
	ndz_hostlimit_init(&h, 0, 0);          /* raised to 1 a second, bursts of 1 */
	assert_int_equal(burst_of(htonl(7), 10, 0), 1);
	assert_int_equal(burst_of(htonl(7), 10, 999 * MS), 0);
	assert_int_equal(burst_of(htonl(7), 10, 1000 * MS), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_lru),
		cmocka_unit_test(test_set),
		cmocka_unit_test(test_least),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
