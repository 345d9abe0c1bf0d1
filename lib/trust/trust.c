/* Key files, signed manifests and chunk encryption: the only code that knows their bytes. */
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
#include "core/image.h"
#include "core/le.h"
#include "trust.h"

static const uint8_t manifest_magic[8] = { 0x89, 'N', 'D', 'Z', 'S', 'I', 'G', '\n' };
static const char id_label[] = "ndz-key-id";
static const char key_head[] = "ndz-key 1\n";

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

int ndz_trust_init(void)
{
	return sodium_init() < 0 ? NDZ_ENOTSUP : 0;
}

/* ---- keys ---- */

static void key_id_of(struct ndz_key *k)
{
	uint8_t h[32];

	if (k->type == NDZ_KEY_CRYPT) {
		crypto_generichash(h, sizeof(h), (const uint8_t *)id_label, sizeof(id_label) - 1,
				   k->sk, 32);
	} else {
		crypto_generichash_state st;

		crypto_generichash_init(&st, NULL, 0, sizeof(h));
		crypto_generichash_update(&st, (const uint8_t *)id_label, sizeof(id_label) - 1);
		crypto_generichash_update(&st, k->pk, sizeof(k->pk));
		crypto_generichash_final(&st, h, sizeof(h));
	}
	memcpy(k->id, h, NDZ_KEY_ID_LEN);
}

int ndz_key_generate(enum ndz_key_type type, struct ndz_key *k)
{
	if (ndz_trust_init() < 0)
		return NDZ_ENOTSUP;
	memset(k, 0, sizeof(*k));
	k->type = type;
	if (type == NDZ_KEY_SIGN_SECRET)
		crypto_sign_ed25519_keypair(k->pk, k->sk);
	else if (type == NDZ_KEY_CRYPT)
		crypto_aead_xchacha20poly1305_ietf_keygen(k->sk);
	else
		return NDZ_EINVAL;
	key_id_of(k);
	return 0;
}

int ndz_key_public(const struct ndz_key *sec, struct ndz_key *pub)
{
	if (sec->type != NDZ_KEY_SIGN_SECRET)
		return NDZ_EINVAL;
	memset(pub, 0, sizeof(*pub));
	pub->type = NDZ_KEY_SIGN_PUBLIC;
	memcpy(pub->pk, sec->pk, sizeof(pub->pk));
	memcpy(pub->id, sec->id, sizeof(pub->id));
	return 0;
}

void ndz_key_wipe(struct ndz_key *k)
{
	sodium_memzero(k, sizeof(*k));
}

const char *ndz_key_type_name(enum ndz_key_type type)
{
	switch (type) {
	case NDZ_KEY_SIGN_SECRET:
		return "ed25519-secret";
	case NDZ_KEY_SIGN_PUBLIC:
		return "ed25519-public";
	case NDZ_KEY_CRYPT:
		return "xchacha20poly1305";
	default:
		return "none";
	}
}

void ndz_key_id_hex(const uint8_t id[NDZ_KEY_ID_LEN], char out[17])
{
	sodium_bin2hex(out, 17, id, NDZ_KEY_ID_LEN);
}

/* The key bytes a file of type holds, and where they are in k. */
static size_t key_bytes(const struct ndz_key *k, const uint8_t **p)
{
	if (k->type == NDZ_KEY_SIGN_PUBLIC) {
		*p = k->pk;
		return 32;
	}
	*p = k->sk;
	return k->type == NDZ_KEY_SIGN_SECRET ? 64 : 32;
}

int ndz_key_format(const struct ndz_key *k, char *buf, size_t len)
{
	char id[17], hex[129];
	const uint8_t *p;
	size_t n = key_bytes(k, &p);
	int w;

	if (k->type == NDZ_KEY_NONE)
		return NDZ_EINVAL;
	ndz_key_id_hex(k->id, id);
	sodium_bin2hex(hex, sizeof(hex), p, n);
	w = snprintf(buf, len, "%stype %s\nid %s\nkey %s\n", key_head,
		     ndz_key_type_name(k->type), id, hex);
	sodium_memzero(hex, sizeof(hex));
	return w < 0 || (size_t)w >= len ? NDZ_EINVAL : w;
}

/* One line "word value\n" at *pos: value into out (at most cap - 1 chars). */
static int take_line(const char *t, size_t len, size_t *pos, const char *word, char *out,
		     size_t cap)
{
	size_t wl = strlen(word), i = *pos, n;
	const char *nl;

	if (len - i < wl + 1 || memcmp(t + i, word, wl) != 0 || t[i + wl] != ' ')
		return -1;
	i += wl + 1;
	nl = memchr(t + i, '\n', len - i);
	if (!nl)
		return -1;
	n = (size_t)(nl - (t + i));
	if (n == 0 || n >= cap || memchr(t + i, '\0', n))
		return -1;
	memcpy(out, t + i, n);
	out[n] = '\0';
	*pos = i + n + 1;
	return 0;
}

static int unhex(const char *hex, uint8_t *out, size_t n)
{
	size_t got = 0;
	const char *end = NULL;

	if (strlen(hex) != 2 * n)
		return -1;
	if (sodium_hex2bin(out, n, hex, 2 * n, NULL, &got, &end) != 0 || got != n ||
	    *end != '\0')
		return -1;
	return 0;
}

static int parse(const char *t, size_t len, struct ndz_key *k)
{
	char type[32], id[32], hex[160];
	uint8_t idb[NDZ_KEY_ID_LEN], pk[32];
	const uint8_t *p;
	size_t pos = sizeof(key_head) - 1;
	int rc = -1;

	memset(k, 0, sizeof(*k));
	if (len < pos || memcmp(t, key_head, pos) != 0)
		return -1;
	if (take_line(t, len, &pos, "type", type, sizeof(type)) < 0 ||
	    take_line(t, len, &pos, "id", id, sizeof(id)) < 0 ||
	    take_line(t, len, &pos, "key", hex, sizeof(hex)) < 0 || pos != len)
		goto out;
	if (!strcmp(type, "ed25519-secret"))
		k->type = NDZ_KEY_SIGN_SECRET;
	else if (!strcmp(type, "ed25519-public"))
		k->type = NDZ_KEY_SIGN_PUBLIC;
	else if (!strcmp(type, "xchacha20poly1305"))
		k->type = NDZ_KEY_CRYPT;
	else
		goto out;
	if (unhex(id, idb, sizeof(idb)) < 0 || unhex(hex, k->type == NDZ_KEY_SIGN_PUBLIC ?
						   k->pk : k->sk, key_bytes(k, &p)) < 0)
		goto out;
	if (k->type == NDZ_KEY_SIGN_SECRET) {
		/* the public half must be the one the seed makes */
		if (crypto_sign_ed25519_sk_to_pk(pk, k->sk) != 0)
			goto out;
		{
			uint8_t pk2[32], sk2[64];

			crypto_sign_ed25519_seed_keypair(pk2, sk2, k->sk);
			rc = sodium_memcmp(pk2, pk, 32);
			sodium_memzero(sk2, sizeof(sk2));
			if (rc != 0)
				goto out;
			rc = -1;
		}
		memcpy(k->pk, pk, 32);
	}
	key_id_of(k);
	if (memcmp(k->id, idb, sizeof(idb)) != 0)
		goto out;
	rc = 0;
out:
	sodium_memzero(hex, sizeof(hex));
	if (rc < 0)
		ndz_key_wipe(k);
	return rc;
}

int ndz_key_parse(const char *text, size_t len, struct ndz_key *k)
{
	if (ndz_trust_init() < 0)
		return NDZ_ENOTSUP;
	return parse(text, len, k) < 0 ? NDZ_EKEY : 0;
}

#define KEY_FILE_MAX 512

int ndz_key_load(const char *path, struct ndz_key *k, struct ndz_error *e)
{
	char buf[KEY_FILE_MAX];
	struct stat st;
	ssize_t n;
	int fd, rc;

	memset(k, 0, sizeof(*k));
	if (ndz_trust_init() < 0)
		return ndz_error_set(e, NDZ_ENOTSUP, 0, "%s: libsodium failed to start", path);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return ndz_error_set(e, NDZ_EIO, errno, "%s", path);
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return ndz_error_set(e, NDZ_EKEY, 0, "%s: %s (not a regular file)", path,
				     ndz_strerror(NDZ_EKEY));
	}
	n = read(fd, buf, sizeof(buf));
	rc = errno;
	close(fd);
	if (n < 0)
		return ndz_error_set(e, NDZ_EIO, rc, "%s", path);
	if ((size_t)n == sizeof(buf) || ndz_key_parse(buf, (size_t)n, k) < 0) {
		sodium_memzero(buf, sizeof(buf));
		return ndz_error_set(e, NDZ_EKEY, 0, "%s: %s", path, ndz_strerror(NDZ_EKEY));
	}
	sodium_memzero(buf, sizeof(buf));
	if (k->type != NDZ_KEY_SIGN_PUBLIC && (st.st_mode & 077)) {
		ndz_key_wipe(k);
		return ndz_error_set(e, NDZ_EKEYPERM, 0, "%s: %s (mode %04o; chmod 600 it)", path,
				     ndz_strerror(NDZ_EKEYPERM), (unsigned)(st.st_mode & 07777));
	}
	return 0;
}

int ndz_key_load_as(const char *path, unsigned want, struct ndz_key *k, struct ndz_error *e)
{
	enum ndz_key_type t;
	int rc = ndz_key_load(path, k, e);

	if (rc < 0)
		return rc;
	if (want & NDZ_KEY_BIT(k->type))
		return 0;
	t = k->type;
	ndz_key_wipe(k);
	if (t == NDZ_KEY_SIGN_SECRET && (want & NDZ_KEY_BIT(NDZ_KEY_SIGN_PUBLIC)))
		return ndz_error_set(e, NDZ_EKEY, 0, "%s: a secret signing key, where its public "
				     "half is wanted (the .pub file)", path);
	return ndz_error_set(e, NDZ_EKEY, 0, "%s: a %s key, not the %s key wanted", path,
			     ndz_key_type_name(t),
			     ndz_key_type_name(want & NDZ_KEY_BIT(NDZ_KEY_SIGN_PUBLIC) ?
					       NDZ_KEY_SIGN_PUBLIC : want & NDZ_KEY_BIT(NDZ_KEY_CRYPT) ?
					       NDZ_KEY_CRYPT : NDZ_KEY_SIGN_SECRET));
}

int ndz_key_add(const char *path, struct ndz_key *pub, struct ndz_key *crypt,
		struct ndz_error *e)
{
	struct ndz_key k, *to;
	int rc = ndz_key_load_as(path, NDZ_KEY_BIT(NDZ_KEY_SIGN_PUBLIC) |
				 NDZ_KEY_BIT(NDZ_KEY_CRYPT), &k, e);

	if (rc < 0)
		return rc;
	to = k.type == NDZ_KEY_SIGN_PUBLIC ? pub : crypt;
	if (to->type != NDZ_KEY_NONE) {
		rc = ndz_error_set(e, NDZ_EINVAL, 0, "%s: a second %s key (give at most one of "
				   "each type)", path, ndz_key_type_name(k.type));
		ndz_key_wipe(&k);
		return rc;
	}
	*to = k;
	ndz_key_wipe(&k);
	return 0;
}

int ndz_key_save(const char *path, const struct ndz_key *k, struct ndz_error *e)
{
	char buf[KEY_FILE_MAX];
	mode_t mode = k->type == NDZ_KEY_SIGN_PUBLIC ? 0644 : 0600;
	int fd, n, rc = 0;

	n = ndz_key_format(k, buf, sizeof(buf));
	if (n < 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: %s", path, ndz_strerror(NDZ_EINVAL));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0) {
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s", path);
		goto out;
	}
	/* exactly this mode, whatever the umask took away from open's */
	if (fchmod(fd, mode) < 0 || write(fd, buf, (size_t)n) != n || fsync(fd) < 0)
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s: write error", path);
	if (close(fd) < 0 && rc == 0)
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s: write error", path);
	if (rc < 0)
		unlink(path);
out:
	sodium_memzero(buf, sizeof(buf));
	return rc;
}

/* ---- manifests ---- */

/*
 * SHA-256 through libcrypto's EVP: it picks the CPU's SHA instructions (SHA-NI,
 * ARMv8), about twice libsodium's BLAKE2b here (bench/trust-results.txt).
 */
int ndz_chunk_hash(const uint8_t *chunk, uint8_t out[NDZ_HASH_LEN])
{
	unsigned int n = 0;

	if (EVP_Digest(chunk, NDZ_CHUNK_SIZE, out, &n, EVP_sha256(), NULL) != 1 ||
	    n != NDZ_HASH_LEN) {
		memset(out, 0, NDZ_HASH_LEN);
		return NDZ_ENOMEM;
	}
	return 0;
}

/* The chunk's hash by the manifest's algorithm. */
static int chunk_hash_alg(unsigned alg, const uint8_t *chunk, uint8_t out[NDZ_HASH_LEN])
{
	if (alg == NDZ_HASH_BLAKE2B_256) {
		crypto_generichash(out, NDZ_HASH_LEN, chunk, NDZ_CHUNK_SIZE, NULL, 0);
		return 0;
	}
	return ndz_chunk_hash(chunk, out);
}

int ndz_manifest_init(struct ndz_manifest *m, uint32_t chunks)
{
	memset(m, 0, sizeof(*m));
	if (chunks == 0 || chunks > NDZ_MANIFEST_MAX_CHUNKS)
		return NDZ_EINVAL;
	m->hash = calloc(chunks, NDZ_HASH_LEN);
	if (!m->hash)
		return NDZ_ENOMEM;
	m->chunks = chunks;
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
		      size_t *len)
{
	size_t body, n;
	uint8_t *b;

	*out = NULL;
	if (sec->type != NDZ_KEY_SIGN_SECRET || !m->chunks || m->chunks > NDZ_MANIFEST_MAX_CHUNKS)
		return NDZ_EINVAL;
	if (ndz_trust_init() < 0)
		return NDZ_ENOTSUP;
	n = ndz_manifest_size(m->chunks);
	body = n - NDZ_SIG_LEN;
	b = calloc(1, n);
	if (!b)
		return NDZ_ENOMEM;
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
	if (ndz_trust_init() < 0)
		return ndz_error_set(e, NDZ_ENOTSUP, 0, "libsodium failed to start");
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
	rc = ndz_manifest_init(m, chunks);
	if (rc < 0)
		return ndz_error_set(e, rc, 0, "%s", ndz_strerror(rc));
	m->codec = get_le16(b + M_CODEC);
	m->hash_alg = get_le16(b + M_HASH_ALG);
	memcpy(m->uuid, b + M_UUID, 16);
	memcpy(m->key_id, b + M_KEY_ID, NDZ_KEY_ID_LEN);
	m->flags = get_le32(b + M_FLAGS);
	m->source_bytes = get_le64(b + M_SRC_BYTES);
	memcpy(m->hash, b + M_HASHES, (size_t)chunks * NDZ_HASH_LEN);
	return 0;
}

int ndz_manifest_check_shape(const uint8_t *b, size_t len, uint32_t chunks)
{
	if (chunks == 0 || chunks > NDZ_MANIFEST_MAX_CHUNKS || len != ndz_manifest_size(chunks) ||
	    memcmp(b + M_MAGIC, manifest_magic, sizeof(manifest_magic)) != 0 ||
	    get_le16(b + M_VERSION) != MANIFEST_VERSION || get_le32(b + M_CHUNKS) != chunks)
		return NDZ_EMANIFEST;
	return 0;
}

int ndz_manifest_read(const char *path, uint8_t **out, size_t *len, struct ndz_error *e)
{
	size_t max = ndz_manifest_size(NDZ_MANIFEST_MAX_CHUNKS), got = 0;
	uint8_t *b = NULL;
	struct stat st;
	int fd, rc;

	*out = NULL;
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	if (fd < 0)
		return ndz_error_set(e, errno == ENOENT ? NDZ_EUNSIGNED : NDZ_EIO, errno,
				     "%s%s", path, errno == ENOENT ? ": no manifest" : "");
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
		close(fd);
		return ndz_error_set(e, NDZ_EMANIFEST, 0, "%s: %s (not a regular file of at most "
				     "%zu bytes)", path, ndz_strerror(NDZ_EMANIFEST), max);
	}
	b = malloc((size_t)st.st_size + 1);
	if (!b) {
		close(fd);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", path, ndz_strerror(NDZ_ENOMEM));
	}
	while (got <= (size_t)st.st_size) {
		ssize_t n = read(fd, b + got, (size_t)st.st_size + 1 - got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = ndz_error_set(e, NDZ_EIO, errno, "%s: read error", path);
			close(fd);
			free(b);
			return rc;
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (got > max) {
		free(b);
		return ndz_error_set(e, NDZ_EMANIFEST, 0, "%s: %s (grew while read)", path,
				     ndz_strerror(NDZ_EMANIFEST));
	}
	*out = b;
	*len = got;
	return 0;
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
			     const struct ndz_chunk_hdr *h)
{
	uint8_t got[NDZ_HASH_LEN];

	if (h->index >= m->chunks)
		return NDZ_ERANGE;
	if (chunk_hash_alg(m->hash_alg, chunk, got) < 0)
		return NDZ_ENOMEM;
	return sodium_memcmp(got, m->hash[h->index], NDZ_HASH_LEN) == 0 ? 0 : NDZ_EFORGED;
}

int ndz_manifest_path(const char *image, char *out, size_t len)
{
	int n = snprintf(out, len, "%s.manifest", image);

	return n < 0 || (size_t)n >= len ? NDZ_EINVAL : 0;
}

int ndz_manifest_save(const char *path, const uint8_t *buf, size_t len, struct ndz_error *e)
{
	return ndz_file_replace(path, buf, len, 0644, e);
}

/* A chunk of a stored image at position pos failed with rc. */
static int image_fail(struct ndz_io *in, uint32_t pos, int rc, struct ndz_error *e)
{
	return ndz_error_set(e, rc, 0, "%s: chunk %u: %s", in->name, pos, ndz_strerror(rc));
}

/*
 * Read in whole, chunk by chunk in order (the index of each must be its place),
 * with the image's rules; call fn on each. Returns the count, or a code.
 */
static int64_t walk_image(struct ndz_io *in, int (*fn)(void *ctx, const uint8_t *chunk,
		const struct ndz_chunk_hdr *h, struct ndz_error *e), void *ctx,
		struct ndz_error *e)
{
	struct ndz_image_reader *r = NULL;
	struct ndz_image *im = NULL;
	struct ndz_chunk_hdr h;
	uint8_t *buf = malloc(NDZ_CHUNK_SIZE);
	uint32_t pos = 0;
	int64_t rc;

	if (!buf || ndz_image_create(&im, NULL) < 0) {
		rc = ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", in->name, ndz_strerror(NDZ_ENOMEM));
		goto out;
	}
	rc = ndz_image_reader_open(in, &r, e);
	if (rc < 0)
		goto out;
	ndz_image_expect(im, ndz_image_reader_chunks(r), NULL);
	for (;;) {
		rc = ndz_image_reader_next(r, buf, &h, e);
		if (rc < 0)
			goto out;
		if (rc == 0)
			break;
		if (h.index != pos) {
			rc = ndz_error_set(e, NDZ_EREGION, 0, "%s: chunk %u: found at place %u: "
					   "chunks out of order", in->name, h.index, pos);
			goto out;
		}
		rc = ndz_image_add(im, &h, e);
		if (rc < 0) {
			ndz_error_prefix(e, "%s", in->name);
			goto out;
		}
		rc = fn(ctx, buf, &h, e);
		if (rc < 0)
			goto out;
		pos++;
	}
	rc = ndz_image_complete(im, e);
	if (rc < 0)
		ndz_error_prefix(e, "%s", in->name);
	else
		rc = pos;
out:
	ndz_image_reader_free(r);
	ndz_image_free(im);
	free(buf);
	return rc;
}

static int build_one(void *ctx, const uint8_t *chunk, const struct ndz_chunk_hdr *h,
		     struct ndz_error *e)
{
	struct ndz_manifest *m = ctx;	/* chunks: the hashes' room while building */
	int rc;

	/* lib/orig.h: an original image has no CRCs to vouch for; ours has */
	if (h->version > 0xff)
		return ndz_error_set(e, NDZ_ENOTSUP, 0, "chunk %u: an image in the original "
				     "Frisbee format: convert and sign it (imagezip --from-image "
				     "--sign)", h->index);
	rc = ndz_chunk_check_data(chunk, h, NULL);
	if (rc < 0)
		return rc;
	if (h->index == 0) {
		memcpy(m->uuid, h->uuid, 16);
		m->codec = h->codec;
		m->source_bytes = h->source_bytes;
		m->flags = h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED ? NDZ_MANIFEST_ENCRYPTED : 0;
	} else if (!(m->flags & NDZ_MANIFEST_ENCRYPTED) !=
		   !(h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED)) {
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
			return ndz_error_set(e, NDZ_ENOMEM, 0, "%s", ndz_strerror(NDZ_ENOMEM));
		m->hash = more;
		m->chunks = (uint32_t)want;
	}
	return ndz_chunk_hash(chunk, m->hash[h->index]);
}

static int build_chunk(void *ctx, const uint8_t *chunk, const struct ndz_chunk_hdr *h,
		       struct ndz_error *e)
{
	int rc = build_one(ctx, chunk, h, e);

	if (rc < 0 && !e->code)
		ndz_error_set(e, rc, 0, "chunk %u: %s", h->index, ndz_strerror(rc));
	return rc;
}

int ndz_manifest_build(struct ndz_io *in, struct ndz_manifest *m, struct ndz_error *e)
{
	struct ndz_error mine = { 0 };
	int64_t n;

	memset(m, 0, sizeof(*m));
	if (ndz_trust_init() < 0)
		return ndz_error_set(e, NDZ_ENOTSUP, 0, "libsodium failed to start");
	n = walk_image(in, build_chunk, m, &mine);
	if (n < 0) {
		if (!strncmp(mine.msg, "chunk ", 6))
			ndz_error_prefix(&mine, "%s", in->name);
		ndz_manifest_release(m);
		return ndz_error_copy(e, &mine);
	}
	m->chunks = (uint32_t)n;
	return 0;
}

struct verify_ctx {
	const struct ndz_manifest *m;
	struct ndz_io *in;
};

static int verify_chunk(void *ctx, const uint8_t *chunk, const struct ndz_chunk_hdr *h,
			struct ndz_error *e)
{
	struct verify_ctx *v = ctx;
	int rc;

	if (h->index == 0 && ndz_manifest_match(v->m, h, e) < 0) {
		ndz_error_prefix(e, "%s", v->in->name);
		return e->code;
	}
	rc = ndz_manifest_check_chunk(v->m, chunk, h);
	if (rc == NDZ_ERANGE)
		return ndz_error_set(e, rc, 0, "%s: chunk %u: past the manifest's %u chunks",
				     v->in->name, h->index, v->m->chunks);
	if (rc < 0)
		return image_fail(v->in, h->index, rc, e);
	return 0;
}

int ndz_manifest_verify_image(struct ndz_io *in, const struct ndz_manifest *m,
			      struct ndz_error *e)
{
	struct verify_ctx v = { m, in };
	int64_t n = walk_image(in, verify_chunk, &v, e);

	if (n < 0)
		return (int)n;
	if ((uint64_t)n != m->chunks)
		return ndz_error_set(e, NDZ_EMISMATCH, 0, "%s: %lld chunks, the manifest signs "
				     "%u: %s", in->name, (long long)n, m->chunks,
				     ndz_strerror(NDZ_EMISMATCH));
	return 0;
}

/* ---- encryption ---- */

int ndz_cipher_parse(const char *name)
{
	if (!strcmp(name, "aes256gcm") || !strcmp(name, "aes-256-gcm"))
		return NDZ_CIPHER_AES256GCM;
	if (!strcmp(name, "xchacha20") || !strcmp(name, "xchacha20poly1305"))
		return NDZ_CIPHER_XCHACHA20;
	return NDZ_EINVAL;
}

const char *ndz_cipher_name(int cipher)
{
	return cipher == NDZ_CIPHER_AES256GCM ? "aes256gcm" :
	       cipher == NDZ_CIPHER_XCHACHA20 ? "xchacha20" : "none";
}

int ndz_chunk_cipher(const struct ndz_chunk_hdr *h)
{
	if (!(h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED))
		return 0;
	return h->incompat_flags & NDZ_INCOMPAT_AES256GCM ? NDZ_CIPHER_AES256GCM :
	       NDZ_CIPHER_XCHACHA20;
}

/* The AES-256-GCM subkey's label: no other use of the key hashes these bytes. */
static const char gcm_label[16] = "ndz aes-256-gcm";

#define GCM_KDF_NONCE 12               /* nonce bytes that go into the subkey... */
#define GCM_IV (NDZ_CRYPT_NONCE - GCM_KDF_NONCE)  /* ...and the 12 that are the IV */

/*
 * AES-256-GCM over len bytes at buf, in place, with the chunk's header area ad:
 * the key is BLAKE2b-256 keyed with the file's key over label || uuid || the first
 * 12 nonce bytes, the IV the last 12 (doc/FORMAT.md). enc: 1 encrypt (tag out),
 * 0 decrypt (tag in, checked). 0, NDZ_EDECRYPT (bad tag) or NDZ_ENOMEM.
 */
static int gcm(int enc, const struct ndz_key *k, const uint8_t *uuid,
	       const uint8_t nonce[NDZ_CRYPT_NONCE], const uint8_t *ad, uint8_t *buf,
	       size_t len, uint8_t tag[NDZ_CRYPT_TAG])
{
	uint8_t sub[32];
	crypto_generichash_state st;
	EVP_CIPHER_CTX *c;
	int n = 0, ok;

	if (len > INT32_MAX)
		return NDZ_EINVAL;
	c = EVP_CIPHER_CTX_new();
	if (!c)
		return NDZ_ENOMEM;
	crypto_generichash_init(&st, k->sk, 32, sizeof(sub));
	crypto_generichash_update(&st, (const uint8_t *)gcm_label, sizeof(gcm_label));
	crypto_generichash_update(&st, uuid, 16);
	crypto_generichash_update(&st, nonce, GCM_KDF_NONCE);
	crypto_generichash_final(&st, sub, sizeof(sub));
	sodium_memzero(&st, sizeof(st));
	ok = EVP_CipherInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL, enc) == 1 &&
	     EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_IVLEN, GCM_IV, NULL) == 1 &&
	     EVP_CipherInit_ex(c, NULL, NULL, sub, nonce + GCM_KDF_NONCE, enc) == 1 &&
	     EVP_CipherUpdate(c, NULL, &n, ad, NDZ_HDR_SIZE) == 1 &&
	     EVP_CipherUpdate(c, buf, &n, buf, (int)len) == 1 && (size_t)n == len;
	sodium_memzero(sub, sizeof(sub));
	if (ok && !enc)
		ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, NDZ_CRYPT_TAG, tag) == 1;
	if (ok) {
		/* decrypting, this is where the tag is checked */
		if (EVP_CipherFinal_ex(c, buf + len, &n) != 1) {
			EVP_CIPHER_CTX_free(c);
			return enc ? NDZ_ENOMEM : NDZ_EDECRYPT;
		}
	}
	if (ok && enc)
		ok = EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, NDZ_CRYPT_TAG, tag) == 1;
	EVP_CIPHER_CTX_free(c);
	return ok ? 0 : NDZ_ENOMEM;
}

int ndz_chunk_encrypt(const struct ndz_key *k, int cipher, uint8_t *chunk)
{
	uint8_t *data = chunk + NDZ_HDR_SIZE, nonce[NDZ_CRYPT_NONCE], ad[NDZ_HDR_SIZE];
	struct ndz_chunk_hdr h;
	unsigned long long clen = 0;
	uint32_t plain;
	int rc;

	if (k->type != NDZ_KEY_CRYPT ||
	    (cipher != NDZ_CIPHER_XCHACHA20 && cipher != NDZ_CIPHER_AES256GCM))
		return NDZ_EINVAL;
	if (ndz_trust_init() < 0)
		return NDZ_ENOTSUP;
	rc = ndz_hdr_decode(chunk, &h, NULL);
	if (rc < 0)
		return rc;
	if ((h.incompat_flags & NDZ_INCOMPAT_ENCRYPTED) ||
	    h.data_len > NDZ_MAX_DATA - NDZ_CRYPT_OVERHEAD)
		return NDZ_EINVAL;
	plain = h.data_len;
	h.incompat_flags |= NDZ_INCOMPAT_ENCRYPTED;
	if (cipher == NDZ_CIPHER_AES256GCM)
		h.incompat_flags |= NDZ_INCOMPAT_AES256GCM;
	memcpy(h.key_id, k->id, NDZ_KEY_ID_LEN);
	h.data_len = plain + NDZ_CRYPT_OVERHEAD;
	h.data_crc = 0;
	rc = ndz_hdr_encode(&h, chunk, NULL);
	if (rc < 0)
		return rc;
	ndz_hdr_auth_data(chunk, ad);
	randombytes_buf(nonce, sizeof(nonce));
	memmove(data + NDZ_CRYPT_NONCE, data, plain);
	memcpy(data, nonce, sizeof(nonce));
	if (cipher == NDZ_CIPHER_AES256GCM) {
		rc = gcm(1, k, h.uuid, nonce, ad, data + NDZ_CRYPT_NONCE, plain,
			 data + NDZ_CRYPT_NONCE + plain);
		if (rc < 0)
			return rc;
	} else {
		crypto_aead_xchacha20poly1305_ietf_encrypt(data + NDZ_CRYPT_NONCE, &clen,
							   data + NDZ_CRYPT_NONCE, plain, ad,
							   NDZ_HDR_SIZE, NULL, nonce, k->sk);
	}
	h.data_crc = ndz_crc32(0, data, h.data_len);
	return ndz_hdr_encode(&h, chunk, NULL);
}

int ndz_chunk_decrypt(const struct ndz_key *k, uint8_t *chunk, struct ndz_chunk_hdr *h)
{
	uint8_t *data = chunk + NDZ_HDR_SIZE, nonce[NDZ_CRYPT_NONCE], ad[NDZ_HDR_SIZE];
	unsigned long long mlen = 0;
	size_t clen;
	int rc;

	if (!(h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED))
		return 0;
	if (!k || k->type != NDZ_KEY_CRYPT)
		return NDZ_ENEEDKEY;
	if (memcmp(k->id, h->key_id, NDZ_KEY_ID_LEN) != 0)
		return NDZ_EWRONGKEY;
	if (h->data_len < NDZ_CRYPT_OVERHEAD || h->data_len > NDZ_MAX_DATA)
		return NDZ_EDECRYPT;
	if (ndz_trust_init() < 0)
		return NDZ_ENOTSUP;
	ndz_hdr_auth_data(chunk, ad);
	memcpy(nonce, data, sizeof(nonce));
	clen = h->data_len - NDZ_CRYPT_OVERHEAD;
	if (h->incompat_flags & NDZ_INCOMPAT_AES256GCM) {
		rc = gcm(0, k, h->uuid, nonce, ad, data + NDZ_CRYPT_NONCE, clen,
			 data + NDZ_CRYPT_NONCE + clen);
		if (rc < 0)
			return rc;
		mlen = clen;
	} else if (crypto_aead_xchacha20poly1305_ietf_decrypt(data + NDZ_CRYPT_NONCE, &mlen,
							      NULL, data + NDZ_CRYPT_NONCE,
							      clen + NDZ_CRYPT_TAG, ad,
							      NDZ_HDR_SIZE, nonce, k->sk) != 0) {
		return NDZ_EDECRYPT;
	}
	memmove(data, data + NDZ_CRYPT_NONCE, (size_t)mlen);
	h->data_len = (uint32_t)mlen;
	h->incompat_flags &= ~(NDZ_INCOMPAT_ENCRYPTED | NDZ_INCOMPAT_AES256GCM);
	return 0;
}
