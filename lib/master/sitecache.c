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

/* ---- reuse: the chunks a site holds, by what they write ---- */

struct held {
	const struct ndz_index_entry *x;
	uint32_t src, chunk;
};

struct ndz_sitereuse {
	struct held *h;
	size_t n, cap;
	int sorted;
};

int ndz_sitereuse_create(struct ndz_sitereuse **out, struct ndz_error *e)
{
	if (!(*out = calloc(1, sizeof(**out))))
		return ndz_error_set(e, NDZ_ENOMEM, 0, "site reuse");
	return 0;
}

void ndz_sitereuse_free(struct ndz_sitereuse *r)
{
	if (!r)
		return;
	free(r->h);
	free(r);
}

size_t ndz_sitereuse_count(const struct ndz_sitereuse *r)
{
	return r->n;
}

int ndz_sitereuse_add(struct ndz_sitereuse *r, const struct ndz_index *ix, uint32_t src,
		      struct ndz_error *e)
{
	if (r->n + ix->chunks > r->cap) {
		size_t cap = (r->n + ix->chunks) * 2;
		struct held *h = realloc(r->h, cap * sizeof(*h));

		if (!h)
			return ndz_error_set(e, NDZ_ENOMEM, 0, "site reuse: %zu chunks", cap);
		r->h = h;
		r->cap = cap;
	}
	for (uint32_t i = 0; i < ix->chunks; i++)
		r->h[r->n++] = (struct held){ &ix->e[i], src, i };
	r->sorted = 0;
	return 0;
}

/* By digest, then first, last; then the order added (stable: the first added wins). */
static int held_cmp(const void *a, const void *b)
{
	const struct held *p = a, *q = b;
	int c = memcmp(p->x->digest, q->x->digest, NDZ_INDEX_DIGEST_LEN);

	if (c)
		return c;
	if (p->x->first != q->x->first)
		return p->x->first < q->x->first ? -1 : 1;
	if (p->x->last != q->x->last)
		return p->x->last < q->x->last ? -1 : 1;
	if (p->src != q->src)
		return p->src < q->src ? -1 : 1;
	return p->chunk < q->chunk ? -1 : p->chunk > q->chunk;
}

/* Do entries a and b write the same, made the same way as far as both say? */
static int same(const struct ndz_index_entry *a, const struct ndz_index_entry *b)
{
	if (a->first != b->first || a->last != b->last || a->nregions != b->nregions ||
	    memcmp(a->digest, b->digest, NDZ_INDEX_DIGEST_LEN) != 0)
		return 0;
	for (uint32_t k = 0; k < a->nregions; k++)
		if (a->regions[k].start != b->regions[k].start ||
		    a->regions[k].count != b->regions[k].count)
			return 0;
	if (!a->npieces || !b->npieces)
		return 1;
	if (a->npieces != b->npieces)
		return 0;              /* other codec output: the chunk's bytes differ */
	for (uint32_t k = 0; k < a->npieces; k++)
		if (a->pieces[k].doff != b->pieces[k].doff ||
		    a->pieces[k].dlen != b->pieces[k].dlen ||
		    a->pieces[k].coff != b->pieces[k].coff ||
		    a->pieces[k].clen != b->pieces[k].clen ||
		    memcmp(a->pieces[k].digest, b->pieces[k].digest, NDZ_INDEX_DIGEST_LEN) != 0)
			return 0;
	return 1;
}

int ndz_sitereuse_find(const struct ndz_sitereuse *r, const struct ndz_index_entry *x,
		       uint32_t *src, uint32_t *chunk)
{
	struct ndz_sitereuse *w = (struct ndz_sitereuse *)r;    /* sorted on first use */
	size_t lo = 0, hi;

	if (!r->n)
		return 0;
	if (!r->sorted) {
		qsort(w->h, w->n, sizeof(*w->h), held_cmp);
		w->sorted = 1;
	}
	/* the first held with x's digest, then those after it with the same digest */
	for (hi = r->n; lo < hi;) {
		size_t mid = lo + (hi - lo) / 2;

		if (memcmp(r->h[mid].x->digest, x->digest, NDZ_INDEX_DIGEST_LEN) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < r->n && !memcmp(r->h[lo].x->digest, x->digest, NDZ_INDEX_DIGEST_LEN); lo++)
		if (same(r->h[lo].x, x)) {
			*src = r->h[lo].src;
			*chunk = r->h[lo].chunk;
			return 1;
		}
	return 0;
}

int ndz_sitereuse_rebuild(uint8_t *c, uint32_t i, int last, const uint8_t uuid[16],
			  uint64_t source_bytes, struct ndz_error *e)
{
	struct ndz_chunk_hdr h;
	int rc;

	if ((rc = ndz_hdr_decode(c, &h, e)) != 0)
		return rc;
	if (h.incompat_flags & NDZ_INCOMPAT_ENCRYPTED)
		return ndz_error_set(e, NDZ_ENOTSUP, 0, "chunk %u: encrypted: not rebuilt", h.index);
	if (ndz_sectors_of(source_bytes) < h.last)
		return ndz_error_set(e, NDZ_EINVAL, 0, "chunk %u: past a source of %llu bytes",
				     h.index, (unsigned long long)source_bytes);
	h.index = i;
	memcpy(h.uuid, uuid, 16);
	h.source_bytes = source_bytes;
	h.source_sectors = ndz_sectors_of(source_bytes);
	h.chunk_flags = (h.chunk_flags & ~NDZ_CHUNK_LAST) | (last ? NDZ_CHUNK_LAST : 0);
	return ndz_hdr_encode(&h, c, e);
}
