/* One frisbeed session as an I/O-free object: admission, clients, queue, pacing, rate (see server.h). */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/format.h"
#include "core/image.h"
#include "core/json.h"
#include "ctl/sessctl.h"
#include "core/orig.h"
#include "fec.h"
#include "pace.h"
#include "serve.h"
#include "server.h"
#include "core/io.h"
#include "trust/index.h"
#include "trust/manifest.h"
#include "trust/verify.h"

#define PKT_WIRE (NDZ_PKT_BLOCK_LEN + NDZ_SERVER_WIRE_OVERHEAD)
#define RECENT_NS 250000000ull         /* a chunk sent this lately: requests tell of losses now */
#define FEATURES_NS 1000000000ull      /* FEATURES again this often while sending */

_Static_assert(NDZ_PKT_REPAIR_LEN == NDZ_PKT_BLOCK_LEN, "blocks and repairs pace alike");
_Static_assert((int)NDZ_RX_ACTIVE == (int)NDZ_SESSCTL_RX_ACTIVE &&
	       (int)NDZ_RX_DONE == (int)NDZ_SESSCTL_RX_DONE &&
	       (int)NDZ_RX_FAILED == (int)NDZ_SESSCTL_RX_FAILED &&
	       (int)NDZ_RX_LOST == (int)NDZ_SESSCTL_RX_LOST, "STATUS tells the states by these numbers");

struct ndz_server {
	char *name;
	struct ndz_join_info info;
	uint32_t orig_version;
	uint32_t tag;
	uint32_t nchunks;              /* the image's chunks */
	uint32_t mchunks;              /* chunks nchunks.. carry the signed manifest */
	uint8_t *manifest;             /* mchunks * 1 MiB: its bytes, zero padded */
	uint32_t ibase, ichunks;       /* chunks ibase.. carry the content index */
	uint8_t *index;                /* ichunks * 1 MiB: its bytes, zero padded */
	unsigned repair;
	unsigned feat;                 /* NDZ_FEAT_* announced: repair, and BLOCKS */
	unsigned own_blocks;           /* blocks a datagram of ours may carry (the MTU's) */
	unsigned group_blocks;         /* what every client takes, as last planned */
	unsigned last_blocks;          /* what group last planned (at first, own_blocks) */
	unsigned own_span;             /* bytes a SPAN of ours may carry (the MTU's); 0: none */
	unsigned span_size;            /* what every client takes, as last planned; 0: no SPAN */
	unsigned span_min;             /* the least span_size SPANs were sent at; 0: none */
	uint64_t spans_sent, multi_repairs;
	uint64_t group_up, group_down; /* times it rose (a client that took fewer gone) and fell */
	uint64_t datagrams_sent, offloaded;
	uint64_t rate, burst;
	int bursts;                    /* -b/-g: send each burst with one call */

	struct ndz_serve *serve;       /* the queue and what was sent */
	struct ndz_fec *fec;           /* the repair code's tables (sender's part) */
	struct ndz_verify *verify;     /* the clients' chunk check, without keys (sender's) */
	uint8_t *chunk;                /* the loaded chunk's bytes (sender's part) */
	int64_t cur;                   /* chunk being sent, -1: none */
	int64_t loaded;                /* chunk in the buffer, -1: none */
	struct ndz_pace pace;
	uint64_t features_ns;          /* when FEATURES last went out with the data */
	int fresh;                     /* cur was just taken: FEATURES may be due */
	int featured;                  /* FEATURES went out with the data once */

	struct ndz_adapt *adapt;       /* -W auto: the rate from the clients' losses */
	uint64_t *sent_ns;             /* -W auto: per chunk, when it last went out */
	uint64_t *pass_ns;             /* -W auto: per chunk, when its last sending began */
	uint32_t *pass_sent;           /* -W auto: per chunk, packets sent since then */
	uint64_t traced;               /* the controller's step last reported */

	struct ndz_server_client *clients;
	size_t nclients;
	uint64_t lost_ns;              /* a client silent this long before it left is lost */
	uint64_t last_activity_ns;
	int over;                      /* ndz_server_idle said 1: no hold from then on */

	uint64_t clients_seen, joins, leaves, bytes_sent;
	uint64_t bad_packets, bad_version, wrong_image, bad_chunk;
	uint64_t range_refused;        /* RANGE_RREQUESTs of a chunk with too many ranges */
	uint64_t start_ns, first_ns, last_ns; /* creation, first and last datagram sent */
	uint64_t empty_ns;             /* between them, nothing asked for */
	uint64_t wait_ns, wait_from;   /* nothing asked for since the last batch, and since when */
	uint64_t gather_ns;            /* opts' gather_ms */
	uint64_t gather_until;         /* sending held until then (0: not holding) */
	uint64_t gathers;
	uint64_t last_rate;            /* -W auto: the rate last chosen */
};

/*
 * The bucket for a rate: five milliseconds at it, at least 16 packets: a sender woken
 * a few milliseconds late (a busy host) makes the time up and so sends at its cap
 * (with two, 2-4% of the cap was lost on a loaded host), and a burst stays as short as
 * a switch or a tbf queue takes without loss.
 */
static uint64_t burst_for(uint64_t rate)
{
	uint64_t b = rate / 8 / 200;

	return b < 16 * PKT_WIRE ? 16 * PKT_WIRE : b;
}

/*
 * Datagrams to send with one batch: a fifth of the bucket (a millisecond), so that a
 * wake-up up to four milliseconds late is made up for (a batch of the whole bucket
 * would wait for it to be full, and time slept past that is lost), or a whole -b
 * burst; never more than the bucket holds.
 */
static unsigned batch_for(const struct ndz_server *s)
{
	uint64_t b = (uint64_t)(s->pace.depth / 8) / PKT_WIRE;

	if (!s->bursts)
		b /= 5;
	return b < 1 ? 1 : b > NDZ_SERVER_BATCH ? NDZ_SERVER_BATCH : (unsigned)b;
}

int ndz_server_create(const struct ndz_server_opts *o, uint64_t now_ns, struct ndz_server **out,
		      struct ndz_error *e)
{
	struct ndz_server *s;
	uint32_t total;
	int r;

	*out = NULL;
	if (!o->info.chunks)
		return ndz_error_set(e, NDZ_EINVAL, 0, "server: an image of no chunks");
	if (o->burst_pkts ? !o->gap_us || o->auto_rate : o->rate_bps < 8000)
		return ndz_error_set(e, NDZ_EINVAL, 0, "server: bad rate (bits/s, at least 8k, "
				     "or bursts with a gap, without auto rate)");
	s = calloc(1, sizeof(*s));
	if (!s)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "server: out of memory");
	s->name = strdup(o->name ? o->name : "image");
	s->info = o->info;
	s->orig_version = o->orig_version;
	s->tag = ndz_image_tag(o->info.uuid);
	s->nchunks = o->info.chunks;
	s->repair = o->repair & NDZ_FEAT_REPAIR ? o->repair : 0; /* all repairs come with bit 0 */
	s->own_blocks = 1;
	if (o->max_payload >= NDZ_PKT_BLOCKS_LEN(2)) {
		s->own_blocks = (o->max_payload - NDZ_PKT_BLOCKS_HDR) / NDZ_BLOCK_SIZE;
		if (s->own_blocks > NDZ_PKT_BLOCKS_MAX)
			s->own_blocks = NDZ_PKT_BLOCKS_MAX;
	}
	s->group_blocks = 1;
	s->last_blocks = s->own_blocks;
	/* a SPAN only where it carries more than a BLOCK does: from 1056 bytes on */
	if (o->max_payload >= NDZ_PKT_SPAN_LEN(NDZ_BLOCK_SIZE + NDZ_PKT_SPAN_GRAIN)) {
		s->own_span = (o->max_payload - NDZ_PKT_SPAN_HDR) / NDZ_PKT_SPAN_GRAIN *
			      NDZ_PKT_SPAN_GRAIN;
		if (s->own_span > NDZ_PKT_SPAN_MAX)
			s->own_span = NDZ_PKT_SPAN_MAX;
	}
	s->feat = s->repair | (s->own_blocks > 1 ? NDZ_FEAT_BLOCKS : 0) |
		  (s->own_span ? NDZ_FEAT_SPAN : 0) |
		  (s->repair && s->own_blocks > 1 ? NDZ_FEAT_REPAIRS : 0);
	s->lost_ns = (uint64_t)(o->lost_ms ? o->lost_ms : NDZ_SERVER_LOST_MS) * 1000000u;
	s->gather_ns = (uint64_t)o->gather_ms * 1000000u;
	s->cur = s->loaded = -1;
	s->start_ns = s->last_activity_ns = now_ns;
	if (o->burst_pkts) {
		s->rate = (uint64_t)o->burst_pkts * PKT_WIRE * 8 * 1000000 / o->gap_us;
		s->burst = (uint64_t)o->burst_pkts * PKT_WIRE;
		s->bursts = 1;
	} else {
		s->rate = o->rate_bps;
		s->burst = burst_for(s->rate);
	}
	s->info.rate_bps = s->rate;
	if (o->manifest && o->manifest_len)
		s->mchunks = (uint32_t)((o->manifest_len + NDZ_CHUNK_SIZE - 1) / NDZ_CHUNK_SIZE);
	total = s->nchunks + s->mchunks;
	s->ibase = ndz_server_index_base(s->nchunks);
	if (o->index && o->index_len) {
		uint64_t m = (o->index_len + NDZ_CHUNK_SIZE - 1) / NDZ_CHUNK_SIZE;

		if (total > s->ibase || m > UINT32_MAX - s->ibase) {
			r = ndz_error_set(e, NDZ_EINVAL, 0, "server: a manifest or index too long "
					  "for an image of %u chunks", s->nchunks);
			goto fail;
		}
		s->ichunks = (uint32_t)m;
		total = s->ibase + s->ichunks;
	}
	s->clients = calloc(NDZ_SERVER_MAX_CLIENTS, sizeof(*s->clients));
	s->chunk = malloc(NDZ_CHUNK_SIZE);
	if (!s->name || !s->clients || !s->chunk ||
	    (s->mchunks && !(s->manifest = calloc(s->mchunks, NDZ_CHUNK_SIZE))) ||
	    (s->ichunks && !(s->index = calloc(s->ichunks, NDZ_CHUNK_SIZE)))) {
		r = ndz_error_set(e, NDZ_ENOMEM, 0, "server: out of memory");
		goto fail;
	}
	if (s->mchunks)
		memcpy(s->manifest, o->manifest, o->manifest_len);
	if (s->ichunks)
		memcpy(s->index, o->index, o->index_len);
	if (o->auto_rate) {
		/* from 50 Mbit/s (or the cap when lower) up, from 1 Mbit/s down */
		struct ndz_adapt_opts ao = { 1000000, s->rate, 50000000, 0, PKT_WIRE * 8 };

		if (ao.min_bps > s->rate)
			ao.min_bps = s->rate;
		if (ao.start_bps > s->rate)
			ao.start_bps = s->rate;
		s->sent_ns = calloc(total, sizeof(*s->sent_ns));
		s->pass_ns = calloc(total, sizeof(*s->pass_ns));
		s->pass_sent = calloc(total, sizeof(*s->pass_sent));
		if (!s->sent_ns || !s->pass_ns || !s->pass_sent) {
			r = ndz_error_set(e, NDZ_ENOMEM, 0, "server: out of memory");
			goto fail;
		}
		if ((r = ndz_adapt_create(&ao, now_ns, &s->adapt, e)) < 0)
			goto fail;
	}
	{
		struct ndz_verify_opts vo = { .stored = 1, .name = s->name };
		struct ndz_image_id id = { .source_bytes = s->info.source_bytes,
					   .chunks = s->nchunks };

		memcpy(id.uuid, s->info.uuid, 16);
		if ((r = ndz_verify_create(&vo, &s->verify, e)) < 0 ||
		    (r = ndz_verify_image(s->verify, &id, e)) < 0)
			goto fail;
	}
	if ((r = ndz_serve_create(total, &s->serve, e)) < 0 ||
	    (s->repair && (r = ndz_fec_create(&s->fec, e)) < 0) ||
	    ((s->repair & (NDZ_FEAT_WHOLE | NDZ_FEAT_RANGE)) &&
	     (r = ndz_fec_wprepare(s->fec, e)) < 0))
		goto fail;
	if (s->adapt) {
		uint64_t rate = ndz_adapt_rate(s->adapt, now_ns);

		ndz_pace_init(&s->pace, rate, burst_for(rate), now_ns);
	} else {
		ndz_pace_init(&s->pace, s->rate, s->burst, now_ns);
	}
	*out = s;
	return 0;
fail:
	ndz_server_free(s);
	return r;
}

void ndz_server_free(struct ndz_server *s)
{
	if (!s)
		return;
	ndz_serve_free(s->serve);
	ndz_fec_free(s->fec);
	ndz_verify_free(s->verify);
	ndz_adapt_free(s->adapt);
	free(s->sent_ns);
	free(s->pass_ns);
	free(s->pass_sent);
	free(s->clients);
	free(s->chunk);
	free(s->manifest);
	free(s->index);
	free(s->name);
	free(s);
}

/* Note a client heard at now; its entry, or NULL when the table is full. */
static struct ndz_server_client *note_client(struct ndz_server *s, uint32_t id, uint32_t addr,
					     uint64_t now)
{
	struct ndz_server_client *c;

	for (size_t i = 0; i < s->nclients; i++)
		if (s->clients[i].id == id) {
			s->clients[i].addr = addr;
			s->clients[i].last_ns = now;
			return &s->clients[i];
		}
	s->clients_seen++;
	if (s->nclients == NDZ_SERVER_MAX_CLIENTS)
		return NULL;
	c = &s->clients[s->nclients++];
	memset(c, 0, sizeof(*c));
	c->id = id;
	c->addr = addr;
	c->first_ns = c->last_ns = now;
	return c;
}

static void asked(struct ndz_server_client *c, uint64_t now)
{
	if (c)
		c->asked_ns = now;
}

static void left(struct ndz_server_client *c, const struct ndz_pkt *p)
{
	if (!c)
		return;
	c->left = p->leave.status ? 2 : 1;
	if (p->leave.chunks_done >= c->progress.chunks_done) {
		c->progress.chunks_done = p->leave.chunks_done;
		c->progress.bytes_written = p->leave.bytes_written;
		c->progress.elapsed_ms = p->leave.elapsed_ms;
		if (c->progress.chunks_total < c->progress.chunks_done)
			c->progress.chunks_total = c->progress.chunks_done;
	}
	c->reported = 1;
}

/* A PROGRESS: kept (a JOIN again later starts it anew), with the rate since the last. */
static void progressed(struct ndz_server_client *c, const struct ndz_progress *pr)
{
	if (!c || c->left)
		return;        /* a late one, after its LEAVE */
	if (c->reported && pr->elapsed_ms > c->progress.elapsed_ms &&
	    pr->bytes_written >= c->progress.bytes_written)
		c->rate_Bps = (pr->bytes_written - c->progress.bytes_written) * 1000u /
			      (pr->elapsed_ms - c->progress.elapsed_ms);
	else if (pr->elapsed_ms)
		c->rate_Bps = pr->bytes_written * 1000u / pr->elapsed_ms;
	c->progress = *pr;
	c->reported = 1;
}

/* A packet of this server's to everyone: JOIN_REPLY (to client) and FEATURES. */
static void reply(struct ndz_server *s, uint32_t client, struct ndz_server_reply *out)
{
	struct ndz_pkt p;
	int len;

	out->count = 0;
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_JOIN_REPLY;
	p.client_id = client;
	p.tag = s->tag;
	p.info = s->info;
	len = ndz_pkt_encode(&p, out->bufs[0], sizeof(out->bufs[0]), NULL);
	if (len > 0)
		out->lens[out->count++] = (size_t)len;
	/* beside the reply, not in it: clients without repairs refuse unknown fields */
	if (!s->feat)
		return;
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_FEATURES;
	p.tag = s->tag;
	p.features = s->feat;
	len = ndz_pkt_encode(&p, out->bufs[out->count], sizeof(out->bufs[0]), NULL);
	if (len > 0)
		out->lens[out->count++] = (size_t)len;
}

void ndz_server_announce(struct ndz_server *s, struct ndz_server_reply *out)
{
	reply(s, 0, out);
}

/*
 * -W auto: client lost packets of chunk, and the controller learns how late that is
 * known: since the chunk's sending began (a client asks once the server has moved on),
 * and what got through that sending.
 */
static void report_lost(struct ndz_server *s, uint32_t client, uint32_t chunk, unsigned lost,
			uint64_t now)
{
	/* blocks lost in an earlier sending (another client's request brought the chunk
	 * back) were counted then, or are old: at most what this one sent is lost now */
	if (lost > s->pass_sent[chunk])
		lost = s->pass_sent[chunk];
	if (!lost)
		return;
	ndz_adapt_delay(s->adapt, now - s->pass_ns[chunk]);
	ndz_adapt_lost(s->adapt, client, lost);
	ndz_adapt_through(s->adapt, s->pass_sent[chunk], lost, s->pass_ns[chunk],
			  s->sent_ns[chunk]);
}

/*
 * -W auto: whether chunk went out lately, so that a request for it tells of losses
 * just now; one asked for again much later (the client's re-request delay, or a
 * client that has just joined) repeats losses counted before, or none.
 */
static int recent(const struct ndz_server *s, uint32_t chunk, uint64_t now)
{
	return s->adapt && now - s->sent_ns[chunk] < RECENT_NS;
}

/* Admission: 1 when p is for us, else counts why not and returns 0. */
static int admit(struct ndz_server *s, int r, const struct ndz_pkt *p)
{
	if (r == NDZ_EPROTOVER) {
		s->bad_version++;
	} else if (r < 0) {
		s->bad_packets++;
	} else if (p->type == NDZ_PKT_BLOCK || p->type == NDZ_PKT_JOIN_REPLY ||
		   p->type == NDZ_PKT_REPAIR || p->type == NDZ_PKT_FEATURES ||
		   p->type == NDZ_PKT_BLOCKS || p->type == NDZ_PKT_SPAN ||
		   p->type == NDZ_PKT_REPAIRS || p->type == NDZ_PKT_RANGE_REPAIR) {
		/* another server's traffic (or ours looped back): not for us */
	} else if (p->type == NDZ_PKT_RREQUEST &&
		   (!s->repair || (p->need[NDZ_FEC_WHOLE] && !(s->repair & NDZ_FEAT_WHOLE)))) {
		s->bad_packets++;      /* as a server without (whole-chunk) repairs would */
	} else if (p->type == NDZ_PKT_RANGE_RREQUEST && !(s->repair & NDZ_FEAT_RANGE)) {
		s->bad_packets++;      /* as a server without range repairs would */
	} else if (p->type != NDZ_PKT_JOIN && p->tag != s->tag) {
		s->wrong_image++;
	} else if ((p->type == NDZ_PKT_REQUEST || p->type == NDZ_PKT_PREQUEST ||
		    p->type == NDZ_PKT_RREQUEST || p->type == NDZ_PKT_RANGE_RREQUEST) &&
		   p->chunk >= s->nchunks + s->mchunks &&
		   (p->chunk < s->ibase || p->chunk - s->ibase >= s->ichunks)) {
		s->bad_chunk++;
	} else {
		return 1;
	}
	return 0;
}

static void gather_meta(struct ndz_server *s, const struct ndz_pkt *p, uint64_t now);

int ndz_server_packet(struct ndz_server *s, const uint8_t *buf, size_t len, uint32_t addr,
		      uint64_t now_ns, struct ndz_server_reply *out, struct ndz_pkt *pp)
{
	struct ndz_pkt local, *p = pp ? pp : &local;
	struct ndz_server_client *c;
	unsigned lost = 0;
	int r = ndz_pkt_decode(buf, len, p, NULL), woke = 0;

	if (out)
		out->count = 0;
	if (!admit(s, r, p))
		return 0;
	s->last_activity_ns = now_ns;
	c = note_client(s, p->client_id, addr, now_ns);
	switch (p->type) {
	case NDZ_PKT_JOIN:
		s->joins++;
		if (c)
			c->left = 0;   /* back again (a new run with the same id) */
		if (out)
			reply(s, p->client_id, out);
		break;
	case NDZ_PKT_LEAVE:
		s->leaves++;
		left(c, p);
		break;
	case NDZ_PKT_PROGRESS:
		progressed(c, &p->progress);
		break;
	case NDZ_PKT_CAPS:
		if (c) {
			c->max_payload = p->max_payload;
			c->caps_flags = p->caps_flags;
		}
		break;
	case NDZ_PKT_REQUEST:
	case NDZ_PKT_PREQUEST:
		asked(c, now_ns);
		if (p->type == NDZ_PKT_PREQUEST && recent(s, p->chunk, now_ns)) {
			/* blocks sent before and asked for again: lost */
			for (unsigned b = 0; b < NDZ_BLOCKS_PER_CHUNK; b++)
				lost += ndz_bit_test(p->bitmap, b) &&
					ndz_serve_ever(s->serve, p->chunk, b);
			report_lost(s, p->client_id, p->chunk, lost, now_ns);
		}
		gather_meta(s, p, now_ns);
		woke = (p->type == NDZ_PKT_REQUEST ?
			ndz_serve_request(s->serve, p->chunk, p->block, p->count, NULL) :
			ndz_serve_prequest(s->serve, p->chunk, p->bitmap, NULL)) > 0;
		break;
	case NDZ_PKT_RREQUEST:
		asked(c, now_ns);
		if (recent(s, p->chunk, now_ns)) {
			for (unsigned i = 0; i < NDZ_FEC_SETS; i++)
				lost += p->need[i];
			report_lost(s, p->client_id, p->chunk, lost, now_ns);
		}
		woke = ndz_serve_repairs(s->serve, p->chunk, p->need, NULL) > 0;
		break;
	case NDZ_PKT_RANGE_RREQUEST:
		asked(c, now_ns);
		if (recent(s, p->chunk, now_ns))
			report_lost(s, p->client_id, p->chunk, p->wanted, now_ns);
		r = ndz_serve_range(s->serve, p->chunk, p->block, p->count, p->wanted, NULL);
		if (r < 0)
			s->range_refused++;    /* too many ranges of the chunk wanted at once */
		woke = r > 0;
		break;
	}
	return woke ? 2 : 1;
}

/* Blocks a datagram carries at now: the fewest any client heard lately takes. */
static unsigned blocks_now(struct ndz_server *s, uint64_t now)
{
	unsigned n = s->own_blocks;

	for (size_t i = 0; i < s->nclients && n > 1; i++) {
		const struct ndz_server_client *c = &s->clients[i];
		unsigned take;

		if (c->left || now - c->last_ns > s->lost_ns)
			continue;      /* gone: what it takes no longer matters */
		take = c->max_payload >= NDZ_PKT_BLOCKS_LEN(2) ?
		       (c->max_payload - NDZ_PKT_BLOCKS_HDR) / NDZ_BLOCK_SIZE : 1;
		if (take < n)
			n = take;
	}
	return n;
}

/*
 * The bytes a SPAN carries at now: the fewest any client heard lately takes, when
 * every one of them takes SPANs and that is more than a block; else 0 (no SPAN).
 */
static unsigned span_now(struct ndz_server *s, uint64_t now)
{
	unsigned n = s->own_span;

	for (size_t i = 0; i < s->nclients && n; i++) {
		const struct ndz_server_client *c = &s->clients[i];
		unsigned take;

		if (c->left || now - c->last_ns > s->lost_ns)
			continue;      /* gone: what it takes no longer matters */
		if (!(c->caps_flags & NDZ_CAPS_SPAN) ||
		    c->max_payload < NDZ_PKT_SPAN_LEN(NDZ_BLOCK_SIZE + NDZ_PKT_SPAN_GRAIN))
			return 0;
		take = (c->max_payload - NDZ_PKT_SPAN_HDR) / NDZ_PKT_SPAN_GRAIN * NDZ_PKT_SPAN_GRAIN;
		if (take < n)
			n = take;
	}
	return n;
}

/* Whether every client heard lately takes REPAIRS. */
static int repairs_now(struct ndz_server *s, uint64_t now)
{
	if (!(s->feat & NDZ_FEAT_REPAIRS))
		return 0;
	for (size_t i = 0; i < s->nclients; i++) {
		const struct ndz_server_client *c = &s->clients[i];

		if (!c->left && now - c->last_ns <= s->lost_ns && !(c->caps_flags & NDZ_CAPS_REPAIRS))
			return 0;
	}
	return 1;
}

/* Repair items of b in order of set, then index: a set's consecutive ones side by side. */
static void sort_repairs(struct ndz_server_batch *b)
{
	for (unsigned i = 1; i < b->count; i++) {
		unsigned j = i;

		if (b->items[i].repair != NDZ_SERVE_SET)
			continue;
		while (j > 0 && b->items[j - 1].repair == NDZ_SERVE_SET &&
		       (b->items[j - 1].set > b->items[j].set ||
			(b->items[j - 1].set == b->items[j].set &&
			 b->items[j - 1].index > b->items[j].index))) {
			__typeof__(b->items[0]) t = b->items[j];

			b->items[j] = b->items[j - 1];
			b->items[j - 1] = t;
			j--;
		}
	}
}

/* One datagram of b: items i.. (n of them), a SPAN of len bytes at off when len. */
static void add_dgram(struct ndz_server_batch *b, size_t *at, unsigned i, unsigned n,
		      uint32_t off, uint32_t len)
{
	unsigned d = b->ndgrams++;

	b->dg_first[d] = (uint8_t)i;
	b->dg_n[d] = (uint8_t)n;
	b->dg_off[d] = off;
	b->dg_len[d] = len;
	/* (a REPAIRS of n is as long as a BLOCKS of n) */
	b->lens[d] = len ? NDZ_PKT_SPAN_LEN(len) : n > 1 ? NDZ_PKT_BLOCKS_LEN(n) :
		     b->items[i].repair == NDZ_SERVE_RANGE ? NDZ_PKT_RANGE_REPAIR_LEN :
		     NDZ_PKT_BLOCK_LEN;
	b->bufs[d] = (const uint8_t *)b->pkt + *at;
	*at += b->lens[d];
	b->wire_bytes += b->lens[d] + NDZ_SERVER_WIRE_OVERHEAD;
	b->spans += len != 0;
	b->multi_repairs += b->items[i].repair && n > 1;
}

/*
 * The batch's datagrams: each run of consecutive blocks cut into SPANs of span_now
 * bytes (the last shorter) when the group takes them, else in one BLOCKS of at most
 * blocks_now; a set's consecutive repairs in one REPAIRS of at most blocks_now when
 * the group takes those; each other repair (and each lone block but in SPANs) in a
 * datagram of its own, as an older client takes them; their wire bytes for the
 * pacing. A SPAN carries more than a block, so there are never more datagrams than
 * items.
 */
static void group(struct ndz_server *s, struct ndz_server_batch *b, uint64_t now)
{
	unsigned mb = blocks_now(s, now), span = span_now(s, now);
	unsigned mr = repairs_now(s, now) ? mb : 1;
	size_t at = 0;

	/* an older client joined: one block a datagram; it left or was lost: back up */
	if (mb > s->last_blocks)
		s->group_up++;
	else if (mb < s->last_blocks)
		s->group_down++;
	s->last_blocks = s->group_blocks = mb;
	s->span_size = span;

	b->ndgrams = 0;
	b->wire_bytes = 0;
	b->spans = 0;
	b->multi_repairs = 0;
	if (mr > 1)
		sort_repairs(b);
	for (unsigned i = 0; i < b->count;) {
		unsigned n = 1, most = span ? b->count : mb;

		if (!b->items[i].repair)
			while (n < most && i + n < b->count && !b->items[i + n].repair &&
			       b->items[i + n].block == b->items[i].block + n)
				n++;
		else if (b->items[i].repair == NDZ_SERVE_SET) /* a set's consecutive repairs in
								* one REPAIRS, when all take those */
			while (n < mr && i + n < b->count && b->items[i + n].repair == NDZ_SERVE_SET &&
			       b->items[i + n].set == b->items[i].set &&
			       b->items[i + n].index == b->items[i].index + n)
				n++;
		if (span && !b->items[i].repair) {
			/* the run's bytes, straight from the chunk: spans of span bytes */
			uint32_t off = b->items[i].block * NDZ_BLOCK_SIZE;
			uint32_t end = off + n * NDZ_BLOCK_SIZE;

			for (; off < end; off += span)
				add_dgram(b, &at, i, n, off, end - off < span ? end - off : span);
		} else {
			add_dgram(b, &at, i, n, 0, 0);
		}
		i += n;
	}
}

/*
 * After something was sent: every client still with us (not left, heard lately, all
 * of them in the table) asked for something since the last send, so a hold would
 * wait for nobody. (Before the first send a client's JOIN may be on its way still.)
 */
static int all_asked(const struct ndz_server *s, uint64_t now)
{
	if (!s->first_ns || s->clients_seen > s->nclients)
		return 0;
	for (size_t i = 0; i < s->nclients; i++) {
		const struct ndz_server_client *c = &s->clients[i];

		if (!c->left && now - c->last_ns < s->lost_ns && c->asked_ns <= s->last_ns)
			return 0;
	}
	return 1;
}

/* A gather begins: the sending held gather_ns from now. */
static void hold(struct ndz_server *s, uint64_t now)
{
	s->gather_until = now + s->gather_ns;
	s->gathers++;
	if (s->wait_from) {    /* from here something is asked for: not empty */
		s->wait_ns += now - s->wait_from;
		s->wait_from = 0;
	}
}

/*
 * A request for blocks of the manifest's or the index's chunks that were never sent,
 * while nothing is being sent: every client asks for those at the same point of its
 * start (the rest of the index as it reads the index's first block, which says how
 * long it is), each some tens of milliseconds after the others on a loaded host, so
 * this gathers too (until every client asked, at most gather_ns). Later askers of
 * blocks already sent (a client that joined late) hold nothing back.
 */
static void gather_meta(struct ndz_server *s, const struct ndz_pkt *p, uint64_t now)
{
	unsigned b;

	if (!s->gather_ns || s->gather_until || !s->first_ns || s->cur >= 0 ||
	    p->chunk < s->nchunks)
		return;
	for (b = 0; b < NDZ_BLOCKS_PER_CHUNK; b++)
		if ((p->type == NDZ_PKT_REQUEST ? b >= p->block && b - p->block < p->count :
						  ndz_bit_test(p->bitmap, b)) &&
		    !ndz_serve_ever(s->serve, p->chunk, b))
			break;
	if (b < NDZ_BLOCKS_PER_CHUNK)
		hold(s, now);
}

/*
 * The gather: the first request after a quiet spell (nothing sent yet, or nothing for
 * NDZ_SERVER_QUIET_MS) holds the sending gather_ns, so that the requests of clients
 * started together (a lab's reload, each client a few tens of milliseconds after the
 * others) join one pass instead of the later ones asking again for what went out
 * before they listened. After the first send the hold ends, or is not taken, once
 * every client the server knows has asked (all_asked: one client alone waits for
 * nothing). 1 while holding, with b->delay_ns the time left.
 */
static int gathering(struct ndz_server *s, uint64_t now, struct ndz_server_batch *b)
{
	if (!s->gather_ns || !ndz_serve_busy(s->serve))
		return 0;
	if (!s->gather_until && (!s->first_ns || (s->wait_from &&
						  now - s->wait_from >= NDZ_SERVER_QUIET_MS * 1000000ull))) {
		if (all_asked(s, now))
			return 0;
		hold(s, now);
	}
	if (s->gather_until && now < s->gather_until && !all_asked(s, now)) {
		b->delay_ns = s->gather_until - now;
		return 1;
	}
	s->gather_until = 0;
	return 0;
}

enum ndz_server_step ndz_server_plan(struct ndz_server *s, uint64_t now_ns,
				     struct ndz_server_batch *b)
{
	struct ndz_serve_item it;
	unsigned max;

	b->count = 0;
	b->ndgrams = 0;
	b->control = 0;
	b->offloaded = 0;
	b->spans = 0;
	b->multi_repairs = 0;
	b->delay_ns = 0;
	b->wire_bytes = 0;
	for (;;) {
		if (s->cur < 0 && gathering(s, now_ns, b))
			return NDZ_SERVER_WAIT;
		if (s->cur < 0) {
			s->cur = ndz_serve_next_chunk(s->serve);
			if (s->cur < 0) {
				if (s->first_ns && !s->wait_from)
					s->wait_from = now_ns;
				return NDZ_SERVER_WAIT;
			}
			s->fresh = 1;
			if (s->adapt) {
				s->pass_ns[s->cur] = now_ns;
				s->pass_sent[s->cur] = 0;
			}
		}
		if (s->wait_from) {
			s->wait_ns += now_ns - s->wait_from;
			s->wait_from = 0;
		}
		b->chunk = (uint32_t)s->cur;
		/* a client that missed the announcement learns of repairs within a second */
		if (s->fresh && s->feat &&
		    (!s->featured || now_ns - s->features_ns > FEATURES_NS)) {
			struct ndz_pkt p;
			int len;

			s->fresh = 0;
			s->featured = 1;
			s->features_ns = now_ns;
			memset(&p, 0, sizeof(p));
			p.type = NDZ_PKT_FEATURES;
			p.tag = s->tag;
			p.features = s->feat;
			len = ndz_pkt_encode(&p, b->pkt[0], sizeof(b->pkt[0]), NULL);
			if (len > 0) {
				b->control = 1;
				b->count = 1;
				b->ndgrams = 1;
				b->lens[0] = (size_t)len;
				b->bufs[0] = b->pkt[0];
				return NDZ_SERVER_SEND;
			}
		}
		s->fresh = 0;
		if (s->loaded != s->cur && b->chunk >= s->ibase && s->ichunks) {
			memcpy(s->chunk, s->index + (size_t)(b->chunk - s->ibase) * NDZ_CHUNK_SIZE,
			       NDZ_CHUNK_SIZE);
			s->loaded = s->cur;
		} else if (s->loaded != s->cur && b->chunk >= s->nchunks) {
			memcpy(s->chunk, s->manifest + (size_t)(b->chunk - s->nchunks) * NDZ_CHUNK_SIZE,
			       NDZ_CHUNK_SIZE);
			s->loaded = s->cur;
		}
		if (s->loaded != s->cur)
			return NDZ_SERVER_LOAD;
		max = batch_for(s);
		while (b->count < max && ndz_serve_next(s->serve, &it)) {
			b->items[b->count].repair = it.repair;
			b->items[b->count].block = it.block;
			b->items[b->count].set = it.stripe;
			b->items[b->count].index = it.index;
			b->items[b->count].first = it.first;
			b->items[b->count].count = it.count;
			b->count++;
		}
		if (b->count) {
			group(s, b, now_ns);
			b->delay_ns = ndz_pace_delay(&s->pace, b->wire_bytes, now_ns);
			return NDZ_SERVER_SEND;
		}
		s->cur = -1;           /* the chunk is done: the next one */
	}
}

uint8_t *ndz_server_chunk_buf(struct ndz_server *s)
{
	return s->chunk;
}

int ndz_server_check_chunk(struct ndz_server *s, uint32_t i, int r, struct ndz_error *e)
{
	struct ndz_error ve = { 0 };
	struct ndz_chunk_hdr h;
	int intact = 1;

	/*
	 * The clients' own check (lib/trust/verify: header of either format, CRC, place,
	 * image) with no keys, the chunk kept as it is. A version 1 chunk cannot be
	 * judged alone (nor placed by a client, which refuses it and says why): it
	 * need only still be one.
	 */
	if (r == 0 && s->orig_version == 1) {
		r = ndz_orig_probe(s->chunk, NDZ_ORIG_HDR_AREA, NULL) == 1 ? 0 : NDZ_EMISMATCH;
	} else if (r == 0) {
		if (ndz_verify_chunk(s->verify, s->chunk, i, &h, &intact, &ve) != NDZ_VERDICT_ACCEPT)
			r = ve.code < 0 ? ve.code : NDZ_EMISMATCH;
		/* an original chunk of another version: another image put in its place */
		else if (s->orig_version && h.version != NDZ_ORIG_HVERSION(s->orig_version))
			r = NDZ_EMISMATCH;
	}
	if (r < 0) {
		s->loaded = -1;
		return ndz_error_set(e, r, 0, "%s: chunk %u: %s%s", s->name, i, ndz_strerror(r),
				     r == NDZ_ESHORTREAD ? " (the file shrank while served)" :
				     r == NDZ_EIO ? "" : " (the file changed while served)");
	}
	s->loaded = i;
	return 0;
}

void ndz_server_build_vec(struct ndz_server *s, struct ndz_server_batch *b)
{
	struct ndz_pkt p;

	if (b->control) {
		b->out[0] = (struct ndz_net_out){ b->bufs[0], b->lens[0], NULL, 0 };
		return;
	}
	memset(&p, 0, sizeof(p));
	p.tag = s->tag;
	p.chunk = b->chunk;
	for (unsigned d = 0; d < b->ndgrams; d++) {
		unsigned i = b->dg_first[d], n = b->dg_n[d];
		const uint8_t *data;
		int len;

		if (b->dg_len[d]) {
			/* a SPAN: its bytes of the chunk, where they are */
			p.type = NDZ_PKT_SPAN;
			p.block = 0;
			p.count = 0;
			p.nrep = 0;
			p.offset = b->dg_off[d];
			p.length = b->dg_len[d];
			data = s->chunk + b->dg_off[d];
			len = ndz_pkt_encode_head(&p, b->head[d], sizeof(b->head[d]), NULL);
			b->out[d] = (struct ndz_net_out){ b->head[d], len > 0 ? (size_t)len : 0,
							  data, len > 0 ? b->dg_len[d] : 0 };
			continue;
		}
		p.offset = 0;
		p.length = 0;
		if (b->items[i].repair == NDZ_SERVE_RANGE) {
			/* cannot fail: prepared at creation, range and index in range */
			(void)ndz_fec_rencode(s->fec, s->chunk, b->items[i].first, b->items[i].count,
					      b->items[i].index, b->rep[i], NULL);
			p.type = NDZ_PKT_RANGE_REPAIR;
			p.block = (uint16_t)b->items[i].first;
			p.count = (uint16_t)b->items[i].count;
			p.stripe = 0;
			p.index = (uint8_t)b->items[i].index;
			p.nrep = 0;
			data = b->rep[i];
		} else if (b->items[i].repair) {
			/* n repairs of one set: side by side in rep, one REPAIRS */
			for (unsigned k = i; k < i + n; k++)
				if (b->items[k].set == NDZ_FEC_WHOLE)
					/* cannot fail: prepared at creation, index in range */
					(void)ndz_fec_wencode(s->fec, s->chunk, b->items[k].index,
							      b->rep[k], NULL);
				else
					ndz_fec_encode(s->fec, s->chunk, b->items[k].set,
						       b->items[k].index, b->rep[k]);
			p.type = n > 1 ? NDZ_PKT_REPAIRS : NDZ_PKT_REPAIR;
			p.block = 0;
			p.count = 0;
			p.stripe = (uint8_t)b->items[i].set;
			p.index = (uint8_t)b->items[i].index;
			p.nrep = n > 1 ? (uint8_t)n : 0;
			data = b->rep[i];
		} else {
			/* a run of blocks is a run of the chunk's bytes: sent from where it is */
			p.type = n > 1 ? NDZ_PKT_BLOCKS : NDZ_PKT_BLOCK;
			p.block = (uint16_t)b->items[i].block;
			p.count = n > 1 ? (uint16_t)n : 0;
			data = s->chunk + (size_t)b->items[i].block * NDZ_BLOCK_SIZE;
		}
		/* cannot fail: the fields are in range, the head's room is its size */
		len = ndz_pkt_encode_head(&p, b->head[d], sizeof(b->head[d]), NULL);
		b->out[d] = (struct ndz_net_out){ b->head[d], len > 0 ? (size_t)len : 0, data,
						  len > 0 ? (size_t)n * NDZ_BLOCK_SIZE : 0 };
	}
}

void ndz_server_build(struct ndz_server *s, struct ndz_server_batch *b)
{
	uint8_t *arena = (uint8_t *)b->pkt;
	size_t at = 0;

	ndz_server_build_vec(s, b);
	if (b->control)
		return;
	for (unsigned d = 0; d < b->ndgrams; d++) {
		const struct ndz_net_out *o = &b->out[d];

		memcpy(arena + at, o->head, o->head_len);
		memcpy(arena + at + o->head_len, o->body, o->body_len);
		b->bufs[d] = arena + at;
		b->lens[d] = o->head_len + o->body_len;
		at += b->lens[d];
	}
}

void ndz_server_sent(struct ndz_server *s, const struct ndz_server_batch *b, uint64_t now)
{
	if (b->control)
		return;
	ndz_pace_take(&s->pace, b->wire_bytes, now);
	if (!s->first_ns)
		s->first_ns = now;
	s->empty_ns += s->wait_ns;
	s->wait_ns = 0;
	s->last_ns = now;
	for (unsigned d = 0; d < b->ndgrams; d++)
		s->bytes_sent += b->lens[d];
	s->datagrams_sent += b->ndgrams;
	s->spans_sent += b->spans;
	if (b->spans && (!s->span_min || s->span_size < s->span_min))
		s->span_min = s->span_size;
	s->multi_repairs += b->multi_repairs;
	s->offloaded += b->offloaded;
	for (unsigned i = 0; i < b->count; i++) {
		if (b->items[i].repair == NDZ_SERVE_RANGE)
			ndz_serve_range_sent(s->serve, b->chunk, NULL);
		else if (b->items[i].repair)
			ndz_serve_repair_sent(s->serve, b->chunk, b->items[i].set, NULL);
		else
			ndz_serve_sent(s->serve, b->chunk, b->items[i].block, NULL);
	}
	if (s->adapt) {
		uint64_t nr;

		s->sent_ns[b->chunk] = now;
		s->pass_sent[b->chunk] += b->count;
		ndz_adapt_sent(s->adapt, b->count);
		nr = ndz_adapt_rate(s->adapt, now);
		if (nr != s->pace.rate_bps)
			ndz_pace_set_rate(&s->pace, nr, burst_for(nr), now);
		s->last_rate = nr;
	}
}

int ndz_server_set_rate(struct ndz_server *s, uint64_t rate, uint64_t now_ns, struct ndz_error *e)
{
	if (rate < 8000)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: rate %llu bits/s: at least 8000",
				     s->name, (unsigned long long)rate);
	s->rate = rate;
	s->burst = burst_for(rate);
	s->info.rate_bps = rate;
	s->bursts = 0;
	ndz_adapt_free(s->adapt);
	s->adapt = NULL;
	ndz_pace_set_rate(&s->pace, s->rate, s->burst, now_ns);
	return 0;
}

uint64_t ndz_server_rate(const struct ndz_server *s)
{
	return s->pace.rate_bps;
}

int ndz_server_rate_step(struct ndz_server *s, struct ndz_adapt_step *st)
{
	if (!s->adapt)
		return 0;
	ndz_adapt_last(s->adapt, st);
	if (st->seq == s->traced)
		return 0;
	s->traced = st->seq;
	return 1;
}

int ndz_server_rate_trace(struct ndz_server *s, char *buf, size_t cap)
{
	struct ndz_adapt_step st;

	if (!ndz_server_rate_step(s, &st))
		return 0;
	snprintf(buf, cap, "rate %.1f Mbit/s at %.3f s: %s, %llu sent, worst client lost %llu "
		 "(%.2f%%, medium %.2f%%), losses known %.0f ms late", (double)st.rate_bps / 1e6,
		 (double)st.t_ns / 1e9, ndz_adapt_action_name(st.action),
		 (unsigned long long)st.sent, (unsigned long long)st.worst, st.loss * 100,
		 st.base * 100, (double)st.delay_ns / 1e6);
	return 1;
}

int ndz_server_idle(struct ndz_server *s, uint64_t now_ns)
{
	if (!s->over)
		s->over = s->info.idle_timeout && !ndz_serve_busy(s->serve) && s->cur < 0 &&
			  now_ns > s->last_activity_ns &&
			  now_ns - s->last_activity_ns > (uint64_t)s->info.idle_timeout * 1000000000u;
	return s->over;
}

int ndz_server_hold(struct ndz_server *s, uint64_t now_ns)
{
	if (s->over)
		return 0;
	if (now_ns > s->last_activity_ns)
		s->last_activity_ns = now_ns;
	return 1;
}

void ndz_server_get_stats(const struct ndz_server *s, struct ndz_server_stats *st)
{
	struct ndz_serve_stats ss;
	double secs;

	ndz_serve_get_stats(s->serve, &ss);
	memset(st, 0, sizeof(*st));
	st->chunks = s->nchunks;
	st->clients = s->clients_seen;
	st->joins = s->joins;
	st->leaves = s->leaves;
	st->requests = ss.requests;
	st->merged = ss.merged;
	st->dropped_current = ss.dropped_current;
	st->blocks_sent = ss.blocks_sent;
	st->distinct_sent = ss.distinct_sent;
	st->repairs_sent = ss.repairs_sent;
	st->whole_sent = ss.whole_sent;
	st->range_requests = ss.range_requests;
	st->range_sent = ss.range_sent;
	st->range_refused = s->range_refused;
	st->range_ahead = ss.range_ahead;
	st->range_cut = ss.range_cut;
	st->bytes_sent = s->bytes_sent;
	st->bad_packets = s->bad_packets;
	st->bad_version = s->bad_version;
	st->wrong_image = s->wrong_image;
	st->bad_chunk = s->bad_chunk;
	secs = s->last_ns > s->first_ns ? (double)(s->last_ns - s->first_ns) / 1e9 : 0;
	st->seconds_sending = secs;
	st->rate_bps = secs > 0 ? (double)(s->bytes_sent + s->datagrams_sent *
					   NDZ_SERVER_WIRE_OVERHEAD) * 8 / secs : 0;
	st->datagrams_sent = s->datagrams_sent;
	st->offloaded = s->offloaded;
	st->group_blocks = s->group_blocks;
	st->group_up = s->group_up;
	st->group_down = s->group_down;
	st->spans_sent = s->spans_sent;
	st->multi_repairs_sent = s->multi_repairs;
	st->span_size = s->span_size;
	st->span_min = s->span_min;
	st->gathers = s->gathers;
	st->resent_share = ss.blocks_sent ?
			   (double)(ss.blocks_sent - ss.distinct_sent) / (double)ss.blocks_sent : 0;
	st->seconds_to_first = s->first_ns ? (double)(s->first_ns - s->start_ns) / 1e9 : 0;
	st->seconds_empty = (double)s->empty_ns / 1e9;
	st->auto_rate_bps = s->last_rate;
}

int ndz_server_stats_json(const struct ndz_server_stats *st, const char *name, char *buf,
			  size_t cap, struct ndz_error *e)
{
	struct ndz_jbuf j;

	ndz_jbuf_init(&j, buf, cap);
	ndz_jbuf_printf(&j, "{\"image\": ");
	ndz_jbuf_string(&j, name);
	ndz_jbuf_printf(&j, ", \"chunks\": %u, \"clients\": %llu, "
		     "\"joins\": %llu, \"leaves\": %llu, \"requests\": %llu, \"merged\": %llu, "
		     "\"dropped_current\": %llu, \"blocks_sent\": %llu, \"distinct_blocks\": %llu, "
		     "\"repairs_sent\": %llu, \"whole_repairs_sent\": %llu, "
		     "\"range_requests\": %llu, \"range_repairs_sent\": %llu, "
		     "\"range_refused\": %llu, \"range_ahead\": %llu, \"range_repairs_cut\": %llu, "
		     "\"resent_share\": %.4f, \"bytes_sent\": %llu, \"datagrams_sent\": %llu, "
		     "\"offloaded\": %llu, "
		     "\"group_blocks\": %u, \"group_up\": %llu, \"group_down\": %llu, "
		     "\"spans_sent\": %llu, \"span_size\": %u, \"span_min\": %u, "
		     "\"multi_repairs_sent\": %llu, \"gathers\": %llu, "
		     "\"seconds_sending\": %.3f, "
		     "\"seconds_to_first\": %.3f, \"seconds_empty\": %.3f, "
		     "\"rate_bps\": %.0f, \"auto_rate_bps\": %llu, \"bad_packets\": %llu, "
		     "\"bad_version\": %llu, "
		     "\"wrong_image\": %llu, \"bad_chunk\": %llu}\n",
		     st->chunks, (unsigned long long)st->clients,
		     (unsigned long long)st->joins, (unsigned long long)st->leaves,
		     (unsigned long long)st->requests, (unsigned long long)st->merged,
		     (unsigned long long)st->dropped_current, (unsigned long long)st->blocks_sent,
		     (unsigned long long)st->distinct_sent, (unsigned long long)st->repairs_sent,
		     (unsigned long long)st->whole_sent, (unsigned long long)st->range_requests,
		     (unsigned long long)st->range_sent, (unsigned long long)st->range_refused,
		     (unsigned long long)st->range_ahead, (unsigned long long)st->range_cut,
		     st->resent_share,
		     (unsigned long long)st->bytes_sent, (unsigned long long)st->datagrams_sent,
		     (unsigned long long)st->offloaded,
		     st->group_blocks, (unsigned long long)st->group_up,
		     (unsigned long long)st->group_down, (unsigned long long)st->spans_sent,
		     st->span_size, st->span_min, (unsigned long long)st->multi_repairs_sent,
		     (unsigned long long)st->gathers,
		     st->seconds_sending,
		     st->seconds_to_first, st->seconds_empty, st->rate_bps, (unsigned long long)st->auto_rate_bps,
		     (unsigned long long)st->bad_packets, (unsigned long long)st->bad_version,
		     (unsigned long long)st->wrong_image, (unsigned long long)st->bad_chunk);
	if (j.over)
		return ndz_error_set(e, NDZ_ERANGE, 0, "server statistics: %zu bytes do not hold "
				     "the JSON", cap);
	return (int)j.len;
}

size_t ndz_server_clients(const struct ndz_server *s)
{
	return s->nclients;
}

int ndz_server_client(const struct ndz_server *s, size_t i, struct ndz_server_client *c,
		      struct ndz_error *e)
{
	if (i >= s->nclients)
		return ndz_error_set(e, NDZ_ENOENT, 0, "%s: no client %zu of %zu", s->name, i,
				     s->nclients);
	*c = s->clients[i];
	return 0;
}

enum ndz_rx_state ndz_server_client_state(const struct ndz_server *s,
					      const struct ndz_server_client *c, uint64_t now_ns)
{
	if (c->left)
		return c->left == 1 ? NDZ_RX_DONE : NDZ_RX_FAILED;
	if (now_ns > c->last_ns && now_ns - c->last_ns > s->lost_ns)
		return NDZ_RX_LOST;
	return NDZ_RX_ACTIVE;
}

const char *ndz_server_client_state_name(enum ndz_rx_state st)
{
	return ndz_sessctl_state_name(st);
}

/* Order of the client list: the most recently heard first. */
static int by_last_heard(const void *a, const void *b)
{
	const struct ndz_server_client *x = *(const struct ndz_server_client *const *)a;
	const struct ndz_server_client *y = *(const struct ndz_server_client *const *)b;

	return x->last_ns < y->last_ns ? 1 : x->last_ns > y->last_ns ? -1 : 0;
}

size_t ndz_server_states(const struct ndz_server *s, uint64_t now_ns, uint64_t counts[4],
			 struct ndz_sessctl_client *list, size_t max)
{
	const struct ndz_server_client **order;
	size_t n = 0;

	counts[0] = counts[1] = counts[2] = counts[3] = 0;
	for (size_t i = 0; i < s->nclients; i++)
		counts[ndz_server_client_state(s, &s->clients[i], now_ns)]++;
	if (!max || !(order = malloc((s->nclients + 1) * sizeof(*order))))
		return 0;
	for (size_t i = 0; i < s->nclients; i++)
		order[i] = &s->clients[i];
	qsort(order, s->nclients, sizeof(*order), by_last_heard);
	for (; n < s->nclients && n < max; n++) {
		const struct ndz_server_client *c = order[n];

		list[n] = (struct ndz_sessctl_client){
			.id = c->id, .addr = c->addr,
			.state = (uint8_t)ndz_server_client_state(s, c, now_ns),
			.chunks_done = c->progress.chunks_done,
			.chunks_total = c->reported ? c->progress.chunks_total : s->nchunks,
			.bytes_written = c->progress.bytes_written,
			.write_bps = c->rate_Bps * 8,
			.age_ns = now_ns > c->last_ns ? now_ns - c->last_ns : 0,
		};
	}
	free(order);
	return n;
}

int ndz_server_status_json(const struct ndz_server *s, uint64_t now_ns, char *buf, size_t cap,
			   struct ndz_error *e)
{
	static const size_t tail = 64;         /* the counts' room kept for the end */
	struct ndz_sessctl_client *list = malloc((s->nclients + 1) * sizeof(*list));
	struct ndz_server_stats st;
	struct ndz_jbuf j;
	uint64_t n[4];
	size_t len, listed = 0, k;
	int r;

	ndz_server_get_stats(s, &st);
	r = ndz_server_stats_json(&st, s->name, buf, cap, e);
	if (r < 0)
		goto out;
	len = (size_t)r;
	while (len && (buf[len - 1] == '\n' || buf[len - 1] == '}'))
		len--;                          /* reopen the object */
	k = list ? ndz_server_states(s, now_ns, n, list, s->nclients) : 0;
	if (!list)
		ndz_server_states(s, now_ns, n, NULL, 0);
	ndz_jbuf_init(&j, buf + len, cap - len);
	ndz_jbuf_printf(&j, ", \"receivers\": %llu, \"active\": %llu, \"done\": %llu, "
			"\"failed\": %llu, \"lost\": %llu, \"client_list\": [",
			(unsigned long long)n[0], (unsigned long long)n[0], (unsigned long long)n[1],
			(unsigned long long)n[2], (unsigned long long)n[3]);
	if (j.over || j.len + tail >= j.cap)
		goto range;
	j.cap -= tail;                  /* whole entries, as many as fit */
	for (size_t i = 0; i < k; i++) {
		size_t at = j.len;

		ndz_jbuf_printf(&j, "%s", listed ? ", " : "");
		ndz_sessctl_client_json(&list[i], &j);
		if (j.over) {
			j.len = at;
			j.p[at] = 0;
			j.over = 0;
			break;
		}
		listed++;
	}
	j.cap += tail;
	ndz_jbuf_printf(&j, "], \"clients_listed\": %zu}\n", listed);
	if (j.over)
		goto range;
	r = (int)(len + j.len);
	goto out;
range:
	r = ndz_error_set(e, NDZ_ERANGE, 0, "server status: %zu bytes do not hold the JSON", cap);
out:
	free(list);
	return r;
}

const char *ndz_server_name(const struct ndz_server *s)
{
	return s->name;
}

const struct ndz_join_info *ndz_server_info(const struct ndz_server *s)
{
	return &s->info;
}

int ndz_server_image(struct ndz_io *img, struct ndz_server_opts *o, struct ndz_error *e)
{
	struct ndz_image_reader *r;
	const struct ndz_chunk_hdr *h0;
	int rc = ndz_image_reader_open(img, &r, e);

	if (rc < 0)
		return rc;
	h0 = ndz_image_reader_first(r);
	memcpy(o->info.uuid, h0->uuid, 16);
	o->info.chunks = ndz_image_reader_chunks(r);
	o->info.block_size = NDZ_BLOCK_SIZE;
	o->info.blocks_per_chunk = NDZ_BLOCKS_PER_CHUNK;
	o->info.image_bytes = img->size;
	o->info.source_bytes = h0->source_bytes;
	o->orig_version = NDZ_IS_ORIG(h0) ? h0->version - NDZ_ORIG_HVERSION(0) : 0;
	ndz_image_reader_free(r);
	return 0;
}

int ndz_server_manifest(const char *image, const char *path, struct ndz_server_opts *o,
			struct ndz_error *e)
{
	struct ndz_error le = { 0 };
	char def[4096];
	uint8_t *b;
	size_t len;
	int r, given = path != NULL;

	o->manifest = NULL;
	o->manifest_len = 0;
	if (!given) {
		if (ndz_manifest_path(image, def, sizeof(def), NULL) < 0)
			return 0;
		path = def;
	}
	r = ndz_manifest_read(path, &b, &len, &le);
	if (r == NDZ_EUNSIGNED && !given)
		return 0;
	if (r == 0 && ndz_manifest_check_shape(b, len, o->info.chunks, NULL) < 0) {
		free(b);
		r = ndz_error_set(&le, NDZ_EMANIFEST, 0, "%s: %s: not the manifest of an image "
				  "of %u chunks", path, ndz_strerror(NDZ_EMANIFEST), o->info.chunks);
	}
	/* a file found beside the image that is not its manifest: serve none, say why */
	if (r < 0) {
		ndz_error_copy(e, &le);
		return given ? r : 1;
	}
	o->manifest = b;
	o->manifest_len = len;
	return 0;
}

uint32_t ndz_server_index_base(uint32_t chunks)
{
	uint64_t m = ((uint64_t)ndz_manifest_size(chunks) + NDZ_CHUNK_SIZE - 1) / NDZ_CHUNK_SIZE;

	return (uint32_t)((uint64_t)chunks + m);
}

/* The bytes of the index file at path (at most 4 GiB) into *b, malloc'ed. */
static int read_index(const char *path, uint8_t **b, size_t *len, struct ndz_error *e)
{
	struct ndz_io *io;
	int r;

	if ((r = ndz_io_open_file(path, 0, &io, e)) < 0)
		return r;
	if (!io->size || io->size > (1ull << 32)) {
		ndz_io_close(io);
		return ndz_error_set(e, NDZ_EINDEX, 0, "%s: %s", path, ndz_strerror(NDZ_EINDEX));
	}
	*len = (size_t)io->size;
	*b = malloc(*len);
	if (!*b)
		r = ndz_error_set(e, NDZ_ENOMEM, 0, "%s: out of memory", path);
	else
		r = ndz_io_read_full(io, *b, *len, 0, NULL, e);
	ndz_io_close(io);
	return r;
}

int ndz_server_index(const char *image, const char *path, struct ndz_server_opts *o,
		     struct ndz_error *e)
{
	struct ndz_error le = { 0 };
	struct ndz_index ix = { 0 };
	char def[4096];
	uint8_t *b = NULL;
	size_t len = 0;
	int r, given = path != NULL;

	o->index = NULL;
	o->index_len = 0;
	if (!given) {
		if (ndz_index_path(image, def, sizeof(def), NULL) < 0 || access(def, F_OK) != 0)
			return 0;
		path = def;
	}
	r = read_index(path, &b, &len, &le);
	if (r == 0) {
		if ((r = ndz_index_decode(b, len, NULL, &ix, &le)) == 0)
			r = ndz_index_match(&ix, o->info.uuid, o->info.source_bytes,
					    o->info.chunks, &le);
		if (r < 0)
			ndz_error_prefix(&le, "%s", path);
	}
	ndz_index_release(&ix);
	/* a file found beside the image that is not its index: serve none, say why */
	if (r < 0) {
		free(b);
		ndz_error_copy(e, &le);
		return given ? r : 1;
	}
	o->index = b;
	o->index_len = len;
	return 0;
}
