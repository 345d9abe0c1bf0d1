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
#include "keyfix.h"

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
	key_pair(&sec, &pub);
	key_pair(&sec2, &pub2);
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

/* Chunks 0 and 2 of make(ix, 3) in pieces: 20 + 40 and 60 sectors of their data. */
static void set_pieces(struct ndz_index *ix)
{
	struct ndz_index_piece p[2];

	memset(p, 0, sizeof(p));
	p[0] = (struct ndz_index_piece){ .doff = 0, .dlen = 20 * 512, .coff = 0, .clen = 100 };
	p[1] = (struct ndz_index_piece){ .doff = 20 * 512, .dlen = 40 * 512, .coff = 100,
					 .clen = 300 };
	memset(p[0].digest, 0x11, NDZ_INDEX_DIGEST_LEN);
	memset(p[1].digest, 0x22, NDZ_INDEX_DIGEST_LEN);
	assert_int_equal(ndz_index_set_pieces(ix, 0, p, 2, NULL), 0);
	p[0].dlen = 60 * 512;
	assert_int_equal(ndz_index_set_pieces(ix, 2, p, 1, NULL), 0);
}

/* Decode make(3) with set_pieces, byte off of its pieces set to v (len32: 4 bytes). */
static int decode_changed(size_t off, uint32_t v, int len32)
{
	struct ndz_index ix, back;
	uint8_t *b;
	size_t len;
	int rc;

	make(&ix, 3);
	set_pieces(&ix);
	assert_int_equal(ndz_index_encode(&ix, NULL, &b, &len, NULL), 0);
	if (len32)
		put_le32(b + 64 + 3 * 56 + 6 * 12 + off, v);
	else
		b[64 + 3 * 56 + 6 * 12 + off] = (uint8_t)v;
	rc = ndz_index_decode(b, len, NULL, &back, NULL);
	if (rc == 0)
		ndz_index_release(&back);
	free(b);
	ndz_index_release(&ix);
	return rc;
}

/*
 * Pieces (doc/FORMAT.md): an index with pieces is version 2 with their count and
 * records, survives encode and decode and signing, and is refused when its pieces
 * do not tile their chunks; without pieces it stays version 1, byte for byte as
 * before. ndz_index_piece_ranges maps a piece onto its chunk's regions.
 */
static void test_pieces(void **state)
{
	struct ndz_key sec, pub;
	struct ndz_index ix, back;
	struct ndz_error e = { 0 };
	struct ndz_region r[4];
	uint8_t *b, *v1;
	size_t len, v1len;

	(void)state;
	make(&ix, 3);
	assert_int_equal(ndz_index_encode(&ix, NULL, &v1, &v1len, NULL), 0);
	assert_int_equal(get_le16(v1 + 8), 1);
	assert_int_equal(get_le64(v1 + 56), 0);
	set_pieces(&ix);
	assert_int_equal(ndz_index_encode(&ix, NULL, &b, &len, NULL), 0);
	assert_int_equal(len, v1len + 3 * 64);
	assert_int_equal(get_le16(b + 8), 2);
	assert_int_equal(get_le32(b + 56), 3);
	assert_int_equal(ndz_index_size_from_header(b, 64), len);
	/* the entries are the version 1 file's, the pieces follow them */
	assert_memory_equal(b + 64, v1 + 64, v1len - 128);
	assert_int_equal(ndz_index_decode(b, len, NULL, &back, &e), 0);
	assert_int_equal(back.e[0].npieces, 2);
	assert_int_equal(back.e[1].npieces, 0);
	assert_int_equal(back.e[2].npieces, 1);
	assert_int_equal(back.e[0].pieces[1].doff, 20 * 512);
	assert_int_equal(back.e[0].pieces[1].coff, 100);
	assert_int_equal(back.e[0].pieces[1].clen, 300);
	assert_int_equal(back.e[0].pieces[1].digest[5], 0x22);
	/* piece 1 of chunk 0: data sectors 20..60, all in region 1 (50 sectors at 50) */
	assert_int_equal(ndz_index_piece_ranges(&back.e[0], &back.e[0].pieces[1], r, 4), 1);
	assert_int_equal(r[0].start, 60);
	assert_int_equal(r[0].count, 40);
	/* piece 0: region 0 whole (10 at 1), then 10 of region 1 */
	assert_int_equal(ndz_index_piece_ranges(&back.e[0], &back.e[0].pieces[0], r, 4), 2);
	assert_true(r[0].start == 1 && r[0].count == 10 && r[1].start == 50 &&
		    r[1].count == 10);
	ndz_index_release(&back);
	free(b);
	/* signed: a piece's digest changed breaks the signature */
	key_pair(&sec, &pub);
	assert_int_equal(ndz_index_encode(&ix, &sec, &b, &len, NULL), 0);
	assert_int_equal(ndz_index_decode(b, len, &pub, &back, NULL), 0);
	ndz_index_release(&back);
	b[len - 64 - 10] ^= 1;
	assert_int_equal(ndz_index_decode(b, len, &pub, &back, NULL), NDZ_EINDEXSIG);
	free(b);
	/* malformed: offsets that do not follow, a short cover, bad counts */
	assert_int_equal(decode_changed(0, 0, 0), 0);              /* unchanged: fine */
	assert_int_equal(decode_changed(64 + 4, 99, 1), NDZ_EINDEX);   /* coff gap */
	assert_int_equal(decode_changed(64 + 16, 512 * 21, 1), NDZ_EINDEX); /* doff */
	assert_int_equal(decode_changed(64 + 12, 512 * 39, 1), NDZ_EINDEX); /* short */
	assert_int_equal(decode_changed(12, 100, 1), NDZ_EINDEX);  /* not sectors */
	assert_int_equal(decode_changed(8, 0, 1), NDZ_EINDEX);     /* empty frame */
	assert_int_equal(decode_changed(128, 0, 1), NDZ_EINDEX);   /* chunk 0 twice */
	assert_int_equal(decode_changed(128, 7, 1), NDZ_EINDEX);   /* no such chunk */
	assert_int_equal(decode_changed(64 + 24, 1, 0), NDZ_EINDEX); /* reserved */
	free(v1);
	/* dropping the pieces gives the version 1 file again */
	assert_int_equal(ndz_index_set_pieces(&ix, 0, NULL, 0, NULL), 0);
	assert_int_equal(ndz_index_set_pieces(&ix, 2, NULL, 0, NULL), 0);
	assert_int_equal(ndz_index_encode(&ix, NULL, &b, &len, NULL), 0);
	assert_int_equal(get_le16(b + 8), 1);
	free(b);
	ndz_index_release(&ix);
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
		cmocka_unit_test(test_pieces),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
