/*
 * Admission of connections that have not yet said who they are (the master's TCP
 * port before the first message): counted per host and in all, so that idle
 * connections from one host cannot take every place. Pure bookkeeping, no locking:
 * the caller serialises.
 */
#ifndef NDZ_ADMIT_H
#define NDZ_ADMIT_H

#include <stdint.h>

#include "core/err.h"

#define NDZ_ADMIT_MAX 256              /* the largest total a caller may ask for */

struct ndz_admit {
	unsigned total;
	struct {
		uint32_t addr;
		unsigned n;            /* 0: entry free */
	} host[NDZ_ADMIT_MAX];
};

/* ndz_admit_init - an empty table. */
void ndz_admit_init(struct ndz_admit *a);

/*
 * ndz_admit_take - one place for addr when it holds fewer than max_host and all
 * hold fewer than max_total (max_total is cut to NDZ_ADMIT_MAX): 0, else
 * NDZ_ECONNS and nothing taken, with e saying "max-pending-host of its connections
 * wait" (the host's limit) or "max-pending connections wait" (the total). Limits
 * are given per call, so a smaller limit after a reload only refuses new places.
 */
int ndz_admit_take(struct ndz_admit *a, uint32_t addr, unsigned max_total, unsigned max_host,
		   struct ndz_error *e);

/* ndz_admit_release - give back one place of addr's; one it does not hold is ignored. */
void ndz_admit_release(struct ndz_admit *a, uint32_t addr);

/* ndz_admit_held - places addr holds. */
unsigned ndz_admit_held(const struct ndz_admit *a, uint32_t addr);

#endif
