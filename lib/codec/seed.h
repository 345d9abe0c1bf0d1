/*
 * Seeding a restore from what its target already holds (issue 23): for a chunk of
 * an image's content index, read the target's bytes where the chunk writes and
 * compare their digest with the index's. A chunk the target holds need not be
 * fetched, read from the image or written; after a restore, the same check of every
 * chunk says whether the target holds the image (--verify). A zstd chunk's pieces
 * (issue 32) let a chunk the target holds most of be patched: only its pieces that
 * differ are read from the image, decoded and written.
 */
#ifndef NDZ_SEED_H
#define NDZ_SEED_H

#include <stdint.h>

#include "core/err.h"
#include "core/io.h"
#include "trust/index.h"

struct ndz_seed_opts {
	uint64_t target_offset;          /* where sector 0 of the image is on the target */
	int zero_fill;                   /* -z: the chunk's gaps in [first, last) must read
					    as zero too, or it is not held */
	int direct;                      /* read past the page cache (verify after write) */
};

/* A checker of one target against one index; one per thread. */
struct ndz_seed;

/*
 * ndz_seed_create - a checker reading target (not owned) for ix (not owned; both
 * outlive it). 0 and *out, or NDZ_ENOMEM / NDZ_EINVAL with e.
 */
int ndz_seed_create(struct ndz_io *target, const struct ndz_index *ix,
		    const struct ndz_seed_opts *o, struct ndz_seed **out, struct ndz_error *e);

/* ndz_seed_free - NULL is fine. */
void ndz_seed_free(struct ndz_seed *s);

/*
 * ndz_seed_check - does the target hold chunk i? 1: every byte it writes is there
 * (and with zero_fill, its gaps are zero); 0: not (a target too short for it is
 * "not"); a negative code (a read error other than past the end) with e.
 */
int ndz_seed_check(struct ndz_seed *s, uint32_t i, struct ndz_error *e);

/* What ndz_seed_holds found: chunks checked, how many differ, the first that does. */
struct ndz_seed_verdict {
	uint32_t chunks;
	uint32_t differ;
	uint32_t first;                  /* valid when differ */
};

/*
 * ndz_seed_holds - does target hold the image ix is the index of? Every chunk
 * checked in order (o as for ndz_seed_create; callers checking after a write set
 * direct). The one verdict of imagekey verify --target, imageunzip --verify and
 * frisbee --verify: 0 when every chunk is held; NDZ_EVERIFY when some differ, e
 * "TARGET does not hold the image: N of M chunks differ (the first: chunk K)";
 * another negative code for a read error, with e. v (may be NULL) gets the counts.
 */
int ndz_seed_holds(struct ndz_io *target, const struct ndz_index *ix,
		   const struct ndz_seed_opts *o, struct ndz_seed_verdict *v,
		   struct ndz_error *e);

/* What ndz_seed_patch did, added up over its calls. */
struct ndz_seed_patch_stats {
	uint32_t chunks;                 /* chunks patched (at least one piece lacking) */
	uint32_t pieces;                 /* pieces of those chunks */
	uint32_t pieces_written;         /* pieces decoded and written */
	uint64_t image_bytes;            /* bytes read from the image (headers and pieces) */
	uint64_t bytes_written;          /* bytes written to the target */
};

/*
 * ndz_seed_patch - bring chunk i of the target up to the image piece by piece
 * (doc/FORMAT.md, "Pieces"): each piece's target bytes are read and hashed; a piece
 * that does not match has its frame read from image (chunk i at byte at of it: a
 * file's at i x 1 MiB, a chunk in memory's at 0; only the chunk's header and that
 * frame are read), decoded with its
 * prefix from the target and the pieces decoded before, checked against the
 * piece's digest and then written. The chunk's header must say what the index
 * entry says. 1: the chunk is done (every piece held or written; stats counts it
 * when something was written); NDZ_SEED_WHOLE: every piece differs, nothing was
 * written, restore the chunk whole; 0: it cannot be done by pieces (no pieces, or
 * with zero_fill a gap that is not zero), check it whole; a negative code with e
 * (NDZ_ECORRUPT: a frame that does not decode or does not match its digest;
 * NDZ_EMISMATCH: a header that is not the index's; a read or write error).
 */
#define NDZ_SEED_WHOLE 2
int ndz_seed_patch(struct ndz_seed *s, struct ndz_io *image, uint64_t at, uint32_t i,
		   struct ndz_seed_patch_stats *st, struct ndz_error *e);

/*
 * ndz_seed_lacking - which pieces of chunk i the target lacks (their bytes read and
 * hashed as ndz_seed_patch does): bit j of lack ((npieces + 7) / 8 bytes, the
 * caller's) set for each piece j that differs. Returns how many do (0: every piece
 * is held; npieces: all differ, or with zero_fill a gap is not zero, so the chunk
 * is restored whole), or a negative code with e.
 */
int ndz_seed_lacking(struct ndz_seed *s, uint32_t i, uint8_t *lack, struct ndz_error *e);

/*
 * ndz_seed_patch_some - ndz_seed_patch of an image that holds only some frames of
 * chunk i (a chunk received in part, issue 32): avail (a bit per piece, as
 * ndz_seed_lacking's) says whose frames are there, beside the header. A lacking
 * piece whose frame is not: NDZ_SEED_MORE (pieces before it may be written; fetch
 * the rest and restore the chunk whole). Else as ndz_seed_patch.
 */
#define NDZ_SEED_MORE 3
int ndz_seed_patch_some(struct ndz_seed *s, struct ndz_io *image, uint64_t at, uint32_t i,
			const uint8_t *avail, struct ndz_seed_patch_stats *st,
			struct ndz_error *e);

/*
 * ndz_seed_worth_checking - whether to check chunk i at all, or restore it without
 * looking: 0 once the last few chunks checked differed everywhere (the target holds
 * nothing of the image, as a new disk), except every few chunks, so that a target
 * that holds the image again further on is noticed. Restoring a held chunk is only
 * slower, never wrong.
 */
int ndz_seed_worth_checking(const struct ndz_seed *s, uint32_t i);

/* ndz_seed_bytes_read - target bytes the checker has read so far. */
uint64_t ndz_seed_bytes_read(const struct ndz_seed *s);

/*
 * ndz_index_build - the content index of a stored image (imagekey index): every
 * chunk of image (a file, not owned; a stream is NDZ_ENOTSUP) decompressed in order through the
 * restore pipeline (lib/codec/unzip: data CRCs checked) into a target that only
 * hashes what it is given, so the image is not rewritten and nothing is written.
 * ix gets uuid, source size and every chunk's entry (released by the caller; on
 * failure too). 0, or NDZ_ENOTSUP (an encrypted or original-format image: their
 * index is made when they are made or converted) or a code of the reader or the
 * pipeline, with e naming name.
 */
int ndz_index_build(struct ndz_io *image, const char *name, struct ndz_index *ix,
		    struct ndz_error *e);

#endif
