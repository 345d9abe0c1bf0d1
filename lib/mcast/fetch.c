/* The client's chunk cache and request scheduling (see fetch.h). */
#include <stdlib.h>
#include <string.h>

#include "core/err.h"
#include "fec.h"
#include "fetch.h"
#include "core/format.h"
#include "proto.h"

#define BLOCKS NDZ_BLOCKS_PER_CHUNK
#define MOVED_ON_WAIT_NS 20000000ull   /* after the server moved on, before asking */
#define QUEUED_WAIT_NS 200000000ull    /* for blocks asked for that the server may have
					* queued behind others' (a chunk wanted in part) */
/* With repairs, each client waits a random part of this longer, so the first to ask
 * is heard by the others before they ask: their losses are often covered by then. */
#define STAGGER_NS 16000000u
#define STRIPES NDZ_FEC_STRIPES
#define K NDZ_FEC_K
/* Repairs cost the server a 128-block product each and the client a decode that
 * grows with the square of the losses: ask for them for scattered losses, and
 * for the blocks themselves when a stripe lacks more than this. */
#define MAX_ASK_REPAIRS NDZ_FEC_ASK_MAX
/* Whole-chunk repairs: a product over 1024 blocks each at the server (0.15 ms
 * here: a server sending nothing else can make only about 55 Mbit/s of them), and
 * a decode of about 0.25 ms a lost block at the client. They pay for small holes
 * that many clients have; past this, stripe repairs (an eighth the cost). */
#define MAX_ASK_WHOLE NDZ_FEC_ASK_MAX
/* Failed checks of a chunk retried in its slot (ndz_fetch_retry) before it is dropped. */
#define MAX_RETRIES 4u
/* Whole-chunk decodes are tried for up to this many missing blocks (see try_whole). */
#define MAX_DECODE_WHOLE (2 * MAX_ASK_WHOLE)
#define SETS NDZ_FEC_SETS
#define WHOLE NDZ_FEC_WHOLE
/*
 * Range repairs (a chunk wanted in part): a slot holds at most this many (a forger's
 * cost a KiB each), asks for repairs of at most NDZ_FEC_RANGES_MAX runs at a time (what
 * a server keeps), and past MAX_RANGE_ROUNDS rounds of asking asks for the blocks.
 */
#define MAX_RANGE_HELD (4 * NDZ_FEC_ASK_MAX)
#define MAX_RANGE_ROUNDS 6u

/*
 * Per chunk the cache keeps one bit (written); everything else is per chunk on
 * its way: a slot (blocks arriving, or complete and being checked or written), or
 * an entry of asks (asked for by us or another client, nothing arrived yet), found
 * through a small hash table. So a chunk count announced by a forger costs a bit
 * per chunk and nothing per chunk until chunks come.
 */
enum { S_FREE, S_FILL, S_QUEUED };
#define NO_REF UINT32_MAX
/* Slots that blocks of chunks a seed scan has not reached may fill (see take_slot). */
#define DEFER_SLOTS(n) ((n) / 4 ? (n) / 4 : 1)
/* the held-back store's bounds (struct ndz_fetch): as many blocks again as the deferred
 * slots hold, 8 MiB at least, of at most a chunk per 64 blocks */
#define HB_MIN_BLOCKS 8192u
#define HB_BLOCKS(f) ((uint32_t)DEFER_SLOTS((f)->o.slots) * BLOCKS > HB_MIN_BLOCKS ? \
		      (uint32_t)DEFER_SLOTS((f)->o.slots) * BLOCKS : HB_MIN_BLOCKS)
#define HB_CHUNKS(f) (HB_BLOCKS(f) / 64)
/* Entries of asks that others' requests may take (the rest is kept for ours). */
#define ASKS_OTHERS 256u

struct slot {
	uint8_t *buf;                  /* NDZ_CHUNK_SIZE, allocated on first use */
	uint32_t chunk;
	int state;
	uint64_t last_req;             /* last covering request seen or sent; 0 never */
	/* what a failed check casts doubt on (ndz_fetch_retry): blocks that came twice
	 * with different bytes, and blocks rebuilt from repairs */
	uint8_t contested[NDZ_BITMAP_BYTES];
	uint8_t decoded[NDZ_BITMAP_BYTES];
	uint8_t prev[NDZ_BITMAP_BYTES]; /* in buf from a copy that failed: compare, then store */
	unsigned retries;              /* failed checks of this chunk in this slot */
	unsigned nhave;
	uint8_t have[NDZ_BITMAP_BYTES];
	/* SPANs: per block not yet held, its 32-byte granules stored (bit g: bytes 32g..);
	 * a block is held once all 32 are, and is missing everywhere until then. Looked
	 * at only while the block's have bit is clear, so zeroed when such bits clear. */
	uint32_t gmask[BLOCKS];
	uint64_t last_block_ns;        /* when a block of it last arrived */
	int moved_on;                  /* the server went on to another chunk */
	uint64_t ask_ns;               /* moved on: ask not before (staggered) */
	/* a chunk wanted in part: blocks asked for (by us, or by a request heard that
	 * covered all we lacked) as of last_req; when the server's latest pass of the
	 * chunk began (its first block or repair after another chunk's); whether the pass
	 * the server moved on from began after last_req, so that it had every block asked
	 * for (those missing are lost), or not: the server merges a request that finds the
	 * chunk on its way into that pass only from the block it has reached, and queues
	 * the rest, which the interleaved requests of clients with different wants make
	 * common (issue 32) */
	uint8_t asked[NDZ_BITMAP_BYTES];
	uint8_t ranged[NDZ_BITMAP_BYTES]; /* of those, asked for last by range repairs (they
					* come at a pass's end, after its blocks) */
	uint64_t pass_ns;
	unsigned pass_first;           /* the first block of it heard (0 for a repair) */
	int covered;
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
	/* a chunk wanted in part (ndz_fetch_set_want): only the blocks in want are
	 * received, the others count as held from the start; no repairs (they need
	 * every block of their set) */
	int partial;
	uint8_t want[NDZ_BITMAP_BYTES];
	/* range repairs held (partial only): xcount blocks in xbuf, their ranges in xmeta */
	uint8_t *xbuf;
	struct xrep {
		uint16_t first, count;
		uint8_t index;
	} *xmeta;
	unsigned xcount, xcap;
	unsigned xrounds;              /* rounds of range requests sent */
	struct xrep xseen[NDZ_FEC_RANGES_MAX]; /* range requests heard since xseen_ns:
					* index holds the repairs asked for */
	unsigned nxseen;
	uint64_t xseen_ns;
};

struct ask {
	uint32_t chunk;
	uint64_t last_req;             /* as a slot's */
};

struct ndz_fetch {
	struct ndz_fetch_opts o;
	uint8_t *done;                 /* per chunk, a bit: written */
	struct ask *asks;              /* chunks asked for, not started: nasks of acap */
	uint32_t nasks, acap;
	uint32_t *hkey, *hval;         /* chunk -> slot, or o.slots + its asks index */
	uint32_t hmask;
	uint32_t next_order;           /* the request order's positions before this were asked */
	uint32_t lost;                 /* chunks dropped from asks when it was full: walk again */
	uint32_t order_bits, order_key[3];
	struct slot *slots;
	int64_t last_block_chunk;
	int kick;
	unsigned repair;               /* NDZ_FEAT_* repairs the server sends: ask for them */
	uint32_t stagger;              /* the generator of the stagger */
	struct ndz_fec *fec;           /* made on the first decode with data */
	struct ndz_fetch_stats st;
	int (*defer)(void *ctx, uint32_t chunk); /* new chunks not asked for yet */
	void *defer_ctx;
	int64_t capped;                /* the last deferred chunk whose blocks the cap
					  dropped (ndz_fetch_deferred); -1: none */
	int refused;                   /* take_slot refused the last chunk for the cap */
	/*
	 * Blocks of deferred chunks the cap refused a slot, held back until the seed scan
	 * decides them (ndz_fetch_release): HB_CHUNKS chunks at most, each with the
	 * bitmap of its blocks here, and HB_BLOCKS blocks (and their bytes, unless the
	 * cache stores none) in hb, in arrival order. Allocated on first use.
	 */
	struct hbchunk {
		uint32_t chunk, n;
		int waiting;           /* decided, no slot was free: kept until one is */
		uint64_t last_ns;      /* when a block of it last came */
		uint8_t have[NDZ_BITMAP_BYTES];
	} *hbc;
	uint32_t nhbc;
	struct hblock { uint32_t chunk, block, gmask; } *hb; /* gmask: its 32-byte granules
							   held (a SPAN's edges) */
	uint8_t *hbdata;
	uint32_t nhb;
	const uint8_t *(*want)(void *ctx, uint32_t chunk); /* chunks wanted in part */
	void *want_ctx;
	/* the server answers range repairs: ask for them by this (ndz_fetch_set_range) */
	ndz_fetch_emit_range emit_range;
	void *range_ctx;
};

/* xorshift32: a private generator, so the order does not touch random()'s state */
static uint32_t next_rand(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

/*
 * The random request order without a table: position i -> a chunk, a bijection of
 * [0, chunks) (a keyed bijection of [0, 2^order_bits), walked until it lands inside).
 */
static uint32_t order_mix(const struct ndz_fetch *f, uint32_t x)
{
	uint32_t mask = (uint32_t)((1ull << f->order_bits) - 1);
	unsigned half = f->order_bits / 2 + 1;

	for (int r = 0; r < 3; r++) {
		x = (x * (f->order_key[r] | 1u)) & mask;  /* odd: invertible mod 2^bits */
		x ^= x >> half;
		x = (x + f->order_key[(r + 1) % 3]) & mask;
	}
	return x;
}

static uint32_t order_at(const struct ndz_fetch *f, uint32_t i)
{
	do
		i = order_mix(f, i);
	while (i >= f->o.chunks);
	return i;
}

static int is_done(const struct ndz_fetch *f, uint32_t chunk)
{
	return (f->done[chunk >> 3] >> (chunk & 7)) & 1;
}

static uint32_t h_home(const struct ndz_fetch *f, uint32_t chunk)
{
	return (uint32_t)((chunk * 0x9e3779b97f4a7c15ull) >> 32) & f->hmask;
}

/* chunk's slot, or o.slots + its asks index, or NO_REF */
static uint32_t h_get(const struct ndz_fetch *f, uint32_t chunk)
{
	for (uint32_t i = h_home(f, chunk);; i = (i + 1) & f->hmask)
		if (f->hval[i] == NO_REF || f->hkey[i] == chunk)
			return f->hval[i];
}

static void h_put(struct ndz_fetch *f, uint32_t chunk, uint32_t ref)
{
	uint32_t i = h_home(f, chunk);

	while (f->hval[i] != NO_REF && f->hkey[i] != chunk)
		i = (i + 1) & f->hmask;
	f->hkey[i] = chunk;
	f->hval[i] = ref;
}

/* Linear probing: deleting moves back the entries that probed past the hole. */
static void h_del(struct ndz_fetch *f, uint32_t chunk)
{
	uint32_t i = h_home(f, chunk), j;

	while (f->hval[i] != NO_REF && f->hkey[i] != chunk)
		i = (i + 1) & f->hmask;
	if (f->hval[i] == NO_REF)
		return;
	for (j = i;;) {
		uint32_t k;

		f->hval[i] = NO_REF;
		do {
			j = (j + 1) & f->hmask;
			if (f->hval[j] == NO_REF)
				return;
			k = h_home(f, f->hkey[j]);
		} while (i <= j ? i < k && k <= j : i < k || k <= j);
		f->hkey[i] = f->hkey[j];
		f->hval[i] = f->hval[j];
		i = j;
	}
}

/* chunk (needed, not started) was asked for at t; 0 when asks has no room for it */
static int ask_add(struct ndz_fetch *f, uint32_t chunk, uint64_t t, uint32_t room)
{
	if (f->nasks >= room)
		return 0;
	f->asks[f->nasks].chunk = chunk;
	f->asks[f->nasks].last_req = t;
	h_put(f, chunk, (uint32_t)f->o.slots + f->nasks);
	f->nasks++;
	return 1;
}

static void ask_del(struct ndz_fetch *f, uint32_t j)
{
	h_del(f, f->asks[j].chunk);
	if (j != --f->nasks) {
		f->asks[j] = f->asks[f->nasks];
		h_put(f, f->asks[j].chunk, (uint32_t)f->o.slots + j);
	}
}

int ndz_fetch_check_join(const struct ndz_join_info *info, uint64_t room, int raw,
			 struct ndz_error *e)
{
	uint64_t sectors = info->source_bytes / NDZ_SECTOR_SIZE +
			   (info->source_bytes % NDZ_SECTOR_SIZE != 0);

	if (info->chunks > (sectors > 1 ? sectors : 1))
		return ndz_error_set(e, NDZ_ERANGE, 0, "an image of %u chunks restoring to %llu "
				     "bytes: more chunks than that many bytes can need",
				     info->chunks, (unsigned long long)info->source_bytes);
	if ((raw ? info->image_bytes : info->source_bytes) > room)
		return ndz_error_set(e, NDZ_ETOOSMALL, 0, "an image of %llu bytes: more than "
				     "the target holds (%llu bytes)",
				     (unsigned long long)(raw ? info->image_bytes :
							  info->source_bytes),
				     (unsigned long long)room);
	return 0;
}

int ndz_fetch_create(const struct ndz_fetch_opts *o, struct ndz_fetch **out,
		     struct ndz_error *e)
{
	struct ndz_fetch *f;
	uint32_t x = o->seed ? o->seed : 0x9e3779b9u;
	uint64_t hsize = 16;

	*out = NULL;
	if (!o->chunks || !o->slots || !o->request_ahead || o->slots > (1u << 24) ||
	    o->request_ahead > (1u << 24) ||
	    (o->pool && ndz_bufpool_size(o->pool) != NDZ_CHUNK_SIZE))
		return ndz_error_set(e, NDZ_EINVAL, 0, "chunk cache: %u chunks, %zu slots, %u "
				     "ahead: out of range", o->chunks, o->slots, o->request_ahead);
	f = calloc(1, sizeof(*f));
	if (!f)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "chunk cache: out of memory");
	f->o = *o;
	f->stagger = x ^ 0x5bd1e995u;
	if (!f->stagger)
		f->stagger = 1;
	f->acap = (uint32_t)o->slots + o->request_ahead + ASKS_OTHERS;
	while (hsize < 2 * ((uint64_t)o->slots + f->acap))
		hsize *= 2;
	f->hmask = (uint32_t)(hsize - 1);
	/* one bit per chunk: pages the kernel gives only as they are written */
	f->done = calloc((size_t)o->chunks / 8 + 1, 1);
	f->asks = calloc(f->acap, sizeof(*f->asks));
	f->hkey = calloc(hsize, sizeof(*f->hkey));
	f->hval = malloc(hsize * sizeof(*f->hval));
	f->slots = calloc(o->slots, sizeof(*f->slots));
	if (!f->done || !f->asks || !f->hkey || !f->hval || !f->slots) {
		ndz_fetch_free(f);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "chunk cache of %u chunks: out of memory",
				     o->chunks);
	}
	memset(f->hval, 0xff, hsize * sizeof(*f->hval));
	while (f->order_bits < 32 && (1ull << f->order_bits) < o->chunks)
		f->order_bits++;
	for (int i = 0; i < 3; i++)
		f->order_key[i] = next_rand(&x);
	f->last_block_chunk = -1;
	f->capped = -1;
	*out = f;
	return 0;
}

void ndz_fetch_free(struct ndz_fetch *f)
{
	if (!f)
		return;
	for (size_t i = 0; f->slots && i < f->o.slots; i++) {
		if (f->o.pool)
			ndz_bufpool_put(f->o.pool, f->slots[i].buf);
		else
			free(f->slots[i].buf);
		free(f->slots[i].rbuf);
		free(f->slots[i].rmeta);
		free(f->slots[i].xbuf);
		free(f->slots[i].xmeta);
	}
	ndz_fec_free(f->fec);
	free(f->hbc);
	free(f->hb);
	free(f->hbdata);
	free(f->slots);
	free(f->done);
	free(f->asks);
	free(f->hkey);
	free(f->hval);
	free(f);
}

/* forget_repairs - the slot's repairs and what it knows of its blocks' origin, gone. */
static void forget_repairs(struct slot *s)
{
	memset(s->srep, 0, sizeof(s->srep));
	memset(s->repbits, 0, sizeof(s->repbits));
	s->wrep = 0;
	memset(s->wbits, 0, sizeof(s->wbits));
	s->rcount = 0;
	s->xcount = 0;
	s->xrounds = 0;
	s->nxseen = 0;
	s->xseen_ns = 0;
	memset(s->contested, 0, sizeof(s->contested));
	memset(s->decoded, 0, sizeof(s->decoded));
}

/*
 * A free slot for chunk (needed, not started; ref its asks entry or NO_REF); its
 * buffer is allocated on first use unless store is 0.
 */
static struct slot *take_slot(struct ndz_fetch *f, uint32_t chunk, uint32_t ref, int store)
{
	struct slot *s = NULL;
	size_t deferred = 0;

	for (size_t i = 0; i < f->o.slots; i++)
		if (f->slots[i].state == S_FREE) {
			if (!s)
				s = &f->slots[i];
		} else if (f->defer && f->slots[i].state == S_FILL && !f->slots[i].partial &&
			   f->defer(f->defer_ctx, f->slots[i].chunk)) {
			deferred++;
		}
	/*
	 * Others' blocks of a chunk a seed scan has not reached take at most
	 * DEFER_SLOTS of the slots: the rest stay for the chunks the scan found
	 * missing, whose blocks would otherwise be dropped and asked for again.
	 */
	if (s && f->defer && deferred >= DEFER_SLOTS(f->o.slots) && f->defer(f->defer_ctx, chunk)) {
		f->capped = chunk;
		f->refused = 1;
		return NULL;
	}
	if (s && store && !s->buf)
		s->buf = f->o.pool ? ndz_bufpool_try_get(f->o.pool, NULL) : malloc(NDZ_CHUNK_SIZE);
	if (!s || (store && !s->buf))
		return NULL;
	s->state = S_FILL;
	s->chunk = chunk;
	s->nhave = 0;
	s->moved_on = 0;
	s->covered = 0;
	s->pass_ns = 0;
	memset(s->asked, 0, sizeof(s->asked));
	memset(s->ranged, 0, sizeof(s->ranged));
	s->seen_ns = 0;
	memset(s->seen, 0, sizeof(s->seen));
	memset(s->have, 0, sizeof(s->have));
	memset(s->gmask, 0, sizeof(s->gmask));
	memset(s->sdata, 0, sizeof(s->sdata));
	forget_repairs(s);
	memset(s->prev, 0, sizeof(s->prev));
	s->retries = 0;
	s->last_req = 0;
	s->partial = 0;
	if (f->want) {
		const uint8_t *w = f->want(f->want_ctx, chunk);

		if (w) {
			s->partial = 1;
			memcpy(s->want, w, sizeof(s->want));
			for (unsigned b = 0; b < BLOCKS; b++)
				if (!ndz_bit_test(w, b)) {
					ndz_bit_set(s->have, b);
					s->nhave++;
					s->sdata[ndz_fec_stripe(b)]++;
				}
		}
	}
	if (ref != NO_REF) {
		/* asked for (by us or others) before it started: every block we lack */
		s->last_req = f->asks[ref - f->o.slots].last_req;
		memset(s->asked, 0xff, sizeof(s->asked));
		ask_del(f, ref - (uint32_t)f->o.slots);
	}
	h_put(f, chunk, (uint32_t)(s - f->slots));
	return s;
}

/*
 * Stripe st of s has as many blocks and repairs as it has data blocks: decode
 * its missing blocks (or, without stored data, count them as held).
 */
static void decode_stripe(struct ndz_fetch *f, struct slot *s, unsigned st)
{
	unsigned missing = K - s->sdata[st];
	uint8_t before[NDZ_BITMAP_BYTES];

	memcpy(before, s->have, sizeof(before));
	if (s->buf) {
		uint8_t idx[K];
		const uint8_t *rp[K];
		unsigned n = 0;

		if (!f->fec && ndz_fec_create(&f->fec, NULL) < 0)
			return;        /* no memory now: a later block or repair tries again */
		for (unsigned i = 0; i < s->rcount && n < K; i++)
			if (s->rmeta[2 * i] == st) {
				idx[n] = s->rmeta[2 * i + 1];
				rp[n++] = s->rbuf + (size_t)i * NDZ_BLOCK_SIZE;
			}
		if (ndz_fec_decode(f->fec, s->buf, s->have, st, idx, rp, n, NULL) < 0)
			return;
	} else {
		for (unsigned j = 0; j < K; j++)
			ndz_bit_set(s->have, ndz_fec_block(st, j));
	}
	for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++)
		s->decoded[i] |= (uint8_t)(s->have[i] & ~before[i]);
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
	uint8_t before[NDZ_BITMAP_BYTES];
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
	memcpy(before, s->have, sizeof(before));
	if (ndz_fec_wdecode(s->buf, s->have, set, idx, rp, n, NULL) != 0)
		goto out;      /* not determined yet (or no memory): a later arrival tries again */
	for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++)
		s->decoded[i] |= (uint8_t)(s->have[i] & ~before[i]);
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

/*
 * After an arrival: rebuild what the whole-chunk repairs (with the stripes') now can,
 * when the chunk lacks no more than MAX_DECODE_WHOLE blocks. A decode costs the cube
 * of what is missing (0.3 ms for 32 blocks here, a third of a second for 500), and is
 * tried again on every arrival until it works: repairs a forger sends (any index, any
 * chunk) must not make each packet that costly. Past the bound the chunk asks for
 * its blocks or for repairs of its stripes.
 */
static void try_whole(struct ndz_fetch *f, struct slot *s)
{
	if (s->wrep && s->nhave < BLOCKS && BLOCKS - s->nhave <= MAX_DECODE_WHOLE &&
	    s->nhave + useful_repairs(s) >= BLOCKS)
		decode_whole(f, s);
}

/*
 * Range repairs. A chunk wanted in part wants runs of blocks: the longest stretches
 * of consecutive wanted blocks (the header's, each piece's frames, merged where they
 * touch). The run of s holding block b: 1 and [*first, *first + *count), or 0 when b
 * is not wanted.
 */
static int run_of(const struct slot *s, unsigned b, unsigned *first, unsigned *count)
{
	unsigned a = b, z = b;

	if (b >= BLOCKS || !ndz_bit_test(s->want, b))
		return 0;
	while (a > 0 && ndz_bit_test(s->want, a - 1))
		a--;
	while (z + 1 < BLOCKS && ndz_bit_test(s->want, z + 1))
		z++;
	*first = a;
	*count = z - a + 1;
	return 1;
}

/* The blocks of [first, first + count) s lacks. */
static unsigned run_missing(const struct slot *s, unsigned first, unsigned count)
{
	unsigned n = 0;

	for (unsigned b = first; b < first + count; b++)
		n += !ndz_bit_test(s->have, b);
	return n;
}

/* The range repairs s holds of [first, first + count): their count; idx, rp filled
 * when not NULL (room for MAX_RANGE_HELD). */
static unsigned run_repairs(const struct slot *s, unsigned first, unsigned count, uint8_t *idx,
			    const uint8_t **rp)
{
	unsigned n = 0;

	for (unsigned i = 0; i < s->xcount; i++)
		if (s->xmeta[i].first == first && s->xmeta[i].count == count) {
			if (idx)
				idx[n] = s->xmeta[i].index;
			if (rp)
				rp[n] = s->xbuf ? s->xbuf + (size_t)i * NDZ_BLOCK_SIZE : NULL;
			n++;
		}
	return n;
}

/*
 * Rebuild the missing blocks of run [first, first + count) of s from its range
 * repairs when it holds as many as the run lacks (bounded as try_whole is: a forger's
 * repairs must not make every packet a large decode).
 */
static void try_range(struct ndz_fetch *f, struct slot *s, unsigned first, unsigned count)
{
	uint8_t idx[MAX_RANGE_HELD], before[NDZ_BITMAP_BYTES];
	const uint8_t *rp[MAX_RANGE_HELD];
	unsigned e = run_missing(s, first, count), n;

	if (!e || e > MAX_DECODE_WHOLE || (n = run_repairs(s, first, count, idx, rp)) < e)
		return;
	memcpy(before, s->have, sizeof(before));
	if (ndz_fec_rdecode(s->xbuf ? s->buf : NULL, s->have, first, count, idx, rp, n, NULL) != 0)
		return;        /* not determined yet (dependent), or no memory: try again later */
	for (unsigned b = first; b < first + count; b++)
		if (ndz_bit_test(s->have, b) && !ndz_bit_test(before, b)) {
			ndz_bit_set(s->decoded, b);
			s->sdata[ndz_fec_stripe(b)]++;
		}
	s->nhave += e;
	f->st.decoded += e;
	f->st.range_decoded += e;
}

/* After blocks arrived in a chunk wanted in part that holds range repairs: the runs
 * they heal now. */
static void try_ranges(struct ndz_fetch *f, struct slot *s)
{
	for (unsigned i = 0; i < s->xcount && s->nhave < BLOCKS; i++) {
		unsigned j = 0;

		while (j < i && (s->xmeta[j].first != s->xmeta[i].first ||
				 s->xmeta[j].count != s->xmeta[i].count))
			j++;
		if (j == i)    /* the first of its range */
			try_range(f, s, s->xmeta[i].first, s->xmeta[i].count);
	}
}

/* A range request of s: repairs (in index) of [first, first + count). */
struct rask {
	uint16_t first, count;
	uint8_t wanted;
};

/*
 * What s, a chunk wanted in part, asks for now with range repairs on: per run it
 * lacks blocks of, as many range repairs as its held ones cannot rebuild (one when they
 * could but do not determine them), as the whole-chunk requests count; the blocks
 * themselves (into blocks, a bitmap, zeroed first) for a run that lacks more than
 * NDZ_FEC_ASK_MAX, past NDZ_FEC_RANGES_MAX runs, or after MAX_RANGE_ROUNDS rounds.
 * Returns the number of range requests in ra (room for NDZ_FEC_RANGES_MAX); *nblocks
 * the blocks asked for. A run with blocks never asked for (s->asked) asks for those as
 * blocks, and for the others it lacks too when lost; without lost (the blocks asked
 * for may still come) a run asks for nothing else.
 */
static unsigned range_plan(const struct ndz_fetch *f, const struct slot *s, struct rask *ra,
			   uint8_t *blocks, unsigned *nblocks, int lost)
{
	unsigned n = 0;

	memset(blocks, 0, NDZ_BITMAP_BYTES);
	*nblocks = 0;
	for (unsigned b = 0; b < BLOCKS;) {
		unsigned first, count, e, u, need, fresh = 0;

		if (!run_of(s, b, &first, &count)) {
			b++;
			continue;
		}
		b = first + count;
		if (!(e = run_missing(s, first, count)))
			continue;
		for (unsigned k = first; k < first + count; k++)
			fresh += !ndz_bit_test(s->have, k) && !ndz_bit_test(s->asked, k);
		if (fresh || !lost) {
			/* never asked for: the blocks themselves (others may want them too);
			 * asked for and maybe on their way: none yet */
			for (unsigned k = first; fresh && k < first + count; k++)
				if (!ndz_bit_test(s->have, k) &&
				    (lost || !ndz_bit_test(s->asked, k))) {
					ndz_bit_set(blocks, k);
					(*nblocks)++;
				}
			continue;
		}
		u = run_repairs(s, first, count, NULL, NULL);
		need = e > u ? e - u : 1;
		if (f->emit_range && n < NDZ_FEC_RANGES_MAX &&
		    s->xrounds < MAX_RANGE_ROUNDS && need <= NDZ_FEC_ASK_MAX && need <= count &&
		    u + need <= NDZ_FEC_WREPAIRS && e <= MAX_DECODE_WHOLE) {
			ra[n].first = (uint16_t)first;
			ra[n].count = (uint16_t)count;
			ra[n++].wanted = (uint8_t)need;
			continue;
		}
		for (unsigned k = first; k < first + count; k++)
			if (!ndz_bit_test(s->have, k)) {
				ndz_bit_set(blocks, k);
				(*nblocks)++;
			}
	}
	return n;
}

/* The slot chunk fills, or NULL (not started, complete, or written). */
static struct slot *filling(struct ndz_fetch *f, uint32_t chunk)
{
	uint32_t ref = h_get(f, chunk);

	if (ref >= f->o.slots || f->slots[ref].state != S_FILL)
		return NULL;
	return &f->slots[ref];
}

/*
 * Whether the pass of s (wanted in part) the server just moved on from had every
 * block asked for, so that those missing are lost: it began after the last request,
 * with a block at or below the lowest of them (a request that found the chunk on its
 * way, or already in a batch built, joined it from a later block, and the server
 * queued the rest behind others' chunks).
 */
static int covered(const struct slot *s)
{
	if (!s->last_req || s->pass_ns < s->last_req)
		return 0;
	for (unsigned b = 0; b < BLOCKS; b++)
		if (!ndz_bit_test(s->have, b) && ndz_bit_test(s->asked, b) &&
		    !ndz_bit_test(s->ranged, b))
			return s->pass_first <= b;
	return 1;
}

/*
 * The slot for a block or repair of chunk arriving at now (NULL: not wanted, and
 * dups more duplicates counted when the chunk is complete or done).
 */
static struct slot *arrival(struct ndz_fetch *f, uint32_t chunk, unsigned block, int store,
			    unsigned dups, uint64_t now_ns)
{
	struct slot *s, *m;
	uint32_t ref;
	int new_pass = f->last_block_chunk != (int64_t)chunk;

	if (f->last_block_chunk >= 0 && new_pass &&
	    (m = filling(f, (uint32_t)f->last_block_chunk))) {
		if (!m->moved_on)
			m->ask_ns = now_ns + (f->repair ? next_rand(&f->stagger) % STAGGER_NS : 0);
		m->moved_on = 1;
		m->covered = m->partial && covered(m);
		f->kick = 1;
	}
	f->last_block_chunk = chunk;
	ref = is_done(f, chunk) ? 0 : h_get(f, chunk);
	if (is_done(f, chunk) || (ref < f->o.slots && f->slots[ref].state == S_QUEUED)) {
		f->st.dups += dups;
		return NULL;
	}
	if (ref < f->o.slots) {
		s = &f->slots[ref];
	} else {
		s = take_slot(f, chunk, ref, store);
		if (!s) {
			f->st.no_room++;
			return NULL;
		}
	}
	s->last_block_ns = now_ns;
	if (new_pass || !s->pass_ns) {
		s->pass_ns = now_ns;
		s->pass_first = block;
		if (s->partial)
			s->moved_on = 0;       /* the server came back to it */
	}
	return s;
}

/* block of s is whole in its buffer now: held, and what that decodes. Returns as
 * ndz_fetch_block. */
static int landed(struct ndz_fetch *f, struct slot *s, unsigned block)
{
	unsigned st;

	ndz_bit_set(s->have, block);
	s->nhave++;
	st = ndz_fec_stripe(block);
	s->sdata[st]++;
	if (s->srep[st] && s->sdata[st] < K && s->sdata[st] + s->srep[st] >= K)
		decode_stripe(f, s, st);
	try_whole(f, s);
	if (s->xcount) {
		unsigned first, count;

		if (run_of(s, block, &first, &count))
			try_range(f, s, first, count);
	}
	if (s->nhave < BLOCKS)
		return -1;
	return (int)(s - f->slots);
}

/* The held-back store's record of chunk, or NULL. */
static struct hbchunk *hb_find(const struct ndz_fetch *f, uint32_t chunk)
{
	for (uint32_t i = 0; i < f->nhbc; i++)
		if (f->hbc[i].chunk == chunk)
			return &f->hbc[i];
	return NULL;
}

/* A slot is free again: held-back chunks waiting for one may take it. */
static void hb_wake(struct ndz_fetch *f)
{
	for (uint32_t i = 0; i < f->nhbc; i++)
		f->hbc[i].waiting = 0;
}

/* Granules from..to (bytes of a block, multiples of NDZ_PKT_SPAN_GRAIN) as a mask. */
static uint32_t grain_bits(unsigned from, unsigned to)
{
	return (to - from == NDZ_BLOCK_SIZE ? 0xffffffffu :
		((1u << ((to - from) / NDZ_PKT_SPAN_GRAIN)) - 1u)) << (from / NDZ_PKT_SPAN_GRAIN);
}

/* The entry of block of chunk a SPAN's edge began among the last few held, or NULL
 * (a SPAN's next edge comes soon after its last: the search is short). */
static struct hblock *hb_part(struct ndz_fetch *f, uint32_t chunk, unsigned block)
{
	for (uint32_t i = f->nhb, n = 0; i > 0 && n < 64; i--, n++)
		if (f->hb[i - 1].chunk == chunk && f->hb[i - 1].block == block)
			return &f->hb[i - 1];
	return NULL;
}

/*
 * Bytes from..to of a block of a deferred chunk the cap refused a slot (the whole
 * block, or a SPAN's edge): held back, if there is room. A block counts as held (in
 * its chunk's bitmap) once all its granules are.
 */
static void hold_back(struct ndz_fetch *f, uint32_t chunk, unsigned block, unsigned from,
		      unsigned to, const uint8_t *data, uint64_t now_ns)
{
	struct hbchunk *r;
	struct hblock *h;
	uint32_t bits = grain_bits(from, to);

	if (!f->hb) {
		f->hbc = calloc(HB_CHUNKS(f), sizeof(*f->hbc));
		f->hb = calloc(HB_BLOCKS(f), sizeof(*f->hb));
		if (data)
			f->hbdata = malloc((size_t)HB_BLOCKS(f) * NDZ_BLOCK_SIZE);
		if (!f->hbc || !f->hb || (data && !f->hbdata)) {
			free(f->hbc);
			free(f->hb);
			free(f->hbdata);
			f->hbc = NULL;
			f->hb = NULL;
			f->hbdata = NULL;
			return;        /* no memory: dropped, as without the store */
		}
	}
	if ((data != NULL) != (f->hbdata != NULL))
		return;                /* (a cache stores bytes always, or never) */
	if (!(r = hb_find(f, chunk))) {
		if (f->nhbc == HB_CHUNKS(f) || f->nhb == HB_BLOCKS(f))
			return;
		r = &f->hbc[f->nhbc++];
		memset(r, 0, sizeof(*r));
		r->chunk = chunk;
	}
	r->last_ns = now_ns;
	if (ndz_bit_test(r->have, block)) {
		f->st.no_room--;       /* not dropped: held already */
		f->st.dups += from == 0;
		return;
	}
	if (!(h = hb_part(f, chunk, block))) {
		if (f->nhb == HB_BLOCKS(f))
			return;
		h = &f->hb[f->nhb++];
		h->chunk = chunk;
		h->block = block;
		h->gmask = 0;
	}
	if (f->hbdata && data)
		memcpy(f->hbdata + (size_t)(h - f->hb) * NDZ_BLOCK_SIZE + from, data, to - from);
	h->gmask |= bits;
	f->st.no_room--;               /* counted when take_slot refused it */
	if (h->gmask != 0xffffffffu)
		return;
	ndz_bit_set(r->have, block);
	r->n++;
	f->st.held_back++;
}

static int put_block(struct ndz_fetch *f, struct slot *s, unsigned block, const uint8_t *data);

/*
 * The slot for bytes from..to of block of chunk arriving (arrival), or NULL: then, when
 * the seed scan's cap refused the chunk a slot (or the chunk waits for one with blocks
 * held back), those bytes are held back.
 */
static struct slot *slot_or_hold(struct ndz_fetch *f, uint32_t chunk, unsigned block,
				 unsigned from, unsigned to, const uint8_t *data, uint64_t now_ns)
{
	uint64_t nr = f->st.no_room;
	struct slot *s;

	f->refused = 0;
	if ((s = arrival(f, chunk, block, data != NULL, from == 0, now_ns)))
		return s;
	if (f->st.no_room != nr && (f->refused || (f->nhbc && hb_find(f, chunk))))
		hold_back(f, chunk, block, from, to, data, now_ns);
	return NULL;
}


int ndz_fetch_block(struct ndz_fetch *f, uint32_t chunk, unsigned block, const uint8_t *data,
		    uint64_t now_ns)
{
	struct slot *s;

	if (chunk >= f->o.chunks || block >= BLOCKS)
		return -1;
	s = slot_or_hold(f, chunk, block, 0, NDZ_BLOCK_SIZE, data, now_ns);
	return s ? put_block(f, s, block, data) : -1;
}

/* A block of s's chunk: stored (or found a duplicate). The slot when it completes s. */
static int put_block(struct ndz_fetch *f, struct slot *s, unsigned block, const uint8_t *data)
{
	if (ndz_bit_test(s->have, block)) {
		/* the same block twice, different bytes: one of them is forged (or rebuilt
		 * from a forged repair); should the chunk fail, that block is fetched again */
		if (data && s->buf && (!s->partial || ndz_bit_test(s->want, block)) &&
		    memcmp(s->buf + (size_t)block * NDZ_BLOCK_SIZE, data, NDZ_BLOCK_SIZE) != 0)
			ndz_bit_set(s->contested, block);
		f->st.dups++;
		return -1;
	}
	f->st.blocks++;
	if (data && s->buf && ndz_bit_test(s->prev, block)) {
		/* a copy of a chunk that failed its check: a block that differs is the
		 * forged one, or the other copy's is */
		if (memcmp(s->buf + (size_t)block * NDZ_BLOCK_SIZE, data, NDZ_BLOCK_SIZE) != 0)
			ndz_bit_set(s->contested, block);
		s->prev[block / 8] &= (uint8_t)~(1u << (block % 8));
	}
	if (data && s->buf)
		memcpy(s->buf + (size_t)block * NDZ_BLOCK_SIZE, data, NDZ_BLOCK_SIZE);
	return landed(f, s, block);
}

int ndz_fetch_blocks(struct ndz_fetch *f, uint32_t chunk, unsigned first, unsigned count,
		     const uint8_t *data, uint64_t now_ns)
{
	struct slot *s = NULL;
	uint32_t ref;
	int fresh;

	if (chunk >= f->o.chunks || first >= BLOCKS || !count || count > BLOCKS - first)
		return -1;
	/* the fast way only for a chunk filling, none of the run held or in doubt */
	ref = is_done(f, chunk) ? NO_REF : h_get(f, chunk);
	if (ref < f->o.slots && f->slots[ref].state == S_FILL)
		s = &f->slots[ref];
	fresh = s && (!data || s->buf);
	for (unsigned b = first; fresh && b < first + count; b++)
		fresh = !ndz_bit_test(s->have, b) && !ndz_bit_test(s->prev, b);
	if (!fresh) {
		int slot = -1;

		for (unsigned i = 0; i < count; i++) {
			int r = ndz_fetch_block(f, chunk, first + i,
						data ? data + (size_t)i * NDZ_BLOCK_SIZE : NULL,
						now_ns);

			if (r >= 0)
				slot = r;
		}
		return slot;
	}
	s = arrival(f, chunk, 0, data != NULL, 1, now_ns); /* the filling slot: moved-on, time */
	if (data)
		memcpy(s->buf + (size_t)first * NDZ_BLOCK_SIZE, data, (size_t)count * NDZ_BLOCK_SIZE);
	for (unsigned b = first; b < first + count; b++) {
		ndz_bit_set(s->have, b);
		s->sdata[ndz_fec_stripe(b)]++;
	}
	s->nhave += count;
	f->st.blocks += count;
	for (unsigned st = 0; st < STRIPES; st++)
		if (s->srep[st] && s->sdata[st] < K && s->sdata[st] + s->srep[st] >= K)
			decode_stripe(f, s, st);
	try_whole(f, s);
	if (s->xcount)
		try_ranges(f, s);
	if (s->nhave < BLOCKS)
		return -1;
	return (int)(s - f->slots);
}

int ndz_fetch_range_repair(struct ndz_fetch *f, uint32_t chunk, unsigned first, unsigned count,
			   unsigned index, const uint8_t *data, uint64_t now_ns)
{
	struct slot *s;
	unsigned rf, rc;

	if (chunk >= f->o.chunks || !ndz_fec_range_ok(first, count) || index >= NDZ_FEC_WREPAIRS)
		return -1;
	if (!(s = arrival(f, chunk, 0, data != NULL, 1, now_ns)))
		return -1;
	/* of use only to a chunk wanted in part whose run it is, and not held yet */
	if (!s->partial || !run_of(s, first, &rf, &rc) || rf != first || rc != count ||
	    !run_missing(s, first, count) || (data && !s->buf)) {
		f->st.dups++;
		return -1;
	}
	for (unsigned i = 0; i < s->xcount; i++)
		if (s->xmeta[i].first == first && s->xmeta[i].count == count &&
		    s->xmeta[i].index == index) {
			f->st.dups++;
			return -1;
		}
	if (s->xcount == MAX_RANGE_HELD) {
		f->st.no_room++;
		return -1;
	}
	if (s->xcount == s->xcap) {
		unsigned cap = s->xcap ? 2 * s->xcap : 8;
		struct xrep *m = realloc(s->xmeta, (size_t)cap * sizeof(*m));
		uint8_t *b = NULL;

		if (m)
			s->xmeta = m;
		if (m && data && !(b = realloc(s->xbuf, (size_t)cap * NDZ_BLOCK_SIZE))) {
			f->st.no_room++;
			return -1;
		}
		if (!m) {
			f->st.no_room++;
			return -1;
		}
		if (b)
			s->xbuf = b;
		s->xcap = cap;
	}
	if (data)
		memcpy(s->xbuf + (size_t)s->xcount * NDZ_BLOCK_SIZE, data, NDZ_BLOCK_SIZE);
	s->xmeta[s->xcount].first = (uint16_t)first;
	s->xmeta[s->xcount].count = (uint16_t)count;
	s->xmeta[s->xcount].index = (uint8_t)index;
	s->xcount++;
	f->st.repairs++;
	f->st.range_repairs++;
	try_range(f, s, first, count);
	if (s->nhave < BLOCKS)
		return -1;
	return (int)(s - f->slots);
}

/* Bytes from..to of block of s's chunk: stored (or found held). The slot when that
 * completes s. */
static int put_piece(struct ndz_fetch *f, struct slot *s, unsigned block, unsigned from,
		     unsigned to, const uint8_t *data)
{
	uint8_t *at = s->buf ? s->buf + (size_t)block * NDZ_BLOCK_SIZE + from : NULL;

	if (ndz_bit_test(s->have, block)) {
		/* as ndz_fetch_block: different bytes again cast doubt on the block */
		if (data && at && (!s->partial || ndz_bit_test(s->want, block)) &&
		    memcmp(at, data, to - from) != 0)
			ndz_bit_set(s->contested, block);
		f->st.dups += from == 0;
		return -1;
	}
	if (data && at) {
		/* a copy of a chunk that failed its check: compared as it comes */
		if (ndz_bit_test(s->prev, block) && memcmp(at, data, to - from) != 0)
			ndz_bit_set(s->contested, block);
		memcpy(at, data, to - from);
	}
	s->gmask[block] |= grain_bits(from, to);
	if (s->gmask[block] != 0xffffffffu)
		return -1;
	s->gmask[block] = 0;
	s->prev[block / 8] &= (uint8_t)~(1u << (block % 8));
	f->st.blocks++;
	return landed(f, s, block);
}

/*
 * A SPAN's edge: the bytes from..to (granules) of block of chunk (data: theirs; NULL as
 * for ndz_fetch_block), stored into the block, which is held once all its granules
 * are. A block held already, or a chunk complete, counts a duplicate only for the
 * piece holding its first granule: a block cut into pieces counts once.
 */
static int piece(struct ndz_fetch *f, uint32_t chunk, unsigned block, unsigned from,
		 unsigned to, const uint8_t *data, uint64_t now_ns)
{
	struct slot *s = slot_or_hold(f, chunk, block, from, to, data, now_ns);

	return s ? put_piece(f, s, block, from, to, data) : -1;
}

int ndz_fetch_span(struct ndz_fetch *f, uint32_t chunk, uint32_t off, uint32_t len,
		   const uint8_t *data, uint64_t now_ns)
{
	uint32_t end = off + len, first, last;
	int slot = -1, r;

	if (chunk >= f->o.chunks || !len || off % NDZ_PKT_SPAN_GRAIN || len % NDZ_PKT_SPAN_GRAIN ||
	    off > NDZ_CHUNK_SIZE || len > NDZ_CHUNK_SIZE - off)
		return -1;
	/* the blocks it covers whole: as a BLOCKS (one copy, no granules) */
	first = (off + NDZ_BLOCK_SIZE - 1) / NDZ_BLOCK_SIZE;
	last = end / NDZ_BLOCK_SIZE;
	if (last > first &&
	    (r = ndz_fetch_blocks(f, chunk, first, last - first,
				  data ? data + ((size_t)first * NDZ_BLOCK_SIZE - off) : NULL,
				  now_ns)) >= 0)
		slot = r;
	/* its edges: the part of a block before the first whole one, and after the last */
	if (off % NDZ_BLOCK_SIZE) {
		uint32_t b = off / NDZ_BLOCK_SIZE, to = end < (b + 1) * NDZ_BLOCK_SIZE ?
			     end : (b + 1) * NDZ_BLOCK_SIZE;

		if ((r = piece(f, chunk, b, off % NDZ_BLOCK_SIZE, to - b * NDZ_BLOCK_SIZE, data,
			       now_ns)) >= 0)
			slot = r;
	}
	if (end % NDZ_BLOCK_SIZE && last >= first &&   /* (else the edge above was it) */
	    (r = piece(f, chunk, last, 0, end % NDZ_BLOCK_SIZE,
		       data ? data + ((size_t)last * NDZ_BLOCK_SIZE - off) : NULL, now_ns)) >= 0)
		slot = r;
	return slot;
}

int ndz_fetch_repair(struct ndz_fetch *f, uint32_t chunk, unsigned set, unsigned index,
		     const uint8_t *data, uint64_t now_ns)
{
	struct slot *s;
	int whole = set == WHOLE;

	if (chunk >= f->o.chunks || set >= SETS || index >= ndz_fec_repairs(set))
		return -1;
	if (!(s = arrival(f, chunk, 0, data != NULL, 1, now_ns)))
		return -1;
	if (s->partial || (whole ? s->nhave == BLOCKS || ndz_bit_test(s->wbits, index) :
		    s->sdata[set] == K || ndz_bit_test(s->repbits[set], index))) {
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

	/* neither free nor filling: not asked for, and further blocks of it are duplicates */
	s->state = S_QUEUED;
}

void ndz_fetch_accept(struct ndz_fetch *f, int slot)
{
	struct slot *s = &f->slots[slot];

	s->state = S_QUEUED;
	f->st.complete++;
	if (s->partial) {
		f->st.partial++;
		f->st.partial_blocks += ndz_bit_count(s->want);
	}
	f->kick = 1;
}

void ndz_fetch_reject(struct ndz_fetch *f, int slot)
{
	struct slot *s = &f->slots[slot];

	s->state = S_FREE;
	h_del(f, s->chunk);
	if (!ask_add(f, s->chunk, 1, f->acap))     /* asked long ago: ask again now */
		f->lost++;
	f->kick = 1;
}

int ndz_fetch_retry(struct ndz_fetch *f, int slot)
{
	struct slot *s = &f->slots[slot];
	uint8_t doubt[NDZ_BITMAP_BYTES];
	unsigned n = 0;

	if (!s->buf || s->retries >= MAX_RETRIES) {
		ndz_fetch_reject(f, slot);
		return 0;
	}
	for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++) {
		doubt[i] = (uint8_t)((s->contested[i] | s->decoded[i]) & s->have[i]);
		n += doubt[i] != 0;
	}
	if (!n)
		memcpy(doubt, s->have, sizeof(doubt));  /* all, each compared as it comes */
	if (s->partial)
		for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++)
			doubt[i] &= s->want[i];    /* the others were never received */
	/* drop those (kept in buf to compare) and every repair, ask for them again */
	s->nhave = 0;
	memset(s->sdata, 0, sizeof(s->sdata));
	for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++) {
		s->have[i] &= (uint8_t)~doubt[i];
		s->prev[i] |= doubt[i];
	}
	memset(s->gmask, 0, sizeof(s->gmask));  /* every block was held: none in part */
	for (unsigned b = 0; b < BLOCKS; b++)
		if (ndz_bit_test(s->have, b)) {
			s->nhave++;
			s->sdata[ndz_fec_stripe(b)]++;
		}
	forget_repairs(s);
	memset(s->seen, 0, sizeof(s->seen));
	s->seen_ns = 0;
	s->retries++;
	s->state = S_FILL;
	s->moved_on = 1;               /* ask for them at once */
	s->covered = 1;                /* (as lost) */
	s->ask_ns = 0;
	s->last_req = 1;
	f->kick = 1;
	return n ? 1 : 2;
}

uint8_t *ndz_fetch_take_buf(struct ndz_fetch *f, int slot)
{
	uint8_t *b = f->slots[slot].buf;

	f->slots[slot].buf = NULL;
	return b;
}

void ndz_fetch_done(struct ndz_fetch *f, int slot)
{
	struct slot *s = &f->slots[slot];

	f->done[s->chunk >> 3] |= (uint8_t)(1u << (s->chunk & 7));
	s->state = S_FREE;
	h_del(f, s->chunk);
	f->st.done++;
	f->kick = 1;
	hb_wake(f);
}

int ndz_fetch_have(struct ndz_fetch *f, uint32_t chunk)
{
	uint32_t ref;

	if (chunk >= f->o.chunks || is_done(f, chunk))
		return 0;
	ref = h_get(f, chunk);
	if (ref < f->o.slots) {
		struct slot *s = &f->slots[ref];

		if (s->state != S_FILL)
			return 0;      /* complete: the caller has it */
		forget_repairs(s);
		s->state = S_FREE;
		h_del(f, chunk);
		hb_wake(f);
	} else if (ref != NO_REF) {
		ask_del(f, ref - (uint32_t)f->o.slots);
	}
	f->done[chunk >> 3] |= (uint8_t)(1u << (chunk & 7));
	f->st.complete++;
	f->st.done++;
	f->kick = 1;
	return 1;
}

int ndz_fetch_needs(const struct ndz_fetch *f, uint32_t chunk)
{
	uint32_t ref;

	if (chunk >= f->o.chunks || is_done(f, chunk))
		return 0;
	ref = h_get(f, chunk);
	return ref >= f->o.slots || f->slots[ref].state == S_FILL;
}

void ndz_fetch_snoop(struct ndz_fetch *f, uint32_t chunk, const uint8_t *bitmap,
		     uint64_t now_ns)
{
	struct slot *s = NULL;
	const uint8_t *w;
	uint32_t ref;

	if (chunk >= f->o.chunks || is_done(f, chunk))
		return;
	ref = h_get(f, chunk);
	if (ref < f->o.slots) {
		s = &f->slots[ref];
		if (s->state != S_FILL)
			return;
	}
	w = !s && f->want ? f->want(f->want_ctx, chunk) : NULL;
	for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++) {
		uint8_t missing = s ? (uint8_t)~s->have[i] : w ? w[i] : 0xff;

		if (missing & ~bitmap[i])
			return;        /* does not cover all we lack */
	}
	if (s) {
		s->last_req = now_ns;
		s->moved_on = 0;
		for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++) {
			s->asked[i] |= (uint8_t)~s->have[i];
			s->ranged[i] = 0;
		}
	} else if (ref != NO_REF) {
		f->asks[ref - f->o.slots].last_req = now_ns;
	} else {
		/* no room: we shall ask ourselves when its turn comes */
		ask_add(f, chunk, now_ns, f->acap - (uint32_t)f->o.slots - f->o.request_ahead);
	}
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
		if (s->wrep + need[WHOLE] <= NDZ_FEC_WREPAIRS)
			return 1;
		need[WHOLE] = 0;       /* (all held, yet short: per stripe, or the blocks) */
	}
	for (unsigned st = 0; st < STRIPES; st++) {
		unsigned held = (unsigned)s->sdata[st] + s->srep[st];

		need[st] = (uint8_t)(held >= K ? 0 : K - held);
		if (need[st] > most)
			most = need[st];
		/*
		 * A stripe has fewer distinct repairs than blocks: one whose repairs are
		 * all here (others asked for them all) lacks blocks that only the blocks
		 * themselves can give; asking for repairs again would bring duplicates
		 * forever.
		 */
		if (need[st] > NDZ_FEC_REPAIRS - s->srep[st])
			return 0;
	}
	return most <= MAX_ASK_REPAIRS;
}

void ndz_fetch_snoop_repairs(struct ndz_fetch *f, uint32_t chunk, const uint8_t *need,
			     uint64_t now_ns)
{
	uint8_t mine[SETS];
	struct slot *s;

	if (chunk >= f->o.chunks || is_done(f, chunk) || !(s = filling(f, chunk)) || s->partial)
		return;        /* repairs heal a chunk only once some of it is here */
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
	s->last_req = now_ns;
	s->moved_on = 0;
}

void ndz_fetch_snoop_range(struct ndz_fetch *f, uint32_t chunk, unsigned first,
			   unsigned count, unsigned wanted, uint64_t now_ns)
{
	struct rask ra[NDZ_FEC_RANGES_MAX];
	uint8_t blocks[NDZ_BITMAP_BYTES];
	unsigned n, nb, i;
	struct slot *s;

	if (chunk >= f->o.chunks || is_done(f, chunk) || !(s = filling(f, chunk)) || !s->partial)
		return;
	/* the server sends the most asked for per range: what those heard ask for */
	if (!s->xseen_ns || now_ns - s->xseen_ns > f->o.redelay_ns) {
		s->nxseen = 0;
		s->xseen_ns = now_ns;
	}
	for (i = 0; i < s->nxseen; i++)
		if (s->xseen[i].first == first && s->xseen[i].count == count)
			break;
	if (i == s->nxseen) {
		if (s->nxseen == NDZ_FEC_RANGES_MAX)
			return;
		s->nxseen++;
		s->xseen[i].first = (uint16_t)first;
		s->xseen[i].count = (uint16_t)count;
		s->xseen[i].index = 0;
	}
	if (wanted > s->xseen[i].index)
		s->xseen[i].index = (uint8_t)wanted;
	n = range_plan(f, s, ra, blocks, &nb, 1);
	if (nb || !n)
		return;        /* we would ask for blocks: range repairs do not cover that */
	for (unsigned k = 0; k < n; k++) {
		unsigned j = 0;

		while (j < s->nxseen && (s->xseen[j].first != ra[k].first ||
					 s->xseen[j].count != ra[k].count))
			j++;
		if (j == s->nxseen || s->xseen[j].index < ra[k].wanted)
			return;
	}
	s->last_req = now_ns;
	s->moved_on = 0;
}

void ndz_fetch_set_range(struct ndz_fetch *f, ndz_fetch_emit_range emit_range, void *ctx)
{
	f->emit_range = emit_range;
	f->range_ctx = ctx;
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
		if (!s->partial && f->defer && f->defer(f->defer_ctx, s->chunk))
			continue;      /* others' blocks of it came before a seed scan reached it */
		if (silent || (s->moved_on && now >= s->ask_ns &&
			       now - s->last_req > MOVED_ON_WAIT_NS) ||
		    (now - s->last_block_ns > redelay && now - s->last_req > redelay)) {
			uint8_t missing[NDZ_BITMAP_BYTES], need[SETS];

			if (f->repair && !s->partial && repairs_needed(f, s, need)) {
				emit(ctx, s->chunk, NULL, need);
			} else if (s->partial && f->emit_range) {
				/* what was asked for is lost once a pass that had it is over, or
				 * the server kept silent about it; else it may be on its way */
				int lost = silent || s->covered || !s->moved_on;
				struct rask ra[NDZ_FEC_RANGES_MAX];
				unsigned nb, nr = range_plan(f, s, ra, missing, &nb, lost);

				s->moved_on = 0;
				if (!nr && !nb) {
					/* all asked for may still come: lost if not by then */
					s->moved_on = s->covered = 1;
					s->ask_ns = now + QUEUED_WAIT_NS;
					continue;
				}
				for (unsigned k = 0; k < nr; k++) {
					f->emit_range(f->range_ctx, s->chunk, ra[k].first,
						      ra[k].count, ra[k].wanted);
					for (unsigned b = ra[k].first; b < ra[k].first + ra[k].count;
					     b++)
						if (!ndz_bit_test(s->have, b))
							ndz_bit_set(s->ranged, b);
				}
				if (nb) {
					emit(ctx, s->chunk, missing, NULL);
					for (unsigned b = 0; b < NDZ_BITMAP_BYTES; b++) {
						s->asked[b] |= missing[b];
						s->ranged[b] &= (uint8_t)~missing[b];
					}
				}
				s->xrounds += nr > 0;
			} else {
				for (unsigned b = 0; b < NDZ_BITMAP_BYTES; b++)
					missing[b] = (uint8_t)~s->have[b];
				emit(ctx, s->chunk, missing, NULL);
			}
			s->last_req = now;
			s->moved_on = 0;
			sent++;
		} else if (!s->moved_on) {
			inflight++;
		}
	}
	/*
	 * chunks asked for by anyone (us or others) and not started yet are on their way
	 * too; with no slot left, neither these nor new chunks can be asked for
	 */
	for (uint32_t j = 0; j < f->nasks && avail > 0; j++) {
		struct ask *a = &f->asks[j];

		if (silent || now - a->last_req > redelay) {
			emit(ctx, a->chunk, f->want ? f->want(f->want_ctx, a->chunk) : NULL, NULL);
			a->last_req = now;
			sent++;
		}
		inflight++;
		avail--;
	}
	/*
	 * new chunks, in random order; again from the start when some fell out of asks or
	 * were deferred (once a call: deferred ones may be all that is left)
	 */
	for (int again = 0; inflight < f->o.request_ahead && avail > 0;) {
		uint32_t ch;

		if (f->next_order >= f->o.chunks) {
			if (!f->lost || again++)
				break;
			f->lost = 0;
			f->next_order = 0;
		}
		ch = order_at(f, f->next_order++);
		if (is_done(f, ch) || h_get(f, ch) != NO_REF)
			continue;      /* being received, done, or counted above */
		if (f->defer && f->defer(f->defer_ctx, ch)) {
			f->lost++;     /* walk to it again later */
			continue;
		}
		emit(ctx, ch, f->want ? f->want(f->want_ctx, ch) : NULL, NULL);
		if (!ask_add(f, ch, now, f->acap))
			f->lost++;
		sent++;
		inflight++;
		avail--;
	}
	return sent;
}

int64_t ndz_fetch_deferred(struct ndz_fetch *f)
{
	int64_t best = -1;
	uint32_t most = 0;

	if (!f->defer)
		return -1;
	for (size_t i = 0; i < f->o.slots; i++) {
		const struct slot *s = &f->slots[i];

		if (s->state == S_FILL && !s->partial && f->defer(f->defer_ctx, s->chunk) &&
		    (best < 0 || s->nhave > most)) {
			best = s->chunk;
			most = s->nhave;
		}
	}
	for (uint32_t i = 0; i < f->nhbc; i++)
		if (f->defer(f->defer_ctx, f->hbc[i].chunk) && (best < 0 || f->hbc[i].n > most)) {
			best = f->hbc[i].chunk;
			most = f->hbc[i].n;
		}
	if (best >= 0)
		return best;
	if (f->capped >= 0) {
		int64_t k = f->capped;

		f->capped = -1;
		if (!is_done(f, (uint32_t)k) && f->defer(f->defer_ctx, (uint32_t)k))
			return k;
	}
	return -1;
}

int64_t ndz_fetch_held_back(struct ndz_fetch *f)
{
	for (uint32_t i = 0; i < f->nhbc; i++) {
		uint32_t ch = f->hbc[i].chunk;

		if (f->defer && f->defer(f->defer_ctx, ch))
			continue;
		if (f->hbc[i].waiting && !is_done(f, ch) && h_get(f, ch) >= f->o.slots)
			continue;      /* still no slot for it */
		return ch;
	}
	return -1;
}


int ndz_fetch_release(struct ndz_fetch *f, uint32_t chunk)
{
	struct hbchunk *r = hb_find(f, chunk);
	struct slot *s = NULL;
	uint32_t ref, k = 0;
	int slot = -1;

	if (!r)
		return -1;
	if (!is_done(f, chunk)) {
		ref = h_get(f, chunk);
		if (ref < f->o.slots)
			s = f->slots[ref].state == S_FILL ? &f->slots[ref] : NULL;
		else if ((s = take_slot(f, chunk, ref, f->hbdata != NULL)) != NULL)
			/* asked for as a slot whose last block came then */
			s->last_block_ns = r->last_ns;
	}
	if (!s && !is_done(f, chunk)) {
		r->waiting = 1;         /* kept until a slot is free (hb_wake) */
		return -1;
	}
	if (!s)
		f->st.dups += r->n;     /* held by the target, or come meanwhile */
	for (uint32_t i = 0; i < f->nhb; i++) {
		if (f->hb[i].chunk != chunk) {
			if (k != i) {
				f->hb[k] = f->hb[i];
				if (f->hbdata)
					memcpy(f->hbdata + (size_t)k * NDZ_BLOCK_SIZE,
					       f->hbdata + (size_t)i * NDZ_BLOCK_SIZE, NDZ_BLOCK_SIZE);
			}
			k++;
		} else if (s && s->state == S_FILL && f->hb[i].gmask == 0xffffffffu) {
			int r2 = put_block(f, s, f->hb[i].block,
					   f->hbdata ? f->hbdata + (size_t)i * NDZ_BLOCK_SIZE : NULL);

			if (r2 >= 0)
				slot = r2;
		} else if (s && s->state == S_FILL) {
			/* a block held in part (SPAN edges): each run of its granules */
			uint32_t m = f->hb[i].gmask;

			for (unsigned g = 0; g < 32;) {
				unsigned e;
				int r2;

				if (!(m & (1u << g))) {
					g++;
					continue;
				}
				for (e = g; e < 32 && (m & (1u << e)); e++)
					;
				r2 = put_piece(f, s, f->hb[i].block, g * NDZ_PKT_SPAN_GRAIN,
					       e * NDZ_PKT_SPAN_GRAIN,
					       f->hbdata ? f->hbdata +
					       (size_t)i * NDZ_BLOCK_SIZE + g * NDZ_PKT_SPAN_GRAIN :
					       NULL);
				if (r2 >= 0)
					slot = r2;
				g = e;
			}
		}
	}
	f->nhb = k;
	*r = f->hbc[--f->nhbc];
	f->kick = 1;
	return slot;
}

void ndz_fetch_set_defer(struct ndz_fetch *f, int (*defer)(void *ctx, uint32_t chunk),
			 void *ctx)
{
	f->defer = defer;
	f->defer_ctx = ctx;
}

void ndz_fetch_set_want(struct ndz_fetch *f,
			const uint8_t *(*want)(void *ctx, uint32_t chunk), void *ctx)
{
	f->want = want;
	f->want_ctx = ctx;
}

int ndz_fetch_want(struct ndz_fetch *f, uint32_t chunk, const uint8_t *want)
{
	struct slot *s;

	if (chunk >= f->o.chunks || is_done(f, chunk) || !(s = filling(f, chunk)))
		return -1;
	/* blocks of it came before the scan reached it: keep those wanted */
	s->partial = 1;
	memcpy(s->want, want, sizeof(s->want));
	s->nhave = 0;
	memset(s->sdata, 0, sizeof(s->sdata));
	for (unsigned b = 0; b < BLOCKS; b++) {
		if (!ndz_bit_test(want, b))
			ndz_bit_set(s->have, b);
		if (ndz_bit_test(s->have, b)) {
			s->nhave++;
			s->sdata[ndz_fec_stripe(b)]++;
		}
	}
	forget_repairs(s);             /* (their stripes hold bytes not the chunk's now) */
	f->kick = 1;
	return s->nhave == BLOCKS ? (int)(s - f->slots) : -1;
}

const uint8_t *ndz_fetch_slot_want(const struct ndz_fetch *f, int slot)
{
	return f->slots[slot].partial ? f->slots[slot].want : NULL;
}

void ndz_fetch_whole(struct ndz_fetch *f, int slot)
{
	struct slot *s = &f->slots[slot];

	if (!s->partial)
		return;
	s->partial = 0;
	/* keep the blocks received; the others are asked for at once */
	s->nhave = 0;
	memset(s->sdata, 0, sizeof(s->sdata));
	for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++)
		s->have[i] &= s->want[i];
	memset(s->gmask, 0, sizeof(s->gmask));  /* (pieces of the unwanted ones were kept out) */
	for (unsigned b = 0; b < BLOCKS; b++)
		if (ndz_bit_test(s->have, b)) {
			s->nhave++;
			s->sdata[ndz_fec_stripe(b)]++;
		}
	forget_repairs(s);
	s->state = S_FILL;
	s->moved_on = 1;
	s->ask_ns = 0;
	s->last_req = 1;
	f->kick = 1;
}

void ndz_fetch_kick(struct ndz_fetch *f)
{
	f->kick = 1;
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
