/* Unit tests for lib/trust/verify.c: the one trust policy (image rule, chunk verdicts, stored checks). */
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
#include "core/io.h"
#include "core/le.h"
#include "trust/key.h"
#include "trust/manifest.h"
#include "trust/seal.h"
#include "trust/verify.h"
#include "trustfix.h"
#include "keyfix.h"

#define NCHUNKS 3

/* A sound plain chunk i of a 3-chunk image of uuid 0x42.., with len data bytes. */
static uint8_t *make_chunk(uint32_t i, uint32_t len)
{
	return trust_chunk(i, 0x42, len, NCHUNKS);
}

/* The sealed image: NCHUNKS chunks in img, and its signed manifest's bytes. */
struct image {
	uint8_t *img;
	uint8_t *man;
	size_t man_len;
};

static int keep(void *ctx, const uint8_t *chunk, uint32_t index, struct ndz_error *e)
{
	struct image *im = ctx;

	(void)e;
	memcpy(im->img + (size_t)index * NDZ_CHUNK_SIZE, chunk, NDZ_CHUNK_SIZE);
	return 0;
}

/* An image sealed with crypt (NULL: plain) and signed with sec. */
static void make_image(struct image *im, const struct ndz_key *sec, const struct ndz_key *crypt)
{
	struct ndz_seal_opts o = { .crypt = crypt, .sign = 1, .next = keep, .next_ctx = im };
	struct ndz_seal *seal;
	struct ndz_error e = { 0 };
	char path[] = "/tmp/test_verify.XXXXXX";
	uint32_t i;
	int fd;

	im->img = calloc(NCHUNKS, NDZ_CHUNK_SIZE);
	assert_non_null(im->img);
	assert_int_equal(ndz_seal_create(&o, &seal, &e), 0);
	for (i = 0; i < NCHUNKS; i++) {
		uint8_t *c = make_chunk(i, 2000 + i);

		assert_int_equal(ndz_seal_chunk(seal, c, i, &e), 0);
		free(c);
	}
	/* the manifest's bytes, through a file as imagezip writes them */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(ndz_seal_finish(seal, sec, path, &e), 0);
	assert_int_equal(ndz_manifest_read(path, &im->man, &im->man_len, &e), 0);
	unlink(path);
	ndz_seal_free(seal);
}

static void free_image(struct image *im)
{
	free(im->img);
	free(im->man);
}

static uint8_t *chunk_of(const struct image *im, uint32_t i)
{
	uint8_t *c = malloc(NDZ_CHUNK_SIZE);

	assert_non_null(c);
	memcpy(c, im->img + (size_t)i * NDZ_CHUNK_SIZE, NDZ_CHUNK_SIZE);
	return c;
}

struct keys {
	struct ndz_key sec, pub, pub2, ck, ck2;
};

static struct keys *keys_new(void)
{
	struct keys *k = calloc(1, sizeof(*k));
	struct ndz_key sec2;

	assert_non_null(k);
	key_pair(&k->sec, &k->pub);
	key_pair(&sec2, &k->pub2);
	assert_int_equal(ndz_key_generate(NDZ_KEY_CRYPT, &k->ck, NULL), 0);
	assert_int_equal(ndz_key_generate(NDZ_KEY_CRYPT, &k->ck2, NULL), 0);
	ndz_key_wipe(&sec2);
	return k;
}

static struct ndz_verify *verifier(const struct ndz_key *pub, const struct ndz_key *crypt,
				   int stored)
{
	struct ndz_verify_opts o = { .pub = pub, .crypt = crypt, .stored = stored,
				     .name = "img" };
	struct ndz_verify *v;

	assert_int_equal(ndz_verify_create(&o, &v, NULL), 0);
	return v;
}

/* id of the image: chunk 0's header known (with_first) or not (a multicast client) */
static void id_of(const struct image *im, struct ndz_chunk_hdr *h0, struct ndz_image_id *id,
		  int with_first)
{
	assert_int_equal(ndz_hdr_decode(im->img, h0, NULL), 0);
	memset(id, 0, sizeof(*id));
	memcpy(id->uuid, h0->uuid, 16);
	id->source_bytes = h0->source_bytes;
	id->chunks = NCHUNKS;
	id->first = with_first ? h0 : NULL;
}

static void expect_image(struct ndz_verify *v, const struct ndz_image_id *id, int code,
			 const char *msg)
{
	struct ndz_error e = { 0 };

	assert_int_equal(ndz_verify_image(v, id, &e), code);
	if (msg)
		assert_non_null(strstr(ndz_error_msg(&e), msg));
}

static void test_image_rule(void **state)
{
	struct keys *k = keys_new();
	struct image plain = { 0 }, enc = { 0 };
	struct ndz_chunk_hdr h0;
	struct ndz_image_id id;
	struct ndz_verify *v;
	struct ndz_error e = { 0 };
	char want[17], got[17], msg[128];

	(void)state;
	make_image(&plain, &k->sec, NULL);
	make_image(&enc, &k->sec, &k->ck);
	/* no keys, a plain image: fine; an encrypted one: the key it needs, named */
	v = verifier(NULL, NULL, 0);
	id_of(&plain, &h0, &id, 1);
	expect_image(v, &id, 0, NULL);
	id_of(&enc, &h0, &id, 1);
	ndz_key_id_hex(k->ck.id, want);
	snprintf(msg, sizeof(msg), "img: image is encrypted and no key was given (it needs "
		 "encryption key %s: --key FILE)", want);
	expect_image(v, &id, NDZ_ENEEDKEY, msg);
	ndz_verify_free(v);
	/* another encryption key: both ids */
	v = verifier(NULL, &k->ck2, 0);
	ndz_key_id_hex(k->ck2.id, got);
	snprintf(msg, sizeof(msg), "encrypted with key %s, not with key %s", want, got);
	expect_image(v, &id, NDZ_EWRONGKEY, msg);
	/* a key for a plain image */
	id_of(&plain, &h0, &id, 1);
	expect_image(v, &id, NDZ_ENOTENC, "img: image is not encrypted");
	ndz_verify_free(v);
	/* stored (frisbee --raw): encryption is not the verifier's business */
	v = verifier(NULL, NULL, 1);
	id_of(&enc, &h0, &id, 1);
	expect_image(v, &id, 0, NULL);
	ndz_verify_free(v);
	/* a public key and no manifest */
	v = verifier(&k->pub, NULL, 0);
	assert_true(ndz_verify_wants_manifest(v));
	id_of(&plain, &h0, &id, 1);
	expect_image(v, &id, NDZ_EUNSIGNED, "img: image is not signed");
	/* the manifest of the encrypted image, before any chunk: it says encrypted */
	assert_int_equal(ndz_verify_manifest(v, enc.man, enc.man_len, &e), NDZ_VERDICT_ACCEPT);
	assert_false(ndz_verify_wants_manifest(v));
	id_of(&enc, &h0, &id, 0);
	expect_image(v, &id, NDZ_ENEEDKEY, "its signed manifest says it is encrypted");
	ndz_verify_free(v);
	/* the union of the checks: uuid, size, chunk count, codec, encryption */
	v = verifier(&k->pub, NULL, 0);
	assert_int_equal(ndz_verify_manifest(v, plain.man, plain.man_len, &e), NDZ_VERDICT_ACCEPT);
	id_of(&plain, &h0, &id, 0);
	expect_image(v, &id, 0, NULL);
	id.uuid[3] ^= 1;
	expect_image(v, &id, NDZ_EMISMATCH, "img: the manifest is of another image (uuid differs)");
	id.uuid[3] ^= 1;
	id.source_bytes += 512;
	expect_image(v, &id, NDZ_EMISMATCH, "(source size differs)");
	id.source_bytes -= 512;
	id.chunks = NCHUNKS + 1;
	expect_image(v, &id, NDZ_EMISMATCH, "img: chunk belongs to another image: 4 chunks, "
		     "the manifest img signs 3");
	id.chunks = 0;
	expect_image(v, &id, 0, NULL);
	id_of(&plain, &h0, &id, 1);
	h0.codec = NDZ_CODEC_ZSTD;
	expect_image(v, &id, NDZ_EMISMATCH, "(codec differs)");
	h0.codec = NDZ_CODEC_ZLIB;
	h0.incompat_flags |= NDZ_INCOMPAT_ENCRYPTED;
	v = (ndz_verify_free(v), verifier(&k->pub, &k->ck, 0));
	assert_int_equal(ndz_verify_manifest(v, plain.man, plain.man_len, &e), NDZ_VERDICT_ACCEPT);
	memcpy(h0.key_id, k->ck.id, NDZ_KEY_ID_LEN);
	expect_image(v, &id, NDZ_EMISMATCH, "(encryption differs)");
	ndz_verify_free(v);
	free_image(&plain);
	free_image(&enc);
	free(k);
}

static void test_manifest_verdicts(void **state)
{
	struct keys *k = keys_new();
	struct image im = { 0 };
	struct ndz_verify *v;
	struct ndz_error e = { 0 };
	char path[] = "/tmp/test_verify.XXXXXX";
	int fd;

	(void)state;
	make_image(&im, &k->sec, NULL);
	/* another key's manifest: fatal at once */
	v = verifier(&k->pub2, NULL, 0);
	assert_int_equal(ndz_verify_manifest(v, im.man, im.man_len, &e), NDZ_VERDICT_FATAL);
	assert_int_equal(e.code, NDZ_EWRONGKEY);
	assert_null(ndz_verify_get_manifest(v));
	ndz_verify_free(v);
	/* a byte changed or cut short on the way: fetch it again */
	v = verifier(&k->pub, NULL, 0);
	im.man[70] ^= 1;
	ndz_error_clear(&e);
	assert_int_equal(ndz_verify_manifest(v, im.man, im.man_len, &e), NDZ_VERDICT_FORGED);
	assert_int_equal(e.code, NDZ_ESIGNATURE);
	im.man[70] ^= 1;
	ndz_error_clear(&e);
	assert_int_equal(ndz_verify_manifest(v, im.man, im.man_len - 1, &e), NDZ_VERDICT_FORGED);
	assert_int_equal(e.code, NDZ_EMANIFEST);
	ndz_error_clear(&e);
	assert_int_equal(ndz_verify_manifest(v, im.man, im.man_len, &e), NDZ_VERDICT_ACCEPT);
	assert_int_equal(ndz_verify_get_manifest(v)->chunks, NCHUNKS);
	/* from a file: missing is "not signed", named */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	unlink(path);
	assert_int_equal(ndz_verify_load_manifest(v, path, &e), NDZ_EUNSIGNED);
	assert_non_null(strstr(ndz_error_msg(&e), "img: image is not signed ("));
	assert_non_null(strstr(ndz_error_msg(&e), ": no manifest"));
	ndz_verify_free(v);
	/* no public key: nothing to check a manifest with */
	v = verifier(NULL, NULL, 0);
	ndz_error_clear(&e);
	assert_int_equal(ndz_verify_manifest(v, im.man, im.man_len, &e), NDZ_VERDICT_FATAL);
	assert_int_equal(e.code, NDZ_EINVAL);
	ndz_verify_free(v);
	free_image(&im);
	free(k);
}

/* The verdict on chunk i of im (a copy), for place. */
static enum ndz_verdict verdict(struct ndz_verify *v, const uint8_t *c, uint32_t place,
				int *intact, struct ndz_error *e)
{
	struct ndz_chunk_hdr h;
	uint8_t *copy = malloc(NDZ_CHUNK_SIZE);
	enum ndz_verdict r;

	assert_non_null(copy);
	memcpy(copy, c, NDZ_CHUNK_SIZE);
	ndz_error_clear(e);
	*intact = 1;
	r = ndz_verify_chunk(v, copy, place, &h, intact, e);
	free(copy);
	return r;
}

/* A chunk's data byte changed, its CRC made right: only a hash or a tag can tell. */
static uint8_t *forge(const struct image *im, uint32_t i)
{
	uint8_t *c = chunk_of(im, i);
	struct ndz_chunk_hdr h;

	assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
	c[NDZ_HDR_SIZE + 30] ^= 0x10;
	h.data_crc = (uint32_t)crc32(crc32(0L, Z_NULL, 0), c + NDZ_HDR_SIZE, h.data_len);
	assert_int_equal(ndz_hdr_encode(&h, c, NULL), 0);
	return c;
}

static void start(struct ndz_verify *v, const struct image *im)
{
	struct ndz_chunk_hdr h0;
	struct ndz_image_id id;

	id_of(im, &h0, &id, 0);
	assert_int_equal(ndz_verify_image(v, &id, NULL), 0);
}

static void test_chunk_verdicts(void **state)
{
	struct keys *k = keys_new();
	struct image plain = { 0 }, enc = { 0 };
	struct ndz_verify *v;
	struct ndz_error e = { 0 };
	uint8_t *c;
	int intact, i;

	(void)state;
	make_image(&plain, &k->sec, NULL);
	make_image(&enc, &k->sec, &k->ck);

	/* unsigned, no keys: the CRC and the place */
	v = verifier(NULL, NULL, 0);
	start(v, &plain);
	assert_int_equal(verdict(v, plain.img, 0, &intact, &e), NDZ_VERDICT_ACCEPT);
	assert_int_equal(verdict(v, plain.img, 1, &intact, &e), NDZ_VERDICT_DAMAGED);
	assert_int_equal(e.code, NDZ_EMISMATCH);
	c = chunk_of(&plain, 1);
	c[NDZ_HDR_SIZE + 5] ^= 1;
	assert_int_equal(verdict(v, c, 1, &intact, &e), NDZ_VERDICT_DAMAGED);
	assert_int_equal(e.code, NDZ_EDATACRC);
	free(c);
	c = forge(&plain, 1);          /* CRC-valid: unsigned, it passes */
	assert_int_equal(verdict(v, c, 1, &intact, &e), NDZ_VERDICT_ACCEPT);
	/* an encrypted chunk without a key: fatal, named */
	assert_int_equal(verdict(v, enc.img, 0, &intact, &e), NDZ_VERDICT_FATAL);
	assert_string_equal(ndz_error_msg(&e), "img: chunk 0: image is encrypted and no key "
			    "was given");
	ndz_verify_free(v);

	/* signed: the forged chunk is caught */
	v = verifier(&k->pub, NULL, 0);
	assert_int_equal(ndz_verify_manifest(v, plain.man, plain.man_len, &e), 0);
	start(v, &plain);
	assert_int_equal(verdict(v, c, 1, &intact, &e), NDZ_VERDICT_FORGED);
	assert_int_equal(e.code, NDZ_EFORGED);
	assert_int_equal(intact, 1);
	free(c);
	c = chunk_of(&plain, 1);
	assert_int_equal(verdict(v, c, 1, &intact, &e), NDZ_VERDICT_ACCEPT);
	free(c);
	ndz_verify_free(v);

	/* encrypted, unsigned: a bad tag is a forger's; decryption in place */
	v = verifier(NULL, &k->ck, 0);
	start(v, &enc);
	c = chunk_of(&enc, 2);
	{
		struct ndz_chunk_hdr h;

		assert_int_equal(ndz_verify_chunk(v, c, 2, &h, &intact, &e), NDZ_VERDICT_ACCEPT);
		assert_int_equal(h.data_len, 2002);
		assert_false(h.incompat_flags & NDZ_INCOMPAT_ENCRYPTED);
		assert_int_equal(intact, 0);
	}
	free(c);
	c = forge(&enc, 2);
	assert_int_equal(verdict(v, c, 2, &intact, &e), NDZ_VERDICT_FORGED);
	assert_int_equal(e.code, NDZ_EDECRYPT);
	assert_int_equal(intact, 0);
	free(c);
	/* plain chunks where encrypted ones are wanted: forged, until 8 in a row */
	for (i = 0; i < 7; i++)
		assert_int_equal(verdict(v, plain.img, 0, &intact, &e), NDZ_VERDICT_FORGED);
	assert_int_equal(verdict(v, plain.img, 0, &intact, &e), NDZ_VERDICT_FATAL);
	assert_string_equal(ndz_error_msg(&e), "img: chunk 0: image is not encrypted, but an "
			    "encryption key was given");
	ndz_verify_free(v);
	/* a success in between starts the count again */
	v = verifier(NULL, &k->ck2, 0);
	start(v, &enc);
	for (i = 0; i < 7; i++)
		assert_int_equal(verdict(v, enc.img, 0, &intact, &e), NDZ_VERDICT_FORGED);
	assert_int_equal(e.code, NDZ_EWRONGKEY);
	ndz_verify_free(v);

	/* signed and encrypted, another key: the chunk is authentic, fatal at once */
	v = verifier(&k->pub, &k->ck2, 0);
	assert_int_equal(ndz_verify_manifest(v, enc.man, enc.man_len, &e), 0);
	start(v, &enc);
	assert_int_equal(verdict(v, enc.img, 0, &intact, &e), NDZ_VERDICT_FATAL);
	assert_int_equal(e.code, NDZ_EWRONGKEY);
	assert_non_null(strstr(ndz_error_msg(&e), "img: chunk 0: signed or encrypted with "
			       "another key (encrypted with key "));
	ndz_verify_free(v);

	/* stored (frisbee --raw): the encrypted chunk is kept as it is */
	v = verifier(&k->pub, &k->ck, 1);
	assert_int_equal(ndz_verify_manifest(v, enc.man, enc.man_len, &e), 0);
	start(v, &enc);
	assert_int_equal(verdict(v, enc.img + NDZ_CHUNK_SIZE, 1, &intact, &e),
			 NDZ_VERDICT_ACCEPT);
	assert_int_equal(intact, 1);
	ndz_verify_free(v);
	free_image(&plain);
	free_image(&enc);
	free(k);
}

static void test_header_and_data(void **state)
{
	struct keys *k = keys_new();
	struct image plain = { 0 }, enc = { 0 };
	struct ndz_chunk_hdr h;
	struct ndz_verify *v;
	struct ndz_error e = { 0 };
	uint8_t *c;

	(void)state;
	make_image(&plain, &k->sec, NULL);
	make_image(&enc, &k->sec, &k->ck);
	/* no verifier: plain chunks by their CRC; encrypted ones refused */
	assert_int_equal(ndz_hdr_decode(enc.img, &h, NULL), 0);
	assert_int_equal(ndz_verify_header(NULL, &h, &e), NDZ_ENEEDKEY);
	assert_string_equal(ndz_error_msg(&e), "chunk 0: image is encrypted and no key was given");
	ndz_error_clear(&e);
	c = chunk_of(&plain, 0);
	assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
	assert_int_equal(ndz_verify_header(NULL, &h, &e), 0);
	assert_int_equal(ndz_verify_data(NULL, c, &h, 0, &e), 0);
	c[NDZ_HDR_SIZE + 1] ^= 1;
	assert_int_equal(ndz_verify_data(NULL, c, &h, 0, &e), NDZ_EDATACRC);
	ndz_error_clear(&e);
	assert_int_equal(ndz_verify_data(NULL, c, &h, NDZ_VERIFY_CHECKED, &e), 0);
	assert_int_equal(ndz_verify_stored(NULL, c, &h, &e), NDZ_EDATACRC);
	assert_string_equal(ndz_error_msg(&e), "chunk 0: bad data checksum");
	ndz_error_clear(&e);
	free(c);
	/* with both keys: the header's image, the hash, then decryption */
	v = verifier(&k->pub, &k->ck, 0);
	assert_int_equal(ndz_verify_manifest(v, enc.man, enc.man_len, &e), 0);
	c = chunk_of(&plain, 1);
	assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
	assert_int_equal(ndz_verify_header(v, &h, &e), NDZ_ENOTENC);
	ndz_error_clear(&e);
	free(c);
	c = chunk_of(&enc, 1);
	assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
	h.source_bytes += 512;
	assert_int_equal(ndz_verify_header(v, &h, &e), NDZ_EMISMATCH);
	assert_string_equal(ndz_error_msg(&e), "chunk 1: the manifest is of another image "
			    "(source size differs)");
	ndz_error_clear(&e);
	h.source_bytes -= 512;
	assert_int_equal(ndz_verify_header(v, &h, &e), 0);
	assert_int_equal(ndz_verify_stored(v, c, &h, &e), 0);
	assert_int_equal(ndz_verify_data(v, c, &h, 0, &e), 0);
	assert_int_equal(h.data_len, 2001);
	free(c);
	c = forge(&enc, 1);
	assert_int_equal(ndz_hdr_decode(c, &h, NULL), 0);
	assert_int_equal(ndz_verify_data(v, c, &h, NDZ_VERIFY_CHECKED, &e), NDZ_EFORGED);
	assert_string_equal(ndz_error_msg(&e), "chunk 1: does not match the signed manifest");
	free(c);
	ndz_verify_free(v);
	free_image(&plain);
	free_image(&enc);
	free(k);
}

static void test_walk(void **state)
{
	struct keys *k = keys_new();
	struct image im = { 0 }, other = { 0 };
	struct ndz_verify *v;
	struct ndz_error e = { 0 };
	struct ndz_io *io;

	(void)state;
	make_image(&im, &k->sec, NULL);
	make_image(&other, &k->sec, &k->ck);
	v = verifier(&k->pub, NULL, 1);
	assert_int_equal(ndz_verify_manifest(v, im.man, im.man_len, &e), 0);
	assert_int_equal(ndz_io_open_mem(im.img, NCHUNKS * NDZ_CHUNK_SIZE, 0, &io, NULL), 0);
	assert_int_equal(ndz_verify_walk(v, io, &e), 0);
	ndz_io_close(io);
	/* a chunk of another image with the same uuid: not the one signed */
	memcpy(im.img + NDZ_CHUNK_SIZE, other.img + NDZ_CHUNK_SIZE, NDZ_CHUNK_SIZE);
	assert_int_equal(ndz_io_open_mem(im.img, NCHUNKS * NDZ_CHUNK_SIZE, 0, &io, NULL), 0);
	assert_int_equal(ndz_verify_walk(v, io, &e), NDZ_EFORGED);
	assert_non_null(strstr(ndz_error_msg(&e), ": chunk 1: does not match the signed manifest"));
	ndz_io_close(io);
	ndz_error_clear(&e);
	/* without keys: the CRCs and the rules alone */
	ndz_verify_free(v);
	assert_int_equal(ndz_io_open_mem(im.img, NCHUNKS * NDZ_CHUNK_SIZE, 0, &io, NULL), 0);
	assert_int_equal(ndz_verify_walk(NULL, io, &e), 0);
	ndz_io_close(io);
	im.img[2 * NDZ_CHUNK_SIZE + NDZ_HDR_SIZE + 9] ^= 1;
	assert_int_equal(ndz_io_open_mem(im.img, NCHUNKS * NDZ_CHUNK_SIZE, 0, &io, NULL), 0);
	assert_int_equal(ndz_verify_walk(NULL, io, &e), NDZ_EDATACRC);
	assert_non_null(strstr(ndz_error_msg(&e), ": chunk 2: bad data checksum"));
	ndz_io_close(io);
	free_image(&im);
	free_image(&other);
	free(k);
}

/* --orig-pubkey: a chunk of ours, or an original one without a signature, refused. */
static void test_orig_pubkey(void **state)
{
	struct keys *k = keys_new();
	struct image plain = { 0 };
	struct ndz_orig_keys ok = { 0 };
	struct ndz_verify_opts o = { .orig = &ok, .name = "img" };
	struct ndz_verify *v;
	struct ndz_chunk_hdr h0, h;
	struct ndz_image_id id;
	struct ndz_error e = { 0 };
	uint8_t *c;
	int intact, i;

	(void)state;
	ok.rsa_n_len = 64;                     /* any key: no chunk here is signed */
	memset(ok.rsa_n, 0xc5, 64);
	ok.rsa_e_len = 1;
	ok.rsa_e[0] = 17;
	make_image(&plain, &k->sec, NULL);
	assert_int_equal(ndz_verify_create(&o, &v, NULL), 0);
	/* ours: refused before anything, chunk by chunk too */
	id_of(&plain, &h0, &id, 1);
	expect_image(v, &id, NDZ_EUNSIGNED, "img: image is not signed (not an original-format "
		     "image, and an original public key was given)");
	id.first = NULL;
	assert_int_equal(ndz_verify_image(v, &id, NULL), 0);
	assert_int_equal(verdict(v, plain.img, 0, &intact, &e), NDZ_VERDICT_FATAL);
	assert_string_equal(ndz_error_msg(&e), "img: chunk 0: image is not signed (not an "
			    "original-format chunk, and an original public key was given)");
	c = chunk_of(&plain, 0);
	h = h0;
	ndz_error_clear(&e);
	assert_int_equal(ndz_verify_data(v, c, &h, 0, &e), NDZ_EUNSIGNED);
	assert_string_equal(ndz_error_msg(&e), "chunk 0: image is not signed (not an "
			    "original-format chunk, and an original public key was given)");
	/* an original V3 chunk: fetched again, then fatal when it keeps coming unsigned */
	memset(c, 0, NDZ_CHUNK_SIZE);
	put_le32(c, 0x6969696b);
	put_le32(c + 4, 1000);
	put_le32(c + 16, 4096);
	put_le32(c + 20, 1);
	put_le32(c + 28, 100);
	put_le32(c + 40, 100);                 /* region {0, 100} */
	memset(&id, 0, sizeof(id));
	id.chunks = 1;
	assert_int_equal(ndz_verify_image(v, &id, NULL), 0);
	for (i = 1; i < 8; i++) {
		assert_int_equal(verdict(v, c, 0, &intact, &e), NDZ_VERDICT_FORGED);
		assert_int_equal(e.code, NDZ_EUNSIGNED);
	}
	assert_int_equal(verdict(v, c, 0, &intact, &e), NDZ_VERDICT_FATAL);
	assert_string_equal(ndz_error_msg(&e), "img: chunk 0: image is not signed (chunk has "
			    "no signature (a version 3 image cannot be signed))");
	free(c);
	ndz_verify_free(v);
	free_image(&plain);
	ndz_key_wipe(&k->sec);
	free(k);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_image_rule),
		cmocka_unit_test(test_manifest_verdicts),
		cmocka_unit_test(test_chunk_verdicts),
		cmocka_unit_test(test_header_and_data),
		cmocka_unit_test(test_walk),
		cmocka_unit_test(test_orig_pubkey),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
