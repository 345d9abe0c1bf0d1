/*
 * The one clock of the library and the programs: monotonic time for timeouts,
 * pacing and rates, wall time for what people read (logs, state files). Code that
 * must run on a simulated clock (lib/mcast's objects, lib/master) takes the time
 * as an argument instead of calling these.
 */
#ifndef NDZ_CLOCK_H
#define NDZ_CLOCK_H

#include <stdint.h>

#define NDZ_NS_PER_S  1000000000ull
#define NDZ_NS_PER_MS 1000000ull

/* ndz_now_ns - CLOCK_MONOTONIC in nanoseconds. */
uint64_t ndz_now_ns(void);

/* ndz_now_ms - CLOCK_MONOTONIC in milliseconds. */
uint64_t ndz_now_ms(void);

/* ndz_now_s - CLOCK_MONOTONIC in seconds, with its fraction. */
double ndz_now_s(void);

/* ndz_wall_ns - CLOCK_REALTIME (the Unix epoch) in nanoseconds. */
uint64_t ndz_wall_ns(void);

#endif
