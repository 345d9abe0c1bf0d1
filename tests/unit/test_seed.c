/* Unit tests for lib/codec/seed.c: does a target hold a chunk of an index. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec/seed.h"
#include "core/bits.h"
#include "codec/unzip.h"
#include "codec/zip.h"
#include "core/ranges.h"
#include "core/err.h"
#include "core/format.h"
#include "core/io.h"
#include "trust/index.h"

#define SECT 512u

static inline uint32_t fix_rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*s >> 33);
}
/* An image of 3 chunks of 8 sectors; its last sector holds 100 bytes only. */
#define SRC_BYTES (23u * SECT + 100u)

static uint8_t disk[24 * SECT];

/* Chunk i writes sectors 8i+1..8i+3 and 8i+5..8i+6 (chunk 2: 21..22 and 23, clipped). */
static void add_chunk(struct ndz_index *ix, uint32_t i)
{
	uint8_t area[NDZ_HDR_SIZE] = { 0 };
	uint8_t digest[NDZ_INDEX_DIGEST_LEN];
	struct ndz_chunk_hdr h;
	struct ndz_digest *d = ndz_digest_create(NULL);
	struct ndz_region r[2];
	uint32_t j;

	assert_non_null(d);
	memset(&h, 0, sizeof(h));
	h.source_bytes = SRC_BYTES;
	h.first = i * 8;
	h.last = i * 8 + 8;
	h.nregions = 2;
	r[0] = (struct ndz_region){ i * 8 + 1, 3 };
	r[1] = (struct ndz_region){ i * 8 + 5, i == 2 ? 3 : 2 };
	for (j = 0; j < 2; j++) {
		uint64_t off = r[j].start * SECT, len = (uint64_t)r[j].count * SECT;

		if (off + len > SRC_BYTES)
			len = SRC_BYTES - off;
		ndz_hdr_set_region(area, j, r[j]);
		assert_int_equal(ndz_digest_update(d, disk + off, len, NULL), 0);
	}
	assert_int_equal(ndz_digest_final(d, digest, NULL), 0);
	assert_int_equal(ndz_index_set(ix, i, &h, area, digest, NULL), 0);
	ndz_digest_free(d);
}

/* The image: region bytes patterned, gaps zero; the index of it. */
static void make(struct ndz_index *ix)
{
	uint32_t i, k;

	memset(disk, 0, sizeof(disk));
	for (i = 0; i < 3; i++)
		for (k = 0; k < 8; k++) {
			uint32_t s = i * 8 + k;

			if ((k >= 1 && k <= 3) || (k >= 5 && k <= 6) || (i == 2 && k == 7))
				memset(disk + s * SECT, (int)(s * 3 + 1), SECT);
		}
	memset(ix, 0, sizeof(*ix));
	for (i = 0; i < 3; i++)
		add_chunk(ix, i);
}

static int check(struct ndz_io *io, const struct ndz_index *ix, int zero_fill, uint32_t i)
{
	struct ndz_seed_opts o = { 0, zero_fill, 1 };
	struct ndz_error e = { 0 };
	struct ndz_seed *s;
	int rc;

	assert_int_equal(ndz_seed_create(io, ix, &o, &s, &e), 0);
	rc = ndz_seed_check(s, i, &e);
	assert_true(rc >= 0);
	if (rc == 1)
		assert_true(ndz_seed_bytes_read(s) > 0);
	ndz_seed_free(s);
	return rc;
}

static void test_held(void **state)
{
	uint8_t copy[sizeof(disk)];
	struct ndz_index ix;
	struct ndz_io *io;
	uint32_t i;

	(void)state;
	make(&ix);
	memcpy(copy, disk, sizeof(disk));
	assert_int_equal(ndz_io_open_mem(copy, sizeof(copy), 0, &io, NULL), 0);
	for (i = 0; i < 3; i++) {
		assert_int_equal(check(io, &ix, 0, i), 1);
		assert_int_equal(check(io, &ix, 1, i), 1);
	}
	/* The bytes of the last sector past source_bytes are not the image's. */
	copy[23 * SECT + 200] ^= 0xff;
	assert_int_equal(check(io, &ix, 0, 2), 1);
	/* A byte in a region changed: not held, the others still are. */
	copy[8 * SECT + 5 * SECT + 17] ^= 1;
	assert_int_equal(check(io, &ix, 0, 1), 0);
	assert_int_equal(check(io, &ix, 0, 0), 1);
	copy[8 * SECT + 5 * SECT + 17] ^= 1;
	/* A byte in a gap: held, but not with zero_fill. */
	copy[8 * SECT + 4 * SECT] = 9;
	assert_int_equal(check(io, &ix, 0, 1), 1);
	assert_int_equal(check(io, &ix, 1, 1), 0);
	copy[8 * SECT + 4 * SECT] = 0;
	copy[0] = 1;                              /* the gap before chunk 0's first region */
	assert_int_equal(check(io, &ix, 1, 0), 0);
	copy[0] = 0;
	copy[7 * SECT + 3] = 1;                   /* the gap at its end */
	assert_int_equal(check(io, &ix, 1, 0), 0);
	assert_int_equal(check(io, &ix, 0, 0), 1);
	ndz_io_close(io);
	ndz_index_release(&ix);
}

static void test_not_held(void **state)
{
	static uint8_t garbage[sizeof(disk)];
	struct ndz_error e = { 0 };
	struct ndz_index ix;
	struct ndz_seed *s;
	struct ndz_io *io;
	uint32_t i;

	(void)state;
	make(&ix);
	for (i = 0; i < sizeof(garbage); i++)
		garbage[i] = (uint8_t)(i * 2654435761u >> 13);
	assert_int_equal(ndz_io_open_mem(garbage, sizeof(garbage), 0, &io, NULL), 0);
	for (i = 0; i < 3; i++)
		assert_int_equal(check(io, &ix, 0, i), 0);
	ndz_io_close(io);
	/* Short: chunk 2 cut off, the others held. */
	memcpy(garbage, disk, sizeof(disk));
	assert_int_equal(ndz_io_open_mem(garbage, 22 * SECT, 0, &io, NULL), 0);
	assert_int_equal(check(io, &ix, 0, 0), 1);
	assert_int_equal(check(io, &ix, 0, 1), 1);
	assert_int_equal(check(io, &ix, 0, 2), 0);
	assert_int_equal(ndz_seed_create(io, &ix, NULL, &s, &e), 0);
	assert_int_equal(ndz_seed_check(s, 3, &e), NDZ_ERANGE);
	ndz_seed_free(s);
	ndz_io_close(io);
	/* At an offset on the target. */
	{
		static uint8_t big[sizeof(disk) + 4096];
		struct ndz_seed_opts o = { 4096, 1, 0 };

		memcpy(big + 4096, disk, sizeof(disk));
		assert_int_equal(ndz_io_open_mem(big, sizeof(big), 0, &io, NULL), 0);
		assert_int_equal(ndz_seed_create(io, &ix, &o, &s, NULL), 0);
		for (i = 0; i < 3; i++)
			assert_int_equal(ndz_seed_check(s, i, NULL), 1);
		ndz_seed_free(s);
		ndz_io_close(io);
	}
	ndz_index_release(&ix);
}

/* The one verdict: every chunk held is 0; some differ is NDZ_EVERIFY with the counts. */
static void test_holds(void **state)
{
	static uint8_t copy[sizeof(disk)];
	struct ndz_seed_verdict v;
	struct ndz_error e = { 0 };
	struct ndz_index ix;
	struct ndz_io *io;

	(void)state;
	make(&ix);
	memcpy(copy, disk, sizeof(disk));
	assert_int_equal(ndz_io_open_mem(copy, sizeof(copy), 0, &io, NULL), 0);
	assert_int_equal(ndz_seed_holds(io, &ix, NULL, &v, &e), 0);
	assert_int_equal(v.chunks, 3);
	assert_int_equal(v.differ, 0);
	copy[8 * SECT + 5 * SECT + 17] ^= 1;      /* chunk 1 */
	copy[16 * SECT + 1 * SECT] ^= 1;          /* chunk 2 */
	assert_int_equal(ndz_seed_holds(io, &ix, NULL, &v, &e), NDZ_EVERIFY);
	assert_int_equal(v.differ, 2);
	assert_int_equal(v.first, 1);
	assert_non_null(strstr(ndz_error_msg(&e), "does not hold the image: 2 of 3 chunks differ "
				"(the first: chunk 1)"));
	ndz_error_clear(&e);
	/* a gap not zero: held, but not with zero_fill */
	memcpy(copy, disk, sizeof(disk));
	copy[4 * SECT] = 9;
	assert_int_equal(ndz_seed_holds(io, &ix, NULL, NULL, &e), 0);
	assert_int_equal(ndz_seed_holds(io, &ix, &(struct ndz_seed_opts){ 0, 1, 0 }, &v, &e),
			 NDZ_EVERIFY);
	assert_int_equal(v.differ, 1);
	assert_int_equal(v.first, 0);
	ndz_io_close(io);
	ndz_index_release(&ix);
}

/* A read error is an error, not "not held". */
static void test_read_error(void **state)
{
	struct ndz_error e = { 0 };
	struct ndz_io *mem, *io;
	struct ndz_index ix;
	struct ndz_seed *s;

	(void)state;
	make(&ix);
	assert_int_equal(ndz_io_open_mem(disk, sizeof(disk), 0, &mem, NULL), 0);
	assert_int_equal(ndz_io_open_fault(mem, 1, 0, 0, 0, &io, NULL), 0);
	assert_int_equal(ndz_seed_create(io, &ix, NULL, &s, NULL), 0);
	assert_int_equal(ndz_seed_check(s, 0, &e), NDZ_EIO);
	assert_int_equal(e.code, NDZ_EIO);
	/* The next check starts clean and succeeds. */
	assert_int_equal(ndz_seed_check(s, 0, NULL), 1);
	ndz_seed_free(s);
	ndz_io_close(io);
	ndz_index_release(&ix);
}

/* A real file, read with direct (the cache dropped first). */
static void test_file(void **state)
{
	char path[] = "/tmp/test_seed.XXXXXX";
	struct ndz_seed_opts o = { 0, 1, 1 };
	struct ndz_index ix;
	struct ndz_seed *s;
	struct ndz_io *io;
	int fd;

	(void)state;
	make(&ix);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, disk, sizeof(disk)), (ssize_t)sizeof(disk));
	close(fd);
	assert_int_equal(ndz_io_open_file(path, NDZ_IO_READ, &io, NULL), 0);
	assert_int_equal(ndz_seed_create(io, &ix, &o, &s, NULL), 0);
	assert_int_equal(ndz_seed_check(s, 0, NULL), 1);
	assert_int_equal(ndz_seed_check(s, 2, NULL), 1);
	assert_int_equal(ndz_seed_bytes_read(s), 8 * SECT + 7 * SECT + 100);
	ndz_seed_free(s);
	ndz_io_close(io);
	unlink(path);
	ndz_index_release(&ix);
}

/* The image's bytes through a chunk callback: a running CRC of all of them. */
static int sum_chunk(void *ctx, const uint8_t *chunk, uint32_t index, struct ndz_error *e)
{
	uint32_t *crc = ctx;

	(void)index;
	(void)e;
	*crc = ndz_crc32(*crc, chunk, NDZ_CHUNK_SIZE);
	return 0;
}

/*
 * ndz_zip's index: every chunk is held by the source it was made from (its digests
 * are of the bytes compressed), not by another; the image is the same with or
 * without it; both codecs, one thread and several, a source ending mid-sector.
 */
static void test_zip_index(void **state)
{
	const size_t len = (size_t)6 << 20;
	const uint64_t src_bytes = len - 300;
	static const int codecs[] = { NDZ_CODEC_ZLIB, NDZ_CODEC_ZSTD };
	uint8_t *data = malloc(len), *other = malloc(len);
	struct ndz_ranges alloc;
	struct ndz_io *io, *oio;
	uint64_t st = 7, sec;
	size_t i, c, t;

	(void)state;
	assert_non_null(data);
	assert_non_null(other);
	for (i = 0; i < len; i++)
		data[i] = (uint8_t)(fix_rnd(&st) >> (i % 3 ? 24 : 7));
	memcpy(other, data, len);
	ndz_ranges_init(&alloc);
	/* Ranges of 1 to 63 sectors with gaps, the last one to the end. */
	for (sec = 3; sec < len / SECT - 70; sec += 64 + sec % 7)
		assert_int_equal(ndz_ranges_add(&alloc, sec, 1 + sec % 63, NULL), 0);
	assert_int_equal(ndz_ranges_add(&alloc, len / SECT - 20, 20, NULL), 0);
	assert_int_equal(ndz_io_open_mem(data, len, 0, &io, NULL), 0);
	assert_int_equal(ndz_io_open_mem(other, len, 0, &oio, NULL), 0);
	for (c = 0; c < 2; c++)
		for (t = 1; t <= 3; t += 2) {
			struct ndz_zip_opts o;
			struct ndz_index ix;
			struct ndz_seed_opts so = { 0, 0, 0 };
			struct ndz_seed *s, *os;
			uint32_t crc1 = 0, crc2 = 0, k, held = 0;

			ndz_zip_opts_init(&o);
			o.codec = codecs[c];
			o.level = c ? 3 : 4;
			o.threads = (int)t;
			memset(o.uuid, 0x5a, 16);
			assert_int_equal(ndz_zip(io, src_bytes, &alloc, &o, sum_chunk, &crc1, NULL,
						 NULL), 0);
			memset(&ix, 0, sizeof(ix));
			o.index = &ix;
			assert_int_equal(ndz_zip(io, src_bytes, &alloc, &o, sum_chunk, &crc2, NULL,
						 NULL), 0);
			assert_int_equal(crc1, crc2);
			assert_true(ix.chunks >= 3);
			assert_int_equal(ix.source_bytes, src_bytes);
			/* A byte changed in chunk 1's last region, past the end ignored. */
			{
				const struct ndz_index_entry *x = &ix.e[1];
				const struct ndz_region *r = &x->regions[x->nregions - 1];

				other[r->start * SECT + 5] ^= 1;
				other[len - 1] ^= 1;
			}
			assert_int_equal(ndz_seed_create(io, &ix, &so, &s, NULL), 0);
			assert_int_equal(ndz_seed_create(oio, &ix, &so, &os, NULL), 0);
			for (k = 0; k < ix.chunks; k++) {
				assert_int_equal(ndz_seed_check(s, k, NULL), 1);
				held += (uint32_t)ndz_seed_check(os, k, NULL);
			}
			assert_int_equal(held, ix.chunks - 1);
			assert_int_equal(ndz_seed_check(os, 1, NULL), 0);
			ndz_seed_free(s);
			ndz_seed_free(os);
			/* The gaps are not zero: not held with zero_fill. */
			so.zero_fill = 1;
			assert_int_equal(ndz_seed_create(io, &ix, &so, &s, NULL), 0);
			assert_int_equal(ndz_seed_check(s, 0, NULL), 0);
			ndz_seed_free(s);
			memcpy(other, data, len);
			ndz_index_release(&ix);
		}
	ndz_io_close(io);
	ndz_io_close(oio);
	ndz_ranges_release(&alloc);
	free(data);
	free(other);
}

struct collect {
	uint8_t *buf;
	size_t n;
};

static int keep_chunk(void *ctx, const uint8_t *chunk, uint32_t index, struct ndz_error *e)
{
	struct collect *c = ctx;

	(void)e;
	c->buf = realloc(c->buf, ((size_t)index + 1) * NDZ_CHUNK_SIZE);
	assert_non_null(c->buf);
	memcpy(c->buf + (size_t)index * NDZ_CHUNK_SIZE, chunk, NDZ_CHUNK_SIZE);
	c->n = (size_t)index + 1;
	return 0;
}

/* ndz_index_build of a stored image gives the index ndz_zip made with it. */
static void test_build(void **state)
{
	const size_t len = (size_t)5 << 20;
	static const int codecs[] = { NDZ_CODEC_ZLIB, NDZ_CODEC_ZSTD };
	uint8_t *data = malloc(len);
	struct ndz_ranges alloc;
	struct ndz_io *io;
	uint64_t st = 11, sec;
	size_t i, c;

	(void)state;
	assert_non_null(data);
	for (i = 0; i < len; i++)
		data[i] = (uint8_t)(fix_rnd(&st) >> (i % 2 ? 24 : 5));
	ndz_ranges_init(&alloc);
	for (sec = 0; sec < len / SECT - 70; sec += 50 + sec % 11)
		assert_int_equal(ndz_ranges_add(&alloc, sec, 1 + sec % 40, NULL), 0);
	assert_int_equal(ndz_ranges_add(&alloc, len / SECT - 1, 1, NULL), 0);
	assert_int_equal(ndz_io_open_mem(data, len, 0, &io, NULL), 0);
	for (c = 0; c < 2; c++) {
		struct ndz_error e = { 0 };
		struct collect col = { NULL, 0 };
		struct ndz_index ix, built;
		struct ndz_zip_opts o;
		struct ndz_io *img;
		uint32_t k, j;

		ndz_zip_opts_init(&o);
		o.codec = codecs[c];
		o.level = 1;
		o.threads = 2;
		memset(&ix, 0, sizeof(ix));
		o.index = &ix;
		assert_int_equal(ndz_zip(io, len - 7, &alloc, &o, keep_chunk, &col, NULL, NULL), 0);
		assert_true(col.n >= 2);
		assert_int_equal(ndz_io_open_mem(col.buf, col.n * NDZ_CHUNK_SIZE, 0, &img, NULL), 0);
		assert_int_equal(ndz_index_build(img, "img", &built, &e), 0);
		assert_int_equal(built.chunks, ix.chunks);
		assert_memory_equal(built.uuid, ix.uuid, 16);
		assert_int_equal(built.source_bytes, len - 7);
		for (k = 0; k < ix.chunks; k++) {
			assert_int_equal(built.e[k].first, ix.e[k].first);
			assert_int_equal(built.e[k].last, ix.e[k].last);
			assert_int_equal(built.e[k].nregions, ix.e[k].nregions);
			for (j = 0; j < ix.e[k].nregions; j++)
				assert_int_equal(built.e[k].regions[j].start, ix.e[k].regions[j].start);
			assert_memory_equal(built.e[k].digest, ix.e[k].digest, NDZ_INDEX_DIGEST_LEN);
			/* the pieces too (zstd only), digests and all */
			assert_int_equal(built.e[k].npieces, ix.e[k].npieces);
			assert_true(c ? ix.e[k].npieces > 0 : ix.e[k].npieces == 0);
			for (j = 0; j < ix.e[k].npieces; j++) {
				const struct ndz_index_piece *p = &ix.e[k].pieces[j];
				const struct ndz_index_piece *q = &built.e[k].pieces[j];

				assert_true(p->doff == q->doff && p->dlen == q->dlen &&
					    p->coff == q->coff && p->clen == q->clen);
				assert_memory_equal(p->digest, q->digest, NDZ_INDEX_DIGEST_LEN);
			}
		}
		ndz_index_release(&built);
		/* A damaged chunk: refused, with a message. */
		col.buf[NDZ_CHUNK_SIZE + NDZ_HDR_SIZE + 100] ^= 1;
		memset(&e, 0, sizeof(e));
		assert_true(ndz_index_build(img, "img", &built, &e) < 0);
		assert_true(e.code < 0);
		ndz_index_release(&built);
		ndz_io_close(img);
		ndz_index_release(&ix);
		free(col.buf);
	}
	ndz_io_close(io);
	ndz_ranges_release(&alloc);
	free(data);
}

/* Does piece p of x write any byte where a and b differ (clipped to src)? */
static int piece_differs(const struct ndz_index_entry *x, const struct ndz_index_piece *p,
			 const uint8_t *a, const uint8_t *b, uint64_t src)
{
	struct ndz_region r[NDZ_MAX_REGIONS];
	uint32_t n = ndz_index_piece_ranges(x, p, r, NDZ_MAX_REGIONS), k;

	for (k = 0; k < n; k++) {
		uint64_t off = r[k].start * SECT, len = (uint64_t)r[k].count * SECT;

		if (off >= src)
			continue;
		if (len > src - off)
			len = src - off;
		if (memcmp(a + off, b + off, len))
			return 1;
	}
	return 0;
}

/*
 * ndz_seed_patch with imagezip's 64 KiB frames that reach 1.25 MiB back: the
 * data repeats every 1.25 MiB (a byte changed each 8 KiB), so a piece's frame
 * leans on pieces ~20 before it. Three pieces of one chunk are changed on the
 * target, the others held: each changed piece is decoded with the 2 MiB before it,
 * taken from the pieces held (read from the target) and the ones decoded, and the
 * target ends up the source. Offered only 64 KiB, the last one fails to decode.
 */
static void test_patch_far(void **state)
{
	const size_t len = (size_t)10 << 20, per = (5u << 18) + 4096;
	uint8_t *data = malloc(len), *t = malloc(len), *out = malloc(64u << 10);
	struct collect col = { NULL, 0 };
	struct ndz_seed_patch_stats ps = { 0 };
	struct ndz_seed_opts so = { 0, 0, 0 };
	struct ndz_region r[NDZ_MAX_REGIONS];
	const struct ndz_index_entry *x = NULL;
	const struct ndz_index_piece *p;
	struct ndz_ranges alloc;
	struct ndz_io *io, *img, *tio;
	struct ndz_index ix;
	struct ndz_zip_opts o;
	struct ndz_seed *s;
	struct ndz_error e = { 0 };
	uint64_t st = 9;
	uint32_t k, j, c = 0, pick[3];
	size_t i;

	(void)state;
	assert_non_null(data);
	assert_non_null(t);
	assert_non_null(out);
	for (i = 0; i < per; i++)
		data[i] = (uint8_t)(fix_rnd(&st) >> 20) & 0x0f;
	for (; i < len; i++)
		data[i] = (uint8_t)(data[i - per] + (i % 8192 == 0));
	ndz_ranges_init(&alloc);
	assert_int_equal(ndz_ranges_add(&alloc, 0, len / SECT, NULL), 0);
	assert_int_equal(ndz_io_open_mem(data, len, 0, &io, NULL), 0);
	ndz_zip_opts_init(&o);
	o.codec = NDZ_CODEC_ZSTD;
	o.threads = 3;
	memset(&ix, 0, sizeof(ix));
	o.index = &ix;
	assert_int_equal(ndz_zip(io, len, &alloc, &o, keep_chunk, &col, NULL, NULL), 0);
	assert_int_equal(ndz_io_open_mem(col.buf, col.n * NDZ_CHUNK_SIZE, 0, &img, NULL), 0);
	for (k = 0; k < ix.chunks && !x; k++)
		if (ix.e[k].npieces >= 40)
			x = &ix.e[c = k];
	if (!x)
		fail_msg("no chunk of 40 pieces or more");
	pick[0] = x->npieces - 2;
	pick[1] = pick[0] - 5;
	pick[2] = pick[0] - 17;
	p = &x->pieces[pick[0]];
	assert_true(p->doff >= (2u << 20));
	memcpy(t, data, len);
	for (j = 0; j < 3; j++) {
		assert_true(ndz_index_piece_ranges(x, &x->pieces[pick[j]], r, NDZ_MAX_REGIONS) > 0);
		t[r[0].start * SECT + 100 * j] ^= 0x21;
	}
	assert_int_equal(ndz_io_open_mem(t, len, 1, &tio, NULL), 0);
	assert_int_equal(ndz_seed_create(tio, &ix, &so, &s, NULL), 0);
	for (k = 0; k < ix.chunks; k++)
		if (ndz_seed_patch(s, img, (uint64_t)k * NDZ_CHUNK_SIZE, k, &ps, &e) != 1)
			fail_msg("chunk %u: %s", k, ndz_error_msg(&e));
	assert_int_equal(ps.pieces_written, 3);
	assert_int_equal(ps.chunks, 1);
	assert_memory_equal(t, data, len);
	/* the piece really leans on more than the piece before it */
	assert_true(p->dlen <= (64u << 10));
	i = (size_t)(x->regions[0].start * SECT + p->doff);      /* the piece on disk */
	assert_true(ndz_unzip_piece(col.buf + (size_t)c * NDZ_CHUNK_SIZE + NDZ_HDR_SIZE + p->coff,
				    p->clen, data + i - (64u << 10), 64u << 10, out, p->dlen,
				    NULL) < 0 || memcmp(out, data + i, p->dlen) != 0);
	assert_int_equal(ndz_unzip_piece(col.buf + (size_t)c * NDZ_CHUNK_SIZE + NDZ_HDR_SIZE +
					 p->coff, p->clen, data + i - (2u << 20), 2u << 20, out,
					 p->dlen, NULL), 0);
	assert_memory_equal(out, data + i, p->dlen);
	ndz_seed_free(s);
	ndz_io_close(tio);
	ndz_io_close(img);
	ndz_index_release(&ix);
	free(col.buf);
	ndz_io_close(io);
	ndz_ranges_release(&alloc);
	free(out);
	free(t);
	free(data);
}

/*
 * ndz_seed_patch: a target with bytes changed in a few pieces (one at the very end,
 * past which nothing is written) gets exactly those pieces back, read from the
 * image (its header and their frames only) and decoded with their prefix from the
 * target; a target that holds the chunk is left alone; a frame damaged in the image
 * is refused before anything of it is written; a zlib chunk is not done by pieces.
 */
static void test_patch(void **state)
{
	const size_t len = (size_t)6 << 20;
	const uint64_t src = len - 7;
	uint8_t *data = malloc(len), *t = malloc(len);
	struct collect col = { NULL, 0 };
	struct ndz_seed_patch_stats ps = { 0 };
	struct ndz_seed_opts so = { 0, 0, 0 };
	struct ndz_ranges alloc;
	struct ndz_io *io, *img, *tio;
	struct ndz_index ix;
	struct ndz_zip_opts o;
	struct ndz_seed *s;
	struct ndz_error e = { 0 };
	uint64_t st = 5, sec, want_bytes = 0;
	uint32_t k, j, want = 0, want_chunks = 0;
	size_t i;

	(void)state;
	assert_non_null(data);
	assert_non_null(t);
	for (i = 0; i < len; i++)
		data[i] = (uint8_t)(fix_rnd(&st) >> (i % 2 ? 24 : 5));
	ndz_ranges_init(&alloc);
	for (sec = 0; sec < len / SECT - 70; sec += 50 + sec % 11)
		assert_int_equal(ndz_ranges_add(&alloc, sec, 1 + sec % 40, NULL), 0);
	assert_int_equal(ndz_ranges_add(&alloc, len / SECT - 1, 1, NULL), 0);
	assert_int_equal(ndz_io_open_mem(data, len, 0, &io, NULL), 0);
	ndz_zip_opts_init(&o);
	o.codec = NDZ_CODEC_ZSTD;
	o.threads = 2;
	memset(&ix, 0, sizeof(ix));
	o.index = &ix;
	assert_int_equal(ndz_zip(io, src, &alloc, &o, keep_chunk, &col, NULL, NULL), 0);
	assert_int_equal(ndz_io_open_mem(col.buf, col.n * NDZ_CHUNK_SIZE, 0, &img, NULL), 0);
	/* the target: the source with bytes changed in three places, and past the end */
	memcpy(t, data, len);
	for (k = 0; k < 3; k++) {
		const struct ndz_index_entry *x = &ix.e[k % ix.chunks];
		const struct ndz_region *r = &x->regions[(k * 7) % x->nregions];

		t[r->start * SECT + 3 + k] ^= 0x40;
	}
	t[src - 1] ^= 1;
	t[len - 1] ^= 1;                  /* past source_bytes: not the image's */
	for (k = 0; k < ix.chunks; k++) {
		uint32_t w = 0;

		for (j = 0; j < ix.e[k].npieces; j++)
			if (piece_differs(&ix.e[k], &ix.e[k].pieces[j], data, t, src)) {
				w++;
				want_bytes += ix.e[k].pieces[j].clen;
			}
		want += w;
		want_chunks += w > 0;
	}
	assert_true(want >= 2);
	assert_int_equal(ndz_io_open_mem(t, len, 1, &tio, NULL), 0);
	assert_int_equal(ndz_seed_create(tio, &ix, &so, &s, NULL), 0);
	for (k = 0; k < ix.chunks; k++)
		if (ndz_seed_patch(s, img, (uint64_t)k * NDZ_CHUNK_SIZE, k, &ps, &e) != 1)
			fail_msg("chunk %u: %s", k, ndz_error_msg(&e));
	assert_int_equal(ps.pieces_written, want);
	assert_int_equal(ps.chunks, want_chunks);
	assert_int_equal(ps.image_bytes, want_bytes + (uint64_t)want_chunks * NDZ_HDR_SIZE);
	assert_memory_equal(t, data, src);
	assert_true(t[len - 1] != data[len - 1]);
	/* again: everything held, nothing read or written */
	memset(&ps, 0, sizeof(ps));
	for (k = 0; k < ix.chunks; k++)
		assert_int_equal(ndz_seed_patch(s, img, (uint64_t)k * NDZ_CHUNK_SIZE, k, &ps, NULL), 1);
	assert_int_equal(ps.pieces_written, 0);
	assert_int_equal(ps.image_bytes, 0);
	/* a lacking piece whose frame is damaged in the image: refused, not written */
	{
		const struct ndz_index_piece *p = &ix.e[1].pieces[1];
		uint8_t *frame = col.buf + NDZ_CHUNK_SIZE + NDZ_HDR_SIZE + p->coff;
		struct ndz_region r[NDZ_MAX_REGIONS];

		assert_true(ndz_index_piece_ranges(&ix.e[1], p, r, NDZ_MAX_REGIONS) > 0);
		t[r[0].start * SECT] ^= 1;
		frame[p->clen / 2] ^= 0x10;
		memset(&e, 0, sizeof(e));
		assert_int_equal(ndz_seed_patch(s, img, NDZ_CHUNK_SIZE, 1, &ps, &e), NDZ_ECORRUPT);
		assert_true(t[r[0].start * SECT] != data[r[0].start * SECT]);
		frame[p->clen / 2] ^= 0x10;
		assert_int_equal(ndz_seed_patch(s, img, NDZ_CHUNK_SIZE, 1, &ps, NULL), 1);
		assert_memory_equal(t, data, src);
	}
	/*
	 * ndz_seed_lacking names the pieces that differ; ndz_seed_patch_some patches
	 * them from a chunk holding only its header and those frames (the rest garbage),
	 * and wants the rest (NDZ_SEED_MORE) when another piece lacks too
	 */
	{
		const struct ndz_index_entry *x = &ix.e[0];
		uint8_t *part = malloc(NDZ_CHUNK_SIZE), lack[64];
		struct ndz_region r[NDZ_MAX_REGIONS];
		uint32_t a = x->npieces / 2, b = x->npieces - 1;
		struct ndz_io *pio;

		assert_non_null(part);
		assert_true(x->npieces > 2 && x->npieces <= 8 * sizeof(lack));
		assert_true(ndz_index_piece_ranges(x, &x->pieces[a], r, NDZ_MAX_REGIONS) > 0);
		t[r[0].start * SECT + 1] ^= 0x21;
		assert_int_equal(ndz_seed_lacking(s, 0, lack, NULL), 1);
		assert_true(ndz_bit_test(lack, a));
		memset(part, 0xee, NDZ_CHUNK_SIZE);
		memcpy(part, col.buf, NDZ_HDR_SIZE);
		memcpy(part + NDZ_HDR_SIZE + x->pieces[a].coff,
		       col.buf + NDZ_HDR_SIZE + x->pieces[a].coff, x->pieces[a].clen);
		assert_int_equal(ndz_io_open_mem(part, NDZ_CHUNK_SIZE, 0, &pio, NULL), 0);
		memset(&e, 0, sizeof(e));
		assert_int_equal(ndz_seed_patch_some(s, pio, 0, 0, lack, &ps, &e), 1);
		assert_memory_equal(t, data, src);
		/* another piece lacking whose frame is not there */
		assert_true(ndz_index_piece_ranges(x, &x->pieces[b], r, NDZ_MAX_REGIONS) > 0);
		t[r[0].start * SECT] ^= 0x21;
		assert_int_equal(ndz_seed_lacking(s, 0, lack, NULL), 1);
		assert_true(ndz_bit_test(lack, b) && !ndz_bit_test(lack, a));
		memset(lack, 0, sizeof(lack));
		ndz_bit_set(lack, a);
		assert_int_equal(ndz_seed_patch_some(s, pio, 0, 0, lack, &ps, NULL), NDZ_SEED_MORE);
		assert_true(t[r[0].start * SECT] != data[r[0].start * SECT]);
		assert_int_equal(ndz_seed_patch(s, img, 0, 0, &ps, NULL), 1);
		assert_memory_equal(t, data, src);
		assert_int_equal(ndz_seed_lacking(s, 0, lack, NULL), 0);
		ndz_io_close(pio);
		free(part);
	}
	/*
	 * a target of zeros: every piece differs, the chunk is left to be restored
	 * whole; after a few such chunks only every 32nd is worth checking
	 */
	memset(t, 0, len);
	memset(&ps, 0, sizeof(ps));
	assert_true(ndz_seed_worth_checking(s, 1));
	for (k = 0; k < 4; k++)
		assert_int_equal(ndz_seed_patch(s, img, (uint64_t)(k % ix.chunks) * NDZ_CHUNK_SIZE,
						k % ix.chunks, &ps, NULL), NDZ_SEED_WHOLE);
	assert_int_equal(ps.image_bytes, 0);
	assert_false(ndz_seed_worth_checking(s, 9));
	assert_true(ndz_seed_worth_checking(s, 64));
	assert_false(ndz_seed_worth_checking(s, 16));
	ndz_seed_free(s);
	ndz_io_close(tio);
	ndz_io_close(img);
	ndz_index_release(&ix);
	free(col.buf);
	/* zlib: no pieces, the caller restores the chunk whole */
	col.buf = NULL;
	o.codec = NDZ_CODEC_ZLIB;
	o.level = 1;
	memset(&ix, 0, sizeof(ix));
	assert_int_equal(ndz_zip(io, src, &alloc, &o, keep_chunk, &col, NULL, NULL), 0);
	assert_int_equal(ndz_io_open_mem(col.buf, col.n * NDZ_CHUNK_SIZE, 0, &img, NULL), 0);
	assert_int_equal(ndz_io_open_mem(t, len, 1, &tio, NULL), 0);
	assert_int_equal(ndz_seed_create(tio, &ix, &so, &s, NULL), 0);
	assert_int_equal(ndz_seed_patch(s, img, 0, 0, &ps, NULL), 0);
	ndz_seed_free(s);
	ndz_io_close(tio);
	ndz_io_close(img);
	ndz_index_release(&ix);
	free(col.buf);
	ndz_io_close(io);
	ndz_ranges_release(&alloc);
	free(t);
	free(data);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_held),
		cmocka_unit_test(test_not_held),
		cmocka_unit_test(test_holds),
		cmocka_unit_test(test_read_error),
		cmocka_unit_test(test_file),
		cmocka_unit_test(test_zip_index),
		cmocka_unit_test(test_build),
		cmocka_unit_test(test_patch),
		cmocka_unit_test(test_patch_far),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
