/* Sector range lists. */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "ranges.h"

void ndz_ranges_init(struct ndz_ranges *r)
{
	r->v = NULL;
	r->n = 0;
	r->alloc = 0;
}

void ndz_ranges_release(struct ndz_ranges *r)
{
	free(r->v);
	ndz_ranges_init(r);
}

void ndz_ranges_clear(struct ndz_ranges *r)
{
	r->n = 0;
}

/* Room for need ranges; NDZ_ENOMEM with e saying how many were wanted. */
static int grow(struct ndz_ranges *r, size_t need, struct ndz_error *e)
{
	struct ndz_range *v;
	size_t alloc;

	if (need <= r->alloc)
		return 0;
	alloc = r->alloc ? r->alloc : 16;
	while (alloc < need) {
		if (alloc > SIZE_MAX / 2 / sizeof(*v))
			return ndz_error_set(e, NDZ_ENOMEM, 0, "range list of %zu ranges: %s", need,
					     ndz_strerror(NDZ_ENOMEM));
		alloc *= 2;
	}
	v = realloc(r->v, alloc * sizeof(*v));
	if (!v)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "range list of %zu ranges: %s", need,
				     ndz_strerror(NDZ_ENOMEM));
	r->v = v;
	r->alloc = alloc;
	return 0;
}

int ndz_ranges_add(struct ndz_ranges *r, uint64_t start, uint64_t count, struct ndz_error *e)
{
	int rc;

	if (count == 0)
		return 0;
	if (start + count < start)
		return ndz_error_set(e, NDZ_ERANGE, 0, "%llu sectors from sector %llu: past the "
				     "end of the sector space", (unsigned long long)count,
				     (unsigned long long)start);
	if (r->n) {
		struct ndz_range *last = &r->v[r->n - 1];
		uint64_t end = last->start + last->count;

		if (start >= last->start && start <= end) {
			if (start + count > end)
				last->count = start + count - last->start;
			return 0;
		}
	}
	rc = grow(r, r->n + 1, e);
	if (rc < 0)
		return rc;
	r->v[r->n].start = start;
	r->v[r->n].count = count;
	r->n++;
	return 0;
}

static int cmp_range(const void *a, const void *b)
{
	const struct ndz_range *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

void ndz_ranges_normalize(struct ndz_ranges *r)
{
	size_t i, out = 0;

	if (r->n < 2)
		return;
	qsort(r->v, r->n, sizeof(*r->v), cmp_range);
	for (i = 1; i < r->n; i++) {
		struct ndz_range *cur = &r->v[out];
		uint64_t end = cur->start + cur->count;

		if (r->v[i].start <= end) {
			uint64_t e2 = r->v[i].start + r->v[i].count;

			if (e2 > end)
				cur->count = e2 - cur->start;
		} else {
			r->v[++out] = r->v[i];
		}
	}
	r->n = out + 1;
}

uint64_t ndz_ranges_total(const struct ndz_ranges *r)
{
	uint64_t t = 0;
	size_t i;

	for (i = 0; i < r->n; i++)
		t += r->v[i].count;
	return t;
}

void ndz_ranges_clip(struct ndz_ranges *r, uint64_t limit)
{
	size_t i;

	for (i = 0; i < r->n; i++) {
		if (r->v[i].start >= limit)
			break;
		if (r->v[i].count > limit - r->v[i].start) {
			r->v[i].count = limit - r->v[i].start;
			i++;
			break;
		}
	}
	r->n = i;
}

void ndz_ranges_fill_gaps(struct ndz_ranges *r, uint64_t min_gap)
{
	size_t i, out = 0;

	if (r->n < 2)
		return;
	for (i = 1; i < r->n; i++) {
		struct ndz_range *cur = &r->v[out];
		uint64_t end = cur->start + cur->count;

		if (r->v[i].start - end < min_gap)
			cur->count = r->v[i].start + r->v[i].count - cur->start;
		else
			r->v[++out] = r->v[i];
	}
	r->n = out + 1;
}

int ndz_ranges_invert(const struct ndz_ranges *r, uint64_t limit, struct ndz_ranges *out,
		      struct ndz_error *e)
{
	uint64_t pos = 0;
	size_t i;
	int rc;

	ndz_ranges_clear(out);
	for (i = 0; i < r->n && r->v[i].start < limit; i++) {
		rc = ndz_ranges_add(out, pos, r->v[i].start - pos, e);
		if (rc < 0)
			return rc;
		pos = r->v[i].start + r->v[i].count;
	}
	if (pos < limit)
		return ndz_ranges_add(out, pos, limit - pos, e);
	return 0;
}

int ndz_ranges_union(struct ndz_ranges *dst, const struct ndz_ranges *src, struct ndz_error *e)
{
	size_t i, n = src->n;        /* src may be dst: its n grows in the loop */
	int rc = grow(dst, dst->n + n, e);

	if (rc < 0)
		return rc;
	for (i = 0; i < n; i++)
		dst->v[dst->n++] = src->v[i];
	ndz_ranges_normalize(dst);
	return 0;
}

int ndz_ranges_subtract(struct ndz_ranges *r, uint64_t start, uint64_t count,
			struct ndz_error *e)
{
	/* a count past the end of the sector space means "to the end" */
	uint64_t end = count > UINT64_MAX - start ? UINT64_MAX : start + count;
	size_t i;

	if (count == 0)
		return 0;
	for (i = 0; i < r->n; i++) {
		struct ndz_range *c = &r->v[i];
		uint64_t cend = c->start + c->count;

		if (cend <= start || c->start >= end)
			continue;
		if (c->start < start && cend > end) {
			int rc = grow(r, r->n + 1, e);

			if (rc < 0)
				return rc;
			c = &r->v[i];
			memmove(&r->v[i + 2], &r->v[i + 1], (r->n - i - 1) * sizeof(*c));
			r->v[i + 1].start = end;
			r->v[i + 1].count = cend - end;
			c->count = start - c->start;
			r->n++;
			return 0;
		}
		if (c->start < start) {
			c->count = start - c->start;
		} else if (cend > end) {
			c->count = cend - end;
			c->start = end;
		} else {
			memmove(c, c + 1, (r->n - i - 1) * sizeof(*c));
			r->n--;
			i--;
		}
	}
	return 0;
}
