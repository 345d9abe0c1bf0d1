/*
 * Unit tests for lib/zip.c: images of memory inputs are checked chunk by chunk
 * with lib/format.c and decoded with plain zlib or libzstd, independently of
 * lib/unzip.c.
 */
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
#include "core/io.h"
#include "core/le.h"
#include "core/ranges.h"
#include "codec/unzip.h"
#include "codec/zip.h"
#include "trust/index.h"
#include "zipfix.h"

/* The image of src (alloc: as for fix_zip_codec) made with threads is a's, byte for byte. */
static void same_image(const struct fix_image *a, const uint8_t *src, size_t len,
		       const struct ndz_ranges *alloc, int threads, int codec, int level,
		       const char *what)
{
	struct fix_image b;
	char err[256];

	if (fix_zip_codec(src, len, alloc, threads, codec, level, &b, NULL, err, sizeof(err)) < 0)
		fail_msg("%s, %d threads: %s", what, threads, err);
	assert_int_equal(a->n, b.n);
	if (memcmp(a->data, b.data, a->n * NDZ_CHUNK_SIZE) != 0)
		fail_msg("%s: image differs between 1 and %d threads", what, threads);
	fix_image_release(&b);
}

/* ndz_zip with the error context's message in err, as the fixtures take it. */
static int zip_e(struct ndz_io *src, uint64_t len, const struct ndz_ranges *alloc,
		 const struct ndz_zip_opts *o, ndz_chunk_fn out, void *ctx,
		 struct ndz_zip_stats *stats, char *err, size_t errlen)
{
	struct ndz_error e = { 0 };
	int rc = ndz_zip(src, len, alloc, o, out, ctx, stats, &e);

	snprintf(err, errlen, "%s", rc < 0 ? ndz_error_msg(&e) : "");
	return rc;
}

#define MiB (1024u * 1024u)

/*
 * The format's zstd rule, written out independently of lib/unzip.c: the frames
 * end to end, each decoded with the chunk's last (up to) 2 MiB of output before
 * it as prefix and a window of at most 4 MiB. Returns the bytes decoded or -1.
 * zstd_chunk_decode_prefix offers at most plimit bytes of prefix instead.
 */
static long long zstd_chunk_decode_prefix(uint8_t *out, size_t cap, const uint8_t *data,
					  size_t len, size_t plimit)
{
	ZSTD_DCtx *d = ZSTD_createDCtx();
	size_t pos = 0, in = 0;

	assert_non_null(d);
	assert_false(ZSTD_isError(ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, 22)));
	while (in < len) {
		size_t fsz = ZSTD_findFrameCompressedSize(data + in, len - in), plen, r;

		if (ZSTD_isError(fsz))
			break;
		plen = pos < plimit ? pos : plimit;
		ZSTD_DCtx_reset(d, ZSTD_reset_session_only);
		ZSTD_DCtx_refPrefix(d, plen ? out + pos - plen : NULL, plen);
		r = ZSTD_decompressDCtx(d, out + pos, cap - pos, data + in, fsz);
		if (ZSTD_isError(r))
			break;
		pos += r;
		in += fsz;
	}
	ZSTD_freeDCtx(d);
	return in == len ? (long long)pos : -1;
}

static long long zstd_chunk_decode(uint8_t *out, size_t cap, const uint8_t *data, size_t len)
{
	return zstd_chunk_decode_prefix(out, cap, data, len, 2u << 20);
}

/*
 * Everything an image must satisfy: every chunk checks, the chunks are chained
 * and numbered, the regions are exactly alloc, and each chunk's zlib stream (or
 * zstd frames) decompress to exactly its regions' bytes of src (zeros past len).
 */
static void verify_image(const struct fix_image *img, const uint8_t *src, uint64_t len,
			 const struct ndz_ranges *alloc, const char *what)
{
	struct ndz_chunk_hdr *h = malloc(sizeof(*h)), *first = malloc(sizeof(*first));
	struct ndz_ranges got = NDZ_RANGES_INIT;
	uint64_t prev_last = 0, sectors = len / 512 + (len % 512 != 0);
	size_t i;

	assert_non_null(h);
	assert_non_null(first);
	if (img->n == 0)
		fail_msg("%s: no chunks", what);
	for (i = 0; i < img->n; i++) {
		const uint8_t *c = fix_chunk(img, i);
		uint64_t want, pos = 0;
		uLongf outlen;
		uint8_t *out;
		uint32_t r;
		int rc = ndz_chunk_check(c, h, NULL);

		if (rc < 0)
			fail_msg("%s: chunk %zu: %s", what, i, ndz_strerror(rc));
		if (i == 0)
			*first = *h;
		assert_int_equal(ndz_hdr_same_image(first, h, NULL), 0);
		assert_memory_equal(h->uuid, "fixed-test-uuid!", 16);
		assert_int_equal(h->index, i);
		assert_int_equal(h->source_bytes, len);
		assert_int_equal(h->source_sectors, sectors);
		assert_int_equal(h->image_kind, NDZ_KIND_WHOLE);
		if (h->first != prev_last)
			fail_msg("%s: chunk %zu starts at %llu, chunk %zu ended at %llu", what, i,
				 (unsigned long long)h->first, i - 1,
				 (unsigned long long)prev_last);
		if (!!(h->chunk_flags & NDZ_CHUNK_LAST) != (i == img->n - 1))
			fail_msg("%s: chunk %zu of %zu: last flag %u", what, i, img->n,
				 h->chunk_flags);
		prev_last = h->last;
		for (r = 0; r < h->nregions; r++)
			assert_int_equal(ndz_ranges_add(&got, ndz_hdr_region(c, r).start,
							ndz_hdr_region(c, r).count, NULL), 0);
		/* the data is one zlib stream holding exactly the regions' sectors */
		want = ndz_hdr_data_bytes(c, h);
		out = malloc(want + 1);
		assert_non_null(out);
		outlen = (uLongf)(want + 1);
		if (h->codec == NDZ_CODEC_ZSTD) {
			long long zr = zstd_chunk_decode(out, want + 1, c + NDZ_HDR_SIZE, h->data_len);

			rc = zr < 0 ? -1 : Z_OK;
			outlen = zr < 0 ? 0 : (uLongf)zr;
		} else {
			rc = uncompress(out, &outlen, c + NDZ_HDR_SIZE, h->data_len);
		}
		if (rc != Z_OK || outlen != want)
			fail_msg("%s: chunk %zu: inflate %d, %lu bytes, want %llu", what, i, rc,
				 (unsigned long)outlen, (unsigned long long)want);
		for (r = 0; r < h->nregions; r++) {
			struct ndz_region reg = ndz_hdr_region(c, r);
			uint64_t off = reg.start * 512, n = reg.count * 512ull;
			uint64_t in_src = off >= len ? 0 : len - off < n ? len - off : n;
			uint64_t k;

			if (in_src && memcmp(out + pos, src + off, in_src) != 0)
				fail_msg("%s: chunk %zu region %u: data differs", what, i, r);
			for (k = in_src; k < n; k++)
				if (out[pos + k] != 0)
					fail_msg("%s: chunk %zu: byte past the source not zero", what,
						 i);
			pos += n;
		}
		free(out);
	}
	if (prev_last != sectors)
		fail_msg("%s: last chunk ends at %llu, source has %llu sectors", what,
			 (unsigned long long)prev_last, (unsigned long long)sectors);
	ndz_ranges_normalize(&got);
	if (got.n != alloc->n)
		fail_msg("%s: regions make %zu ranges, input had %zu", what, got.n, alloc->n);
	for (i = 0; i < got.n; i++)
		if (got.v[i].start != alloc->v[i].start || got.v[i].count != alloc->v[i].count)
			fail_msg("%s: range %zu differs", what, i);
	ndz_ranges_release(&got);
	free(h);
	free(first);
}

/* Every chunk but the last (and those closed by the region limit) at least 98% full. */
static void verify_fill(const struct fix_image *img, const char *what)
{
	struct ndz_chunk_hdr *h = malloc(sizeof(*h));
	size_t i;

	assert_non_null(h);
	for (i = 0; i + 1 < img->n; i++) {
		assert_int_equal(ndz_chunk_check(fix_chunk(img, i), h, NULL), 0);
		if (h->nregions == NDZ_MAX_REGIONS)
			continue;
		if (h->data_len < NDZ_MAX_DATA / 100 * 98)
			fail_msg("%s: chunk %zu only %.1f%% full", what, i,
				 100.0 * h->data_len / NDZ_MAX_DATA);
	}
	free(h);
}

static void roundtrip_codec(int codec, int level, enum fix_kind kind, size_t len,
			    const char *what)
{
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct fix_image a;
	struct ndz_zip_stats st;
	uint8_t *src = fix_data(kind, len, len * 31 + kind);
	char err[256] = "";
	uint64_t data = 0;
	size_t i;
	int rc;

	assert_non_null(src);
	assert_int_equal(fix_whole(&alloc, len), 0);
	rc = fix_zip_codec(src, len, NULL, 1, codec, level, &a, &st, err, sizeof(err));
	if (rc < 0)
		fail_msg("%s: %s", what, err);
	verify_image(&a, src, len, &alloc, what);
	verify_fill(&a, what);
	assert_int_equal(st.chunks, a.n);
	assert_int_equal(st.out_bytes, (uint64_t)a.n * NDZ_CHUNK_SIZE);
	assert_int_equal(st.in_bytes, ndz_ranges_total(&alloc) * 512);
	for (i = 0; i < a.n; i++)
		data += get_le32(fix_chunk(&a, i) + 88);
	assert_int_equal(st.data_bytes, data);
	/* the same bytes whatever the thread count */
	assert_int_equal(get_le16(fix_chunk(&a, 0) + 52), codec);
	same_image(&a, src, len, NULL, 2, codec, level, what);
	fix_image_release(&a);
	ndz_ranges_release(&alloc);
	free(src);
}

static void roundtrip(enum fix_kind kind, size_t len, const char *what)
{
	roundtrip_codec(NDZ_CODEC_ZLIB, 4, kind, len, what);
}

/* a and b are the same image, byte for byte; both released. */
static void same_and_release(struct fix_image *a, struct fix_image *b)
{
	assert_int_equal(a->n, b->n);
	assert_memory_equal(a->data, b->data, a->n * NDZ_CHUNK_SIZE);
	fix_image_release(a);
	fix_image_release(b);
}

static void test_sizes_random(void **state)
{
	static const size_t sizes[] = { 1, 511, 512, 513, 4096, MiB - 1, MiB, MiB + 1,
					3 * MiB + 7 };
	char what[64];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(what, sizeof(what), "%zu random bytes", sizes[i]);
		roundtrip(FIX_RANDOM, sizes[i], what);
	}
}

static void test_kinds(void **state)
{
	(void)state;
	roundtrip(FIX_ZEROS, 512, "one zero sector");
	roundtrip(FIX_ZEROS, 40 * MiB / FIX_SCALE + 300, "zeros");
	roundtrip(FIX_TEXT, 12 * MiB / FIX_SCALE + 1000, "text");
	roundtrip(FIX_MIXED, 10 * MiB / FIX_SCALE + 17, "mixed");
	roundtrip(FIX_RANDOM, 6 * MiB / FIX_SCALE + 5, "random");
}

static void test_zstd_kinds(void **state)
{
	static const size_t sizes[] = { 1, 513, MiB + 1, 3 * MiB + 7 };
	char what[64];
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(what, sizeof(what), "zstd: %zu random bytes", sizes[i]);
		roundtrip_codec(NDZ_CODEC_ZSTD, 3, FIX_RANDOM, sizes[i], what);
	}
	roundtrip_codec(NDZ_CODEC_ZSTD, 3, FIX_ZEROS, 40 * MiB / FIX_SCALE + 300, "zstd: zeros");
	roundtrip_codec(NDZ_CODEC_ZSTD, 3, FIX_TEXT, 12 * MiB / FIX_SCALE + 1000, "zstd: text");
	roundtrip_codec(NDZ_CODEC_ZSTD, 19, FIX_MIXED, 4 * MiB / FIX_SCALE + 17, "zstd: mixed, 19");
}

/*
 * zstd chunks are as full as zlib's: every chunk but the last within 1 KiB of
 * full on compressible data; and the image is the same with 1, 2 and 5 threads.
 */
static void test_zstd_fill(void **state)
{
	const size_t len = 24 * MiB / (FIX_SCALE > 1 ? 2 : 1);
	uint8_t *src = fix_data(FIX_MIXED, len, 9);
	struct ndz_chunk_hdr h;
	struct fix_image a;
	char err[256];
	size_t i;
	int threads;

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_zip_codec(src, len, NULL, 1, NDZ_CODEC_ZSTD, 3, &a, NULL, err,
				       sizeof(err)), 0);
	assert_true(a.n >= 3);
	for (i = 0; i + 1 < a.n; i++) {
		assert_int_equal(ndz_chunk_check(fix_chunk(&a, i), &h, NULL), 0);
		assert_int_equal(h.codec, NDZ_CODEC_ZSTD);
		assert_int_equal(h.level, 3);
		if (h.data_len < NDZ_MAX_DATA - 1024)
			fail_msg("zstd chunk %zu only %u of %u bytes", i, h.data_len,
				 NDZ_MAX_DATA);
	}
	/* its later frames lean on the earlier ones: no prefix, no decoding */
	{
		uint8_t *out = malloc(64 * MiB);

		assert_non_null(out);
		assert_int_equal(ndz_chunk_check(fix_chunk(&a, 0), &h, NULL), 0);
		assert_true(ZSTD_isError(ZSTD_decompress(out, 64 * MiB,
							 fix_chunk(&a, 0) + NDZ_HDR_SIZE,
							 h.data_len)));
		free(out);
	}
	for (threads = 2; threads <= 5; threads += 3)
		same_image(&a, src, len, NULL, threads, NDZ_CODEC_ZSTD, 3, "zstd");
	fix_image_release(&a);
	free(src);
}

/*
 * How imagezip lays out zstd frames (doc/FORMAT.md, codec 2), which lets it make
 * most of them before their chunk starts: no frame crosses a 1 MiB line of the
 * input; a frame holds 64 KiB (the grain of a piece), all but those in a chunk's
 * first and last cells exactly that, on a 64 KiB line; they lean on the whole
 * 2 MiB prefix the format offers (offered only 1 MiB, some chunk fails to
 * decode); and the image is the same with 1, 3 and 8 threads.
 */
static void test_zstd_grid(void **state)
{
	const size_t len = 40 * MiB / FIX_SCALE + 7 * 512;
	uint8_t *src = fix_data(FIX_MIXED, len, 31), *out = malloc(16 * MiB);
	struct ndz_chunk_hdr h;
	struct fix_image a;
	uint64_t at = 0;
	size_t i, mid = 0, whole = 0, short1m = 0;
	char err[256];
	int threads;

	(void)state;
	assert_non_null(src);
	assert_non_null(out);
	assert_int_equal(fix_zip_codec(src, len, NULL, 1, NDZ_CODEC_ZSTD, 3, &a, NULL, err,
				       sizeof(err)), 0);
	assert_true(a.n >= 3);
	for (i = 0; i < a.n; i++) {
		const uint8_t *c = fix_chunk(&a, i), *d = c + NDZ_HDR_SIZE;
		size_t in = 0;
		uint64_t f0 = at, end;

		assert_int_equal(ndz_chunk_check(c, &h, NULL), 0);
		end = at + ndz_hdr_data_bytes(c, &h);
		mid += at % MiB != 0;
		while (in < h.data_len) {
			size_t fsz = ZSTD_findFrameCompressedSize(d + in, h.data_len - in);
			unsigned long long n = ZSTD_getFrameContentSize(d + in, h.data_len - in);

			assert_false(ZSTD_isError(fsz));
			assert_true(n > 0 && n <= 64 * 1024);
			if (f0 / MiB != (f0 + n - 1) / MiB)
				fail_msg("chunk %zu: a frame at %llu of %llu bytes crosses a 1 MiB line",
					 i, (unsigned long long)f0, n);
			if (f0 / MiB != at / MiB && f0 / MiB != (end - 1) / MiB) {
				if (n != 64 * 1024 || f0 % (64 * 1024))
					fail_msg("chunk %zu: a frame at %llu of %llu bytes, inside "
						 "the chunk, is not 64 KiB on a 64 KiB line",
						 i, (unsigned long long)f0, n);
				whole++;
			}
			f0 += n;
			in += fsz;
		}
		assert_int_equal(f0, end);
		assert_int_equal(zstd_chunk_decode_prefix(out, 16 * MiB, d, h.data_len, 2 * MiB),
				 (long long)(f0 - at));
		short1m += zstd_chunk_decode_prefix(out, 16 * MiB, d, h.data_len, MiB) < 0;
		at = f0;
	}
	assert_true(whole > 0);
	assert_true(short1m > 0);                  /* frames reach more than 1 MiB back */
	assert_int_equal(at, (len + 511) / 512 * 512);
	assert_true(mid >= a.n / 2);               /* most chunks start inside a cell */
	for (threads = 3; threads <= 8; threads += 5)
		same_image(&a, src, len, NULL, threads, NDZ_CODEC_ZSTD, 3, "zstd");
	fix_image_release(&a);
	free(out);
	free(src);
}

/* Levels each codec takes, and the codecs ndz_zip knows. */
static void test_zstd_levels(void **state)
{
	static const struct {
		int codec, level, rc;
	} cases[] = {
		{ NDZ_CODEC_ZSTD, 1, 0 }, { NDZ_CODEC_ZSTD, 19, 0 },
		{ NDZ_CODEC_ZSTD, 0, NDZ_EINVAL }, { NDZ_CODEC_ZSTD, 20, NDZ_EINVAL },
		{ 0, 4, NDZ_EINVAL }, { 3, 4, NDZ_EINVAL },
	};
	uint8_t *src = fix_data(FIX_TEXT, 8192, 1);
	struct fix_image img;
	char err[256];
	size_t k;

	(void)state;
	assert_non_null(src);
	for (k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
		int rc = fix_zip_codec(src, 8192, NULL, 1, cases[k].codec, cases[k].level, &img,
				       NULL, err, sizeof(err));

		if (rc != cases[k].rc)
			fail_msg("codec %d level %d: got %d, want %d", cases[k].codec,
				 cases[k].level, rc, cases[k].rc);
		if (rc == 0)
			assert_int_equal(get_le16(fix_chunk(&img, 0) + 54), cases[k].level);
		fix_image_release(&img);
	}
	free(src);
}

/* Compressible data spreads over several chunks, each filled to at least 98%. */
static void test_fill_compressible(void **state)
{
	const size_t len = 24 * MiB / (FIX_SCALE > 1 ? 2 : 1);
	uint8_t *src = fix_data(FIX_TEXT, len, 7);
	struct fix_image img;
	char err[256];

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_zip(src, len, NULL, 2, 6, &img, NULL, err, sizeof(err)), 0);
	assert_true(img.n >= 2);
	verify_fill(&img, "text, level 6");
	fix_image_release(&img);
	free(src);
}

static void test_levels(void **state)
{
	uint8_t *src = fix_data(FIX_MIXED, 2 * MiB + 512, 3);
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct ndz_chunk_hdr h;
	struct fix_image img;
	char err[256], what[32];
	int level;

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_whole(&alloc, 2 * MiB + 512), 0);
	for (level = 0; level <= 9; level += 3) {
		snprintf(what, sizeof(what), "level %d", level);
		assert_int_equal(fix_zip(src, 2 * MiB + 512, NULL, 2, level, &img, NULL, err,
					 sizeof(err)), 0);
		verify_image(&img, src, 2 * MiB + 512, &alloc, what);
		assert_int_equal(ndz_chunk_check(fix_chunk(&img, 0), &h, NULL), 0);
		assert_int_equal(h.level, level);
		fix_image_release(&img);
	}
	assert_int_equal(fix_zip(src, 1024, NULL, 1, 10, &img, NULL, err, sizeof(err)),
			 NDZ_EINVAL);
	fix_image_release(&img);
	assert_int_equal(fix_zip(src, 1024, NULL, 1, -1, &img, NULL, err, sizeof(err)),
			 NDZ_EINVAL);
	fix_image_release(&img);
	ndz_ranges_release(&alloc);
	free(src);
}

/* An empty source, and a source with nothing allocated: one chunk, no regions. */
static void test_empty(void **state)
{
	struct ndz_ranges none = NDZ_RANGES_INIT;
	struct ndz_chunk_hdr h;
	struct fix_image img;
	uint8_t src[4096] = { 0 };
	char err[256];

	(void)state;
	assert_int_equal(fix_zip(src, 0, NULL, 1, 4, &img, NULL, err, sizeof(err)), 0);
	assert_int_equal(img.n, 1);
	assert_int_equal(ndz_chunk_check(fix_chunk(&img, 0), &h, NULL), 0);
	assert_int_equal(h.nregions, 0);
	assert_int_equal(h.source_bytes, 0);
	assert_int_equal(h.last, 0);
	assert_true(h.chunk_flags & NDZ_CHUNK_LAST);
	verify_image(&img, src, 0, &none, "empty source");
	fix_image_release(&img);

	assert_int_equal(fix_zip(src, 4000, &none, 2, 4, &img, NULL, err, sizeof(err)), 0);
	assert_int_equal(img.n, 1);
	assert_int_equal(ndz_chunk_check(fix_chunk(&img, 0), &h, NULL), 0);
	assert_int_equal(h.nregions, 0);
	assert_int_equal(h.first, 0);
	assert_int_equal(h.last, 8);
	verify_image(&img, src, 4000, &none, "nothing allocated");
	fix_image_release(&img);
}

/* Scattered ranges: exactly those sectors, in order, whatever the threads. */
static void test_ranges_scattered(void **state)
{
	const size_t len = 8 * MiB / FIX_SCALE + 100;
	uint8_t *src = fix_data(FIX_MIXED, len, 11);
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct fix_image a, b;
	uint64_t sectors = len / 512 + 1;
	char err[256];

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_scatter(&alloc, 0, sectors, 5, 3000, 2000), 0);
	assert_int_equal(fix_zip(src, len, &alloc, 1, 4, &a, NULL, err, sizeof(err)), 0);
	verify_image(&a, src, len, &alloc, "scattered ranges");
	verify_fill(&a, "scattered ranges");
	assert_int_equal(fix_zip(src, len, &alloc, 2, 4, &b, NULL, err, sizeof(err)), 0);
	same_and_release(&a, &b);
	ndz_ranges_release(&alloc);
	free(src);
}

/*
 * Awkward boundaries: ranges of odd lengths with gaps, on data whose ratio
 * changes (so chunks end mid-range and mid-segment at uneven places), and one
 * input with more ranges than a header lists: each codec makes the same image
 * with 1, 2 and 4 threads, and that image holds exactly the input.
 */
static void test_threads_awkward(void **state)
{
	static const struct { int codec, level; } cs[] = {
		{ NDZ_CODEC_ZSTD, 3 }, { NDZ_CODEC_ZSTD, 1 }, { NDZ_CODEC_ZLIB, 4 },
	};
	const size_t len = 20 * MiB / FIX_SCALE + 4000;
	uint8_t *src = fix_data(FIX_MIXED, len, 23);
	struct ndz_ranges scat = NDZ_RANGES_INIT, many = NDZ_RANGES_INIT;
	uint64_t s, sectors = len / 512 + 1;
	char err[256], what[96];
	size_t c, r;

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_scatter(&scat, 3, sectors, 17, 5001, 7), 0);
	for (s = 0; s < 3 * NDZ_MAX_REGIONS + 5 && 3 * s + 40 < sectors; s++)
		assert_int_equal(ndz_ranges_add(&many, 3 * s, 1 + s % 2, NULL), 0);
	for (c = 0; c < sizeof(cs) / sizeof(cs[0]); c++) {
		for (r = 0; r < 2; r++) {
			const struct ndz_ranges *alloc = r ? &many : &scat;
			struct fix_image a;
			int threads;

			snprintf(what, sizeof(what), "codec %d level %d, %s", cs[c].codec,
				 cs[c].level, r ? "many ranges" : "scattered ranges");
			if (fix_zip_codec(src, len, alloc, 1, cs[c].codec, cs[c].level, &a, NULL,
					  err, sizeof(err)) < 0)
				fail_msg("%s: %s", what, err);
			verify_image(&a, src, len, alloc, what);
			assert_true(a.n >= 2);
			for (threads = 2; threads <= 4; threads += 2)
				same_image(&a, src, len, alloc, threads, cs[c].codec, cs[c].level,
					   what);
			fix_image_release(&a);
		}
	}
	ndz_ranges_release(&scat);
	ndz_ranges_release(&many);
	free(src);
}

/* More ranges than one header can list: chunks close at the region limit. */
static void test_region_limit(void **state)
{
	const size_t nr = 3 * NDZ_MAX_REGIONS + 17, len = (2 * nr + 5) * 512;
	uint8_t *src = fix_data(FIX_TEXT, len, 13);
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct ndz_chunk_hdr h;
	struct fix_image a, b;
	char err[256];
	size_t i, full = 0;

	(void)state;
	assert_non_null(src);
	for (i = 0; i < nr; i++)
		assert_int_equal(ndz_ranges_add(&alloc, 2 * i + 1, 1, NULL), 0);
	assert_int_equal(fix_zip(src, len, &alloc, 1, 4, &a, NULL, err, sizeof(err)), 0);
	verify_image(&a, src, len, &alloc, "many small ranges");
	assert_int_equal(a.n, 4);
	for (i = 0; i < a.n; i++) {
		assert_int_equal(ndz_chunk_check(fix_chunk(&a, i), &h, NULL), 0);
		assert_true(h.nregions <= NDZ_MAX_REGIONS);
		full += h.nregions == NDZ_MAX_REGIONS;
	}
	assert_int_equal(full, 3);
	assert_int_equal(fix_zip(src, len, &alloc, 2, 4, &b, NULL, err, sizeof(err)), 0);
	same_and_release(&a, &b);
	ndz_ranges_release(&alloc);
	free(src);
}

/* Sectors past source_bytes (the tail of the last sector) are stored as zeros. */
static void test_partial_sector(void **state)
{
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct fix_image img;
	uint8_t src[1300];
	char err[256];

	(void)state;
	memset(src, 0xab, sizeof(src));
	assert_int_equal(fix_whole(&alloc, 1000), 0);
	assert_int_equal(alloc.v[0].count, 2);
	/* the io holds 1300 bytes but the source is said to be 1000 */
	assert_int_equal(fix_zip(src, 1000, NULL, 1, 4, &img, NULL, err, sizeof(err)), 0);
	verify_image(&img, src, 1000, &alloc, "1000-byte source");
	fix_image_release(&img);
	ndz_ranges_release(&alloc);
}

static int fail_third(void *ctx, const uint8_t *chunk, uint32_t index, struct ndz_error *e)
{
	int *calls = ctx;

	(void)chunk;
	(void)e;
	(*calls)++;
	return index == 2 ? NDZ_ENOTSUP : 0;
}

struct progress_log {
	uint64_t last, total;
	int calls, backwards;
};

static void progress(void *ctx, uint64_t done, uint64_t total)
{
	struct progress_log *p = ctx;

	if (done < p->last)
		p->backwards = 1;
	p->last = done;
	p->total = total;
	p->calls++;
}

static void test_errors(void **state)
{
	const size_t len = 6 * MiB;
	uint8_t *src = fix_data(FIX_RANDOM, len, 17);
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct ndz_zip_opts o;
	struct ndz_io *mem, *f;
	struct fix_image img;
	struct progress_log pl = { 0, 0, 0, 0 };
	char err[256];
	int calls = 0, rc;

	(void)state;
	assert_non_null(src);
	ndz_zip_opts_init(&o);
	assert_int_equal(o.level, 4);
	o.threads = 2;

	/* the output callback's error stops everything and comes back */
	assert_int_equal(ndz_io_open_mem(src, len, 0, &mem, NULL), 0);
	assert_int_equal(fix_whole(&alloc, len), 0);
	err[0] = 0;
	rc = zip_e(mem, len, &alloc, &o, fail_third, &calls, NULL, err, sizeof(err));
	assert_int_equal(rc, NDZ_ENOTSUP);
	assert_int_equal(calls, 3);
	assert_non_null(strstr(err, "chunk 2"));

	/* a read error names the source */
	assert_int_equal(ndz_io_open_fault(mem, 3, 0, 0, 0, &f, NULL), 0);
	memset(&img, 0, sizeof(img));
	err[0] = 0;
	rc = zip_e(f, len, &alloc, &o, fix_collect, &img, NULL, err, sizeof(err));
	assert_int_equal(rc, NDZ_EIO);
	assert_non_null(strstr(err, "memory"));
	assert_non_null(strstr(err, "read error"));
	fix_image_release(&img);
	ndz_io_close(f);                /* closes mem too */

	/* a source shorter than it claims */
	assert_int_equal(ndz_io_open_mem(src, len - 1000, 0, &mem, NULL), 0);
	err[0] = 0;
	rc = zip_e(mem, len, &alloc, &o, fix_collect, &img, NULL, err, sizeof(err));
	assert_int_equal(rc, NDZ_ESHORTREAD);
	assert_true(strlen(err) > 0);
	fix_image_release(&img);

	/* ranges outside the source are refused before anything is read */
	ndz_ranges_clear(&alloc);
	assert_int_equal(ndz_ranges_add(&alloc, len / 512 - 1, 2, NULL), 0);
	rc = zip_e(mem, len, &alloc, &o, fix_collect, &img, NULL, err, sizeof(err));
	assert_int_equal(rc, NDZ_EINVAL);
	assert_int_equal(img.n, 0);
	ndz_ranges_clear(&alloc);
	assert_int_equal(ndz_ranges_add(&alloc, 100, 10, NULL), 0);
	assert_int_equal(ndz_ranges_add(&alloc, 50, 10, NULL), 0);  /* not normalized */
	rc = zip_e(mem, len, &alloc, &o, fix_collect, &img, NULL, err, sizeof(err));
	assert_int_equal(rc, NDZ_EINVAL);
	assert_int_equal(img.n, 0);
	ndz_io_close(mem);

	/* progress moves forward and ends at the total */
	assert_int_equal(ndz_io_open_mem(src, len, 0, &mem, NULL), 0);
	assert_int_equal(fix_whole(&alloc, len), 0);
	o.progress = progress;
	o.progress_ctx = &pl;
	rc = zip_e(mem, len, &alloc, &o, fix_collect, &img, NULL, err, sizeof(err));
	assert_int_equal(rc, 0);
	assert_true(pl.calls > 0);
	assert_int_equal(pl.backwards, 0);
	assert_int_equal(pl.total, len / 512 * 512 + (len % 512 ? 512 : 0));
	assert_int_equal(pl.last, pl.total);
	/* a random uuid when none is given */
	{
		static const uint8_t nil[16];
		struct ndz_chunk_hdr h;

		assert_int_equal(ndz_chunk_check(fix_chunk(&img, 0), &h, NULL), 0);
		assert_memory_not_equal(h.uuid, nil, 16);
	}
	fix_image_release(&img);
	ndz_io_close(mem);
	ndz_ranges_release(&alloc);
	free(src);
}

/* A partition image carries its partition fields in every chunk. */
static void test_partition_fields(void **state)
{
	const size_t len = 2 * MiB + 4096;
	uint8_t *src = fix_data(FIX_RANDOM, len, 23);
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct ndz_chunk_hdr h;
	struct ndz_zip_opts o;
	struct fix_image img;
	struct ndz_io *io;
	char err[256];
	size_t i;

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_whole(&alloc, len), 0);
	assert_int_equal(ndz_io_open_mem(src, len, 0, &io, NULL), 0);
	ndz_zip_opts_init(&o);
	o.threads = 2;
	memcpy(o.uuid, "partition-uuid-1", 16);
	o.image_kind = NDZ_KIND_PARTITION;
	o.part_index = 3;
	o.part_type = 0x83;
	o.part_start = 2048;
	memset(&img, 0, sizeof(img));
	assert_int_equal(zip_e(io, len, &alloc, &o, fix_collect, &img, NULL, err, sizeof(err)),
			 0);
	assert_int_equal(img.n, 3);
	for (i = 0; i < img.n; i++) {
		assert_int_equal(ndz_chunk_check(fix_chunk(&img, i), &h, NULL), 0);
		assert_memory_equal(h.uuid, "partition-uuid-1", 16);
		assert_int_equal(h.image_kind, NDZ_KIND_PARTITION);
		assert_int_equal(h.part_index, 3);
		assert_int_equal(h.part_type, 0x83);
		assert_int_equal(h.part_start, 2048);
	}
	fix_image_release(&img);
	ndz_io_close(io);
	ndz_ranges_release(&alloc);
	free(src);
}

/* A source that returns odd-sized partial reads gives the same image. */
static ssize_t odd_pread(struct ndz_io *io, void *buf, size_t len, uint64_t off, int *sys)
{
	const uint8_t *src = io->priv;

	(void)sys;
	if (off >= io->size)
		return 0;
	if (len > 4097)
		len = 4097;
	if (len > io->size - off)
		len = (size_t)(io->size - off);
	memcpy(buf, src + off, len);
	return (ssize_t)len;
}

static void test_partial_reads(void **state)
{
	static const struct ndz_io_ops ops = { odd_pread, NULL, NULL, NULL, NULL, NULL, NULL };
	const size_t len = 3 * MiB + 333;
	uint8_t *src = fix_data(FIX_MIXED, len, 29);
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct ndz_zip_opts o;
	struct fix_image a, b;
	struct ndz_io io;
	char err[256], name[] = "odd";

	(void)state;
	assert_non_null(src);
	assert_int_equal(fix_whole(&alloc, len), 0);
	assert_int_equal(fix_zip(src, len, NULL, 2, 4, &a, NULL, err, sizeof(err)), 0);
	memset(&io, 0, sizeof(io));
	io.ops = &ops;
	io.priv = src;
	io.size = len;
	io.name = name;
	ndz_zip_opts_init(&o);
	o.threads = 2;
	memcpy(o.uuid, "fixed-test-uuid!", 16);
	memset(&b, 0, sizeof(b));
	assert_int_equal(zip_e(&io, len, &alloc, &o, fix_collect, &b, NULL, err, sizeof(err)),
			 0);
	same_and_release(&a, &b);
	ndz_ranges_release(&alloc);
	free(src);
}

/* The image of src (sectors in alloc) with the content index, into img and ix. */
static void zip_indexed(const uint8_t *src, size_t len, const struct ndz_ranges *alloc,
			int codec, int threads, struct fix_image *img, struct ndz_index *ix)
{
	struct ndz_error e = { 0 };
	struct ndz_zip_opts o;
	struct ndz_io *io;

	memset(img, 0, sizeof(*img));
	memset(ix, 0, sizeof(*ix));
	assert_int_equal(ndz_io_open_mem((void *)(uintptr_t)src, len, 0, &io, NULL), 0);
	ndz_zip_opts_init(&o);
	o.threads = threads;
	o.codec = codec;
	o.level = 3;
	o.index = ix;
	memcpy(o.uuid, "fixed-test-uuid!", 16);
	if (ndz_zip(io, len, alloc, &o, fix_collect, img, NULL, &e) < 0)
		fail_msg("zip: %s", ndz_error_msg(&e));
	ndz_io_close(io);
}

/*
 * Pieces (doc/FORMAT.md): every zstd chunk's index entry lists pieces that tile
 * its compressed data and its uncompressed data; each decodes on its own with
 * only its stated prefix (taken here from the whole chunk's decoding, as a reader
 * takes it from its target), to the bytes the whole chunk has there, whose digest
 * is the piece's; its disk ranges are where those bytes go. The index keeps them
 * through encode and decode, the same for any thread count; zlib has none and
 * its index stays version 1.
 */
static void test_zstd_pieces(void **state)
{
	const size_t len = 12 * MiB / FIX_SCALE + 300;
	uint8_t *src = fix_data(FIX_MIXED, len, 21), *out = malloc(64 * MiB);
	uint8_t *piece = malloc(NDZ_INDEX_MAX_PIECE), *enc, *enc2;
	struct ndz_ranges alloc = NDZ_RANGES_INIT;
	struct ndz_index ix, ix2, back;
	struct ndz_digest *d = ndz_digest_create(NULL);
	struct fix_image a, b;
	struct ndz_error e = { 0 };
	size_t elen, elen2, i;
	uint32_t j, total = 0;

	(void)state;
	assert_non_null(src);
	assert_non_null(out);
	assert_non_null(piece);
	assert_non_null(d);
	assert_int_equal(fix_scatter(&alloc, 0, len / 512 + 1, 7, 4000, 300), 0);
	zip_indexed(src, len, &alloc, NDZ_CODEC_ZSTD, 1, &a, &ix);
	assert_int_equal(ix.chunks, a.n);
	for (i = 0; i < a.n; i++) {
		const struct ndz_index_entry *x = &ix.e[i];
		struct ndz_chunk_hdr h;
		struct ndz_region r[NDZ_MAX_REGIONS];
		long long n;
		uint64_t coff = 0, doff = 0;

		assert_int_equal(ndz_chunk_check(fix_chunk(&a, i), &h, NULL), 0);
		n = zstd_chunk_decode(out, 64 * MiB, fix_chunk(&a, i) + NDZ_HDR_SIZE, h.data_len);
		assert_true(n >= 0);
		if (!x->npieces)
			fail_msg("chunk %zu: no pieces", i);
		for (j = 0; j < x->npieces; j++) {
			const struct ndz_index_piece *p = &x->pieces[j];
			uint8_t dg[NDZ_INDEX_DIGEST_LEN];
			uint32_t k, nr;
			uint64_t sectors = 0;
			size_t plen;

			assert_int_equal(p->coff, coff);
			assert_int_equal(p->doff, doff);
			plen = p->doff < 2 * MiB ? (size_t)p->doff : 2 * MiB;
			if (ndz_unzip_piece(fix_chunk(&a, i) + NDZ_HDR_SIZE + p->coff, p->clen,
					    out + p->doff - plen, plen, piece, p->dlen, &e) < 0)
				fail_msg("chunk %zu piece %u: %s", i, j, ndz_error_msg(&e));
			assert_memory_equal(piece, out + p->doff, p->dlen);
			/* the last sector's bytes past the source are not hashed */
			assert_int_equal(ndz_digest_update(d, piece, p->dlen - (i + 1 == a.n &&
					 j + 1 == x->npieces && len % 512 ? 512 - len % 512 : 0),
					 NULL), 0);
			assert_int_equal(ndz_digest_final(d, dg, NULL), 0);
			assert_memory_equal(dg, p->digest, sizeof(dg));
			/* where it goes: the source's bytes there */
			nr = ndz_index_piece_ranges(x, p, r, NDZ_MAX_REGIONS);
			for (k = 0; k < nr; k++) {
				uint64_t off = r[k].start * 512, cnt = (uint64_t)r[k].count * 512;

				if (off + cnt > len)
					cnt = len - off;
				assert_memory_equal(src + off, piece + sectors * 512, cnt);
				sectors += r[k].count;
			}
			assert_int_equal(sectors * 512, p->dlen);
			coff += p->clen;
			doff += p->dlen;
			total++;
			/* a frame of imagezip's leans on its prefix: no decoding without */
			if (p->doff && p->dlen == MiB)
				assert_int_equal(ndz_unzip_piece(fix_chunk(&a, i) + NDZ_HDR_SIZE +
								 p->coff, p->clen, NULL, 0, piece,
								 p->dlen, NULL), NDZ_ECORRUPT);
		}
		assert_int_equal(coff, h.data_len);
		assert_int_equal(doff, (uint64_t)n);
	}
	assert_true(total > a.n);          /* finer than the chunk */
	/* through the file and back; the same index with 3 threads */
	assert_int_equal(ndz_index_encode(&ix, NULL, &enc, &elen, &e), 0);
	assert_int_equal(get_le16(enc + 8), 2);
	assert_true(ndz_index_size_from_header(enc, 64) == elen);
	if (ndz_index_decode(enc, elen, NULL, &back, &e) < 0)
		fail_msg("decode: %s", ndz_error_msg(&e));
	for (i = 0; i < a.n; i++) {
		assert_int_equal(back.e[i].npieces, ix.e[i].npieces);
		for (j = 0; j < ix.e[i].npieces; j++) {
			const struct ndz_index_piece *p = &ix.e[i].pieces[j], *q = &back.e[i].pieces[j];

			assert_true(p->doff == q->doff && p->dlen == q->dlen &&
				    p->coff == q->coff && p->clen == q->clen);
			assert_memory_equal(p->digest, q->digest, NDZ_INDEX_DIGEST_LEN);
		}
	}
	zip_indexed(src, len, &alloc, NDZ_CODEC_ZSTD, 3, &b, &ix2);
	assert_int_equal(ndz_index_encode(&ix2, NULL, &enc2, &elen2, &e), 0);
	assert_int_equal(elen2, elen);
	assert_memory_equal(enc, enc2, elen);
	/* a piece that does not tile its chunk is malformed */
	ndz_index_release(&back);
	enc[elen - 64 - 64 + 4] ^= 1;          /* the last piece's coff */
	assert_int_equal(ndz_index_decode(enc, elen, NULL, &back, &e), NDZ_EINDEX);
	free(enc);
	free(enc2);
	ndz_index_release(&ix2);
	fix_image_release(&b);
	ndz_index_release(&ix);
	fix_image_release(&a);
	/* zlib: chunks only, and the index version 1 */
	zip_indexed(src, len, &alloc, NDZ_CODEC_ZLIB, 2, &a, &ix);
	for (i = 0; i < a.n; i++)
		assert_int_equal(ix.e[i].npieces, 0);
	assert_int_equal(ndz_index_encode(&ix, NULL, &enc, &elen, &e), 0);
	assert_int_equal(get_le16(enc + 8), 1);
	free(enc);
	ndz_index_release(&ix);
	fix_image_release(&a);
	ndz_digest_free(d);
	ndz_ranges_release(&alloc);
	free(piece);
	free(out);
	free(src);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes_random),
		cmocka_unit_test(test_kinds),
		cmocka_unit_test(test_fill_compressible),
		cmocka_unit_test(test_zstd_kinds),
		cmocka_unit_test(test_zstd_fill),
		cmocka_unit_test(test_zstd_grid),
		cmocka_unit_test(test_zstd_levels),
		cmocka_unit_test(test_levels),
		cmocka_unit_test(test_empty),
		cmocka_unit_test(test_ranges_scattered),
		cmocka_unit_test(test_region_limit),
		cmocka_unit_test(test_threads_awkward),
		cmocka_unit_test(test_partial_sector),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_partition_fields),
		cmocka_unit_test(test_partial_reads),
		cmocka_unit_test(test_zstd_pieces),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
