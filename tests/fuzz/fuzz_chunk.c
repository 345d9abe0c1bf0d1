/*
 * libFuzzer target for the chunk header parser and chunk check (lib/format.c).
 * Input: one mode byte, then the header area and the data of a chunk, zero padded
 * to 1 MiB. Mode 0 feeds the bytes as they are; mode 1 first fixes both CRCs so
 * the checks behind them get explored; mode 2 builds a header from the bytes and
 * encodes it. Any accepted header must satisfy the documented invariants and
 * survive an encode/decode round trip.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "chunkfix.h"
#include "core/err.h"
#include "core/format.h"
#include "core/le.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);


static uint8_t *chunk;
static size_t dirty;                   /* bytes of chunk the last input set */

/* What ndz_hdr_decode promises about a header it accepts. */
static void check_invariants(const struct ndz_chunk_hdr *h, const uint8_t *area)
{
	uint64_t prev;
	uint32_t i;

	if (h->version != NDZ_VERSION_1 || (h->incompat_flags & ~NDZ_INCOMPAT_KNOWN) ||
	    (h->chunk_flags & ~NDZ_CHUNK_KNOWN) || h->sector_size != NDZ_SECTOR_SIZE ||
	    (h->codec != NDZ_CODEC_ZLIB && h->codec != NDZ_CODEC_ZSTD) ||
	    h->data_len > NDZ_MAX_DATA ||
	    h->nregions > NDZ_MAX_REGIONS || h->first > h->last ||
	    h->last > h->source_sectors)
		abort();
	if (h->source_sectors != h->source_bytes / 512 + (h->source_bytes % 512 != 0))
		abort();
	if ((h->chunk_flags & NDZ_CHUNK_LAST) && h->last != h->source_sectors)
		abort();
	prev = h->first;
	for (i = 0; i < h->nregions; i++) {
		struct ndz_region r = ndz_hdr_region(area, i);

		if (r.count == 0 || r.start < prev || r.start >= h->last ||
		    r.count > h->last - r.start)
			abort();
		prev = r.start + r.count;
	}
	if (ndz_hdr_data_bytes(area, h) / NDZ_SECTOR_SIZE > h->last - h->first)
		abort();
}

/* Encode what was decoded from src, into a fresh area: the same header again. */
static void roundtrip(const struct ndz_chunk_hdr *h, const uint8_t *src)
{
	static uint8_t area[NDZ_HDR_SIZE];
	struct ndz_chunk_hdr again;
	uint32_t i;

	if (h->compat_flags & ~NDZ_COMPAT_KNOWN)
		return;                /* readable, but a writer must not produce it */
	memset(area, 0xa5, sizeof(area));
	for (i = 0; i < h->nregions; i++)
		ndz_hdr_set_region(area, i, ndz_hdr_region(src, i));
	if (ndz_hdr_encode(h, area, NULL) != 0)
		abort();
	if (ndz_hdr_decode(area, &again, NULL) != 0 || ndz_hdr_same_image(h, &again, NULL) != 0)
		abort();
	if (again.index != h->index || again.first != h->first || again.last != h->last ||
	    again.nregions != h->nregions || again.data_len != h->data_len ||
	    again.data_crc != h->data_crc || again.chunk_flags != h->chunk_flags ||
	    memcmp(area + NDZ_FIXED_HDR, src + NDZ_FIXED_HDR,
		   (size_t)h->nregions * NDZ_REGION_SIZE) != 0)
		abort();
}

/* Mode 2: header fields straight from the input bytes, then encode. */
static size_t build(const uint8_t *d, size_t n, uint8_t *c)
{
	static struct ndz_chunk_hdr h;
	uint8_t b[64] = { 0 };
	size_t used = n < sizeof(b) ? n : sizeof(b), i;
	uint64_t pos;

	memcpy(b, d, used);
	memset(&h, 0, sizeof(h));
	h.version = NDZ_VERSION_1;
	h.index = get_le32(b);
	h.chunk_flags = b[4] & 3u;
	memcpy(h.uuid, b + 5, 16);
	h.sector_size = NDZ_SECTOR_SIZE;
	h.codec = b[4] & 4 ? NDZ_CODEC_ZSTD : NDZ_CODEC_ZLIB;
	h.level = b[21];
	h.source_bytes = get_le64(b + 22) >> (b[30] & 63);
	h.source_sectors = h.source_bytes / 512 + (h.source_bytes % 512 != 0);
	h.first = get_le32(b + 31) % (h.source_sectors + 1);
	h.last = h.first + get_le32(b + 35) % (h.source_sectors - h.first + 1);
	if (h.chunk_flags & NDZ_CHUNK_LAST)
		h.last = h.source_sectors;
	h.data_len = n > used ? (uint32_t)(n - used) : 0;
	if (h.data_len > NDZ_MAX_DATA)
		h.data_len = NDZ_MAX_DATA;
	h.image_kind = b[39] & 1u;
	h.part_index = b[40];
	h.part_start = get_le32(b + 41);
	h.nregions = b[45] % (NDZ_MAX_REGIONS + 2);
	pos = h.first;
	for (i = 0; i < h.nregions; i++) {
		uint8_t g = b[46 + i % 18];

		struct ndz_region r;

		pos += (g >> 4) + i % 3;
		r.start = pos;
		r.count = (g & 15u) + (uint32_t)(i & 1);
		pos += r.count;
		if (i < NDZ_MAX_REGIONS)
			ndz_hdr_set_region(c, (uint32_t)i, r);
		if (pos > h.last && !(b[63] & 1)) {
			h.nregions = (uint32_t)i;  /* mostly valid lists; some not */
			break;
		}
	}
	memcpy(c + NDZ_HDR_SIZE, d + used, h.data_len);
	h.data_crc = crc(c + NDZ_HDR_SIZE, h.data_len);
	if (ndz_hdr_encode(&h, c, NULL) != 0)
		return NDZ_HDR_SIZE + h.data_len;
	check_invariants(&h, c);
	return NDZ_HDR_SIZE + h.data_len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct ndz_chunk_hdr h, h2;
	size_t n;
	uint8_t mode;
	int rc, rc2;

	if (!chunk) {
		chunk = calloc(1, NDZ_CHUNK_SIZE);
		if (!chunk)
			abort();
	}
	memset(chunk, 0, dirty);
	if (size < 1)
		return 0;
	mode = data[0] % 3;
	data++;
	size--;
	if (mode == 2) {
		dirty = build(data, size, chunk);
	} else {
		n = size < NDZ_CHUNK_SIZE ? size : NDZ_CHUNK_SIZE;
		memcpy(chunk, data, n);
		dirty = n > NDZ_HDR_SIZE ? n : NDZ_HDR_SIZE;
		if (mode == 1)
			fix_crcs(chunk);
	}

	rc = ndz_hdr_decode(chunk, &h, NULL);
	if (rc > 0 || strcmp(ndz_strerror(rc), "unknown error") == 0)
		abort();               /* every failure is a named error */
	if (rc == 0) {
		check_invariants(&h, chunk);
		roundtrip(&h, chunk);
	}
	rc2 = ndz_chunk_check(chunk, &h2, NULL);
	if (rc2 == 0 && rc != 0)
		abort();
	if (rc != 0 && rc2 != rc)
		abort();               /* header errors come first, unchanged */
	if (rc2 == 0) {
		check_invariants(&h2, chunk);
		if (crc(chunk + NDZ_HDR_SIZE, h2.data_len) != h2.data_crc)
			abort();
	}
	return 0;
}
