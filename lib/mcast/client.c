/* The receiving session over lib/mcast/fetch, without I/O (see client.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client.h"
#include "core/bits.h"
#include "core/err.h"
#include "core/format.h"
#include "fec.h"
#include "fetch.h"
#include "net.h"
#include "proto.h"
#include "trust/manifest.h"

#define MS 1000000ull
#define BLOCKS NDZ_BLOCKS_PER_CHUNK
/* said we take large datagrams, and none came this long, nor since a request of
 * ours: say a standard MTU's payload to a server of SPANs, one block to any other or
 * when those did not come either (a smaller MTU on the way) */
#define STEP_DOWN_NS (700 * MS)
/* stepped down: say the large size again after this pause, doubled at each probe
 * that brought no large datagrams (an older client gone since, or a path that drops
 * them) */
#define PROBE_MIN_NS (2000 * MS)
#define PROBE_MAX_NS (64000 * MS)

/* A chunk the target holds but some pieces of: the blocks to receive. */
struct want {
	uint32_t chunk;
	uint8_t bits[NDZ_BITMAP_BYTES];
};

struct ndz_client {
	struct ndz_client_opts o;
	int state;
	struct ndz_error err;
	struct ndz_client_stats st;
	uint64_t start_ns, give_up_ns;
	uint32_t tag, server;
	struct ndz_join_info info;
	char source[40];               /* "server ADDR" */

	/* joining */
	uint64_t join_next, join_wait, join_last, join_deadline;
	int traffic;
	uint64_t ignored;              /* JOIN_REPLYs ignored: the last one's why, what, who */
	int ignored_why;
	struct ndz_join_info ignored_info;
	uint32_t ignored_from;

	/* the manifest, or the content index (index set): the chunks from mbase on */
	struct ndz_fetch *mf;
	uint8_t *mbytes;
	size_t mlen;
	uint32_t mchunks, mgot, mbase;
	uint64_t mlast, mnext, mwait, mdeadline;
	int index;
	ndz_client_index_size isize;   /* the index's length from its first chunk */
	uint64_t imax;
	uint8_t iwant[NDZ_BITMAP_BYTES]; /* index_want's answer */

	/* chunks the target holds (ndz_client_have) before the cache is made */
	uint8_t *held;
	uint32_t front;                /* a seed scan's (ndz_client_scan); UINT32_MAX: none */
	uint8_t *scanned;              /* chunks at or past front it decided out of order
					  (ndz_client_scanned), a bit each; NULL: none yet */
	struct want *wants;            /* chunks wanted in part (ndz_client_want), by chunk */
	uint32_t nwants, wcap;

	/* the image */
	struct ndz_fetch *fetch;
	unsigned repair;               /* NDZ_FEAT_* repairs the server announced */
	uint32_t take;                 /* the payload we say we take (CAPS); 0: say nothing */
	int server_blocks;             /* the server announced BLOCKS (and we take them) */
	int server_span;               /* it announced SPAN (and we take them) */
	int server_repairs;            /* it announced REPAIRS (and we take them) */
	uint64_t caps_ns;              /* when we last said CAPS */
	uint64_t multi_ns;             /* when a BLOCKS or SPAN last came (or receiving began) */
	uint64_t asked_ns;             /* our first request since multi_ns, if asked */
	int asked;
	uint32_t full;                 /* the payload we take at most (take before a step down) */
	uint64_t probe_ns;             /* stepped down: when to say full again */
	uint64_t probe_wait;           /* the pause before it (0: never stepped down) */
	uint64_t probe_at;             /* when we last said full again (0: never) */
	uint32_t *ready;               /* complete chunks' slots, for the caller to check */
	size_t ready_head, ready_len;
	uint64_t last_server_ns, last_block_ns, silence_wait_ns, next_silence_ns, next_look;
	uint64_t clock;                /* the latest time any call gave (see monotone) */
	uint64_t accept_ns;            /* when a chunk last checked out (or the start) */
	uint64_t next_progress_ns;     /* when the next PROGRESS is due while receiving */
	uint32_t rejects;              /* complete chunks that failed their checks since */
	uint32_t reject_chunk;         /* the last of them, */
	int reject_why;                /* and why (NDZ_E*) */
};

/*
 * The time of a call, never before one an earlier call gave: callers on several
 * threads (frisbee's receive loop and its seed scan) read the clock before they take
 * their lock, so a call may come with a time a little older than the last; every
 * "now - then" below would wrap.
 */
static uint64_t monotone(struct ndz_client *c, uint64_t now)
{
	if (now < c->clock)
		return c->clock;
	c->clock = now;
	return now;
}

static void note(struct ndz_client *c, struct ndz_client_note *n)
{
	if (c->o.note)
		c->o.note(c->o.ctx, n);
}

static int send_pkt(struct ndz_client *c, struct ndz_pkt *p)
{
	uint8_t buf[NDZ_PKT_MAX];
	int len;

	p->client_id = c->o.id;
	p->tag = c->tag;
	len = ndz_pkt_encode(p, buf, sizeof(buf), NULL);
	if (len < 0)
		return len;
	return c->o.send(c->o.ctx, buf, (size_t)len);
}

static void fail(struct ndz_client *c)
{
	c->state = NDZ_CLIENT_FAILED;
}

int ndz_client_create(const struct ndz_client_opts *o, uint64_t now_ns,
		      struct ndz_client **out, struct ndz_error *e)
{
	struct ndz_client *c;

	*out = NULL;
	if (!o->send)
		return ndz_error_set(e, NDZ_EINVAL, 0, "client session: no way to send");
	c = calloc(1, sizeof(*c));
	if (!c)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "client session: out of memory");
	c->o = *o;
	if (!c->o.group)
		c->o.group = "the group";
	if (!c->o.target)
		c->o.target = "the target";
	c->server = o->server;
	/* a SPAN carries more than a BLOCK from 1076 bytes on, a BLOCKS from 2068 */
	if (o->max_payload >= NDZ_PKT_SPAN_LEN(NDZ_BLOCK_SIZE + NDZ_PKT_SPAN_GRAIN))
		c->take = c->full = o->max_payload;
	c->front = UINT32_MAX;
	c->start_ns = c->clock = now_ns;
	c->give_up_ns = (uint64_t)o->give_up_s * 1000 * MS;
	c->join_next = now_ns;
	c->join_wait = 500 * MS;
	c->join_deadline = now_ns + c->give_up_ns;
	c->state = NDZ_CLIENT_JOINING;
	*out = c;
	return 0;
}

void ndz_client_free(struct ndz_client *c)
{
	if (!c)
		return;
	ndz_fetch_free(c->mf);
	ndz_fetch_free(c->fetch);
	free(c->mbytes);
	free(c->held);
	free(c->scanned);
	free(c->wants);
	free(c->ready);
	free(c);
}

int ndz_client_state(const struct ndz_client *c)
{
	return c->state;
}

const struct ndz_error *ndz_client_error(const struct ndz_client *c)
{
	return &c->err;
}

const struct ndz_join_info *ndz_client_info(const struct ndz_client *c)
{
	return &c->info;
}

uint32_t ndz_client_server(const struct ndz_client *c)
{
	return c->server;
}

const char *ndz_client_source(const struct ndz_client *c)
{
	return c->source;
}

/* Classify and count a packet; returns 1 when it is one to look at. */
static int accept_pkt(struct ndz_client *c, const struct ndz_pkt *p, uint32_t from)
{
	/* (a FEATURES of BLOCKS matters to a client without repairs that takes them) */
	if ((c->o.no_repair && ((p->type == NDZ_PKT_FEATURES &&
				 !((p->features & (NDZ_FEAT_BLOCKS | NDZ_FEAT_SPAN)) && c->take)) ||
				p->type == NDZ_PKT_REPAIR || p->type == NDZ_PKT_RREQUEST ||
				p->type == NDZ_PKT_REPAIRS)) ||
	    (c->o.no_whole && (((p->type == NDZ_PKT_REPAIR || p->type == NDZ_PKT_REPAIRS) &&
				p->stripe == NDZ_FEC_WHOLE) ||
			       (p->type == NDZ_PKT_RREQUEST && p->need[NDZ_FEC_WHOLE])))) {
		c->st.bad++;           /* (what a client without (whole-chunk) repairs makes of those) */
		return 0;
	}
	if ((c->o.no_repair || c->o.no_range) &&
	    (p->type == NDZ_PKT_RANGE_REPAIR || p->type == NDZ_PKT_RANGE_RREQUEST)) {
		c->st.bad++;           /* (as a client without range repairs: unknown types) */
		return 0;
	}
	if ((p->type == NDZ_PKT_BLOCK || p->type == NDZ_PKT_JOIN_REPLY ||
	     p->type == NDZ_PKT_REPAIR || p->type == NDZ_PKT_FEATURES ||
	     p->type == NDZ_PKT_BLOCKS || p->type == NDZ_PKT_SPAN || p->type == NDZ_PKT_REPAIRS ||
	     p->type == NDZ_PKT_RANGE_REPAIR) && c->server &&
	    from != c->server) {
		c->st.foreign++;
		return 0;
	}
	return 1;
}

/*
 * Joining: an answer announcing what we cannot take is ignored (ndz_fetch_check_join).
 * Traffic of a transfer already under way (blocks, other clients' requests) means a
 * server is there and our JOIN or its reply was lost: ask again at once (at most every
 * 50 ms) rather than at the next back-off step, so as to miss as little as possible.
 */
static void join_input(struct ndz_client *c, const struct ndz_pkt *p, uint32_t from,
		       uint64_t now)
{
	struct ndz_client_note n = { .from = from, .info = &p->info };
	int r;

	if (p->type == NDZ_PKT_JOIN_REPLY && c->o.want_uuid &&
	    memcmp(p->info.uuid, c->o.want_uuid, 16) != 0) {
		c->st.foreign++;       /* another image's server on our group */
		return;
	}
	if (p->type == NDZ_PKT_JOIN_REPLY && p->client_id != c->o.id) {
		/*
		 * An announcement, or the answer to another client: a server is there,
		 * ask it for ours at once and take that (a host spoofing announcements
		 * of another image, even from the -S address, does not hear our JOIN).
		 */
		if (!c->traffic) {
			n.what = NDZ_CLIENT_NOTE_OTHERS;
			note(c, &n);
		}
		c->traffic = 1;
		return;
	}
	if (p->type == NDZ_PKT_JOIN_REPLY &&
	    (r = ndz_fetch_check_join(&p->info, c->o.room, c->o.raw, NULL)) < 0) {
		/*
		 * Whoever sent it (a forger can: without -S the first reply decides
		 * the server), a real server may still answer: wait for it until -T.
		 */
		if (!c->ignored || r != c->ignored_why) {
			n.what = NDZ_CLIENT_NOTE_IGNORED;
			n.why = r;
			note(c, &n);
		}
		c->ignored++;
		c->ignored_why = r;
		c->ignored_info = p->info;
		c->ignored_from = from;
		return;
	}
	if (p->type == NDZ_PKT_JOIN_REPLY) {
		char a[16];

		c->info = p->info;
		c->tag = p->tag;
		c->last_server_ns = now;       /* -T runs from here on */
		if (!c->server)
			c->server = from;
		snprintf(c->source, sizeof(c->source), "server %s", ndz_net_ntoa(c->server, a));
		c->state = NDZ_CLIENT_JOINED;
		n.what = NDZ_CLIENT_NOTE_JOINED;
		note(c, &n);
		return;
	}
	if (p->type == NDZ_PKT_BLOCK || p->type == NDZ_PKT_REQUEST ||
	    p->type == NDZ_PKT_PREQUEST || p->type == NDZ_PKT_REPAIR ||
	    p->type == NDZ_PKT_RREQUEST || p->type == NDZ_PKT_BLOCKS ||
	    p->type == NDZ_PKT_SPAN || p->type == NDZ_PKT_REPAIRS ||
	    p->type == NDZ_PKT_RANGE_REPAIR || p->type == NDZ_PKT_RANGE_RREQUEST) {
		if (!c->traffic) {
			n.what = NDZ_CLIENT_NOTE_TRAFFIC;
			note(c, &n);
		}
		c->traffic = 1;
	}
}

/* No JOIN_REPLY we could take within -T: say why, the target's size when that was it. */
static void join_failed(struct ndz_client *c)
{
	const struct ndz_join_info *i = &c->ignored_info;
	char a[16];

	if (c->ignored && c->ignored_why == NDZ_ETOOSMALL)
		ndz_error_set(&c->err, NDZ_ETOOSMALL, 0, "%s: %s (%llu bytes, the image needs "
			      "%llu), announced by server %s", c->o.target,
			      ndz_strerror(NDZ_ETOOSMALL), (unsigned long long)c->o.room,
			      (unsigned long long)(c->o.raw ? i->image_bytes : i->source_bytes),
			      ndz_net_ntoa(c->ignored_from, a));
	else if (c->ignored)
		ndz_error_set(&c->err, NDZ_ETIMEDOUT, 0, "no server answered on %s port %u within "
			      "%u s (%llu announcements ignored, the last from %s: %u chunks for "
			      "%llu bytes, more than any image needs)", c->o.group, c->o.port,
			      c->o.give_up_s, (unsigned long long)c->ignored,
			      ndz_net_ntoa(c->ignored_from, a), i->chunks,
			      (unsigned long long)i->source_bytes);
	else
		ndz_error_set(&c->err, NDZ_ETIMEDOUT, 0, "no server answered on %s port %u within "
			      "%u s", c->o.group, c->o.port, c->o.give_up_s);
	fail(c);
}

/* Ask until a server answers our JOIN, backing off from 0.5 s to 2 s; give up after -T. */
static void join_tick(struct ndz_client *c, uint64_t now)
{
	if (now >= c->join_deadline) {
		join_failed(c);
		return;
	}
	if (now >= c->join_next || (c->traffic && now - c->join_last >= 50 * MS)) {
		struct ndz_client_note n = { .what = NDZ_CLIENT_NOTE_JOIN };
		struct ndz_pkt p;
		int r;

		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_JOIN;
		if ((r = send_pkt(c, &p)) != 0) {
			ndz_error_set(&c->err, NDZ_ENET, r > 0 ? r : 0, "send to %s port %u",
				      c->o.group, c->o.port);
			fail(c);
			return;
		}
		c->st.joins++;
		note(c, &n);
		c->join_last = now;
		c->traffic = 0;
		if (now >= c->join_next) {
			c->join_next = now + c->join_wait;
			if (c->join_wait < 2000 * MS)
				c->join_wait *= 2;
		}
	}
}

/*
 * We sent a request: large datagrams should answer it. The first since the last one
 * that came starts the wait of step_down (an idle server's silence shows nothing).
 */
static void asked(struct ndz_client *c)
{
	if (!c->asked) {
		c->asked = 1;
		c->asked_ns = c->clock;
	}
}

/* From now on large datagrams may come, and answer only requests sent from now on. */
static void multi_reset(struct ndz_client *c, uint64_t now)
{
	c->multi_ns = now;
	c->asked = 0;
}

/* Send one request for chunk (numbered on the wire from base on). */
static void send_request(struct ndz_client *c, uint32_t chunk, const uint8_t *missing,
			 const uint8_t *need)
{
	struct ndz_client_note n = { .what = NDZ_CLIENT_NOTE_REQUEST, .chunk = chunk };
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.chunk = chunk;
	if (need) {
		p.type = NDZ_PKT_RREQUEST;
		memcpy(p.need, need, sizeof(p.need));
		n.repairs = 1;
	} else if (missing) {
		p.type = NDZ_PKT_PREQUEST;
		memcpy(p.bitmap, missing, sizeof(p.bitmap));
		n.count = ndz_bit_count(missing);
	} else {
		p.type = NDZ_PKT_REQUEST;
		p.block = 0;
		p.count = BLOCKS;
	}
	if (send_pkt(c, &p) == 0) {
		c->st.requests++;
		asked(c);
	}
	note(c, &n);
}

/* ndz_fetch_emit_range of the image's cache: a RANGE_RREQUEST (the server announced
 * bit 5). */
static void emit_range(void *ctx, uint32_t chunk, unsigned first, unsigned count,
		       unsigned wanted)
{
	struct ndz_client *c = ctx;
	struct ndz_client_note n = { .what = NDZ_CLIENT_NOTE_REQUEST, .chunk = chunk,
				     .repairs = 1 };
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_RANGE_RREQUEST;
	p.chunk = chunk;
	p.block = (uint16_t)first;
	p.count = (uint16_t)count;
	p.wanted = (uint8_t)wanted;
	if (send_pkt(c, &p) == 0) {
		c->st.requests++;
		c->st.range_requests++;
		asked(c);
	}
	note(c, &n);
}

/* ndz_fetch_emit of the image's cache, and of the manifest's (its chunks follow). */
static void emit_image(void *ctx, uint32_t chunk, const uint8_t *missing, const uint8_t *need)
{
	send_request(ctx, chunk, missing, need);
}

static void emit_manifest(void *ctx, uint32_t chunk, const uint8_t *missing,
			  const uint8_t *need)
{
	struct ndz_client *c = ctx;

	send_request(c, c->mbase + chunk, missing, need);
}

/* Done with the index, or none came: back to JOINED, its bytes and cache gone. */
static void index_none(struct ndz_client *c)
{
	ndz_fetch_free(c->mf);
	c->mf = NULL;
	free(c->mbytes);
	c->mbytes = NULL;
	c->mlen = 0;
	c->index = 0;
	c->state = NDZ_CLIENT_JOINED;
}

/*
 * ndz_fetch_set_want of the index's cache: of chunk k, only the blocks its bytes fill,
 * not the zeros that pad it to whole chunks on the wire; the first block alone until
 * its header tells the length.
 */
static const uint8_t *index_want(void *ctx, uint32_t chunk)
{
	struct ndz_client *c = ctx;
	uint64_t lo = (uint64_t)chunk * NDZ_CHUNK_SIZE, end = c->mlen ? c->mlen : NDZ_BLOCK_SIZE;

	if (end <= lo || end - lo >= NDZ_CHUNK_SIZE)
		return NULL;
	memset(c->iwant, 0, sizeof(c->iwant));
	for (unsigned b = 0; (uint64_t)b * NDZ_BLOCK_SIZE < end - lo; b++)
		ndz_bit_set(c->iwant, b);
	return c->iwant;
}

static int manifest_cache(struct ndz_client *c, struct ndz_error *e)
{
	struct ndz_fetch_opts fo = { 0 };
	int r;

	fo.chunks = c->mchunks;
	fo.slots = c->mchunks < 4 ? c->mchunks : 4;
	fo.request_ahead = (unsigned)fo.slots;
	fo.redelay_ns = 200 * MS;
	fo.seed = c->o.id;
	ndz_fetch_free(c->mf);
	c->mf = NULL;
	c->mgot = 0;
	c->mnext = 0;
	r = ndz_fetch_create(&fo, &c->mf, e);
	if (r == 0 && c->index)
		ndz_fetch_set_want(c->mf, index_want, c);
	return r;
}

int ndz_client_fetch_manifest(struct ndz_client *c, size_t len, uint64_t now_ns,
			      struct ndz_error *e)
{
	now_ns = monotone(c, now_ns);
	uint64_t m = (len + NDZ_CHUNK_SIZE - 1) / NDZ_CHUNK_SIZE;
	unsigned w = c->o.give_up_s < 10 ? c->o.give_up_s : 10;
	struct ndz_error mine = { 0 };

	if (c->state != NDZ_CLIENT_JOINED || !len || m > UINT32_MAX - c->info.chunks)
		return ndz_error_set(e, NDZ_EINVAL, 0, "the manifest from %s: %s", c->source,
				     "not now, or of no size");
	c->index = 0;
	c->mbase = c->info.chunks;
	c->mchunks = (uint32_t)m;
	c->mlen = len;
	c->mbytes = calloc(m, NDZ_CHUNK_SIZE);
	if (!c->mbytes)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "the manifest from %s: out of memory",
				     c->source);
	if (manifest_cache(c, &mine) < 0)
		return ndz_error_copy(e, &mine);
	c->mlast = now_ns;
	c->last_server_ns = now_ns;
	c->mwait = (uint64_t)w * 1000 * MS;
	c->mdeadline = now_ns + c->give_up_ns;
	c->state = NDZ_CLIENT_MANIFEST;
	return 0;
}

/*
 * A server that does not serve the manifest (an older frisbeed, or no manifest beside
 * the image) never answers: give up after -T (at most 10 s) with a message that
 * says so.
 */
static void step_down(struct ndz_client *c, uint64_t now);
static void multi_came(struct ndz_client *c, const struct ndz_pkt *p, uint64_t now);

static void manifest_tick(struct ndz_client *c, uint64_t now)
{
	if (c->index && (now - c->mlast > c->mwait || now >= c->mdeadline)) {
		index_none(c);         /* no index: the caller restores in full */
		return;
	}
	if (now - c->mlast > c->mwait || now >= c->mdeadline) {
		ndz_error_set(&c->err, NDZ_ETIMEDOUT, 0, "%s sent no signed manifest of the image "
			      "within %llu s (an older frisbeed, or none beside the image): give "
			      "--manifest FILE", c->source,
			      (unsigned long long)((now - c->mlast) / 1000 / MS));
		fail(c);
		return;
	}
	step_down(c, now);
	if (now >= c->mnext) {
		ndz_fetch_requests(c->mf, now, now - c->mlast > 200 * MS, emit_manifest, c);
		c->mnext = now + 50 * MS;
	}
}

/*
 * The index's first block came: its header says how long it is; fetch the rest (a
 * cache of that many chunks, each for the blocks the index fills). 0: that block
 * holds it all; 1: fetching the rest; -1: no index after all.
 */
static int index_grow(struct ndz_client *c)
{
	uint64_t len = c->isize(c->mbytes, NDZ_BLOCK_SIZE);
	uint64_t m = (len + NDZ_CHUNK_SIZE - 1) / NDZ_CHUNK_SIZE;
	uint8_t *b;

	if (!len || len > c->imax || m > UINT32_MAX - c->mbase)
		return -1;
	c->mlen = (size_t)len;
	if (len <= NDZ_BLOCK_SIZE)
		return 0;
	b = realloc(c->mbytes, (size_t)m * NDZ_CHUNK_SIZE);
	if (!b)
		return -1;
	c->mbytes = b;
	c->mchunks = (uint32_t)m;
	if (manifest_cache(c, NULL) < 0)
		return -1;
	return 1;
}

static void manifest_block(struct ndz_client *c, const struct ndz_pkt *p, unsigned block,
			   const uint8_t *data, uint64_t now);
static void manifest_slot(struct ndz_client *c, int slot);

static void manifest_input(struct ndz_client *c, const struct ndz_pkt *p, uint64_t now)
{
	if ((p->type != NDZ_PKT_BLOCK && p->type != NDZ_PKT_BLOCKS && p->type != NDZ_PKT_SPAN) ||
	    p->tag != c->tag || p->chunk < c->mbase || p->chunk - c->mbase >= c->mchunks)
		return;
	c->mlast = c->last_server_ns = now;
	if (p->type == NDZ_PKT_BLOCKS || p->type == NDZ_PKT_SPAN)
		multi_came(c, p, now);
	if (p->type == NDZ_PKT_SPAN) {
		int slot = ndz_fetch_span(c->mf, p->chunk - c->mbase, p->offset, p->length,
					  p->data, now);

		if (slot >= 0)
			manifest_slot(c, slot);
		return;
	}
	if (p->type == NDZ_PKT_BLOCK) {
		manifest_block(c, p, p->block, p->data, now);
		return;
	}
	for (unsigned i = 0; i < p->count && (c->state == NDZ_CLIENT_MANIFEST ||
					      c->state == NDZ_CLIENT_INDEX); i++)
		manifest_block(c, p, p->block + i, p->data + (size_t)i * NDZ_BLOCK_SIZE, now);
}

/* One block of the manifest's (or index's) chunk p->chunk. */
static void manifest_block(struct ndz_client *c, const struct ndz_pkt *p, unsigned block,
			   const uint8_t *data, uint64_t now)
{
	int slot = ndz_fetch_block(c->mf, p->chunk - c->mbase, block, data, now);

	if (slot >= 0)
		manifest_slot(c, slot);
}

/* A chunk of the manifest (or index) complete in slot of c->mf: into its bytes. */
static void manifest_slot(struct ndz_client *c, int slot)
{
	if (ndz_fetch_buf(c->mf, slot))
		memcpy(c->mbytes + (size_t)ndz_fetch_slot_chunk(c->mf, slot) * NDZ_CHUNK_SIZE,
		       ndz_fetch_buf(c->mf, slot), NDZ_CHUNK_SIZE);
	ndz_fetch_accept(c->mf, slot);
	ndz_fetch_done(c->mf, slot);
	if (c->index && !c->mlen) {
		int r = index_grow(c);

		if (r < 0)
			index_none(c);
		if (r != 0)
			return;
	}
	if (++c->mgot == c->mchunks)
		c->state = c->index ? NDZ_CLIENT_INDEX_READY : NDZ_CLIENT_MANIFEST_READY;
}

uint32_t ndz_client_index_base(uint32_t chunks)
{
	uint64_t m = ((uint64_t)ndz_manifest_size(chunks) + NDZ_CHUNK_SIZE - 1) / NDZ_CHUNK_SIZE;

	return (uint32_t)((uint64_t)chunks + m);
}

int ndz_client_fetch_index(struct ndz_client *c, ndz_client_index_size size, uint64_t max,
			   uint64_t now_ns, struct ndz_error *e)
{
	now_ns = monotone(c, now_ns);
	uint64_t base = (uint64_t)c->info.chunks +
			((uint64_t)ndz_manifest_size(c->info.chunks) + NDZ_CHUNK_SIZE - 1) /
			NDZ_CHUNK_SIZE;
	unsigned w = c->o.give_up_s < 2 ? c->o.give_up_s : 2;
	struct ndz_error mine = { 0 };

	if (c->state != NDZ_CLIENT_JOINED || !size || base >= UINT32_MAX)
		return ndz_error_set(e, NDZ_EINVAL, 0, "the index from %s: %s", c->source,
				     "not now");
	c->index = 1;
	c->isize = size;
	c->imax = max;
	c->mbase = (uint32_t)base;
	c->mchunks = 1;                /* the rest when its header is known */
	c->mlen = 0;
	free(c->mbytes);
	c->mbytes = calloc(1, NDZ_CHUNK_SIZE);
	if (!c->mbytes)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "the index from %s: out of memory",
				     c->source);
	if (manifest_cache(c, &mine) < 0)
		return ndz_error_copy(e, &mine);
	c->mlast = now_ns;
	c->mwait = (uint64_t)w * 1000 * MS;
	c->mdeadline = now_ns + c->give_up_ns;
	c->state = NDZ_CLIENT_INDEX;
	return 0;
}

const uint8_t *ndz_client_index(const struct ndz_client *c, size_t *len)
{
	if (c->state != NDZ_CLIENT_INDEX_READY) {
		*len = 0;
		return NULL;
	}
	*len = c->mlen;
	return c->mbytes;
}

int ndz_client_index_done(struct ndz_client *c, struct ndz_error *e)
{
	if (c->state != NDZ_CLIENT_INDEX_READY)
		return ndz_error_set(e, NDZ_EINVAL, 0, "the index from %s: not received",
				     c->source);
	index_none(c);
	return 0;
}

const uint8_t *ndz_client_manifest(const struct ndz_client *c, size_t *len)
{
	*len = c->mlen;
	return c->mbytes;
}

int ndz_client_manifest_verdict(struct ndz_client *c, int good, uint64_t now_ns,
				struct ndz_error *e)
{
	now_ns = monotone(c, now_ns);
	struct ndz_error mine = { 0 };

	if (c->state != NDZ_CLIENT_MANIFEST_READY)
		return ndz_error_set(e, NDZ_EINVAL, 0, "the manifest from %s: not received",
				     c->source);
	if (good) {
		ndz_fetch_free(c->mf);
		c->mf = NULL;
		c->state = NDZ_CLIENT_JOINED;
		return 0;
	}
	/* forged bytes got in (blocks spoofed): throw it all away, ask again */
	c->st.forged++;
	if (now_ns >= c->mdeadline)
		return ndz_error_set(e, NDZ_ETIMEDOUT, 0, "the manifest from %s: forged, and "
				     "no other within %u s", c->source, c->o.give_up_s);
	if (manifest_cache(c, &mine) < 0) {
		ndz_error_copy(&c->err, &mine);
		fail(c);
		return ndz_error_copy(e, &mine);
	}
	c->state = NDZ_CLIENT_MANIFEST;
	return 0;
}

/* The place of chunk in wants, or where it would go (*found 0). */
static uint32_t want_find(const struct ndz_client *c, uint32_t chunk, int *found)
{
	uint32_t lo = 0, hi = c->nwants;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (c->wants[mid].chunk < chunk)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < c->nwants && c->wants[lo].chunk == chunk;
	return lo;
}

/* ndz_fetch_set_want's: the blocks of chunk wanted, or NULL for all of it */
static const uint8_t *wanted(void *ctx, uint32_t chunk)
{
	const struct ndz_client *c = ctx;
	int found;
	uint32_t k = want_find(c, chunk, &found);

	return found ? c->wants[k].bits : NULL;
}

static void queue_ready(struct ndz_client *c, int slot);

int ndz_client_want(struct ndz_client *c, uint32_t chunk, const uint8_t *blocks)
{
	int found, slot;
	uint32_t k;

	if (chunk >= c->info.chunks || c->state == NDZ_CLIENT_JOINING ||
	    c->state == NDZ_CLIENT_FAILED || c->state == NDZ_CLIENT_COMPLETE ||
	    !ndz_bit_count(blocks) || !ndz_client_needs(c, chunk))
		return 0;
	k = want_find(c, chunk, &found);
	if (!found) {
		if (c->nwants == c->wcap) {
			uint32_t cap = c->wcap ? 2 * c->wcap : 64;
			struct want *w = realloc(c->wants, (size_t)cap * sizeof(*w));

			if (!w)
				return 0;      /* fetched whole */
			c->wants = w;
			c->wcap = cap;
		}
		memmove(c->wants + k + 1, c->wants + k, (c->nwants - k) * sizeof(*c->wants));
		c->nwants++;
		c->wants[k].chunk = chunk;
	}
	memcpy(c->wants[k].bits, blocks, NDZ_BITMAP_BYTES);
	if (c->fetch && (slot = ndz_fetch_want(c->fetch, chunk, blocks)) >= 0)
		queue_ready(c, slot);
	if (c->fetch)
		ndz_fetch_kick(c->fetch);
	return 1;
}

const uint8_t *ndz_client_slot_want(const struct ndz_client *c, int slot)
{
	return ndz_fetch_slot_want(c->fetch, slot);
}

void ndz_client_whole(struct ndz_client *c, int slot)
{
	int found;
	uint32_t k = want_find(c, ndz_fetch_slot_chunk(c->fetch, slot), &found);

	if (found) {
		memmove(c->wants + k, c->wants + k + 1, (c->nwants - k - 1) * sizeof(*c->wants));
		c->nwants--;
	}
	ndz_fetch_whole(c->fetch, slot);
}

/* ndz_fetch_opts.defer: chunks the seed scan has not reached yet */
static int defer_unscanned(void *ctx, uint32_t chunk)
{
	const struct ndz_client *c = ctx;

	return c->front != UINT32_MAX && chunk >= c->front &&
	       !(c->scanned && ndz_bit_test(c->scanned, chunk));
}

/* Blocks held back for chunks now decided (ndz_fetch_release) go into their slots. */
static void release_held(struct ndz_client *c)
{
	int64_t k;
	int slot;

	if (!c->fetch || c->state != NDZ_CLIENT_RECEIVING)
		return;
	while ((k = ndz_fetch_held_back(c->fetch)) >= 0)
		if ((slot = ndz_fetch_release(c->fetch, (uint32_t)k)) >= 0)
			queue_ready(c, slot);
}

uint32_t ndz_client_scan_next(struct ndz_client *c)
{
	int64_t k;

	if (c->state != NDZ_CLIENT_RECEIVING || c->front == UINT32_MAX ||
	    (k = ndz_fetch_deferred(c->fetch)) < 0)
		return UINT32_MAX;
	return (uint32_t)k;
}

int ndz_client_scanned(struct ndz_client *c, uint32_t chunk, uint64_t now_ns)
{
	now_ns = monotone(c, now_ns);
	if (chunk >= c->info.chunks)
		return 0;
	if (!c->scanned && !(c->scanned = calloc(c->info.chunks / 8 + 1, 1)))
		return 0;              /* decided when the front passes it, as before */
	ndz_bit_set(c->scanned, chunk);
	if (c->state == NDZ_CLIENT_RECEIVING) {
		if (now_ns > c->last_server_ns)
			c->last_server_ns = now_ns;
		ndz_fetch_kick(c->fetch);
	}
	release_held(c);
	return 1;
}

void ndz_client_scan(struct ndz_client *c, uint32_t front, uint64_t now_ns)
{
	now_ns = monotone(c, now_ns);
	if (front != c->front && c->state == NDZ_CLIENT_RECEIVING) {
		if (now_ns > c->last_server_ns)
			c->last_server_ns = now_ns;
		ndz_fetch_kick(c->fetch);
	}
	c->front = front;
	release_held(c);
}

int ndz_client_start(struct ndz_client *c, uint64_t now_ns, struct ndz_error *e)
{
	now_ns = monotone(c, now_ns);
	struct ndz_fetch_opts fo = { 0 };
	struct ndz_error mine = { 0 };

	if (c->state != NDZ_CLIENT_JOINED)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: not joined", c->source);
	fo.chunks = c->info.chunks;
	fo.slots = c->o.slots;
	fo.request_ahead = c->o.request_ahead;
	fo.redelay_ns = c->o.redelay_ns;
	fo.seed = c->o.seed;
	fo.pool = c->o.pool;
	c->ready = calloc(c->o.slots ? c->o.slots : 1, sizeof(*c->ready));
	if (!c->ready)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "out of memory for %u chunks",
				     c->info.chunks);
	if (ndz_fetch_create(&fo, &c->fetch, &mine) < 0) {
		if (mine.code == NDZ_ENOMEM)
			return ndz_error_set(e, NDZ_ENOMEM, 0, "out of memory for %u chunks",
					     c->info.chunks);
		return ndz_error_copy(e, &mine);
	}
	if (c->repair)
		ndz_fetch_set_repair(c->fetch, c->repair);  /* FEATURES heard before the start */
	if (c->repair & NDZ_FEAT_RANGE)
		ndz_fetch_set_range(c->fetch, emit_range, c);
	/* -T runs from the JOIN_REPLY (or the manifest's last block) on */
	ndz_fetch_set_defer(c->fetch, defer_unscanned, c);
	ndz_fetch_set_want(c->fetch, wanted, c);
	c->last_block_ns = c->accept_ns = now_ns;
	multi_reset(c, now_ns);
	c->silence_wait_ns = 40 * MS;
	c->next_silence_ns = now_ns + c->silence_wait_ns;
	c->next_look = now_ns + 5 * MS;
	c->state = NDZ_CLIENT_RECEIVING;
	for (uint32_t i = 0; c->held && i < c->info.chunks; i++)
		if (ndz_bit_test(c->held, i))
			ndz_fetch_have(c->fetch, i);
	free(c->held);
	c->held = NULL;
	if (c->st.held == c->info.chunks) {
		c->state = NDZ_CLIENT_COMPLETE;  /* nothing to ask for */
		return 0;
	}
	ndz_fetch_requests(c->fetch, now_ns, 0, emit_image, c);
	return 0;
}

int ndz_client_needs(const struct ndz_client *c, uint32_t chunk)
{
	if (chunk >= c->info.chunks)
		return 0;
	if (c->fetch)
		return ndz_fetch_needs(c->fetch, chunk);
	return !c->held || !ndz_bit_test(c->held, chunk);
}

int ndz_client_have(struct ndz_client *c, uint32_t chunk, uint64_t now_ns)
{
	now_ns = monotone(c, now_ns);
	struct ndz_fetch_stats st;

	(void)now_ns;
	if (chunk >= c->info.chunks)
		return 0;
	if (c->state == NDZ_CLIENT_JOINED || c->state == NDZ_CLIENT_INDEX ||
	    c->state == NDZ_CLIENT_INDEX_READY || c->state == NDZ_CLIENT_MANIFEST ||
	    c->state == NDZ_CLIENT_MANIFEST_READY) {
		if (!c->held && !(c->held = calloc((size_t)c->info.chunks / 8 + 1, 1)))
			return 0;
		if (ndz_bit_test(c->held, chunk))
			return 0;
		ndz_bit_set(c->held, chunk);
		c->st.held++;
		return 1;
	}
	if (c->state != NDZ_CLIENT_RECEIVING || !ndz_fetch_have(c->fetch, chunk))
		return 0;
	c->st.held++;
	ndz_fetch_get_stats(c->fetch, &st);
	if (st.complete == c->info.chunks)
		c->state = NDZ_CLIENT_COMPLETE;
	return 1;
}

/* A request seen on the group (ours looped back or another client's). */
static void snoop_request(struct ndz_client *c, const struct ndz_pkt *p, uint64_t now)
{
	uint8_t bm[NDZ_BITMAP_BYTES];

	if (p->type == NDZ_PKT_REQUEST) {
		memset(bm, 0, sizeof(bm));
		for (unsigned b = p->block; b < (unsigned)p->block + p->count; b++)
			ndz_bit_set(bm, b);
		ndz_fetch_snoop(c->fetch, p->chunk, bm, now);
	} else {
		ndz_fetch_snoop(c->fetch, p->chunk, p->bitmap, now);
	}
}

/* A block, run of blocks or repair of the image: a chunk complete is held for the
 * caller's checks. */
static int got_block(struct ndz_client *c, const struct ndz_pkt *p, uint64_t now)
{
	const uint8_t *data = c->o.no_store ? NULL : p->data;
	int slot;

	c->last_server_ns = now;
	c->last_block_ns = now;
	if (p->type == NDZ_PKT_REPAIR) {
		slot = ndz_fetch_repair(c->fetch, p->chunk, p->stripe, p->index, data, now);
	} else if (p->type == NDZ_PKT_RANGE_REPAIR) {
		slot = ndz_fetch_range_repair(c->fetch, p->chunk, p->block, p->count, p->index,
					      data, now);
	} else if (p->type == NDZ_PKT_REPAIRS) {
		/* exactly as that many REPAIRs */
		c->st.multi_repairs++;
		multi_came(c, p, now);
		slot = -1;
		for (unsigned k = 0; k < p->nrep; k++) {
			int r = ndz_fetch_repair(c->fetch, p->chunk, p->stripe, p->index + k,
						 data ? data + (size_t)k * NDZ_BLOCK_SIZE : NULL, now);

			if (r >= 0)
				slot = r;
		}
	} else if (p->type == NDZ_PKT_BLOCKS) {
		/* as that many blocks, with one copy when none is held */
		c->st.multi++;
		multi_came(c, p, now);
		slot = ndz_fetch_blocks(c->fetch, p->chunk, p->block, p->count, data, now);
	} else if (p->type == NDZ_PKT_SPAN) {
		/* its whole blocks as a BLOCKS, its edges granule by granule */
		c->st.spans++;
		multi_came(c, p, now);
		slot = ndz_fetch_span(c->fetch, p->chunk, p->offset, p->length, data, now);
	} else {
		slot = ndz_fetch_block(c->fetch, p->chunk, p->block, data, now);
	}
	if (slot < 0)
		return 0;
	queue_ready(c, slot);
	return 1;
}

/* The complete chunk in slot is held for the caller's checks (ndz_client_ready). */
static void queue_ready(struct ndz_client *c, int slot)
{
	ndz_fetch_hold(c->fetch, slot);
	c->ready[(c->ready_head + c->ready_len) % c->o.slots] = (uint32_t)slot;
	c->ready_len++;
}

static int receive_input(struct ndz_client *c, const struct ndz_pkt *p, uint64_t now)
{
	int ours = p->tag == c->tag && p->chunk < c->info.chunks;

	switch (p->type) {
	case NDZ_PKT_BLOCK:
	case NDZ_PKT_REPAIR:
	case NDZ_PKT_BLOCKS:
	case NDZ_PKT_RANGE_REPAIR:
	case NDZ_PKT_SPAN:
	case NDZ_PKT_REPAIRS:
		if (!ours) {
			c->st.foreign++;
			return 0;
		}
		return got_block(c, p, now);
	case NDZ_PKT_REQUEST:
	case NDZ_PKT_PREQUEST:
		if (ours)
			snoop_request(c, p, now);
		break;
	case NDZ_PKT_RREQUEST:
		if (ours)
			ndz_fetch_snoop_repairs(c->fetch, p->chunk, p->need, now);
		break;
	case NDZ_PKT_RANGE_RREQUEST:
		if (ours)
			ndz_fetch_snoop_range(c->fetch, p->chunk, p->block, p->count, p->wanted,
					      now);
		break;
	}
	return 0;
}

/* The CAPS flags: what the server announced that we take. */
static uint32_t caps_flags(const struct ndz_client *c)
{
	return (c->server_span ? NDZ_CAPS_SPAN : 0) | (c->server_repairs ? NDZ_CAPS_REPAIRS : 0);
}

/* CAPS: the payload we take (stepped: after ms without BLOCKS, for the note). */
static void say_caps(struct ndz_client *c, uint64_t now, uint64_t stepped_ms)
{
	struct ndz_client_note n = { .what = NDZ_CLIENT_NOTE_CAPS, .count = c->take,
				     .ms = stepped_ms,
				     .repairs = (int)caps_flags(c) };
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_CAPS;
	p.max_payload = c->take;
	/* only to a server that announced SPAN: an older one wants this field zero */
	p.caps_flags = caps_flags(c);
	c->caps_ns = now;
	if (send_pkt(c, &p) == 0)
		note(c, &n);
}

/*
 * We said we take large datagrams and the server sends them, yet none has come for
 * a while (lone BLOCKs and REPAIRs, which are small, may), nor since a request of
 * ours sent that long ago: a link on the way may drop them (a smaller MTU than
 * ours). (A server nobody asks anything, as while the clients' seed scans run, is
 * silent on any path: that shows nothing. Other clients' requests are not counted:
 * what answers one may be small by design, a lone block or REPAIRs, and a client
 * whose path drops large datagrams soon asks itself.) Step down: to a server of
 * SPANs say first a standard 1500-byte MTU's payload (NDZ_PKT_STD_PAYLOAD: it sends
 * SPANs of 1440 bytes, the most common smaller path takes them); when none of those
 * comes either, or to a server of BLOCKS only, say we take one block a datagram: the
 * server falls back to BLOCKs for the group. With an older client in the group none
 * comes either, though our path takes them: after a pause from the last step we
 * probe (say the large size again), see below. While fetching a manifest or an
 * index, and while receiving the image.
 */
static void step_down(struct ndz_client *c, uint64_t now)
{
	if (c->take > NDZ_PKT_BLOCK_LEN && (c->server_blocks || c->server_span) &&
	    now - c->multi_ns > STEP_DOWN_NS && now - c->caps_ns > STEP_DOWN_NS / 4 &&
	    c->asked && now - c->asked_ns > STEP_DOWN_NS) {
		uint64_t ms = (now - c->multi_ns) / MS;

		/* the pause before we probe, set at the full size's step: doubled
		 * while probes bring nothing */
		if (c->take == c->full) {
			if (!c->probe_wait || (c->probe_at && c->multi_ns > c->probe_at))
				c->probe_wait = PROBE_MIN_NS;
			else if (c->probe_wait < PROBE_MAX_NS / 2)
				c->probe_wait *= 2;
			else
				c->probe_wait = PROBE_MAX_NS;
		}
		c->probe_ns = now + c->probe_wait;
		if (c->server_span && c->take > NDZ_PKT_STD_PAYLOAD) {
			c->take = NDZ_PKT_STD_PAYLOAD;
			multi_reset(c, now);   /* SPANs of that size may come from now on */
			c->st.steps_std++;
		} else {
			c->take = NDZ_PKT_BLOCK_LEN;
			c->st.steps_block++;
		}
		say_caps(c, now, ms);
	} else if (c->take && c->take < c->full && (c->server_blocks || c->server_span) &&
		   c->probe_wait && now >= c->probe_ns) {
		/*
		 * Probe: say the large size again. An older client that kept BLOCKS away
		 * may have left (or be lost) since: BLOCKS come again and we stay up. On
		 * a path that drops them none comes, and the test above steps down again
		 * within STEP_DOWN_NS, to probe after twice the pause.
		 */
		c->take = c->full;
		c->probe_at = now;
		multi_reset(c, now);
		say_caps(c, now, 0);
	}
}

/*
 * A datagram of several blocks (BLOCKS, SPAN, REPAIRS) came at now: large ones get
 * through, unless we stepped down before and now say more than a standard MTU's
 * payload (a probe) while this one is no longer than that: the SPANs the server
 * sent while we said NDZ_PKT_STD_PAYLOAD are still on their way after the probe and
 * show nothing about larger ones. (A client that never stepped down counts them:
 * in a group with a member of a standard MTU every client gets those SPANs.)
 */
static void multi_came(struct ndz_client *c, const struct ndz_pkt *p, uint64_t now)
{
	uint32_t wire = p->type == NDZ_PKT_SPAN ? NDZ_PKT_SPAN_LEN(p->length) :
			p->type == NDZ_PKT_REPAIRS ? NDZ_PKT_REPAIRS_LEN(p->nrep) :
			NDZ_PKT_BLOCKS_LEN(p->count);

	if (c->probe_wait && c->take > NDZ_PKT_STD_PAYLOAD && wire <= NDZ_PKT_STD_PAYLOAD)
		return;
	multi_reset(c, now);
}

/*
 * FEATURES from the server: the repairs it sends. Taken in every state after the
 * join (one that comes in the JOIN_REPLY's batch, or during the manifest, is kept
 * for the fetch that ndz_client_start makes).
 */
static void features_input(struct ndz_client *c, const struct ndz_pkt *p, uint64_t now)
{
	unsigned f;
	int blocks, span;

	if (p->tag != c->tag)
		return;
	blocks = (p->features & NDZ_FEAT_BLOCKS) && c->full >= NDZ_PKT_BLOCKS_LEN(2);
	span = (p->features & NDZ_FEAT_SPAN) && c->full;
	if (blocks || span) {
		/* say what we take (again: a CAPS, like the FEATURES, may be lost) */
		if (!c->server_blocks && !c->server_span)
			/* BLOCKS or SPANs may come from now on, also for requests we sent
			 * before it came (ndz_client_start asks at once, the FEATURES
			 * that follows the JOIN_REPLY comes after): those still count */
			c->multi_ns = now;
		c->server_blocks = blocks;
		c->server_span = span;
		c->server_repairs = blocks && (p->features & NDZ_FEAT_REPAIRS) && !c->o.no_repair;
		say_caps(c, now, 0);
	}
	if (!(p->features & NDZ_FEAT_REPAIR) || c->o.no_repair)
		return;
	f = p->features & (NDZ_FEAT_REPAIR | (c->o.no_whole ? 0 : NDZ_FEAT_WHOLE) |
			   (c->o.no_range ? 0 : NDZ_FEAT_RANGE));
	if (f != c->repair) {
		struct ndz_client_note n = { .what = NDZ_CLIENT_NOTE_REPAIR, .count = f };

		c->repair = f;
		if (c->fetch) {
			ndz_fetch_set_repair(c->fetch, f);
			ndz_fetch_set_range(c->fetch, f & NDZ_FEAT_RANGE ? emit_range : NULL, c);
		}
		note(c, &n);
	}
}

int ndz_client_input_pkt(struct ndz_client *c, const struct ndz_pkt *p, uint32_t from,
			 uint64_t now_ns)
{
	now_ns = monotone(c, now_ns);
	if (c->state == NDZ_CLIENT_FAILED || !accept_pkt(c, p, from))
		return 0;
	if (p->type == NDZ_PKT_FEATURES) {
		if (c->state != NDZ_CLIENT_JOINING)
			features_input(c, p, now_ns);
		return 0;
	}
	switch (c->state) {
	case NDZ_CLIENT_JOINING:
		join_input(c, p, from, now_ns);
		break;
	case NDZ_CLIENT_MANIFEST:
	case NDZ_CLIENT_INDEX:
		manifest_input(c, p, now_ns);
		break;
	case NDZ_CLIENT_RECEIVING:
		return receive_input(c, p, now_ns);
	}
	return 0;
}

int ndz_client_input(struct ndz_client *c, const uint8_t *buf, size_t len, uint32_t from,
		     uint64_t now_ns)
{
	now_ns = monotone(c, now_ns);
	struct ndz_pkt p;
	int r = ndz_pkt_decode(buf, len, &p, NULL);

	if (r == NDZ_EPROTOVER) {
		c->st.bad_version++;
		return 0;
	}
	if (r < 0) {
		c->st.bad++;
		return 0;
	}
	return ndz_client_input_pkt(c, &p, from, now_ns);
}

/* Receiving: the -T bounds, then what to ask for and when. */
/*
 * About once a second while receiving: PROGRESS to the server, for its status. Its
 * fate does not matter (an old server drops it as malformed), so a failed send is
 * not an error.
 */
static void progress_tick(struct ndz_client *c, uint64_t now)
{
	struct ndz_fetch_stats st;
	struct ndz_pkt p;

	if (now < c->next_progress_ns || !c->fetch)
		return;
	c->next_progress_ns = now + 1000 * MS;
	ndz_fetch_get_stats(c->fetch, &st);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_PROGRESS;
	p.progress.chunks_total = c->info.chunks;
	p.progress.chunks_done = st.done < c->info.chunks ? st.done : c->info.chunks;
	p.progress.bytes_written = (uint64_t)p.progress.chunks_done * NDZ_CHUNK_SIZE;
	p.progress.elapsed_ms = (uint32_t)((now - c->start_ns) / MS);
	(void)send_pkt(c, &p);
}

static void receive_tick(struct ndz_client *c, uint64_t now)
{
	if (now - c->last_server_ns > c->give_up_ns) {
		char a[16];

		ndz_error_set(&c->err, NDZ_ETIMEDOUT, 0, "no data from server %s for %u s; "
			      "giving up", ndz_net_ntoa(c->server, a), c->o.give_up_s);
		fail(c);
		return;
	}
	/*
	 * Blocks keep coming but what they make never checks out (a server reading
	 * a damaged image, or a forger): -T bounds that as it bounds silence.
	 */
	if (c->rejects && now > c->accept_ns && now - c->accept_ns > c->give_up_ns) {
		ndz_error_set(&c->err, NDZ_ETIMEDOUT, 0, "%s: no chunk checked out for %u s: "
			      "%u complete chunks failed their checks (the last: chunk %u: "
			      "%s); giving up", c->source, c->o.give_up_s, c->rejects,
			      c->reject_chunk, ndz_strerror(c->reject_why));
		fail(c);
		return;
	}
	step_down(c, now);
	if (now - c->last_block_ns > c->silence_wait_ns && now >= c->next_silence_ns) {
		/* The server is silent: ask for everything again, backing off. */
		struct ndz_client_note n = { .what = NDZ_CLIENT_NOTE_SILENT,
					     .ms = (now - c->last_block_ns) / MS };

		note(c, &n);
		ndz_fetch_requests(c->fetch, now, 1, emit_image, c);
		if (c->silence_wait_ns < 2000 * MS)
			c->silence_wait_ns *= 2;
		c->next_silence_ns = now + c->silence_wait_ns;
		ndz_fetch_kicked(c->fetch);
		c->next_look = now + 5 * MS;
	} else if (ndz_fetch_kicked(c->fetch) || now >= c->next_look) {
		if (now - c->last_block_ns < 20 * MS)
			c->silence_wait_ns = 40 * MS;
		ndz_fetch_requests(c->fetch, now, 0, emit_image, c);
		c->next_look = now + 5 * MS;
	}
}

int ndz_client_tick(struct ndz_client *c, uint64_t now_ns)
{
	now_ns = monotone(c, now_ns);
	switch (c->state) {
	case NDZ_CLIENT_JOINING:
		join_tick(c, now_ns);
		break;
	case NDZ_CLIENT_MANIFEST:
	case NDZ_CLIENT_INDEX:
		manifest_tick(c, now_ns);
		break;
	case NDZ_CLIENT_RECEIVING:
		receive_tick(c, now_ns);
		if (c->state == NDZ_CLIENT_RECEIVING)
			progress_tick(c, now_ns);
		break;
	}
	return c->state;
}

int ndz_client_ready(struct ndz_client *c, uint32_t *chunk, uint8_t **buf)
{
	int slot;

	if (!c->ready_len)
		return -1;
	slot = (int)c->ready[c->ready_head];
	c->ready_head = (c->ready_head + 1) % c->o.slots;
	c->ready_len--;
	*chunk = ndz_fetch_slot_chunk(c->fetch, slot);
	*buf = ndz_fetch_buf(c->fetch, slot);
	return slot;
}

int ndz_client_verdict(struct ndz_client *c, int slot, enum ndz_verdict how, int why,
		       int intact, uint64_t now_ns)
{
	now_ns = monotone(c, now_ns);
	struct ndz_fetch_stats st;
	int partial = 0;

	if (how == NDZ_VERDICT_ACCEPT) {
		ndz_fetch_accept(c->fetch, slot);
		c->accept_ns = now_ns;
		c->rejects = 0;
		ndz_fetch_get_stats(c->fetch, &st);
		if (st.complete == c->info.chunks && c->state == NDZ_CLIENT_RECEIVING)
			c->state = NDZ_CLIENT_COMPLETE;
		return 0;
	}
	/* a forged block or repair costs the blocks it casts doubt on, when some are
	 * (else the chunk is fetched again whole) */
	if (how != NDZ_VERDICT_FATAL && intact)
		partial = ndz_fetch_retry(c->fetch, slot);
	else
		ndz_fetch_reject(c->fetch, slot);
	if (how == NDZ_VERDICT_FATAL)
		return 0;
	c->rejects++;
	c->reject_chunk = ndz_fetch_slot_chunk(c->fetch, slot);
	c->reject_why = why;
	if (how == NDZ_VERDICT_FORGED)
		c->st.forged++;
	else
		c->st.crc_fail++;
	return partial;
}

uint8_t *ndz_client_take_buf(struct ndz_client *c, int slot)
{
	return ndz_fetch_take_buf(c->fetch, slot);
}

void ndz_client_written(struct ndz_client *c, int slot)
{
	ndz_fetch_done(c->fetch, slot);
	release_held(c);     /* a slot for blocks held back, if they wait */
}

int ndz_client_leave(struct ndz_client *c, int status, uint64_t now_ns, struct ndz_error *e)
{
	now_ns = monotone(c, now_ns);
	struct ndz_fetch_stats st = { 0 };
	struct ndz_pkt p;
	int r;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_LEAVE;
	p.leave.elapsed_ms = (uint32_t)((now_ns - c->start_ns) / MS);
	p.leave.status = (uint32_t)status;
	if (c->fetch)
		ndz_fetch_get_stats(c->fetch, &st);
	p.leave.blocks_received = st.blocks;
	p.leave.duplicates = st.dups;
	p.leave.requests_sent = c->st.requests;
	p.leave.bytes_written = (uint64_t)st.done * NDZ_CHUNK_SIZE;
	p.leave.chunks_done = st.done;
	r = send_pkt(c, &p);
	if (r != 0)
		return ndz_error_set(e, NDZ_ENET, r > 0 ? r : 0, "send to %s port %u",
				     c->o.group, c->o.port);
	return 0;
}

void ndz_client_get_stats(const struct ndz_client *c, struct ndz_client_stats *st)
{
	*st = c->st;
	if (c->fetch)
		ndz_fetch_get_stats(c->fetch, &st->fetch);
	else
		memset(&st->fetch, 0, sizeof(st->fetch));
}
