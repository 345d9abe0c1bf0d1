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
	uint8_t seen[STRIPES];         /* repairs others asked for since seen_ns, per stripe */
	uint64_t seen_ns;
	uint8_t sdata[STRIPES];        /* data blocks held (or decoded), per stripe */
	uint8_t srep[STRIPES];         /* repairs held, per stripe (only while incomplete) */
	uint8_t repbits[STRIPES][(NDZ_FEC_REPAIRS + 7) / 8]; /* which repair indexes */
	uint8_t *rbuf;                 /* repairs held: rcount blocks, their stripe and index */
	uint8_t *rmeta;                /* 2 bytes a repair: stripe, index */
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
	int repair;                    /* the server sends repairs: ask for them */
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
	if (s->nhave < BLOCKS)
		return -1;
	return (int)(s - f->slots);
}

int ndz_fetch_repair(struct ndz_fetch *f, uint32_t chunk, unsigned stripe, unsigned index,
		     const uint8_t *data, uint64_t now_ns)
{
	struct slot *s;

	if (chunk >= f->o.chunks || stripe >= STRIPES || index >= NDZ_FEC_REPAIRS)
		return -1;
	if (!(s = arrival(f, chunk, data != NULL, now_ns)))
		return -1;
	if (s->sdata[stripe] == K || ndz_bit_test(s->repbits[stripe], index)) {
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
		s->rmeta[2 * s->rcount] = (uint8_t)stripe;
		s->rmeta[2 * s->rcount + 1] = (uint8_t)index;
		s->rcount++;
	}
	f->st.repairs++;
	ndz_bit_set(s->repbits[stripe], index);
	s->srep[stripe]++;
	if (s->sdata[stripe] + s->srep[stripe] >= K)
		decode_stripe(f, s, stripe);
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

/* How many more repairs each stripe of s needs; returns the largest count. */
static unsigned repairs_needed(const struct slot *s, uint8_t *need)
{
	unsigned most = 0;

	for (unsigned st = 0; st < STRIPES; st++) {
		unsigned held = (unsigned)s->sdata[st] + s->srep[st];

		need[st] = (uint8_t)(held >= K ? 0 : K - held);
		if (need[st] > most)
			most = need[st];
	}
	return most;
}

void ndz_fetch_snoop_repairs(struct ndz_fetch *f, uint32_t chunk, const uint8_t *need,
			     uint64_t now_ns)
{
	uint8_t mine[STRIPES];
	struct slot *s;

	if (chunk >= f->o.chunks || f->cstate[chunk] != C_FILL)
		return;        /* repairs heal a chunk only once some of it is here */
	s = &f->slots[f->cslot[chunk]];
	repairs_needed(s, mine);
	/* the server sends the most asked for per stripe: what all those heard ask for */
	if (!s->seen_ns || now_ns - s->seen_ns > f->o.redelay_ns) {
		memset(s->seen, 0, sizeof(s->seen));
		s->seen_ns = now_ns;
	}
	for (unsigned st = 0; st < STRIPES; st++)
		if (need[st] > s->seen[st])
			s->seen[st] = need[st];
	for (unsigned st = 0; st < STRIPES; st++)
		if (s->seen[st] < mine[st])
			return;
	f->last_req[chunk] = now_ns;
	s->moved_on = 0;
}

void ndz_fetch_set_repair(struct ndz_fetch *f, int on)
{
	f->repair = on;
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
			uint8_t missing[NDZ_BITMAP_BYTES], need[STRIPES];

			if (f->repair && repairs_needed(s, need) <= MAX_ASK_REPAIRS) {
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
