/* Unit tests for lib/ranges.c: each operation on edge cases, then against a bitmap model. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/ranges.h"

/* expect(r, n, start0, count0, start1, count1, ...) */
static void expect_(const struct ndz_ranges *r, int line, size_t n, ...)
{
	va_list ap;
	size_t i;

	if (r->n != n)
		fail_msg("line %d: %zu ranges, want %zu", line, r->n, n);
	va_start(ap, n);
	for (i = 0; i < n; i++) {
		uint64_t s = va_arg(ap, uint64_t), c = va_arg(ap, uint64_t);

		if (r->v[i].start != s || r->v[i].count != c) {
			va_end(ap);
			fail_msg("line %d: range %zu is [%llu +%llu], want [%llu +%llu]", line, i,
				 (unsigned long long)r->v[i].start,
				 (unsigned long long)r->v[i].count, (unsigned long long)s,
				 (unsigned long long)c);
		}
	}
	va_end(ap);
}
#define U(x) ((uint64_t)(x))
#define expect(r, n, ...) expect_(r, __LINE__, n, ##__VA_ARGS__)

static void test_init_release(void **state)
{
	struct ndz_ranges r = NDZ_RANGES_INIT;

	(void)state;
	assert_int_equal(r.n, 0);
	assert_int_equal(ndz_ranges_total(&r), 0);
	ndz_ranges_release(&r);         /* releasing an empty list is fine */
	assert_int_equal(ndz_ranges_add(&r, 1, 2, NULL), 0);
	ndz_ranges_clear(&r);
	assert_int_equal(r.n, 0);
	assert_true(r.alloc > 0);       /* clear keeps the memory */
	assert_int_equal(ndz_ranges_add(&r, 5, 1, NULL), 0);
	expect(&r, 1, U(5), U(1));
	ndz_ranges_release(&r);
	assert_null(r.v);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.alloc, 0);
	ndz_ranges_init(&r);
	assert_int_equal(ndz_ranges_add(&r, 7, 3, NULL), 0);
	expect(&r, 1, U(7), U(3));
	ndz_ranges_release(&r);
}

static void test_add_merges_in_order(void **state)
{
	struct ndz_ranges r = NDZ_RANGES_INIT;

	(void)state;
	assert_int_equal(ndz_ranges_add(&r, 10, 0, NULL), 0);     /* empty: ignored */
	assert_int_equal(r.n, 0);
	assert_int_equal(ndz_ranges_add(&r, 10, 5, NULL), 0);
	assert_int_equal(ndz_ranges_add(&r, 15, 5, NULL), 0);     /* touching */
	expect(&r, 1, U(10), U(10));
	assert_int_equal(ndz_ranges_add(&r, 12, 3, NULL), 0);     /* inside */
	expect(&r, 1, U(10), U(10));
	assert_int_equal(ndz_ranges_add(&r, 18, 10, NULL), 0);    /* overlapping the end */
	expect(&r, 1, U(10), U(18));
	assert_int_equal(ndz_ranges_add(&r, 10, 18, NULL), 0);    /* identical */
	expect(&r, 1, U(10), U(18));
	assert_int_equal(ndz_ranges_add(&r, 29, 1, NULL), 0);     /* one-sector gap */
	expect(&r, 2, U(10), U(18), U(29), U(1));
	assert_int_equal(ndz_ranges_add(&r, 30, 0, NULL), 0);
	expect(&r, 2, U(10), U(18), U(29), U(1));
	assert_int_equal(ndz_ranges_total(&r), 19);
	ndz_ranges_release(&r);
}

static void test_add_many_grows(void **state)
{
	struct ndz_ranges r = NDZ_RANGES_INIT;
	uint64_t i;

	(void)state;
	for (i = 0; i < 10000; i++)
		assert_int_equal(ndz_ranges_add(&r, 3 * i, 2, NULL), 0);
	assert_int_equal(r.n, 10000);
	assert_int_equal(ndz_ranges_total(&r), 20000);
	for (i = 0; i < 10000; i++) {
		assert_int_equal(r.v[i].start, 3 * i);
		assert_int_equal(r.v[i].count, 2);
	}
	ndz_ranges_release(&r);
}

static void test_add_overflow(void **state)
{
	struct ndz_ranges r = NDZ_RANGES_INIT;
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_ranges_add(&r, 1, UINT64_MAX, &e), NDZ_ERANGE);
	assert_int_equal(e.code, NDZ_ERANGE);
	assert_string_equal(ndz_error_msg(&e), "18446744073709551615 sectors from sector 1: "
			    "past the end of the sector space");
	assert_int_equal(ndz_ranges_add(&r, UINT64_MAX, 1, NULL), NDZ_ERANGE);
	assert_int_equal(ndz_ranges_add(&r, UINT64_MAX / 2 + 1, UINT64_MAX / 2 + 1, NULL), NDZ_ERANGE);
	assert_int_equal(r.n, 0);
	/* up to the very last representable end is fine */
	ndz_error_clear(&e);
	assert_int_equal(ndz_ranges_add(&r, 0, UINT64_MAX, &e), 0);
	assert_int_equal(e.code, 0);
	expect(&r, 1, U(0), UINT64_MAX);
	ndz_ranges_clear(&r);
	assert_int_equal(ndz_ranges_add(&r, UINT64_MAX - 1, 1, NULL), 0);
	assert_int_equal(ndz_ranges_add(&r, UINT64_MAX - 10, 2, NULL), 0);
	ndz_ranges_normalize(&r);
	expect(&r, 2, UINT64_MAX - 10, U(2), UINT64_MAX - 1, U(1));
	ndz_ranges_release(&r);
}

static void test_normalize(void **state)
{
	struct ndz_ranges r = NDZ_RANGES_INIT;

	(void)state;
	ndz_ranges_normalize(&r);
	assert_int_equal(r.n, 0);
	assert_int_equal(ndz_ranges_add(&r, 100, 10, NULL), 0);
	ndz_ranges_normalize(&r);
	expect(&r, 1, U(100), U(10));
	assert_int_equal(ndz_ranges_add(&r, 50, 10, NULL), 0);    /* before: appended */
	assert_int_equal(ndz_ranges_add(&r, 0, 5, NULL), 0);
	assert_int_equal(ndz_ranges_add(&r, 55, 50, NULL), 0);    /* bridges 50.. and 100.. */
	assert_int_equal(ndz_ranges_add(&r, 5, 1, NULL), 0);      /* touches 0..5 */
	assert_int_equal(ndz_ranges_add(&r, 200, 1, NULL), 0);
	assert_int_equal(ndz_ranges_add(&r, 150, 10, NULL), 0);
	assert_int_equal(ndz_ranges_add(&r, 152, 2, NULL), 0);    /* inside 150..160 */
	ndz_ranges_normalize(&r);
	expect(&r, 4, U(0), U(6), U(50), U(60), U(150), U(10), U(200), U(1));
	ndz_ranges_normalize(&r);                           /* idempotent */
	expect(&r, 4, U(0), U(6), U(50), U(60), U(150), U(10), U(200), U(1));
	ndz_ranges_release(&r);
}

/* An operation's argument, and the ranges it leaves: n (start, count) pairs. */
struct op_case {
	uint64_t arg;
	size_t n;
	uint64_t want[8];
};

/*
 * Each case on r made afresh from the n (start, count) pairs of from: op(r, arg),
 * then r is the case's ranges. r keeps the last case's result.
 */
static void run_cases(struct ndz_ranges *r, const uint64_t *from, size_t n,
		      void (*op)(struct ndz_ranges *, uint64_t), const struct op_case *c,
		      size_t ncases)
{
	for (size_t k = 0; k < ncases; k++) {
		ndz_ranges_clear(r);
		for (size_t i = 0; i < n; i++)
			assert_int_equal(ndz_ranges_add(r, from[2 * i], from[2 * i + 1], NULL), 0);
		op(r, c[k].arg);
		if (r->n != c[k].n)
			fail_msg("case %zu: %zu ranges, want %zu", k, r->n, c[k].n);
		for (size_t i = 0; i < c[k].n; i++)
			if (r->v[i].start != c[k].want[2 * i] || r->v[i].count != c[k].want[2 * i + 1])
				fail_msg("case %zu: range %zu is [%llu +%llu], want [%llu +%llu]", k, i,
					 (unsigned long long)r->v[i].start,
					 (unsigned long long)r->v[i].count,
					 (unsigned long long)c[k].want[2 * i],
					 (unsigned long long)c[k].want[2 * i + 1]);
	}
}

static void test_clip(void **state)
{
	static const uint64_t from[] = { 10, 10, 30, 10 };
	static const struct op_case cases[] = {
		{ UINT64_MAX, 2, { 10, 10, 30, 10 } },
		{ 40, 2, { 10, 10, 30, 10 } },           /* at the end: nothing lost */
		{ 39, 2, { 10, 10, 30, 9 } },
		{ 31, 2, { 10, 10, 30, 1 } },
		{ 30, 1, { 10, 10 } },                   /* at a start: range gone */
		{ 25, 1, { 10, 10 } },                   /* in a gap */
		{ 15, 1, { 10, 5 } },
		{ 10, 0, { 0 } },
		{ 0, 0, { 0 } },
	};
	struct ndz_ranges r = NDZ_RANGES_INIT;

	(void)state;
	ndz_ranges_clip(&r, 10);
	assert_int_equal(r.n, 0);
	run_cases(&r, from, 2, ndz_ranges_clip, cases, sizeof(cases) / sizeof(cases[0]));
	ndz_ranges_release(&r);
}

static void test_fill_gaps(void **state)
{
	static const uint64_t from[] = { 0, 10, 12, 3, 20, 5, 100, 1 };  /* gaps: 2, 5, 75 */
	static const struct op_case cases[] = {
		{ 0, 4, { 0, 10, 12, 3, 20, 5, 100, 1 } },
		{ 2, 4, { 0, 10, 12, 3, 20, 5, 100, 1 } },       /* shorter than: 2 stays */
		{ 3, 3, { 0, 15, 20, 5, 100, 1 } },
		{ 6, 2, { 0, 25, 100, 1 } },
		{ 76, 1, { 0, 101 } },
		{ UINT64_MAX, 1, { 0, 101 } },
	};
	struct ndz_ranges r = NDZ_RANGES_INIT;

	(void)state;
	ndz_ranges_fill_gaps(&r, 100);
	assert_int_equal(r.n, 0);
	run_cases(&r, from, 4, ndz_ranges_fill_gaps, cases, sizeof(cases) / sizeof(cases[0]));
	assert_int_equal(ndz_ranges_total(&r), 101);
	/* one range: unchanged */
	ndz_ranges_clear(&r);
	assert_int_equal(ndz_ranges_add(&r, 5, 5, NULL), 0);
	ndz_ranges_fill_gaps(&r, 1000);
	expect(&r, 1, U(5), U(5));
	/* at the top of the sector space */
	ndz_ranges_clear(&r);
	assert_int_equal(ndz_ranges_add(&r, UINT64_MAX - 10, 2, NULL), 0);
	assert_int_equal(ndz_ranges_add(&r, UINT64_MAX - 2, 2, NULL), 0);
	ndz_ranges_fill_gaps(&r, 10);
	expect(&r, 1, UINT64_MAX - 10, U(10));
	ndz_ranges_release(&r);
}

static void test_invert(void **state)
{
	struct ndz_ranges r = NDZ_RANGES_INIT, out = NDZ_RANGES_INIT;

	(void)state;
	assert_int_equal(ndz_ranges_invert(&r, 100, &out, NULL), 0);
	expect(&out, 1, U(0), U(100));
	assert_int_equal(ndz_ranges_invert(&r, 0, &out, NULL), 0);
	assert_int_equal(out.n, 0);
	assert_int_equal(ndz_ranges_add(&r, 0, 10, NULL), 0);
	assert_int_equal(ndz_ranges_add(&r, 20, 10, NULL), 0);
	assert_int_equal(ndz_ranges_add(&r, 50, 50, NULL), 0);
	assert_int_equal(ndz_ranges_invert(&r, 100, &out, NULL), 0);
	expect(&out, 2, U(10), U(10), U(30), U(20));
	assert_int_equal(ndz_ranges_invert(&r, 120, &out, NULL), 0);
	expect(&out, 3, U(10), U(10), U(30), U(20), U(100), U(20));
	assert_int_equal(ndz_ranges_invert(&r, 60, &out, NULL), 0);   /* limit inside a range */
	expect(&out, 2, U(10), U(10), U(30), U(20));
	assert_int_equal(ndz_ranges_invert(&r, 40, &out, NULL), 0);   /* limit inside a gap */
	expect(&out, 2, U(10), U(10), U(30), U(10));
	assert_int_equal(ndz_ranges_invert(&r, 5, &out, NULL), 0);
	assert_int_equal(out.n, 0);
	assert_int_equal(ndz_ranges_invert(&r, 0, &out, NULL), 0);
	assert_int_equal(out.n, 0);
	/* out is overwritten, not appended to */
	assert_int_equal(ndz_ranges_invert(&r, 15, &out, NULL), 0);
	expect(&out, 1, U(10), U(5));
	/* not starting at 0 */
	ndz_ranges_clear(&r);
	assert_int_equal(ndz_ranges_add(&r, 7, 3, NULL), 0);
	assert_int_equal(ndz_ranges_invert(&r, 10, &out, NULL), 0);
	expect(&out, 1, U(0), U(7));
	assert_int_equal(ndz_ranges_invert(&r, UINT64_MAX, &out, NULL), 0);
	expect(&out, 2, U(0), U(7), U(10), UINT64_MAX - 10);
	ndz_ranges_release(&r);
	ndz_ranges_release(&out);
}

static void test_union(void **state)
{
	struct ndz_ranges a = NDZ_RANGES_INIT, b = NDZ_RANGES_INIT;

	(void)state;
	assert_int_equal(ndz_ranges_union(&a, &b, NULL), 0);
	assert_int_equal(a.n, 0);
	assert_int_equal(ndz_ranges_add(&b, 10, 10, NULL), 0);
	assert_int_equal(ndz_ranges_union(&a, &b, NULL), 0);      /* into an empty list */
	expect(&a, 1, U(10), U(10));
	ndz_ranges_clear(&b);
	assert_int_equal(ndz_ranges_add(&b, 0, 5, NULL), 0);
	assert_int_equal(ndz_ranges_add(&b, 15, 10, NULL), 0);
	assert_int_equal(ndz_ranges_add(&b, 40, 1, NULL), 0);
	assert_int_equal(ndz_ranges_union(&a, &b, NULL), 0);
	expect(&a, 3, U(0), U(5), U(10), U(15), U(40), U(1));
	expect(&b, 3, U(0), U(5), U(15), U(10), U(40), U(1));   /* src untouched */
	ndz_ranges_clear(&b);
	assert_int_equal(ndz_ranges_add(&b, 5, 5, NULL), 0);          /* fills the gap exactly */
	assert_int_equal(ndz_ranges_add(&b, 25, 15, NULL), 0);
	assert_int_equal(ndz_ranges_union(&a, &b, NULL), 0);
	expect(&a, 1, U(0), U(41));
	/* a list united with itself stays the same */
	ndz_ranges_clear(&a);
	assert_int_equal(ndz_ranges_add(&a, 1, 1, NULL), 0);
	assert_int_equal(ndz_ranges_add(&a, 3, 1, NULL), 0);
	assert_int_equal(ndz_ranges_union(&a, &a, NULL), 0);
	expect(&a, 2, U(1), U(1), U(3), U(1));
	ndz_ranges_release(&a);
	ndz_ranges_release(&b);
}

static void test_subtract(void **state)
{
	struct ndz_ranges r = NDZ_RANGES_INIT;

	(void)state;
	assert_int_equal(ndz_ranges_subtract(&r, 0, 100, NULL), 0);
	assert_int_equal(r.n, 0);
#define RESET()                                           \
	do {                                              \
		ndz_ranges_clear(&r);                     \
		assert_int_equal(ndz_ranges_add(&r, 10, 10, NULL), 0); \
		assert_int_equal(ndz_ranges_add(&r, 30, 10, NULL), 0); \
		assert_int_equal(ndz_ranges_add(&r, 50, 10, NULL), 0); \
	} while (0)
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 15, 0, NULL), 0);
	expect(&r, 3, U(10), U(10), U(30), U(10), U(50), U(10));
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 20, 10, NULL), 0);  /* exactly a gap */
	expect(&r, 3, U(10), U(10), U(30), U(10), U(50), U(10));
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 33, 4, NULL), 0);   /* splits the middle */
	expect(&r, 4, U(10), U(10), U(30), U(3), U(37), U(3), U(50), U(10));
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 55, 4, NULL), 0);   /* splits the last */
	expect(&r, 4, U(10), U(10), U(30), U(10), U(50), U(5), U(59), U(1));
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 30, 10, NULL), 0);  /* exactly one range */
	expect(&r, 2, U(10), U(10), U(50), U(10));
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 10, 10, NULL), 0);  /* the first */
	expect(&r, 2, U(30), U(10), U(50), U(10));
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 15, 20, NULL), 0);  /* tail of one, head of next */
	expect(&r, 3, U(10), U(5), U(35), U(5), U(50), U(10));
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 5, 50, NULL), 0);   /* two whole, head of third */
	expect(&r, 1, U(55), U(5));
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 0, 1000, NULL), 0); /* everything */
	assert_int_equal(r.n, 0);
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 10, 50, NULL), 0);  /* exactly everything */
	assert_int_equal(r.n, 0);
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 60, 100, NULL), 0); /* past the end */
	expect(&r, 3, U(10), U(10), U(30), U(10), U(50), U(10));
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 0, 10, NULL), 0);   /* before the start */
	expect(&r, 3, U(10), U(10), U(30), U(10), U(50), U(10));
	/* a count reaching past the end of the sector space removes all from start on */
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 35, UINT64_MAX, NULL), 0);
	expect(&r, 2, U(10), U(10), U(30), U(5));
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, 0, UINT64_MAX, NULL), 0);
	assert_int_equal(r.n, 0);
	RESET();
	assert_int_equal(ndz_ranges_subtract(&r, UINT64_MAX, UINT64_MAX, NULL), 0);
	expect(&r, 3, U(10), U(10), U(30), U(10), U(50), U(10));
#undef RESET
	ndz_ranges_release(&r);
}

/* ---- the same operations against a bitmap over a small sector space ---- */

#define SPACE 256u

static uint32_t rnd_state = 0x9e3779b9u;

static uint32_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 17;
	rnd_state ^= rnd_state << 5;
	return rnd_state;
}

/* r must be exactly the runs of bm: sorted, non-empty, not touching */
static void assert_matches(const struct ndz_ranges *r, const uint8_t *bm, const char *op)
{
	struct ndz_ranges want = NDZ_RANGES_INIT;
	size_t i;
	uint64_t s;

	for (s = 0; s < SPACE; s++)
		if (bm[s])
			assert_int_equal(ndz_ranges_add(&want, s, 1, NULL), 0);
	if (want.n != r->n)
		fail_msg("%s: %zu ranges, want %zu", op, r->n, want.n);
	for (i = 0; i < r->n; i++)
		if (want.v[i].start != r->v[i].start || want.v[i].count != r->v[i].count)
			fail_msg("%s: range %zu differs", op, i);
	ndz_ranges_release(&want);
}

static void random_list(struct ndz_ranges *r, uint8_t *bm)
{
	unsigned k, n = rnd() % 12;

	ndz_ranges_clear(r);
	memset(bm, 0, SPACE);
	for (k = 0; k < n; k++) {
		uint64_t s = rnd() % SPACE, c = 1 + rnd() % 40, x;

		if (s + c > SPACE)
			c = SPACE - s;
		assert_int_equal(ndz_ranges_add(r, s, c, NULL), 0);
		for (x = s; x < s + c; x++)
			bm[x] = 1;
	}
	ndz_ranges_normalize(r);
	assert_matches(r, bm, "add+normalize");
}

static void test_model(void **state)
{
	struct ndz_ranges a = NDZ_RANGES_INIT, b = NDZ_RANGES_INIT, out = NDZ_RANGES_INIT;
	uint8_t bma[SPACE], bmb[SPACE], want[SPACE];
	int iter;

	(void)state;
	for (iter = 0; iter < 3000; iter++) {
		uint64_t s, c, lim, x, gap, run;

		random_list(&a, bma);
		random_list(&b, bmb);
		switch (iter % 5) {
		case 0:
			assert_int_equal(ndz_ranges_union(&a, &b, NULL), 0);
			for (x = 0; x < SPACE; x++)
				want[x] = bma[x] | bmb[x];
			assert_matches(&a, want, "union");
			assert_true(ndz_ranges_total(&a) <= SPACE);
			break;
		case 1:
			s = rnd() % SPACE;
			c = rnd() % SPACE;
			assert_int_equal(ndz_ranges_subtract(&a, s, c, NULL), 0);
			memcpy(want, bma, SPACE);
			for (x = s; x < s + c && x < SPACE; x++)
				want[x] = 0;
			assert_matches(&a, want, "subtract");
			break;
		case 2:
			lim = rnd() % (SPACE + 1);
			assert_int_equal(ndz_ranges_invert(&a, lim, &out, NULL), 0);
			for (x = 0; x < SPACE; x++)
				want[x] = x < lim && !bma[x];
			assert_matches(&out, want, "invert");
			break;
		case 3:
			lim = rnd() % (SPACE + 1);
			ndz_ranges_clip(&a, lim);
			for (x = 0; x < SPACE; x++)
				want[x] = x < lim && bma[x];
			assert_matches(&a, want, "clip");
			break;
		case 4:
			gap = rnd() % 20;
			ndz_ranges_fill_gaps(&a, gap);
			memcpy(want, bma, SPACE);
			/* fill every interior run of zeros shorter than gap */
			for (x = 0; x < SPACE; x += run ? run : 1) {
				uint64_t y;

				run = 0;
				if (bma[x])
					continue;
				for (y = x; y < SPACE && !bma[y]; y++)
					;
				run = y - x;
				if (x > 0 && y < SPACE && run < gap)
					memset(want + x, 1, run);
			}
			assert_matches(&a, want, "fill_gaps");
			break;
		}
	}
	ndz_ranges_release(&a);
	ndz_ranges_release(&b);
	ndz_ranges_release(&out);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_release),
		cmocka_unit_test(test_add_merges_in_order),
		cmocka_unit_test(test_add_many_grows),
		cmocka_unit_test(test_add_overflow),
		cmocka_unit_test(test_normalize),
		cmocka_unit_test(test_clip),
		cmocka_unit_test(test_fill_gaps),
		cmocka_unit_test(test_invert),
		cmocka_unit_test(test_union),
		cmocka_unit_test(test_subtract),
		cmocka_unit_test(test_model),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
