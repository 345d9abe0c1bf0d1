/*
 * Keys and ciphers: key files (doc/FORMAT.md, "Key files"), the key ids that name
 * them, and the names of the chunk ciphers. Built on libsodium (Ed25519, BLAKE2b).
 */
#ifndef NDZ_KEY_H
#define NDZ_KEY_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "core/format.h"

#define NDZ_KEY_ID_LEN     8
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
 * "aes-256-gcm", "xchacha20poly1305") to its enum ndz_cipher; NDZ_EINVAL with e
 * naming it if none.
 */
int ndz_cipher_parse(const char *name, struct ndz_error *e);

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

/* ndz_trust_init - initialise libsodium once; 0 or NDZ_ENOTSUP (e says so). Thread-safe. */
int ndz_trust_init(struct ndz_error *e);

/*
 * ndz_key_generate - a new random key of type NDZ_KEY_SIGN_SECRET or NDZ_KEY_CRYPT
 * into k. 0, or NDZ_EINVAL (another type) or NDZ_ENOTSUP, with e saying why.
 */
int ndz_key_generate(enum ndz_key_type type, struct ndz_key *k, struct ndz_error *e);

/* ndz_key_public - the public half of a secret signing key. 0 or NDZ_EINVAL (e). */
int ndz_key_public(const struct ndz_key *sec, struct ndz_key *pub, struct ndz_error *e);

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
 * len bytes. Returns the text's length, or NDZ_EINVAL (no key, or it does not fit)
 * with e saying why.
 */
int ndz_key_format(const struct ndz_key *k, char *buf, size_t len, struct ndz_error *e);

/*
 * ndz_key_parse - a key file's text (untrusted): exactly the four lines, the key's
 * bytes consistent with its id. 0, or NDZ_EKEY (NDZ_ENOTSUP: libsodium) with k
 * wiped and e saying why.
 */
int ndz_key_parse(const char *text, size_t len, struct ndz_key *k, struct ndz_error *e);

/*
 * ndz_key_load - read and parse the key file at path. A secret or encryption key
 * in a file that group or others may read or write is refused (NDZ_EKEYPERM).
 * Returns 0, or a negative code with e naming path.
 */
int ndz_key_load(const char *path, struct ndz_key *k, struct ndz_error *e);

/*
 * ndz_trust_read_fd - the whole regular file open at fd (named path; closed here, in
 * every case), of at most max bytes, into *out (malloc'ed, the caller frees it; NULL
 * on failure) and *len: the one reader of lib/trust's signed files (index, manifest).
 * Returns 0; code (e.g. NDZ_EINDEX) when it is no regular file, larger than max or grew
 * while read; NDZ_ENOMEM or NDZ_EIO; e naming path.
 */
int ndz_trust_read_fd(int fd, const char *path, uint64_t max, int code, uint8_t **out,
		      size_t *len, struct ndz_error *e);

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

#endif
