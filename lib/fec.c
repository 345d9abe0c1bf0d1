/* Repair blocks over a chunk's stripes with ISA-L's GF(2^8) arithmetic (see fec.h). */
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "err.h"
#include "fec.h"
#include "proto.h"

#define K NDZ_FEC_K
#define R NDZ_FEC_REPAIRS

struct ndz_fec {
	uint8_t coef[R][K];            /* repair r = sum over j of coef[r][j] * data j */
	uint8_t tbls[R][32 * K];       /* ISA-L's expanded tables, one row per repair */
};

int ndz_fec_create(struct ndz_fec **out)
{
	struct ndz_fec *c = malloc(sizeof(*c));

	*out = NULL;
	if (!c)
		return NDZ_ENOMEM;
	/* Cauchy rows K..K+R-1: coef = 1 / (row xor column) in GF(2^8) mod 0x11d */
	for (unsigned r = 0; r < R; r++)
		for (unsigned j = 0; j < K; j++)
			c->coef[r][j] = gf_inv((unsigned char)((K + r) ^ j));
	for (unsigned r = 0; r < R; r++)
		ec_init_tables(K, 1, c->coef[r], c->tbls[r]);
	*out = c;
	return 0;
}

void ndz_fec_free(struct ndz_fec *c)
{
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
int ndz_fec_decode(const struct ndz_fec *c, uint8_t *chunk, uint8_t *have, unsigned stripe,
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
