/* Signed manifests: the only code that knows their bytes. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <openssl/evp.h>
#include <sodium.h>

#include "core/file.h"
#include "core/le.h"
#include "manifest.h"

static const uint8_t manifest_magic[8] = { 0x89, 'N', 'D', 'Z', 'S', 'I', 'G', '\n' };

/* Manifest offsets; doc/FORMAT.md mirrors this table. */
enum {
	M_MAGIC = 0,
	M_VERSION = 8,
	M_HASH_ALG = 10,
	M_SIG_ALG = 12,
	M_CODEC = 14,
	M_UUID = 16,
	M_KEY_ID = 32,
	M_CHUNKS = 40,
	M_FLAGS = 44,
	M_SRC_BYTES = 48,
	M_RESERVED = 56,
	M_HASHES = NDZ_MANIFEST_FIXED,
};

#define MANIFEST_VERSION 1u
#define SIG_ED25519      1u

/*
 * SHA-256 through libcrypto's EVP: it picks the CPU's SHA instructions (SHA-NI,
 * ARMv8), about twice libsodium's BLAKE2b here (bench/trust-results.txt).
 */
int ndz_chunk_hash(const uint8_t *chunk, uint8_t out[NDZ_HASH_LEN], struct ndz_error *e)
{
	unsigned int n = 0;

	if (EVP_Digest(chunk, NDZ_CHUNK_SIZE, out, &n, EVP_sha256(), NULL) != 1 ||
	    n != NDZ_HASH_LEN) {
		memset(out, 0, NDZ_HASH_LEN);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "sha-256: libcrypto failed");
	}
	return 0;
}

/* The chunk's hash by the manifest's algorithm. */
static int chunk_hash_alg(unsigned alg, const uint8_t *chunk, uint8_t out[NDZ_HASH_LEN],
			  struct ndz_error *e)
{
	if (alg == NDZ_HASH_BLAKE2B_256) {
		crypto_generichash(out, NDZ_HASH_LEN, chunk, NDZ_CHUNK_SIZE, NULL, 0);
		return 0;
	}
	return ndz_chunk_hash(chunk, out, e);
}

int ndz_manifest_init(struct ndz_manifest *m, uint32_t chunks, struct ndz_error *e)
{
	memset(m, 0, sizeof(*m));
	if (chunks == 0 || chunks > NDZ_MANIFEST_MAX_CHUNKS)
		return ndz_error_set(e, NDZ_EINVAL, 0, "a manifest of %u chunks: 1 to %u", chunks,
				     NDZ_MANIFEST_MAX_CHUNKS);
	m->hash = calloc(chunks, NDZ_HASH_LEN);
	if (!m->hash)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "a manifest of %u chunks: %s", chunks,
				     ndz_strerror(NDZ_ENOMEM));
	m->chunks = chunks;
	return 0;
}

int ndz_manifest_set_hash(struct ndz_manifest *m, const uint8_t *chunk,
			  const struct ndz_chunk_hdr *h, struct ndz_error *e)
{
	int enc = !!(h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED);

	if (h->index == 0) {
		memcpy(m->uuid, h->uuid, 16);
		m->codec = h->codec;
		m->source_bytes = h->source_bytes;
		m->flags = enc ? NDZ_MANIFEST_ENCRYPTED : 0;
	} else if (!(m->flags & NDZ_MANIFEST_ENCRYPTED) != !enc) {
		return ndz_error_set(e, NDZ_EMISMATCH, 0, "chunk %u: %s (encrypted and plain "
				     "chunks)", h->index, ndz_strerror(NDZ_EMISMATCH));
	}
	if (h->index >= m->chunks) {
		uint64_t want = (uint64_t)m->chunks * 2 + 64;
		uint8_t (*more)[NDZ_HASH_LEN];

		if (h->index >= NDZ_MANIFEST_MAX_CHUNKS)
			return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: more chunks than a "
					     "manifest holds", h->index);
		if (want > NDZ_MANIFEST_MAX_CHUNKS)
			want = NDZ_MANIFEST_MAX_CHUNKS;
		more = realloc(m->hash, (size_t)want * NDZ_HASH_LEN);
		if (!more)
			return ndz_error_set(e, NDZ_ENOMEM, 0, "chunk %u: %s", h->index,
					     ndz_strerror(NDZ_ENOMEM));
		memset(more + m->chunks, 0, (size_t)(want - m->chunks) * NDZ_HASH_LEN);
		m->hash = more;
		m->chunks = (uint32_t)want;
	}
	if (ndz_chunk_hash(chunk, m->hash[h->index], e) < 0) {
		ndz_error_prefix(e, "chunk %u", h->index);
		return NDZ_ENOMEM;
	}
	return 0;
}

void ndz_manifest_release(struct ndz_manifest *m)
{
	free(m->hash);
	memset(m, 0, sizeof(*m));
}

size_t ndz_manifest_size(uint32_t chunks)
{
	return NDZ_MANIFEST_FIXED + (size_t)chunks * NDZ_HASH_LEN + NDZ_SIG_LEN;
}

int ndz_manifest_sign(struct ndz_manifest *m, const struct ndz_key *sec, uint8_t **out,
		      size_t *len, struct ndz_error *e)
{
	size_t body, n;
	uint8_t *b;

	*out = NULL;
	if (sec->type != NDZ_KEY_SIGN_SECRET)
		return ndz_error_set(e, NDZ_EINVAL, 0, "signing a manifest: a %s key, not a "
				     "secret signing key", ndz_key_type_name(sec->type));
	if (!m->chunks || m->chunks > NDZ_MANIFEST_MAX_CHUNKS)
		return ndz_error_set(e, NDZ_EINVAL, 0, "signing a manifest of %u chunks: 1 to %u",
				     m->chunks, NDZ_MANIFEST_MAX_CHUNKS);
	if (ndz_trust_init(e) < 0)
		return NDZ_ENOTSUP;
	n = ndz_manifest_size(m->chunks);
	body = n - NDZ_SIG_LEN;
	b = calloc(1, n);
	if (!b)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "signing a manifest: %s",
				     ndz_strerror(NDZ_ENOMEM));
	memcpy(m->key_id, sec->id, NDZ_KEY_ID_LEN);
	if (!m->hash_alg)
		m->hash_alg = NDZ_HASH_SHA256;
	memcpy(b + M_MAGIC, manifest_magic, sizeof(manifest_magic));
	put_le16(b + M_VERSION, MANIFEST_VERSION);
	put_le16(b + M_HASH_ALG, m->hash_alg);
	put_le16(b + M_SIG_ALG, SIG_ED25519);
	put_le16(b + M_CODEC, m->codec);
	memcpy(b + M_UUID, m->uuid, 16);
	memcpy(b + M_KEY_ID, m->key_id, NDZ_KEY_ID_LEN);
	put_le32(b + M_CHUNKS, m->chunks);
	put_le32(b + M_FLAGS, m->flags);
	put_le64(b + M_SRC_BYTES, m->source_bytes);
	memcpy(b + M_HASHES, m->hash, (size_t)m->chunks * NDZ_HASH_LEN);
	crypto_sign_ed25519_detached(b + body, NULL, b, body, sec->sk);
	*out = b;
	*len = n;
	return 0;
}

static int malformed(struct ndz_error *e, const char *why)
{
	return ndz_error_set(e, NDZ_EMANIFEST, 0, "%s: %s", ndz_strerror(NDZ_EMANIFEST), why);
}

int ndz_manifest_open(const uint8_t *b, size_t len, const struct ndz_key *pub,
		      struct ndz_manifest *m, struct ndz_error *e)
{
	uint32_t chunks;
	size_t body;
	int rc;

	memset(m, 0, sizeof(*m));
	if (ndz_trust_init(e) < 0)
		return NDZ_ENOTSUP;
	if (len < ndz_manifest_size(1))
		return malformed(e, "too short");
	if (memcmp(b + M_MAGIC, manifest_magic, sizeof(manifest_magic)) != 0)
		return malformed(e, "bad magic");
	if (get_le16(b + M_VERSION) != MANIFEST_VERSION)
		return malformed(e, "unsupported version");
	if ((get_le16(b + M_HASH_ALG) != NDZ_HASH_SHA256 &&
	     get_le16(b + M_HASH_ALG) != NDZ_HASH_BLAKE2B_256) ||
	    get_le16(b + M_SIG_ALG) != SIG_ED25519)
		return malformed(e, "unsupported hash or signature algorithm");
	chunks = get_le32(b + M_CHUNKS);
	if (chunks == 0 || chunks > NDZ_MANIFEST_MAX_CHUNKS)
		return malformed(e, "chunk count out of range");
	if (len != ndz_manifest_size(chunks))
		return ndz_error_set(e, NDZ_EMANIFEST, 0, "%s: %zu bytes, %zu expected for %u "
				     "chunks (truncated?)", ndz_strerror(NDZ_EMANIFEST), len,
				     ndz_manifest_size(chunks), chunks);
	if (get_le32(b + M_FLAGS) & ~NDZ_MANIFEST_ENCRYPTED || get_le64(b + M_RESERVED) != 0)
		return malformed(e, "unknown flags");
	if (!pub || pub->type != NDZ_KEY_SIGN_PUBLIC)
		return ndz_error_set(e, NDZ_EINVAL, 0, "a public key is needed to check a manifest");
	if (memcmp(b + M_KEY_ID, pub->id, NDZ_KEY_ID_LEN) != 0) {
		char want[17], got[17];

		ndz_key_id_hex(pub->id, want);
		ndz_key_id_hex(b + M_KEY_ID, got);
		return ndz_error_set(e, NDZ_EWRONGKEY, 0, "%s: manifest signed by another key "
				     "(id %s, not %s)", ndz_strerror(NDZ_EWRONGKEY), got, want);
	}
	body = len - NDZ_SIG_LEN;
	if (crypto_sign_ed25519_verify_detached(b + body, b, body, pub->pk) != 0)
		return ndz_error_set(e, NDZ_ESIGNATURE, 0, "%s", ndz_strerror(NDZ_ESIGNATURE));
	rc = ndz_manifest_init(m, chunks, e);
	if (rc < 0)
		return rc;
	m->codec = get_le16(b + M_CODEC);
	m->hash_alg = get_le16(b + M_HASH_ALG);
	memcpy(m->uuid, b + M_UUID, 16);
	memcpy(m->key_id, b + M_KEY_ID, NDZ_KEY_ID_LEN);
	m->flags = get_le32(b + M_FLAGS);
	m->source_bytes = get_le64(b + M_SRC_BYTES);
	memcpy(m->hash, b + M_HASHES, (size_t)chunks * NDZ_HASH_LEN);
	return 0;
}

int ndz_manifest_check_shape(const uint8_t *b, size_t len, uint32_t chunks,
			     struct ndz_error *e)
{
	if (chunks == 0 || chunks > NDZ_MANIFEST_MAX_CHUNKS || len != ndz_manifest_size(chunks))
		return ndz_error_set(e, NDZ_EMANIFEST, 0, "%s: %zu bytes, not those of a manifest "
				     "of %u chunks", ndz_strerror(NDZ_EMANIFEST), len, chunks);
	if (memcmp(b + M_MAGIC, manifest_magic, sizeof(manifest_magic)) != 0 ||
	    get_le16(b + M_VERSION) != MANIFEST_VERSION || get_le32(b + M_CHUNKS) != chunks)
		return malformed(e, "bad magic, version or chunk count");
	return 0;
}

int ndz_manifest_read(const char *path, uint8_t **out, size_t *len, struct ndz_error *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	*out = NULL;
	if (fd < 0)
		return ndz_error_set(e, errno == ENOENT ? NDZ_EUNSIGNED : NDZ_EIO, errno,
				     "%s%s", path, errno == ENOENT ? ": no manifest" : "");
	return ndz_trust_read_fd(fd, path, ndz_manifest_size(NDZ_MANIFEST_MAX_CHUNKS),
				 NDZ_EMANIFEST, out, len, e);
}

int ndz_manifest_load(const char *path, const struct ndz_key *pub, struct ndz_manifest *m,
		      struct ndz_error *e)
{
	uint8_t *b;
	size_t len;
	int rc;

	memset(m, 0, sizeof(*m));
	rc = ndz_manifest_read(path, &b, &len, e);
	if (rc < 0)
		return rc;
	rc = ndz_manifest_open(b, len, pub, m, e);
	free(b);
	if (rc < 0)
		ndz_error_prefix(e, "%s", path);
	return rc;
}

int ndz_manifest_match(const struct ndz_manifest *m, const struct ndz_chunk_hdr *h,
		       struct ndz_error *e)
{
	if (memcmp(m->uuid, h->uuid, 16) != 0 || m->source_bytes != h->source_bytes ||
	    m->codec != h->codec)
		return ndz_error_set(e, NDZ_EMISMATCH, 0, "the manifest is of another image "
				     "(%s differs)", memcmp(m->uuid, h->uuid, 16) ? "uuid" :
				     m->source_bytes != h->source_bytes ? "source size" : "codec");
	if (!(m->flags & NDZ_MANIFEST_ENCRYPTED) != !(h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED))
		return ndz_error_set(e, NDZ_EMISMATCH, 0, "the manifest is of another image "
				     "(encryption differs)");
	return 0;
}

int ndz_manifest_check_chunk(const struct ndz_manifest *m, const uint8_t *chunk,
			     const struct ndz_chunk_hdr *h, struct ndz_error *e)
{
	uint8_t got[NDZ_HASH_LEN];

	if (h->index >= m->chunks)
		return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: past the manifest's %u chunks",
				     h->index, m->chunks);
	if (chunk_hash_alg(m->hash_alg, chunk, got, e) < 0) {
		ndz_error_prefix(e, "chunk %u", h->index);
		return NDZ_ENOMEM;
	}
	if (sodium_memcmp(got, m->hash[h->index], NDZ_HASH_LEN) != 0)
		return ndz_error_set(e, NDZ_EFORGED, 0, "chunk %u: %s", h->index,
				     ndz_strerror(NDZ_EFORGED));
	return 0;
}

int ndz_manifest_path(const char *image, char *out, size_t len, struct ndz_error *e)
{
	int n = snprintf(out, len, "%s.manifest", image);

	if (n < 0 || (size_t)n >= len)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: name too long", image);
	return 0;
}

int ndz_manifest_save(const char *path, const uint8_t *buf, size_t len, struct ndz_error *e)
{
	return ndz_file_replace(path, buf, len, 0644, e);
}

