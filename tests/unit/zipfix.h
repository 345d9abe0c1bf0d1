/* Fixtures shared by test_zip.c and test_unzip.c: test inputs and images in memory. */
#ifndef NDZ_TEST_ZIPFIX_H
#define NDZ_TEST_ZIPFIX_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/format.h"
#include "core/io.h"
#include "core/ranges.h"
#include "codec/zip.h"

/* Smaller inputs under the sanitizers, which are ~10 times slower (ThreadSanitizer
 * too: at full size its test_zip and test_unzip took 2 minutes each in `make check`). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FIX_SCALE 4
#else
#define FIX_SCALE 1
#endif

enum fix_kind { FIX_RANDOM, FIX_ZEROS, FIX_TEXT, FIX_MIXED };

static inline uint32_t fix_rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (uint32_t)(*s >> 33);
}

/* Deterministic test data of one kind. */
static inline uint8_t *fix_data(enum fix_kind kind, size_t len, uint64_t seed)
{
	static const char *const words[] = {
		"chunk ", "sector ", "the ", "image ", "frisbee ", "multicast ", "of ",
		"zlib ", "disk ", "region ", "partition ", "and ", "a ", "block\n",
	};
	uint8_t *p = malloc(len ? len : 1);
	size_t i = 0;

	if (!p)
		return NULL;
	switch (kind) {
	case FIX_RANDOM:
		for (i = 0; i < len; i++)
			p[i] = (uint8_t)(fix_rnd(&seed) >> 7);
		break;
	case FIX_ZEROS:
		memset(p, 0, len);
		break;
	case FIX_TEXT:
		while (i < len) {
			const char *w = words[fix_rnd(&seed) % 14];
			size_t n = strlen(w);

			if (n > len - i)
				n = len - i;
			memcpy(p + i, w, n);
			i += n;
		}
		break;
	case FIX_MIXED:
		/* 256 KiB stretches of each kind in turn */
		for (i = 0; i < len; i += 262144) {
			size_t n = len - i < 262144 ? len - i : 262144;
			uint8_t *q = fix_data((enum fix_kind)((i / 262144) % 3), n, seed + i);

			if (!q) {
				free(p);
				return NULL;
			}
			memcpy(p + i, q, n);
			free(q);
		}
		break;
	}
	return p;
}

/* An image in memory: n whole chunks. */
struct fix_image {
	uint8_t *data;
	size_t n;
	size_t alloc;
};

static inline int fix_collect(void *ctx, const uint8_t *chunk, uint32_t index,
			      struct ndz_error *e)
{
	struct fix_image *img = ctx;

	(void)e;
	if (index != img->n)
		return NDZ_EINVAL;
	if (img->n == img->alloc) {
		size_t a = img->alloc ? img->alloc * 2 : 4;
		uint8_t *d = realloc(img->data, a * NDZ_CHUNK_SIZE);

		if (!d)
			return NDZ_ENOMEM;
		img->data = d;
		img->alloc = a;
	}
	memcpy(img->data + img->n * NDZ_CHUNK_SIZE, chunk, NDZ_CHUNK_SIZE);
	img->n++;
	return 0;
}

static inline uint8_t *fix_chunk(const struct fix_image *img, size_t i)
{
	return img->data + i * NDZ_CHUNK_SIZE;
}

static inline void fix_image_release(struct fix_image *img)
{
	free(img->data);
	memset(img, 0, sizeof(*img));
}

/* The whole of a len-byte source, as sectors. */
static inline int fix_whole(struct ndz_ranges *r, uint64_t len)
{
	ndz_ranges_clear(r);
	return ndz_ranges_add(r, 0, ndz_sectors_of(len), NULL);
}

/*
 * fix_scatter - random ranges from sector first up to sectors (exclusive) into r:
 * each 1 to max_len sectors long, then a gap of 1 to max_gap sectors. 0, or
 * ndz_ranges_add's error.
 */
static inline int fix_scatter(struct ndz_ranges *r, uint64_t first, uint64_t sectors,
			      uint64_t seed, uint32_t max_len, uint32_t max_gap)
{
	for (uint64_t s = first; s < sectors;) {
		uint64_t c = 1 + fix_rnd(&seed) % max_len;
		int rc;

		if (c > sectors - s)
			c = sectors - s;
		if ((rc = ndz_ranges_add(r, s, c, NULL)) < 0)
			return rc;
		s += c + 1 + fix_rnd(&seed) % max_gap;
	}
	return 0;
}

/*
 * Compress src[0..len) (the sectors in alloc, or all of it when alloc is NULL)
 * into img with codec (NDZ_CODEC_*) and a fixed uuid. Returns ndz_zip's answer.
 */
static inline int fix_zip_codec(const uint8_t *src, size_t len, const struct ndz_ranges *alloc,
				int threads, int codec, int level, struct fix_image *img,
				struct ndz_zip_stats *stats, char *err, size_t errlen)
{
	struct ndz_ranges whole = NDZ_RANGES_INIT;
	struct ndz_error e = { 0 };
	struct ndz_zip_opts o;
	struct ndz_io *io;
	int rc;

	memset(img, 0, sizeof(*img));
	rc = ndz_io_open_mem((void *)(uintptr_t)src, len, 0, &io, NULL);
	if (rc < 0)
		return rc;
	if (!alloc) {
		rc = fix_whole(&whole, len);
		if (rc < 0) {
			ndz_io_close(io);
			return rc;
		}
		alloc = &whole;
	}
	ndz_zip_opts_init(&o);
	o.threads = threads;
	o.codec = codec;
	o.level = level;
	memcpy(o.uuid, "fixed-test-uuid!", 16);
	rc = ndz_zip(io, len, alloc, &o, fix_collect, img, stats, &e);
	if (rc < 0 && err)
		snprintf(err, errlen, "%s", ndz_error_msg(&e));
	ndz_ranges_release(&whole);
	ndz_io_close(io);
	return rc;
}

/* fix_zip_codec with zlib. */
static inline int fix_zip(const uint8_t *src, size_t len, const struct ndz_ranges *alloc,
			  int threads, int level, struct fix_image *img,
			  struct ndz_zip_stats *stats, char *err, size_t errlen)
{
	return fix_zip_codec(src, len, alloc, threads, NDZ_CODEC_ZLIB, level, img, stats, err,
			     errlen);
}

#endif
