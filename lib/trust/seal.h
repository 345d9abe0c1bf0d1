/*
 * Sealing: the authenticated encryption of chunk payloads (XChaCha20-Poly1305 from
 * libsodium, AES-256-GCM from libcrypto) and the sealer, the chunk sink that
 * encrypts, hashes and builds the signed manifest of an image as it is written.
 */
#ifndef NDZ_SEAL_H
#define NDZ_SEAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/format.h"
#include "core/io.h"
#include "key.h"
#include "manifest.h"

/*
 * ndz_chunk_encrypt - encrypt a finished plain chunk in place with cipher (enum
 * ndz_cipher): a random nonce and the ciphertext of its data, authenticated with
 * the header area (ndz_hdr_auth_data); the header gets NDZ_INCOMPAT_ENCRYPTED (and
 * NDZ_INCOMPAT_AES256GCM for AES-256-GCM), the key's id, the new data_len and CRCs.
 * The data must leave NDZ_CRYPT_OVERHEAD bytes free. Thread-safe. Returns 0,
 * NDZ_EINVAL (not a crypt key, unknown cipher, already encrypted, no room; the
 * chunk unchanged), a header code, or NDZ_ENOMEM (libcrypto failed; the chunk is
 * undefined then), with e naming the chunk.
 */
int ndz_chunk_encrypt(const struct ndz_key *k, int cipher, uint8_t *chunk,
		      struct ndz_error *e);

/*
 * ndz_chunk_decrypt - decrypt the checked encrypted chunk whose header h was
 * decoded from it, in place, with the cipher its header names: afterwards the
 * data holds the compressed bytes and h says so (data_len, no NDZ_INCOMPAT_ENCRYPTED
 * or NDZ_INCOMPAT_AES256GCM); the header area is unchanged. A plain chunk is left
 * as it is. Thread-safe. Returns 0, NDZ_ENEEDKEY (k NULL), NDZ_EWRONGKEY (another
 * key's id) or NDZ_EDECRYPT (altered, moved, from another image, or its cipher bit
 * flipped; the data is undefined then), with e naming the chunk (may be NULL).
 */
int ndz_chunk_decrypt(const struct ndz_key *k, uint8_t *chunk, struct ndz_chunk_hdr *h,
		      struct ndz_error *e);

/*
 * ndz_manifest_build - read the stored image in (a file or a stream) whole and
 * fill m (ndz_manifest_init'ed here; the caller releases it) with its identity and
 * the hash of every chunk. Every chunk is checked first, as a restore would (header,
 * data CRC, padding, the image's rules, its place): what gets signed is sound.
 * Returns 0 or a negative code with e naming in and the chunk.
 */
int ndz_manifest_build(struct ndz_io *in, struct ndz_manifest *m, struct ndz_error *e);

/* Where a sealer hands each sealed chunk, in order (the signature of ndz_chunk_fn). */
typedef int (*ndz_seal_sink_fn)(void *ctx, const uint8_t *chunk, uint32_t index,
				struct ndz_error *e);

struct ndz_seal_opts {
	const struct ndz_key *crypt;   /* NDZ_KEY_CRYPT: encrypt every chunk; NULL: none */
	int cipher;                    /* enum ndz_cipher; 0: NDZ_CIPHER_DEFAULT */
	int sign;                      /* hash every chunk for a manifest (ndz_seal_finish) */
	ndz_seal_sink_fn next;         /* the sealed chunks go there, in order */
	void *next_ctx;
};

struct ndz_seal;

/*
 * ndz_seal_create - a sealer with o's policy (the key is copied, and wiped by
 * ndz_seal_free). 0 and *out, or NDZ_EINVAL (not an encryption key, unknown
 * cipher, no sink) or NDZ_ENOMEM with e.
 */
int ndz_seal_create(const struct ndz_seal_opts *o, struct ndz_seal **out, struct ndz_error *e);

/* ndz_seal_free - wipes the key; accepts NULL. */
void ndz_seal_free(struct ndz_seal *s);

/*
 * ndz_seal_reserve - the data bytes each chunk must leave free for the sealer
 * (NDZ_CRYPT_OVERHEAD when it encrypts, else 0): ndz_zip_opts.reserve.
 */
uint32_t ndz_seal_reserve(const struct ndz_seal *s);

/*
 * ndz_seal_chunk - the sink (an ndz_chunk_fn; ctx is the struct ndz_seal): the
 * finished chunk index, in order (0, 1, ...), encrypted (into the sealer's own buffer: chunk
 * is not changed), hashed for the manifest, then handed to o->next. 0, or the
 * code of what failed with e naming the chunk. Not thread-safe: one writer.
 */
int ndz_seal_chunk(void *ctx, const uint8_t *chunk, uint32_t index, struct ndz_error *e);

/*
 * ndz_seal_finish - after the last chunk: sign the manifest of the chunks sealed
 * with sec and write it to path (ndz_manifest_save). Only for a sealer made with
 * o->sign, once. 0, or a code with e naming path.
 */
int ndz_seal_finish(struct ndz_seal *s, const struct ndz_key *sec, const char *path,
		    struct ndz_error *e);

/* ndz_seal_manifest - the manifest built so far (its chunks is the room until
 * ndz_seal_finish), or NULL without o->sign. Owned by the sealer. */
const struct ndz_manifest *ndz_seal_manifest(const struct ndz_seal *s);

#endif
