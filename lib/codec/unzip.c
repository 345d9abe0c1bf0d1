/*
 * The restore pipeline: chunks are queued by the caller, each decoded by a task
 * of the thread pool (one thread per core) into write jobs (an 8 MiB buffer, 4 MiB
 * on a tight budget, plus the target segments it fills), and a single writer
 * thread turns jobs into large pwrite()s and zero fills. Memory is the chunk slots and the job buffers, all
 * fixed at creation. Each chunk starts a job of its own and is decoded straight
 * into it, never copied: a zlib chunk whose data fits (its size is known from the
 * regions) in one libdeflate call, others piecewise by zlib; zstd frames (2 MiB
 * at most) one by one right after their prefix, which is the chunk's output just
 * before them in the same buffer. Only when a chunk's output outgrows a job does
 * the next job start with a copy of the last NDZ_ZSTD_PREFIX bytes.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <libdeflate.h>
#include <zlib.h>
#include <zstd.h>

#include "core/err.h"
#include "core/image.h"
#include "core/orig.h"
#include "core/pool.h"
#include "trust/verify.h"
#include "unzip.h"
#include "zip.h"

#define JOB_BIG      (8u << 20)        /* most chunks' whole output */
#define JOB_SMALL    (2 * NDZ_ZSTD_PREFIX)   /* a zstd frame after its prefix */
#define JOB_STREAM   (1u << 20)        /* of a small job, what piecewise zlib fills */
#define MAX_SEGS     (2 * NDZ_ORIG_MAX_REGIONS + 2)   /* a whole chunk's, of either format */
_Static_assert(NDZ_ORIG_MAX_REGIONS >= NDZ_MAX_REGIONS, "MAX_SEGS holds a chunk of ours too");
#define MAX_DECODERS 32
#define DEFAULT_MEM  (128u << 20)
#define MAX_JOB_MEM  (64u << 20)
/* what the budget leaves for the rest: code, libraries, codec contexts, stacks
 * (about 4.5 MiB measured with one decoder, 5 with two) */
#define RESERVE      (6u << 20)
#define WRITE_PIECE  (1u << 20)

struct seg {
	uint64_t off;                  /* target byte offset */
	uint64_t len;
	int64_t data;                  /* offset in the job buffer, or -1 for zeros */
};

struct job {
	uint8_t *buf;
	size_t used;
	unsigned nsegs;
	struct seg segs[MAX_SEGS];
};

struct ndz_unzip {
	struct ndz_io *target;
	struct ndz_unzip_opts opts;

	/*
	 * One lock; a condition per kind of waiter, each signalled for one waiter
	 * when one thing it waits for appears, all broadcast on error and at close.
	 */
	pthread_mutex_t lock;
	pthread_cond_t slot_cv;        /* the caller: a free chunk slot */
	pthread_cond_t job_cv;         /* decoders: a free job */
	pthread_cond_t write_cv;       /* the writer: a queued job, or the end */

	/* chunk slots: free list and FIFO of queued ones */
	uint8_t **slots;
	struct ndz_chunk_hdr *hdrs;    /* per slot: the queued chunk's header */
	uint8_t *checked;              /* per slot: its data was checked by the caller */
	unsigned nslots;
	unsigned *free_slots, nfree;
	unsigned *queue, qhead, qlen;
	unsigned decoding;             /* chunks taken by decoders, not yet done */
	struct owned *owned;           /* per slot: a caller's buffer in it (put_owned) */

	/* jobs: free list and FIFO to the writer */
	struct job *jobs;
	unsigned njobs;
	size_t job_buf;                /* bytes of each job's buffer */
	size_t job_stream;             /* of which piecewise zlib fills (and touches) */
	unsigned *free_jobs, nfree_jobs;
	unsigned *wqueue, whead, wlen;
	int writing;                   /* the writer holds a job */

	/*
	 * The decoders: a pool task per chunk queued, on a free decoder state (one per
	 * pool thread). The writer stays a thread of its own: it is one consumer for
	 * the whole restore whose order is the write jobs' queue, not a task among
	 * others.
	 */
	struct ndz_pool *pool;
	unsigned ndecoders;
	unsigned free_decs[MAX_DECODERS], nfree_decs;
	pthread_t writer;
	int writer_started;
	int closing;                   /* no more chunks will be put */

	struct ndz_image *image;       /* the whole image's rules, under lock */
	const char *name;              /* the image in messages */

	struct ndz_error err;          /* the first failure */
	struct ndz_unzip_stats stats;
};

/* ndz_unzip_put_owned: the caller's buffer in a slot, and the slot's own meanwhile. */
struct owned {
	uint8_t *own;                  /* NULL: the slot holds its own buffer */
	void (*release)(void *ctx, uint8_t *buf);
	void *ctx;
};

/* A slot is free again; a caller's buffer in it goes back (lock held by the caller). */
static void slot_free(struct ndz_unzip *u, unsigned slot)
{
	struct owned *o = &u->owned[slot];

	if (o->own) {
		o->release(o->ctx, u->slots[slot]);
		u->slots[slot] = o->own;
		o->own = NULL;
	}
	u->free_slots[u->nfree++] = slot;
}

/* Wake every waiter: on error and at close (lock held by the caller). */
static void wake_all(struct ndz_unzip *u)
{
	pthread_cond_broadcast(&u->slot_cv);
	pthread_cond_broadcast(&u->job_cv);
	pthread_cond_broadcast(&u->write_cv);
}

/* Record the first error and wake everyone (lock held by the caller). */
static void fail_with(struct ndz_unzip *u, const struct ndz_error *e)
{
	ndz_error_copy(&u->err, e);
	wake_all(u);
}

static void fail(struct ndz_unzip *u, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void fail(struct ndz_unzip *u, int code, const char *fmt, ...)
{
	struct ndz_error e = { 0 };
	va_list ap;

	va_start(ap, fmt);
	ndz_error_vset(&e, code, 0, fmt, ap);
	va_end(ap);
	fail_with(u, &e);
}

void ndz_unzip_opts_init(struct ndz_unzip_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->mem_limit = DEFAULT_MEM;
}

/* ---- writer ---- */

#define ZBLOCK 65536u

static int is_zero(const uint8_t *p, size_t n)
{
	static const uint8_t zeros[ZBLOCK];

	return memcmp(p, zeros, n) == 0;
}

/*
 * Data in writes of at most WRITE_PIECE, sparse or not: with a chunk's whole
 * output (3-8 MiB) in one pwrite() to a new ext4 file, the kernel's copy into the
 * page cache (copy_folio_from_iter_atomic) took 7-12x the CPU of 1 MiB writes
 * (perf, Linux 6.18 here), making restores slower than with the old 1 MiB jobs.
 */
static int write_pieces(struct ndz_unzip *u, const uint8_t *data, uint64_t off, uint64_t len,
			struct ndz_error *e)
{
	/* a direct write copies nothing, and waits for the device: the larger the better */
	uint64_t pos, piece = ndz_io_is_direct(u->target) ? len : WRITE_PIECE;
	int rc;

	for (pos = 0; pos < len; pos += piece) {
		size_t n = len - pos < piece ? (size_t)(len - pos) : (size_t)piece;

		rc = ndz_io_write_full(u->target, data + pos, n, off + pos, e);
		if (rc < 0)
			return rc;
	}
	return 0;
}

/* Write a segment to a target known to be zeros, leaving all-zero blocks as holes. */
static int write_sparse(struct ndz_unzip *u, const uint8_t *data, uint64_t off, uint64_t len,
			struct ndz_error *e)
{
	uint64_t pos = 0;

	while (pos < len) {
		uint64_t start, n;
		int rc;

		while (pos < len) {
			n = len - pos < ZBLOCK ? len - pos : ZBLOCK;
			if (!is_zero(data + pos, (size_t)n))
				break;
			pos += n;
		}
		start = pos;
		while (pos < len) {
			n = len - pos < ZBLOCK ? len - pos : ZBLOCK;
			if (is_zero(data + pos, (size_t)n))
				break;
			pos += n;
		}
		if (pos > start) {
			rc = write_pieces(u, data + start, off + start, pos - start, e);
			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

static int write_job(struct ndz_unzip *u, struct job *j, uint64_t *wrote, uint64_t *zeroed,
		     struct ndz_error *e)
{
	unsigned i;
	int rc;

	for (i = 0; i < j->nsegs; i++) {
		struct seg *s = &j->segs[i];

		if (s->data < 0) {
			rc = u->opts.target_zeroed ? 0 :
			     u->opts.discard ? ndz_io_discard(u->target, s->off, s->len, e) :
			     ndz_io_zero(u->target, s->off, s->len, e);
			*zeroed += s->len;
		} else if (u->opts.target_zeroed) {
			rc = write_sparse(u, j->buf + s->data, s->off, s->len, e);
			*wrote += s->len;
		} else {
			rc = write_pieces(u, j->buf + s->data, s->off, s->len, e);
			*wrote += s->len;
		}
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void *writer_main(void *arg)
{
	struct ndz_unzip *u = arg;

	pthread_mutex_lock(&u->lock);
	for (;;) {
		struct ndz_error e = { 0 };
		uint64_t wrote = 0, zeroed = 0;
		unsigned idx;
		int rc = 0;

		while (!u->wlen && !(u->closing && !u->qlen && !u->decoding))
			pthread_cond_wait(&u->write_cv, &u->lock);
		if (!u->wlen)
			break;
		idx = u->wqueue[u->whead];
		u->whead = (u->whead + 1) % u->njobs;
		u->wlen--;
		u->writing = 1;
		if (!u->err.code && !u->opts.verify_only) {
			pthread_mutex_unlock(&u->lock);
			rc = write_job(u, &u->jobs[idx], &wrote, &zeroed, &e);
			pthread_mutex_lock(&u->lock);
			if (rc < 0)
				fail_with(u, &e);
			u->stats.bytes_written += wrote;
			u->stats.bytes_zeroed += zeroed;
			if (u->opts.progress && wrote + zeroed)
				u->opts.progress(u->opts.progress_ctx,
						 u->stats.bytes_written + u->stats.bytes_zeroed,
						 u->stats.chunks);
		} else if (!u->err.code && u->opts.progress) {
			/* verifying: chunks checked are the progress */
			u->opts.progress(u->opts.progress_ctx, 0, u->stats.chunks);
		}
		u->writing = 0;
		u->free_jobs[u->nfree_jobs++] = idx;
		pthread_cond_signal(&u->job_cv);
	}
	pthread_mutex_unlock(&u->lock);
	return NULL;
}

/* ---- decoders ---- */

/* How a decoder fills its job: whole (libdeflate), frame by frame, or piecewise. */
enum dec_mode { DEC_FLAT, DEC_ZSTD, DEC_STREAM };

struct dec {
	struct ndz_unzip *u;
	z_stream z;
	ZSTD_DCtx *zd;
	struct libdeflate_decompressor *ld;
	const uint8_t *zdata;          /* the chunk's zstd data */
	size_t zlen, zpos;             /* its length; the next frame's offset */
	/*
	 * The chunk's output is decoded into job->buf from offset 0; [0, used) went
	 * to segments (or is the prefix copied from the job before), the avail bytes
	 * after it are decoded and wait for their region.
	 */
	size_t avail;
	struct job *job;
	unsigned job_idx;
};

static int get_job(struct dec *d)
{
	struct ndz_unzip *u = d->u;

	pthread_mutex_lock(&u->lock);
	while (!u->nfree_jobs && !u->err.code)
		pthread_cond_wait(&u->job_cv, &u->lock);
	if (u->err.code) {
		pthread_mutex_unlock(&u->lock);
		return u->err.code;
	}
	d->job_idx = u->free_jobs[--u->nfree_jobs];
	pthread_mutex_unlock(&u->lock);
	d->job = &u->jobs[d->job_idx];
	d->job->used = 0;
	d->job->nsegs = 0;
	return 0;
}

/* Queue job idx for the writer (lock held by the caller). */
static void queue_job(struct ndz_unzip *u, unsigned idx)
{
	u->wqueue[(u->whead + u->wlen) % u->njobs] = idx;
	u->wlen++;
	pthread_cond_signal(&u->write_cv);
}

static void put_job(struct dec *d)
{
	struct ndz_unzip *u = d->u;

	if (!d->job)
		return;
	pthread_mutex_lock(&u->lock);
	queue_job(u, d->job_idx);
	pthread_mutex_unlock(&u->lock);
	d->job = NULL;
}

static int add_seg(struct dec *d, uint64_t off, uint64_t len, int64_t data)
{
	struct seg *s;
	int rc;

	if (!d->job || d->job->nsegs == MAX_SEGS) {
		if (d->avail)
			return NDZ_EINVAL;     /* decoded data in the job: a chunk fits one */
		put_job(d);
		rc = get_job(d);
		if (rc < 0)
			return rc;
	}
	/* Extend the previous segment when it continues on the target and in memory. */
	if (d->job->nsegs) {
		s = &d->job->segs[d->job->nsegs - 1];
		if (s->off + s->len == off && ((s->data < 0 && data < 0) ||
		    (s->data >= 0 && data >= 0 && s->data + (int64_t)s->len == data))) {
			s->len += len;
			return 0;
		}
	}
	s = &d->job->segs[d->job->nsegs++];
	s->off = off;
	s->len = len;
	s->data = data;
	return 0;
}

/* Zero-fill [from, to) sectors of the image, clipped to the source's end (bytes). */
static int zero_gap(struct dec *d, uint64_t end, uint64_t from, uint64_t to)
{
	uint64_t a = from * NDZ_SECTOR_SIZE, b = to * NDZ_SECTOR_SIZE;

	if (b > end)
		b = end;
	if (a >= b)
		return 0;
	return add_seg(d, d->u->opts.target_offset + a, b - a, -1);
}

/*
 * zlib, all at once: the stream must hold exactly want bytes, checksum right,
 * and end at data_len. Nothing of the chunk reaches a job before this passes.
 */
static int flat_decode(struct dec *d, const uint8_t *data, size_t len, size_t want,
		       char *why, size_t whylen)
{
	size_t in_n = 0, out_n = 0;
	enum libdeflate_result r;

	r = libdeflate_zlib_decompress_ex(d->ld, data, len, d->job->buf, want, &in_n, &out_n);
	if (r == LIBDEFLATE_INSUFFICIENT_SPACE) {
		snprintf(why, whylen, "more data than its regions hold");
		return NDZ_ELENGTH;
	}
	if (r != LIBDEFLATE_SUCCESS) {
		snprintf(why, whylen, "invalid deflate data or checksum");
		return NDZ_ECORRUPT;
	}
	if (out_n < want) {
		snprintf(why, whylen, "data ends %zu bytes before its regions do", want - out_n);
		return NDZ_ELENGTH;
	}
	if (in_n < len) {
		snprintf(why, whylen, "%zu bytes after the end of the stream", len - in_n);
		return NDZ_ECORRUPT;
	}
	d->avail = want;
	return 0;
}

/* zlib: inflate up to n bytes of the region data (left bytes remain) into out. */
static int zlib_read(struct dec *d, uint8_t *out, size_t n, uint64_t left, size_t *got,
		     char *why, size_t whylen)
{
	z_stream *z = &d->z;
	int zrc;

	z->next_out = out;
	z->avail_out = (uInt)n;
	zrc = inflate(z, Z_SYNC_FLUSH);
	*got = n - z->avail_out;
	if (zrc == Z_STREAM_END && left > *got) {
		snprintf(why, whylen, "data ends %llu bytes before its regions do",
			 (unsigned long long)(left - *got));
		return NDZ_ELENGTH;
	}
	if (zrc != Z_OK && zrc != Z_STREAM_END) {
		snprintf(why, whylen, "%s", z->msg ? z->msg : "inflate failed");
		return NDZ_ECORRUPT;
	}
	return 0;
}

/* zlib: the stream must end exactly here, checksum included, with nothing after it. */
static int zlib_end(struct dec *d, char *why, size_t whylen)
{
	z_stream *z = &d->z;
	uint8_t probe;
	int zrc;

	z->next_out = &probe;
	z->avail_out = 1;
	zrc = inflate(z, Z_FINISH);
	if (zrc != Z_STREAM_END) {
		snprintf(why, whylen, "%s", zrc == Z_DATA_ERROR && z->msg ? z->msg :
				    z->avail_out == 0 ? "more data than its regions hold" :
				    "compressed data ends early");
		return zrc == Z_DATA_ERROR ? NDZ_ECORRUPT :
		       z->avail_out == 0 ? NDZ_ELENGTH : NDZ_ECORRUPT;
	}
	if (z->avail_in) {
		snprintf(why, whylen, "%u bytes after the end of the stream", z->avail_in);
		return NDZ_ECORRUPT;
	}
	return 0;
}

/*
 * zstd, before anything is decoded: the data must be whole zstd frames, end to
 * end, each stating its content size, at most NDZ_ZSTD_PREFIX, which add up to
 * exactly want bytes.
 */
static int zstd_scan(const uint8_t *data, size_t len, uint64_t want, char *why, size_t whylen)
{
	uint64_t total = 0;
	size_t pos = 0;

	while (pos < len) {
		size_t fsz;
		unsigned long long csz;

		if (len - pos < 4 || data[pos] != 0x28 || data[pos + 1] != 0xb5 ||
		    data[pos + 2] != 0x2f || data[pos + 3] != 0xfd) {
			snprintf(why, whylen, "no zstd frame at data byte %zu", pos);
			return NDZ_ECORRUPT;
		}
		fsz = ZSTD_findFrameCompressedSize(data + pos, len - pos);
		if (ZSTD_isError(fsz)) {
			snprintf(why, whylen, "zstd frame at data byte %zu: %s", pos,
				 ZSTD_getErrorName(fsz));
			return NDZ_ECORRUPT;
		}
		csz = ZSTD_getFrameContentSize(data + pos, fsz);
		if (csz == ZSTD_CONTENTSIZE_UNKNOWN || csz == ZSTD_CONTENTSIZE_ERROR) {
			snprintf(why, whylen, "zstd frame at data byte %zu does not state its size",
				 pos);
			return NDZ_ECORRUPT;
		}
		if (csz > want - total) {
			snprintf(why, whylen, "zstd frames hold more data than its regions");
			return NDZ_ELENGTH;
		}
		if (csz > NDZ_ZSTD_PREFIX) {
			snprintf(why, whylen, "zstd frame at data byte %zu holds %llu bytes, over %u",
				 pos, csz, NDZ_ZSTD_PREFIX);
			return NDZ_ECORRUPT;
		}
		total += csz;
		pos += fsz;
	}
	if (total < want) {
		snprintf(why, whylen, "data ends %llu bytes before its regions do",
			 (unsigned long long)(want - total));
		return NDZ_ELENGTH;
	}
	return 0;
}

/*
 * zstd: decode the next frame whole into the job, right after its prefix (the
 * chunk's last NDZ_ZSTD_PREFIX bytes of output, or all of it, which end at
 * job->used). When it does not fit, the job goes to the writer and a fresh one
 * starts with a copy of the prefix. Returns 0, 1 when no frame is left, or a
 * negative code.
 */
static int zstd_frame(struct dec *d, char *why, size_t whylen)
{
	struct ndz_unzip *u = d->u;
	unsigned long long csz;
	size_t fsz, r, plen;

	if (d->zpos >= d->zlen)
		return 1;
	fsz = ZSTD_findFrameCompressedSize(d->zdata + d->zpos, d->zlen - d->zpos);
	csz = ZSTD_isError(fsz) ? ZSTD_CONTENTSIZE_ERROR :
	      ZSTD_getFrameContentSize(d->zdata + d->zpos, fsz);
	/* the scan let no frame state more than NDZ_ZSTD_PREFIX bytes */
	if (csz > NDZ_ZSTD_PREFIX) {
		snprintf(why, whylen, "zstd frame at data byte %zu: cannot start it", d->zpos);
		return NDZ_ECORRUPT;
	}
	plen = d->job->used < NDZ_ZSTD_PREFIX ? d->job->used : NDZ_ZSTD_PREFIX;
	if (d->job->used + csz > u->job_buf) {
		struct job *old = d->job;
		unsigned old_idx = d->job_idx;
		int rc;

		d->job = NULL;
		rc = get_job(d);
		if (rc < 0) {
			d->job = old;      /* the caller gives it back */
			d->job_idx = old_idx;
			return rc;
		}
		memcpy(d->job->buf, old->buf + old->used - plen, plen);
		d->job->used = plen;   /* not in any segment: written with the job before */
		pthread_mutex_lock(&u->lock);
		queue_job(u, old_idx);
		pthread_mutex_unlock(&u->lock);
	}
	if (ZSTD_isError(ZSTD_DCtx_reset(d->zd, ZSTD_reset_session_only)) ||
	    ZSTD_isError(ZSTD_DCtx_refPrefix(d->zd, plen ? d->job->buf + d->job->used - plen :
					     NULL, plen))) {
		snprintf(why, whylen, "zstd frame at data byte %zu: cannot start it", d->zpos);
		return NDZ_ECORRUPT;
	}
	r = ZSTD_decompressDCtx(d->zd, d->job->buf + d->job->used, u->job_buf - d->job->used,
				d->zdata + d->zpos, fsz);
	if (ZSTD_isError(r)) {
		snprintf(why, whylen, "zstd frame at data byte %zu: %s", d->zpos,
			 ZSTD_getErrorName(r));
		return NDZ_ECORRUPT;
	}
	d->avail = r;
	d->zpos += fsz;
	return 0;
}

/* zstd: every frame decoded, and nothing more than the regions. */
static int zstd_end(struct dec *d, char *why, size_t whylen)
{
	int rc = 0;

	while (!d->avail && (rc = zstd_frame(d, why, whylen)) == 0)
		;
	if (d->avail) {
		snprintf(why, whylen, "more data than its regions hold");
		return NDZ_ELENGTH;
	}
	return rc < 0 ? rc : 0;
}

/*
 * A library error as this file's why: its detail after the code's message
 * ("chunk 3: <message>: detail" gives "detail"), or nothing when it has none.
 */
static int lib_why(int rc, const struct ndz_error *le, char *why, size_t whylen)
{
	const char *m = ndz_error_msg(le), *c = ndz_strerror(rc);
	const char *at = strstr(m, c);
	size_t n = strlen(c);

	snprintf(why, whylen, "%s", !at ? m : at[n] == ':' ? at + n + 2 : "");
	return rc;
}

static int decode_chunk(struct dec *d, uint8_t *chunk, const struct ndz_chunk_hdr *hdr,
			int checked, char *why, size_t whylen)
{
	struct ndz_unzip *u = d->u;
	const struct ndz_chunk_hdr *h;
	struct ndz_chunk_hdr plain;
	struct ndz_chunk_view v;
	int zstd = hdr->codec == NDZ_CODEC_ZSTD;
	enum dec_mode mode;
	uint64_t gap, want;
	struct ndz_error le = { 0 };
	uint32_t r;
	int rc;

	/*
	 * The trust policy (lib/trust/verify.h): the signed hash, else the CRC, then
	 * decryption into plain. A chunk the signed manifest vouches for had its CRC
	 * and padding checked; an encrypted one's data is authenticated by its tag.
	 */
	plain = *hdr;
	rc = ndz_verify_data(u->opts.verify, chunk, &plain, checked ? NDZ_VERIFY_CHECKED : 0,
			     &le);
	if (rc < 0)                    /* its detail, if it has one: the caller names the chunk */
		return strstr(ndz_error_msg(&le), ndz_strerror(rc)) ? lib_why(rc, &le, why, whylen)
								    : rc;
	/* one view of either format (lib/core/orig.h): regions, data, checks, fixes */
	ndz_error_clear(&le);
	if ((rc = ndz_chunk_view_open(chunk, &plain, u->opts.orig_keys, &v, &le)) < 0)
		return lib_why(rc, &le, why, whylen);
	h = &v.h;
	want = v.want;
	gap = h->first;
	/* Every chunk starts a job of its own: its output begins at offset 0. */
	put_job(d);
	if ((rc = get_job(d)) < 0)
		return rc;
	d->avail = 0;
	if (zstd) {
		mode = DEC_ZSTD;
		rc = zstd_scan(v.data, h->data_len, want, why, whylen);
		if (rc < 0)
			return rc;
		d->zdata = v.data;
		d->zlen = h->data_len;
		d->zpos = 0;
	} else if (u->job_buf == JOB_BIG && want <= u->job_buf) {
		mode = DEC_FLAT;
		rc = flat_decode(d, v.data, h->data_len, (size_t)want, why, whylen);
		if (rc == 0 && v.fixups &&
		    (rc = ndz_chunk_view_fix(&v, d->job->buf, want, u->opts.orig_base, &le)) < 0)
			lib_why(rc, &le, why, whylen);
		if (rc < 0)
			return rc;
	} else {
		if (v.fixups && u->opts.orig_base) {
			snprintf(why, whylen, "a disklabel relocation needs a larger memory budget");
			return NDZ_ENOTSUP;
		}
		mode = DEC_STREAM;
		if (inflateReset(&d->z) != Z_OK)
			return NDZ_ECORRUPT;
		d->z.next_in = (Bytef *)(uintptr_t)v.data;
		d->z.avail_in = h->data_len;
	}
	for (r = 0; r < h->nregions; r++) {
		struct ndz_region reg = ndz_chunk_view_region(&v, r);
		uint64_t img = reg.start * NDZ_SECTOR_SIZE;
		uint64_t left = (uint64_t)reg.count * NDZ_SECTOR_SIZE;

		if ((u->opts.zero_fill || u->opts.discard) &&
		    (rc = zero_gap(d, v.end, gap, reg.start)) < 0)
			return rc;
		gap = reg.start + reg.count;
		while (left) {
			uint64_t keep;
			size_t n;

			if (mode == DEC_STREAM) {
				if (d->job->used == u->job_stream || d->job->nsegs == MAX_SEGS) {
					put_job(d);
					if ((rc = get_job(d)) < 0)
						return rc;
				}
				n = u->job_stream - d->job->used;
				n = left < n ? (size_t)left : n;
				rc = zlib_read(d, d->job->buf + d->job->used, n, left, &n, why,
					       whylen);
				if (rc < 0)
					return rc;
				if (n == 0) {
					snprintf(why, whylen, "compressed data ends early");
					return NDZ_ECORRUPT;
				}
				d->avail = n;
			} else if (!d->avail) {
				rc = mode == DEC_ZSTD ? zstd_frame(d, why, whylen) : 1;
				if (rc < 0)
					return rc;
				if (rc > 0) {
					snprintf(why, whylen, "data ends %llu bytes before its "
						 "regions do", (unsigned long long)left);
					return NDZ_ELENGTH;
				}
				continue;
			}
			n = left < d->avail ? (size_t)left : d->avail;
			/* The last sector of a source that is not a whole number of them. */
			keep = n;
			if (img >= v.clip)
				keep = 0;
			else if (img + n > v.clip)
				keep = v.clip - img;
			if (keep && (rc = add_seg(d, u->opts.target_offset + img, keep,
						  (int64_t)d->job->used)) < 0)
				return rc;
			d->job->used += n;
			d->avail -= n;
			img += n;
			left -= n;
		}
	}
	if ((u->opts.zero_fill || u->opts.discard) && (rc = zero_gap(d, v.end, gap, h->last)) < 0)
		return rc;
	return mode == DEC_FLAT ? 0 : mode == DEC_ZSTD ? zstd_end(d, why, whylen) :
	       zlib_end(d, why, whylen);
}

/* The decoders' state lives right after the handle (one allocation). */
static struct dec *decs_of(struct ndz_unzip *u)
{
	return (struct dec *)(u + 1);
}

/*
 * A pool task, one per chunk queued: decode the oldest queued chunk on a free
 * decoder state. After an error, it gives back every queued chunk's slot instead:
 * nothing more is written, but the caller must not block.
 */
static void decode_job(void *arg)
{
	struct ndz_unzip *u = arg;
	char why[128] = "";
	unsigned slot, di;
	struct dec *d;
	int rc;

	pthread_mutex_lock(&u->lock);
	if (u->err.code) {
		while (u->qlen) {
			slot_free(u, u->queue[u->qhead]);
			u->qhead = (u->qhead + 1) % u->nslots;
			u->qlen--;
		}
		pthread_cond_broadcast(&u->slot_cv);
		pthread_cond_broadcast(&u->write_cv);
	}
	if (!u->qlen) {
		pthread_mutex_unlock(&u->lock);
		return;
	}
	slot = u->queue[u->qhead];
	u->qhead = (u->qhead + 1) % u->nslots;
	u->qlen--;
	u->decoding++;
	di = u->free_decs[--u->nfree_decs];        /* one per pool thread: never short */
	d = &decs_of(u)[di];
	pthread_mutex_unlock(&u->lock);

	rc = decode_chunk(d, u->slots[slot], &u->hdrs[slot], u->checked[slot], why, sizeof(why));

	/* The chunk's end in one hand-off: its count, last job and slot. */
	pthread_mutex_lock(&u->lock);
	if (rc == 0) {
		/* counted before its last job can be written: progress sees it */
		u->stats.chunks++;
		if (d->job)
			queue_job(u, d->job_idx);
		d->job = NULL;
	} else {
		/* Record the error before the job could reach the writer. */
		fail(u, rc, "%s: chunk %u: %s%s%s", u->name, u->hdrs[slot].index,
		     ndz_strerror(rc), why[0] ? ": " : "", why);
		if (d->job)
			u->free_jobs[u->nfree_jobs++] = d->job_idx;
		d->job = NULL;
	}
	u->free_decs[u->nfree_decs++] = di;
	u->decoding--;
	slot_free(u, slot);
	pthread_cond_signal(&u->slot_cv);
	/* the writer's end: nothing queued or being decoded after close */
	if (u->closing && !u->qlen && !u->decoding)
		pthread_cond_signal(&u->write_cv);
	pthread_mutex_unlock(&u->lock);
}

/* ---- life cycle ---- */

static int online_cores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > MAX_DECODERS ? MAX_DECODERS : (int)n;
}

/* Free a decoder's codec state (its thread is gone or never started). */
static void dec_release(struct dec *d)
{
	inflateEnd(&d->z);
	ZSTD_freeDCtx(d->zd);
	d->zd = NULL;
	if (d->ld)
		libdeflate_free_decompressor(d->ld);
	d->ld = NULL;
}

int ndz_unzip_create(struct ndz_io *target, const struct ndz_unzip_opts *opts,
		     struct ndz_unzip **out, struct ndz_error *e)
{
	struct ndz_unzip *u;
	size_t mem, fixed;
	unsigned i, threads;
	struct dec *decs;

	if (!target && !opts->verify_only)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: no target to restore to",
				     opts->name ? opts->name : "image");
	u = calloc(1, sizeof(*u) + MAX_DECODERS * sizeof(struct dec));
	if (!u)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", opts->name ? opts->name : "image",
				     ndz_strerror(NDZ_ENOMEM));
	u->target = target;
	u->opts = *opts;
	u->name = opts->name ? opts->name : "image";
	mem = opts->mem_limit ? opts->mem_limit : DEFAULT_MEM;
	threads = opts->threads > 0 ? (unsigned)opts->threads : (unsigned)online_cores();
	if (threads > MAX_DECODERS)
		threads = MAX_DECODERS;
	/*
	 * Budget: a chunk slot per decoder plus two and RESERVE for the rest, then as
	 * many 8 MiB jobs as fit, at least four more than decoders, up to 64 MiB of
	 * them (a writer that keeps up needs few; more only add page faults). On a
	 * tighter budget, 4 MiB jobs, never fewer than one more than decoders (a
	 * decoder holds two at most, while it carries a prefix over, and waits
	 * holding one); zlib then goes piecewise through the first 1 MiB of each,
	 * leaving the rest untouched (not resident): only zstd touches it all. A
	 * budget that cannot hold that for every decoder gets fewer decoders (at
	 * 16 MiB, one).
	 */
	/* a budget too tight for every decoder's slot and jobs: fewer decoders */
	while (threads > 1 && (size_t)(threads + 2) * NDZ_CHUNK_SIZE + RESERVE +
			      (size_t)(threads + 1) * JOB_SMALL > mem)
		threads--;
	u->nslots = threads + 2;
	fixed = (size_t)u->nslots * NDZ_CHUNK_SIZE + RESERVE;
	u->job_buf = mem >= fixed + (size_t)(threads + 4) * JOB_BIG ? JOB_BIG : JOB_SMALL;
	u->njobs = mem > fixed ? (unsigned)((mem - fixed) / u->job_buf) : 0;
	u->job_stream = u->job_buf == JOB_BIG ? JOB_BIG : JOB_STREAM;
	if (u->njobs < threads + 1)
		u->njobs = threads + 1;
	if (u->job_buf == JOB_BIG && u->njobs > MAX_JOB_MEM / JOB_BIG)
		u->njobs = MAX_JOB_MEM / JOB_BIG > threads + 4 ? MAX_JOB_MEM / JOB_BIG : threads + 4;
	if (u->njobs > 64)
		u->njobs = 64;
	pthread_mutex_init(&u->lock, NULL);
	pthread_cond_init(&u->slot_cv, NULL);
	pthread_cond_init(&u->job_cv, NULL);
	pthread_cond_init(&u->write_cv, NULL);
	u->slots = calloc(u->nslots, sizeof(*u->slots));
	u->hdrs = calloc(u->nslots, sizeof(*u->hdrs));
	u->checked = calloc(u->nslots, 1);
	u->free_slots = calloc(u->nslots, sizeof(unsigned));
	u->queue = calloc(u->nslots, sizeof(unsigned));
	u->owned = calloc(u->nslots, sizeof(*u->owned));
	u->jobs = calloc(u->njobs, sizeof(*u->jobs));
	u->free_jobs = calloc(u->njobs, sizeof(unsigned));
	u->wqueue = calloc(u->njobs, sizeof(unsigned));
	if (!u->slots || !u->hdrs || !u->checked || !u->free_slots || !u->queue || !u->jobs ||
	    !u->free_jobs || !u->wqueue || !u->owned || ndz_image_create(&u->image, NULL) < 0)
		goto nomem;
	ndz_image_expect(u->image, opts->expect_chunks,
			 opts->expect_uuid_set ? opts->expect_uuid : NULL);
	for (i = 0; i < u->nslots; i++) {
		u->slots[i] = malloc(NDZ_CHUNK_SIZE);
		if (!u->slots[i])
			goto nomem;
		u->free_slots[u->nfree++] = i;
	}
	for (i = 0; i < u->njobs; i++) {
		/* page-aligned: a direct write (ndz_io_direct) takes the data as it is */
		if (posix_memalign((void **)&u->jobs[i].buf, 4096, u->job_buf) != 0) {
			u->jobs[i].buf = NULL;
			goto nomem;
		}
		u->free_jobs[u->nfree_jobs++] = i;
	}
	if (pthread_create(&u->writer, NULL, writer_main, u) != 0)
		goto nomem;
	u->writer_started = 1;
	decs = decs_of(u);
	for (i = 0; i < threads; i++) {
		decs[i].u = u;
		if (inflateInit(&decs[i].z) != Z_OK)
			break;
		decs[i].zd = ZSTD_createDCtx();
		decs[i].ld = libdeflate_alloc_decompressor();
		if (!decs[i].zd || !decs[i].ld) {
			dec_release(&decs[i]);
			break;
		}
		u->free_decs[u->nfree_decs++] = i;
		u->ndecoders++;
	}
	/* at most one job per chunk slot waits in the pool's queue */
	if (!u->ndecoders || ndz_pool_create(u->ndecoders, u->nslots, &u->pool, NULL) < 0)
		goto nomem;
	*out = u;
	return 0;
nomem:
	ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", u->name, ndz_strerror(NDZ_ENOMEM));
	ndz_unzip_free(u);
	return NDZ_ENOMEM;
}


uint8_t *ndz_unzip_get_buf(struct ndz_unzip *u, struct ndz_error *e)
{
	uint8_t *buf = NULL;

	pthread_mutex_lock(&u->lock);
	while (!u->nfree && !u->err.code)
		pthread_cond_wait(&u->slot_cv, &u->lock);
	if (!u->err.code)
		buf = u->slots[u->free_slots[--u->nfree]];
	else
		ndz_error_copy(e, &u->err);
	pthread_mutex_unlock(&u->lock);
	return buf;
}

static unsigned slot_of(const struct ndz_unzip *u, const uint8_t *buf)
{
	unsigned i;

	for (i = 0; i < u->nslots && u->slots[i] != buf; i++)
		;
	return i;
}

int ndz_unzip_put_buf(struct ndz_unzip *u, uint8_t *buf, const struct ndz_chunk_hdr *h,
		      unsigned flags, struct ndz_error *err)
{
	struct ndz_error e = { 0 };
	unsigned slot;
	int rc, queued = 0;

	pthread_mutex_lock(&u->lock);
	slot = slot_of(u, buf);        /* (under the lock: put_owned swaps buffers in) */
	if (slot == u->nslots) {
		fail(u, NDZ_EINVAL, "%s: a buffer that is not the pipeline's", u->name);
		goto out;
	}
	if (!h || u->err.code)
		goto give_back;
	/* The image's rules and the target's size, before any decoder may write. */
	if (!ndz_image_added(u->image) && !u->opts.verify_only &&
	    ndz_image_fits(h, u->target->name, u->target->size -
			   (u->opts.target_offset < u->target->size ?
			    u->opts.target_offset : u->target->size), &e) < 0) {
		fail_with(u, &e);
		goto give_back;
	}
	if (ndz_image_add(u->image, h, &e) < 0) {
		ndz_error_prefix(&e, "%s", u->name);
		fail_with(u, &e);
		goto give_back;
	}
	/* the trust policy on the header (lib/trust/verify.h): keys and manifest */
	if (ndz_verify_header(u->opts.verify, h, &e) < 0) {
		ndz_error_prefix(&e, "%s", u->name);
		fail_with(u, &e);
		goto give_back;
	}
	u->hdrs[slot] = *h;
	u->checked[slot] = !!(flags & NDZ_UNZIP_CHECKED);
	u->queue[(u->qhead + u->qlen) % u->nslots] = slot;
	u->qlen++;
	queued = 1;
	goto out;
give_back:
	slot_free(u, slot);
	pthread_cond_signal(&u->slot_cv);
out:
	rc = u->err.code;
	if (rc < 0)
		ndz_error_copy(err, &u->err);
	pthread_mutex_unlock(&u->lock);
	if (queued)
		ndz_pool_add(u->pool, decode_job, u);
	return rc;
}

int ndz_unzip_put(struct ndz_unzip *u, const uint8_t *chunk, const struct ndz_chunk_hdr *h,
		  unsigned flags, struct ndz_error *e)
{
	struct ndz_chunk_hdr mine;
	uint8_t *buf;
	int rc;

	if (!h) {
		rc = ndz_hdr_decode(chunk, &mine, NULL);
		if (rc < 0) {
			pthread_mutex_lock(&u->lock);
			fail(u, rc, "%s: chunk %u: %s", u->name, ndz_chunk_index_hint(chunk),
			     ndz_strerror(rc));
			rc = ndz_error_copy(e, &u->err);
			pthread_mutex_unlock(&u->lock);
			return rc;
		}
		h = &mine;
		flags &= ~(unsigned)NDZ_UNZIP_CHECKED;
	}
	buf = ndz_unzip_get_buf(u, e);
	if (!buf) {
		pthread_mutex_lock(&u->lock);
		rc = u->err.code;
		pthread_mutex_unlock(&u->lock);
		return rc;
	}
	memcpy(buf, chunk, NDZ_CHUNK_SIZE);
	return ndz_unzip_put_buf(u, buf, h, flags, e);
}

int ndz_unzip_put_owned(struct ndz_unzip *u, uint8_t *buf, const struct ndz_chunk_hdr *h,
			unsigned flags, void (*release)(void *ctx, uint8_t *buf), void *ctx)
{
	uint8_t *own = ndz_unzip_get_buf(u, NULL);
	unsigned slot;
	int rc;

	if (!own) {
		release(ctx, buf);
		pthread_mutex_lock(&u->lock);
		rc = u->err.code;
		pthread_mutex_unlock(&u->lock);
		return rc;
	}
	/* the caller's buffer takes the place of the slot's own until the slot is free */
	pthread_mutex_lock(&u->lock);
	slot = slot_of(u, own);
	u->owned[slot] = (struct owned){ own, release, ctx };
	u->slots[slot] = buf;
	pthread_mutex_unlock(&u->lock);
	return ndz_unzip_put_buf(u, buf, h, flags, NULL);
}

static void stop_threads(struct ndz_unzip *u)
{
	struct dec *decs = decs_of(u);
	unsigned i;

	pthread_mutex_lock(&u->lock);
	u->closing = 1;
	wake_all(u);
	pthread_mutex_unlock(&u->lock);
	ndz_pool_free(u->pool);                    /* every queued chunk decoded, or given back */
	u->pool = NULL;
	for (i = 0; i < u->ndecoders; i++)
		dec_release(&decs[i]);
	u->ndecoders = 0;
	/* Decoders are gone: wake the writer so it sees the end. */
	pthread_mutex_lock(&u->lock);
	pthread_cond_broadcast(&u->write_cv);
	pthread_mutex_unlock(&u->lock);
	if (u->writer_started)
		pthread_join(u->writer, NULL);
	u->writer_started = 0;
}

int ndz_unzip_held(struct ndz_unzip *u, uint32_t chunk, uint64_t first, uint64_t last,
		   struct ndz_error *e)
{
	int r;

	pthread_mutex_lock(&u->lock);
	r = ndz_image_held(u->image, chunk, first, last, e);
	pthread_mutex_unlock(&u->lock);
	if (r < 0)
		ndz_error_prefix(e, "%s", u->name);
	return r;
}

int ndz_unzip_finish(struct ndz_unzip *u, struct ndz_unzip_stats *stats, struct ndz_error *e)
{
	struct ndz_error mine = { 0 };

	stop_threads(u);
	/* Threads are gone: u is the caller's alone. */
	if (!u->err.code && ndz_image_complete(u->image, &mine) < 0) {
		ndz_error_prefix(&mine, "%s", u->name);
		ndz_error_copy(&u->err, &mine);
	}
	if (!u->err.code && !u->opts.verify_only && !u->opts.scratch && u->target) {
		if (u->opts.flushing)
			u->opts.flushing(u->opts.progress_ctx);
		ndz_io_flush(u->target, &u->err);
	}
	if (stats)
		*stats = u->stats;
	ndz_error_copy(e, &u->err);
	return u->err.code;
}

void ndz_unzip_free(struct ndz_unzip *u)
{
	unsigned i;

	if (!u)
		return;
	pthread_mutex_lock(&u->lock);
	fail(u, NDZ_ECANCELED, "%s", ndz_strerror(NDZ_ECANCELED));
	pthread_mutex_unlock(&u->lock);
	stop_threads(u);
	if (u->slots)
		for (i = 0; i < u->nslots; i++) {
			if (u->owned && u->owned[i].own) {
				u->owned[i].release(u->owned[i].ctx, u->slots[i]);
				u->slots[i] = u->owned[i].own;
			}
			free(u->slots[i]);
		}
	free(u->owned);
	if (u->jobs)
		for (i = 0; i < u->njobs; i++)
			free(u->jobs[i].buf);
	free(u->slots);
	free(u->hdrs);
	free(u->checked);
	ndz_image_free(u->image);
	free(u->free_slots);
	free(u->queue);
	free(u->jobs);
	free(u->free_jobs);
	free(u->wqueue);
	pthread_cond_destroy(&u->slot_cv);
	pthread_cond_destroy(&u->job_cv);
	pthread_cond_destroy(&u->write_cv);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

int ndz_unzip_piece(const uint8_t *c, size_t clen, const uint8_t *prefix, size_t plen,
		    uint8_t *out, size_t dlen, struct ndz_error *e)
{
	ZSTD_DCtx *zd;
	unsigned long long csz;
	size_t fsz, r;

	fsz = ZSTD_findFrameCompressedSize(c, clen);
	csz = ZSTD_isError(fsz) ? ZSTD_CONTENTSIZE_ERROR : ZSTD_getFrameContentSize(c, fsz);
	if (ZSTD_isError(fsz) || fsz != clen || csz != dlen || csz > NDZ_ZSTD_PREFIX ||
	    plen > NDZ_ZSTD_PREFIX)
		return ndz_error_set(e, NDZ_ECORRUPT, 0, "piece of %zu bytes: not one zstd "
				     "frame of %zu bytes", clen, dlen);
	zd = ZSTD_createDCtx();
	if (!zd)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "piece: %s", ndz_strerror(NDZ_ENOMEM));
	if (ZSTD_isError(ZSTD_DCtx_refPrefix(zd, plen ? prefix : NULL, plen)))
		r = (size_t)-1;
	else
		r = ZSTD_decompressDCtx(zd, out, dlen, c, clen);
	ZSTD_freeDCtx(zd);
	if (ZSTD_isError(r) || r != dlen)
		return ndz_error_set(e, NDZ_ECORRUPT, 0, "piece of %zu bytes: %s", clen,
				     ZSTD_isError(r) ? ZSTD_getErrorName(r) : "short");
	return 0;
}
