/* Seeded restores: does a target hold a chunk (hashed against the content index); patching it by pieces. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "core/format.h"
#include "core/image.h"
#include "core/orig.h"
#include "core/pool.h"
#include "seed.h"
#include "unzip.h"

#define SEED_BUF (1u << 20)
#define BATCH        (8u << 20)          /* ndz_seed_patch: target bytes read at a time */
#define BATCH_PIECES 128u                /* and pieces */
#define HASH_THREADS 4u                  /* at most, hashing a batch's pieces */

/* One piece of a batch: read from the target and hashed by a job of the pool. */
struct pjob {
	struct ndz_seed *s;
	const struct ndz_index_entry *x;
	const struct ndz_index_piece *p;
	uint8_t *win;                    /* where its bytes go */
	struct ndz_digest *d;
	uint8_t got[NDZ_INDEX_DIGEST_LEN];
	uint64_t bytes_read;
	struct ndz_error e;
	int rc;
};

struct ndz_seed {
	struct ndz_io *target;
	const struct ndz_index *ix;
	struct ndz_seed_opts o;
	struct ndz_digest *d;
	uint8_t *buf;
	uint8_t *win;                    /* ndz_seed_patch: prefix and a batch of pieces */
	struct pjob *jobs;               /* BATCH_PIECES, their digests made with win */
	struct ndz_pool *pool;           /* NULL: one core, the pieces hashed in line */
	int ready;                       /* win, jobs and pool made */
	uint64_t bytes_read;
	uint32_t miss_run;               /* chunks in a row that differed everywhere */
};

int ndz_seed_create(struct ndz_io *target, const struct ndz_index *ix,
		    const struct ndz_seed_opts *o, struct ndz_seed **out, struct ndz_error *e)
{
	struct ndz_seed *s;

	*out = NULL;
	if (!target || !ix)
		return ndz_error_set(e, NDZ_EINVAL, 0, "a seed checker needs a target and an index");
	s = calloc(1, sizeof(*s));
	if (!s)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: seed checker: %s", target->name,
				     ndz_strerror(NDZ_ENOMEM));
	s->target = target;
	s->ix = ix;
	if (o)
		s->o = *o;
	s->buf = malloc(SEED_BUF);
	s->d = s->buf ? ndz_digest_create(e) : NULL;
	if (!s->d) {
		ndz_seed_free(s);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: seed checker: %s", target->name,
				     ndz_strerror(NDZ_ENOMEM));
	}
	*out = s;
	return 0;
}

void ndz_seed_free(struct ndz_seed *s)
{
	if (!s)
		return;
	ndz_pool_free(s->pool);
	if (s->jobs)
		for (unsigned k = 0; k < BATCH_PIECES; k++)
			ndz_digest_free(s->jobs[k].d);
	free(s->jobs);
	ndz_digest_free(s->d);
	free(s->win);
	free(s->buf);
	free(s);
}

uint64_t ndz_seed_bytes_read(const struct ndz_seed *s)
{
	return s->bytes_read;
}

/*
 * Read [off, off + len) of the image's bytes from the target into the digest
 * (zero_only: check they are all zero instead). 1: read (and zero when asked), 0:
 * the target ends first or a byte is not zero, or a negative code with e.
 */
static int scan(struct ndz_seed *s, uint64_t off, uint64_t len, int zero_only,
		struct ndz_error *e)
{
	uint64_t at = s->o.target_offset + off;
	struct ndz_error re = { 0 };
	int rc;

	if (!len)
		return 1;
	if ((s->target->is_regular || s->target->is_blockdev) &&
	    (at > s->target->size || len > s->target->size - at))
		return 0;
	if (s->o.direct)         /* read past the page cache: from the disk */
		ndz_io_drop_cache(s->target, at, len);
	while (len) {
		size_t n = len > SEED_BUF ? SEED_BUF : (size_t)len;
		size_t i;

		rc = ndz_io_read_full(s->target, s->buf, n, at, NULL, &re);
		if (rc == NDZ_ESHORTREAD)
			return 0;
		if (rc < 0) {
			ndz_error_copy(e, &re);
			return rc;
		}
		s->bytes_read += n;
		if (zero_only) {
			uint8_t acc = 0;

			for (i = 0; i < n; i++)
				acc |= s->buf[i];
			if (acc)
				return 0;
		} else if ((rc = ndz_digest_update(s->d, s->buf, n, e)) < 0) {
			return rc;
		}
		at += n;
		len -= n;
	}
	return 1;
}

/* [a, b) in sectors as bytes clipped to the image's source_bytes: *off, *len. */
static void clip(const struct ndz_seed *s, uint64_t a, uint64_t b, uint64_t *off, uint64_t *len)
{
	uint64_t end = s->ix->source_bytes;

	*off = a * NDZ_SECTOR_SIZE;
	*len = 0;
	if (*off >= end || b <= a)
		return;
	*len = (b - a) * NDZ_SECTOR_SIZE;
	if (*len > end - *off)
		*len = end - *off;
}

int ndz_seed_check(struct ndz_seed *s, uint32_t i, struct ndz_error *e)
{
	const struct ndz_index_entry *x;
	uint8_t got[NDZ_INDEX_DIGEST_LEN];
	uint64_t gap = 0, off, len;
	uint32_t j;
	int rc;

	if (i >= s->ix->chunks)
		return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: past the index's %u chunks", i,
				     s->ix->chunks);
	x = &s->ix->e[i];
	gap = x->first;
	/* Start clean: a digest left half-way by an earlier "not held" is reset. */
	if ((rc = ndz_digest_final(s->d, got, e)) < 0)
		return rc;
	for (j = 0; j <= x->nregions; j++) {
		uint64_t rs = j < x->nregions ? x->regions[j].start : x->last;

		if (s->o.zero_fill) {
			clip(s, gap, rs, &off, &len);
			rc = scan(s, off, len, 1, e);
			if (rc <= 0)
				return rc;
		}
		if (j == x->nregions)
			break;
		clip(s, rs, rs + x->regions[j].count, &off, &len);
		rc = scan(s, off, len, 0, e);
		if (rc <= 0)
			return rc;
		gap = rs + x->regions[j].count;
	}
	if ((rc = ndz_digest_final(s->d, got, e)) < 0)
		return rc;
	rc = memcmp(got, x->digest, NDZ_INDEX_DIGEST_LEN) == 0;
	s->miss_run = rc ? 0 : s->miss_run + 1;
	return rc;
}

/*
 * After SKIP_AFTER chunks in a row that differ (all their pieces), a target is
 * taken to differ everywhere from here on: only every SKIP_EVERY-th chunk is
 * checked, until one is found held again. Writing a chunk the target held costs
 * only time; reading and hashing a target that holds nothing made a seeded restore
 * onto a new disk 3x a plain one (bench/seed-results.txt).
 */
#define SKIP_AFTER 4u
#define SKIP_EVERY 32u

int ndz_seed_worth_checking(const struct ndz_seed *s, uint32_t i)
{
	return s->miss_run < SKIP_AFTER || i % SKIP_EVERY == 0;
}

/* ---- patching a chunk piece by piece ---- */

#define WIN_PREFIX NDZ_INDEX_MAX_PIECE    /* the prefix rule's 2 MiB */
#define WIN_SIZE   (WIN_PREFIX + BATCH)

/* The chunk's header from image (4096 bytes at its place) is the entry's. */
static int patch_header(struct ndz_seed *s, struct ndz_io *image, uint64_t at, uint32_t i,
			uint8_t *area, struct ndz_seed_patch_stats *st, struct ndz_error *e)
{
	const struct ndz_index_entry *x = &s->ix->e[i];
	struct ndz_chunk_hdr h;
	uint32_t j;
	int rc;

	rc = ndz_io_read_full(image, area, NDZ_HDR_SIZE, at, NULL, e);
	if (rc < 0)
		return rc;
	st->image_bytes += NDZ_HDR_SIZE;
	if ((rc = ndz_hdr_decode(area, &h, e)) < 0) {
		ndz_error_prefix(e, "%s", image->name);
		return rc;
	}
	if (h.index != i || h.codec != NDZ_CODEC_ZSTD || h.incompat_flags ||
	    memcmp(h.uuid, s->ix->uuid, 16) || h.source_bytes != s->ix->source_bytes ||
	    h.first != x->first || h.last != x->last || h.nregions != x->nregions)
		goto mismatch;
	for (j = 0; j < h.nregions; j++) {
		struct ndz_region r = ndz_hdr_region(area, j);

		if (r.start != x->regions[j].start || r.count != x->regions[j].count)
			goto mismatch;
	}
	{
		const struct ndz_index_piece *last = &x->pieces[x->npieces - 1];

		if ((uint64_t)last->coff + last->clen != h.data_len)
			goto mismatch;
	}
	return 0;
mismatch:
	return ndz_error_set(e, NDZ_EMISMATCH, 0, "%s: chunk %u: its header is not what the "
			     "content index says", image->name, i);
}

/*
 * Piece p's bytes as they are on the target into win (dlen bytes; past the end of
 * the target, or past source_bytes, zeros), hashed with d into got, the bytes read
 * added to *nread. 0 or a negative code. Pieces are read so on several threads at
 * once: nothing of s is written.
 */
static int patch_read(const struct ndz_seed *s, const struct ndz_index_entry *x,
		      const struct ndz_index_piece *p, uint8_t *win, struct ndz_digest *d,
		      uint8_t got[NDZ_INDEX_DIGEST_LEN], uint64_t *nread, struct ndz_error *e)
{
	struct ndz_region r[NDZ_MAX_REGIONS];
	uint32_t n = ndz_index_piece_ranges(x, p, r, NDZ_MAX_REGIONS), k;
	uint64_t at = 0;
	int rc;

	memset(win, 0, p->dlen);
	for (k = 0; k < n; k++) {
		uint64_t off, len;
		size_t have = 0;

		clip(s, r[k].start, r[k].start + r[k].count, &off, &len);
		if (len) {
			struct ndz_error re = { 0 };

			rc = ndz_io_read_full(s->target, win + at, (size_t)len,
					      s->o.target_offset + off, &have, &re);
			if (rc == NDZ_ESHORTREAD)
				memset(win + at + have, 0, (size_t)len - have);
			else if (rc < 0) {
				ndz_error_copy(e, &re);
				return rc;
			}
			*nread += rc == 0 ? len : have;
			if ((rc = ndz_digest_update(d, win + at, (size_t)len, e)) < 0)
				return rc;
		}
		at += (uint64_t)r[k].count * NDZ_SECTOR_SIZE;
	}
	return ndz_digest_final(d, got, e);
}

static void pjob_run(void *arg)
{
	struct pjob *j = arg;

	j->rc = patch_read(j->s, j->x, j->p, j->win, j->d, j->got, &j->bytes_read, &j->e);
}

/*
 * The next batch of x's pieces from j0: as many as fit in BATCH bytes and
 * BATCH_PIECES (one at least); the index past it.
 */
static uint32_t batch_end(const struct ndz_index_entry *x, uint32_t j0, size_t *bytes)
{
	uint32_t j = j0;

	*bytes = 0;
	while (j < x->npieces && j - j0 < BATCH_PIECES &&
	       (j == j0 || *bytes + x->pieces[j].dlen <= BATCH))
		*bytes += x->pieces[j++].dlen;
	return j;
}

/*
 * Pieces [j0, j1) of x read from the target end to end at win and hashed, on the
 * pool: jobs[k] holds piece j0 + k's digest. 0 or the first error, in piece order.
 */
static int batch_read(struct ndz_seed *s, const struct ndz_index_entry *x, uint32_t j0,
		      uint32_t j1, uint8_t *win, struct ndz_error *e)
{
	uint32_t j;
	int rc = 0;

	for (j = j0; j < j1; j++) {
		struct pjob *q = &s->jobs[j - j0];

		q->s = s;
		q->x = x;
		q->p = &x->pieces[j];
		q->win = win;
		q->bytes_read = 0;
		q->rc = 0;
		memset(&q->e, 0, sizeof(q->e));
		win += x->pieces[j].dlen;
		if (s->pool)
			ndz_pool_add(s->pool, pjob_run, q);
		else
			pjob_run(q);
	}
	if (s->pool)
		ndz_pool_wait(s->pool);
	for (j = j0; j < j1; j++) {
		struct pjob *q = &s->jobs[j - j0];

		s->bytes_read += q->bytes_read;
		if (q->rc < 0 && rc == 0) {
			ndz_error_copy(e, &q->e);
			rc = q->rc;
		}
	}
	return rc;
}

/* Does some piece of [j0, j1), as batch_read left them, match its digest? */
static int batch_any_held(const struct ndz_seed *s, const struct ndz_index_entry *x,
			  uint32_t j0, uint32_t j1)
{
	uint32_t j;

	for (j = j0; j < j1; j++)
		if (!memcmp(s->jobs[j - j0].got, x->pieces[j].digest, NDZ_INDEX_DIGEST_LEN))
			return 1;
	return 0;
}

/* The batch buffer, its jobs' digests and the pool of hashing threads, once. */
static int patch_setup(struct ndz_seed *s, struct ndz_error *e)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned k, threads = cores < 2 ? 0 : cores > HASH_THREADS ? HASH_THREADS : (unsigned)cores;

	if (s->ready)
		return 0;
	if (!s->jobs && !(s->jobs = calloc(BATCH_PIECES, sizeof(*s->jobs))))
		goto nomem;
	if (!s->win && !(s->win = malloc(WIN_SIZE)))
		goto nomem;
	for (k = 0; k < BATCH_PIECES; k++)
		if (!s->jobs[k].d && !(s->jobs[k].d = ndz_digest_create(NULL)))
			goto nomem;
	if (threads && !s->pool && ndz_pool_create(threads, BATCH_PIECES, &s->pool, NULL) < 0)
		goto nomem;
	s->ready = 1;
	return 0;
nomem:
	return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: seed checker: %s", s->target->name,
			     ndz_strerror(NDZ_ENOMEM));
}

/* The digest of piece p's bytes at buf, clipped to source_bytes as the index's is. */
static int patch_hash(struct ndz_seed *s, const struct ndz_index_entry *x,
		      const struct ndz_index_piece *p, const uint8_t *buf,
		      uint8_t got[NDZ_INDEX_DIGEST_LEN], struct ndz_error *e)
{
	struct ndz_region r[NDZ_MAX_REGIONS];
	uint32_t n = ndz_index_piece_ranges(x, p, r, NDZ_MAX_REGIONS), k;
	uint64_t pos = 0, off, len;
	int rc;

	for (k = 0; k < n; k++) {
		clip(s, r[k].start, r[k].start + r[k].count, &off, &len);
		if (len && (rc = ndz_digest_update(s->d, buf + pos, (size_t)len, e)) < 0)
			return rc;
		pos += (uint64_t)r[k].count * NDZ_SECTOR_SIZE;
	}
	return ndz_digest_final(s->d, got, e);
}

/* Write the dlen bytes of piece p at win where they go on the target (clipped). */
static int patch_write(struct ndz_seed *s, const struct ndz_index_entry *x,
		       const struct ndz_index_piece *p, const uint8_t *win,
		       struct ndz_seed_patch_stats *st, struct ndz_error *e)
{
	struct ndz_region r[NDZ_MAX_REGIONS];
	uint32_t n = ndz_index_piece_ranges(x, p, r, NDZ_MAX_REGIONS), k;
	uint64_t at = 0;
	int rc;

	for (k = 0; k < n; k++) {
		uint64_t off, len;

		clip(s, r[k].start, r[k].start + r[k].count, &off, &len);
		if (len) {
			rc = ndz_io_write_full(s->target, win + at, (size_t)len,
					       s->o.target_offset + off, e);
			if (rc < 0)
				return rc;
			st->bytes_written += len;
		}
		at += (uint64_t)r[k].count * NDZ_SECTOR_SIZE;
	}
	return 0;
}

/* The gaps of entry x in [first, last) read as zero (with zero_fill): 1, 0 or < 0. */
static int patch_gaps_zero(struct ndz_seed *s, const struct ndz_index_entry *x,
			   struct ndz_error *e)
{
	uint64_t gap = x->first, off, len;
	uint32_t j;
	int rc;

	for (j = 0; j <= x->nregions; j++) {
		uint64_t rs = j < x->nregions ? x->regions[j].start : x->last;

		clip(s, gap, rs, &off, &len);
		rc = scan(s, off, len, 1, e);
		if (rc <= 0)
			return rc;
		if (j < x->nregions)
			gap = rs + x->regions[j].count;
	}
	return 1;
}

int ndz_seed_lacking(struct ndz_seed *s, uint32_t i, uint8_t *lack, struct ndz_error *e)
{
	const struct ndz_index_entry *x;
	uint32_t j, j0, j1, n = 0;
	size_t bytes;
	int rc;

	if (i >= s->ix->chunks)
		return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: past the index's %u chunks", i,
				     s->ix->chunks);
	x = &s->ix->e[i];
	memset(lack, 0, (x->npieces + 7) / 8);
	if (s->o.zero_fill && x->npieces && (rc = patch_gaps_zero(s, x, e)) <= 0) {
		if (rc < 0)
			return rc;
		memset(lack, 0xff, (x->npieces + 7) / 8);  /* not by pieces: all of it */
		return (int)x->npieces;
	}
	if ((rc = patch_setup(s, e)) < 0)
		return rc;
	for (j0 = 0; j0 < x->npieces; j0 = j1) {
		j1 = batch_end(x, j0, &bytes);
		if ((rc = batch_read(s, x, j0, j1, s->win, e)) < 0)
			return rc;
		for (j = j0; j < j1; j++)
			if (memcmp(s->jobs[j - j0].got, x->pieces[j].digest, NDZ_INDEX_DIGEST_LEN)) {
				lack[j / 8] |= (uint8_t)(1u << (j % 8));
				n++;
			}
	}
	return (int)n;
}

static int patch_pieces(struct ndz_seed *s, struct ndz_io *image, uint64_t at, uint32_t i,
			const uint8_t *avail, struct ndz_seed_patch_stats *st,
			struct ndz_error *e);

int ndz_seed_patch(struct ndz_seed *s, struct ndz_io *image, uint64_t at, uint32_t i,
		   struct ndz_seed_patch_stats *st, struct ndz_error *e)
{
	return patch_pieces(s, image, at, i, NULL, st, e);
}

int ndz_seed_patch_some(struct ndz_seed *s, struct ndz_io *image, uint64_t at, uint32_t i,
			const uint8_t *avail, struct ndz_seed_patch_stats *st,
			struct ndz_error *e)
{
	return patch_pieces(s, image, at, i, avail, st, e);
}

static int patch_pieces(struct ndz_seed *s, struct ndz_io *image, uint64_t at, uint32_t i,
			const uint8_t *avail, struct ndz_seed_patch_stats *st,
			struct ndz_error *e)
{
	const struct ndz_index_entry *x;
	uint8_t got[NDZ_INDEX_DIGEST_LEN], *c = NULL;
	uint32_t j, j0, j1, wrote = 0;
	size_t wpos = 0, bytes;        /* the current piece's place in s->win */
	int rc, have_hdr = 0;

	if (i >= s->ix->chunks)
		return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: past the index's %u chunks", i,
				     s->ix->chunks);
	x = &s->ix->e[i];
	if (!x->npieces)
		return 0;
	if ((rc = ndz_digest_final(s->d, got, e)) < 0)   /* start clean */
		return rc;
	if (s->o.zero_fill && (rc = patch_gaps_zero(s, x, e)) <= 0)
		return rc;
	if ((rc = patch_setup(s, e)) < 0)
		return rc;
	/*
	 * The pieces are read and hashed a batch at a time, on the pool. First, which
	 * differ: all of them, and the chunk is better restored whole. The first batch
	 * stays at the window's start, where the patching begins.
	 */
	j1 = batch_end(x, 0, &bytes);
	if ((rc = batch_read(s, x, 0, j1, s->win, e)) < 0)
		return rc;
	if (!batch_any_held(s, x, 0, j1)) {
		uint32_t k = j1;
		int held = 0;

		while (k < x->npieces && !held) {
			uint32_t k1 = batch_end(x, k, &bytes);

			if ((rc = batch_read(s, x, k, k1, s->win + WIN_PREFIX, e)) < 0)
				return rc;
			held = batch_any_held(s, x, k, k1);
			k = k1;
		}
		if (!held) {
			s->miss_run++;
			return NDZ_SEED_WHOLE;
		}
		if ((rc = batch_read(s, x, 0, j1, s->win, e)) < 0)
			return rc;
	}
	s->miss_run = 0;
	/*
	 * Then piece by piece, in order, each lacking one decoded after the last 2 MiB
	 * of the chunk before it, as held or decoded, in the window right before it.
	 */
	for (j0 = 0; j0 < x->npieces; j0 = j1) {
		if (j0) {
			j1 = batch_end(x, j0, &bytes);
			if (wpos + bytes > WIN_SIZE) {     /* keep the last 2 MiB as prefix */
				memmove(s->win, s->win + wpos - WIN_PREFIX, WIN_PREFIX);
				wpos = WIN_PREFIX;
			}
			if ((rc = batch_read(s, x, j0, j1, s->win + wpos, e)) < 0)
				goto out;
		}
		for (j = j0; j < j1; wpos += x->pieces[j++].dlen) {
			const struct ndz_index_piece *p = &x->pieces[j];
			size_t plen = p->doff < WIN_PREFIX ? (size_t)p->doff : WIN_PREFIX;

			if (!memcmp(s->jobs[j - j0].got, p->digest, NDZ_INDEX_DIGEST_LEN))
				continue;
			if (avail && !((avail[j / 8] >> (j % 8)) & 1)) {
				rc = NDZ_SEED_MORE;   /* its frame is not at hand */
				goto out;
			}
			if (!have_hdr) {
				c = malloc(NDZ_INDEX_MAX_PIECE > NDZ_HDR_SIZE ? NDZ_INDEX_MAX_PIECE :
					   NDZ_HDR_SIZE);
				if (!c) {
					rc = ndz_error_set(e, NDZ_ENOMEM, 0, "chunk %u: %s", i,
							   ndz_strerror(NDZ_ENOMEM));
					goto out;
				}
				if ((rc = patch_header(s, image, at, i, c, st, e)) < 0)
					goto out;
				have_hdr = 1;
			}
			rc = p->clen > NDZ_INDEX_MAX_PIECE ?
			     ndz_error_set(e, NDZ_ECORRUPT, 0, "%s: chunk %u: piece %u of %u "
					   "bytes", image->name, i, j, p->clen) :
			     ndz_io_read_full(image, c, p->clen, at + NDZ_HDR_SIZE + p->coff,
					      NULL, e);
			if (rc < 0)
				goto out;
			st->image_bytes += p->clen;
			rc = ndz_unzip_piece(c, p->clen, s->win + wpos - plen, plen, s->win + wpos,
					     p->dlen, e);
			if (rc < 0) {
				ndz_error_prefix(e, "%s: chunk %u: piece %u", image->name, i, j);
				goto out;
			}
			if ((rc = patch_hash(s, x, p, s->win + wpos, got, e)) < 0)
				goto out;
			if (memcmp(got, p->digest, NDZ_INDEX_DIGEST_LEN) != 0) {
				rc = ndz_error_set(e, NDZ_ECORRUPT, 0, "%s: chunk %u: piece %u "
						   "does not match the content index", image->name,
						   i, j);
				goto out;
			}
			if ((rc = patch_write(s, x, p, s->win + wpos, st, e)) < 0)
				goto out;
			wrote++;
		}
	}
	if (wrote) {
		st->chunks++;
		st->pieces += x->npieces;
		st->pieces_written += wrote;
	}
	rc = 1;
out:
	free(c);
	return rc;
}

/* ---- building the index of a stored image ---- */

/*
 * A target that hashes: the restore pipeline with one decoder writes each chunk's
 * regions in order, chunk after chunk; the bytes go into the current chunk's
 * digest, which is final once its last region is whole. Anything out of that
 * order is an error, never a wrong digest.
 */
struct hashio {
	struct ndz_index *ix;            /* its entries never move: sized before */
	uint64_t source_bytes;
	struct ndz_digest *d;
	uint32_t c, j;                   /* the chunk and region being written */
	uint64_t done;                   /* bytes of that region written */
	struct ndz_digest *pd;           /* the chunk's piece p, at dpos of its data */
	uint32_t p;
	uint64_t dpos;
	int bad;
};

/* The pieces of chunk c from p on are final: the last ones are clipped short. */
static int hio_pieces_end(struct hashio *h)
{
	struct ndz_index_entry *x = &h->ix->e[h->c];

	for (; h->p < x->npieces; h->p++)
		if (ndz_digest_final(h->pd, x->pieces[h->p].digest, NULL) < 0)
			return NDZ_ENOMEM;
	h->p = 0;
	h->dpos = 0;
	return 0;
}

/* n bytes at buf of the chunk's data into piece digests, finishing those that end. */
static int hio_pieces(struct hashio *h, const uint8_t *buf, uint64_t n)
{
	struct ndz_index_entry *x = &h->ix->e[h->c];

	while (n && h->p < x->npieces) {
		const struct ndz_index_piece *q = &x->pieces[h->p];
		uint64_t m = q->doff + q->dlen - h->dpos < n ? q->doff + q->dlen - h->dpos : n;

		if (ndz_digest_update(h->pd, buf, (size_t)m, NULL) < 0)
			return NDZ_ENOMEM;
		buf += m;
		n -= m;
		h->dpos += m;
		if (h->dpos == q->doff + q->dlen &&
		    ndz_digest_final(h->pd, x->pieces[h->p++].digest, NULL) < 0)
			return NDZ_ENOMEM;
	}
	return 0;
}

/* Region j of chunk c as bytes clipped to source_bytes: *off and *len (0: none). */
static void hio_region(const struct hashio *h, uint64_t *off, uint64_t *len)
{
	const struct ndz_region *r = &h->ix->e[h->c].regions[h->j];
	uint64_t end = h->source_bytes;

	*off = r->start * NDZ_SECTOR_SIZE;
	*len = (uint64_t)r->count * NDZ_SECTOR_SIZE;
	if (*off >= end)
		*len = 0;
	else if (*len > end - *off)
		*len = end - *off;
}

int ndz_seed_holds(struct ndz_io *target, const struct ndz_index *ix,
		   const struct ndz_seed_opts *o, struct ndz_seed_verdict *v,
		   struct ndz_error *e)
{
	struct ndz_seed_verdict n = { ix->chunks, 0, 0 };
	struct ndz_seed *s;
	int rc;

	if (v)
		*v = n;
	if ((rc = ndz_seed_create(target, ix, o, &s, e)) < 0)
		return rc;
	for (uint32_t i = 0; i < ix->chunks; i++) {
		rc = ndz_seed_check(s, i, e);
		if (rc < 0) {
			ndz_seed_free(s);
			return rc;
		}
		if (!rc && !n.differ++)
			n.first = i;
	}
	ndz_seed_free(s);
	if (v)
		*v = n;
	if (n.differ)
		return ndz_error_set(e, NDZ_EVERIFY, 0, "%s does not hold the image: %u of %u "
				     "chunks differ (the first: chunk %u)", target->name, n.differ,
				     n.chunks, n.first);
	return 0;
}

/*
 * Move past whole regions and finished chunks (their digests set) to the region
 * still to be written; 1 if there is one, 0 at the end of the chunks known, or
 * NDZ_ENOMEM.
 */
static int hio_advance(struct hashio *h)
{
	uint64_t off, len;

	while (h->c < h->ix->chunks) {
		const struct ndz_index_entry *x = &h->ix->e[h->c];

		if (h->j < x->nregions) {
			hio_region(h, &off, &len);
			if (h->done < len)
				return 1;
			h->j++;
			h->done = 0;
			continue;
		}
		if (ndz_digest_final(h->d, h->ix->e[h->c].digest, NULL) < 0 ||
		    hio_pieces_end(h) < 0)
			return NDZ_ENOMEM;
		h->c++;
		h->j = 0;
		h->done = 0;
	}
	return 0;
}

static ssize_t hio_pwrite(struct ndz_io *io, const void *buf, size_t len, uint64_t off, int *sys)
{
	struct hashio *h = io->priv;
	const uint8_t *p = buf;
	size_t left = len;

	(void)sys;
	while (left) {
		uint64_t roff, rlen, n;
		int rc = hio_advance(h);

		if (rc <= 0 || h->c >= h->ix->chunks) {
			h->bad = 1;
			return rc < 0 ? rc : NDZ_EREGION;
		}
		hio_region(h, &roff, &rlen);
		if (off != roff + h->done) {
			h->bad = 1;
			return NDZ_EREGION;
		}
		n = rlen - h->done < left ? rlen - h->done : left;
		if (ndz_digest_update(h->d, p, (size_t)n, NULL) < 0 || hio_pieces(h, p, n) < 0)
			return NDZ_ENOMEM;
		h->done += n;
		p += n;
		off += n;
		left -= (size_t)n;
	}
	return (ssize_t)len;
}

static ssize_t hio_pread(struct ndz_io *io, void *buf, size_t len, uint64_t off, int *sys)
{
	(void)io, (void)buf, (void)len, (void)off, (void)sys;
	return NDZ_ENOTSUP;
}

static int hio_zero(struct ndz_io *io, uint64_t off, uint64_t len, int *sys)
{
	(void)io, (void)off, (void)len, (void)sys;
	return NDZ_ENOTSUP;
}

static int hio_flush(struct ndz_io *io, int *sys)
{
	(void)io, (void)sys;
	return 0;
}

static void hio_close(struct ndz_io *io)
{
	(void)io;
}

static const struct ndz_io_ops hio_ops = {
	hio_pread, hio_pwrite, hio_zero, hio_flush, hio_close, NULL, NULL,
};

/*
 * Chunk i's pieces (doc/FORMAT.md, "Pieces"), as imagezip records them: each frame
 * of a zstd chunk (at buf, h its header), digests to come as its bytes are written.
 * Nothing when the frames do not add up: the restore pipeline says what is wrong.
 */
static int set_pieces(struct ndz_index *ix, uint32_t i, const struct ndz_chunk_hdr *h,
		      const uint8_t *buf, struct ndz_error *e)
{
	const uint8_t *data = buf + NDZ_HDR_SIZE;
	struct ndz_index_piece *p = NULL;
	uint32_t n = 0, cap = 0;
	uint64_t doff = 0;
	size_t at = 0;
	int rc = 0;

	if (h->codec != NDZ_CODEC_ZSTD)
		return 0;
	while (at < h->data_len) {
		size_t fsz = ZSTD_findFrameCompressedSize(data + at, h->data_len - at);
		unsigned long long csz = ZSTD_isError(fsz) ? ZSTD_CONTENTSIZE_ERROR :
					 ZSTD_getFrameContentSize(data + at, fsz);

		if (csz == 0 || csz > NDZ_INDEX_MAX_PIECE || csz % NDZ_SECTOR_SIZE)
			goto out;           /* also the ZSTD_CONTENTSIZE_ values */
		if (n == cap) {
			struct ndz_index_piece *more;

			cap = cap ? 2 * cap : 16;
			more = realloc(p, cap * sizeof(*p));
			if (!more) {
				rc = ndz_error_set(e, NDZ_ENOMEM, 0, "chunk %u: %s", i,
						   ndz_strerror(NDZ_ENOMEM));
				goto out;
			}
			p = more;
		}
		memset(&p[n], 0, sizeof(p[n]));
		p[n].coff = (uint32_t)at;
		p[n].clen = (uint32_t)fsz;
		p[n].doff = doff;
		p[n].dlen = (uint32_t)csz;
		n++;
		doff += csz;
		at += fsz;
	}
	if (doff == ndz_hdr_data_bytes(buf, h))
		rc = ndz_index_set_pieces(ix, i, p, n, e);
out:
	free(p);
	return rc;
}

int ndz_index_build(struct ndz_io *image, const char *name, struct ndz_index *ix,
		    struct ndz_error *e)
{
	static const uint8_t none[NDZ_INDEX_DIGEST_LEN];
	struct ndz_io io = { 0 };
	struct hashio h = { 0 };
	struct ndz_image_reader *r = NULL;
	struct ndz_unzip_opts uo;
	struct ndz_unzip *u = NULL;
	const struct ndz_chunk_hdr *first;
	int rc;

	memset(ix, 0, sizeof(*ix));
	rc = ndz_image_reader_open(image, &r, e);
	if (rc < 0)
		return rc;
	first = ndz_image_reader_first(r);
	if (NDZ_IS_ORIG(first) || (first->incompat_flags & NDZ_INCOMPAT_ENCRYPTED)) {
		rc = ndz_error_set(e, NDZ_ENOTSUP, 0, "%s: an %s image: its content index is "
				   "made by imagezip%s", name, NDZ_IS_ORIG(first) ?
				   "original-format" : "encrypted", NDZ_IS_ORIG(first) ?
				   " --from-image (convert it)" : " --encrypt with the image");
		goto out;
	}
	/*
	 * The entries are all there before the writer thread looks at them: the reader
	 * sets each one before its chunk is put, and none may move under the writer.
	 */
	if (!ndz_image_reader_chunks(r)) {
		rc = ndz_error_set(e, NDZ_ENOTSUP, 0, "%s: a stream: the content index is made "
				   "of an image file", name);
		goto out;
	}
	rc = ndz_index_init(ix, first->uuid, ndz_image_reader_chunks(r), first->source_bytes, e);
	if (rc < 0)
		goto out;
	h.ix = ix;
	h.source_bytes = first->source_bytes;
	h.d = ndz_digest_create(e);
	h.pd = h.d ? ndz_digest_create(e) : NULL;
	if (!h.pd) {
		rc = NDZ_ENOMEM;
		goto out;
	}
	io.ops = &hio_ops;
	io.size = ndz_sectors_of(first->source_bytes) * NDZ_SECTOR_SIZE;
	io.name = (char *)"the content index";
	io.priv = &h;
	ndz_unzip_opts_init(&uo);
	uo.threads = 1;                  /* one decoder: the regions come in order */
	uo.name = name;
	rc = ndz_unzip_create(&io, &uo, &u, e);
	if (rc < 0)
		goto out;
	for (;;) {
		struct ndz_chunk_hdr hd;
		uint8_t *buf = ndz_unzip_get_buf(u, e);

		if (!buf) {
			rc = e && e->code ? e->code : NDZ_ENOMEM;
			goto out;
		}
		rc = ndz_image_reader_next(r, buf, &hd, e);
		if (rc <= 0) {
			ndz_unzip_put_buf(u, buf, NULL, 0, NULL);
			if (rc < 0)
				goto out;
			break;
		}
		if (NDZ_IS_ORIG(&hd) || (hd.incompat_flags & NDZ_INCOMPAT_ENCRYPTED)) {
			ndz_unzip_put_buf(u, buf, NULL, 0, NULL);
			rc = ndz_error_set(e, NDZ_ENOTSUP, 0, "%s: chunk %u: encrypted", name,
					   hd.index);
			goto out;
		}
		/* The entry before the chunk is written: its regions say where bytes go. */
		rc = hd.index < ix->chunks ? ndz_index_set(ix, hd.index, &hd, buf, none, e) :
		     ndz_error_set(e, NDZ_ERANGE, 0, "%s: chunk %u: past the image's %u chunks",
				   name, hd.index, ix->chunks);
		if (rc == 0)
			rc = set_pieces(ix, hd.index, &hd, buf, e);
		if (rc == 0)
			rc = ndz_unzip_put_buf(u, buf, &hd, 0, e);
		else
			ndz_unzip_put_buf(u, buf, NULL, 0, NULL);
		if (rc < 0)
			goto out;
	}
	rc = ndz_unzip_finish(u, NULL, e);
	if (rc == 0 && (rc = hio_advance(&h)) == 0 && (h.bad || h.c != ix->chunks))
		rc = NDZ_EREGION;
	if (rc > 0 || (rc < 0 && !(e && e->code)))
		rc = ndz_error_set(e, NDZ_EREGION, 0, "%s: chunk %u: its regions were not "
				   "written whole and in order", name, h.c);
out:
	ndz_unzip_free(u);
	ndz_digest_free(h.d);
	ndz_digest_free(h.pd);
	ndz_image_reader_free(r);
	return rc;
}
