/* The one clock (clock.h): CLOCK_MONOTONIC and CLOCK_REALTIME in one place. */
#include <time.h>

#include "clock.h"

static uint64_t ns_of(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * NDZ_NS_PER_S + (uint64_t)ts.tv_nsec;
}

uint64_t ndz_now_ns(void)
{
	return ns_of(CLOCK_MONOTONIC);
}

uint64_t ndz_now_ms(void)
{
	return ns_of(CLOCK_MONOTONIC) / NDZ_NS_PER_MS;
}

double ndz_now_s(void)
{
	return (double)ns_of(CLOCK_MONOTONIC) / 1e9;
}

uint64_t ndz_wall_ns(void)
{
	return ns_of(CLOCK_REALTIME);
}
