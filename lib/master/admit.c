/* Places for connections not yet past their first message, per host and in all. */
#include <string.h>

#include "admit.h"

void ndz_admit_init(struct ndz_admit *a)
{
	memset(a, 0, sizeof(*a));
}

/* The index of addr's entry, or -1. */
static int find(const struct ndz_admit *a, uint32_t addr)
{
	for (int i = 0; i < NDZ_ADMIT_MAX; i++)
		if (a->host[i].n && a->host[i].addr == addr)
			return i;
	return -1;
}

#define HOST_FULL "max-pending-host of its connections wait"
#define ALL_FULL "max-pending connections wait"

int ndz_admit_take(struct ndz_admit *a, uint32_t addr, unsigned max_total, unsigned max_host,
		   struct ndz_error *e)
{
	int i = find(a, addr);

	if (max_total > NDZ_ADMIT_MAX)
		max_total = NDZ_ADMIT_MAX;
	if (i >= 0 && a->host[i].n >= max_host)
		return ndz_error_set(e, NDZ_ECONNS, 0, HOST_FULL);
	if (a->total >= max_total)
		return ndz_error_set(e, NDZ_ECONNS, 0, ALL_FULL);
	if (max_host == 0)
		return ndz_error_set(e, NDZ_ECONNS, 0, HOST_FULL);
	if (i < 0) {
		/* total < NDZ_ADMIT_MAX places are held, so some entry is free */
		for (i = 0; a->host[i].n; i++)
			;
		a->host[i].addr = addr;
	}
	a->host[i].n++;
	a->total++;
	return 0;
}

void ndz_admit_release(struct ndz_admit *a, uint32_t addr)
{
	int i = find(a, addr);

	if (i < 0)
		return;
	a->host[i].n--;
	a->total--;
}

unsigned ndz_admit_held(const struct ndz_admit *a, uint32_t addr)
{
	int i = find(a, addr);

	return i < 0 ? 0 : a->host[i].n;
}
