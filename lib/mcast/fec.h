/*
 * Repair blocks: erasure codes over a chunk (doc/PROTOCOL.md, "Repair blocks").
 * Two kinds, told apart by a "set" number:
 * - sets 0-7, stripes: a chunk's 1024 blocks form 8 stripes, stripe s holding
 *   blocks s, s + 8, s + 16, ...: 128 data blocks. Repair r (0..126) of a stripe
 *   is a fixed linear combination of its data blocks over GF(2^8), row 128 + r
 *   of a Cauchy matrix, so any 128 distinct blocks and repairs of a stripe give
 *   back all of its data blocks.
 * - set 8, the whole chunk: repair r (0..254) is a combination of all 1024
 *   blocks with pseudo-random coefficients (ndz_fec_wcoef). With e blocks lost,
 *   e such repairs almost always (about 99.6%) give them back, one more nearly
 *   always: the most any one client lost, not the sum over stripes of the most
 *   lost in each.
 */
#ifndef NDZ_FEC_H
#define NDZ_FEC_H

#include <stdint.h>

#include "core/err.h"
#include "core/format.h"

#define NDZ_FEC_STRIPES 8u
#define NDZ_FEC_K       (NDZ_BLOCKS_PER_CHUNK / NDZ_FEC_STRIPES)  /* data blocks a stripe */
#define NDZ_FEC_REPAIRS (255u - NDZ_FEC_K)                       /* distinct repairs a stripe */

#define NDZ_FEC_WHOLE   NDZ_FEC_STRIPES   /* the set of whole-chunk repairs */
#define NDZ_FEC_SETS    (NDZ_FEC_STRIPES + 1u)
#define NDZ_FEC_WREPAIRS 255u                                    /* distinct whole-chunk repairs */
/* The most repairs of one set a request asks for (clients ask for the blocks past
 * that); a server sends no more for one request, whatever it asks (doc/PROTOCOL.md). */
#define NDZ_FEC_ASK_MAX 32u

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

/* The number of distinct repairs of set (a stripe, or NDZ_FEC_WHOLE). */
static inline unsigned ndz_fec_repairs(unsigned set)
{
	return set == NDZ_FEC_WHOLE ? NDZ_FEC_WREPAIRS : NDZ_FEC_REPAIRS;
}

/*
 * ndz_fec_wcoef - the coefficient of block j (< 1024) in whole-chunk repair r
 * (< NDZ_FEC_WREPAIRS): a byte of a 32-bit hash of r and j, never 0
 * (doc/PROTOCOL.md gives the formula).
 */
uint8_t ndz_fec_wcoef(unsigned r, unsigned j);

struct ndz_fec;

/* ndz_fec_create - the code's tables (about 0.5 MiB); NDZ_ENOMEM (e may be NULL). */
int ndz_fec_create(struct ndz_fec **out, struct ndz_error *e);
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
 * nrep < e or an index is out of range or repeated, NDZ_ENOMEM, with err (may be
 * NULL) saying which.
 */
int ndz_fec_decode(const struct ndz_fec *c, uint8_t *chunk, uint8_t *have, unsigned stripe,
		   const uint8_t *idx, const uint8_t *const *rep, unsigned nrep,
		   struct ndz_error *err);

/*
 * ndz_fec_wprepare - room for the whole-chunk repairs' encoding tables (32 KiB a
 * repair index, each filled on its first use): 0 or NDZ_ENOMEM. A server calls it
 * once, so that encoding cannot fail later; a client that only decodes need not.
 */
int ndz_fec_wprepare(struct ndz_fec *c, struct ndz_error *e);

/*
 * ndz_fec_wencode - whole-chunk repair index (< NDZ_FEC_WREPAIRS) of chunk into
 * out (NDZ_BLOCK_SIZE bytes). Returns 0, NDZ_EINVAL for a bad index, NDZ_ENOMEM
 * when ndz_fec_wprepare was not called and the tables cannot be had (e may be NULL).
 */
int ndz_fec_wencode(struct ndz_fec *c, const uint8_t *chunk, unsigned index, uint8_t *out,
		    struct ndz_error *e);

/*
 * ndz_fec_wdecode - fill in every missing block of chunk (bitmap have, as for
 * ndz_fec_decode) from repairs idx[0..nrep) of sets set[0..nrep) (NULL: all
 * whole-chunk ones; stripe repairs count too, as equations over their stripe's
 * blocks), with their blocks rep[]; chunk NULL: only find out whether they would
 * (a client that keeps no data). Returns 0 with every bit of have set (also when nothing
 * was missing), 1 when the repairs do not determine the missing blocks yet
 * (fewer repairs than missing blocks, or dependent ones: one more repair will
 * do, almost always), NDZ_EINVAL for a bad or repeated index, NDZ_ENOMEM, with e (may be NULL) saying which.
 */
int ndz_fec_wdecode(uint8_t *chunk, uint8_t *have, const uint8_t *set, const uint8_t *idx,
		    const uint8_t *const *rep, unsigned nrep, struct ndz_error *e);

/*
 * Range repairs (doc/PROTOCOL.md, "Range repairs"): repair r (< NDZ_FEC_WREPAIRS) over
 * the blocks [first, first + count) of a chunk is the whole-chunk repair r with the
 * coefficients of the blocks outside the range taken as 0. A client that receives only
 * some blocks of a chunk (a seeded reload) heals its losses in a range it wants without
 * the chunk's other blocks. A range: first < 1024, 1 <= count <= 1024 - first.
 */
/* Block ranges of one chunk a server keeps range repairs wanted for at once; a client
 * asks for repairs of no more at a time. */
#define NDZ_FEC_RANGES_MAX 8u

static inline int ndz_fec_range_ok(unsigned first, unsigned count)
{
	return first < NDZ_BLOCKS_PER_CHUNK && count >= 1 && count <= NDZ_BLOCKS_PER_CHUNK - first;
}

/*
 * ndz_fec_rencode - range repair index of blocks [first, first + count) of chunk into
 * out (NDZ_BLOCK_SIZE bytes), with the whole-chunk repairs' tables (made on first use:
 * ndz_fec_wprepare). Returns 0, NDZ_EINVAL for a bad range or index, NDZ_ENOMEM as
 * ndz_fec_wencode (e may be NULL).
 */
int ndz_fec_rencode(struct ndz_fec *c, const uint8_t *chunk, unsigned first, unsigned count,
		    unsigned index, uint8_t *out, struct ndz_error *e);

/*
 * ndz_fec_rdecode - as ndz_fec_wdecode with whole-chunk repairs only, for range repairs
 * idx[0..nrep) of blocks [first, first + count): fills in the blocks of the range
 * missing in have (blocks outside it are not looked at, nor read: their bytes may be
 * anything). Returns 0 with the range's bits of have set, 1 when the repairs do not
 * determine them yet, NDZ_EINVAL for a bad range or a bad or repeated index, NDZ_ENOMEM
 * (e may be NULL). chunk NULL: only find out whether they would.
 */
int ndz_fec_rdecode(uint8_t *chunk, uint8_t *have, unsigned first, unsigned count,
		    const uint8_t *idx, const uint8_t *const *rep, unsigned nrep,
		    struct ndz_error *e);

#endif
