/*
 * lib/mcast/client: the receiving session on a simulated clock, fed packets built
 * here and watched through the datagrams it sends: joining (back-off, others'
 * answers, a forged JOIN_REPLY of another UUID, implausible announcements, -T),
 * the manifest's bytes, loss and repair, the -T bounds while receiving, leaving;
 * the content index's bytes and chunks the target holds (seeded restores).
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
#include "core/format.h"
#include "mcast/client.h"
#include "mcast/fec.h"
#include "mcast/proto.h"

#define MS 1000000ull
#define BLOCKS NDZ_BLOCKS_PER_CHUNK
#define SERVER 0x0100000au             /* 1.0.0.10 in network order on little-endian */
#define OTHER 0x0200000au
#define TAG 0x7a6u
#define ID 42u
#define MAXSENT 16384

struct t {
	struct ndz_client *c;
	struct ndz_client_opts o;
	struct ndz_pkt sent[MAXSENT];  /* what the client sent, decoded */
	unsigned nsent;
	struct ndz_pkt progress[64];   /* the PROGRESS reports, apart */
	unsigned nprogress;
	int notes[16];                 /* how many of each NOTE */
	struct ndz_client_note caps;   /* the last NOTE_CAPS */
	int fail_send;                 /* the next sends fail with this errno */
	uint8_t uuid[16];
	uint8_t data[BLOCKS][NDZ_BLOCK_SIZE];
};

static int t_send(void *ctx, const uint8_t *d, size_t len)
{
	struct t *t = ctx;

	if (t->fail_send)
		return t->fail_send;
	assert_true(t->nsent < MAXSENT);
	assert_int_equal(ndz_pkt_decode(d, len, &t->sent[t->nsent], NULL), 0);
	t->sent[t->nsent].data = NULL;
	if (t->sent[t->nsent].type == NDZ_PKT_PROGRESS) {
		if (t->nprogress < 64)
			t->progress[t->nprogress] = t->sent[t->nsent];
		t->nprogress++;
		return 0;
	}
	t->nsent++;
	return 0;
}

static void t_note(void *ctx, const struct ndz_client_note *n)
{
	struct t *t = ctx;

	assert_true(n->what >= 0 && n->what < 16);
	t->notes[n->what]++;
	if (n->what == NDZ_CLIENT_NOTE_CAPS)
		t->caps = *n;
}

/* How many datagrams of type were sent since from. */
static unsigned count(const struct t *t, unsigned from, int type)
{
	unsigned n = 0;

	for (unsigned i = from; i < t->nsent; i++)
		n += t->sent[i].type == type;
	return n;
}

static struct t *setup(unsigned give_up_s)
{
	struct t *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	t->o.id = ID;
	t->o.room = UINT64_MAX;
	t->o.give_up_s = give_up_s;
	t->o.slots = 8;
	t->o.request_ahead = 2;
	t->o.redelay_ns = 1000 * MS;
	t->o.seed = 7;
	t->o.group = "239.1.2.3";
	t->o.port = 5000;
	t->o.target = "disk.img";
	t->o.send = t_send;
	t->o.note = t_note;
	t->o.ctx = t;
	memset(t->uuid, 0xab, sizeof(t->uuid));
	for (unsigned b = 0; b < BLOCKS; b++)
		for (unsigned i = 0; i < NDZ_BLOCK_SIZE; i++)
			t->data[b][i] = (uint8_t)(b * 31 + i);
	return t;
}

static void create(struct t *t, uint64_t now)
{
	assert_int_equal(ndz_client_create(&t->o, now, &t->c, NULL), 0);
}

static void teardown_t(struct t *t)
{
	ndz_client_free(t->c);
	free(t);
}

static void reply(struct t *t, uint32_t id, const uint8_t *uuid, uint32_t chunks,
		  uint64_t source_bytes, uint32_t from, uint64_t now)
{
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_JOIN_REPLY;
	p.client_id = id;
	p.tag = TAG;
	memcpy(p.info.uuid, uuid, 16);
	p.info.chunks = chunks;
	p.info.block_size = NDZ_BLOCK_SIZE;
	p.info.blocks_per_chunk = BLOCKS;
	p.info.image_bytes = (uint64_t)chunks * NDZ_CHUNK_SIZE;
	p.info.source_bytes = source_bytes;
	ndz_client_input_pkt(t->c, &p, from, now);
}

/* Join an image of chunks at now. */
static void join(struct t *t, uint32_t chunks, uint64_t now)
{
	create(t, now);
	assert_int_equal(ndz_client_tick(t->c, now), NDZ_CLIENT_JOINING);
	reply(t, ID, t->uuid, chunks, (uint64_t)chunks * NDZ_CHUNK_SIZE, SERVER, now);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_JOINED);
}

/* A block (data from t->data, or none) of chunk from the server; returns its input's. */
static int block(struct t *t, uint32_t chunk, unsigned b, uint64_t now)
{
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_BLOCK;
	p.tag = TAG;
	p.chunk = chunk;
	p.block = (uint16_t)b;
	p.data = t->o.no_store ? NULL : t->data[b];
	return ndz_client_input_pkt(t->c, &p, SERVER, now);
}

/* JOINs back off from 0.5 s to 2 s; without an answer the session fails at -T. */
static void test_join_backoff_and_give_up(void **state)
{
	struct t *t = setup(4);
	uint64_t now;

	(void)state;
	create(t, 0);
	for (now = 0; now <= 4000 * MS; now += 10 * MS)
		if (ndz_client_tick(t->c, now) == NDZ_CLIENT_FAILED)
			break;
	assert_int_equal(now, 4000 * MS);
	/* at 0, 0.5, 1.5 and 3.5 s */
	assert_int_equal(count(t, 0, NDZ_PKT_JOIN), 4);
	assert_int_equal(t->sent[0].client_id, ID);
	assert_int_equal(t->notes[NDZ_CLIENT_NOTE_JOIN], 4);
	assert_int_equal(ndz_client_error(t->c)->code, NDZ_ETIMEDOUT);
	assert_string_equal(ndz_client_error(t->c)->msg,
			    "no server answered on 239.1.2.3 port 5000 within 4 s");
	teardown_t(t);
}

/* An answer to another client means a server is there: ask again at once (50 ms). */
static void test_join_others_answer(void **state)
{
	struct t *t = setup(30);
	struct ndz_client_stats st;

	(void)state;
	create(t, 0);
	ndz_client_tick(t->c, 0);
	reply(t, ID + 1, t->uuid, 4, 4 * NDZ_CHUNK_SIZE, SERVER, 10 * MS);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_JOINING);
	assert_int_equal(t->notes[NDZ_CLIENT_NOTE_OTHERS], 1);
	ndz_client_tick(t->c, 40 * MS);
	assert_int_equal(count(t, 0, NDZ_PKT_JOIN), 1);
	ndz_client_tick(t->c, 50 * MS);
	assert_int_equal(count(t, 0, NDZ_PKT_JOIN), 2);
	reply(t, ID, t->uuid, 4, 4 * NDZ_CHUNK_SIZE, SERVER, 60 * MS);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_JOINED);
	assert_int_equal(ndz_client_info(t->c)->chunks, 4);
	assert_int_equal(ndz_client_server(t->c), SERVER);
	assert_string_equal(ndz_client_source(t->c), "server 10.0.0.1");
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.joins, 2);
	teardown_t(t);
}

/*
 * A client sent by a master (want_uuid) drops JOIN_REPLYs of another UUID, even
 * answering its own JOIN; with -S, those from another address.
 */
static void test_join_forged_uuid_dropped(void **state)
{
	struct t *t = setup(30);
	struct ndz_client_stats st;
	uint8_t other[16];

	(void)state;
	memset(other, 0xcd, sizeof(other));
	t->o.want_uuid = t->uuid;
	t->o.server = SERVER;
	create(t, 0);
	ndz_client_tick(t->c, 0);
	reply(t, ID, other, 4, 4 * NDZ_CHUNK_SIZE, SERVER, 1 * MS);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_JOINING);
	reply(t, ID, t->uuid, 4, 4 * NDZ_CHUNK_SIZE, OTHER, 2 * MS);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_JOINING);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.foreign, 2);
	reply(t, ID, t->uuid, 4, 4 * NDZ_CHUNK_SIZE, SERVER, 3 * MS);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_JOINED);
	assert_memory_equal(ndz_client_info(t->c)->uuid, t->uuid, 16);
	teardown_t(t);
}

/* Announcements we cannot take are ignored, and the failure at -T says why. */
static void test_join_implausible(void **state)
{
	struct t *t = setup(2);

	(void)state;
	create(t, 0);
	ndz_client_tick(t->c, 0);
	reply(t, ID, t->uuid, 100000, 512, OTHER, 1 * MS);      /* more chunks than sectors */
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_JOINING);
	assert_int_equal(t->notes[NDZ_CLIENT_NOTE_IGNORED], 1);
	assert_int_equal(ndz_client_tick(t->c, 2000 * MS), NDZ_CLIENT_FAILED);
	assert_non_null(strstr(ndz_client_error(t->c)->msg, "(1 announcements ignored, the "
			       "last from 10.0.0.2: 100000 chunks for 512 bytes"));
	teardown_t(t);

	t = setup(2);
	t->o.room = 1000;
	create(t, 0);
	ndz_client_tick(t->c, 0);
	reply(t, ID, t->uuid, 1, 4096, SERVER, 1 * MS);
	assert_int_equal(ndz_client_tick(t->c, 2000 * MS), NDZ_CLIENT_FAILED);
	assert_int_equal(ndz_client_error(t->c)->code, NDZ_ETOOSMALL);
	assert_non_null(strstr(ndz_client_error(t->c)->msg, "disk.img: "));
	assert_non_null(strstr(ndz_client_error(t->c)->msg, "(1000 bytes, the image needs "
			       "4096), announced by server 10.0.0.1"));
	teardown_t(t);
}

/* A JOIN that cannot be sent fails the session, saying where to. */
static void test_join_send_fails(void **state)
{
	struct t *t = setup(30);

	(void)state;
	t->fail_send = 101;
	create(t, 0);
	assert_int_equal(ndz_client_tick(t->c, 0), NDZ_CLIENT_FAILED);
	assert_int_equal(ndz_client_error(t->c)->code, NDZ_ENET);
	assert_int_equal(ndz_client_error(t->c)->sys, 101);
	assert_non_null(strstr(ndz_client_error(t->c)->msg, "send to 239.1.2.3 port 5000"));
	teardown_t(t);
}

/* The manifest's bytes follow the image's chunks; forged ones are fetched again. */
static void test_manifest(void **state)
{
	struct t *t = setup(30);
	size_t len = NDZ_CHUNK_SIZE + 100;
	const uint8_t *bytes;
	struct ndz_client_stats st;
	unsigned from;

	(void)state;
	join(t, 3, 0);
	from = t->nsent;
	assert_int_equal(ndz_client_fetch_manifest(t->c, len, 0, NULL), 0);
	assert_int_equal(ndz_client_tick(t->c, 0), NDZ_CLIENT_MANIFEST);
	/* both of its chunks (3 and 4) asked for, nothing of the image */
	assert_int_equal(count(t, from, NDZ_PKT_REQUEST), 2);
	for (unsigned i = from; i < t->nsent; i++)
		assert_true(t->sent[i].chunk == 3 || t->sent[i].chunk == 4);
	for (int round = 0; round < 2; round++) {
		for (uint32_t ch = 3; ch < 5; ch++)
			for (unsigned b = 0; b < BLOCKS; b++)
				block(t, ch, b, 10 * MS);
		assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_MANIFEST_READY);
		bytes = ndz_client_manifest(t->c, &len);
		assert_int_equal(len, NDZ_CHUNK_SIZE + 100);
		assert_memory_equal(bytes + NDZ_CHUNK_SIZE, t->data[0], 100);
		assert_int_equal(ndz_client_manifest_verdict(t->c, round == 1, 20 * MS, NULL), 0);
		assert_int_equal(ndz_client_state(t->c),
				 round == 0 ? NDZ_CLIENT_MANIFEST : NDZ_CLIENT_JOINED);
	}
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.forged, 1);
	assert_int_equal(ndz_client_manifest_verdict(t->c, 1, 20 * MS, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_client_start(t->c, 30 * MS, NULL), 0);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_RECEIVING);
	teardown_t(t);
}

/* A server that sends no manifest: the session gives up after 10 s of it. */
static void test_manifest_none(void **state)
{
	struct t *t = setup(30);
	struct ndz_error e = { 0 };
	uint64_t now;

	(void)state;
	join(t, 3, 0);
	assert_int_equal(ndz_client_fetch_manifest(t->c, 0, 0, &e), NDZ_EINVAL);
	assert_int_equal(e.code, NDZ_EINVAL);
	assert_int_equal(ndz_client_fetch_manifest(t->c, 100, 0, NULL), 0);
	for (now = 0; ndz_client_tick(t->c, now) == NDZ_CLIENT_MANIFEST; now += 20 * MS)
		;
	assert_true(now > 10000 * MS && now <= 10020 * MS);
	assert_non_null(strstr(ndz_client_error(t->c)->msg,
			       "server 10.0.0.1 sent no signed manifest of the image within 10 s"));
	teardown_t(t);
}

/* A forged manifest once -T is over since its fetch began: no fetching it again. */
static void test_manifest_forged_too_late(void **state)
{
	struct t *t = setup(1);
	struct ndz_error e = { 0 };

	(void)state;
	join(t, 1, 0);
	assert_int_equal(ndz_client_fetch_manifest(t->c, 100, 0, NULL), 0);
	for (unsigned b = 0; b < BLOCKS; b++)
		block(t, 1, b, 10 * MS);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_MANIFEST_READY);
	assert_int_equal(ndz_client_manifest_verdict(t->c, 0, 1000 * MS, &e), NDZ_ETIMEDOUT);
	assert_int_equal(e.code, NDZ_ETIMEDOUT);
	assert_non_null(strstr(e.msg, "the manifest from server 10.0.0.1: forged"));
	teardown_t(t);
}

/*
 * Loss: the blocks a chunk lacks are asked for (PREQUEST) once the server moved
 * on, and the chunk comes out whole, as sent; checked and written, the session is
 * complete; LEAVE reports it.
 */
static void test_loss_and_complete(void **state)
{
	struct t *t = setup(30);
	struct ndz_client_stats st;
	uint8_t *buf;
	uint32_t chunk;
	unsigned from;
	int slot, ready = 0;

	(void)state;
	join(t, 2, 0);
	from = t->nsent;
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	assert_int_equal(count(t, from, NDZ_PKT_REQUEST), 2);
	for (unsigned b = 0; b < BLOCKS; b++)
		if (b != 5 && b != 700)
			ready += block(t, 0, b, 1 * MS);
	for (unsigned b = 0; b < BLOCKS; b++)
		ready += block(t, 1, b, 2 * MS);
	assert_int_equal(ready, 1);
	from = t->nsent;
	ndz_client_tick(t->c, 30 * MS);
	assert_int_equal(count(t, from, NDZ_PKT_PREQUEST), 1);
	assert_int_equal(t->sent[from].chunk, 0);
	assert_int_equal(ndz_bit_count(t->sent[from].bitmap), 2);
	assert_true(ndz_bit_test(t->sent[from].bitmap, 5));
	assert_true(ndz_bit_test(t->sent[from].bitmap, 700));
	/* chunk 1 is ready, checked and written */
	slot = ndz_client_ready(t->c, &chunk, &buf);
	assert_true(slot >= 0);
	assert_int_equal(chunk, 1);
	assert_memory_equal(buf + 3 * NDZ_BLOCK_SIZE, t->data[3], NDZ_BLOCK_SIZE);
	assert_int_equal(ndz_client_ready(t->c, &chunk, &buf), -1);
	ndz_client_verdict(t->c, slot, NDZ_VERDICT_ACCEPT, 0, 1, 31 * MS);
	ndz_client_written(t->c, slot);
	assert_int_equal(block(t, 0, 5, 32 * MS), 0);
	assert_int_equal(block(t, 0, 700, 33 * MS), 1);
	slot = ndz_client_ready(t->c, &chunk, &buf);
	assert_int_equal(chunk, 0);
	for (unsigned b = 0; b < BLOCKS; b++)
		assert_memory_equal(buf + (size_t)b * NDZ_BLOCK_SIZE, t->data[b], NDZ_BLOCK_SIZE);
	ndz_client_verdict(t->c, slot, NDZ_VERDICT_ACCEPT, 0, 1, 34 * MS);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_COMPLETE);
	ndz_client_written(t->c, slot);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.fetch.done, 2);
	assert_int_equal(st.fetch.blocks, 2 * BLOCKS);
	from = t->nsent;
	assert_int_equal(ndz_client_leave(t->c, 0, 1500 * MS, NULL), 0);
	assert_int_equal(t->sent[from].type, NDZ_PKT_LEAVE);
	assert_int_equal(t->sent[from].client_id, ID);
	assert_int_equal(t->sent[from].leave.status, 0);
	assert_int_equal(t->sent[from].leave.chunks_done, 2);
	assert_int_equal(t->sent[from].leave.elapsed_ms, 1500);
	assert_int_equal(t->sent[from].leave.requests_sent, st.requests);
	teardown_t(t);
}

/*
 * Repair: with FEATURES, a chunk short of a block asks for a repair of its stripe
 * (RREQUEST), and one repair makes it whole. Another image's blocks are foreign.
 */
static void test_repair(void **state)
{
	struct t *t = setup(30);
	struct ndz_client_stats st;
	struct ndz_pkt p;
	unsigned from, lost = 9, stripe = ndz_fec_stripe(9);
	uint8_t *buf;
	uint32_t chunk;

	(void)state;
	t->o.no_store = 1;
	join(t, 2, 0);
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_FEATURES;
	p.tag = TAG;
	p.features = NDZ_FEAT_REPAIR;
	ndz_client_input_pkt(t->c, &p, SERVER, 0);
	assert_int_equal(t->notes[NDZ_CLIENT_NOTE_REPAIR], 1);
	for (unsigned b = 0; b < BLOCKS; b++)
		if (b != lost)
			block(t, 0, b, 1 * MS);
	block(t, 1, 0, 2 * MS);
	p.tag = TAG + 1;               /* another image's */
	p.type = NDZ_PKT_BLOCK;
	ndz_client_input_pkt(t->c, &p, SERVER, 2 * MS);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.foreign, 1);
	from = t->nsent;
	ndz_client_tick(t->c, 40 * MS);
	assert_int_equal(count(t, from, NDZ_PKT_RREQUEST), 1);
	assert_int_equal(t->sent[from].chunk, 0);
	for (unsigned s = 0; s < NDZ_FEC_SETS; s++)
		assert_int_equal(t->sent[from].need[s], s == stripe);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_REPAIR;
	p.tag = TAG;
	p.chunk = 0;
	p.stripe = (uint8_t)stripe;
	p.index = 3;
	assert_int_equal(ndz_client_input_pkt(t->c, &p, SERVER, 41 * MS), 1);
	assert_true(ndz_client_ready(t->c, &chunk, &buf) >= 0);
	assert_int_equal(chunk, 0);
	assert_null(buf);              /* no_store: counted, not kept */
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.fetch.repairs, 1);
	assert_int_equal(st.fetch.decoded, 1);
	teardown_t(t);
}

/*
 * FEATURES heard between the JOIN_REPLY and the start (the reply's receive batch, or
 * the manifest's fetch) are kept: the fetch the start makes asks for repairs.
 */
static void test_features_before_start(void **state)
{
	struct t *t = setup(30);
	struct ndz_pkt p;
	unsigned from;

	(void)state;
	t->o.no_store = 1;
	join(t, 2, 0);
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_FEATURES;
	p.tag = TAG;
	p.features = NDZ_FEAT_REPAIR;
	ndz_client_input_pkt(t->c, &p, SERVER, 0);
	assert_int_equal(t->notes[NDZ_CLIENT_NOTE_REPAIR], 1);
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	for (unsigned b = 0; b < BLOCKS; b++)
		if (b != 9)
			block(t, 0, b, 1 * MS);
	block(t, 1, 0, 2 * MS);        /* the server went on: block 9 was lost */
	from = t->nsent;
	ndz_client_tick(t->c, 40 * MS);
	/* a repair of the stripe, not the block itself */
	assert_int_equal(count(t, from, NDZ_PKT_RREQUEST), 1);
	teardown_t(t);
}

/* FEATURES of bits at now from the server. */
static void features(struct t *t, uint32_t bits, uint64_t now)
{
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_FEATURES;
	p.tag = TAG;
	p.features = bits;
	ndz_client_input_pkt(t->c, &p, SERVER, now);
}

/*
 * BLOCKS and CAPS: a client that takes large datagrams says so to a server that
 * announces BLOCKS, and only to one; a BLOCKS stores its blocks at their places; a
 * client that has had no BLOCKS for 0.7 s while receiving says it takes one block a
 * datagram (a link on the way drops them), once; one that takes one block says nothing.
 */
/* The payload the last CAPS sent said. */
static uint32_t caps_last(const struct t *t)
{
	for (unsigned i = t->nsent; i-- > 0;)
		if (t->sent[i].type == NDZ_PKT_CAPS)
			return t->sent[i].max_payload;
	return 0;
}

/* The flags the last CAPS sent said (requests may follow it in the same tick). */
static uint32_t caps_flags_last(const struct t *t)
{
	for (unsigned i = t->nsent; i-- > 0;)
		if (t->sent[i].type == NDZ_PKT_CAPS)
			return t->sent[i].caps_flags;
	return UINT32_MAX;
}

static void test_blocks_caps(void **state)
{
	struct t *t = setup(30);
	struct ndz_client_stats st;
	struct ndz_pkt p;
	uint8_t *buf;
	uint32_t chunk;
	unsigned from;
	int slot;

	(void)state;
	t->o.max_payload = 8972;
	join(t, 2, 0);
	features(t, NDZ_FEAT_REPAIR, 0);
	assert_int_equal(count(t, 0, NDZ_PKT_CAPS), 0);         /* an older server */
	features(t, NDZ_FEAT_REPAIR | NDZ_FEAT_BLOCKS, 1 * MS);
	assert_int_equal(count(t, 0, NDZ_PKT_CAPS), 1);
	assert_int_equal(t->sent[t->nsent - 1].max_payload, 8972);
	assert_int_equal(t->sent[t->nsent - 1].tag, TAG);
	assert_int_equal(ndz_client_start(t->c, 2 * MS, NULL), 0);
	/* chunk 0 in runs of 8, but for blocks 8-15, which come alone */
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_BLOCKS;
	p.tag = TAG;
	p.chunk = 0;
	p.count = 8;
	for (unsigned b = 0; b < BLOCKS; b += 8) {
		if (b == 8) {
			for (unsigned k = 8; k < 16; k++)
				assert_int_equal(block(t, 0, k, 3 * MS), 0);
			continue;
		}
		p.block = (uint16_t)b;
		p.data = t->data[b];   /* t->data's blocks lie one after the other */
		assert_int_equal(ndz_client_input_pkt(t->c, &p, SERVER, 3 * MS),
				 b + 8 == BLOCKS);
	}
	slot = ndz_client_ready(t->c, &chunk, &buf);
	assert_true(slot >= 0);
	assert_int_equal(chunk, 0);
	assert_memory_equal(buf, t->data, NDZ_CHUNK_SIZE);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.multi, 127);
	assert_int_equal(st.fetch.blocks, BLOCKS);
	/* a BLOCKS from another address is foreign */
	p.chunk = 1;
	p.block = 0;
	ndz_client_input_pkt(t->c, &p, OTHER, 4 * MS);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.foreign, 1);
	/* a pause: it asks for chunk 1 again (the step-down counts from a request) */
	from = t->nsent;
	ndz_client_tick(t->c, 100 * MS);
	assert_int_equal(count(t, from, NDZ_PKT_REQUEST), 1);
	/* lone blocks keep coming, no BLOCKS: 0.7 s after it says 1044, once */
	for (uint64_t ms = 105; ms < 800; ms += 5) {
		block(t, 1, (unsigned)ms, ms * MS);
		ndz_client_tick(t->c, ms * MS);
	}
	assert_int_equal(count(t, 0, NDZ_PKT_CAPS), 1);
	for (uint64_t ms = 800; ms < 1500; ms += 5) {
		block(t, 1, (unsigned)ms % BLOCKS, ms * MS);
		ndz_client_tick(t->c, ms * MS);
	}
	assert_int_equal(count(t, 0, NDZ_PKT_CAPS), 2);
	for (unsigned i = t->nsent; i-- > 0;)
		if (t->sent[i].type == NDZ_PKT_CAPS) {
			assert_int_equal(t->sent[i].max_payload, NDZ_PKT_BLOCK_LEN);
			break;
		}
	teardown_t(t);
	/* one that takes one block a datagram says nothing */
	t = setup(30);
	t->o.max_payload = 1472;
	join(t, 2, 0);
	features(t, NDZ_FEAT_BLOCKS, 0);
	assert_int_equal(count(t, 0, NDZ_PKT_CAPS), 0);
	teardown_t(t);
}

/*
 * SPAN: a client that takes more than a BLOCK says so, with the SPAN flag, only to a
 * server that announced SPAN (to one of BLOCKS only without it); SPANs cut anywhere
 * on granules fill the chunk byte for byte; forged ones (off a granule, empty, not
 * in granules, past the chunk) are counted malformed and store nothing; with no SPAN
 * for 0.7 s it steps down to a BLOCK, as for BLOCKS.
 */
static void test_span(void **state)
{
	struct t *t = setup(30);
	struct ndz_client_stats st;
	static uint8_t dg[NDZ_PKT_WIRE_MAX];
	struct ndz_pkt p;
	uint8_t *buf;
	uint32_t chunk;
	unsigned from;
	int slot, len;

	(void)state;
	t->o.max_payload = 8972;
	join(t, 2, 0);
	features(t, NDZ_FEAT_REPAIR | NDZ_FEAT_BLOCKS, 0);      /* a server before SPAN */
	assert_int_equal(count(t, 0, NDZ_PKT_CAPS), 1);
	assert_int_equal(t->sent[t->nsent - 1].caps_flags, 0);
	teardown_t(t);

	t = setup(30);
	t->o.max_payload = 1472;
	join(t, 2, 0);
	features(t, NDZ_FEAT_REPAIR, 0);
	features(t, NDZ_FEAT_BLOCKS, 0);
	assert_int_equal(count(t, 0, NDZ_PKT_CAPS), 0);
	features(t, NDZ_FEAT_REPAIR | NDZ_FEAT_SPAN, 1 * MS);
	assert_int_equal(count(t, 0, NDZ_PKT_CAPS), 1);
	assert_int_equal(t->sent[t->nsent - 1].max_payload, 1472);
	assert_int_equal(t->sent[t->nsent - 1].caps_flags, NDZ_CAPS_SPAN);
	assert_int_equal(ndz_client_start(t->c, 2 * MS, NULL), 0);
	/* chunk 0 in SPANs of 1440 bytes, as datagrams (t->data is the chunk's bytes) */
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_SPAN;
	p.tag = TAG;
	for (uint32_t off = 0; off < NDZ_CHUNK_SIZE; off += 1440) {
		p.offset = off;
		p.length = NDZ_CHUNK_SIZE - off < 1440 ? NDZ_CHUNK_SIZE - off : 1440;
		p.data = (const uint8_t *)t->data + off;
		len = ndz_pkt_encode(&p, dg, sizeof(dg), NULL);
		assert_int_equal(len, NDZ_PKT_SPAN_LEN(p.length));
		assert_int_equal(ndz_client_input(t->c, dg, (size_t)len, SERVER, 3 * MS),
				 off + p.length == NDZ_CHUNK_SIZE);
	}
	slot = ndz_client_ready(t->c, &chunk, &buf);
	assert_true(slot >= 0);
	assert_int_equal(chunk, 0);
	assert_memory_equal(buf, t->data, NDZ_CHUNK_SIZE);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.spans, (NDZ_CHUNK_SIZE + 1439) / 1440);
	assert_int_equal(st.fetch.blocks, BLOCKS);
	assert_int_equal(st.bad, 0);
	/* forged SPANs of chunk 1: malformed, nothing stored */
	p.chunk = 1;
	p.offset = 1024;
	p.length = 1024;
	p.data = t->data[0];
	len = ndz_pkt_encode(&p, dg, sizeof(dg), NULL);
	dg[16] = 0x10;                          /* offset 1040: off a granule */
	assert_int_equal(ndz_client_input(t->c, dg, (size_t)len, SERVER, 4 * MS), 0);
	dg[16] = 0x00;                          /* no bytes */
	assert_int_equal(ndz_client_input(t->c, dg, NDZ_PKT_SPAN_HDR, SERVER, 4 * MS), 0);
	/* 1000 bytes: not in granules */
	assert_int_equal(ndz_client_input(t->c, dg, (size_t)len - 24, SERVER, 4 * MS), 0);
	dg[17] = 0xfe;                          /* offset 1 MiB - 512: past the end */
	dg[18] = 0x0f;
	assert_int_equal(ndz_client_input(t->c, dg, (size_t)len, SERVER, 4 * MS), 0);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.bad, 4);
	assert_int_equal(st.fetch.blocks, BLOCKS);
	assert_int_equal(st.spans, (NDZ_CHUNK_SIZE + 1439) / 1440);
	/* and a SPAN past the image, well formed: foreign */
	p.chunk = 2;
	len = ndz_pkt_encode(&p, dg, sizeof(dg), NULL);
	assert_int_equal(ndz_client_input(t->c, dg, (size_t)len, SERVER, 4 * MS), 0);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.foreign, 1);
	assert_int_equal(st.fetch.blocks, BLOCKS);
	/* a pause: it asks for chunk 1 again; lone blocks, no SPAN for 0.7 s after: it
	 * says it takes a BLOCK */
	from = t->nsent;
	ndz_client_tick(t->c, 100 * MS);
	assert_int_equal(count(t, from, NDZ_PKT_REQUEST), 1);
	for (uint64_t ms = 105; ms < 900; ms += 5) {
		block(t, 1, (unsigned)ms, ms * MS);
		ndz_client_tick(t->c, ms * MS);
	}
	assert_int_equal(count(t, 0, NDZ_PKT_CAPS), 2);
	assert_int_equal(caps_last(t), NDZ_PKT_BLOCK_LEN);
	teardown_t(t);
}

/*
 * REPAIRS: said (CAPS flag) only to a server that announces them beside BLOCKS, never
 * by a client without repairs (which counts one as malformed); handled as that many
 * REPAIRs: three lost blocks of a stripe rebuilt from one REPAIRS of 3.
 */
static void test_repairs(void **state)
{
	struct t *t = setup(30);
	struct ndz_client_stats st;
	struct ndz_pkt p;
	uint32_t chunk;
	uint8_t *buf;

	(void)state;
	t->o.no_store = 1;
	t->o.max_payload = 8972;
	join(t, 2, 0);
	features(t, NDZ_FEAT_REPAIR | NDZ_FEAT_REPAIRS, 0);     /* no BLOCKS: no CAPS */
	assert_int_equal(count(t, 0, NDZ_PKT_CAPS), 0);
	features(t, NDZ_FEAT_REPAIR | NDZ_FEAT_BLOCKS | NDZ_FEAT_SPAN | NDZ_FEAT_REPAIRS, 0);
	assert_int_equal(count(t, 0, NDZ_PKT_CAPS), 1);
	assert_int_equal(t->sent[t->nsent - 1].caps_flags, NDZ_CAPS_SPAN | NDZ_CAPS_REPAIRS);
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	for (unsigned b = 0; b < BLOCKS; b++)
		if (b != 2 && b != 10 && b != 18)      /* all but 3 of stripe 2 */
			block(t, 0, b, 1 * MS);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.fetch.blocks, BLOCKS - 3);
	memset(&p, 0, sizeof(p));
	assert_int_equal(ndz_fec_stripe(2), 2);
	assert_int_equal(ndz_fec_stripe(10), 2);
	assert_int_equal(ndz_fec_stripe(18), 2);
	p.type = NDZ_PKT_REPAIRS;
	p.tag = TAG;
	p.chunk = 0;
	p.stripe = 2;
	p.index = 10;
	p.nrep = 3;
	assert_int_equal(ndz_client_input_pkt(t->c, &p, SERVER, 2 * MS), 1);
	assert_true(ndz_client_ready(t->c, &chunk, &buf) >= 0);
	assert_int_equal(chunk, 0);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.fetch.repairs, 3);
	assert_int_equal(st.fetch.decoded, 3);
	assert_int_equal(st.multi_repairs, 1);
	/* from another address: foreign */
	p.chunk = 1;
	ndz_client_input_pkt(t->c, &p, OTHER, 3 * MS);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.foreign, 1);
	assert_int_equal(st.fetch.repairs, 3);
	teardown_t(t);

	/* a client without repairs: no flag, and a REPAIRS is malformed to it */
	t = setup(30);
	t->o.no_repair = 1;
	t->o.max_payload = 8972;
	join(t, 2, 0);
	features(t, NDZ_FEAT_REPAIR | NDZ_FEAT_BLOCKS | NDZ_FEAT_REPAIRS, 0);
	assert_int_equal(count(t, 0, NDZ_PKT_CAPS), 1);
	assert_int_equal(t->sent[t->nsent - 1].caps_flags, 0);
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	p.chunk = 0;
	ndz_client_input_pkt(t->c, &p, SERVER, 3 * MS);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.bad, 1);
	assert_int_equal(st.fetch.repairs, 0);
	teardown_t(t);
}

/* The CAPS the client sent since from: their payloads in order, and how many. */
static unsigned caps_seq(const struct t *t, unsigned from, uint32_t *out, unsigned max)
{
	unsigned n = 0;

	for (unsigned i = from; i < t->nsent; i++)
		if (t->sent[i].type == NDZ_PKT_CAPS && n < max)
			out[n++] = t->sent[i].max_payload;
	return n;
}

/*
 * Stepped down (no BLOCKS for 0.7 s: an older client in the group, or a path that
 * drops them), the client probes: it says the large size again after 2 s; with no
 * BLOCKS then it steps down again and waits twice as long (4 s); a BLOCKS after a
 * probe keeps it up.
 */
static void test_caps_probe(void **state)
{
	struct t *t = setup(60);
	struct ndz_pkt p;
	uint32_t seq[16];
	unsigned n, from, i = 0;
	uint64_t ms;

	(void)state;
	t->o.max_payload = 8972;
	t->o.redelay_ns = 5 * MS;      /* it asks at every tick (see jumbo) */
	join(t, 30, 0);
	features(t, NDZ_FEAT_BLOCKS, 1 * MS);
	assert_int_equal(ndz_client_start(t->c, 2 * MS, NULL), 0);
	from = t->nsent;
	/* lone blocks only, for 7 s: down at 0.7, up at 2.7, down at 3.4, up at 7.4 */
	for (ms = 10; ms <= 7000; ms += 10, i++) {
		block(t, 1 + i / 1000, i % 1000, ms * MS);
		ndz_client_tick(t->c, ms * MS);
	}
	n = caps_seq(t, from, seq, 16);
	assert_int_equal(n, 3);
	assert_int_equal(seq[0], NDZ_PKT_BLOCK_LEN);
	assert_int_equal(seq[1], 8972);
	assert_int_equal(seq[2], NDZ_PKT_BLOCK_LEN);
	for (; ms <= 7600; ms += 10, i++) {
		block(t, 1 + i / 1000, i % 1000, ms * MS);
		ndz_client_tick(t->c, ms * MS);
	}
	n = caps_seq(t, from, seq, 16);
	assert_int_equal(n, 4);
	assert_int_equal(seq[3], 8972);    /* the second probe, 4 s after */
	/* BLOCKS come now (the older client gone): it stays up */
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_BLOCKS;
	p.tag = TAG;
	p.count = 8;
	for (; ms <= 12000; ms += 10, i++) {
		p.chunk = 5 + i / 128;
		p.block = (uint16_t)(i % 128 * 8);
		p.data = t->data[p.block];
		ndz_client_input_pkt(t->c, &p, SERVER, ms * MS);
		ndz_client_tick(t->c, ms * MS);
	}
	assert_int_equal(caps_seq(t, from, seq, 16), 4);
	teardown_t(t);
}

/*
 * The CAPS a run of traffic made the client send: their payloads and when (ms), in
 * order, and how many; and i, the datagrams fed (their places in the image).
 */
struct steps {
	uint32_t size[32];
	uint64_t ms[32];
	unsigned n, i;
};

enum { LONE, SPAN_STD, SPAN_JUMBO };   /* lone BLOCKs; SPANs of 1440 bytes, of 8928 */

/*
 * Every 10 ms from from_ms to to_ms (inclusive) one datagram of kind from the server,
 * then a tick; the CAPS sent on the way go into st. SPANs of one chunk never fill it.
 */
static void feed(struct t *t, struct steps *st, uint64_t from_ms, uint64_t to_ms, int kind)
{
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_SPAN;
	p.tag = TAG;
	for (uint64_t ms = from_ms; ms <= to_ms; ms += 10, st->i++) {
		unsigned sent = t->nsent;

		if (kind == LONE) {
			block(t, 1 + st->i / 1000, st->i % 1000, ms * MS);
		} else {
			p.length = kind == SPAN_STD ? 1440 : 8928;
			p.chunk = 5 + st->i / 100;
			p.offset = st->i % 100 * p.length;
			p.data = (const uint8_t *)t->data + p.offset;
			ndz_client_input_pkt(t->c, &p, SERVER, ms * MS);
		}
		ndz_client_tick(t->c, ms * MS);
		for (unsigned k = sent; k < t->nsent; k++)
			if (t->sent[k].type == NDZ_PKT_CAPS && st->n < 32) {
				st->size[st->n] = t->sent[k].max_payload;
				st->ms[st->n++] = ms;
			}
	}
}

/* A client of 8972 bytes joined to a server of feats, receiving from 2 ms on. */
static struct t *jumbo(uint32_t feats)
{
	struct t *t = setup(60);

	t->o.max_payload = 8972;
	t->o.redelay_ns = 5 * MS;      /* it asks at every tick (the step-down counts from
					  a request) */
	join(t, 30, 0);
	features(t, feats, 1 * MS);
	assert_int_equal(caps_last(t), 8972);
	assert_int_equal(ndz_client_start(t->c, 2 * MS, NULL), 0);
	return t;
}

#define FEAT_ALL (NDZ_FEAT_REPAIR | NDZ_FEAT_BLOCKS | NDZ_FEAT_SPAN)

/*
 * The step-down of a SPAN client (doc/PROTOCOL.md, "SPAN"): with no large datagram
 * for 0.7 s it says a 1500-byte MTU's payload (1472) first; while the SPANs of 1440
 * bytes (datagrams of 1460) that brings come, it stays there; when none comes for
 * 0.7 s either, it says one block; 2 s after that it probes its full size. Its note
 * and its stats say which size.
 */
static void test_span_step(void **state)
{
	struct t *t = jumbo(FEAT_ALL);
	struct ndz_client_stats cs;
	struct steps st = { .n = 0 };

	(void)state;
	feed(t, &st, 10, 700, LONE);
	assert_int_equal(st.n, 0);
	feed(t, &st, 710, 710, LONE);                   /* 0.7 s without a large one */
	assert_int_equal(st.n, 1);
	assert_int_equal(st.size[0], NDZ_PKT_STD_PAYLOAD);
	assert_int_equal(t->caps.count, NDZ_PKT_STD_PAYLOAD);
	assert_true(t->caps.ms >= 700);
	assert_int_equal(t->caps.repairs, NDZ_CAPS_SPAN);
	assert_int_equal(caps_flags_last(t), NDZ_CAPS_SPAN);
	feed(t, &st, 720, 1500, SPAN_STD);              /* they come: it stays */
	assert_int_equal(st.n, 1);
	feed(t, &st, 1510, 2200, LONE);                 /* none comes for 0.7 s */
	assert_int_equal(st.n, 1);
	feed(t, &st, 2210, 4200, LONE);
	assert_int_equal(st.n, 2);
	assert_int_equal(st.size[1], NDZ_PKT_BLOCK_LEN);
	assert_int_equal(st.ms[1], 2210);
	assert_int_equal(t->caps.count, NDZ_PKT_BLOCK_LEN);
	assert_true(t->caps.ms >= 700);
	feed(t, &st, 4210, 4210, LONE);                 /* the probe, 2 s after */
	assert_int_equal(st.n, 3);
	assert_int_equal(st.size[2], 8972);
	assert_int_equal(t->caps.ms, 0);
	ndz_client_get_stats(t->c, &cs);
	assert_int_equal(cs.steps_std, 1);
	assert_int_equal(cs.steps_block, 1);
	teardown_t(t);
}

/*
 * After a probe the SPANs of 1440 bytes sent while the client said 1472 are still
 * on their way: they do not count as large ones. With only those coming it steps
 * down again at 0.7 s (to 1472, where they count) and probes after twice the pause;
 * large SPANs after that probe keep it up, and its next step-down probes after 2 s
 * again.
 */
static void test_span_step_inflight(void **state)
{
	struct t *t = jumbo(FEAT_ALL);
	struct ndz_client_stats cs;
	struct steps st = { .n = 0 };
	uint64_t probe;

	(void)state;
	feed(t, &st, 10, 1500, LONE);                   /* down to 1472, then 1044 */
	assert_int_equal(st.n, 2);
	assert_int_equal(st.size[1], NDZ_PKT_BLOCK_LEN);
	feed(t, &st, 1510, st.ms[1] + 2000, LONE);      /* the probe */
	assert_int_equal(st.n, 3);
	assert_int_equal(st.size[2], 8972);
	probe = st.ms[2];
	feed(t, &st, probe + 10, probe + 3000, SPAN_STD);
	assert_int_equal(st.n, 4);
	assert_int_equal(st.size[3], NDZ_PKT_STD_PAYLOAD);
	assert_true(st.ms[3] > probe + 700 && st.ms[3] <= probe + 720);
	feed(t, &st, probe + 3010, st.ms[3] + 4000 - 10, SPAN_STD);
	assert_int_equal(st.n, 4);                      /* twice the pause: 4 s */
	feed(t, &st, st.ms[3] + 4000, st.ms[3] + 4000, SPAN_STD);
	assert_int_equal(st.n, 5);
	assert_int_equal(st.size[4], 8972);
	probe = st.ms[4];
	feed(t, &st, probe + 10, probe + 3000, SPAN_JUMBO);     /* large ones: up */
	assert_int_equal(st.n, 5);
	feed(t, &st, probe + 3010, probe + 3710, LONE);
	assert_int_equal(st.n, 6);
	assert_int_equal(st.size[5], NDZ_PKT_STD_PAYLOAD);
	feed(t, &st, probe + 3720, st.ms[5] + 2000, SPAN_STD);  /* the pause: 2 s again */
	assert_int_equal(st.n, 7);
	assert_int_equal(st.size[6], 8972);
	assert_int_equal(st.ms[6], st.ms[5] + 2000);
	ndz_client_get_stats(t->c, &cs);
	assert_int_equal(cs.steps_std, 3);
	assert_int_equal(cs.steps_block, 1);
	teardown_t(t);
}

/*
 * A client that never stepped down, in a group with a member of a 1500-byte MTU,
 * gets SPANs of 1440 bytes only: they count, it stays at its size.
 */
static void test_span_step_mixed(void **state)
{
	struct t *t = jumbo(FEAT_ALL);
	struct ndz_client_stats cs;
	struct steps st = { .n = 0 };

	(void)state;
	feed(t, &st, 10, 10000, SPAN_STD);
	assert_int_equal(st.n, 0);
	ndz_client_get_stats(t->c, &cs);
	assert_int_equal(cs.steps_std + cs.steps_block, 0);
	assert_int_equal(cs.spans, 1000);
	teardown_t(t);
}

/* A server of BLOCKS without SPAN: the step-down is to one block, at once. */
static void test_span_step_blocks(void **state)
{
	struct t *t = jumbo(NDZ_FEAT_REPAIR | NDZ_FEAT_BLOCKS);
	struct ndz_client_stats cs;
	struct steps st = { .n = 0 };

	(void)state;
	feed(t, &st, 10, 2000, LONE);
	assert_int_equal(st.n, 1);
	assert_int_equal(st.size[0], NDZ_PKT_BLOCK_LEN);
	assert_int_equal(st.ms[0], 710);
	assert_int_equal(caps_flags_last(t), 0);
	ndz_client_get_stats(t->c, &cs);
	assert_int_equal(cs.steps_std, 0);
	assert_int_equal(cs.steps_block, 1);
	teardown_t(t);
}

/*
 * A server nobody asked anything is silent on any path (a seeded start: the seed
 * scan defers every request): no step-down after 0.7 s, 2 s, 10 s. Once the client
 * asks and nothing large comes for 0.7 s, it steps down (to 1472, a server of SPANs).
 */
static void test_span_step_idle(void **state)
{
	struct t *t = setup(60);
	struct ndz_client_stats cs;
	unsigned from, sent, n = 0;
	uint64_t ms, ask = 0;

	(void)state;
	t->o.max_payload = 8972;
	join(t, 30, 0);
	ndz_client_scan(t->c, 0, 0);            /* nothing decided yet: nothing asked */
	features(t, FEAT_ALL, 1 * MS);
	assert_int_equal(caps_last(t), 8972);
	from = t->nsent;
	assert_int_equal(ndz_client_start(t->c, 2 * MS, NULL), 0);
	for (ms = 10; ms <= 10000; ms += 10) {
		assert_int_equal(ndz_client_tick(t->c, ms * MS), NDZ_CLIENT_RECEIVING);
		if (ms == 710 || ms == 2000 || ms == 10000) {
			assert_int_equal(t->nsent, from);       /* no request, no CAPS */
			n++;
		}
	}
	assert_int_equal(n, 3);
	/* the scan passes chunk 0: it is asked for; nothing answers it */
	ndz_client_scan(t->c, 1, 10000 * MS);
	for (ms = 10005; ms <= 12000; ms += 5) {
		sent = t->nsent;
		ndz_client_tick(t->c, ms * MS);
		if (!ask && count(t, sent, NDZ_PKT_REQUEST) + count(t, sent, NDZ_PKT_PREQUEST))
			ask = ms;
		if (count(t, sent, NDZ_PKT_CAPS))
			break;
	}
	assert_int_equal(ask, 10005);
	assert_int_equal(count(t, from, NDZ_PKT_CAPS), 1);
	assert_int_equal(caps_last(t), NDZ_PKT_STD_PAYLOAD);
	assert_true(ms > ask + 700 && ms <= ask + 710);
	assert_true(t->caps.ms > 700);
	ndz_client_get_stats(t->c, &cs);
	assert_int_equal(cs.steps_std, 1);
	assert_int_equal(cs.steps_block, 0);
	teardown_t(t);
}

/*
 * The FEATURES that follows the JOIN_REPLY comes after the start's requests: they
 * count, though sent before it; the 0.7 s run from the FEATURES. (frisbee beside an
 * older client that asks for everything asks nothing more itself for a while.)
 */
static void test_span_step_features_late(void **state)
{
	struct t *t = setup(60);
	struct steps st = { .n = 0 };
	unsigned from;

	(void)state;
	t->o.max_payload = 8972;
	join(t, 30, 0);
	from = t->nsent;
	assert_int_equal(ndz_client_start(t->c, 1 * MS, NULL), 0);
	assert_true(count(t, from, NDZ_PKT_REQUEST) >= 1);
	features(t, FEAT_ALL, 5 * MS);
	assert_int_equal(caps_last(t), 8972);
	feed(t, &st, 10, 705, LONE);
	assert_int_equal(st.n, 0);
	feed(t, &st, 710, 1000, LONE);
	assert_int_equal(st.n, 1);
	assert_int_equal(st.size[0], NDZ_PKT_STD_PAYLOAD);
	assert_int_equal(st.ms[0], 710);
	teardown_t(t);
}

/* -T while receiving: the server silent that long. */
static void test_give_up_silence(void **state)
{
	struct t *t = setup(2);
	uint64_t now;
	unsigned from;

	(void)state;
	join(t, 4, 0);
	assert_int_equal(ndz_client_start(t->c, 100 * MS, NULL), 0);
	from = t->nsent;
	for (now = 100 * MS; ndz_client_tick(t->c, now) == NDZ_CLIENT_RECEIVING; now += 5 * MS)
		;
	/* -T from the JOIN_REPLY at 0 */
	assert_true(now > 2000 * MS && now <= 2005 * MS);
	/* silent: asked again at 40, 80, 160, 320, 640 and 1280 ms of silence */
	assert_int_equal(t->notes[NDZ_CLIENT_NOTE_SILENT], 5);
	assert_true(count(t, from, NDZ_PKT_REQUEST) >= 5);
	assert_string_equal(ndz_client_error(t->c)->msg,
			    "no data from server 10.0.0.1 for 2 s; giving up");
	teardown_t(t);
}

/*
 * -T while receiving: blocks keep coming but no chunk checks out (forged each time):
 * fetched again each time, then the session gives up saying so.
 */
static void test_give_up_no_chunk_checks_out(void **state)
{
	struct t *t = setup(2);
	struct ndz_client_stats st;
	uint64_t now = 0;
	uint8_t *buf;
	uint32_t chunk;
	int slot, rounds = 0;

	(void)state;
	join(t, 1, 0);
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	while (ndz_client_tick(t->c, now) == NDZ_CLIENT_RECEIVING) {
		for (unsigned b = 0; b < BLOCKS; b++)
			block(t, 0, b, now);
		while ((slot = ndz_client_ready(t->c, &chunk, &buf)) >= 0) {
			assert_int_equal(chunk, 0);
			ndz_client_verdict(t->c, slot, NDZ_VERDICT_FORGED, NDZ_EMISMATCH, 1, now);
			rounds++;
		}
		now += 100 * MS;
	}
	assert_true(rounds >= 2);
	assert_true(now > 2000 * MS);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.forged, (uint64_t)rounds);
	assert_non_null(strstr(ndz_client_error(t->c)->msg, "server 10.0.0.1: no chunk checked "
			       "out for 2 s: "));
	assert_non_null(strstr(ndz_client_error(t->c)->msg, "(the last: chunk 0: "));
	teardown_t(t);
}

/* The test's index format: its length, 8 bytes little-endian, then anything. */
static uint64_t t_index_size(const uint8_t *first, size_t len)
{
	uint64_t n = 0;

	assert_true(len >= 8);
	for (int i = 7; i >= 0; i--)
		n = n << 8 | first[i];
	return n;
}

/*
 * The content index: its first chunk (right after the manifest's range: 4 for an
 * image of 3 chunks) asked for alone, its header says it has two; the bytes whole.
 */
static void test_index(void **state)
{
	struct t *t = setup(30);
	uint64_t ilen = NDZ_CHUNK_SIZE + 100;
	const uint8_t *bytes;
	size_t len;
	unsigned from;

	(void)state;
	for (int i = 0; i < 8; i++)
		t->data[0][i] = (uint8_t)(ilen >> (8 * i));
	join(t, 3, 0);
	assert_int_equal(ndz_client_index_base(3), 4);
	assert_int_equal(ndz_client_index_base(40000), 40000 + 2);   /* 1280128 bytes */
	assert_null(ndz_client_index(t->c, &len));
	assert_int_equal(ndz_client_fetch_index(t->c, NULL, 1 << 30, 0, NULL), NDZ_EINVAL);
	from = t->nsent;
	assert_int_equal(ndz_client_fetch_index(t->c, t_index_size, 1 << 30, 0, NULL), 0);
	assert_int_equal(ndz_client_tick(t->c, 0), NDZ_CLIENT_INDEX);
	/* its first block alone, whose header says how long it is */
	assert_int_equal(count(t, from, NDZ_PKT_PREQUEST), 1);
	assert_int_equal(t->sent[from].chunk, 4);
	assert_int_equal(ndz_bit_count(t->sent[from].bitmap), 1);
	assert_true(ndz_bit_test(t->sent[from].bitmap, 0));
	block(t, 4, 0, 10 * MS);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_INDEX);
	/* then the blocks the index fills: chunk 4 whole, of chunk 5 the first (100 bytes),
	 * not the zeros that pad it */
	from = t->nsent;
	ndz_client_tick(t->c, 11 * MS);
	assert_int_equal(count(t, from, NDZ_PKT_REQUEST), 1);
	assert_int_equal(count(t, from, NDZ_PKT_PREQUEST), 1);
	for (unsigned i = from; i < t->nsent; i++) {
		if (t->sent[i].type == NDZ_PKT_REQUEST)
			assert_int_equal(t->sent[i].chunk, 4);
		if (t->sent[i].type == NDZ_PKT_PREQUEST) {
			assert_int_equal(t->sent[i].chunk, 5);
			assert_int_equal(ndz_bit_count(t->sent[i].bitmap), 1);
		}
	}
	for (unsigned b = 0; b < BLOCKS; b++)
		block(t, 4, b, 12 * MS);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_INDEX);
	block(t, 5, 0, 20 * MS);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_INDEX_READY);
	bytes = ndz_client_index(t->c, &len);
	assert_int_equal(len, ilen);
	assert_memory_equal(bytes, t->data[0], NDZ_BLOCK_SIZE);
	assert_memory_equal(bytes + NDZ_CHUNK_SIZE, t->data[0], 100);
	assert_int_equal(ndz_client_index_done(t->c, NULL), 0);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_JOINED);
	assert_int_equal(ndz_client_index_done(t->c, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_client_start(t->c, 30 * MS, NULL), 0);
	teardown_t(t);
}

/*
 * A server without an index (an older frisbeed drops the requests): after 2 s the
 * session is JOINED again, not failed; so too when the first bytes are no index's.
 */
static void test_index_none(void **state)
{
	struct t *t = setup(30);
	uint64_t now;

	(void)state;
	join(t, 3, 0);
	assert_int_equal(ndz_client_fetch_index(t->c, t_index_size, 1 << 30, 0, NULL), 0);
	for (now = 0; ndz_client_tick(t->c, now) == NDZ_CLIENT_INDEX; now += 20 * MS)
		;
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_JOINED);
	assert_true(now > 2000 * MS && now <= 2020 * MS);
	assert_int_equal(ndz_client_error(t->c)->code, 0);
	/* a length of 0, or past the bound: no index */
	memset(t->data[0], 0, 8);
	assert_int_equal(ndz_client_fetch_index(t->c, t_index_size, 1 << 30, now, NULL), 0);
	for (unsigned b = 0; b < BLOCKS; b++)
		block(t, 4, b, now);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_JOINED);
	assert_int_equal(ndz_client_start(t->c, now, NULL), 0);
	teardown_t(t);
}

/*
 * Held chunks (a seeded restore): marked before the start and during the transfer,
 * never requested, counted done; a chunk complete and with the caller is not taken.
 */
static void test_have(void **state)
{
	struct t *t = setup(30);
	struct ndz_client_stats st;
	uint64_t now;
	uint32_t chunk;
	uint8_t *buf;
	unsigned from;
	int slot;

	(void)state;
	t->o.request_ahead = 8;
	join(t, 8, 0);
	assert_int_equal(ndz_client_have(t->c, 0, 0), 1);
	assert_int_equal(ndz_client_have(t->c, 0, 0), 0);
	assert_int_equal(ndz_client_have(t->c, 2, 0), 1);
	assert_int_equal(ndz_client_have(t->c, 8, 0), 0);
	from = t->nsent;
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	assert_int_equal(count(t, from, NDZ_PKT_REQUEST), 6);
	for (unsigned i = from; i < t->nsent; i++)
		assert_true(t->sent[i].chunk != 0 && t->sent[i].chunk != 2);
	/* 1 and 3 (asked for) are held too, 5 half received is dropped */
	for (unsigned b = 0; b < 10; b++)
		block(t, 5, b, 1 * MS);
	assert_int_equal(ndz_client_have(t->c, 1, 2 * MS), 1);
	assert_int_equal(ndz_client_have(t->c, 3, 2 * MS), 1);
	assert_int_equal(ndz_client_have(t->c, 5, 2 * MS), 1);
	from = t->nsent;
	for (unsigned b = 0; b < BLOCKS; b++)
		block(t, 4, b, 3 * MS);
	slot = ndz_client_ready(t->c, &chunk, &buf);
	assert_int_equal(chunk, 4);
	assert_int_equal(ndz_client_have(t->c, 4, 4 * MS), 0);
	ndz_client_verdict(t->c, slot, NDZ_VERDICT_ACCEPT, 0, 1, 4 * MS);
	ndz_client_written(t->c, slot);
	assert_int_equal(ndz_client_have(t->c, 4, 4 * MS), 0);
	/* blocks of a held chunk are duplicates, not a chunk */
	for (unsigned b = 0; b < BLOCKS; b++)
		assert_int_equal(block(t, 1, b, 5 * MS), 0);
	for (now = 10 * MS; now < 3000 * MS; now += 10 * MS)
		ndz_client_tick(t->c, now);
	assert_true(count(t, from, NDZ_PKT_REQUEST) >= 2);  /* 6 and 7, again */
	for (unsigned i = from; i < t->nsent; i++)
		assert_true(t->sent[i].chunk >= 6);
	for (uint32_t ch = 6; ch < 8; ch++) {
		for (unsigned b = 0; b < BLOCKS; b++)
			block(t, ch, b, now);
		slot = ndz_client_ready(t->c, &chunk, &buf);
		assert_int_equal(chunk, ch);
		ndz_client_verdict(t->c, slot, NDZ_VERDICT_ACCEPT, 0, 1, now);
		ndz_client_written(t->c, slot);
	}
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_COMPLETE);
	ndz_client_get_stats(t->c, &st);
	assert_int_equal(st.held, 5);
	assert_int_equal(st.fetch.done, 8);
	teardown_t(t);
}

/* While receiving, PROGRESS goes about once a second, with the chunks done so far. */
static void test_progress(void **state)
{
	struct t *t = setup(30);
	struct ndz_pkt *p;
	uint64_t now;
	uint32_t chunk;
	uint8_t *buf;
	int slot;

	(void)state;
	join(t, 4, 0);
	assert_int_equal(t->nprogress, 0);          /* not before receiving */
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	for (now = 10 * MS; now <= 2500 * MS; now += 10 * MS)
		ndz_client_tick(t->c, now);
	assert_int_equal(t->nprogress, 3);          /* at 10 ms, 1010 ms, 2010 ms */
	p = &t->progress[2];
	assert_int_equal(p->client_id, ID);
	assert_int_equal(p->tag, TAG);
	assert_int_equal(p->progress.chunks_total, 4);
	assert_int_equal(p->progress.chunks_done, 0);
	assert_int_equal(p->progress.elapsed_ms, 2010);
	for (unsigned b = 0; b < BLOCKS; b++)
		block(t, 1, b, now);
	slot = ndz_client_ready(t->c, &chunk, &buf);
	ndz_client_verdict(t->c, slot, NDZ_VERDICT_ACCEPT, 0, 1, now);
	ndz_client_written(t->c, slot);
	for (; now <= 3500 * MS; now += 10 * MS)
		ndz_client_tick(t->c, now);
	assert_int_equal(t->nprogress, 4);
	p = &t->progress[3];
	assert_int_equal(p->progress.chunks_done, 1);
	assert_int_equal(p->progress.bytes_written, NDZ_CHUNK_SIZE);
	/* a PROGRESS that cannot be sent is no failure */
	t->fail_send = 101;       /* ENETUNREACH */
	for (; now <= 5500 * MS; now += 10 * MS)
		ndz_client_tick(t->c, now);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_RECEIVING);
	t->fail_send = 0;
	teardown_t(t);
}

/* While a seed scan runs, only the chunks it has passed are asked for. */
static void test_scan_front(void **state)
{
	struct t *t = setup(30);
	unsigned from;

	(void)state;
	t->o.request_ahead = 4;
	join(t, 8, 0);
	ndz_client_scan(t->c, 0, 0);
	from = t->nsent;
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	ndz_client_tick(t->c, 10 * MS);
	assert_int_equal(t->nsent, from);
	ndz_client_scan(t->c, 3, 15 * MS);
	ndz_client_tick(t->c, 20 * MS);
	assert_int_equal(count(t, from, NDZ_PKT_REQUEST), 3);
	for (unsigned i = from; i < t->nsent; i++)
		assert_true(t->sent[i].chunk < 3);
	/* a scan that makes progress keeps -T off (30 s) while nothing more is asked */
	ndz_client_scan(t->c, 4, 25000 * MS);
	from = t->nsent;
	assert_int_equal(ndz_client_tick(t->c, 40000 * MS), NDZ_CLIENT_RECEIVING);
	assert_true(count(t, from, NDZ_PKT_REQUEST) >= 1);
	for (unsigned i = from; i < t->nsent; i++)
		assert_true(t->sent[i].chunk < 4);
	/* the scan ended: the rest may be asked for once a slot is free */
	ndz_client_scan(t->c, UINT32_MAX, 40000 * MS);
	for (unsigned b = 0; b < BLOCKS; b++)
		block(t, 0, b, 40001 * MS);
	assert_true(ndz_client_have(t->c, 1, 40002 * MS));
	from = t->nsent;
	ndz_client_tick(t->c, 40010 * MS);
	assert_true(count(t, from, NDZ_PKT_REQUEST) >= 1);
	for (unsigned i = from; i < t->nsent; i++)
		assert_true(t->sent[i].chunk >= 2);
	teardown_t(t);
}

/*
 * Blocks of a chunk past the scan's front are kept in a slot and named to the scan
 * (ndz_client_scan_next); once it decides the chunk out of order (lacking),
 * the rest is asked for at once, the blocks that came are not asked for again.
 */
static void test_scan_next(void **state)
{
	struct t *t = setup(30);
	unsigned from;

	(void)state;
	t->o.request_ahead = 4;
	join(t, 8, 0);
	ndz_client_scan(t->c, 0, 0);
	assert_int_equal(ndz_client_scan_next(t->c), UINT32_MAX);  /* not receiving */
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	assert_int_equal(ndz_client_scan_next(t->c), UINT32_MAX);
	for (unsigned b = 0; b < 100; b++)
		block(t, 5, b, 5 * MS);
	assert_int_equal(ndz_client_scan_next(t->c), 5);
	from = t->nsent;
	ndz_client_tick(t->c, 3000 * MS);
	assert_int_equal(t->nsent, from);          /* deferred: nothing asked for */
	assert_int_equal(ndz_client_scanned(t->c, 8, 3000 * MS), 0);   /* out of range */
	assert_int_equal(ndz_client_scanned(t->c, 5, 3000 * MS), 1);
	assert_int_equal(ndz_client_scan_next(t->c), UINT32_MAX);
	ndz_client_tick(t->c, 3001 * MS);
	assert_int_equal(count(t, from, NDZ_PKT_PREQUEST), 1);
	assert_int_equal(t->sent[from].chunk, 5);
	assert_int_equal(ndz_bit_count(t->sent[from].bitmap), BLOCKS - 100);
	assert_false(ndz_bit_test(t->sent[from].bitmap, 99));
	/* the rest comes: the chunk is whole, its first blocks were kept */
	for (unsigned b = 100; b < BLOCKS; b++)
		block(t, 5, b, 3002 * MS);
	uint32_t chunk;
	uint8_t *buf;
	assert_true(ndz_client_ready(t->c, &chunk, &buf) >= 0);
	assert_int_equal(chunk, 5);
	assert_memory_equal(buf, t->data[0], NDZ_BLOCK_SIZE);
	/* decided held out of order: its blocks are dropped, it is never asked for */
	block(t, 6, 0, 3003 * MS);
	assert_int_equal(ndz_client_scan_next(t->c), 6);
	assert_int_equal(ndz_client_have(t->c, 6, 3004 * MS), 1);
	ndz_client_scanned(t->c, 6, 3004 * MS);
	assert_int_equal(ndz_client_scan_next(t->c), UINT32_MAX);
	ndz_client_scan(t->c, UINT32_MAX, 3005 * MS);
	from = t->nsent;
	ndz_client_tick(t->c, 6000 * MS);
	for (unsigned i = from; i < t->nsent; i++)
		assert_true(t->sent[i].chunk != 6);
	teardown_t(t);
}

/*
 * Blocks of undecided chunks past the slots the cap gives them (2 of 8) are held back,
 * not dropped: once the scan decides such a chunk lacking, they fill its slot and
 * only the rest is asked for; the chunk comes out with their bytes.
 */
static void test_scan_held_back(void **state)
{
	struct t *t = setup(30);
	uint32_t chunk;
	uint8_t *buf;
	unsigned from;

	(void)state;
	join(t, 8, 0);
	ndz_client_scan(t->c, 0, 0);
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	for (uint32_t ch = 3; ch < 7; ch++)
		for (unsigned b = 0; b < 10; b++)
			block(t, ch, b, 5 * MS);
	from = t->nsent;
	assert_int_equal(ndz_client_scanned(t->c, 6, 3000 * MS), 1);
	ndz_client_tick(t->c, 3001 * MS);
	assert_int_equal(count(t, from, NDZ_PKT_PREQUEST), 1);
	assert_int_equal(t->sent[from].chunk, 6);
	assert_int_equal(ndz_bit_count(t->sent[from].bitmap), BLOCKS - 10);
	for (unsigned b = 10; b < BLOCKS; b++)
		block(t, 6, b, 3002 * MS);
	assert_true(ndz_client_ready(t->c, &chunk, &buf) >= 0);
	assert_int_equal(chunk, 6);
	assert_memory_equal(buf, t->data[0], 10 * NDZ_BLOCK_SIZE);
	teardown_t(t);
}

/*
 * Calls from two threads may come with times a little out of order (the seed scan
 * read the clock after the receive loop did, and took the lock first): a tick older
 * than the last scan is not "the server silent for ages" (an unsigned wrap once).
 */
static void test_time_out_of_order(void **state)
{
	struct t *t = setup(30);

	(void)state;
	join(t, 8, 0);
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	ndz_client_scan(t->c, 2, 1000 * MS + 1);
	assert_int_equal(ndz_client_tick(t->c, 1000 * MS), NDZ_CLIENT_RECEIVING);
	block(t, 0, 0, 1000 * MS - 5);
	assert_int_equal(ndz_client_tick(t->c, 1000 * MS), NDZ_CLIENT_RECEIVING);
	/* and -T still runs: 31 s of silence later it gives up */
	assert_int_equal(ndz_client_tick(t->c, 32000 * MS), NDZ_CLIENT_FAILED);
	teardown_t(t);
}

/* A client whose target holds every chunk sends its JOIN and its LEAVE, nothing else. */
static void test_have_all(void **state)
{
	struct t *t = setup(30);

	(void)state;
	join(t, 3, 0);
	for (uint32_t ch = 0; ch < 3; ch++)
		assert_int_equal(ndz_client_have(t->c, ch, 0), 1);
	assert_int_equal(ndz_client_start(t->c, 0, NULL), 0);
	assert_int_equal(ndz_client_state(t->c), NDZ_CLIENT_COMPLETE);
	for (uint64_t now = 0; now < 3000 * MS; now += 10 * MS)
		assert_int_equal(ndz_client_tick(t->c, now), NDZ_CLIENT_COMPLETE);
	assert_int_equal(ndz_client_leave(t->c, 0, 3000 * MS, NULL), 0);
	assert_int_equal(count(t, 0, NDZ_PKT_JOIN) + count(t, 0, NDZ_PKT_LEAVE), t->nsent);
	assert_int_equal(count(t, 0, NDZ_PKT_LEAVE), 1);
	assert_int_equal(t->sent[t->nsent - 1].leave.chunks_done, 3);
	teardown_t(t);
}

static void test_bad_options(void **state)
{
	struct ndz_client_opts o = { 0 };
	struct ndz_client *c = (struct ndz_client *)1;
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_client_create(&o, 0, &c, &e), NDZ_EINVAL);
	assert_null(c);
	assert_int_equal(e.code, NDZ_EINVAL);
	ndz_client_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_join_backoff_and_give_up),
		cmocka_unit_test(test_join_others_answer),
		cmocka_unit_test(test_join_forged_uuid_dropped),
		cmocka_unit_test(test_join_implausible),
		cmocka_unit_test(test_join_send_fails),
		cmocka_unit_test(test_manifest),
		cmocka_unit_test(test_manifest_none),
		cmocka_unit_test(test_manifest_forged_too_late),
		cmocka_unit_test(test_loss_and_complete),
		cmocka_unit_test(test_repair),
		cmocka_unit_test(test_features_before_start),
		cmocka_unit_test(test_blocks_caps),
		cmocka_unit_test(test_caps_probe),
		cmocka_unit_test(test_span_step),
		cmocka_unit_test(test_span_step_inflight),
		cmocka_unit_test(test_span_step_mixed),
		cmocka_unit_test(test_span_step_blocks),
		cmocka_unit_test(test_span_step_idle),
		cmocka_unit_test(test_span_step_features_late),
		cmocka_unit_test(test_span),
		cmocka_unit_test(test_repairs),
		cmocka_unit_test(test_give_up_silence),
		cmocka_unit_test(test_give_up_no_chunk_checks_out),
		cmocka_unit_test(test_index),
		cmocka_unit_test(test_index_none),
		cmocka_unit_test(test_have),
		cmocka_unit_test(test_have_all),
		cmocka_unit_test(test_scan_front),
		cmocka_unit_test(test_scan_next),
		cmocka_unit_test(test_scan_held_back),
		cmocka_unit_test(test_time_out_of_order),
		cmocka_unit_test(test_progress),
		cmocka_unit_test(test_bad_options),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
