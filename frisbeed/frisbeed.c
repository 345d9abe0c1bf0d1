/*
 * frisbeed: serve one image to any number of frisbee clients over UDP multicast.
 * One thread receives requests into a FIFO work queue (merging requests for the
 * same chunk), one sends the requested blocks at a paced rate; the main thread
 * handles signals, statistics and the idle timeout. What to queue and send is
 * decided by lib/serve.c, called under the lock.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "mcast/adapt.h"
#include "core/err.h"
#include "mcast/fec.h"
#include "core/format.h"
#include "core/image.h"
#include "core/io.h"
#include "mcast/net.h"
#include "core/orig.h"
#include "mcast/pace.h"
#include "mcast/proto.h"
#include "mcast/serve.h"
#include "trust/trust.h"

#define WIRE_OVERHEAD 28u              /* IPv4 + UDP headers, counted against the cap */
#define MAX_CLIENTS 4096
#define SEND_BATCH 32                  /* datagrams sent with one call (one GSO send) */

struct stats {
	uint64_t clients, joins, leaves, bytes_sent;
	uint64_t bad_packets, bad_version, wrong_image, bad_chunk;
	uint64_t start_ns, first_ns, last_ns; /* start, first and last packet sent */
	uint64_t empty_ns;             /* between them, the queue empty (waiting for requests) */
	uint64_t wait_ns;              /* the queue empty since the last packet, so far */
	uint64_t last_rate;            /* -W auto: the rate last chosen */
};

struct server {
	struct ndz_io *img;
	const char *path;
	struct ndz_net *net;
	struct ndz_join_info info;
	uint32_t orig_version;         /* an original Frisbee image's version, else 0 */
	uint32_t tag;
	uint32_t nchunks;
	uint32_t mchunks;              /* chunks nchunks.. carry the signed manifest */
	uint8_t *manifest;             /* mchunks * 1 MiB: its bytes, zero padded */
	uint64_t rate, burst;
	int bursts;                    /* -b/-g: send each burst with one call (lock) */
	int rate_changed;              /* SIGUSR2 set a new rate: the sender re-paces (lock) */
	int idle;
	unsigned repair;               /* NDZ_FEAT_* repairs announced and sent; 0 none */
	struct ndz_adapt *adapt;       /* -W auto: the rate from the clients' losses, under lock */
	uint64_t *sent_ns;             /* -W auto: per chunk, when it last went out (lock) */
	uint64_t *pass_ns;             /* -W auto: per chunk, when its last sending began (lock) */
	uint32_t *pass_sent;           /* -W auto: per chunk, packets sent since then (lock) */
	struct ndz_fec *fec;           /* the repair code's tables (sender thread) */

	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct ndz_serve *serve;       /* the queue and what was sent, under lock */
	uint32_t *client_ids;
	size_t nclients;
	uint64_t last_activity_ns;
	atomic_int stop;               /* set by main, read by both threads */
	int fatal;
	char fatal_msg[256];
	struct stats st;
};

static const char usage_text[] =
	"Usage: frisbeed [options] IMAGE\n"
	"Serve IMAGE to frisbee clients over UDP multicast.\n\n"
	"  -m, --group ADDR         multicast group (default 239.192.0.1)\n"
	"  -p, --port PORT          UDP port (default 3564)\n"
	"  -i, --interface IFACE    interface name or address to use\n"
	"  -W, --bandwidth RATE     bandwidth cap in bits/s, k/M/G suffixes (default 100M);\n"
	"                           auto[:MAX]: find the rate the network and clients take,\n"
	"                           at most MAX (default 1G)\n"
	"  -b, --burst N            burst size in packets (with -g, instead of -W)\n"
	"  -g, --gap USEC           gap between bursts in microseconds (with -b)\n"
	"  -T, --idle-timeout SECONDS  exit after this long without a client\n"
	"                           (default 1800, 0: never)\n"
	"  -t, --ttl TTL            multicast TTL (default 5)\n"
	"  -L, --loopback           also deliver to clients on this host\n"
	"  --no-repair              send no repair blocks (clients ask for blocks)\n"
	"  --no-whole-repair        send repairs of stripes only, none of whole chunks\n"
	"  --manifest FILE          serve this signed manifest of IMAGE (default\n"
	"                           IMAGE.manifest when it exists), for frisbee --key\n"
	"  --stats-json FILE        write the statistics as JSON at exit\n"
	"  --stats-live FILE        rewrite FILE with them once a second while running\n"
	"  -q, --quiet              no statistics line at exit\n"
	"  -v, --verbose            more messages (repeat for more)\n"
	"  -h, --help               this help\n"
	"  -V, --version          show the version and exit\n"
	"\nExit status: 0 after the idle timeout or a signal; 1 failure; 2 bad usage.\n";

/* Open IMAGE and check that it is a whole image (lib/image.h: size, first and last chunk). */
static void open_image(struct server *s)
{
	struct ndz_image_reader *r;
	struct ndz_error e = { 0 };
	const struct ndz_chunk_hdr *h0;

	if (ndz_io_open_file(s->path, NDZ_IO_READ, &s->img, &e) < 0 ||
	    ndz_image_reader_open(s->img, &r, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	h0 = ndz_image_reader_first(r);
	s->nchunks = ndz_image_reader_chunks(r);
	memcpy(s->info.uuid, h0->uuid, 16);
	s->info.chunks = s->nchunks;
	s->info.block_size = NDZ_BLOCK_SIZE;
	s->info.blocks_per_chunk = NDZ_BLOCKS_PER_CHUNK;
	s->info.image_bytes = s->img->size;
	s->info.source_bytes = h0->source_bytes;
	s->info.rate_bps = s->rate;
	s->info.idle_timeout = (uint32_t)s->idle;
	s->tag = ndz_image_tag(h0->uuid);
	s->orig_version = NDZ_IS_ORIG(h0) ? h0->version - NDZ_ORIG_HVERSION(0) : 0;
	ndz_image_reader_free(r);
}

/*
 * The image's signed manifest, served as the chunks after the image's own: path
 * NULL looks for IMAGE.manifest and is content without one. The server has no key: it
 * checks the shape only, clients check the signature.
 */
static void open_manifest(struct server *s, const char *path)
{
	struct ndz_error e = { 0 };
	char def[4096];
	uint8_t *b;
	size_t len;
	int r;

	int given = path != NULL;

	if (!given) {
		if (ndz_manifest_path(s->path, def, sizeof(def)) < 0)
			return;
		path = def;
	}
	r = ndz_manifest_read(path, &b, &len, &e);
	if (r == NDZ_EUNSIGNED && !given)
		return;
	if (r == 0 && ndz_manifest_check_shape(b, len, s->nchunks) < 0) {
		free(b);
		r = ndz_error_set(&e, NDZ_EMANIFEST, 0, "%s: %s: not the manifest of an image "
				  "of %u chunks", path, ndz_strerror(NDZ_EMANIFEST), s->nchunks);
	}
	/* a file found beside the image that is not its manifest: serve none, say why */
	if (r < 0 && !given) {
		cli_warn("%s; serving no manifest", ndz_error_msg(&e));
		return;
	}
	if (r < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	s->mchunks = (uint32_t)((len + NDZ_CHUNK_SIZE - 1) / NDZ_CHUNK_SIZE);
	s->manifest = calloc(s->mchunks, NDZ_CHUNK_SIZE);
	if (!s->manifest)
		cli_die(EXIT_FAIL, "out of memory");
	memcpy(s->manifest, b, len);
	free(b);
	if (cli_verbose)
		cli_info("serving the manifest %s as chunks %u-%u", path, s->nchunks,
			 s->nchunks + s->mchunks - 1);
}

static void note_client(struct server *s, uint32_t id)
{
	for (size_t i = 0; i < s->nclients; i++)
		if (s->client_ids[i] == id)
			return;
	s->st.clients++;
	if (s->nclients < MAX_CLIENTS)
		s->client_ids[s->nclients++] = id;
}

/*
 * The bucket for a rate: five milliseconds at it, at least 16 packets: a sender woken
 * a few milliseconds late (a busy host) makes the time up and so sends at its cap
 * (with two, 2-4% of the cap was lost on a loaded host), and a burst stays as short as
 * a switch or a tbf queue takes without loss.
 */
static uint64_t burst_for(uint64_t rate)
{
	uint64_t b = rate / 8 / 200;

	return b < 16 * (NDZ_PKT_BLOCK_LEN + WIRE_OVERHEAD) ?
	       16 * (NDZ_PKT_BLOCK_LEN + WIRE_OVERHEAD) : b;
}

/*
 * Datagrams to send with one call: a fifth of the bucket (a millisecond), so that a
 * wake-up up to four milliseconds late is made up for (a batch of the whole bucket
 * would wait for it to be full, and time slept past that is lost), or a whole -b
 * burst; never more than the bucket holds.
 */
static unsigned batch_for(const struct server *s, const struct ndz_pace *p)
{
	uint64_t b = (uint64_t)(p->depth / 8) / (NDZ_PKT_BLOCK_LEN + WIRE_OVERHEAD);

	if (!s->bursts)
		b /= 5;
	return b < 1 ? 1 : b > SEND_BATCH ? SEND_BATCH : (unsigned)b;
}

/* FEATURES: what this server speaks beyond version 1's packets. */
static void send_features(struct server *s)
{
	struct ndz_pkt p;
	uint8_t buf[NDZ_PKT_FEATURES_LEN];
	int len;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_FEATURES;
	p.tag = s->tag;
	p.features = s->repair;
	len = ndz_pkt_encode(&p, buf, sizeof(buf));
	if (len > 0)
		ndz_net_send(s->net, buf, (size_t)len);
}

static void send_reply(struct server *s, uint32_t client_id)
{
	struct ndz_pkt p;
	uint8_t buf[NDZ_PKT_JOIN_REPLY_LEN];
	int len;

	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_JOIN_REPLY;
	p.client_id = client_id;
	p.tag = s->tag;
	p.info = s->info;
	len = ndz_pkt_encode(&p, buf, sizeof(buf));
	if (len > 0)
		ndz_net_send(s->net, buf, (size_t)len);
	/* beside the reply, not in it: clients without repairs refuse unknown fields */
	if (s->repair)
		send_features(s);
}

/*
 * -W auto: whether chunk went out lately, so that a request for it tells of losses
 * just now; one asked for again much later (the client's re-request delay, or a
 * client that has just joined) repeats losses counted before, or none (lock).
 */
static int recent(const struct server *s, uint32_t chunk)
{
	return ndz_now_ns() - s->sent_ns[chunk] < 250000000ull;
}

/*
 * -W auto: client lost packets of chunk, and the controller learns how late that is
 * known: since the chunk's sending began (a client asks once the server has moved on),
 * and what got through that sending (lock).
 */
static void report_lost(struct server *s, uint32_t client, uint32_t chunk, unsigned lost)
{
	/* blocks lost in an earlier sending (another client's request brought the chunk
	 * back) were counted then, or are old: at most what this one sent is lost now */
	if (lost > s->pass_sent[chunk])
		lost = s->pass_sent[chunk];
	if (!lost)
		return;
	ndz_adapt_delay(s->adapt, ndz_now_ns() - s->pass_ns[chunk]);
	ndz_adapt_lost(s->adapt, client, lost);
	ndz_adapt_through(s->adapt, s->pass_sent[chunk], lost, s->pass_ns[chunk],
			  s->sent_ns[chunk]);
}

static void *receiver(void *arg)
{
	struct server *s = arg;
	uint8_t buf[2048];
	struct ndz_pkt p;
	uint32_t from;
	char a[16];

	while (!atomic_load(&s->stop)) {
		int n = ndz_net_recv(s->net, buf, sizeof(buf), 200, &from), r;

		if (n < 0) {
			pthread_mutex_lock(&s->lock);
			s->fatal = 1;
			snprintf(s->fatal_msg, sizeof(s->fatal_msg), "receive: %s", strerror(errno));
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		if (n == 0)
			continue;
		r = ndz_pkt_decode(buf, (size_t)n, &p);
		pthread_mutex_lock(&s->lock);
		if (r == NDZ_EPROTOVER) {
			s->st.bad_version++;
		} else if (r < 0) {
			s->st.bad_packets++;
		} else if (p.type == NDZ_PKT_BLOCK || p.type == NDZ_PKT_JOIN_REPLY ||
			   p.type == NDZ_PKT_REPAIR || p.type == NDZ_PKT_FEATURES) {
			/* another server's traffic (or ours looped back): not for us */
		} else if (p.type == NDZ_PKT_RREQUEST &&
			   (!s->repair || (p.need[NDZ_FEC_WHOLE] && !(s->repair & NDZ_FEAT_WHOLE)))) {
			s->st.bad_packets++;   /* as a server without (whole-chunk) repairs would */
		} else if (p.type != NDZ_PKT_JOIN && p.tag != s->tag) {
			s->st.wrong_image++;
		} else if ((p.type == NDZ_PKT_REQUEST || p.type == NDZ_PKT_PREQUEST ||
			    p.type == NDZ_PKT_RREQUEST) && p.chunk >= s->nchunks + s->mchunks) {
			s->st.bad_chunk++;
		} else {
			s->last_activity_ns = ndz_now_ns();
			note_client(s, p.client_id);
			switch (p.type) {
			case NDZ_PKT_JOIN:
				s->st.joins++;
				if (cli_verbose)
					cli_info("join from %s (client %08x)", ndz_net_ntoa(from, a),
						 p.client_id);
				pthread_mutex_unlock(&s->lock);
				send_reply(s, p.client_id);
				pthread_mutex_lock(&s->lock);
				break;
			case NDZ_PKT_LEAVE:
				s->st.leaves++;
				if (cli_verbose)
					cli_info("leave from %s (client %08x, %s): %u ms, %llu blocks, "
						 "%llu duplicates, %llu requests", ndz_net_ntoa(from, a),
						 p.client_id, p.leave.status ? "failed" : "complete",
						 p.leave.elapsed_ms,
						 (unsigned long long)p.leave.blocks_received,
						 (unsigned long long)p.leave.duplicates,
						 (unsigned long long)p.leave.requests_sent);
				break;
			case NDZ_PKT_REQUEST:
			case NDZ_PKT_PREQUEST:
				if (cli_verbose > 2)
					cli_info("request from %s: chunk %u, %u blocks",
						 ndz_net_ntoa(from, a), p.chunk,
						 p.type == NDZ_PKT_REQUEST ? p.count :
						 ndz_bit_count(p.bitmap));
				if (s->adapt && p.type == NDZ_PKT_PREQUEST && recent(s, p.chunk)) {
					/* blocks sent before and asked for again: lost */
					unsigned lost = 0;

					for (unsigned b = 0; b < NDZ_BLOCKS_PER_CHUNK; b++)
						lost += ndz_bit_test(p.bitmap, b) &&
							ndz_serve_ever(s->serve, p.chunk, b);
					report_lost(s, p.client_id, p.chunk, lost);
				}
				if ((p.type == NDZ_PKT_REQUEST ?
				     ndz_serve_request(s->serve, p.chunk, p.block, p.count) :
				     ndz_serve_prequest(s->serve, p.chunk, p.bitmap)) > 0)
					pthread_cond_signal(&s->cond);
				break;
			case NDZ_PKT_RREQUEST:
				if (cli_verbose > 2)
					cli_info("repair request from %s: chunk %u",
						 ndz_net_ntoa(from, a), p.chunk);
				if (s->adapt && recent(s, p.chunk)) {
					unsigned lost = 0;

					for (unsigned i = 0; i < NDZ_FEC_SETS; i++)
						lost += p.need[i];
					report_lost(s, p.client_id, p.chunk, lost);
				}
				if (ndz_serve_repairs(s->serve, p.chunk, p.need) > 0)
					pthread_cond_signal(&s->cond);
				break;
			}
		}
		pthread_mutex_unlock(&s->lock);
	}
	return NULL;
}

/* -W auto at -vv: each interval's decision, once. */
static void trace_rate(const struct ndz_adapt *a, uint64_t *traced)
{
	struct ndz_adapt_step st;

	ndz_adapt_last(a, &st);
	if (st.seq == *traced)
		return;
	*traced = st.seq;
	cli_info("rate %.1f Mbit/s at %.3f s: %s, %llu sent, worst client lost %llu "
		 "(%.2f%%, medium %.2f%%), losses known %.0f ms late", (double)st.rate_bps / 1e6,
		 (double)st.t_ns / 1e9, ndz_adapt_action_name(st.action),
		 (unsigned long long)st.sent, (unsigned long long)st.worst, st.loss * 100,
		 st.base * 100, (double)st.delay_ns / 1e6);
}

/*
 * Read chunk i of the image into buf and check it as a client will: whole, its
 * header and data checksums, its place and the image's UUID. A file cut or
 * overwritten under us (an operator's cp) fails here and is never served.
 * Returns 0 or a negative NDZ_E* code.
 */
static int load_chunk(struct server *s, uint8_t *buf, uint32_t i)
{
	struct ndz_chunk_hdr h;
	struct ndz_orig_hdr oh;
	int r = ndz_io_read_full(s->img, buf, NDZ_CHUNK_SIZE, (uint64_t)i * NDZ_CHUNK_SIZE, NULL,
				 NULL);

	if (r < 0)
		return r;
	/* an original image's chunk has no CRC: a sound header of the same version,
	   at its place, and (V4) of the same image */
	if (s->orig_version) {
		r = ndz_orig_decode(buf, &oh, NULL, 0);
		if (r == 0 && (oh.version != s->orig_version || oh.index != i ||
			       (oh.version == 4 && memcmp(oh.imageid, s->info.uuid, 16) != 0)))
			r = NDZ_EMISMATCH;
		return r;
	}
	r = ndz_chunk_check(buf, &h);
	if (r == 0 && (h.index != i || memcmp(h.uuid, s->info.uuid, 16) != 0))
		r = NDZ_EMISMATCH;
	return r;
}

static void *sender(void *arg)
{
	struct server *s = arg;
	uint8_t *chunk = malloc(NDZ_CHUNK_SIZE);
	uint8_t pkt[SEND_BATCH][NDZ_PKT_MAX], rep[SEND_BATCH][NDZ_BLOCK_SIZE];
	unsigned batch;
	int64_t loaded = -1;
	uint64_t features_ns = 0, rate = 0, traced = 0;
	struct ndz_pace pace;
	struct ndz_pkt p;

	if (!chunk) {
		pthread_mutex_lock(&s->lock);
		s->fatal = 1;
		snprintf(s->fatal_msg, sizeof(s->fatal_msg), "out of memory");
		pthread_mutex_unlock(&s->lock);
		return NULL;
	}
	if (s->adapt) {
		pthread_mutex_lock(&s->lock);
		rate = ndz_adapt_rate(s->adapt, ndz_now_ns());
		pthread_mutex_unlock(&s->lock);
		ndz_pace_init(&pace, rate, burst_for(rate), ndz_now_ns());
	} else {
		ndz_pace_init(&pace, s->rate, s->burst, ndz_now_ns());
	}
	memset(&p, 0, sizeof(p));
	p.type = NDZ_PKT_BLOCK;
	p.tag = s->tag;
	pthread_mutex_lock(&s->lock);
	while (!atomic_load(&s->stop)) {
		int64_t c = ndz_serve_next_chunk(s->serve);
		int r;

		if (c < 0) {
			struct timespec ts;
			uint64_t w0 = ndz_now_ns();

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 200000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			pthread_cond_timedwait(&s->cond, &s->lock, &ts);
			if (s->st.first_ns)
				s->st.wait_ns += ndz_now_ns() - w0;
			continue;
		}
		if (s->adapt) {
			s->pass_ns[c] = ndz_now_ns();
			s->pass_sent[c] = 0;
		}
		pthread_mutex_unlock(&s->lock);
		/* a client that missed the announcement learns of repairs within a second */
		if (s->repair && ndz_now_ns() - features_ns > 1000000000ull) {
			send_features(s);
			features_ns = ndz_now_ns();
		}
		p.chunk = (uint32_t)c;
		if (loaded != c && p.chunk >= s->nchunks) {
			memcpy(chunk, s->manifest + (size_t)(p.chunk - s->nchunks) * NDZ_CHUNK_SIZE,
			       NDZ_CHUNK_SIZE);
			loaded = c;
		}
		if (loaded != c) {
			r = load_chunk(s, chunk, p.chunk);
			if (r < 0) {
				pthread_mutex_lock(&s->lock);
				s->fatal = 1;
				snprintf(s->fatal_msg, sizeof(s->fatal_msg), "%s: chunk %u: %s%s; "
					 "stopping", s->path, p.chunk, ndz_strerror(r),
					 r == NDZ_ESHORTREAD ? " (the file shrank while served)" :
					 r == NDZ_EIO ? "" : " (the file changed while served)");
				break;
			}
			loaded = c;
		}
		/* the blocks lib/serve chooses, until the chunk is done, a few at a time
		 * (one call sends them); the lock is held while choosing and counting, not
		 * while pacing and sending */
		pthread_mutex_lock(&s->lock);
		for (;;) {
			struct ndz_serve_item its[SEND_BATCH];
			const uint8_t *bufs[SEND_BATCH];
			size_t lens[SEND_BATCH];
			uint64_t bytes = 0, now;
			unsigned k = 0;

			if (s->rate_changed) {
				/* a new cap from the master (SIGUSR2): fixed from now on */
				s->rate_changed = 0;
				ndz_adapt_free(s->adapt);
				s->adapt = NULL;
				ndz_pace_set_rate(&pace, s->rate, s->burst, ndz_now_ns());
			}
			batch = batch_for(s, &pace);
			while (k < batch && !atomic_load(&s->stop) && ndz_serve_next(s->serve, &its[k]))
				k++;
			if (!k)
				break;
			pthread_mutex_unlock(&s->lock);
			for (unsigned i = 0; i < k; i++) {
				if (its[i].repair) {
					if (its[i].stripe == NDZ_FEC_WHOLE)
						/* cannot fail: prepared at start, index in range */
						(void)ndz_fec_wencode(s->fec, chunk, its[i].index,
								      rep[i]);
					else
						ndz_fec_encode(s->fec, chunk, its[i].stripe,
							       its[i].index, rep[i]);
					p.type = NDZ_PKT_REPAIR;
					p.block = 0;
					p.stripe = (uint8_t)its[i].stripe;
					p.index = (uint8_t)its[i].index;
					p.data = rep[i];
				} else {
					p.type = NDZ_PKT_BLOCK;
					p.block = (uint16_t)its[i].block;
					p.data = chunk + (size_t)its[i].block * NDZ_BLOCK_SIZE;
				}
				lens[i] = (size_t)ndz_pkt_encode(&p, pkt[i], sizeof(pkt[i]));
				bufs[i] = pkt[i];
				bytes += lens[i] + WIRE_OVERHEAD;
			}
			ndz_pace_wait(&pace, bytes);
			if (ndz_net_send_many(s->net, bufs, lens, k) < 0 && cli_verbose)
				cli_warn("send: %s", strerror(errno));
			now = ndz_now_ns();
			pthread_mutex_lock(&s->lock);
			if (!s->st.first_ns)
				s->st.first_ns = now;
			s->st.empty_ns += s->st.wait_ns;
			s->st.wait_ns = 0;
			s->st.last_ns = now;
			for (unsigned i = 0; i < k; i++) {
				s->st.bytes_sent += lens[i];
				if (its[i].repair)
					ndz_serve_repair_sent(s->serve, p.chunk, its[i].stripe);
				else
					ndz_serve_sent(s->serve, p.chunk, its[i].block);
			}
			if (s->adapt) {
				uint64_t nr;

				s->sent_ns[p.chunk] = now;
				s->pass_sent[p.chunk] += k;
				ndz_adapt_sent(s->adapt, k);
				nr = ndz_adapt_rate(s->adapt, now);
				if (cli_verbose > 1)
					trace_rate(s->adapt, &traced);
				if (nr != rate) {
					ndz_pace_set_rate(&pace, nr, burst_for(nr), now);
					rate = nr;
				}
				s->st.last_rate = rate;
			}
		}
	}
	pthread_mutex_unlock(&s->lock);
	free(chunk);
	return NULL;
}

static void print_stats(struct server *s, FILE *f, int json)
{
	struct stats st;
	struct ndz_serve_stats ss;
	double secs, rate, resent;

	pthread_mutex_lock(&s->lock);
	st = s->st;
	ndz_serve_get_stats(s->serve, &ss);
	pthread_mutex_unlock(&s->lock);
	secs = st.last_ns > st.first_ns ? (double)(st.last_ns - st.first_ns) / 1e9 : 0;
	rate = secs > 0 ? (double)(st.bytes_sent + (ss.blocks_sent + ss.repairs_sent) *
				   WIRE_OVERHEAD) * 8 / secs : 0;
	resent = ss.blocks_sent ? (double)(ss.blocks_sent - ss.distinct_sent) / (double)ss.blocks_sent : 0;
	if (json) {
		fprintf(f, "{\"image\": \"%s\", \"chunks\": %u, \"clients\": %llu, \"joins\": %llu, "
			"\"leaves\": %llu, \"requests\": %llu, \"merged\": %llu, "
			"\"dropped_current\": %llu, \"blocks_sent\": %llu, \"distinct_blocks\": %llu, "
			"\"repairs_sent\": %llu, \"whole_repairs_sent\": %llu, "
			"\"resent_share\": %.4f, \"bytes_sent\": %llu, \"seconds_sending\": %.3f, "
			"\"seconds_to_first\": %.3f, \"seconds_empty\": %.3f, "
			"\"rate_bps\": %.0f, \"auto_rate_bps\": %llu, \"bad_packets\": %llu, "
			"\"bad_version\": %llu, "
			"\"wrong_image\": %llu, \"bad_chunk\": %llu}\n",
			s->path, s->nchunks, (unsigned long long)st.clients,
			(unsigned long long)st.joins, (unsigned long long)st.leaves,
			(unsigned long long)ss.requests, (unsigned long long)ss.merged,
			(unsigned long long)ss.dropped_current, (unsigned long long)ss.blocks_sent,
			(unsigned long long)ss.distinct_sent, (unsigned long long)ss.repairs_sent,
			(unsigned long long)ss.whole_sent, resent,
			(unsigned long long)st.bytes_sent, secs,
			st.first_ns ? (double)(st.first_ns - st.start_ns) / 1e9 : 0,
			(double)st.empty_ns / 1e9, rate,
			(unsigned long long)st.last_rate,
			(unsigned long long)st.bad_packets, (unsigned long long)st.bad_version,
			(unsigned long long)st.wrong_image, (unsigned long long)st.bad_chunk);
		return;
	}
	fprintf(f, "%s: %llu clients, %llu requests (%llu merged), %llu blocks sent "
		"(%.1f%% re-sent), %llu repairs, %.1f Mbit/s over %.2f s, %llu bad packets dropped\n",
		cli_progname, (unsigned long long)st.clients, (unsigned long long)ss.requests,
		(unsigned long long)(ss.merged + ss.dropped_current),
		(unsigned long long)ss.blocks_sent, resent * 100,
		(unsigned long long)ss.repairs_sent, rate / 1e6, secs,
		(unsigned long long)(st.bad_packets + st.bad_version + st.wrong_image + st.bad_chunk));
}

/* The statistics so far into path, replaced whole (readers never see half a file). */
static void write_live(struct server *s, const char *path)
{
	char tmp[4096];
	FILE *f;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp) ||
	    !(f = fopen(tmp, "w")))
		return;
	print_stats(s, f, 1);
	if (fclose(f) != 0 || rename(tmp, path) != 0)
		unlink(tmp);
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "group", required_argument, NULL, 'm' },
		{ "port", required_argument, NULL, 'p' },
		{ "interface", required_argument, NULL, 'i' },
		{ "bandwidth", required_argument, NULL, 'W' },
		{ "burst", required_argument, NULL, 'b' },
		{ "gap", required_argument, NULL, 'g' },
		{ "idle-timeout", required_argument, NULL, 'T' },
		{ "ttl", required_argument, NULL, 't' },
		{ "loopback", no_argument, NULL, 'L' },
		{ "stats-json", required_argument, NULL, 'J' },
		{ "no-repair", no_argument, NULL, 'R' },
		{ "no-whole-repair", no_argument, NULL, 0x101 },
		{ "manifest", required_argument, NULL, 'F' },
		{ "stats-live", required_argument, NULL, 'K' },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	struct server s;
	struct ndz_net_opts no = { .group = "239.192.0.1", .port = 3564, .ttl = 5 };
	const char *json = NULL, *manifest = NULL, *live = NULL;
	uint64_t live_ns = 0;
	uint64_t burst_pkts = 0, gap_us = 0, v;
	int auto_rate = 0;
	struct ndz_error e = { 0 };
	pthread_t rt, stt;
	sigset_t set;
	siginfo_t si;
	int c, r, code = EXIT_OK, announce = 3;

	cli_init(argv[0]);
	memset(&s, 0, sizeof(s));
	s.st.start_ns = ndz_now_ns();
	s.rate = 100000000;
	s.idle = 1800;
	s.repair = NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE;
	while ((c = getopt_long(argc, argv, "m:p:i:W:b:g:T:t:LqvhV", lopts, NULL)) != -1) {
		switch (c) {
		case 'm': no.group = optarg; break;
		case 'p': no.port = (uint16_t)cli_parse_int(optarg, "-p", 1, 65535); break;
		case 'i': no.iface = optarg; break;
		case 'W':
			auto_rate = strncmp(optarg, "auto", 4) == 0 &&
				    (optarg[4] == 0 || optarg[4] == ':');
			v = 1000000000;
			if ((auto_rate && optarg[4] && cli_parse_u64(optarg + 5, 0, &v) != 0) ||
			    (!auto_rate && cli_parse_u64(optarg, 0, &v) != 0) || v < 8000)
				cli_usage_error("-W: bad bandwidth '%s' (bits/s, at least 8k, or "
						"auto[:MAX])", optarg);
			s.rate = v;
			break;
		case 'b': burst_pkts = (uint64_t)cli_parse_int(optarg, "-b", 1, 100000); break;
		case 'g': gap_us = (uint64_t)cli_parse_int(optarg, "-g", 1, 10000000); break;
		case 'T': s.idle = cli_parse_int(optarg, "-T", 0, 1000000000); break;
		case 't': no.ttl = cli_parse_int(optarg, "-t", 1, 255); break;
		case 'L': no.loop = 1; break;
		case 'J': json = optarg; break;
		case 'R': s.repair = 0; break;
		case 0x101: s.repair &= ~NDZ_FEAT_WHOLE; break;
		case 'F': manifest = optarg; break;
		case 'K': live = optarg; break;
		default: cli_common_option(c, usage_text); break;
		}
	}
	if (optind != argc - 1)
		cli_usage_error("expected one IMAGE argument");
	if (ndz_net_group(no.group, &(uint32_t){ 0 }, &e) != 0)
		cli_usage_error("-m %s", ndz_error_msg(&e));
	if (!!burst_pkts != !!gap_us)
		cli_usage_error("-b and -g go together");
	if (burst_pkts && auto_rate)
		cli_usage_error("-W auto and -b/-g exclude each other");
	if (burst_pkts) {
		s.rate = burst_pkts * (NDZ_PKT_BLOCK_LEN + WIRE_OVERHEAD) * 8 * 1000000 / gap_us;
		s.burst = burst_pkts * (NDZ_PKT_BLOCK_LEN + WIRE_OVERHEAD);
		s.bursts = 1;
	} else {
		s.burst = burst_for(s.rate);
	}
	s.path = argv[optind];
	open_image(&s);
	open_manifest(&s, manifest);
	s.client_ids = calloc(MAX_CLIENTS, sizeof(*s.client_ids));
	if (!s.client_ids)
		cli_die(EXIT_FAIL, "out of memory");
	if (auto_rate) {
		/* from 50 Mbit/s (or the cap when lower) up, from 1 Mbit/s down */
		struct ndz_adapt_opts ao = { 1000000, s.rate, 50000000, 0,
					     (NDZ_PKT_BLOCK_LEN + WIRE_OVERHEAD) * 8 };

		if (ao.min_bps > s.rate)
			ao.min_bps = s.rate;
		if (ao.start_bps > s.rate)
			ao.start_bps = s.rate;
		if ((r = ndz_adapt_create(&ao, ndz_now_ns(), &s.adapt)) < 0)
			cli_die(EXIT_FAIL, "%s", ndz_strerror(r));
		s.sent_ns = calloc((size_t)s.nchunks + s.mchunks, sizeof(*s.sent_ns));
		s.pass_ns = calloc((size_t)s.nchunks + s.mchunks, sizeof(*s.pass_ns));
		s.pass_sent = calloc((size_t)s.nchunks + s.mchunks, sizeof(*s.pass_sent));
		if (!s.sent_ns || !s.pass_ns || !s.pass_sent)
			cli_die(EXIT_FAIL, "out of memory");
	}
	if ((r = ndz_serve_create(s.nchunks + s.mchunks, &s.serve)) < 0 ||
	    (s.repair && (r = ndz_fec_create(&s.fec)) < 0) ||
	    ((s.repair & NDZ_FEAT_WHOLE) && (r = ndz_fec_wprepare(s.fec)) < 0))
		cli_die(EXIT_FAIL, "%s", ndz_strerror(r));
	if (ndz_net_open(&no, &s.net, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	{
		/* our own blocks, looped back (-L) or another server's, are never read:
		 * dropping them in the kernel spares the receiver a wake-up each */
		static const uint8_t data_types[] = { NDZ_PKT_BLOCK, NDZ_PKT_REPAIR };

		if (ndz_net_ignore(s.net, NDZ_PKT_TYPE_OFFSET, data_types, 2) < 0 && cli_verbose)
			cli_warn("no socket filter (%s): reading every block back", strerror(errno));
	}
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	s.last_activity_ns = ndz_now_ns();

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (pthread_create(&rt, NULL, receiver, &s) || pthread_create(&stt, NULL, sender, &s))
		cli_die(EXIT_FAIL, "cannot start threads");
	if (cli_verbose)
		cli_info("serving %s (%u chunks) on %s port %u at %.1f Mbit/s", s.path, s.nchunks,
			 no.group, no.port, (double)s.rate / 1e6);
	for (;;) {
		/*
		 * Announce, three times 100 ms apart so that one lost datagram does not
		 * matter: clients already waiting start now and together instead of at
		 * their next JOIN.
		 */
		struct timespec ts = { 0, announce ? 100000000 : 200000000 };
		int sig, idle_now;

		if (announce) {
			send_reply(&s, 0);
			announce--;
		}
		sig = sigtimedwait(&set, &si, &ts);
		if (live && ndz_now_ns() - live_ns >= 1000000000u) {
			live_ns = ndz_now_ns();
			write_live(&s, live);
		}

		if (sig == SIGUSR1) {
			print_stats(&s, stderr, 0);
			continue;
		}
		/* a new rate in kbit/s, from sigqueue (the image master dividing its cap) */
		if (sig == SIGUSR2) {
			if (si.si_code == SI_QUEUE && si.si_value.sival_int >= 8) {
				pthread_mutex_lock(&s.lock);
				s.rate = (uint64_t)si.si_value.sival_int * 1000;
				s.burst = burst_for(s.rate);
				s.info.rate_bps = s.rate;
				s.rate_changed = 1;
				s.bursts = 0;
				pthread_mutex_unlock(&s.lock);
				if (cli_verbose)
					cli_info("rate now %.1f Mbit/s", (double)s.rate / 1e6);
			}
			continue;
		}
		if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
			if (cli_verbose)
				cli_info("stopping on signal %d", sig);
			break;
		}
		pthread_mutex_lock(&s.lock);
		idle_now = s.idle && !ndz_serve_busy(s.serve) &&
			   ndz_now_ns() - s.last_activity_ns > (uint64_t)s.idle * 1000000000u;
		r = s.fatal;
		pthread_mutex_unlock(&s.lock);
		if (r) {
			cli_error("%s", s.fatal_msg);
			code = EXIT_FAIL;
			break;
		}
		if (idle_now) {
			if (cli_verbose)
				cli_info("no client for %d s; exiting", s.idle);
			break;
		}
	}
	atomic_store(&s.stop, 1);
	pthread_mutex_lock(&s.lock);
	pthread_cond_broadcast(&s.cond);
	pthread_mutex_unlock(&s.lock);
	pthread_join(rt, NULL);
	pthread_join(stt, NULL);
	if (!cli_quiet)
		print_stats(&s, stderr, 0);
	if (json) {
		FILE *f = fopen(json, "w");

		if (!f) {
			cli_error("%s: %s", json, strerror(errno));
			code = EXIT_FAIL;
		} else {
			print_stats(&s, f, 1);
			if (fclose(f) != 0) {
				cli_error("%s: %s", json, strerror(errno));
				code = EXIT_FAIL;
			}
		}
	}
	ndz_serve_free(s.serve);
	ndz_fec_free(s.fec);
	ndz_adapt_free(s.adapt);
	free(s.sent_ns);
	free(s.pass_ns);
	free(s.pass_sent);
	ndz_net_free(s.net);
	ndz_io_close(s.img);
	free(s.client_ids);
	free(s.manifest);
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cond);
	return code;
}
