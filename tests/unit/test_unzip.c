/* Unit tests for lib/unzip.c: images made by ndz_zip restored into memory and compared. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/format.h"
#include "core/image.h"
#include "core/io.h"
#include "core/le.h"
#include "core/orig.h"
#include "core/ranges.h"
#include "codec/unzip.h"
#include "codec/zip.h"
#include "trust/verify.h"
#include "bytes.h"
#include "zipfix.h"

#define MiB (1024u * 1024u)
#define PATTERN 0xa5

/* Restore every chunk of img (in the order given by order[], or 0..n-1) into io. */
static int restore(struct ndz_io *io, const struct fix_image *img, const size_t *order,
		   const struct ndz_unzip_opts *o, struct ndz_unzip_stats *st, char *msg,
		   size_t msglen)
{
	struct ndz_error e = { 0 };
	struct ndz_unzip *u;
	size_t i;
	int rc = ndz_unzip_create(io, o, &u, NULL), frc;

	if (rc < 0)
		return rc;

	for (i = 0; i < img->n && rc == 0; i++)
		rc = ndz_unzip_put(u, fix_chunk(img, order ? order[i] : i), NULL, 0, NULL);
	frc = ndz_unzip_finish(u, st, &e);
	if (msg)
		snprintf(msg, msglen, "%s", frc < 0 ? ndz_error_msg(&e) : "");
	ndz_unzip_free(u);
	if (rc < 0 && frc < 0 && rc != frc)
		fail_msg("put said %d, finish %d", rc, frc);
	return frc < 0 ? frc : rc;
}

/* A target of tlen bytes filled with PATTERN. */
static uint8_t *target_buf(size_t tlen)
{
	uint8_t *t = malloc(tlen ? tlen : 1);

	assert_non_null(t);
	memset(t, PATTERN, tlen);
	return t;
}

/*
 * After a restore of src (len bytes, sectors alloc) at offset toff into t (tlen):
 * allocated bytes equal src, gaps are zero (zero_fill) or untouched, and nothing
 * outside [toff, toff + len) changed.
 */
static void check_target(const uint8_t *t, size_t tlen, size_t toff, const uint8_t *src,
			 size_t len, const struct ndz_ranges *alloc, int zero_fill,
			 const char *what)
{
	uint64_t pos = 0;
	size_t i;

	if (!all_equal(t, toff, PATTERN))
		fail_msg("%s: bytes before the target offset changed", what);
	if (!all_equal(t + toff + len, tlen - toff - len, PATTERN))
		fail_msg("%s: bytes after the image's end changed", what);
	for (i = 0; i <= alloc->n; i++) {
		uint64_t gs = pos, ge = i < alloc->n ? alloc->v[i].start * 512 : len;
		uint64_t rs, re;

		if (ge > len)
			ge = len;
		if (ge > gs && !all_equal(t + toff + gs, (size_t)(ge - gs), zero_fill ? 0 : PATTERN))
			fail_msg("%s: gap [%llu, %llu) is wrong", what, (unsigned long long)gs,
				 (unsigned long long)ge);
		if (i == alloc->n)
			break;
		rs = alloc->v[i].start * 512;
		re = rs + alloc->v[i].count * 512;
		if (re > len)
			re = len;
		if (re > rs && memcmp(t + toff + rs, src + rs, (size_t)(re - rs)) != 0)
			fail_msg("%s: range %zu differs", what, i);
		pos = re;
	}
}

static void opts(struct ndz_unzip_opts *o, int threads, int zero_fill)
{
	ndz_unzip_opts_init(o);
	o->threads = threads;
	o->zero_fill = zero_fill;
}

/* Whole inputs of each kind in codec, restored with 1 and 2 threads. */
static void roundtrip_kinds(int codec, int level)
{
	static const struct {
		enum fix_kind kind;
		size_t len;
	} cases[] = {
		{ FIX_RANDOM, 0 }, { FIX_RANDOM, 1 }, { FIX_RANDOM, 511 }, { FIX_RANDOM, 513 },
		{ FIX_RANDOM, MiB + 1 }, { FIX_RANDOM, 3 * MiB + 7 },
		{ FIX_ZEROS, 512 }, { FIX_ZEROS, 30 * MiB / FIX_SCALE },
		{ FIX_TEXT, 9 * MiB / FIX_SCALE + 100 }, { FIX_MIXED, 7 * MiB / FIX_SCALE + 3 },
	};
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct ndz_unzip_opts o;
	struct ndz_unzip_stats st;
	size_t k;

	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		size_t len = cases[k].len, tlen = len + 4096;
		uint8_t *src = fix_data(cases[k].kind, len, k), *t;
		struct fix_image img;
		struct ndz_io *io;
		char err[256], what[64];
		int threads;

		assert_non_null(src);
		assert_int_equal(fix_whole(&alloc, len), 0);
		assert_int_equal(fix_zip_codec(src, len, NULL, 2, codec, level, &img, NULL, err,
					       sizeof(err)), 0);
		for (threads = 1; threads <= 2; threads++) {
			snprintf(what, sizeof(what), "codec %d, kind %d, %zu bytes, %d threads",
				 codec, cases[k].kind, len, threads);
			t = target_buf(tlen);
			assert_int_equal(ndz_io_open_mem(t, tlen, 1, &io, NULL), 0);
			opts(&o, threads, 0);
			if (restore(io, &img, NULL, &o, &st, err, sizeof(err)) < 0)
				fail_msg("%s: %s", what, err);
			check_target(t, tlen, 0, src, len, &alloc, 0, what);
			assert_int_equal(st.chunks, img.n);
			assert_int_equal(st.bytes_written, len);
			assert_int_equal(st.bytes_zeroed, 0);
			ndz_io_close(io);
			free(t);
		}
		fix_image_release(&img);
		free(src);
	}
	ndz_ranges_release(&alloc);
}

static void test_roundtrip_kinds(void **state)
{
	(void)state;
	roundtrip_kinds(NDZ_CODEC_ZLIB, 4);
}

static void test_roundtrip_zstd(void **state)
{
	(void)state;
	roundtrip_kinds(NDZ_CODEC_ZSTD, 3);
}

/* Scattered ranges: with and without zero fill, chunks in reverse order, an offset. */
static void test_gaps_and_order(void **state)
{
	const size_t len = 6 * MiB + 1000, toff = 8192, tlen = len + toff + 5000;
	uint8_t *src = fix_data(FIX_MIXED, len, 99), *t;
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct ndz_unzip_opts o;
	struct ndz_unzip_stats st;
	struct fix_image img;
	struct ndz_io *mem, *sub;
	uint64_t sectors = len / 512 + 1, gaps;
	size_t *rev, i;
	char err[256];
	int zf;

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_scatter(&alloc, 7, sectors, 1, 2500, 1500), 0);
	assert_int_equal(fix_zip(src, len, &alloc, 2, 4, &img, NULL, err, sizeof(err)), 0);
	assert_true(img.n >= 2);
	rev = calloc(img.n, sizeof(*rev));
	assert_non_null(rev);
	for (i = 0; i < img.n; i++)
		rev[i] = img.n - 1 - i;
	for (zf = 0; zf <= 1; zf++) {
		/* a view at an offset of a larger buffer, like a partition */
		t = target_buf(tlen);
		assert_int_equal(ndz_io_open_mem(t, tlen, 1, &mem, NULL), 0);
		assert_int_equal(ndz_io_open_sub(mem, toff, len + 2000, &sub, NULL), 0);
		opts(&o, 2, zf);
		if (restore(sub, &img, rev, &o, &st, err, sizeof(err)) < 0)
			fail_msg("reverse order, zero fill %d: %s", zf, err);
		check_target(t, tlen, toff, src, len, &alloc, zf, "reverse order");
		gaps = len - (uint64_t)st.bytes_written;
		assert_int_equal(st.bytes_zeroed, zf ? gaps : 0);
		ndz_io_close(sub);
		ndz_io_close(mem);
		/* the same through target_offset on the whole buffer */
		memset(t, PATTERN, tlen);
		assert_int_equal(ndz_io_open_mem(t, tlen, 1, &mem, NULL), 0);
		opts(&o, 1, zf);
		o.target_offset = toff;
		if (restore(mem, &img, NULL, &o, &st, err, sizeof(err)) < 0)
			fail_msg("target offset, zero fill %d: %s", zf, err);
		check_target(t, tlen, toff, src, len, &alloc, zf, "target offset");
		ndz_io_close(mem);
		free(t);
	}
	free(rev);
	fix_image_release(&img);
	ndz_ranges_release(&alloc);
	free(src);
}

/* Small memory budget, many chunks: the pipeline still drains without deadlock. */
static void test_small_memory(void **state)
{
	const size_t len = 12 * MiB / FIX_SCALE + 512;
	uint8_t *src = fix_data(FIX_RANDOM, len, 5), *t = target_buf(len);
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct ndz_unzip_opts o;
	struct fix_image img;
	struct ndz_io *io;
	char err[256];

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_whole(&alloc, len), 0);
	assert_int_equal(fix_zip(src, len, NULL, 2, 1, &img, NULL, err, sizeof(err)), 0);
	assert_int_equal(ndz_io_open_mem(t, len, 1, &io, NULL), 0);
	opts(&o, 2, 1);
	o.mem_limit = 1;
	if (restore(io, &img, NULL, &o, NULL, err, sizeof(err)) < 0)
		fail_msg("%s", err);
	check_target(t, len, 0, src, len, &alloc, 1, "small memory");
	ndz_io_close(io);
	fix_image_release(&img);
	ndz_ranges_release(&alloc);
	free(src);
	free(t);
}

/*
 * Chunks whose output outgrows a job (8 MiB, 4 MiB on a small budget): zstd carries
 * each frame's prefix into the next job, zlib goes piecewise. Sparse text in
 * zeros, scattered ranges, zero fill on and off, 1 and 2 threads.
 */
static void test_outgrow_job(void **state)
{
	const size_t len = 40 * MiB / FIX_SCALE + 3000;
	uint8_t *src = fix_data(FIX_TEXT, len, 17), *t;
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	uint64_t sectors = len / 512 + 1;
	struct ndz_unzip_opts o;
	struct ndz_unzip_stats st;
	struct fix_image img;
	struct ndz_io *io;
	char err[256], what[96];
	size_t i;
	int codec, mem, zf, big;

	(void)state;
	assert_non_null(src);
	for (i = 0; i + 3072 < len; i += 65536)   /* 3 KiB of text in every 64 KiB */
		memset(src + i + 3072, 0, len - i < 65536 ? len - i - 3072 : 65536 - 3072);
	assert_int_equal(fix_scatter(&alloc, 3, sectors, 5, 20000, 300), 0);
	for (codec = NDZ_CODEC_ZLIB; codec <= (int)NDZ_CODEC_ZSTD; codec++) {
		assert_int_equal(fix_zip_codec(src, len, &alloc, 2, codec, codec == NDZ_CODEC_ZSTD ?
					       3 : 4, &img, NULL, err, sizeof(err)), 0);
		for (i = 0, big = 0; i < img.n; i++) {
			struct ndz_chunk_hdr h;

			assert_int_equal(ndz_hdr_decode(fix_chunk(&img, i), &h, NULL), 0);
			if (ndz_hdr_data_bytes(fix_chunk(&img, i), &h) > 8 * MiB)
				big++;
		}
		assert_true(big > 0);      /* the test is about these */
		for (mem = 0; mem <= 1; mem++)
			for (zf = 0; zf <= 1; zf++) {
				snprintf(what, sizeof(what), "codec %d, memory %s, zero fill %d",
					 codec, mem ? "small" : "default", zf);
				t = target_buf(len);
				assert_int_equal(ndz_io_open_mem(t, len, 1, &io, NULL), 0);
				opts(&o, 1 + zf, zf);
				o.mem_limit = (size_t)mem;
				if (restore(io, &img, NULL, &o, &st, err, sizeof(err)) < 0)
					fail_msg("%s: %s", what, err);
				check_target(t, len, 0, src, len, &alloc, zf, what);
				assert_int_equal(st.chunks, img.n);
				ndz_io_close(io);
				free(t);
			}
		fix_image_release(&img);
	}
	ndz_ranges_release(&alloc);
	free(src);
}

/* Verify mode needs no target and writes nothing. */
static void test_verify_only(void **state)
{
	const size_t len = 3 * MiB + 100;
	uint8_t *src = fix_data(FIX_MIXED, len, 8), *t = target_buf(len);
	struct ndz_unzip_opts o;
	struct ndz_unzip_stats st;
	struct fix_image img;
	struct ndz_io *io;
	char err[256];

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_zip(src, len, NULL, 2, 4, &img, NULL, err, sizeof(err)), 0);
	opts(&o, 2, 1);
	o.verify_only = 1;
	assert_int_equal(restore(NULL, &img, NULL, &o, &st, err, sizeof(err)), 0);
	assert_int_equal(st.chunks, img.n);
	/* with a target given it is left alone */
	assert_int_equal(ndz_io_open_mem(t, 100, 0, &io, NULL), 0);   /* too small, read-only */
	assert_int_equal(restore(io, &img, NULL, &o, &st, err, sizeof(err)), 0);
	assert_true(all_equal(t, len, PATTERN));
	ndz_io_close(io);
	/* without verify_only a target is required */
	o.verify_only = 0;
	{
		struct ndz_unzip *u = NULL;
		struct ndz_error ce = { 0 };

		assert_int_equal(ndz_unzip_create(NULL, &o, &u, &ce), NDZ_EINVAL);
		assert_null(u);
		assert_non_null(strstr(ndz_error_msg(&ce), "no target"));
	}
	/* a corrupt chunk fails verification too */
	fix_chunk(&img, 1)[NDZ_HDR_SIZE + 100] ^= 1;
	o.verify_only = 1;
	assert_int_equal(restore(NULL, &img, NULL, &o, NULL, err, sizeof(err)), NDZ_EDATACRC);
	assert_non_null(strstr(err, "chunk 1"));
	fix_image_release(&img);
	free(src);
	free(t);
}

/* A chunk whose header CRC is right but whose data disagrees with its regions. */
static void reheader(uint8_t *chunk, void (*edit)(uint8_t *, struct ndz_chunk_hdr *))
{
	struct ndz_chunk_hdr h;

	assert_int_equal(ndz_chunk_check(chunk, &h, NULL), 0);
	edit(chunk, &h);
	h.data_crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), chunk + NDZ_HDR_SIZE, h.data_len);
	assert_int_equal(ndz_hdr_encode(&h, chunk, NULL), 0);
	assert_int_equal(ndz_chunk_check(chunk, &h, NULL), 0);
}

static void grow_region(uint8_t *area, struct ndz_chunk_hdr *h)
{
	struct ndz_region r = ndz_hdr_region(area, h->nregions - 1);

	r.count++;
	ndz_hdr_set_region(area, h->nregions - 1, r);
	if (r.start + r.count > h->last) {
		h->last++;
		h->source_bytes += 512;
		h->source_sectors++;
	}
}

static void shrink_region(uint8_t *area, struct ndz_chunk_hdr *h)
{
	struct ndz_region r = ndz_hdr_region(area, h->nregions - 1);

	r.count--;
	ndz_hdr_set_region(area, h->nregions - 1, r);
}

static void drop_region(uint8_t *area, struct ndz_chunk_hdr *h)
{
	(void)area;
	h->nregions = 0;
}

/*
 * Each corruption of a codec's image is reported with the chunk named, and
 * nothing is written after it.
 */
static void corrupt_chunks(int codec)
{
	const size_t len = 3 * MiB + 512;
	uint8_t *src = fix_data(FIX_RANDOM, len, 21), *t = target_buf(len + 512);
	struct ndz_unzip_opts o;
	struct fix_image img;
	struct ndz_io *io;
	char err[256];
	static const struct {
		const char *what;
		size_t chunk, off;
		int rc;
		const char *msg;
	} flips[] = {
		{ "header crc", 1, 100, NDZ_EHDRCRC, "chunk 1: bad header checksum" },
		{ "header field", 2, 80, NDZ_EHDRCRC, "chunk 2: bad header checksum" },
		{ "magic", 0, 1, NDZ_EBADMAGIC, "chunk 0: not an image" },
		{ "data", 2, NDZ_HDR_SIZE + 5000, NDZ_EDATACRC, "chunk 2: bad data checksum" },
		{ "padding", 3, NDZ_CHUNK_SIZE - 1, NDZ_EPADDING, "chunk 3: non-zero bytes" },
	};
	size_t k;
	int rc;

	assert_non_null(src);
	assert_int_equal(fix_zip_codec(src, len, NULL, 2, codec, codec == NDZ_CODEC_ZSTD ? 3 : 4,
				       &img, NULL, err, sizeof(err)), 0);
	assert_int_equal(img.n, 4);
	assert_int_equal(ndz_io_open_mem(t, len + 512, 1, &io, NULL), 0);
	for (k = 0; k < sizeof(flips) / sizeof(flips[0]); k++) {
		uint8_t *c = fix_chunk(&img, flips[k].chunk);

		c[flips[k].off] ^= 0x40;
		opts(&o, 2, 0);
		rc = restore(io, &img, NULL, &o, NULL, err, sizeof(err));
		if (rc != flips[k].rc || !strstr(err, flips[k].msg))
			fail_msg("%s: got %d \"%s\", want %d \"%s\"", flips[k].what, rc, err,
				 flips[k].rc, flips[k].msg);
		c[flips[k].off] ^= 0x40;
	}
	/* valid CRCs, but the stream holds fewer or more bytes than the regions */
	{
		void (*edits[])(uint8_t *, struct ndz_chunk_hdr *) = { grow_region,
									shrink_region,
									drop_region };
		uint8_t *save = malloc(NDZ_CHUNK_SIZE);

		assert_non_null(save);
		for (k = 0; k < 3; k++) {
			uint8_t *c = fix_chunk(&img, 3);

			memcpy(save, c, NDZ_CHUNK_SIZE);
			reheader(c, edits[k]);
			opts(&o, 1, 0);
			o.verify_only = 1;
			/* the grown image's size differs from chunk 0's: restore chunk 3 alone */
			{
				struct fix_image one = { c, 1, 1 };

				rc = restore(NULL, &one, NULL, &o, NULL, err, sizeof(err));
			}
			if (rc != NDZ_ELENGTH || !strstr(err, "chunk 3"))
				fail_msg("edit %zu: got %d \"%s\"", k, rc, err);
			memcpy(c, save, NDZ_CHUNK_SIZE);
		}
		free(save);
	}
	/* compressed bytes that are not the codec's, with matching CRCs */
	{
		uint8_t *c = fix_chunk(&img, 2), *save = malloc(NDZ_CHUNK_SIZE);
		struct fix_image one = { c, 1, 1 };
		struct ndz_chunk_hdr h;

		assert_non_null(save);
		memcpy(save, c, NDZ_CHUNK_SIZE);
		assert_int_equal(ndz_chunk_check(c, &h, NULL), 0);
		memset(c + NDZ_HDR_SIZE + 2, 0xff, 64);
		h.data_crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), c + NDZ_HDR_SIZE, h.data_len);
		assert_int_equal(ndz_hdr_encode(&h, c, NULL), 0);
		opts(&o, 1, 0);
		o.verify_only = 1;
		rc = restore(NULL, &one, NULL, &o, NULL, err, sizeof(err));
		if (rc != NDZ_ECORRUPT || !strstr(err, "chunk 2"))
			fail_msg("garbage data: got %d \"%s\"", rc, err);
		memcpy(c, save, NDZ_CHUNK_SIZE);
		free(save);
	}
	/* the untouched image still restores */
	opts(&o, 2, 0);
	assert_int_equal(restore(io, &img, NULL, &o, NULL, err, sizeof(err)), 0);
	assert_memory_equal(t, src, len);
	ndz_io_close(io);
	fix_image_release(&img);
	free(src);
	free(t);
}

static void test_corrupt_chunks(void **state)
{
	(void)state;
	corrupt_chunks(NDZ_CODEC_ZLIB);
}

static void test_corrupt_zstd(void **state)
{
	(void)state;
	corrupt_chunks(NDZ_CODEC_ZSTD);
}

/* Replace chunk c's data with n bytes of d, keeping its regions; checksums made good. */
static void set_data(uint8_t *c, const uint8_t *d, size_t n)
{
	struct ndz_chunk_hdr h;
	uint8_t *copy = malloc(n);

	assert_non_null(copy);
	memcpy(copy, d, n);                    /* d may be c's own data */
	assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
	assert_true(n <= NDZ_MAX_DATA);
	memset(c + NDZ_HDR_SIZE, 0, NDZ_MAX_DATA);
	memcpy(c + NDZ_HDR_SIZE, copy, n);
	free(copy);
	h.data_len = (uint32_t)n;
	h.data_crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), c + NDZ_HDR_SIZE, h.data_len);
	assert_int_equal(ndz_hdr_encode(&h, c, NULL), 0);
}

/* One zstd frame of n bytes of in at out (cap bytes): window 1 << wlog, prefix p of plen. */
static size_t frame_of(uint8_t *out, size_t cap, const uint8_t *in, size_t n, int wlog,
		       const uint8_t *p, size_t plen, int stream)
{
	ZSTD_CCtx *c = ZSTD_createCCtx();
	size_t r;

	assert_non_null(c);
	ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 3);
	ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, wlog);
	if (plen)
		ZSTD_CCtx_refPrefix(c, p, plen);
	if (stream) {                  /* size unknown: a window descriptor in the header */
		ZSTD_outBuffer o = { out, cap, 0 };
		ZSTD_inBuffer i = { in, n, 0 };

		do
			r = ZSTD_compressStream2(c, &o, &i, ZSTD_e_end);
		while (!ZSTD_isError(r) && r);
		r = ZSTD_isError(r) ? r : o.pos;
	} else {
		r = ZSTD_compress2(c, out, cap, in, n);
	}
	assert_false(ZSTD_isError(r));
	ZSTD_freeCCtx(c);
	return r;
}

/*
 * Bad zstd chunks, each refused (all but the last before anything is written,
 * even with zero fill, which writes first): a frame that states more than the regions hold (one
 * frame, or imagezip's several), less, data after the last frame, a frame cut
 * short, a frame over 2 MiB, and a frame that reaches further back than the
 * prefix the format gives it (it would decode with a longer one).
 */
static void test_zstd_claims(void **state)
{
	const size_t part = NDZ_ZSTD_PREFIX + 256 * 1024, len = part + 256 * 1024;
	uint8_t *src = fix_data(FIX_RANDOM, len, 5), *t = target_buf(len);
	uint8_t *frames = malloc(2 * MiB);
	struct ndz_unzip_opts o;
	struct ndz_chunk_hdr h;
	struct fix_image img;
	struct ndz_io *io;
	char err[256];
	uint8_t *save = malloc(NDZ_CHUNK_SIZE);
	size_t a, b;
	int k, rc;

	(void)state;
	assert_non_null(src);
	assert_non_null(save);
	assert_non_null(frames);
	/* 256 KiB random, zeros, then the same 256 KiB again: 256 KiB beyond the prefix */
	memset(src + 256 * 1024, 0, part - 256 * 1024);
	memcpy(src + part, src, len - part);
	assert_int_equal(fix_zip_codec(src, len, NULL, 1, NDZ_CODEC_ZSTD, 3, &img, NULL, err,
				       sizeof(err)), 0);
	assert_int_equal(img.n, 1);
	memcpy(save, img.data, NDZ_CHUNK_SIZE);
	assert_int_equal(ndz_io_open_mem(t, len, 1, &io, NULL), 0);
	for (k = 0; k < 8; k++) {
		uint8_t *c = img.data;
		static const struct {
			int rc;
			const char *msg;
		} want[] = {
			{ NDZ_ELENGTH, "zstd frames hold more data than its regions" },
			{ NDZ_ECORRUPT, "no zstd frame at data byte" },
			{ NDZ_ECORRUPT, "zstd frame at data byte" },
			{ NDZ_ELENGTH, "data ends 512 bytes before its regions do" },
			{ NDZ_ELENGTH, "zstd frames hold more data than its regions" },
			{ 0, "" },                             /* below */
			{ NDZ_ECORRUPT, "orrupt" },
			{ 0, "" },
		};

		memcpy(c, save, NDZ_CHUNK_SIZE);
		assert_int_equal(ndz_chunk_check(c, &h, NULL), 0);
		if (k == 0) {                                  /* states its size: 1 sector over */
			set_data(c, frames, frame_of(frames, 2 * MiB, src, len, 21, NULL, 0, 0));
			reheader(c, shrink_region);
		} else if (k == 1) {
			c[NDZ_HDR_SIZE + h.data_len] = 0x28;   /* a stray byte */
			set_data(c, c + NDZ_HDR_SIZE, h.data_len + 1);
		} else if (k == 2) {
			set_data(c, c + NDZ_HDR_SIZE, h.data_len - 1);  /* the last byte cut */
		} else if (k == 3) {
			reheader(c, grow_region);
		} else if (k == 4) {
			reheader(c, shrink_region);
		} else if (k == 5) {
			continue;                              /* below: needs more data */
		} else {
			/* the third frame made with all of the data before it as prefix (6) */
			a = frame_of(frames, 2 * MiB, src, MiB, NDZ_ZSTD_WINDOW_LOG, NULL, 0, 0);
			a += frame_of(frames + a, 2 * MiB - a, src + MiB, part - MiB,
				      NDZ_ZSTD_WINDOW_LOG, NULL, 0, 0);
			size_t plen = k == 6 ? part : NDZ_ZSTD_PREFIX;

			b = frame_of(frames + a, 2 * MiB - a, src + part, len - part,
				     NDZ_ZSTD_WINDOW_LOG, src + part - plen, plen, 0);
			set_data(c, frames, a + b);
		}
		opts(&o, 1, 1);
		o.verify_only = k == 3;   /* grown: larger than the target, verify alone */
		memset(t, PATTERN, len);
		rc = restore(k == 3 ? NULL : io, &img, NULL, &o, NULL, err, sizeof(err));
		if (k == 7) {                                  /* the same, within the 1 MiB */
			if (rc != 0)
				fail_msg("case 7: %s", err);
			assert_memory_equal(t, src, len);
			continue;
		}
		if (rc != want[k].rc || !strstr(err, want[k].msg) || !strstr(err, "chunk 0"))
			fail_msg("case %d: got %d \"%s\", want %d \"%s\"", k, rc, err,
				 want[k].rc, want[k].msg);
		/* (a frame found bad while decoding may follow data already written) */
		if (k != 6 && !all_equal(t, len, PATTERN))
			fail_msg("case %d: the target was written", k);
	}
	memcpy(img.data, save, NDZ_CHUNK_SIZE);
	opts(&o, 1, 1);
	memset(t, PATTERN, len);
	assert_int_equal(restore(io, &img, NULL, &o, NULL, err, sizeof(err)), 0);
	assert_memory_equal(t, src, len);
	ndz_io_close(io);
	fix_image_release(&img);
	/* zeros in one frame that holds twice what a frame may */
	{
		size_t zn = (size_t)2 << NDZ_ZSTD_WINDOW_LOG;
		uint8_t *z = calloc(1, zn);

		assert_non_null(z);
		assert_int_equal(fix_zip_codec(z, zn, NULL, 1, NDZ_CODEC_ZSTD, 3, &img, NULL,
					       err, sizeof(err)), 0);
		assert_int_equal(img.n, 1);
		set_data(img.data, frames, frame_of(frames, 2 * MiB, z, zn,
						    NDZ_ZSTD_WINDOW_LOG + 1, NULL, 0, 0));
		opts(&o, 1, 0);
		o.verify_only = 1;
		rc = restore(NULL, &img, NULL, &o, NULL, err, sizeof(err));
		if (rc != NDZ_ECORRUPT || !strstr(err, "over 2097152"))
			fail_msg("large frame: got %d \"%s\"", rc, err);
		fix_image_release(&img);
		free(z);
	}
	free(frames);
	free(save);
	free(src);
	free(t);
}

/* A chunk of another image is refused. */
static void test_mismatch(void **state)
{
	const size_t len = MiB + 512 * 3;
	uint8_t *src = fix_data(FIX_RANDOM, len, 2), *t = target_buf(len);
	struct fix_image a, b;
	struct ndz_unzip_opts o;
	struct ndz_error e = { 0 };
	struct ndz_unzip *u;
	struct ndz_io *io;
	char err[256];
	int rc;

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_zip(src, len, NULL, 1, 4, &a, NULL, err, sizeof(err)), 0);
	assert_int_equal(fix_zip(src, len - 512, NULL, 1, 4, &b, NULL, err, sizeof(err)), 0);
	assert_int_equal(a.n, 2);
	assert_int_equal(ndz_io_open_mem(t, len, 1, &io, NULL), 0);
	opts(&o, 2, 0);
	assert_int_equal(ndz_unzip_create(io, &o, &u, NULL), 0);
	assert_int_equal(ndz_unzip_put(u, fix_chunk(&a, 0), NULL, 0, NULL), 0);
	rc = ndz_unzip_put(u, fix_chunk(&b, 1), NULL, 0, NULL);
	if (rc == 0)
		rc = ndz_unzip_finish(u, NULL, &e);
	else
		assert_int_equal(ndz_unzip_finish(u, NULL, &e), rc);
	assert_int_equal(rc, NDZ_EMISMATCH);
	assert_non_null(strstr(ndz_error_msg(&e), "another image"));
	/* once failed, put keeps failing, and says why */
	ndz_error_clear(&e);
	assert_int_equal(ndz_unzip_put(u, fix_chunk(&a, 1), NULL, 0, &e), NDZ_EMISMATCH);
	assert_non_null(strstr(ndz_error_msg(&e), "another image"));
	ndz_error_clear(&e);
	assert_null(ndz_unzip_get_buf(u, &e));
	assert_int_equal(e.code, NDZ_EMISMATCH);
	ndz_unzip_free(u);
	ndz_io_close(io);
	fix_image_release(&a);
	fix_image_release(&b);
	free(src);
	free(t);
}

/*
 * An original V3 chunk made here (sectors [0, 8), regions {0,4} and {6,2}): it
 * restores through the chunk view; with an original public key in the verifier it
 * is refused (it cannot be signed) and nothing of it is written.
 */
static void test_orig_chunk(void **state)
{
	const size_t len = 8 * 512;
	uint8_t *chunk = calloc(1, NDZ_CHUNK_SIZE), *t, plain[6 * 512];
	struct ndz_orig_keys ok = { 0 };
	struct ndz_verify_opts vo = { .orig = &ok, .name = "orig" };
	struct ndz_verify *v;
	struct ndz_chunk_hdr h;
	struct ndz_unzip_opts o;
	struct ndz_error e = { 0 };
	struct ndz_unzip *u;
	struct ndz_io *io;
	uLongf zlen = NDZ_ORIG_MAX_DATA;
	size_t i;

	(void)state;
	assert_non_null(chunk);
	for (i = 0; i < sizeof(plain); i++)
		plain[i] = (uint8_t)(i * 11 + 1);
	assert_int_equal(compress2(chunk + 4096, &zlen, plain, sizeof(plain), 6), Z_OK);
	put_le32(chunk, NDZ_ORIG_MAGIC + 2);
	put_le32(chunk + 4, (uint32_t)zlen);
	put_le32(chunk + 16, 4096);
	put_le32(chunk + 20, 2);
	put_le32(chunk + 28, 8);
	put_le32(chunk + 36, 0);
	put_le32(chunk + 40, 4);
	put_le32(chunk + 44, 6);
	put_le32(chunk + 48, 2);
	assert_int_equal(ndz_orig_chunk_hdr(chunk, 1, len, &h, NULL), 0);

	/* no key: the view's regions, each where it belongs, the gap untouched */
	t = target_buf(len);
	assert_int_equal(ndz_io_open_mem(t, len, 1, &io, NULL), 0);
	opts(&o, 2, 0);
	assert_int_equal(ndz_unzip_create(io, &o, &u, NULL), 0);
	assert_int_equal(ndz_unzip_put(u, chunk, &h, 0, NULL), 0);
	assert_int_equal(ndz_unzip_finish(u, NULL, &e), 0);
	ndz_unzip_free(u);
	assert_memory_equal(t, plain, 4 * 512);
	assert_true(all_equal(t + 4 * 512, 2 * 512, PATTERN));
	assert_memory_equal(t + 6 * 512, plain + 4 * 512, 2 * 512);
	ndz_io_close(io);

	/* an original public key: refused, the chunk's name and why, nothing written */
	memset(t, PATTERN, len);
	ok.rsa_n_len = 64;
	memset(ok.rsa_n, 0xc5, 64);
	ok.rsa_e_len = 1;
	ok.rsa_e[0] = 17;
	assert_int_equal(ndz_verify_create(&vo, &v, NULL), 0);
	assert_int_equal(ndz_io_open_mem(t, len, 1, &io, NULL), 0);
	opts(&o, 2, 0);
	o.verify = v;
	o.name = "orig.ndz";
	assert_int_equal(ndz_unzip_create(io, &o, &u, NULL), 0);
	ndz_unzip_put(u, chunk, &h, 0, NULL);
	ndz_error_clear(&e);
	assert_int_equal(ndz_unzip_finish(u, NULL, &e), NDZ_EUNSIGNED);
	assert_string_equal(ndz_error_msg(&e), "orig.ndz: chunk 0: image is not signed: chunk "
			    "has no signature (a version 3 image cannot be signed)");
	assert_true(all_equal(t, len, PATTERN));
	ndz_unzip_free(u);
	ndz_io_close(io);
	ndz_verify_free(v);
	free(t);
	free(chunk);
}

/* A target smaller than the image is refused before any write reaches it. */
static void test_target_too_small(void **state)
{
	const size_t len = 2 * MiB + 1000;
	uint8_t *src = fix_data(FIX_TEXT, len, 4), *t = target_buf(len);
	struct ndz_chunk_hdr h;
	struct ndz_unzip_opts o;
	struct fix_image img;
	struct ndz_io *mem, *f;
	char err[256];
	int rc;

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_zip(src, len, NULL, 1, 4, &img, NULL, err, sizeof(err)), 0);
	assert_int_equal(ndz_chunk_check(fix_chunk(&img, 0), &h, NULL), 0);
	assert_int_equal(ndz_image_fits(&h, "t", len, NULL), 0);
	assert_int_equal(ndz_image_fits(&h, "t", len + 1, NULL), 0);
	assert_int_equal(ndz_image_fits(&h, "t", len - 1, NULL), NDZ_ETOOSMALL);
	{
		struct ndz_error e = { 0 };

		assert_int_equal(ndz_image_fits(&h, "t.img", 0, &e), NDZ_ETOOSMALL);
		assert_string_equal(ndz_error_msg(&e), "t.img: target too small for the image "
				    "(0 bytes, the image needs 2098152)");
	}
	/* one byte short; any write outside [0, len - 1) would also fail loudly */
	assert_int_equal(ndz_io_open_mem(t, len - 1, 1, &mem, NULL), 0);
	assert_int_equal(ndz_io_open_fault(mem, 0, 0, 0, len - 1, &f, NULL), 0);
	opts(&o, 2, 1);
	rc = restore(f, &img, NULL, &o, NULL, err, sizeof(err));
	assert_int_equal(rc, NDZ_ETOOSMALL);
	assert_non_null(strstr(err, "target too small"));
	assert_true(all_equal(t, len, PATTERN));
	ndz_io_close(f);
	/* the target offset counts too */
	assert_int_equal(ndz_io_open_mem(t, len, 1, &mem, NULL), 0);
	opts(&o, 2, 0);
	o.target_offset = 512;
	rc = restore(mem, &img, NULL, &o, NULL, err, sizeof(err));
	assert_int_equal(rc, NDZ_ETOOSMALL);
	assert_true(all_equal(t, len, PATTERN));
	o.target_offset = (uint64_t)len * 2;
	rc = restore(mem, &img, NULL, &o, NULL, err, sizeof(err));
	assert_int_equal(rc, NDZ_ETOOSMALL);
	assert_true(all_equal(t, len, PATTERN));
	ndz_io_close(mem);
	fix_image_release(&img);
	free(src);
	free(t);
}

/* Writes stay inside the regions (no zero fill) and inside the image (zero fill). */
static void test_write_guard(void **state)
{
	const size_t len = 2 * MiB, tlen = len + MiB;
	uint8_t *src = fix_data(FIX_MIXED, len, 6), *t = target_buf(tlen);
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct ndz_unzip_opts o;
	struct fix_image img;
	struct ndz_io *mem, *f;
	char err[256];

	(void)state;
	assert_non_null(src);
	/* one range in the middle of the source */
	assert_int_equal(ndz_ranges_add(&alloc, 1000, 1500, NULL), 0);
	assert_int_equal(fix_zip(src, len, &alloc, 2, 4, &img, NULL, err, sizeof(err)), 0);
	assert_int_equal(ndz_io_open_mem(t, tlen, 1, &mem, NULL), 0);
	assert_int_equal(ndz_io_open_fault(mem, 0, 0, 1000 * 512, 2500 * 512, &f, NULL), 0);
	opts(&o, 2, 0);
	if (restore(f, &img, NULL, &o, NULL, err, sizeof(err)) < 0)
		fail_msg("guarded restore: %s", err);
	check_target(t, tlen, 0, src, len, &alloc, 0, "guarded");
	ndz_io_close(f);
	/* zero fill writes the whole image, not a byte past it */
	memset(t, PATTERN, tlen);
	assert_int_equal(ndz_io_open_mem(t, tlen, 1, &mem, NULL), 0);
	assert_int_equal(ndz_io_open_fault(mem, 0, 0, 0, len, &f, NULL), 0);
	opts(&o, 2, 1);
	if (restore(f, &img, NULL, &o, NULL, err, sizeof(err)) < 0)
		fail_msg("guarded zero-filled restore: %s", err);
	check_target(t, tlen, 0, src, len, &alloc, 1, "guarded, zero fill");
	ndz_io_close(f);
	fix_image_release(&img);
	ndz_ranges_release(&alloc);
	free(src);
	free(t);
}

/* A failing write is reported by finish, naming the target. */
static void test_write_failure(void **state)
{
	const size_t len = 4 * MiB + 512;
	uint8_t *src = fix_data(FIX_RANDOM, len, 12), *t = target_buf(len);
	struct ndz_unzip_opts o;
	struct ndz_error e = { 0 };
	struct fix_image img;
	struct ndz_io *mem, *f;
	char err[256];
	unsigned nth;
	int rc;

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_zip(src, len, NULL, 2, 4, &img, NULL, err, sizeof(err)), 0);
	for (nth = 1; nth <= 3; nth++) {
		struct ndz_unzip *u;
		size_t i;

		assert_int_equal(ndz_io_open_mem(t, len, 1, &mem, NULL), 0);
		assert_int_equal(ndz_io_open_fault(mem, 0, nth, 0, UINT64_MAX, &f, NULL), 0);
		opts(&o, 2, 0);
		assert_int_equal(ndz_unzip_create(f, &o, &u, NULL), 0);
		rc = 0;
		for (i = 0; i < img.n && rc == 0; i++)
			rc = ndz_unzip_put(u, fix_chunk(&img, i), NULL, 0, NULL);
		/* put may or may not have seen it yet; finish must */
		assert_true(rc == 0 || rc == NDZ_EIO);
		ndz_error_clear(&e);
		assert_int_equal(ndz_unzip_finish(u, NULL, &e), NDZ_EIO);
		if (!strstr(ndz_error_msg(&e), "write error"))
			fail_msg("write %u failing: \"%s\"", nth, ndz_error_msg(&e));
		ndz_unzip_free(u);
		ndz_io_close(f);
	}
	fix_image_release(&img);
	free(src);
	free(t);
}

/* Freeing a handle without finishing abandons the work cleanly. */
static void test_abandon(void **state)
{
	const size_t len = 4 * MiB;
	uint8_t *src = fix_data(FIX_TEXT, len, 3), *t = target_buf(len);
	struct ndz_unzip_opts o;
	struct ndz_error e = { 0 };
	struct ndz_unzip *u;
	struct fix_image img;
	struct ndz_io *io;
	char err[256];

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_zip(src, len, NULL, 2, 1, &img, NULL, err, sizeof(err)), 0);
	assert_int_equal(ndz_io_open_mem(t, len, 1, &io, NULL), 0);
	opts(&o, 2, 0);
	assert_int_equal(ndz_unzip_create(io, &o, &u, NULL), 0);
	ndz_unzip_free(u);
	assert_int_equal(ndz_unzip_create(io, &o, &u, NULL), 0);
	assert_int_equal(ndz_unzip_put(u, fix_chunk(&img, 0), NULL, 0, NULL), 0);
	ndz_unzip_free(u);
	ndz_unzip_free(NULL);
	/* finishing with nothing put is not a whole image */
	assert_int_equal(ndz_unzip_create(io, &o, &u, NULL), 0);
	assert_int_equal(ndz_unzip_finish(u, NULL, &e), NDZ_EMISSING);
	assert_string_equal(ndz_error_msg(&e), "image: chunk 0: missing chunk");
	ndz_unzip_free(u);
	/* nor is a prefix of one (random data: a chunk per MiB) */
	fix_image_release(&img);
	free(src);
	src = fix_data(FIX_RANDOM, len, 3);
	assert_non_null(src);
	assert_int_equal(fix_zip(src, len, NULL, 2, 1, &img, NULL, err, sizeof(err)), 0);
	assert_true(img.n >= 3);
	assert_int_equal(ndz_unzip_create(io, &o, &u, NULL), 0);
	assert_int_equal(ndz_unzip_put(u, fix_chunk(&img, 0), NULL, 0, NULL), 0);
	assert_int_equal(ndz_unzip_put(u, fix_chunk(&img, 1), NULL, 0, NULL), 0);
	ndz_error_clear(&e);
	assert_int_equal(ndz_unzip_finish(u, NULL, &e), NDZ_EMISSING);
	assert_string_equal(ndz_error_msg(&e), "image: chunk 2: missing chunk");
	ndz_unzip_free(u);
	ndz_io_close(io);
	fix_image_release(&img);
	free(src);
	free(t);
}

struct wprogress {
	uint64_t last;
	uint32_t chunks;
	int calls, backwards;
	int flushing;                  /* flushing hook calls */
	uint64_t flushing_at;          /* the bytes progress had said then */
};

static void on_flushing(void *ctx)
{
	struct wprogress *w = ctx;

	w->flushing++;
	w->flushing_at = w->last;
}

static void on_progress(void *ctx, uint64_t bytes, uint32_t chunks)
{
	struct wprogress *w = ctx;

	if (bytes < w->last || chunks < w->chunks)
		w->backwards = 1;
	w->last = bytes;
	w->chunks = chunks;
	w->calls++;
}

/*
 * Progress adds up, in bytes and in chunks, out of order too, in chunks alone when
 * verifying; the flushing hook comes once, after every write, and not on a failure
 * nor when verifying. A chunk delivered twice
 * is refused, named, before its second copy is written.
 */
static void test_duplicates_and_progress(void **state)
{
	const size_t len = 5 * MiB + 1536;
	uint8_t *src = fix_data(FIX_MIXED, len, 31), *t = target_buf(len);
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct wprogress w = { 0, 0, 0, 0, 0, 0 };
	struct ndz_unzip_opts o;
	struct ndz_unzip_stats st;
	struct fix_image img;
	struct ndz_io *io;
	size_t *order, i, n;
	char err[256];

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_whole(&alloc, len), 0);
	assert_int_equal(fix_zip(src, len, NULL, 2, 4, &img, NULL, err, sizeof(err)), 0);
	order = calloc(img.n + 1, sizeof(*order));
	assert_non_null(order);
	/* every chunk, odd ones first */
	for (n = 0, i = 1; i < img.n; i += 2)
		order[n++] = i;
	for (i = 0; i < img.n; i += 2)
		order[n++] = i;
	assert_int_equal(ndz_io_open_mem(t, len, 1, &io, NULL), 0);
	opts(&o, 2, 1);
	o.progress = on_progress;
	o.flushing = on_flushing;
	o.progress_ctx = &w;
	if (restore(io, &img, order, &o, &st, err, sizeof(err)) < 0)
		fail_msg("out of order: %s", err);
	check_target(t, len, 0, src, len, &alloc, 1, "out of order");
	assert_int_equal(st.chunks, img.n);
	assert_true(w.calls > 0);
	assert_int_equal(w.backwards, 0);
	assert_int_equal(w.last, st.bytes_written + st.bytes_zeroed);
	assert_int_equal(w.chunks, img.n);
	assert_int_equal(w.flushing, 1);
	assert_int_equal(w.flushing_at, st.bytes_written + st.bytes_zeroed);
	/* verifying: progress counts the chunks checked, no bytes; nothing is flushed */
	memset(&w, 0, sizeof(w));
	opts(&o, 2, 1);
	o.verify_only = 1;
	o.progress = on_progress;
	o.flushing = on_flushing;
	o.progress_ctx = &w;
	if (restore(NULL, &img, order, &o, &st, err, sizeof(err)) < 0)
		fail_msg("verify: %s", err);
	assert_true(w.calls > 0);
	assert_int_equal(w.backwards, 0);
	assert_int_equal(w.last, 0);
	assert_int_equal(w.chunks, img.n);
	assert_int_equal(w.flushing, 0);

	/* chunk 1 again after the others: the duplicate is named */
	order[n++] = 1;
	{
		struct fix_image dup = img;
		uint8_t *data = malloc(n * NDZ_CHUNK_SIZE);

		assert_non_null(data);
		for (i = 0; i < n; i++)
			memcpy(data + i * NDZ_CHUNK_SIZE, fix_chunk(&img, order[i]), NDZ_CHUNK_SIZE);
		dup.data = data;
		dup.n = n;
		opts(&o, 2, 1);
		o.flushing = on_flushing;
		o.progress_ctx = &w;
		w.flushing = 0;
		assert_int_equal(restore(io, &dup, NULL, &o, &st, err, sizeof(err)), NDZ_EDUP);
		assert_string_equal(err, "image: chunk 1: duplicate chunk");
		assert_int_equal(w.flushing, 0);
		free(data);
	}
	ndz_io_close(io);
	free(order);
	fix_image_release(&img);
	ndz_ranges_release(&alloc);
	free(src);
	free(t);
}

/*
 * ndz_unzip_piece: a frame made with a prefix (by libzstd here, not by zip.c)
 * decodes with that prefix to its input, and not with none; a frame of another
 * stated size, two frames, trailing bytes, a damaged frame are refused.
 */
static void test_piece(void **state)
{
	const size_t n = 256 * 1024;
	uint8_t *in = malloc(2 * n), *c = malloc(ZSTD_compressBound(n) + 16), *out = malloc(n);
	ZSTD_CCtx *z = ZSTD_createCCtx();
	struct ndz_error e = { 0 };
	size_t clen, i;
	uint64_t st = 3;

	(void)state;
	assert_non_null(in);
	assert_non_null(c);
	assert_non_null(out);
	assert_non_null(z);
	for (i = 0; i < n; i++) {
		st = st * 6364136223846793005ull + 1;
		in[i] = (uint8_t)(st >> 56);
	}
	memcpy(in + n, in, n);              /* the second half: all in its prefix */
	assert_false(ZSTD_isError(ZSTD_CCtx_setParameter(z, ZSTD_c_checksumFlag, 1)));
	assert_false(ZSTD_isError(ZSTD_CCtx_refPrefix(z, in, n)));
	clen = ZSTD_compress2(z, c, ZSTD_compressBound(n), in + n, n);
	assert_false(ZSTD_isError(clen));
	assert_true(clen < n / 10);
	assert_int_equal(ndz_unzip_piece(c, clen, in, n, out, n, &e), 0);
	assert_memory_equal(out, in + n, n);
	assert_int_equal(ndz_unzip_piece(c, clen, NULL, 0, out, n, NULL), NDZ_ECORRUPT);
	assert_int_equal(ndz_unzip_piece(c, clen, in, n, out, n - 512, NULL), NDZ_ECORRUPT);
	assert_int_equal(ndz_unzip_piece(c, clen - 1, in, n, out, n, NULL), NDZ_ECORRUPT);
	c[clen] = 0;
	assert_int_equal(ndz_unzip_piece(c, clen + 1, in, n, out, n, NULL), NDZ_ECORRUPT);
	c[clen / 2] ^= 0x20;
	assert_int_equal(ndz_unzip_piece(c, clen, in, n, out, n, &e), NDZ_ECORRUPT);
	assert_non_null(strstr(ndz_error_msg(&e), "piece of"));
	ZSTD_freeCCtx(z);
	free(in);
	free(c);
	free(out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip_kinds),
		cmocka_unit_test(test_piece),
		cmocka_unit_test(test_roundtrip_zstd),
		cmocka_unit_test(test_gaps_and_order),
		cmocka_unit_test(test_small_memory),
		cmocka_unit_test(test_outgrow_job),
		cmocka_unit_test(test_verify_only),
		cmocka_unit_test(test_corrupt_chunks),
		cmocka_unit_test(test_corrupt_zstd),
		cmocka_unit_test(test_zstd_claims),
		cmocka_unit_test(test_mismatch),
		cmocka_unit_test(test_orig_chunk),
		cmocka_unit_test(test_target_too_small),
		cmocka_unit_test(test_write_guard),
		cmocka_unit_test(test_write_failure),
		cmocka_unit_test(test_abandon),
		cmocka_unit_test(test_duplicates_and_progress),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
