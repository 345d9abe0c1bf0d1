/*
 * For fuzz targets that build chunks: set a chunk's data and header CRC-32 after
 * changing it, with zlib's crc32 (not lib's), so that damage reaches past the CRCs.
 */
#ifndef NDZ_FUZZ_CHUNKFIX_H
#define NDZ_FUZZ_CHUNKFIX_H

#include <stddef.h>
#include <stdint.h>

#include <zlib.h>

#include "core/format.h"
#include "core/le.h"

#define OFF_DATA_LEN 88
#define OFF_DATA_CRC 92
#define OFF_HDR_CRC 100

static inline uint32_t crc(const uint8_t *p, size_t n)
{
	return (uint32_t)crc32(crc32(0L, Z_NULL, 0), p, (uInt)n);
}

/* The data CRC (when data_len is in range) and then the header CRC of chunk c. */
static inline void fix_crcs(uint8_t *c)
{
	uint32_t len = get_le32(c + OFF_DATA_LEN);

	if (len <= NDZ_MAX_DATA)
		put_le32(c + OFF_DATA_CRC, crc(c + NDZ_HDR_SIZE, len));
	put_le32(c + OFF_HDR_CRC, 0);
	put_le32(c + OFF_HDR_CRC, crc(c, NDZ_HDR_SIZE));
}

#endif
