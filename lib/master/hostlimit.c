/* A per-host datagram limit: token buckets in a fixed table, least recently heard evicted. */
#include <string.h>

#include "hostlimit.h"

#define UNIT 3000                      /* one datagram in the bucket's bytes (pace's least depth) */

void ndz_hostlimit_init(struct ndz_hostlimit *h, unsigned rate, unsigned burst)
{
	memset(h, 0, sizeof(*h));
	h->rate_bps = (uint64_t)(rate ? rate : 1) * UNIT * 8;
	h->burst = (uint64_t)(burst ? burst : 1) * UNIT;
}

void ndz_hostlimit_set(struct ndz_hostlimit *h, unsigned rate, unsigned burst, uint64_t now_ns)
{
	h->rate_bps = (uint64_t)(rate ? rate : 1) * UNIT * 8;
	h->burst = (uint64_t)(burst ? burst : 1) * UNIT;
	for (size_t k = 0; k < NDZ_HOSTLIMIT_SLOTS; k++)
		if (h->slot[k].used)
			ndz_pace_set_rate(&h->slot[k].bucket, h->rate_bps, h->burst, now_ns);
}

int ndz_hostlimit_ok(struct ndz_hostlimit *h, uint32_t addr, uint64_t now_ns)
{
	size_t k, lru = 0;

	for (k = 0; k < NDZ_HOSTLIMIT_SLOTS; k++) {
		if (h->slot[k].used && h->slot[k].addr == addr)
			break;
		/* a free place first, else the least recently heard */
		if (h->slot[lru].used && (!h->slot[k].used || h->slot[k].seen_ns < h->slot[lru].seen_ns))
			lru = k;
	}
	if (k == NDZ_HOSTLIMIT_SLOTS) {
		k = lru;
		h->slot[k].used = 1;
		h->slot[k].addr = addr;
		ndz_pace_init(&h->slot[k].bucket, h->rate_bps, h->burst, now_ns);
	}
	h->slot[k].seen_ns = now_ns;
	if (ndz_pace_delay(&h->slot[k].bucket, UNIT, now_ns) > 0)
		return 0;
	ndz_pace_take(&h->slot[k].bucket, UNIT, now_ns);
	return 1;
}

int ndz_hostlimit_tracked(const struct ndz_hostlimit *h, uint32_t addr)
{
	for (size_t k = 0; k < NDZ_HOSTLIMIT_SLOTS; k++)
		if (h->slot[k].used && h->slot[k].addr == addr)
			return 1;
	return 0;
}
