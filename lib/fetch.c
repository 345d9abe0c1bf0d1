/* The client's chunk cache and request scheduling (see fetch.h). */
#include <stdlib.h>
#include <string.h>

#include "err.h"
#include "fec.h"
#include "fetch.h"
#include "format.h"
#include "proto.h"

#define BLOCKS NDZ_BLOCKS_PER_CHUNK
#define MOVED_ON_WAIT_NS 20000000ull   /* after the server moved on, before asking */
/* With repairs, each client waits a random part of this longer, so the first to ask
 * is heard by the others before they ask: their losses are often covered by then. */
#define STAGGER_NS 16000000u
#define STRIPES NDZ_FEC_STRIPES
#define K NDZ_FEC_K
/* Repairs cost the server a 128-block product each and the client a decode that
 * grows with the square of the losses: ask for them for scattered losses, and
 * for the blocks themselves when a stripe lacks more than this. */
#define MAX_ASK_REPAIRS 32u
/* Whole-chunk repairs: a product over 1024 blocks each at the server (0.15 ms
 * here: a server sending nothing else can make only about 55 Mbit/s of them), and
 * a decode of about 0.25 ms a lost block at the client. They pay for small holes
 * that many clients have; past this, stripe repairs (an eighth the cost). */
#define MAX_ASK_WHOLE 32u
#define SETS NDZ_FEC_SETS
#define WHOLE NDZ_FEC_WHOLE

enum { C_NEED, C_FILL, C_QUEUED, C_DONE };
enum { S_FREE, S_FILL, S_QUEUED };

struct slot {
	uint8_t *buf;                  /* NDZ_CHUNK_SIZE, allocated on first use */
	uint32_t chunk;
	int state;
	unsigned nhave;
	uint8_t have[NDZ_BITMAP_BYTES];
	uint64_t last_block_ns;        /* when a block of it last arrived */
	int moved_on;                  /* the server went on to another chunk */
	uint64_t ask_ns;               /* moved on: ask not before (staggered) */
	uint8_t seen[SETS];            /* repairs others asked for since seen_ns, per set */
	uint64_t seen_ns;
	uint8_t sdata[STRIPES];        /* data blocks held (or decoded), per stripe */
	uint8_t srep[STRIPES];         /* repairs held, per stripe (only while incomplete) */
	uint8_t repbits[STRIPES][(NDZ_FEC_REPAIRS + 7) / 8]; /* which repair indexes */
	unsigned wrep;                 /* whole-chunk repairs held (only while incomplete) */
	uint8_t wbits[(NDZ_FEC_WREPAIRS + 7) / 8]; /* which of them */
	uint8_t *rbuf;                 /* repairs held: rcount blocks, their set and index */
	uint8_t *rmeta;                /* 2 bytes a repair: set, index */
	unsigned rcount, rcap;
};

struct ndz_fetch {
	struct ndz_fetch_opts o;
	uint8_t *cstate;
	int32_t *cslot;                /* per chunk: its slot when C_FILL */
	uint64_t *last_req;            /* per chunk: last covering request seen or sent; 0 never */
	uint32_t *order;               /* random request order */
	uint32_t next_order;           /* order[] before this were requested at least once */
	struct slot *slots;
	int64_t last_block_chunk;
	int kick;
	unsigned repair;               /* NDZ_FEAT_* repairs the server sends: ask for them */
	uint32_t stagger;              /* the generator of the stagger */
	struct ndz_fec *fec;           /* made on the first decode with data */
	struct ndz_fetch_stats st;
};

/* xorshift32: a private generator, so the order does not touch random()'s state */
static uint32_t next_rand(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

int ndz_fetch_create(const struct ndz_fetch_opts *o, struct ndz_fetch **out)
{
	struct ndz_fetch *f;
	uint32_t x = o->seed ? o->seed : 0x9e3779b9u;

	*out = NULL;
	if (!o->chunks || !o->slots || !o->request_ahead)
		return NDZ_EINVAL;
	f = calloc(1, sizeof(*f));
	if (!f)
		return NDZ_ENOMEM;
	f->o = *o;
	f->stagger = x ^ 0x5bd1e995u;
	if (!f->stagger)
		f->stagger = 1;
	f->cstate = calloc(o->chunks, 1);
	f->cslot = calloc(o->chunks, sizeof(*f->cslot));
	f->last_req = calloc(o->chunks, sizeof(*f->last_req));
	f->order = calloc(o->chunks, sizeof(*f->order));
	f->slots = calloc(o->slots, sizeof(*f->slots));
	if (!f->cstate || !f->cslot || !f->last_req || !f->order || !f->slots) {
		ndz_fetch_free(f);
		return NDZ_ENOMEM;
	}
	for (uint32_t i = 0; i < o->chunks; i++)
		f->order[i] = i;
	for (uint32_t i = o->chunks; i > 1; i--) {
		uint32_t j = next_rand(&x) % i, t = f->order[i - 1];

		f->order[i - 1] = f->order[j];
		f->order[j] = t;
	}
	f->last_block_chunk = -1;
	*out = f;
	return 0;
}

void ndz_fetch_free(struct ndz_fetch *f)
{
	if (!f)
		return;
	for (size_t i = 0; f->slots && i < f->o.slots; i++) {
		free(f->slots[i].buf);
		free(f->slots[i].rbuf);
		free(f->slots[i].rmeta);
	}
	ndz_fec_free(f->fec);
	free(f->slots);
	free(f->cstate);
	free(f->cslot);
	free(f->last_req);
	free(f->order);
	free(f);
}

/* A free slot for chunk; its buffer is allocated on first use unless store is 0. */
static struct slot *take_slot(struct ndz_fetch *f, uint32_t chunk, int store)
{
	struct slot *s = NULL;

	for (size_t i = 0; i < f->o.slots; i++)
		if (f->slots[i].state == S_FREE) {
			s = &f->slots[i];
			break;
		}
	if (!s || (store && !s->buf && !(s->buf = malloc(NDZ_CHUNK_SIZE))))
		return NULL;
	s->state = S_FILL;
	s->chunk = chunk;
	s->nhave = 0;
	s->moved_on = 0;
	s->seen_ns = 0;
	memset(s->seen, 0, sizeof(s->seen));
	memset(s->have, 0, sizeof(s->have));
	memset(s->sdata, 0, sizeof(s->sdata));
	memset(s->srep, 0, sizeof(s->srep));
	memset(s->repbits, 0, sizeof(s->repbits));
	s->wrep = 0;
	memset(s->wbits, 0, sizeof(s->wbits));
	s->rcount = 0;
	f->cstate[chunk] = C_FILL;
	f->cslot[chunk] = (int32_t)(s - f->slots);
	return s;
}

/*
 * Stripe st of s has as many blocks and repairs as it has data blocks: decode
 * its missing blocks (or, without stored data, count them as held).
 */
static void decode_stripe(struct ndz_fetch *f, struct slot *s, unsigned st)
{
	unsigned missing = K - s->sdata[st];

	if (s->buf) {
		uint8_t idx[K];
		const uint8_t *rp[K];
		unsigned n = 0;

		if (!f->fec && ndz_fec_create(&f->fec) < 0)
			return;        /* no memory now: a later block or repair tries again */
		for (unsigned i = 0; i < s->rcount && n < K; i++)
			if (s->rmeta[2 * i] == st) {
				idx[n] = s->rmeta[2 * i + 1];
				rp[n++] = s->rbuf + (size_t)i * NDZ_BLOCK_SIZE;
			}
		if (ndz_fec_decode(f->fec, s->buf, s->have, st, idx, rp, n) < 0)
			return;
	} else {
		for (unsigned j = 0; j < K; j++)
			ndz_bit_set(s->have, ndz_fec_block(st, j));
	}
	s->nhave += missing;
	s->sdata[st] = K;
	s->srep[st] = 0;
	f->st.decoded += missing;
}

/*
 * How many of the missing blocks of s its repairs could rebuild at most: its
 * whole-chunk repairs, and per stripe no more repairs than the stripe lacks.
 */
static unsigned useful_repairs(const struct slot *s)
{
	unsigned n = s->wrep;

	for (unsigned st = 0; st < STRIPES; st++) {
		unsigned lack = K - s->sdata[st];

		n += s->srep[st] < lack ? s->srep[st] : lack;
	}
	return n;
}

/*
 * s holds whole-chunk repairs, and with its stripe repairs as many as it lacks
 * blocks: rebuild every missing block if all those repairs together determine them
 * (else one more will). Every repair is a linear equation over the chunk's blocks.
 */
static void decode_whole(struct ndz_fetch *f, struct slot *s)
{
	unsigned n = 0, cap = s->buf ? s->rcount : NDZ_FEC_WREPAIRS + STRIPES * NDZ_FEC_REPAIRS;
	unsigned missing = BLOCKS - s->nhave;
	uint8_t *set = malloc(cap ? cap : 1), *idx = malloc(cap ? cap : 1);
	const uint8_t **rp = malloc(sizeof(*rp) * (cap ? cap : 1));

	if (!set || !idx || !rp)
		goto out;      /* no memory now: a later arrival tries again */
	if (s->buf) {
		for (unsigned i = 0; i < s->rcount; i++) {
			set[n] = s->rmeta[2 * i];
			idx[n] = s->rmeta[2 * i + 1];
			rp[n++] = s->rbuf + (size_t)i * NDZ_BLOCK_SIZE;
		}
	} else {
		/* nothing stored: whether they would do depends on the indexes alone */
		for (unsigned r = 0; r < NDZ_FEC_WREPAIRS; r++)
			if (ndz_bit_test(s->wbits, r)) {
				set[n] = WHOLE;
				idx[n] = (uint8_t)r;
				rp[n++] = NULL;
			}
		for (unsigned st = 0; st < STRIPES; st++)
			for (unsigned r = 0; s->sdata[st] < K && r < NDZ_FEC_REPAIRS; r++)
				if (ndz_bit_test(s->repbits[st], r)) {
					set[n] = (uint8_t)st;
					idx[n] = (uint8_t)r;
					rp[n++] = NULL;
				}
	}
	if (ndz_fec_wdecode(s->buf, s->have, set, idx, rp, n) != 0)
		goto out;      /* not determined yet (or no memory): a later arrival tries again */
	s->nhave = BLOCKS;
	memset(s->sdata, K, sizeof(s->sdata));
	memset(s->srep, 0, sizeof(s->srep));
	s->wrep = 0;
	f->st.decoded += missing;
out:
	free(set);
	free(idx);
	free(rp);
}

/* After an arrival: rebuild what the whole-chunk repairs (with the stripes') now can. */
static void try_whole(struct ndz_fetch *f, struct slot *s)
{
	if (s->wrep && s->nhave < BLOCKS && s->nhave + useful_repairs(s) >= BLOCKS)
		decode_whole(f, s);
}

/* The slot for a block or repair of chunk arriving at now (NULL: not wanted). */
static struct slot *arrival(struct ndz_fetch *f, uint32_t chunk, int store, uint64_t now_ns)
{
	struct slot *s;
	int st = f->cstate[chunk];

	if (f->last_block_chunk >= 0 && f->last_block_chunk != (int64_t)chunk &&
	    f->cstate[f->last_block_chunk] == C_FILL) {
		struct slot *m = &f->slots[f->cslot[f->last_block_chunk]];

		if (!m->moved_on)
			m->ask_ns = now_ns + (f->repair ? next_rand(&f->stagger) % STAGGER_NS : 0);
		m->moved_on = 1;
		f->kick = 1;
	}
	f->last_block_chunk = chunk;
	if (st == C_QUEUED || st == C_DONE) {
		f->st.dups++;
		return NULL;
	}
	if (st == C_NEED) {
		s = take_slot(f, chunk, store);
		if (!s) {
			f->st.no_room++;
			return NULL;
		}
	} else {
		s = &f->slots[f->cslot[chunk]];
	}
	s->last_block_ns = now_ns;
	return s;
}

int ndz_fetch_block(struct ndz_fetch *f, uint32_t chunk, unsigned block, const uint8_t *data,
		    uint64_t now_ns)
{
	struct slot *s;
	unsigned st;

	if (chunk >= f->o.chunks || block >= BLOCKS)
		return -1;
	if (!(s = arrival(f, chunk, data != NULL, now_ns)))
		return -1;
	if (ndz_bit_test(s->have, block)) {
		f->st.dups++;
		return -1;
	}
	f->st.blocks++;
	if (data && s->buf)
		memcpy(s->buf + (size_t)block * NDZ_BLOCK_SIZE, data, NDZ_BLOCK_SIZE);
	ndz_bit_set(s->have, block);
	s->nhave++;
	st = ndz_fec_stripe(block);
	s->sdata[st]++;
	if (s->srep[st] && s->sdata[st] < K && s->sdata[st] + s->srep[st] >= K)
		decode_stripe(f, s, st);
	try_whole(f, s);
	if (s->nhave < BLOCKS)
		return -1;
	return (int)(s - f->slots);
}

int ndz_fetch_repair(struct ndz_fetch *f, uint32_t chunk, unsigned set, unsigned index,
		     const uint8_t *data, uint64_t now_ns)
{
	struct slot *s;
	int whole = set == WHOLE;

	if (chunk >= f->o.chunks || set >= SETS || index >= ndz_fec_repairs(set))
		return -1;
	if (!(s = arrival(f, chunk, data != NULL, now_ns)))
		return -1;
	if (whole ? s->nhave == BLOCKS || ndz_bit_test(s->wbits, index) :
		    s->sdata[set] == K || ndz_bit_test(s->repbits[set], index)) {
		f->st.dups++;
		return -1;
	}
	if (data && s->buf) {
		if (s->rcount == s->rcap) {
			unsigned cap = s->rcap ? 2 * s->rcap : 16;
			uint8_t *b = realloc(s->rbuf, (size_t)cap * NDZ_BLOCK_SIZE);
			uint8_t *m = b ? realloc(s->rmeta, (size_t)cap * 2) : NULL;

			if (b)
				s->rbuf = b;
			if (!m) {
				f->st.no_room++;
				return -1;
			}
			s->rmeta = m;
			s->rcap = cap;
		}
		memcpy(s->rbuf + (size_t)s->rcount * NDZ_BLOCK_SIZE, data, NDZ_BLOCK_SIZE);
		s->rmeta[2 * s->rcount] = (uint8_t)set;
		s->rmeta[2 * s->rcount + 1] = (uint8_t)index;
		s->rcount++;
	}
	f->st.repairs++;
	if (whole) {
		ndz_bit_set(s->wbits, index);
		s->wrep++;
	} else {
		ndz_bit_set(s->repbits[set], index);
		s->srep[set]++;
		if (s->sdata[set] + s->srep[set] >= K)
			decode_stripe(f, s, set);
	}
	try_whole(f, s);
	if (s->nhave < BLOCKS)
		return -1;
	return (int)(s - f->slots);
}

uint8_t *ndz_fetch_buf(struct ndz_fetch *f, int slot)
{
	return f->slots[slot].buf;
}

uint32_t ndz_fetch_slot_chunk(const struct ndz_fetch *f, int slot)
{
	return f->slots[slot].chunk;
}

void ndz_fetch_hold(struct ndz_fetch *f, int slot)
{
	struct slot *s = &f->slots[slot];

	s->state = S_QUEUED;           /* neither free nor filling: not asked for */
	f->cstate[s->chunk] = C_QUEUED; /* further blocks of it are duplicates */
}

void ndz_fetch_accept(struct ndz_fetch *f, int slot)
{
	struct slot *s = &f->slots[slot];

	s->state = S_QUEUED;
	f->cstate[s->chunk] = C_QUEUED;
	f->st.complete++;
	f->kick = 1;
}

void ndz_fetch_reject(struct ndz_fetch *f, int slot)
{
	struct slot *s = &f->slots[slot];

	f->cstate[s->chunk] = C_NEED;
	f->last_req[s->chunk] = 1;     /* long ago: ask again now */
	s->state = S_FREE;
	f->kick = 1;
}

void ndz_fetch_done(struct ndz_fetch *f, int slot)
{
	struct slot *s = &f->slots[slot];

	f->cstate[s->chunk] = C_DONE;
	s->state = S_FREE;
	f->st.done++;
	f->kick = 1;
}

void ndz_fetch_snoop(struct ndz_fetch *f, uint32_t chunk, const uint8_t *bitmap,
		     uint64_t now_ns)
{
	int st;

	if (chunk >= f->o.chunks)
		return;
	st = f->cstate[chunk];
	if (st == C_QUEUED || st == C_DONE)
		return;
	for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++) {
		uint8_t missing = st == C_FILL ? (uint8_t)~f->slots[f->cslot[chunk]].have[i] : 0xff;

		if (missing & ~bitmap[i])
			return;        /* does not cover all we lack */
	}
	f->last_req[chunk] = now_ns;
	if (st == C_FILL)
		f->slots[f->cslot[chunk]].moved_on = 0;
}

/*
 * What s would ask for by repairs: need[] per set (NDZ_FEC_SETS counts), whole-chunk
 * repairs when the server sends them and few are missing, else per stripe. Returns
 * 0 when the chunk lacks too much for repairs (ask for the blocks instead).
 */
static int repairs_needed(const struct ndz_fetch *f, const struct slot *s, uint8_t *need)
{
	unsigned missing = BLOCKS - s->nhave, most = 0;

	memset(need, 0, SETS);
	if ((f->repair & NDZ_FEAT_WHOLE) && missing <= MAX_ASK_WHOLE) {
		/* as many as the repairs held cannot rebuild; if they could but do not
		 * determine the missing blocks (dependent), one more */
		unsigned u = useful_repairs(s);

		need[WHOLE] = (uint8_t)(missing > u ? missing - u : 1);
		return 1;
	}
	for (unsigned st = 0; st < STRIPES; st++) {
		unsigned held = (unsigned)s->sdata[st] + s->srep[st];

		need[st] = (uint8_t)(held >= K ? 0 : K - held);
		if (need[st] > most)
			most = need[st];
	}
	return most <= MAX_ASK_REPAIRS;
}

void ndz_fetch_snoop_repairs(struct ndz_fetch *f, uint32_t chunk, const uint8_t *need,
			     uint64_t now_ns)
{
	uint8_t mine[SETS];
	struct slot *s;

	if (chunk >= f->o.chunks || f->cstate[chunk] != C_FILL)
		return;        /* repairs heal a chunk only once some of it is here */
	s = &f->slots[f->cslot[chunk]];
	/* the server sends the most asked for per set: what all those heard ask for */
	if (!s->seen_ns || now_ns - s->seen_ns > f->o.redelay_ns) {
		memset(s->seen, 0, sizeof(s->seen));
		s->seen_ns = now_ns;
	}
	for (unsigned i = 0; i < SETS; i++)
		if (need[i] > s->seen[i])
			s->seen[i] = need[i];
	if (!f->repair || !repairs_needed(f, s, mine))
		return;        /* we would ask for blocks: repairs asked for do not cover that */
	for (unsigned i = 0; i < SETS; i++)
		if (s->seen[i] < mine[i])
			return;
	f->last_req[chunk] = now_ns;
	s->moved_on = 0;
}

void ndz_fetch_set_repair(struct ndz_fetch *f, unsigned features)
{
	f->repair = features & (NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE);
	if (!(f->repair & NDZ_FEAT_REPAIR))
		f->repair = 0;         /* whole-chunk repairs come with the stripes' */
}

unsigned ndz_fetch_requests(struct ndz_fetch *f, uint64_t now, int silent,
			    ndz_fetch_emit emit, void *ctx)
{
	uint64_t redelay = f->o.redelay_ns;
	size_t inflight = 0, avail = 0;
	unsigned sent = 0;

	/* missing blocks of partly received chunks */
	for (size_t i = 0; i < f->o.slots; i++) {
		struct slot *s = &f->slots[i];

		avail += s->state == S_FREE;
		if (s->state != S_FILL)
			continue;
		if (silent || (s->moved_on && now >= s->ask_ns &&
			       now - f->last_req[s->chunk] > MOVED_ON_WAIT_NS) ||
		    (now - s->last_block_ns > redelay && now - f->last_req[s->chunk] > redelay)) {
			uint8_t missing[NDZ_BITMAP_BYTES], need[SETS];

			if (f->repair && repairs_needed(f, s, need)) {
				emit(ctx, s->chunk, NULL, need);
			} else {
				for (unsigned b = 0; b < NDZ_BITMAP_BYTES; b++)
					missing[b] = (uint8_t)~s->have[b];
				emit(ctx, s->chunk, missing, NULL);
			}
			f->last_req[s->chunk] = now;
			s->moved_on = 0;
			sent++;
		} else if (!s->moved_on) {
			inflight++;
		}
	}
	/* chunks asked for by anyone (us or others) and not started yet are on their way too */
	for (uint32_t ch = 0; ch < f->o.chunks; ch++) {
		if (f->cstate[ch] != C_NEED || !f->last_req[ch])
			continue;
		if (silent || now - f->last_req[ch] > redelay) {
			if (avail == 0)
				continue;
			emit(ctx, ch, NULL, NULL);
			f->last_req[ch] = now;
			sent++;
		}
		inflight++;
		if (avail)
			avail--;
	}
	/* new chunks, in random order */
	while (inflight < f->o.request_ahead && avail > 0 && f->next_order < f->o.chunks) {
		uint32_t ch = f->order[f->next_order++];

		if (f->cstate[ch] != C_NEED || f->last_req[ch])
			continue;      /* being received, done, or counted above */
		emit(ctx, ch, NULL, NULL);
		f->last_req[ch] = now;
		sent++;
		inflight++;
		avail--;
	}
	return sent;
}

int ndz_fetch_kicked(struct ndz_fetch *f)
{
	int k = f->kick;

	f->kick = 0;
	return k;
}

void ndz_fetch_get_stats(const struct ndz_fetch *f, struct ndz_fetch_stats *st)
{
	*st = f->st;
}
