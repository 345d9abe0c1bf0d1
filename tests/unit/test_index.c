/* Unit tests for lib/trust/index.c: the content index's bytes, signatures, digests. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <openssl/evp.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/format.h"
#include "core/le.h"
#include "trust/index.h"
#include "trust/key.h"

/* Chunk i of a test image: 100 sectors, two regions, a digest of i's bytes. */
static void set_chunk(struct ndz_index *ix, uint32_t i)
{
	uint8_t area[NDZ_HDR_SIZE] = { 0 };
	uint8_t digest[NDZ_INDEX_DIGEST_LEN];
	struct ndz_chunk_hdr h;

	memset(&h, 0, sizeof(h));
	memset(h.uuid, 0xab, 16);
	h.source_bytes = 1000000;
	h.first = (uint64_t)i * 100;
	h.last = h.first + 100;
	h.nregions = 2;
	ndz_hdr_set_region(area, 0, (struct ndz_region){ h.first + 1, 10 });
	ndz_hdr_set_region(area, 1, (struct ndz_region){ h.first + 50, 50 });
	memset(digest, (int)i + 1, sizeof(digest));
	assert_int_equal(ndz_index_set(ix, i, &h, area, digest, NULL), 0);
}

static void make(struct ndz_index *ix, uint32_t n)
{
	uint32_t i;

	memset(ix, 0, sizeof(*ix));
	for (i = 0; i < n; i++)
		set_chunk(ix, i);
	assert_int_equal(ix->chunks, n);
}

static void test_roundtrip(void **state)
{
	struct ndz_index ix, back;
	struct ndz_error e = { 0 };
	uint8_t *b, *b2;
	size_t len, len2;
	uint32_t i;

	(void)state;
	make(&ix, 5);
	assert_int_equal(ndz_index_encode(&ix, NULL, &b, &len, &e), 0);
	assert_int_equal(len, 64 + 5 * 56 + 10 * 12 + 64);
	assert_memory_equal(b, "\x89NDZIDX\n", 8);
	assert_int_equal(ndz_index_decode(b, len, NULL, &back, &e), 0);
	assert_int_equal(back.chunks, 5);
	assert_int_equal(back.signed_, 0);
	assert_int_equal(back.source_bytes, 1000000);
	assert_memory_equal(back.uuid, ix.uuid, 16);
	for (i = 0; i < 5; i++) {
		assert_int_equal(back.e[i].first, ix.e[i].first);
		assert_int_equal(back.e[i].last, ix.e[i].last);
		assert_int_equal(back.e[i].nregions, 2);
		assert_int_equal(back.e[i].regions[1].start, ix.e[i].regions[1].start);
		assert_int_equal(back.e[i].regions[1].count, 50);
		assert_memory_equal(back.e[i].digest, ix.e[i].digest, NDZ_INDEX_DIGEST_LEN);
	}
	/* Deterministic: the same index gives the same bytes. */
	assert_int_equal(ndz_index_encode(&back, NULL, &b2, &len2, &e), 0);
	assert_int_equal(len2, len);
	assert_memory_equal(b2, b, len);
	assert_int_equal(ndz_index_match(&back, ix.uuid, 1000000, 5, &e), 0);
	assert_int_equal(ndz_index_match(&back, ix.uuid, 1000000, 6, NULL), NDZ_EMISMATCH);
	assert_int_equal(ndz_index_match(&back, ix.uuid, 999, 0, NULL), NDZ_EMISMATCH);
	back.uuid[0] ^= 1;
	assert_int_equal(ndz_index_match(&back, ix.uuid, 1000000, 0, NULL), NDZ_EMISMATCH);
	free(b);
	free(b2);
	ndz_index_release(&back);
	ndz_index_release(&back);
	ndz_index_release(&ix);
}

/* A field of an encoded index changed: refused as malformed. */
static void refuse(const uint8_t *good, size_t len, size_t off, size_t size, uint64_t v)
{
	struct ndz_error e = { 0 };
	struct ndz_index ix;
	uint8_t *b = malloc(len);

	assert_non_null(b);
	memcpy(b, good, len);
	if (size == 1)
		b[off] = (uint8_t)v;
	else if (size == 2)
		put_le16(b + off, (uint16_t)v);
	else if (size == 4)
		put_le32(b + off, (uint32_t)v);
	else
		put_le64(b + off, v);
	assert_int_equal(ndz_index_decode(b, len, NULL, &ix, &e), NDZ_EINDEX);
	assert_null(ix.e);
	assert_int_equal(e.code, NDZ_EINDEX);
	free(b);
}

static void test_malformed(void **state)
{
	const size_t E0 = 64, R0 = 64 + 56;       /* entry 0, its region 0 */
	struct ndz_index ix;
	uint8_t *b;
	size_t len, n;

	(void)state;
	make(&ix, 3);
	assert_int_equal(ndz_index_encode(&ix, NULL, &b, &len, NULL), 0);
	refuse(b, len, 0, 1, 0x88);                /* magic */
	refuse(b, len, 8, 2, 2);                   /* version */
	refuse(b, len, 10, 2, 1);                  /* hash algorithm */
	refuse(b, len, 12, 2, 2);                  /* signature algorithm */
	refuse(b, len, 14, 2, 1);                  /* flags */
	refuse(b, len, 40, 4, 0);                  /* chunk count */
	refuse(b, len, 40, 4, 4);
	refuse(b, len, 40, 4, NDZ_INDEX_MAX_CHUNKS + 1);
	refuse(b, len, 44, 4, 7);                  /* region count */
	refuse(b, len, 44, 4, 0xffffffffu);
	refuse(b, len, 56, 8, 1);                  /* reserved */
	refuse(b, len, E0 + 0, 8, 101);            /* first past last */
	refuse(b, len, E0 + 56 + 24 + 0, 8, 5);    /* chunk 1 before chunk 0's last */
	refuse(b, len, E0 + 16, 4, 3);             /* nregions */
	refuse(b, len, E0 + 16, 4, 1);
	refuse(b, len, E0 + 16, 4, NDZ_MAX_REGIONS + 1);
	refuse(b, len, E0 + 20, 4, 1);             /* reserved */
	refuse(b, len, R0 + 0, 8, 60);             /* regions unsorted */
	refuse(b, len, R0 + 8, 4, 0);              /* empty region */
	refuse(b, len, R0 + 12 + 8, 4, 51);        /* past last */
	refuse(b, len, R0 + 12, 8, 0xffffffffffffffffull);
	refuse(b, len, R0 + 8, 4, 50);             /* overlapping */
	/* A signature without a key id. */
	refuse(b, len, len - 1, 1, 1);
	for (n = 0; n < len; n += 7) {             /* truncated anywhere */
		struct ndz_index back;

		assert_int_equal(ndz_index_decode(b, n, NULL, &back, NULL), NDZ_EINDEX);
	}
	free(b);
	ndz_index_release(&ix);
}

static void test_signed(void **state)
{
	struct ndz_key sec, pub, sec2, pub2;
	struct ndz_error e = { 0 };
	struct ndz_index ix, back;
	uint8_t *b, *u;
	size_t len, ulen;

	(void)state;
	assert_int_equal(ndz_key_generate(NDZ_KEY_SIGN_SECRET, &sec, NULL), 0);
	assert_int_equal(ndz_key_public(&sec, &pub, NULL), 0);
	assert_int_equal(ndz_key_generate(NDZ_KEY_SIGN_SECRET, &sec2, NULL), 0);
	assert_int_equal(ndz_key_public(&sec2, &pub2, NULL), 0);
	make(&ix, 4);
	assert_int_equal(ndz_index_encode(&ix, &pub, &b, &len, NULL), NDZ_EINVAL);
	assert_null(b);
	assert_int_equal(ndz_index_encode(&ix, NULL, &u, &ulen, NULL), 0);
	assert_int_equal(ndz_index_encode(&ix, &sec, &b, &len, NULL), 0);
	assert_int_equal(len, ulen);
	assert_memory_equal(ix.key_id, sec.id, NDZ_KEY_ID_LEN);
	/* Good key. */
	assert_int_equal(ndz_index_decode(b, len, &pub, &back, &e), 0);
	assert_int_equal(back.signed_, 1);
	assert_memory_equal(back.key_id, sec.id, NDZ_KEY_ID_LEN);
	ndz_index_release(&back);
	/* Without a key: read, not checked. */
	assert_int_equal(ndz_index_decode(b, len, NULL, &back, NULL), 0);
	assert_int_equal(back.signed_, 0);
	ndz_index_release(&back);
	/* Another key, an unsigned index, a secret key given. */
	assert_int_equal(ndz_index_decode(b, len, &pub2, &back, NULL), NDZ_EWRONGKEY);
	assert_null(back.e);
	assert_int_equal(ndz_index_decode(u, ulen, &pub, &back, NULL), NDZ_EUNSIGNED);
	assert_int_equal(ndz_index_decode(b, len, &sec, &back, NULL), NDZ_EINVAL);
	/* Tampered: a digest byte, a region, the signature. */
	b[64 + 24] ^= 1;
	assert_int_equal(ndz_index_decode(b, len, &pub, &back, NULL), NDZ_EINDEXSIG);
	assert_null(back.e);
	b[64 + 24] ^= 1;
	b[64 + 56 + 8] ^= 1;
	assert_int_equal(ndz_index_decode(b, len, &pub, &back, NULL), NDZ_EINDEXSIG);
	b[64 + 56 + 8] ^= 1;
	b[len - 3] ^= 0x40;
	assert_int_equal(ndz_index_decode(b, len, &pub, &back, NULL), NDZ_EINDEXSIG);
	b[len - 3] ^= 0x40;
	/* The key id made zero: "unsigned" with a signature is malformed. */
	memset(b + 32, 0, NDZ_KEY_ID_LEN);
	assert_int_equal(ndz_index_decode(b, len, &pub, &back, NULL), NDZ_EINDEX);
	free(b);
	free(u);
	ndz_index_release(&ix);
}

static void test_files(void **state)
{
	char dir[] = "/tmp/test_index.XXXXXX", path[256];
	struct ndz_index ix, back;
	struct ndz_error e = { 0 };
	uint8_t *b;
	size_t len;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(ndz_index_path("a/disk.ndz", path, sizeof(path), NULL), 0);
	assert_string_equal(path, "a/disk.ndz.index");
	assert_int_equal(ndz_index_path("disk.ndz", path, 8, NULL), NDZ_EINVAL);
	snprintf(path, sizeof(path), "%s/x.index", dir);
	assert_int_equal(ndz_index_load(path, NULL, &back, &e), NDZ_ENOENT);
	make(&ix, 2);
	assert_int_equal(ndz_index_encode(&ix, NULL, &b, &len, NULL), 0);
	assert_int_equal(ndz_index_save(path, b, len, NULL), 0);
	assert_int_equal(ndz_index_load(path, NULL, &back, NULL), 0);
	assert_int_equal(back.chunks, 2);
	ndz_index_release(&back);
	assert_int_equal(ndz_index_save(path, b, len - 1, NULL), 0);
	memset(&e, 0, sizeof(e));
	assert_int_equal(ndz_index_load(path, NULL, &back, &e), NDZ_EINDEX);
	assert_non_null(strstr(e.msg, path));
	unlink(path);
	rmdir(dir);
	free(b);
	ndz_index_release(&ix);
}

static void test_init_set(void **state)
{
	uint8_t uuid[16] = { 1 };
	struct ndz_index ix;

	(void)state;
	assert_int_equal(ndz_index_init(&ix, uuid, 0, 5, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_index_init(&ix, uuid, NDZ_INDEX_MAX_CHUNKS + 1, 5, NULL),
			 NDZ_EINVAL);
	assert_int_equal(ndz_index_init(&ix, uuid, 3, 5, NULL), 0);
	assert_int_equal(ix.chunks, 3);
	assert_int_equal(ix.e[2].nregions, 0);
	set_chunk(&ix, 6);                         /* grows */
	assert_int_equal(ix.chunks, 7);
	set_chunk(&ix, 6);                         /* replaced, no leak */
	assert_int_equal(ix.e[6].nregions, 2);
	assert_int_equal(ix.e[4].nregions, 0);
	ndz_index_release(&ix);
	assert_null(ix.e);
}

static void test_digest(void **state)
{
	uint8_t want[32], got[32], buf[1000];
	struct ndz_digest *d;
	unsigned int n;
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 13);
	assert_int_equal(EVP_Digest(buf, sizeof(buf), want, &n, EVP_sha256(), NULL), 1);
	d = ndz_digest_create(NULL);
	assert_non_null(d);
	assert_int_equal(ndz_digest_update(d, buf, 300, NULL), 0);
	assert_int_equal(ndz_digest_update(d, buf + 300, 700, NULL), 0);
	assert_int_equal(ndz_digest_final(d, got, NULL), 0);
	assert_memory_equal(got, want, 32);
	/* Starts again: the digest of no bytes. */
	assert_int_equal(EVP_Digest(buf, 0, want, &n, EVP_sha256(), NULL), 1);
	assert_int_equal(ndz_digest_final(d, got, NULL), 0);
	assert_memory_equal(got, want, 32);
	ndz_digest_free(d);
	ndz_digest_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_roundtrip),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_signed),
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_init_set),
		cmocka_unit_test(test_digest),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
