/*
 * A per-host datagram limit: a token bucket per source address (lib/mcast/pace),
 * held in a small fixed table; when the table is full the host heard from least
 * recently gives its place up. A pure object over a clock (the time is passed in):
 * no sockets, no locking (the caller serialises). The lab's ASK and REPORT
 * datagrams go through one (lib/mserve/labsrv), the master's control requests and
 * upload connections through another (ndz_master_host_ok).
 */
#ifndef NDZ_HOSTLIMIT_H
#define NDZ_HOSTLIMIT_H

#include <stddef.h>
#include <stdint.h>

#include "mcast/pace.h"

#define NDZ_HOSTLIMIT_SLOTS 1024       /* hosts tracked at once (the GET limiter had 1024) */

struct ndz_hostlimit {
	uint64_t rate_bps, burst;      /* the buckets' rate and depth (pace's units) */
	struct {
		int used;
		uint32_t addr;         /* network order */
		uint64_t seen_ns;      /* its last datagram: the least recent goes first */
		struct ndz_pace bucket;
	} slot[NDZ_HOSTLIMIT_SLOTS];
};

/*
 * ndz_hostlimit_init - an empty table: each host may send rate datagrams a second
 * (at least 1), in bursts of burst (at least 1).
 */
void ndz_hostlimit_init(struct ndz_hostlimit *h, unsigned rate, unsigned burst);

/*
 * ndz_hostlimit_set - a new rate and burst (as ndz_hostlimit_init takes them) from
 * now_ns on, for the hosts tracked too: what they earned until now is kept, up to
 * the new burst.
 */
void ndz_hostlimit_set(struct ndz_hostlimit *h, unsigned rate, unsigned burst, uint64_t now_ns);

/*
 * ndz_hostlimit_ok - a datagram from addr (network order) at now_ns (monotonic,
 * never going back): 1 when it is within its host's rate (and counts), 0 when it is
 * over (drop it). A host new to the table (or back after its place was given up)
 * starts with a full burst.
 */
int ndz_hostlimit_ok(struct ndz_hostlimit *h, uint32_t addr, uint64_t now_ns);

/* ndz_hostlimit_tracked - 1 when addr holds a place in the table, else 0. */
int ndz_hostlimit_tracked(const struct ndz_hostlimit *h, uint32_t addr);

#endif
