/*
 * frisbee: receive an image from frisbeed over UDP multicast and restore it.
 * The network thread (main) fills a cache of partly received chunks and sends
 * requests; a feeder thread hands each complete, CRC-checked chunk to the shared
 * restore pipeline (lib/unzip: decompression threads and one writer thread).
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "cli/cli.h"
#include "err.h"
#include "format.h"
#include "io.h"
#include "net.h"
#include "pace.h"
#include "proto.h"
#include "unzip.h"

#define BLOCKS NDZ_BLOCKS_PER_CHUNK
#define MS 1000000ull

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
};

struct client {
	/* options */
	const char *target_path;
	uint32_t server;               /* required BLOCK source; 0: learn from JOIN_REPLY */
	int zero_fill, raw, progress, request_ahead, give_up_s;
	size_t nslots;
	uint64_t redelay_ns;

	struct ndz_net *net;
	uint32_t id, tag;
	struct ndz_join_info info;
	uint32_t n;                    /* chunks */
	uint8_t *cstate;
	int32_t *cslot;                /* per chunk: its slot when C_FILL */
	uint64_t *last_req;            /* per chunk: last covering request seen or sent */
	uint32_t *order;               /* random request order */
	uint32_t next_order;           /* order[] before this are requested at least once */
	struct slot *slots;
	int64_t last_block_chunk;
	uint64_t last_server_ns, last_block_ns, silence_wait_ns, next_silence_ns;

	/* shared with the feeder thread, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	uint32_t *fifo;                /* slot indices waiting to be written */
	size_t fifo_head, fifo_len;
	uint32_t done;                 /* chunks handed to the writer */
	uint32_t complete;             /* chunks checked and queued for the writer */
	int kick;                      /* something changed: look at requests now */
	int failed, stop, abandon;
	char errmsg[512];

	struct ndz_io *target;
	struct ndz_unzip *unzip;
	struct cli_progress prog;

	/* statistics */
	uint64_t blocks, dups, requests, bad, bad_version, foreign, no_room, crc_fail, joins;
	uint64_t start_ns;
};

static const char usage_text[] =
	"Usage: frisbee [options] -m ADDR -p PORT TARGET\n"
	"Receive an image from frisbeed over UDP multicast and restore it to TARGET.\n\n"
	"  -m, --group ADDR       multicast group\n"
	"  -p, --port PORT        UDP port\n"
	"  -i, --interface IFACE  interface name or address to use\n"
	"  -S, --server ADDR      accept blocks only from this server address\n"
	"  -z, --zero             zero-fill the parts of TARGET the image does not cover\n"
	"  -C, --cache MIB        chunk cache size in MiB (default 64)\n"
	"  -R, --request-ahead N  chunks to request ahead (default 2)\n"
	"  -T, --timeout SECONDS  give up after this long without the server (default 30)\n"
	"  -r, --raw              store the image itself in TARGET instead of restoring it\n"
	"  -o, --progress         show progress\n"
	"  -q, --quiet            no summary line\n"
	"  -v, --verbose          more messages\n"
	"  -h, --help             this help\n"
	"  -V, --version          show the version and exit\n"
	"\nExit status: 0 every chunk checked, written and flushed; 1 failure; 2 bad usage.\n";

static int send_pkt(struct client *c, struct ndz_pkt *p)
{
	uint8_t buf[NDZ_PKT_MAX];
	int len;

	p->client_id = c->id;
	p->tag = c->tag;
	len = ndz_pkt_encode(p, buf, sizeof(buf));
	if (len < 0)
		return len;
	return ndz_net_send(c->net, buf, (size_t)len);
}

static void request_full(struct client *c, uint32_t chunk, uint64_t now)
{
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_REQUEST;
	p.chunk = chunk;
	p.block = 0;
	p.count = BLOCKS;
	if (send_pkt(c, &p) == 0)
		c->requests++;
	c->last_req[chunk] = now;
	if (cli_verbose > 2)
		cli_info("request chunk %u", chunk);
}

static void request_missing(struct client *c, struct slot *s, uint64_t now)
{
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_PREQUEST;
	p.chunk = s->chunk;
	for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++)
		p.bitmap[i] = (uint8_t)~s->have[i];
	if (send_pkt(c, &p) == 0)
		c->requests++;
	c->last_req[s->chunk] = now;
	s->moved_on = 0;
	if (cli_verbose > 2)
		cli_info("request %u missing blocks of chunk %u", BLOCKS - s->nhave, s->chunk);
}

/* Free slots not yet promised to a chunk someone requested. */
static size_t free_slots(struct client *c)
{
	size_t n = 0;

	for (size_t i = 0; i < c->nslots; i++)
		n += c->slots[i].state == S_FREE;
	return n;
}

/*
 * Send the requests due now: missing blocks of partial chunks first, then new
 * chunks in random order until request_ahead chunks are on their way. A chunk
 * someone (we or another client) asked for within the re-request delay is not
 * asked for again: that is the NAK suppression.
 */
static void send_requests(struct client *c, uint64_t now, int silent)
{
	size_t inflight = 0, avail;

	for (size_t i = 0; i < c->nslots; i++) {
		struct slot *s = &c->slots[i];

		if (s->state != S_FILL)
			continue;
		if (silent || (s->moved_on && now - c->last_req[s->chunk] > 20 * MS) ||
		    (now - s->last_block_ns > c->redelay_ns &&
		     now - c->last_req[s->chunk] > c->redelay_ns))
			request_missing(c, s, now);
		else if (!s->moved_on)
			inflight++;
	}
	avail = free_slots(c);
	/* chunks requested by anyone (us or others) and not started yet are on their way too */
	for (uint32_t ch = 0; ch < c->n; ch++) {
		if (c->cstate[ch] != C_NEED || !c->last_req[ch])
			continue;      /* (a chunk dropped after a bad checksum has last_req 1) */
		if (silent || now - c->last_req[ch] > c->redelay_ns) {
			if (avail == 0)
				continue;
			request_full(c, ch, now);
		}
		inflight++;
		if (avail)
			avail--;
	}
	while (inflight < (size_t)c->request_ahead && avail > 0 && c->next_order < c->n) {
		uint32_t ch = c->order[c->next_order++];

		if (c->cstate[ch] != C_NEED || c->last_req[ch])
			continue;      /* being received, done, or counted above */
		request_full(c, ch, now);
		inflight++;
		avail--;
	}
}

/* A request seen on the group (ours looped back or another client's). */
static void snoop_request(struct client *c, const struct ndz_pkt *p, uint64_t now)
{
	uint8_t bm[NDZ_BITMAP_BYTES];
	int st = c->cstate[p->chunk];

	if (st == C_QUEUED || st == C_DONE)
		return;
	if (p->type == NDZ_PKT_REQUEST) {
		memset(bm, 0, sizeof(bm));
		for (unsigned b = p->block; b < (unsigned)p->block + p->count; b++)
			ndz_bit_set(bm, b);
	} else {
		memcpy(bm, p->bitmap, sizeof(bm));
	}
	for (unsigned i = 0; i < NDZ_BITMAP_BYTES; i++) {
		uint8_t missing = st == C_FILL ? (uint8_t)~c->slots[c->cslot[p->chunk]].have[i] : 0xff;

		if (missing & ~bm[i])
			return;        /* does not cover all we lack */
	}
	c->last_req[p->chunk] = now;
	if (st == C_FILL)
		c->slots[c->cslot[p->chunk]].moved_on = 0;
}

static void chunk_complete(struct client *c, struct slot *s)
{
	struct ndz_chunk_hdr *h = malloc(sizeof(*h));
	int r = h ? ndz_chunk_check(s->buf, h) : NDZ_ENOMEM;

	if (r == 0 && (h->index != s->chunk || memcmp(h->uuid, c->info.uuid, 16) != 0))
		r = NDZ_EMISMATCH;
	free(h);
	if (r < 0) {
		/* Forged or corrupted blocks got in: drop the chunk and fetch it again. */
		c->crc_fail++;
		if (cli_verbose)
			cli_warn("chunk %u: %s; requesting it again", s->chunk, ndz_strerror(r));
		c->cstate[s->chunk] = C_NEED;
		c->last_req[s->chunk] = 1;  /* long ago: ask again now */
		s->state = S_FREE;
		return;
	}
	/* the caller holds c->lock */
	s->state = S_QUEUED;
	c->cstate[s->chunk] = C_QUEUED;
	c->complete++;
	c->fifo[(c->fifo_head + c->fifo_len) % c->nslots] = (uint32_t)(s - c->slots);
	c->fifo_len++;
	c->kick = 1;
	pthread_cond_broadcast(&c->cond);
}

static void got_block(struct client *c, const struct ndz_pkt *p, uint64_t now)
{
	struct slot *s = NULL;
	int st = c->cstate[p->chunk];

	c->last_server_ns = now;
	c->last_block_ns = now;
	if (c->last_block_chunk >= 0 && c->last_block_chunk != (int64_t)p->chunk &&
	    c->cstate[c->last_block_chunk] == C_FILL) {
		c->slots[c->cslot[c->last_block_chunk]].moved_on = 1;
		c->kick = 1;
	}
	c->last_block_chunk = p->chunk;
	if (st == C_QUEUED || st == C_DONE) {
		c->dups++;
		return;
	}
	if (st == C_NEED) {
		for (size_t i = 0; i < c->nslots; i++)
			if (c->slots[i].state == S_FREE) {
				s = &c->slots[i];
				break;
			}
		if (!s) {
			c->no_room++;
			return;
		}
		if (!s->buf && !(s->buf = malloc(NDZ_CHUNK_SIZE))) {
			c->no_room++;
			return;
		}
		s->state = S_FILL;
		s->chunk = p->chunk;
		s->nhave = 0;
		s->moved_on = 0;
		memset(s->have, 0, sizeof(s->have));
		c->cstate[p->chunk] = C_FILL;
		c->cslot[p->chunk] = (int32_t)(s - c->slots);
	} else {
		s = &c->slots[c->cslot[p->chunk]];
	}
	s->last_block_ns = now;
	if (ndz_bit_test(s->have, p->block)) {
		c->dups++;
		return;
	}
	c->blocks++;
	memcpy(s->buf + (size_t)p->block * NDZ_BLOCK_SIZE, p->data, NDZ_BLOCK_SIZE);
	ndz_bit_set(s->have, p->block);
	if (++s->nhave == BLOCKS)
		chunk_complete(c, s);
}

/* Hands complete chunks to the restore pipeline (which may block) off the network thread. */
static void *feeder(void *arg)
{
	struct client *c = arg;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		struct slot *s;
		int r;

		while (!c->fifo_len && !c->stop)
			pthread_cond_wait(&c->cond, &c->lock);
		if (!c->fifo_len || c->abandon)
			break;
		s = &c->slots[c->fifo[c->fifo_head]];
		pthread_mutex_unlock(&c->lock);
		if (c->raw)
			r = ndz_io_write_full(c->target, s->buf, NDZ_CHUNK_SIZE,
					      (uint64_t)s->chunk * NDZ_CHUNK_SIZE);
		else
			r = ndz_unzip_put(c->unzip, s->buf);
		pthread_mutex_lock(&c->lock);
		c->fifo_head = (c->fifo_head + 1) % c->nslots;
		c->fifo_len--;
		if (r < 0 && !c->failed) {
			c->failed = 1;
			if (c->raw)
				snprintf(c->errmsg, sizeof(c->errmsg), "%s: %s", c->target_path,
					 c->target->sys_errno ? strerror(c->target->sys_errno)
							      : ndz_strerror(r));
			else
				snprintf(c->errmsg, sizeof(c->errmsg), "%s: %s", c->target_path,
					 ndz_unzip_errmsg(c->unzip));
		}
		c->cstate[s->chunk] = C_DONE;
		s->state = S_FREE;
		c->done++;
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static void send_leave(struct client *c, int status)
{
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_LEAVE;
	p.leave.elapsed_ms = (uint32_t)((ndz_now_ns() - c->start_ns) / MS);
	p.leave.status = (uint32_t)status;
	p.leave.blocks_received = c->blocks;
	p.leave.duplicates = c->dups;
	p.leave.requests_sent = c->requests;
	p.leave.bytes_written = (uint64_t)c->done * NDZ_CHUNK_SIZE;
	p.leave.chunks_done = c->done;
	send_pkt(c, &p);
}

/* Classify and count a datagram; returns 1 with *p filled when it is usable. */
static int accept_pkt(struct client *c, const uint8_t *buf, int len, uint32_t from,
		      struct ndz_pkt *p)
{
	int r = ndz_pkt_decode(buf, (size_t)len, p);

	if (r == NDZ_EPROTOVER) {
		c->bad_version++;
		return 0;
	}
	if (r < 0) {
		c->bad++;
		return 0;
	}
	if ((p->type == NDZ_PKT_BLOCK || p->type == NDZ_PKT_JOIN_REPLY) && c->server &&
	    from != c->server) {
		c->foreign++;
		return 0;
	}
	return 1;
}

static void send_join(struct client *c, const char *group, unsigned port)
{
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_JOIN;
	if (send_pkt(c, &p) < 0)
		cli_die(EXIT_FAIL, "send to %s port %u: %s", group, port, strerror(errno));
	c->joins++;
	if (cli_verbose > 1)
		cli_info("join sent");
}

/*
 * Join: ask until a server answers, backing off from 0.5 s to 2 s; give up after -T.
 * Traffic of a transfer already under way (blocks, other clients' requests) means a
 * server is there and our JOIN or its reply was lost: ask again at once (at most every
 * 50 ms) rather than at the next back-off step, so as to miss as little as possible.
 */
static void join(struct client *c, const char *group, unsigned port)
{
	uint8_t buf[2048];
	uint64_t start = ndz_now_ns(), next = start, wait = 500 * MS, last = 0, until;
	uint64_t deadline = start + (uint64_t)c->give_up_s * 1000 * MS;
	int traffic = 0;
	struct ndz_pkt p;
	uint32_t from;

	for (;;) {
		uint64_t now = ndz_now_ns();
		int n;

		if (now >= deadline)
			cli_die(EXIT_FAIL, "no server answered on %s port %u within %d s",
				group, port, c->give_up_s);
		if (now >= next || (traffic && now - last >= 50 * MS)) {
			send_join(c, group, port);
			last = now;
			traffic = 0;
			if (now >= next) {
				next = now + wait;
				if (wait < 2000 * MS)
					wait *= 2;
			}
		}
		until = next < deadline ? next : deadline;
		if (traffic && last + 50 * MS < until)
			until = last + 50 * MS;
		n = ndz_net_recv(c->net, buf, sizeof(buf), (int)((until - now) / MS) + 1, &from);
		if (n < 0)
			cli_die(EXIT_FAIL, "receive on %s port %u: %s", group, port, strerror(errno));
		if (n <= 0 || !accept_pkt(c, buf, n, from, &p))
			continue;
		if (p.type == NDZ_PKT_JOIN_REPLY) {
			char a[16];

			c->info = p.info;
			c->tag = p.tag;
			if (!c->server)
				c->server = from;
			if (cli_verbose)
				cli_info("server %s: %u chunks, image %s", ndz_net_ntoa(from, a),
					 p.info.chunks, "joined");
			return;
		}
		if (p.type == NDZ_PKT_BLOCK || p.type == NDZ_PKT_REQUEST ||
		    p.type == NDZ_PKT_PREQUEST) {
			if (!traffic && cli_verbose > 1)
				cli_info("a transfer is under way; asking to join now");
			traffic = 1;
		}
	}
}

static void setup(struct client *c)
{
	uint32_t seed;

	c->n = c->info.chunks;
	c->cstate = calloc(c->n, 1);
	c->cslot = calloc(c->n, sizeof(*c->cslot));
	c->last_req = calloc(c->n, sizeof(*c->last_req));
	c->order = calloc(c->n, sizeof(*c->order));
	c->slots = calloc(c->nslots, sizeof(*c->slots));
	c->fifo = calloc(c->nslots, sizeof(*c->fifo));
	if (!c->cstate || !c->cslot || !c->last_req || !c->order || !c->slots || !c->fifo)
		cli_die(EXIT_FAIL, "out of memory for %u chunks", c->n);
	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint32_t)ndz_now_ns();
	srandom(seed ^ c->id);
	for (uint32_t i = 0; i < c->n; i++)
		c->order[i] = i;
	for (uint32_t i = c->n; i > 1; i--) {
		uint32_t j = (uint32_t)random() % i, t = c->order[i - 1];

		c->order[i - 1] = c->order[j];
		c->order[j] = t;
	}
}

static void open_target(struct client *c)
{
	struct ndz_unzip_opts uo;
	uint64_t need = c->raw ? c->info.image_bytes : c->info.source_bytes;
	int r, created = 0;

	r = ndz_io_open_target(c->target_path, need, &created, &c->target);
	if (r < 0)
		cli_die(EXIT_FAIL, "%s: %s", c->target_path,
			r == NDZ_ENOTSUP ? "not a regular file or block device" : strerror(errno));
	if (c->raw && c->target->is_regular && c->target->size != need &&
	    ndz_io_set_size(c->target, need) < 0)
		cli_die(EXIT_FAIL, "%s: %s", c->target_path, strerror(c->target->sys_errno));
	if (c->target->size < need)
		cli_die(EXIT_FAIL, "%s: %s (%llu bytes, the image needs %llu)", c->target_path,
			ndz_strerror(NDZ_ETOOSMALL), (unsigned long long)c->target->size,
			(unsigned long long)need);
	if (c->raw)
		return;
	ndz_unzip_opts_init(&uo);
	uo.zero_fill = c->zero_fill;
	uo.target_zeroed = created;
	r = ndz_unzip_create(c->target, &uo, &c->unzip);
	if (r < 0)
		cli_die(EXIT_FAIL, "%s: %s", c->target_path, ndz_strerror(r));
}

static int finish(struct client *c)
{
	struct ndz_unzip_stats us;
	int r;

	if (c->raw)
		return c->target->ops->flush(c->target);
	r = ndz_unzip_finish(c->unzip, &us);
	if (r < 0)
		snprintf(c->errmsg, sizeof(c->errmsg), "%s: %s", c->target_path,
			 ndz_unzip_errmsg(c->unzip));
	return r;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "group", required_argument, NULL, 'm' },
		{ "port", required_argument, NULL, 'p' },
		{ "interface", required_argument, NULL, 'i' },
		{ "server", required_argument, NULL, 'S' },
		{ "zero", no_argument, NULL, 'z' },
		{ "cache", required_argument, NULL, 'C' },
		{ "request-ahead", required_argument, NULL, 'R' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "raw", no_argument, NULL, 'r' },
		{ "progress", no_argument, NULL, 'o' },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	struct client c;
	struct ndz_net_opts no = { .port = 0, .ttl = 5, .loop = 1 };
	uint8_t buf[2048];
	char err[256];
	pthread_t ft;
	int opt, r, code = EXIT_OK, cache_mib = 64;
	uint64_t start, next_look = 0;

	cli_init(argv[0]);
	memset(&c, 0, sizeof(c));
	c.request_ahead = 2;
	c.give_up_s = 30;
	c.redelay_ns = 1000 * MS;
	while ((opt = getopt_long(argc, argv, "m:p:i:S:zC:R:T:roqvhV", lopts, NULL)) != -1) {
		switch (opt) {
		case 'm': no.group = optarg; break;
		case 'p': no.port = (uint16_t)cli_parse_int(optarg, "-p", 1, 65535); break;
		case 'i': no.iface = optarg; break;
		case 'S':
			if (ndz_net_addr(optarg, &c.server) != 0)
				cli_usage_error("-S: bad IPv4 address '%s'", optarg);
			break;
		case 'z': c.zero_fill = 1; break;
		case 'C': cache_mib = cli_parse_int(optarg, "-C", 2, 65536); break;
		case 'R': c.request_ahead = cli_parse_int(optarg, "-R", 1, 1024); break;
		case 'T': c.give_up_s = cli_parse_int(optarg, "-T", 1, 1000000); break;
		case 'r': c.raw = 1; break;
		case 'o': c.progress = 1; break;
		default: cli_common_option(opt, usage_text); break;
		}
	}
	if (!no.group || !no.port)
		cli_usage_error("-m ADDR and -p PORT are required");
	if (optind != argc - 1)
		cli_usage_error("expected one TARGET argument");
	c.target_path = argv[optind];
	c.nslots = (size_t)cache_mib;
	signal(SIGPIPE, SIG_IGN);
	r = ndz_net_open(&no, &c.net, err, sizeof(err));
	if (r < 0)
		cli_die(EXIT_FAIL, "%s", err);
	if (getrandom(&c.id, sizeof(c.id), 0) != sizeof(c.id))
		c.id = (uint32_t)ndz_now_ns();
	c.start_ns = start = ndz_now_ns();
	join(&c, no.group, no.port);
	setup(&c);
	open_target(&c);
	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	if (pthread_create(&ft, NULL, feeder, &c))
		cli_die(EXIT_FAIL, "cannot start a thread");
	cli_progress_init(&c.prog, c.target_path, c.info.image_bytes, c.progress && !cli_quiet);
	c.last_block_chunk = -1;
	c.last_server_ns = c.last_block_ns = ndz_now_ns();
	c.silence_wait_ns = 40 * MS;
	c.next_silence_ns = c.last_block_ns + c.silence_wait_ns;
	send_requests(&c, ndz_now_ns(), 0);
	for (;;) {
		struct ndz_pkt p;
		uint32_t from, complete, done;
		uint64_t now;
		int n, failed;

		pthread_mutex_lock(&c.lock);
		done = c.done;
		failed = c.failed;
		complete = c.complete;
		pthread_mutex_unlock(&c.lock);
		if (failed || complete == c.n)
			break;
		if (c.progress)
			cli_progress_update(&c.prog, (uint64_t)done * NDZ_CHUNK_SIZE);
		n = ndz_net_recv(c.net, buf, sizeof(buf), 20, &from);
		if (n < 0) {
			snprintf(c.errmsg, sizeof(c.errmsg), "receive: %s", strerror(errno));
			code = EXIT_FAIL;
			break;
		}
		now = ndz_now_ns();
		if (n > 0 && accept_pkt(&c, buf, n, from, &p)) {
			pthread_mutex_lock(&c.lock);
			switch (p.type) {
			case NDZ_PKT_BLOCK:
				if (p.tag != c.tag || p.chunk >= c.n)
					c.foreign++;
				else
					got_block(&c, &p, now);
				break;
			case NDZ_PKT_REQUEST:
			case NDZ_PKT_PREQUEST:
				if (p.tag == c.tag && p.chunk < c.n)
					snoop_request(&c, &p, now);
				break;
			case NDZ_PKT_JOIN_REPLY:
				if (p.tag == c.tag)
					c.last_server_ns = now;
				break;
			}
			pthread_mutex_unlock(&c.lock);
		}
		if (now - c.last_server_ns > (uint64_t)c.give_up_s * 1000 * MS) {
			char a[16];

			snprintf(c.errmsg, sizeof(c.errmsg),
				 "no data from server %s for %d s; giving up",
				 ndz_net_ntoa(c.server, a), c.give_up_s);
			code = EXIT_FAIL;
			break;
		}
		pthread_mutex_lock(&c.lock);
		if (now - c.last_block_ns > c.silence_wait_ns && now >= c.next_silence_ns) {
			/* The server is silent: ask for everything again, backing off. */
			if (cli_verbose > 1)
				cli_info("server silent for %llu ms; asking again",
					 (unsigned long long)((now - c.last_block_ns) / MS));
			send_requests(&c, now, 1);
			if (c.silence_wait_ns < 2000 * MS)
				c.silence_wait_ns *= 2;
			c.next_silence_ns = now + c.silence_wait_ns;
			c.kick = 0;
			next_look = now + 5 * MS;
		} else if (c.kick || now >= next_look) {
			if (now - c.last_block_ns < 20 * MS)
				c.silence_wait_ns = 40 * MS;
			send_requests(&c, now, 0);
			c.kick = 0;
			next_look = now + 5 * MS;
		}
		pthread_mutex_unlock(&c.lock);
	}
	pthread_mutex_lock(&c.lock);
	c.stop = 1;
	if (code != EXIT_OK)
		c.abandon = 1;         /* what is not written yet stays unwritten */
	pthread_cond_broadcast(&c.cond);
	pthread_mutex_unlock(&c.lock);
	pthread_join(ft, NULL);
	if (code == EXIT_OK && c.failed)
		code = EXIT_FAIL;
	if (code == EXIT_OK && finish(&c) < 0) {
		if (!c.errmsg[0])
			snprintf(c.errmsg, sizeof(c.errmsg), "%s: cannot flush", c.target_path);
		code = EXIT_FAIL;
	}
	send_leave(&c, code != EXIT_OK);
	if (c.progress)
		cli_progress_end(&c.prog, (uint64_t)c.done * NDZ_CHUNK_SIZE);
	if (code != EXIT_OK) {
		cli_error("%s", c.errmsg);
	} else if (!cli_quiet) {
		double secs = (double)(ndz_now_ns() - start) / 1e9;

		fprintf(stderr, "%s: %u chunks in %.2f s (%.1f MB/s), %llu blocks received, "
			"%llu duplicates, %llu requests sent\n", cli_progname, c.n, secs,
			secs > 0 ? (double)c.info.image_bytes / 1e6 / secs : 0.0,
			(unsigned long long)c.blocks, (unsigned long long)c.dups,
			(unsigned long long)c.requests);
	}
	if (cli_verbose)
		cli_info("dropped: %llu malformed, %llu other version, %llu foreign, %llu no room, "
			 "%llu chunks failed their checksum", (unsigned long long)c.bad,
			 (unsigned long long)c.bad_version, (unsigned long long)c.foreign,
			 (unsigned long long)c.no_room, (unsigned long long)c.crc_fail);
	ndz_unzip_free(c.unzip);
	ndz_io_close(c.target);
	ndz_net_free(c.net);
	for (size_t i = 0; i < c.nslots && c.slots; i++)
		free(c.slots[i].buf);
	free(c.slots);
	free(c.fifo);
	free(c.cstate);
	free(c.cslot);
	free(c.last_req);
	free(c.order);
	return code;
}
