/* Unit tests for lib/trust/seal.c: the sealer sink (encrypt, hash, sign) and the manifest's filling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/format.h"
#include "trust/key.h"
#include "trust/manifest.h"
#include "trust/seal.h"
#include "trustfix.h"

/* A sound plain chunk i of a 3-chunk image of uuid 0x42.., with len data bytes. */
static uint8_t *make_chunk(uint32_t i, uint32_t len)
{
	return trust_chunk(i, 0x42, len, 3);
}

/* A sink that keeps what it is given, and can be told to fail at one index. */
struct sink {
	uint8_t *img;                  /* 3 chunks */
	uint32_t got;
	uint32_t fail_at;              /* UINT32_MAX: never */
};

static int sink_fn(void *ctx, const uint8_t *chunk, uint32_t index, struct ndz_error *e)
{
	struct sink *s = ctx;

	if (index == s->fail_at)
		return ndz_error_set(e, NDZ_EIO, 0, "sink: chunk %u: write error", index);
	assert_true(index < 3);
	memcpy(s->img + (size_t)index * NDZ_CHUNK_SIZE, chunk, NDZ_CHUNK_SIZE);
	s->got++;
	return 0;
}

static struct sink *sink_new(void)
{
	struct sink *s = calloc(1, sizeof(*s));

	assert_non_null(s);
	s->img = calloc(3, NDZ_CHUNK_SIZE);
	assert_non_null(s->img);
	s->fail_at = UINT32_MAX;
	return s;
}

static void sink_free(struct sink *s)
{
	free(s->img);
	free(s);
}

/* Seal the three chunks through s; each chunk given is left as it was. */
static void seal_three(struct ndz_seal *seal)
{
	struct ndz_error e = { 0 };
	uint32_t i;

	for (i = 0; i < 3; i++) {
		uint8_t *c = make_chunk(i, 1000 + i), *copy = malloc(NDZ_CHUNK_SIZE);

		assert_non_null(copy);
		memcpy(copy, c, NDZ_CHUNK_SIZE);
		assert_int_equal(ndz_seal_chunk(seal, c, i, &e), 0);
		assert_memory_equal(c, copy, NDZ_CHUNK_SIZE);
		free(copy);
		free(c);
	}
}

static void test_seal_plain(void **state)
{
	struct ndz_seal_opts o = { .next = sink_fn };
	struct ndz_seal *seal;
	struct ndz_error e = { 0 };
	struct sink *s = sink_new();
	uint8_t *c;

	(void)state;
	o.next_ctx = s;
	assert_int_equal(ndz_seal_create(&o, &seal, &e), 0);
	assert_int_equal(ndz_seal_reserve(seal), 0);
	assert_null(ndz_seal_manifest(seal));
	seal_three(seal);
	assert_int_equal(s->got, 3);
	c = make_chunk(1, 1001);
	assert_memory_equal(s->img + NDZ_CHUNK_SIZE, c, NDZ_CHUNK_SIZE);
	free(c);
	/* no manifest was kept: nothing to sign */
	assert_int_equal(ndz_seal_finish(seal, NULL, "x.manifest", &e), NDZ_EINVAL);
	assert_non_null(strstr(ndz_error_msg(&e), "x.manifest: the sealer kept no manifest"));
	ndz_seal_free(seal);
	ndz_seal_free(NULL);
	sink_free(s);
}

static void test_seal_encrypt(void **state)
{
	static const int ciphers[] = { NDZ_CIPHER_XCHACHA20, NDZ_CIPHER_AES256GCM };
	struct ndz_key k;
	struct ndz_error e = { 0 };
	size_t n;

	(void)state;
	assert_int_equal(ndz_key_generate(NDZ_KEY_CRYPT, &k, &e), 0);
	for (n = 0; n < 2; n++) {
		struct ndz_seal_opts o = { .next = sink_fn, .crypt = &k, .cipher = ciphers[n] };
		struct ndz_seal *seal;
		struct ndz_chunk_hdr h;
		struct sink *s = sink_new();
		uint8_t *c, *out;

		o.next_ctx = s;
		assert_int_equal(ndz_seal_create(&o, &seal, &e), 0);
		assert_int_equal(ndz_seal_reserve(seal), NDZ_CRYPT_OVERHEAD);
		seal_three(seal);
		out = s->img + 2 * NDZ_CHUNK_SIZE;
		assert_int_equal(ndz_chunk_check(out, &h, NULL), 0);
		assert_int_equal(ndz_chunk_cipher(&h), ciphers[n]);
		assert_memory_equal(h.key_id, k.id, NDZ_KEY_ID_LEN);
		assert_int_equal(h.data_len, 1002 + NDZ_CRYPT_OVERHEAD);
		/* it opens with the key, to the chunk sealed */
		assert_int_equal(ndz_chunk_decrypt(&k, out, &h, &e), 0);
		c = make_chunk(2, 1002);
		assert_int_equal(h.data_len, 1002);
		assert_memory_equal(out + NDZ_HDR_SIZE, c + NDZ_HDR_SIZE, 1002);
		free(c);
		ndz_seal_free(seal);
		sink_free(s);
	}
	ndz_key_wipe(&k);
}

static void test_seal_sign(void **state)
{
	struct ndz_key sec, pub, ck;
	struct ndz_error e = { 0 };
	struct ndz_manifest m;
	char path[] = "/tmp/test_seal.XXXXXX";
	int fd, enc;

	(void)state;
	assert_int_equal(ndz_key_generate(NDZ_KEY_SIGN_SECRET, &sec, &e), 0);
	assert_int_equal(ndz_key_public(&sec, &pub, &e), 0);
	assert_int_equal(ndz_key_generate(NDZ_KEY_CRYPT, &ck, &e), 0);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	for (enc = 0; enc < 2; enc++) {
		struct ndz_seal_opts o = { .next = sink_fn, .sign = 1, .crypt = enc ? &ck : NULL };
		struct ndz_seal *seal;
		struct ndz_chunk_hdr h;
		struct sink *s = sink_new();
		uint32_t i;

		o.next_ctx = s;
		assert_int_equal(ndz_seal_create(&o, &seal, &e), 0);
		seal_three(seal);
		assert_non_null(ndz_seal_manifest(seal));
		/* the public half cannot sign */
		assert_int_equal(ndz_seal_finish(seal, &pub, path, &e), NDZ_EINVAL);
		assert_non_null(strstr(ndz_error_msg(&e), "not a secret signing key"));
		ndz_error_clear(&e);
		assert_int_equal(ndz_seal_finish(seal, &sec, path, &e), 0);
		/* the manifest signs the chunks as stored: encrypted when they are */
		assert_int_equal(ndz_manifest_load(path, &pub, &m, &e), 0);
		assert_int_equal(m.chunks, 3);
		assert_int_equal(m.source_bytes, 30 * 512);
		assert_int_equal(!!(m.flags & NDZ_MANIFEST_ENCRYPTED), enc);
		for (i = 0; i < 3; i++) {
			uint8_t *c = s->img + (size_t)i * NDZ_CHUNK_SIZE;

			assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
			assert_int_equal(ndz_manifest_match(&m, &h, &e), 0);
			assert_int_equal(ndz_manifest_check_chunk(&m, c, &h, &e), 0);
		}
		ndz_manifest_release(&m);
		ndz_seal_free(seal);
		sink_free(s);
	}
	unlink(path);
	ndz_key_wipe(&sec);
	ndz_key_wipe(&ck);
}

static void test_seal_refusals(void **state)
{
	struct ndz_key sec;
	struct ndz_seal_opts o = { 0 };
	struct ndz_seal *seal;
	struct ndz_error e = { 0 };
	struct sink *s = sink_new();
	uint8_t *c;

	(void)state;
	assert_int_equal(ndz_key_generate(NDZ_KEY_SIGN_SECRET, &sec, &e), 0);
	assert_int_equal(ndz_seal_create(&o, &seal, &e), NDZ_EINVAL);
	assert_null(seal);
	assert_non_null(strstr(ndz_error_msg(&e), "needs a sink"));
	ndz_error_clear(&e);
	o.next = sink_fn;
	o.next_ctx = s;
	o.crypt = &sec;
	assert_int_equal(ndz_seal_create(&o, &seal, &e), NDZ_EINVAL);
	assert_non_null(strstr(ndz_error_msg(&e), "ed25519-secret key, not an encryption key"));
	ndz_error_clear(&e);
	o.crypt = NULL;
	o.cipher = 9;
	assert_int_equal(ndz_seal_create(&o, &seal, &e), NDZ_EINVAL);
	ndz_error_clear(&e);
	/* the sink's failure is the sealer's, and the chunk is not counted */
	o.cipher = 0;
	o.sign = 1;
	s->fail_at = 1;
	assert_int_equal(ndz_seal_create(&o, &seal, &e), 0);
	c = make_chunk(0, 100);
	assert_int_equal(ndz_seal_chunk(seal, c, 0, &e), 0);
	free(c);
	c = make_chunk(1, 100);
	assert_int_equal(ndz_seal_chunk(seal, c, 1, &e), NDZ_EIO);
	assert_string_equal(ndz_error_msg(&e), "sink: chunk 1: write error");
	ndz_error_clear(&e);
	/* a chunk handed in under another index than its own */
	assert_int_equal(ndz_seal_chunk(seal, c, 2, &e), NDZ_EHEADER);
	assert_string_equal(ndz_error_msg(&e), "chunk 2: says it is chunk 1");
	free(c);
	ndz_seal_free(seal);
	sink_free(s);
	ndz_key_wipe(&sec);
}

static void test_manifest_set_hash(void **state)
{
	struct ndz_manifest m;
	struct ndz_error e = { 0 };
	struct ndz_chunk_hdr h;
	uint8_t *c, want[NDZ_HASH_LEN];
	uint32_t i;

	(void)state;
	assert_int_equal(ndz_manifest_init(&m, 0, &e), NDZ_EINVAL);
	ndz_error_clear(&e);
	assert_int_equal(ndz_manifest_init(&m, 1, &e), 0);
	/* it grows past its room, and chunk 0 gives the identity */
	for (i = 0; i < 3; i++) {
		c = make_chunk(i, 500);
		assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
		assert_int_equal(ndz_manifest_set_hash(&m, c, &h, &e), 0);
		assert_int_equal(ndz_chunk_hash(c, want, &e), 0);
		assert_memory_equal(m.hash[i], want, NDZ_HASH_LEN);
		free(c);
	}
	assert_true(m.chunks >= 3);
	assert_int_equal(m.source_bytes, 30 * 512);
	assert_int_equal(m.flags, 0);
	/* an encrypted chunk in a plain image */
	c = make_chunk(1, 500);
	assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
	h.incompat_flags |= NDZ_INCOMPAT_ENCRYPTED;
	assert_int_equal(ndz_manifest_set_hash(&m, c, &h, &e), NDZ_EMISMATCH);
	assert_non_null(strstr(ndz_error_msg(&e), "chunk 1: "));
	free(c);
	ndz_manifest_release(&m);
}

static void test_cipher_parse_error(void **state)
{
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_cipher_parse("aes-256-gcm", &e), NDZ_CIPHER_AES256GCM);
	assert_int_equal(ndz_cipher_parse("aes128", &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "cipher 'aes128': aes256gcm or xchacha20");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seal_plain),
		cmocka_unit_test(test_seal_encrypt),
		cmocka_unit_test(test_seal_sign),
		cmocka_unit_test(test_seal_refusals),
		cmocka_unit_test(test_manifest_set_hash),
		cmocka_unit_test(test_cipher_parse_error),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
