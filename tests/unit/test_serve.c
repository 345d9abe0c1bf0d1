/*
 * Unit tests for lib/serve: the server's work queue without the network: FIFO
 * order, merging into a queued chunk and into the chunk being sent, the
 * whole-chunk REQUEST rule, what is sent next, the sent-blocks accounting, and a
 * long random run against a plain model of the rules written here.
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
#include "mcast/serve.h"

#define BLOCKS NDZ_BLOCKS_PER_CHUNK

static struct ndz_serve *make(uint32_t chunks)
{
	struct ndz_serve *s = NULL;

	assert_int_equal(ndz_serve_create(chunks, &s, NULL), 0);
	assert_non_null(s);
	return s;
}

/* The next data block to send, -1 when the chunk is done; no repairs expected. */
static int next_block(struct ndz_serve *s)
{
	struct ndz_serve_item it;

	if (!ndz_serve_next(s, &it))
		return -1;
	assert_false(it.repair);
	return (int)it.block;
}

/* A bitmap of the blocks listed, ending with -1. */
static void bits_of(uint8_t *bm, ...)
{
	va_list ap;
	int b;

	memset(bm, 0, NDZ_BITMAP_BYTES);
	va_start(ap, bm);
	while ((b = va_arg(ap, int)) >= 0)
		ndz_bit_set(bm, (unsigned)b);
	va_end(ap);
}

/* A bitmap of blocks [from, to). */
static void bits_range(uint8_t *bm, unsigned from, unsigned to)
{
	memset(bm, 0, NDZ_BITMAP_BYTES);
	for (unsigned b = from; b < to; b++)
		ndz_bit_set(bm, b);
}

/* The queue holds exactly the n chunks in order, entry i with bitmap bms[i]. */
static void check_queue(const struct ndz_serve *s, size_t n, const uint32_t *chunks,
			const uint8_t (*bms)[NDZ_BITMAP_BYTES])
{
	uint8_t got[NDZ_BITMAP_BYTES];
	uint32_t c;

	for (size_t i = 0; i < n; i++) {
		assert_int_equal(ndz_serve_queued(s, i, &c, got, NULL), 0);
		assert_int_equal(c, chunks[i]);
		if (bms)
			assert_memory_equal(got, bms[i], NDZ_BITMAP_BYTES);
	}
	assert_int_equal(ndz_serve_queued(s, n, &c, NULL, NULL), NDZ_ENOENT);
}

/* The current chunk is chunk at pos with bitmap bm. */
static void check_current(const struct ndz_serve *s, uint32_t chunk, unsigned pos,
			  const uint8_t *bm)
{
	uint8_t got[NDZ_BITMAP_BYTES];
	unsigned p = 9999;

	assert_int_equal(ndz_serve_current(s, &p, got), chunk);
	assert_int_equal(p, pos);
	assert_memory_equal(got, bm, NDZ_BITMAP_BYTES);
}

static void check_stats(const struct ndz_serve *s, uint64_t requests, uint64_t merged,
			uint64_t dropped, uint64_t sent, uint64_t distinct)
{
	struct ndz_serve_stats st;

	ndz_serve_get_stats(s, &st);
	assert_int_equal(st.requests, requests);
	assert_int_equal(st.merged, merged);
	assert_int_equal(st.dropped_current, dropped);
	assert_int_equal(st.blocks_sent, sent);
	assert_int_equal(st.distinct_sent, distinct);
}

/* Take blocks from the current chunk until it is done; they must be exactly bm's. */
static void drain_expect(struct ndz_serve *s, const uint8_t *bm)
{
	int b, prev = -1;

	for (unsigned i = 0; i < BLOCKS; i++) {
		if (!ndz_bit_test(bm, i))
			continue;
		b = next_block(s);
		assert_int_equal(b, i);
		assert_true(b > prev);
		prev = b;
	}
	assert_int_equal(next_block(s), -1);
	assert_int_equal(ndz_serve_current(s, NULL, NULL), -1);
}

static void test_bad_args(void **state)
{
	struct ndz_serve *s = (struct ndz_serve *)1;
	uint8_t bm[NDZ_BITMAP_BYTES], want[1][NDZ_BITMAP_BYTES];
	uint32_t c;

	(void)state;
	assert_int_equal(ndz_serve_create(0, &s, NULL), NDZ_EINVAL);
	assert_null(s);
	ndz_serve_free(NULL);

	s = make(4);
	bits_of(bm, 0, 1, -1);
	assert_int_equal(ndz_serve_prequest(s, 4, bm, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_serve_prequest(s, UINT32_MAX, bm, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_serve_request(s, 4, 0, 1, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_serve_request(s, 0, BLOCKS, 1, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_serve_request(s, 0, 0, 0, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_serve_request(s, 0, 1, BLOCKS, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_serve_request(s, 0, BLOCKS - 2, 3, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_serve_sent(s, 4, 0, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_serve_sent(s, 0, BLOCKS, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_serve_ever(s, 4, 0), 0);
	assert_int_equal(ndz_serve_ever(s, 0, BLOCKS), 0);
	/* nothing queued, nothing counted */
	assert_int_equal(ndz_serve_queued(s, 0, &c, NULL, NULL), NDZ_ENOENT);
	assert_false(ndz_serve_busy(s));
	assert_int_equal(ndz_serve_next_chunk(s), -1);
	assert_int_equal(next_block(s), -1);
	check_stats(s, 0, 0, 0, 0, 0);
	/* the last chunk and block are in range */
	assert_int_equal(ndz_serve_request(s, 3, BLOCKS - 1, 1, NULL), 1);
	bits_of(want[0], BLOCKS - 1, -1);
	check_queue(s, 1, (const uint32_t[]){ 3 }, want);
	ndz_serve_free(s);
}

/* Two requests for one queued chunk: one entry, the bitmaps OR-ed. */
static void test_merge_same_chunk(void **state)
{
	struct ndz_serve *s = make(10);
	uint8_t bm[NDZ_BITMAP_BYTES], want[1][NDZ_BITMAP_BYTES];

	(void)state;
	bits_of(bm, 1, 5, 900, -1);
	assert_int_equal(ndz_serve_prequest(s, 3, bm, NULL), 1);
	assert_int_equal(ndz_serve_request(s, 3, 5, 3, NULL), 0);
	bits_of(want[0], 1, 5, 6, 7, 900, -1);
	check_queue(s, 1, (const uint32_t[]){ 3 }, want);
	check_stats(s, 2, 1, 0, 0, 0);
	/* the caller's bitmap is not changed */
	bits_of(want[0], 1, 5, 900, -1);
	assert_memory_equal(bm, want[0], NDZ_BITMAP_BYTES);

	/* sent in block order, then the chunk is done */
	assert_int_equal(ndz_serve_next_chunk(s), 3);
	bits_of(bm, 1, 5, 6, 7, 900, -1);
	check_current(s, 3, 0, bm);
	check_queue(s, 0, NULL, NULL);
	drain_expect(s, bm);
	assert_int_equal(ndz_serve_next_chunk(s), -1);
	assert_false(ndz_serve_busy(s));
	ndz_serve_free(s);
}

/* Chunks are sent in the order first asked for, whatever merges later. */
static void test_fifo_order(void **state)
{
	struct ndz_serve *s = make(16);
	uint8_t want[4][NDZ_BITMAP_BYTES], bm[NDZ_BITMAP_BYTES];
	static const uint32_t order[4] = { 4, 1, 7, 9 };

	(void)state;
	assert_int_equal(ndz_serve_request(s, 4, 0, 2, NULL), 1);
	assert_int_equal(ndz_serve_request(s, 1, 10, 1, NULL), 1);
	assert_int_equal(ndz_serve_request(s, 7, 0, BLOCKS, NULL), 1);
	assert_int_equal(ndz_serve_request(s, 1, 11, 1, NULL), 0);
	bits_of(bm, 2, -1);
	assert_int_equal(ndz_serve_prequest(s, 4, bm, NULL), 0);
	assert_int_equal(ndz_serve_request(s, 9, 100, 1, NULL), 1);
	bits_of(want[0], 0, 1, 2, -1);
	bits_of(want[1], 10, 11, -1);
	bits_range(want[2], 0, BLOCKS);
	bits_of(want[3], 100, -1);
	check_queue(s, 4, order, want);
	check_stats(s, 6, 2, 0, 0, 0);
	assert_true(ndz_serve_busy(s));

	for (unsigned i = 0; i < 4; i++) {
		assert_int_equal(ndz_serve_next_chunk(s), order[i]);
		check_queue(s, 3 - i, order + i + 1, want + i + 1);
		drain_expect(s, want[i]);
	}
	assert_int_equal(ndz_serve_next_chunk(s), -1);
	assert_false(ndz_serve_busy(s));
	/* a chunk sent is queued afresh, at the tail */
	assert_int_equal(ndz_serve_request(s, 4, 3, 1, NULL), 1);
	assert_int_equal(ndz_serve_request(s, 1, 3, 1, NULL), 1);
	check_queue(s, 2, (const uint32_t[]){ 4, 1 }, NULL);
	ndz_serve_free(s);
}

/* Requests for the chunk being sent: ahead blocks join it, the rest is queued. */
static void test_merge_into_current(void **state)
{
	struct ndz_serve *s = make(5);
	uint8_t bm[NDZ_BITMAP_BYTES], cur[NDZ_BITMAP_BYTES], want[2][NDZ_BITMAP_BYTES];

	(void)state;
	bits_of(bm, 10, 20, 30, -1);
	assert_int_equal(ndz_serve_prequest(s, 2, bm, NULL), 1);
	assert_int_equal(ndz_serve_request(s, 0, 0, 1, NULL), 1);
	assert_int_equal(ndz_serve_next_chunk(s), 2);
	assert_int_equal(next_block(s), 10);
	check_current(s, 2, 11, bm);

	/* 11 and 40 are ahead and join; 5 and 10 (just sent) are behind: a new entry */
	bits_of(bm, 5, 10, 11, 40, -1);
	assert_int_equal(ndz_serve_prequest(s, 2, bm, NULL), 1);
	bits_of(cur, 10, 11, 20, 30, 40, -1);
	check_current(s, 2, 11, cur);
	bits_of(want[0], 0, -1);
	bits_of(want[1], 5, 10, -1);
	check_queue(s, 2, (const uint32_t[]){ 0, 2 }, want);
	check_stats(s, 3, 1, 0, 0, 0);

	/* all ahead: joins, nothing left to queue */
	bits_of(bm, 12, 20, 1023, -1);
	assert_int_equal(ndz_serve_prequest(s, 2, bm, NULL), 0);
	bits_of(cur, 10, 11, 12, 20, 30, 40, 1023, -1);
	check_current(s, 2, 11, cur);
	check_queue(s, 2, (const uint32_t[]){ 0, 2 }, want);
	check_stats(s, 4, 1, 1, 0, 0);

	/* behind only: merges into the chunk's queue entry */
	bits_of(bm, 3, -1);
	assert_int_equal(ndz_serve_prequest(s, 2, bm, NULL), 0);
	bits_of(want[1], 3, 5, 10, -1);
	check_queue(s, 2, (const uint32_t[]){ 0, 2 }, want);
	check_stats(s, 5, 2, 1, 0, 0);

	/* both ahead and behind with an entry queued: one merge */
	assert_int_equal(ndz_serve_request(s, 2, 9, 4, NULL), 0);
	bits_of(want[1], 3, 5, 9, 10, -1);
	check_queue(s, 2, (const uint32_t[]){ 0, 2 }, want);
	check_current(s, 2, 11, cur);
	check_stats(s, 6, 3, 1, 0, 0);

	/* the sender goes on with the blocks that joined */
	assert_int_equal(next_block(s), 11);
	assert_int_equal(next_block(s), 12);
	bits_of(bm, 13, -1);
	assert_int_equal(ndz_serve_prequest(s, 2, bm, NULL), 0);
	bits_of(cur, 13, 20, 30, 40, 1023, -1);
	drain_expect(s, cur);
	check_stats(s, 7, 3, 2, 0, 0);

	/* the chunk is no longer current: a request for it only merges in the queue */
	bits_of(bm, 500, -1);
	assert_int_equal(ndz_serve_prequest(s, 2, bm, NULL), 0);
	check_stats(s, 8, 4, 2, 0, 0);
	assert_int_equal(ndz_serve_next_chunk(s), 0);
	drain_expect(s, want[0]);
	assert_int_equal(ndz_serve_next_chunk(s), 2);
	bits_of(want[1], 3, 5, 9, 10, 500, -1);
	check_current(s, 2, 0, want[1]);
	ndz_serve_free(s);
}

/* A whole-chunk REQUEST for the chunk being sent only adds the blocks ahead. */
static void test_whole_vs_partial(void **state)
{
	struct ndz_serve *s = make(8);
	uint8_t bm[NDZ_BITMAP_BYTES], cur[NDZ_BITMAP_BYTES], want[1][NDZ_BITMAP_BYTES];

	(void)state;
	bits_of(bm, 500, -1);
	assert_int_equal(ndz_serve_prequest(s, 6, bm, NULL), 1);
	assert_int_equal(ndz_serve_next_chunk(s), 6);
	assert_int_equal(next_block(s), 500);

	/* whole: 501..1023 join, 0..500 are not queued */
	assert_int_equal(ndz_serve_request(s, 6, 0, BLOCKS, NULL), 0);
	bits_range(cur, 500, BLOCKS);
	check_current(s, 6, 501, cur);
	check_queue(s, 0, NULL, NULL);
	check_stats(s, 2, 0, 1, 0, 0);

	/* the same blocks but one, partial: what is behind is queued */
	assert_int_equal(ndz_serve_request(s, 6, 0, BLOCKS - 1, NULL), 1);
	bits_range(want[0], 0, 501);
	check_queue(s, 1, (const uint32_t[]){ 6 }, want);
	check_current(s, 6, 501, cur);
	check_stats(s, 3, 1, 1, 0, 0);

	/* a PREQUEST of every block is partial too: merges into the entry */
	bits_range(bm, 0, BLOCKS);
	assert_int_equal(ndz_serve_prequest(s, 6, bm, NULL), 0);
	check_queue(s, 1, (const uint32_t[]){ 6 }, want);
	check_stats(s, 4, 2, 1, 0, 0);

	/* whole for another chunk, or with nothing current: queued whole */
	assert_int_equal(ndz_serve_request(s, 7, 0, BLOCKS, NULL), 1);
	bits_range(bm, 501, BLOCKS);
	drain_expect(s, bm);
	assert_int_equal(ndz_serve_next_chunk(s), 6);
	drain_expect(s, want[0]);
	assert_int_equal(ndz_serve_request(s, 6, 0, BLOCKS, NULL), 1);
	check_queue(s, 2, (const uint32_t[]){ 7, 6 }, NULL);
	check_stats(s, 6, 2, 1, 0, 0);

	/* whole at position 0: every block is ahead, nothing queued */
	assert_int_equal(ndz_serve_next_chunk(s), 7);
	assert_int_equal(ndz_serve_request(s, 7, 0, BLOCKS, NULL), 0);
	check_queue(s, 1, (const uint32_t[]){ 6 }, NULL);
	check_stats(s, 7, 2, 2, 0, 0);
	ndz_serve_free(s);
}

/* blocks_sent counts every send, distinct_sent each block once over the run. */
static void test_sent_accounting(void **state)
{
	struct ndz_serve *s = make(3);
	int b;

	(void)state;
	assert_int_equal(ndz_serve_sent(s, 0, 5, NULL), 1);
	assert_int_equal(ndz_serve_sent(s, 0, 5, NULL), 0);
	assert_int_equal(ndz_serve_sent(s, 1, 5, NULL), 1);
	assert_int_equal(ndz_serve_sent(s, 2, BLOCKS - 1, NULL), 1);
	check_stats(s, 0, 0, 0, 4, 3);
	assert_true(ndz_serve_ever(s, 0, 5));
	assert_false(ndz_serve_ever(s, 0, 4));
	assert_false(ndz_serve_ever(s, 0, 6));
	assert_true(ndz_serve_ever(s, 1, 5));
	assert_false(ndz_serve_ever(s, 2, 5));
	assert_true(ndz_serve_ever(s, 2, BLOCKS - 1));
	assert_false(ndz_serve_ever(s, 1, BLOCKS - 1));

	/* a chunk served twice: the second time adds to blocks_sent only */
	for (int round = 0; round < 2; round++) {
		assert_int_equal(ndz_serve_request(s, 1, 0, BLOCKS, NULL), 1);
		assert_true(ndz_serve_busy(s));
		assert_int_equal(ndz_serve_next_chunk(s), 1);
		assert_true(ndz_serve_busy(s));
		while ((b = next_block(s)) >= 0)
			assert_int_equal(ndz_serve_sent(s, 1, (unsigned)b, NULL), round == 0 && b != 5);
		assert_false(ndz_serve_busy(s));
	}
	check_stats(s, 2, 0, 0, 4 + 2 * BLOCKS, 3 + BLOCKS - 1);
	for (unsigned i = 0; i < BLOCKS; i++)
		assert_true(ndz_serve_ever(s, 1, i));
	assert_false(ndz_serve_ever(s, 0, 0));
	ndz_serve_free(s);
}

/*
 * The reference model: the rules as frisbeed's enqueue() and sender loop stated
 * them, over plain arrays (one byte per block, the queue as an array of chunks).
 */
#define MCHUNKS 6

struct model {
	uint32_t q[MCHUNKS];
	size_t qn;
	unsigned char inq[MCHUNKS];
	unsigned char qw[MCHUNKS][BLOCKS];
	int64_t cur;
	unsigned pos;
	unsigned char cw[BLOCKS];
	unsigned char ever[MCHUNKS][BLOCKS];
	uint64_t requests, merged, dropped, sent, distinct;
};

static int model_request(struct model *m, uint32_t chunk, unsigned char *want, int full)
{
	int took = 0, left = 0;

	m->requests++;
	if ((int64_t)chunk == m->cur) {
		for (unsigned b = m->pos; b < BLOCKS; b++)
			if (want[b]) {
				m->cw[b] = 1;
				want[b] = 0;
				took = 1;
			}
		for (unsigned b = 0; b < BLOCKS; b++)
			left |= want[b];
		if (full || !left) {
			m->dropped++;
			return 0;
		}
	}
	if (m->inq[chunk]) {
		for (unsigned b = 0; b < BLOCKS; b++)
			m->qw[chunk][b] |= want[b];
		m->merged++;
		return 0;
	}
	if (took)
		m->merged++;
	memcpy(m->qw[chunk], want, BLOCKS);
	m->inq[chunk] = 1;
	m->q[m->qn++] = chunk;
	return 1;
}

static int64_t model_next_chunk(struct model *m)
{
	uint32_t c;

	if (!m->qn) {
		m->cur = -1;
		return -1;
	}
	c = m->q[0];
	memmove(m->q, m->q + 1, (m->qn - 1) * sizeof(m->q[0]));
	m->qn--;
	m->inq[c] = 0;
	m->cur = c;
	m->pos = 0;
	memcpy(m->cw, m->qw[c], BLOCKS);
	return c;
}

static int model_next_block(struct model *m)
{
	if (m->cur < 0)
		return -1;
	while (m->pos < BLOCKS) {
		unsigned b = m->pos++;

		if (m->cw[b])
			return (int)b;
	}
	m->cur = -1;
	return -1;
}

/* The model's one-byte-per-block bitmap w equals the packed bitmap bm. */
static void check_bits(const unsigned char *w, const uint8_t *bm)
{
	uint8_t packed[NDZ_BITMAP_BYTES] = { 0 };

	for (unsigned b = 0; b < BLOCKS; b++)
		packed[b / 8] = (uint8_t)(packed[b / 8] | (w[b] ? 1u << (b % 8) : 0));
	assert_memory_equal(packed, bm, NDZ_BITMAP_BYTES);
}

/* Queue order, current chunk, position and counters; the bitmaps too when bits. */
static void model_check(const struct model *m, const struct ndz_serve *s, int bits)
{
	uint8_t got[NDZ_BITMAP_BYTES];
	uint32_t c;
	unsigned pos;

	check_stats(s, m->requests, m->merged, m->dropped, m->sent, m->distinct);
	assert_int_equal(ndz_serve_current(s, &pos, got), m->cur);
	if (m->cur >= 0) {
		assert_int_equal(pos, m->pos);
		if (bits)
			check_bits(m->cw, got);
	}
	for (size_t i = 0; i < m->qn; i++) {
		assert_int_equal(ndz_serve_queued(s, i, &c, got, NULL), 0);
		assert_int_equal(c, m->q[i]);
		if (bits)
			check_bits(m->qw[c], got);
	}
	assert_int_equal(ndz_serve_queued(s, m->qn, &c, NULL, NULL), NDZ_ENOENT);
	assert_int_equal(ndz_serve_busy(s), m->qn > 0 || m->cur >= 0);
}

static uint64_t rnd_state = 0x2545f4914f6cdd1dull;

static uint32_t rnd(uint32_t n)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return (uint32_t)((rnd_state >> 32) % n);
}

/* A block near the sender's position half the time, so that requests straddle it. */
static unsigned pick_block(const struct model *m)
{
	if (m->cur >= 0 && rnd(2)) {
		int b = (int)m->pos + (int)rnd(9) - 4;

		return b < 0 ? 0 : b >= (int)BLOCKS ? BLOCKS - 1 : (unsigned)b;
	}
	return rnd(BLOCKS);
}

static void test_random_against_model(void **state)
{
	static struct model m;
	struct ndz_serve *s = make(MCHUNKS);
	unsigned char want[BLOCKS];
	uint8_t bm[NDZ_BITMAP_BYTES];
	uint64_t chunks_started = 0, whole = 0;

	(void)state;
	memset(&m, 0, sizeof(m));
	m.cur = -1;
	for (unsigned step = 0; step < 100000; step++) {
		unsigned op = rnd(10);
		uint32_t chunk = m.cur >= 0 && !rnd(3) ? (uint32_t)m.cur : rnd(MCHUNKS);

		if (op < 3) {                          /* REQUEST: a range, sometimes whole */
			unsigned first = rnd(4) ? pick_block(&m) : 0, count, r = rnd(8);

			/* mostly short, so that chunks are done and others begin */
			if (r == 0)
				count = BLOCKS - first;
			else if (r == 1)
				count = 1 + rnd(BLOCKS - first);
			else
				count = 1 + rnd(BLOCKS - first < 16 ? BLOCKS - first : 16);
			if (rnd(3) == 0) {                 /* out of range: changes nothing */
				assert_int_equal(ndz_serve_request(s, MCHUNKS + rnd(3), first, count, NULL),
						 NDZ_EINVAL);
				continue;
			}
			memset(want, 0, sizeof(want));
			for (unsigned b = first; b < first + count; b++)
				want[b] = 1;
			whole += count == BLOCKS;
			assert_int_equal(ndz_serve_request(s, chunk, first, count, NULL),
					 model_request(&m, chunk, want, count == BLOCKS));
		} else if (op < 6) {                   /* PREQUEST: a few bits, or dense */
			unsigned n = rnd(16) ? 1 + rnd(4) : 1 + rnd(BLOCKS);

			memset(want, 0, sizeof(want));
			memset(bm, 0, sizeof(bm));
			for (unsigned i = 0; i < n; i++) {
				unsigned b = pick_block(&m);

				want[b] = 1;
				ndz_bit_set(bm, b);
			}
			assert_int_equal(ndz_serve_prequest(s, chunk, bm, NULL),
					 model_request(&m, chunk, want, 0));
		} else {                               /* the sender's turn */
			int64_t c;
			int b, first;

			if (m.cur < 0) {
				c = ndz_serve_next_chunk(s);
				assert_int_equal(c, model_next_chunk(&m));
				chunks_started += c >= 0;
				model_check(&m, s, 1);
				continue;
			}
			/* a few blocks (the sender is faster than one request a block) */
			c = m.cur;
			for (unsigned k = 1 + rnd(32); k > 0; k--) {
				b = next_block(s);
				assert_int_equal(b, model_next_block(&m));
				if (b < 0)
					break;
				first = !m.ever[c][b];
				m.ever[c][b] = 1;
				m.sent++;
				m.distinct += first;
				assert_int_equal(ndz_serve_sent(s, (uint32_t)c, (unsigned)b, NULL), first);
			}
		}
		/* every step: the order and counters; the bitmaps now and then (the
		 * blocks next_block returns check the current one every step) */
		model_check(&m, s, step % 16 == 0);
	}
	/* the run went through the interesting cases */
	assert_true(chunks_started > 300);
	assert_true(whole > 300);
	assert_true(m.merged > 1000);
	assert_true(m.dropped > 1000);
	assert_true(m.distinct == MCHUNKS * BLOCKS);
	for (uint32_t c = 0; c < MCHUNKS; c++)
		for (unsigned b = 0; b < BLOCKS; b++)
			assert_int_equal(ndz_serve_ever(s, c, b), m.ever[c][b]);
	ndz_serve_free(s);
}

/* Takes every item of the current chunk: data blocks into bits, repairs as (stripe, index). */
static unsigned drain(struct ndz_serve *s, uint8_t *bits, unsigned (*reps)[2], unsigned cap)
{
	struct ndz_serve_item it;
	unsigned n = 0;

	if (bits)
		memset(bits, 0, NDZ_BITMAP_BYTES);
	while (ndz_serve_next(s, &it)) {
		if (!it.repair) {
			assert_non_null(bits);
			assert_int_equal(n, 0);        /* data blocks come before repairs */
			ndz_bit_set(bits, it.block);
			continue;
		}
		assert_true(n < cap);
		reps[n][0] = it.stripe;
		reps[n][1] = it.index;
		n++;
	}
	return n;
}

/*
 * need asked for chunk in rounds requests one after another, each answered (the
 * chunk current) with the NDZ_FEC_ASK_MAX repairs a request gets at most: their
 * sets and indexes into reps in order; how many in all.
 */
static unsigned capped_rounds(struct ndz_serve *s, uint32_t chunk, const uint8_t *need,
			      unsigned rounds, unsigned (*reps)[2])
{
	unsigned n = 0;

	for (unsigned r = 0; r < rounds; r++) {
		unsigned part[NDZ_FEC_ASK_MAX + 1][2], got;

		assert_int_equal(ndz_serve_repairs(s, chunk, need, NULL), 1);
		assert_int_equal(ndz_serve_next_chunk(s), chunk);
		got = drain(s, NULL, part, NDZ_FEC_ASK_MAX + 1);
		assert_int_equal(got, NDZ_FEC_ASK_MAX);
		memcpy(reps[n], part, sizeof(part[0]) * got);
		n += got;
	}
	return n;
}

/*
 * Repair requests: queued with their counts, merged by the largest count per
 * stripe (queued or current), sent after the data blocks one stripe after another,
 * each with a new index, wrapping after the last.
 */
static void test_repairs(void **state)
{
	struct ndz_serve *s = make(4);
	uint8_t need[NDZ_FEC_SETS], bits[NDZ_BITMAP_BYTES], want[NDZ_BITMAP_BYTES];
	unsigned reps[600][2], n;
	struct ndz_serve_stats st;

	(void)state;
	memset(need, 0, sizeof(need));
	assert_int_equal(ndz_serve_repairs(s, 1, need, NULL), NDZ_EINVAL);          /* asks nothing */
	need[2] = NDZ_FEC_K + 1;
	assert_int_equal(ndz_serve_repairs(s, 1, need, NULL), NDZ_EINVAL);
	need[2] = 2;
	assert_int_equal(ndz_serve_repairs(s, 4, need, NULL), NDZ_EINVAL);
	assert_false(ndz_serve_busy(s));
	/* queued, then merged: stripe 2 wants max(2, 1) = 2, stripe 5 wants 3 */
	assert_int_equal(ndz_serve_repairs(s, 1, need, NULL), 1);
	memset(need, 0, sizeof(need));
	need[2] = 1;
	need[5] = 3;
	assert_int_equal(ndz_serve_repairs(s, 1, need, NULL), 0);
	/* data blocks for the same chunk join the entry and go first */
	bits_of(want, 7, 900, -1);
	assert_int_equal(ndz_serve_prequest(s, 1, want, NULL), 0);
	assert_int_equal(ndz_serve_next_chunk(s), 1);
	n = drain(s, bits, reps, 600);
	assert_memory_equal(bits, want, NDZ_BITMAP_BYTES);
	assert_int_equal(n, 5);
	/* round robin: 2, 5, 2, 5, 5 with indexes 0, 0, 1, 1, 2 */
	assert_int_equal(reps[0][0], 2);
	assert_int_equal(reps[0][1], 0);
	assert_int_equal(reps[1][0], 5);
	assert_int_equal(reps[1][1], 0);
	assert_int_equal(reps[2][0], 2);
	assert_int_equal(reps[2][1], 1);
	assert_int_equal(reps[3][0], 5);
	assert_int_equal(reps[3][1], 1);
	assert_int_equal(reps[4][0], 5);
	assert_int_equal(reps[4][1], 2);
	/* a second round: new indexes; a request while it is current raises the count */
	memset(need, 0, sizeof(need));
	need[2] = 1;
	assert_int_equal(ndz_serve_repairs(s, 1, need, NULL), 1);
	assert_int_equal(ndz_serve_next_chunk(s), 1);
	need[2] = 3;
	assert_int_equal(ndz_serve_repairs(s, 1, need, NULL), 0);
	n = drain(s, NULL, reps, 600);
	assert_int_equal(n, 3);
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(reps[i][0], 2);
		assert_int_equal(reps[i][1], 2 + i);
	}
	/* a request for a whole stripe's worth gets NDZ_FEC_ASK_MAX (no client asks for
	   more); after the last index the first again */
	memset(need, 0, sizeof(need));
	need[2] = NDZ_FEC_K;
	n = capped_rounds(s, 1, need, NDZ_FEC_K / NDZ_FEC_ASK_MAX, reps);
	assert_int_equal(reps[NDZ_FEC_REPAIRS - 6][1], NDZ_FEC_REPAIRS - 1);
	assert_int_equal(reps[NDZ_FEC_REPAIRS - 5][1], 0);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(ndz_serve_repair_sent(s, 1, reps[i][0], NULL), 0);
	assert_int_equal(ndz_serve_repair_sent(s, 1, NDZ_FEC_SETS, NULL), NDZ_EINVAL);
	ndz_serve_get_stats(s, &st);
	assert_int_equal(st.repairs_sent, NDZ_FEC_K);
	assert_int_equal(st.requests, 5 + NDZ_FEC_K / NDZ_FEC_ASK_MAX);
	assert_int_equal(st.merged, 3);
	assert_false(ndz_serve_busy(s));
	ndz_serve_free(s);
}

/* Whole-chunk repairs (set 8): merged by the largest count, indexes 0-254 then 0 again. */
static void test_whole_repairs(void **state)
{
	struct ndz_serve *s;
	uint8_t need[NDZ_FEC_SETS];
	unsigned reps[600][2], n;

	(void)state;
	assert_int_equal(ndz_serve_create(3, &s, NULL), 0);
	memset(need, 0, sizeof(need));
	need[NDZ_FEC_WHOLE] = 3;
	assert_int_equal(ndz_serve_repairs(s, 2, need, NULL), 1);
	need[NDZ_FEC_WHOLE] = 5;
	need[1] = 1;
	assert_int_equal(ndz_serve_repairs(s, 2, need, NULL), 0);
	assert_int_equal(ndz_serve_next_chunk(s), 2);
	n = drain(s, NULL, reps, 600);
	/* round robin over the sets: 1, 8, then set 8 alone */
	assert_int_equal(n, 6);
	assert_int_equal(reps[0][0], 1);
	for (unsigned i = 1; i < n; i++) {
		assert_int_equal(reps[i][0], NDZ_FEC_WHOLE);
		assert_int_equal(reps[i][1], i - 1);
	}
	/* a forger's 255 get NDZ_FEC_ASK_MAX a request; 255 distinct, then index 0 again */
	memset(need, 0, sizeof(need));
	need[NDZ_FEC_WHOLE] = 255;
	n = capped_rounds(s, 2, need, 256 / NDZ_FEC_ASK_MAX, reps);
	assert_int_equal(n, 256);
	assert_int_equal(reps[249][1], 254);
	assert_int_equal(reps[250][1], 0);
	for (unsigned i = 0; i < n; i++)
		assert_int_equal(ndz_serve_repair_sent(s, 2, reps[i][0], NULL), 0);
	assert_int_equal(ndz_serve_repair_sent(s, 2, 1, NULL), 0);
	{
		struct ndz_serve_stats st;

		ndz_serve_get_stats(s, &st);
		assert_int_equal(st.repairs_sent, 257);
		assert_int_equal(st.whole_sent, 256);
	}
	ndz_serve_free(s);
}

/*
 * Range repairs: merged per (chunk, range) by the largest count, capped at 32 and at
 * the range's blocks, round robin with the sets' after the data, each range's indexes
 * going on from where the last round stopped; at most NDZ_SERVE_RANGES ranges with
 * repairs wanted a chunk; bad ranges refused.
 */
static void test_range_repairs(void **state)
{
	struct ndz_serve *s = make(4);
	struct ndz_serve_item it;
	struct ndz_serve_stats st;
	uint8_t need[NDZ_FEC_SETS];
	unsigned got[3] = { 0 }, stripes = 0, next0 = 0;

	(void)state;
	assert_int_equal(ndz_serve_range(s, 4, 0, 8, 1, NULL), NDZ_EINVAL);   /* chunk */
	assert_int_equal(ndz_serve_range(s, 1, 1020, 5, 1, NULL), NDZ_EINVAL); /* past */
	assert_int_equal(ndz_serve_range(s, 1, 0, 0, 1, NULL), NDZ_EINVAL);   /* empty */
	assert_int_equal(ndz_serve_range(s, 1, 0, 8, 0, NULL), NDZ_EINVAL);   /* none */
	assert_false(ndz_serve_busy(s));
	/* queued with ranges only; merged: [4, 20) wants max(3, 5) = 5, [100, 103) at most 3 */
	assert_int_equal(ndz_serve_range(s, 1, 4, 16, 3, NULL), 1);
	assert_int_equal(ndz_serve_range(s, 1, 4, 16, 5, NULL), 0);
	assert_int_equal(ndz_serve_range(s, 1, 100, 3, 200, NULL), 0);
	assert_int_equal(ndz_serve_range(s, 1, 500, 524, 255, NULL), 0);     /* capped at 32 */
	memset(need, 0, sizeof(need));
	need[3] = 2;
	assert_int_equal(ndz_serve_repairs(s, 1, need, NULL), 0);
	assert_int_equal(ndz_serve_next_chunk(s), 1);
	while (ndz_serve_next(s, &it)) {
		assert_int_not_equal(it.repair, 0);
		if (it.repair == 1) {
			assert_int_equal(it.stripe, 3);
			stripes++;
			continue;
		}
		assert_int_equal(it.repair, NDZ_SERVE_RANGE);
		if (it.first == 4) {
			assert_int_equal(it.count, 16);
			assert_int_equal(it.index, got[0]);
			got[0]++;
		} else if (it.first == 100) {
			assert_int_equal(it.count, 3);
			got[1]++;
		} else {
			assert_int_equal(it.first, 500);
			assert_int_equal(it.count, 524);
			got[2]++;
		}
	}
	assert_int_equal(stripes, 2);
	assert_int_equal(got[0], 5);
	assert_int_equal(got[1], 3);
	assert_int_equal(got[2], NDZ_FEC_ASK_MAX);
	/* a second round of [4, 20): new indexes, from 5 on; while current, merged there */
	assert_int_equal(ndz_serve_range(s, 1, 4, 16, 2, NULL), 1);
	assert_int_equal(ndz_serve_next_chunk(s), 1);
	assert_int_equal(ndz_serve_range(s, 1, 4, 16, 3, NULL), 0);
	next0 = 5;
	while (ndz_serve_next(s, &it)) {
		assert_int_equal(it.repair, NDZ_SERVE_RANGE);
		assert_int_equal(it.index, next0);
		next0++;
		assert_int_equal(ndz_serve_range_sent(s, 1, NULL), 0);
	}
	assert_int_equal(next0, 8);
	/* NDZ_SERVE_RANGES ranges wanted at once, then a new one is refused */
	for (unsigned r = 0; r < NDZ_SERVE_RANGES; r++)
		assert_true(ndz_serve_range(s, 2, 10 * r, 5, 1, NULL) >= 0);
	assert_int_equal(ndz_serve_range(s, 2, 900, 5, 1, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_serve_range(s, 2, 10, 5, 2, NULL), 0);           /* a known one */
	ndz_serve_get_stats(s, &st);
	assert_int_equal(st.range_sent, 3);
	assert_int_equal(st.range_requests, 6 + NDZ_SERVE_RANGES + 1);
	ndz_serve_free(s);
}

/*
 * A range request's repairs are cut to the range's blocks not still going out: blocks
 * of the rest of the pass being sent and of the chunk's queue entry reach whoever lost
 * them. All of them going out: no repair queued (range_ahead); some: at most the others
 * (range_cut counts what was cut). A block already passed counts as gone.
 */
static void test_range_ahead(void **state)
{
	struct ndz_serve *s = make(4);
	struct ndz_serve_item it;
	struct ndz_serve_stats st;
	unsigned blocks = 0, reps = 0;

	(void)state;
	/* chunk 2 queued with blocks 10-19: a range of [10, 20) wanting 4 needs none */
	assert_int_equal(ndz_serve_request(s, 2, 10, 10, NULL), 1);
	assert_int_equal(ndz_serve_range(s, 2, 10, 10, 4, NULL), 0);
	/* [16, 24): 16-19 go out again, 20-23 do not: 6 wanted, at most 4 */
	assert_int_equal(ndz_serve_range(s, 2, 16, 8, 6, NULL), 0);
	assert_int_equal(ndz_serve_next_chunk(s), 2);
	/* being sent: 3 blocks of it out, then [10, 14) wants 4: 13 still goes out, so 3 */
	for (unsigned i = 0; i < 3; i++) {
		assert_int_equal(ndz_serve_next(s, &it), 1);
		assert_int_equal(it.repair, 0);
		blocks++;
	}
	assert_int_equal(ndz_serve_range(s, 2, 10, 4, 4, NULL), 0);
	/* a range of blocks the pass still carries, asked while it is sent: none */
	assert_int_equal(ndz_serve_range(s, 2, 15, 5, 5, NULL), 0);
	while (ndz_serve_next(s, &it)) {
		if (!it.repair) {
			blocks++;
			continue;
		}
		assert_int_equal(it.repair, NDZ_SERVE_RANGE);
		if (it.first == 16) {
			assert_int_equal(it.count, 8);
		} else {
			assert_int_equal(it.first, 10);
			assert_int_equal(it.count, 4);
		}
		reps++;
	}
	assert_int_equal(blocks, 10);
	assert_int_equal(reps, 4 + 3);
	ndz_serve_get_stats(s, &st);
	assert_int_equal(st.range_requests, 4);
	assert_int_equal(st.range_ahead, 2);
	assert_int_equal(st.range_cut, 4 + 2 + 1 + 5);
	/* nothing queued for chunk 3: a range's repairs all wanted */
	assert_int_equal(ndz_serve_range(s, 3, 0, 8, 3, NULL), 1);
	assert_int_equal(ndz_serve_next_chunk(s), 3);
	reps = 0;
	while (ndz_serve_next(s, &it))
		reps += it.repair == NDZ_SERVE_RANGE;
	assert_int_equal(reps, 3);
	ndz_serve_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_merge_same_chunk),
		cmocka_unit_test(test_fifo_order),
		cmocka_unit_test(test_merge_into_current),
		cmocka_unit_test(test_whole_vs_partial),
		cmocka_unit_test(test_sent_accounting),
		cmocka_unit_test(test_random_against_model),
		cmocka_unit_test(test_repairs),
		cmocka_unit_test(test_whole_repairs),
		cmocka_unit_test(test_range_repairs),
		cmocka_unit_test(test_range_ahead),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
