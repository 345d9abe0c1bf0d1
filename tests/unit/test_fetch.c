/*
 * Unit tests for lib/fetch: the client's chunk cache and request scheduling on a
 * simulated clock: request-ahead, NAK suppression by snooping, partial requests,
 * re-requests after silence or a bad chunk, a full cache, and what a chunk count
 * (a forger's) costs before any chunk comes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "core/bufpool.h"
#include "core/err.h"
#include "mcast/fec.h"
#include "mcast/fetch.h"
#include "core/format.h"
#include "mcast/proto.h"

#define MS 1000000ull
#define REDELAY (100 * MS)
#define T0 (1000 * MS)

struct sent {
	unsigned n;
	uint32_t chunk[4096];
	int partial[4096];
	uint8_t missing[4096][NDZ_BITMAP_BYTES];
	int repair[4096];              /* an RREQUEST: need holds its counts */
	uint8_t need[4096][NDZ_FEC_SETS];
};

static void record(void *ctx, uint32_t chunk, const uint8_t *missing, const uint8_t *need)
{
	struct sent *s = ctx;

	assert_true(s->n < 4096);
	s->chunk[s->n] = chunk;
	s->partial[s->n] = missing != NULL;
	if (missing)
		memcpy(s->missing[s->n], missing, NDZ_BITMAP_BYTES);
	assert_false(missing && need);
	s->repair[s->n] = need != NULL;
	if (need)
		memcpy(s->need[s->n], need, NDZ_FEC_SETS);
	s->n++;
}

/* Clears s and has f make its requests at now into it (force: even before the
 * redelay); how many it made. */
static int ask(struct ndz_fetch *f, struct sent *s, uint64_t now, int force)
{
	s->n = 0;
	return ndz_fetch_requests(f, now, force, record, s);
}

static struct ndz_fetch *make(uint32_t chunks, size_t slots, unsigned ahead, uint32_t seed)
{
	struct ndz_fetch_opts o = { chunks, slots, ahead, REDELAY, seed, NULL };
	struct ndz_fetch *f;

	assert_int_equal(ndz_fetch_create(&o, &f, NULL), 0);
	return f;
}

/* The block data: its chunk and block numbers, so misplaced copies show. */
static const uint8_t *data_of(uint32_t chunk, unsigned block)
{
	static uint8_t d[NDZ_BLOCK_SIZE];

	memset(d, 0, sizeof(d));
	memcpy(d, &chunk, sizeof(chunk));
	memcpy(d + 4, &block, sizeof(block));
	return d;
}

/* Deliver blocks [from, to) of chunk except those in skip (may be NULL); returns the
 * slot ndz_fetch_block reported complete, or -1. */
static int deliver(struct ndz_fetch *f, uint32_t chunk, unsigned from, unsigned to,
		   const uint8_t *skip, uint64_t now)
{
	int slot = -1;

	for (unsigned b = from; b < to; b++) {
		int r;

		if (skip && ndz_bit_test(skip, b))
			continue;
		r = ndz_fetch_block(f, chunk, b, data_of(chunk, b), now);
		if (r >= 0)
			slot = r;
	}
	return slot;
}

/* Delivers all of chunk at now, which completes a slot: that slot. */
static int whole(struct ndz_fetch *f, uint32_t chunk, uint64_t now)
{
	int slot = deliver(f, chunk, 0, NDZ_BLOCKS_PER_CHUNK, NULL, now);

	assert_true(slot >= 0);
	return slot;
}

/*
 * ndz_fetch_blocks: runs of blocks store what as many ndz_fetch_block calls would:
 * every block's bytes at its place, the counts alike, a duplicate run counted per
 * block, the chunk complete at its last run; runs out of range refused.
 */
static void test_blocks_runs(void **state)
{
	static uint8_t run[8 * NDZ_BLOCK_SIZE];
	struct ndz_fetch *f = make(2, 2, 1, 1);
	struct ndz_fetch_stats st;
	uint8_t *buf;
	int slot = -1;

	(void)state;
	assert_int_equal(ndz_fetch_blocks(f, 2, 0, 8, run, T0), -1);       /* past the image */
	assert_int_equal(ndz_fetch_blocks(f, 0, 1020, 8, run, T0), -1);    /* past the chunk */
	assert_int_equal(ndz_fetch_blocks(f, 0, 0, 0, run, T0), -1);
	/* block 3 alone first: the run 0-7 then goes block by block, the rest by runs */
	assert_int_equal(ndz_fetch_block(f, 0, 3, data_of(0, 3), T0), -1);
	for (unsigned first = 0; first < NDZ_BLOCKS_PER_CHUNK; first += 8) {
		int r;

		for (unsigned i = 0; i < 8; i++)
			memcpy(run + i * NDZ_BLOCK_SIZE, data_of(0, first + i), NDZ_BLOCK_SIZE);
		r = ndz_fetch_blocks(f, 0, first, 8, run, T0 + first);
		if (first + 8 < NDZ_BLOCKS_PER_CHUNK)
			assert_int_equal(r, -1);
		else
			slot = r;
	}
	assert_true(slot >= 0);
	buf = ndz_fetch_buf(f, slot);
	for (unsigned b = 0; b < NDZ_BLOCKS_PER_CHUNK; b++)
		assert_memory_equal(buf + (size_t)b * NDZ_BLOCK_SIZE, data_of(0, b), NDZ_BLOCK_SIZE);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.blocks, NDZ_BLOCKS_PER_CHUNK);
	assert_int_equal(st.dups, 1);          /* block 3 came twice */
	ndz_fetch_accept(f, slot);
	/* a run of a chunk complete and with the caller: duplicates, one each */
	assert_int_equal(ndz_fetch_blocks(f, 0, 8, 8, run, T0 + MS), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.dups, 9);
	ndz_fetch_free(f);
}

static void test_bad_options(void **state)
{
	struct ndz_fetch_opts o = { 0, 4, 2, REDELAY, 1, NULL };
	struct ndz_fetch *f = (struct ndz_fetch *)1;
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_fetch_create(&o, &f, NULL), NDZ_EINVAL);
	assert_null(f);
	o.chunks = 3;
	o.slots = 0;
	assert_int_equal(ndz_fetch_create(&o, &f, NULL), NDZ_EINVAL);
	o.slots = 2;
	o.request_ahead = 0;
	assert_int_equal(ndz_fetch_create(&o, &f, &e), NDZ_EINVAL);
	assert_int_equal(e.code, NDZ_EINVAL);
	assert_non_null(strstr(e.msg, "chunk cache: "));
	ndz_fetch_free(NULL);
}

/* request_ahead new chunks at first; each chunk requested once over the whole run. */
static void test_request_ahead_and_order(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(50, 8, 3, 12345);
	uint32_t seen[50] = { 0 };
	struct ndz_fetch_stats st;
	uint64_t now = T0;
	int sorted = 1;

	(void)state;
	assert_int_equal(ask(f, &s, now, 0), 3);
	assert_int_equal(s.n, 3);
	/* nothing more while those are on their way, within the re-request delay */
	assert_int_equal(ndz_fetch_requests(f, now + REDELAY / 2, 0, record, &s), 0);
	/* serve every request completely, as the server would */
	for (unsigned i = 0; i < s.n; i++) {
		int slot;

		assert_false(s.partial[i]);
		assert_true(s.chunk[i] < 50);
		seen[s.chunk[i]]++;
		if (i && s.chunk[i] < s.chunk[i - 1])
			sorted = 0;
		now += MS;
		slot = deliver(f, s.chunk[i], 0, NDZ_BLOCKS_PER_CHUNK, NULL, now);
		assert_true(slot >= 0);
		assert_int_equal(ndz_fetch_slot_chunk(f, slot), s.chunk[i]);
		assert_memory_equal(ndz_fetch_buf(f, slot) + 77 * NDZ_BLOCK_SIZE,
				    data_of(s.chunk[i], 77), NDZ_BLOCK_SIZE);
		ndz_fetch_accept(f, slot);
		ndz_fetch_done(f, slot);
		ndz_fetch_requests(f, now, 0, record, &s);
	}
	for (unsigned c = 0; c < 50; c++)
		assert_int_equal(seen[c], 1);
	assert_false(sorted);                  /* a random order, not 0, 1, 2, ... */
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.complete, 50);
	assert_int_equal(st.done, 50);
	assert_int_equal(st.blocks, 50ull * NDZ_BLOCKS_PER_CHUNK);
	assert_int_equal(st.dups, 0);
	ndz_fetch_free(f);
}

/* Another client's request covers ours: we keep quiet until the delay runs out. */
static void test_snoop_suppresses(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(4, 8, 4, 7);
	uint8_t all[NDZ_BITMAP_BYTES], some[NDZ_BITMAP_BYTES];

	(void)state;
	memset(&s, 0, sizeof(s));
	memset(all, 0xff, sizeof(all));
	memset(some, 0, sizeof(some));
	ndz_bit_set(some, 3);
	/* others asked for chunks 0 and 2 whole, and for one block of chunk 1 */
	ndz_fetch_snoop(f, 0, all, T0);
	ndz_fetch_snoop(f, 2, all, T0);
	ndz_fetch_snoop(f, 1, some, T0);
	ndz_fetch_snoop(f, 99, all, T0);       /* beyond the image: ignored */
	assert_int_equal(ndz_fetch_requests(f, T0 + MS, 0, record, &s), 2);
	assert_true((s.chunk[0] == 1 && s.chunk[1] == 3) || (s.chunk[0] == 3 && s.chunk[1] == 1));
	/* the snooped chunks never came: asked for once the delay has passed */
	assert_int_equal(ask(f, &s, T0 + REDELAY / 2, 0), 0);
	/* (1 and 3, asked for 1 ms later, are still within it) */
	assert_int_equal(ndz_fetch_requests(f, T0 + REDELAY + MS / 2, 0, record, &s), 2);
	assert_true((s.chunk[0] == 0 && s.chunk[1] == 2));
	assert_false(s.partial[0] || s.partial[1]);
	ndz_fetch_free(f);
}

/* The server went on with blocks missing: a PREQUEST for exactly those, unless someone
 * else's covers them. */
static void test_partial_request(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(2, 4, 1, 99);
	uint8_t lost[NDZ_BITMAP_BYTES], theirs[NDZ_BITMAP_BYTES];
	uint32_t a, b;
	uint64_t now = T0;
	int slot;

	(void)state;
	assert_int_equal(ask(f, &s, now, 0), 1);
	a = s.chunk[0];
	b = 1 - a;
	memset(lost, 0, sizeof(lost));
	ndz_bit_set(lost, 0);
	ndz_bit_set(lost, 500);
	ndz_bit_set(lost, 1023);
	assert_int_equal(deliver(f, a, 0, NDZ_BLOCKS_PER_CHUNK, lost, now), -1);
	assert_int_equal(ndz_fetch_kicked(f), 0);
	/* a block of another chunk: the server moved on */
	now += MS;
	assert_int_equal(ndz_fetch_block(f, b, 0, data_of(b, 0), now), -1);
	assert_int_equal(ndz_fetch_kicked(f), 1);
	assert_int_equal(ndz_fetch_kicked(f), 0);
	/* not at once: our own request went out 1 ms ago, the rest may still be coming */
	ask(f, &s, now, 0);
	assert_int_equal(s.n, 0);
	/* another client asks for a part of what we lack: not enough to keep quiet */
	memset(theirs, 0, sizeof(theirs));
	ndz_bit_set(theirs, 0);
	ndz_fetch_snoop(f, a, theirs, now);
	now += 25 * MS;
	ask(f, &s, now, 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.chunk[0], a);
	assert_true(s.partial[0]);
	assert_int_equal(ndz_bit_count(s.missing[0]), 3);
	assert_memory_equal(s.missing[0], lost, NDZ_BITMAP_BYTES);
	/* asked: not again within the delay, even though b's blocks keep coming */
	now += 30 * MS;
	ndz_fetch_block(f, b, 1, data_of(b, 1), now);
	ask(f, &s, now, 0);
	assert_int_equal(s.n, 0);
	/* someone else's request covering all three: we stay quiet past the delay */
	ndz_fetch_block(f, b, 2, data_of(b, 2), now + REDELAY);
	ndz_fetch_snoop(f, a, lost, now + REDELAY);
	ndz_fetch_requests(f, now + REDELAY + MS, 0, record, &s);
	assert_int_equal(s.n, 0);
	/* the missing blocks arrive; duplicates are counted, the chunk completes */
	assert_int_equal(ndz_fetch_block(f, a, 1, data_of(a, 1), now), -1);
	slot = deliver(f, a, 0, NDZ_BLOCKS_PER_CHUNK, NULL, now);
	assert_true(slot >= 0);
	{
		struct ndz_fetch_stats st;

		ndz_fetch_get_stats(f, &st);
		assert_int_equal(st.dups, 1 + NDZ_BLOCKS_PER_CHUNK - 3);
		assert_int_equal(st.blocks, NDZ_BLOCKS_PER_CHUNK + 3);   /* and b's 3 */
	}
	ndz_fetch_free(f);
}

static uint8_t *whole_chunk(uint32_t chunk);

/* SPANs of w (chunk's bytes) from off to end, each of span bytes but the last: the
 * slot the last completing one reported, or -1. */
static int spans(struct ndz_fetch *f, uint32_t chunk, const uint8_t *w, uint32_t off,
		 uint32_t end, uint32_t span, uint64_t now)
{
	int slot = -1;

	for (; off < end; off += span) {
		uint32_t len = end - off < span ? end - off : span;
		int r = ndz_fetch_span(f, chunk, off, len, w + off, now);

		if (r >= 0)
			slot = r;
	}
	return slot;
}

/*
 * SPANs: a chunk's bytes in runs cut anywhere on 32-byte granules. A block held in
 * part is missing (asked for whole) until its last granule comes; overlapping spans
 * store their bytes once more and count nothing twice; a block that comes again
 * counts one duplicate however it is cut; a span out of bounds is refused, nothing
 * stored. The chunk comes out byte for byte.
 */
static void test_spans(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(2, 4, 1, 99);
	struct ndz_fetch_stats st;
	uint8_t expect[NDZ_BITMAP_BYTES];
	uint8_t *w;
	uint32_t a, b;
	uint64_t now = T0;
	int slot;

	(void)state;
	/* refused: past the image, not on granules, empty, past the chunk */
	w = whole_chunk(0);
	assert_int_equal(ndz_fetch_span(f, 2, 0, 1024, w, now), -1);
	assert_int_equal(ndz_fetch_span(f, 0, 16, 1024, w, now), -1);
	assert_int_equal(ndz_fetch_span(f, 0, 0, 1000, w, now), -1);
	assert_int_equal(ndz_fetch_span(f, 0, 0, 0, w, now), -1);
	assert_int_equal(ndz_fetch_span(f, 0, NDZ_CHUNK_SIZE - 1024, 2048, w, now), -1);
	assert_int_equal(ndz_fetch_span(f, 0, 0xffffffe0u, 64, w, now), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.blocks + st.dups + st.no_room, 0);
	free(w);

	assert_int_equal(ask(f, &s, now, 0), 1);
	a = s.chunk[0];
	b = 1 - a;
	w = whole_chunk(a);
	/* block 5 up to granule 10 (spans of 1440 from 0 to 5440), block 6 from granule 2 on */
	assert_int_equal(spans(f, a, w, 0, 5 * 1024 + 320, 1440, now), -1);
	assert_int_equal(spans(f, a, w, 6 * 1024 + 64, NDZ_CHUNK_SIZE, 1440, now), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.blocks, NDZ_BLOCKS_PER_CHUNK - 2);
	assert_int_equal(st.dups, 0);
	/* the server moved on: blocks 5 and 6 are asked for, whole */
	now += MS;
	ndz_fetch_block(f, b, 0, data_of(b, 0), now);
	now += 25 * MS;
	ask(f, &s, now, 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.chunk[0], a);
	assert_true(s.partial[0]);
	memset(expect, 0, sizeof(expect));
	ndz_bit_set(expect, 5);
	ndz_bit_set(expect, 6);
	assert_memory_equal(s.missing[0], expect, NDZ_BITMAP_BYTES);
	/* one span over both, overlapping what each holds (granules 8-9 of 5, 2 of 6) */
	slot = ndz_fetch_span(f, a, 5 * 1024 + 256, 864, w + 5 * 1024 + 256, now);
	assert_true(slot >= 0);
	assert_memory_equal(ndz_fetch_buf(f, slot), w, NDZ_CHUNK_SIZE);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.blocks, NDZ_BLOCKS_PER_CHUNK + 1);   /* and b's block 0 */
	assert_int_equal(st.dups, 0);
	ndz_fetch_accept(f, slot);
	/* again, cut elsewhere: blocks 0, 1, 2 are one duplicate each */
	assert_int_equal(spans(f, a, w, 0, 2880, 1440, now), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.dups, 3);
	assert_int_equal(spans(f, a, w, 96, 992, 896, now), -1);    /* inside block 0 */
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.dups, 3);
	free(w);

	/* the other chunk, its blocks held in pieces only, and granule by granule */
	w = whole_chunk(b);
	/* (its block 0 came above) */
	assert_int_equal(spans(f, b, w, 1024 + 32, 1024 * 1024, 8928, now), -1);
	assert_int_equal(ndz_fetch_span(f, b, 0, NDZ_CHUNK_SIZE + 32, w, now), -1);  /* refused */
	slot = spans(f, b, w, 1024, 1024 + 32, 32, now);
	assert_true(slot >= 0);
	assert_memory_equal(ndz_fetch_buf(f, slot), w, NDZ_CHUNK_SIZE);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.blocks, 2 * NDZ_BLOCKS_PER_CHUNK);
	free(w);
	ndz_fetch_free(f);
}

/* want of test_wanted: chunk 1 in part (blocks 0-3 and 100-109), the others whole */
static uint8_t want_bits[NDZ_BITMAP_BYTES];
static int want_calls;

static const uint8_t *want_one(void *ctx, uint32_t chunk)
{
	(void)ctx;
	want_calls++;
	return chunk == 1 ? want_bits : NULL;
}

/*
 * A chunk wanted in part (issue 32): asked for by its wanted blocks (PREQUEST) from
 * the first request on; complete when they came (repairs ignored, the others
 * duplicates, never compared); a retry doubts only those; ndz_fetch_whole asks for
 * the rest and keeps what came; ndz_fetch_want turns a chunk filling whole into one
 * wanted in part; the stats count it.
 */
static void test_wanted(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(3, 4, 3, 5);
	struct ndz_fetch_stats st;
	uint8_t rep[NDZ_BLOCK_SIZE] = { 0 };
	uint64_t now = T0;
	int slot;

	(void)state;
	memset(want_bits, 0, sizeof(want_bits));
	for (unsigned b = 0; b < 4; b++)
		ndz_bit_set(want_bits, b);
	for (unsigned b = 100; b < 110; b++)
		ndz_bit_set(want_bits, b);
	ndz_fetch_set_want(f, want_one, NULL);
	ndz_fetch_set_repair(f, NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE);
	assert_int_equal(ask(f, &s, now, 0), 3);
	for (unsigned i = 0; i < s.n; i++) {
		assert_int_equal(s.partial[i], s.chunk[i] == 1);
		if (s.chunk[i] == 1)
			assert_memory_equal(s.missing[i], want_bits, NDZ_BITMAP_BYTES);
	}
	/* a repair of it is not taken; blocks outside the want are duplicates */
	assert_int_equal(ndz_fetch_repair(f, 1, NDZ_FEC_WHOLE, 0, rep, now), -1);
	assert_int_equal(deliver(f, 1, 0, 3, NULL, now), -1);
	assert_int_equal(deliver(f, 1, 500, 510, NULL, now), -1);
	/* lost: block 3 and 105; asked for again by those alone, never by repairs */
	assert_int_equal(deliver(f, 1, 100, 105, NULL, now), -1);
	assert_int_equal(deliver(f, 1, 106, 110, NULL, now), -1);
	assert_int_equal(ndz_fetch_block(f, 2, 0, data_of(2, 0), now), -1);  /* moved on */
	now += REDELAY + MS;
	ask(f, &s, now, 0);
	for (unsigned i = 0; i < s.n; i++)
		if (s.chunk[i] == 1) {
			assert_true(s.partial[i]);
			assert_false(s.repair[i]);
			assert_int_equal(ndz_bit_count(s.missing[i]), 2);
			assert_true(ndz_bit_test(s.missing[i], 3) && ndz_bit_test(s.missing[i], 105));
		}
	assert_int_equal(ndz_fetch_block(f, 1, 3, data_of(1, 3), now), -1);
	slot = ndz_fetch_block(f, 1, 105, data_of(1, 105), now);
	assert_true(slot >= 0);
	assert_non_null(ndz_fetch_slot_want(f, slot));
	assert_memory_equal(ndz_fetch_buf(f, slot) + 101 * NDZ_BLOCK_SIZE, data_of(1, 101),
			    NDZ_BLOCK_SIZE);
	ndz_fetch_hold(f, slot);
	/* a failed patch: only the wanted blocks are asked for again */
	assert_int_equal(ndz_fetch_retry(f, slot), 2);
	now += MS;
	ask(f, &s, now, 0);
	for (unsigned i = 0; i < s.n; i++)
		if (s.chunk[i] == 1)
			assert_memory_equal(s.missing[i], want_bits, NDZ_BITMAP_BYTES);
	slot = deliver(f, 1, 0, 4, NULL, now);
	assert_int_equal(slot, -1);
	slot = deliver(f, 1, 100, 110, NULL, now);
	assert_true(slot >= 0);
	/* the patch needs more after all: the rest of the chunk, what came kept */
	ndz_fetch_hold(f, slot);
	ndz_fetch_whole(f, slot);
	assert_null(ndz_fetch_slot_want(f, slot));
	now += MS;
	ask(f, &s, now, 0);
	for (unsigned i = 0; i < s.n; i++)
		if (s.chunk[i] == 1)
			assert_int_equal(ndz_bit_count(s.missing[i]), NDZ_BLOCKS_PER_CHUNK - 14);
	slot = deliver(f, 1, 4, 100, NULL, now);
	assert_int_equal(slot, -1);
	slot = deliver(f, 1, 110, NDZ_BLOCKS_PER_CHUNK, NULL, now);
	assert_true(slot >= 0);
	ndz_fetch_accept(f, slot);
	ndz_fetch_done(f, slot);
	/* chunk 0, filling whole, then wanted in part: complete with what it has */
	deliver(f, 0, 0, 200, NULL, now);
	slot = ndz_fetch_want(f, 0, want_bits);
	assert_true(slot >= 0);
	assert_non_null(ndz_fetch_slot_want(f, slot));
	ndz_fetch_accept(f, slot);
	ndz_fetch_done(f, slot);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.partial, 1);
	assert_int_equal(st.partial_blocks, 14);
	assert_int_equal(ndz_fetch_want(f, 0, want_bits), -1);     /* done */
	ndz_fetch_free(f);
}

/* A partly received chunk that stops arriving is asked for after the delay. */
static void test_stalled_chunk(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(1, 2, 1, 5);

	(void)state;
	ask(f, &s, T0, 0);
	assert_int_equal(s.n, 1);
	deliver(f, 0, 0, 600, NULL, T0 + MS);
	ask(f, &s, T0 + MS + REDELAY / 2, 0);
	assert_int_equal(s.n, 0);
	ndz_fetch_requests(f, T0 + 2 * MS + REDELAY, 0, record, &s);
	assert_int_equal(s.n, 1);
	assert_true(s.partial[0]);
	assert_int_equal(ndz_bit_count(s.missing[0]), NDZ_BLOCKS_PER_CHUNK - 600);
	ndz_fetch_free(f);
}

/* A silent server: everything on its way is asked for again at once. */
static void test_silent(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(10, 8, 3, 77);
	uint32_t first[3];

	(void)state;
	ask(f, &s, T0, 0);
	assert_int_equal(s.n, 3);
	deliver(f, s.chunk[0], 0, 10, NULL, T0 + MS);
	first[0] = s.chunk[0];
	first[1] = s.chunk[1];
	first[2] = s.chunk[2];
	/* the partial one by its bitmap, the two others whole, and (the partial one no
	 * longer counting as on its way) one new chunk */
	assert_int_equal(ask(f, &s, T0 + 2 * MS, 1), 4);
	assert_int_equal(s.chunk[0], first[0]);
	assert_int_equal(s.partial[0], 1);
	assert_int_equal(ndz_bit_count(s.missing[0]), NDZ_BLOCKS_PER_CHUNK - 10);
	assert_false(s.partial[1] || s.partial[2] || s.partial[3]);
	assert_true((s.chunk[1] == first[1] && s.chunk[2] == first[2]) ||
		    (s.chunk[1] == first[2] && s.chunk[2] == first[1]));
	assert_true(s.chunk[3] != first[0] && s.chunk[3] != first[1] && s.chunk[3] != first[2]);
	ndz_fetch_free(f);
}

/* A chunk that fails its checks is dropped and fetched again at once. */
static void test_reject(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(3, 4, 1, 3);
	struct ndz_fetch_stats st;
	uint32_t c;
	int slot;

	(void)state;
	ask(f, &s, T0, 0);
	c = s.chunk[0];
	slot = whole(f, c, T0 + MS);
	ndz_fetch_reject(f, slot);
	assert_int_equal(ndz_fetch_kicked(f), 1);
	ask(f, &s, T0 + 2 * MS, 0);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.chunk[0], c);
	assert_false(s.partial[0]);
	/* it comes again, now good */
	slot = whole(f, c, T0 + 3 * MS);
	ndz_fetch_accept(f, slot);
	/* accepted but not yet written: blocks of it are duplicates, no new slot */
	assert_int_equal(ndz_fetch_block(f, c, 5, data_of(c, 5), T0 + 4 * MS), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.complete, 1);
	assert_int_equal(st.done, 0);
	assert_int_equal(st.dups, 1);
	ndz_fetch_free(f);
}

/*
 * A chunk held while it is checked elsewhere: its blocks are duplicates, it is not
 * asked for, and it is not complete until accepted; rejected, it is asked for again.
 */
static void test_hold(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(3, 4, 1, 3);
	struct ndz_fetch_stats st;
	uint32_t c;
	int slot;

	(void)state;
	ask(f, &s, T0, 0);
	c = s.chunk[0];
	slot = whole(f, c, T0 + MS);
	ndz_fetch_hold(f, slot);
	assert_int_equal(ndz_fetch_block(f, c, 5, data_of(c, 5), T0 + 2 * MS), -1);
	ask(f, &s, T0 + 10000 * MS, 1);
	for (unsigned i = 0; i < s.n; i++)
		assert_true(s.chunk[i] != c);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.complete, 0);
	ndz_fetch_reject(f, slot);
	ask(f, &s, T0 + 10000 * MS + MS, 0);
	assert_true(s.n >= 1);
	assert_int_equal(s.chunk[0], c);
	slot = whole(f, c, T0 + 11000 * MS);
	ndz_fetch_hold(f, slot);
	ndz_fetch_accept(f, slot);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.complete, 1);
	ndz_fetch_done(f, slot);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.done, 1);
	ndz_fetch_free(f);
}

/* A full cache: blocks of a further chunk are dropped, and no request is made that
 * could not be stored. */
static void test_full_cache(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(5, 2, 4, 11);
	struct ndz_fetch_stats st;
	int s0, s1;

	(void)state;
	assert_int_equal(ask(f, &s, T0, 0), 2);   /* 2 slots */
	s0 = deliver(f, 0, 0, NDZ_BLOCKS_PER_CHUNK, NULL, T0 + MS);
	s1 = deliver(f, 1, 0, NDZ_BLOCKS_PER_CHUNK, NULL, T0 + MS);
	assert_true(s0 >= 0 && s1 >= 0 && s0 != s1);
	ndz_fetch_accept(f, s0);
	ndz_fetch_accept(f, s1);
	/* both slots wait for the writer: nothing to store more in */
	assert_int_equal(ndz_fetch_block(f, 2, 0, data_of(2, 0), T0 + 2 * MS), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.no_room, 1);
	assert_int_equal(ask(f, &s, T0 + 3 * MS + REDELAY, 1), 0);
	/* one is written: room for one more request */
	ndz_fetch_done(f, s0);
	assert_true(ndz_fetch_requests(f, T0 + 4 * MS + REDELAY, 0, record, &s) >= 1);
	ndz_fetch_free(f);
}

/* defer for the slots test: chunks at or past *front (a seed scan's) */
static int defer_from(void *ctx, uint32_t chunk)
{
	return chunk >= *(const uint32_t *)ctx;
}

/*
 * Others' blocks of chunks a seed scan has not reached fill at most a quarter of the
 * slots: a block of a chunk the scan found missing still finds one (it was dropped,
 * and asked for again, when they held them all).
 */
static void test_defer_slots(void **state)
{
	struct ndz_fetch *f = make(64, 8, 2, 3);
	struct ndz_fetch_stats st;
	uint32_t front = 8;

	(void)state;
	ndz_fetch_set_defer(f, defer_from, &front);
	for (uint32_t c = 8; c < 16; c++)
		assert_int_equal(ndz_fetch_block(f, c, 0, data_of(c, 0), T0), -1);
	ndz_fetch_get_stats(f, &st);
	/* 2 of 8 slots taken, the rest held back (not a slot each), none dropped */
	assert_int_equal(st.no_room, 0);
	assert_int_equal(st.held_back, 6);
	assert_int_equal(st.blocks, 2);
	/* chunks below the scan's front take the other slots */
	for (uint32_t c = 0; c < 6; c++)
		assert_int_equal(ndz_fetch_block(f, c, 0, data_of(c, 0), T0 + MS), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.no_room, 0);
	assert_int_equal(st.blocks, 8);
	/* the scan passes them: they are chunks like any other */
	front = 64;
	assert_int_equal(ndz_fetch_block(f, 20, 0, data_of(20, 0), T0 + 2 * MS), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.no_room, 1);           /* all 8 slots taken now */
	/* held back, no slot to go to: kept, with its blocks that come meanwhile */
	assert_int_equal(ndz_fetch_held_back(f), 10);
	assert_int_equal(ndz_fetch_release(f, 10), -1);
	assert_int_equal(ndz_fetch_block(f, 10, 1, data_of(10, 1), T0 + 3 * MS), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.no_room, 1);
	assert_int_equal(st.held_back, 7);
	assert_int_equal(ndz_fetch_held_back(f), 11);   /* 10 waits for a slot */
	/* a slot is free again: 10 takes it, with both blocks */
	assert_int_equal(ndz_fetch_have(f, 0), 1);
	assert_int_equal(ndz_fetch_held_back(f), 10);
	assert_int_equal(ndz_fetch_release(f, 10), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.blocks, 10);
	assert_int_equal(ndz_fetch_block(f, 10, 1, data_of(10, 1), T0 + 4 * MS), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.dups, 1);
	ndz_fetch_free(f);
}

/* defer for the next test: chunks at or past 8 not set in the bitmap ctx (decided) */
static int defer_undecided(void *ctx, uint32_t chunk)
{
	return chunk >= 8 && !ndz_bit_test(ctx, chunk);
}

/*
 * ndz_fetch_deferred names the deferred chunks others' blocks came for, the one with
 * the most blocks first, then the last one the cap dropped blocks of (once), so that
 * a seed scan decides them next; none once they are decided.
 */
static void test_deferred_next(void **state)
{
	struct ndz_fetch *f = make(64, 8, 2, 3);
	uint8_t decided[8] = { 0 };
	struct ndz_fetch_stats st;
	int slot;

	(void)state;
	assert_int_equal(ndz_fetch_deferred(f), -1);       /* nothing deferred */
	ndz_fetch_set_defer(f, defer_undecided, decided);
	assert_int_equal(ndz_fetch_deferred(f), -1);
	/* a chunk below the front: not deferred, never named */
	assert_int_equal(ndz_fetch_block(f, 3, 0, data_of(3, 0), T0), -1);
	assert_int_equal(ndz_fetch_deferred(f), -1);
	assert_int_equal(ndz_fetch_block(f, 12, 0, data_of(12, 0), T0), -1);
	assert_int_equal(ndz_fetch_block(f, 10, 0, data_of(10, 0), T0), -1);
	assert_int_equal(ndz_fetch_block(f, 10, 1, data_of(10, 1), T0), -1);
	assert_int_equal(ndz_fetch_deferred(f), 10);
	assert_int_equal(ndz_fetch_deferred(f), 10);       /* until it is decided */
	/* the cap (2 of 8 slots) refuses 20 and 21 a slot: their blocks are held back */
	assert_int_equal(ndz_fetch_block(f, 20, 0, data_of(20, 0), T0), -1);
	assert_int_equal(ndz_fetch_block(f, 21, 0, data_of(21, 0), T0), -1);
	assert_int_equal(ndz_fetch_block(f, 21, 0, data_of(21, 0), T0), -1);   /* again */
	assert_int_equal(ndz_fetch_block(f, 21, 1, data_of(21, 1), T0), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.no_room, 0);
	assert_int_equal(st.held_back, 3);
	assert_int_equal(st.dups, 1);
	assert_int_equal(st.blocks, 4);
	assert_int_equal(ndz_fetch_deferred(f), 10);       /* 2 blocks; 21 is not more */
	ndz_bit_set(decided, 10);
	assert_int_equal(ndz_fetch_deferred(f), 21);
	ndz_bit_set(decided, 21);
	assert_int_equal(ndz_fetch_deferred(f), 12);
	ndz_bit_set(decided, 12);
	assert_int_equal(ndz_fetch_deferred(f), 20);
	/* decided: the kept blocks stay, the chunk fills like any other */
	assert_int_equal(ndz_fetch_block(f, 10, 2, data_of(10, 2), T0 + MS), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.blocks, 5);
	/* 21 decided: its blocks go into a slot of its own, as received */
	assert_int_equal(ndz_fetch_held_back(f), 21);
	assert_int_equal(ndz_fetch_release(f, 21), -1);
	assert_int_equal(ndz_fetch_held_back(f), -1);      /* 20 is still deferred */
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.blocks, 7);
	assert_int_equal(st.no_room, 0);
	slot = deliver(f, 21, 0, NDZ_BLOCKS_PER_CHUNK, NULL, T0 + 2 * MS);
	assert_true(slot >= 0);
	assert_memory_equal(ndz_fetch_buf(f, slot) + NDZ_BLOCK_SIZE, data_of(21, 1), NDZ_BLOCK_SIZE);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.dups, 3);                      /* 0 and 1 came before */
	/* held by the target: what was held back of it is not needed */
	ndz_bit_set(decided, 20);
	assert_int_equal(ndz_fetch_have(f, 20), 1);
	assert_int_equal(ndz_fetch_held_back(f), 20);
	assert_int_equal(ndz_fetch_release(f, 20), -1);
	assert_int_equal(ndz_fetch_held_back(f), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.dups, 4);
	assert_int_equal(st.no_room, 0);
	/* 30 and 31 take the 2 deferred slots, 32 to 41 are held back */
	for (uint32_t c = 30; c < 42; c++)
		assert_int_equal(ndz_fetch_block(f, c, 0, data_of(c, 0), T0 + 4 * MS), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.held_back, 3 + 10);
	assert_int_equal(st.no_room, 0);
	assert_int_equal(ndz_fetch_deferred(f), 30);
	ndz_fetch_free(f);
}

/*
 * The held-back store's bounds with 8 slots (2 deferred): 8192 blocks (its 8 MiB
 * least), of 128 chunks at most; past either, blocks are dropped.
 */
static void test_held_back_bounds(void **state)
{
	struct ndz_fetch *f = make(512, 8, 2, 3);
	uint8_t decided[64] = { 0 };
	struct ndz_fetch_stats st;

	(void)state;
	ndz_fetch_set_defer(f, defer_undecided, decided);
	for (uint32_t c = 8; c < 8 + 2 + 128 + 1; c++)
		assert_int_equal(ndz_fetch_block(f, c, 0, data_of(c, 0), T0), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.held_back, 128);
	assert_int_equal(st.no_room, 1);          /* a chunk too many */
	/* blocks of chunks held already, up to 8192 in all */
	for (uint32_t c = 10; c < 18; c++)
		deliver(f, c, 1, NDZ_BLOCKS_PER_CHUNK, NULL, T0 + MS);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.held_back, 8192);
	assert_int_equal(st.no_room, 1 + 8 * 1023 - (8192 - 128));
	ndz_fetch_free(f);
}

/*
 * A deferred chunk the cap refused a slot, sent as SPANs of 1440 bytes (at MTU 1500
 * most blocks come in two parts): its edges are held back too, granule by granule,
 * and once the scan decides the chunk every block goes into a slot, byte for byte;
 * nothing is dropped and asked for again.
 */
static void test_held_back_spans(void **state)
{
	struct ndz_fetch *f = make(64, 8, 2, 3);
	struct ndz_fetch_stats st;
	uint32_t front = 8;
	uint8_t *w = whole_chunk(10);
	int slot;

	(void)state;
	ndz_fetch_set_defer(f, defer_from, &front);
	for (uint32_t c = 8; c < 10; c++)       /* the deferred slots, taken */
		assert_int_equal(ndz_fetch_block(f, c, 0, data_of(c, 0), T0), -1);
	assert_int_equal(spans(f, 10, w, 0, NDZ_CHUNK_SIZE, 1440, T0 + MS), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.held_back, NDZ_BLOCKS_PER_CHUNK);
	assert_int_equal(st.no_room, 0);
	/* the same bytes again, cut elsewhere: duplicates, nothing held twice */
	assert_int_equal(spans(f, 10, w, 64, 64 + 2880, 1440, T0 + 2 * MS), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.held_back, NDZ_BLOCKS_PER_CHUNK);
	/* decided: it takes a slot with all its blocks, complete */
	front = 64;
	assert_int_equal(ndz_fetch_held_back(f), 10);
	slot = ndz_fetch_release(f, 10);
	assert_true(slot >= 0);
	assert_memory_equal(ndz_fetch_buf(f, slot), w, NDZ_CHUNK_SIZE);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.blocks, 2 + NDZ_BLOCKS_PER_CHUNK);
	free(w);
	ndz_fetch_free(f);
}

/* Out-of-range blocks are refused without touching anything. */
static void test_out_of_range(void **state)
{
	struct ndz_fetch *f = make(2, 2, 1, 1);
	struct ndz_fetch_stats st;

	(void)state;
	assert_int_equal(ndz_fetch_block(f, 2, 0, data_of(2, 0), T0), -1);
	assert_int_equal(ndz_fetch_block(f, 0, NDZ_BLOCKS_PER_CHUNK, data_of(0, 0), T0), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.blocks + st.dups + st.no_room, 0);
	ndz_fetch_free(f);
}

/* The chunk data_of() makes, whole, for computing repairs. */
static uint8_t *whole_chunk(uint32_t chunk)
{
	uint8_t *c = malloc(NDZ_CHUNK_SIZE);

	assert_non_null(c);
	for (unsigned b = 0; b < NDZ_BLOCKS_PER_CHUNK; b++)
		memcpy(c + (size_t)b * NDZ_BLOCK_SIZE, data_of(chunk, b), NDZ_BLOCK_SIZE);
	return c;
}

/*
 * The first chunk asked for (returned) arrives but for blocks 0, 8 and 16 (stripe
 * 0), 3 (stripe 3) and 1023 (stripe 7); then a block of the other chunk: the
 * server moved on. s is left empty.
 */
static uint32_t five_lost(struct ndz_fetch *f, struct sent *s, uint64_t now)
{
	uint8_t lost[NDZ_BITMAP_BYTES];
	uint32_t a;

	memset(s, 0, sizeof(*s));
	assert_int_equal(ndz_fetch_requests(f, now, 0, record, s), 1);
	assert_false(s->repair[0] || s->partial[0]);   /* a new chunk: the whole of it */
	a = s->chunk[0];
	memset(lost, 0, sizeof(lost));
	ndz_bit_set(lost, 0);
	ndz_bit_set(lost, 8);
	ndz_bit_set(lost, 16);
	ndz_bit_set(lost, 3);
	ndz_bit_set(lost, 1023);
	assert_int_equal(deliver(f, a, 0, NDZ_BLOCKS_PER_CHUNK, lost, now), -1);
	ndz_fetch_block(f, 1 - a, 0, data_of(1 - a, 0), now);
	s->n = 0;
	return a;
}

/* five_lost's chunk a is whole in slot, its 5 blocks rebuilt; frees whole. */
static void rebuilt(struct ndz_fetch *f, int slot, uint32_t a, uint8_t *whole, uint64_t dups)
{
	struct ndz_fetch_stats st;

	assert_true(slot >= 0);
	assert_int_equal(ndz_fetch_slot_chunk(f, slot), a);
	assert_memory_equal(ndz_fetch_buf(f, slot), whole, NDZ_CHUNK_SIZE);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.decoded, 5);
	assert_int_equal(st.dups, dups);
	free(whole);
}

/*
 * With repair on, the losses of a chunk are asked for as repair counts per stripe,
 * other clients' repair requests that cover ours silence us, and repairs (any
 * indexes) rebuild exactly the lost blocks.
 */
static void test_repair_request_and_decode(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(2, 4, 1, 99);
	struct ndz_fec *fec;
	uint8_t rep[NDZ_BLOCK_SIZE], cover[NDZ_FEC_SETS];
	uint8_t *whole;
	struct ndz_fetch_stats st;
	uint32_t a, b;
	uint64_t now = T0;
	int slot;

	(void)state;
	assert_int_equal(ndz_fec_create(&fec, NULL), 0);
	ndz_fetch_set_repair(f, 1);
	a = five_lost(f, &s, now);
	b = 1 - a;
	whole = whole_chunk(a);
	now += 25 * MS;
	ndz_fetch_requests(f, now, 0, record, &s);
	assert_int_equal(s.n, 1);
	assert_int_equal(s.chunk[0], a);
	assert_true(s.repair[0]);
	{
		static const uint8_t want[NDZ_FEC_STRIPES] = { 3, 0, 0, 1, 0, 0, 0, 1 };

		assert_memory_equal(s.need[0], want, NDZ_FEC_STRIPES);
	}
	/* another client's request that asks for less in stripe 0 does not silence us */
	memset(cover, 4, sizeof(cover));
	cover[0] = 2;
	ndz_fetch_block(f, b, 1, data_of(b, 1), now + REDELAY);
	ndz_fetch_snoop_repairs(f, a, cover, now + REDELAY);
	ask(f, &s, now + REDELAY + MS, 0);
	assert_int_equal(s.n, 1);
	assert_true(s.repair[0]);
	/* one that asks for at least our needs in every stripe does, past the delay */
	now += REDELAY + MS;
	cover[0] = 3;
	ndz_fetch_snoop_repairs(f, a, cover, now + REDELAY);
	ndz_fetch_block(f, b, 2, data_of(b, 2), now + REDELAY);
	ask(f, &s, now + REDELAY + MS, 0);
	assert_int_equal(s.n, 0);
	/* repairs 5, 9 and 77 of stripe 0 (any 3), 0 of stripe 3, 126 of stripe 7 */
	ndz_fec_encode(fec, whole, 0, 5, rep);
	assert_int_equal(ndz_fetch_repair(f, a, 0, 5, rep, now), -1);
	assert_int_equal(ndz_fetch_repair(f, a, 0, 5, rep, now), -1);       /* a duplicate */
	ndz_fec_encode(fec, whole, 0, 9, rep);
	assert_int_equal(ndz_fetch_repair(f, a, 0, 9, rep, now), -1);
	ndz_fec_encode(fec, whole, 0, 77, rep);
	assert_int_equal(ndz_fetch_repair(f, a, 0, 77, rep, now), -1);     /* stripe 0 rebuilt */
	ndz_fec_encode(fec, whole, 0, 78, rep);
	assert_int_equal(ndz_fetch_repair(f, a, 0, 78, rep, now), -1);     /* not needed now */
	ndz_fec_encode(fec, whole, 3, 0, rep);
	assert_int_equal(ndz_fetch_repair(f, a, 3, 0, rep, now), -1);
	assert_int_equal(ndz_fetch_repair(f, a, NDZ_FEC_SETS, 0, rep, now), -1); /* no such set */
	assert_int_equal(ndz_fetch_repair(f, a, NDZ_FEC_WHOLE, NDZ_FEC_WREPAIRS, rep, now), -1);
	assert_int_equal(ndz_fetch_repair(f, a, 7, NDZ_FEC_REPAIRS, rep, now), -1);
	ndz_fec_encode(fec, whole, 7, 126, rep);
	slot = ndz_fetch_repair(f, a, 7, 126, rep, now);
	rebuilt(f, slot, a, whole, 2);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.repairs, 5);
	ndz_fec_free(fec);
	ndz_fetch_free(f);
}

/*
 * Repair requests heard from others count together per stripe (the server sends
 * the most asked for in each), and with repair on a client asks a random 0-16 ms
 * after it sees the server move on.
 */
static void test_repair_requests_add_up(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(2, 4, 1, 5);
	uint8_t lost[NDZ_BITMAP_BYTES], one[NDZ_FEC_SETS], other[NDZ_FEC_SETS];
	uint32_t a, b;
	uint64_t now = T0, asked = 0;

	(void)state;
	ndz_fetch_set_repair(f, 1);
	assert_int_equal(ask(f, &s, now, 0), 1);
	a = s.chunk[0];
	b = 1 - a;
	memset(lost, 0, sizeof(lost));
	ndz_bit_set(lost, 0);                  /* stripe 0 */
	ndz_bit_set(lost, 5);                  /* stripe 5 */
	deliver(f, a, 0, NDZ_BLOCKS_PER_CHUNK, lost, now);
	ndz_fetch_block(f, b, 0, data_of(b, 0), now);  /* the server moved on */
	memset(one, 0, sizeof(one));
	memset(other, 0, sizeof(other));
	one[0] = 2;
	other[5] = 1;
	other[2] = 3;
	ndz_fetch_snoop_repairs(f, a, one, now + MS);
	ask(f, &s, now + 40 * MS, 0);
	assert_int_equal(s.n, 1);              /* stripe 5 not covered yet: we ask */
	/* later, past the delay, two requests together cover us: we stay quiet */
	now += 40 * MS + REDELAY + MS;
	ndz_fetch_block(f, a, 0, data_of(a, 0), now);
	ndz_fetch_block(f, b, 1, data_of(b, 1), now);  /* moved on again */
	ndz_fetch_snoop_repairs(f, a, one, now);
	ndz_fetch_snoop_repairs(f, a, other, now + MS);
	ask(f, &s, now + 40 * MS, 0);
	for (unsigned i = 0; i < s.n; i++)
		assert_int_not_equal(s.chunk[i], a);   /* (b, which we moved off, is asked for) */
	/* the stagger: once the server moves on, we ask up to 16 ms later (seed 5: not at once) */
	now += REDELAY + 50 * MS;
	ndz_fetch_block(f, a, 1, data_of(a, 1), now);
	ndz_fetch_block(f, b, 2, data_of(b, 2), now);
	for (uint64_t t = now; t <= now + 40 * MS && !asked; t += MS) {
		ask(f, &s, t, 0);
		for (unsigned i = 0; i < s.n; i++)
			if (s.chunk[i] == a)
				asked = t - now;
	}
	assert_true(asked >= 1 * MS && asked <= 16 * MS);
	ndz_fetch_free(f);
}

/*
 * A client with repairs features loses the blocks in lost of the first chunk it
 * asks for; the server moves on. Its next request goes to s (one, checked).
 */
static void ask_after_losses(unsigned features, const uint8_t *lost, struct sent *s)
{
	struct ndz_fetch *f = make(2, 4, 1, 7);
	uint64_t now = T0;
	uint32_t a;

	ndz_fetch_set_repair(f, features);
	memset(s, 0, sizeof(*s));
	ndz_fetch_requests(f, now, 0, record, s);
	a = s->chunk[0];
	deliver(f, a, 0, NDZ_BLOCKS_PER_CHUNK, lost, now);
	ndz_fetch_block(f, 1 - a, 0, data_of(1 - a, 0), now);
	s->n = 0;
	ndz_fetch_requests(f, now + 40 * MS, 0, record, s);
	assert_int_equal(s->n, 1);
	assert_int_equal(s->chunk[0], a);
	ndz_fetch_free(f);
}

/* More than 32 lost in a stripe: the blocks themselves are asked for. */
static void test_repair_many_lost(void **state)
{
	static struct sent s;
	uint8_t lost[NDZ_BITMAP_BYTES];

	(void)state;
	memset(lost, 0, sizeof(lost));
	for (unsigned j = 0; j < 33; j++)
		ndz_bit_set(lost, ndz_fec_block(2, j));
	ask_after_losses(NDZ_FEAT_REPAIR, lost, &s);
	assert_false(s.repair[0]);
	assert_true(s.partial[0]);
	assert_memory_equal(s.missing[0], lost, NDZ_BITMAP_BYTES);
}

/*
 * Whole-chunk repairs: a client that lacks a few blocks anywhere asks for that
 * many repairs of the whole chunk; a request heard for at least as many silences
 * it; repairs of the whole chunk and of a stripe together rebuild the chunk.
 */
static void test_whole_repairs(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(2, 4, 1, 3);
	struct ndz_fec *fec;
	uint8_t rep[NDZ_BLOCK_SIZE], cover[NDZ_FEC_SETS];
	uint8_t *whole;
	uint32_t a, b;
	uint64_t now = T0;
	int slot = -1;

	(void)state;
	assert_int_equal(ndz_fec_create(&fec, NULL), 0);
	ndz_fetch_set_repair(f, NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE);
	a = five_lost(f, &s, now);
	b = 1 - a;
	whole = whole_chunk(a);
	now += 40 * MS;
	ndz_fetch_requests(f, now, 0, record, &s);
	assert_int_equal(s.n, 1);
	assert_true(s.repair[0]);
	{
		static const uint8_t want[NDZ_FEC_SETS] = { 0, 0, 0, 0, 0, 0, 0, 0, 5 };

		assert_memory_equal(s.need[0], want, NDZ_FEC_SETS);
	}
	/* others asking for 4, then 5 whole-chunk repairs: the second covers us */
	now += REDELAY + MS;
	memset(cover, 0, sizeof(cover));
	cover[NDZ_FEC_WHOLE] = 4;
	ndz_fetch_block(f, b, 1, data_of(b, 1), now);
	ndz_fetch_snoop_repairs(f, a, cover, now);
	ask(f, &s, now + 40 * MS, 0);
	assert_int_equal(s.n, 1);
	now += 40 * MS + REDELAY + MS;
	ndz_fetch_block(f, b, 2, data_of(b, 2), now);
	cover[NDZ_FEC_WHOLE] = 5;
	ndz_fetch_snoop_repairs(f, a, cover, now);
	ask(f, &s, now + 40 * MS, 0);
	assert_int_equal(s.n, 0);
	/* one repair of stripe 0 and whole-chunk repairs 10, 11, 200 (and 12): four
	 * equations for the five lost blocks are not enough; the fifth completes it */
	ndz_fec_encode(fec, whole, 0, 40, rep);
	assert_int_equal(ndz_fetch_repair(f, a, 0, 40, rep, now), -1);
	ndz_fec_wencode(fec, whole, 10, rep, NULL);
	assert_int_equal(ndz_fetch_repair(f, a, NDZ_FEC_WHOLE, 10, rep, now), -1);
	assert_int_equal(ndz_fetch_repair(f, a, NDZ_FEC_WHOLE, 10, rep, now), -1); /* a duplicate */
	ndz_fec_wencode(fec, whole, 11, rep, NULL);
	assert_int_equal(ndz_fetch_repair(f, a, NDZ_FEC_WHOLE, 11, rep, now), -1);
	ndz_fec_wencode(fec, whole, 200, rep, NULL);
	assert_int_equal(ndz_fetch_repair(f, a, NDZ_FEC_WHOLE, 200, rep, now), -1);
	/* still one short: the request now asks for one whole-chunk repair */
	ndz_fetch_block(f, b, 3, data_of(b, 3), now + REDELAY + MS);
	ask(f, &s, now + 2 * REDELAY + 2 * MS, 0);
	{
		unsigned k = s.n;      /* (b, which the repairs moved us off, is asked for too) */

		for (unsigned i = 0; i < s.n; i++)
			if (s.chunk[i] == a)
				k = i;
		assert_true(k < s.n);
		assert_true(s.repair[k]);
		assert_int_equal(s.need[k][NDZ_FEC_WHOLE], 1);
	}
	ndz_fec_wencode(fec, whole, 12, rep, NULL);
	slot = ndz_fetch_repair(f, a, NDZ_FEC_WHOLE, 12, rep, now);
	if (slot < 0) {
		/* (the rows were dependent, as happens about once in 255: one more) */
		ndz_fec_wencode(fec, whole, 13, rep, NULL);
		slot = ndz_fetch_repair(f, a, NDZ_FEC_WHOLE, 13, rep, now);
	}
	rebuilt(f, slot, a, whole, 1);
	ndz_fec_free(fec);
	ndz_fetch_free(f);
}

/* Past 32 lost blocks, whole-chunk repairs are not asked for: stripes' (or blocks). */
static void test_whole_many_lost(void **state)
{
	static struct sent s;
	uint8_t lost[NDZ_BITMAP_BYTES];
	unsigned sum = 0;

	(void)state;
	memset(lost, 0, sizeof(lost));
	for (unsigned j = 0; j < 32; j++)
		ndz_bit_set(lost, j * 31);
	ask_after_losses(NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE, lost, &s);
	assert_true(s.repair[0]);
	assert_int_equal(s.need[0][NDZ_FEC_WHOLE], 32);
	ndz_bit_set(lost, 1023);               /* 33 */
	ask_after_losses(NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE, lost, &s);
	assert_true(s.repair[0]);
	assert_int_equal(s.need[0][NDZ_FEC_WHOLE], 0);
	for (unsigned st = 0; st < NDZ_FEC_STRIPES; st++)
		sum += s.need[0][st];
	assert_int_equal(sum, 33);
}

/*
 * A forged block that came before the real one: the chunk fails its check, and only
 * that block is fetched again. A failure with nothing in doubt fetches every block
 * again, each compared with the copy held, so that the next failure names the forged
 * block; at the fifth failure the chunk is dropped and asked for whole.
 */
static void test_retry_contested(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(3, 4, 1, 11);
	uint8_t forged[NDZ_BLOCK_SIZE];
	uint32_t c;
	int slot;

	(void)state;
	memset(&s, 0, sizeof(s));
	memset(forged, 0x5a, sizeof(forged));
	ndz_fetch_requests(f, T0, 0, record, &s);
	c = s.chunk[0];
	assert_int_equal(ndz_fetch_block(f, c, 5, forged, T0), -1);
	slot = whole(f, c, T0 + MS);
	assert_memory_equal(ndz_fetch_buf(f, slot) + 5 * NDZ_BLOCK_SIZE, forged, NDZ_BLOCK_SIZE);
	ndz_fetch_hold(f, slot);
	assert_int_equal(ndz_fetch_retry(f, slot), 1);
	assert_int_equal(ndz_fetch_kicked(f), 1);
	ask(f, &s, T0 + 2 * MS, 0);
	assert_true(s.n >= 1);         /* (and a new chunk: a partial one is not counted ahead) */
	assert_int_equal(s.chunk[0], c);
	assert_true(s.partial[0]);
	assert_int_equal(ndz_bit_count(s.missing[0]), 1);
	assert_true(ndz_bit_test(s.missing[0], 5));
	slot = deliver(f, c, 5, 6, NULL, T0 + 3 * MS);
	assert_true(slot >= 0);
	assert_memory_equal(ndz_fetch_buf(f, slot) + 5 * NDZ_BLOCK_SIZE, data_of(c, 5),
			    NDZ_BLOCK_SIZE);
	/* block 5 differed from the copy before it: in doubt for the next failure too */
	ndz_fetch_hold(f, slot);
	assert_int_equal(ndz_fetch_retry(f, slot), 1);
	slot = deliver(f, c, 5, 6, NULL, T0 + 3 * MS);
	assert_true(slot >= 0);
	/* failing with nothing in doubt: every block again, compared with this copy */
	ndz_fetch_hold(f, slot);
	assert_int_equal(ndz_fetch_retry(f, slot), 2);
	ask(f, &s, T0 + 4 * MS, 0);
	assert_true(s.n >= 1);
	assert_int_equal(s.chunk[0], c);
	assert_true(s.partial[0]);
	assert_int_equal(ndz_bit_count(s.missing[0]), NDZ_BLOCKS_PER_CHUNK);
	/* a forged block 9 first this time: it differs from the copy, so it is in doubt */
	assert_int_equal(ndz_fetch_block(f, c, 9, forged, T0 + 5 * MS), -1);
	slot = -1;
	for (unsigned b = 0; b < NDZ_BLOCKS_PER_CHUNK; b++)
		if (b != 9 && (slot = ndz_fetch_block(f, c, b, data_of(c, b), T0 + 5 * MS)) >= 0)
			break;
	assert_true(slot >= 0);
	ndz_fetch_hold(f, slot);
	assert_int_equal(ndz_fetch_retry(f, slot), 1);
	ask(f, &s, T0 + 6 * MS, 0);
	assert_int_equal(s.chunk[0], c);
	assert_int_equal(ndz_bit_count(s.missing[0]), 1);
	assert_true(ndz_bit_test(s.missing[0], 9));
	slot = deliver(f, c, 9, 10, NULL, T0 + 7 * MS);
	assert_true(slot >= 0);
	assert_memory_equal(ndz_fetch_buf(f, slot) + 9 * NDZ_BLOCK_SIZE, data_of(c, 9),
			    NDZ_BLOCK_SIZE);
	/* the fifth failure in the slot: dropped, asked for whole */
	ndz_fetch_hold(f, slot);
	assert_int_equal(ndz_fetch_retry(f, slot), 0);
	ask(f, &s, T0 + 9 * MS, 0);
	assert_true(s.n >= 1);
	assert_int_equal(s.chunk[0], c);
	assert_false(s.partial[0]);
	ndz_fetch_free(f);
}

/*
 * Others asked for every repair of every stripe of a chunk we have no block of (a
 * hostile host can): a stripe has 127 repairs for 128 blocks, so we must ask for
 * blocks, not for repairs that can only come as duplicates; one block a stripe
 * then completes the chunk.
 */
static void test_all_repairs_no_blocks(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(2, 4, 1, 21);
	uint64_t now = T0;
	int slot = -1;
	uint32_t c;

	(void)state;
	memset(&s, 0, sizeof(s));
	ndz_fetch_set_repair(f, NDZ_FEAT_REPAIR);
	ndz_fetch_requests(f, now, 0, record, &s);
	c = s.chunk[0];
	for (unsigned st = 0; st < NDZ_FEC_STRIPES; st++)
		for (unsigned r = 0; r < NDZ_FEC_REPAIRS; r++)
			assert_int_equal(ndz_fetch_repair(f, c, st, r, data_of(c, r), now), -1);
	now += REDELAY + MS;
	ask(f, &s, now, 0);
	assert_true(s.n >= 1);
	assert_int_equal(s.chunk[0], c);
	assert_false(s.repair[0]);
	assert_true(s.partial[0]);
	assert_int_equal(ndz_bit_count(s.missing[0]), NDZ_BLOCKS_PER_CHUNK);
	for (unsigned st = 0; st < NDZ_FEC_STRIPES; st++) {
		unsigned b = ndz_fec_block(st, 0);

		slot = ndz_fetch_block(f, c, b, data_of(c, b), now);
	}
	assert_true(slot >= 0);
	assert_int_equal(ndz_fetch_slot_chunk(f, slot), c);
	ndz_fetch_free(f);
}

/* What a JOIN_REPLY may announce: no more chunks than sectors, no more than the target. */
static void test_check_join(void **state)
{
	struct ndz_join_info i;
	struct ndz_error e = { 0 };

	(void)state;
	memset(&i, 0, sizeof(i));
	i.chunks = 1;
	i.image_bytes = NDZ_CHUNK_SIZE;
	assert_int_equal(ndz_fetch_check_join(&i, UINT64_MAX, 0, NULL), 0);     /* empty source */
	i.chunks = 2;
	i.image_bytes = 2ull * NDZ_CHUNK_SIZE;
	i.source_bytes = 512;
	assert_int_equal(ndz_fetch_check_join(&i, UINT64_MAX, 0, NULL), NDZ_ERANGE);
	i.source_bytes = 513;                  /* two sectors, the second one partly */
	assert_int_equal(ndz_fetch_check_join(&i, UINT64_MAX, 0, NULL), 0);
	assert_int_equal(ndz_fetch_check_join(&i, 513, 0, NULL), 0);
	assert_int_equal(ndz_fetch_check_join(&i, 512, 0, &e), NDZ_ETOOSMALL);
	assert_string_equal(e.msg, "an image of 513 bytes: more than the target holds (512 bytes)");
	/* with --raw the target holds the image itself */
	assert_int_equal(ndz_fetch_check_join(&i, 513, 1, NULL), NDZ_ETOOSMALL);
	assert_int_equal(ndz_fetch_check_join(&i, 2ull * NDZ_CHUNK_SIZE, 1, NULL), 0);
	/* the forger's: 100 million chunks of 100 TB against 64 MiB; no size near 2^64 wraps */
	i.chunks = 100000000u;
	i.image_bytes = (uint64_t)i.chunks * NDZ_CHUNK_SIZE;
	i.source_bytes = i.image_bytes;
	assert_int_equal(ndz_fetch_check_join(&i, 64ull << 20, 0, NULL), NDZ_ETOOSMALL);
	i.source_bytes = 1048576;
	assert_int_equal(ndz_fetch_check_join(&i, UINT64_MAX, 0, NULL), NDZ_ERANGE);
	i.chunks = UINT32_MAX;
	i.source_bytes = UINT64_MAX;
	assert_int_equal(ndz_fetch_check_join(&i, UINT64_MAX, 0, NULL), 0);
	assert_int_equal(ndz_fetch_check_join(&i, UINT64_MAX - 1, 0, NULL), NDZ_ETOOSMALL);
}

static long max_rss_kib(void)
{
	struct rusage ru;

	assert_int_equal(getrusage(RUSAGE_SELF, &ru), 0);
	return ru.ru_maxrss;
}

/*
 * A cache for the largest chunk count a JOIN_REPLY can announce: made at once, and
 * what it touches is a few pages, not memory per announced chunk; it asks for chunks
 * of the image as usual, each once.
 */
static void test_huge_count(void **state)
{
	static struct sent s;
	const uint32_t counts[] = { UINT32_MAX, 300000000u };
	long before = max_rss_kib();

	(void)state;
	for (unsigned k = 0; k < 2; k++) {
		struct ndz_fetch *f = make(counts[k], 64, 8, 99 + k);
		uint8_t all[NDZ_BITMAP_BYTES];
		uint64_t now = T0;

		memset(&s, 0, sizeof(s));
		memset(all, 0xff, sizeof(all));
		assert_int_equal(ndz_fetch_requests(f, now, 0, record, &s), 8);
		/* others' requests for many chunks, and blocks of chunks nobody asked for */
		for (uint32_t i = 0; i < 100000; i++) {
			ndz_fetch_snoop(f, i * 40961u % counts[k], all, now);
			ndz_fetch_block(f, i * 7919u % counts[k], i % 1024, NULL, now);
		}
		for (int t = 0; t < 50; t++) {
			now += REDELAY + MS;
			ndz_fetch_requests(f, now, t & 1, record, &s);
		}
		for (unsigned i = 0; i < s.n; i++)
			assert_true(s.chunk[i] < counts[k]);
		ndz_fetch_free(f);
	}
	/* the old cache touched 17 bytes an announced chunk: 5 GB for 300 million
	 * (AddressSanitizer writes the shadow of what is allocated: not there) */
#ifndef __SANITIZE_ADDRESS__
	assert_true(max_rss_kib() - before < 64 * 1024);
#else
	(void)before;
#endif
}

/* Every chunk asked for once, whatever the count (the order is computed, not stored). */
static void test_order_any_count(void **state)
{
	static struct sent s;
	const uint32_t counts[] = { 1, 2, 3, 7, 64, 65, 1000, 1025 };

	(void)state;
	for (unsigned k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
		struct ndz_fetch *f = make(counts[k], 4, 2, k + 1);
		static uint32_t seen[1025];
		struct ndz_fetch_stats st;
		uint64_t now = T0;

		memset(&s, 0, sizeof(s));
		memset(seen, 0, sizeof(seen));
		ndz_fetch_requests(f, now, 0, record, &s);
		for (unsigned i = 0; i < s.n; i++) {
			int slot;

			assert_true(s.chunk[i] < counts[k]);
			seen[s.chunk[i]]++;
			now += MS;
			slot = deliver(f, s.chunk[i], 0, NDZ_BLOCKS_PER_CHUNK, NULL, now);
			assert_true(slot >= 0);
			ndz_fetch_accept(f, slot);
			ndz_fetch_done(f, slot);
			ndz_fetch_requests(f, now, 0, record, &s);
		}
		for (unsigned c = 0; c < counts[k]; c++)
			assert_int_equal(seen[c], 1);
		ndz_fetch_get_stats(f, &st);
		assert_int_equal(st.done, counts[k]);
		ndz_fetch_free(f);
	}
}

/*
 * A flood of others' requests for distinct chunks (a hostile host's) neither grows
 * the cache nor loses a chunk: those it does not keep, we ask for in our turn.
 */
static void test_snoop_flood(void **state)
{
	static struct sent s;
	struct ndz_fetch *f = make(3000, 4, 2, 5);
	static uint32_t seen[3000];
	struct ndz_fetch_stats st;
	uint8_t all[NDZ_BITMAP_BYTES];
	uint64_t now = T0;

	(void)state;
	memset(&s, 0, sizeof(s));
	memset(seen, 0, sizeof(seen));
	memset(all, 0xff, sizeof(all));
	for (uint32_t c = 0; c < 3000; c++)
		ndz_fetch_snoop(f, c, all, now);
	/* serve whatever is asked for, one chunk at a time, until all is done */
	for (unsigned i = 0, guard = 0; guard < 20000; guard++) {
		ndz_fetch_get_stats(f, &st);
		if (st.done == 3000)
			break;
		now += REDELAY + MS;
		ndz_fetch_requests(f, now, 0, record, &s);
		for (; i < s.n; i++) {
			int slot = deliver(f, s.chunk[i], 0, NDZ_BLOCKS_PER_CHUNK, NULL, now);

			if (slot < 0)
				continue;      /* asked again before it came: a duplicate */
			seen[s.chunk[i]]++;
			ndz_fetch_accept(f, slot);
			ndz_fetch_done(f, slot);
		}
		if (s.n > 3500)
			s.n = i = 0;
	}
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.done, 3000);
	for (unsigned c = 0; c < 3000; c++)
		assert_int_equal(seen[c], 1);
	ndz_fetch_free(f);
}

/*
 * With a buffer pool: chunks are received into its buffers; with all of them taken,
 * a new chunk's blocks are dropped as with no free slot; a buffer taken from an
 * accepted chunk is the chunk, and given back it serves the next one.
 */
static void test_pool(void **state)
{
	struct ndz_fetch_opts o = { 3, 3, 3, REDELAY, 1, NULL };
	struct ndz_fetch_stats st;
	struct ndz_bufpool *pool;
	struct ndz_fetch *f;
	uint8_t *b;
	int s0, s1;

	(void)state;
	assert_int_equal(ndz_bufpool_create(NDZ_CHUNK_SIZE, 2, &pool, NULL), 0);
	o.pool = pool;
	assert_int_equal(ndz_fetch_create(&o, &f, NULL), 0);
	s0 = deliver(f, 0, 0, NDZ_BLOCKS_PER_CHUNK, NULL, 1);
	s1 = deliver(f, 1, 0, NDZ_BLOCKS_PER_CHUNK, NULL, 2);
	assert_true(s0 >= 0 && s1 >= 0);
	assert_int_equal(ndz_fetch_block(f, 2, 0, data_of(2, 0), 3), -1);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.no_room, 1);
	ndz_fetch_accept(f, s0);
	b = ndz_fetch_take_buf(f, s0);
	assert_non_null(b);
	assert_null(ndz_fetch_buf(f, s0));
	assert_memory_equal(b + 7 * NDZ_BLOCK_SIZE, data_of(0, 7), NDZ_BLOCK_SIZE);
	ndz_fetch_done(f, s0);
	ndz_bufpool_put(pool, b);
	assert_true(deliver(f, 2, 0, NDZ_BLOCKS_PER_CHUNK, NULL, 4) >= 0);
	ndz_fetch_free(f);
	ndz_bufpool_free(pool);
	/* a pool of other buffers will not do */
	assert_int_equal(ndz_bufpool_create(4096, 2, &pool, NULL), 0);
	o.pool = pool;
	assert_int_equal(ndz_fetch_create(&o, &f, NULL), NDZ_EINVAL);
	ndz_bufpool_free(pool);
}

/* RANGE_RREQUESTs made (ndz_fetch_set_range's emitter). */
struct rsent {
	unsigned n;
	uint32_t chunk[64];
	unsigned first[64], count[64], wanted[64];
};

static void record_range(void *ctx, uint32_t chunk, unsigned first, unsigned count,
			 unsigned wanted)
{
	struct rsent *r = ctx;

	assert_true(r->n < 64);
	r->chunk[r->n] = chunk;
	r->first[r->n] = first;
	r->count[r->n] = count;
	r->wanted[r->n++] = wanted;
}

/*
 * Range repairs (issue 32): a chunk wanted in part whose runs are [0, 4), [100, 110)
 * and [300, 400) loses 1, 2 and 40 blocks of them; it asks for 1 and 2 range repairs
 * of the first two runs and for the 40 blocks of the third (more than 32); others'
 * range requests that cover it silence it; range repairs of its runs rebuild exactly
 * the lost blocks, a range that is not one of its runs is not taken.
 */
static void test_range_repairs(void **state)
{
	static struct sent s;
	static struct rsent rs;
	struct ndz_fetch *f = make(3, 4, 3, 5);
	struct ndz_fetch_stats st;
	struct ndz_fec *fec = NULL;
	uint8_t *w = whole_chunk(1), rep[3][NDZ_BLOCK_SIZE], lost[NDZ_BITMAP_BYTES];
	uint64_t now = T0;
	unsigned preq = 0;
	int slot;

	(void)state;
	assert_int_equal(ndz_fec_create(&fec, NULL), 0);
	memset(want_bits, 0, sizeof(want_bits));
	memset(lost, 0, sizeof(lost));
	for (unsigned b = 0; b < NDZ_BLOCKS_PER_CHUNK; b++)
		if (b < 4 || (b >= 100 && b < 110) || (b >= 300 && b < 400))
			ndz_bit_set(want_bits, b);
	ndz_bit_set(lost, 2);
	ndz_bit_set(lost, 103);
	ndz_bit_set(lost, 105);
	for (unsigned b = 320; b < 360; b++)
		ndz_bit_set(lost, b);
	ndz_fetch_set_want(f, want_one, NULL);
	ndz_fetch_set_repair(f, NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE);
	ndz_fetch_set_range(f, record_range, &rs);
	ask(f, &s, now, 0);
	assert_int_equal(deliver(f, 1, 0, NDZ_BLOCKS_PER_CHUNK, lost, now), -1);
	assert_int_equal(ndz_fetch_block(f, 2, 0, data_of(2, 0), now), -1);  /* moved on */
	now += REDELAY + MS;
	rs.n = 0;
	ask(f, &s, now, 0);
	assert_int_equal(rs.n, 2);
	assert_int_equal(rs.chunk[0], 1);
	assert_int_equal(rs.first[0], 0);
	assert_int_equal(rs.count[0], 4);
	assert_int_equal(rs.wanted[0], 1);
	assert_int_equal(rs.first[1], 100);
	assert_int_equal(rs.count[1], 10);
	assert_int_equal(rs.wanted[1], 2);
	for (unsigned i = 0; i < s.n; i++)
		if (s.chunk[i] == 1) {
			preq++;
			assert_true(s.partial[i]);
			assert_int_equal(ndz_bit_count(s.missing[i]), 40);
			assert_true(ndz_bit_test(s.missing[i], 320) && ndz_bit_test(s.missing[i], 359));
		}
	assert_int_equal(preq, 1);
	/* the 40 come; others ask for as many range repairs as we lack: we keep quiet */
	assert_int_equal(deliver(f, 1, 320, 360, NULL, now), -1);
	ndz_fetch_block(f, 2, 1, data_of(2, 1), now);          /* moved on again */
	ndz_fetch_snoop_range(f, 1, 0, 4, 1, now);
	ndz_fetch_snoop_range(f, 1, 100, 10, 1, now);
	rs.n = 0;
	ask(f, &s, now + 25 * MS, 0);                          /* not covered yet */
	assert_int_equal(rs.n, 2);
	now += 25 * MS;
	ndz_fetch_block(f, 1, 0, data_of(1, 0), now);          /* (a duplicate) */
	ndz_fetch_block(f, 2, 2, data_of(2, 2), now);          /* moved on again */
	ndz_fetch_snoop_range(f, 1, 0, 4, 1, now);
	ndz_fetch_snoop_range(f, 1, 100, 10, 2, now);
	now += 30 * MS;
	rs.n = 0;
	ask(f, &s, now, 0);
	assert_int_equal(rs.n, 0);
	for (unsigned i = 0; i < s.n; i++)
		assert_int_not_equal(s.chunk[i], 1);
	/* range repairs: one of a range that is not a run is not taken */
	assert_int_equal(ndz_fec_rencode(fec, w, 100, 5, 1, rep[0], NULL), 0);
	assert_int_equal(ndz_fetch_range_repair(f, 1, 100, 5, 1, rep[0], now), -1);
	assert_int_equal(ndz_fec_rencode(fec, w, 100, 10, 7, rep[0], NULL), 0);
	assert_int_equal(ndz_fec_rencode(fec, w, 100, 10, 9, rep[1], NULL), 0);
	assert_int_equal(ndz_fec_rencode(fec, w, 0, 4, 0, rep[2], NULL), 0);
	assert_int_equal(ndz_fetch_range_repair(f, 1, 100, 10, 7, rep[0], now), -1);
	assert_int_equal(ndz_fetch_range_repair(f, 1, 100, 10, 7, rep[0], now), -1); /* twice */
	assert_int_equal(ndz_fetch_range_repair(f, 1, 100, 10, 9, rep[1], now), -1);
	slot = ndz_fetch_range_repair(f, 1, 0, 4, 0, rep[2], now);
	assert_true(slot >= 0);
	assert_non_null(ndz_fetch_slot_want(f, slot));
	for (unsigned b = 0; b < NDZ_BLOCKS_PER_CHUNK; b++)
		if (ndz_bit_test(want_bits, b))
			assert_memory_equal(ndz_fetch_buf(f, slot) + (size_t)b * NDZ_BLOCK_SIZE,
					    data_of(1, b), NDZ_BLOCK_SIZE);
	ndz_fetch_get_stats(f, &st);
	assert_int_equal(st.range_repairs, 3);
	assert_int_equal(st.range_decoded, 3);
	/* without the emitter (a server without bit 5): blocks, as before */
	ndz_fetch_set_range(f, NULL, NULL);
	ndz_fetch_free(f);
	ndz_fec_free(fec);
	free(w);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_repair_request_and_decode),
		cmocka_unit_test(test_repair_requests_add_up),
		cmocka_unit_test(test_repair_many_lost),
		cmocka_unit_test(test_bad_options),
		cmocka_unit_test(test_blocks_runs),
		cmocka_unit_test(test_spans),
		cmocka_unit_test(test_request_ahead_and_order),
		cmocka_unit_test(test_snoop_suppresses),
		cmocka_unit_test(test_partial_request),
		cmocka_unit_test(test_wanted),
		cmocka_unit_test(test_range_repairs),
		cmocka_unit_test(test_stalled_chunk),
		cmocka_unit_test(test_silent),
		cmocka_unit_test(test_reject),
		cmocka_unit_test(test_hold),
		cmocka_unit_test(test_full_cache),
		cmocka_unit_test(test_out_of_range),
		cmocka_unit_test(test_whole_repairs),
		cmocka_unit_test(test_whole_many_lost),
		cmocka_unit_test(test_huge_count),
		cmocka_unit_test(test_order_any_count),
		cmocka_unit_test(test_snoop_flood),
		cmocka_unit_test(test_retry_contested),
		cmocka_unit_test(test_all_repairs_no_blocks),
		cmocka_unit_test(test_check_join),
		cmocka_unit_test(test_pool),
		cmocka_unit_test(test_defer_slots),
		cmocka_unit_test(test_deferred_next),
		cmocka_unit_test(test_held_back_bounds),
		cmocka_unit_test(test_held_back_spans),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
