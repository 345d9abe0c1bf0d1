/*
 * mkfakeimg OUT CHUNKS SEED: a structurally valid image whose chunks hold random
 * bytes (valid headers and CRCs, but not zlib data) for tests of the transport
 * alone, such as frisbee --raw.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/format.h"

int main(int argc, char **argv)
{
	struct ndz_chunk_hdr *h;
	uint8_t *chunk;
	unsigned long n, seed;
	uint32_t per = NDZ_CHUNK_SIZE / NDZ_SECTOR_SIZE;
	FILE *f;

	if (argc != 4) {
		fprintf(stderr, "usage: mkfakeimg OUT CHUNKS SEED\n");
		return 2;
	}
	n = strtoul(argv[2], NULL, 10);
	seed = strtoul(argv[3], NULL, 10);
	h = calloc(1, sizeof(*h));
	chunk = malloc(NDZ_CHUNK_SIZE);
	f = fopen(argv[1], "wb");
	if (!h || !chunk || !f || n == 0) {
		fprintf(stderr, "mkfakeimg: cannot start\n");
		return 1;
	}
	srandom((unsigned)seed);
	for (int i = 0; i < 16; i++)
		h->uuid[i] = (uint8_t)random();
	h->version = NDZ_VERSION_1;
	h->sector_size = NDZ_SECTOR_SIZE;
	h->codec = NDZ_CODEC_ZLIB;
	h->source_bytes = (uint64_t)n * per * NDZ_SECTOR_SIZE;
	h->source_sectors = (uint64_t)n * per;
	for (unsigned long i = 0; i < n; i++) {
		uint8_t *d = chunk + NDZ_HDR_SIZE;

		memset(chunk, 0, NDZ_CHUNK_SIZE);
		h->index = (uint32_t)i;
		h->chunk_flags = i == n - 1 ? NDZ_CHUNK_LAST : 0;
		h->first = (uint64_t)i * per;
		h->last = h->first + per;
		h->nregions = 1;
		ndz_hdr_set_region(chunk, 0, (struct ndz_region){ h->first, per });
		h->data_len = NDZ_MAX_DATA - (uint32_t)(random() % 4096);
		for (uint32_t k = 0; k < h->data_len; k++)
			d[k] = (uint8_t)(random() >> 7);
		h->data_crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), d, h->data_len);
		if (ndz_hdr_encode(h, chunk, NULL) != 0 || fwrite(chunk, NDZ_CHUNK_SIZE, 1, f) != 1) {
			fprintf(stderr, "mkfakeimg: cannot write chunk %lu\n", i);
			return 1;
		}
	}
	if (fclose(f) != 0)
		return 1;
	free(h);
	free(chunk);
	return 0;
}
