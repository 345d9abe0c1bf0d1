/* The original Frisbee image format (V1-V4): parse, check, decrypt, read. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <nettle/blowfish.h>
#include <nettle/cbc.h>
#include <nettle/sha1.h>
#include <openssl/bn.h>

#include "le.h"
#include "orig.h"

/* header field offsets (little-endian, as every image we accept was written) */
#define O_MAGIC    0
#define O_SIZE     4
#define O_INDEX    8
#define O_TOTAL    12
#define O_RSIZE    16
#define O_RCOUNT   20
#define O_FIRST    24
#define O_LAST     28
#define O_RELOCS   32
#define O_CIPHER   36
#define O_CSUMTYPE 38
#define O_IV       40
#define O_CSUM     72
#define O_IMAGEID  328
#define RELOC_SIZE 16u

/* code in e with "its message: detail" (detail printf-style); returns code. */
static int orig_fail(struct ndz_error *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int orig_fail(struct ndz_error *e, int code, const char *fmt, ...)
{
	char detail[256];
	va_list ap;

	if (!e || e->code)
		return code;
	va_start(ap, fmt);
	vsnprintf(detail, sizeof(detail), fmt, ap);
	va_end(ap);
	return ndz_error_set(e, code, 0, "%s: %s", ndz_strerror(code), detail);
}

int ndz_orig_probe(const uint8_t *buf, size_t len, struct ndz_error *e)
{
	uint32_t le, be;

	if (len < 4)
		return 0;
	le = get_le32(buf);
	be = get_be32(buf);
	/* 0x69696969 reads the same either way: V1's order shows in its regionsize */
	if (le == NDZ_ORIG_MAGIC && len >= 20 && get_le32(buf + 16) != NDZ_ORIG_HDR_AREA &&
	    get_be32(buf + 16) == NDZ_ORIG_HDR_AREA)
		return ndz_error_set(e, NDZ_EBIGENDIAN, 0, NULL);
	if (le >= NDZ_ORIG_MAGIC && le <= NDZ_ORIG_MAGIC + 3)
		return (int)(le - NDZ_ORIG_MAGIC + 1);
	if (be >= NDZ_ORIG_MAGIC + 1 && be <= NDZ_ORIG_MAGIC + 3)
		return ndz_error_set(e, NDZ_EBIGENDIAN, 0, NULL);
	return 0;
}

int ndz_orig_decode(const uint8_t *a, struct ndz_orig_hdr *oh, struct ndz_error *e)
{
	int v = ndz_orig_probe(a, NDZ_ORIG_HDR_AREA, NULL);
	uint64_t prev_end = 0, lim;
	uint32_t i;

	memset(oh, 0, sizeof(*oh));
	if (v == NDZ_EBIGENDIAN)
		return orig_fail(e, v, "magic 0x%08x", get_le32(a + O_MAGIC));
	if (v <= 0)
		return orig_fail(e, NDZ_EBADMAGIC, "magic 0x%08x", get_le32(a + O_MAGIC));
	oh->version = (uint32_t)v;
	oh->hdrsize = v == 1 ? NDZ_ORIG_HDR_V1 : v < 4 ? NDZ_ORIG_HDR_V2 : NDZ_ORIG_HDR_V4;
	oh->size = get_le32(a + O_SIZE);
	oh->index = get_le32(a + O_INDEX);
	oh->total = get_le32(a + O_TOTAL);
	oh->regionsize = get_le32(a + O_RSIZE);
	oh->nregions = get_le32(a + O_RCOUNT);
	if (v >= 2) {
		oh->first = get_le32(a + O_FIRST);
		oh->last = get_le32(a + O_LAST);
		oh->nrelocs = get_le32(a + O_RELOCS);
	}
	if (v == 4) {
		oh->cipher = get_le16(a + O_CIPHER);
		oh->csum_type = get_le16(a + O_CSUMTYPE);
		memcpy(oh->iv, a + O_IV, sizeof(oh->iv));
		memcpy(oh->csum, a + O_CSUM, sizeof(oh->csum));
		memcpy(oh->imageid, a + O_IMAGEID, sizeof(oh->imageid));
	}
	if (oh->size == 0 || oh->size > NDZ_ORIG_MAX_DATA)
		return orig_fail(e, NDZ_EHEADER, "data size %u outside 1..%u", oh->size,
				 NDZ_ORIG_MAX_DATA);
	if (oh->regionsize != NDZ_ORIG_HDR_AREA)
		return orig_fail(e, NDZ_EHEADER, "header area of %u bytes, not %u",
				 oh->regionsize, NDZ_ORIG_HDR_AREA);
	if (v == 1 && (oh->total == 0 || oh->index >= oh->total))
		return orig_fail(e, NDZ_EHEADER, "chunk %u of %u", oh->index, oh->total);
	if (oh->nregions == 0 || oh->nregions > (NDZ_ORIG_HDR_AREA - oh->hdrsize) / 8 ||
	    oh->nrelocs > (NDZ_ORIG_HDR_AREA - oh->hdrsize - 8 * oh->nregions) / RELOC_SIZE)
		return orig_fail(e, NDZ_EHEADER, "%u regions and %u relocations do not "
				 "fit the header area", oh->nregions, oh->nrelocs);
	if (v >= 2 && oh->first > oh->last)
		return orig_fail(e, NDZ_EREGION, "first sector %u past last %u",
				 oh->first, oh->last);
	if (v == 4 && oh->cipher > NDZ_ORIG_CIPHER_BF_CBC)
		return orig_fail(e, NDZ_ENOTSUP, "cipher %u", oh->cipher);
	if (v == 4 && oh->cipher && oh->size % BLOWFISH_BLOCK_SIZE)
		return orig_fail(e, NDZ_EHEADER, "encrypted size %u not a whole number "
				 "of cipher blocks", oh->size);
	if (v == 4 && oh->csum_type != 0 && (oh->csum_type & ~NDZ_ORIG_CSUM_SIGNED) !=
	    NDZ_ORIG_CSUM_SHA1)
		return orig_fail(e, NDZ_ENOTSUP, "checksum type 0x%x", oh->csum_type);
	lim = v >= 2 ? oh->last : (uint64_t)UINT32_MAX + 1;
	if (v >= 2)
		prev_end = oh->first;
	for (i = 0; i < oh->nregions; i++) {
		struct ndz_region r = ndz_orig_region(a, oh, i);

		if (r.count == 0 || r.start < prev_end || r.start + r.count > lim)
			return orig_fail(e, NDZ_EREGION, "region %u (%llu+%u) %s", i,
					 (unsigned long long)r.start, r.count,
					 r.count == 0 ? "is empty" :
					 r.start < prev_end ? (i ? "overlaps or precedes the one before" :
							       "starts before the chunk's first sector") :
					 v >= 2 ? "runs past the chunk's last sector" :
					 "runs past sector 2^32");
		prev_end = r.start + r.count;
	}
	for (i = 0; i < oh->nrelocs; i++) {
		struct ndz_orig_reloc rl = ndz_orig_get_reloc(a, oh, i);
		uint64_t at = (uint64_t)rl.sector * NDZ_SECTOR_SIZE + rl.sectoff;
		struct ndz_region last = ndz_orig_region(a, oh, oh->nregions - 1);
		uint32_t j;

		if (rl.type != NDZ_ORIG_RELOC_FBSDDISKLABEL && rl.type != NDZ_ORIG_RELOC_SHORTSECTOR)
			return orig_fail(e, NDZ_ENOTSUP, "relocation %u of type %u "
					 "(only FreeBSD disklabel and short sector are applied)",
					 i, rl.type);
		if (rl.sectoff >= NDZ_SECTOR_SIZE || rl.size == 0)
			return orig_fail(e, NDZ_EREGION, "relocation %u: offset %u, size %u",
					 i, rl.sectoff, rl.size);
		for (j = 0; j < oh->nregions; j++) {
			struct ndz_region r = ndz_orig_region(a, oh, j);

			if (at >= r.start * NDZ_SECTOR_SIZE &&
			    at + rl.size <= (r.start + r.count) * NDZ_SECTOR_SIZE)
				break;
		}
		if (j == oh->nregions)
			return orig_fail(e, NDZ_EREGION, "relocation %u (sector %u, %u bytes) "
					 "outside the chunk's regions", i, rl.sector, rl.size);
		if (rl.type == NDZ_ORIG_RELOC_SHORTSECTOR &&
		    (rl.sector != last.start + last.count - 1 || rl.sectoff != 0 ||
		     rl.size >= NDZ_SECTOR_SIZE))
			return orig_fail(e, NDZ_EREGION, "short-sector relocation %u is not "
					 "a part of the chunk's last sector", i);
		if (rl.type == NDZ_ORIG_RELOC_FBSDDISKLABEL && rl.size < NDZ_BSDLABEL_PARTS)
			return orig_fail(e, NDZ_EREGION, "disklabel relocation %u of %u "
					 "bytes", i, rl.size);
	}
	return 0;
}

struct ndz_region ndz_orig_region(const uint8_t *a, const struct ndz_orig_hdr *oh, uint32_t i)
{
	const uint8_t *p = a + oh->hdrsize + 8 * i;
	struct ndz_region r = { get_le32(p), get_le32(p + 4) };

	return r;
}

struct ndz_orig_reloc ndz_orig_get_reloc(const uint8_t *a, const struct ndz_orig_hdr *oh,
					 uint32_t i)
{
	const uint8_t *p = a + oh->hdrsize + 8 * oh->nregions + RELOC_SIZE * i;
	struct ndz_orig_reloc r = { get_le32(p), get_le32(p + 4), get_le32(p + 8),
				    get_le32(p + 12) };

	return r;
}

uint64_t ndz_orig_data_end(const uint8_t *a, const struct ndz_orig_hdr *oh)
{
	struct ndz_region r = ndz_orig_region(a, oh, oh->nregions - 1);
	uint64_t end = (r.start + r.count) * NDZ_SECTOR_SIZE;
	uint32_t i;

	for (i = 0; i < oh->nrelocs; i++) {
		struct ndz_orig_reloc rl = ndz_orig_get_reloc(a, oh, i);

		if (rl.type == NDZ_ORIG_RELOC_SHORTSECTOR)
			end = (uint64_t)rl.sector * NDZ_SECTOR_SIZE + rl.size;
	}
	return end;
}

/* The RSA public operation on sig: valid when it is a PKCS#1 type 1 block whose
 * message starts with digest (the original signs the digest followed by zeros). */
static int rsa_check(const struct ndz_orig_keys *k, const uint8_t *sig, const uint8_t *digest)
{
	BIGNUM *n = BN_bin2bn(k->rsa_n, (int)k->rsa_n_len, NULL);
	BIGNUM *e = BN_bin2bn(k->rsa_e, (int)k->rsa_e_len, NULL);
	BIGNUM *s = NULL, *m = BN_new();
	BN_CTX *ctx = BN_CTX_new();
	uint8_t out[512];
	int len, ok = 0, i;

	len = n ? BN_num_bytes(n) : 0;
	if (!n || !e || !m || !ctx || len < 11 + 20 || len > (int)sizeof(out))
		goto out;
	s = BN_bin2bn(sig, len, NULL);
	if (!s || BN_cmp(s, n) >= 0 || !BN_mod_exp(m, s, e, n, ctx) ||
	    BN_bn2binpad(m, out, len) != len)
		goto out;
	if (out[0] != 0 || out[1] != 1)
		goto out;
	for (i = 2; i < len && out[i] == 0xff; i++)
		;
	if (i < 10 || i >= len || out[i] != 0 || len - i - 1 < 20)
		goto out;
	ok = memcmp(out + i + 1, digest, 20) == 0;
out:
	BN_free(n);
	BN_free(e);
	BN_free(s);
	BN_free(m);
	BN_CTX_free(ctx);
	return ok;
}

/* The SHA-1 the original's V4 checksum and signature are of: area (csum zeroed) + data. */
static void chunk_sha1(const uint8_t *chunk, const struct ndz_orig_hdr *oh, uint8_t *digest)
{
	static const uint8_t zeros[256];
	struct sha1_ctx c;

	sha1_init(&c);
	sha1_update(&c, O_CSUM, chunk);
	sha1_update(&c, sizeof(zeros), zeros);
	sha1_update(&c, NDZ_ORIG_HDR_AREA - O_CSUM - sizeof(zeros), chunk + O_CSUM + sizeof(zeros));
	sha1_update(&c, oh->size, chunk + NDZ_ORIG_HDR_AREA);
	sha1_digest(&c, SHA1_DIGEST_SIZE, digest);
}

int ndz_orig_check_signed(const uint8_t *chunk, const struct ndz_orig_keys *keys,
			  struct ndz_error *e)
{
	uint8_t digest[SHA1_DIGEST_SIZE];
	struct ndz_orig_hdr h, *oh = &h;
	int rc;

	if (!keys || !keys->rsa_n_len)
		return 0;
	if ((rc = ndz_orig_decode(chunk, oh, e)) < 0)
		return rc;
	if (oh->version < 4)
		return orig_fail(e, NDZ_EUNSIGNED, "chunk has no signature (a version %u image "
				 "cannot be signed)", oh->version);
	if (!(oh->csum_type & NDZ_ORIG_CSUM_SIGNED))
		return orig_fail(e, NDZ_EUNSIGNED, "chunk has no signature (%s)",
				 oh->csum_type ? "a plain SHA-1 checksum" : "no checksum");
	chunk_sha1(chunk, oh, digest);
	if (!rsa_check(keys, oh->csum, digest))
		return orig_fail(e, NDZ_EORIGSUM, "RSA signature does not match the chunk's "
				 "SHA-1 under the key given");
	return 0;
}

int ndz_orig_open_chunk(uint8_t *chunk, const struct ndz_orig_hdr *oh,
			const struct ndz_orig_keys *keys, uint32_t *data_len,
			struct ndz_error *e)
{
	uint8_t *data = chunk + NDZ_ORIG_HDR_AREA;

	*data_len = oh->size;
	if (oh->version < 4)
		return 0;
	/* a signature is the verifier's (ndz_orig_check_signed); a plain SHA-1 is ours */
	if (oh->csum_type && !(oh->csum_type & NDZ_ORIG_CSUM_SIGNED)) {
		uint8_t digest[SHA1_DIGEST_SIZE];

		chunk_sha1(chunk, oh, digest);
		if (memcmp(digest, oh->csum, sizeof(digest)) != 0)
			return orig_fail(e, NDZ_EORIGSUM, "SHA-1 does not match");
	}
	if (oh->cipher == NDZ_ORIG_CIPHER_BF_CBC) {
		struct blowfish_ctx bf;
		uint8_t iv[BLOWFISH_BLOCK_SIZE];
		unsigned pad, i;

		if (!keys || !keys->have_bf)
			return orig_fail(e, NDZ_ENEEDKEY, "Blowfish-encrypted; give the "
					 "original's key file");
		if (!blowfish_set_key(&bf, sizeof(keys->bf_key), keys->bf_key))
			return orig_fail(e, NDZ_EKEY, "weak Blowfish key");
		memcpy(iv, oh->iv, sizeof(iv));
		cbc_decrypt(&bf, (nettle_cipher_func *)blowfish_decrypt, BLOWFISH_BLOCK_SIZE, iv,
			    oh->size, data, data);
		pad = data[oh->size - 1];
		for (i = 1; pad >= 1 && pad <= BLOWFISH_BLOCK_SIZE && i <= pad &&
		     data[oh->size - i] == pad; i++)
			;
		if (pad < 1 || pad > BLOWFISH_BLOCK_SIZE || i <= pad)
			return orig_fail(e, NDZ_EDECRYPT, "bad padding after Blowfish "
					 "decryption (wrong key?)");
		*data_len = oh->size - pad;
		memset(&bf, 0, sizeof(bf));
	}
	return 0;
}

static uint16_t label_sum(const uint8_t *p, size_t len)
{
	uint16_t x = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		x ^= get_le16(p + i);
	return x;
}

int ndz_orig_relocate(const uint8_t *a, const struct ndz_orig_hdr *oh, uint8_t *out,
		      uint64_t out_len, uint64_t base, struct ndz_error *e)
{
	uint32_t i, j;

	for (i = 0; i < oh->nrelocs; i++) {
		struct ndz_orig_reloc rl = ndz_orig_get_reloc(a, oh, i);
		uint64_t at = (uint64_t)rl.sector * NDZ_SECTOR_SIZE + rl.sectoff, pos = 0;
		uint8_t *l;
		uint16_t nparts;

		if (rl.type != NDZ_ORIG_RELOC_FBSDDISKLABEL)
			continue;
		/* where the label's bytes are in the output: after the regions before it */
		for (j = 0; j < oh->nregions; j++) {
			struct ndz_region r = ndz_orig_region(a, oh, j);

			if (at < (r.start + r.count) * NDZ_SECTOR_SIZE) {
				pos += at - r.start * NDZ_SECTOR_SIZE;
				break;
			}
			pos += (uint64_t)r.count * NDZ_SECTOR_SIZE;
		}
		if (pos + rl.size > out_len)
			return orig_fail(e, NDZ_EREGION, "relocation %u past the data", i);
		l = out + pos;
		nparts = get_le16(l + 138);
		if (get_le32(l) != NDZ_BSDLABEL_MAGIC || get_le32(l + 132) != NDZ_BSDLABEL_MAGIC ||
		    NDZ_BSDLABEL_PARTS + 16u * nparts > rl.size)
			return orig_fail(e, NDZ_EREGION, "relocation %u: not a disklabel "
					 "of at most %u bytes", i, rl.size);
		if (base > UINT32_MAX)
			return orig_fail(e, NDZ_ERANGE, "disklabel at sector %llu, past "
					 "what it can hold", (unsigned long long)base);
		for (j = 0; j < nparts; j++) {
			uint8_t *p = l + NDZ_BSDLABEL_PARTS + 16 * j;

			if (get_le32(p) != 0)
				put_le32(p + 4, get_le32(p + 4) + (uint32_t)base);
		}
		put_le16(l + 136, 0);
		put_le16(l + 136, label_sum(l, NDZ_BSDLABEL_PARTS + 16u * nparts));
	}
	return 0;
}

/* ---- keys ---- */

static int hex_bytes(const char *s, size_t slen, uint8_t *out, size_t max, size_t *n)
{
	size_t i;

	if (slen % 2)
		return -1;
	if (slen / 2 > max)
		return -1;
	for (i = 0; i < slen / 2; i++) {
		unsigned v;

		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	*n = slen / 2;
	return 0;
}

/* the next whitespace-separated hex word of buf after *pos */
static int next_word(const char *buf, size_t *pos, const char **w, size_t *wlen)
{
	size_t i = *pos, j;

	while (buf[i] == ' ' || buf[i] == '\n' || buf[i] == '\r' || buf[i] == '\t')
		i++;
	for (j = i; buf[j] && strchr("0123456789abcdefABCDEF", buf[j]); j++)
		;
	if (j == i)
		return -1;
	*w = buf + i;
	*wlen = j - i;
	*pos = j;
	return 0;
}

static int read_small(const char *path, char *buf, size_t max, struct ndz_error *e)
{
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return ndz_error_set(e, NDZ_EIO, errno, "%s: cannot open", path);
	n = fread(buf, 1, max - 1, f);
	if (ferror(f)) {
		fclose(f);
		return ndz_error_set(e, NDZ_EIO, errno, "%s: read error", path);
	}
	fclose(f);
	buf[n] = 0;
	return 0;
}

int ndz_orig_load_keys(const char *bf_path, const char *pub_path, struct ndz_orig_keys *k,
		       struct ndz_error *e)
{
	char buf[4096];
	const char *w;
	size_t pos = 0, wlen, n;

	if (bf_path) {
		if (read_small(bf_path, buf, sizeof(buf), e) < 0)
			return e->code;
		if (next_word(buf, &pos, &w, &wlen) < 0 ||
		    hex_bytes(w, wlen, k->bf_key, sizeof(k->bf_key), &n) < 0 ||
		    n != sizeof(k->bf_key))
			return ndz_error_set(e, NDZ_EKEY, 0, "%s: %s (64 hex digits expected: the "
					     "original's 32-byte Blowfish key)", bf_path,
					     ndz_strerror(NDZ_EKEY));
		k->have_bf = 1;
		memset(buf, 0, sizeof(buf));
	}
	if (pub_path) {
		pos = 0;
		if (read_small(pub_path, buf, sizeof(buf), e) < 0)
			return e->code;
		if (next_word(buf, &pos, &w, &wlen) < 0 ||
		    hex_bytes(w, wlen, k->rsa_n, sizeof(k->rsa_n), &k->rsa_n_len) < 0 ||
		    next_word(buf, &pos, &w, &wlen) < 0 || wlen % 2 ||
		    hex_bytes(w, wlen, k->rsa_e, sizeof(k->rsa_e), &k->rsa_e_len) < 0 ||
		    k->rsa_n_len < 32)
			return ndz_error_set(e, NDZ_EKEY, 0, "%s: %s (the original's .skey: modulus "
					     "and exponent in hex)", pub_path,
					     ndz_strerror(NDZ_EKEY));
	}
	return 0;
}

/* ---- the reader ---- */

struct ndz_orig_reader {
	struct ndz_io *in;
	uint32_t chunks;               /* a file's; 0 for a stream */
	uint32_t next;
	uint64_t source_bytes;         /* the restore's end; 0 for a stream */
	uint64_t prev_last;            /* the chunk before: its last sector (V1: data end) */
	uint32_t version;
	uint8_t imageid[16];
	uint8_t *chunk0;               /* a stream's chunk 0, not handed out yet */
	int peeked, peek_eof;          /* a stream: the byte after the chunk read last */
	uint8_t peek;
	int done;
};

static int hdr_fail(struct ndz_orig_reader *r, uint32_t pos, int rc, const char *why,
		    struct ndz_error *e)
{
	return ndz_error_set(e, rc, 0, "%s: chunk %u: %s%s%s", r->in->name, pos,
			     ndz_strerror(rc), why[0] ? ": " : "", why);
}

/*
 * One chunk's header in its place: valid, its index, the image's version and
 * id, chained to the chunk before. Sets *first and *last (sectors).
 */
static int place_chunk(struct ndz_orig_reader *r, const uint8_t *area, uint32_t pos,
		       struct ndz_orig_hdr *oh, uint64_t *first, uint64_t *last,
		       struct ndz_error *e)
{
	struct ndz_error oe = { 0 };
	int rc = ndz_orig_decode(area, oh, &oe);

	if (rc < 0)
		return ndz_error_set(e, rc, 0, "%s: chunk %u: %s", r->in->name, pos,
				     ndz_error_msg(&oe));
	if (pos == 0) {
		r->version = oh->version;
		memcpy(r->imageid, oh->imageid, 16);
	}
	if (oh->version != r->version)
		return hdr_fail(r, pos, NDZ_EMISMATCH, "version differs from chunk 0's", e);
	if (oh->version == 4 && memcmp(oh->imageid, r->imageid, 16) != 0)
		return hdr_fail(r, pos, NDZ_EMISMATCH, "another image id", e);
	if (oh->index != pos)
		return hdr_fail(r, pos, pos > oh->index ? NDZ_EDUP : NDZ_EMISSING,
				"the chunk found there says it is another one", e);
	if (oh->version == 1) {
		struct ndz_region r0 = ndz_orig_region(area, oh, 0);

		if (r->chunks && oh->total != r->chunks)
			return hdr_fail(r, pos, NDZ_EMISMATCH, "its chunk count differs from the "
					"file's", e);
		if (r0.start < r->prev_last)
			return hdr_fail(r, pos, NDZ_EREGION, "its regions start before the chunk "
					"before ends", e);
		*first = r->prev_last;
		*last = ndz_sectors_of(ndz_orig_data_end(area, oh));
	} else {
		if (oh->first != r->prev_last)
			return hdr_fail(r, pos, NDZ_EREGION, "does not start where the chunk "
					"before ends", e);
		*first = oh->first;
		*last = oh->last;
	}
	return 0;
}

void ndz_orig_to_hdr(const struct ndz_orig_hdr *oh, uint64_t first, uint64_t last,
		     uint64_t source_bytes, int is_last, struct ndz_chunk_hdr *h)
{
	memset(h, 0, sizeof(*h));
	h->version = (uint16_t)NDZ_ORIG_HVERSION(oh->version);
	h->index = oh->index;
	h->chunk_flags = is_last ? NDZ_CHUNK_LAST : 0;
	if (oh->version == 4)
		memcpy(h->uuid, oh->imageid, 16);
	h->sector_size = NDZ_SECTOR_SIZE;
	h->codec = NDZ_CODEC_ZLIB;
	h->source_bytes = source_bytes;
	h->source_sectors = ndz_sectors_of(source_bytes);
	h->first = first;
	h->last = last;
	h->data_len = oh->size;
	h->image_kind = NDZ_KIND_WHOLE;
	h->nregions = oh->nregions;
	h->compat_flags = NDZ_ORIG_FLAGS(oh->csum_type, oh->cipher);
}

static int scan_file(struct ndz_orig_reader *r, struct ndz_error *e)
{
	uint8_t *area = malloc(NDZ_ORIG_HDR_AREA);
	uint64_t size = r->in->size, first = 0, last = 0;
	struct ndz_orig_hdr oh;
	uint32_t i;
	int rc = 0;

	if (!area)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", r->in->name,
				     ndz_strerror(NDZ_ENOMEM));
	if (size % NDZ_CHUNK_SIZE || size / NDZ_CHUNK_SIZE > UINT32_MAX) {
		rc = ndz_error_set(e, NDZ_ETRUNC, 0, "%s: chunk %llu: %s (%llu of %u bytes)",
				   r->in->name, (unsigned long long)(size / NDZ_CHUNK_SIZE),
				   ndz_strerror(NDZ_ETRUNC),
				   (unsigned long long)(size % NDZ_CHUNK_SIZE), NDZ_CHUNK_SIZE);
		goto out;
	}
	r->chunks = (uint32_t)(size / NDZ_CHUNK_SIZE);
	for (i = 0; i < r->chunks; i++) {
		rc = ndz_io_read_full(r->in, area, NDZ_ORIG_HDR_AREA, (uint64_t)i * NDZ_CHUNK_SIZE,
				      NULL, e);
		if (rc < 0)
			goto out;
		if (i == 0)
			r->chunks = r->chunks;
		rc = place_chunk(r, area, i, &oh, &first, &last, e);
		if (rc < 0)
			goto out;
		if (i == 0 && oh.version == 1 && oh.total != r->chunks) {
			rc = hdr_fail(r, 0, NDZ_EMISSING, "the file's chunk count differs from "
				      "the image's", e);
			goto out;
		}
		r->prev_last = last;
		r->source_bytes = ndz_orig_data_end(area, &oh);
	}
out:
	r->prev_last = 0;
	free(area);
	return rc;
}

/* a stream: read the byte after a chunk, to know whether it was the last one */
static int peek_stream(struct ndz_orig_reader *r, uint64_t off, struct ndz_error *e)
{
	struct ndz_error why = { 0 };
	size_t got = 0;
	int rc = ndz_io_read_full(r->in, &r->peek, 1, off, &got, &why);

	if (rc < 0 && rc != NDZ_ESHORTREAD)
		return ndz_error_copy(e, &why);
	r->peeked = got == 1;
	r->peek_eof = got == 0;
	return 0;
}

int ndz_orig_reader_open(struct ndz_io *in, uint8_t *chunk0, struct ndz_chunk_hdr *first,
			 uint32_t *chunks, struct ndz_orig_reader **out, struct ndz_error *e)
{
	struct ndz_orig_reader *r = calloc(1, sizeof(*r));
	uint8_t *area = chunk0;
	struct ndz_orig_hdr oh;
	uint64_t f, l;
	int rc;

	*out = NULL;
	if (!r) {
		free(chunk0);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", in->name, ndz_strerror(NDZ_ENOMEM));
	}
	r->in = in;
	r->chunk0 = chunk0;
	if (!chunk0) {
		rc = scan_file(r, e);
		if (rc < 0)
			goto fail;
		area = malloc(NDZ_ORIG_HDR_AREA);
		if (!area) {
			rc = ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", in->name,
					   ndz_strerror(NDZ_ENOMEM));
			goto fail;
		}
		rc = ndz_io_read_full(in, area, NDZ_ORIG_HDR_AREA, 0, NULL, e);
		if (rc < 0) {
			free(area);
			goto fail;
		}
	} else {
		rc = peek_stream(r, NDZ_CHUNK_SIZE, e);
		if (rc < 0)
			goto fail;
	}
	rc = place_chunk(r, area, 0, &oh, &f, &l, e);
	if (rc == 0) {
		ndz_orig_to_hdr(&oh, f, l, r->source_bytes,
				chunk0 ? r->peek_eof : r->chunks == 1, first);
		*chunks = r->chunks;
	}
	if (!chunk0)
		free(area);
	if (rc < 0)
		goto fail;
	*out = r;
	return 0;
fail:
	ndz_orig_reader_free(r);
	return rc;
}

int ndz_orig_reader_next(struct ndz_orig_reader *r, uint8_t *buf, struct ndz_chunk_hdr *h,
			 struct ndz_error *e)
{
	uint64_t off = (uint64_t)r->next * NDZ_CHUNK_SIZE, f, l;
	struct ndz_orig_hdr oh;
	struct ndz_error why = { 0 };
	size_t got = 0;
	int rc, is_last;

	if (r->done)
		return 0;
	if (r->chunk0) {
		memcpy(buf, r->chunk0, NDZ_CHUNK_SIZE);
		free(r->chunk0);
		r->chunk0 = NULL;
	} else if (r->in->is_stream) {
		if (r->peek_eof)
			return 0;
		buf[0] = r->peek;
		rc = ndz_io_read_full(r->in, buf + 1, NDZ_CHUNK_SIZE - 1, off + 1, &got, &why);
		if (rc == NDZ_ESHORTREAD)
			return ndz_error_set(e, NDZ_ETRUNC, 0, "%s: chunk %u: %s (%zu of %u bytes)",
					     r->in->name, r->next, ndz_strerror(NDZ_ETRUNC), got + 1,
					     NDZ_CHUNK_SIZE);
		if (rc < 0)
			return ndz_error_copy(e, &why);
		if ((rc = peek_stream(r, off + NDZ_CHUNK_SIZE, e)) < 0)
			return rc;
	} else {
		if (r->next == r->chunks)
			return 0;
		rc = ndz_io_read_full(r->in, buf, NDZ_CHUNK_SIZE, off, NULL, e);
		if (rc < 0)
			return rc;
	}
	rc = place_chunk(r, buf, r->next, &oh, &f, &l, e);
	if (rc < 0)
		return rc;
	is_last = r->in->is_stream ? r->peek_eof : r->next + 1 == r->chunks;
	/* the last chunk's last sector is the source's end */
	ndz_orig_to_hdr(&oh, f, l, r->source_bytes, is_last, h);
	r->prev_last = l;
	r->next++;
	if (is_last)
		r->done = 1;
	return 1;
}

void ndz_orig_reader_free(struct ndz_orig_reader *r)
{
	if (!r)
		return;
	free(r->chunk0);
	free(r);
}

int ndz_orig_chunk_hdr(const uint8_t *chunk, uint32_t nchunks, uint64_t source_bytes,
		       struct ndz_chunk_hdr *h, struct ndz_error *e)
{
	struct ndz_orig_hdr oh;
	int rc = ndz_orig_decode(chunk, &oh, e);

	if (rc < 0)
		return rc;
	/* V1 chunks chain through their neighbours' regions, unknown out of order */
	if (oh.version == 1)
		return orig_fail(e, NDZ_ENOTSUP, "a version 1 image out of order: "
				 "convert it (imagezip --from-image)");
	if (nchunks && oh.index >= nchunks)
		return orig_fail(e, NDZ_ERANGE, "chunk %u of %u", oh.index, nchunks);
	ndz_orig_to_hdr(&oh, oh.first, oh.last, source_bytes, nchunks && oh.index == nchunks - 1,
			h);
	return 0;
}

int ndz_chunk_view_peek(const uint8_t *chunk, const struct ndz_chunk_hdr *h,
			struct ndz_chunk_view *v, struct ndz_error *e)
{
	uint32_t i;
	int rc;

	memset(v, 0, sizeof(*v));
	v->h = *h;
	v->area = chunk;
	v->data = chunk + NDZ_HDR_SIZE;
	v->clip = v->end = h->source_bytes;
	/* an original image from a stream: its end is not known (source_bytes 0) */
	if (NDZ_IS_ORIG(h) && !h->source_bytes)
		v->end = UINT64_MAX;
	if (!NDZ_IS_ORIG(h)) {
		v->want = ndz_hdr_data_bytes(chunk, h);
		return 0;
	}
	/* the reader checked this header on these bytes; decoding again costs little */
	if ((rc = ndz_orig_decode(chunk, &v->oh, e)) < 0)
		return rc;
	v->h.data_len = v->oh.size;
	v->data = chunk + NDZ_ORIG_HDR_AREA;
	for (i = 0; i < v->oh.nregions; i++)
		v->want += (uint64_t)ndz_orig_region(chunk, &v->oh, i).count * NDZ_SECTOR_SIZE;
	v->clip = ndz_orig_data_end(chunk, &v->oh);
	v->fixups = v->oh.nrelocs;
	return 0;
}

int ndz_chunk_view_open(uint8_t *chunk, const struct ndz_chunk_hdr *h,
			const struct ndz_orig_keys *keys, struct ndz_chunk_view *v,
			struct ndz_error *e)
{
	int rc = ndz_chunk_view_peek(chunk, h, v, e);

	if (rc < 0 || !v->oh.version)
		return rc;
	return ndz_orig_open_chunk(chunk, &v->oh, keys, &v->h.data_len, e);
}

struct ndz_orig_reloc ndz_chunk_view_reloc(const struct ndz_chunk_view *v, uint32_t i)
{
	return ndz_orig_get_reloc(v->area, &v->oh, i);
}

struct ndz_region ndz_chunk_view_region(const struct ndz_chunk_view *v, uint32_t i)
{
	return v->oh.version ? ndz_orig_region(v->area, &v->oh, i) : ndz_hdr_region(v->area, i);
}

int ndz_chunk_view_fix(const struct ndz_chunk_view *v, uint8_t *out, uint64_t len,
		       uint64_t base, struct ndz_error *e)
{
	return v->fixups ? ndz_orig_relocate(v->area, &v->oh, out, len, base, e) : 0;
}
