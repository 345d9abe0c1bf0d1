/* Unit tests for lib/image.c: a whole image's rules in any order, and reading stored images. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/format.h"
#include "core/image.h"
#include "core/io.h"
#include "zipfix.h"

#define MiB (1024u * 1024u)

/* A header of chunk i of an n-chunk image whose chunk k covers sectors [10k, 10k+10). */
static struct ndz_chunk_hdr hdr(uint32_t i, uint32_t n)
{
	struct ndz_chunk_hdr h;

	memset(&h, 0, sizeof(h));
	h.version = NDZ_VERSION_1;
	h.index = i;
	h.chunk_flags = i == n - 1 ? NDZ_CHUNK_LAST : 0;
	memcpy(h.uuid, "image-rules-uuid", 16);
	h.sector_size = NDZ_SECTOR_SIZE;
	h.codec = NDZ_CODEC_ZLIB;
	h.source_sectors = 10ull * n;
	h.source_bytes = h.source_sectors * NDZ_SECTOR_SIZE;
	h.first = 10ull * i;
	h.last = h.first + 10;
	return h;
}

static void test_in_any_order(void **state)
{
	static const uint32_t orders[][5] = {
		{ 0, 1, 2, 3, 4 }, { 4, 3, 2, 1, 0 }, { 2, 0, 4, 1, 3 }, { 1, 3, 0, 4, 2 },
	};
	struct ndz_error e = { 0 };
	struct ndz_image *im;
	size_t k;
	uint32_t i;

	(void)state;
	for (k = 0; k < sizeof(orders) / sizeof(orders[0]); k++) {
		assert_int_equal(ndz_image_create(&im, NULL), 0);
		for (i = 0; i < 5; i++) {
			struct ndz_chunk_hdr h = hdr(orders[k][i], 5);

			if (i < 5 && ndz_image_complete(im, NULL) == 0)
				fail_msg("order %zu: complete after %u chunks", k, i);
			if (ndz_image_add(im, &h, &e) != 0)
				fail_msg("order %zu: %s", k, ndz_error_msg(&e));
		}
		assert_int_equal(ndz_image_added(im), 5);
		assert_int_equal(ndz_image_complete(im, &e), 0);
		ndz_image_free(im);
	}
	ndz_image_free(NULL);
}

/* hdr(index, count), added to im: it is accepted. */
static struct ndz_chunk_hdr added(struct ndz_image *im, uint32_t index, uint32_t count)
{
	struct ndz_chunk_hdr h = hdr(index, count);

	assert_int_equal(ndz_image_add(im, &h, NULL), 0);
	return h;
}

/* Adding h fails with code, saying exactly msg. */
static void add_fails(struct ndz_image *im, const struct ndz_chunk_hdr *h, int code,
		      const char *msg)
{
	struct ndz_error e = { 0 };

	assert_int_equal(ndz_image_add(im, h, &e), code);
	assert_string_equal(ndz_error_msg(&e), msg);
}

/* The image is not complete: code, saying exactly msg. */
static void incomplete(struct ndz_image *im, int code, const char *msg)
{
	struct ndz_error e = { 0 };

	assert_int_equal(ndz_image_complete(im, &e), code);
	assert_string_equal(ndz_error_msg(&e), msg);
}

/* Each rule broken once: the code, the chunk named, and the image unchanged. */
static void test_rules(void **state)
{
	struct ndz_chunk_hdr h;
	struct ndz_image *im;

	(void)state;
	assert_int_equal(ndz_image_create(&im, NULL), 0);
	h = added(im, 1, 4);

	/* duplicate */
	add_fails(im, &h, NDZ_EDUP, "chunk 1: duplicate chunk");
	/* another image: uuid, size */
	h = hdr(2, 4);
	h.uuid[3] ^= 1;
	add_fails(im, &h, NDZ_EMISMATCH, "chunk 2: chunk belongs to another image");
	h = hdr(2, 5);
	h.chunk_flags = 0;
	assert_int_equal(ndz_image_add(im, &h, NULL), NDZ_EMISMATCH);
	/* the chain, both ways */
	h = hdr(2, 4);
	h.first = 21;
	add_fails(im, &h, NDZ_EREGION, "chunk 2: does not start where chunk 1 ends");
	h = hdr(0, 4);
	h.last = 9;
	add_fails(im, &h, NDZ_EREGION, "chunk 0: does not end where chunk 1 starts");
	h = hdr(0, 4);
	h.first = 1;
	assert_int_equal(ndz_image_add(im, &h, NULL), NDZ_EREGION);
	/* none of that changed the image */
	assert_int_equal(ndz_image_added(im), 1);
	incomplete(im, NDZ_EMISSING, "chunk 0: missing chunk");

	/* LAST: only the highest, and nothing past it */
	h = added(im, 3, 4);
	h = hdr(4, 5);
	h.source_sectors = 40;
	h.source_bytes = 40 * 512;
	h.first = 40;
	h.last = 40;
	add_fails(im, &h, NDZ_ERANGE, "chunk 4: past chunk 3, the image's last");
	h = added(im, 0, 4);
	incomplete(im, NDZ_EMISSING, "chunk 2: missing chunk");
	h = added(im, 2, 4);
	assert_int_equal(ndz_image_complete(im, NULL), 0);
	ndz_image_free(im);

	/* a LAST chunk below one already seen */
	assert_int_equal(ndz_image_create(&im, NULL), 0);
	h = added(im, 3, 5);
	h = hdr(1, 2);
	h.source_sectors = 50;
	h.source_bytes = 50 * 512;
	h.last = 50;
	add_fails(im, &h, NDZ_ERANGE, "chunk 1: flagged last, but chunk 3 exists");
	/* no LAST yet: the first index not seen is missing */
	incomplete(im, NDZ_EMISSING, "chunk 0: missing chunk");
	/* an index far ahead of everything, with no count to bound it */
	h = hdr(3000000, 3000001);
	h.source_sectors = 50;
	h.source_bytes = 50 * 512;
	h.chunk_flags = 0;
	h.first = h.last = 50;
	assert_int_equal(ndz_image_add(im, &h, NULL), NDZ_ERANGE);
	ndz_image_free(im);

	/* an empty image is not whole */
	assert_int_equal(ndz_image_create(&im, NULL), 0);
	assert_int_equal(ndz_image_complete(im, NULL), NDZ_EMISSING);
	ndz_image_free(im);
}

/* What is known beforehand (a file's size, a server's announcement) is enforced. */
static void test_expected(void **state)
{
	struct ndz_chunk_hdr h;
	struct ndz_image *im;

	(void)state;
	assert_int_equal(ndz_image_create(&im, NULL), 0);
	ndz_image_expect(im, 3, (const uint8_t *)"image-rules-uuid");
	h = hdr(3, 4);
	add_fails(im, &h, NDZ_ERANGE, "chunk 3: past the image's 3 chunks");
	h = hdr(2, 4);
	h.chunk_flags = 0;
	h.source_sectors = 30;
	h.source_bytes = 30 * 512;
	add_fails(im, &h, NDZ_EHEADER, "chunk 2: the image's last chunk is not flagged last");
	h = hdr(1, 2);
	h.source_sectors = 30;
	h.source_bytes = 30 * 512;
	h.last = 30;
	add_fails(im, &h, NDZ_ERANGE, "chunk 1: flagged last, but the image has 3 chunks");
	h = hdr(0, 3);
	h.uuid[0] ^= 0x20;
	assert_int_equal(ndz_image_add(im, &h, NULL), NDZ_EMISMATCH);
	for (uint32_t i = 0; i < 3; i++) {
		h = added(im, i, 3);
	}
	assert_int_equal(ndz_image_complete(im, NULL), 0);
	ndz_image_free(im);
}

/* A real image in a temporary file; returns its path (free it) and chunk count. */
static char *image_file(size_t len, size_t *nchunks, struct fix_image *img)
{
	uint8_t *src = fix_data(FIX_RANDOM, len, 5);
	char *path = strdup("/tmp/ndz-test-image.XXXXXX");
	char err[256];
	int fd;

	assert_non_null(src);
	assert_non_null(path);
	assert_int_equal(fix_zip(src, len, NULL, 2, 1, img, NULL, err, sizeof(err)), 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, img->data, img->n * NDZ_CHUNK_SIZE),
			 (ssize_t)(img->n * NDZ_CHUNK_SIZE));
	close(fd);
	*nchunks = img->n;
	free(src);
	return path;
}

/* Read every chunk through a reader: 0 and the count, or the error. */
static int read_all(struct ndz_io *in, uint32_t *count, struct ndz_error *e)
{
	struct ndz_image_reader *r;
	struct ndz_chunk_hdr h;
	uint8_t *buf = malloc(NDZ_CHUNK_SIZE);
	int rc;

	assert_non_null(buf);
	*count = 0;
	rc = ndz_image_reader_open(in, &r, e);
	if (rc < 0) {
		free(buf);
		return rc;
	}
	assert_int_equal(ndz_image_reader_first(r)->index, 0);
	while ((rc = ndz_image_reader_next(r, buf, &h, e)) == 1) {
		assert_int_equal(h.index, *count);
		(*count)++;
	}
	ndz_image_reader_free(r);
	free(buf);
	return rc;
}

/* The same bytes read as a file (by offset) and as a stream (in order). */
static int read_both(const char *path, uint32_t *count, char *msg, size_t msglen)
{
	struct ndz_error e1 = { 0 }, e2 = { 0 };
	struct ndz_io *io;
	uint32_t n2;
	int rc1, rc2, fd;

	assert_int_equal(ndz_io_open_file(path, NDZ_IO_READ, &io, NULL), 0);
	rc1 = read_all(io, count, &e1);
	ndz_io_close(io);
	fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(ndz_io_open_stream(fd, "stream", &io, NULL), 0);
	assert_int_equal(io->is_stream, 1);
	rc2 = read_all(io, &n2, &e2);
	ndz_io_close(io);
	close(fd);
	snprintf(msg, msglen, "%s | %s", rc1 < 0 ? ndz_error_msg(&e1) : "",
		 rc2 < 0 ? ndz_error_msg(&e2) : "");
	/* a file is judged before its chunks are read, a stream as it goes */
	if (rc1 == 0)
		assert_int_equal(n2, *count);
	return rc1 < 0 ? rc1 : rc2;
}

/*
 * Chunks the target held (a seeded restore, ndz_image_held) count for completeness,
 * not as added; the others must still come, and chain with them.
 */
static void test_held(void **state)
{
	struct ndz_chunk_hdr h;
	struct ndz_error e = { 0 };
	struct ndz_image *im;

	(void)state;
	assert_int_equal(ndz_image_create(&im, NULL), 0);
	assert_int_equal(ndz_image_held(im, 0, 0, 10, &e), NDZ_ERANGE);  /* no count known */
	ndz_image_expect(im, 4, (const uint8_t *)"image-rules-uuid");
	assert_int_equal(ndz_image_held(im, 4, 40, 50, NULL), NDZ_ERANGE);
	assert_int_equal(ndz_image_held(im, 0, 0, 10, NULL), 0);
	assert_int_equal(ndz_image_held(im, 0, 0, 10, NULL), NDZ_EDUP);
	assert_int_equal(ndz_image_held(im, 3, 30, 40, NULL), 0);
	assert_int_equal(ndz_image_complete(im, NULL), NDZ_EMISSING);
	h = hdr(1, 4);
	h.first = 11;                  /* does not chain with held chunk 0 */
	assert_int_equal(ndz_image_add(im, &h, NULL), NDZ_EREGION);
	h = hdr(1, 4);
	assert_int_equal(ndz_image_add(im, &h, NULL), 0);
	ndz_error_clear(&e);
	assert_int_equal(ndz_image_complete(im, &e), NDZ_EMISSING);
	assert_string_equal(ndz_error_msg(&e), "chunk 2: missing chunk");
	h = hdr(2, 4);
	assert_int_equal(ndz_image_add(im, &h, NULL), 0);
	assert_int_equal(ndz_image_complete(im, NULL), 0);
	assert_int_equal(ndz_image_added(im), 2);
	ndz_image_free(im);
}

static void test_reader(void **state)
{
	struct fix_image img;
	size_t n;
	char *path = image_file(3 * MiB + 1000, &n, &img), msg[2 * NDZ_ERRMSG_MAX + 8];
	uint32_t count;
	int fd;

	(void)state;
	assert_int_equal(n, 4);
	assert_int_equal(read_both(path, &count, msg, sizeof(msg)), 0);
	assert_int_equal(count, 4);

	/* data after the last chunk: a file is cut at its size, a stream is told */
	fd = open(path, O_WRONLY | O_APPEND);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
	assert_int_equal(read_both(path, &count, msg, sizeof(msg)), NDZ_ETRUNC);
	assert_non_null(strstr(msg, "chunk 4: truncated chunk (1 of 1048576 bytes)"));
	assert_int_equal(truncate(path, 4 * NDZ_CHUNK_SIZE + NDZ_CHUNK_SIZE), 0);
	fd = open(path, O_WRONLY);
	assert_int_equal(pwrite(fd, img.data, NDZ_CHUNK_SIZE, 4 * NDZ_CHUNK_SIZE),
			 NDZ_CHUNK_SIZE);
	close(fd);
	/* five chunks, the fifth a copy of chunk 0: the file says so up front */
	assert_true(read_both(path, &count, msg, sizeof(msg)) < 0);
	assert_non_null(strstr(msg, "the file holds 5 chunks but its last one says it is chunk 0"));

	/* the input ends before the LAST chunk */
	assert_int_equal(truncate(path, 3 * NDZ_CHUNK_SIZE), 0);
	assert_int_equal(read_both(path, &count, msg, sizeof(msg)), NDZ_EMISSING);
	assert_non_null(strstr(msg, "not the image's last"));

	/* a chunk cut short, empty input, not an image */
	assert_int_equal(truncate(path, 2 * NDZ_CHUNK_SIZE + 100), 0);
	assert_int_equal(read_both(path, &count, msg, sizeof(msg)), NDZ_ETRUNC);
	assert_non_null(strstr(msg, "chunk 2: truncated chunk (100 of 1048576 bytes)"));
	assert_int_equal(truncate(path, 0), 0);
	assert_int_equal(read_both(path, &count, msg, sizeof(msg)), NDZ_EBADMAGIC);
	assert_non_null(strstr(msg, "empty file, not an image"));
	fd = open(path, O_WRONLY);
	assert_int_equal(write(fd, "hello, world\n", 13), 13);
	close(fd);
	assert_int_equal(read_both(path, &count, msg, sizeof(msg)), NDZ_EBADMAGIC);
	assert_non_null(strstr(msg, "chunk 0: not an image (bad magic)"));
	unlink(path);
	free(path);
	fix_image_release(&img);
}

/* A stream: data after the LAST chunk, and an end before it, are both errors. */
static void test_stream_ends(void **state)
{
	struct ndz_error e = { 0 };
	struct fix_image img;
	struct ndz_io *io;
	size_t n;
	char *path = image_file(2 * MiB + 10, &n, &img);
	uint32_t count;
	int fd;

	(void)state;
	assert_int_equal(n, 3);
	fd = open(path, O_WRONLY | O_APPEND);
	assert_int_equal(write(fd, img.data, NDZ_CHUNK_SIZE), NDZ_CHUNK_SIZE);
	close(fd);
	fd = open(path, O_RDONLY);
	assert_int_equal(ndz_io_open_stream(fd, "stdin", &io, NULL), 0);
	assert_int_equal(read_all(io, &count, &e), NDZ_EHEADER);
	assert_int_equal(count, 3);
	assert_string_equal(ndz_error_msg(&e), "stdin: data after the image's last chunk (chunk 2)");
	ndz_io_close(io);
	close(fd);

	/* cut after chunk 1: the stream ends before the LAST chunk */
	assert_int_equal(truncate(path, 2 * NDZ_CHUNK_SIZE), 0);
	fd = open(path, O_RDONLY);
	assert_int_equal(ndz_io_open_stream(fd, "stdin", &io, NULL), 0);
	ndz_error_clear(&e);
	assert_int_equal(read_all(io, &count, &e), NDZ_EMISSING);
	assert_int_equal(count, 2);
	assert_string_equal(ndz_error_msg(&e), "stdin: chunk 2: missing chunk (the input ends "
			    "before the image's last chunk)");
	/* a stream cannot be read out of order */
	{
		uint8_t b;

		assert_int_equal(io->ops->pread(io, &b, 1, 5, NULL), NDZ_ENOTSUP);
	}
	ndz_io_close(io);
	close(fd);
	unlink(path);
	free(path);
	fix_image_release(&img);
}

static void test_fits(void **state)
{
	struct ndz_chunk_hdr h = hdr(0, 3);
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_image_fits(&h, "disk", 30 * 512, &e), 0);
	assert_int_equal(ndz_image_fits(&h, "disk", 30 * 512 - 1, &e), NDZ_ETOOSMALL);
	assert_string_equal(ndz_error_msg(&e),
			    "disk: target too small for the image (15359 bytes, the image needs 15360)");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_in_any_order),
		cmocka_unit_test(test_rules),
		cmocka_unit_test(test_expected),
		cmocka_unit_test(test_held),
		cmocka_unit_test(test_reader),
		cmocka_unit_test(test_stream_ends),
		cmocka_unit_test(test_fits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
