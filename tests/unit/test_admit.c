/* Unit tests for lib/admit: places per host and in all, released and taken again. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "master/admit.h"

static struct ndz_admit a;

/* A take that must be refused, for the reason why, taking nothing. */
static int take_refused(struct ndz_admit *t, uint32_t addr, unsigned max_total,
			unsigned max_host, const char *why)
{
	struct ndz_error e = { 0 };
	unsigned held = ndz_admit_held(t, addr);

	return ndz_admit_take(t, addr, max_total, max_host, &e) == NDZ_ECONNS &&
	       strcmp(ndz_error_msg(&e), why) == 0 && ndz_admit_held(t, addr) == held;
}

static void test_per_host(void **state)
{
	(void)state;
	ndz_admit_init(&a);
	for (int k = 0; k < 3; k++)
		assert_int_equal(ndz_admit_take(&a, 7, 10, 3, NULL), 0);
	/* the fourth from host 7 is refused; another host still gets in */
	assert_true(take_refused(&a, 7, 10, 3, "max-pending-host of its connections wait"));
	assert_int_equal(ndz_admit_held(&a, 7), 3);
	assert_int_equal(ndz_admit_take(&a, 8, 10, 3, NULL), 0);
	assert_int_equal(a.total, 4);
	ndz_admit_release(&a, 7);
	assert_int_equal(ndz_admit_take(&a, 7, 10, 3, NULL), 0);
	/* a host that holds nothing releases nothing */
	ndz_admit_release(&a, 9);
	assert_int_equal(a.total, 4);
	/* a smaller limit (a reload) refuses new places, keeps the old */
	assert_true(take_refused(&a, 7, 10, 1, "max-pending-host of its connections wait"));
	assert_int_equal(ndz_admit_held(&a, 7), 3);
	assert_true(take_refused(&a, 9, 10, 0, "max-pending-host of its connections wait"));
}

static void test_total(void **state)
{
	(void)state;
	ndz_admit_init(&a);
	for (uint32_t h = 1; h <= 5; h++)
		assert_int_equal(ndz_admit_take(&a, h, 5, 2, NULL), 0);
	assert_true(take_refused(&a, 6, 5, 2, "max-pending connections wait"));
	assert_true(take_refused(&a, 1, 5, 2, "max-pending connections wait"));
	assert_int_equal(ndz_admit_held(&a, 6), 0);
	ndz_admit_release(&a, 3);
	assert_int_equal(ndz_admit_held(&a, 3), 0);
	/* the freed entry is reused by a new host */
	assert_int_equal(ndz_admit_take(&a, 6, 5, 2, NULL), 0);
	for (uint32_t h = 1; h <= 6; h++)
		ndz_admit_release(&a, h);
	assert_int_equal(a.total, 0);
}

/* a total above the table's size is cut to it: every entry can be filled, none more */
static void test_full_table(void **state)
{
	(void)state;
	ndz_admit_init(&a);
	for (uint32_t h = 0; h < NDZ_ADMIT_MAX; h++)
		assert_int_equal(ndz_admit_take(&a, 1000 + h, 100000, 1, NULL), 0);
	assert_true(take_refused(&a, 1, 100000, 1, "max-pending connections wait"));
	for (uint32_t h = 0; h < NDZ_ADMIT_MAX; h++)
		assert_int_equal(ndz_admit_held(&a, 1000 + h), 1);
	ndz_admit_release(&a, 1000 + NDZ_ADMIT_MAX - 1);
	assert_int_equal(ndz_admit_take(&a, 1, 100000, 1, NULL), 0);
	assert_int_equal(ndz_admit_held(&a, 1), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_per_host),
		cmocka_unit_test(test_total),
		cmocka_unit_test(test_full_table),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
