/* A site master's decisions: the fetch state of an image, and the cache's evictions. */
#include <stdlib.h>
#include <string.h>

#include "sitecache.h"
#include "trust/index.h"

int ndz_sitefetch_init(struct ndz_sitefetch *f, uint32_t chunks, struct ndz_error *e)
{
	memset(f, 0, sizeof(*f));
	if (chunks == 0 || chunks > NDZ_INDEX_MAX_CHUNKS)
		return ndz_error_set(e, NDZ_EINVAL, 0, "fetch state: %u chunks", chunks);
	if (!(f->bits = calloc((chunks + 7) / 8, 1)))
		return ndz_error_set(e, NDZ_ENOMEM, 0, "fetch state: %u chunks", chunks);
	f->chunks = chunks;
	return 0;
}

void ndz_sitefetch_release(struct ndz_sitefetch *f)
{
	free(f->bits);
	memset(f, 0, sizeof(*f));
}

int ndz_sitefetch_has(const struct ndz_sitefetch *f, uint32_t i)
{
	return i < f->chunks && (f->bits[i / 8] >> (i % 8) & 1);
}

void ndz_sitefetch_mark(struct ndz_sitefetch *f, uint32_t i)
{
	if (i >= f->chunks || ndz_sitefetch_has(f, i))
		return;
	f->bits[i / 8] |= (uint8_t)(1u << (i % 8));
	f->have++;
}

int ndz_sitefetch_done(const struct ndz_sitefetch *f)
{
	return f->chunks && f->have == f->chunks;
}

uint32_t ndz_sitefetch_next(const struct ndz_sitefetch *f, uint32_t from, uint32_t max,
			    uint32_t *first)
{
	uint32_t n = 0;

	if (!f->chunks || ndz_sitefetch_done(f) || !max)
		return 0;
	if (from >= f->chunks)
		from = 0;
	for (uint32_t k = 0; k < f->chunks; k++) {
		uint32_t i = (from + k) % f->chunks;

		if (!ndz_sitefetch_has(f, i)) {
			*first = i;
			break;
		}
	}
	while (n < max && *first + n < f->chunks && !ndz_sitefetch_has(f, *first + n))
		n++;
	return n;
}

int ndz_sitecache_evict(const struct ndz_sitecache_entry *ents, size_t n, uint64_t need,
			uint64_t limit, size_t *out, size_t *nout, struct ndz_error *e)
{
	uint64_t held = 0, keep = 0;

	*nout = 0;
	for (size_t i = 0; i < n; i++) {
		held += ents[i].bytes;
		if (ents[i].pinned || ents[i].in_use)
			keep += ents[i].bytes;
	}
	if (!limit || held + need <= limit)
		return 0;
	if (keep + need > limit)
		return ndz_error_set(e, NDZ_ECACHEFULL, 0, "%s: %llu bytes wanted, %llu of %llu "
				     "held by images pinned or in use", ndz_strerror(NDZ_ECACHEFULL),
				     (unsigned long long)need,
				     (unsigned long long)keep, (unsigned long long)limit);
	/* the least recently used evictable one, again and again, until it fits */
	while (held + need > limit) {
		size_t best = n;

		for (size_t i = 0; i < n; i++) {
			int taken = 0;

			if (ents[i].pinned || ents[i].in_use)
				continue;
			for (size_t k = 0; k < *nout; k++)
				taken |= out[k] == i;
			if (!taken && (best == n || ents[i].used < ents[best].used))
				best = i;
		}
		out[(*nout)++] = best;  /* keep + need <= limit: one is always left */
		held -= ents[best].bytes;
	}
	return 0;
}
