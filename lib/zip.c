/*
 * The compressor. A reader thread cuts the allocated data into pieces, workers
 * deflate each piece (with the 32 KiB before it as dictionary), and the packer
 * (the calling thread) lays the pieces in order into 1 MiB chunks, each one zlib
 * stream. Only a piece that straddles a chunk's end, or whose dictionary reaches
 * before its chunk's start, is compressed again by the packer, in steps small
 * enough to fill the chunk to within a sector. The packer's decisions depend
 * only on the data, so the image is the same whatever the thread count.
 * zstd works chunk by chunk instead (see zstd_run): a chunk's input is cut into
 * 1 MiB segments counted from the chunk's start, each one streamed into a frame
 * whose history is the 2 MiB before it in the same chunk, so the segments of one
 * chunk compress in parallel; the segment that crosses the chunk's end is cut at
 * a 128 KiB flush point and the rest of the room filled with small frames.
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

#include "err.h"
#include "le.h"
#include "zip.h"

#define PIECE_SIZE  (128u * 1024)      /* input bytes per worker job */
#define DICT_SIZE   32768u             /* deflate window */
#define DATA_CAP    (NDZ_CHUNK_SIZE - 6) /* zlib: room before the final block and adler32 */
#define MAX_THREADS 64

/* zstd (doc/FORMAT.md, codec 2) */
#define SEG_SIZE    (1u << 20)         /* input per segment frame */
#define SEG_PREFIX  NDZ_ZSTD_PREFIX    /* history a frame may use: the format's limit */
#define SEG_STEP    (128u * 1024)      /* input between flush points, where a frame may end */
#define SEG_STEPS   (SEG_SIZE / SEG_STEP)
#define SEG_WLOG    NDZ_ZSTD_WINDOW_LOG
#define SEG_SLOTS   16                 /* segments in flight at most */
#define FILL_BUF    (2 * SEG_STEP)     /* input read at a time to fill a chunk's end */
#define ZSTD_LAST_EMPTY 3              /* an empty last raw block: 01 00 00 ends a frame */

enum { SEG_FREE, SEG_QUEUED, SEG_BUSY, SEG_DONE };

/* A zstd segment: input [start, end) of the stream, streamed into out as one frame. */
struct zseg {
	uint64_t start, end;
	size_t plen;                   /* prefix bytes in front of the input in buf */
	uint8_t *buf;                  /* SEG_PREFIX + SEG_SIZE */
	uint8_t *out;
	size_t cp[SEG_STEPS + 1];      /* frame bytes after each flush point; cp[0] = 0 */
	unsigned ncp;                  /* flush points reached */
	int state;
	int stop;                      /* the chunk ends before it: give up */
};

enum { SLOT_EMPTY, SLOT_READ, SLOT_DONE };

/* A compressor of either codec, one per thread. */
struct coder {
	z_stream zs;
	ZSTD_CCtx *zc;
};

struct piece {
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
	pthread_mutex_t lock;
	pthread_mutex_t read_lock;     /* one read of the source at a time (its io->err is shared) */
	pthread_cond_t slot_cv;        /* a slot was freed: the reader may go on */
	pthread_cond_t work_cv;        /* a piece was read: a worker may take it */
	pthread_cond_t done_cv;        /* a piece is ready, or read: the packer may go on */
	struct piece *slots;
	unsigned nslots;
	uint64_t nread;                /* pieces read */
	uint64_t work_next;            /* next piece to claim for compression */
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

	/* zstd, under lock: the segments of the chunk being filled */
	struct zseg *zs;
	unsigned nzs;
	uint64_t zs_disp;              /* segments handed out so far (all chunks) */
	uint64_t zs_take;              /* next one a worker may take */
	uint64_t zs_pack;              /* next one to pack: all before it are placed */
	size_t zs_placed;              /* z->pos as of zs_pack (lock): the workers' view */
	uint64_t zs_first;             /* the chunk's first segment */
	uint8_t *fill;                 /* FILL_BUF of input for fill frames */
};

/* Wake every waiting thread, to see an error or the end (lock held). */
static void wake_all(struct zip *z)
{
	pthread_cond_broadcast(&z->slot_cv);
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
	char msg[NDZ_ERRMSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ndz_error_set(&e, code, 0, "%s", msg);
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

			pthread_mutex_lock(&z->read_lock);
			rc = ndz_io_read_full(z->src, dst, want, src_off, &got);
			if (rc < 0 && rc != NDZ_ESHORTREAD) {
				char what[64];

				snprintf(what, sizeof(what), "read error at byte %llu",
					 (unsigned long long)src_off);
				ndz_io_fail(z->src, rc, &e, what);
			}
			pthread_mutex_unlock(&z->read_lock);
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

static int read_piece(struct zip *z, struct piece *p)
{
	return read_stream(z, p->buf + DICT_SIZE, p->off, p->len);
}

static void *reader_main(void *arg)
{
	struct zip *z = arg;
	uint64_t i;
	int stop;

	for (i = 0; i < z->npieces; i++) {
		struct piece *p = &z->slots[i % z->nslots];
		struct piece *prev = i ? &z->slots[(i - 1) % z->nslots] : NULL;

		pthread_mutex_lock(&z->lock);
		while (!z->stop && p->state != SLOT_EMPTY)
			pthread_cond_wait(&z->slot_cv, &z->lock);
		stop = z->stop;
		pthread_mutex_unlock(&z->lock);
		if (stop)
			break;
		p->off = i * PIECE_SIZE;
		p->len = (size_t)(z->total - p->off < PIECE_SIZE ? z->total - p->off : PIECE_SIZE);
		/*
		 * History: the tail of the previous piece (always a whole PIECE_SIZE,
		 * only the last piece is shorter), which only this thread rewrites.
		 */
		p->dict_len = prev ? DICT_SIZE : 0;
		if (p->dict_len)
			memmove(p->buf + DICT_SIZE - p->dict_len,
				prev->buf + DICT_SIZE + prev->len - p->dict_len, p->dict_len);
		if (read_piece(z, p) < 0)
			break;
		pthread_mutex_lock(&z->lock);
		p->state = SLOT_READ;
		z->nread = i + 1;
		pthread_cond_signal(&z->work_cv);
		pthread_cond_signal(&z->done_cv);
		pthread_mutex_unlock(&z->lock);
	}
	return NULL;
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

static void *worker_main(void *arg)
{
	struct zip *z = arg;
	struct coder s;

	if (coder_init(&s, z) < 0) {
		set_err(z, NDZ_ENOMEM, "%s", ndz_strerror(NDZ_ENOMEM));
		return NULL;
	}
	for (;;) {
		struct piece *p;
		uint64_t i;
		int rc;

		pthread_mutex_lock(&z->lock);
		while (!z->stop && z->work_next >= z->nread && z->work_next < z->npieces)
			pthread_cond_wait(&z->work_cv, &z->lock);
		if (z->stop || z->work_next >= z->npieces) {
			pthread_mutex_unlock(&z->lock);
			break;
		}
		i = z->work_next++;
		if (z->work_next >= z->npieces)          /* nothing left: let the others exit */
			pthread_cond_broadcast(&z->work_cv);
		pthread_mutex_unlock(&z->lock);
		p = &z->slots[i % z->nslots];
		rc = compress_piece(z, &s, p);
		if (rc < 0) {
			set_err(z, rc, "compression failed");
			break;
		}
		pthread_mutex_lock(&z->lock);
		p->state = SLOT_DONE;
		pthread_cond_signal(&z->done_cv);
		pthread_mutex_unlock(&z->lock);
	}
	coder_end(&s);
	return NULL;
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
	h.data_crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), z->chunk + NDZ_HDR_SIZE, h.data_len);
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
	rc = ndz_hdr_encode(&h, z->chunk);
	if (rc < 0) {
		set_err(z, rc, "chunk %u: internal error encoding the header", z->index);
		return rc;
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

/* Stream offset the current chunk may not reach: its region list would overflow. */
static uint64_t region_limit(const struct zip *z)
{
	size_t k;

	if (z->cin_start >= z->total)
		return z->total;
	k = range_at(z, z->cin_start);
	if (k + NDZ_MAX_REGIONS >= z->alloc->n)
		return z->total;
	return z->base[k + NDZ_MAX_REGIONS];
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

static int compress_inline(struct zip *z, struct piece *p)
{
	int rc = compress_piece(z, &z->pc, p);

	if (rc < 0)
		set_err(z, rc, "compression failed");
	return rc;
}

static int packer(struct zip *z)
{
	uint64_t i;

	chunk_start(z);
	for (i = 0; i < z->npieces; i++) {
		struct piece *p = &z->slots[i % z->nslots];
		int mine = 0, stop;

		pthread_mutex_lock(&z->lock);
		for (;;) {
			if (z->stop)
				break;
			if (p->state == SLOT_DONE && i < z->nread)
				break;
			/* Nobody took it yet: compress it here rather than wait. */
			if (i < z->nread && z->work_next == i) {
				if (++z->work_next >= z->npieces)
					pthread_cond_broadcast(&z->work_cv);
				mine = 1;
				break;
			}
			pthread_cond_wait(&z->done_cv, &z->lock);
		}
		stop = z->stop;
		pthread_mutex_unlock(&z->lock);
		if (stop)
			return zip_err(z);
		if (mine && compress_inline(z, p) < 0)
			return zip_err(z);
		if (pack_piece(z, p) < 0)
			return zip_err(z);
		z->stats.in_bytes += p->len;
		if (z->opts->progress)
			z->opts->progress(z->opts->progress_ctx, z->cin_end, z->total);
		pthread_mutex_lock(&z->lock);
		p->state = SLOT_EMPTY;
		pthread_cond_signal(&z->slot_cv);
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
			done += n;
		}
		from += win;
	}
	return from;
}

/*
 * End the frame at f early, after size bytes of content: its header is made to
 * state that size, in the field zstd wrote (RFC 8878 3.1.1.1; a segment's frame
 * is begun with its whole length pledged), and to promise no checksum, which
 * only zstd's own end would add; the caller appends an empty last block. Only
 * 4- and 8-byte fields are patched, which is what a pledge over 64 KiB gets.
 * Returns 0, or -1 if size cannot be written there.
 */
static int zstd_cut_header(uint8_t *f, uint64_t size)
{
	unsigned fhd = f[4], flag = fhd >> 6, single = (fhd >> 5) & 1;
	static const unsigned did_len[4] = { 0, 1, 2, 4 };
	size_t at = 5 + !single + did_len[fhd & 3];

	if (flag == 2 && size <= UINT32_MAX)
		put_le32(f + at, (uint32_t)size);
	else if (flag == 3)
		put_le64(f + at, size);
	else
		return -1;
	f[4] = (uint8_t)(fhd & ~4u);
	return 0;
}

/* The segment with sequence number i (lock held or owner). */
static struct zseg *zseg_of(struct zip *z, uint64_t i)
{
	return &z->zs[i % z->nzs];
}

/*
 * The least of the chunk segment i will find used (lock held): what is placed,
 * and what the segments before it have produced so far, which only grows. Once
 * its own frame overflows the rest, the chunk certainly ends before that point.
 */
static size_t zseg_used(struct zip *z, uint64_t i)
{
	size_t used = z->zs_placed;
	uint64_t j;

	for (j = z->zs_pack; j < i; j++) {
		struct zseg *g = zseg_of(z, j);

		used += g->cp[g->ncp];
	}
	return used;
}

/*
 * Stream segment i into one frame: the chunk's input up to SEG_PREFIX before it as
 * prefix, a flush every SEG_STEP so that the packer may end the frame there. Stops
 * early when told to, or once it is the next to pack and already overflows the room.
 */
static int zseg_compress(struct zip *z, ZSTD_CCtx *zc, uint64_t i)
{
	struct zseg *g = zseg_of(z, i);
	uint64_t first;
	size_t len = (size_t)(g->end - g->start), cap = out_bound(SEG_SIZE) + 64 * SEG_STEPS;
	ZSTD_outBuffer o = { g->out, cap, 0 };
	ZSTD_inBuffer in;
	unsigned k;
	int rc;

	pthread_mutex_lock(&z->lock);
	first = z->cin_start;                      /* the chunk's, not to change under us */
	pthread_mutex_unlock(&z->lock);
	g->plen = g->start - first < SEG_PREFIX ? (size_t)(g->start - first) : SEG_PREFIX;
	rc = read_stream(z, g->buf + SEG_PREFIX - g->plen, g->start - g->plen, g->plen + len);
	if (rc < 0)
		return rc;
	if (ZSTD_isError(ZSTD_CCtx_reset(zc, ZSTD_reset_session_only)) ||
	    ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(zc, len)) ||
	    ZSTD_isError(ZSTD_CCtx_refPrefix(zc, g->plen ? g->buf + SEG_PREFIX - g->plen : NULL,
					     g->plen)))
		goto fail;
	/*
	 * The input stays where it is, right after its prefix, and grows a step at a
	 * time: zstd then reads it in place and sees prefix and input as one window
	 * (copied into its own buffer, the prefix would be a separate, slower dict).
	 */
	in = (ZSTD_inBuffer){ g->buf + SEG_PREFIX, 0, 0 };
	for (k = 0; k * (size_t)SEG_STEP < len; k++) {
		size_t n = len - k * (size_t)SEG_STEP < SEG_STEP ? len - k * (size_t)SEG_STEP :
								    SEG_STEP;
		size_t left;
		int stop;

		in.size += n;
		do {
			left = ZSTD_compressStream2(zc, &o, &in, in.size == len ? ZSTD_e_end :
									      ZSTD_e_flush);
			if (ZSTD_isError(left) || (left && o.pos == o.size))
				goto fail;
		} while (left || in.pos < in.size);
		g->cp[k + 1] = o.pos;
		pthread_mutex_lock(&z->lock);
		g->ncp = k + 1;
		stop = z->stop || g->stop || o.pos + ZSTD_LAST_EMPTY > z->cap - zseg_used(z, i);
		pthread_mutex_unlock(&z->lock);
		if (stop)
			break;
	}
	return 0;
fail:
	set_err(z, NDZ_ECORRUPT, "chunk %u: zstd compression failed", z->index);
	return NDZ_ECORRUPT;
}

/* Take the next queued segment, if any (lock held); its number or UINT64_MAX. */
static uint64_t zseg_take(struct zip *z)
{
	uint64_t i;

	if (z->zs_take >= z->zs_disp)
		return UINT64_MAX;
	i = z->zs_take++;
	zseg_of(z, i)->state = SEG_BUSY;
	return i;
}

static void *zseg_worker(void *arg)
{
	struct zip *z = arg;
	struct coder c;

	if (coder_init(&c, z) < 0) {
		set_err(z, NDZ_ENOMEM, "%s", ndz_strerror(NDZ_ENOMEM));
		return NULL;
	}
	pthread_mutex_lock(&z->lock);
	while (!z->stop) {
		uint64_t i = zseg_take(z);

		if (i == UINT64_MAX) {
			pthread_cond_wait(&z->work_cv, &z->lock);
			continue;
		}
		pthread_mutex_unlock(&z->lock);
		zseg_compress(z, c.zc, i);
		pthread_mutex_lock(&z->lock);
		zseg_of(z, i)->state = SEG_DONE;
		pthread_cond_broadcast(&z->done_cv);
	}
	pthread_mutex_unlock(&z->lock);
	coder_end(&c);
	return NULL;
}

/*
 * Hand out the chunk's next segments while the room they are likely to need
 * (at the previous chunk's ratio) is still free (lock held). Where segments start
 * is the format's business only through the prefix rule; this is just speed.
 */
static void zseg_dispatch(struct zip *z, uint64_t lim, double ratio)
{
	while (z->zs_disp - z->zs_pack < z->nzs) {
		uint64_t j = z->zs_disp - z->zs_first, i;
		uint64_t start = z->cin_start + j * SEG_SIZE;
		double need = (double)z->pos;
		struct zseg *g;

		if (start >= lim)
			return;
		for (i = z->zs_pack; i < z->zs_disp; i++) {
			double est;

			g = zseg_of(z, i);
			est = (double)(g->end - g->start) * ratio;
			need += g->state == SEG_DONE || (double)g->cp[g->ncp] > est ?
				(double)g->cp[g->ncp] : est;
		}
		if (z->zs_disp > z->zs_pack && need >= (double)z->cap)
			return;
		g = zseg_of(z, z->zs_disp);
		g->start = start;
		g->end = lim - start < SEG_SIZE ? lim : start + SEG_SIZE;
		g->ncp = 0;
		g->cp[0] = 0;
		g->stop = 0;
		g->state = SEG_QUEUED;
		z->zs_disp++;
		pthread_cond_signal(&z->work_cv);
	}
}

/* Let the segments after the one packed last go: the chunk ended (lock held). */
static void zseg_cancel(struct zip *z)
{
	uint64_t i;

	z->zs_take = z->zs_disp;                   /* queued ones are never started */
	for (;;) {
		int busy = 0;

		for (i = z->zs_pack; i < z->zs_disp; i++)
			if (zseg_of(z, i)->state == SEG_BUSY) {
				zseg_of(z, i)->stop = 1;
				busy = 1;
			}
		if (!busy || z->stop)
			break;
		pthread_cond_wait(&z->done_cv, &z->lock);
	}
	for (i = z->zs_pack; i < z->zs_disp; i++)
		zseg_of(z, i)->state = SEG_FREE;
	z->zs_pack = z->zs_disp;
}

/*
 * Place segment g in the chunk: whole when it fits, else cut at its last flush
 * point that fits and the room filled (the chunk is then full). Returns 1 when the
 * chunk is full, 0 when not, or a negative code.
 */
static int zseg_place(struct zip *z, struct zseg *g, uint64_t lim)
{
	size_t room = z->cap - z->pos, full = (size_t)((g->end - g->start + SEG_STEP - 1) / SEG_STEP);
	unsigned k = g->ncp;
	uint64_t reached;

	if (k == full && g->cp[k] <= room) {       /* a whole frame, ended by zstd */
		memcpy(z->chunk + z->pos, g->out, g->cp[k]);
		z->pos += g->cp[k];
		z->cin_end = g->end;
		return 0;
	}
	if (k == full)                             /* its end is not a flush point */
		k--;
	while (k && g->cp[k] + ZSTD_LAST_EMPTY > room)
		k--;
	if (k && zstd_cut_header(g->out, (uint64_t)k * SEG_STEP) < 0) {
		set_err(z, NDZ_ECORRUPT, "chunk %u: unexpected zstd frame header", z->index);
		return NDZ_ECORRUPT;
	}
	if (k) {
		memcpy(z->chunk + z->pos, g->out, g->cp[k]);
		memcpy(z->chunk + z->pos + g->cp[k], "\x01\x00\x00", ZSTD_LAST_EMPTY);
		z->pos += g->cp[k] + ZSTD_LAST_EMPTY;
	}
	z->cin_end = g->start + (uint64_t)k * SEG_STEP;
	reached = zstd_fill(z, z->cin_end, lim, k < g->ncp ? (double)(g->cp[k + 1] - g->cp[k]) /
				SEG_STEP : 0.5);
	if (zip_err(z) < 0)
		return zip_err(z);
	z->cin_end = reached;
	if (reached == z->cin_start) {
		set_err(z, NDZ_ECORRUPT, "chunk %u: no progress", z->index);
		return NDZ_ECORRUPT;
	}
	return reached < lim;
}

/* The zstd compressor: chunk after chunk, each one's segments in parallel. */
static int zstd_run(struct zip *z, int threads)
{
	pthread_t workers[MAX_THREADS];
	int nworkers = 0, rc = 0, t;
	double ratio = 0.35;
	unsigned i;

	z->nzs = threads + 1 < SEG_SLOTS ? (unsigned)threads + 1 : SEG_SLOTS;
	z->zs = calloc(z->nzs, sizeof(*z->zs));
	z->fill = malloc(FILL_BUF);
	if (!z->zs || !z->fill)
		return NDZ_ENOMEM;
	for (i = 0; i < z->nzs; i++) {
		z->zs[i].buf = malloc(SEG_PREFIX + SEG_SIZE);
		z->zs[i].out = malloc(out_bound(SEG_SIZE) + 64 * SEG_STEPS);
		if (!z->zs[i].buf || !z->zs[i].out)
			return NDZ_ENOMEM;
	}
	/*
	 * The packer compresses too, so threads - 1 workers make threads compressors:
	 * one more than the cores only time-sliced them and slowed the segment the
	 * packer waited for. One thread: the packer compresses everything itself.
	 */
	for (t = 0; t < threads - 1; t++) {
		if (pthread_create(&workers[t], NULL, zseg_worker, z) != 0)
			break;
		nworkers++;
	}
	chunk_start(z);
	pthread_mutex_lock(&z->lock);
	z->zs_placed = z->pos;
	while (!z->stop) {
		uint64_t lim = region_limit(z);
		struct zseg *g;
		uint64_t in_was = z->cin_start;
		int full = 0;

		z->zs_first = z->zs_disp;
		while (!z->stop && !full && z->cin_end < lim) {
			zseg_dispatch(z, lim, ratio);
			g = zseg_of(z, z->zs_pack);
			/*
			 * Rather than wait for the next segment to place, compress any one
			 * still queued: waiting here left a core idle for much of the run.
			 */
			if (g->state != SEG_DONE && z->zs_take < z->zs_disp) {
				uint64_t n = zseg_take(z);

				pthread_mutex_unlock(&z->lock);
				zseg_compress(z, z->pc.zc, n);
				pthread_mutex_lock(&z->lock);
				zseg_of(z, n)->state = SEG_DONE;
				continue;
			}
			if (g->state != SEG_DONE) {
				pthread_cond_wait(&z->done_cv, &z->lock);
				continue;
			}
			if (z->stop)
				break;
			pthread_mutex_unlock(&z->lock);
			full = zseg_place(z, g, lim);
			pthread_mutex_lock(&z->lock);
			if (full < 0)
				break;
			g->state = SEG_FREE;
			z->zs_pack++;
			z->zs_placed = z->pos;
			if (z->opts->progress) {
				pthread_mutex_unlock(&z->lock);
				z->opts->progress(z->opts->progress_ctx, z->cin_end, z->total);
				pthread_mutex_lock(&z->lock);
			}
		}
		if (z->stop || full < 0)
			break;
		zseg_cancel(z);
		if (z->stop)
			break;
		z->stats.in_bytes += z->cin_end - in_was;
		if (z->cin_end > in_was)
			ratio = (double)(z->pos - NDZ_HDR_SIZE) / (double)(z->cin_end - in_was);
		pthread_mutex_unlock(&z->lock);
		rc = chunk_finish(z, z->cin_end >= z->total);
		pthread_mutex_lock(&z->lock);
		if (rc < 0 || z->cin_end >= z->total)
			break;
		chunk_start(z);
		z->zs_placed = z->pos;
	}
	rc = z->err.code ? z->err.code : z->stop ? NDZ_ECANCELED : rc;
	z->stop = 1;
	wake_all(z);
	pthread_mutex_unlock(&z->lock);
	for (t = 0; t < nworkers; t++)
		pthread_join(workers[t], NULL);
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
	pthread_t reader, workers[MAX_THREADS];
	int nworkers = 0, reader_started = 0, threads, rc = 0, t;
	struct zip *z;
	size_t i;

	if (opts->codec == NDZ_CODEC_ZSTD ? opts->level < 1 || opts->level > 19 :
	    opts->codec != NDZ_CODEC_ZLIB || opts->level < 0 || opts->level > 9)
		return NDZ_EINVAL;
	if (opts->reserve > 4096)
		return NDZ_EINVAL;
	z = calloc(1, sizeof(*z));
	if (!z)
		return NDZ_ENOMEM;
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
	pthread_mutex_init(&z->read_lock, NULL);
	pthread_cond_init(&z->slot_cv, NULL);
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

	if (pthread_create(&reader, NULL, reader_main, z) != 0) {
		rc = NDZ_ENOMEM;
		goto out;
	}
	reader_started = 1;
	/* One thread: the packer compresses everything itself. */
	for (t = 0; threads > 1 && t < threads; t++) {
		if (pthread_create(&workers[t], NULL, worker_main, z) != 0)
			break;
		nworkers++;
	}
	rc = packer(z);
	if (rc < 0) {
		pthread_mutex_lock(&z->lock);
		z->stop = 1;
		wake_all(z);
		pthread_mutex_unlock(&z->lock);
	}
out:
	if (reader_started)
		pthread_join(reader, NULL);
	for (t = 0; t < nworkers; t++)
		pthread_join(workers[t], NULL);
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
			free(z->zs[i].buf);
			free(z->zs[i].out);
		}
	free(z->zs);
	free(z->fill);
	coder_end(&z->pc);
	free(z->slots);
	free(z->zero_out);
	free(z->chunk);
	free(z->base);
	pthread_cond_destroy(&z->slot_cv);
	pthread_cond_destroy(&z->work_cv);
	pthread_cond_destroy(&z->done_cv);
	pthread_mutex_destroy(&z->lock);
	pthread_mutex_destroy(&z->read_lock);
	free(z);
	return rc;
}
