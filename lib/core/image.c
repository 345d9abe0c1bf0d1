/* The rules of a whole image over its chunks, and reading a stored image in order. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "image.h"
#include "orig.h"

/* Without an expected count, an index may run this far ahead of the highest seen. */
#define MAX_LEAP 65536u

struct place {
	uint64_t first, last;          /* sectors the chunk covers */
};

struct ndz_image {
	uint32_t expect;               /* chunks; 0: unknown */
	int have_uuid;
	uint8_t uuid[16];
	int have_id;
	struct ndz_chunk_hdr id;       /* the first chunk added: the image's identity */
	struct place *at;              /* per index, valid where seen */
	uint8_t *seen;                 /* per index: 1 when added */
	uint32_t cap;                  /* entries allocated */
	uint32_t added, top;           /* chunks added; highest index + 1 */
	int have_last;
	uint32_t last;                 /* index of the chunk flagged LAST */
};

int ndz_image_create(struct ndz_image **out, struct ndz_error *e)
{
	*out = calloc(1, sizeof(**out));
	return *out ? 0 : ndz_error_set(e, NDZ_ENOMEM, 0, "image: %s", ndz_strerror(NDZ_ENOMEM));
}

void ndz_image_free(struct ndz_image *im)
{
	if (!im)
		return;
	free(im->at);
	free(im->seen);
	free(im);
}

void ndz_image_expect(struct ndz_image *im, uint32_t chunks, const uint8_t *uuid)
{
	im->expect = chunks;
	im->have_uuid = uuid != NULL;
	if (uuid)
		memcpy(im->uuid, uuid, 16);
}

/* Room for index i. */
static int grow(struct ndz_image *im, uint32_t i)
{
	uint64_t want = im->cap ? im->cap : 64;
	struct place *at;
	uint8_t *seen;

	if (i < im->cap)
		return 0;
	while (want <= i)
		want *= 2;
	if (im->expect && want > im->expect)
		want = im->expect;
	if (want > UINT32_MAX)
		want = UINT32_MAX;
	at = realloc(im->at, (size_t)want * sizeof(*at));
	if (!at)
		return NDZ_ENOMEM;
	im->at = at;
	seen = realloc(im->seen, (size_t)want);
	if (!seen)
		return NDZ_ENOMEM;
	memset(seen + im->cap, 0, (size_t)(want - im->cap));
	im->seen = seen;
	im->cap = (uint32_t)want;
	return 0;
}

static int seen(const struct ndz_image *im, uint64_t i)
{
	return i < im->cap && im->seen[i];
}

int ndz_image_add(struct ndz_image *im, const struct ndz_chunk_hdr *h, struct ndz_error *e)
{
	uint32_t i = h->index;
	int is_last = !!(h->chunk_flags & NDZ_CHUNK_LAST);

	if ((im->have_id && ndz_hdr_same_image(&im->id, h, NULL) < 0) ||
	    (im->have_uuid && memcmp(im->uuid, h->uuid, 16) != 0))
		return ndz_error_set(e, NDZ_EMISMATCH, 0, "chunk %u: %s", i,
				     ndz_strerror(NDZ_EMISMATCH));
	if (im->expect && i >= im->expect)
		return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: past the image's %u chunks",
				     i, im->expect);
	if (im->have_last && i > im->last)
		return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: past chunk %u, the image's last",
				     i, im->last);
	if (seen(im, i))
		return ndz_error_set(e, NDZ_EDUP, 0, "chunk %u: %s", i, ndz_strerror(NDZ_EDUP));
	if (is_last && im->top > i + 1)
		return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: flagged last, but chunk %u exists",
				     i, im->top - 1);
	if (is_last && im->expect && i != im->expect - 1)
		return ndz_error_set(e, NDZ_ERANGE, 0,
				     "chunk %u: flagged last, but the image has %u chunks",
				     i, im->expect);
	if (!is_last && im->expect && i == im->expect - 1)
		return ndz_error_set(e, NDZ_EHEADER, 0,
				     "chunk %u: the image's last chunk is not flagged last", i);
	if (!im->expect && i > im->top && i - im->top > MAX_LEAP)
		return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: far past chunk %u", i,
				     im->top ? im->top - 1 : 0);
	if (i == 0 && h->first != 0)
		return ndz_error_set(e, NDZ_EREGION, 0, "chunk 0: does not start at sector 0");
	if (i > 0 && seen(im, i - 1) && im->at[i - 1].last != h->first)
		return ndz_error_set(e, NDZ_EREGION, 0, "chunk %u: does not start where chunk %u ends",
				     i, i - 1);
	if (seen(im, (uint64_t)i + 1) && im->at[i + 1].first != h->last)
		return ndz_error_set(e, NDZ_EREGION, 0, "chunk %u: does not end where chunk %u starts",
				     i, i + 1);
	if (grow(im, i) < 0)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "chunk %u: %s", i, ndz_strerror(NDZ_ENOMEM));
	im->seen[i] = 1;
	im->at[i].first = h->first;
	im->at[i].last = h->last;
	im->added++;
	if (i >= im->top)
		im->top = i + 1;
	if (is_last) {
		im->have_last = 1;
		im->last = i;
	}
	if (!im->have_id) {
		im->id = *h;
		im->have_id = 1;
	}
	return 0;
}

int ndz_image_held(struct ndz_image *im, uint32_t i, uint64_t first, uint64_t last,
		   struct ndz_error *e)
{
	if (!im->expect || i >= im->expect)
		return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: past the image's %u chunks",
				     i, im->expect);
	if (seen(im, i))
		return ndz_error_set(e, NDZ_EDUP, 0, "chunk %u: %s", i, ndz_strerror(NDZ_EDUP));
	if (grow(im, i) < 0)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "chunk %u: %s", i, ndz_strerror(NDZ_ENOMEM));
	im->seen[i] = 1;
	im->at[i].first = first;
	im->at[i].last = last;
	if (i >= im->top)
		im->top = i + 1;
	if (i == im->expect - 1) {
		im->have_last = 1;
		im->last = i;
	}
	return 0;
}

int ndz_image_complete(const struct ndz_image *im, struct ndz_error *e)
{
	uint32_t i, end = im->have_last ? im->last + 1 : im->top;

	for (i = 0; i < end; i++)
		if (!im->seen[i])
			break;
	if (i == end && im->have_last)
		return 0;
	return ndz_error_set(e, NDZ_EMISSING, 0, "chunk %u: %s", i, ndz_strerror(NDZ_EMISSING));
}

uint32_t ndz_image_added(const struct ndz_image *im)
{
	return im->added;
}

int ndz_image_fits(const struct ndz_chunk_hdr *h, const char *target_name,
		   uint64_t target_bytes, struct ndz_error *e)
{
	if (target_bytes >= h->source_bytes)
		return 0;
	return ndz_error_set(e, NDZ_ETOOSMALL, 0, "%s: %s (%llu bytes, the image needs %llu)",
			     target_name, ndz_strerror(NDZ_ETOOSMALL),
			     (unsigned long long)target_bytes,
			     (unsigned long long)h->source_bytes);
}

/* ---- reading a stored image ---- */

struct ndz_image_reader {
	struct ndz_io *in;
	struct ndz_chunk_hdr first;
	uint32_t chunks;               /* a file's; 0 for a stream */
	uint32_t next;                 /* position of the next chunk to hand out */
	int after_last;                /* the chunk handed out before was flagged LAST */
	uint8_t *chunk0;               /* a stream's chunk 0, read to learn its header */
	struct ndz_orig_reader *orig;  /* an image in the original format (lib/orig.h) */
	uint8_t first_bytes[4];        /* a file's, to tell the formats apart */
};

/* "not an image" for input that does not start with the magic (len bytes of it). */
static int check_magic(const uint8_t *buf, size_t len)
{
	return memcmp(buf, ndz_magic, len < sizeof(ndz_magic) ? len : sizeof(ndz_magic)) == 0 ?
	       0 : NDZ_EBADMAGIC;
}

static int chunk_fail(struct ndz_image_reader *r, uint32_t pos, int rc, struct ndz_error *e)
{
	return ndz_error_set(e, rc, 0, "%s: chunk %u: %s", r->in->name, pos, ndz_strerror(rc));
}

/* A read of chunk pos failed with rc; why is what the io said (its system reason). */
static int read_fail(struct ndz_image_reader *r, uint32_t pos, int rc,
		     const struct ndz_error *why, struct ndz_error *e)
{
	if (why->sys)
		return ndz_error_set(e, rc, why->sys, "%s: chunk %u: read error", r->in->name, pos);
	return ndz_error_set(e, rc, 0, "%s: chunk %u: read error: %s", r->in->name, pos,
			     ndz_strerror(rc));
}

/* A file: its size, first and last headers, before anything is restored. */
static int open_file(struct ndz_image_reader *r, struct ndz_error *e)
{
	uint8_t *area = malloc(NDZ_HDR_SIZE);
	struct ndz_chunk_hdr last;
	uint64_t size = r->in->size, n = size / NDZ_CHUNK_SIZE;
	const char *name = r->in->name;
	struct ndz_error why = { 0 };
	int rc;

	if (!area)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", name, ndz_strerror(NDZ_ENOMEM));
	if (size == 0) {
		rc = ndz_error_set(e, NDZ_EBADMAGIC, 0, "%s: empty file, not an image", name);
		goto out;
	}
	rc = ndz_io_read_full(r->in, area, size < NDZ_HDR_SIZE ? (size_t)size : NDZ_HDR_SIZE,
			      0, NULL, &why);
	if (rc < 0) {
		read_fail(r, 0, rc, &why, e);
		goto out;
	}
	/* A short file that is not an image at all is not a "truncated chunk". */
	rc = check_magic(area, size < NDZ_HDR_SIZE ? (size_t)size : NDZ_HDR_SIZE);
	if (rc < 0) {
		chunk_fail(r, 0, rc, e);
		goto out;
	}
	if (size % NDZ_CHUNK_SIZE) {
		rc = ndz_error_set(e, NDZ_ETRUNC, 0, "%s: chunk %llu: %s (%llu of %u bytes)", name,
				   (unsigned long long)n, ndz_strerror(NDZ_ETRUNC),
				   (unsigned long long)(size % NDZ_CHUNK_SIZE), NDZ_CHUNK_SIZE);
		goto out;
	}
	if (n > UINT32_MAX) {
		rc = ndz_error_set(e, NDZ_EHEADER, 0, "%s: %llu chunks, more than an image holds",
				   name, (unsigned long long)n);
		goto out;
	}
	r->chunks = (uint32_t)n;
	rc = ndz_hdr_decode(area, &r->first, NULL);
	if (rc < 0) {
		chunk_fail(r, 0, rc, e);
		goto out;
	}
	if (r->first.index != 0) {
		rc = ndz_error_set(e, NDZ_EMISSING, 0, "%s: chunk 0: %s (found chunk %u)", name,
				   ndz_strerror(NDZ_EMISSING), r->first.index);
		goto out;
	}
	rc = ndz_io_read_full(r->in, area, NDZ_HDR_SIZE, (n - 1) * NDZ_CHUNK_SIZE, NULL, &why);
	if (rc < 0) {
		read_fail(r, (uint32_t)(n - 1), rc, &why, e);
		goto out;
	}
	rc = ndz_hdr_decode(area, &last, NULL);
	if (rc == 0)
		rc = ndz_hdr_same_image(&r->first, &last, NULL);
	if (rc < 0) {
		chunk_fail(r, (uint32_t)(n - 1), rc, e);
		goto out;
	}
	if (last.index != n - 1 || !(last.chunk_flags & NDZ_CHUNK_LAST))
		rc = ndz_error_set(e, last.index < n - 1 ? NDZ_EDUP : NDZ_EMISSING, 0,
				   "%s: %s: the file holds %llu chunks but its last one says it "
				   "is chunk %u%s", name,
				   ndz_strerror(last.index < n - 1 ? NDZ_EDUP : NDZ_EMISSING),
				   (unsigned long long)n, last.index,
				   (last.chunk_flags & NDZ_CHUNK_LAST) ? "" :
				   " and is not the image's last");
out:
	free(area);
	return rc;
}

/* An original-format image: lib/orig.c reads it (got: bytes of a stream's chunk 0). */
static int open_orig(struct ndz_image_reader *r, size_t got, struct ndz_error *e)
{
	uint8_t *chunk0 = r->chunk0;
	int v = ndz_orig_probe(chunk0 ? chunk0 : r->first_bytes, chunk0 ? got : 4, e);

	if (v < 0) {
		ndz_error_prefix(e, "%s", r->in->name);
		return v;
	}
	if (chunk0 && got < NDZ_CHUNK_SIZE)
		return ndz_error_set(e, NDZ_ETRUNC, 0, "%s: chunk 0: %s (%zu of %u bytes)",
				     r->in->name, ndz_strerror(NDZ_ETRUNC), got, NDZ_CHUNK_SIZE);
	r->chunk0 = NULL;
	return ndz_orig_reader_open(r->in, chunk0, &r->first, &r->chunks, &r->orig, e);
}

/* A stream: chunk 0 is read whole now, to learn its header. */
static int open_stream(struct ndz_image_reader *r, struct ndz_error *e)
{
	const char *name = r->in->name;
	struct ndz_error why = { 0 };
	size_t got = 0;
	int rc;

	r->chunk0 = malloc(NDZ_CHUNK_SIZE);
	if (!r->chunk0)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", name, ndz_strerror(NDZ_ENOMEM));
	rc = ndz_io_read_full(r->in, r->chunk0, NDZ_CHUNK_SIZE, 0, &got, &why);
	if (rc < 0 && rc != NDZ_ESHORTREAD)
		return read_fail(r, 0, rc, &why, e);
	if (got == 0)
		return ndz_error_set(e, NDZ_EBADMAGIC, 0, "%s: empty input, not an image", name);
	if (check_magic(r->chunk0, got) < 0 && ndz_orig_probe(r->chunk0, got, NULL) != 0)
		return open_orig(r, got, e);
	if (check_magic(r->chunk0, got) < 0)
		return chunk_fail(r, 0, NDZ_EBADMAGIC, e);
	if (got >= NDZ_HDR_SIZE && (rc = ndz_hdr_decode(r->chunk0, &r->first, NULL)) < 0)
		return chunk_fail(r, 0, rc, e);
	if (got < NDZ_CHUNK_SIZE)
		return ndz_error_set(e, NDZ_ETRUNC, 0, "%s: chunk 0: %s (%zu of %u bytes)", name,
				     ndz_strerror(NDZ_ETRUNC), got, NDZ_CHUNK_SIZE);
	return 0;
}

int ndz_image_reader_open(struct ndz_io *in, struct ndz_image_reader **out,
			  struct ndz_error *e)
{
	struct ndz_image_reader *r = calloc(1, sizeof(*r));
	int rc;

	*out = NULL;
	if (!r)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", in->name,
				     ndz_strerror(NDZ_ENOMEM));
	r->in = in;
	/* a file in the original format: its first four bytes say so */
	if (!in->is_stream && in->size >= 4 &&
	    ndz_io_read_full(in, r->first_bytes, 4, 0, NULL, NULL) == 0 &&
	    ndz_orig_probe(r->first_bytes, 4, NULL) != 0)
		rc = open_orig(r, 0, e);
	else
		rc = in->is_stream ? open_stream(r, e) : open_file(r, e);
	if (rc < 0) {
		ndz_image_reader_free(r);
		return rc;
	}
	*out = r;
	return 0;
}

void ndz_image_reader_free(struct ndz_image_reader *r)
{
	if (!r)
		return;
	free(r->chunk0);
	ndz_orig_reader_free(r->orig);
	free(r);
}

const struct ndz_chunk_hdr *ndz_image_reader_first(const struct ndz_image_reader *r)
{
	return &r->first;
}

uint32_t ndz_image_reader_chunks(const struct ndz_image_reader *r)
{
	return r->chunks;
}

int ndz_image_reader_next(struct ndz_image_reader *r, uint8_t *buf, struct ndz_chunk_hdr *h,
			  struct ndz_error *e)
{
	uint64_t off = (uint64_t)r->next * NDZ_CHUNK_SIZE;
	const char *name = r->in->name;
	struct ndz_error why = { 0 };
	size_t got = 0;
	uint8_t probe;
	int rc;

	if (r->orig)
		return ndz_orig_reader_next(r->orig, buf, h, e);
	if (r->after_last) {
		/* A file's size was checked at open; a stream must end here. */
		if (!r->in->is_stream && r->next == r->chunks)
			return 0;
		rc = ndz_io_read_full(r->in, &probe, 1, off, &got, &why);
		if (rc == NDZ_ESHORTREAD)
			return 0;
		if (rc < 0)
			return read_fail(r, r->next, rc, &why, e);
		return ndz_error_set(e, NDZ_EHEADER, 0,
				     "%s: data after the image's last chunk (chunk %u)", name,
				     r->next - 1);
	}
	if (r->chunk0) {
		memcpy(buf, r->chunk0, NDZ_CHUNK_SIZE);
		free(r->chunk0);
		r->chunk0 = NULL;
	} else {
		if (!r->in->is_stream && r->next == r->chunks)
			return ndz_error_set(e, NDZ_EMISSING, 0, "%s: chunk %u: %s", name, r->next,
					     ndz_strerror(NDZ_EMISSING));
		rc = ndz_io_read_full(r->in, buf, NDZ_CHUNK_SIZE, off, &got, &why);
		if (rc == NDZ_ESHORTREAD && got == 0)
			return ndz_error_set(e, NDZ_EMISSING, 0,
					     "%s: chunk %u: %s (the input ends before the "
					     "image's last chunk)", name, r->next,
					     ndz_strerror(NDZ_EMISSING));
		if (rc == NDZ_ESHORTREAD)
			return ndz_error_set(e, NDZ_ETRUNC, 0, "%s: chunk %u: %s (%zu of %u bytes)",
					     name, r->next, ndz_strerror(NDZ_ETRUNC), got,
					     NDZ_CHUNK_SIZE);
		if (rc < 0)
			return read_fail(r, r->next, rc, &why, e);
	}
	rc = ndz_hdr_decode(buf, h, NULL);
	if (rc < 0)
		return chunk_fail(r, r->next, rc, e);
	r->after_last = !!(h->chunk_flags & NDZ_CHUNK_LAST);
	r->next++;
	return 1;
}

int ndz_image_probe_file(const char *path, struct ndz_error *e)
{
	struct ndz_io *io;
	struct ndz_chunk_hdr h;
	uint8_t *area;
	size_t got = 0;
	int rc;

	if ((rc = ndz_io_open_file(path, NDZ_IO_READ, &io, e)) < 0)
		return rc;
	area = malloc(NDZ_HDR_SIZE);
	if (!area) {
		ndz_io_close(io);
		return ndz_error_set(e, NDZ_ENOMEM, 0, NULL);
	}
	rc = ndz_io_read_full(io, area, NDZ_HDR_SIZE, 0, &got, NULL);
	ndz_io_close(io);
	if (rc < 0 && rc != NDZ_ESHORTREAD)
		rc = ndz_error_set(e, rc, 0, "%s: cannot read", path);
	else if (got == 0)
		rc = ndz_error_set(e, NDZ_EBADMAGIC, 0, "%s: empty, not an image", path);
	else if ((rc = ndz_orig_probe(area, got, e)) > 0)
		rc = 0;
	else if (rc < 0)
		ndz_error_prefix(e, "%s", path);
	else if (got < NDZ_HDR_SIZE || (rc = ndz_hdr_decode(area, &h, NULL)) == NDZ_EBADMAGIC)
		rc = ndz_error_set(e, NDZ_EBADMAGIC, 0, "%s: not an image (no chunk header at "
				   "its start)", path);
	else if (rc < 0)
		rc = ndz_error_set(e, rc, 0, "%s: not an image (its first chunk header: %s)", path,
				   ndz_strerror(rc));
	free(area);
	return rc;
}

/* ---- the stored-image walk ---- */

struct ndz_image_walk {
	struct ndz_io *in;
	unsigned flags;
	struct ndz_image_reader *r;
	struct ndz_image *im;          /* with NDZ_WALK_RULES */
	uint32_t pos;                  /* chunks handed out */
	int done;
};

int ndz_image_walk_open(struct ndz_io *in, unsigned flags, struct ndz_image_walk **out,
			struct ndz_error *e)
{
	struct ndz_image_walk *w = calloc(1, sizeof(*w));
	int rc;

	*out = NULL;
	if (!w || ((flags & NDZ_WALK_RULES) && ndz_image_create(&w->im, NULL) < 0)) {
		free(w);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", in->name,
				     ndz_strerror(NDZ_ENOMEM));
	}
	w->in = in;
	w->flags = flags;
	rc = ndz_image_reader_open(in, &w->r, e);
	if (rc < 0) {
		ndz_image_walk_free(w);
		return rc;
	}
	if (w->im)
		ndz_image_expect(w->im, ndz_image_reader_chunks(w->r), NULL);
	*out = w;
	return 0;
}

void ndz_image_walk_free(struct ndz_image_walk *w)
{
	if (!w)
		return;
	ndz_image_reader_free(w->r);
	ndz_image_free(w->im);
	free(w);
}

const struct ndz_chunk_hdr *ndz_image_walk_first(const struct ndz_image_walk *w)
{
	return ndz_image_reader_first(w->r);
}

uint32_t ndz_image_walk_chunks(const struct ndz_image_walk *w)
{
	return ndz_image_reader_chunks(w->r);
}

uint32_t ndz_image_walk_count(const struct ndz_image_walk *w)
{
	return w->pos;
}

int ndz_image_walk_next(struct ndz_image_walk *w, uint8_t *buf, struct ndz_chunk_hdr *h,
			struct ndz_error *e)
{
	int rc;

	if (w->done)
		return 0;
	rc = ndz_image_reader_next(w->r, buf, h, e);
	if (rc < 0)
		return rc;
	if (rc == 0) {
		w->done = 1;
		if (w->im && (rc = ndz_image_complete(w->im, e)) < 0) {
			ndz_error_prefix(e, "%s", w->in->name);
			return rc;
		}
		return 0;
	}
	if ((w->flags & NDZ_WALK_ORDER) && h->index != w->pos)
		return ndz_error_set(e, NDZ_EREGION, 0, "%s: chunk %u: found at place %u: "
				     "chunks out of order", w->in->name, h->index, w->pos);
	if (w->im && (rc = ndz_image_add(w->im, h, e)) < 0) {
		ndz_error_prefix(e, "%s", w->in->name);
		return rc;
	}
	w->pos++;
	return 1;
}
