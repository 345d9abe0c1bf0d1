/* The first header of a small valid image, for tests that only need one to exist (cmocka.h first). */
#ifndef NDZ_TEST_HDRFIX_H
#define NDZ_TEST_HDRFIX_H

#include <stdint.h>
#include <string.h>

#include "core/format.h"

/*
 * Fills AREA (NDZ_HDR_SIZE bytes) with the encoded header of a zlib chunk holding
 * sectors 0..7 of an 8-sector whole-disk image, CHUNK_FLAGS set (NDZ_CHUNK_LAST for
 * a one-chunk image).
 */
static void fix_hdr(uint8_t *area, uint32_t chunk_flags)
{
	struct ndz_chunk_hdr h;
	struct ndz_region r = { 0, 8 };

	memset(&h, 0, sizeof(h));
	memset(area, 0, NDZ_HDR_SIZE);
	h.version = NDZ_VERSION_1;
	h.chunk_flags = chunk_flags;
	memcpy(h.uuid, "0123456789abcdef", 16);
	h.sector_size = NDZ_SECTOR_SIZE;
	h.codec = NDZ_CODEC_ZLIB;
	h.source_bytes = 8 * NDZ_SECTOR_SIZE;
	h.source_sectors = 8;
	h.last = 8;
	h.data_len = 16;
	h.image_kind = NDZ_KIND_WHOLE;
	h.nregions = 1;
	ndz_hdr_set_region(area, 0, r);
	assert_int_equal(ndz_hdr_encode(&h, area, NULL), 0);
}

#endif
