/* Fixtures shared by test_trust.c, test_seal.c and test_verify.c: sound chunks in memory. */
#ifndef NDZ_TEST_TRUSTFIX_H
#define NDZ_TEST_TRUSTFIX_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/format.h"

/*
 * A sound plain chunk i (malloc'ed, the caller frees) of an image of n chunks of
 * 10 sectors each, of UUID uuid_byte x 16, with len bytes of data; chunk n - 1 is
 * flagged LAST.
 */
static uint8_t *trust_chunk(uint32_t i, uint8_t uuid_byte, uint32_t len, uint32_t n)
{
	uint8_t *c = calloc(1, NDZ_CHUNK_SIZE);
	struct ndz_chunk_hdr h;
	uint32_t k;

	assert_non_null(c);
	memset(&h, 0, sizeof(h));
	h.version = NDZ_VERSION_1;
	h.index = i;
	memset(h.uuid, uuid_byte, 16);
	h.sector_size = NDZ_SECTOR_SIZE;
	h.codec = NDZ_CODEC_ZLIB;
	h.source_sectors = (uint64_t)n * 10;
	h.source_bytes = h.source_sectors * 512;
	h.first = i * 10;
	h.last = i * 10 + 10;
	h.chunk_flags = i == n - 1 ? NDZ_CHUNK_LAST : 0;
	h.nregions = 1;
	ndz_hdr_set_region(c, 0, (struct ndz_region){ i * 10, 10 });
	for (k = 0; k < len; k++)
		c[NDZ_HDR_SIZE + k] = (uint8_t)(k * 7 + i);
	h.data_len = len;
	h.data_crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), c + NDZ_HDR_SIZE, len);
	assert_int_equal(ndz_hdr_encode(&h, c, NULL), 0);
	return c;
}

#endif
