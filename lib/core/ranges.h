/* Sorted lists of sector ranges: what a filesystem has allocated, what a chunk holds. */
#ifndef NDZ_RANGES_H
#define NDZ_RANGES_H

#include <stddef.h>
#include <stdint.h>

#include "err.h"

struct ndz_range {
	uint64_t start;                /* first sector */
	uint64_t count;                /* number of sectors, > 0 */
};

/*
 * A growable array of ranges. Invariant after ndz_ranges_normalize (and kept by
 * ndz_ranges_add when ranges arrive in order): sorted by start, non-empty,
 * non-overlapping and non-adjacent (touching ranges are merged).
 */
struct ndz_ranges {
	struct ndz_range *v;
	size_t n;
	size_t alloc;
};

#define NDZ_RANGES_INIT { NULL, 0, 0 }

void ndz_ranges_init(struct ndz_ranges *r);
/* ndz_ranges_release - free the array; r is empty and reusable afterwards. */
void ndz_ranges_release(struct ndz_ranges *r);
/* ndz_ranges_clear - forget the ranges, keep the memory. */
void ndz_ranges_clear(struct ndz_ranges *r);

/*
 * ndz_ranges_add - append [start, start+count). Merged into the last range when it
 * touches or overlaps it; ranges out of order are accepted but then
 * ndz_ranges_normalize must be called. count 0 is ignored.
 * Returns 0, NDZ_ERANGE on overflow, or NDZ_ENOMEM, with e saying which (the
 * caller prefixes what the ranges are of).
 */
int ndz_ranges_add(struct ndz_ranges *r, uint64_t start, uint64_t count, struct ndz_error *e);

/* ndz_ranges_normalize - sort and merge to restore the invariant. */
void ndz_ranges_normalize(struct ndz_ranges *r);

/* ndz_ranges_total - total sectors in the ranges. */
uint64_t ndz_ranges_total(const struct ndz_ranges *r);

/*
 * ndz_ranges_clip - drop everything at or beyond sector limit.
 */
void ndz_ranges_clip(struct ndz_ranges *r, uint64_t limit);

/*
 * ndz_ranges_fill_gaps - merge neighbouring ranges whose gap is shorter than
 * min_gap sectors (small free runs are cheaper to compress than to skip).
 */
void ndz_ranges_fill_gaps(struct ndz_ranges *r, uint64_t min_gap);

/*
 * ndz_ranges_invert - out = [0, limit) minus r (r normalized).
 * Returns 0 or NDZ_ENOMEM with e set.
 */
int ndz_ranges_invert(const struct ndz_ranges *r, uint64_t limit, struct ndz_ranges *out,
		      struct ndz_error *e);

/*
 * ndz_ranges_union - add all of src to dst and normalize dst.
 * Returns 0 or NDZ_ENOMEM with e set.
 */
int ndz_ranges_union(struct ndz_ranges *dst, const struct ndz_ranges *src, struct ndz_error *e);

/*
 * ndz_ranges_subtract - remove [start, start+count) from r (r normalized).
 * Returns 0 or NDZ_ENOMEM (a range may split in two) with e set.
 */
int ndz_ranges_subtract(struct ndz_ranges *r, uint64_t start, uint64_t count,
			struct ndz_error *e);

#endif
