/* Content indexes (doc/FORMAT.md, "The content index"): the only code that knows their bytes. */
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
#include "index.h"

static const uint8_t index_magic[8] = { 0x89, 'N', 'D', 'Z', 'I', 'D', 'X', '\n' };

/* Offsets of the fixed part and of an entry; doc/FORMAT.md mirrors these tables. */
enum {
	X_MAGIC = 0,
	X_VERSION = 8,
	X_HASH_ALG = 10,
	X_SIG_ALG = 12,
	X_FLAGS = 14,
	X_UUID = 16,
	X_KEY_ID = 32,
	X_CHUNKS = 40,
	X_REGIONS = 44,
	X_SRC_BYTES = 48,
	X_RESERVED = 56,
	X_ENTRIES = 64,

	E_FIRST = 0,
	E_LAST = 8,
	E_NREGIONS = 16,
	E_RESERVED = 20,
	E_DIGEST = 24,
	E_SIZE = 56,

	R_START = 0,
	R_COUNT = 8,
	R_SIZE = 12,

	SIG_LEN = 64,
};

#define INDEX_VERSION 1u
#define HASH_SHA256   2u                 /* the manifest's number for it */
#define SIG_ED25519   1u
/* The largest file: every chunk with the most regions a header holds. */
#define INDEX_MAX_BYTES ((uint64_t)X_ENTRIES + SIG_LEN + \
			 (uint64_t)NDZ_INDEX_MAX_CHUNKS * (E_SIZE + NDZ_MAX_REGIONS * R_SIZE))

int ndz_index_init(struct ndz_index *ix, const uint8_t uuid[16], uint32_t chunks,
		   uint64_t source_bytes, struct ndz_error *e)
{
	memset(ix, 0, sizeof(*ix));
	if (chunks == 0 || chunks > NDZ_INDEX_MAX_CHUNKS)
		return ndz_error_set(e, NDZ_EINVAL, 0, "an index of %u chunks: 1 to %u", chunks,
				     NDZ_INDEX_MAX_CHUNKS);
	ix->e = calloc(chunks, sizeof(*ix->e));
	if (!ix->e)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "an index of %u chunks: %s", chunks,
				     ndz_strerror(NDZ_ENOMEM));
	ix->chunks = chunks;
	if (uuid)
		memcpy(ix->uuid, uuid, 16);
	ix->source_bytes = source_bytes;
	return 0;
}

void ndz_index_release(struct ndz_index *ix)
{
	uint32_t i;

	if (ix->e)
		for (i = 0; i < ix->chunks; i++)
			free(ix->e[i].regions);
	free(ix->e);
	memset(ix, 0, sizeof(*ix));
}

int ndz_index_set(struct ndz_index *ix, uint32_t i, const struct ndz_chunk_hdr *h,
		  const uint8_t *area, const uint8_t digest[NDZ_INDEX_DIGEST_LEN],
		  struct ndz_error *e)
{
	struct ndz_index_entry *x;
	struct ndz_region *r = NULL;
	uint32_t j;

	if (i >= NDZ_INDEX_MAX_CHUNKS || h->nregions > NDZ_MAX_REGIONS)
		return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: more than an index holds", i);
	if (i >= ix->chunks) {
		struct ndz_index_entry *more = realloc(ix->e, ((size_t)i + 1) * sizeof(*more));

		if (!more)
			return ndz_error_set(e, NDZ_ENOMEM, 0, "chunk %u: %s", i,
					     ndz_strerror(NDZ_ENOMEM));
		memset(more + ix->chunks, 0, ((size_t)i + 1 - ix->chunks) * sizeof(*more));
		ix->e = more;
		ix->chunks = i + 1;
	}
	if (h->nregions) {
		r = malloc(h->nregions * sizeof(*r));
		if (!r)
			return ndz_error_set(e, NDZ_ENOMEM, 0, "chunk %u: %s", i,
					     ndz_strerror(NDZ_ENOMEM));
		for (j = 0; j < h->nregions; j++)
			r[j] = ndz_hdr_region(area, j);
	}
	x = &ix->e[i];
	free(x->regions);
	x->regions = r;
	x->nregions = h->nregions;
	x->first = h->first;
	x->last = h->last;
	memcpy(x->digest, digest, NDZ_INDEX_DIGEST_LEN);
	memcpy(ix->uuid, h->uuid, 16);
	ix->source_bytes = h->source_bytes;
	return 0;
}

/* The file's size for ix; 0 when it would be too large. */
static uint64_t index_size(const struct ndz_index *ix)
{
	uint64_t n = X_ENTRIES + SIG_LEN;
	uint32_t i;

	for (i = 0; i < ix->chunks; i++)
		n += E_SIZE + (uint64_t)ix->e[i].nregions * R_SIZE;
	return n;
}

int ndz_index_encode(struct ndz_index *ix, const struct ndz_key *sec, uint8_t **out,
		     size_t *len, struct ndz_error *e)
{
	uint64_t regions = 0;
	size_t n, body, at;
	uint32_t i, j;
	uint8_t *b;

	*out = NULL;
	*len = 0;
	if (sec && sec->type != NDZ_KEY_SIGN_SECRET)
		return ndz_error_set(e, NDZ_EINVAL, 0, "signing an index: a %s key, not a "
				     "secret signing key", ndz_key_type_name(sec->type));
	if (!ix->chunks || ix->chunks > NDZ_INDEX_MAX_CHUNKS)
		return ndz_error_set(e, NDZ_EINVAL, 0, "an index of %u chunks: 1 to %u",
				     ix->chunks, NDZ_INDEX_MAX_CHUNKS);
	if (sec && ndz_trust_init(e) < 0)
		return NDZ_ENOTSUP;
	n = (size_t)index_size(ix);
	body = n - SIG_LEN;
	b = calloc(1, n);
	if (!b)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "an index of %u chunks: %s", ix->chunks,
				     ndz_strerror(NDZ_ENOMEM));
	if (sec)
		memcpy(ix->key_id, sec->id, NDZ_KEY_ID_LEN);
	else
		memset(ix->key_id, 0, NDZ_KEY_ID_LEN);
	memcpy(b + X_MAGIC, index_magic, sizeof(index_magic));
	put_le16(b + X_VERSION, INDEX_VERSION);
	put_le16(b + X_HASH_ALG, HASH_SHA256);
	put_le16(b + X_SIG_ALG, SIG_ED25519);
	memcpy(b + X_UUID, ix->uuid, 16);
	memcpy(b + X_KEY_ID, ix->key_id, NDZ_KEY_ID_LEN);
	put_le32(b + X_CHUNKS, ix->chunks);
	put_le64(b + X_SRC_BYTES, ix->source_bytes);
	at = X_ENTRIES;
	for (i = 0; i < ix->chunks; i++) {
		const struct ndz_index_entry *x = &ix->e[i];

		put_le64(b + at + E_FIRST, x->first);
		put_le64(b + at + E_LAST, x->last);
		put_le32(b + at + E_NREGIONS, x->nregions);
		memcpy(b + at + E_DIGEST, x->digest, NDZ_INDEX_DIGEST_LEN);
		at += E_SIZE;
		for (j = 0; j < x->nregions; j++, at += R_SIZE) {
			put_le64(b + at + R_START, x->regions[j].start);
			put_le32(b + at + R_COUNT, x->regions[j].count);
		}
		regions += x->nregions;
	}
	if (regions > UINT32_MAX) {
		free(b);
		return ndz_error_set(e, NDZ_EINVAL, 0, "an index of %llu regions: too many",
				     (unsigned long long)regions);
	}
	put_le32(b + X_REGIONS, (uint32_t)regions);
	if (sec)
		crypto_sign_ed25519_detached(b + body, NULL, b, body, sec->sk);
	*out = b;
	*len = n;
	return 0;
}

static int malformed(struct ndz_error *e, const char *why)
{
	return ndz_error_set(e, NDZ_EINDEX, 0, "%s: %s", ndz_strerror(NDZ_EINDEX), why);
}

static int bad_chunk(struct ndz_error *e, uint32_t i, const char *why)
{
	return ndz_error_set(e, NDZ_EINDEX, 0, "%s: chunk %u: %s", ndz_strerror(NDZ_EINDEX), i,
			     why);
}

static int all_zero(const uint8_t *b, size_t n)
{
	size_t i;
	uint8_t acc = 0;

	for (i = 0; i < n; i++)
		acc |= b[i];
	return acc == 0;
}

/* Check the entries of b (already sized) and fill ix's; 0 or NDZ_EINDEX/NDZ_ENOMEM. */
static int decode_entries(const uint8_t *b, size_t body, uint32_t chunks,
			  struct ndz_index *ix, struct ndz_error *e)
{
	uint64_t prev_last = 0;
	size_t at = X_ENTRIES;
	uint32_t i, j;

	for (i = 0; i < chunks; i++) {
		struct ndz_index_entry *x = &ix->e[i];
		uint64_t end;

		if (body - at < E_SIZE)
			return bad_chunk(e, i, "truncated");
		x->first = get_le64(b + at + E_FIRST);
		x->last = get_le64(b + at + E_LAST);
		x->nregions = get_le32(b + at + E_NREGIONS);
		if (get_le32(b + at + E_RESERVED) != 0)
			return bad_chunk(e, i, "reserved field not 0");
		memcpy(x->digest, b + at + E_DIGEST, NDZ_INDEX_DIGEST_LEN);
		at += E_SIZE;
		if (x->first > x->last || x->first < prev_last)
			return bad_chunk(e, i, "first and last out of order");
		if (x->nregions > NDZ_MAX_REGIONS)
			return bad_chunk(e, i, "too many regions");
		if ((body - at) / R_SIZE < x->nregions)
			return bad_chunk(e, i, "truncated");
		prev_last = x->last;
		if (!x->nregions)
			continue;
		x->regions = malloc(x->nregions * sizeof(*x->regions));
		if (!x->regions)
			return ndz_error_set(e, NDZ_ENOMEM, 0, "chunk %u: %s", i,
					     ndz_strerror(NDZ_ENOMEM));
		end = x->first;
		for (j = 0; j < x->nregions; j++, at += R_SIZE) {
			struct ndz_region r;

			r.start = get_le64(b + at + R_START);
			r.count = get_le32(b + at + R_COUNT);
			if (r.count == 0 || r.start < end || r.start > x->last ||
			    r.count > x->last - r.start)
				return bad_chunk(e, i, "regions unsorted, overlapping or outside "
						 "the chunk");
			end = r.start + r.count;
			x->regions[j] = r;
		}
	}
	if (at != body)
		return malformed(e, "size does not match the region count");
	return 0;
}

int ndz_index_decode(const uint8_t *b, size_t len, const struct ndz_key *pub,
		     struct ndz_index *ix, struct ndz_error *e)
{
	uint32_t chunks, regions;
	uint64_t want;
	size_t body;
	int rc;

	memset(ix, 0, sizeof(*ix));
	if (len < X_ENTRIES + SIG_LEN)
		return malformed(e, "too short");
	if (memcmp(b + X_MAGIC, index_magic, sizeof(index_magic)) != 0)
		return malformed(e, "bad magic");
	if (get_le16(b + X_VERSION) != INDEX_VERSION)
		return malformed(e, "unsupported version");
	if (get_le16(b + X_HASH_ALG) != HASH_SHA256 || get_le16(b + X_SIG_ALG) != SIG_ED25519)
		return malformed(e, "unsupported hash or signature algorithm");
	if (get_le16(b + X_FLAGS) != 0 || get_le64(b + X_RESERVED) != 0)
		return malformed(e, "unknown flags");
	chunks = get_le32(b + X_CHUNKS);
	regions = get_le32(b + X_REGIONS);
	if (chunks == 0 || chunks > NDZ_INDEX_MAX_CHUNKS)
		return malformed(e, "chunk count out of range");
	if (regions > (uint64_t)chunks * NDZ_MAX_REGIONS)
		return malformed(e, "region count out of range");
	want = X_ENTRIES + SIG_LEN + (uint64_t)chunks * E_SIZE + (uint64_t)regions * R_SIZE;
	if (want != len)
		return ndz_error_set(e, NDZ_EINDEX, 0, "%s: %zu bytes, %llu expected for %u "
				     "chunks and %u regions (truncated?)",
				     ndz_strerror(NDZ_EINDEX), len, (unsigned long long)want,
				     chunks, regions);
	body = len - SIG_LEN;
	if (all_zero(b + X_KEY_ID, NDZ_KEY_ID_LEN) && !all_zero(b + body, SIG_LEN))
		return malformed(e, "a signature without a key id");
	if (pub) {
		if (pub->type != NDZ_KEY_SIGN_PUBLIC)
			return ndz_error_set(e, NDZ_EINVAL, 0, "checking an index: a %s key, not "
					     "a public signing key", ndz_key_type_name(pub->type));
		if (all_zero(b + X_KEY_ID, NDZ_KEY_ID_LEN))
			return ndz_error_set(e, NDZ_EUNSIGNED, 0, "the content index is not signed");
		if (memcmp(b + X_KEY_ID, pub->id, NDZ_KEY_ID_LEN) != 0) {
			char want_id[17], got[17];

			ndz_key_id_hex(pub->id, want_id);
			ndz_key_id_hex(b + X_KEY_ID, got);
			return ndz_error_set(e, NDZ_EWRONGKEY, 0, "%s: content index signed by "
					     "another key (id %s, not %s)",
					     ndz_strerror(NDZ_EWRONGKEY), got, want_id);
		}
		if (ndz_trust_init(e) < 0)
			return NDZ_ENOTSUP;
		if (crypto_sign_ed25519_verify_detached(b + body, b, body, pub->pk) != 0)
			return ndz_error_set(e, NDZ_EINDEXSIG, 0, "%s",
					     ndz_strerror(NDZ_EINDEXSIG));
	}
	rc = ndz_index_init(ix, b + X_UUID, chunks, get_le64(b + X_SRC_BYTES), e);
	if (rc < 0)
		return rc;
	memcpy(ix->key_id, b + X_KEY_ID, NDZ_KEY_ID_LEN);
	rc = decode_entries(b, body, chunks, ix, e);
	if (rc < 0) {
		ndz_index_release(ix);
		return rc;
	}
	ix->signed_ = pub != NULL;
	return 0;
}

/* Read the whole file at path (at most INDEX_MAX_BYTES) into *out and *len. */
static int read_file(const char *path, uint8_t **out, size_t *len, struct ndz_error *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);

	*out = NULL;
	if (fd < 0)
		return ndz_error_set(e, errno == ENOENT ? NDZ_ENOENT : NDZ_EIO, errno, "%s", path);
	return ndz_trust_read_fd(fd, path, INDEX_MAX_BYTES, NDZ_EINDEX, out, len, e);
}

int ndz_index_load(const char *path, const struct ndz_key *pub, struct ndz_index *ix,
		   struct ndz_error *e)
{
	uint8_t *b;
	size_t len = 0;
	int rc;

	memset(ix, 0, sizeof(*ix));
	rc = read_file(path, &b, &len, e);
	if (rc < 0)
		return rc;
	rc = ndz_index_decode(b, len, pub, ix, e);
	free(b);
	if (rc < 0)
		ndz_error_prefix(e, "%s", path);
	return rc;
}

int ndz_index_save(const char *path, const uint8_t *buf, size_t len, struct ndz_error *e)
{
	return ndz_file_replace(path, buf, len, 0644, e);
}

int ndz_index_path(const char *image, char *out, size_t cap, struct ndz_error *e)
{
	int n = snprintf(out, cap, "%s.index", image);

	if (n < 0 || (size_t)n >= cap)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: name too long", image);
	return 0;
}

int ndz_index_match(const struct ndz_index *ix, const uint8_t uuid[16],
		    uint64_t source_bytes, uint32_t chunks, struct ndz_error *e)
{
	const char *what = memcmp(ix->uuid, uuid, 16) ? "uuid" :
		ix->source_bytes != source_bytes ? "source size" :
		chunks && ix->chunks != chunks ? "chunk count" : NULL;

	if (what)
		return ndz_error_set(e, NDZ_EMISMATCH, 0, "the content index is of another "
				     "image (%s differs)", what);
	return 0;
}

struct ndz_digest {
	EVP_MD_CTX *ctx;
	int started;
};

static int digest_start(struct ndz_digest *d, struct ndz_error *e)
{
	if (EVP_DigestInit_ex(d->ctx, EVP_sha256(), NULL) != 1)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "sha-256: libcrypto failed");
	d->started = 1;
	return 0;
}

struct ndz_digest *ndz_digest_create(struct ndz_error *e)
{
	struct ndz_digest *d = calloc(1, sizeof(*d));

	if (d)
		d->ctx = EVP_MD_CTX_new();
	if (!d || !d->ctx) {
		free(d);
		ndz_error_set(e, NDZ_ENOMEM, 0, "sha-256: %s", ndz_strerror(NDZ_ENOMEM));
		return NULL;
	}
	if (digest_start(d, e) < 0) {
		ndz_digest_free(d);
		return NULL;
	}
	return d;
}

int ndz_digest_update(struct ndz_digest *d, const void *buf, size_t len,
		      struct ndz_error *e)
{
	if (!d->started && digest_start(d, e) < 0)
		return NDZ_ENOMEM;
	if (len && EVP_DigestUpdate(d->ctx, buf, len) != 1)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "sha-256: libcrypto failed");
	return 0;
}

int ndz_digest_final(struct ndz_digest *d, uint8_t out[NDZ_INDEX_DIGEST_LEN],
		     struct ndz_error *e)
{
	unsigned int n = 0;

	if (!d->started && digest_start(d, e) < 0)
		return NDZ_ENOMEM;
	d->started = 0;
	if (EVP_DigestFinal_ex(d->ctx, out, &n) != 1 || n != NDZ_INDEX_DIGEST_LEN) {
		memset(out, 0, NDZ_INDEX_DIGEST_LEN);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "sha-256: libcrypto failed");
	}
	return digest_start(d, e);
}

void ndz_digest_free(struct ndz_digest *d)
{
	if (!d)
		return;
	EVP_MD_CTX_free(d->ctx);
	free(d);
}

/* (added by helper seedmc for frisbee --seed: the length from the first bytes) */
uint64_t ndz_index_size_from_header(const uint8_t *buf, size_t len)
{
	uint32_t n, r;

	if (len < X_ENTRIES || memcmp(buf + X_MAGIC, index_magic, sizeof(index_magic)) != 0)
		return 0;
	n = get_le32(buf + X_CHUNKS);
	r = get_le32(buf + X_REGIONS);
	if (!n || n > NDZ_INDEX_MAX_CHUNKS)
		return 0;
	return (uint64_t)X_ENTRIES + (uint64_t)n * E_SIZE + (uint64_t)r * R_SIZE + SIG_LEN;
}
