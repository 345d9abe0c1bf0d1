/*
 * Unit tests for lib/fec: repair blocks are the documented combination of a
 * stripe's data blocks (checked against GF(2^8) arithmetic written here, not
 * ISA-L's), and any 128 distinct blocks and repairs of a stripe give the data back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "mcast/fec.h"
#include "core/format.h"
#include "mcast/proto.h"

#define K NDZ_FEC_K
#define R NDZ_FEC_REPAIRS

static uint32_t rng = 12345;

static uint32_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 17;
	rng ^= rng << 5;
	return rng;
}

/* GF(2^8) with the polynomial x^8 + x^4 + x^3 + x^2 + 1 (0x11d), as doc/PROTOCOL.md says */
static uint8_t mul(uint8_t a, uint8_t b)
{
	unsigned p = 0, x = a;

	for (; b; b >>= 1) {
		if (b & 1)
			p ^= x;
		x <<= 1;
		if (x & 0x100)
			x ^= 0x11d;
	}
	return (uint8_t)p;
}

static uint8_t inv(uint8_t a)
{
	for (unsigned x = 1; x < 256; x++)
		if (mul(a, (uint8_t)x) == 1)
			return (uint8_t)x;
	fail();
	return 0;
}

/* perm[0..n) = a random order of 0..n-1 (repair indexes) */
static void shuffle(uint8_t *perm, unsigned n)
{
	for (unsigned r = 0; r < n; r++)
		perm[r] = (uint8_t)r;
	for (unsigned r = n; r > 1; r--) {
		unsigned j = rnd() % r;
		uint8_t t = perm[r - 1];

		perm[r - 1] = perm[j];
		perm[j] = t;
	}
}

static uint8_t *random_chunk(void)
{
	uint8_t *c = malloc(NDZ_CHUNK_SIZE);

	assert_non_null(c);
	for (size_t i = 0; i < NDZ_CHUNK_SIZE; i++)
		c[i] = (uint8_t)rnd();
	return c;
}

static struct ndz_fec *make(void)
{
	struct ndz_fec *c = NULL;

	assert_int_equal(ndz_fec_create(&c, NULL), 0);
	assert_non_null(c);
	return c;
}

/* Repair r of stripe s, byte by byte: sum of inv((128 + r) ^ j) * block (s + 8j). */
static void test_encode_matches_formula(void **state)
{
	struct ndz_fec *c = make();
	uint8_t *chunk = random_chunk(), out[NDZ_BLOCK_SIZE];
	static const unsigned cases[][2] = { { 0, 0 }, { 7, 126 }, { 3, 1 }, { 5, 64 } };

	(void)state;
	for (size_t n = 0; n < sizeof(cases) / sizeof(cases[0]); n++) {
		unsigned s = cases[n][0], r = cases[n][1];

		ndz_fec_encode(c, chunk, s, r, out);
		for (unsigned i = 0; i < NDZ_BLOCK_SIZE; i += 61) {
			uint8_t want = 0;

			for (unsigned j = 0; j < K; j++)
				want ^= mul(inv((uint8_t)((K + r) ^ j)),
					    chunk[(size_t)(s + 8 * j) * NDZ_BLOCK_SIZE + i]);
			assert_int_equal(out[i], want);
		}
	}
	free(chunk);
	ndz_fec_free(c);
}

/* Random losses in every stripe, healed by random repairs; the chunk comes back whole. */
static void test_decode_random(void **state)
{
	struct ndz_fec *c = make();
	uint8_t *chunk = random_chunk(), *copy = malloc(NDZ_CHUNK_SIZE);
	static uint8_t reps[R][NDZ_BLOCK_SIZE];
	static const unsigned losses[] = { 1, 2, 5, 17, 64, 127 };

	(void)state;
	assert_non_null(copy);
	for (size_t n = 0; n < sizeof(losses) / sizeof(losses[0]); n++) {
		unsigned s = (unsigned)n % NDZ_FEC_STRIPES, e = losses[n];
		uint8_t have[NDZ_BITMAP_BYTES], idx[R], perm[R];
		const uint8_t *rp[R];
		unsigned lost = 0;

		memcpy(copy, chunk, NDZ_CHUNK_SIZE);
		memset(have, 0xff, sizeof(have));
		while (lost < e) {
			unsigned j = rnd() % K, b = ndz_fec_block(s, j);

			if (!ndz_bit_test(have, b))
				continue;
			ndz_bit_clear(have, b);
			memset(copy + (size_t)b * NDZ_BLOCK_SIZE, 0xa5, NDZ_BLOCK_SIZE);
			lost++;
		}
		shuffle(perm, R);
		for (unsigned i = 0; i < e; i++) {
			idx[i] = perm[i];
			ndz_fec_encode(c, chunk, s, idx[i], reps[i]);
			rp[i] = reps[i];
		}
		/* one repair short: refused, nothing changes */
		assert_int_equal(ndz_fec_decode(c, copy, have, s, idx, rp, e - 1, NULL), NDZ_EINVAL);
		assert_int_equal(ndz_fec_decode(c, copy, have, s, idx, rp, e, NULL), 0);
		for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++)
			assert_int_equal(have[i], 0xff);
		assert_memory_equal(copy, chunk, NDZ_CHUNK_SIZE);
	}
	free(copy);
	free(chunk);
	ndz_fec_free(c);
}

/* Other stripes' holes are not this stripe's business; bad repair lists are refused. */
static void test_decode_args(void **state)
{
	struct ndz_fec *c = make();
	uint8_t *chunk = random_chunk(), have[NDZ_BITMAP_BYTES], rep[2][NDZ_BLOCK_SIZE];
	uint8_t idx[2] = { 4, 4 }, bad[1] = { R };
	const uint8_t *rp[2] = { rep[0], rep[1] };

	(void)state;
	memset(have, 0xff, sizeof(have));
	ndz_bit_clear(have, ndz_fec_block(2, 9));      /* stripe 2 */
	assert_int_equal(ndz_fec_decode(c, chunk, have, 1, idx, rp, 0, NULL), 0);
	assert_int_equal(ndz_fec_decode(c, chunk, have, NDZ_FEC_STRIPES, idx, rp, 1, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_fec_decode(c, chunk, have, 2, bad, rp, 1, NULL), NDZ_EINVAL);
	ndz_bit_clear(have, ndz_fec_block(2, 10));
	assert_int_equal(ndz_fec_decode(c, chunk, have, 2, idx, rp, 2, NULL), NDZ_EINVAL);  /* repeated */
	assert_false(ndz_bit_test(have, ndz_fec_block(2, 9)));
	free(chunk);
	ndz_fec_free(c);
}

/* The whole-chunk coefficients, as doc/PROTOCOL.md spells them out. */
static uint8_t wcoef(unsigned r, unsigned j)
{
	uint32_t x = (r * 1024u + j + 1u) * 2654435761u;

	x = (x ^ (x >> 16)) * 2246822507u;
	x = (x ^ (x >> 13)) * 3266489909u;
	x ^= x >> 16;
	return (x >> 24) ? (uint8_t)(x >> 24) : 1;
}

/* Whole-chunk repair r, byte by byte: sum over all 1024 blocks of wcoef(r, j) * block j. */
static void test_wencode_matches_formula(void **state)
{
	struct ndz_fec *c = make();
	uint8_t *chunk = random_chunk(), out[NDZ_BLOCK_SIZE];
	static const unsigned rs[] = { 0, 1, 77, 254 };
	unsigned zeros = 0;

	(void)state;
	for (unsigned r = 0; r < NDZ_FEC_WREPAIRS; r++)
		for (unsigned j = 0; j < NDZ_BLOCKS_PER_CHUNK; j++) {
			assert_int_equal(ndz_fec_wcoef(r, j), wcoef(r, j));
			zeros += ndz_fec_wcoef(r, j) == 0;
		}
	assert_int_equal(zeros, 0);
	for (size_t n = 0; n < sizeof(rs) / sizeof(rs[0]); n++) {
		assert_int_equal(ndz_fec_wencode(c, chunk, rs[n], out, NULL), 0);
		for (unsigned i = 0; i < NDZ_BLOCK_SIZE; i += 97) {
			uint8_t want = 0;

			for (unsigned j = 0; j < NDZ_BLOCKS_PER_CHUNK; j++)
				want ^= mul(wcoef(rs[n], j), chunk[(size_t)j * NDZ_BLOCK_SIZE + i]);
			assert_int_equal(out[i], want);
		}
	}
	assert_int_equal(ndz_fec_wencode(c, chunk, NDZ_FEC_WREPAIRS, out, NULL), NDZ_EINVAL);
	free(chunk);
	ndz_fec_free(c);
}

/*
 * Random losses anywhere in the chunk, healed by whole-chunk repairs of random
 * indexes: e repairs nearly always do it, and when they do not (dependent rows,
 * about 0.4%) one or two more do; with fewer than e it says "not yet" and changes
 * nothing. A decode without data (chunk NULL) agrees on whether it can.
 */
static void test_wdecode_random(void **state)
{
	struct ndz_fec *c = make();
	uint8_t *chunk = random_chunk(), *copy = malloc(NDZ_CHUNK_SIZE);
	static uint8_t reps[NDZ_FEC_WREPAIRS][NDZ_BLOCK_SIZE];
	static const unsigned losses[] = { 1, 2, 3, 10, 33, 128, 200 };
	unsigned extra = 0;

	(void)state;
	assert_non_null(copy);
	for (size_t n = 0; n < sizeof(losses) / sizeof(losses[0]); n++) {
		unsigned e = losses[n], lost = 0, nrep;
		uint8_t have[NDZ_BITMAP_BYTES], have2[NDZ_BITMAP_BYTES], idx[NDZ_FEC_WREPAIRS];
		uint8_t perm[NDZ_FEC_WREPAIRS];
		const uint8_t *rp[NDZ_FEC_WREPAIRS];
		int rc;

		memcpy(copy, chunk, NDZ_CHUNK_SIZE);
		memset(have, 0xff, sizeof(have));
		while (lost < e) {
			unsigned b = rnd() % NDZ_BLOCKS_PER_CHUNK;

			if (!ndz_bit_test(have, b))
				continue;
			ndz_bit_clear(have, b);
			memset(copy + (size_t)b * NDZ_BLOCK_SIZE, 0x5a, NDZ_BLOCK_SIZE);
			lost++;
		}
		shuffle(perm, NDZ_FEC_WREPAIRS);
		for (unsigned i = 0; i < NDZ_FEC_WREPAIRS; i++) {
			idx[i] = perm[i];
			rp[i] = reps[i];
		}
		for (unsigned i = 0; i < e + 3; i++)
			assert_int_equal(ndz_fec_wencode(c, chunk, idx[i], reps[i], NULL), 0);
		memcpy(have2, have, sizeof(have));
		assert_int_equal(ndz_fec_wdecode(copy, have, NULL, idx, rp, e - 1, NULL), 1);
		assert_int_equal(ndz_fec_wdecode(NULL, have2, NULL, idx, rp, e - 1, NULL), 1);
		assert_memory_equal(have, have2, sizeof(have));
		for (nrep = e; nrep <= e + 3; nrep++) {
			rc = ndz_fec_wdecode(NULL, have2, NULL, idx, rp, nrep, NULL);
			assert_int_equal(ndz_fec_wdecode(copy, have, NULL, idx, rp, nrep, NULL), rc);
			if (rc == 0)
				break;
			assert_int_equal(rc, 1);
			extra++;
		}
		assert_true(nrep <= e + 3);
		for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++)
			assert_int_equal(have[i], 0xff);
		assert_memory_equal(copy, chunk, NDZ_CHUNK_SIZE);
	}
	assert_true(extra <= 2);
	free(copy);
	free(chunk);
	ndz_fec_free(c);
}

/* Dependent repair rows are found: a 1 x 1 system whose coefficient is set twice. */
static void test_wdecode_args(void **state)
{
	struct ndz_fec *c = make();
	uint8_t *chunk = random_chunk(), have[NDZ_BITMAP_BYTES], rep[2][NDZ_BLOCK_SIZE];
	uint8_t rep_idx[2] = { 9, 9 }, bad[1] = { NDZ_FEC_WREPAIRS };
	const uint8_t *rp[2] = { rep[0], rep[1] };

	(void)state;
	memset(have, 0xff, sizeof(have));
	assert_int_equal(ndz_fec_wdecode(chunk, have, NULL, rep_idx, rp, 0, NULL), 0);   /* whole */
	ndz_bit_clear(have, 700);
	assert_int_equal(ndz_fec_wdecode(chunk, have, NULL, rep_idx, rp, 2, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_fec_wdecode(chunk, have, NULL, bad, rp, 1, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_fec_wdecode(chunk, have, NULL, rep_idx, rp, 0, NULL), 1);
	assert_false(ndz_bit_test(have, 700));
	free(chunk);
	ndz_fec_free(c);
}

/*
 * Over many random patterns of e losses, e repairs decode in nearly all cases:
 * the chance that e random rows over GF(2^8) are dependent is about 1/255.
 */
static void test_wdecode_rank(void **state)
{
	unsigned fails = 0, trials = 2000;

	(void)state;
	for (unsigned t = 0; t < trials; t++) {
		uint8_t have[NDZ_BITMAP_BYTES], idx[NDZ_FEC_WREPAIRS];
		const uint8_t *rp[NDZ_FEC_WREPAIRS] = { 0 };
		unsigned e = 1 + rnd() % 20, lost = 0, base = rnd() % (NDZ_FEC_WREPAIRS - 20);

		memset(have, 0xff, sizeof(have));
		while (lost < e) {
			unsigned b = rnd() % NDZ_BLOCKS_PER_CHUNK;

			if (ndz_bit_test(have, b)) {
				ndz_bit_clear(have, b);
				lost++;
			}
		}
		for (unsigned i = 0; i < e; i++)
			idx[i] = (uint8_t)(base + i);
		fails += ndz_fec_wdecode(NULL, have, NULL, idx, rp, e, NULL) != 0;
	}
	/* expected about 8 of 2000 */
	assert_true(fails <= 30);
}

/*
 * Range repairs: repair r over blocks [first, first + count), byte by byte, is the sum
 * of w(r, b) * block b over the range only (doc/PROTOCOL.md, "Range repairs").
 */
static void test_rencode_matches_formula(void **state)
{
	struct ndz_fec *c = make();
	uint8_t *chunk = random_chunk(), out[NDZ_BLOCK_SIZE];
	static const unsigned rg[][3] = { { 0, 1, 0 }, { 0, 1024, 5 }, { 4, 37, 254 },
					  { 1000, 24, 77 }, { 1023, 1, 3 }, { 511, 2, 128 } };

	(void)state;
	for (size_t n = 0; n < sizeof(rg) / sizeof(rg[0]); n++) {
		unsigned first = rg[n][0], count = rg[n][1], r = rg[n][2];

		assert_int_equal(ndz_fec_rencode(c, chunk, first, count, r, out, NULL), 0);
		for (unsigned i = 0; i < NDZ_BLOCK_SIZE; i += 61) {
			uint8_t want = 0;

			for (unsigned j = first; j < first + count; j++)
				want ^= mul(wcoef(r, j), chunk[(size_t)j * NDZ_BLOCK_SIZE + i]);
			assert_int_equal(out[i], want);
		}
	}
	/* the whole range is the whole-chunk repair */
	{
		uint8_t w[NDZ_BLOCK_SIZE];

		assert_int_equal(ndz_fec_rencode(c, chunk, 0, 1024, 9, out, NULL), 0);
		assert_int_equal(ndz_fec_wencode(c, chunk, 9, w, NULL), 0);
		assert_memory_equal(out, w, sizeof(w));
	}
	assert_int_equal(ndz_fec_rencode(c, chunk, 0, 0, 1, out, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_fec_rencode(c, chunk, 1024, 1, 1, out, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_fec_rencode(c, chunk, 1000, 25, 1, out, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_fec_rencode(c, chunk, 0, 8, NDZ_FEC_WREPAIRS, out, NULL),
			 NDZ_EINVAL);
	free(chunk);
	ndz_fec_free(c);
}

/*
 * Random ranges with e random losses in them, healed by e (rarely e + 1 or 2) range
 * repairs of random indexes; the blocks outside the range are garbage the solver
 * must not read (set to another pattern than the chunk's), and stay as they were.
 */
static void test_rdecode_random(void **state)
{
	struct ndz_fec *c = make();
	uint8_t *chunk = random_chunk(), *copy = malloc(NDZ_CHUNK_SIZE);
	static uint8_t reps[NDZ_FEC_WREPAIRS][NDZ_BLOCK_SIZE];
	unsigned extra = 0, trials = 60;

	(void)state;
	assert_non_null(copy);
	for (unsigned t = 0; t < trials; t++) {
		unsigned count = 1 + rnd() % (t % 3 == 0 ? 1024 : 64);
		unsigned first = rnd() % (1025 - count), e = 1 + rnd() % (count < 40 ? count : 40);
		unsigned lost = 0, nrep;
		uint8_t have[NDZ_BITMAP_BYTES], have2[NDZ_BITMAP_BYTES], idx[NDZ_FEC_WREPAIRS];
		const uint8_t *rp[NDZ_FEC_WREPAIRS];
		int rc;

		memcpy(copy, chunk, NDZ_CHUNK_SIZE);
		memset(have, 0, sizeof(have));
		for (unsigned b = 0; b < NDZ_BLOCKS_PER_CHUNK; b++)
			if (b < first || b >= first + count)
				memset(copy + (size_t)b * NDZ_BLOCK_SIZE, 0xa5, NDZ_BLOCK_SIZE);
			else
				ndz_bit_set(have, b);
		while (lost < e) {
			unsigned b = first + rnd() % count;

			if (!ndz_bit_test(have, b))
				continue;
			ndz_bit_clear(have, b);
			memset(copy + (size_t)b * NDZ_BLOCK_SIZE, 0x5a, NDZ_BLOCK_SIZE);
			lost++;
		}
		shuffle(idx, NDZ_FEC_WREPAIRS);
		for (unsigned i = 0; i < NDZ_FEC_WREPAIRS; i++)
			rp[i] = reps[i];
		for (unsigned i = 0; i < e + 3; i++)
			assert_int_equal(ndz_fec_rencode(c, chunk, first, count, idx[i], reps[i],
							 NULL), 0);
		memcpy(have2, have, sizeof(have));
		if (e > 1)
			assert_int_equal(ndz_fec_rdecode(copy, have, first, count, idx, rp, e - 1,
							 NULL), 1);
		for (nrep = e; nrep <= e + 3; nrep++) {
			rc = ndz_fec_rdecode(NULL, have2, first, count, idx, rp, nrep, NULL);
			assert_int_equal(ndz_fec_rdecode(copy, have, first, count, idx, rp, nrep,
							 NULL), rc);
			if (rc == 0)
				break;
			assert_int_equal(rc, 1);
			extra++;
		}
		assert_true(nrep <= e + 3);
		for (unsigned b = 0; b < NDZ_BLOCKS_PER_CHUNK; b++) {
			int in = b >= first && b < first + count;

			assert_int_equal(ndz_bit_test(have, b) != 0, in);
			if (in)
				assert_memory_equal(copy + (size_t)b * NDZ_BLOCK_SIZE,
						    chunk + (size_t)b * NDZ_BLOCK_SIZE, NDZ_BLOCK_SIZE);
			else
				assert_int_equal(copy[(size_t)b * NDZ_BLOCK_SIZE + 7], 0xa5);
		}
	}
	/* dependent draws: about 1 in 255 a trial (small ranges a little more) */
	assert_true(extra <= 6);
	/* bad arguments: a range past the chunk, a repeated index */
	{
		uint8_t have[NDZ_BITMAP_BYTES], idx[2] = { 3, 3 };
		const uint8_t *rp[2] = { reps[0], reps[1] };

		memset(have, 0, sizeof(have));
		assert_int_equal(ndz_fec_rdecode(copy, have, 1020, 5, idx, rp, 1, NULL),
				 NDZ_EINVAL);
		assert_int_equal(ndz_fec_rdecode(copy, have, 0, 0, idx, rp, 1, NULL), NDZ_EINVAL);
		assert_int_equal(ndz_fec_rdecode(copy, have, 0, 2, idx, rp, 2, NULL), NDZ_EINVAL);
		idx[1] = NDZ_FEC_WREPAIRS;
		assert_int_equal(ndz_fec_rdecode(copy, have, 0, 2, idx, rp, 2, NULL), NDZ_EINVAL);
	}
	free(copy);
	free(chunk);
	ndz_fec_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_matches_formula),
		cmocka_unit_test(test_decode_random),
		cmocka_unit_test(test_decode_args),
		cmocka_unit_test(test_wencode_matches_formula),
		cmocka_unit_test(test_wdecode_random),
		cmocka_unit_test(test_wdecode_args),
		cmocka_unit_test(test_wdecode_rank),
		cmocka_unit_test(test_rencode_matches_formula),
		cmocka_unit_test(test_rdecode_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
