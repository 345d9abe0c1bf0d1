/* The server's work queue, merging and send bookkeeping (see serve.h). */
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "fec.h"
#include "core/format.h"
#include "proto.h"
#include "serve.h"

#define BLOCKS NDZ_BLOCKS_PER_CHUNK
#define NONE UINT32_MAX                /* end of the queue */

/*
 * A block range of a chunk whose range repairs were asked for: the repairs wanted
 * while the chunk is queued (want) and while it is being sent (cur), and the next
 * index, kept while the range is (so that none is sent twice before all 255 were).
 */
struct range {
	uint16_t first, count;         /* count 0: never used */
	uint8_t want, cur, next;
};

struct entry {
	uint8_t bits[NDZ_BITMAP_BYTES];
	struct range ranges[NDZ_SERVE_RANGES];
	uint8_t reps[NDZ_FEC_SETS];    /* repairs wanted, per set (stripes, whole chunk) */
	uint8_t next_rep[NDZ_FEC_SETS]; /* per set: the next repair index to send */
	uint32_t next;                 /* next entry in the queue, or NONE */
	uint8_t queued;
};

struct ndz_serve {
	uint32_t chunks;
	struct entry *e;               /* per chunk: its queue entry */
	uint32_t head, tail;           /* NONE: empty */
	int64_t cur;                   /* chunk being sent, -1: none */
	unsigned cur_pos;              /* next block the sender looks at */
	uint8_t cur_bits[NDZ_BITMAP_BYTES];
	uint8_t cur_reps[NDZ_FEC_SETS];
	unsigned cur_rr;               /* the set (or range, past the sets) whose repair goes
					* next, round robin */
	uint8_t *ever;                 /* one bit per block ever sent */
	struct ndz_serve_stats st;
};

int ndz_serve_create(uint32_t chunks, struct ndz_serve **out, struct ndz_error *err)
{
	struct ndz_serve *s;

	*out = NULL;
	if (!chunks)
		return ndz_error_set(err, NDZ_EINVAL, 0, "work queue: an image of no chunks");
	s = calloc(1, sizeof(*s));
	if (!s)
		return ndz_error_set(err, NDZ_ENOMEM, 0, "work queue: out of memory");
	s->chunks = chunks;
	s->e = calloc(chunks, sizeof(*s->e));      /* calloc checks the products */
	s->ever = calloc(chunks, NDZ_BITMAP_BYTES);
	if (!s->e || !s->ever) {
		ndz_serve_free(s);
		return ndz_error_set(err, NDZ_ENOMEM, 0, "work queue of %u chunks: out of memory",
				     chunks);
	}
	s->head = s->tail = NONE;
	s->cur = -1;
	*out = s;
	return 0;
}

void ndz_serve_free(struct ndz_serve *s)
{
	if (!s)
		return;
	free(s->e);
	free(s->ever);
	free(s);
}

static int is_empty(const uint8_t *bits)
{
	for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++)
		if (bits[i])
			return 0;
	return 1;
}

static void max_reps(uint8_t *to, const uint8_t *reps)
{
	for (unsigned i = 0; i < NDZ_FEC_SETS; i++)
		if (reps[i] > to[i])
			to[i] = reps[i];
}

/* Adds a new entry for chunk at the queue's tail. */
static void append(struct ndz_serve *s, uint32_t chunk, const uint8_t *bits, const uint8_t *reps)
{
	struct entry *q = &s->e[chunk];

	memcpy(q->bits, bits, NDZ_BITMAP_BYTES);
	memcpy(q->reps, reps, NDZ_FEC_SETS);
	q->queued = 1;
	q->next = NONE;
	if (s->tail != NONE)
		s->e[s->tail].next = chunk;
	else
		s->head = chunk;
	s->tail = chunk;
}

/* The merge rules (serve.h); bits is the caller's copy and may be changed. */
static int enqueue(struct ndz_serve *s, uint32_t chunk, uint8_t *bits, int full)
{
	static const uint8_t no_reps[NDZ_FEC_SETS];
	struct entry *q = &s->e[chunk];
	int merged = 0;

	s->st.requests++;
	if ((int64_t)chunk == s->cur) {
		/* Blocks still ahead of the sender join the chunk being sent. */
		for (unsigned b = s->cur_pos; b < BLOCKS; b++)
			if (ndz_bit_test(bits, b)) {
				ndz_bit_set(s->cur_bits, b);
				ndz_bit_clear(bits, b);
				merged = 1;
			}
		if (full || is_empty(bits)) {
			s->st.dropped_current++;
			return 0;
		}
	}
	if (q->queued) {
		for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++)
			q->bits[i] |= bits[i];
		s->st.merged++;
		return 0;
	}
	if (merged)
		s->st.merged++;
	append(s, chunk, bits, no_reps);
	return 1;
}

/* A request for chunk (or its blocks, or repairs) out of range: counted by the caller. */
static int bad(const struct ndz_serve *s, struct ndz_error *err, uint32_t chunk, const char *what)
{
	return ndz_error_set(err, NDZ_EINVAL, 0, "request for chunk %u of %u: %s", chunk,
			     s->chunks, what);
}

int ndz_serve_request(struct ndz_serve *s, uint32_t chunk, unsigned first, unsigned count,
		      struct ndz_error *err)
{
	uint8_t bits[NDZ_BITMAP_BYTES];

	if (chunk >= s->chunks || first >= BLOCKS || count < 1 || count > BLOCKS - first)
		return bad(s, err, chunk, "chunk or blocks out of range");
	memset(bits, 0, sizeof(bits));
	for (unsigned b = first; b < first + count; b++)
		ndz_bit_set(bits, b);
	return enqueue(s, chunk, bits, count == BLOCKS);
}

int ndz_serve_prequest(struct ndz_serve *s, uint32_t chunk, const uint8_t *bits,
		       struct ndz_error *err)
{
	uint8_t copy[NDZ_BITMAP_BYTES];

	if (chunk >= s->chunks)
		return bad(s, err, chunk, "chunk out of range");
	memcpy(copy, bits, sizeof(copy));
	return enqueue(s, chunk, copy, 0);
}

int ndz_serve_repairs(struct ndz_serve *s, uint32_t chunk, const uint8_t *asked,
		      struct ndz_error *err)
{
	static const uint8_t no_bits[NDZ_BITMAP_BYTES];
	uint8_t need[NDZ_FEC_SETS];
	struct entry *q;
	int any = 0;

	if (chunk >= s->chunks)
		return bad(s, err, chunk, "chunk out of range");
	/*
	 * No client asks for more than NDZ_FEC_ASK_MAX of a set: a request that does
	 * (a forger's: 255 whole-chunk repairs cost 38 ms of encoding here) gets that many.
	 */
	for (unsigned i = 0; i < NDZ_FEC_SETS; i++) {
		if (i < NDZ_FEC_STRIPES && asked[i] > NDZ_FEC_K)
			return bad(s, err, chunk, "more repairs of a stripe than its blocks");
		need[i] = asked[i] > NDZ_FEC_ASK_MAX ? (uint8_t)NDZ_FEC_ASK_MAX : asked[i];
		any |= need[i];
	}
	if (!any)
		return bad(s, err, chunk, "no repairs");
	q = &s->e[chunk];
	s->st.requests++;
	if ((int64_t)chunk == s->cur) {
		/* every repair still to come is new to everyone: the most asked for is enough */
		max_reps(s->cur_reps, need);
		s->st.merged++;
		return 0;
	}
	if (q->queued) {
		max_reps(q->reps, need);
		s->st.merged++;
		return 0;
	}
	append(s, chunk, no_bits, need);
	return 1;
}

/* The range slot of q for [first, first + count): the same range, else an unused one,
 * else one with nothing wanted (its next index forgotten); NULL when all are busy. */
static struct range *range_slot(struct entry *q, unsigned first, unsigned count)
{
	struct range *idle = NULL;

	for (unsigned i = 0; i < NDZ_SERVE_RANGES; i++) {
		struct range *r = &q->ranges[i];

		if (r->count == count && r->first == first)
			return r;
		if (!r->count || (!r->want && !r->cur && (!idle || idle->count)))
			idle = r;
	}
	if (idle && (idle->first != first || idle->count != count)) {
		idle->first = (uint16_t)first;
		idle->count = (uint16_t)count;
		idle->want = idle->cur = idle->next = 0;
	}
	return idle;
}

int ndz_serve_range(struct ndz_serve *s, uint32_t chunk, unsigned first, unsigned count,
		    unsigned asked, struct ndz_error *err)
{
	static const uint8_t no_bits[NDZ_BITMAP_BYTES], no_reps[NDZ_FEC_SETS];
	struct entry *q;
	struct range *r;
	unsigned want = asked, ahead;
	int cur;

	if (chunk >= s->chunks)
		return bad(s, err, chunk, "chunk out of range");
	if (!ndz_fec_range_ok(first, count) || !asked)
		return bad(s, err, chunk, "range repairs of blocks out of range, or none");
	/* no client asks for more than NDZ_FEC_ASK_MAX, nor for more than the blocks */
	if (want > NDZ_FEC_ASK_MAX)
		want = NDZ_FEC_ASK_MAX;
	if (want > count)
		want = count;
	q = &s->e[chunk];
	cur = (int64_t)chunk == s->cur;
	/*
	 * Blocks of the range still to go out (the rest of this pass, the chunk's queue
	 * entry) reach whoever lost them: repairs are wanted for the others only. The
	 * asker lost want of the range's blocks; of those, at most the blocks not going
	 * out again need a repair. (A client that reads late takes a pass that began
	 * before its request for one that passed its blocks.)
	 */
	ahead = 0;
	for (unsigned b = first; b < first + count; b++)
		if ((cur && b >= s->cur_pos && ndz_bit_test(s->cur_bits, b)) ||
		    (q->queued && ndz_bit_test(q->bits, b)))
			ahead++;
	if (want > count - ahead) {
		s->st.range_cut += want - (count - ahead);
		want = count - ahead;
	}
	if (!want) {
		s->st.requests++;
		s->st.range_requests++;
		s->st.range_ahead++;
		s->st.merged++;
		return 0;
	}
	if (!(r = range_slot(q, first, count)))
		return bad(s, err, chunk, "repairs of too many block ranges at once");
	s->st.requests++;
	s->st.range_requests++;
	if (cur || q->queued) {
		uint8_t *to = cur ? &r->cur : &r->want;

		if (want > *to)
			*to = (uint8_t)want;
		s->st.merged++;
		return 0;
	}
	r->want = (uint8_t)want;
	append(s, chunk, no_bits, no_reps);
	return 1;
}

int64_t ndz_serve_next_chunk(struct ndz_serve *s)
{
	struct entry *q;
	uint32_t chunk = s->head;

	if (chunk == NONE) {
		s->cur = -1;
		return -1;
	}
	q = &s->e[chunk];
	s->head = q->next;
	if (s->head == NONE)
		s->tail = NONE;
	q->queued = 0;
	s->cur = chunk;
	s->cur_pos = 0;
	memcpy(s->cur_bits, q->bits, NDZ_BITMAP_BYTES);
	memcpy(s->cur_reps, q->reps, NDZ_FEC_SETS);
	for (unsigned i = 0; i < NDZ_SERVE_RANGES; i++) {
		q->ranges[i].cur = q->ranges[i].want;
		q->ranges[i].want = 0;
	}
	s->cur_rr = 0;
	return chunk;
}

int ndz_serve_next(struct ndz_serve *s, struct ndz_serve_item *it)
{
	struct entry *q;

	if (s->cur < 0)
		return 0;
	while (s->cur_pos < BLOCKS) {
		unsigned b = s->cur_pos++;

		if (ndz_bit_test(s->cur_bits, b)) {
			it->repair = 0;
			it->first = it->count = 0;
			it->block = b;
			it->stripe = it->index = 0;
			return 1;
		}
	}
	q = &s->e[s->cur];
	for (unsigned n = 0; n < NDZ_FEC_SETS + NDZ_SERVE_RANGES; n++) {
		unsigned st = (s->cur_rr + n) % (NDZ_FEC_SETS + NDZ_SERVE_RANGES);

		if (st >= NDZ_FEC_SETS) {
			struct range *r = &q->ranges[st - NDZ_FEC_SETS];

			if (!r->cur)
				continue;
			r->cur--;
			s->cur_rr = (st + 1) % (NDZ_FEC_SETS + NDZ_SERVE_RANGES);
			it->repair = NDZ_SERVE_RANGE;
			it->block = 0;
			it->stripe = 0;
			it->first = r->first;
			it->count = r->count;
			it->index = r->next;
			r->next = (uint8_t)((r->next + 1u) % NDZ_FEC_WREPAIRS);
			return 1;
		}
		if (!s->cur_reps[st])
			continue;
		s->cur_reps[st]--;
		s->cur_rr = (st + 1) % (NDZ_FEC_SETS + NDZ_SERVE_RANGES);
		it->repair = NDZ_SERVE_SET;
		it->block = 0;
		it->first = it->count = 0;
		it->stripe = st;
		/* after the last index the first ones again: new to those who missed them */
		it->index = q->next_rep[st];
		q->next_rep[st] = (uint8_t)((q->next_rep[st] + 1u) % ndz_fec_repairs(st));
		return 1;
	}
	s->cur = -1;
	return 0;
}

int ndz_serve_sent(struct ndz_serve *s, uint32_t chunk, unsigned block, struct ndz_error *err)
{
	uint8_t *ever;

	if (chunk >= s->chunks || block >= BLOCKS)
		return ndz_error_set(err, NDZ_EINVAL, 0, "block %u of chunk %u sent: out of range",
				     block, chunk);
	ever = s->ever + (size_t)chunk * NDZ_BITMAP_BYTES;
	s->st.blocks_sent++;
	if (ndz_bit_test(ever, block))
		return 0;
	ndz_bit_set(ever, block);
	s->st.distinct_sent++;
	return 1;
}

int ndz_serve_repair_sent(struct ndz_serve *s, uint32_t chunk, unsigned stripe,
			  struct ndz_error *err)
{
	if (chunk >= s->chunks || stripe >= NDZ_FEC_SETS)
		return ndz_error_set(err, NDZ_EINVAL, 0, "repair of set %u of chunk %u sent: out "
				     "of range", stripe, chunk);
	s->st.repairs_sent++;
	s->st.whole_sent += stripe == NDZ_FEC_WHOLE;
	return 0;
}

int ndz_serve_range_sent(struct ndz_serve *s, uint32_t chunk, struct ndz_error *err)
{
	if (chunk >= s->chunks)
		return ndz_error_set(err, NDZ_EINVAL, 0, "range repair of chunk %u sent: out of "
				     "range", chunk);
	s->st.range_sent++;
	return 0;
}

int64_t ndz_serve_current(const struct ndz_serve *s, unsigned *pos, uint8_t *bits)
{
	if (s->cur >= 0) {
		if (pos)
			*pos = s->cur_pos;
		if (bits)
			memcpy(bits, s->cur_bits, NDZ_BITMAP_BYTES);
	}
	return s->cur;
}

int ndz_serve_queued(const struct ndz_serve *s, size_t i, uint32_t *chunk, uint8_t *bits,
		     struct ndz_error *err)
{
	uint32_t c = s->head;

	while (c != NONE && i > 0) {
		c = s->e[c].next;
		i--;
	}
	if (c == NONE)
		return ndz_error_set(err, NDZ_ENOENT, 0, "work queue: no entry %zu", i);
	*chunk = c;
	if (bits)
		memcpy(bits, s->e[c].bits, NDZ_BITMAP_BYTES);
	return 0;
}

int ndz_serve_busy(const struct ndz_serve *s)
{
	return s->head != NONE || s->cur >= 0;
}

int ndz_serve_ever(const struct ndz_serve *s, uint32_t chunk, unsigned block)
{
	if (chunk >= s->chunks || block >= BLOCKS)
		return 0;
	return ndz_bit_test(s->ever + (size_t)chunk * NDZ_BITMAP_BYTES, block);
}

void ndz_serve_get_stats(const struct ndz_serve *s, struct ndz_serve_stats *st)
{
	*st = s->st;
}
