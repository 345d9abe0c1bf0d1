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

#include "err.h"
#include "fec.h"
#include "format.h"
#include "proto.h"

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

	assert_int_equal(ndz_fec_create(&c), 0);
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
		for (unsigned r = 0; r < R; r++)
			perm[r] = (uint8_t)r;
		for (unsigned r = R; r > 1; r--) {
			unsigned j = rnd() % r;
			uint8_t t = perm[r - 1];

			perm[r - 1] = perm[j];
			perm[j] = t;
		}
		for (unsigned i = 0; i < e; i++) {
			idx[i] = perm[i];
			ndz_fec_encode(c, chunk, s, idx[i], reps[i]);
			rp[i] = reps[i];
		}
		/* one repair short: refused, nothing changes */
		assert_int_equal(ndz_fec_decode(c, copy, have, s, idx, rp, e - 1), NDZ_EINVAL);
		assert_int_equal(ndz_fec_decode(c, copy, have, s, idx, rp, e), 0);
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
	assert_int_equal(ndz_fec_decode(c, chunk, have, 1, idx, rp, 0), 0);
	assert_int_equal(ndz_fec_decode(c, chunk, have, NDZ_FEC_STRIPES, idx, rp, 1), NDZ_EINVAL);
	assert_int_equal(ndz_fec_decode(c, chunk, have, 2, bad, rp, 1), NDZ_EINVAL);
	ndz_bit_clear(have, ndz_fec_block(2, 10));
	assert_int_equal(ndz_fec_decode(c, chunk, have, 2, idx, rp, 2), NDZ_EINVAL);  /* repeated */
	assert_false(ndz_bit_test(have, ndz_fec_block(2, 9)));
	free(chunk);
	ndz_fec_free(c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_encode_matches_formula),
		cmocka_unit_test(test_decode_random),
		cmocka_unit_test(test_decode_args),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
