/* Token-bucket pacing on CLOCK_MONOTONIC. */
#include <errno.h>
#include <time.h>

#include "pace.h"

void ndz_pace_init(struct ndz_pace *p, uint64_t rate_bps, uint64_t burst_bytes, uint64_t now_ns)
{
	if (burst_bytes < 3000)
		burst_bytes = 3000;
	p->rate_bps = rate_bps;
	p->depth = (double)burst_bytes * 8;
	p->tokens = p->depth;
	p->last_ns = now_ns;
}

static void refill(struct ndz_pace *p, uint64_t now_ns)
{
	if (now_ns <= p->last_ns)
		return;
	p->tokens += (double)(now_ns - p->last_ns) * (double)p->rate_bps / 1e9;
	if (p->tokens > p->depth)
		p->tokens = p->depth;
	p->last_ns = now_ns;
}

void ndz_pace_set_rate(struct ndz_pace *p, uint64_t rate_bps, uint64_t burst_bytes,
		       uint64_t now_ns)
{
	refill(p, now_ns);
	if (burst_bytes < 3000)
		burst_bytes = 3000;
	p->rate_bps = rate_bps;
	p->depth = (double)burst_bytes * 8;
	if (p->tokens > p->depth)
		p->tokens = p->depth;
}

uint64_t ndz_pace_delay(struct ndz_pace *p, uint64_t bytes, uint64_t now_ns)
{
	double need;

	if (!p->rate_bps)
		return 0;
	refill(p, now_ns);
	need = (double)bytes * 8 - p->tokens;
	if (need <= 0)
		return 0;
	return (uint64_t)(need * 1e9 / (double)p->rate_bps) + 1;
}

void ndz_pace_take(struct ndz_pace *p, uint64_t bytes, uint64_t now_ns)
{
	if (!p->rate_bps)
		return;
	refill(p, now_ns);
	p->tokens -= (double)bytes * 8;
}

void ndz_pace_sleep_until(uint64_t until_ns)
{
	struct timespec ts = { (time_t)(until_ns / 1000000000u), (long)(until_ns % 1000000000u) };

	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

void ndz_pace_wait(struct ndz_pace *p, uint64_t bytes)
{
	uint64_t now = ndz_now_ns(), d;

	while ((d = ndz_pace_delay(p, bytes, now)) > 0) {
		ndz_pace_sleep_until(now + d);
		now = ndz_now_ns();
	}
	ndz_pace_take(p, bytes, now);
}
