/*
 * A simulation of the whole multicast system on a simulated clock: the real server
 * object (lib/mcast/server: admission, the client table, the work queue and its
 * merging, repairs, pacing) and many real clients (lib/mcast/client, the very
 * session frisbee runs: join, caches, request scheduling and timing, NAK
 * suppression), driven by the very drivers frisbeed and frisbee run
 * (lib/mcast/sdrive, lib/mcast/cdrive) over a simulated LAN's I/O table, on the
 * simulated clock, without threads. Every datagram goes
 * between them encoded, through a LAN that loses each one independently at each
 * client (the answers to a JOIN only when asked), and at the server when asked.
 * The server's chunks are real chunks (each passes ndz_server_check_chunk); the
 * clients keep no data, their writes are instant and their chunk checks pass. It
 * counts what the server sends against a clean transfer (every block once), for
 * client counts a host cannot run for real (100, 500).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/bits.h"
#include "core/err.h"
#include "core/format.h"
#include "mcast/cdrive.h"
#include "mcast/client.h"
#include "mcast/proto.h"
#include "mcast/sdrive.h"
#include "mcast/server.h"

#define BLOCKS NDZ_BLOCKS_PER_CHUNK
#define MS 1000000ull
#define WIRE_BYTES (NDZ_PKT_BLOCK_LEN + 28u + 14u)    /* BLOCK + IPv4/UDP + Ethernet */
#define SERVER 0x0100000au             /* the server's address, network order */
#define SECTORS 16u                    /* covered by each chunk */

/*
 * Under the sanitizers (ten times slower: 160 s for these tests under ASan) the
 * runs whose bounds are loose (test_many_clients, test_lossy_join, a no-loss one)
 * send a quarter of the chunks: the code they go through is the same, and their
 * figures keep to the same bounds. The issue-10 goals (test_repair, test_whole) are
 * tight functions of the chunks (clients joining late cost more of fewer): at half
 * the chunks 100 clients' stripes sent 1.051 (goal 1.05) and 500 clients asked more
 * than 0.6 requests a chunk, so those run in full.
 */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SHRINK 4u
#else
#define SHRINK 1u
#endif
#define CH(n) ((n) / SHRINK)

static const uint8_t uuid[16] = "mcsim-image-uuid";

struct sim_opts {
	unsigned clients;
	double loss;                   /* per datagram, at each client */
	double server_loss;            /* per datagram, at the server */
	int lossy_join;                /* the answers to a JOIN are lost as the rest (else never) */
	uint32_t chunks;
	uint64_t rate_bps;             /* the server's cap */
	uint64_t delay_ns;             /* a client's datagram's way to the server and the others */
	uint64_t jitter_ns;            /* clients start at random times in [0, jitter) */
	uint32_t gather_ms;            /* the server's (frisbeed --gather; 0: none) */
	unsigned repair;               /* NDZ_FEAT_* repairs the server and clients use */
	unsigned legacy;               /* clients 0..legacy-1 know nothing of repairs */
	unsigned stripes_only;         /* the next ones know stripe repairs only */
	uint32_t seed;
	/* a seeded reload: each client lacks only some runs of blocks of some chunks
	 * (a different change each, some runs shared), holds the rest (0: lacks all) */
	double touched;                /* of the chunks, those a client lacks blocks of */
};

struct sim_result {
	uint64_t sent;                 /* blocks and repairs the server sent */
	uint64_t repairs;              /* of which repairs */
	uint64_t requests;             /* requests the clients sent */
	uint64_t elapsed_ns;
	unsigned finished;             /* clients holding every chunk */
	uint64_t wanted;               /* the union of the blocks the clients lacked */
	uint64_t gathers;              /* the server's (ndz_server_stats) */
};

/* A client's datagram on its way to the group, as sent. */
struct dgram {
	uint64_t at;
	unsigned from;
	size_t len;
	uint8_t buf[NDZ_PKT_MAX];
};

struct sim;

/* A client: its driver, and the one datagram its receive takes next (its LAN port). */
struct client {
	struct sim *s;
	unsigned i;
	struct ndz_cdrive *d;
	uint64_t start;
	int started, finished;
	uint8_t *want;                 /* touched: per chunk, the blocks it lacks */
	const uint8_t *in;             /* the datagram waiting, or NULL */
	size_t in_len;
	uint32_t in_from;
};

struct sim {
	struct sim_opts o;
	struct ndz_server *srv;
	struct ndz_sdrive *drv;        /* the server's driver */
	const uint8_t *sin;            /* the datagram the server's receive takes next */
	size_t sin_len;
	uint32_t sin_from;
	uint8_t *image;                /* o.chunks chunks, the file served */
	struct client *c;
	struct dgram *q;               /* datagrams on their way, in time order */
	size_t qhead, qlen, qcap;
	uint64_t rng, now, requests;
	unsigned finished;
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

/* client i's address, network order */
static uint32_t addr_of(unsigned i)
{
	return 0x0000000au | ((i + 2) & 0xffu) << 24 | ((i + 2) >> 8 & 0xffu) << 16;
}

/* Chunk i of the image: one region, random data with its CRC, as a client checks it. */
static void make_chunk(struct sim *s, uint8_t *c, uint32_t i)
{
	struct ndz_chunk_hdr h;
	uint32_t len = 4096 + i * 61;

	memset(c, 0, NDZ_CHUNK_SIZE);
	memset(&h, 0, sizeof(h));
	h.version = NDZ_VERSION_1;
	h.index = i;
	h.chunk_flags = i == s->o.chunks - 1 ? NDZ_CHUNK_LAST : 0;
	memcpy(h.uuid, uuid, 16);
	h.sector_size = NDZ_SECTOR_SIZE;
	h.codec = NDZ_CODEC_ZLIB;
	h.source_sectors = (uint64_t)s->o.chunks * SECTORS;
	h.source_bytes = h.source_sectors * NDZ_SECTOR_SIZE;
	h.first = (uint64_t)i * SECTORS;
	h.last = h.first + SECTORS;
	h.data_len = len;
	for (uint32_t k = 0; k < len; k++)
		c[NDZ_HDR_SIZE + k] = (uint8_t)rnd(s);
	h.data_crc = ndz_crc32(0, c + NDZ_HDR_SIZE, len);
	h.nregions = 1;
	ndz_hdr_set_region(c, 0, (struct ndz_region){ h.first, SECTORS });
	assert_int_equal(ndz_hdr_encode(&h, c, NULL), 0);
}

/* ---- the clients' I/O table: the simulated LAN and clock ---- */

/* A client's datagram to the group (its send): a JOIN, a request, a LEAVE. */
static int sim_send(void *ctx, const uint8_t *d, size_t len)
{
	struct client *c = ctx;
	struct sim *s = c->s;
	struct ndz_pkt p;
	struct dgram *g;

	assert_int_equal(ndz_pkt_decode(d, len, &p, NULL), 0);
	assert_int_equal(p.client_id, c->i + 1);
	if (p.type == NDZ_PKT_REQUEST || p.type == NDZ_PKT_PREQUEST ||
	    p.type == NDZ_PKT_RREQUEST || p.type == NDZ_PKT_RANGE_RREQUEST) {
		assert_int_equal(p.tag, ndz_image_tag(uuid));
		s->requests++;
	} else {
		assert_true(p.type == NDZ_PKT_JOIN || p.type == NDZ_PKT_LEAVE ||
			    p.type == NDZ_PKT_PROGRESS);
	}
	if (s->qhead + s->qlen == s->qcap) {
		if (s->qhead) {
			memmove(s->q, s->q + s->qhead, s->qlen * sizeof(*s->q));
			s->qhead = 0;
		} else {
			s->qcap = s->qcap ? 2 * s->qcap : 256;
			s->q = realloc(s->q, s->qcap * sizeof(*s->q));
			assert_non_null(s->q);
		}
	}
	assert_true(len <= sizeof(s->q->buf));
	g = &s->q[s->qhead + s->qlen++];
	g->at = s->now + s->o.delay_ns;
	g->from = c->i;
	g->len = len;
	memcpy(g->buf, d, len);
	return 0;
}

/* The client's receive: the datagram its LAN port holds, if any (never waits). */
static int sim_recv(void *ctx, struct ndz_dgram *d, unsigned max, int timeout_ms,
		    unsigned nap_us, struct ndz_error *e)
{
	struct client *c = ctx;

	(void)timeout_ms;
	(void)nap_us;
	(void)e;
	assert_true(max >= 1);
	if (!c->in)
		return 0;
	d->data = c->in;               /* stays the sender's until the round is over */
	d->len = (int)c->in_len;
	d->from = c->in_from;
	c->in = NULL;
	return 1;
}

static uint64_t sim_now(void *ctx)
{
	return ((struct client *)ctx)->s->now;
}

/* The client's sink: its chunk checks pass, its writes are instant. */
static enum ndz_verdict sim_check(void *ctx, uint8_t *buf, uint32_t chunk,
				  struct ndz_chunk_hdr *h, int *why, int *intact)
{
	struct client *c = ctx;

	(void)h;
	(void)why;
	(void)intact;
	assert_true(chunk < c->s->o.chunks);
	assert_null(buf);
	return NDZ_VERDICT_ACCEPT;
}

static int sim_write(void *ctx, uint32_t chunk, uint8_t *buf, const struct ndz_chunk_hdr *h)
{
	(void)ctx;
	(void)chunk;
	(void)h;
	assert_null(buf);
	return 0;
}

/* A chunk received in part: the blocks asked for, and only those, came. */
static int sim_patch(void *ctx, uint32_t chunk, const uint8_t *buf, const uint8_t *blocks,
		     int *why)
{
	struct client *c = ctx;

	(void)buf;
	(void)why;
	assert_non_null(c->want);
	assert_memory_equal(blocks, c->want + (size_t)chunk * NDZ_BITMAP_BYTES,
			    NDZ_BITMAP_BYTES);
	return NDZ_CDRIVE_PATCHED;
}

/*
 * Client i's change, as a seeded reload sees it (bench/seed.sh: files rewritten,
 * deleted, added): in touched of the chunks, one to four runs of 1-48 blocks of its
 * own, and a run every client of a quarter of them shares (the same file touched).
 */
static void make_wants(struct sim *s)
{
	uint8_t *shared = calloc(s->o.chunks, NDZ_BITMAP_BYTES);

	assert_non_null(shared);
	for (uint32_t ch = 0; ch < s->o.chunks; ch++) {
		unsigned first = (unsigned)(rnd(s) % BLOCKS), len = 1 + (unsigned)(rnd(s) % 48);

		for (unsigned b = first; b < first + len && b < BLOCKS; b++)
			ndz_bit_set(shared + (size_t)ch * NDZ_BITMAP_BYTES, b);
	}
	for (unsigned i = 0; i < s->o.clients; i++) {
		uint8_t *w = calloc(s->o.chunks, NDZ_BITMAP_BYTES);

		assert_non_null(w);
		s->c[i].want = w;
		for (uint32_t ch = 0; ch < s->o.chunks; ch++) {
			uint8_t *b = w + (size_t)ch * NDZ_BITMAP_BYTES;
			unsigned runs = 1 + (unsigned)(rnd(s) % 4);

			if (!lost_at(s, s->o.touched))
				continue;
			for (unsigned r = 0; r < runs; r++) {
				unsigned first = (unsigned)(rnd(s) % BLOCKS);
				unsigned len = 1 + (unsigned)(rnd(s) % 48);

				for (unsigned k = first; k < first + len && k < BLOCKS; k++)
					ndz_bit_set(b, k);
			}
			if (rnd(s) % 4 == 0)
				for (unsigned k = 0; k < NDZ_BITMAP_BYTES; k++)
					b[k] |= shared[(size_t)ch * NDZ_BITMAP_BYTES + k];
		}
	}
	free(shared);
}

/*
 * After client i's driver took a round: it starts receiving once it has joined (as
 * frisbee does); once it holds every chunk it says LEAVE and is gone.
 */
static void client_after(struct sim *s, unsigned i, int state)
{
	struct client *c = &s->c[i];
	struct ndz_client *cl = ndz_cdrive_client(c->d);

	if (state == NDZ_CLIENT_JOINED) {
		assert_int_equal(ndz_client_info(cl)->chunks, s->o.chunks);
		assert_int_equal(ndz_client_server(cl), SERVER);
		/* a seeded reload: it says what it holds and what it lacks before it starts */
		for (uint32_t ch = 0; c->want && ch < s->o.chunks; ch++) {
			const uint8_t *w = c->want + (size_t)ch * NDZ_BITMAP_BYTES;

			if (ndz_bit_count(w))
				assert_int_equal(ndz_cdrive_want(c->d, ch, w), 1);
			else
				assert_int_equal(ndz_cdrive_have(c->d, ch), 1);
		}
		if (ndz_cdrive_state(c->d) != NDZ_CLIENT_COMPLETE)
			assert_int_equal(ndz_cdrive_start(c->d, NULL), 0);
	}
	if (ndz_cdrive_state(c->d) == NDZ_CLIENT_COMPLETE) {
		struct ndz_client_stats st;

		ndz_cdrive_stats(c->d, &st);
		assert_int_equal(st.fetch.done, s->o.chunks);
		assert_int_equal(ndz_cdrive_leave(c->d, 0, NULL), 0);
		c->finished = 1;
		s->finished++;
	}
}

/* A datagram reaches client i: its driver takes a round with it (and the time). */
static void client_input(struct sim *s, unsigned i, const uint8_t *buf, size_t len,
			 uint32_t from)
{
	struct client *c = &s->c[i];

	c->in = buf;
	c->in_len = len;
	c->in_from = from;
	client_after(s, i, ndz_cdrive_step(c->d, 0, NULL));
	assert_null(c->in);
}

/* A datagram of the server's goes out to the group: each client hears it, or not. */
static void to_clients(struct sim *s, const uint8_t *buf, size_t len, int lossless)
{
	for (unsigned i = 0; i < s->o.clients; i++)
		if (s->c[i].started && !s->c[i].finished && (lossless || !lost(s)))
			client_input(s, i, buf, len, SERVER);
}

/* ---- the server's I/O table: the simulated LAN, the image in memory, the clock ---- */

/* The server's receive: the datagram that just arrived, if any (never waits). */
static int srv_recv(void *ctx, uint8_t *buf, size_t cap, int timeout_ms, uint32_t *from,
		    struct ndz_error *e)
{
	struct sim *s = ctx;
	size_t len = s->sin_len;

	(void)timeout_ms;
	(void)e;
	if (!s->sin)
		return 0;
	assert_true(len <= cap);
	memcpy(buf, s->sin, len);
	*from = s->sin_from;
	s->sin = NULL;
	return (int)len;
}

/*
 * The answer to a JOIN (JOIN_REPLY, FEATURES), or the announcement: unless
 * lossy_join, every client hears it, so that the ratios measure the transfer, not
 * clients that missed the FEATURES and go without repairs until the next.
 */
static int srv_send(void *ctx, const uint8_t *d, size_t len)
{
	struct sim *s = ctx;

	to_clients(s, d, len, !s->o.lossy_join);
	return 0;
}

/* A batch of blocks and repairs (or a FEATURES): each lost at each client as the rest. */
static int srv_send_many(void *ctx, const uint8_t *const *bufs, const size_t *lens,
			 unsigned count, struct ndz_error *e)
{
	struct sim *s = ctx;

	(void)e;
	for (unsigned k = 0; k < count; k++)
		to_clients(s, bufs[k], lens[k], 0);
	return 0;
}

/* The same gathered from its parts, as frisbeed's socket does (ndz_net_send_vec). */
static int srv_send_vec(void *ctx, const struct ndz_net_out *d, unsigned count,
			struct ndz_error *e)
{
	struct sim *s = ctx;
	uint8_t buf[NDZ_PKT_WIRE_MAX];

	(void)e;
	for (unsigned k = 0; k < count; k++) {
		assert_true(d[k].head_len + d[k].body_len <= sizeof(buf));
		memcpy(buf, d[k].head, d[k].head_len);
		if (d[k].body_len)
			memcpy(buf + d[k].head_len, d[k].body, d[k].body_len);
		to_clients(s, buf, d[k].head_len + d[k].body_len, 0);
	}
	return 0;
}

static int srv_read(void *ctx, uint8_t *buf, uint32_t chunk)
{
	struct sim *s = ctx;

	assert_true(chunk < s->o.chunks);
	memcpy(buf, s->image + (size_t)chunk * NDZ_CHUNK_SIZE, NDZ_CHUNK_SIZE);
	return 0;
}

static uint64_t srv_now(void *ctx)
{
	return ((struct sim *)ctx)->now;
}

/* Datagrams that arrived by now: at the server and at every other client, each maybe lost. */
static void deliver(struct sim *s)
{
	while (s->qlen && s->q[s->qhead].at <= s->now) {
		struct dgram g = s->q[s->qhead];

		s->qhead++;
		s->qlen--;
		if (!(s->o.server_loss > 0 && lost_at(s, s->o.server_loss))) {
			/* every one is admitted; one that may bring work wakes the sender */
			int admitted = 0;

			s->sin = g.buf;
			s->sin_len = g.len;
			s->sin_from = addr_of(g.from);
			assert_int_equal(ndz_sdrive_receive(s->drv, 0, &admitted, NULL), 1);
			assert_true(admitted > 0);
		}
		for (unsigned i = 0; i < s->o.clients; i++) {
			struct client *c = &s->c[i];

			/* a client hears its own datagram looped back, without loss */
			if (!c->started || c->finished || (i != g.from && lost(s)))
				continue;
			client_input(s, i, g.buf, g.len, addr_of(g.from));
		}
	}
}

/*
 * The server's sender, its driver's steps: load, build, send what is due by now (the
 * step's granularity rounds a batch's delay up); idle or pacing, until a later step.
 */
static void server_run(struct sim *s)
{
	for (;;) {
		uint64_t at;

		switch (ndz_sdrive_send_step(s->drv, &at)) {
		case NDZ_SDRIVE_AGAIN:
			continue;
		case NDZ_SDRIVE_STOP:
			fail_msg("a chunk of the image failed the server's check");
			return;
		default:
			return;
		}
	}
}

/* Client i starts as frisbee does: it asks to join (the server's answer starts it). */
static void client_start(struct sim *s, unsigned i)
{
	const struct sim_opts *o = &s->o;
	struct client *c = &s->c[i];
	struct ndz_client_opts co = {
		.id = i + 1, .no_repair = i < o->legacy,
		.no_whole = i >= o->legacy && i < o->legacy + o->stripes_only,
		.no_store = 1, .room = UINT64_MAX, .give_up_s = 30, .slots = 64,
		.request_ahead = 2, .redelay_ns = 1000 * MS, .seed = o->seed * 7919u + i + 1,
	};
	struct ndz_cdrive_opts dopt = {
		.io = { sim_recv, sim_send, sim_now, c },
		.sink = { sim_check, sim_write, NULL, NULL, c, sim_patch },
	};

	c->s = s;
	c->i = i;
	assert_int_equal(ndz_cdrive_create(&co, &dopt, &c->d, NULL), 0);
	assert_int_equal(ndz_cdrive_step(c->d, 0, NULL), NDZ_CLIENT_JOINING);
	c->started = 1;
}

/* The server's table: every client, from its address, left with its image complete. */
static void check_table(struct sim *s)
{
	struct ndz_server_client sc;
	uint8_t *seen = calloc(s->o.clients, 1);

	assert_non_null(seen);
	assert_int_equal(ndz_server_clients(s->srv), s->o.clients);
	for (size_t k = 0; k < s->o.clients; k++) {
		assert_int_equal(ndz_server_client(s->srv, k, &sc, NULL), 0);
		assert_true(sc.id >= 1 && sc.id <= s->o.clients);
		assert_false(seen[sc.id - 1]);
		seen[sc.id - 1] = 1;
		assert_int_equal(sc.addr, addr_of(sc.id - 1));
		/* a LEAVE is sent once: lost at the server, the client stays on */
		if (!s->o.server_loss)
			assert_int_equal(sc.left, 1);
		else
			assert_true(sc.left == 0 || sc.left == 1);
	}
	assert_int_equal(ndz_server_client(s->srv, s->o.clients, &sc, NULL), NDZ_ENOENT);
	free(seen);
}

static void run(const struct sim_opts *o, struct sim_result *res)
{
	struct sim s;
	uint64_t step = WIRE_BYTES * 8ull * 1000000000ull / o->rate_bps;
	uint64_t clean = (uint64_t)o->chunks * BLOCKS;
	uint64_t limit = 20 * clean * step + 30000 * MS;
	struct ndz_server_opts so = { .name = "mcsim", .repair = o->repair,
				      .rate_bps = o->rate_bps, .gather_ms = o->gather_ms };
	struct ndz_sdrive_opts dopt = {
		.io = { srv_recv, srv_send, srv_send_many, srv_read, srv_now, NULL, srv_send_vec },
	};
	struct ndz_server_stats ss;

	memset(&s, 0, sizeof(s));
	s.o = *o;
	s.rng = 0x9e3779b97f4a7c15ull ^ o->seed;
	s.image = malloc((size_t)o->chunks * NDZ_CHUNK_SIZE);
	s.c = calloc(o->clients, sizeof(*s.c));
	assert_non_null(s.image);
	assert_non_null(s.c);
	for (uint32_t i = 0; i < o->chunks; i++)
		make_chunk(&s, s.image + (size_t)i * NDZ_CHUNK_SIZE, i);
	res->wanted = clean;
	if (o->touched > 0) {
		make_wants(&s);
		res->wanted = 0;
		for (size_t k = 0; k < (size_t)o->chunks * NDZ_BITMAP_BYTES; k++) {
			uint8_t u = 0;

			for (unsigned i = 0; i < o->clients; i++)
				u |= s.c[i].want[k];
			res->wanted += (uint64_t)__builtin_popcount(u);
		}
	}
	memcpy(so.info.uuid, uuid, 16);
	so.info.chunks = o->chunks;
	so.info.block_size = NDZ_BLOCK_SIZE;
	so.info.blocks_per_chunk = BLOCKS;
	so.info.image_bytes = (uint64_t)o->chunks * NDZ_CHUNK_SIZE;
	so.info.source_bytes = (uint64_t)o->chunks * SECTORS * NDZ_SECTOR_SIZE;
	assert_int_equal(ndz_server_create(&so, 0, &s.srv, NULL), 0);
	dopt.io.ctx = &s;
	assert_int_equal(ndz_sdrive_create(s.srv, &dopt, &s.drv, NULL), 0);
	/* frisbeed announces itself to clients already waiting: none yet */
	ndz_sdrive_announce(s.drv);
	for (unsigned i = 0; i < o->clients; i++)
		s.c[i].start = o->jitter_ns ? rnd(&s) % o->jitter_ns : 0;
	for (s.now = 0; s.finished < o->clients && s.now < limit; s.now += step) {
		deliver(&s);
		for (unsigned i = 0; i < o->clients; i++) {
			struct client *c = &s.c[i];
			int st;

			if (c->finished)
				continue;
			if (!c->started) {
				if (s.now >= c->start)
					client_start(&s, i);
				continue;
			}
			/* its time passes: what it asks for, and when, is its own */
			st = ndz_cdrive_step(c->d, 0, NULL);
			assert_true(st == NDZ_CLIENT_JOINING || st == NDZ_CLIENT_RECEIVING);
		}
		server_run(&s);
	}
	res->elapsed_ns = s.now;
	res->finished = s.finished;
	/* the LEAVEs and requests still on their way arrive */
	while (s.qlen) {
		s.now = s.q[s.qhead].at;
		deliver(&s);
	}
	ndz_server_get_stats(s.srv, &ss);
	res->sent = ss.blocks_sent + ss.repairs_sent + ss.range_sent;
	res->repairs = ss.repairs_sent + ss.range_sent;
	res->requests = s.requests;
	res->gathers = ss.gathers;
	/* every block went out at least once: the clients were served the whole image
	 * (what they lacked of it) */
	if (o->touched > 0)
		assert_true(ss.distinct_sent <= res->wanted);  /* some may come as range repairs */
	else
		assert_int_equal(ss.distinct_sent, res->wanted);
	assert_int_equal(ss.chunks, o->chunks);
	if (!o->repair)
		assert_int_equal(ss.repairs_sent, 0);
	/* the server heard every client join, ask and leave, and nothing it refused */
	assert_int_equal(ss.clients, o->clients);
	assert_true(ss.joins >= o->clients);
	if (!o->server_loss) {
		assert_int_equal(ss.leaves, o->clients);
		assert_int_equal(ss.requests, s.requests);
	} else {
		assert_true(ss.leaves <= o->clients);
		assert_true(ss.requests <= s.requests);
	}
	assert_int_equal(ss.bad_packets + ss.bad_version + ss.wrong_image + ss.bad_chunk, 0);
	assert_true(ss.bytes_sent >= res->sent * NDZ_PKT_BLOCK_LEN);
	check_table(&s);
	for (unsigned i = 0; i < o->clients; i++) {
		ndz_cdrive_free(s.c[i].d);
		free(s.c[i].want);
	}
	free(s.c);
	free(s.q);
	free(s.image);
	ndz_sdrive_free(s.drv);
	ndz_server_free(s.srv);
}
static uint64_t last_requests;         /* of the last run_ratio */
static uint64_t last_gathers;          /* of the last run_ratio */

/* Runs one configuration, prints its figures as a TAP comment, returns the ratio. */
static double run_ratio(const struct sim_opts *o)
{
	struct sim_result r;
	double ratio;

	run(o, &r);
	assert_int_equal(r.finished, o->clients);
	ratio = (double)r.sent / (double)r.wanted;
	last_requests = r.requests;
	last_gathers = r.gathers;
	printf("# sim: %u clients%s, %.0f%% loss%s, %u chunks, repair %s: server sent %.3fx a "
	       "clean transfer (%llu repairs), %llu requests, %.2f s simulated\n", o->clients,
	       o->legacy ? " (some without repair)" : "", o->loss * 100,
	       o->lossy_join ? " (of JOIN answers too)" : "", o->chunks,
	       o->repair & NDZ_FEAT_WHOLE ? "whole" : o->repair ? "stripes" : "off", ratio,
	       (unsigned long long)r.repairs, (unsigned long long)r.requests,
	       (double)r.elapsed_ns / 1e9);
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
	assert_true(ratio_of(50, 0, CH(16), 0, 0, 2) == 1.0);
	r = ratio_of(50, 0, 16, 10 * MS, 0, 2);
	assert_true(r > 1.0 && r < 1.02);
}

/*
 * The server's gather (frisbeed's default): clients that start within it of the first
 * request share every pass, so none asks again for blocks sent before it listened;
 * here they start up to 60 ms apart, as the 8 clients of bench/seed.sh did on a loaded
 * host. A client that starts later than the gather still costs what it missed.
 */
static void test_gather(void **state)
{
	struct sim_opts o = {
		.clients = 8, .chunks = CH(16), .rate_bps = 100000000, .delay_ns = 200000,
		.jitter_ns = 60 * MS, .seed = 2, .gather_ms = 100,
	};
	double r;

	(void)state;
	r = run_ratio(&o);
	assert_true(r == 1.0);
	assert_int_equal(last_gathers, 1);       /* at the start; never quiet after it */
	o.gather_ms = 0;
	r = run_ratio(&o);
	assert_true(r > 1.0);
	assert_int_equal(last_gathers, 0);
	o.gather_ms = 100;
	o.jitter_ns = 400 * MS;                  /* later than the gather: they pay */
	r = run_ratio(&o);
	assert_true(r > 1.0);
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
	r100 = ratio_of(100, 0.01, CH(16), 10 * MS, 0, 5);
	r500 = ratio_of(500, 0.01, CH(8), 10 * MS, 0, 6);
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

/*
 * The answers to JOINs lost as the rest, and requests (JOINs, LEAVEs) lost at the
 * server too: a client that misses its JOIN_REPLY asks again when it hears the
 * transfer, one that misses the FEATURES goes without repairs until the next (at a
 * new chunk, a second on), one whose request is lost asks again. Everyone finishes;
 * the cost is printed.
 */
static void test_lossy_join(void **state)
{
	struct sim_opts o = {
		.clients = 100, .loss = 0.01, .server_loss = 0.01, .lossy_join = 1, .chunks = CH(16),
		.rate_bps = 100000000, .delay_ns = 200000, .jitter_ns = 10 * MS,
		.repair = NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE, .legacy = 5, .stripes_only = 5,
		.seed = 11,
	};
	double r;

	(void)state;
	r = run_ratio(&o);
	assert_true(r > 1.0);
	o.repair = 0;
	o.legacy = o.stripes_only = 0;
	o.seed = 12;
	r = run_ratio(&o);
	assert_true(r > 1.0);
}

/*
 * Seeded reloads (issue 32): 8 clients, each lacking different runs of blocks of
 * about a third of the chunks, a few runs shared; the server sends the union of what
 * they lack. Without loss each block goes out once and no repair at all, though the
 * clients' requests interleave in the server's queue (a client that saw the server
 * move on to another chunk took the blocks still queued for it as lost).
 */
static void test_seeded(void **state)
{
	struct sim_opts o = {
		.clients = 8, .chunks = 48, .rate_bps = 100000000, .delay_ns = 200000,
		.jitter_ns = 10 * MS, .repair = NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE | NDZ_FEAT_RANGE,
		.seed = 13, .touched = 0.35,
	};
	struct sim_result r;

	(void)state;
	run(&o, &r);
	printf("# seeded: %llu blocks wanted, %llu sent (%llu repairs)\n",
	       (unsigned long long)r.wanted, (unsigned long long)r.sent,
	       (unsigned long long)r.repairs);
	assert_int_equal(r.finished, o.clients);
	/* 9136b79 sent 6953 for 6824 wanted: 1358 range repairs, 1229 of them for
	 * blocks never sent as themselves, asked for by clients that heard others' blocks
	 * of a chunk and took the server's moving on for loss */
	assert_int_equal(r.sent, r.wanted);
	assert_int_equal(r.repairs, 0);
	o.loss = 0.01;
	o.seed = 14;
	run(&o, &r);
	printf("# seeded, 1%% loss: %llu blocks wanted, %llu sent (%llu repairs)\n",
	       (unsigned long long)r.wanted, (unsigned long long)r.sent,
	       (unsigned long long)r.repairs);
	assert_int_equal(r.finished, o.clients);
	assert_true(r.sent * 100 <= r.wanted * 105);   /* 1.016 */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seeded),
		cmocka_unit_test(test_no_loss),
		cmocka_unit_test(test_gather),
		cmocka_unit_test(test_union_of_losses),
		cmocka_unit_test(test_many_clients),
		cmocka_unit_test(test_repair),
		cmocka_unit_test(test_repair_mixed),
		cmocka_unit_test(test_whole),
		cmocka_unit_test(test_whole_mixed),
		cmocka_unit_test(test_lossy_join),
	};

	if (getenv("NDZ_MCSIM_ONLY"))  /* a pattern of the tests to run, to time one */
		cmocka_set_test_filter(getenv("NDZ_MCSIM_ONLY"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
