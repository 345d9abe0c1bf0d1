/*
 * A simulation of the whole multicast system on a simulated clock: one server
 * (lib/serve: its queue and merging), many clients (lib/mcast/client, the very
 * session frisbee runs: join, caches, request scheduling and timing, NAK
 * suppression), and a LAN that loses each block and each request independently at
 * each client. It counts what the server sends against a clean transfer (every
 * block once), for client counts a host cannot run for real (100, 500). Disk
 * writes are instant, chunk checks always pass.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/err.h"
#include "mcast/client.h"
#include "mcast/fec.h"
#include "mcast/fetch.h"
#include "core/format.h"
#include "mcast/proto.h"
#include "mcast/serve.h"

#define BLOCKS NDZ_BLOCKS_PER_CHUNK
#define MS 1000000ull
#define WIRE_BYTES (NDZ_PKT_BLOCK_LEN + 28u + 14u)    /* BLOCK + IPv4/UDP + Ethernet */
#define SERVER 0x0100000au             /* the server's address, network order */
#define TAG 0x5eed1234u                /* the image's tag */

struct sim_opts {
	unsigned clients;
	double loss;                   /* per block and per request, at each client */
	double server_loss;            /* per request, at the server */
	uint32_t chunks;
	uint64_t rate_bps;             /* the server's cap */
	uint64_t delay_ns;             /* a request's way to the server and the others */
	uint64_t jitter_ns;            /* clients start at random times in [0, jitter) */
	unsigned repair;               /* NDZ_FEAT_* repairs the server and clients use */
	unsigned legacy;               /* clients 0..legacy-1 know nothing of repairs */
	unsigned stripes_only;         /* the next ones know stripe repairs only */
	uint32_t seed;
};

struct sim_result {
	uint64_t sent;                 /* blocks and repairs the server sent */
	uint64_t repairs;              /* of which repairs */
	uint64_t requests;             /* requests the clients sent */
	uint64_t elapsed_ns;
	unsigned finished;             /* clients holding every chunk */
};

struct req {
	uint64_t at;
	unsigned from;
	struct ndz_pkt p;              /* a REQUEST, PREQUEST or RREQUEST as decoded */
};

struct client {
	struct ndz_client *cl;
	uint64_t start;
	int started, finished;
};

struct sim {
	struct sim_opts o;
	struct ndz_serve *serve;
	struct client *c;
	struct req *q;                 /* requests on their way, in time order */
	size_t qhead, qlen, qcap;
	uint64_t rng, now, requests;
	unsigned emitter, finished;
	int joining;                   /* the emitter sent a JOIN */
};

static uint64_t rnd(struct sim *s)
{
	s->rng ^= s->rng >> 12;
	s->rng ^= s->rng << 25;
	s->rng ^= s->rng >> 27;
	return s->rng * 2685821657736338717ull;
}

/* whether one packet is lost on its way to a receiver losing p of them */
static int lost_at(struct sim *s, double p)
{
	return (double)(rnd(s) >> 11) * (1.0 / 9007199254740992.0) < p;
}

/* whether one packet is lost on its way to one client */
static int lost(struct sim *s)
{
	return s->o.loss > 0 && lost_at(s, s->o.loss);
}

/* A client's datagram to the group (ndz_client_opts.send): a JOIN, or a request. */
static int sim_send(void *ctx, const uint8_t *d, size_t len)
{
	struct sim *s = ctx;
	struct ndz_pkt p;
	struct req *r;

	assert_int_equal(ndz_pkt_decode(d, len, &p, NULL), 0);
	if (p.type == NDZ_PKT_JOIN) {
		s->joining = 1;
		return 0;
	}
	if (p.type == NDZ_PKT_LEAVE)
		return 0;
	assert_true(p.type == NDZ_PKT_REQUEST || p.type == NDZ_PKT_PREQUEST ||
		    p.type == NDZ_PKT_RREQUEST);
	assert_int_equal(p.tag, TAG);
	if (s->qhead + s->qlen == s->qcap) {
		if (s->qhead) {
			memmove(s->q, s->q + s->qhead, s->qlen * sizeof(*s->q));
			s->qhead = 0;
		} else {
			s->qcap = s->qcap ? 2 * s->qcap : 1024;
			s->q = realloc(s->q, s->qcap * sizeof(*s->q));
			assert_non_null(s->q);
		}
	}
	r = &s->q[s->qhead + s->qlen++];
	r->at = s->now + s->o.delay_ns;
	r->from = s->emitter;
	r->p = p;
	s->requests++;
	return 0;
}

/* Requests that arrived by now: at the server and at every other client, each maybe lost. */
static void deliver_requests(struct sim *s)
{
	while (s->qlen && s->q[s->qhead].at <= s->now) {
		struct req *r = &s->q[s->qhead];

		if (!(s->o.server_loss > 0 && lost_at(s, s->o.server_loss))) {
			if (r->p.type == NDZ_PKT_REQUEST)
				assert_true(ndz_serve_request(s->serve, r->p.chunk, r->p.block,
							      r->p.count, NULL) >= 0);
			else if (r->p.type == NDZ_PKT_PREQUEST)
				assert_true(ndz_serve_prequest(s->serve, r->p.chunk,
							       r->p.bitmap, NULL) >= 0);
			else
				assert_true(ndz_serve_repairs(s->serve, r->p.chunk, r->p.need, NULL) >= 0);
		}
		for (unsigned i = 0; i < s->o.clients; i++) {
			struct client *c = &s->c[i];

			/* a client hears its own request looped back, without loss */
			if (!c->started || c->finished || (i != r->from && lost(s)))
				continue;
			assert_int_equal(ndz_client_input_pkt(c->cl, &r->p, 0x0200000au + i,
							      s->now), 0);
		}
		s->qhead++;
		s->qlen--;
	}
}

/* A client's time passes: what it asks for, and when, is its own (ndz_client_tick). */
static void client_look(struct sim *s, unsigned i)
{
	s->emitter = i;
	assert_int_equal(ndz_client_tick(s->c[i].cl, s->now), NDZ_CLIENT_RECEIVING);
}

/*
 * Client i starts: it joins (the server answers at once, as frisbeed's JOIN_REPLY
 * and FEATURES), then asks for its first chunks.
 */
static void client_start(struct sim *s, unsigned i)
{
	const struct sim_opts *o = &s->o;
	struct ndz_client_opts co = {
		.id = i + 1, .no_repair = i < o->legacy,
		.no_whole = i >= o->legacy && i < o->legacy + o->stripes_only,
		.no_store = 1, .room = UINT64_MAX, .give_up_s = 30, .slots = 64,
		.request_ahead = 2, .redelay_ns = 1000 * MS, .seed = o->seed * 7919u + i + 1,
		.send = sim_send, .ctx = s,
	};
	struct client *c = &s->c[i];
	struct ndz_pkt p;

	assert_int_equal(ndz_client_create(&co, s->now, &c->cl, NULL), 0);
	s->emitter = i;
	s->joining = 0;
	assert_int_equal(ndz_client_tick(c->cl, s->now), NDZ_CLIENT_JOINING);
	assert_true(s->joining);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_JOIN_REPLY;
	p.client_id = co.id;
	p.tag = TAG;
	p.info.chunks = o->chunks;
	p.info.block_size = NDZ_BLOCK_SIZE;
	p.info.blocks_per_chunk = BLOCKS;
	p.info.image_bytes = (uint64_t)o->chunks * NDZ_CHUNK_SIZE;
	p.info.source_bytes = p.info.image_bytes;
	p.info.rate_bps = o->rate_bps;
	ndz_client_input_pkt(c->cl, &p, SERVER, s->now);
	assert_int_equal(ndz_client_state(c->cl), NDZ_CLIENT_JOINED);
	assert_int_equal(ndz_client_info(c->cl)->chunks, o->chunks);
	assert_int_equal(ndz_client_start(c->cl, s->now, NULL), 0);
	if (o->repair) {
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_FEATURES;
		p.tag = TAG;
		p.features = o->repair;
		ndz_client_input_pkt(c->cl, &p, SERVER, s->now);
	}
	c->started = 1;
}

static void client_block(struct sim *s, unsigned i, uint32_t chunk,
			 const struct ndz_serve_item *it)
{
	struct client *c = &s->c[i];
	struct ndz_pkt p;
	uint8_t *buf;
	uint32_t got;
	int slot;

	memset(&p, 0, sizeof(p));
	p.type = it->repair ? NDZ_PKT_REPAIR : NDZ_PKT_BLOCK;
	p.tag = TAG;
	p.chunk = chunk;
	p.block = (uint16_t)it->block;
	p.stripe = (uint8_t)it->stripe;
	p.index = (uint8_t)it->index;
	s->emitter = i;
	ndz_client_input_pkt(c->cl, &p, SERVER, s->now);
	while ((slot = ndz_client_ready(c->cl, &got, &buf)) >= 0) {
		assert_int_equal(got, chunk);
		assert_null(buf);
		assert_int_equal(ndz_client_verdict(c->cl, slot, NDZ_CHUNK_OK, 0, 1, s->now), 0);
		ndz_client_written(c->cl, slot);
	}
	if (ndz_client_state(c->cl) == NDZ_CLIENT_COMPLETE) {
		struct ndz_client_stats st;

		ndz_client_get_stats(c->cl, &st);
		assert_int_equal(st.fetch.done, s->o.chunks);
		c->finished = 1;
		s->finished++;
	}
}

static void run(const struct sim_opts *o, struct sim_result *res)
{
	struct sim s;
	uint64_t step = WIRE_BYTES * 8ull * 1000000000ull / o->rate_bps;
	uint64_t clean = (uint64_t)o->chunks * BLOCKS;
	uint64_t limit = 20 * clean * step + 30000 * MS;
	struct ndz_serve_stats ss;
	int busy = 0;

	memset(&s, 0, sizeof(s));
	s.o = *o;
	s.rng = 0x9e3779b97f4a7c15ull ^ o->seed;
	assert_int_equal(ndz_serve_create(o->chunks, &s.serve, NULL), 0);
	s.c = calloc(o->clients, sizeof(*s.c));
	assert_non_null(s.c);
	for (unsigned i = 0; i < o->clients; i++)
		s.c[i].start = o->jitter_ns ? rnd(&s) % o->jitter_ns : 0;
	for (s.now = 0; s.finished < o->clients && s.now < limit; s.now += step) {
		deliver_requests(&s);
		for (unsigned i = 0; i < o->clients; i++) {
			struct client *c = &s.c[i];

			if (c->finished)
				continue;
			if (!c->started) {
				if (s.now < c->start)
					continue;
				client_start(&s, i);
				continue;
			}
			client_look(&s, i);
		}
		/* the server: one block a step while it has work */
		if (!busy)
			busy = ndz_serve_next_chunk(s.serve) >= 0;
		if (busy) {
			int64_t chunk = ndz_serve_current(s.serve, NULL, NULL);
			struct ndz_serve_item it;

			if (!ndz_serve_next(s.serve, &it)) {
				busy = 0;
				continue;
			}
			if (it.repair)
				assert_int_equal(ndz_serve_repair_sent(s.serve, (uint32_t)chunk,
								       it.stripe, NULL), 0);
			else
				assert_int_equal(ndz_serve_sent(s.serve, (uint32_t)chunk, it.block, NULL) >= 0,
						 1);
			for (unsigned i = 0; i < o->clients; i++)
				if (s.c[i].started && !s.c[i].finished && !lost(&s) &&
				    !(it.repair && i < o->legacy) &&
				    !(it.repair && it.stripe == NDZ_FEC_WHOLE &&
				      i < o->legacy + o->stripes_only))
					client_block(&s, i, (uint32_t)chunk, &it);
		}
	}
	ndz_serve_get_stats(s.serve, &ss);
	res->sent = ss.blocks_sent + ss.repairs_sent;
	res->repairs = ss.repairs_sent;
	res->requests = s.requests;
	res->elapsed_ns = s.now;
	res->finished = s.finished;
	/* every block went out at least once: the clients were served the whole image */
	assert_int_equal(ss.distinct_sent, clean);
	for (unsigned i = 0; i < o->clients; i++)
		ndz_client_free(s.c[i].cl);
	free(s.c);
	free(s.q);
	ndz_serve_free(s.serve);
}

static uint64_t last_requests;         /* of the last run_ratio */

/* Runs one configuration, prints its figures as a TAP comment, returns the ratio. */
static double run_ratio(const struct sim_opts *o)
{
	struct sim_result r;
	double ratio;

	run(o, &r);
	assert_int_equal(r.finished, o->clients);
	ratio = (double)r.sent / ((double)o->chunks * BLOCKS);
	last_requests = r.requests;
	printf("# sim: %u clients%s, %.0f%% loss, %u chunks, repair %s: server sent %.3fx a "
	       "clean transfer (%llu repairs), %llu requests, %.2f s simulated\n", o->clients,
	       o->legacy ? " (some without repair)" : "", o->loss * 100, o->chunks,
	       o->repair & NDZ_FEAT_WHOLE ? "whole" : o->repair ? "stripes" : "off", ratio, (unsigned long long)r.repairs,
	       (unsigned long long)r.requests, (double)r.elapsed_ns / 1e9);
	return ratio;
}

static double ratio_of(unsigned clients, double loss, uint32_t chunks, uint64_t jitter_ns,
		       unsigned repair, uint32_t seed)
{
	struct sim_opts o = {
		.clients = clients, .loss = loss, .chunks = chunks, .rate_bps = 100000000,
		.delay_ns = 200000, .jitter_ns = jitter_ns, .repair = repair, .seed = seed,
	};

	return run_ratio(&o);
}

/*
 * Without loss every block goes out exactly once, however many clients, when they
 * start together; one that starts while a chunk is on its way asks for the part it
 * missed, which costs a little.
 */
static void test_no_loss(void **state)
{
	double r;

	(void)state;
	assert_true(ratio_of(1, 0, 16, 0, 0, 1) == 1.0);
	assert_true(ratio_of(50, 0, 16, 0, 0, 2) == 1.0);
	r = ratio_of(50, 0, 16, 10 * MS, 0, 2);
	assert_true(r > 1.0 && r < 1.02);
}

/*
 * Today's protocol re-sends the union of what the clients lost: with n clients
 * and loss p about 1 - (1 - p)^n of the blocks go out again, and a little more
 * for re-sends lost in turn. The measured figures on the namespace LAN were
 * 1.085 (8 clients) and 1.17 (16); the simulation must agree within a margin.
 */
static void test_union_of_losses(void **state)
{
	static const unsigned n[] = { 8, 16 };
	static const double measured[] = { 1.085, 1.17 };

	(void)state;
	for (size_t i = 0; i < sizeof(n) / sizeof(n[0]); i++) {
		double r = ratio_of(n[i], 0.01, 32, 10 * MS, 0, 3 + (uint32_t)i);
		double u = 1.0;

		for (unsigned k = 0; k < n[i]; k++)
			u *= 0.99;
		u = 1.0 - u;

		assert_true(r >= 1.0 + 0.8 * u);
		assert_true(r <= 1.0 + 1.3 * u + 0.01);
		assert_true(r >= measured[i] - 0.04 && r <= measured[i] + 0.04);
	}
}

/* The scale the host cannot run: every client finishes; the cost is printed. */
static void test_many_clients(void **state)
{
	double r100, r500, r10;

	(void)state;
	r100 = ratio_of(100, 0.01, 16, 10 * MS, 0, 5);
	r500 = ratio_of(500, 0.01, 8, 10 * MS, 0, 6);
	r10 = ratio_of(8, 0.10, 32, 10 * MS, 0, 7);
	/* the union of 100 (500) clients' losses is 63% (99%) of the blocks */
	assert_true(r100 > 1.5 && r100 < 2.2);
	assert_true(r500 > 1.8 && r500 < 2.6);
	/* 8 clients at 10%: the union is 57%, and re-sends are lost in turn */
	assert_true(r10 > 1.5 && r10 < 1.8);
}

/*
 * Repairs: the same few repairs heal what each client lacks, so the server sends
 * about the most any client lost in a stripe, not the union. Issue 10's goals:
 * 100 clients <= 1.05, 500 <= 1.08, 8 clients at 10% <= 1.2. For 8 and 16 clients
 * at 1% (goals 1.02, 1.03) the most lost in a stripe of 128 by one of 8 clients is
 * about 3 on average, 2.4% of the chunk: stripes are bounded by GF(2^8)'s 255
 * blocks and repairs (test_whole: repairs over the whole chunk do better).
 */
static void test_repair(void **state)
{
	double r8, r16, r100, r500, r10, r30;
	uint64_t q100, q500;

	(void)state;
	r8 = ratio_of(8, 0.01, 32, 10 * MS, 1, 3);
	r16 = ratio_of(16, 0.01, 32, 10 * MS, 1, 4);
	r100 = ratio_of(100, 0.01, 16, 10 * MS, 1, 5);
	q100 = last_requests;
	r500 = ratio_of(500, 0.01, 8, 10 * MS, 1, 6);
	q500 = last_requests;
	r10 = ratio_of(8, 0.10, 32, 10 * MS, 1, 7);
	r30 = ratio_of(8, 0.30, 16, 10 * MS, 1, 8);
	assert_true(r8 > 1.0 && r8 <= 1.035);
	assert_true(r16 > 1.0 && r16 <= 1.04);
	assert_true(r100 <= 1.05);
	assert_true(r500 <= 1.08);
	assert_true(r10 <= 1.2);
	assert_true(r30 < 3.0);        /* past 32 losses a stripe: the blocks themselves */
	/*
	 * Requests for repairs heard from others count together per stripe, and the
	 * first to ask is heard before the rest do (they wait a random 0-16 ms): fewer
	 * than 1.2 requests a client and chunk at 100 clients, 0.6 at 500 (2567 and
	 * 5012 requests, 1.6 and 1.25, when only one request covering every stripe
	 * suppressed another and all asked at once).
	 */
	assert_true(q100 < 100 * 16 * 12 / 10);
	assert_true(q500 < 500 * 8 * 6 / 10);
}

/* Clients without repair share the session: everyone finishes, still cheaper than none. */
static void test_repair_mixed(void **state)
{
	struct sim_opts o = {
		.clients = 16, .loss = 0.01, .chunks = 32, .rate_bps = 100000000,
		.delay_ns = 200000, .jitter_ns = 10 * MS, .repair = 1, .legacy = 4, .seed = 9,
	};
	double r;

	(void)state;
	r = run_ratio(&o);
	assert_true(r > 1.0 && r < 1.15);
}

/*
 * Whole-chunk repairs: one repair heals one loss anywhere in the chunk, so the
 * server sends about the most one client lost of the chunk, not the sum over the
 * stripes of the most lost in each. Issue 10's goals: 8 clients at 1% <= 1.02,
 * 16 <= 1.03, 100 <= 1.05, 500 <= 1.08, 8 at 10% <= 1.2.
 */
static void test_whole(void **state)
{
	const unsigned w = NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE;
	double r8, r16, r100, r500, r10, r30;
	uint64_t q100, q500;

	(void)state;
	r8 = ratio_of(8, 0.01, 32, 10 * MS, w, 3);
	r16 = ratio_of(16, 0.01, 32, 10 * MS, w, 4);
	r100 = ratio_of(100, 0.01, 16, 10 * MS, w, 5);
	q100 = last_requests;
	r500 = ratio_of(500, 0.01, 8, 10 * MS, w, 6);
	q500 = last_requests;
	r10 = ratio_of(8, 0.10, 32, 10 * MS, w, 7);
	r30 = ratio_of(8, 0.30, 16, 10 * MS, w, 8);
	assert_true(r8 > 1.0 && r8 <= 1.02);
	assert_true(r16 > 1.0 && r16 <= 1.03);
	assert_true(r100 <= 1.05);
	assert_true(r500 <= 1.08);
	assert_true(r10 <= 1.2);
	assert_true(r30 < 3.0);
	assert_true(q100 < 100 * 16 * 12 / 10);
	assert_true(q500 < 500 * 8 * 6 / 10);
}

/* Clients of all three kinds in one session: everyone finishes. */
static void test_whole_mixed(void **state)
{
	struct sim_opts o = {
		.clients = 16, .loss = 0.01, .chunks = 32, .rate_bps = 100000000,
		.delay_ns = 200000, .jitter_ns = 10 * MS, .repair = NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE,
		.legacy = 2, .stripes_only = 4, .seed = 10,
	};
	double r;

	(void)state;
	r = run_ratio(&o);
	assert_true(r > 1.0 && r < 1.15);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_loss),
		cmocka_unit_test(test_union_of_losses),
		cmocka_unit_test(test_many_clients),
		cmocka_unit_test(test_repair),
		cmocka_unit_test(test_repair_mixed),
		cmocka_unit_test(test_whole),
		cmocka_unit_test(test_whole_mixed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
