/*
 * The restorer: validated chunks in any order -> decompression threads -> one
 * writer thread doing large pwrite()s. Shared by imageunzip and frisbee.
 */
#ifndef NDZ_UNZIP_H
#define NDZ_UNZIP_H

#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "io.h"

struct ndz_unzip;

struct ndz_unzip_opts {
	int threads;                   /* decompressors; <= 0: online cores */
	size_t mem_limit;              /* bytes of buffers at most; 0: 128 MiB */
	int zero_fill;                 /* write zeros between regions, lead and trail */
	int verify_only;               /* decompress and check, write nothing */
	uint64_t target_offset;        /* byte offset of sector 0 in the target */
	int target_zeroed;             /* the target reads as zeros (a new sparse file):
					  all-zero blocks are left as holes */
	void (*progress)(void *ctx, uint64_t bytes_written);
	void *progress_ctx;
};

struct ndz_unzip_stats {
	uint32_t chunks;
	uint64_t bytes_written;        /* region bytes written */
	uint64_t bytes_zeroed;         /* gap bytes zero-filled */
};

void ndz_unzip_opts_init(struct ndz_unzip_opts *o);

/*
 * ndz_unzip_create - start the threads. target may be NULL with verify_only.
 * target stays owned by the caller and must outlive the handle.
 * Returns 0 and *out or a negative code.
 */
int ndz_unzip_create(struct ndz_io *target, const struct ndz_unzip_opts *opts,
		     struct ndz_unzip **out);

/*
 * ndz_unzip_put - hand over one whole chunk (NDZ_CHUNK_SIZE bytes, copied).
 * The chunk is checked (ndz_chunk_check) and must belong to the same image as
 * the first one put; regions beyond the target are refused before anything is
 * written. Blocks while the buffers are full. Returns 0, or the first error of
 * the pipeline (the chunk's or an earlier one's); after an error nothing more is
 * written.
 */
int ndz_unzip_put(struct ndz_unzip *u, const uint8_t *chunk);

/*
 * ndz_unzip_finish - wait for everything put to be written, then flush the target.
 * Returns 0 only when every chunk was decompressed, written and flushed.
 */
int ndz_unzip_finish(struct ndz_unzip *u, struct ndz_unzip_stats *stats);

/* ndz_unzip_errmsg - a message naming what failed ("chunk 17: bad data checksum"). */
const char *ndz_unzip_errmsg(const struct ndz_unzip *u);

/* ndz_unzip_free - stop the threads (abandoning queued work) and free; NULL ok. */
void ndz_unzip_free(struct ndz_unzip *u);

/*
 * ndz_check_target - 0 when a target of target_bytes (after target_offset)
 * can hold the image described by hdr, else NDZ_ETOOSMALL.
 */
int ndz_check_target(const struct ndz_chunk_hdr *hdr, uint64_t target_bytes);

#endif
