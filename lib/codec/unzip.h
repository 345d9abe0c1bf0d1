/*
 * The restorer: validated chunks in any order -> decompression threads -> one
 * writer thread doing large pwrite()s. Shared by imageunzip and frisbee.
 */
#ifndef NDZ_UNZIP_H
#define NDZ_UNZIP_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/format.h"
#include "core/io.h"

struct ndz_unzip;
struct ndz_verify;
struct ndz_orig_keys;

struct ndz_unzip_opts {
	int threads;                   /* decompressors; <= 0: online cores */
	size_t mem_limit;              /* bytes of buffers at most; 0: 128 MiB */
	int zero_fill;                 /* write zeros between regions, lead and trail */
	int discard;                   /* discard them instead (ndz_io_discard) */
	int verify_only;               /* decompress and check, write nothing */
	uint64_t target_offset;        /* byte offset of sector 0 in the target */
	int target_zeroed;             /* the target reads as zeros (a new sparse file):
					  all-zero blocks are left as holes */
	/* called by the writer after each write: bytes written or zeroed, chunks decoded
	   (with verify_only after each piece checked: 0 bytes, chunks decoded) */
	void (*progress)(void *ctx, uint64_t bytes_done, uint32_t chunks_done);
	void *progress_ctx;
	/* called (with progress_ctx) by ndz_unzip_finish when everything is written and
	   the target's flush begins; not called when nothing is flushed */
	void (*flushing)(void *ctx);
	const char *name;              /* the image, in messages ("img.ndz: chunk 3: ..."); may be NULL */
	uint32_t expect_chunks;        /* the image has this many chunks; 0: not known */
	int expect_uuid_set;           /* the image has expect_uuid */
	uint8_t expect_uuid[16];
	/* the trust policy (lib/trust/verify.h): with a manifest each chunk must be the
	   one it signs before anything of it is written, with an encryption key chunks
	   are decrypted and plain ones refused; NULL: no keys (CRCs only, encrypted
	   chunks refused). Stays the caller's and must outlive the handle. */
	const struct ndz_verify *verify;
	/* original-format images (lib/orig.h): their keys (NULL: none; stays the
	   caller's), and the target's first sector on its disk, for disklabels */
	const struct ndz_orig_keys *orig_keys;
	uint64_t orig_base;
	int scratch;                   /* the target is a scratch file, unlinked and never
					  kept: it is not flushed */
};

struct ndz_unzip_stats {
	uint32_t chunks;
	uint64_t bytes_written;        /* region bytes written */
	uint64_t bytes_zeroed;         /* gap bytes zero-filled (or discarded) */
};

void ndz_unzip_opts_init(struct ndz_unzip_opts *o);

/*
 * ndz_unzip_create - start the threads. target may be NULL with verify_only.
 * target stays owned by the caller and must outlive the handle.
 * Returns 0 and *out, or NDZ_EINVAL (no target to write to) or NDZ_ENOMEM with
 * e (may be NULL) set.
 */
int ndz_unzip_create(struct ndz_io *target, const struct ndz_unzip_opts *opts,
		     struct ndz_unzip **out, struct ndz_error *e);

/* ndz_unzip_put flags */
#define NDZ_UNZIP_CHECKED 0x1          /* ndz_chunk_check passed on these very bytes */

/*
 * ndz_unzip_get_buf - a free chunk buffer (NDZ_CHUNK_SIZE bytes) of the pipeline
 * to fill, so that a chunk read or received goes in without a copy; blocks while
 * every buffer is in use. NULL after an error of the pipeline, which e (may be
 * NULL) gets. Hand it back with ndz_unzip_put_buf, filled or not (h NULL: unused).
 */
uint8_t *ndz_unzip_get_buf(struct ndz_unzip *u, struct ndz_error *e);

/*
 * ndz_unzip_put_buf - queue the chunk in buf (from ndz_unzip_get_buf) whose header
 * h was decoded from it; the buffer is the pipeline's again. The chunk takes its
 * place in the image (lib/image.h: one image, each index once, the chain), the
 * first one's size is checked against the target, all before anything of it is
 * written; the data checksum and padding are checked by a decoder unless flags
 * has NDZ_UNZIP_CHECKED. Returns 0, or the first error of the pipeline (this
 * chunk's or an earlier one's, which e (may be NULL) gets); after an error
 * nothing more is written.
 */
int ndz_unzip_put_buf(struct ndz_unzip *u, uint8_t *buf, const struct ndz_chunk_hdr *h,
		      unsigned flags, struct ndz_error *e);

/*
 * ndz_unzip_put - queue a copy of chunk; h is its decoded header, or NULL to have
 * it decoded here. As ndz_unzip_put_buf otherwise.
 */
int ndz_unzip_put(struct ndz_unzip *u, const uint8_t *chunk, const struct ndz_chunk_hdr *h,
		  unsigned flags, struct ndz_error *e);

/*
 * ndz_unzip_put_owned - queue the chunk in buf, a buffer of the caller's (NDZ_CHUNK_SIZE
 * bytes, e.g. from a lib/core/bufpool), decoded in place without a copy; h as for
 * ndz_unzip_put_buf. The pipeline owns buf from the call on and gives it back through
 * release(ctx, buf) (from any of its threads) once it is decoded, refused or dropped,
 * always exactly once. Blocks while every slot is in use. Returns as ndz_unzip_put_buf.
 */
int ndz_unzip_put_owned(struct ndz_unzip *u, uint8_t *buf, const struct ndz_chunk_hdr *h,
			unsigned flags, void (*release)(void *ctx, uint8_t *buf), void *ctx);

/*
 * ndz_unzip_held - chunk (of [first, last) sectors) is not put: the target already
 * holds it (a seeded restore, issue 23), and ndz_unzip_finish counts it as written.
 * Needs opts.expect_chunks. 0, or NDZ_ERANGE / NDZ_EDUP / NDZ_ENOMEM with e.
 */
int ndz_unzip_held(struct ndz_unzip *u, uint32_t chunk, uint64_t first, uint64_t last,
		   struct ndz_error *e);

/*
 * ndz_unzip_finish - wait for everything put to be written, check that the image
 * is whole (every chunk up to the LAST one), then flush the target. Returns 0
 * only when every chunk was decompressed, written and flushed; else the first
 * error, with e (may be NULL) saying what failed.
 */
int ndz_unzip_finish(struct ndz_unzip *u, struct ndz_unzip_stats *stats, struct ndz_error *e);

/*
 * ndz_unzip_piece - decode one piece of a zstd chunk on its own (doc/FORMAT.md,
 * "Pieces"): the clen bytes at c, exactly one frame stating dlen bytes (at most
 * 2 MiB), with the plen bytes at prefix as its raw-content prefix (the chunk's data
 * right before the piece, min(doff, 2 MiB) of it, from the target where its pieces
 * are held or from pieces decoded before), into
 * out (dlen bytes). The caller checks the result against the piece's digest before
 * writing it. 0, or NDZ_ECORRUPT / NDZ_ENOMEM with e naming the piece.
 */
int ndz_unzip_piece(const uint8_t *c, size_t clen, const uint8_t *prefix, size_t plen,
		    uint8_t *out, size_t dlen, struct ndz_error *e);

/* ndz_unzip_free - stop the threads (abandoning queued work) and free; NULL ok. */
void ndz_unzip_free(struct ndz_unzip *u);

#endif
