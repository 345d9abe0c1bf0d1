/* The compressor: an ordered list of allocated sector ranges -> 1 MiB image chunks. */
#ifndef NDZ_ZIP_H
#define NDZ_ZIP_H

#include <stdint.h>

#include "core/err.h"
#include "core/format.h"
#include "core/io.h"
#include "core/ranges.h"
#include "trust/index.h"

/*
 * Receives each finished chunk in order; returns 0, or a negative code to stop
 * with e saying why (naming the output).
 */
typedef int (*ndz_chunk_fn)(void *ctx, const uint8_t *chunk, uint32_t index,
			    struct ndz_error *e);
/* Progress: input bytes consumed so far out of the total to read. */
typedef void (*ndz_progress_fn)(void *ctx, uint64_t done, uint64_t total);

struct ndz_zip_opts {
	int codec;                     /* NDZ_CODEC_ZLIB (default) or NDZ_CODEC_ZSTD */
	int level;                     /* zlib 0-9 (default 4), zstd 1-19 (default 3) */
	int threads;                   /* compression workers; <= 0: online cores */
	uint8_t uuid[16];              /* image UUID; all zero: a random one is made */
	uint16_t image_kind;           /* NDZ_KIND_*, with the part_* fields below */
	uint16_t part_index;
	uint32_t part_type;
	uint64_t part_start;
	uint32_t reserve;              /* data bytes each chunk leaves free (encryption) */
	ndz_progress_fn progress;
	void *progress_ctx;
	/*
	 * The content index to fill (doc/FORMAT.md), or NULL: each chunk's entry is
	 * set (ndz_index_set) before the chunk is handed to out, its digest the
	 * SHA-256 of the uncompressed bytes compressed into it, clipped to
	 * source_bytes. The index must be zeroed or initialised; the caller owns it.
	 */
	struct ndz_index *index;
};

struct ndz_zip_stats {
	uint32_t chunks;
	uint64_t in_bytes;             /* allocated bytes read and compressed */
	uint64_t out_bytes;            /* image bytes (chunks * 1 MiB) */
	uint64_t data_bytes;           /* compressed bytes in those chunks */
};

#define NDZ_ZLIB_DEFAULT_LEVEL 4
#define NDZ_ZSTD_DEFAULT_LEVEL 3       /* zstd's own default: fast, better than zlib -4 */

/*
 * The zstd codec's limit (doc/FORMAT.md, codec 2), the same for writer and reader:
 * each frame of a chunk is decoded with up to NDZ_ZSTD_PREFIX bytes of the chunk's
 * output before it as a raw-content prefix, and holds at most that much itself.
 * The writer's window covers both.
 */
#define NDZ_ZSTD_PREFIX     (2u << 20)
#define NDZ_ZSTD_WINDOW_LOG 22

/* ndz_zip_opts_init - defaults: zlib level 4, threads from the online cores. */
void ndz_zip_opts_init(struct ndz_zip_opts *o);

/*
 * ndz_zip - read the sectors in alloc (normalized, within the source) from src,
 * whose exact size is source_bytes, and emit chunks through out in order.
 * Every chunk is independent and as full as the data allows; the output does not
 * depend on the number of threads. Sectors past source_bytes read as zeros.
 * Reentrant: nothing is shared between calls. Returns 0 or a negative code with
 * e (may be NULL) naming what failed.
 */
int ndz_zip(struct ndz_io *src, uint64_t source_bytes, const struct ndz_ranges *alloc,
	    const struct ndz_zip_opts *opts, ndz_chunk_fn out, void *out_ctx,
	    struct ndz_zip_stats *stats, struct ndz_error *e);

#endif
