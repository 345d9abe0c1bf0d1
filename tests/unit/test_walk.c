/* Unit tests for the stored-image walk of lib/core/image.c (ndz_image_walk). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/format.h"
#include "core/image.h"
#include "core/io.h"

#define N 4

/* Chunk i of a sound N-chunk image, at place at of img. */
static void put_chunk(uint8_t *img, uint32_t at, uint32_t i)
{
	uint8_t *c = img + (size_t)at * NDZ_CHUNK_SIZE;
	struct ndz_chunk_hdr h;

	memset(c, 0, NDZ_CHUNK_SIZE);
	memset(&h, 0, sizeof(h));
	h.version = NDZ_VERSION_1;
	h.index = i;
	memset(h.uuid, 0x17, 16);
	h.sector_size = NDZ_SECTOR_SIZE;
	h.codec = NDZ_CODEC_ZLIB;
	h.source_bytes = N * 8 * 512;
	h.source_sectors = N * 8;
	h.first = i * 8;
	h.last = i * 8 + 8;
	h.chunk_flags = i == N - 1 ? NDZ_CHUNK_LAST : 0;
	h.nregions = 1;
	ndz_hdr_set_region(c, 0, (struct ndz_region){ i * 8, 8 });
	memset(c + NDZ_HDR_SIZE, (int)(0x30 + i), 100);
	h.data_len = 100;
	h.data_crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), c + NDZ_HDR_SIZE, 100);
	assert_int_equal(ndz_hdr_encode(&h, c, NULL), 0);
}

static uint8_t *image(const uint32_t order[N])
{
	uint8_t *img = calloc(N, NDZ_CHUNK_SIZE);
	uint32_t at;

	assert_non_null(img);
	for (at = 0; at < N; at++)
		put_chunk(img, at, order[at]);
	return img;
}

/* Walk img with flags: the chunks handed out, or the error code. */
static int walk(uint8_t *img, unsigned flags, struct ndz_error *e)
{
	struct ndz_image_walk *w;
	struct ndz_chunk_hdr h;
	struct ndz_io *io;
	uint8_t *buf = malloc(NDZ_CHUNK_SIZE);
	int rc, n = 0;

	assert_non_null(buf);
	assert_int_equal(ndz_io_open_mem(img, (size_t)N * NDZ_CHUNK_SIZE, 0, &io, NULL), 0);
	rc = ndz_image_walk_open(io, flags, &w, e);
	assert_int_equal(rc, 0);
	assert_int_equal(ndz_image_walk_chunks(w), N);
	assert_int_equal(ndz_image_walk_first(w)->index, 0);
	while ((rc = ndz_image_walk_next(w, buf, &h, e)) == 1) {
		assert_memory_equal(buf, img + (size_t)n * NDZ_CHUNK_SIZE, NDZ_CHUNK_SIZE);
		n++;
		assert_int_equal(ndz_image_walk_count(w), n);
	}
	/* after the end, the end again */
	if (rc == 0)
		assert_int_equal(ndz_image_walk_next(w, buf, &h, e), 0);
	ndz_image_walk_free(w);
	ndz_io_close(io);
	free(buf);
	return rc < 0 ? rc : n;
}

static void test_walk_sound(void **state)
{
	static const uint32_t order[N] = { 0, 1, 2, 3 };
	struct ndz_error e = { 0 };
	uint8_t *img = image(order);

	(void)state;
	assert_int_equal(walk(img, 0, &e), N);
	assert_int_equal(walk(img, NDZ_WALK_ORDER | NDZ_WALK_RULES, &e), N);
	ndz_image_walk_free(NULL);
	free(img);
}

static void test_walk_order(void **state)
{
	static const uint32_t order[N] = { 0, 2, 1, 3 };
	struct ndz_error e = { 0 };
	uint8_t *img = image(order);

	(void)state;
	/* out of place: the reader alone and the rules take it (any order is an image) */
	assert_int_equal(walk(img, 0, &e), N);
	assert_int_equal(walk(img, NDZ_WALK_RULES, &e), N);
	assert_int_equal(walk(img, NDZ_WALK_ORDER, &e), NDZ_EREGION);
	assert_string_equal(ndz_error_msg(&e), "memory: chunk 2: found at place 1: chunks out "
			    "of order");
	free(img);
}

static void test_walk_rules(void **state)
{
	static const uint32_t order[N] = { 0, 1, 1, 3 };
	struct ndz_error e = { 0 };
	uint8_t *img = image(order);

	(void)state;
	/* chunk 1 twice, chunk 2 never: the rules see the duplicate */
	assert_int_equal(walk(img, 0, &e), N);
	assert_int_equal(walk(img, NDZ_WALK_RULES, &e), NDZ_EDUP);
	assert_non_null(strstr(ndz_error_msg(&e), "memory: "));
	free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walk_sound),
		cmocka_unit_test(test_walk_order),
		cmocka_unit_test(test_walk_rules),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
