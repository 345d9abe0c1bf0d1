/* Unit tests for lib/master/sitecache: a site's fetch state, reuse and its cache's evictions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <stdlib.h>

#include <cmocka.h>

#include "master/sitecache.h"
#include "core/format.h"

static void test_fetch_state(void **state)
{
	struct ndz_sitefetch f;
	struct ndz_error e = { 0 };
	uint32_t first = 99;

	(void)state;
	assert_int_equal(ndz_sitefetch_init(&f, 0, &e), NDZ_EINVAL);
	assert_int_equal(ndz_sitefetch_init(&f, 10, &e), 0);
	assert_false(ndz_sitefetch_done(&f));
	/* nothing here: the whole image, in runs of at most max */
	assert_int_equal(ndz_sitefetch_next(&f, 0, 4, &first), 4);
	assert_int_equal(first, 0);
	ndz_sitefetch_mark(&f, 0);
	ndz_sitefetch_mark(&f, 1);
	ndz_sitefetch_mark(&f, 1);                 /* again: counted once */
	ndz_sitefetch_mark(&f, 10);                /* past the end: ignored */
	assert_int_equal(f.have, 2);
	assert_true(ndz_sitefetch_has(&f, 1));
	assert_false(ndz_sitefetch_has(&f, 2));
	assert_false(ndz_sitefetch_has(&f, 10));
	ndz_sitefetch_mark(&f, 4);
	/* a run stops at a chunk already here */
	assert_int_equal(ndz_sitefetch_next(&f, 0, 16, &first), 2);
	assert_int_equal(first, 2);
	/* asked from a later chunk (where clients are), it starts there */
	assert_int_equal(ndz_sitefetch_next(&f, 5, 16, &first), 5);
	assert_int_equal(first, 5);
	for (uint32_t i = 5; i < 10; i++)
		ndz_sitefetch_mark(&f, i);
	/* from past what is missing: wraps to the start */
	assert_int_equal(ndz_sitefetch_next(&f, 7, 16, &first), 2);
	assert_int_equal(first, 2);
	ndz_sitefetch_mark(&f, 2);
	ndz_sitefetch_mark(&f, 3);
	assert_true(ndz_sitefetch_done(&f));
	assert_int_equal(ndz_sitefetch_next(&f, 0, 16, &first), 0);
	ndz_sitefetch_release(&f);
	ndz_sitefetch_release(&f);                 /* released twice: fine */
}

static void test_cache_fits(void **state)
{
	struct ndz_sitecache_entry c[] = { { "a", 100, 1, 0, 0 }, { "b", 100, 2, 0, 0 } };
	struct ndz_error e = { 0 };
	size_t out[2], n = 9;

	(void)state;
	assert_int_equal(ndz_sitecache_evict(c, 2, 100, 300, out, &n, &e), 0);
	assert_int_equal(n, 0);
	/* unbounded */
	assert_int_equal(ndz_sitecache_evict(c, 2, 1u << 30, 0, out, &n, &e), 0);
	assert_int_equal(n, 0);
	/* empty */
	assert_int_equal(ndz_sitecache_evict(NULL, 0, 300, 300, out, &n, &e), 0);
	assert_int_equal(n, 0);
}

static void test_cache_lru(void **state)
{
	/* used: c oldest, then a, then b, d newest */
	struct ndz_sitecache_entry c[] = { { "a", 100, 5, 0, 0 }, { "b", 100, 7, 0, 0 },
					   { "c", 100, 3, 0, 0 }, { "d", 100, 9, 0, 0 } };
	struct ndz_error e = { 0 };
	size_t out[4], n;

	(void)state;
	assert_int_equal(ndz_sitecache_evict(c, 4, 100, 400, out, &n, &e), 0);
	assert_int_equal(n, 1);
	assert_int_equal(out[0], 2);               /* c */
	assert_int_equal(ndz_sitecache_evict(c, 4, 150, 400, out, &n, &e), 0);
	assert_int_equal(n, 2);
	assert_int_equal(out[0], 2);               /* c, then a */
	assert_int_equal(out[1], 0);
}

static void test_cache_pin_in_use(void **state)
{
	/* a oldest but pinned, b next but served now: c goes, then d */
	struct ndz_sitecache_entry c[] = { { "a", 100, 1, 1, 0 }, { "b", 100, 2, 0, 1 },
					   { "c", 100, 3, 0, 0 }, { "d", 100, 4, 0, 0 } };
	struct ndz_error e = { 0 };
	size_t out[4], n = 9;

	(void)state;
	assert_int_equal(ndz_sitecache_evict(c, 4, 200, 400, out, &n, &e), 0);
	assert_int_equal(n, 2);
	assert_int_equal(out[0], 2);
	assert_int_equal(out[1], 3);
	/* the kept ones and the new one do not fit: refused, nothing evicted */
	assert_int_equal(ndz_sitecache_evict(c, 4, 201, 400, out, &n, &e), NDZ_ECACHEFULL);
	assert_int_equal(n, 0);
	assert_non_null(strstr(ndz_error_msg(&e), "pinned or in use"));
}

/* An index of n chunks, entry i covering [10i, 10i + 10) with digest byte d[i]. */
static void mkindex(struct ndz_index *ix, const char *d, uint32_t n)
{
	static const uint8_t uuid[16] = { 1 };

	assert_int_equal(ndz_index_init(ix, uuid, n, 1 << 20, NULL), 0);
	for (uint32_t i = 0; i < n; i++) {
		ix->e[i].first = 10 * i;
		ix->e[i].last = 10 * i + 10;
		memset(ix->e[i].digest, d[i], NDZ_INDEX_DIGEST_LEN);
	}
}

static void test_reuse_find(void **state)
{
	struct ndz_index a, b, nw;
	struct ndz_sitereuse *r;
	uint32_t src = 9, at = 9;
	struct ndz_index_piece p1 = { 0, 512, 0, 100, { 0 } }, p2 = { 0, 512, 0, 101, { 0 } };

	(void)state;
	mkindex(&a, "abcd", 4);
	mkindex(&b, "xbyz", 4);
	mkindex(&nw, "abqdz", 5);
	assert_int_equal(ndz_sitereuse_create(&r, NULL), 0);
	assert_int_equal(ndz_sitereuse_find(r, &nw.e[0], &src, &at), 0);   /* none held */
	assert_int_equal(ndz_sitereuse_add(r, &a, 0, NULL), 0);
	assert_int_equal(ndz_sitereuse_add(r, &b, 1, NULL), 0);
	assert_int_equal(ndz_sitereuse_count(r), 8);
	assert_int_equal(ndz_sitereuse_find(r, &nw.e[0], &src, &at), 1);
	assert_int_equal(src, 0);
	assert_int_equal(at, 0);
	/* b's chunk 1 writes the same as a's: the first added */
	assert_int_equal(ndz_sitereuse_find(r, &nw.e[1], &src, &at), 1);
	assert_int_equal(src, 0);
	assert_int_equal(at, 1);
	assert_int_equal(ndz_sitereuse_find(r, &nw.e[2], &src, &at), 0);   /* changed */
	assert_int_equal(ndz_sitereuse_find(r, &nw.e[3], &src, &at), 1);
	/* z: b's chunk 3 covers [30, 40), the new chunk 4 [40, 50): not the same */
	assert_int_equal(ndz_sitereuse_find(r, &nw.e[4], &src, &at), 0);
	/* other regions: not the same */
	nw.e[3].nregions = 1;
	nw.e[3].regions = &(struct ndz_region){ 30, 5 };
	assert_int_equal(ndz_sitereuse_find(r, &nw.e[3], &src, &at), 0);
	nw.e[3].nregions = 0;
	nw.e[3].regions = NULL;
	/* pieces on both sides that differ (other codec output): not the same */
	assert_int_equal(ndz_index_set_pieces(&a, 3, &p1, 1, NULL), 0);
	assert_int_equal(ndz_index_set_pieces(&nw, 3, &p2, 1, NULL), 0);
	assert_int_equal(ndz_sitereuse_find(r, &nw.e[3], &src, &at), 0);
	assert_int_equal(ndz_index_set_pieces(&nw, 3, &p1, 1, NULL), 0);
	assert_int_equal(ndz_sitereuse_find(r, &nw.e[3], &src, &at), 1);
	assert_int_equal(at, 3);
	ndz_sitereuse_free(r);
	ndz_sitereuse_free(NULL);
	ndz_index_release(&a);
	ndz_index_release(&b);
	ndz_index_release(&nw);
}

static void test_reuse_rebuild(void **state)
{
	uint8_t *c = calloc(1, NDZ_CHUNK_SIZE);
	struct ndz_chunk_hdr h = { 0 }, g;
	static const uint8_t nu[16] = { 9, 8, 7 };
	struct ndz_error e = { 0 };

	(void)state;
	assert_non_null(c);
	h.version = NDZ_VERSION_1;
	h.index = 3;
	memset(h.uuid, 1, 16);
	h.sector_size = NDZ_SECTOR_SIZE;
	h.codec = NDZ_CODEC_ZSTD;
	h.source_bytes = 100 * 512;
	h.source_sectors = 100;
	h.first = 10;
	h.last = 20;
	h.nregions = 1;
	h.data_len = 8;
	memset(c + NDZ_HDR_SIZE, 0x5a, 8);
	h.data_crc = ndz_crc32(0, c + NDZ_HDR_SIZE, 8);
	ndz_hdr_set_region(c, 0, (struct ndz_region){ 12, 4 });
	assert_int_equal(ndz_hdr_encode(&h, c, NULL), 0);
	assert_int_equal(ndz_sitereuse_rebuild(c, 5, 0, nu, 200 * 512 + 1, &e), 0);
	assert_int_equal(ndz_chunk_check(c, &g, NULL), 0);
	assert_int_equal(g.index, 5);
	assert_memory_equal(g.uuid, nu, 16);
	assert_int_equal(g.source_bytes, 200 * 512 + 1);
	assert_int_equal(g.source_sectors, 201);
	assert_int_equal(g.chunk_flags, 0);
	assert_int_equal(g.first, 10);
	assert_int_equal(g.nregions, 1);
	assert_int_equal(g.data_crc, h.data_crc);
	/* made the last chunk of an image that ends where it does */
	assert_int_equal(ndz_sitereuse_rebuild(c, 5, 1, nu, 20 * 512, NULL), 0);
	assert_int_equal(ndz_chunk_check(c, &g, NULL), 0);
	assert_int_equal(g.chunk_flags, NDZ_CHUNK_LAST);
	/* not the last any more */
	assert_int_equal(ndz_sitereuse_rebuild(c, 6, 0, nu, 200 * 512, NULL), 0);
	assert_int_equal(ndz_chunk_check(c, &g, NULL), 0);
	assert_int_equal(g.chunk_flags, 0);
	/* a source that ends before the chunk's sectors: refused */
	assert_int_equal(ndz_sitereuse_rebuild(c, 5, 1, nu, 10 * 512, &e), NDZ_EINVAL);
	/* encrypted: its header is authenticated with its data */
	h.incompat_flags = NDZ_INCOMPAT_ENCRYPTED;
	h.data_len = 40;
	assert_int_equal(ndz_hdr_encode(&h, c, NULL), 0);
	assert_int_equal(ndz_sitereuse_rebuild(c, 5, 0, nu, 200 * 512, &e), NDZ_ENOTSUP);
	/* a broken header */
	c[200] ^= 1;
	assert_true(ndz_sitereuse_rebuild(c, 5, 0, nu, 200 * 512, &e) < 0);
	free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fetch_state),
		cmocka_unit_test(test_reuse_find),
		cmocka_unit_test(test_reuse_rebuild),
		cmocka_unit_test(test_cache_fits),
		cmocka_unit_test(test_cache_lru),
		cmocka_unit_test(test_cache_pin_in_use),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
