/* Unit tests for lib/trust (key.c, manifest.c, seal.c): key files, manifests, chunk encryption. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <sodium.h>
#include <zlib.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/format.h"
#include "core/io.h"
#include "core/le.h"
#include "trust/key.h"
#include "trust/manifest.h"
#include "trust/seal.h"
#include "trust/verify.h"
#include "trustfix.h"
#include "keyfix.h"

/* A sound plain chunk of index i of the image uuid, with len bytes of data. */
static uint8_t *make_chunk(uint32_t i, uint8_t uuid_byte, uint32_t len)
{
	return trust_chunk(i, uuid_byte, len, 10);
}

static void test_key_roundtrip(void **state)
{
	static const enum ndz_key_type types[] = { NDZ_KEY_SIGN_SECRET, NDZ_KEY_CRYPT };
	struct ndz_key k, back, pub;
	char text[512];
	size_t i;
	int n;

	(void)state;
	for (i = 0; i < 2; i++) {
		assert_int_equal(ndz_key_generate(types[i], &k, NULL), 0);
		n = ndz_key_format(&k, text, sizeof(text), NULL);
		assert_true(n > 0);
		assert_int_equal(ndz_key_parse(text, (size_t)n, &back, NULL), 0);
		assert_int_equal(back.type, k.type);
		assert_memory_equal(back.id, k.id, NDZ_KEY_ID_LEN);
		assert_memory_equal(back.sk, k.sk, sizeof(k.sk));
		assert_memory_equal(back.pk, k.pk, sizeof(k.pk));
	}
	key_pair(&k, &pub);
	n = ndz_key_format(&pub, text, sizeof(text), NULL);
	assert_true(n > 0);
	assert_non_null(strstr(text, "type ed25519-public\n"));
	assert_int_equal(ndz_key_parse(text, (size_t)n, &back, NULL), 0);
	assert_int_equal(back.type, NDZ_KEY_SIGN_PUBLIC);
	assert_memory_equal(back.pk, k.pk, 32);
	assert_memory_equal(back.id, k.id, NDZ_KEY_ID_LEN);
	assert_int_equal(ndz_key_generate(NDZ_KEY_SIGN_PUBLIC, &k, NULL), NDZ_EINVAL);
}

/* Every single-byte change of a key file is refused or changes nothing it means. */
static void test_key_parse_rejects(void **state)
{
	struct ndz_key k, back;
	char text[512], bad[512];
	int n, i;

	(void)state;
	assert_int_equal(ndz_key_generate(NDZ_KEY_SIGN_SECRET, &k, NULL), 0);
	n = ndz_key_format(&k, text, sizeof(text), NULL);
	for (i = 0; i < n; i++) {
		memcpy(bad, text, (size_t)n);
		bad[i] ^= 0x01;
		assert_int_equal(ndz_key_parse(bad, (size_t)n, &back, NULL), NDZ_EKEY);
	}
	for (i = 0; i < n; i++)
		assert_int_equal(ndz_key_parse(text, (size_t)i, &back, NULL), NDZ_EKEY);
	memcpy(bad, text, (size_t)n);
	bad[n] = '\n';
	assert_int_equal(ndz_key_parse(bad, (size_t)n + 1, &back, NULL), NDZ_EKEY);
	assert_int_equal(ndz_key_parse("", 0, &back, NULL), NDZ_EKEY);
}

static void test_key_files(void **state)
{
	char dir[] = "/tmp/test_trust.XXXXXX", sec[64], pubp[64];
	struct ndz_error e = { 0 };
	struct ndz_key k, pub, back;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(sec, sizeof(sec), "%s/k.sec", dir);
	snprintf(pubp, sizeof(pubp), "%s/k.pub", dir);
	key_pair(&k, &pub);
	assert_int_equal(ndz_key_save(sec, &k, &e), 0);
	assert_int_equal(ndz_key_save(pubp, &pub, &e), 0);
	/* never over an existing file */
	assert_int_equal(ndz_key_save(sec, &k, &e), NDZ_EIO);
	ndz_error_clear(&e);
	assert_int_equal(ndz_key_load(sec, &back, &e), 0);
	assert_memory_equal(back.sk, k.sk, 64);
	assert_int_equal(ndz_key_load(pubp, &back, &e), 0);
	assert_int_equal(back.type, NDZ_KEY_SIGN_PUBLIC);
	/* a secret key others can read is refused; a public one is fine */
	assert_int_equal(chmod(sec, 0640), 0);
	assert_int_equal(ndz_key_load(sec, &back, &e), NDZ_EKEYPERM);
	assert_non_null(strstr(ndz_error_msg(&e), sec));
	ndz_error_clear(&e);
	assert_int_equal(chmod(sec, 0602), 0);
	assert_int_equal(ndz_key_load(sec, &back, &e), NDZ_EKEYPERM);
	ndz_error_clear(&e);
	assert_int_equal(ndz_key_load(dir, &back, &e), NDZ_EKEY);
	ndz_error_clear(&e);
	assert_int_equal(chmod(sec, 0600), 0);
	/* the one loader of the programs: the type wanted, else a reason */
	assert_int_equal(ndz_key_load_as(sec, NDZ_KEY_BIT(NDZ_KEY_SIGN_SECRET), &back, &e), 0);
	assert_int_equal(ndz_key_load_as(sec, NDZ_KEY_BIT(NDZ_KEY_SIGN_PUBLIC), &back, &e),
			 NDZ_EKEY);
	assert_non_null(strstr(ndz_error_msg(&e), "public half is wanted"));
	assert_int_equal(back.type, NDZ_KEY_NONE);
	ndz_error_clear(&e);
	assert_int_equal(ndz_key_load_as(pubp, NDZ_KEY_BIT(NDZ_KEY_CRYPT), &back, &e), NDZ_EKEY);
	assert_non_null(strstr(ndz_error_msg(&e), "not the xchacha20poly1305 key wanted"));
	ndz_error_clear(&e);
	{
		struct ndz_key p2 = { 0 }, c2 = { 0 };

		assert_int_equal(ndz_key_add(pubp, &p2, &c2, &e), 0);
		assert_int_equal(p2.type, NDZ_KEY_SIGN_PUBLIC);
		assert_int_equal(c2.type, NDZ_KEY_NONE);
		assert_int_equal(ndz_key_add(pubp, &p2, &c2, &e), NDZ_EINVAL);
		assert_non_null(strstr(ndz_error_msg(&e), "a second ed25519-public key"));
		ndz_error_clear(&e);
		assert_int_equal(ndz_key_add(sec, &p2, &c2, &e), NDZ_EKEY);
		ndz_error_clear(&e);
	}
	unlink(sec);
	unlink(pubp);
	assert_int_equal(ndz_key_load(sec, &back, &e), NDZ_EIO);
	rmdir(dir);
}

static uint8_t *signed_manifest(const struct ndz_key *k, uint32_t chunks, size_t *len)
{
	struct ndz_manifest m;
	uint8_t *buf;
	uint32_t i;

	assert_int_equal(ndz_manifest_init(&m, chunks, NULL), 0);
	memset(m.uuid, 0x42, 16);
	m.codec = NDZ_CODEC_ZLIB;
	m.source_bytes = 100 * 512;
	for (i = 0; i < chunks; i++) {
		uint8_t *c = make_chunk(i, 0x42, 1000 + i);

		ndz_chunk_hash(c, m.hash[i], NULL);
		free(c);
	}
	assert_int_equal(ndz_manifest_sign(&m, k, &buf, len, NULL), 0);
	ndz_manifest_release(&m);
	return buf;
}

static void test_manifest(void **state)
{
	struct ndz_key k, pub, other, opub;
	struct ndz_manifest m;
	struct ndz_chunk_hdr h;
	struct ndz_error e = { 0 };
	uint8_t *buf, *c;
	size_t len, i;

	(void)state;
	key_pair(&k, &pub);
	key_pair(&other, &opub);
	buf = signed_manifest(&k, 3, &len);
	assert_int_equal(len, ndz_manifest_size(3));
	assert_int_equal(len, 64 + 3 * 32 + 64);
	assert_int_equal(get_le32(buf + 40), 3);
	assert_int_equal(ndz_manifest_open(buf, len, &pub, &m, &e), 0);
	assert_int_equal(m.chunks, 3);
	assert_memory_equal(m.key_id, pub.id, NDZ_KEY_ID_LEN);
	/* chunks: the signed ones pass, any other does not */
	for (i = 0; i < 3; i++) {
		c = make_chunk((uint32_t)i, 0x42, 1000 + (uint32_t)i);
		assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
		assert_int_equal(ndz_manifest_match(&m, &h, &e), 0);
		assert_int_equal(ndz_manifest_check_chunk(&m, c, &h, NULL), 0);
		c[NDZ_CHUNK_SIZE - 1] ^= 1;
		assert_int_equal(ndz_manifest_check_chunk(&m, c, &h, NULL), NDZ_EFORGED);
		free(c);
	}
	c = make_chunk(1, 0x42, 1000);          /* chunk 0's data under index 1 */
	assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
	assert_int_equal(ndz_manifest_check_chunk(&m, c, &h, NULL), NDZ_EFORGED);
	free(c);
	c = make_chunk(0, 0x43, 1000);          /* another image */
	assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
	assert_int_equal(ndz_manifest_match(&m, &h, &e), NDZ_EMISMATCH);
	ndz_error_clear(&e);
	h.index = 3;
	assert_int_equal(ndz_manifest_check_chunk(&m, c, &h, NULL), NDZ_ERANGE);
	free(c);
	ndz_manifest_release(&m);

	/* another key, every flipped bit, every truncation: refused, with a reason */
	assert_int_equal(ndz_manifest_open(buf, len, &opub, &m, &e), NDZ_EWRONGKEY);
	ndz_error_clear(&e);
	for (i = 0; i < len * 8; i++) {
		int rc;

		buf[i / 8] ^= (uint8_t)(1u << (i % 8));
		rc = ndz_manifest_open(buf, len, &pub, &m, &e);
		assert_true(rc == NDZ_EMANIFEST || rc == NDZ_EWRONGKEY || rc == NDZ_ESIGNATURE);
		assert_null(m.hash);
		ndz_error_clear(&e);
		buf[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	for (i = 0; i < len; i++) {
		assert_int_equal(ndz_manifest_open(buf, i, &pub, &m, &e), NDZ_EMANIFEST);
		ndz_error_clear(&e);
	}
	assert_int_equal(ndz_manifest_open(buf, len, NULL, &m, &e), NDZ_EINVAL);
	ndz_error_clear(&e);
	free(buf);
}

/* The chunk hash is SHA-256 of the whole chunk. */
static void test_chunk_hash(void **state)
{
	uint8_t *c = malloc(NDZ_CHUNK_SIZE), got[NDZ_HASH_LEN], ref[NDZ_HASH_LEN];

	(void)state;
	assert_non_null(c);
	memset(c, 'a', NDZ_CHUNK_SIZE);
	assert_int_equal(ndz_chunk_hash(c, got, NULL), 0);
	/* libsodium's SHA-256 as the reference: a second, independent implementation */
	crypto_hash_sha256(ref, c, NDZ_CHUNK_SIZE);
	assert_memory_equal(got, ref, NDZ_HASH_LEN);
	c[12345] ^= 1;
	assert_int_equal(ndz_chunk_hash(c, ref, NULL), 0);
	assert_memory_not_equal(got, ref, NDZ_HASH_LEN);
	free(c);
}

/*
 * A manifest of the first version's hash (BLAKE2b-256, algorithm 1) still opens
 * and checks chunks; an unknown algorithm is refused as malformed.
 */
static void test_manifest_blake2b(void **state)
{
	struct ndz_key k, pub;
	struct ndz_manifest m;
	struct ndz_chunk_hdr h;
	struct ndz_error e = { 0 };
	uint8_t *buf, *c;
	size_t len;
	uint32_t i;

	(void)state;
	key_pair(&k, &pub);
	assert_int_equal(ndz_manifest_init(&m, 2, NULL), 0);
	memset(m.uuid, 0x42, 16);
	m.codec = NDZ_CODEC_ZLIB;
	m.source_bytes = 100 * 512;
	m.hash_alg = NDZ_HASH_BLAKE2B_256;
	for (i = 0; i < 2; i++) {
		c = make_chunk(i, 0x42, 1000 + i);
		crypto_generichash(m.hash[i], NDZ_HASH_LEN, c, NDZ_CHUNK_SIZE, NULL, 0);
		free(c);
	}
	assert_int_equal(ndz_manifest_sign(&m, &k, &buf, &len, NULL), 0);
	ndz_manifest_release(&m);
	assert_int_equal(get_le16(buf + 10), NDZ_HASH_BLAKE2B_256);
	assert_int_equal(ndz_manifest_open(buf, len, &pub, &m, &e), 0);
	assert_int_equal(m.hash_alg, NDZ_HASH_BLAKE2B_256);
	for (i = 0; i < 2; i++) {
		c = make_chunk(i, 0x42, 1000 + i);
		assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
		assert_int_equal(ndz_manifest_check_chunk(&m, c, &h, NULL), 0);
		c[NDZ_HDR_SIZE] ^= 1;
		assert_int_equal(ndz_manifest_check_chunk(&m, c, &h, NULL), NDZ_EFORGED);
		free(c);
	}
	ndz_manifest_release(&m);
	free(buf);
	/* new manifests say SHA-256; an algorithm 3 is refused before the signature */
	buf = signed_manifest(&k, 1, &len);
	assert_int_equal(get_le16(buf + 10), NDZ_HASH_SHA256);
	put_le16(buf + 10, 3);
	assert_int_equal(ndz_manifest_open(buf, len, &pub, &m, &e), NDZ_EMANIFEST);
	assert_non_null(strstr(ndz_error_msg(&e), "unsupported hash"));
	ndz_error_clear(&e);
	free(buf);
	ndz_key_wipe(&k);
}

static const int ciphers[] = { NDZ_CIPHER_XCHACHA20, NDZ_CIPHER_AES256GCM };

/* A header field changed, the CRC made right: the tag still refuses the chunk. */
static void refuse_changed(const struct ndz_key *k, const uint8_t *c,
			   const struct ndz_chunk_hdr *h, void (*change)(struct ndz_chunk_hdr *))
{
	uint8_t *work = malloc(NDZ_CHUNK_SIZE);
	struct ndz_chunk_hdr h2 = *h;

	assert_non_null(work);
	memcpy(work, c, NDZ_CHUNK_SIZE);
	change(&h2);
	assert_int_equal(ndz_hdr_encode(&h2, work, NULL), 0);
	assert_int_equal(ndz_chunk_check(work, &h2, NULL), 0);
	assert_int_equal(ndz_chunk_decrypt(k, work, &h2, NULL), NDZ_EDECRYPT);
	free(work);
}

static void flip_cipher(struct ndz_chunk_hdr *h)
{
	h->incompat_flags ^= NDZ_INCOMPAT_AES256GCM;
}

static void other_image(struct ndz_chunk_hdr *h)
{
	h->uuid[15] ^= 1;
}

static void encrypt_with(int cipher)
{
	struct ndz_key k, other, sign;
	struct ndz_chunk_hdr h, h2;
	uint8_t *c = make_chunk(2, 0x42, 5000), *plain = malloc(NDZ_CHUNK_SIZE), *work;
	size_t i;

	assert_non_null(plain);
	memcpy(plain, c, NDZ_CHUNK_SIZE);
	assert_int_equal(ndz_key_generate(NDZ_KEY_CRYPT, &k, NULL), 0);
	assert_int_equal(ndz_key_generate(NDZ_KEY_CRYPT, &other, NULL), 0);
	assert_int_equal(ndz_key_generate(NDZ_KEY_SIGN_SECRET, &sign, NULL), 0);
	assert_int_equal(ndz_chunk_encrypt(&sign, cipher, c, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_chunk_encrypt(&k, 0, c, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_chunk_encrypt(&k, 3, c, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_chunk_encrypt(&k, cipher, c, NULL), 0);
	assert_int_equal(ndz_chunk_check(c, &h, NULL), 0);     /* a server can check it */
	assert_true(h.incompat_flags & NDZ_INCOMPAT_ENCRYPTED);
	assert_int_equal(ndz_chunk_cipher(&h), cipher);
	assert_int_equal(!!(h.incompat_flags & NDZ_INCOMPAT_AES256GCM),
			 cipher == NDZ_CIPHER_AES256GCM);
	assert_int_equal(h.data_len, 5000 + NDZ_CRYPT_OVERHEAD);
	assert_memory_equal(h.key_id, k.id, NDZ_KEY_ID_LEN);
	assert_memory_not_equal(c + NDZ_HDR_SIZE + NDZ_CRYPT_NONCE, plain + NDZ_HDR_SIZE, 64);
	assert_int_equal(ndz_chunk_encrypt(&k, cipher, c, NULL), NDZ_EINVAL);  /* not twice */

	work = malloc(NDZ_CHUNK_SIZE);
	assert_non_null(work);
	memcpy(work, c, NDZ_CHUNK_SIZE);
	h2 = h;
	assert_int_equal(ndz_chunk_decrypt(&k, work, &h2, NULL), 0);
	assert_int_equal(h2.data_len, 5000);
	assert_int_equal(h2.incompat_flags, 0);
	assert_int_equal(ndz_chunk_cipher(&h2), 0);
	assert_memory_equal(work + NDZ_HDR_SIZE, plain + NDZ_HDR_SIZE, 5000);

	h2 = h;
	assert_int_equal(ndz_chunk_decrypt(NULL, work, &h2, NULL), NDZ_ENEEDKEY);
	assert_int_equal(ndz_chunk_decrypt(&other, c, &h2, NULL), NDZ_EWRONGKEY);
	/* the same key id but not the key: it cannot be forged; a changed byte fails */
	memcpy(other.id, k.id, NDZ_KEY_ID_LEN);
	memcpy(work, c, NDZ_CHUNK_SIZE);
	assert_int_equal(ndz_chunk_decrypt(&other, work, &h2, NULL), NDZ_EDECRYPT);
	for (i = 0; i < h.data_len; i += 97) {
		memcpy(work, c, NDZ_CHUNK_SIZE);
		work[NDZ_HDR_SIZE + i] ^= 0x80;
		h2 = h;
		assert_int_equal(ndz_chunk_decrypt(&k, work, &h2, NULL), NDZ_EDECRYPT);
	}
	/* the last byte of the tag, too */
	memcpy(work, c, NDZ_CHUNK_SIZE);
	work[NDZ_HDR_SIZE + h.data_len - 1] ^= 1;
	h2 = h;
	assert_int_equal(ndz_chunk_decrypt(&k, work, &h2, NULL), NDZ_EDECRYPT);
	/* the header is authenticated: another index, CRC made right, fails */
	memcpy(work, c, NDZ_CHUNK_SIZE);
	h2 = h;
	h2.index = 3;
	h2.first = 30;
	h2.last = 40;
	ndz_hdr_set_region(work, 0, (struct ndz_region){ 30, 10 });
	assert_int_equal(ndz_hdr_encode(&h2, work, NULL), 0);
	assert_int_equal(ndz_chunk_check(work, &h2, NULL), 0);
	assert_int_equal(ndz_chunk_decrypt(&k, work, &h2, NULL), NDZ_EDECRYPT);
	/* the cipher bit flipped (CRC made right): read with the other cipher, refused */
	refuse_changed(&k, c, &h, flip_cipher);
	/* the chunk carried into another image (its UUID), CRC made right: refused */
	refuse_changed(&k, c, &h, other_image);
	/* the cipher bit flipped without the CRC: a bad header checksum */
	memcpy(work, c, NDZ_CHUNK_SIZE);
	work[20] ^= NDZ_INCOMPAT_AES256GCM;
	assert_int_equal(ndz_hdr_decode(work, &h2, NULL), NDZ_EHDRCRC);
	free(work);
	free(plain);
	free(c);
	/* no room for the nonce and tag */
	c = make_chunk(0, 1, NDZ_MAX_DATA - NDZ_CRYPT_OVERHEAD + 1);
	assert_int_equal(ndz_chunk_encrypt(&k, cipher, c, NULL), NDZ_EINVAL);
	free(c);
	ndz_key_wipe(&k);
	ndz_key_wipe(&other);
	ndz_key_wipe(&sign);
}

static void test_encrypt(void **state)
{
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ciphers) / sizeof(ciphers[0]); i++)
		encrypt_with(ciphers[i]);
}

static void test_cipher_names(void **state)
{
	(void)state;
	assert_int_equal(ndz_cipher_parse("aes256gcm", NULL), NDZ_CIPHER_AES256GCM);
	assert_int_equal(ndz_cipher_parse("aes-256-gcm", NULL), NDZ_CIPHER_AES256GCM);
	assert_int_equal(ndz_cipher_parse("xchacha20", NULL), NDZ_CIPHER_XCHACHA20);
	assert_int_equal(ndz_cipher_parse("xchacha20poly1305", NULL), NDZ_CIPHER_XCHACHA20);
	assert_int_equal(ndz_cipher_parse("aes128gcm", NULL), NDZ_EINVAL);
	assert_int_equal(ndz_cipher_parse("", NULL), NDZ_EINVAL);
	assert_string_equal(ndz_cipher_name(NDZ_CIPHER_AES256GCM), "aes256gcm");
	assert_string_equal(ndz_cipher_name(NDZ_CIPHER_XCHACHA20), "xchacha20");
	assert_string_equal(ndz_cipher_name(0), "none");
}

/* The AES-256-GCM bit means nothing without the ENCRYPTED bit: refused. */
static void test_cipher_bit_alone(void **state)
{
	uint8_t *c = make_chunk(0, 1, 100);
	struct ndz_chunk_hdr h;

	(void)state;
	assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
	h.incompat_flags = NDZ_INCOMPAT_AES256GCM;
	assert_int_equal(ndz_hdr_encode(&h, c, NULL), NDZ_EINVAL);
	put_le32(c + 20, NDZ_INCOMPAT_AES256GCM);
	put_le32(c + 100, 0);
	put_le32(c + 100, (uint32_t)crc32(crc32(0L, Z_NULL, 0), c, NDZ_HDR_SIZE));
	assert_int_equal(ndz_hdr_decode(c, &h, NULL), NDZ_EFEATURE);
	free(c);
}

/*
 * The AES-256-GCM construction as doc/FORMAT.md states it, checked with another
 * implementation (libsodium's, where the CPU has AES-NI): the subkey is
 * BLAKE2b-256 keyed with the key over "ndz aes-256-gcm\0" || uuid || nonce[0..12),
 * the IV nonce[12..24), the associated data the header area.
 */
static void test_aes_gcm_construction(void **state)
{
	static const char label[16] = "ndz aes-256-gcm";
	struct ndz_key k;
	struct ndz_chunk_hdr h;
	crypto_generichash_state st;
	uint8_t *c = make_chunk(1, 0x42, 3000), *plain = malloc(3000), sub[32], ad[NDZ_HDR_SIZE];
	const uint8_t *n;
	size_t clen = 3000;

	(void)state;
	assert_non_null(plain);
	assert_int_equal(sodium_init() < 0, 0);
	if (!crypto_aead_aes256gcm_is_available()) {
		free(plain);
		free(c);
		skip();
	}
	assert_int_equal(ndz_key_generate(NDZ_KEY_CRYPT, &k, NULL), 0);
	assert_int_equal(ndz_chunk_encrypt(&k, NDZ_CIPHER_AES256GCM, c, NULL), 0);
	assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
	n = c + NDZ_HDR_SIZE;
	crypto_generichash_init(&st, k.sk, 32, sizeof(sub));
	crypto_generichash_update(&st, (const uint8_t *)label, sizeof(label));
	crypto_generichash_update(&st, h.uuid, 16);
	crypto_generichash_update(&st, n, 12);
	crypto_generichash_final(&st, sub, sizeof(sub));
	ndz_hdr_auth_data(c, ad);
	assert_int_equal(crypto_aead_aes256gcm_decrypt_detached(plain, NULL, n + 24, clen,
								n + 24 + clen, ad, sizeof(ad),
								n + 12, sub), 0);
	free(c);
	c = make_chunk(1, 0x42, 3000);
	assert_memory_equal(plain, c + NDZ_HDR_SIZE, 3000);
	free(plain);
	free(c);
	ndz_key_wipe(&k);
}

/* A sound two-chunk image in memory: chunk 1 is the last, up to sector 100. */
static uint8_t *two_chunk_image(void)
{
	uint8_t *img = calloc(2, NDZ_CHUNK_SIZE), *c;
	struct ndz_chunk_hdr h;

	assert_non_null(img);
	c = make_chunk(0, 0x42, 3000);
	memcpy(img, c, NDZ_CHUNK_SIZE);
	free(c);
	c = make_chunk(1, 0x42, 2000);
	assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
	h.chunk_flags = NDZ_CHUNK_LAST;
	h.last = 100;
	assert_int_equal(ndz_hdr_encode(&h, c, NULL), 0);
	memcpy(img + NDZ_CHUNK_SIZE, c, NDZ_CHUNK_SIZE);
	free(c);
	return img;
}

static void test_image_build_verify(void **state)
{
	struct ndz_key k, pub;
	struct ndz_manifest m;
	struct ndz_verify_opts vo = { .pub = &pub, .stored = 1 };
	struct ndz_verify *v;
	struct ndz_error e = { 0 };
	struct ndz_io *io;
	uint8_t *img = two_chunk_image(), *buf, h1[NDZ_HASH_LEN];
	size_t len;

	(void)state;
	key_pair(&k, &pub);
	assert_int_equal(ndz_io_open_mem(img, 2 * NDZ_CHUNK_SIZE, 0, &io, NULL), 0);
	assert_int_equal(ndz_manifest_build(io, &m, &e), 0);
	ndz_io_close(io);
	assert_int_equal(m.chunks, 2);
	ndz_chunk_hash(img + NDZ_CHUNK_SIZE, h1, NULL);
	assert_memory_equal(m.hash[1], h1, NDZ_HASH_LEN);
	assert_int_equal(ndz_manifest_sign(&m, &k, &buf, &len, NULL), 0);
	ndz_manifest_release(&m);
	assert_int_equal(ndz_verify_create(&vo, &v, &e), 0);
	assert_int_equal(ndz_verify_manifest(v, buf, len, &e), NDZ_VERDICT_ACCEPT);
	assert_int_equal(ndz_io_open_mem(img, 2 * NDZ_CHUNK_SIZE, 0, &io, NULL), 0);
	assert_int_equal(ndz_verify_walk(v, io, &e), 0);
	ndz_io_close(io);
	/* a changed padding byte: not signable, and no longer the signed image */
	img[NDZ_CHUNK_SIZE + NDZ_CHUNK_SIZE - 5] = 1;
	assert_int_equal(ndz_io_open_mem(img, 2 * NDZ_CHUNK_SIZE, 0, &io, NULL), 0);
	assert_int_equal(ndz_manifest_build(io, &m, &e), NDZ_EPADDING);
	assert_null(m.hash);
	ndz_io_close(io);
	ndz_error_clear(&e);
	assert_int_equal(ndz_io_open_mem(img, 2 * NDZ_CHUNK_SIZE, 0, &io, NULL), 0);
	assert_int_equal(ndz_verify_walk(v, io, &e), NDZ_EFORGED);
	assert_non_null(strstr(ndz_error_msg(&e), "chunk 1: does not match the signed manifest"));
	ndz_io_close(io);
	ndz_verify_free(v);
	free(buf);
	free(img);
}

/* The one reader of signed files: the whole file, or the caller's code and no buffer. */
static void test_trust_read_fd(void **state)
{
	char dir[] = "/tmp/test_trust.XXXXXX", path[64];
	struct ndz_error e = { 0 };
	uint8_t *b = (uint8_t *)"x";
	size_t len = 0;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/f", dir);
	assert_non_null(f = fopen(path, "w"));
	assert_int_equal(fputs("0123456789", f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(ndz_trust_read_fd(open(path, O_RDONLY), path, 10, NDZ_EINDEX, &b, &len,
					   &e), 0);
	assert_int_equal(len, 10);
	assert_memory_equal(b, "0123456789", 10);
	free(b);
	/* larger than max: the caller's code, e naming the file */
	assert_int_equal(ndz_trust_read_fd(open(path, O_RDONLY), path, 9, NDZ_EMANIFEST, &b,
					   &len, &e), NDZ_EMANIFEST);
	assert_null(b);
	assert_non_null(strstr(e.msg, "not a regular file of at most 9 bytes"));
	assert_non_null(strstr(e.msg, path));
	/* a directory is no regular file */
	memset(&e, 0, sizeof(e));
	assert_int_equal(ndz_trust_read_fd(open(dir, O_RDONLY), dir, 100, NDZ_EINDEX, &b, &len,
					   &e), NDZ_EINDEX);
	assert_null(b);
	assert_int_equal(unlink(path), 0);
	assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_key_roundtrip),
		cmocka_unit_test(test_key_parse_rejects),
		cmocka_unit_test(test_key_files),
		cmocka_unit_test(test_trust_read_fd),
		cmocka_unit_test(test_manifest),
		cmocka_unit_test(test_chunk_hash),
		cmocka_unit_test(test_manifest_blake2b),
		cmocka_unit_test(test_encrypt),
		cmocka_unit_test(test_cipher_names),
		cmocka_unit_test(test_cipher_bit_alone),
		cmocka_unit_test(test_aes_gcm_construction),
		cmocka_unit_test(test_image_build_verify),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
