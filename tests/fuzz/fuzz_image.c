/*
 * libFuzzer target for a whole image's rules (lib/image.c). Input: an expected
 * chunk count (0: none), then 8-byte records, each a chunk header in brief: index,
 * LAST flag, first and span, identity. Every header is added in the order given.
 * Whatever was accepted must obey the rules: each index once, at most one LAST and
 * nothing past it, chained neighbours; an image called complete must hold every
 * chunk from 0 to its LAST one, tiling [0, source) exactly.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/format.h"
#include "core/image.h"
#include "core/le.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXI 64                        /* indexes the records can name, mostly */

struct seen {
	int have;
	uint64_t first, last;
	int is_last;
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct seen s[MAXI];
	struct ndz_image *im;
	struct ndz_error e;
	uint32_t expect, i, nlast = 0, top = 0;
	uint64_t source, acc_source = 0;

	if (size < 2)
		return 0;
	memset(s, 0, sizeof(s));
	expect = data[0] % 8 ? 0 : data[1] % MAXI;
	source = 10u * (data[1] % 16 + 1);
	data += 2;
	size -= 2;
	if (ndz_image_create(&im, NULL) < 0)
		abort();
	ndz_image_expect(im, expect, NULL);
	for (; size >= 8; data += 8, size -= 8) {
		struct ndz_chunk_hdr h;
		int rc;

		memset(&h, 0, sizeof(h));
		h.version = NDZ_VERSION_1;
		h.sector_size = NDZ_SECTOR_SIZE;
		h.codec = NDZ_CODEC_ZLIB;
		/* now and then an index far past any other, which must be refused */
		h.index = data[0] & 0x80 ? get_le32(data + 4) | 0x100000u : data[0] % MAXI;
		h.chunk_flags = data[1] & 1 ? NDZ_CHUNK_LAST : 0;
		h.source_sectors = source + (data[1] & 2 ? 1 : 0);   /* another image, at times */
		h.source_bytes = h.source_sectors * NDZ_SECTOR_SIZE;
		h.first = data[2] % (source + 1);
		h.last = h.first + data[3] % (source - h.first + 1);
		if (h.chunk_flags & NDZ_CHUNK_LAST)
			h.last = h.source_sectors;
		memset(&e, 0, sizeof(e));
		rc = ndz_image_add(im, &h, &e);
		if (rc > 0 || (rc < 0 && (e.code != rc || !e.msg[0])))
			abort();
		if (rc < 0)
			continue;
		if (h.index >= MAXI || (expect && h.index >= expect) || s[h.index].have)
			abort();       /* out of range, or a duplicate, was accepted */
		if (acc_source && h.source_sectors != acc_source)
			abort();       /* two images mixed */
		acc_source = h.source_sectors;
		s[h.index].have = 1;
		s[h.index].first = h.first;
		s[h.index].last = h.last;
		s[h.index].is_last = !!(h.chunk_flags & NDZ_CHUNK_LAST);
		nlast += s[h.index].is_last;
		if (h.index + 1 > top)
			top = h.index + 1;
	}
	if (nlast > 1)
		abort();
	for (i = 0; i < MAXI; i++) {
		if (!s[i].have)
			continue;
		if (i == 0 && s[i].first != 0)
			abort();
		if (i > 0 && s[i - 1].have && s[i - 1].last != s[i].first)
			abort();
		if (nlast && !s[i].is_last && i + 1 == top)
			abort();       /* a chunk past the LAST one */
	}
	if (ndz_image_complete(im, NULL) == 0) {
		if (!nlast || ndz_image_added(im) != top || !s[top - 1].is_last)
			abort();
		for (i = 0; i < top; i++)
			if (!s[i].have)
				abort();
		/* chained from sector 0 to the end: the spans tile the source */
		if (s[top - 1].last != acc_source)
			abort();
	}
	ndz_image_free(im);
	return 0;
}
