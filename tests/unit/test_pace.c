/* Unit tests for lib/pace: the token bucket holds the cap and never bursts past its depth. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "mcast/pace.h"

#define SEC 1000000000ull

/* Send 1072-byte packets as soon as allowed on a simulated clock for one second. */
static uint64_t simulate(uint64_t rate, uint64_t burst, uint64_t step_ns, uint64_t *max_in_1ms)
{
	struct ndz_pace p;
	uint64_t now = 0, bytes = 0, win_start = 0, win_bytes = 0;

	ndz_pace_init(&p, rate, burst, 0);
	*max_in_1ms = 0;
	while (now < SEC) {
		uint64_t d = ndz_pace_delay(&p, 1072, now);

		if (d) {
			/* a sleep overshoots by up to step_ns */
			now += d + step_ns;
			continue;
		}
		ndz_pace_take(&p, 1072, now);
		bytes += 1072;
		if (now - win_start >= 1000000) {
			win_start = now;
			win_bytes = 0;
		}
		win_bytes += 1072;
		if (win_bytes > *max_in_1ms)
			*max_in_1ms = win_bytes;
	}
	return bytes;
}

static void test_rate(void **state)
{
	static const uint64_t rates[] = { 10000000, 100000000, 500000000, 1000000000 };

	(void)state;
	for (size_t i = 0; i < 4; i++) {
		uint64_t r = rates[i], burst = r / 8 / 1000, peak;
		/* with sleeps overshooting by 60 us the average still holds within 1% */
		uint64_t got = simulate(r, burst, 60000, &peak) * 8;

		assert_true(got <= r + burst * 8 + 1072 * 8);
		assert_true(got >= r - r / 100);
		/* in any millisecond at most the bucket plus a millisecond's refill */
		assert_true(peak <= 2 * (burst < 3000 ? 3000 : burst) + 1072);
	}
}

static void test_unlimited(void **state)
{
	struct ndz_pace p;

	(void)state;
	ndz_pace_init(&p, 0, 0, 0);
	assert_int_equal(ndz_pace_delay(&p, 1 << 30, 0), 0);
	ndz_pace_take(&p, 1 << 30, 0);
	assert_int_equal(ndz_pace_delay(&p, 1 << 30, 0), 0);
}

static void test_delay_exact(void **state)
{
	struct ndz_pace p;
	uint64_t d;

	(void)state;
	/* 8 Mbit/s: 1000 bytes take 1 ms once the 3000-byte bucket is spent */
	ndz_pace_init(&p, 8000000, 3000, 0);
	ndz_pace_take(&p, 3000, 0);
	d = ndz_pace_delay(&p, 1000, 0);
	assert_true(d >= 999000 && d <= 1001000);
	assert_int_equal(ndz_pace_delay(&p, 1000, 1000001), 0);
	/* a long pause refills only up to the bucket */
	assert_int_equal(ndz_pace_delay(&p, 3000, 10 * SEC), 0);
	assert_true(ndz_pace_delay(&p, 3001, 10 * SEC) > 0);
}

static void test_wait_real_clock(void **state)
{
	struct ndz_pace p;
	uint64_t t0 = ndz_now_ns(), el;

	(void)state;
	/* 200 packets of 1000 bytes at 16 Mbit/s: about 100 ms after the 3 KB bucket */
	ndz_pace_init(&p, 16000000, 3000, t0);
	for (int i = 0; i < 200; i++)
		ndz_pace_wait(&p, 1000);
	el = ndz_now_ns() - t0;
	assert_true(el >= 95000000);
	assert_true(el < 400000000);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_unlimited),
		cmocka_unit_test(test_delay_exact),
		cmocka_unit_test(test_wait_real_clock),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
