/*
 * libFuzzer target for the content index decoder (lib/trust/index.c): its bytes come
 * from a server or a file beside an image, so they are untrusted.
 * Input: one mode byte, then the bytes. Mode 0 decodes them as they are without a
 * key; mode 1 with a fixed public key; mode 2 first stamps the key's id and a valid
 * signature on them, so the checks behind the signature get explored. Whatever is
 * accepted must satisfy the documented invariants and encode back to the same bytes.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "core/format.h"
#include "trust/index.h"
#include "trust/key.h"
#include "signfix.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SIG 64

/* The invariants of an accepted index. */
static void check(const struct ndz_index *ix, const uint8_t *buf, size_t size, int keyed)
{
	uint64_t prev = 0;
	uint8_t *again;
	size_t len;
	uint32_t i, j;
	struct ndz_index copy = *ix;

	if (ix->chunks == 0 || ix->chunks > NDZ_INDEX_MAX_CHUNKS || !ix->e ||
	    ix->signed_ != keyed)
		abort();
	for (i = 0; i < ix->chunks; i++) {
		const struct ndz_index_entry *x = &ix->e[i];
		uint64_t end = x->first;

		if (x->first > x->last || x->first < prev || x->nregions > NDZ_MAX_REGIONS ||
		    (x->nregions && !x->regions))
			abort();
		for (j = 0; j < x->nregions; j++) {
			if (!x->regions[j].count || x->regions[j].start < end ||
			    x->regions[j].start + x->regions[j].count > x->last)
				abort();
			end = x->regions[j].start + x->regions[j].count;
		}
		prev = x->last;
		/* pieces tile the chunk's compressed data from 0 and its data exactly */
		{
			uint64_t doff = 0, coff = 0;

			for (j = 0; j < x->npieces; j++) {
				const struct ndz_index_piece *p = &x->pieces[j];

				if (p->doff != doff || p->coff != coff || !p->dlen || !p->clen ||
				    p->dlen % 512 || p->dlen > NDZ_INDEX_MAX_PIECE ||
				    coff + p->clen > NDZ_CHUNK_SIZE - NDZ_HDR_SIZE)
					abort();
				doff += p->dlen;
				coff += p->clen;
			}
			for (j = 0, end = 0; x->npieces && j < x->nregions; j++)
				end += (uint64_t)x->regions[j].count * 512;
			if (x->npieces && doff != end)
				abort();
		}
	}
	/* Unsigned, it encodes back to the same bytes. */
	if (!keyed && ndz_index_encode(&copy, NULL, &again, &len, NULL) == 0) {
		int zero_id = 1;

		for (i = 0; i < NDZ_KEY_ID_LEN; i++)
			zero_id &= buf[OFF_KEY_ID + i] == 0;
		if (len != size || (zero_id && memcmp(again, buf, size) != 0) ||
		    memcmp(again, buf, OFF_KEY_ID) != 0)
			abort();
		free(again);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ndz_error e = { 0 };
	struct ndz_index ix;
	uint8_t *buf;
	int rc, mode;

	setup();
	if (size < 1)
		return 0;
	mode = data[0] % 3;
	buf = take(data, size--);
	if (mode == 2 && size >= 64 + SIG)
		stamp(buf, size, SIG);
	rc = ndz_index_decode(buf, size, mode ? &pub : NULL, &ix, &e);
	if (rc > 0 || strcmp(ndz_strerror(rc), "unknown error") == 0)
		abort();
	if (rc == 0) {
		check(&ix, buf, size, mode != 0);
		ndz_index_release(&ix);
	} else if (ix.e || !e.code) {
		abort();
	}
	free(buf);
	return 0;
}
