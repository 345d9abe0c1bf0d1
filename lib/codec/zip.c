/*
 * The compressor. The allocated data is cut into pieces; each piece is one job of
 * the thread pool, which reads it with the 32 KiB before it (its dictionary) and
 * deflates it, and the packer (the calling thread) lays the pieces in order into
 * 1 MiB chunks, each one zlib stream. Only a piece that straddles a chunk's end,
 * or whose dictionary reaches before its chunk's start, is compressed again by
 * the packer, in steps small enough to fill the chunk to within a sector. The
 * packer's decisions depend only on the data, so the image is the same whatever
 * the thread count.
 * zstd works on a fixed grid of 1 MiB cells of the stream instead (see zstd_run):
 * each cell of a chunk is made into frames of 64 KiB (the grain of a piece of the
 * content index), each with the up to 2 MiB of the same chunk before it as prefix,
 * as the format's prefix rule offers; a chunk that starts inside a cell opens
 * with frames to the cell's end, the first with no history. From its third whole
 * cell on, a chunk's frames do not depend on where it starts, so they are made
 * early, in parallel, while the chunks before are filled. At a chunk's end the
 * cell's frames that fit are kept and the rest of the room filled with small
 * frames, up to the cell's end. Its segment workers are long jobs of the pool.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <zlib.h>
#define ZSTD_STATIC_LINKING_ONLY       /* ZSTD_c_stableInBuffer: see zseg_compress */
#include <zstd.h>

#include "core/err.h"
#include "core/pool.h"
#include "trust/index.h"
#include "zip.h"

#define PIECE_SIZE  (128u * 1024)      /* input bytes per worker job */
#define DICT_SIZE   32768u             /* deflate window */
#define DATA_CAP    (NDZ_CHUNK_SIZE - 6) /* zlib: room before the final block and adler32 */
#define MAX_THREADS 64

/* zstd (doc/FORMAT.md, codec 2) */
#define SEG_SIZE    (1u << 20)         /* input per segment (grid cell) */
#define SEG_PREFIX  (2 * SEG_SIZE)     /* history a frame uses: all the format allows */
#define SEG_BACK    ((SEG_PREFIX + SEG_SIZE - 1) / SEG_SIZE) /* cells a prefix may reach into */
#define SEG_STEP    (64u * 1024)       /* input per frame: the grain of a piece */
#define SEG_STEPS   (SEG_SIZE / SEG_STEP)
#define SEG_WLOG    NDZ_ZSTD_WINDOW_LOG
#define SEG_SLOTS   32                 /* grid cells in flight at most */
#define FILL_BUF    (2 * SEG_STEP)     /* input read at a time to fill a chunk's end */

#define SEG_FIT     0.25               /* a cell is handed out once this much is likely to fit */
#define SEG_AHEAD   -1.0               /* next chunk's early frames: to its span + this, in cells */

enum { SEG_FREE, SEG_QUEUED, SEG_BUSY, SEG_DONE };
enum { CD_EMPTY, CD_LOADING, CD_READY };

/*
 * A zstd segment, in the slot of its grid cell: input [start, end) of the stream
 * as frames of SEG_STEP (the last may be shorter) laid end to end in out, the
 * first with plen bytes before it as prefix, each next one with SEG_STEP more,
 * up to SEG_PREFIX. Those three decide its bytes (struct zkey).
 */
struct zseg {
	uint64_t cell;                 /* start / SEG_SIZE */
	uint64_t start, end;
	size_t plen;                   /* prefix bytes right before the input */
	uint8_t *out;
	size_t cp[SEG_STEPS + 1];      /* out bytes after each frame; cp[0] = 0 */
	unsigned ncp;                  /* frames made */
	int state;
	int stop;                      /* no longer wanted: give up */
	int whole;                     /* made to its end */
	uint32_t cut_for;              /* stopped early: the chunk that ends inside it */
};

/* a piece's slot: free, its job queued, being read and compressed, ready to pack */
enum { SLOT_EMPTY, SLOT_QUEUED, SLOT_BUSY, SLOT_DONE };

/* A compressor of either codec, one per thread. */
struct coder {
	z_stream zs;
	ZSTD_CCtx *zc;
};

struct piece {
	struct zip *z;
	uint64_t off;                  /* stream offset of the first input byte */
	size_t len;                    /* input bytes, a multiple of the sector size */
	size_t dict_len;               /* input bytes before off kept in front of in */
	uint8_t *buf;                  /* DICT_SIZE of history, then PIECE_SIZE of input */
	uint8_t *out;
	size_t out_len;
	uLong adler;
	int state;
};

struct zip {
	/* input */
	struct ndz_io *src;
	uint64_t source_bytes;
	const struct ndz_ranges *alloc;
	uint64_t *base;                /* stream offset where each range starts */
	uint64_t total;                /* stream bytes */
	uint64_t npieces;
	const struct ndz_zip_opts *opts;
	int level;
	int zstd;                      /* codec is NDZ_CODEC_ZSTD */
	size_t cap;                    /* chunk offset the data may not pass */

	/* pipeline */
	struct ndz_pool *pool;         /* zlib: one job per piece; zstd: the segment workers */
	pthread_mutex_t lock;
	pthread_cond_t work_cv;        /* zstd: a segment was queued */
	pthread_cond_t done_cv;        /* a piece or segment is ready: the packer may go on */
	struct piece *slots;
	unsigned nslots;
	struct coder *coders;          /* zlib: one per pool thread, free ones in free_coders */
	struct coder **free_coders;
	unsigned ncoders, nfree_coders;
	int stop;
	struct ndz_error err;          /* the first failure, under lock */

	/* packer */
	uint8_t *chunk;
	size_t pos;
	uLong adler;
	uint64_t cin_start, cin_end;   /* stream bytes in the current chunk */
	uint64_t prev_last;            /* sector */
	uint32_t index;
	struct coder pc;
	uint8_t uuid[16];
	ndz_chunk_fn out;
	void *out_ctx;
	/* An all-zero piece after 32 KiB of zeros always deflates to these bytes. */
	uint8_t *zero_out;
	size_t zero_out_len;
	uLong zero_adler;
	struct ndz_zip_stats stats;

	/* zstd, under lock: the grid cells' frames, and the chunk being filled */
	struct zseg *zs;
	unsigned nzs;                  /* slots: cell c's frame is in zs[c % nzs] */
	/*
	 * The input, each cell read once: cell c at cells + SEG_SIZE * (SEG_BACK +
	 * c % ncd), right after cells c - SEG_BACK to c - 1 (for c % ncd < SEG_BACK,
	 * after copies of them in front).
	 */
	uint8_t *cells;
	unsigned ncd;
	uint64_t *cd_cell;             /* the cell each place holds, or UINT64_MAX */
	int *cd_state;                 /* CD_EMPTY, CD_LOADING, CD_READY */
	uint64_t zc_start, zc_lim;     /* the chunk's first input byte, and its limit */
	uint32_t zc_index;
	uint64_t zs_pack;              /* the cell of the next frame to place */
	size_t zs_placed;              /* z->pos as of zs_pack: the workers' view */
	double zs_ratio;               /* output per input byte of the last chunk */
	int zc_open;                   /* the zc_ and zs_ fields describe a chunk being filled */
	int idle;                      /* workers waiting for work */
	uint8_t *fill;                 /* FILL_BUF of input for fill frames */

	/* the content index (opts->index): the packer hashes what each chunk holds */
	struct ndz_digest *digest;
	uint64_t hash_end;             /* stream bytes past source_bytes are not hashed */
	/* and, for zstd chunks not encrypted, each frame as a piece (doc/FORMAT.md) */
	struct ndz_digest *pdigest;
	struct ndz_index_piece *fr;      /* the chunk's pieces so far */
	uint32_t nfr, cap_fr;
};

/* Wake every waiting thread, to see an error or the end (lock held). */
static void wake_all(struct zip *z)
{
	pthread_cond_broadcast(&z->work_cv);
	pthread_cond_broadcast(&z->done_cv);
}

/* Stop everything for an error; the first one is kept. */
static void stop_with(struct zip *z, const struct ndz_error *e)
{
	pthread_mutex_lock(&z->lock);
	ndz_error_copy(&z->err, e);
	z->stop = 1;
	wake_all(z);
	pthread_mutex_unlock(&z->lock);
}

static void set_err(struct zip *z, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void set_err(struct zip *z, int code, const char *fmt, ...)
{
	struct ndz_error e = { 0 };
	va_list ap;

	va_start(ap, fmt);
	ndz_error_vset(&e, code, 0, fmt, ap);
	va_end(ap);
	stop_with(z, &e);
}

/* The first error, read under the lock: other threads may be setting it. */
static int zip_err(struct zip *z)
{
	int rc;

	pthread_mutex_lock(&z->lock);
	rc = z->err.code ? z->err.code : z->stop ? NDZ_ECANCELED : 0;
	pthread_mutex_unlock(&z->lock);
	return rc;
}

/*
 * The content index's digest of the chunk being packed: n bytes of input at stream
 * offset off, as they are compressed into it, in stream order (the packer's thread).
 * The stream's bytes past source_bytes (a last partial sector) are not written by
 * a restore, so not hashed.
 */
static void zhash(struct zip *z, uint64_t off, const uint8_t *in, size_t n)
{
	if (!z->digest || off >= z->hash_end)
		return;
	if (n > z->hash_end - off)
		n = (size_t)(z->hash_end - off);
	if (ndz_digest_update(z->digest, in, n, NULL) < 0 ||
	    (z->pdigest && ndz_digest_update(z->pdigest, in, n, NULL) < 0))
		set_err(z, NDZ_ENOMEM, "chunk %u: sha-256 failed", z->index);
}

/*
 * The frame just placed in the chunk being packed, at coff of its data for clen
 * bytes, holding the stream's [off, off + dlen), is the chunk's next piece; its digest is what zhash was given since
 * the last piece.
 */
static void zpiece(struct zip *z, size_t coff, size_t clen, uint64_t off, size_t dlen)
{
	struct ndz_index_piece *p;

	if (!z->pdigest)
		return;
	if (z->nfr == z->cap_fr) {
		uint32_t cap = z->cap_fr ? 2 * z->cap_fr : 64;
		struct ndz_index_piece *more = realloc(z->fr, cap * sizeof(*more));

		if (!more) {
			set_err(z, NDZ_ENOMEM, "chunk %u: %s", z->index, ndz_strerror(NDZ_ENOMEM));
			return;
		}
		z->fr = more;
		z->cap_fr = cap;
	}
	p = &z->fr[z->nfr++];
	p->coff = (uint32_t)(coff - NDZ_HDR_SIZE);
	p->clen = (uint32_t)clen;
	p->doff = off - z->cin_start;
	p->dlen = (uint32_t)dlen;
	if (ndz_digest_final(z->pdigest, p->digest, NULL) < 0)
		set_err(z, NDZ_ENOMEM, "chunk %u: sha-256 failed", z->index);
}

void ndz_zip_opts_init(struct ndz_zip_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->codec = NDZ_CODEC_ZLIB;
	o->level = NDZ_ZLIB_DEFAULT_LEVEL;
	o->threads = 0;
}

/* Worst-case output of n input bytes: zlib's sync-flushed deflate, or a zstd frame. */
static size_t out_bound(size_t n)
{
	size_t zb = ZSTD_compressBound(n), db = n + (n + 7) / 8 + (n + 63) / 64 + 64;

	return zb > db ? zb : db;
}

/* Index of the range holding stream offset off (off < total). */
static size_t range_at(const struct zip *z, uint64_t off)
{
	size_t lo = 0, hi = z->alloc->n;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (z->base[mid] <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

/* ---- reader ---- */

/* Read stream bytes [off, off + len) of the allocated data into dst. */
static int read_stream(struct zip *z, uint8_t *dst, uint64_t off, size_t len)
{
	uint64_t end = off + len;
	size_t k = range_at(z, off);

	while (off < end) {
		const struct ndz_range *r = &z->alloc->v[k];
		uint64_t in_range = off - z->base[k];
		uint64_t src_off = r->start * NDZ_SECTOR_SIZE + in_range;
		uint64_t n = r->count * NDZ_SECTOR_SIZE - in_range;
		size_t got = 0;
		int rc;

		if (n > end - off)
			n = end - off;
		if (src_off >= z->source_bytes) {
			memset(dst, 0, (size_t)n);
		} else {
			size_t want = (size_t)n;
			struct ndz_error e = { 0 };

			if (src_off + want > z->source_bytes)
				want = (size_t)(z->source_bytes - src_off);
			/* Each read has its own error: threads read the source at once. */
			rc = ndz_io_read_full(z->src, dst, want, src_off, &got, &e);
			if (rc == NDZ_ESHORTREAD) {
				set_err(z, rc, "%s: ends at byte %llu, before its stated size",
					z->src->name, (unsigned long long)(src_off + got));
				return rc;
			}
			if (rc < 0) {
				stop_with(z, &e);
				return rc;
			}
			memset(dst + want, 0, (size_t)n - want);
		}
		dst += n;
		off += n;
		k++;
	}
	return 0;
}

/* ---- workers ---- */

static int all_zero(const uint8_t *p, size_t n)
{
	static const uint8_t zeros[4096];

	while (n >= sizeof(zeros)) {
		if (memcmp(p, zeros, sizeof(zeros)) != 0)
			return 0;
		p += sizeof(zeros);
		n -= sizeof(zeros);
	}
	return memcmp(p, zeros, n) == 0;
}

/* One whole zstd frame of in[0, n) at out, at most cap bytes; its length or 0. */
static size_t zstd_frame(ZSTD_CCtx *zc, uint8_t *out, size_t cap, const uint8_t *in, size_t n)
{
	size_t r = ZSTD_compress2(zc, out, cap, in, n);

	return ZSTD_isError(r) ? 0 : r;
}

static int compress_piece(struct zip *z, struct coder *c, struct piece *p)
{
	z_stream *s = &c->zs;
	int rc;

	/* Zeros after zeros deflate to the same bytes every time. */
	if (z->zero_out && p->len == PIECE_SIZE && p->dict_len == DICT_SIZE &&
	    all_zero(p->buf, DICT_SIZE + PIECE_SIZE)) {
		memcpy(p->out, z->zero_out, z->zero_out_len);
		p->out_len = z->zero_out_len;
		p->adler = z->zero_adler;
		return 0;
	}
	if (deflateReset(s) != Z_OK)
		return NDZ_ECORRUPT;
	if (p->dict_len &&
	    deflateSetDictionary(s, p->buf + DICT_SIZE - p->dict_len, (uInt)p->dict_len) != Z_OK)
		return NDZ_ECORRUPT;
	s->next_in = p->buf + DICT_SIZE;
	s->avail_in = (uInt)p->len;
	s->next_out = p->out;
	s->avail_out = (uInt)out_bound(PIECE_SIZE);
	rc = deflate(s, Z_SYNC_FLUSH);
	if (rc != Z_OK || s->avail_in != 0 || s->avail_out == 0)
		return NDZ_ECORRUPT;
	p->out_len = (size_t)(s->next_out - p->out);
	p->adler = adler32(adler32(0L, Z_NULL, 0), p->buf + DICT_SIZE, (uInt)p->len);
	return 0;
}

/* zstd frames: a window of at most the format's limit, a content checksum. */
static int coder_init(struct coder *c, const struct zip *z)
{
	memset(c, 0, sizeof(*c));
	if (!z->zstd)
		return deflateInit2(&c->zs, z->level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) ==
		       Z_OK ? 0 : NDZ_ENOMEM;
	c->zc = ZSTD_createCCtx();
	if (!c->zc ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_compressionLevel, z->level)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_windowLog, SEG_WLOG)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_stableInBuffer, 1)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_checksumFlag, 1)) ||
	    ZSTD_isError(ZSTD_CCtx_setParameter(c->zc, ZSTD_c_contentSizeFlag, 1))) {
		ZSTD_freeCCtx(c->zc);
		c->zc = NULL;
		return NDZ_ENOMEM;
	}
	return 0;
}

static void coder_end(struct coder *c)
{
	if (c->zs.state)
		deflateEnd(&c->zs);
	ZSTD_freeCCtx(c->zc);
	c->zc = NULL;
}

/*
 * Read piece p with its dictionary (the stream's 32 KiB before it, read again
 * rather than copied from the piece before, which may not be read yet) and
 * deflate it with coder c. Returns 0 or a negative code, the error recorded.
 */
static int make_piece(struct zip *z, struct coder *c, struct piece *p)
{
	int rc = read_stream(z, p->buf + DICT_SIZE - p->dict_len, p->off - p->dict_len,
			     p->dict_len + p->len);

	if (rc < 0)
		return rc;
	rc = compress_piece(z, c, p);
	if (rc < 0)
		set_err(z, rc, "compression failed");
	return rc;
}

/* A pool job: make piece p, unless the packer took it first or all is stopping. */
static void piece_job(void *arg)
{
	struct piece *p = arg;
	struct zip *z = p->z;
	struct coder *c;
	int rc;

	pthread_mutex_lock(&z->lock);
	if (z->stop || p->state != SLOT_QUEUED) {
		pthread_mutex_unlock(&z->lock);
		return;
	}
	p->state = SLOT_BUSY;
	c = z->free_coders[--z->nfree_coders];    /* one per thread: never short */
	pthread_mutex_unlock(&z->lock);
	rc = make_piece(z, c, p);
	pthread_mutex_lock(&z->lock);
	z->free_coders[z->nfree_coders++] = c;
	if (rc == 0)
		p->state = SLOT_DONE;
	pthread_cond_broadcast(&z->done_cv);
	pthread_mutex_unlock(&z->lock);
}

/* ---- packer ---- */

static void chunk_start(struct zip *z)
{
	memset(z->chunk, 0, NDZ_CHUNK_SIZE);
	z->cin_start = z->cin_end;
	if (z->zstd) {
		z->pos = NDZ_HDR_SIZE;
		return;
	}
	z->chunk[NDZ_HDR_SIZE] = 0x78;             /* zlib header: deflate, 32 KiB window */
	z->chunk[NDZ_HDR_SIZE + 1] = 0x9c;
	z->pos = NDZ_HDR_SIZE + 2;
	z->adler = adler32(0L, Z_NULL, 0);
}

static int chunk_finish(struct zip *z, int last)
{
	struct ndz_chunk_hdr h;
	uint64_t off = z->cin_start;
	uint8_t *p = z->chunk + z->pos;
	size_t tail = z->zstd ? 0 : 6;
	int rc;

	if (!z->zstd) {
		p[0] = 0x03;                       /* final, empty, fixed-Huffman block */
		p[1] = 0x00;
		p[2] = (uint8_t)(z->adler >> 24);  /* zlib's trailer is big-endian */
		p[3] = (uint8_t)(z->adler >> 16);
		p[4] = (uint8_t)(z->adler >> 8);
		p[5] = (uint8_t)z->adler;
	}
	/* A zstd attempt that did not fit may have left bytes past the data. */
	memset(p + tail, 0, NDZ_CHUNK_SIZE - z->pos - tail);
	memset(&h, 0, sizeof(h));
	h.version = NDZ_VERSION_1;
	h.index = z->index;
	h.chunk_flags = last ? NDZ_CHUNK_LAST : 0;
	memcpy(h.uuid, z->uuid, 16);
	h.sector_size = NDZ_SECTOR_SIZE;
	h.codec = z->zstd ? NDZ_CODEC_ZSTD : NDZ_CODEC_ZLIB;
	h.level = (uint16_t)z->level;
	h.source_bytes = z->source_bytes;
	h.source_sectors = ndz_sectors_of(z->source_bytes);
	h.image_kind = z->opts->image_kind;
	h.part_index = z->opts->part_index;
	h.part_type = z->opts->part_type;
	h.part_start = z->opts->part_start;
	h.data_len = (uint32_t)(z->pos + tail - NDZ_HDR_SIZE);
	h.data_crc = ndz_crc32(0, z->chunk + NDZ_HDR_SIZE, h.data_len);
	h.first = z->prev_last;
	while (off < z->cin_end) {
		size_t k = range_at(z, off);
		const struct ndz_range *r = &z->alloc->v[k];
		uint64_t start = r->start + (off - z->base[k]) / NDZ_SECTOR_SIZE;
		uint64_t end = r->start + r->count;
		uint64_t lim = z->cin_end - off;

		if ((end - start) * NDZ_SECTOR_SIZE > lim)
			end = start + lim / NDZ_SECTOR_SIZE;
		ndz_hdr_set_region(z->chunk, h.nregions++,
				   (struct ndz_region){ start, (uint32_t)(end - start) });
		h.last = end;
		off += (end - start) * NDZ_SECTOR_SIZE;
	}
	if (last)
		h.last = h.source_sectors;
	else if (!h.nregions)
		h.last = h.first;
	rc = ndz_hdr_encode(&h, z->chunk, NULL);
	if (rc < 0) {
		set_err(z, rc, "chunk %u: internal error encoding the header", z->index);
		return rc;
	}
	if (z->digest) {
		uint8_t digest[NDZ_INDEX_DIGEST_LEN];
		struct ndz_error e = { 0 };

		if (ndz_digest_final(z->digest, digest, &e) < 0 ||
		    ndz_index_set(z->opts->index, h.index, &h, z->chunk, digest, &e) < 0 ||
		    (z->pdigest && ndz_index_set_pieces(z->opts->index, h.index, z->fr,
							z->nfr, &e) < 0)) {
			stop_with(z, &e);
			return e.code;
		}
		z->nfr = 0;
	}
	{
		struct ndz_error e = { 0 };

		rc = z->out(z->out_ctx, z->chunk, z->index, &e);
		if (rc < 0) {
			if (!e.code)
				ndz_error_set(&e, rc, 0, "chunk %u: %s", z->index, ndz_strerror(rc));
			stop_with(z, &e);
			return rc;
		}
	}
	z->stats.chunks++;
	z->stats.out_bytes += NDZ_CHUNK_SIZE;
	z->stats.data_bytes += h.data_len;
	z->prev_last = h.last;
	z->index++;
	return 0;
}

/* Stream offset a chunk starting at start may not reach: its region list would overflow. */
static uint64_t region_limit_at(const struct zip *z, uint64_t start)
{
	size_t k;

	if (start >= z->total)
		return z->total;
	k = range_at(z, start);
	if (k + NDZ_MAX_REGIONS >= z->alloc->n)
		return z->total;
	return z->base[k + NDZ_MAX_REGIONS];
}

static uint64_t region_limit(const struct zip *z)
{
	return region_limit_at(z, z->cin_start);
}

/*
 * Deflate p's input from stream offset from up to to into the chunk, in steps
 * whose worst-case output still fits, with the chunk's own history as dictionary.
 * Returns the offset reached.
 */
static uint64_t deflate_part(struct zip *z, struct piece *p, uint64_t from, uint64_t to)
{
	const uint8_t *in = p->buf + DICT_SIZE;
	uint64_t hist = from - z->cin_start;
	z_stream *s = &z->pc.zs;

	if (hist > DICT_SIZE)
		hist = DICT_SIZE;
	deflateReset(s);
	if (hist)
		deflateSetDictionary(s, in + (from - p->off) - hist, (uInt)hist);
	while (from < to) {
		size_t avail = z->cap - z->pos, n;

		if (avail < 64 + NDZ_SECTOR_SIZE * 2)
			break;
		n = (avail - 64) * 64 / 73;
		n -= n % NDZ_SECTOR_SIZE;
		while (n && out_bound(n) > avail)
			n -= NDZ_SECTOR_SIZE;
		if (!n)
			break;
		if (n > to - from)
			n = (size_t)(to - from);
		s->next_in = (Bytef *)(uintptr_t)(in + (from - p->off));
		s->avail_in = (uInt)n;
		s->next_out = z->chunk + z->pos;
		s->avail_out = (uInt)avail;
		if (deflate(s, Z_SYNC_FLUSH) != Z_OK || s->avail_in || !s->avail_out) {
			set_err(z, NDZ_ECORRUPT, "chunk %u: deflate failed", z->index);
			return from;
		}
		z->pos = (size_t)(s->next_out - z->chunk);
		z->adler = adler32(z->adler, in + (from - p->off), (uInt)n);
		zhash(z, from, in + (from - p->off), n);
		from += n;
	}
	return from;
}

static int pack_piece(struct zip *z, struct piece *p)
{
	uint64_t end = p->off + p->len, from = p->off;

	/* Fast path: the worker's output fits and its dictionary lies inside this chunk. */
	if (p->dict_len <= p->off - z->cin_start && z->pos + p->out_len <= z->cap &&
	    end <= region_limit(z)) {
		memcpy(z->chunk + z->pos, p->out, p->out_len);
		z->pos += p->out_len;
		z->adler = adler32_combine(z->adler, p->adler, (z_off_t)p->len);
		zhash(z, p->off, p->buf + DICT_SIZE, p->len);
		z->cin_end = end;
		return 0;
	}
	while (from < end) {
		uint64_t lim = region_limit(z), to = end < lim ? end : lim;
		uint64_t reached = deflate_part(z, p, from, to);
		int rc = zip_err(z);

		if (rc < 0)
			return rc;
		z->cin_end = reached;
		if (reached < end) {
			if (reached == z->cin_start) {
				set_err(z, NDZ_ECORRUPT, "chunk %u: no progress", z->index);
				return zip_err(z);
			}
			if (chunk_finish(z, 0) < 0)
				return zip_err(z);
			chunk_start(z);
		}
		from = reached;
	}
	return 0;
}

/* Hand piece i to the pool, in its slot (free: the piece nslots before is packed). */
static void piece_queue(struct zip *z, uint64_t i)
{
	struct piece *p = &z->slots[i % z->nslots];

	pthread_mutex_lock(&z->lock);
	p->off = i * PIECE_SIZE;
	p->len = (size_t)(z->total - p->off < PIECE_SIZE ? z->total - p->off : PIECE_SIZE);
	p->dict_len = i ? DICT_SIZE : 0;       /* only the last piece is shorter */
	p->state = SLOT_QUEUED;
	pthread_mutex_unlock(&z->lock);
	ndz_pool_add(z->pool, piece_job, p);
}

static int packer(struct zip *z)
{
	uint64_t i, next = 0;

	chunk_start(z);
	for (i = 0; i < z->npieces; i++) {
		struct piece *p = &z->slots[i % z->nslots];
		int mine = 0, stop;

		for (; next < z->npieces && next < i + z->nslots; next++)
			piece_queue(z, next);
		pthread_mutex_lock(&z->lock);
		while (!z->stop && p->state != SLOT_DONE) {
			/* Nobody took it yet: make it here rather than wait. */
			if (p->state == SLOT_QUEUED) {
				p->state = SLOT_BUSY;
				mine = 1;
				break;
			}
			pthread_cond_wait(&z->done_cv, &z->lock);
		}
		stop = z->stop;
		pthread_mutex_unlock(&z->lock);
		if (stop)
			return zip_err(z);
		if (mine && make_piece(z, &z->pc, p) < 0)
			return zip_err(z);
		if (pack_piece(z, p) < 0)
			return zip_err(z);
		z->stats.in_bytes += p->len;
		if (z->opts->progress)
			z->opts->progress(z->opts->progress_ctx, z->cin_end, z->total);
		pthread_mutex_lock(&z->lock);
		p->state = SLOT_EMPTY;
		pthread_mutex_unlock(&z->lock);
	}
	return chunk_finish(z, 1);
}

/* Precompute the deflate of a zero piece that follows zeros (free space, holes). */
static int make_zero_piece(struct zip *z)
{
	struct piece p;
	int rc;

	memset(&p, 0, sizeof(p));
	p.buf = calloc(1, DICT_SIZE + PIECE_SIZE);
	p.out = malloc(out_bound(PIECE_SIZE));
	p.len = PIECE_SIZE;
	p.dict_len = DICT_SIZE;
	if (!p.buf || !p.out) {
		free(p.buf);
		free(p.out);
		return NDZ_ENOMEM;
	}
	rc = compress_piece(z, &z->pc, &p);
	free(p.buf);
	if (rc < 0) {
		free(p.out);
		return rc;
	}
	z->zero_out = p.out;
	z->zero_out_len = p.out_len;
	z->zero_adler = p.adler;
	return 0;
}

/* ---- zstd ---- */

/*
 * Fill the current chunk's room with stand-alone frames (no prefix used) of the
 * input from from up to to. Each frame takes as many sectors as ratio (output per
 * input byte, from the last frame) says will fit; when that overflows, the most
 * sectors whose worst case still fits. Returns the offset reached.
 */
static uint64_t zstd_fill(struct zip *z, uint64_t from, uint64_t to, double ratio)
{
	while (from < to) {
		size_t win = to - from < FILL_BUF ? (size_t)(to - from) : FILL_BUF, done = 0;

		if (out_bound(NDZ_SECTOR_SIZE) > z->cap - z->pos)
			break;
		if (read_stream(z, z->fill, from, win) < 0)
			return from;
		while (done < win) {
			size_t avail = z->cap - z->pos, n, got = 0;
			double guess = (double)(avail - 64) / (ratio * 1.1 + 0.001);

			if (out_bound(NDZ_SECTOR_SIZE) > avail)
				return from + done;
			n = guess < (double)(win - done) ? (size_t)guess : win - done;
			n -= n % NDZ_SECTOR_SIZE;
			if (n)
				got = zstd_frame(z->pc.zc, z->chunk + z->pos, avail, z->fill + done, n);
			if (!got) {
				size_t m = avail - avail / 64;

				n = m < win - done ? m : win - done;
				n -= n % NDZ_SECTOR_SIZE;
				while (n && out_bound(n) > avail)
					n -= NDZ_SECTOR_SIZE;
				if (!n)
					return from + done;
				got = zstd_frame(z->pc.zc, z->chunk + z->pos, avail, z->fill + done, n);
				if (!got) {
					set_err(z, NDZ_ECORRUPT, "chunk %u: zstd compression failed",
						z->index);
					return from + done;
				}
			}
			ratio = (double)got / (double)n;
			z->pos += got;
			zhash(z, from + done, z->fill + done, n);
			zpiece(z, z->pos - got, got, from + done, n);
			done += n;
		}
		from += win;
	}
	return from;
}

/* ---- zstd: segments on a fixed grid ---- */

/* What decides a segment frame's bytes: its input and how much prefix it uses. */
struct zkey {
	uint64_t start, end;
	size_t plen;
};

/* The slot of grid cell c (lock held, or its compressing thread). */
static struct zseg *zseg_of(struct zip *z, uint64_t c)
{
	return &z->zs[c % z->nzs];
}

/*
 * The frame the chunk being filled wants at cell c (lock held; c starts before
 * the chunk's limit, at or after its first cell): the cell's input inside the
 * chunk, with up to SEG_PREFIX of the chunk's input before it as prefix.
 */
static struct zkey want_key(const struct zip *z, uint64_t c)
{
	uint64_t a = c * SEG_SIZE, b = a + SEG_SIZE;
	struct zkey k;

	if (a < z->zc_start)
		a = z->zc_start;
	if (b > z->zc_lim)
		b = z->zc_lim;
	k.start = a;
	k.end = b;
	k.plen = a - z->zc_start < SEG_PREFIX ? (size_t)(a - z->zc_start) : SEG_PREFIX;
	return k;
}

/*
 * Cell c's frames in every chunk that starts SEG_PREFIX or more before it and does
 * not end inside it: the same whatever the chunk's start, so made early.
 */
static struct zkey grid_key(const struct zip *z, uint64_t c)
{
	struct zkey k;

	k.start = c * SEG_SIZE;
	k.end = z->total - k.start < SEG_SIZE ? z->total : k.start + SEG_SIZE;
	k.plen = k.start < SEG_PREFIX ? (size_t)k.start : SEG_PREFIX;
	return k;
}

/* Slot g holds (or is making) cell c's frame of key k (lock held). */
static int key_is(const struct zseg *g, uint64_t c, struct zkey k)
{
	return g->state != SEG_FREE && g->cell == c && g->start == k.start && g->end == k.end &&
	       g->plen == k.plen;
}

static void zseg_queue(struct zip *z, struct zseg *g, uint64_t c, struct zkey k)
{
	g->cell = c;
	g->start = k.start;
	g->end = k.end;
	g->plen = k.plen;
	g->ncp = 0;
	g->cp[0] = 0;
	g->stop = 0;
	g->whole = 0;
	g->cut_for = UINT32_MAX;
	g->state = SEG_QUEUED;
	pthread_cond_signal(&z->work_cv);
}

/*
 * The least room the chunk being filled will have used before cell c (lock held):
 * what is placed, and what the frames between have made so far for this chunk,
 * which only grows.
 */
static size_t zseg_lower(struct zip *z, uint64_t c)
{
	size_t used = z->zs_placed;
	uint64_t j;

	for (j = z->zs_pack; j < c && j * SEG_SIZE < z->zc_lim; j++) {
		struct zseg *g = zseg_of(z, j);

		if (key_is(g, j, want_key(z, j)))
			used += g->cp[g->ncp];
	}
	return used;
}

static void zseg_dispatch(struct zip *z);

/*
 * The room the chunk being filled uses before cell c, when every frame from the
 * next to place up to c is made whole (lock held); else SIZE_MAX.
 */
static size_t zseg_exact(struct zip *z, uint64_t c)
{
	size_t used = z->zs_placed;
	uint64_t j;

	for (j = z->zs_pack; j < c; j++) {
		struct zseg *g = zseg_of(z, j);

		if (!key_is(g, j, want_key(z, j)) || g->state != SEG_DONE || !g->whole)
			return SIZE_MAX;
		used += g->cp[g->ncp];
	}
	return used;
}

/* Where cell c's input is (or goes) in memory. */
static uint8_t *cell_data(const struct zip *z, uint64_t c)
{
	return z->cells + SEG_SIZE * (SEG_BACK + c % z->ncd);
}

/*
 * Have cell c's input in memory (lock held, released to read): read it unless
 * it is there or being read. Its place held a cell no frame in flight uses: the
 * frames in flight are those of the ncd - 1 - SEG_BACK cells from the next to
 * place, which use their own cells and the SEG_BACK before. Returns 0 or a negative code.
 */
static int cell_load(struct zip *z, uint64_t c)
{
	unsigned i = (unsigned)(c % z->ncd);
	uint64_t off = c * SEG_SIZE;
	size_t n = z->total - off < SEG_SIZE ? (size_t)(z->total - off) : SEG_SIZE;
	int rc;

	for (;;) {
		if (z->stop)
			return NDZ_ECANCELED;
		if (z->cd_cell[i] == c && z->cd_state[i] == CD_READY)
			return 0;
		if (z->cd_cell[i] != c || z->cd_state[i] != CD_LOADING)
			break;
		pthread_cond_wait(&z->done_cv, &z->lock);
	}
	z->cd_cell[i] = c;
	z->cd_state[i] = CD_LOADING;
	pthread_mutex_unlock(&z->lock);
	rc = read_stream(z, cell_data(z, c), off, n);
	if (rc == 0 && i >= z->ncd - SEG_BACK)     /* those before cell 0's place */
		memcpy(z->cells + SEG_SIZE * (i - (z->ncd - SEG_BACK)), cell_data(z, c), n);
	pthread_mutex_lock(&z->lock);
	z->cd_state[i] = rc < 0 ? CD_EMPTY : CD_READY;
	pthread_cond_broadcast(&z->done_cv);
	return rc;
}

/*
 * Read ahead, when there is nothing to compress (lock held): the first cell a
 * frame in flight may need that is not in memory yet. Returns 1 if it read one.
 */
static int cell_prefetch(struct zip *z)
{
	uint64_t c, ncells = (z->total + SEG_SIZE - 1) / SEG_SIZE;

	for (c = z->zs_pack; c + 1 < z->zs_pack + z->nzs && c < ncells; c++) {
		unsigned i = (unsigned)(c % z->ncd);

		if (z->cd_cell[i] != c || z->cd_state[i] == CD_EMPTY) {
			cell_load(z, c);
			return 1;
		}
	}
	return 0;
}

/*
 * Compress slot g's input into frames of SEG_STEP, frame j with the chunk's
 * min(SEG_PREFIX, plen + j * SEG_STEP) bytes before it as prefix: the last 2 MiB
 * a reader offers (doc/FORMAT.md), which cells c - 2 to c hold in one run of
 * memory. The packer may end the segment after any frame. Stops early when
 * told to, or when the chunk being filled, if it reaches this segment, will
 * certainly be cut inside it: it is then only good for that chunk (cut_for).
 */
static int zseg_compress(struct zip *z, ZSTD_CCtx *zc, struct zseg *g)
{
	size_t len = (size_t)(g->end - g->start), cap = out_bound(SEG_SIZE) + 64 * SEG_STEPS;
	size_t steps = (len + SEG_STEP - 1) / SEG_STEP, pos = 0;
	uint8_t *at = cell_data(z, g->cell) + (g->start - g->cell * SEG_SIZE);
	unsigned k;
	int rc = 0;

	pthread_mutex_lock(&z->lock);
	for (k = SEG_BACK; k > 0 && rc == 0; k--)
		if (g->cell >= k && g->start - g->plen < (g->cell - k + 1) * SEG_SIZE)
			rc = cell_load(z, g->cell - k);
	if (rc == 0)
		rc = cell_load(z, g->cell);
	pthread_mutex_unlock(&z->lock);
	if (rc < 0)
		return rc;
	for (k = 0; k < steps; k++) {
		size_t off = k * (size_t)SEG_STEP, n = len - off < SEG_STEP ? len - off : SEG_STEP;
		size_t plen = g->plen + off < SEG_PREFIX ? g->plen + off : SEG_PREFIX, got, used;
		int stop;

		/*
		 * The prefix lies right before the input in memory: zstd then sees them
		 * as one window (copied apart, the prefix would be a slower dict). A
		 * frame of zeros takes none: it costs a few bytes either way, where
		 * zstd would hash the whole prefix first (a raw image's empty space).
		 */
		if (all_zero(at + off, n))
			plen = 0;
		if (ZSTD_isError(ZSTD_CCtx_reset(zc, ZSTD_reset_session_only)) ||
		    ZSTD_isError(ZSTD_CCtx_refPrefix(zc, plen ? at + off - plen : NULL, plen)))
			goto fail;
		got = zstd_frame(zc, g->out + pos, cap - pos, at + off, n);
		if (!got)
			goto fail;
		pos += got;
		g->cp[k + 1] = pos;
		pthread_mutex_lock(&z->lock);
		g->ncp = k + 1;
		g->whole = k + 1 == steps;
		stop = z->stop || g->stop;
		if (!stop && !g->whole && z->zc_open && g->cell >= z->zs_pack &&
		    g->start < z->zc_lim && key_is(g, g->cell, want_key(z, g->cell))) {
			used = zseg_lower(z, g->cell);
			if (used <= z->cap && used + pos > z->cap) {
				g->cut_for = z->zc_index;
				stop = 1;
			}
		}
		if (z->idle && z->zc_open)
			zseg_dispatch(z);           /* what it made may tell where the chunk ends */
		pthread_mutex_unlock(&z->lock);
		if (stop)
			break;
	}
	return 0;
fail:
	set_err(z, NDZ_ECORRUPT, "chunk %u: zstd compression failed", z->index);
	return NDZ_ECORRUPT;
}

/* Take the queued segment of the lowest cell, if any (lock held). */
static struct zseg *zseg_take(struct zip *z)
{
	struct zseg *best = NULL;
	unsigned i;

	for (i = 0; i < z->nzs; i++) {
		struct zseg *g = &z->zs[i];

		if (g->state == SEG_QUEUED && (!best || g->cell < best->cell))
			best = g;
	}
	if (best)
		best->state = SEG_BUSY;
	return best;
}

/* Compress a taken segment (lock held, released meanwhile). */
static void zseg_make(struct zip *z, ZSTD_CCtx *zc, struct zseg *g)
{
	pthread_mutex_unlock(&z->lock);
	zseg_compress(z, zc, g);
	pthread_mutex_lock(&z->lock);
	g->state = SEG_DONE;
	pthread_cond_broadcast(&z->done_cv);
}

/*
 * A segment worker, one long job of the pool until the end: which segment to make
 * next (the lowest cell queued), handing out more when idle and reading ahead
 * are decided as it goes, which a first-in-first-out queue of jobs cannot say.
 */
static void zseg_worker(void *arg)
{
	struct zip *z = arg;
	struct coder c;

	if (coder_init(&c, z) < 0) {
		set_err(z, NDZ_ENOMEM, "%s", ndz_strerror(NDZ_ENOMEM));
		return;
	}
	pthread_mutex_lock(&z->lock);
	while (!z->stop) {
		struct zseg *g = zseg_take(z);

		if (!g && z->zc_open) {
			zseg_dispatch(z);
			g = zseg_take(z);
		}
		if (g) {
			zseg_make(z, c.zc, g);
		} else if (z->zc_open && cell_prefetch(z)) {
			continue;
		} else {
			z->idle++;
			pthread_cond_wait(&z->work_cv, &z->lock);
			z->idle--;
		}
	}
	pthread_mutex_unlock(&z->lock);
	coder_end(&c);
}

/*
 * Make sure cell c's frame for the chunk being filled is made or on its way
 * (lock held): a frame made for another key is remade, one in the making for
 * another key told to stop. Returns 1 when it is ready to place.
 */
static int zseg_want(struct zip *z, uint64_t c)
{
	struct zseg *g = zseg_of(z, c);
	struct zkey k = want_key(z, c);

	if (key_is(g, c, k)) {
		if (g->state == SEG_QUEUED || (g->state == SEG_BUSY && !g->stop))
			return 0;
		/* Stopped early for another chunk's end: its cut points may differ here. */
		if (g->state == SEG_DONE && (g->whole || g->cut_for == z->zc_index))
			return 1;
	}
	if (g->state == SEG_BUSY) {
		g->stop = 1;
		return 0;
	}
	zseg_queue(z, g, c, k);
	return 0;
}

/*
 * Hand out the frames of the chunk being filled while the room they are likely to
 * need (at the previous chunk's ratio) is still free, then, early, grid frames of
 * the next chunk (lock held). Where the next chunk starts is known only when this
 * one is full; but once what is made overflows the room at cell h, the next chunk
 * starts in h or before, and its cells from h + 1 + SEG_BACK on are grid frames. The last
 * one it is expected to reach is left for later: a frame made for the chunk that
 * is being filled stops where the chunk ends. Where frames start is the format's
 * business only through the prefix rule; this is just speed.
 */
static void zseg_dispatch(struct zip *z)
{
	double need = (double)z->zs_placed, span;
	uint64_t c, ncells = (z->total + SEG_SIZE - 1) / SEG_SIZE, hmax;
	uint64_t win = z->zs_pack + z->nzs - 1;    /* the next chunk may start a cell back */

	for (c = z->zs_pack; c < win && c * SEG_SIZE < z->zc_lim; c++) {
		struct zseg *g = zseg_of(z, c);
		struct zkey k = want_key(z, c);
		double est = (double)(k.end - k.start) * z->zs_ratio;
		size_t before = zseg_exact(z, c);

		/* Likely to fit in part, or certain to start in this chunk. */
		if (c > z->zs_pack && need + est * SEG_FIT >= (double)z->cap &&
		    (before == SIZE_MAX || before >= z->cap))
			break;
		zseg_want(z, c);
		if (key_is(g, c, k) && (g->whole || (double)g->cp[g->ncp] > est))
			est = (double)g->cp[g->ncp];
		need += est;
	}
	for (hmax = z->zs_pack; hmax < z->zc_lim / SEG_SIZE && hmax < win; hmax++)
		if (zseg_lower(z, hmax + 1) > z->cap)
			break;
	if (hmax >= win)
		return;
	span = (double)z->cap / (z->zs_ratio * SEG_SIZE + 1);     /* cells per chunk */
	for (c = hmax + 1 + SEG_BACK; c < win && c < ncells && (double)(c - hmax) < span + SEG_AHEAD; c++) {
		struct zseg *g = zseg_of(z, c);

		if (g->state == SEG_FREE || (g->cell < z->zs_pack && g->state != SEG_BUSY))
			zseg_queue(z, g, c, grid_key(z, c));
	}
}

/*
 * Place segment g in the chunk: whole when it fits, else its frames that fit and
 * the room filled (the chunk is then full). Each frame is a piece of the content
 * index. Returns 1 when the chunk is full, 0 when not, or a negative code.
 */
static int zseg_place(struct zip *z, struct zseg *g)
{
	size_t room = z->cap - z->pos, full = (size_t)((g->end - g->start + SEG_STEP - 1) / SEG_STEP);
	const uint8_t *in = cell_data(z, g->cell) + (g->start - g->cell * SEG_SIZE);
	unsigned k = g->ncp, j;
	uint64_t reached;

	while (k && g->cp[k] > room)
		k--;
	memcpy(z->chunk + z->pos, g->out, g->cp[k]);
	for (j = 0; j < k; j++) {
		size_t off = j * (size_t)SEG_STEP, n = (size_t)(g->end - g->start) - off;

		if (n > SEG_STEP)
			n = SEG_STEP;
		zhash(z, g->start + off, in + off, n);
		zpiece(z, z->pos + g->cp[j], g->cp[j + 1] - g->cp[j], g->start + off, n);
	}
	z->pos += g->cp[k];
	if (k == full) {
		z->cin_end = g->end;
		return 0;
	}
	/*
	 * The fill stops at the cell's end, so that the next chunk starts in this
	 * cell or on the grid line after it, which zseg_dispatch counts on.
	 */
	z->cin_end = g->start + (uint64_t)k * SEG_STEP;
	reached = zstd_fill(z, z->cin_end, g->end, k < g->ncp ?
			    (double)(g->cp[k + 1] - g->cp[k]) / SEG_STEP : 0.5);
	if (zip_err(z) < 0)
		return zip_err(z);
	z->cin_end = reached;
	if (reached == z->cin_start) {
		set_err(z, NDZ_ECORRUPT, "chunk %u: no progress", z->index);
		return NDZ_ECORRUPT;
	}
	return 1;
}

/*
 * Begin filling the chunk whose input starts at start (lock held): tell the
 * workers, and hand out its first frames.
 */
static void zchunk_open(struct zip *z, uint64_t start, uint32_t index)
{
	z->zc_start = start;
	z->zc_lim = region_limit_at(z, start);
	z->zc_index = index;
	z->zs_pack = start / SEG_SIZE;
	z->zs_placed = NDZ_HDR_SIZE;
	z->zc_open = 1;
	zseg_dispatch(z);
}

/*
 * The zstd compressor: chunk after chunk, each one's frames, and the next one's
 * grid frames, made in parallel by the workers and the packer.
 */
static int zstd_run(struct zip *z, int threads)
{
	int rc = 0, t;
	unsigned i;

	z->nzs = threads * 2 + 6 < SEG_SLOTS ? (unsigned)threads * 2 + 6 : SEG_SLOTS;
	z->zs = calloc(z->nzs, sizeof(*z->zs));
	z->fill = malloc(FILL_BUF);
	if (!z->zs || !z->fill)
		return NDZ_ENOMEM;
	for (i = 0; i < z->nzs; i++) {
		z->zs[i].out = malloc(out_bound(SEG_SIZE) + 64 * SEG_STEPS);
		if (!z->zs[i].out)
			return NDZ_ENOMEM;
	}
	z->ncd = z->nzs + 1 + SEG_BACK;
	z->cells = malloc(SEG_SIZE * (size_t)(z->ncd + SEG_BACK));
	z->cd_cell = malloc(z->ncd * sizeof(*z->cd_cell));
	z->cd_state = calloc(z->ncd, sizeof(*z->cd_state));
	if (!z->cells || !z->cd_cell || !z->cd_state)
		return NDZ_ENOMEM;
	for (i = 0; i < z->ncd; i++)
		z->cd_cell[i] = UINT64_MAX;
	z->zs_ratio = 0.35;
	/*
	 * The packer compresses too, so threads - 1 workers make threads compressors:
	 * one more than the cores only time-sliced them and slowed the segment the
	 * packer waited for. One thread: the packer compresses everything itself.
	 */
	rc = ndz_pool_create((unsigned)threads - 1, (unsigned)threads, &z->pool, &z->err);
	if (rc < 0)
		return rc;
	for (t = 0; t < threads - 1; t++)
		ndz_pool_add(z->pool, zseg_worker, z);
	pthread_mutex_lock(&z->lock);
	chunk_start(z);
	zchunk_open(z, z->cin_start, z->index);
	while (!z->stop) {
		uint64_t in_was = z->cin_start;
		int full = 0, last;

		while (!z->stop && !full && z->cin_end < z->zc_lim) {
			struct zseg *g = zseg_of(z, z->zs_pack);

			zseg_dispatch(z);
			if (!zseg_want(z, z->zs_pack)) {
				/*
				 * Rather than wait for the frame to place, make any one still
				 * queued: waiting here left a core idle for much of the run.
				 */
				struct zseg *q = zseg_take(z);

				if (q)
					zseg_make(z, z->pc.zc, q);
				else if (cell_prefetch(z))
					continue;
				else
					pthread_cond_wait(&z->done_cv, &z->lock);
				continue;
			}
			pthread_mutex_unlock(&z->lock);
			full = zseg_place(z, g);
			pthread_mutex_lock(&z->lock);
			if (full < 0)
				break;
			g->state = SEG_FREE;               /* placed: its cell is behind the packer */
			z->zs_pack = z->cin_end / SEG_SIZE;
			z->zs_placed = z->pos;
			if (z->opts->progress) {
				pthread_mutex_unlock(&z->lock);
				z->opts->progress(z->opts->progress_ctx, z->cin_end, z->total);
				pthread_mutex_lock(&z->lock);
			}
		}
		z->zc_open = 0;
		if (z->stop || full < 0)
			break;
		z->stats.in_bytes += z->cin_end - in_was;
		if (z->cin_end > in_was)
			z->zs_ratio = (double)(z->pos - NDZ_HDR_SIZE) / (double)(z->cin_end - in_was);
		last = z->cin_end >= z->total;
		if (!last)                                 /* the workers need not wait for the write */
			zchunk_open(z, z->cin_end, z->index + 1);
		pthread_mutex_unlock(&z->lock);
		rc = chunk_finish(z, last);
		pthread_mutex_lock(&z->lock);
		if (rc < 0 || last)
			break;
		chunk_start(z);
	}
	rc = z->err.code ? z->err.code : z->stop ? NDZ_ECANCELED : rc;
	z->stop = 1;
	wake_all(z);
	pthread_mutex_unlock(&z->lock);
	ndz_pool_free(z->pool);                    /* the workers see stop and end */
	z->pool = NULL;
	return rc;
}

static int online_cores(void)
{
	long n = sysconf(_SC_NPROCESSORS_ONLN);

	return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : (int)n;
}

int ndz_zip(struct ndz_io *src, uint64_t source_bytes, const struct ndz_ranges *alloc,
	    const struct ndz_zip_opts *opts, ndz_chunk_fn out, void *out_ctx,
	    struct ndz_zip_stats *stats, struct ndz_error *e)
{
	static const uint8_t nil[16];
	uint64_t source_sectors = ndz_sectors_of(source_bytes);
	int threads, rc = 0;
	struct zip *z;
	size_t i;

	if (opts->codec == NDZ_CODEC_ZSTD ? opts->level < 1 || opts->level > 19 :
	    opts->codec != NDZ_CODEC_ZLIB || opts->level < 0 || opts->level > 9)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: codec %d level %d: no such codec or "
				     "level", src->name, opts->codec, opts->level);
	if (opts->reserve > 4096)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: %u bytes reserved in a chunk, "
				     "more than 4096", src->name, (unsigned)opts->reserve);
	z = calloc(1, sizeof(*z));
	if (!z)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", src->name,
				     ndz_strerror(NDZ_ENOMEM));
	z->src = src;
	z->source_bytes = source_bytes;
	z->alloc = alloc;
	z->opts = opts;
	z->level = opts->level;
	z->zstd = opts->codec == NDZ_CODEC_ZSTD;
	z->cap = (z->zstd ? NDZ_CHUNK_SIZE : DATA_CAP) - opts->reserve;
	z->out = out;
	z->out_ctx = out_ctx;
	pthread_mutex_init(&z->lock, NULL);
	pthread_cond_init(&z->work_cv, NULL);
	pthread_cond_init(&z->done_cv, NULL);
	threads = opts->threads > 0 ? opts->threads : online_cores();
	if (threads > MAX_THREADS)
		threads = MAX_THREADS;
	memcpy(z->uuid, opts->uuid, 16);
	if (!memcmp(z->uuid, nil, 16)) {
		if (getrandom(z->uuid, 16, 0) != 16) {
			rc = ndz_error_set(&z->err, NDZ_EIO, errno, "cannot get random bytes for a uuid");
			goto out;
		}
		z->uuid[6] = (uint8_t)((z->uuid[6] & 0x0f) | 0x40);      /* RFC 4122 v4 */
		z->uuid[8] = (uint8_t)((z->uuid[8] & 0x3f) | 0x80);
	}

	/* Validate the ranges and lay them end to end as one stream. */
	z->base = malloc((alloc->n + 1) * sizeof(*z->base));
	if (!z->base) {
		rc = NDZ_ENOMEM;
		goto out;
	}
	for (i = 0; i < alloc->n; i++) {
		const struct ndz_range *r = &alloc->v[i];

		if (r->count == 0 || r->start >= source_sectors ||
		    r->count > source_sectors - r->start ||
		    (i && r->start < alloc->v[i - 1].start + alloc->v[i - 1].count)) {
			rc = ndz_error_set(&z->err, NDZ_EINVAL, 0,
					   "range %zu is outside the source or out of order", i);
			goto out;
		}
		z->base[i] = z->total;
		z->total += r->count * NDZ_SECTOR_SIZE;
	}
	z->base[alloc->n] = z->total;
	z->hash_end = z->total;
	if (alloc->n && source_bytes % NDZ_SECTOR_SIZE &&
	    alloc->v[alloc->n - 1].start + alloc->v[alloc->n - 1].count == source_sectors)
		z->hash_end -= NDZ_SECTOR_SIZE - source_bytes % NDZ_SECTOR_SIZE;
	if (opts->index) {
		z->digest = ndz_digest_create(&z->err);
		if (!z->digest) {
			rc = NDZ_ENOMEM;
			goto out;
		}
		/* an encrypted chunk's data cannot be read in part: whole chunks only */
		if (z->zstd && !opts->reserve) {
			z->pdigest = ndz_digest_create(&z->err);
			if (!z->pdigest) {
				rc = NDZ_ENOMEM;
				goto out;
			}
		}
	}
	z->npieces = (z->total + PIECE_SIZE - 1) / PIECE_SIZE;

	if (z->zstd) {
		if (coder_init(&z->pc, z) < 0 || !(z->chunk = malloc(NDZ_CHUNK_SIZE)))
			rc = NDZ_ENOMEM;
		else
			rc = zstd_run(z, threads);
		goto out;
	}
	z->nslots = (unsigned)(threads * 8 + 4);
	z->slots = calloc(z->nslots, sizeof(*z->slots));
	z->chunk = malloc(NDZ_CHUNK_SIZE);
	if (!z->slots || !z->chunk || coder_init(&z->pc, z) < 0) {
		rc = NDZ_ENOMEM;
		goto out;
	}
	for (i = 0; i < z->nslots; i++) {
		z->slots[i].z = z;
		z->slots[i].buf = malloc(DICT_SIZE + PIECE_SIZE);
		z->slots[i].out = malloc(out_bound(PIECE_SIZE));
		if (!z->slots[i].buf || !z->slots[i].out) {
			rc = NDZ_ENOMEM;
			goto out;
		}
	}
	rc = make_zero_piece(z);
	if (rc < 0)
		goto out;

	/*
	 * One coder per pool thread. One thread: a pool without threads, whose jobs
	 * run as the packer hands them out: it reads and compresses everything itself.
	 */
	z->ncoders = threads > 1 ? (unsigned)threads : 1;
	z->coders = calloc(z->ncoders, sizeof(*z->coders));
	z->free_coders = calloc(z->ncoders, sizeof(*z->free_coders));
	if (!z->coders || !z->free_coders) {
		rc = NDZ_ENOMEM;
		goto out;
	}
	for (i = 0; i < z->ncoders; i++) {
		if (coder_init(&z->coders[i], z) < 0) {
			rc = NDZ_ENOMEM;
			goto out;
		}
		z->free_coders[z->nfree_coders++] = &z->coders[i];
	}
	rc = ndz_pool_create(threads > 1 ? (unsigned)threads : 0, z->nslots, &z->pool, &z->err);
	if (rc < 0)
		goto out;
	rc = packer(z);
	if (rc < 0) {
		pthread_mutex_lock(&z->lock);
		z->stop = 1;
		wake_all(z);
		pthread_mutex_unlock(&z->lock);
	}
out:
	ndz_pool_free(z->pool);                    /* after the packer: jobs left see stop */
	if (z->coders)
		for (i = 0; i < z->ncoders; i++)
			coder_end(&z->coders[i]);
	free(z->coders);
	free(z->free_coders);
	if (z->err.code)
		rc = z->err.code;
	if (rc < 0) {
		ndz_error_set(&z->err, rc, 0, NULL);
		ndz_error_copy(e, &z->err);
	}
	if (stats)
		*stats = z->stats;
	if (z->slots)
		for (i = 0; i < z->nslots; i++) {
			free(z->slots[i].buf);
			free(z->slots[i].out);
		}
	if (z->zs)
		for (i = 0; i < z->nzs; i++) {
			free(z->zs[i].out);
		}
	free(z->zs);
	free(z->cells);
	free(z->cd_cell);
	free(z->cd_state);
	free(z->fill);
	coder_end(&z->pc);
	free(z->slots);
	free(z->zero_out);
	free(z->chunk);
	free(z->base);
	ndz_digest_free(z->digest);
	ndz_digest_free(z->pdigest);
	free(z->fr);
	pthread_cond_destroy(&z->work_cv);
	pthread_cond_destroy(&z->done_cv);
	pthread_mutex_destroy(&z->lock);
	free(z);
	return rc;
}
