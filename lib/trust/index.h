/*
 * The content index of an image (doc/FORMAT.md, "The content index"): for every
 * chunk, the regions it writes and a SHA-256 digest of the bytes it writes, so that
 * a client can tell, before it has the chunk, whether its target already holds it
 * (seeded reloads, verify after write, resume). A detached file, IMAGE.index, like
 * the manifest; optionally signed with the image's Ed25519 key, and then the only
 * thing that may make a client with a public key skip a chunk.
 *
 * The digest of a chunk: SHA-256 over the bytes a restore writes for it, region by
 * region in order, each region's sectors clipped to the image's source_bytes (the
 * bytes of a last partial sector beyond it are not written, so not hashed). A chunk
 * without regions has the digest of no bytes.
 */
#ifndef NDZ_INDEX_H
#define NDZ_INDEX_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/format.h"
#include "key.h"

#define NDZ_INDEX_DIGEST_LEN 32          /* SHA-256 */
#define NDZ_INDEX_MAX_CHUNKS (1u << 24)

#define NDZ_INDEX_MAX_PIECE (2u << 20) /* a piece's data: one zstd frame's at most */

/*
 * A piece of a zstd chunk (doc/FORMAT.md, "Pieces"): one whole frame, at
 * coff of the chunk's compressed data (offset 4096 + coff of the chunk) for clen
 * bytes, decompressing to the chunk's uncompressed data [doff, doff + dlen), with
 * the data before doff as its prefix (codec 2's prefix rule: min(doff, 2 MiB) of it).
 * digest: SHA-256 of what a restore writes for [doff, doff + dlen), clipped to
 * source_bytes, as a chunk's digest.
 */
struct ndz_index_piece {
	uint64_t doff;
	uint32_t dlen, coff, clen;
	uint8_t digest[NDZ_INDEX_DIGEST_LEN];
};

/* One chunk's entry: what it writes and the digest of those bytes. */
struct ndz_index_entry {
	uint64_t first, last;            /* the chunk's [first, last) in sectors */
	uint32_t nregions;
	struct ndz_region *regions;      /* nregions, sorted; owned by the index */
	uint8_t digest[NDZ_INDEX_DIGEST_LEN];
	uint32_t npieces;                /* 0: the chunk is only known whole */
	struct ndz_index_piece *pieces;  /* npieces, tiling the chunk; owned by the index */
};

/*
 * An image's index. signed_ is 1 when the decoded file carried a signature that
 * ndz_index_decode checked against the public key it was given.
 */
struct ndz_index {
	uint8_t uuid[16];
	uint32_t chunks;
	uint64_t source_bytes;
	uint8_t key_id[NDZ_KEY_ID_LEN];  /* the signing key's; zero: unsigned */
	int signed_;
	struct ndz_index_entry *e;       /* chunks entries, by index */
};

/*
 * ndz_index_init - an empty index of chunks chunks (entries zero, no regions) for
 * the image uuid/source_bytes. 0, or NDZ_EINVAL (0 or more than the maximum) or
 * NDZ_ENOMEM with e.
 */
int ndz_index_init(struct ndz_index *ix, const uint8_t uuid[16], uint32_t chunks,
		   uint64_t source_bytes, struct ndz_error *e);

/* ndz_index_release - free everything of ix; ix may be zeroed or released already. */
void ndz_index_release(struct ndz_index *ix);

/*
 * ndz_index_set - entry i from chunk i's header h (its regions, first, last) and the
 * digest of what it writes, growing ix (chunks becomes at least i + 1) as need be.
 * 0, or NDZ_ERANGE / NDZ_ENOMEM with e naming the chunk.
 */
int ndz_index_set(struct ndz_index *ix, uint32_t i, const struct ndz_chunk_hdr *h,
		  const uint8_t *area, const uint8_t digest[NDZ_INDEX_DIGEST_LEN],
		  struct ndz_error *e);

/*
 * ndz_index_set_pieces - chunk i's pieces (n of them, copied; n = 0 drops them), in
 * order, tiling its compressed data from 0 and its uncompressed data from 0. Set
 * after ndz_index_set. 0, or NDZ_ERANGE (no such entry) / NDZ_ENOMEM with e.
 */
int ndz_index_set_pieces(struct ndz_index *ix, uint32_t i, const struct ndz_index_piece *p,
			 uint32_t n, struct ndz_error *e);

/*
 * ndz_index_piece_ranges - the disk ranges piece p of entry x writes, in sectors,
 * into out (at most cap; a piece inside one chunk's regions needs at most
 * x->nregions): the sectors [doff, doff + dlen) of the chunk's data fall on.
 * Returns the count.
 */
uint32_t ndz_index_piece_ranges(const struct ndz_index_entry *x,
				const struct ndz_index_piece *p, struct ndz_region *out,
				uint32_t cap);

/*
 * ndz_index_encode - ix as the file's bytes into *out (malloc'ed, the caller frees),
 * signed with sec when sec is not NULL (its key id is then ix's), else unsigned.
 * 0, or NDZ_EINVAL (sec not a secret signing key) / NDZ_ENOMEM with e.
 */
int ndz_index_encode(struct ndz_index *ix, const struct ndz_key *sec, uint8_t **out,
		     size_t *len, struct ndz_error *e);

/*
 * ndz_index_decode - parse and check len bytes of an index file into *ix (released
 * by the caller). Every field is checked (magic, version, algorithms, sizes, regions
 * sorted inside [first, last), chunks in order and not overlapping, a version 2
 * file's pieces tiling their chunks). With pub (a
 * public signing key): the file must be signed by that key (NDZ_EWRONGKEY: another
 * key's id; NDZ_EINDEXSIG: a bad signature; NDZ_EUNSIGNED: not signed at all), and
 * ix->signed_ is 1. Without pub the signature is not checked and signed_ is 0.
 * 0, or NDZ_EINDEX (malformed) or those codes, with e.
 */
int ndz_index_decode(const uint8_t *buf, size_t len, const struct ndz_key *pub,
		     struct ndz_index *ix, struct ndz_error *e);

/*
 * ndz_index_load / ndz_index_save - read and decode (as ndz_index_decode) or write
 * (ndz_file_replace: data, file and directory fsync'd) the index file at path.
 * ndz_index_path - the default path beside an image: IMAGE.index.
 */
int ndz_index_load(const char *path, const struct ndz_key *pub, struct ndz_index *ix,
		   struct ndz_error *e);
int ndz_index_save(const char *path, const uint8_t *buf, size_t len, struct ndz_error *e);
int ndz_index_path(const char *image, char *out, size_t cap, struct ndz_error *e);

/*
 * ndz_index_match - ix is the index of the image uuid/source_bytes with chunks
 * chunks (0: not known). 0, or NDZ_EMISMATCH with e naming the field.
 */
int ndz_index_match(const struct ndz_index *ix, const uint8_t uuid[16],
		    uint64_t source_bytes, uint32_t chunks, struct ndz_error *e);

/*
 * ndz_index_size_from_header - the total length of the index file whose first len
 * bytes (at least its 64-byte fixed part) are buf, from its chunk and region counts;
 * 0 when they are not an index's (bad magic, too short, no or too many chunks). A
 * reader fetching the index in pieces (frisbee --seed) knows from it how much more
 * to fetch; ndz_index_decode checks the rest.
 */
uint64_t ndz_index_size_from_header(const uint8_t *buf, size_t len);

/* An incremental digest of the bytes a chunk writes (SHA-256). */
struct ndz_digest;

/* ndz_digest_create - a digest in progress, or NULL (NDZ_ENOMEM with e). */
struct ndz_digest *ndz_digest_create(struct ndz_error *e);
/* ndz_digest_update - add len bytes; 0 or NDZ_ENOMEM (libcrypto failed) with e. */
int ndz_digest_update(struct ndz_digest *d, const void *buf, size_t len,
		      struct ndz_error *e);
/* ndz_digest_final - the digest into out and start again; 0 or NDZ_ENOMEM with e. */
int ndz_digest_final(struct ndz_digest *d, uint8_t out[NDZ_INDEX_DIGEST_LEN],
		     struct ndz_error *e);
/* ndz_digest_free - NULL is fine. */
void ndz_digest_free(struct ndz_digest *d);

#endif
