/*
 * lib/mcast/server: a seeded run of the session object against clients made of
 * lib/mcast/fetch on a simulated clock, every datagram encoded and decoded as on the
 * wire and lost at random on its way; then admission of hostile packets, the client
 * table, a rate change, the chunk check, the manifest and the content index,
 * statistics and their JSON.
 */
#include <arpa/inet.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/format.h"
#include "mcast/fetch.h"
#include "mcast/proto.h"
#include "mcast/server.h"
#include "trust/index.h"

#define MS 1000000ull
#define CHUNKS 5u
#define CLIENTS 3u
#define SECTORS 16u                    /* covered by each chunk */

static uint8_t *image;                 /* CHUNKS valid chunks, the "file" served */
static const uint8_t uuid[16] = "server-test-uuid";

static uint64_t rng;

static uint64_t rnd(void)
{
	rng ^= rng >> 12;
	rng ^= rng << 25;
	rng ^= rng >> 27;
	return rng * 2685821657736338717ull;
}

/* Chunk i of a CHUNKS-chunk image: one region, random data with its CRC. */
static void make_chunk(uint8_t *c, uint32_t i)
{
	struct ndz_chunk_hdr h;
	uint32_t len = 100000 + i * 4099;

	memset(c, 0, NDZ_CHUNK_SIZE);
	memset(&h, 0, sizeof(h));
	h.version = NDZ_VERSION_1;
	h.index = i;
	h.chunk_flags = i == CHUNKS - 1 ? NDZ_CHUNK_LAST : 0;
	memcpy(h.uuid, uuid, 16);
	h.sector_size = NDZ_SECTOR_SIZE;
	h.codec = NDZ_CODEC_ZLIB;
	h.source_sectors = (uint64_t)CHUNKS * SECTORS;
	h.source_bytes = h.source_sectors * NDZ_SECTOR_SIZE;
	h.first = (uint64_t)i * SECTORS;
	h.last = h.first + SECTORS;
	h.data_len = len;
	for (uint32_t k = 0; k < len; k++)
		c[NDZ_HDR_SIZE + k] = (uint8_t)rnd();
	h.data_crc = ndz_crc32(0, c + NDZ_HDR_SIZE, len);
	h.nregions = 1;
	ndz_hdr_set_region(c, 0, (struct ndz_region){ h.first, SECTORS });
	assert_int_equal(ndz_hdr_encode(&h, c, NULL), 0);
	assert_int_equal(ndz_chunk_check(c, &h, NULL), 0);
}

static int setup(void **state)
{
	(void)state;
	rng = 0x5eed5eed12345ull;
	image = malloc((size_t)CHUNKS * NDZ_CHUNK_SIZE);
	assert_non_null(image);
	for (uint32_t i = 0; i < CHUNKS; i++)
		make_chunk(image + (size_t)i * NDZ_CHUNK_SIZE, i);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	free(image);
	return 0;
}

static struct ndz_server_opts opts(unsigned repair, int auto_rate)
{
	struct ndz_server_opts o = { .name = "test\"img", .repair = repair,
				     .rate_bps = 100000000, .auto_rate = auto_rate };

	memcpy(o.info.uuid, uuid, 16);
	o.info.chunks = CHUNKS;
	o.info.block_size = NDZ_BLOCK_SIZE;
	o.info.blocks_per_chunk = NDZ_BLOCKS_PER_CHUNK;
	o.info.image_bytes = (uint64_t)CHUNKS * NDZ_CHUNK_SIZE;
	o.info.source_bytes = (uint64_t)CHUNKS * SECTORS * NDZ_SECTOR_SIZE;
	o.info.idle_timeout = 10;
	return o;
}

/* A client: frisbee's join and main loop, simplified; its cache is lib/mcast/fetch. */
struct client {
	uint32_t id, addr;
	struct ndz_fetch *f;
	uint64_t next_look, next_join, last_block;
	unsigned features;
	uint32_t done;
	int left;
};

struct world {
	struct ndz_server *srv;
	struct client c[CLIENTS];
	uint64_t now;
	double loss;
	unsigned from;                 /* the client emitting requests */
	uint64_t requests;
};

static int lost(const struct world *w)
{
	return w->loss > 0 && (double)(rnd() >> 11) / 9007199254740992.0 < w->loss;
}

/* A client's datagram reaches the server (requests may be lost too). */
static void to_server(struct world *w, const struct ndz_pkt *p, uint32_t addr)
{
	uint8_t buf[NDZ_PKT_MAX];
	struct ndz_server_reply rp;
	int len = ndz_pkt_encode(p, buf, sizeof(buf), NULL);

	assert_true(len > 0);
	if (p->type != NDZ_PKT_JOIN && p->type != NDZ_PKT_LEAVE && lost(w))
		return;
	assert_true(ndz_server_packet(w->srv, buf, (size_t)len, addr, w->now, &rp, NULL) > 0);
	for (unsigned i = 0; i < rp.count; i++)
		for (unsigned k = 0; k < CLIENTS; k++) {
			struct ndz_pkt q;

			if (lost(w))
				continue;
			assert_int_equal(ndz_pkt_decode(rp.bufs[i], rp.lens[i], &q, NULL), 0);
			if (q.type == NDZ_PKT_FEATURES) {
				w->c[k].features = q.features;
				if (w->c[k].f)
					ndz_fetch_set_repair(w->c[k].f, q.features);
				continue;
			}
			assert_int_equal(q.type, NDZ_PKT_JOIN_REPLY);
			if (w->c[k].f || (q.client_id != w->c[k].id && q.client_id != 0))
				continue;
			/* the server says what it serves, as a client checks it */
			assert_memory_equal(q.info.uuid, uuid, 16);
			assert_int_equal(q.info.chunks, CHUNKS);
			assert_int_equal(ndz_fetch_check_join(&q.info, UINT64_MAX, 0, NULL), 0);
			{
				struct ndz_fetch_opts fo = { .chunks = q.info.chunks, .slots = 8,
							     .request_ahead = 2, .redelay_ns = 300 * MS,
							     .seed = w->c[k].id };

				assert_int_equal(ndz_fetch_create(&fo, &w->c[k].f, NULL), 0);
				ndz_fetch_set_repair(w->c[k].f, w->c[k].features);
				w->c[k].last_block = w->now;
			}
		}
}

static void emit(void *ctx, uint32_t chunk, const uint8_t *missing, const uint8_t *need)
{
	struct world *w = ctx;
	struct client *c = &w->c[w->from];
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.client_id = c->id;
	p.tag = ndz_image_tag(uuid);
	p.chunk = chunk;
	if (need) {
		p.type = NDZ_PKT_RREQUEST;
		memcpy(p.need, need, NDZ_FEC_SETS);
	} else if (missing) {
		p.type = NDZ_PKT_PREQUEST;
		memcpy(p.bitmap, missing, NDZ_BITMAP_BYTES);
	} else {
		p.type = NDZ_PKT_REQUEST;
		p.count = NDZ_BLOCKS_PER_CHUNK;
	}
	w->requests++;
	to_server(w, &p, c->addr);
}

static void client_look(struct world *w, unsigned i)
{
	struct client *c = &w->c[i];
	struct ndz_pkt p;

	if (c->left || w->now < c->next_look)
		return;
	c->next_look = w->now + 5 * MS;
	memset(&p, 0, sizeof(p));
	p.client_id = c->id;
	if (!c->f) {
		if (w->now >= c->next_join) {
			p.type = NDZ_PKT_JOIN;
			c->next_join = w->now + 50 * MS;
			to_server(w, &p, c->addr);
		}
		return;
	}
	if (c->done == CHUNKS) {
		p.type = NDZ_PKT_LEAVE;
		p.tag = ndz_image_tag(uuid);
		to_server(w, &p, c->addr);
		c->left = 1;
		return;
	}
	w->from = i;
	ndz_fetch_requests(c->f, w->now, w->now - c->last_block > 100 * MS, emit, w);
}

/* A BLOCK or REPAIR datagram of the server's reaches client i. */
static void to_client(struct world *w, unsigned i, const uint8_t *buf, size_t len)
{
	struct client *c = &w->c[i];
	struct ndz_pkt p;
	int slot;

	if (!c->f || c->left || lost(w))
		return;
	assert_int_equal(ndz_pkt_decode(buf, len, &p, NULL), 0);
	if (p.type == NDZ_PKT_FEATURES) {
		ndz_fetch_set_repair(c->f, p.features);
		return;
	}
	assert_int_equal(p.tag, ndz_image_tag(uuid));
	c->last_block = w->now;
	slot = p.type == NDZ_PKT_REPAIR ?
	       ndz_fetch_repair(c->f, p.chunk, p.stripe, p.index, p.data, w->now) :
	       ndz_fetch_block(c->f, p.chunk, p.block, p.data, w->now);
	if (slot < 0)
		return;
	/* what the client put together is the image's chunk, byte for byte */
	assert_memory_equal(ndz_fetch_buf(c->f, slot),
			    image + (size_t)ndz_fetch_slot_chunk(c->f, slot) * NDZ_CHUNK_SIZE,
			    NDZ_CHUNK_SIZE);
	ndz_fetch_accept(c->f, slot);
	ndz_fetch_done(c->f, slot);
	c->done++;
}

/* The server's side, as frisbeed drives it: one plan at a time on the simulated clock. */
static enum ndz_server_step server_step(struct world *w, struct ndz_server_batch *b)
{
	struct ndz_error e = { 0 };
	enum ndz_server_step st = ndz_server_plan(w->srv, w->now, b);

	switch (st) {
	case NDZ_SERVER_WAIT:
		w->now += 1 * MS;
		break;
	case NDZ_SERVER_LOAD:
		assert_true(b->chunk < CHUNKS);
		memcpy(ndz_server_chunk_buf(w->srv), image + (size_t)b->chunk * NDZ_CHUNK_SIZE,
		       NDZ_CHUNK_SIZE);
		assert_int_equal(ndz_server_check_chunk(w->srv, b->chunk, 0, &e), 0);
		break;
	case NDZ_SERVER_SEND:
		w->now += b->delay_ns;
		ndz_server_build(w->srv, b);
		for (unsigned k = 0; k < b->ndgrams; k++)
			for (unsigned i = 0; i < CLIENTS; i++)
				to_client(w, i, b->bufs[k], b->lens[k]);
		ndz_server_sent(w->srv, b, w->now);
		if (!b->control)
			w->now += 10000;       /* the send itself */
		break;
	}
	return st;
}

/* Runs the session until every client left (or a generous limit); returns how many left. */
static unsigned run(struct world *w, unsigned repair, int auto_rate, double loss)
{
	struct ndz_server_opts o = opts(repair, auto_rate);
	struct ndz_server_batch *b = malloc(sizeof(*b));
	unsigned left = 0;

	assert_non_null(b);
	memset(w, 0, sizeof(*w));
	w->loss = loss;
	assert_int_equal(ndz_server_create(&o, 0, &w->srv, NULL), 0);
	for (unsigned i = 0; i < CLIENTS; i++) {
		w->c[i].id = 0x1000 + i;
		w->c[i].addr = 0x0a000001u + (i << 24);
		w->c[i].next_look = i * 7 * MS;        /* they start apart */
	}
	while (left < CLIENTS && w->now < 120000 * MS) {
		server_step(w, b);
		left = 0;
		for (unsigned i = 0; i < CLIENTS; i++) {
			client_look(w, i);
			left += w->c[i].left;
		}
	}
	/* what is still queued goes out to no one */
	for (int k = 0; k < 100000 && server_step(w, b) != NDZ_SERVER_WAIT; k++)
		;
	for (unsigned i = 0; i < CLIENTS; i++)
		ndz_fetch_free(w->c[i].f);
	free(b);
	return left;
}

static void check_table(const struct world *w)
{
	struct ndz_server_client c;

	assert_int_equal(ndz_server_clients(w->srv), CLIENTS);
	for (size_t i = 0; i < CLIENTS; i++) {
		assert_int_equal(ndz_server_client(w->srv, i, &c, NULL), 0);
		assert_int_equal(c.id, w->c[i].id);
		assert_int_equal(c.addr, w->c[i].addr);
		assert_int_equal(c.left, 1);
	}
	assert_int_equal(ndz_server_client(w->srv, CLIENTS, &c, NULL), NDZ_ENOENT);
}

/* Clients join, ask, are repaired and leave; every one holds the whole image. */
static void run_and_check(unsigned repair, int auto_rate, double loss)
{
	struct world w;
	struct ndz_server_stats st;

	assert_int_equal(run(&w, repair, auto_rate, loss), CLIENTS);
	ndz_server_get_stats(w.srv, &st);
	assert_int_equal(st.chunks, CHUNKS);
	assert_int_equal(st.clients, CLIENTS);
	assert_true(st.joins >= CLIENTS);
	assert_int_equal(st.leaves, CLIENTS);
	assert_int_equal(st.distinct_sent, (uint64_t)CHUNKS * NDZ_BLOCKS_PER_CHUNK);
	assert_true(st.requests > 0);
	assert_int_equal(st.bad_packets + st.bad_version + st.wrong_image + st.bad_chunk, 0);
	if (loss > 0 && repair)
		assert_true(st.repairs_sent > 0);
	if (!repair)
		assert_int_equal(st.repairs_sent, 0);
	if (auto_rate)
		assert_true(st.auto_rate_bps > 0);
	else
		assert_int_equal(st.auto_rate_bps, 0);
	assert_true(st.bytes_sent >= (st.blocks_sent + st.repairs_sent) * NDZ_PKT_BLOCK_LEN);
	check_table(&w);
	/* the session is over once nothing is asked for the idle timeout */
	assert_false(ndz_server_idle(w.srv, w.now));
	assert_true(ndz_server_idle(w.srv, w.now + 11000 * MS));
	ndz_server_free(w.srv);
}

static void test_clean(void **state)
{
	(void)state;
	run_and_check(NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE, 0, 0);
}

static void test_loss_repairs(void **state)
{
	(void)state;
	run_and_check(NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE, 0, 0.03);
	run_and_check(NDZ_FEAT_REPAIR, 0, 0.03);
}

static void test_loss_no_repair(void **state)
{
	(void)state;
	run_and_check(0, 0, 0.03);
}

static void test_auto_rate(void **state)
{
	(void)state;
	run_and_check(NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE, 1, 0.05);
}

/* Feeds len bytes from addr; returns what ndz_server_packet says. */
static int feed(struct ndz_server *s, const void *buf, size_t len)
{
	struct ndz_server_reply rp;

	return ndz_server_packet(s, buf, len, 0x0100007fu, 5 * MS, &rp, NULL);
}

static int feed_pkt(struct ndz_server *s, const struct ndz_pkt *p)
{
	uint8_t buf[NDZ_PKT_MAX];
	int len = ndz_pkt_encode(p, buf, sizeof(buf), NULL);

	assert_true(len > 0);
	return feed(s, buf, (size_t)len);
}

/* The next batch of chunk 0 (loaded from the image when asked), built. */
static void next_batch(struct ndz_server *s, struct ndz_server_batch *b, uint64_t now)
{
	enum ndz_server_step st = ndz_server_plan(s, now, b);

	/* (a FEATURES goes first with a new chunk) */
	while (st == NDZ_SERVER_LOAD || (st == NDZ_SERVER_SEND && b->control)) {
		if (st == NDZ_SERVER_LOAD) {
			memcpy(ndz_server_chunk_buf(s),
			       image + (size_t)b->chunk * NDZ_CHUNK_SIZE, NDZ_CHUNK_SIZE);
			assert_int_equal(ndz_server_check_chunk(s, b->chunk, 0, NULL), 0);
		}
		st = ndz_server_plan(s, now, b);
	}
	assert_int_equal(st, NDZ_SERVER_SEND);
	ndz_server_build(s, b);
	ndz_server_sent(s, b, now);
}

/*
 * BLOCKS: a server whose interface takes 8972-byte datagrams sends runs of 8 blocks
 * while every client said (CAPS) it takes them, one block a datagram as soon as a
 * client that said nothing (an older one) is in the group, runs again once it left;
 * FEATURES says so. Every block's bytes are the image's.
 */
static void test_blocks(void **state)
{
	struct ndz_server_opts o = opts(0, 0);
	struct ndz_server_batch *b = malloc(sizeof(*b));
	struct ndz_server_reply rp;
	struct ndz_server_stats st;
	struct ndz_server *s;
	struct ndz_pkt p, q;
	unsigned next = 0;

	(void)state;
	assert_non_null(b);
	o.rate_bps = 1000000000;               /* full batches (NDZ_SERVER_BATCH blocks) */
	o.max_payload = 8972;
	assert_int_equal(NDZ_SERVER_BATCH % 8, 0);
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	ndz_server_announce(s, &rp);
	assert_int_equal(rp.count, 2);
	assert_int_equal(ndz_pkt_decode(rp.bufs[1], rp.lens[1], &q, NULL), 0);
	assert_int_equal(q.type, NDZ_PKT_FEATURES);
	assert_int_equal(q.features, NDZ_FEAT_BLOCKS | NDZ_FEAT_SPAN);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_JOIN;
	p.client_id = 1;
	assert_int_equal(feed_pkt(s, &p), 1);
	p.type = NDZ_PKT_CAPS;
	p.tag = ndz_image_tag(uuid);
	p.max_payload = 8972;
	assert_int_equal(feed_pkt(s, &p), 1);
	p.type = NDZ_PKT_REQUEST;
	p.chunk = 0;
	p.block = 0;
	p.count = 1024;
	assert_int_equal(feed_pkt(s, &p), 2);
	for (int round = 0; round < 3; round++) {
		/* round 1: an older client joined; round 2: it left */
		if (round == 1) {
			memset(&p, 0, sizeof(p));
			p.type = NDZ_PKT_JOIN;
			p.client_id = 2;
			assert_int_equal(feed_pkt(s, &p), 1);
		} else if (round == 2) {
			memset(&p, 0, sizeof(p));
			p.type = NDZ_PKT_LEAVE;
			p.client_id = 2;
			p.tag = ndz_image_tag(uuid);
			assert_int_equal(feed_pkt(s, &p), 1);
		}
		next_batch(s, b, 6 * MS + (uint64_t)round * MS);
		assert_int_equal(b->count, NDZ_SERVER_BATCH);
		assert_int_equal(b->ndgrams, round == 1 ? NDZ_SERVER_BATCH : NDZ_SERVER_BATCH / 8);
		for (unsigned d = 0; d < b->ndgrams; d++) {
			unsigned n = round == 1 ? 1 : 8;

			assert_int_equal(ndz_pkt_decode(b->bufs[d], b->lens[d], &q, NULL), 0);
			/* the gathered form: the same bytes, the blocks where the chunk has them */
			assert_int_equal(b->out[d].head_len, NDZ_PKT_DATA_AT);
			assert_int_equal(b->out[d].head_len + b->out[d].body_len, b->lens[d]);
			assert_memory_equal(b->out[d].head, b->bufs[d], NDZ_PKT_DATA_AT);
			assert_ptr_equal(b->out[d].body,
					 ndz_server_chunk_buf(s) + (size_t)next * NDZ_BLOCK_SIZE);
			assert_int_equal(q.type, n == 1 ? NDZ_PKT_BLOCK : NDZ_PKT_BLOCKS);
			assert_int_equal(q.chunk, 0);
			assert_int_equal(q.block, next);
			assert_int_equal(n == 1 ? 1 : q.count, n);
			assert_memory_equal(q.data, image + (size_t)next * NDZ_BLOCK_SIZE,
					    (size_t)n * NDZ_BLOCK_SIZE);
			next += n;
		}
	}
	ndz_server_get_stats(s, &st);
	assert_int_equal(st.blocks_sent, 3 * NDZ_SERVER_BATCH);
	assert_int_equal(st.datagrams_sent, NDZ_SERVER_BATCH + 2 * (NDZ_SERVER_BATCH / 8));
	assert_int_equal(st.group_blocks, 8);
	assert_int_equal(st.group_down, 1);
	assert_int_equal(st.group_up, 1);
	assert_int_equal(st.bytes_sent, 2 * (NDZ_SERVER_BATCH / 8) * NDZ_PKT_BLOCKS_LEN(8) +
			 NDZ_SERVER_BATCH * NDZ_PKT_BLOCK_LEN);
	ndz_server_free(s);
	/* an interface of 1500 bytes: no BLOCKS, SPANs announced; 1075: not even those */
	o.max_payload = 1472;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	ndz_server_announce(s, &rp);
	assert_int_equal(rp.count, 2);
	assert_int_equal(ndz_pkt_decode(rp.bufs[1], rp.lens[1], &q, NULL), 0);
	assert_int_equal(q.features, NDZ_FEAT_SPAN);
	ndz_server_free(s);
	o.max_payload = 1075;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	ndz_server_announce(s, &rp);
	assert_int_equal(rp.count, 1);
	ndz_server_free(s);
	free(b);
}

/* CAPS of client id: it takes max bytes, SPANs when span (and REPAIRS when span is 2). */
static void caps(struct ndz_server *s, uint32_t id, uint32_t max, int span)
{
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_JOIN;
	p.client_id = id;
	assert_int_equal(feed_pkt(s, &p), 1);
	p.type = NDZ_PKT_CAPS;
	p.tag = ndz_image_tag(uuid);
	p.max_payload = max;
	p.caps_flags = (span ? NDZ_CAPS_SPAN : 0) | (span == 2 ? NDZ_CAPS_REPAIRS : 0);
	assert_int_equal(feed_pkt(s, &p), 1);
}

/*
 * REPAIRS: at 9000 a group whose every client takes them gets a set's consecutive
 * repairs in one REPAIRS of at most 8 (the repairs of the stripe code), the rest
 * alone; a client that does not take them and each goes in a REPAIR of its own.
 */
static void test_repairs(void **state)
{
	struct ndz_server_opts o = opts(NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE, 0);
	struct ndz_server_batch *b = malloc(sizeof(*b));
	struct ndz_server_reply rp;
	struct ndz_server_stats st;
	struct ndz_server *s;
	struct ndz_fec *fec;
	struct ndz_pkt p, q;
	uint8_t want[NDZ_BLOCK_SIZE];

	(void)state;
	assert_non_null(b);
	assert_int_equal(ndz_fec_create(&fec, NULL), 0);
	o.rate_bps = 1000000000;
	o.max_payload = 8972;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	ndz_server_announce(s, &rp);
	assert_int_equal(ndz_pkt_decode(rp.bufs[1], rp.lens[1], &q, NULL), 0);
	assert_int_equal(q.features, NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE | NDZ_FEAT_BLOCKS |
			 NDZ_FEAT_SPAN | NDZ_FEAT_REPAIRS);
	caps(s, 1, 8972, 2);
	for (int round = 0; round < 2; round++) {
		unsigned got[NDZ_FEC_STRIPES] = { 0 }, dgrams = 0, reps = 0;

		if (round == 1)
			caps(s, 2, 8972, 1);    /* SPANs, not REPAIRS */
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_RREQUEST;
		p.client_id = 1;
		p.tag = ndz_image_tag(uuid);
		p.need[2] = 11;
		p.need[5] = 3;
		assert_int_equal(feed_pkt(s, &p), 2);
		next_batch(s, b, (6 + (uint64_t)round) * MS);
		assert_int_equal(b->count, 14);
		for (unsigned d = 0; d < b->ndgrams; d++) {
			unsigned n;

			assert_int_equal(ndz_pkt_decode(b->bufs[d], b->lens[d], &q, NULL), 0);
			assert_int_equal(q.type, round ? NDZ_PKT_REPAIR : NDZ_PKT_REPAIRS);
			n = round ? 1 : q.nrep;
			assert_true(q.stripe == 2 || q.stripe == 5);
			for (unsigned k = 0; k < n; k++) {
				/* each one's index the next of its set's: 0, 1, ... */
				assert_int_equal(q.index + k, got[q.stripe]);
				ndz_fec_encode(fec, image, q.stripe, q.index + k, want);
				assert_memory_equal(q.data + (size_t)k * NDZ_BLOCK_SIZE, want,
						    NDZ_BLOCK_SIZE);
				got[q.stripe]++;
			}
			dgrams++;
			reps += n;
		}
		assert_int_equal(got[2], 11);
		assert_int_equal(got[5], 3);
		assert_int_equal(reps, 14);
		/* set 2: 8 and 3; set 5: 3; one by one with a client that takes none */
		assert_int_equal(dgrams, round ? 14 : 3);
		ndz_server_get_stats(s, &st);
		assert_int_equal(st.multi_repairs_sent, round ? 0 : 3);
		assert_int_equal(st.repairs_sent, 14);
		assert_int_equal(st.datagrams_sent, dgrams);
		/* the next round on a new session: the indexes from 0 again */
		ndz_server_free(s);
		if (round == 0) {
			assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
			caps(s, 1, 8972, 2);
		}
	}
	ndz_fec_free(fec);
	free(b);
}

/*
 * SPAN: at 1500 bytes, a group whose every client took SPANs gets each run of blocks
 * cut into SPANs of 1440 bytes (datagrams of 1460), the last of a run shorter, every
 * byte the chunk's and sent from it; one client that did not take them (or takes
 * no more than a BLOCK) and the group gets BLOCKs; at 9000 SPANs of 8928 bytes.
 */
static void test_span(void **state)
{
	struct ndz_server_opts o = opts(0, 0);
	struct ndz_server_batch *b = malloc(sizeof(*b));
	struct ndz_server_stats st;
	struct ndz_server *s;
	struct ndz_pkt p, q;
	uint64_t spans = 0, dgrams = 0;

	(void)state;
	assert_non_null(b);
	o.rate_bps = 1000000000;
	for (int mtu = 0; mtu < 2; mtu++) {
		unsigned span = mtu ? 8928 : 1440;
		uint32_t next = 0;

		spans = dgrams = 0;
		o.max_payload = mtu ? 8972 : 1472;
		assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
		caps(s, 1, o.max_payload, 1);
		caps(s, 2, 9000, 1);            /* takes more than we send: ours it is */
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_REQUEST;
		p.client_id = 1;
		p.tag = ndz_image_tag(uuid);
		p.count = 1024;
		assert_int_equal(feed_pkt(s, &p), 2);
		for (int round = 0; round < 4; round++) {
			/* round 1: a client without SPAN; 2: one that takes a BLOCK only (a
			 * stepped-down one); 3: both gone */
			if (round == 1)
				caps(s, 3, 8972, 0);
			if (round == 2) {
				memset(&p, 0, sizeof(p));
				p.type = NDZ_PKT_LEAVE;
				p.client_id = 3;
				p.tag = ndz_image_tag(uuid);
				assert_int_equal(feed_pkt(s, &p), 1);
				caps(s, 4, NDZ_PKT_BLOCK_LEN, 1);
			}
			if (round == 3) {
				p.client_id = 4;
				assert_int_equal(feed_pkt(s, &p), 1);
			}
			next_batch(s, b, 6 * MS + (uint64_t)round * MS);
			assert_int_equal(b->count, NDZ_SERVER_BATCH);
			dgrams += b->ndgrams;
			for (unsigned d = 0; d < b->ndgrams; d++) {
				assert_int_equal(ndz_pkt_decode(b->bufs[d], b->lens[d], &q, NULL), 0);
				assert_int_equal(b->out[d].head_len + b->out[d].body_len, b->lens[d]);
				assert_ptr_equal(b->out[d].body, ndz_server_chunk_buf(s) + next);
				if (round == 1 || round == 2) {
					assert_int_equal(q.type, mtu && round == 1 ? NDZ_PKT_BLOCKS :
							 NDZ_PKT_BLOCK);
					next += (q.type == NDZ_PKT_BLOCKS ? q.count : 1) * NDZ_BLOCK_SIZE;
					continue;
				}
				spans++;
				assert_int_equal(q.type, NDZ_PKT_SPAN);
				assert_int_equal(q.offset, next);
				/* all but a run's last are full; the run is the batch's blocks */
				if (d + 1 < b->ndgrams)
					assert_int_equal(q.length, span);
				else
					assert_true(q.length <= span && q.length > 0);
				assert_memory_equal(q.data, image + next, q.length);
				next += q.length;
			}
			assert_int_equal(next % (NDZ_SERVER_BATCH * NDZ_BLOCK_SIZE), 0);
			if (round == 0 || round == 3)
				assert_int_equal(b->ndgrams, (NDZ_SERVER_BATCH * NDZ_BLOCK_SIZE + span - 1) /
						 span);
		}
		ndz_server_get_stats(s, &st);
		assert_int_equal(st.spans_sent, spans);
		assert_int_equal(st.datagrams_sent, dgrams);
		assert_int_equal(st.span_size, span);
		assert_int_equal(st.span_min, span);
		assert_int_equal(st.blocks_sent, 4 * NDZ_SERVER_BATCH);
		if (mtu) {
			/* a client that says a 1500 MTU's payload (a stepped-down one): 1440 */
			caps(s, 5, NDZ_PKT_STD_PAYLOAD, 1);
			memset(&p, 0, sizeof(p));
			p.type = NDZ_PKT_REQUEST;
			p.client_id = 5;
			p.tag = ndz_image_tag(uuid);
			p.count = 1024;
			assert_int_equal(feed_pkt(s, &p), 1);
			next_batch(s, b, 20 * MS);
			assert_int_equal(ndz_pkt_decode(b->bufs[0], b->lens[0], &q, NULL), 0);
			assert_int_equal(q.type, NDZ_PKT_SPAN);
			assert_int_equal(b->lens[0], 1460);
			ndz_server_get_stats(s, &st);
			assert_int_equal(st.span_min, 1440);
			assert_int_equal(st.span_size, 1440);
		}
		ndz_server_free(s);
	}
	free(b);
}

/* Hostile and stray packets are counted and change nothing: no client, no work. */
static void test_admission(void **state)
{
	struct ndz_server_opts o = opts(NDZ_FEAT_REPAIR, 0);
	struct ndz_server *s;
	struct ndz_server_batch *b = malloc(sizeof(*b));
	struct ndz_server_stats st;
	struct ndz_pkt p;
	uint8_t junk[300], buf[NDZ_PKT_MAX];
	int len;

	(void)state;
	assert_non_null(b);
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	memset(junk, 0xa5, sizeof(junk));
	assert_int_equal(feed(s, junk, sizeof(junk)), 0);             /* not a packet */
	assert_int_equal(feed(s, junk, 0), 0);                        /* empty */
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_REQUEST;
	p.client_id = 7;
	p.tag = ndz_image_tag(uuid);
	p.chunk = CHUNKS;                                               /* past the image */
	p.count = 1;
	assert_int_equal(feed_pkt(s, &p), 0);
	p.chunk = 1;
	p.tag ^= 1;                                                     /* another image */
	assert_int_equal(feed_pkt(s, &p), 0);
	len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);
	buf[4] = NDZ_PROTO_VERSION + 1;                                 /* a later protocol */
	assert_int_equal(feed(s, buf, (size_t)len), 0);
	p.tag ^= 1;
	p.type = NDZ_PKT_RREQUEST;                                      /* whole-chunk repairs: off */
	p.need[NDZ_FEC_WHOLE] = 3;
	assert_int_equal(feed_pkt(s, &p), 0);
	memset(&p, 0, sizeof(p));                                       /* a server's packet */
	p.type = NDZ_PKT_FEATURES;
	p.tag = ndz_image_tag(uuid);
	assert_int_equal(feed_pkt(s, &p), 0);
	ndz_server_get_stats(s, &st);
	assert_int_equal(st.bad_packets, 3);
	assert_int_equal(st.bad_version, 1);
	assert_int_equal(st.wrong_image, 1);
	assert_int_equal(st.bad_chunk, 1);
	assert_int_equal(st.clients, 0);
	assert_int_equal(st.requests, 0);
	assert_int_equal(ndz_server_clients(s), 0);
	assert_int_equal(ndz_server_plan(s, 6 * MS, b), NDZ_SERVER_WAIT);
	/* a sound request is admitted and wakes the sender */
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_REQUEST;
	p.client_id = 7;
	p.tag = ndz_image_tag(uuid);
	p.chunk = 2;
	p.count = 4;
	assert_int_equal(feed_pkt(s, &p), 2);
	assert_int_equal(ndz_server_clients(s), 1);
	assert_int_equal(ndz_server_plan(s, 7 * MS, b), NDZ_SERVER_SEND); /* FEATURES first */
	assert_true(b->control);
	assert_int_equal(ndz_server_plan(s, 7 * MS, b), NDZ_SERVER_LOAD);
	assert_int_equal(b->chunk, 2);
	ndz_server_free(s);
	free(b);
}

/* A chunk that changed or shrank in the file is refused with a message that says so. */
static void test_chunk_check(void **state)
{
	struct ndz_server_opts o = opts(0, 0);
	struct ndz_server *s;
	struct ndz_error e = { 0 };
	uint8_t *c;

	(void)state;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	c = ndz_server_chunk_buf(s);
	memcpy(c, image + NDZ_CHUNK_SIZE, NDZ_CHUNK_SIZE);
	assert_int_equal(ndz_server_check_chunk(s, 1, 0, &e), 0);
	assert_int_equal(ndz_server_check_chunk(s, 2, 0, &e), NDZ_EMISMATCH); /* its place */
	assert_non_null(strstr(ndz_error_msg(&e), "chunk 2"));
	assert_non_null(strstr(ndz_error_msg(&e), "(the file changed while served)"));
	ndz_error_clear(&e);
	c[NDZ_HDR_SIZE + 10] ^= 1;
	assert_int_equal(ndz_server_check_chunk(s, 1, 0, &e), NDZ_EDATACRC);
	ndz_error_clear(&e);
	assert_int_equal(ndz_server_check_chunk(s, 1, NDZ_ESHORTREAD, &e), NDZ_ESHORTREAD);
	assert_non_null(strstr(ndz_error_msg(&e), "(the file shrank while served)"));
	ndz_server_free(s);
}

/* A new rate: announced, paced at, and the rate controller ends. */
static void test_set_rate(void **state)
{
	struct ndz_server_opts o = opts(0, 1);
	struct ndz_server *s;
	struct ndz_server_batch *b = malloc(sizeof(*b));
	struct ndz_server_reply rp;
	struct ndz_error e = { 0 };
	struct ndz_adapt_step step;
	struct ndz_pkt p;
	uint64_t now = 0, waited = 0;

	(void)state;
	assert_non_null(b);
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	assert_int_equal(ndz_server_rate(s), 50000000);                 /* auto starts here */
	assert_int_equal(ndz_server_set_rate(s, 7999, 0, &e), NDZ_EINVAL);
	assert_non_null(strstr(ndz_error_msg(&e), "test\"img"));
	assert_int_equal(ndz_server_set_rate(s, 1000000, 0, NULL), 0);
	assert_int_equal(ndz_server_rate(s), 1000000);
	assert_int_equal(ndz_server_rate_step(s, &step), 0);
	ndz_server_announce(s, &rp);
	assert_int_equal(rp.count, 1);                                  /* no repairs: no FEATURES */
	assert_int_equal(ndz_pkt_decode(rp.bufs[0], rp.lens[0], &p, NULL), 0);
	assert_int_equal(p.info.rate_bps, 1000000);
	assert_int_equal(ndz_server_info(s)->rate_bps, 1000000);
	/* a whole chunk at 1 Mbit/s: once the bucket is spent, batches wait */
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_REQUEST;
	p.client_id = 9;
	p.tag = ndz_image_tag(uuid);
	p.count = NDZ_BLOCKS_PER_CHUNK;
	assert_int_equal(feed_pkt(s, &p), 2);
	for (int k = 0; k < 20; k++) {
		enum ndz_server_step st = ndz_server_plan(s, now, b);

		if (st == NDZ_SERVER_LOAD) {
			memcpy(ndz_server_chunk_buf(s), image, NDZ_CHUNK_SIZE);
			assert_int_equal(ndz_server_check_chunk(s, 0, 0, NULL), 0);
			continue;
		}
		assert_int_equal(st, NDZ_SERVER_SEND);
		now += b->delay_ns;
		waited += b->delay_ns;
		ndz_server_build(s, b);
		ndz_server_sent(s, b, now);
	}
	assert_true(waited > 0);
	ndz_server_free(s);
	free(b);
}

/* The manifest is served as the chunks after the image's, from the server's copy. */
static void test_manifest(void **state)
{
	struct ndz_server_opts o = opts(0, 0);
	struct ndz_server *s;
	struct ndz_server_batch *b = malloc(sizeof(*b));
	size_t mlen = NDZ_CHUNK_SIZE + 5000;
	uint8_t *m = malloc(mlen);
	struct ndz_pkt p;

	(void)state;
	assert_non_null(b);
	assert_non_null(m);
	for (size_t i = 0; i < mlen; i++)
		m[i] = (uint8_t)(i * 7);
	o.manifest = m;
	o.manifest_len = mlen;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	free(m);                                                        /* copied */
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_REQUEST;
	p.client_id = 9;
	p.tag = ndz_image_tag(uuid);
	p.chunk = CHUNKS + 1;
	p.block = 4;
	p.count = 1;
	assert_int_equal(feed_pkt(s, &p), 2);
	p.chunk = CHUNKS + 2;
	assert_int_equal(feed_pkt(s, &p), 0);                           /* past the manifest */
	assert_int_equal(ndz_server_plan(s, MS, b), NDZ_SERVER_SEND);  /* no LOAD */
	assert_int_equal(b->count, 1);
	ndz_server_build(s, b);
	assert_int_equal(ndz_pkt_decode(b->bufs[0], b->lens[0], &p, NULL), 0);
	assert_int_equal(p.chunk, CHUNKS + 1);
	assert_int_equal(p.block, 4);
	for (size_t i = 0; i < NDZ_BLOCK_SIZE; i++) {
		size_t at = NDZ_CHUNK_SIZE + 4 * NDZ_BLOCK_SIZE + i;

		assert_int_equal(p.data[i], at < mlen ? (uint8_t)(at * 7) : 0);
	}
	ndz_server_free(s);
	free(b);
}

/* A packet from client id at addr (network order) at now. */
static int feed_at(struct ndz_server *s, struct ndz_pkt *p, uint32_t id, uint32_t addr,
		   uint64_t now)
{
	uint8_t buf[NDZ_PKT_MAX];
	int len;

	p->client_id = id;
	if (p->type != NDZ_PKT_JOIN)
		p->tag = ndz_image_tag(uuid);
	len = ndz_pkt_encode(p, buf, sizeof(buf), NULL);
	assert_true(len > 0);
	return ndz_server_packet(s, buf, (size_t)len, addr, now, NULL, NULL);
}

/* ndz_server_plan, the chunk loaded from the image when it asks (LOAD) */
static enum ndz_server_step plan_loaded(struct ndz_server *s, uint64_t now,
					struct ndz_server_batch *b)
{
	enum ndz_server_step st;

	while ((st = ndz_server_plan(s, now, b)) == NDZ_SERVER_LOAD) {
		memcpy(ndz_server_chunk_buf(s), image + (size_t)b->chunk * NDZ_CHUNK_SIZE,
		       NDZ_CHUNK_SIZE);
		assert_int_equal(ndz_server_check_chunk(s, b->chunk, 0, NULL), 0);
	}
	return st;
}

/*
 * The gather: the first request holds the sending gather_ms, telling the time left;
 * requests in it join the pass; once sending, the next request goes out at once, and
 * one after a quiet spell (NDZ_SERVER_QUIET_MS without sending) gathers again, until
 * every client the server knows has asked (at once when it is the only one).
 */
static void test_gather(void **state)
{
	struct ndz_server_opts o = opts(0, 0);
	struct ndz_server *s;
	struct ndz_server_batch *b = malloc(sizeof(*b));
	struct ndz_server_stats st;
	struct ndz_pkt p;
	uint64_t quiet;

	(void)state;
	assert_non_null(b);
	o.gather_ms = 100;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_REQUEST;
	p.client_id = 9;
	p.tag = ndz_image_tag(uuid);
	p.chunk = 0;
	p.block = 0;
	p.count = 4;
	assert_int_equal(feed_pkt(s, &p), 2);
	assert_int_equal(plan_loaded(s, 10 * MS, b), NDZ_SERVER_WAIT);
	assert_int_equal(b->delay_ns, 100 * MS);
	p.client_id = 10;                      /* a client 60 ms later: the same pass */
	p.block = 4;
	assert_int_equal(feed_pkt(s, &p), 1);  /* joined to the queued one: no wake */
	assert_int_equal(plan_loaded(s, 70 * MS, b), NDZ_SERVER_WAIT);
	assert_int_equal(b->delay_ns, 40 * MS);
	assert_int_equal(plan_loaded(s, 110 * MS, b), NDZ_SERVER_SEND);
	assert_int_equal(b->count, 8);         /* both requests' blocks, in one pass */
	assert_int_equal(b->items[0].block, 0);
	assert_int_equal(b->items[7].block, 7);
	ndz_server_build(s, b);
	ndz_server_sent(s, b, 110 * MS);
	assert_int_equal(plan_loaded(s, 111 * MS, b), NDZ_SERVER_WAIT);
	/* 0.4 s later, not quiet long enough: at once */
	p.block = 8;
	assert_int_equal(feed_pkt(s, &p), 2);
	assert_int_equal(plan_loaded(s, 510 * MS, b), NDZ_SERVER_SEND);
	ndz_server_build(s, b);
	ndz_server_sent(s, b, 510 * MS);
	assert_int_equal(plan_loaded(s, 511 * MS, b), NDZ_SERVER_WAIT);
	/* quiet from 511 ms: a request after NDZ_SERVER_QUIET_MS gathers again, here
	 * for client 9 (10 asked, 9 not yet) ... */
	quiet = 511 * MS + NDZ_SERVER_QUIET_MS * MS;
	p.block = 12;
	assert_int_equal(feed_at(s, &p, p.client_id, 0x0100007fu, quiet), 2);
	assert_int_equal(plan_loaded(s, quiet, b), NDZ_SERVER_WAIT);
	assert_int_equal(b->delay_ns, 100 * MS);
	assert_int_equal(plan_loaded(s, quiet + 100 * MS, b), NDZ_SERVER_SEND);
	assert_int_equal(b->items[0].block, 12);
	ndz_server_build(s, b);
	ndz_server_sent(s, b, quiet + 100 * MS);
	assert_int_equal(plan_loaded(s, quiet + 100 * MS, b), NDZ_SERVER_WAIT);
	/* ... and ends as soon as both asked */
	quiet += 100 * MS + NDZ_SERVER_QUIET_MS * MS;
	p.block = 16;
	assert_int_equal(feed_at(s, &p, p.client_id, 0x0100007fu, quiet), 2);
	assert_int_equal(plan_loaded(s, quiet, b), NDZ_SERVER_WAIT);
	p.client_id = 9;
	p.block = 20;
	assert_int_equal(feed_at(s, &p, p.client_id, 0x0100007fu, quiet + 10 * MS), 1);
	assert_int_equal(plan_loaded(s, quiet + 10 * MS, b), NDZ_SERVER_SEND);
	assert_int_equal(b->count, 8);
	ndz_server_build(s, b);
	ndz_server_sent(s, b, quiet + 10 * MS);
	assert_int_equal(plan_loaded(s, quiet + 10 * MS, b), NDZ_SERVER_WAIT);
	/* one client gone (LEAVE): the other alone holds nothing back */
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_LEAVE;
	p.client_id = 9;
	p.tag = ndz_image_tag(uuid);
	assert_int_equal(feed_at(s, &p, p.client_id, 0x0100007fu, quiet + 20 * MS), 1);
	quiet += 20 * MS + NDZ_SERVER_QUIET_MS * MS;
	p.type = NDZ_PKT_REQUEST;
	p.client_id = 10;
	p.chunk = 0;
	p.block = 24;
	p.count = 4;
	assert_int_equal(feed_at(s, &p, p.client_id, 0x0100007fu, quiet), 2);
	assert_int_equal(plan_loaded(s, quiet, b), NDZ_SERVER_SEND);
	ndz_server_get_stats(s, &st);
	assert_int_equal(st.gathers, 3);
	/* the quiet spells (0.399 + 0.5 + 0.5 s), not the holds: something was asked for */
	assert_true(st.seconds_empty > 1.398 && st.seconds_empty < 1.400);
	ndz_server_free(s);
	free(b);
}

/*
 * The manifest's and the index's chunks: a request for blocks of them never sent,
 * between passes, gathers too (every client asks for the rest of the index as it
 * reads its first block), until every client asked; blocks sent before do not.
 */
static void test_gather_meta(void **state)
{
	struct ndz_server_opts o = opts(0, 0);
	struct ndz_server *s;
	struct ndz_server_batch *b = malloc(sizeof(*b));
	struct ndz_server_stats st;
	struct ndz_pkt p;

	(void)state;
	assert_non_null(b);
	o.manifest = image;                    /* served from memory: no LOAD */
	o.manifest_len = NDZ_CHUNK_SIZE;
	o.gather_ms = 100;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_REQUEST;
	p.chunk = CHUNKS;
	p.block = 0;
	p.count = 1;
	/* both ask for its first block: the start's gather (in full: before the first
	 * send another client's JOIN may be on its way) */
	assert_int_equal(feed_at(s, &p, 9, 0x0100007fu, 1 * MS), 2);
	assert_int_equal(feed_at(s, &p, 10, 0x0100007fu, 2 * MS), 1);
	assert_int_equal(ndz_server_plan(s, 50 * MS, b), NDZ_SERVER_WAIT);
	assert_int_equal(ndz_server_plan(s, 150 * MS, b), NDZ_SERVER_SEND);
	assert_int_equal(b->count, 1);
	ndz_server_build(s, b);
	ndz_server_sent(s, b, 150 * MS);
	assert_int_equal(ndz_server_plan(s, 150 * MS, b), NDZ_SERVER_WAIT);
	/* 9 asks for the rest at once: held for 10, who asks 30 ms later: one pass */
	p.block = 1;
	p.count = 7;
	assert_int_equal(feed_at(s, &p, 9, 0x0100007fu, 160 * MS), 2);
	assert_int_equal(ndz_server_plan(s, 160 * MS, b), NDZ_SERVER_WAIT);
	assert_int_equal(b->delay_ns, 100 * MS);
	assert_int_equal(feed_at(s, &p, 10, 0x0100007fu, 190 * MS), 1);
	assert_int_equal(ndz_server_plan(s, 190 * MS, b), NDZ_SERVER_SEND);
	assert_int_equal(b->count, 7);
	ndz_server_build(s, b);
	ndz_server_sent(s, b, 190 * MS);
	assert_int_equal(ndz_server_plan(s, 190 * MS, b), NDZ_SERVER_WAIT);
	/* blocks sent before, asked for again (a late client): at once */
	assert_int_equal(feed_at(s, &p, 11, 0x0100007fu, 200 * MS), 2);
	assert_int_equal(ndz_server_plan(s, 200 * MS, b), NDZ_SERVER_SEND);
	ndz_server_get_stats(s, &st);
	assert_int_equal(st.gathers, 2);
	assert_int_equal(st.distinct_sent, 8);
	assert_int_equal(st.blocks_sent, 8);   /* the one just planned not sent yet */
	ndz_server_free(s);
	free(b);
}

/* One index-served block of chunk and block: its bytes in *p, or the plan's answer. */
static void index_block(struct ndz_server *s, struct ndz_server_batch *b, uint32_t chunk,
			unsigned block, struct ndz_pkt *p)
{
	memset(p, 0, sizeof(*p));
	p->type = NDZ_PKT_REQUEST;
	p->client_id = 9;
	p->tag = ndz_image_tag(uuid);
	p->chunk = chunk;
	p->block = (uint16_t)block;
	p->count = 1;
	assert_int_equal(feed_pkt(s, p), 2);
	assert_int_equal(ndz_server_plan(s, MS, b), NDZ_SERVER_SEND);  /* no LOAD */
	assert_int_equal(b->count, 1);
	ndz_server_build(s, b);
	assert_int_equal(ndz_pkt_decode(b->bufs[0], b->lens[0], p, NULL), 0);
	assert_int_equal(p->chunk, chunk);
	assert_int_equal(p->block, block);
}

/*
 * The content index is served from the chunk after the manifest's range (6 for an
 * image of 5 chunks), with or without a manifest; the range between is refused when
 * no manifest is served, and so is anything past the index.
 */
static void test_index(void **state)
{
	struct ndz_server_stats st;
	struct ndz_server *s;
	struct ndz_server_batch *b = malloc(sizeof(*b));
	size_t ilen = NDZ_CHUNK_SIZE + 3000;
	uint8_t *ix = malloc(ilen), m[300];
	struct ndz_pkt p;

	(void)state;
	assert_non_null(b);
	assert_non_null(ix);
	for (size_t i = 0; i < ilen; i++)
		ix[i] = (uint8_t)(i * 13 + 1);
	memset(m, 0x5a, sizeof(m));
	assert_int_equal(ndz_server_index_base(CHUNKS), CHUNKS + 1);
	for (int with_manifest = 0; with_manifest < 2; with_manifest++) {
		struct ndz_server_opts o = opts(0, 0);

		o.index = ix;
		o.index_len = ilen;
		if (with_manifest) {
			o.manifest = m;
			o.manifest_len = sizeof(m);
		}
		assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
		index_block(s, b, CHUNKS + 2, 2, &p);
		for (size_t i = 0; i < NDZ_BLOCK_SIZE; i++) {
			size_t at = NDZ_CHUNK_SIZE + 2 * NDZ_BLOCK_SIZE + i;

			assert_int_equal(p.data[i], at < ilen ? (uint8_t)(at * 13 + 1) : 0);
		}
		index_block(s, b, CHUNKS + 1, 0, &p);
		assert_memory_equal(p.data, ix, NDZ_BLOCK_SIZE);
		if (with_manifest) {
			index_block(s, b, CHUNKS, 0, &p);
			assert_memory_equal(p.data, m, sizeof(m));
		}
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_REQUEST;
		p.tag = ndz_image_tag(uuid);
		p.count = 1;
		p.chunk = CHUNKS;      /* the manifest's range: none served */
		assert_int_equal(feed_pkt(s, &p), with_manifest ? 2 : 0);
		p.chunk = CHUNKS + 3;  /* past the index */
		assert_int_equal(feed_pkt(s, &p), 0);
		ndz_server_get_stats(s, &st);
		assert_int_equal(st.bad_chunk, with_manifest ? 1 : 2);
		ndz_server_free(s);
	}
	free(ix);
	free(b);
}

/* IMAGE.index beside the image, read and checked: served; a file that is not: not. */
static void test_index_file(void **state)
{
	struct ndz_server_opts o = opts(0, 0);
	struct ndz_index ix = { 0 };
	struct ndz_error e = { 0 };
	char dir[] = "/tmp/test_server.XXXXXX", img[64], path[80];
	uint8_t *bytes;
	size_t len;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/disk.ndz", dir);
	snprintf(path, sizeof(path), "%s.index", img);
	assert_int_equal(ndz_server_index(img, NULL, &o, &e), 0);       /* none: fine */
	assert_null(o.index);
	assert_int_equal(ndz_index_init(&ix, uuid, CHUNKS, o.info.source_bytes, NULL), 0);
	assert_int_equal(ndz_index_encode(&ix, NULL, &bytes, &len, NULL), 0);
	assert_int_equal(ndz_index_save(path, bytes, len, NULL), 0);
	/* (the length a client learns from the first bytes, lib/trust/index.h) */
	assert_int_equal(ndz_index_size_from_header(bytes, 64), len);
	assert_int_equal(ndz_index_size_from_header(bytes, 63), 0);
	bytes[0] ^= 1;
	assert_int_equal(ndz_index_size_from_header(bytes, len), 0);
	bytes[0] ^= 1;
	assert_int_equal(ndz_server_index(img, NULL, &o, &e), 0);
	assert_int_equal(o.index_len, len);
	assert_memory_equal(o.index, bytes, len);
	free((void *)o.index);
	/* another image's index: not served, and a given one is an error */
	o.info.chunks = CHUNKS + 1;
	assert_int_equal(ndz_server_index(img, NULL, &o, &e), 1);
	assert_null(o.index);
	assert_int_equal(e.code, NDZ_EMISMATCH);
	assert_non_null(strstr(e.msg, path));
	ndz_error_clear(&e);
	assert_true(ndz_server_index(img, path, &o, &e) < 0);
	o.info.chunks = CHUNKS;
	assert_non_null(f = fopen(path, "w"));
	fputs("not an index", f);
	fclose(f);
	ndz_error_clear(&e);
	assert_int_equal(ndz_server_index(img, NULL, &o, &e), 1);
	assert_int_equal(e.code, NDZ_EINDEX);
	unlink(path);
	rmdir(dir);
	free(bytes);
	ndz_index_release(&ix);
}

/* The statistics as JSON: every field, the name escaped; a short buffer is an error. */
static void test_json(void **state)
{
	struct ndz_server_opts o = opts(0, 0);
	struct ndz_server *s;
	struct ndz_server_stats st;
	struct ndz_pkt p;
	struct ndz_error e = { 0 };
	char buf[2048];
	int n;

	(void)state;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_JOIN;
	p.client_id = 3;
	assert_int_equal(feed_pkt(s, &p), 1);
	assert_int_equal(feed(s, "x", 1), 0);
	ndz_server_get_stats(s, &st);
	n = ndz_server_stats_json(&st, ndz_server_name(s), buf, sizeof(buf), NULL);
	assert_true(n > 0);
	assert_int_equal((size_t)n, strlen(buf));
	assert_int_equal(buf[n - 1], '\n');
	assert_non_null(strstr(buf, "{\"image\": \"test\\\"img\", \"chunks\": 5, \"clients\": 1, "
				    "\"joins\": 1, \"leaves\": 0,"));
	assert_non_null(strstr(buf, "\"bad_packets\": 1,"));
	assert_non_null(strstr(buf, "\"auto_rate_bps\": 0,"));
	assert_non_null(strstr(buf, "\"bad_chunk\": 0}"));
	assert_int_equal(ndz_server_stats_json(&st, "x", buf, 40, &e), NDZ_ERANGE);
	assert_int_equal(e.code, NDZ_ERANGE);
	ndz_server_free(s);
}

static enum ndz_rx_state state_of(const struct ndz_server *s, uint32_t id, uint64_t now,
				  struct ndz_server_client *c)
{
	for (size_t i = 0; i < ndz_server_clients(s); i++) {
		assert_int_equal(ndz_server_client(s, i, c, NULL), 0);
		if (c->id == id)
			return ndz_server_client_state(s, c, now);
	}
	fail_msg("no client %u", id);
	return NDZ_RX_LOST;
}

/*
 * The client table: PROGRESS kept (and its rate), a LEAVE makes a client done or
 * failed, one silent past the lost timeout without a LEAVE is lost; the status JSON
 * counts each state, receivers only the active, and lists every client.
 */
/* A hold (the master sent a client) defers the idle end by a whole timeout; none once over. */
static void test_hold(void **state)
{
	struct ndz_server_opts o = opts(0, 0);
	struct ndz_server *s;

	(void)state;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	assert_false(ndz_server_idle(s, 9000 * MS));
	assert_int_equal(ndz_server_hold(s, 9000 * MS), 1);
	/* past the timeout from creation, within it from the hold */
	assert_false(ndz_server_idle(s, 11000 * MS));
	assert_false(ndz_server_idle(s, 19000 * MS));
	/* a hold that comes with an earlier clock does not move the idle clock back */
	assert_int_equal(ndz_server_hold(s, 1000 * MS), 1);
	assert_false(ndz_server_idle(s, 19000 * MS));
	assert_true(ndz_server_idle(s, 19001 * MS));
	/* once idle was decided: it stays so, and a hold is refused */
	assert_int_equal(ndz_server_hold(s, 19002 * MS), 0);
	assert_true(ndz_server_idle(s, 19003 * MS));
	ndz_server_free(s);
	/* with no idle timeout a hold is always taken and the session never idle */
	o.info.idle_timeout = 0;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	assert_int_equal(ndz_server_hold(s, 5 * MS), 1);
	assert_false(ndz_server_idle(s, 100000000 * MS));
	ndz_server_free(s);
}

static void test_clients(void **state)
{
	struct ndz_server_opts o = opts(0, 0);
	struct ndz_server *s;
	struct ndz_server_client c;
	struct ndz_pkt p;
	struct ndz_error e = { 0 };
	char buf[4096];
	int n;

	(void)state;
	o.lost_ms = 5000;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	for (uint32_t id = 1; id <= 4; id++) {
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_JOIN;
		assert_int_equal(feed_at(s, &p, id, htonl(0x0a000000u + id), 0), 1);
	}
	/* 1: progress twice, the rate from the second's difference */
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_PROGRESS;
	p.progress = (struct ndz_progress){ 1, CHUNKS, NDZ_CHUNK_SIZE, 1000 };
	assert_int_equal(feed_at(s, &p, 1, htonl(0x0a000001u), 1000 * MS), 1);
	p.progress = (struct ndz_progress){ 3, CHUNKS, 3 * NDZ_CHUNK_SIZE, 2000 };
	assert_int_equal(feed_at(s, &p, 1, htonl(0x0a000001u), 2000 * MS), 1);
	assert_int_equal(state_of(s, 1, 2000 * MS, &c), NDZ_RX_ACTIVE);
	assert_int_equal(c.progress.chunks_done, 3);
	assert_int_equal(c.progress.chunks_total, CHUNKS);
	assert_int_equal(c.progress.bytes_written, 3 * NDZ_CHUNK_SIZE);
	assert_int_equal(c.rate_Bps, 2 * NDZ_CHUNK_SIZE);
	/* another image's progress is not ours */
	p.tag = 0;
	{
		uint8_t b2[NDZ_PKT_MAX];
		int len = ndz_pkt_encode(&p, b2, sizeof(b2), NULL);

		assert_int_equal(ndz_server_packet(s, b2, (size_t)len, htonl(0x0a000001u),
						   2000 * MS, NULL, NULL), 0);
	}
	/* 2: done; 3: failed; a late PROGRESS after the LEAVE changes nothing */
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_LEAVE;
	p.leave.chunks_done = CHUNKS;
	p.leave.bytes_written = CHUNKS * NDZ_CHUNK_SIZE;
	assert_int_equal(feed_at(s, &p, 2, htonl(0x0a000002u), 3000 * MS), 1);
	p.leave.status = 1;
	p.leave.chunks_done = 1;
	assert_int_equal(feed_at(s, &p, 3, htonl(0x0a000003u), 3000 * MS), 1);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_PROGRESS;
	p.progress = (struct ndz_progress){ 0, CHUNKS, 0, 3000 };
	assert_int_equal(feed_at(s, &p, 2, htonl(0x0a000002u), 3100 * MS), 1);
	assert_int_equal(state_of(s, 2, 3100 * MS, &c), NDZ_RX_DONE);
	assert_int_equal(c.progress.chunks_done, CHUNKS);
	assert_int_equal(state_of(s, 3, 3100 * MS, &c), NDZ_RX_FAILED);
	/* 4 silent since 0: active until 5 s, then lost; 1 heard at 2 s stays active */
	assert_int_equal(state_of(s, 4, 5000 * MS, &c), NDZ_RX_ACTIVE);
	assert_int_equal(state_of(s, 4, 5001 * MS, &c), NDZ_RX_LOST);
	assert_int_equal(state_of(s, 1, 5001 * MS, &c), NDZ_RX_ACTIVE);
	/* done or failed clients are never lost */
	assert_int_equal(state_of(s, 2, 60000 * MS, &c), NDZ_RX_DONE);
	n = ndz_server_status_json(s, 5001 * MS, buf, sizeof(buf), &e);
	assert_true(n > 0);
	assert_int_equal((size_t)n, strlen(buf));
	assert_int_equal(buf[n - 1], '\n');
	assert_non_null(strstr(buf, "{\"image\": \"test\\\"img\", \"chunks\": 5, \"clients\": 4, "));
	assert_non_null(strstr(buf, "\"receivers\": 1, \"active\": 1, \"done\": 1, "
				    "\"failed\": 1, \"lost\": 1, \"client_list\": [{\"id\": 2, "));
	assert_non_null(strstr(buf, "{\"id\": 1, \"address\": \"10.0.0.1\", \"state\": "
				    "\"active\", \"chunks_done\": 3, \"chunks_total\": 5, "
				    "\"bytes_written\": 3145728, \"write_bps\": 16777216, "
				    "\"age_s\": 3.0}"));
	assert_non_null(strstr(buf, "\"id\": 4, \"address\": \"10.0.0.4\", \"state\": \"lost\""));
	assert_non_null(strstr(buf, "\"state\": \"failed\""));
	assert_non_null(strstr(buf, "], \"clients_listed\": 4}\n"));
	/* too small for all: fewer listed, still whole JSON */
	n = ndz_server_status_json(s, 5001 * MS, buf, 1000, NULL);
	assert_true(n > 0 && n < 1000);
	assert_non_null(strstr(buf, "\"clients_listed\": "));
	assert_null(strstr(buf, "\"clients_listed\": 4}"));
	assert_int_equal(ndz_server_status_json(s, 0, buf, 100, &e), NDZ_ERANGE);
	ndz_server_free(s);
}

/* Options a session cannot run with are refused, saying why. */
static void test_create_errors(void **state)
{
	struct ndz_server_opts o = opts(0, 0);
	struct ndz_server *s = (struct ndz_server *)&o;
	struct ndz_error e = { 0 };

	(void)state;
	o.info.chunks = 0;
	assert_int_equal(ndz_server_create(&o, 0, &s, &e), NDZ_EINVAL);
	assert_null(s);
	assert_non_null(strstr(ndz_error_msg(&e), "no chunks"));
	o = opts(0, 0);
	o.rate_bps = 100;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), NDZ_EINVAL);
	o = opts(0, 1);
	o.burst_pkts = 8;
	o.gap_us = 1000;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), NDZ_EINVAL);
	o.auto_rate = 0;
	assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
	/* 8 packets of 1072 bytes each millisecond */
	assert_int_equal(ndz_server_rate(s), 8ull * 1072 * 8 * 1000);
	ndz_server_free(s);
	ndz_server_free(NULL);
}

/*
 * Range repairs: a server with FEATURES bit 5 announces it, answers a RANGE_RREQUEST
 * with that many RANGE_REPAIRs of the range (1048 bytes each, indexes 0, 1, 2, the
 * bytes lib/fec computes over the chunk's blocks of the range), counts them; a
 * request past the image is refused; a server without bit 5 does not announce it
 * and refuses the request as malformed (as an older server does).
 */
static void test_range(void **state)
{
	struct ndz_server_opts o = opts(NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE | NDZ_FEAT_RANGE, 0);
	struct ndz_server_batch *b = malloc(sizeof(*b));
	struct ndz_server_reply rp;
	struct ndz_server_stats st;
	struct ndz_server *s;
	struct ndz_fec *fec = NULL;
	struct ndz_pkt p, q;
	uint8_t want[NDZ_BLOCK_SIZE];
	unsigned got = 0;

	(void)state;
	assert_non_null(b);
	assert_int_equal(ndz_fec_create(&fec, NULL), 0);
	for (int with = 1; with >= 0; with--) {
		if (!with)
			o.repair = NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE;
		assert_int_equal(ndz_server_create(&o, 0, &s, NULL), 0);
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_JOIN;
		p.client_id = 9;
		{
			uint8_t buf[NDZ_PKT_MAX];
			int len = ndz_pkt_encode(&p, buf, sizeof(buf), NULL);

			assert_int_equal(ndz_server_packet(s, buf, (size_t)len, 1, MS, &rp, NULL), 1);
		}
		assert_int_equal(rp.count, 2);
		assert_int_equal(ndz_pkt_decode(rp.bufs[1], rp.lens[1], &q, NULL), 0);
		assert_int_equal(q.type, NDZ_PKT_FEATURES);
		assert_int_equal((q.features & NDZ_FEAT_RANGE) != 0, with);
		memset(&p, 0, sizeof(p));
		p.type = NDZ_PKT_RANGE_RREQUEST;
		p.client_id = 9;
		p.tag = ndz_image_tag(uuid);
		p.chunk = CHUNKS;                              /* past the image */
		p.block = 100;
		p.count = 10;
		p.wanted = 3;
		assert_int_equal(feed_pkt(s, &p), 0);
		p.chunk = 1;
		assert_int_equal(feed_pkt(s, &p), with ? 2 : 0);
		ndz_server_get_stats(s, &st);
		if (!with) {
			assert_int_equal(st.bad_packets, 2);     /* both: malformed to it */
			assert_int_equal(st.range_requests, 0);
			assert_int_equal(ndz_server_plan(s, 2 * MS, b), NDZ_SERVER_WAIT);
			ndz_server_free(s);
			continue;
		}
		assert_int_equal(st.bad_chunk, 1);
		assert_int_equal(st.range_requests, 1);
		while (got < 3) {
			next_batch(s, b, 2 * MS);
			for (unsigned d = 0; d < b->ndgrams; d++, got++) {
				assert_int_equal(b->lens[d], NDZ_PKT_RANGE_REPAIR_LEN);
				assert_int_equal(ndz_pkt_decode(b->bufs[d], b->lens[d], &q, NULL), 0);
				assert_int_equal(q.type, NDZ_PKT_RANGE_REPAIR);
				assert_int_equal(q.chunk, 1);
				assert_int_equal(q.block, 100);
				assert_int_equal(q.count, 10);
				assert_int_equal(q.index, got);
				assert_int_equal(ndz_fec_rencode(fec, image + NDZ_CHUNK_SIZE, 100, 10,
								 got, want, NULL), 0);
				assert_memory_equal(q.data, want, NDZ_BLOCK_SIZE);
			}
		}
		assert_int_equal(got, 3);
		assert_int_equal(ndz_server_plan(s, 3 * MS, b), NDZ_SERVER_WAIT);
		ndz_server_get_stats(s, &st);
		assert_int_equal(st.range_sent, 3);
		assert_int_equal(st.repairs_sent, 0);
		assert_int_equal(st.datagrams_sent, 3);
		ndz_server_free(s);
	}
	ndz_fec_free(fec);
	free(b);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_clean),
		cmocka_unit_test(test_range),
		cmocka_unit_test(test_blocks),
		cmocka_unit_test(test_span),
		cmocka_unit_test(test_repairs),
		cmocka_unit_test(test_loss_repairs),
		cmocka_unit_test(test_loss_no_repair),
		cmocka_unit_test(test_auto_rate),
		cmocka_unit_test(test_admission),
		cmocka_unit_test(test_chunk_check),
		cmocka_unit_test(test_set_rate),
		cmocka_unit_test(test_manifest),
		cmocka_unit_test(test_index),
		cmocka_unit_test(test_index_file),
		cmocka_unit_test(test_json),
		cmocka_unit_test(test_gather),
		cmocka_unit_test(test_gather_meta),
		cmocka_unit_test(test_clients),
		cmocka_unit_test(test_hold),
		cmocka_unit_test(test_create_errors),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
