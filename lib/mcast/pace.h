/*
 * Pacing of sends: a token bucket on the monotonic nanosecond clock, so a
 * sender never bursts far above its cap however its sleeps overshoot.
 */
#ifndef NDZ_PACE_H
#define NDZ_PACE_H

#include <stdint.h>

#include "core/clock.h"

struct ndz_pace {
	uint64_t rate_bps;             /* bits per second; 0: unlimited */
	double depth;                  /* bucket size in bits */
	double tokens;                 /* bits that may be sent now */
	uint64_t last_ns;              /* when tokens was last refilled */
};


/*
 * ndz_pace_init - a bucket of burst_bytes (raised to at least 2 * 1500 bytes)
 * filling at rate_bps, full at now_ns. rate_bps 0 never waits.
 */
void ndz_pace_init(struct ndz_pace *p, uint64_t rate_bps, uint64_t burst_bytes, uint64_t now_ns);

/*
 * ndz_pace_set_rate - from now_ns on, fill at rate_bps into a bucket of burst_bytes
 * (raised as in ndz_pace_init); what was earned until now at the old rate is kept,
 * up to the new depth.
 */
void ndz_pace_set_rate(struct ndz_pace *p, uint64_t rate_bps, uint64_t burst_bytes,
		       uint64_t now_ns);

/* ndz_pace_delay - nanoseconds from now_ns until bytes may be sent (0: now). */
uint64_t ndz_pace_delay(struct ndz_pace *p, uint64_t bytes, uint64_t now_ns);

/* ndz_pace_take - account bytes sent at now_ns (the bucket may go negative). */
void ndz_pace_take(struct ndz_pace *p, uint64_t bytes, uint64_t now_ns);

/* ndz_pace_sleep_until - sleep until until_ns on the monotonic clock (ndz_now_ns). */
void ndz_pace_sleep_until(uint64_t until_ns);

/* ndz_pace_wait - sleep until bytes may be sent, then take them. */
void ndz_pace_wait(struct ndz_pace *p, uint64_t bytes);

#endif
