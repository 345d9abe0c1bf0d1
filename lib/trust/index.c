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
	X_RESERVED = 56,                 /* version 1: 8 bytes, 0 */
	X_PIECES = 56,                   /* version 2: piece count, then 4 bytes 0 */
	X_RESERVED2 = 60,
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

	P_CHUNK = 0,
	P_COFF = 4,
	P_CLEN = 8,
	P_DLEN = 12,
	P_DOFF = 16,
	P_RESERVED = 24,                 /* 8 bytes, 0 */
	P_DIGEST = 32,
	P_SIZE = 64,

	SIG_LEN = 64,
};

#define INDEX_VERSION 1u                 /* no pieces: what readers before pieces read */
#define INDEX_VERSION_PIECES 2u
/* The most pieces: a frame holds at least a sector of data, and 1 MiB has room for 77,000 */
#define INDEX_MAX_PIECES_PER_CHUNK (NDZ_CHUNK_SIZE / 12u)
#define HASH_SHA256   2u                 /* the manifest's number for it */
#define SIG_ED25519   1u
/* The largest file: every chunk with the most regions a header holds. */
#define INDEX_MAX_BYTES ((uint64_t)X_ENTRIES + SIG_LEN + \
			 (uint64_t)NDZ_INDEX_MAX_CHUNKS * (E_SIZE + NDZ_MAX_REGIONS * R_SIZE + \
			 (uint64_t)INDEX_MAX_PIECES_PER_CHUNK * P_SIZE))

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
		for (i = 0; i < ix->chunks; i++) {
			free(ix->e[i].regions);
			free(ix->e[i].pieces);
		}
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
	free(x->pieces);
	x->pieces = NULL;
	x->npieces = 0;
	x->regions = r;
	x->nregions = h->nregions;
	x->first = h->first;
	x->last = h->last;
	memcpy(x->digest, digest, NDZ_INDEX_DIGEST_LEN);
	memcpy(ix->uuid, h->uuid, 16);
	ix->source_bytes = h->source_bytes;
	return 0;
}

int ndz_index_set_pieces(struct ndz_index *ix, uint32_t i, const struct ndz_index_piece *p,
			 uint32_t n, struct ndz_error *e)
{
	struct ndz_index_piece *q = NULL;

	if (i >= ix->chunks || n > INDEX_MAX_PIECES_PER_CHUNK)
		return ndz_error_set(e, NDZ_ERANGE, 0, "chunk %u: more than an index holds", i);
	if (n) {
		q = malloc(n * sizeof(*q));
		if (!q)
			return ndz_error_set(e, NDZ_ENOMEM, 0, "chunk %u: %s", i,
					     ndz_strerror(NDZ_ENOMEM));
		memcpy(q, p, n * sizeof(*q));
	}
	free(ix->e[i].pieces);
	ix->e[i].pieces = q;
	ix->e[i].npieces = n;
	return 0;
}

uint32_t ndz_index_piece_ranges(const struct ndz_index_entry *x,
				const struct ndz_index_piece *p, struct ndz_region *out,
				uint32_t cap)
{
	uint64_t a = p->doff / NDZ_SECTOR_SIZE, b = (p->doff + p->dlen) / NDZ_SECTOR_SIZE;
	uint64_t at = 0;                   /* data sectors before region j */
	uint32_t j, n = 0;

	for (j = 0; j < x->nregions && at < b && n < cap; j++) {
		uint64_t lo = at > a ? at : a, hi = at + x->regions[j].count < b ?
			at + x->regions[j].count : b;

		if (lo < hi)
			out[n++] = (struct ndz_region){ x->regions[j].start + (lo - at),
							(uint32_t)(hi - lo) };
		at += x->regions[j].count;
	}
	return n;
}

/* The file's size for ix, and its piece count into *pieces. */
static uint64_t index_size(const struct ndz_index *ix, uint64_t *pieces)
{
	uint64_t n = X_ENTRIES + SIG_LEN;
	uint32_t i;

	*pieces = 0;
	for (i = 0; i < ix->chunks; i++) {
		n += E_SIZE + (uint64_t)ix->e[i].nregions * R_SIZE +
		     (uint64_t)ix->e[i].npieces * P_SIZE;
		*pieces += ix->e[i].npieces;
	}
	return n;
}

int ndz_index_encode(struct ndz_index *ix, const struct ndz_key *sec, uint8_t **out,
		     size_t *len, struct ndz_error *e)
{
	uint64_t regions = 0, pieces;
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
	n = (size_t)index_size(ix, &pieces);
	if (pieces > UINT32_MAX)
		return ndz_error_set(e, NDZ_EINVAL, 0, "an index of %llu pieces: too many",
				     (unsigned long long)pieces);
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
	put_le16(b + X_VERSION, pieces ? INDEX_VERSION_PIECES : INDEX_VERSION);
	put_le32(b + X_PIECES, (uint32_t)pieces);
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
	for (i = 0; i < ix->chunks; i++) {
		const struct ndz_index_entry *x = &ix->e[i];

		for (j = 0; j < x->npieces; j++, at += P_SIZE) {
			const struct ndz_index_piece *p = &x->pieces[j];

			put_le32(b + at + P_CHUNK, i);
			put_le32(b + at + P_COFF, p->coff);
			put_le32(b + at + P_CLEN, p->clen);
			put_le32(b + at + P_DLEN, p->dlen);
			put_le64(b + at + P_DOFF, p->doff);
			memcpy(b + at + P_DIGEST, p->digest, NDZ_INDEX_DIGEST_LEN);
		}
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

/* The data bytes of entry x: its regions' sectors. */
static uint64_t entry_data(const struct ndz_index_entry *x)
{
	uint64_t n = 0;
	uint32_t j;

	for (j = 0; j < x->nregions; j++)
		n += x->regions[j].count;
	return n * NDZ_SECTOR_SIZE;
}

/*
 * Check the pieces of b from at to body (pieces of them) and give each entry its
 * own: by chunk, in order, each chunk's tiling its compressed data from 0 and its
 * uncompressed data exactly. 0 or NDZ_EINDEX/NDZ_ENOMEM.
 */
static int decode_pieces(const uint8_t *b, size_t body, size_t at, uint32_t chunks,
			 uint32_t pieces, struct ndz_index *ix, struct ndz_error *e)
{
	uint32_t k = 0, i, next = 0;     /* the chunks' pieces come in chunk order */

	if ((body - at) / P_SIZE != pieces || (body - at) % P_SIZE)
		return malformed(e, "size does not match the region and piece counts");
	while (k < pieces) {
		const uint8_t *p = b + at + (size_t)k * P_SIZE;
		struct ndz_index_entry *x;
		uint32_t n = 1, j;
		uint64_t doff = 0, coff = 0;

		i = get_le32(p + P_CHUNK);
		if (i >= chunks || i < next)
			return bad_chunk(e, i, "pieces out of order or of no chunk");
		next = i + 1;
		while (k + n < pieces && get_le32(p + (size_t)n * P_SIZE + P_CHUNK) == i)
			n++;
		if (n > INDEX_MAX_PIECES_PER_CHUNK)
			return bad_chunk(e, i, "too many pieces");
		x = &ix->e[i];
		x->pieces = calloc(n, sizeof(*x->pieces));
		if (!x->pieces)
			return ndz_error_set(e, NDZ_ENOMEM, 0, "chunk %u: %s", i,
					     ndz_strerror(NDZ_ENOMEM));
		x->npieces = n;
		for (j = 0; j < n; j++, p += P_SIZE) {
			struct ndz_index_piece *q = &x->pieces[j];

			q->coff = get_le32(p + P_COFF);
			q->clen = get_le32(p + P_CLEN);
			q->dlen = get_le32(p + P_DLEN);
			q->doff = get_le64(p + P_DOFF);
			memcpy(q->digest, p + P_DIGEST, NDZ_INDEX_DIGEST_LEN);
			if (get_le64(p + P_RESERVED) != 0)
				return bad_chunk(e, i, "piece reserved field not 0");
			if (q->coff != coff || q->doff != doff || !q->clen || !q->dlen ||
			    q->clen > NDZ_CHUNK_SIZE - NDZ_HDR_SIZE - coff ||
			    q->dlen > NDZ_INDEX_MAX_PIECE || q->dlen % NDZ_SECTOR_SIZE)
				return bad_chunk(e, i, "pieces do not tile the chunk");
			coff += q->clen;
			doff += q->dlen;
		}
		if (doff != entry_data(x))
			return bad_chunk(e, i, "pieces do not cover the chunk's data");
		k += n;
	}
	return 0;
}

/* Check the entries of b (already sized) and fill ix's; 0 or NDZ_EINDEX/NDZ_ENOMEM. */
static int decode_entries(const uint8_t *b, size_t body, uint32_t chunks, uint32_t pieces,
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
	return decode_pieces(b, body, at, chunks, pieces, ix, e);
}

int ndz_index_decode(const uint8_t *b, size_t len, const struct ndz_key *pub,
		     struct ndz_index *ix, struct ndz_error *e)
{
	uint32_t chunks, regions, pieces = 0, version;
	uint64_t want;
	size_t body;
	int rc;

	memset(ix, 0, sizeof(*ix));
	if (len < X_ENTRIES + SIG_LEN)
		return malformed(e, "too short");
	if (memcmp(b + X_MAGIC, index_magic, sizeof(index_magic)) != 0)
		return malformed(e, "bad magic");
	version = get_le16(b + X_VERSION);
	if (version != INDEX_VERSION && version != INDEX_VERSION_PIECES)
		return malformed(e, "unsupported version");
	if (get_le16(b + X_HASH_ALG) != HASH_SHA256 || get_le16(b + X_SIG_ALG) != SIG_ED25519)
		return malformed(e, "unsupported hash or signature algorithm");
	if (version == INDEX_VERSION_PIECES) {
		pieces = get_le32(b + X_PIECES);
		if (!pieces || get_le32(b + X_RESERVED2) != 0)
			return malformed(e, "bad piece count or reserved field");
	}
	if (get_le16(b + X_FLAGS) != 0 || (version == INDEX_VERSION && get_le64(b + X_RESERVED)))
		return malformed(e, "unknown flags");
	chunks = get_le32(b + X_CHUNKS);
	regions = get_le32(b + X_REGIONS);
	if (chunks == 0 || chunks > NDZ_INDEX_MAX_CHUNKS)
		return malformed(e, "chunk count out of range");
	if (regions > (uint64_t)chunks * NDZ_MAX_REGIONS)
		return malformed(e, "region count out of range");
	want = X_ENTRIES + SIG_LEN + (uint64_t)chunks * E_SIZE + (uint64_t)regions * R_SIZE +
	       (uint64_t)pieces * P_SIZE;
	if (want != len)
		return ndz_error_set(e, NDZ_EINDEX, 0, "%s: %zu bytes, %llu expected for %u "
				     "chunks, %u regions and %u pieces (truncated?)",
				     ndz_strerror(NDZ_EINDEX), len, (unsigned long long)want,
				     chunks, regions, pieces);
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
	rc = decode_entries(b, body, chunks, pieces, ix, e);
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
	uint32_t n, r, p = 0;

	if (len < X_ENTRIES || memcmp(buf + X_MAGIC, index_magic, sizeof(index_magic)) != 0)
		return 0;
	n = get_le32(buf + X_CHUNKS);
	r = get_le32(buf + X_REGIONS);
	if (get_le16(buf + X_VERSION) == INDEX_VERSION_PIECES)
		p = get_le32(buf + X_PIECES);
	if (!n || n > NDZ_INDEX_MAX_CHUNKS)
		return 0;
	return (uint64_t)X_ENTRIES + (uint64_t)n * E_SIZE + (uint64_t)r * R_SIZE +
	       (uint64_t)p * P_SIZE + SIG_LEN;
}
