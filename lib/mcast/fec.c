/* Repair blocks over a chunk's stripes with ISA-L's GF(2^8) arithmetic (see fec.h). */
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "core/bits.h"
#include "core/err.h"
#include "fec.h"

#define K NDZ_FEC_K
#define R NDZ_FEC_REPAIRS

struct ndz_fec {
	uint8_t coef[R][K];            /* repair r = sum over j of coef[r][j] * data j */
	uint8_t tbls[R][32 * K];       /* ISA-L's expanded tables, one row per repair */
	uint8_t *wtbls;                /* whole-chunk repairs' tables, made as they are used */
	uint8_t wready[(NDZ_FEC_WREPAIRS + 7) / 8]; /* which of them are made */
};

/* Row K + r, column j of the stripes' Cauchy matrix: 1 / ((K + r) xor j) in GF(2^8). */
static uint8_t cauchy(unsigned r, unsigned j)
{
	return gf_inv((unsigned char)((K + r) ^ j));
}

int ndz_fec_create(struct ndz_fec **out, struct ndz_error *err)
{
	struct ndz_fec *c = calloc(1, sizeof(*c));

	*out = NULL;
	if (!c)
		return ndz_error_set(err, NDZ_ENOMEM, 0, "repair code tables: out of memory");
	/* Cauchy rows K..K+R-1: coef = 1 / (row xor column) in GF(2^8) mod 0x11d */
	for (unsigned r = 0; r < R; r++)
		for (unsigned j = 0; j < K; j++)
			c->coef[r][j] = cauchy(r, j);
	for (unsigned r = 0; r < R; r++)
		ec_init_tables(K, 1, c->coef[r], c->tbls[r]);
	*out = c;
	return 0;
}

void ndz_fec_free(struct ndz_fec *c)
{
	if (c)
		free(c->wtbls);
	free(c);
}

static void stripe_ptrs(uint8_t *chunk, unsigned stripe, uint8_t **p)
{
	for (unsigned j = 0; j < K; j++)
		p[j] = chunk + (size_t)ndz_fec_block(stripe, j) * NDZ_BLOCK_SIZE;
}

void ndz_fec_encode(const struct ndz_fec *c, const uint8_t *chunk, unsigned stripe,
		    unsigned index, uint8_t *out)
{
	uint8_t *src[K];

	stripe_ptrs((uint8_t *)chunk, stripe, src);
	gf_vect_dot_prod(NDZ_BLOCK_SIZE, K, (unsigned char *)c->tbls[index], src, out);
}

/*
 * With M the missing data blocks and the first e repairs r_i:
 *   rep_i = sum_{j in M} coef[r_i][j] d_j + sum_{j not in M} coef[r_i][j] d_j,
 * so with B the inverse of A = (coef[r_i][m_l]), each missing block is
 *   d_{m_l} = sum_i B[l][i] rep_i + sum_{j not in M} (sum_i B[l][i] coef[r_i][j]) d_j:
 * one e x K product over the K blocks at hand.
 */
static int decode(const struct ndz_fec *c, uint8_t *chunk, uint8_t *have, unsigned stripe,
		  const uint8_t *idx, const uint8_t *const *rep, unsigned nrep)
{
	uint8_t *data[K], *src[K], *dst[K];
	unsigned miss[K], e = 0, nsrc = 0;
	uint8_t used[R];
	uint8_t *a = NULL, *b = NULL, *d = NULL, *tbls = NULL;
	int rc = NDZ_ENOMEM;

	if (stripe >= NDZ_FEC_STRIPES)
		return NDZ_EINVAL;
	for (unsigned j = 0; j < K; j++)
		if (!ndz_bit_test(have, ndz_fec_block(stripe, j)))
			miss[e++] = j;
	if (e == 0)
		return 0;
	if (nrep < e)
		return NDZ_EINVAL;
	memset(used, 0, sizeof(used));
	for (unsigned i = 0; i < e; i++) {
		if (idx[i] >= R || used[idx[i]])
			return NDZ_EINVAL;
		used[idx[i]] = 1;
	}
	a = malloc((size_t)e * e);
	b = malloc((size_t)e * e);
	d = malloc((size_t)e * K);
	tbls = malloc((size_t)32 * K * e);
	if (!a || !b || !d || !tbls)
		goto out;
	for (unsigned i = 0; i < e; i++)
		for (unsigned l = 0; l < e; l++)
			a[i * e + l] = c->coef[idx[i]][miss[l]];
	if (gf_invert_matrix(a, b, (int)e) != 0) {
		rc = NDZ_EINVAL;       /* cannot happen: every square Cauchy submatrix inverts */
		goto out;
	}
	stripe_ptrs(chunk, stripe, data);
	/* sources: the data blocks at hand in order, then the e repairs */
	for (unsigned j = 0, m = 0; j < K; j++) {
		if (m < e && miss[m] == j) {
			dst[m++] = data[j];
			continue;
		}
		for (unsigned l = 0; l < e; l++) {
			uint8_t x = 0;

			for (unsigned i = 0; i < e; i++)
				x ^= gf_mul(b[l * e + i], c->coef[idx[i]][j]);
			d[l * K + nsrc] = x;
		}
		src[nsrc++] = data[j];
	}
	for (unsigned i = 0; i < e; i++) {
		for (unsigned l = 0; l < e; l++)
			d[l * K + nsrc] = b[l * e + i];
		src[nsrc++] = (uint8_t *)rep[i];
	}
	ec_init_tables(K, (int)e, d, tbls);
	ec_encode_data(NDZ_BLOCK_SIZE, K, (int)e, tbls, src, dst);
	for (unsigned l = 0; l < e; l++)
		ndz_bit_set(have, ndz_fec_block(stripe, miss[l]));
	rc = 0;
out:
	free(a);
	free(b);
	free(d);
	free(tbls);
	return rc;
}

/*
 * Whole-chunk repairs. Coefficient of block j in repair r: the top byte of a
 * 32-bit mix of r * 1024 + j + 1 (a multiplicative hash and two xor-shift
 * multiply rounds), 1 where that byte is 0.
 */
uint8_t ndz_fec_wcoef(unsigned r, unsigned j)
{
	uint32_t x = (uint32_t)(r * NDZ_BLOCKS_PER_CHUNK + j + 1u) * 0x9e3779b1u;

	x ^= x >> 16;
	x *= 0x85ebca6bu;
	x ^= x >> 13;
	x *= 0xc2b2ae35u;
	x ^= x >> 16;
	return (uint8_t)(x >> 24) ? (uint8_t)(x >> 24) : 1u;
}

#define N NDZ_BLOCKS_PER_CHUNK
#define W NDZ_FEC_WREPAIRS

/* The coefficient of block j in repair r of set (a stripe's are 0 off the stripe). */
static uint8_t coef_of(unsigned set, unsigned r, unsigned j)
{
	if (set == NDZ_FEC_WHOLE)
		return ndz_fec_wcoef(r, j);
	if (ndz_fec_stripe(j) != set)
		return 0;
	return cauchy(r, j / NDZ_FEC_STRIPES);
}

int ndz_fec_decode(const struct ndz_fec *c, uint8_t *chunk, uint8_t *have, unsigned stripe,
		   const uint8_t *idx, const uint8_t *const *rep, unsigned nrep,
		   struct ndz_error *err)
{
	int r = decode(c, chunk, have, stripe, idx, rep, nrep);

	if (r < 0)
		ndz_error_set(err, r, 0, "stripe %u of a chunk, %u repairs: %s", stripe, nrep,
			      r == NDZ_EINVAL ? "too few, or a bad or repeated index" :
			      ndz_strerror(r));
	return r;
}

int ndz_fec_wprepare(struct ndz_fec *c, struct ndz_error *err)
{
	if (!c->wtbls && !(c->wtbls = calloc(W, (size_t)32 * N)))
		return ndz_error_set(err, NDZ_ENOMEM, 0, "whole-chunk repair tables: out of memory");
	return 0;
}

/* The expanded table of whole-chunk repair index (< W), made on its first use. */
static int wrow(struct ndz_fec *c, unsigned index, struct ndz_error *err)
{
	if (ndz_fec_wprepare(c, err) < 0)
		return NDZ_ENOMEM;
	if (!ndz_bit_test(c->wready, index)) {
		uint8_t row[N];

		for (unsigned j = 0; j < N; j++)
			row[j] = ndz_fec_wcoef(index, j);
		ec_init_tables(N, 1, row, c->wtbls + (size_t)index * 32 * N);
		ndz_bit_set(c->wready, index);
	}
	return 0;
}

int ndz_fec_wencode(struct ndz_fec *c, const uint8_t *chunk, unsigned index, uint8_t *out,
		    struct ndz_error *err)
{
	uint8_t *src[N];

	if (index >= W)
		return ndz_error_set(err, NDZ_EINVAL, 0, "whole-chunk repair %u: index out of range",
				     index);
	if (wrow(c, index, err) < 0)
		return NDZ_ENOMEM;
	for (unsigned j = 0; j < N; j++)
		src[j] = (uint8_t *)chunk + (size_t)j * NDZ_BLOCK_SIZE;
	gf_vect_dot_prod(NDZ_BLOCK_SIZE, N, c->wtbls + (size_t)index * 32 * N, src, out);
	return 0;
}

/*
 * Pick e of the nrep repairs whose coefficients on the e missing blocks are
 * independent (Gaussian elimination over GF(2^8) on copies of their rows); their
 * positions go to pick[]. Returns 1 when there are e, else 0.
 */
static int pick_rows(const uint8_t *set, const uint8_t *idx, unsigned nrep, const unsigned *miss,
		     unsigned e, unsigned *pick, uint8_t *basis, unsigned *lead)
{
	unsigned got = 0;
	uint8_t *row = basis + (size_t)e * e;   /* scratch after the e basis rows */

	for (unsigned i = 0; i < nrep && got < e; i++) {
		unsigned p = e;

		for (unsigned l = 0; l < e; l++)
			row[l] = coef_of(set ? set[i] : NDZ_FEC_WHOLE, idx[i], miss[l]);
		/* reduce by the basis rows, each normalized to 1 at its lead column */
		for (unsigned b = 0; b < got; b++) {
			uint8_t f = row[lead[b]];

			if (!f)
				continue;
			for (unsigned l = 0; l < e; l++)
				row[l] ^= gf_mul(f, basis[(size_t)b * e + l]);
		}
		for (unsigned l = 0; l < e; l++)
			if (row[l]) {
				p = l;
				break;
			}
		if (p == e)
			continue;      /* dependent on those picked: of no use */
		{
			uint8_t inv = gf_inv(row[p]);

			for (unsigned l = 0; l < e; l++)
				basis[(size_t)got * e + l] = gf_mul(inv, row[l]);
		}
		lead[got] = p;
		pick[got++] = i;
	}
	return got == e;
}

/*
 * Solve for the missing blocks among columns [lo, hi) of the chunk (the whole chunk,
 * or a range: then set is NULL and every repair is over that range, its coefficients
 * the whole-chunk ones restricted to those columns).
 */
static int wdecode(uint8_t *chunk, uint8_t *have, const uint8_t *set, const uint8_t *idx,
		   const uint8_t *const *rep, unsigned nrep, unsigned lo, unsigned hi)
{
	unsigned miss[N], e = 0, nsrc = 0, nc = hi - lo;
	uint8_t used[NDZ_FEC_SETS][(W + 7) / 8];
	unsigned *pick = NULL, *lead = NULL;
	uint8_t *basis = NULL, *a = NULL, *b = NULL, *d = NULL, *tbls = NULL;
	uint8_t **src = NULL, **dst = NULL, **cp = NULL, **dp = NULL, *crow = NULL, *full = NULL;
	int rc = NDZ_ENOMEM;

	memset(used, 0, sizeof(used));
	for (unsigned i = 0; i < nrep; i++) {
		unsigned st = set ? set[i] : NDZ_FEC_WHOLE;

		if (st >= NDZ_FEC_SETS || idx[i] >= ndz_fec_repairs(st) ||
		    ndz_bit_test(used[st], idx[i]))
			return NDZ_EINVAL;
		ndz_bit_set(used[st], idx[i]);
	}
	for (unsigned j = lo; j < hi; j++)
		if (!ndz_bit_test(have, j))
			miss[e++] = j;
	if (e == 0)
		return 0;
	if (nrep < e)
		return 1;
	pick = malloc(sizeof(*pick) * e);
	lead = malloc(sizeof(*lead) * e);
	basis = malloc((size_t)(e + 1) * e);
	if (!pick || !lead || !basis)
		goto out;
	if (!pick_rows(set, idx, nrep, miss, e, pick, basis, lead)) {
		rc = 1;
		goto out;
	}
	if (chunk) {
		/*
		 * As for a stripe: with A = (coef[pick_i][miss_l]) and B its inverse,
		 * d_miss_l = sum_i B[l][i] rep_i + sum_{j at hand} (sum_i B[l][i] coef[pick_i][j]) d_j:
		 * one e x 1024 product over the blocks at hand and the e repairs.
		 */
		a = malloc((size_t)e * e);
		b = malloc((size_t)e * e);
		d = malloc((size_t)e * nc);
		tbls = malloc((size_t)32 * nc * e);
		src = malloc(sizeof(*src) * nc);
		dst = malloc(sizeof(*dst) * e);
		cp = malloc(sizeof(*cp) * e);
		dp = malloc(sizeof(*dp) * e);
		crow = malloc((size_t)e * nc);
		full = malloc((size_t)e * nc);
		if (!a || !b || !d || !tbls || !src || !dst || !cp || !dp || !crow || !full)
			goto out;
		for (unsigned i = 0; i < e; i++)
			for (unsigned l = 0; l < e; l++)
				a[i * e + l] = coef_of(set ? set[pick[i]] : NDZ_FEC_WHOLE,
						       idx[pick[i]], miss[l]);
		if (gf_invert_matrix(a, b, (int)e) != 0) {
			rc = NDZ_EINVAL;       /* cannot happen: the rows were picked independent */
			goto out;
		}
		/* D = B x C, C the picked repairs' coefficient rows: an e x e product of rows */
		for (unsigned i = 0; i < e; i++) {
			for (unsigned j = lo; j < hi; j++)
				crow[(size_t)i * nc + j - lo] =
					coef_of(set ? set[pick[i]] : NDZ_FEC_WHOLE, idx[pick[i]], j);
			cp[i] = crow + (size_t)i * nc;
			dp[i] = full + (size_t)i * nc;
		}
		ec_init_tables((int)e, (int)e, b, tbls);
		ec_encode_data((int)nc, (int)e, (int)e, tbls, cp, dp);
		for (unsigned j = lo, m = 0; j < hi; j++) {
			if (m < e && miss[m] == j) {
				dst[m++] = chunk + (size_t)j * NDZ_BLOCK_SIZE;
				continue;
			}
			for (unsigned l = 0; l < e; l++)
				d[(size_t)l * nc + nsrc] = full[(size_t)l * nc + j - lo];
			src[nsrc++] = chunk + (size_t)j * NDZ_BLOCK_SIZE;
		}
		for (unsigned i = 0; i < e; i++) {
			for (unsigned l = 0; l < e; l++)
				d[(size_t)l * nc + nsrc] = b[l * e + i];
			src[nsrc++] = (uint8_t *)rep[pick[i]];
		}
		ec_init_tables((int)nc, (int)e, d, tbls);
		ec_encode_data(NDZ_BLOCK_SIZE, (int)nc, (int)e, tbls, src, dst);
	}
	for (unsigned l = 0; l < e; l++)
		ndz_bit_set(have, miss[l]);
	rc = 0;
out:
	free(pick);
	free(lead);
	free(basis);
	free(a);
	free(b);
	free(d);
	free(tbls);
	free(src);
	free(dst);
	free(cp);
	free(dp);
	free(crow);
	free(full);
	return rc;
}

int ndz_fec_wdecode(uint8_t *chunk, uint8_t *have, const uint8_t *set, const uint8_t *idx,
		    const uint8_t *const *rep, unsigned nrep, struct ndz_error *err)
{
	int r = wdecode(chunk, have, set, idx, rep, nrep, 0, N);

	if (r < 0)
		ndz_error_set(err, r, 0, "a chunk's %u repairs: %s", nrep,
			      r == NDZ_EINVAL ? "a bad or repeated index" : ndz_strerror(r));
	return r;
}

/*
 * Range repairs: the whole-chunk row restricted to columns [first, first + count).
 * ISA-L's expanded table holds 32 bytes per column in column order, so the range's
 * table is the whole row's from column first on: no table of its own.
 */
int ndz_fec_rencode(struct ndz_fec *c, const uint8_t *chunk, unsigned first, unsigned count,
		    unsigned index, uint8_t *out, struct ndz_error *err)
{
	uint8_t *src[N];

	if (!ndz_fec_range_ok(first, count) || index >= W)
		return ndz_error_set(err, NDZ_EINVAL, 0, "range repair %u of blocks %u+%u: out "
				     "of range", index, first, count);
	if (wrow(c, index, err) < 0)
		return NDZ_ENOMEM;
	for (unsigned j = 0; j < count; j++)
		src[j] = (uint8_t *)chunk + (size_t)(first + j) * NDZ_BLOCK_SIZE;
	gf_vect_dot_prod(NDZ_BLOCK_SIZE, (int)count, c->wtbls + ((size_t)index * N + first) * 32,
			 src, out);
	return 0;
}

int ndz_fec_rdecode(uint8_t *chunk, uint8_t *have, unsigned first, unsigned count,
		    const uint8_t *idx, const uint8_t *const *rep, unsigned nrep,
		    struct ndz_error *err)
{
	int r = ndz_fec_range_ok(first, count) ?
		wdecode(chunk, have, NULL, idx, rep, nrep, first, first + count) : NDZ_EINVAL;

	if (r < 0)
		ndz_error_set(err, r, 0, "blocks %u+%u of a chunk, %u range repairs: %s", first,
			      count, nrep, r == NDZ_EINVAL ? "a bad range, or a bad or repeated "
			      "index" : ndz_strerror(r));
	return r;
}
