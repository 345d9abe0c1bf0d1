/*
 * Bitmaps of a chunk's blocks, one bit per block: what a client still needs, what a
 * server was asked for, which repairs are made. Shared by the wire protocol and the
 * erasure code, so neither has to include the other.
 */
#ifndef NDZ_BITS_H
#define NDZ_BITS_H

#include <stdint.h>

#include "format.h"

#define NDZ_BITMAP_BYTES    (NDZ_BLOCKS_PER_CHUNK / 8u) /* one bit per block of a chunk */

/* Bitmap helpers over NDZ_BITMAP_BYTES bytes. */
static inline int ndz_bit_test(const uint8_t *bm, unsigned b)
{
	return (bm[b >> 3] >> (b & 7)) & 1;
}

static inline void ndz_bit_set(uint8_t *bm, unsigned b)
{
	bm[b >> 3] = (uint8_t)(bm[b >> 3] | (1u << (b & 7)));
}

static inline void ndz_bit_clear(uint8_t *bm, unsigned b)
{
	bm[b >> 3] = (uint8_t)(bm[b >> 3] & ~(1u << (b & 7)));
}

/* ndz_bit_count - the number of set bits in a block bitmap. */
static inline unsigned ndz_bit_count(const uint8_t *bm)
{
	unsigned n = 0;

	for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++)
		n += (unsigned)__builtin_popcount(bm[i]);
	return n;
}

#endif
