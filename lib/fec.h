/*
 * Repair blocks: a systematic erasure code over each stripe of a chunk
 * (doc/PROTOCOL.md, "Repair blocks"). A chunk's 1024 blocks form 8 stripes,
 * stripe s holding blocks s, s + 8, s + 16, ...: 128 data blocks. Repair r
 * (0..126) of a stripe is a fixed linear combination of its data blocks over
 * GF(2^8), row 128 + r of a Cauchy matrix, so any 128 distinct blocks and
 * repairs of a stripe give back all of its data blocks.
 */
#ifndef NDZ_FEC_H
#define NDZ_FEC_H

#include <stdint.h>

#include "format.h"

#define NDZ_FEC_STRIPES 8u
#define NDZ_FEC_K       (NDZ_BLOCKS_PER_CHUNK / NDZ_FEC_STRIPES)  /* data blocks a stripe */
#define NDZ_FEC_REPAIRS (255u - NDZ_FEC_K)                       /* distinct repairs a stripe */

_Static_assert(NDZ_FEC_K * NDZ_FEC_STRIPES == NDZ_BLOCKS_PER_CHUNK, "stripes cover a chunk");
_Static_assert(NDZ_FEC_K + NDZ_FEC_REPAIRS <= 255u, "a Cauchy code over GF(2^8)");

/* The stripe of block b of a chunk, and the j-th data block of stripe s. */
static inline unsigned ndz_fec_stripe(unsigned b)
{
	return b % NDZ_FEC_STRIPES;
}

static inline unsigned ndz_fec_block(unsigned s, unsigned j)
{
	return s + j * NDZ_FEC_STRIPES;
}

struct ndz_fec;

/* ndz_fec_create - the code's tables (about 0.5 MiB); NDZ_ENOMEM. */
int ndz_fec_create(struct ndz_fec **out);
/* ndz_fec_free - free c; accepts NULL. */
void ndz_fec_free(struct ndz_fec *c);

/*
 * ndz_fec_encode - repair index (< NDZ_FEC_REPAIRS) of stripe (< NDZ_FEC_STRIPES) of
 * the whole chunk at chunk (NDZ_CHUNK_SIZE bytes) into out (NDZ_BLOCK_SIZE bytes).
 */
void ndz_fec_encode(const struct ndz_fec *c, const uint8_t *chunk, unsigned stripe,
		    unsigned index, uint8_t *out);

/*
 * ndz_fec_decode - fill in the missing data blocks of stripe in chunk: have is
 * the chunk's block bitmap (NDZ_BITMAP_BYTES; blocks of other stripes are not
 * looked at), idx[0..nrep) distinct repair indexes of this stripe with their
 * blocks rep[]. Uses the first e repairs, e the number of missing blocks; sets
 * their bits in have. Returns 0 (also when nothing is missing), NDZ_EINVAL when
 * nrep < e or an index is out of range or repeated, NDZ_ENOMEM.
 */
int ndz_fec_decode(const struct ndz_fec *c, uint8_t *chunk, uint8_t *have, unsigned stripe,
		   const uint8_t *idx, const uint8_t *const *rep, unsigned nrep);

#endif
