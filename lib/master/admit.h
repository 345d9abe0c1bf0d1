/*
 * Admission of connections that have not yet said who they are (the master's TCP
 * port before the first message): counted per host and in all, so that idle
 * connections from one host cannot take every place. Pure bookkeeping, no locking:
 * the caller serialises.
 */
#ifndef NDZ_ADMIT_H
#define NDZ_ADMIT_H

#include <stdint.h>

#define NDZ_ADMIT_MAX 256              /* the largest total a caller may ask for */

enum {
	NDZ_ADMIT_OK = 0,
	NDZ_ADMIT_HOST = 1,            /* the host holds max_host places already */
	NDZ_ADMIT_TOTAL = 2,           /* max_total places are held */
};

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
 * hold fewer than max_total (max_total is cut to NDZ_ADMIT_MAX): NDZ_ADMIT_OK, else
 * NDZ_ADMIT_HOST or NDZ_ADMIT_TOTAL and nothing taken. Limits are given per call,
 * so a smaller limit after a reload only refuses new places.
 */
int ndz_admit_take(struct ndz_admit *a, uint32_t addr, unsigned max_total, unsigned max_host);

/* ndz_admit_release - give back one place of addr's; one it does not hold is ignored. */
void ndz_admit_release(struct ndz_admit *a, uint32_t addr);

/* ndz_admit_held - places addr holds. */
unsigned ndz_admit_held(const struct ndz_admit *a, uint32_t addr);

#endif
