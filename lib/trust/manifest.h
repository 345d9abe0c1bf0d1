/*
 * The signed manifest of an image (doc/FORMAT.md, "Signed and encrypted images"):
 * its identity and the hash of every chunk, signed with Ed25519 (libsodium); the
 * chunk hash is SHA-256 through OpenSSL's libcrypto (the CPU's SHA instructions).
 */
#ifndef NDZ_MANIFEST_H
#define NDZ_MANIFEST_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/format.h"
#include "key.h"

#define NDZ_HASH_LEN       32           /* SHA-256 or BLAKE2b-256 */
#define NDZ_SIG_LEN        64           /* Ed25519 */
#define NDZ_MANIFEST_FIXED 64           /* manifest bytes before the chunk hashes */
#define NDZ_MANIFEST_MAX_CHUNKS (1u << 24)

/* Chunk hash algorithms, as the manifest names them (doc/FORMAT.md) */
#define NDZ_HASH_BLAKE2B_256 1u         /* manifests before SHA-256: still read */
#define NDZ_HASH_SHA256      2u         /* what manifests are signed with */

/*
 * ndz_chunk_hash - the SHA-256 of a whole NDZ_CHUNK_SIZE chunk, as stored: the
 * hash new manifests carry. Thread-safe. 0, or NDZ_ENOMEM (libcrypto failed) with
 * out zeroed (which no chunk matches) and e saying so.
 */
int ndz_chunk_hash(const uint8_t *chunk, uint8_t out[NDZ_HASH_LEN], struct ndz_error *e);

/*
 * What a manifest says about one image: its identity and the hash of every chunk,
 * index by index. hash is owned by the manifest (ndz_manifest_release).
 */
struct ndz_manifest {
	uint8_t uuid[16];
	uint8_t key_id[NDZ_KEY_ID_LEN]; /* the signing key's */
	uint32_t chunks;
	uint16_t codec;
	uint16_t hash_alg;              /* NDZ_HASH_*; 0: NDZ_HASH_SHA256 */
	uint32_t flags;                 /* NDZ_MANIFEST_ENCRYPTED */
	uint64_t source_bytes;
	uint8_t (*hash)[NDZ_HASH_LEN];  /* chunks entries */
};

#define NDZ_MANIFEST_ENCRYPTED 0x1u   /* the image's chunks are encrypted */

/*
 * ndz_manifest_init - an empty manifest for chunks chunks (hashes zero). 0, or
 * NDZ_EINVAL (0 or more than NDZ_MANIFEST_MAX_CHUNKS) or NDZ_ENOMEM, with e.
 */
int ndz_manifest_init(struct ndz_manifest *m, uint32_t chunks, struct ndz_error *e);
/* ndz_manifest_release - free the hashes; m may be zeroed or released already. */
void ndz_manifest_release(struct ndz_manifest *m);

/*
 * ndz_manifest_set_hash - the hash of the chunk (as stored; h its header),
 * growing m (its chunks is then the room, not yet the count) as need be; chunk 0
 * also gives m the image's identity (uuid, codec, source size, encryption). The
 * one place a manifest is filled, for imagezip --sign and imagekey sign alike.
 * 0, or NDZ_ERANGE (past NDZ_MANIFEST_MAX_CHUNKS), NDZ_EMISMATCH (encrypted and
 * plain chunks in one image) or NDZ_ENOMEM,
 * with e naming the chunk.
 */
int ndz_manifest_set_hash(struct ndz_manifest *m, const uint8_t *chunk,
			  const struct ndz_chunk_hdr *h, struct ndz_error *e);

/* ndz_manifest_size - bytes of an encoded manifest of chunks chunks. */
size_t ndz_manifest_size(uint32_t chunks);

/*
 * ndz_manifest_sign - encode m (its key_id is set from sec, its hash_alg to
 * NDZ_HASH_SHA256 when 0; the hashes must be of that algorithm) and sign it with sec
 * into *out (malloc'ed, ndz_manifest_size bytes, the caller frees). 0, or a code
 * (NDZ_EINVAL: not a secret signing key or no chunks; NDZ_ENOMEM) with e.
 */
int ndz_manifest_sign(struct ndz_manifest *m, const struct ndz_key *sec, uint8_t **out,
		      size_t *len, struct ndz_error *e);

/*
 * ndz_manifest_open - parse an encoded manifest (untrusted bytes) and check its
 * signature with pub: size, magic, version, algorithms, then the key id (another
 * key's: NDZ_EWRONGKEY), then the signature (NDZ_ESIGNATURE); NDZ_EMANIFEST for
 * anything malformed. On 0, m holds it (release it); else m is empty and e says
 * why.
 */
int ndz_manifest_open(const uint8_t *buf, size_t len, const struct ndz_key *pub,
		      struct ndz_manifest *m, struct ndz_error *e);

/*
 * ndz_manifest_check_shape - without a key (a server): buf is shaped like the
 * manifest of an image of chunks chunks (magic, version, size). 0 or NDZ_EMANIFEST
 * with e saying what is wrong. Says nothing of its signature.
 */
int ndz_manifest_check_shape(const uint8_t *buf, size_t len, uint32_t chunks,
			     struct ndz_error *e);

/*
 * ndz_manifest_read - the bytes of the manifest file at path into *out (malloc'ed,
 * the caller frees), *len bytes, at most a manifest's largest size. 0, or
 * NDZ_EUNSIGNED (no such file), NDZ_EMANIFEST or NDZ_EIO with e naming path.
 */
int ndz_manifest_read(const char *path, uint8_t **out, size_t *len, struct ndz_error *e);

/*
 * ndz_manifest_load - read the manifest file at path and open it with pub, as
 * ndz_manifest_open; e names path.
 */
int ndz_manifest_load(const char *path, const struct ndz_key *pub, struct ndz_manifest *m,
		      struct ndz_error *e);

/*
 * ndz_manifest_match - 0 when the image whose chunk header h is belongs to m (uuid,
 * source size, codec, encryption), else NDZ_EMISMATCH with e saying what differs.
 */
int ndz_manifest_match(const struct ndz_manifest *m, const struct ndz_chunk_hdr *h,
		       struct ndz_error *e);

/*
 * ndz_manifest_check_chunk - the whole chunk (header h decoded from it) is the one
 * the manifest signs for its index: 0, NDZ_ERANGE (index past the manifest) or
 * NDZ_EFORGED (or NDZ_ENOMEM), with e naming the chunk. The hash is of the
 * manifest's algorithm. A chunk that passes needs no data CRC or padding check:
 * the signer checked those. Thread-safe (m is only read).
 */
int ndz_manifest_check_chunk(const struct ndz_manifest *m, const uint8_t *chunk,
			     const struct ndz_chunk_hdr *h, struct ndz_error *e);

/*
 * ndz_manifest_path - the detached manifest's default name for image: "IMAGE.manifest"
 * into out (len bytes). 0, or NDZ_EINVAL when it does not fit (e names image).
 */
int ndz_manifest_path(const char *image, char *out, size_t len, struct ndz_error *e);

/*
 * ndz_manifest_save - write an encoded manifest to path, through a temporary file
 * renamed over it (a reader never sees half of one). 0 or a code with e naming path.
 */
int ndz_manifest_save(const char *path, const uint8_t *buf, size_t len, struct ndz_error *e);

#endif
