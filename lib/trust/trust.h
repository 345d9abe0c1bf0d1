/*
 * Trust: key files, the signed manifest of an image (doc/FORMAT.md, "Signed and
 * encrypted images") and the encryption of chunk payloads. Built on libsodium
 * (Ed25519 signatures, XChaCha20-Poly1305, BLAKE2b-256 key ids and subkeys) and
 * OpenSSL's libcrypto (SHA-256 chunk hashes and AES-256-GCM: it uses the CPU's SHA
 * and AES instructions).
 */
#ifndef NDZ_TRUST_H
#define NDZ_TRUST_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/format.h"
#include "core/io.h"

#define NDZ_KEY_ID_LEN     8
#define NDZ_HASH_LEN       32           /* SHA-256 or BLAKE2b-256 */
#define NDZ_SIG_LEN        64           /* Ed25519 */
#define NDZ_MANIFEST_FIXED 64           /* manifest bytes before the chunk hashes */
#define NDZ_MANIFEST_MAX_CHUNKS (1u << 24)
#define NDZ_CRYPT_NONCE    24           /* random nonce, first in the data (any cipher) */
#define NDZ_CRYPT_TAG      16           /* Poly1305 or GCM tag, last in the data */
#define NDZ_CRYPT_OVERHEAD (NDZ_CRYPT_NONCE + NDZ_CRYPT_TAG)

enum ndz_key_type {
	NDZ_KEY_NONE = 0,
	NDZ_KEY_SIGN_SECRET,            /* Ed25519 secret key: signs manifests */
	NDZ_KEY_SIGN_PUBLIC,            /* Ed25519 public key: verifies them */
	NDZ_KEY_CRYPT,                  /* encryption key: encrypts chunks, any cipher */
};

/*
 * Chunk ciphers (doc/FORMAT.md, "Encrypted chunks"). One key file serves both:
 * XChaCha20-Poly1305 takes the key as is (as the first encrypted images did),
 * AES-256-GCM only ever sees subkeys derived from it per image and chunk.
 */
enum ndz_cipher {
	NDZ_CIPHER_XCHACHA20 = 1,       /* XChaCha20-Poly1305 (IETF) */
	NDZ_CIPHER_AES256GCM = 2,       /* AES-256-GCM: NDZ_INCOMPAT_AES256GCM */
};

/* What imagezip --encrypt uses unless told: the faster one on CPUs with AES-NI */
#define NDZ_CIPHER_DEFAULT NDZ_CIPHER_AES256GCM

/*
 * ndz_cipher_parse - a cipher's name ("aes256gcm", "xchacha20", or the long forms
 * "aes-256-gcm", "xchacha20poly1305") to its enum ndz_cipher; NDZ_EINVAL if none.
 */
int ndz_cipher_parse(const char *name);

/* ndz_cipher_name - "aes256gcm", "xchacha20", or "none" for anything else. */
const char *ndz_cipher_name(int cipher);

/* ndz_chunk_cipher - the cipher of an encrypted chunk's header h; 0 for a plain one. */
int ndz_chunk_cipher(const struct ndz_chunk_hdr *h);

/*
 * A key of one type. id names it in files and messages: for a signing pair, the
 * first 8 bytes of BLAKE2b-256("ndz-key-id" || public key); for an encryption key,
 * of BLAKE2b-256 keyed with the key over "ndz-key-id" (so it tells nothing of it).
 */
struct ndz_key {
	enum ndz_key_type type;
	uint8_t id[NDZ_KEY_ID_LEN];
	uint8_t pk[32];                 /* signing keys: the public key */
	uint8_t sk[64];                 /* secret signing key (seed || pk), or the
					   encryption key in its first 32 bytes */
};

/* ndz_trust_init - initialise libsodium once; 0 or NDZ_ENOTSUP. Thread-safe. */
int ndz_trust_init(void);

/* ndz_key_generate - a new random key of type NDZ_KEY_SIGN_SECRET or NDZ_KEY_CRYPT. */
int ndz_key_generate(enum ndz_key_type type, struct ndz_key *k);

/* ndz_key_public - the public half of a secret signing key. 0 or NDZ_EINVAL. */
int ndz_key_public(const struct ndz_key *sec, struct ndz_key *pub);

/* ndz_key_wipe - clear a key's secret bytes from memory. */
void ndz_key_wipe(struct ndz_key *k);

/*
 * ndz_key_type_name - "ed25519-secret", "ed25519-public", "xchacha20poly1305" (the
 * encryption key's type in key files, named before there was a second cipher).
 */
const char *ndz_key_type_name(enum ndz_key_type type);

/* ndz_key_id_hex - the id as 16 lower-case hex digits and a NUL, in out[17]. */
void ndz_key_id_hex(const uint8_t id[NDZ_KEY_ID_LEN], char out[17]);

/*
 * ndz_key_format - the key file text of k (four lines, doc/FORMAT.md) into buf of
 * len bytes. Returns the text's length, or NDZ_EINVAL when it does not fit.
 */
int ndz_key_format(const struct ndz_key *k, char *buf, size_t len);

/*
 * ndz_key_parse - a key file's text (untrusted): exactly the four lines, the key's
 * bytes consistent with its id. 0, or NDZ_EKEY with k wiped.
 */
int ndz_key_parse(const char *text, size_t len, struct ndz_key *k);

/*
 * ndz_key_load - read and parse the key file at path. A secret or encryption key
 * in a file that group or others may read or write is refused (NDZ_EKEYPERM).
 * Returns 0, or a negative code with e naming path.
 */
int ndz_key_load(const char *path, struct ndz_key *k, struct ndz_error *e);

/* NDZ_KEY_BIT - a key type's bit in the want mask of ndz_key_load_as. */
#define NDZ_KEY_BIT(type) (1u << (type))

/*
 * ndz_key_load_as - ndz_key_load, and the key must be of a type in want (a mask of
 * NDZ_KEY_BIT): else NDZ_EKEY, the key wiped, e naming path, the type it is and the
 * one wanted (a secret signing key where its public half is wanted: "use the .pub").
 * The one key file loader of the programs.
 */
int ndz_key_load_as(const char *path, unsigned want, struct ndz_key *k, struct ndz_error *e);

/*
 * ndz_key_add - a restore's --key FILE: a public signing key into *pub or an
 * encryption key into *crypt (each NDZ_KEY_NONE until given). Returns 0, a code of
 * ndz_key_load_as, or NDZ_EINVAL when a key of that type was given already (a usage
 * error); e says why.
 */
int ndz_key_add(const char *path, struct ndz_key *pub, struct ndz_key *crypt,
		struct ndz_error *e);

/*
 * ndz_key_save - write k to a new file path (never over an existing one), mode
 * 0600 for secret keys and 0644 for public ones. 0, or a code with e naming path.
 */
int ndz_key_save(const char *path, const struct ndz_key *k, struct ndz_error *e);

/* Chunk hash algorithms, as the manifest names them (doc/FORMAT.md) */
#define NDZ_HASH_BLAKE2B_256 1u         /* manifests before SHA-256: still read */
#define NDZ_HASH_SHA256      2u         /* what manifests are signed with */

/*
 * ndz_chunk_hash - the SHA-256 of a whole NDZ_CHUNK_SIZE chunk, as stored: the
 * hash new manifests carry. Thread-safe. 0, or NDZ_ENOMEM with out zeroed (which
 * no chunk matches).
 */
int ndz_chunk_hash(const uint8_t *chunk, uint8_t out[NDZ_HASH_LEN]);

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

/* ndz_manifest_init - an empty manifest for chunks chunks (hashes zero). */
int ndz_manifest_init(struct ndz_manifest *m, uint32_t chunks);
/* ndz_manifest_release - free the hashes; m may be zeroed or released already. */
void ndz_manifest_release(struct ndz_manifest *m);

/* ndz_manifest_size - bytes of an encoded manifest of chunks chunks. */
size_t ndz_manifest_size(uint32_t chunks);

/*
 * ndz_manifest_sign - encode m (its key_id is set from sec, its hash_alg to
 * NDZ_HASH_SHA256 when 0; the hashes must be of that algorithm) and sign it with sec
 * into *out (malloc'ed, ndz_manifest_size bytes, the caller frees). 0 or a code.
 */
int ndz_manifest_sign(struct ndz_manifest *m, const struct ndz_key *sec, uint8_t **out,
		      size_t *len);

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
 * manifest of an image of chunks chunks (magic, version, size). 0 or NDZ_EMANIFEST.
 * Says nothing of its signature.
 */
int ndz_manifest_check_shape(const uint8_t *buf, size_t len, uint32_t chunks);

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
 * source size, codec), else NDZ_EMISMATCH with e saying what differs.
 */
int ndz_manifest_match(const struct ndz_manifest *m, const struct ndz_chunk_hdr *h,
		       struct ndz_error *e);

/*
 * ndz_manifest_check_chunk - the whole chunk (header h decoded from it) is the one
 * the manifest signs for its index: 0, NDZ_ERANGE (index past the manifest) or
 * NDZ_EFORGED (or NDZ_ENOMEM). The hash is of the manifest's algorithm. A chunk
 * that passes needs no data CRC or padding check: the signer checked those.
 * Thread-safe (m is only read).
 */
int ndz_manifest_check_chunk(const struct ndz_manifest *m, const uint8_t *chunk,
			     const struct ndz_chunk_hdr *h);

/*
 * ndz_manifest_path - the detached manifest's default name for image: "IMAGE.manifest"
 * into out (len bytes). 0, or NDZ_EINVAL when it does not fit.
 */
int ndz_manifest_path(const char *image, char *out, size_t len);

/*
 * ndz_manifest_save - write an encoded manifest to path, through a temporary file
 * renamed over it (a reader never sees half of one). 0 or a code with e naming path.
 */
int ndz_manifest_save(const char *path, const uint8_t *buf, size_t len, struct ndz_error *e);

/*
 * ndz_manifest_build - read the stored image in (a file or a stream) whole and
 * fill m (ndz_manifest_init'ed here; the caller releases it) with its identity and
 * the hash of every chunk. Every chunk is checked first, as a restore would (header,
 * data CRC, padding, the image's rules, its place): what gets signed is sound.
 * Returns 0 or a negative code with e naming in and the chunk.
 */
int ndz_manifest_build(struct ndz_io *in, struct ndz_manifest *m, struct ndz_error *e);

/*
 * ndz_manifest_verify_image - read the stored image in whole: m must be of it and
 * every chunk, in order, must be the one m signs for its place (NDZ_EFORGED), and
 * the image whole. Returns 0 or a negative code with e naming in and the chunk.
 */
int ndz_manifest_verify_image(struct ndz_io *in, const struct ndz_manifest *m,
			      struct ndz_error *e);

/*
 * ndz_chunk_encrypt - encrypt a finished plain chunk in place with cipher (enum
 * ndz_cipher): a random nonce and the ciphertext of its data, authenticated with
 * the header area (ndz_hdr_auth_data); the header gets NDZ_INCOMPAT_ENCRYPTED (and
 * NDZ_INCOMPAT_AES256GCM for AES-256-GCM), the key's id, the new data_len and CRCs.
 * The data must leave NDZ_CRYPT_OVERHEAD bytes free. Thread-safe. Returns 0,
 * NDZ_EINVAL (not a crypt key, unknown cipher, already encrypted, no room; the
 * chunk unchanged), a header code, or NDZ_ENOMEM (libcrypto failed; the chunk is
 * undefined then).
 */
int ndz_chunk_encrypt(const struct ndz_key *k, int cipher, uint8_t *chunk);

/*
 * ndz_chunk_decrypt - decrypt the checked encrypted chunk whose header h was
 * decoded from it, in place, with the cipher its header names: afterwards the
 * data holds the compressed bytes and h says so (data_len, no NDZ_INCOMPAT_ENCRYPTED
 * or NDZ_INCOMPAT_AES256GCM); the header area is unchanged. Thread-safe. Returns
 * 0, NDZ_ENEEDKEY (k NULL), NDZ_EWRONGKEY (another key's id) or NDZ_EDECRYPT
 * (altered, moved, from another image, or its cipher bit flipped); the data is
 * undefined then.
 */
int ndz_chunk_decrypt(const struct ndz_key *k, uint8_t *chunk, struct ndz_chunk_hdr *h);

#endif
