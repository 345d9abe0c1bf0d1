/*
 * frisbee: receive an image from frisbeed over UDP multicast and restore it.
 * The network thread (main) fills a cache of partly received chunks and sends
 * requests; a feeder thread checks each complete chunk (CRC or signed hash, and
 * decrypts it) and hands it to the shared restore pipeline (lib/unzip:
 * decompression threads and one writer thread), or has it fetched again.
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
#include "core/err.h"
#include "mcast/fetch.h"
#include "core/format.h"
#include "core/io.h"
#include "master.h"
#include "mcast/net.h"
#include "core/orig.h"
#include "mcast/pace.h"
#include "mcast/proto.h"
#include "core/target.h"
#include "trust/trust.h"
#include "codec/unzip.h"

#define BLOCKS NDZ_BLOCKS_PER_CHUNK
#define MS 1000000ull
#define BATCH 64u                      /* datagrams taken at once */

struct client {
	/* options */
	const char *target_path;
	uint32_t server;               /* required BLOCK source; 0: learn from JOIN_REPLY */
	const uint8_t *want_uuid;      /* the image the master named (-M); NULL: any */
	int no_repair;                 /* --no-repair: behave as a client without repairs */
	int no_whole;                  /* --no-whole-repair: as a client with stripe repairs only */
	unsigned repair;               /* NDZ_FEAT_* repairs the server announced: we ask for them */
	int zero_fill, discard, raw, progress, request_ahead, give_up_s;
	size_t nslots;
	uint64_t redelay_ns;
	const char *manifest_path;     /* --manifest */
	struct ndz_key pub, crypt;     /* --key: type NDZ_KEY_NONE when not given */
	struct ndz_manifest m;         /* with pub: every chunk must be the one it signs */

	struct ndz_net *net;
	uint32_t id, tag;
	struct ndz_join_info info;
	uint64_t room;                 /* what the target holds; UINT64_MAX: no bound */
	uint64_t ignored;              /* JOIN_REPLYs ignored: the last one's why, what, who */
	int ignored_why;
	struct ndz_join_info ignored_info;
	uint32_t ignored_from;
	uint32_t n;                    /* chunks */
	uint64_t last_server_ns, last_block_ns, silence_wait_ns, next_silence_ns;

	/* shared with the feeder thread, under lock */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct ndz_fetch *fetch;       /* chunk cache and request scheduling */
	struct ndz_chunk_hdr *hdrs;    /* per slot: the checked header of its chunk */
	uint32_t *fifo;                /* slots waiting to be written */
	size_t fifo_head, fifo_len;
	int failed, stop, abandon;
	struct ndz_error err;          /* why the load failed */
	struct ndz_error ferr;         /* the feeder's reason to stop (a key that cannot open
					  an authentic chunk); err takes it after the join */
	char source[40];               /* "server ADDR": the image, in messages */
	uint64_t accept_ns;            /* when a chunk last checked out (or the start) */
	uint32_t rejects;              /* complete chunks that failed their checks since */
	uint32_t reject_chunk;         /* the last of them, */
	int reject_why;                /* and why (NDZ_E*) */

	struct ndz_io *target;
	struct ndz_unzip *unzip;
	struct cli_progress prog;

	/* statistics */
	uint64_t requests, bad, bad_version, foreign, crc_fail, forged, joins;
	uint64_t start_ns;
};

static const char usage_text[] =
	"Usage: frisbee [options] -m ADDR -p PORT TARGET\n"
	"       frisbee [options] -M HOST[:PORT] -I NAME TARGET\n"
	"Receive an image from frisbeed over UDP multicast and restore it to TARGET.\n\n"
	"  -m, --group ADDR       multicast group\n"
	"  -p, --port PORT        UDP port\n"
	"  -i, --interface IFACE  interface name or address to use\n"
	"  -S, --server ADDR      accept blocks only from this server address\n"
	"  -M, --master HOST[:PORT]  ask this image master (mfrisbeed) where image -I is\n"
	"  -I, --image NAME       the image to ask the master for\n"
	"  -z, --zero             zero-fill the parts of TARGET the image does not cover\n"
	"      --discard          discard those parts instead (BLKDISCARD; a hole in a file)\n"
	"  -C, --cache MIB        chunk cache size in MiB (default 64)\n"
	"  -R, --request-ahead N  chunks to request ahead (default 2)\n"
	"  -T, --timeout SECONDS  give up after this long without the server, or without\n"
	"                         a chunk that checks out (default 30)\n"
	"  -r, --raw              store the image itself in TARGET instead of restoring it\n"
	"  -f, --force            write to TARGET even while it is in use (mounted, swap,\n"
	"                         held, or the file behind a loop device in use)\n"
	"  --no-repair            ask for lost blocks, never for repair blocks\n"
	"  --no-whole-repair      ask for repairs of stripes only, not of whole chunks\n"
	"  -k, --key FILE         a public key: accept only chunks the image's signed\n"
	"                         manifest names (fetched from the server first);\n"
	"                         an encryption key: decrypt (give both if need be)\n"
	"      --manifest FILE    use this signed manifest, not the server's\n"
	"      --orig-key FILE    an original Frisbee V4 image's Blowfish key file\n"
	"  -o, --progress         show progress and the time left: a line redrawn on a\n"
	"                         terminal, else a plain line every few seconds\n"
	"      --progress=json    progress as one JSON object a line (see the man page)\n"
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

/* ndz_fetch_emit: send one request to the group. */
static void send_request(void *ctx, uint32_t chunk, const uint8_t *missing, const uint8_t *need)
{
	struct client *c = ctx;
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.chunk = chunk;
	if (need) {
		p.type = NDZ_PKT_RREQUEST;
		memcpy(p.need, need, sizeof(p.need));
	} else if (missing) {
		p.type = NDZ_PKT_PREQUEST;
		memcpy(p.bitmap, missing, sizeof(p.bitmap));
	} else {
		p.type = NDZ_PKT_REQUEST;
		p.block = 0;
		p.count = BLOCKS;
	}
	if (send_pkt(c, &p) == 0)
		c->requests++;
	if (cli_verbose > 2) {
		if (need)
			cli_info("request repairs of chunk %u", chunk);
		else if (missing)
			cli_info("request %u missing blocks of chunk %u", ndz_bit_count(missing),
				 chunk);
		else
			cli_info("request chunk %u", chunk);
	}
}

/* A request seen on the group (ours looped back or another client's). */
static void snoop_request(struct client *c, const struct ndz_pkt *p, uint64_t now)
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

/*
 * A chunk is complete: hold it and queue it for the feeder, which checks it off
 * this thread and without the lock (a hash or a decryption costs about a
 * millisecond, which the socket must not wait for). The caller holds c->lock.
 */
static void chunk_complete(struct client *c, int slot)
{
	ndz_fetch_hold(c->fetch, slot);
	c->fifo[(c->fifo_head + c->fifo_len) % c->nslots] = (uint32_t)slot;
	c->fifo_len++;
	pthread_cond_broadcast(&c->cond);
}

static void got_block(struct client *c, const struct ndz_pkt *p, uint64_t now)
{
	int slot;

	c->last_server_ns = now;
	c->last_block_ns = now;
	if (p->type == NDZ_PKT_REPAIR)
		slot = ndz_fetch_repair(c->fetch, p->chunk, p->stripe, p->index, p->data, now);
	else
		slot = ndz_fetch_block(c->fetch, p->chunk, p->block, p->data, now);
	if (slot >= 0)
		chunk_complete(c, slot);
}

/* One accepted packet of the transfer; the caller holds c->lock. */
static void handle_pkt(struct client *c, const struct ndz_pkt *p, uint64_t now)
{
	switch (p->type) {
	case NDZ_PKT_BLOCK:
	case NDZ_PKT_REPAIR:
		if (p->tag != c->tag || p->chunk >= c->n)
			c->foreign++;
		else
			got_block(c, p, now);
		break;
	case NDZ_PKT_REQUEST:
	case NDZ_PKT_PREQUEST:
		if (p->tag == c->tag && p->chunk < c->n)
			snoop_request(c, p, now);
		break;
	case NDZ_PKT_RREQUEST:
		if (p->tag == c->tag && p->chunk < c->n)
			ndz_fetch_snoop_repairs(c->fetch, p->chunk, p->need, now);
		break;
	case NDZ_PKT_FEATURES:
		if (p->tag == c->tag && (p->features & NDZ_FEAT_REPAIR) && !c->no_repair) {
			unsigned f = p->features & (NDZ_FEAT_REPAIR | (c->no_whole ? 0 : NDZ_FEAT_WHOLE));

			if (f != c->repair) {
				c->repair = f;
				ndz_fetch_set_repair(c->fetch, f);
				if (cli_verbose > 1)
					cli_info("the server sends repair blocks%s",
						 f & NDZ_FEAT_WHOLE ? " of stripes and whole chunks" : "");
			}
		}
		break;
	}
}

/* How a received chunk fared in check_chunk. */
enum { CHUNK_OK, CHUNK_CRC, CHUNK_FORGED, CHUNK_FATAL };

/* --orig-key: an original Frisbee V4 image's Blowfish key (lib/orig.h) */
static const char *orig_key_path;
static struct ndz_orig_keys orig_keys;

/* Chunks in a row that carry another key's id or none before that is fatal. */
#define KEY_STREAK_MAX 8

/*
 * Check a complete chunk (feeder thread, without the lock): its header, its data
 * CRC, or with a manifest its signed hash (the signer checked the CRC), or when we
 * decrypt it its AEAD tag (checked by the decryption below), that it is
 * of this image and this place; then, with an encryption key, decrypt it in place
 * so that a chunk whose tag fails is fetched again rather than stopping the
 * restore. *h gets its header (the plain one after decryption). CHUNK_FATAL: an
 * authentic chunk the key cannot open (or without a manifest, KEY_STREAK_MAX in a
 * row of another key or none), with c->ferr saying why.
 */
static int check_chunk(struct client *c, uint8_t *buf, uint32_t chunk,
		       struct ndz_chunk_hdr *h, int *key_streak, int *why, int *intact)
{
	int decrypt = !c->raw && c->crypt.type != NDZ_KEY_NONE;
	char owhy[160];
	/* an original Frisbee chunk (lib/orig.h): its V4 checksum is the decoder's */
	int orig = ndz_orig_probe(buf, NDZ_ORIG_HDR_AREA) != 0;
	int r = orig ? ndz_orig_chunk_hdr(buf, c->info.chunks, c->info.source_bytes, h, owhy,
					  sizeof(owhy)) : ndz_hdr_decode(buf, h);

	/* the signed hash, or the tag of a chunk we decrypt, stands for the data CRC */
	if (r == 0 && !c->m.hash && !orig)
		r = decrypt && (h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED) ?
		    ndz_chunk_check_padding(buf, h) : ndz_chunk_check_data(buf, h);

	if (orig && r == NDZ_ENOTSUP) {
		ndz_error_set(&c->ferr, r, 0, "%s: chunk %u: %s: %s", c->source, chunk,
			      ndz_strerror(r), owhy);
		return CHUNK_FATAL;
	}
	/* blocks sent for this chunk number and this image, else spoofed or stray */
	if (r == 0 && (h->index != chunk || memcmp(h->uuid, c->info.uuid, 16) != 0))
		r = NDZ_EMISMATCH;
	*why = r;
	if (r < 0)
		return CHUNK_CRC;
	if (c->m.hash && (*why = r = ndz_manifest_check_chunk(&c->m, buf, h)) < 0)
		return r == NDZ_ENOMEM ? CHUNK_CRC : CHUNK_FORGED;
	if (!decrypt)
		return CHUNK_OK;       /* without a key the pipeline refuses encrypted ones */
	*intact = 0;                   /* a failed decryption may leave part of it decrypted */
	*why = r = (h->incompat_flags & NDZ_INCOMPAT_ENCRYPTED) ?
		   ndz_chunk_decrypt(&c->crypt, buf, h) : NDZ_ENOTENC;
	if (r == 0) {
		*key_streak = 0;
		return CHUNK_OK;
	}
	/*
	 * Signed: the chunk is authentic, the key is the wrong one. Unsigned: a bad
	 * tag is a forger's; another key's id or a plain chunk is likelier the image
	 * itself than a forger when it comes KEY_STREAK_MAX times in a row.
	 */
	if (c->m.hash || (r != NDZ_EDECRYPT && ++*key_streak >= KEY_STREAK_MAX)) {
		char id[17];

		ndz_key_id_hex(h->key_id, id);
		if (r == NDZ_EWRONGKEY)
			ndz_error_set(&c->ferr, r, 0, "%s: chunk %u: %s (encrypted with key %s)",
				      c->source, chunk, ndz_strerror(r), id);
		else
			ndz_error_set(&c->ferr, r, 0, "%s: chunk %u: %s", c->source, chunk,
				      ndz_strerror(r));
		return CHUNK_FATAL;
	}
	return CHUNK_FORGED;
}

/*
 * Checks complete chunks and hands the good ones to the restore pipeline (which may
 * block), off the network thread; a chunk that fails is dropped and fetched again.
 */
static void *feeder(void *arg)
{
	struct client *c = arg;
	int key_streak = 0;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		uint32_t chunk;
		uint8_t *buf;
		int r, slot, how, why = 0, intact = 1;

		while (!c->fifo_len && !c->stop)
			pthread_cond_wait(&c->cond, &c->lock);
		/* (ferr is the feeder's own: after it, nothing more is written) */
		if (!c->fifo_len || c->abandon || c->ferr.code)
			break;
		slot = (int)c->fifo[c->fifo_head];
		chunk = ndz_fetch_slot_chunk(c->fetch, slot);
		buf = ndz_fetch_buf(c->fetch, slot);
		pthread_mutex_unlock(&c->lock);
		how = check_chunk(c, buf, chunk, &c->hdrs[slot], &key_streak, &why, &intact);
		pthread_mutex_lock(&c->lock);
		if (how != CHUNK_OK) {
			int partial = 0;

			c->fifo_head = (c->fifo_head + 1) % c->nslots;
			c->fifo_len--;
			/* a forged block or repair costs the blocks it casts doubt on, when
			 * some are (else the chunk is fetched again whole) */
			if (how != CHUNK_FATAL && intact)
				partial = ndz_fetch_retry(c->fetch, slot);
			else
				ndz_fetch_reject(c->fetch, slot);
			if (how == CHUNK_FATAL) {
				c->failed = 1;
			} else {
				c->rejects++;
				c->reject_chunk = chunk;
				c->reject_why = why;
				if (how == CHUNK_FORGED)
					c->forged++;
				else
					c->crc_fail++;
				if (cli_verbose)
					cli_warn("chunk %u: %s%s; requesting it again%s", chunk,
						 ndz_strerror(why),
						 how == CHUNK_FORGED ? " (forged)" : "",
						 partial == 1 ? " (the blocks in doubt)" :
						 partial == 2 ? " (each block compared with this copy)" :
						 "");
			}
			pthread_cond_broadcast(&c->cond);
			continue;
		}
		ndz_fetch_accept(c->fetch, slot);
		c->accept_ns = ndz_now_ns();
		c->rejects = 0;
		pthread_mutex_unlock(&c->lock);
		struct ndz_error we = { 0 };

		if (c->raw)
			r = ndz_io_write_full(c->target, buf, NDZ_CHUNK_SIZE,
					      (uint64_t)chunk * NDZ_CHUNK_SIZE, &we);
		else
			r = ndz_unzip_put(c->unzip, buf, &c->hdrs[slot], NDZ_UNZIP_CHECKED, NULL);
		pthread_mutex_lock(&c->lock);
		c->fifo_head = (c->fifo_head + 1) % c->nslots;
		c->fifo_len--;
		if (r < 0 && !c->failed) {
			c->failed = 1;
			/* the pipeline's message comes from ndz_unzip_finish */
			if (c->raw)
				ndz_error_copy(&c->err, &we);
		}
		ndz_fetch_done(c->fetch, slot);
		pthread_cond_broadcast(&c->cond);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

static void send_leave(struct client *c, int status)
{
	struct ndz_fetch_stats st;
	struct ndz_pkt p;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_LEAVE;
	p.leave.elapsed_ms = (uint32_t)((ndz_now_ns() - c->start_ns) / MS);
	p.leave.status = (uint32_t)status;
	ndz_fetch_get_stats(c->fetch, &st);
	p.leave.blocks_received = st.blocks;
	p.leave.duplicates = st.dups;
	p.leave.requests_sent = c->requests;
	p.leave.bytes_written = (uint64_t)st.done * NDZ_CHUNK_SIZE;
	p.leave.chunks_done = st.done;
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
	if (r < 0 || (c->no_repair && (p->type == NDZ_PKT_FEATURES ||
				       p->type == NDZ_PKT_REPAIR || p->type == NDZ_PKT_RREQUEST)) ||
	    (c->no_whole && ((p->type == NDZ_PKT_REPAIR && p->stripe == NDZ_FEC_WHOLE) ||
			     (p->type == NDZ_PKT_RREQUEST && p->need[NDZ_FEC_WHOLE])))) {
		c->bad++;              /* (what a client without (whole-chunk) repairs makes of those) */
		return 0;
	}
	if ((p->type == NDZ_PKT_BLOCK || p->type == NDZ_PKT_JOIN_REPLY ||
	     p->type == NDZ_PKT_REPAIR || p->type == NDZ_PKT_FEATURES) && c->server &&
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
 * What the target holds, before the join: a block device's or an existing file's
 * size (restored, not stored with -r: a file is sized as the image); UINT64_MAX when
 * there is no bound (a file made at the image's size) or open_target will say why not.
 */
static uint64_t target_room(const struct client *c)
{
	struct ndz_error e = { 0 };
	struct ndz_io *io;
	uint64_t room = UINT64_MAX;

	if (ndz_io_open_file(c->target_path, 0, &io, &e) < 0)
		return room;
	if (!(c->raw && io->is_regular))
		room = io->size;
	ndz_io_close(io);
	return room;
}

/* No JOIN_REPLY we could take within -T: say why, the target's size when that was it. */
static void join_failed(const struct client *c, const char *group, unsigned port)
{
	const struct ndz_join_info *i = &c->ignored_info;
	char a[16];

	if (c->ignored && c->ignored_why == NDZ_ETOOSMALL)
		cli_die(EXIT_FAIL, "%s: %s (%llu bytes, the image needs %llu), announced by server "
			"%s", c->target_path, ndz_strerror(NDZ_ETOOSMALL),
			(unsigned long long)c->room,
			(unsigned long long)(c->raw ? i->image_bytes : i->source_bytes),
			ndz_net_ntoa(c->ignored_from, a));
	if (c->ignored)
		cli_die(EXIT_FAIL, "no server answered on %s port %u within %d s (%llu announcements "
			"ignored, the last from %s: %u chunks for %llu bytes, more than any image "
			"needs)", group, port, c->give_up_s, (unsigned long long)c->ignored,
			ndz_net_ntoa(c->ignored_from, a), i->chunks,
			(unsigned long long)i->source_bytes);
	cli_die(EXIT_FAIL, "no server answered on %s port %u within %d s", group, port,
		c->give_up_s);
}

/*
 * Join: ask until a server answers our JOIN, backing off from 0.5 s to 2 s; give up
 * after -T; an answer announcing what we cannot take is ignored (ndz_fetch_check_join).
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
		int n, r;

		if (now >= deadline)
			join_failed(c, group, port);
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
		if (p.type == NDZ_PKT_JOIN_REPLY && c->want_uuid &&
		    memcmp(p.info.uuid, c->want_uuid, 16) != 0) {
			c->foreign++;          /* another image's server on our group */
			continue;
		}
		if (p.type == NDZ_PKT_JOIN_REPLY && p.client_id != c->id) {
			/*
			 * An announcement, or the answer to another client: a server is there,
			 * ask it for ours at once and take that (a host spoofing announcements
			 * of another image, even from the -S address, does not hear our JOIN).
			 */
			if (!traffic && cli_verbose > 1)
				cli_info("a server answered, not us; asking to join now");
			traffic = 1;
			continue;
		}
		if (p.type == NDZ_PKT_JOIN_REPLY && (r = ndz_fetch_check_join(&p.info, c->room,
									      c->raw)) < 0) {
			/*
			 * Whoever sent it (a forger can: without -S the first reply decides
			 * the server), a real server may still answer: wait for it until -T.
			 */
			if (cli_verbose && (!c->ignored || r != c->ignored_why)) {
				char a[16];

				cli_warn("server %s announces an image of %u chunks restoring to %llu "
					 "bytes: %s; waiting for another", ndz_net_ntoa(from, a),
					 p.info.chunks, (unsigned long long)p.info.source_bytes,
					 r == NDZ_ERANGE ? "more chunks than that many bytes can need" :
					 "more than the target holds");
			}
			c->ignored++;
			c->ignored_why = r;
			c->ignored_info = p.info;
			c->ignored_from = from;
			continue;
		}
		if (p.type == NDZ_PKT_JOIN_REPLY) {
			char a[16];

			c->info = p.info;
			c->tag = p.tag;
			c->last_server_ns = now;       /* -T runs from here on */
			if (!c->server)
				c->server = from;
			if (cli_verbose)
				cli_info("server %s: %u chunks, image %s", ndz_net_ntoa(from, a),
					 p.info.chunks, "joined");
			return;
		}
		if (p.type == NDZ_PKT_BLOCK || p.type == NDZ_PKT_REQUEST ||
		    p.type == NDZ_PKT_PREQUEST || p.type == NDZ_PKT_REPAIR ||
		    p.type == NDZ_PKT_RREQUEST) {
			if (!traffic && cli_verbose > 1)
				cli_info("a transfer is under way; asking to join now");
			traffic = 1;
		}
	}
}

/* fetch_manifest's ndz_fetch_emit: the manifest's chunks follow the image's. */
static void send_manifest_request(void *ctx, uint32_t chunk, const uint8_t *missing,
				  const uint8_t *need)
{
	struct client *c = ctx;

	send_request(c, c->info.chunks + chunk, missing, need);
}

/*
 * With a public key and no --manifest: fetch the image's signed manifest from the
 * server first, as the chunks numbered from the image's chunk count on (doc/
 * PROTOCOL.md), and check its signature. A server that does not serve one (an older
 * frisbeed, or no manifest beside the image) never answers: give up after -T
 * (at most 10 s) with a message that says so.
 */
static void fetch_manifest(struct client *c)
{
	size_t len = ndz_manifest_size(c->info.chunks), got_chunks = 0;
	uint32_t m = (uint32_t)((len + NDZ_CHUNK_SIZE - 1) / NDZ_CHUNK_SIZE);
	uint64_t now = ndz_now_ns(), last = now, next = 0;
	uint64_t wait = (uint64_t)(c->give_up_s < 10 ? c->give_up_s : 10) * 1000 * MS;
	uint64_t deadline = now + (uint64_t)c->give_up_s * 1000 * MS;
	struct ndz_fetch_opts fo = { 0 };
	struct ndz_fetch *f;
	uint8_t *bytes, buf[2048];

	if (c->info.chunks > NDZ_MANIFEST_MAX_CHUNKS)
		cli_die(EXIT_FAIL, "%s: %u chunks, more than a manifest holds", c->source,
			c->info.chunks);
	fo.chunks = m;
	fo.slots = m < 4 ? m : 4;
	fo.request_ahead = (unsigned)fo.slots;
	fo.redelay_ns = 200 * MS;
	fo.seed = c->id;
	bytes = calloc(m, NDZ_CHUNK_SIZE);
	if (!bytes || ndz_fetch_create(&fo, &f) < 0)
		cli_die(EXIT_FAIL, "out of memory");
	for (;;) {
		struct ndz_pkt p;
		uint32_t from;
		int n, slot;

		now = ndz_now_ns();
		if (got_chunks == m) {
			/* forged bytes got in (blocks spoofed): throw it all away, ask again */
			int r = ndz_manifest_open(bytes, len, &c->pub, &c->m, &c->err);

			if (r == 0)
				break;
			/*
			 * Whole and shaped right, but naming another key: the image's own
			 * manifest signed with a key we were not given, far likelier than a
			 * forger who took the trouble; fetching it again would only bring
			 * it back. (A bad signature under our key's id is a forger's.)
			 */
			if (r == NDZ_EWRONGKEY)
				cli_die(EXIT_FAIL, "the manifest from %s: %s", c->source,
					ndz_error_msg(&c->err));
			c->forged++;
			if (now >= deadline)
				cli_die(EXIT_FAIL, "the manifest from %s: %s", c->source,
					ndz_error_msg(&c->err));
			if (cli_verbose)
				cli_warn("the manifest from %s: %s; fetching it again", c->source,
					 ndz_error_msg(&c->err));
			ndz_error_clear(&c->err);
			ndz_fetch_free(f);
			if (ndz_fetch_create(&fo, &f) < 0)
				cli_die(EXIT_FAIL, "out of memory");
			got_chunks = 0;
			next = 0;
		}
		if (now - last > wait || now >= deadline)
			cli_die(EXIT_FAIL, "%s sent no signed manifest of the image within %llu s "
				"(an older frisbeed, or none beside the image): give --manifest FILE",
				c->source, (unsigned long long)((now - last) / 1000 / MS));
		if (now >= next) {
			ndz_fetch_requests(f, now, now - last > 200 * MS, send_manifest_request, c);
			next = now + 50 * MS;
		}
		n = ndz_net_recv(c->net, buf, sizeof(buf), 20, &from);
		if (n < 0)
			cli_die(EXIT_FAIL, "receive: %s", strerror(errno));
		if (n <= 0 || !accept_pkt(c, buf, n, from, &p) || p.type != NDZ_PKT_BLOCK ||
		    p.tag != c->tag || p.chunk < c->info.chunks || p.chunk - c->info.chunks >= m)
			continue;
		last = c->last_server_ns = now;
		slot = ndz_fetch_block(f, p.chunk - c->info.chunks, p.block, p.data, now);
		if (slot < 0)
			continue;
		memcpy(bytes + (size_t)ndz_fetch_slot_chunk(f, slot) * NDZ_CHUNK_SIZE,
		       ndz_fetch_buf(f, slot), NDZ_CHUNK_SIZE);
		ndz_fetch_accept(f, slot);
		ndz_fetch_done(f, slot);
		got_chunks++;
	}
	ndz_fetch_free(f);
	free(bytes);
	if (cli_verbose)
		cli_info("signed manifest of %u chunks from %s: signature good", c->m.chunks,
			 c->source);
}

/* The manifest is the served image's, before the target is opened. */
static void check_trust(struct client *c)
{
	if (c->pub.type != NDZ_KEY_NONE && !c->m.hash)
		fetch_manifest(c);
	if (!c->m.hash)
		return;
	if (memcmp(c->m.uuid, c->info.uuid, 16) != 0 ||
	    c->m.source_bytes != c->info.source_bytes || c->m.chunks != c->info.chunks)
		cli_die(EXIT_FAIL, "%s: the manifest is of another image than the one %s serves "
			"(%s differs)", c->manifest_path, c->source,
			memcmp(c->m.uuid, c->info.uuid, 16) ? "uuid" :
			c->m.chunks != c->info.chunks ? "chunk count" : "source size");
}

static void setup(struct client *c)
{
	struct ndz_fetch_opts fo = { 0 };
	uint32_t seed;

	if (getrandom(&seed, sizeof(seed), 0) != sizeof(seed))
		seed = (uint32_t)ndz_now_ns();
	c->n = c->info.chunks;
	fo.chunks = c->n;
	fo.slots = c->nslots;
	fo.request_ahead = (unsigned)c->request_ahead;
	fo.redelay_ns = c->redelay_ns;
	fo.seed = seed ^ c->id;
	c->fifo = calloc(c->nslots, sizeof(*c->fifo));
	c->hdrs = calloc(c->nslots, sizeof(*c->hdrs));
	if (!c->fifo || !c->hdrs || ndz_fetch_create(&fo, &c->fetch) < 0)
		cli_die(EXIT_FAIL, "out of memory for %u chunks", c->n);
}

static void open_target(struct client *c)
{
	struct ndz_unzip_opts uo;
	uint64_t need = c->raw ? c->info.image_bytes : c->info.source_bytes;
	int r, created = 0;

	struct ndz_error e = { 0 };

	/* a file we create goes again if we fail or are stopped by a signal */
	cli_hold_signals(1);
	r = ndz_io_open_target(c->target_path, need, &created, &c->target, &e);
	if (r == 0 && created)
		cli_own_file(c->target_path);
	cli_hold_signals(0);
	if (r < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (c->raw && c->target->is_regular && c->target->size != need &&
	    (r = ndz_io_set_size(c->target, need, &e)) < 0) {
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	}
	if (c->target->size < need)
		cli_die(EXIT_FAIL, "%s: %s (%llu bytes, the image needs %llu)", c->target_path,
			ndz_strerror(NDZ_ETOOSMALL), (unsigned long long)c->target->size,
			(unsigned long long)need);
	if (c->raw)
		return;
	ndz_unzip_opts_init(&uo);
	uo.zero_fill = c->zero_fill;
	uo.discard = c->discard;
	uo.target_zeroed = created;
	uo.name = c->source;
	uo.expect_chunks = c->n;
	if (orig_key_path)
		uo.orig_keys = &orig_keys;
	uo.expect_uuid_set = 1;
	memcpy(uo.expect_uuid, c->info.uuid, 16);
	/* the feeder decrypts (check_chunk): the pipeline gets plain chunks */
	r = ndz_unzip_create(c->target, &uo, &c->unzip, NULL);
	if (r < 0)
		cli_die(EXIT_FAIL, "%s: %s", c->target_path, ndz_strerror(r));
}

static int finish(struct client *c)
{
	struct ndz_unzip_stats us;

	if (c->ferr.code) {
		struct ndz_error pe = { 0 };

		if (!c->raw)
			ndz_unzip_finish(c->unzip, &us, &pe);
		return ndz_error_copy(&c->err, &c->ferr);
	}
	if (c->raw) {
		return ndz_io_flush(c->target, &c->err);
	}
	return ndz_unzip_finish(c->unzip, &us, &c->err);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "group", required_argument, NULL, 'm' },
		{ "port", required_argument, NULL, 'p' },
		{ "interface", required_argument, NULL, 'i' },
		{ "server", required_argument, NULL, 'S' },
		{ "master", required_argument, NULL, 'M' },
		{ "image", required_argument, NULL, 'I' },
		{ "zero", no_argument, NULL, 'z' },
		{ "discard", no_argument, NULL, 0x101 },
		{ "cache", required_argument, NULL, 'C' },
		{ "request-ahead", required_argument, NULL, 'R' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "raw", no_argument, NULL, 'r' },
		{ "force", no_argument, NULL, 'f' },
		{ "progress", optional_argument, NULL, 'o' },
		{ "no-repair", no_argument, NULL, 0x100 },
		{ "no-whole-repair", no_argument, NULL, 0x10a },
		{ "key", required_argument, NULL, 'k' },
		{ "manifest", required_argument, NULL, 'F' },
		{ "orig-key", required_argument, NULL, 0x1f0 },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	struct ndz_fetch_stats fst;
	struct client c;
	struct ndz_net_opts no = { .port = 0, .ttl = 5, .loop = 1 };
	struct ndz_dgram *dg;
	unsigned nap_us;
	pthread_t ft;
	int opt, code = EXIT_OK, cache_mib = 64, force = 0;
	uint64_t next_look = 0;
	const char *master = NULL, *image = NULL;
	struct master_answer ma;

	cli_init(argv[0]);
	memset(&c, 0, sizeof(c));
	c.request_ahead = 2;
	c.give_up_s = 30;
	c.redelay_ns = 1000 * MS;
	while ((opt = getopt_long(argc, argv, "m:p:i:S:M:I:zC:R:T:rfok:qvhV", lopts, NULL)) != -1) {
		switch (opt) {
		case 'm': no.group = optarg; break;
		case 'p': no.port = (uint16_t)cli_parse_int(optarg, "-p", 1, 65535); break;
		case 'i': no.iface = optarg; break;
		case 'S':
			if (ndz_net_addr(optarg, &c.server) != 0)
				cli_usage_error("-S: bad IPv4 address '%s'", optarg);
			break;
		case 'M': master = optarg; break;
		case 'I': image = optarg; break;
		case 'z': c.zero_fill = 1; break;
		case 0x101: c.discard = 1; break;
		case 'C': cache_mib = cli_parse_int(optarg, "-C", 2, 65536); break;
		case 'R': c.request_ahead = cli_parse_int(optarg, "-R", 1, 1024); break;
		case 'T': c.give_up_s = cli_parse_int(optarg, "-T", 1, 1000000); break;
		case 'r': c.raw = 1; break;
		case 'f': force = 1; break;
		case 0x100: c.no_repair = 1; break;
		case 0x10a: c.no_whole = 1; break;
		case 'o': c.progress = cli_progress_option(optarg); break;
		case 'k': cli_add_key(optarg, &c.pub, &c.crypt); break;
		case 'F': c.manifest_path = optarg; break;
		case 0x1f0: orig_key_path = optarg; break;
		default: cli_common_option(opt, usage_text); break;
		}
	}
	if (orig_key_path && ndz_orig_load_keys(orig_key_path, NULL, &orig_keys, &c.ferr) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c.ferr));
	if (!master != !image)
		cli_usage_error("-M HOST and -I NAME go together");
	if (master && (no.group || no.port))
		cli_usage_error("-M replaces -m and -p");
	if (no.group && ndz_net_group(no.group, &(uint32_t){ 0 }, &c.err) != 0)
		cli_usage_error("-m %s", ndz_error_msg(&c.err));
	if (master) {
		if (optind != argc - 1)
			cli_usage_error("expected one TARGET argument");
		ask_master(master, image, &ma);
		no.group = ma.group;
		no.port = ma.port;
		if (!c.server)
			c.server = ma.server;
		c.want_uuid = ma.uuid;
	}
	if (!no.group || !no.port)
		cli_usage_error("-m ADDR and -p PORT are required");
	if (optind != argc - 1)
		cli_usage_error("expected one TARGET argument");
	c.target_path = argv[optind];
	c.nslots = (size_t)cache_mib;
	if (c.zero_fill && c.discard)
		cli_usage_error("-z and --discard exclude each other");
	if (c.manifest_path && c.pub.type == NDZ_KEY_NONE)
		cli_usage_error("--manifest: only with a public --key");
	if (c.manifest_path && ndz_manifest_load(c.manifest_path, &c.pub, &c.m, &c.err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c.err));
	signal(SIGPIPE, SIG_IGN);
	/* before joining: a target in use is refused without disturbing the session */
	if (!force && ndz_target_check(c.target_path, &c.err) < 0)
		cli_die(EXIT_FAIL, "%s; use --force to write anyway", ndz_error_msg(&c.err));
	if (ndz_net_open(&no, &c.net, &c.err) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&c.err));
	if (getrandom(&c.id, sizeof(c.id), 0) != sizeof(c.id))
		c.id = (uint32_t)ndz_now_ns();
	c.start_ns = ndz_now_ns();
	c.room = target_room(&c);
	join(&c, no.group, no.port);
	{
		char a[16];

		snprintf(c.source, sizeof(c.source), "server %s", ndz_net_ntoa(c.server, a));
	}
	check_trust(&c);
	setup(&c);
	open_target(&c);
	pthread_mutex_init(&c.lock, NULL);
	pthread_cond_init(&c.cond, NULL);
	if (pthread_create(&ft, NULL, feeder, &c))
		cli_die(EXIT_FAIL, "cannot start a thread");
	/* progress counts image bytes received, as the summary does */
	cli_progress_init(&c.prog, c.progress, "receiving", "image", "received");
	cli_progress_total(&c.prog, c.info.image_bytes, c.n);
	/* -T runs from the JOIN_REPLY (or the manifest's last block) on */
	c.last_block_ns = c.accept_ns = ndz_now_ns();
	c.silence_wait_ns = 40 * MS;
	c.next_silence_ns = c.last_block_ns + c.silence_wait_ns;
	ndz_fetch_requests(c.fetch, ndz_now_ns(), 0, send_request, &c);
	/*
	 * Take datagrams in batches, pausing after a wake-up for about BATCH / 2 of
	 * them to gather at the server's rate (at most 1 ms, far less than the socket
	 * buffer holds; 250 us when the server has no cap).
	 */
	dg = malloc(BATCH * sizeof(*dg));
	if (!dg)
		cli_die(EXIT_FAIL, "out of memory");
	nap_us = c.info.rate_bps ?
		 (unsigned)((uint64_t)BATCH / 2 * (NDZ_PKT_BLOCK_LEN + 42) * 8 * 1000000 /
			    c.info.rate_bps) : 250;
	if (nap_us > 1000)
		nap_us = 1000;
	for (;;) {
		struct ndz_fetch_stats st;
		struct ndz_pkt p;
		uint64_t now;
		int n, failed;

		pthread_mutex_lock(&c.lock);
		ndz_fetch_get_stats(c.fetch, &st);
		failed = c.failed;
		pthread_mutex_unlock(&c.lock);
		cli_progress_update(&c.prog, (uint64_t)st.complete * NDZ_CHUNK_SIZE, st.complete);
		if (failed || st.complete == c.n)
			break;
		n = ndz_net_recv_many(c.net, dg, BATCH, 20, nap_us);
		if (n < 0) {
			ndz_error_set(&c.err, NDZ_ENET, errno, "receive");
			code = EXIT_FAIL;
			break;
		}
		now = ndz_now_ns();
		if (n > 0) {
			pthread_mutex_lock(&c.lock);
			for (int i = 0; i < n; i++)
				if (accept_pkt(&c, dg[i].buf, dg[i].len, dg[i].from, &p))
					handle_pkt(&c, &p, now);
			pthread_mutex_unlock(&c.lock);
		}
		if (now - c.last_server_ns > (uint64_t)c.give_up_s * 1000 * MS) {
			char a[16];

			ndz_error_set(&c.err, NDZ_ETIMEDOUT, 0,
				      "no data from server %s for %d s; giving up",
				      ndz_net_ntoa(c.server, a), c.give_up_s);
			code = EXIT_FAIL;
			break;
		}
		pthread_mutex_lock(&c.lock);
		/*
		 * Blocks keep coming but what they make never checks out (a server reading
		 * a damaged image, or a forger): -T bounds that as it bounds silence.
		 */
		if (c.rejects && now > c.accept_ns &&
		    now - c.accept_ns > (uint64_t)c.give_up_s * 1000 * MS) {
			ndz_error_set(&c.err, NDZ_ETIMEDOUT, 0, "%s: no chunk checked out for %d s: "
				      "%u complete chunks failed their checks (the last: chunk %u: "
				      "%s); giving up", c.source, c.give_up_s, c.rejects,
				      c.reject_chunk, ndz_strerror(c.reject_why));
			pthread_mutex_unlock(&c.lock);
			code = EXIT_FAIL;
			break;
		}
		if (now - c.last_block_ns > c.silence_wait_ns && now >= c.next_silence_ns) {
			/* The server is silent: ask for everything again, backing off. */
			if (cli_verbose > 1)
				cli_info("server silent for %llu ms; asking again",
					 (unsigned long long)((now - c.last_block_ns) / MS));
			ndz_fetch_requests(c.fetch, now, 1, send_request, &c);
			if (c.silence_wait_ns < 2000 * MS)
				c.silence_wait_ns *= 2;
			c.next_silence_ns = now + c.silence_wait_ns;
			ndz_fetch_kicked(c.fetch);
			next_look = now + 5 * MS;
		} else if (ndz_fetch_kicked(c.fetch) || now >= next_look) {
			if (now - c.last_block_ns < 20 * MS)
				c.silence_wait_ns = 40 * MS;
			ndz_fetch_requests(c.fetch, now, 0, send_request, &c);
			next_look = now + 5 * MS;
		}
		pthread_mutex_unlock(&c.lock);
	}
	if (code == EXIT_OK)
		cli_progress_phase(&c.prog, "flushing");
	pthread_mutex_lock(&c.lock);
	c.stop = 1;
	if (code != EXIT_OK)
		c.abandon = 1;         /* what is not written yet stays unwritten */
	pthread_cond_broadcast(&c.cond);
	pthread_mutex_unlock(&c.lock);
	pthread_join(ft, NULL);
	/* after a failed put, finishing the pipeline brings out its reason */
	if (code == EXIT_OK && (finish(&c) < 0 || c.failed))
		code = EXIT_FAIL;
	if (code == EXIT_OK)
		cli_own_file(NULL);
	send_leave(&c, code != EXIT_OK);
	ndz_fetch_get_stats(c.fetch, &fst);
	cli_progress_end(&c.prog, code == EXIT_OK);
	if (code != EXIT_OK) {
		cli_drop_file();
		cli_error("%s", ndz_error_msg(&c.err));
	} else if (!cli_quiet) {
		char rate[64];

		fprintf(stderr, "%s: %u chunks in %.2f s (%s), %llu blocks received, "
			"%llu repairs (%llu blocks rebuilt), %llu duplicates, %llu requests sent, "
			"flushed in %.2f s\n", cli_progname, c.n, cli_progress_elapsed(&c.prog),
			cli_progress_rate(&c.prog, rate, sizeof(rate)), (unsigned long long)fst.blocks,
			(unsigned long long)fst.repairs, (unsigned long long)fst.decoded,
			(unsigned long long)fst.dups, (unsigned long long)c.requests, c.prog.flush_s);
	}
	if (cli_verbose)
		cli_info("dropped: %llu malformed, %llu other version, %llu foreign, %llu no room, "
			 "%llu chunks failed their checksum, %llu forged", (unsigned long long)c.bad,
			 (unsigned long long)c.bad_version, (unsigned long long)c.foreign,
			 (unsigned long long)fst.no_room, (unsigned long long)c.crc_fail,
			 (unsigned long long)c.forged);
	else if (c.forged && !cli_quiet)
		cli_warn("%llu forged chunks discarded and fetched again",
			 (unsigned long long)c.forged);
	ndz_manifest_release(&c.m);
	ndz_key_wipe(&c.crypt);
	ndz_unzip_free(c.unzip);
	ndz_io_close(c.target);
	ndz_net_free(c.net);
	ndz_fetch_free(c.fetch);
	free(dg);
	free(c.fifo);
	free(c.hdrs);
	return code;
}
