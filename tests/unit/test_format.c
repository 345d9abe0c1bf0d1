/* Unit tests for lib/format.c: chunk header layout, every field's bounds, the CRCs. */
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
#include "core/le.h"

/* The byte layout of the fixed header part, written down independently of format.c. */
enum {
	O_MAGIC = 0, O_VERSION = 8, O_HDR_SIZE = 10, O_CHUNK_SIZE = 12, O_COMPAT = 16,
	O_INCOMPAT = 20, O_INDEX = 24, O_FLAGS = 28, O_UUID = 32, O_SECTOR = 48,
	O_CODEC = 52, O_LEVEL = 54, O_SRC_SECTORS = 56, O_SRC_BYTES = 64, O_FIRST = 72,
	O_LAST = 80, O_DATA_LEN = 88, O_DATA_CRC = 92, O_NREGIONS = 96, O_HDR_CRC = 100,
	O_KIND = 104, O_PART_INDEX = 106, O_PART_TYPE = 108, O_PART_START = 112,
	O_RESERVED = 120, O_REGIONS = 128,
};

/* The header CRC: CRC-32 over the whole area with its own field taken as zero. */
static void recrc(uint8_t *a)
{
	put_le32(a + O_HDR_CRC, 0);
	put_le32(a + O_HDR_CRC, (uint32_t)crc32(crc32(0L, Z_NULL, 0), a, NDZ_HDR_SIZE));
}

/* The region list the tests' headers carry, written into the area by encode_area. */
static struct ndz_region regs[NDZ_MAX_REGIONS + 1];

/* ndz_hdr_encode after storing the first nregions of regs in the area. */
static int encode_area(const struct ndz_chunk_hdr *h, uint8_t *a)
{
	uint32_t i;

	for (i = 0; i < h->nregions && i < NDZ_MAX_REGIONS; i++)
		ndz_hdr_set_region(a, i, regs[i]);
	return ndz_hdr_encode(h, a, NULL);
}

/* A valid last chunk with three regions. */
static void sample(struct ndz_chunk_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->version = NDZ_VERSION_1;
	h->index = 7;
	h->chunk_flags = NDZ_CHUNK_LAST;
	memcpy(h->uuid, "0123456789abcdef", 16);
	h->sector_size = NDZ_SECTOR_SIZE;
	h->codec = NDZ_CODEC_ZLIB;
	h->level = 4;
	h->source_bytes = 1000 * 512 + 100;
	h->source_sectors = 1001;
	h->first = 0;
	h->last = 1001;
	h->data_len = 1234;
	h->data_crc = 0xdeadbeef;
	h->image_kind = NDZ_KIND_PARTITION;
	h->part_index = 2;
	h->part_type = 0x83;
	h->part_start = 2048;
	h->nregions = 3;
	regs[0].start = 0;
	regs[0].count = 10;
	regs[1].start = 100;
	regs[1].count = 50;
	regs[2].start = 1000;
	regs[2].count = 1;
}

static uint8_t *sample_area(void)
{
	struct ndz_chunk_hdr h;
	uint8_t *a = malloc(NDZ_HDR_SIZE);

	assert_non_null(a);
	sample(&h);
	assert_int_equal(encode_area(&h, a), 0);
	return a;
}

static int decode(const uint8_t *a)
{
	struct ndz_chunk_hdr *h = malloc(sizeof(*h));
	int rc;

	assert_non_null(h);
	rc = ndz_hdr_decode(a, h, NULL);
	free(h);
	return rc;
}

static int encode(const struct ndz_chunk_hdr *h)
{
	uint8_t a[NDZ_HDR_SIZE];

	return encode_area(h, a);
}

/* a with regs against b decoded from area */
static void assert_hdr_equal(const struct ndz_chunk_hdr *a, const struct ndz_chunk_hdr *b,
			     const uint8_t *area)
{
	uint32_t i;

	assert_int_equal(a->version, b->version);
	assert_int_equal(a->compat_flags, b->compat_flags);
	assert_int_equal(a->incompat_flags, b->incompat_flags);
	assert_int_equal(a->index, b->index);
	assert_int_equal(a->chunk_flags, b->chunk_flags);
	assert_memory_equal(a->uuid, b->uuid, 16);
	assert_int_equal(a->sector_size, b->sector_size);
	assert_int_equal(a->codec, b->codec);
	assert_int_equal(a->level, b->level);
	assert_int_equal(a->source_sectors, b->source_sectors);
	assert_int_equal(a->source_bytes, b->source_bytes);
	assert_int_equal(a->first, b->first);
	assert_int_equal(a->last, b->last);
	assert_int_equal(a->data_len, b->data_len);
	assert_int_equal(a->data_crc, b->data_crc);
	assert_int_equal(a->image_kind, b->image_kind);
	assert_int_equal(a->part_index, b->part_index);
	assert_int_equal(a->part_type, b->part_type);
	assert_int_equal(a->part_start, b->part_start);
	assert_int_equal(a->nregions, b->nregions);
	for (i = 0; i < a->nregions; i++) {
		assert_int_equal(regs[i].start, ndz_hdr_region(area, i).start);
		assert_int_equal(regs[i].count, ndz_hdr_region(area, i).count);
	}
}

static void test_sizes(void **state)
{
	(void)state;
	assert_int_equal(NDZ_MAX_REGIONS, 330);
	assert_int_equal(NDZ_MAX_DATA, 1024 * 1024 - 4096);
	assert_int_equal(NDZ_BLOCKS_PER_CHUNK, 1024);
	assert_true(O_REGIONS == NDZ_FIXED_HDR);
}

static void test_roundtrip(void **state)
{
	struct ndz_chunk_hdr *in = calloc(1, sizeof(*in)), *out = calloc(1, sizeof(*out));
	uint8_t *a = malloc(NDZ_HDR_SIZE);

	(void)state;
	assert_non_null(in);
	assert_non_null(out);
	assert_non_null(a);
	sample(in);
	memset(a, 0xa5, NDZ_HDR_SIZE);
	assert_int_equal(encode_area(in, a), 0);
	assert_int_equal(ndz_hdr_decode(a, out, NULL), 0);
	assert_hdr_equal(in, out, a);
	free(in);
	free(out);
	free(a);
}

/* The fields sit where doc/FORMAT.md says, little-endian, the rest zeroed. */
static void test_layout(void **state)
{
	static const uint8_t magic[8] = { 0x89, 'N', 'D', 'Z', '\r', '\n', 0x1a, '\n' };
	uint8_t *a = sample_area();
	size_t i;

	(void)state;
	assert_memory_equal(a + O_MAGIC, magic, 8);
	assert_memory_equal(ndz_magic, magic, 8);
	assert_int_equal(a[O_VERSION], 1);
	assert_int_equal(a[O_VERSION + 1], 0);
	assert_int_equal(get_le16(a + O_HDR_SIZE), 4096);
	assert_int_equal(a[O_HDR_SIZE], 0x00);
	assert_int_equal(a[O_HDR_SIZE + 1], 0x10);
	assert_int_equal(get_le32(a + O_CHUNK_SIZE), 1u << 20);
	assert_int_equal(a[O_CHUNK_SIZE + 2], 0x10);
	assert_int_equal(get_le32(a + O_COMPAT), 0);
	assert_int_equal(get_le32(a + O_INCOMPAT), 0);
	assert_int_equal(get_le32(a + O_INDEX), 7);
	assert_int_equal(get_le32(a + O_FLAGS), NDZ_CHUNK_LAST);
	assert_memory_equal(a + O_UUID, "0123456789abcdef", 16);
	assert_int_equal(get_le32(a + O_SECTOR), 512);
	assert_int_equal(get_le16(a + O_CODEC), NDZ_CODEC_ZLIB);
	assert_int_equal(get_le16(a + O_LEVEL), 4);
	assert_int_equal(get_le64(a + O_SRC_SECTORS), 1001);
	assert_int_equal(get_le64(a + O_SRC_BYTES), 1000 * 512 + 100);
	assert_int_equal(get_le64(a + O_FIRST), 0);
	assert_int_equal(get_le64(a + O_LAST), 1001);
	assert_int_equal(get_le32(a + O_DATA_LEN), 1234);
	assert_int_equal(a[O_DATA_CRC], 0xef);
	assert_int_equal(a[O_DATA_CRC + 3], 0xde);
	assert_int_equal(get_le32(a + O_NREGIONS), 3);
	assert_int_equal(get_le16(a + O_KIND), NDZ_KIND_PARTITION);
	assert_int_equal(get_le16(a + O_PART_INDEX), 2);
	assert_int_equal(get_le32(a + O_PART_TYPE), 0x83);
	assert_int_equal(get_le64(a + O_PART_START), 2048);
	for (i = O_RESERVED; i < O_REGIONS; i++)
		assert_int_equal(a[i], 0);
	assert_int_equal(get_le64(a + O_REGIONS), 0);
	assert_int_equal(get_le32(a + O_REGIONS + 8), 10);
	assert_int_equal(get_le64(a + O_REGIONS + 12), 100);
	assert_int_equal(get_le32(a + O_REGIONS + 20), 50);
	assert_int_equal(get_le64(a + O_REGIONS + 24), 1000);
	assert_int_equal(get_le32(a + O_REGIONS + 32), 1);
	for (i = O_REGIONS + 36; i < NDZ_HDR_SIZE; i++)
		assert_int_equal(a[i], 0);
	/* the stored CRC is the CRC of the area with the field as zero */
	{
		uint32_t stored = get_le32(a + O_HDR_CRC);

		recrc(a);
		assert_int_equal(get_le32(a + O_HDR_CRC), stored);
	}
	free(a);
}

/* encode refuses to write a header that decode would refuse. */
static void test_encode_rejects(void **state)
{
	struct ndz_chunk_hdr *h = malloc(sizeof(*h));

	(void)state;
	assert_non_null(h);
#define REJECT(stmt)                                                     \
	do {                                                             \
		sample(h);                                               \
		stmt;                                                    \
		assert_int_equal(encode(h), NDZ_EINVAL);                 \
	} while (0)
	REJECT(h->version = 0);
	REJECT(h->version = 2);
	REJECT(h->compat_flags = 0x80000000u);
	REJECT(h->incompat_flags = 2);
	REJECT(h->chunk_flags = 2);
	REJECT(h->sector_size = 4096);
	REJECT(h->codec = 0);
	REJECT(h->codec = 3);
	REJECT(h->data_len = NDZ_MAX_DATA + 1);
	REJECT(h->nregions = NDZ_MAX_REGIONS + 1);
	REJECT(h->image_kind = 2);
	REJECT(h->source_sectors++);
	REJECT(h->source_sectors--);
	REJECT(h->first = 1002; h->nregions = 0);
	REJECT(h->last = 1002);
	REJECT(h->last = 1000; h->nregions = 2);
	REJECT(regs[1].count = 0);
	REJECT(regs[1].start = 5);
	REJECT(regs[2].start = 120);
	REJECT(regs[2].count = 2);
	REJECT(h->first = 1; h->chunk_flags = 0);
#undef REJECT
	sample(h);
	assert_int_equal(encode(h), 0);
	free(h);
}

/* Patch a field of a valid area, fix the CRC, decode: expect rc. */
#define PATCH16(off, v, rc) patch(16, off, v, rc, __LINE__)
#define PATCH32(off, v, rc) patch(32, off, v, rc, __LINE__)
#define PATCH64(off, v, rc) patch(64, off, v, rc, __LINE__)
static void patch(int bits, size_t off, uint64_t v, int rc, int line)
{
	uint8_t *a = sample_area();
	int got;

	if (bits == 16)
		put_le16(a + off, (uint16_t)v);
	else if (bits == 32)
		put_le32(a + off, (uint32_t)v);
	else
		put_le64(a + off, v);
	recrc(a);
	got = decode(a);
	if (got != rc)
		fail_msg("line %d: offset %zu = %llu: got %d (%s), want %d (%s)", line, off,
			 (unsigned long long)v, got, ndz_strerror(got), rc, ndz_strerror(rc));
	free(a);
}

static void test_decode_magic(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < 8; i++) {
		uint8_t *a = sample_area();

		a[O_MAGIC + i] ^= 0x01;
		recrc(a);
		assert_int_equal(decode(a), NDZ_EBADMAGIC);
		free(a);
	}
	{
		uint8_t *a = calloc(1, NDZ_HDR_SIZE);

		assert_non_null(a);
		assert_int_equal(decode(a), NDZ_EBADMAGIC);
		memset(a, 0xff, NDZ_HDR_SIZE);
		assert_int_equal(decode(a), NDZ_EBADMAGIC);
		free(a);
	}
}

static void test_decode_version_sizes(void **state)
{
	(void)state;
	PATCH16(O_VERSION, 0, NDZ_EVERSION);
	PATCH16(O_VERSION, 2, NDZ_EVERSION);
	PATCH16(O_VERSION, 0x0100, NDZ_EVERSION);
	PATCH16(O_VERSION, 0xffff, NDZ_EVERSION);
	PATCH16(O_HDR_SIZE, 0, NDZ_EHEADER);
	PATCH16(O_HDR_SIZE, 4095, NDZ_EHEADER);
	PATCH16(O_HDR_SIZE, 4097, NDZ_EHEADER);
	PATCH16(O_HDR_SIZE, 8192, NDZ_EHEADER);
	PATCH32(O_CHUNK_SIZE, 0, NDZ_EHEADER);
	PATCH32(O_CHUNK_SIZE, (1u << 20) - 1, NDZ_EHEADER);
	PATCH32(O_CHUNK_SIZE, 1u << 21, NDZ_EHEADER);
	PATCH32(O_CHUNK_SIZE, 1u << 20, 0);
	PATCH32(O_SECTOR, 0, NDZ_EHEADER);
	PATCH32(O_SECTOR, 4096, NDZ_EHEADER);
	PATCH32(O_SECTOR, 511, NDZ_EHEADER);
	PATCH16(O_CODEC, 0, NDZ_ECODEC);
	PATCH16(O_CODEC, 2, 0);
	PATCH16(O_CODEC, 3, NDZ_ECODEC);
	PATCH16(O_CODEC, 0xffff, NDZ_ECODEC);
	PATCH16(O_LEVEL, 0, 0);
	PATCH16(O_LEVEL, 0xffff, 0);          /* informational only */
	PATCH16(O_KIND, NDZ_KIND_WHOLE, 0);
	PATCH16(O_KIND, 2, NDZ_EHEADER);
	PATCH16(O_KIND, 0xffff, NDZ_EHEADER);
	PATCH32(O_INDEX, 0xffffffffu, 0);
	PATCH16(O_PART_INDEX, 0xffff, 0);
	PATCH32(O_PART_TYPE, 0xffffffffu, 0);
	PATCH64(O_PART_START, UINT64_MAX, 0);
}

static void test_decode_flags(void **state)
{
	int bit;

	(void)state;
	for (bit = 0; bit < 32; bit++) {
		/* unknown incompat bits must be refused, unknown compat bits ignored */
		if (!(NDZ_INCOMPAT_KNOWN & (1u << bit)))
			PATCH32(O_INCOMPAT, 1u << bit, NDZ_EFEATURE);
		if (!(NDZ_COMPAT_KNOWN & (1u << bit)))
			PATCH32(O_COMPAT, 1u << bit, 0);
		if (!(NDZ_CHUNK_KNOWN & (1u << bit)))
			PATCH32(O_FLAGS, NDZ_CHUNK_LAST | (1u << bit), NDZ_EFEATURE);
	}
	PATCH32(O_INCOMPAT, 0xffffffffu, NDZ_EFEATURE);
	PATCH32(O_COMPAT, 0xffffffffu, 0);
	PATCH32(O_FLAGS, 0xffffffffu, NDZ_EFEATURE);
}

static void test_decode_data_len(void **state)
{
	(void)state;
	PATCH32(O_DATA_LEN, 0, 0);
	PATCH32(O_DATA_LEN, NDZ_MAX_DATA, 0);
	PATCH32(O_DATA_LEN, NDZ_MAX_DATA + 1, NDZ_EHEADER);
	PATCH32(O_DATA_LEN, NDZ_CHUNK_SIZE, NDZ_EHEADER);
	PATCH32(O_DATA_LEN, 0xffffffffu, NDZ_EHEADER);
}

static void test_decode_source_size(void **state)
{
	struct ndz_chunk_hdr *h = malloc(sizeof(*h));
	static const struct {
		uint64_t bytes, sectors;
		int rc;
	} cases[] = {
		{ 1000 * 512 + 100, 1001, 0 },
		{ 1000 * 512 + 100, 1000, NDZ_EHEADER },
		{ 1000 * 512 + 100, 1002, NDZ_EHEADER },
		{ 1001 * 512, 1001, 0 },
		{ 1001 * 512 - 511, 1001, 0 },
		{ 1000 * 512, 1001, NDZ_EHEADER },
		{ 1001 * 512 + 1, 1001, NDZ_EHEADER },
		/* near the top of the range the rounding must not wrap */
		{ UINT64_MAX, (UINT64_MAX >> 9) + 1, 0 },
		{ UINT64_MAX, 0, NDZ_EHEADER },
		{ UINT64_MAX - 510, 0, NDZ_EHEADER },
		{ UINT64_MAX - 511, UINT64_MAX >> 9, 0 },
		{ UINT64_MAX - 511, 0, NDZ_EHEADER },
	};
	size_t i;

	(void)state;
	assert_non_null(h);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t *a = sample_area();
		int rc;

		put_le64(a + O_SRC_BYTES, cases[i].bytes);
		put_le64(a + O_SRC_SECTORS, cases[i].sectors);
		/* not the last chunk, so last may stay below a large source */
		put_le32(a + O_FLAGS, 0);
		recrc(a);
		rc = decode(a);
		if (rc != cases[i].rc)
			fail_msg("case %zu: bytes %llu sectors %llu: got %d want %d", i,
				 (unsigned long long)cases[i].bytes,
				 (unsigned long long)cases[i].sectors, rc, cases[i].rc);
		free(a);
	}
	/* an empty source: no sectors, no regions */
	sample(h);
	h->source_bytes = 0;
	h->source_sectors = 0;
	h->last = 0;
	h->nregions = 0;
	assert_int_equal(encode(h), 0);
	free(h);
}

/* Build a header with the given regions and first/last; return decode's answer. */
static int with_regions(uint64_t first, uint64_t last, uint32_t flags,
			const struct ndz_region *r, uint32_t n)
{
	uint8_t *a = sample_area();
	uint32_t i;
	int rc;

	put_le64(a + O_FIRST, first);
	put_le64(a + O_LAST, last);
	put_le32(a + O_FLAGS, flags);
	put_le32(a + O_NREGIONS, n);
	memset(a + O_REGIONS, 0, NDZ_HDR_SIZE - O_REGIONS);
	for (i = 0; i < n && i < NDZ_MAX_REGIONS; i++) {
		put_le64(a + O_REGIONS + 12 * i, r[i].start);
		put_le32(a + O_REGIONS + 12 * i + 8, r[i].count);
	}
	recrc(a);
	rc = decode(a);
	free(a);
	return rc;
}

static void test_decode_first_last(void **state)
{
	static const struct ndz_region r1[] = { { 10, 5 } };

	(void)state;
	assert_int_equal(with_regions(0, 1001, NDZ_CHUNK_LAST, NULL, 0), 0);
	assert_int_equal(with_regions(0, 0, 0, NULL, 0), 0);
	assert_int_equal(with_regions(500, 500, 0, NULL, 0), 0);
	assert_int_equal(with_regions(1001, 1001, NDZ_CHUNK_LAST, NULL, 0), 0);
	assert_int_equal(with_regions(501, 500, 0, NULL, 0), NDZ_EREGION);
	assert_int_equal(with_regions(0, 1002, 0, NULL, 0), NDZ_EREGION);
	assert_int_equal(with_regions(0, UINT64_MAX, 0, NULL, 0), NDZ_EREGION);
	assert_int_equal(with_regions(UINT64_MAX, UINT64_MAX, 0, NULL, 0), NDZ_EREGION);
	/* the last chunk must reach the end of the source */
	assert_int_equal(with_regions(0, 1000, NDZ_CHUNK_LAST, NULL, 0), NDZ_EREGION);
	assert_int_equal(with_regions(0, 1000, 0, NULL, 0), 0);
	assert_int_equal(with_regions(10, 15, 0, r1, 1), 0);
	assert_int_equal(with_regions(10, 14, 0, r1, 1), NDZ_EREGION);
	assert_int_equal(with_regions(11, 15, 0, r1, 1), NDZ_EREGION);
}

static void test_decode_regions(void **state)
{
	static const struct {
		const char *what;
		struct ndz_region r[3];
		uint32_t n;
		int rc;
	} cases[] = {
		{ "ok", { { 100, 10 }, { 200, 10 }, { 990, 10 } }, 3, 0 },
		{ "adjacent", { { 100, 10 }, { 110, 10 }, { 120, 1 } }, 3, 0 },
		{ "at first", { { 100, 1 } }, 1, 0 },
		{ "up to last", { { 999, 1 } }, 1, 0 },
		{ "whole", { { 100, 900 } }, 1, 0 },
		{ "before first", { { 99, 2 } }, 1, NDZ_EREGION },
		{ "past last", { { 999, 2 } }, 1, NDZ_EREGION },
		{ "at last", { { 1000, 1 } }, 1, NDZ_EREGION },
		{ "far away", { { 1u << 30, 1 } }, 1, NDZ_EREGION },
		{ "zero count", { { 100, 10 }, { 200, 0 } }, 2, NDZ_EREGION },
		{ "unsorted", { { 200, 10 }, { 100, 10 } }, 2, NDZ_EREGION },
		{ "overlap", { { 100, 10 }, { 109, 10 } }, 2, NDZ_EREGION },
		{ "duplicate", { { 100, 10 }, { 100, 10 } }, 2, NDZ_EREGION },
		{ "contained", { { 100, 100 }, { 150, 10 } }, 2, NDZ_EREGION },
		{ "third overlaps first", { { 100, 50 }, { 200, 1 }, { 120, 1 } }, 3,
		  NDZ_EREGION },
		{ "wraps", { { 100, 1 }, { UINT64_MAX - 2, 10 } }, 2, NDZ_EREGION },
		{ "max count", { { 100, UINT32_MAX } }, 1, NDZ_EREGION },
	};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		/* a middle chunk covering [100, 1000) of the 1001-sector source */
		int rc = with_regions(100, 1000, 0, cases[i].r, cases[i].n);

		if (rc != cases[i].rc)
			fail_msg("%s: got %d (%s), want %d", cases[i].what, rc, ndz_strerror(rc),
				 cases[i].rc);
	}
}

static void test_decode_nregions(void **state)
{
	struct ndz_region *r = calloc(NDZ_MAX_REGIONS + 1, sizeof(*r));
	struct ndz_chunk_hdr *h = malloc(sizeof(*h)), *out = malloc(sizeof(*out));
	uint8_t *a = malloc(NDZ_HDR_SIZE);
	uint32_t i;

	(void)state;
	assert_non_null(r);
	assert_non_null(h);
	assert_non_null(out);
	assert_non_null(a);
	for (i = 0; i <= NDZ_MAX_REGIONS; i++) {
		r[i].start = 2 * i;
		r[i].count = 1;
	}
	assert_int_equal(with_regions(0, 1001, NDZ_CHUNK_LAST, r, NDZ_MAX_REGIONS), 0);
	assert_int_equal(with_regions(0, 1001, NDZ_CHUNK_LAST, r, NDZ_MAX_REGIONS + 1),
			 NDZ_EHEADER);
	assert_int_equal(with_regions(0, 1001, NDZ_CHUNK_LAST, r, 0xffffffffu), NDZ_EHEADER);
	/* the full list survives a round trip and fills the area exactly */
	sample(h);
	h->nregions = NDZ_MAX_REGIONS;
	for (i = 0; i < NDZ_MAX_REGIONS; i++) {
		regs[i].start = 3 * i;
		regs[i].count = 2;
	}
	assert_int_equal(encode_area(h, a), 0);
	/* region 329 sits at 128 + 329 * 12 = 4076; 8 bytes stay unused */
	assert_int_equal(get_le64(a + 4076), 3 * 329);
	assert_int_equal(get_le32(a + 4084), 2);
	assert_int_equal(get_le64(a + 4088), 0);
	assert_int_equal(ndz_hdr_decode(a, out, NULL), 0);
	assert_hdr_equal(h, out, a);
	free(a);
	free(h);
	free(out);
	free(r);
}

/* Any byte damaged anywhere in the header area is noticed, by name. */
static void test_every_byte_flip(void **state)
{
	uint8_t *a = sample_area();
	size_t i;
	int bit;

	(void)state;
	for (i = 0; i < NDZ_HDR_SIZE; i++) {
		int rc, want;

		a[i] ^= 0xff;
		rc = decode(a);
		want = i < O_VERSION ? NDZ_EBADMAGIC : i < O_HDR_SIZE ? NDZ_EVERSION : NDZ_EHDRCRC;
		if (rc != want)
			fail_msg("byte %zu flipped: got %d (%s), want %d", i, rc, ndz_strerror(rc),
				 want);
		a[i] ^= 0xff;
	}
	/* single bits in the fields that matter most */
	for (i = O_HDR_CRC; i < O_REGIONS + 36; i++) {
		for (bit = 0; bit < 8; bit++) {
			a[i] ^= (uint8_t)(1u << bit);
			assert_int_equal(decode(a), NDZ_EHDRCRC);
			a[i] ^= (uint8_t)(1u << bit);
		}
	}
	assert_int_equal(decode(a), 0);
	free(a);
}

/* A whole chunk: header, data_len bytes of data, zero padding to 1 MiB. */
static uint8_t *make_chunk(uint32_t data_len)
{
	struct ndz_chunk_hdr h;
	uint8_t *c = calloc(1, NDZ_CHUNK_SIZE);
	uint32_t i, x = 12345;

	assert_non_null(c);
	for (i = 0; i < data_len; i++) {
		x = x * 1103515245u + 12345u;
		c[NDZ_HDR_SIZE + i] = (uint8_t)(x >> 16);
	}
	sample(&h);
	h.data_len = data_len;
	h.data_crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), c + NDZ_HDR_SIZE, data_len);
	assert_int_equal(encode_area(&h, c), 0);
	return c;
}

static int check(const uint8_t *c)
{
	struct ndz_chunk_hdr *h = malloc(sizeof(*h));
	int rc;

	assert_non_null(h);
	rc = ndz_chunk_check(c, h, NULL);
	if (rc == 0)
		assert_int_equal(h->index, 7);
	free(h);
	return rc;
}

static void test_chunk_check(void **state)
{
	static const uint32_t lens[] = { 0, 1, 1000, NDZ_MAX_DATA - 1, NDZ_MAX_DATA };
	size_t k;

	(void)state;
	for (k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		uint32_t len = lens[k];
		uint8_t *c = make_chunk(len);
		size_t probes[4], i;

		assert_int_equal(check(c), 0);
		/* damage in the data: first, middle and last byte */
		if (len) {
			probes[0] = 0;
			probes[1] = len / 2;
			probes[2] = len - 1;
			for (i = 0; i < 3; i++) {
				c[NDZ_HDR_SIZE + probes[i]] ^= 0x10;
				assert_int_equal(check(c), NDZ_EDATACRC);
				c[NDZ_HDR_SIZE + probes[i]] ^= 0x10;
			}
		}
		/* non-zero padding: right after the data, in the middle, the last byte */
		if (len < NDZ_MAX_DATA) {
			probes[0] = len;
			probes[1] = len + (NDZ_MAX_DATA - len) / 2;
			probes[2] = NDZ_MAX_DATA - 1;
			for (i = 0; i < 3; i++) {
				c[NDZ_HDR_SIZE + probes[i]] = 1;
				assert_int_equal(check(c), NDZ_EPADDING);
				c[NDZ_HDR_SIZE + probes[i]] = 0;
			}
		}
		/* header damage is reported before the data is looked at */
		c[O_LAST] ^= 1;
		c[NDZ_HDR_SIZE] ^= 1;
		assert_int_equal(check(c), NDZ_EHDRCRC);
		c[O_LAST] ^= 1;
		c[NDZ_HDR_SIZE] ^= 1;
		assert_int_equal(check(c), 0);
		free(c);
	}
	/* a wrong data_len with a fixed-up header CRC: CRC or padding catches it */
	{
		uint8_t *c = make_chunk(1000);

		put_le32(c + O_DATA_LEN, 999);
		recrc(c);
		assert_int_equal(check(c), NDZ_EDATACRC);
		put_le32(c + O_DATA_LEN, 1001);
		recrc(c);
		assert_int_equal(check(c), NDZ_EDATACRC);
		put_le32(c + O_DATA_LEN, NDZ_MAX_DATA + 1);
		recrc(c);
		assert_int_equal(check(c), NDZ_EHEADER);
		free(c);
	}
}

static void test_same_image(void **state)
{
	struct ndz_chunk_hdr *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));

	(void)state;
	assert_non_null(a);
	assert_non_null(b);
	sample(a);
	sample(b);
	assert_int_equal(ndz_hdr_same_image(a, b, NULL), 0);
	/* what differs between chunks of one image */
	b->index = 3;
	b->chunk_flags = 0;
	b->first = 10;
	b->last = 20;
	b->nregions = 1;
	b->data_len = 5;
	b->data_crc = 1;
	b->level = 9;
	assert_int_equal(ndz_hdr_same_image(a, b, NULL), 0);
	assert_int_equal(ndz_hdr_same_image(b, a, NULL), 0);
#define DIFFERS(stmt)                                                    \
	do {                                                             \
		sample(b);                                               \
		stmt;                                                    \
		assert_int_equal(ndz_hdr_same_image(a, b, NULL), NDZ_EMISMATCH); \
		assert_int_equal(ndz_hdr_same_image(b, a, NULL), NDZ_EMISMATCH); \
	} while (0)
	DIFFERS(b->uuid[0] ^= 1);
	DIFFERS(b->uuid[15] ^= 0x80);
	DIFFERS(b->source_bytes++);
	DIFFERS(b->image_kind = NDZ_KIND_WHOLE);
	DIFFERS(b->part_index = 1);
	DIFFERS(b->part_start = 63);
	DIFFERS(b->part_type = 0x7);
	DIFFERS(b->codec = NDZ_CODEC_ZSTD);      /* an image never mixes codecs */
#undef DIFFERS
	free(a);
	free(b);
}

/* The error context: the chunk named, the reason; NULL allowed; the first error wins. */
static void test_messages(void **state)
{
	struct ndz_chunk_hdr *h = malloc(sizeof(*h)), *b = malloc(sizeof(*b));
	struct ndz_error e = { 0 };
	uint8_t *c = make_chunk(1000);

	(void)state;
	assert_non_null(h);
	assert_non_null(b);
	assert_int_equal(ndz_chunk_check(c, h, &e), 0);
	assert_int_equal(e.code, 0);
	c[O_LAST] ^= 1;
	assert_int_equal(ndz_hdr_decode(c, h, &e), NDZ_EHDRCRC);
	assert_string_equal(ndz_error_msg(&e), "chunk 7: bad header checksum");
	assert_int_equal(ndz_hdr_decode(c, h, NULL), NDZ_EHDRCRC);
	/* first error wins */
	assert_int_equal(ndz_chunk_check(c, h, &e), NDZ_EHDRCRC);
	assert_string_equal(ndz_error_msg(&e), "chunk 7: bad header checksum");
	c[O_LAST] ^= 1;
	c[O_MAGIC] ^= 1;
	ndz_error_clear(&e);
	assert_int_equal(ndz_hdr_decode(c, h, &e), NDZ_EBADMAGIC);
	assert_string_equal(ndz_error_msg(&e), "chunk header: not an image (bad magic)");
	c[O_MAGIC] ^= 1;
	c[NDZ_HDR_SIZE + 10] ^= 1;
	ndz_error_clear(&e);
	assert_int_equal(ndz_chunk_check(c, h, &e), NDZ_EDATACRC);
	assert_string_equal(ndz_error_msg(&e), "chunk 7: bad data checksum");
	c[NDZ_HDR_SIZE + 10] ^= 1;
	c[NDZ_HDR_SIZE + 2000] = 1;
	ndz_error_clear(&e);
	assert_int_equal(ndz_chunk_check_padding(c, h, &e), NDZ_EPADDING);
	assert_string_equal(ndz_error_msg(&e), "chunk 7: non-zero bytes in chunk padding");
	/* encode names the chunk and the broken invariant */
	sample(h);
	h->codec = 9;
	ndz_error_clear(&e);
	assert_int_equal(ndz_hdr_encode(h, c, &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e),
			    "chunk 7: not encoded: unsupported compression codec");
	sample(h);
	h->version = 2;
	ndz_error_clear(&e);
	assert_int_equal(ndz_hdr_encode(h, c, &e), NDZ_EINVAL);
	assert_non_null(strstr(ndz_error_msg(&e), "chunk 7: not encoded: a version"));
	/* same_image names the field */
	sample(h);
	sample(b);
	b->index = 2;
	b->source_bytes++;
	ndz_error_clear(&e);
	assert_int_equal(ndz_hdr_same_image(h, b, &e), NDZ_EMISMATCH);
	assert_string_equal(ndz_error_msg(&e), "chunk 2: chunk belongs to another image (its "
			    "source size differs from chunk 7's)");
	free(c);
	free(h);
	free(b);
}

static void test_data_bytes(void **state)
{
	struct ndz_chunk_hdr *h = malloc(sizeof(*h));
	uint8_t *a = calloc(1, NDZ_HDR_SIZE);
	uint32_t i;

	(void)state;
	assert_non_null(h);
	assert_non_null(a);
	sample(h);
	assert_int_equal(encode_area(h, a), 0);
	assert_int_equal(ndz_hdr_data_bytes(a, h), 61 * 512);
	h->nregions = 0;
	assert_int_equal(ndz_hdr_data_bytes(a, h), 0);
	/* the largest sum must not wrap (330 * (2^32 - 1) * 512 < 2^64) */
	h->nregions = NDZ_MAX_REGIONS;
	for (i = 0; i < NDZ_MAX_REGIONS; i++) {
		ndz_hdr_set_region(a, i, (struct ndz_region){ (uint64_t)i << 32, UINT32_MAX });
	}
	assert_true(ndz_hdr_data_bytes(a, h) ==
		    (uint64_t)NDZ_MAX_REGIONS * UINT32_MAX * NDZ_SECTOR_SIZE);
	free(h);
	free(a);
}

/* scan.c rounds sizes with this; (n + 511) / 512 would give 0 near UINT64_MAX */
static void test_sectors_of(void **state)
{
	const uint64_t last = UINT64_MAX / NDZ_SECTOR_SIZE; /* whole sectors in UINT64_MAX */

	(void)state;
	assert_true(ndz_sectors_of(0) == 0);
	assert_true(ndz_sectors_of(1) == 1);
	assert_true(ndz_sectors_of(NDZ_SECTOR_SIZE - 1) == 1);
	assert_true(ndz_sectors_of(NDZ_SECTOR_SIZE) == 1);
	assert_true(ndz_sectors_of(NDZ_SECTOR_SIZE + 1) == 2);
	assert_true(ndz_sectors_of(last * NDZ_SECTOR_SIZE) == last);
	assert_true(ndz_sectors_of(last * NDZ_SECTOR_SIZE + 1) == last + 1);
	assert_true(ndz_sectors_of(UINT64_MAX - 1) == last + 1);
	assert_true(ndz_sectors_of(UINT64_MAX) == last + 1);
	assert_true(last + 1 == (uint64_t)1 << 55);
}

/*
 * ndz_crc32 against zlib's crc32: random lengths (0 to past 64 KiB, around the
 * folding code's 16/64/256 byte steps) at every alignment, and continued in pieces.
 */
static void test_crc32_is_zlib(void **state)
{
	static const size_t edges[] = { 0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65,
					127, 128, 129, 255, 256, 257, 1023, 1024, 4095, 4097 };
	const size_t max = 70000;
	uint8_t *buf = malloc(max + 64);
	unsigned i, k;

	(void)state;
	assert_non_null(buf);
	srand(9);
	for (i = 0; i < max + 64; i++)
		buf[i] = (uint8_t)rand();
	for (i = 0; i < sizeof(edges) / sizeof(edges[0]); i++)
		for (k = 0; k < 64; k++)
			assert_int_equal(ndz_crc32(0, buf + k, edges[i]),
					 (uint32_t)crc32(0L, buf + k, (uInt)edges[i]));
	for (i = 0; i < 2000; i++) {
		size_t off = (size_t)rand() % 64, len = (size_t)rand() % max;
		size_t cut = len ? (size_t)rand() % len : 0;
		uint32_t want = (uint32_t)crc32(0L, buf + off, (uInt)len);
		uint32_t seed = (uint32_t)rand();

		assert_int_equal(ndz_crc32(0, buf + off, len), want);
		assert_int_equal(ndz_crc32(ndz_crc32(0, buf + off, cut), buf + off + cut, len - cut),
				 want);
		assert_int_equal(ndz_crc32(seed, buf + off, len),
				 (uint32_t)crc32(seed, buf + off, (uInt)len));
	}
	assert_int_equal(ndz_crc32(0, "123456789", 9), 0xcbf43926u);   /* the check value */
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_layout),
		cmocka_unit_test(test_encode_rejects),
		cmocka_unit_test(test_decode_magic),
		cmocka_unit_test(test_decode_version_sizes),
		cmocka_unit_test(test_decode_flags),
		cmocka_unit_test(test_decode_data_len),
		cmocka_unit_test(test_decode_source_size),
		cmocka_unit_test(test_decode_first_last),
		cmocka_unit_test(test_decode_regions),
		cmocka_unit_test(test_decode_nregions),
		cmocka_unit_test(test_every_byte_flip),
		cmocka_unit_test(test_chunk_check),
		cmocka_unit_test(test_same_image),
		cmocka_unit_test(test_messages),
		cmocka_unit_test(test_data_bytes),
		cmocka_unit_test(test_sectors_of),
		cmocka_unit_test(test_crc32_is_zlib),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
