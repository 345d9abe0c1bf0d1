/* Sealing: chunk encryption and decryption, the manifest built from an image, the sealer sink. */
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <sodium.h>

#include "core/image.h"
#include "seal.h"

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

/* A chunk failed to seal or open with rc: e names it (ndz_chunk_index_hint). */
static int chunk_fail(struct ndz_error *e, int rc, const uint8_t *chunk, const char *what)
{
	return ndz_error_set(e, rc, 0, "chunk %u: %s%s", ndz_chunk_index_hint(chunk), what,
			     ndz_strerror(rc));
}

int ndz_chunk_encrypt(const struct ndz_key *k, int cipher, uint8_t *chunk,
		      struct ndz_error *e)
{
	uint8_t *data = chunk + NDZ_HDR_SIZE, nonce[NDZ_CRYPT_NONCE], ad[NDZ_HDR_SIZE];
	struct ndz_chunk_hdr h;
	unsigned long long clen = 0;
	uint32_t plain;
	int rc;

	if (k->type != NDZ_KEY_CRYPT)
		return ndz_error_set(e, NDZ_EINVAL, 0, "encrypting: a %s key, not an encryption "
				     "key", ndz_key_type_name(k->type));
	if (cipher != NDZ_CIPHER_XCHACHA20 && cipher != NDZ_CIPHER_AES256GCM)
		return ndz_error_set(e, NDZ_EINVAL, 0, "encrypting: unknown cipher %d", cipher);
	if (ndz_trust_init(e) < 0)
		return NDZ_ENOTSUP;
	rc = ndz_hdr_decode(chunk, &h, NULL);
	if (rc < 0)
		return chunk_fail(e, rc, chunk, "encryption failed: ");
	if (h.incompat_flags & NDZ_INCOMPAT_ENCRYPTED)
		return ndz_error_set(e, NDZ_EINVAL, 0, "chunk %u: encrypted already", h.index);
	if (h.data_len > NDZ_MAX_DATA - NDZ_CRYPT_OVERHEAD)
		return ndz_error_set(e, NDZ_EINVAL, 0, "chunk %u: no room for the nonce and tag "
				     "(%u data bytes)", h.index, h.data_len);
	plain = h.data_len;
	h.incompat_flags |= NDZ_INCOMPAT_ENCRYPTED;
	if (cipher == NDZ_CIPHER_AES256GCM)
		h.incompat_flags |= NDZ_INCOMPAT_AES256GCM;
	memcpy(h.key_id, k->id, NDZ_KEY_ID_LEN);
	h.data_len = plain + NDZ_CRYPT_OVERHEAD;
	h.data_crc = 0;
	rc = ndz_hdr_encode(&h, chunk, NULL);
	if (rc < 0)
		return chunk_fail(e, rc, chunk, "encryption failed: ");
	ndz_hdr_auth_data(chunk, ad);
	randombytes_buf(nonce, sizeof(nonce));
	memmove(data + NDZ_CRYPT_NONCE, data, plain);
	memcpy(data, nonce, sizeof(nonce));
	if (cipher == NDZ_CIPHER_AES256GCM) {
		rc = gcm(1, k, h.uuid, nonce, ad, data + NDZ_CRYPT_NONCE, plain,
			 data + NDZ_CRYPT_NONCE + plain);
		if (rc < 0)
			return ndz_error_set(e, rc, 0, "chunk %u: encryption failed: %s", h.index,
					     ndz_strerror(rc));
	} else {
		crypto_aead_xchacha20poly1305_ietf_encrypt(data + NDZ_CRYPT_NONCE, &clen,
							   data + NDZ_CRYPT_NONCE, plain, ad,
							   NDZ_HDR_SIZE, NULL, nonce, k->sk);
	}
	h.data_crc = ndz_crc32(0, data, h.data_len);
	rc = ndz_hdr_encode(&h, chunk, NULL);
	return rc < 0 ? chunk_fail(e, rc, chunk, "encryption failed: ") : 0;
}

int ndz_chunk_decrypt(const struct ndz_key *k, uint8_t *chunk, struct ndz_chunk_hdr *h,
		      struct ndz_error *e)
{
	uint8_t *data = chunk + NDZ_HDR_SIZE, nonce[NDZ_CRYPT_NONCE], ad[NDZ_HDR_SIZE];
	unsigned long long mlen = 0;
	size_t clen;
	int rc;

	if (!(h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED))
		return 0;
	if (!k || k->type != NDZ_KEY_CRYPT)
		return ndz_error_set(e, NDZ_ENEEDKEY, 0, "chunk %u: %s", h->index,
				     ndz_strerror(NDZ_ENEEDKEY));
	if (memcmp(k->id, h->key_id, NDZ_KEY_ID_LEN) != 0) {
		char id[17];

		ndz_key_id_hex(h->key_id, id);
		return ndz_error_set(e, NDZ_EWRONGKEY, 0, "chunk %u: %s (encrypted with key %s)",
				     h->index, ndz_strerror(NDZ_EWRONGKEY), id);
	}
	if (h->data_len < NDZ_CRYPT_OVERHEAD || h->data_len > NDZ_MAX_DATA)
		return ndz_error_set(e, NDZ_EDECRYPT, 0, "chunk %u: %s", h->index,
				     ndz_strerror(NDZ_EDECRYPT));
	if (ndz_trust_init(e) < 0)
		return NDZ_ENOTSUP;
	ndz_hdr_auth_data(chunk, ad);
	memcpy(nonce, data, sizeof(nonce));
	clen = h->data_len - NDZ_CRYPT_OVERHEAD;
	if (h->incompat_flags & NDZ_INCOMPAT_AES256GCM) {
		rc = gcm(0, k, h->uuid, nonce, ad, data + NDZ_CRYPT_NONCE, clen,
			 data + NDZ_CRYPT_NONCE + clen);
		if (rc < 0)
			return ndz_error_set(e, rc, 0, "chunk %u: %s", h->index, ndz_strerror(rc));
		mlen = clen;
	} else if (crypto_aead_xchacha20poly1305_ietf_decrypt(data + NDZ_CRYPT_NONCE, &mlen,
							      NULL, data + NDZ_CRYPT_NONCE,
							      clen + NDZ_CRYPT_TAG, ad,
							      NDZ_HDR_SIZE, nonce, k->sk) != 0) {
		return ndz_error_set(e, NDZ_EDECRYPT, 0, "chunk %u: %s", h->index,
				     ndz_strerror(NDZ_EDECRYPT));
	}
	memmove(data, data + NDZ_CRYPT_NONCE, (size_t)mlen);
	h->data_len = (uint32_t)mlen;
	h->incompat_flags &= ~(NDZ_INCOMPAT_ENCRYPTED | NDZ_INCOMPAT_AES256GCM);
	return 0;
}

/* ---- the manifest of a stored image ---- */

/* One chunk of imagekey sign: sound, then hashed. */
static int build_one(struct ndz_manifest *m, const uint8_t *chunk,
		     const struct ndz_chunk_hdr *h, struct ndz_error *e)
{
	int rc;

	/* lib/orig.h: an original image has no CRCs to vouch for; ours has */
	if (h->version > 0xff)
		return ndz_error_set(e, NDZ_ENOTSUP, 0, "chunk %u: an image in the original "
				     "Frisbee format: convert and sign it (imagezip --from-image "
				     "--sign)", h->index);
	rc = ndz_chunk_check_data(chunk, h, NULL);
	if (rc < 0)
		return ndz_error_set(e, rc, 0, "chunk %u: %s", h->index, ndz_strerror(rc));
	return ndz_manifest_set_hash(m, chunk, h, e);
}

int ndz_manifest_build(struct ndz_io *in, struct ndz_manifest *m, struct ndz_error *e)
{
	struct ndz_image_walk *w = NULL;
	struct ndz_chunk_hdr h;
	uint8_t *buf;
	int rc;

	memset(m, 0, sizeof(*m));
	if (ndz_trust_init(e) < 0)
		return NDZ_ENOTSUP;
	buf = malloc(NDZ_CHUNK_SIZE);
	if (!buf)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s: %s", in->name, ndz_strerror(NDZ_ENOMEM));
	rc = ndz_image_walk_open(in, NDZ_WALK_ORDER | NDZ_WALK_RULES, &w, e);
	while (rc >= 0 && (rc = ndz_image_walk_next(w, buf, &h, e)) == 1) {
		rc = build_one(m, buf, &h, e);
		if (rc < 0)
			ndz_error_prefix(e, "%s", in->name);
	}
	if (rc == 0)
		m->chunks = ndz_image_walk_count(w);
	else
		ndz_manifest_release(m);
	ndz_image_walk_free(w);
	free(buf);
	return rc;
}

/* ---- the sealer ---- */

struct ndz_seal {
	struct ndz_key crypt;          /* NDZ_KEY_NONE: no encryption */
	int cipher;
	int sign;
	struct ndz_manifest m;         /* with sign: the hashes so far */
	uint32_t count;                /* chunks sealed */
	ndz_seal_sink_fn next;
	void *next_ctx;
	uint8_t *buf;                  /* with crypt: the chunk being encrypted */
};

int ndz_seal_create(const struct ndz_seal_opts *o, struct ndz_seal **out, struct ndz_error *e)
{
	struct ndz_seal *s;
	int rc;

	*out = NULL;
	if (!o->next)
		return ndz_error_set(e, NDZ_EINVAL, 0, "a sealer needs a sink");
	if (o->crypt && o->crypt->type != NDZ_KEY_CRYPT)
		return ndz_error_set(e, NDZ_EINVAL, 0, "encrypting: a %s key, not an encryption "
				     "key", ndz_key_type_name(o->crypt->type));
	if (o->cipher && o->cipher != NDZ_CIPHER_XCHACHA20 && o->cipher != NDZ_CIPHER_AES256GCM)
		return ndz_error_set(e, NDZ_EINVAL, 0, "encrypting: unknown cipher %d", o->cipher);
	if (ndz_trust_init(e) < 0)
		return NDZ_ENOTSUP;
	s = calloc(1, sizeof(*s));
	if (!s)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "sealer: %s", ndz_strerror(NDZ_ENOMEM));
	s->next = o->next;
	s->next_ctx = o->next_ctx;
	s->cipher = o->cipher ? o->cipher : NDZ_CIPHER_DEFAULT;
	if (o->crypt) {
		s->crypt = *o->crypt;
		s->buf = malloc(NDZ_CHUNK_SIZE);
		if (!s->buf) {
			ndz_seal_free(s);
			return ndz_error_set(e, NDZ_ENOMEM, 0, "sealer: %s", ndz_strerror(NDZ_ENOMEM));
		}
	}
	if (o->sign) {
		s->sign = 1;
		rc = ndz_manifest_init(&s->m, 64, e);
		if (rc < 0) {
			ndz_seal_free(s);
			return rc;
		}
	}
	*out = s;
	return 0;
}

void ndz_seal_free(struct ndz_seal *s)
{
	if (!s)
		return;
	ndz_key_wipe(&s->crypt);
	ndz_manifest_release(&s->m);
	free(s->buf);
	free(s);
}

uint32_t ndz_seal_reserve(const struct ndz_seal *s)
{
	return s->crypt.type == NDZ_KEY_CRYPT ? NDZ_CRYPT_OVERHEAD : 0;
}

const struct ndz_manifest *ndz_seal_manifest(const struct ndz_seal *s)
{
	return s->sign ? &s->m : NULL;
}

int ndz_seal_chunk(void *ctx, const uint8_t *chunk, uint32_t index, struct ndz_error *e)
{
	struct ndz_seal *s = ctx;
	struct ndz_chunk_hdr h;
	int rc;

	if (s->crypt.type == NDZ_KEY_CRYPT) {
		memcpy(s->buf, chunk, NDZ_CHUNK_SIZE);
		rc = ndz_chunk_encrypt(&s->crypt, s->cipher, s->buf, e);
		if (rc < 0)
			return rc;
		chunk = s->buf;
	}
	if (s->sign) {
		rc = ndz_hdr_decode(chunk, &h, NULL);
		if (rc < 0)
			return ndz_error_set(e, rc, 0, "chunk %u: %s", index, ndz_strerror(rc));
		if (h.index != index)
			return ndz_error_set(e, NDZ_EHEADER, 0, "chunk %u: says it is chunk %u",
					     index, h.index);
		rc = ndz_manifest_set_hash(&s->m, chunk, &h, e);
		if (rc < 0)
			return rc;
	}
	rc = s->next(s->next_ctx, chunk, index, e);
	if (rc == 0)
		s->count++;
	return rc;
}

int ndz_seal_finish(struct ndz_seal *s, const struct ndz_key *sec, const char *path,
		    struct ndz_error *e)
{
	uint8_t *buf;
	size_t len;
	int rc;

	if (!s->sign)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: the sealer kept no manifest", path);
	s->m.chunks = s->count;
	rc = ndz_manifest_sign(&s->m, sec, &buf, &len, e);
	if (rc < 0) {
		ndz_error_prefix(e, "%s", path);
		return rc;
	}
	rc = ndz_manifest_save(path, buf, len, e);
	free(buf);
	return rc;
}
