/*
 * The server's send rate when none is given (frisbeed -W auto): found from what
 * the clients report lost. Every interval the loss of the client that lost most
 * (the blocks and repairs it asked for again, over what was sent) decides: the rate
 * grows by a quarter while nobody loses, by 3% while losses stay small, holds while
 * they are moderate, and when they are not drops by 15%, or to what got through of
 * the interval before when that is less, then waits an interval for requests about
 * packets sent before the drop. Loss the medium has anyway (the least of the last
 * intervals', up to 5%) is not counted against the rate. No clock is read here: the
 * caller passes the time, so the controller runs on a simulated clock in tests.
 */
#ifndef NDZ_ADAPT_H
#define NDZ_ADAPT_H

#include <stdint.h>

struct ndz_adapt;

struct ndz_adapt_opts {
	uint64_t min_bps, max_bps;     /* bounds, min >= 1 */
	uint64_t start_bps;            /* first rate, within the bounds */
	uint64_t interval_ns;          /* how often the rate changes; 0: 200 ms */
};

/* ndz_adapt_create - a controller at start_bps from now_ns; NDZ_EINVAL, NDZ_ENOMEM. */
int ndz_adapt_create(const struct ndz_adapt_opts *o, uint64_t now_ns, struct ndz_adapt **out);
/* ndz_adapt_free - free a; accepts NULL. */
void ndz_adapt_free(struct ndz_adapt *a);

/* ndz_adapt_sent - packets (blocks or repairs) went out. */
void ndz_adapt_sent(struct ndz_adapt *a, uint64_t packets);

/*
 * ndz_adapt_lost - client asked again for packets it lost (the blocks of a PREQUEST,
 * the repairs of an RREQUEST; not a REQUEST for a chunk it never had).
 */
void ndz_adapt_lost(struct ndz_adapt *a, uint32_t client, uint64_t packets);

/* ndz_adapt_rate - the rate to send at, at now_ns (ends an interval when one is due). */
uint64_t ndz_adapt_rate(struct ndz_adapt *a, uint64_t now_ns);

#endif
