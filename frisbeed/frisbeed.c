/*
 * frisbeed: serve one image to frisbee clients over UDP multicast. The decisions are
 * lib/mcast/server.c's; here one thread receives datagrams into it, one loads chunks
 * and sends its batches, and main handles signals, statistics and the idle timeout.
 * Calls into the server are made under the lock, but the sender's reading and
 * encoding (server.h says why they may run beside the others).
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/format.h"
#include "ctl/sessctl.h"
#include "mcast/sessans.h"
#include "ctl/sitecall.h"
#include "mcast/net.h"
#include "mcast/pace.h"
#include "mcast/server.h"

struct session {
	struct ndz_server *srv;        /* under lock */
	struct ndz_server_batch *batch; /* the sender's */
	struct ndz_io *img;
	struct ndz_net *net;
	pthread_mutex_t lock;
	pthread_cond_t cond;           /* the sender waits here for work */
	atomic_int stop;               /* set by main, read by both threads */
	struct ndz_error fatal;        /* what stopped a thread (under lock) */
	int growing;                   /* --growing: chunks may still be arriving */
	const char *name;              /* the image file */
};

#define GROWING_WAIT 12000             /* --growing: 50 ms rounds a chunk is waited for */

/*
 * Chunk i into buf; with --growing (a site master still fetching the image,
 * doc/SITES.md), a chunk whose header is not written yet (it is written after its
 * data) is read again until it is, for at most 10 minutes.
 */
static int load(struct session *s, uint8_t *buf, uint32_t i)
{
	uint64_t off = (uint64_t)i * NDZ_CHUNK_SIZE;
	int r = ndz_io_read_full(s->img, buf, NDZ_CHUNK_SIZE, off, NULL, NULL);

	for (int w = 0; s->growing && r == 0 && !(buf[0] | buf[1] | buf[2] | buf[3]) &&
	     w < GROWING_WAIT && !atomic_load(&s->stop); w++) {
		if (w == 0)             /* the fetcher brings this one next (IMAGE.want) */
			ndz_site_want_write(s->name, i);
		nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
		r = ndz_io_read_full(s->img, buf, NDZ_CHUNK_SIZE, off, NULL, NULL);
	}
	return r;
}

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
	"  --index FILE             serve this content index of IMAGE (default IMAGE.index\n"
	"                           when it exists), for frisbee --seed\n"
	"  --stats-json FILE        write the statistics as JSON at exit\n"
	"  --control SOCKET         answer the image master's status, rate, identify and\n"
	"                           hold questions on this unix socket (lib/ctl/sessctl)\n"
	"  --lost-timeout SECONDS   a client silent this long is lost (default 30)\n"
	"  --growing                IMAGE is still arriving (a site master's fetch): wait\n"
	"                           for a chunk not yet written, up to 10 minutes\n"
	"  --log-time               begin each message line with its ISO 8601 UTC time\n"
	"  --syslog                 messages to syslog (facility daemon), not stderr\n"
	"  -q, --quiet              no statistics line at exit\n"
	"  -v, --verbose            more messages (repeat for more)\n"
	"  -h, --help               this help\n"
	"  -V, --version          show the version and exit\n"
	"\nExit status: 0 after the idle timeout or a signal; 1 failure; 2 bad usage.\n";

static void send_reply(struct session *s, const struct ndz_server_reply *rp)
{
	for (unsigned i = 0; i < rp->count; i++)
		ndz_net_send(s->net, rp->bufs[i], rp->lens[i], NULL);
}

static void say_packet(const struct ndz_pkt *p, uint32_t from)
{
	char a[16];

	if (p->type == NDZ_PKT_JOIN && cli_verbose)
		cli_info("join from %s (client %08x)", ndz_net_ntoa(from, a), p->client_id);
	else if (p->type == NDZ_PKT_LEAVE && cli_verbose)
		cli_info("leave from %s (client %08x, %s): %u ms, %llu blocks, %llu duplicates, "
			 "%llu requests", ndz_net_ntoa(from, a), p->client_id,
			 p->leave.status ? "failed" : "complete", p->leave.elapsed_ms,
			 (unsigned long long)p->leave.blocks_received,
			 (unsigned long long)p->leave.duplicates,
			 (unsigned long long)p->leave.requests_sent);
	else if ((p->type == NDZ_PKT_REQUEST || p->type == NDZ_PKT_PREQUEST) && cli_verbose > 2)
		cli_info("request from %s: chunk %u, %u blocks", ndz_net_ntoa(from, a), p->chunk,
			 p->type == NDZ_PKT_REQUEST ? p->count : ndz_bit_count(p->bitmap));
	else if (p->type == NDZ_PKT_RREQUEST && cli_verbose > 2)
		cli_info("repair request from %s: chunk %u", ndz_net_ntoa(from, a), p->chunk);
}

static void *receiver(void *arg)
{
	struct session *s = arg;
	uint8_t buf[2048];
	struct ndz_server_reply rp;
	struct ndz_error e = { 0 };
	struct ndz_pkt p;
	uint32_t from;

	while (!atomic_load(&s->stop)) {
		int n = ndz_net_recv(s->net, buf, sizeof(buf), 200, &from, &e), r;

		if (n < 0) {           /* for main to report */
			pthread_mutex_lock(&s->lock);
			ndz_error_copy(&s->fatal, &e);
			pthread_mutex_unlock(&s->lock);
			return NULL;
		}
		if (n == 0)
			continue;
		pthread_mutex_lock(&s->lock);
		r = ndz_server_packet(s->srv, buf, (size_t)n, from, ndz_now_ns(), &rp, &p);
		if (r == 2)
			pthread_cond_signal(&s->cond);
		pthread_mutex_unlock(&s->lock);
		if (r > 0)
			say_packet(&p, from);
		send_reply(s, &rp);
	}
	return NULL;
}

/* Load the chunks the server asks for and send its batches, paced, until stopped. */
static void *sender(void *arg)
{
	struct session *s = arg;
	struct ndz_server_batch *b = s->batch;
	struct ndz_error e = { 0 };
	char msg[256];

	pthread_mutex_lock(&s->lock);
	while (!atomic_load(&s->stop)) {
		uint64_t now = ndz_now_ns();
		enum ndz_server_step st = ndz_server_plan(s->srv, now, b);
		int r;

		if (st == NDZ_SERVER_WAIT) {
			uint64_t t = ndz_wall_ns() + 200000000u;
			struct timespec ts = { (time_t)(t / 1000000000u), (long)(t % 1000000000u) };

			pthread_cond_timedwait(&s->cond, &s->lock, &ts);
			continue;
		}
		pthread_mutex_unlock(&s->lock);
		if (st == NDZ_SERVER_LOAD) {
			r = load(s, ndz_server_chunk_buf(s->srv), b->chunk);
			pthread_mutex_lock(&s->lock);
			if (ndz_server_check_chunk(s->srv, b->chunk, r, &e) < 0) {
				ndz_error_set(&s->fatal, e.code, 0, "%s; stopping", ndz_error_msg(&e));
				break;
			}
			continue;
		}
		ndz_server_build(s->srv, b);
		if (b->delay_ns)
			ndz_pace_sleep_until(now + b->delay_ns);
		if (ndz_net_send_many(s->net, b->bufs, b->lens, b->count, &e) < 0 && cli_verbose)
			cli_warn("%s", ndz_error_msg(&e));
		ndz_error_clear(&e);
		pthread_mutex_lock(&s->lock);
		ndz_server_sent(s->srv, b, ndz_now_ns());
		/* -W auto at -vv: each interval's decision, once */
		if (cli_verbose > 1 && ndz_server_rate_trace(s->srv, msg, sizeof(msg)))
			cli_info("%s", msg);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

static void print_stats(struct session *s)
{
	struct ndz_server_stats st;

	pthread_mutex_lock(&s->lock);
	ndz_server_get_stats(s->srv, &st);
	pthread_mutex_unlock(&s->lock);
	cli_log("%llu clients, %llu requests (%llu merged), %llu blocks sent "
		"(%.1f%% re-sent), %llu repairs, %.1f Mbit/s over %.2f s, %llu bad packets "
		"dropped", (unsigned long long)st.clients,
		(unsigned long long)st.requests,
		(unsigned long long)(st.merged + st.dropped_current),
		(unsigned long long)st.blocks_sent, st.resent_share * 100,
		(unsigned long long)st.repairs_sent, st.rate_bps / 1e6, st.seconds_sending,
		(unsigned long long)(st.bad_packets + st.bad_version + st.wrong_image + st.bad_chunk));
}

/* The statistics as JSON into path, replaced whole (readers never see half a file). */
static int write_json(struct session *s, const char *path, struct ndz_error *e)
{
	char buf[65536];              /* the JSON of a name of 4096 bytes, all escaped, and clients */
	int n;

	pthread_mutex_lock(&s->lock);
	n = ndz_server_status_json(s->srv, ndz_now_ns(), buf, sizeof(buf), e);
	pthread_mutex_unlock(&s->lock);
	return n < 0 ? n : ndz_file_replace(path, buf, (size_t)n, 0644, e);
}


/* ---- signals: the one place main() reacts to them; 1: stop serving ---- */
static void block_signals(sigset_t *set)
{
	static const int sigs[] = { SIGUSR1, SIGINT, SIGTERM, SIGHUP };

	sigemptyset(set);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(set, sigs[i]);
	pthread_sigmask(SIG_BLOCK, set, NULL);
}

static int on_signal(struct session *s, int sig)
{
	if (sig == SIGUSR1)
		print_stats(s);
	if (sig == SIGINT || sig == SIGTERM || sig == SIGHUP) {
		if (cli_verbose)
			cli_info("stopping on signal %d", sig);
		return 1;
	}
	return 0;
}
/* ---- end of signals ---- */

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "group", required_argument, NULL, 'm' }, { "port", required_argument, NULL, 'p' },
		{ "interface", required_argument, NULL, 'i' }, { "ttl", required_argument, NULL, 't' },
		{ "bandwidth", required_argument, NULL, 'W' }, { "gap", required_argument, NULL, 'g' },
		{ "burst", required_argument, NULL, 'b' }, { "loopback", no_argument, NULL, 'L' },
		{ "idle-timeout", required_argument, NULL, 'T' },
		{ "no-repair", no_argument, NULL, 'R' },
		{ "no-whole-repair", no_argument, NULL, 0x101 },
		{ "manifest", required_argument, NULL, 'F' }, { "index", required_argument, NULL, 'X' },
		{ "stats-json", required_argument, NULL, 'J' },
		{ "control", required_argument, NULL, 'K' }, { "log-time", no_argument, NULL, 0x111 },
		{ "syslog", no_argument, NULL, 0x112 }, { "lost-timeout", required_argument, NULL, 0x104 },
		{ "growing", no_argument, NULL, 0x105 }, CLI_COMMON_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	/* our own blocks, looped back (-L) or another server's, are never read: dropping
	 * them in the kernel spares the receiver a wake-up each */
	static const uint8_t data_types[] = { NDZ_PKT_BLOCK, NDZ_PKT_REPAIR };
	struct session s;
	struct ndz_server_opts so = { .rate_bps = 100000000,
				      .repair = NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE };
	struct ndz_net_opts no = { .group = "239.192.0.1", .port = 3564, .ttl = 5 };
	const char *json = NULL, *manifest = NULL, *control = NULL, *index = NULL;
	struct ndz_sessans *ctl = NULL;
	uint64_t v;
	struct ndz_error e = { 0 };
	struct ndz_server_reply rp;
	pthread_t rt, stt;
	sigset_t set;
	siginfo_t si;
	int c, code = EXIT_OK, announce = 3, idle = 1800;

	cli_init(argv[0]);
	memset(&s, 0, sizeof(s));
	while ((c = getopt_long(argc, argv, "m:p:i:W:b:g:T:t:LqvhV", lopts, NULL)) != -1) {
		switch (c) {
		case 'm': no.group = optarg; break;
		case 'p': no.port = (uint16_t)cli_parse_int(optarg, "-p", 1, 65535); break;
		case 'i': no.iface = optarg; break;
		case 'W':
			so.auto_rate = strncmp(optarg, "auto", 4) == 0 &&
				       (optarg[4] == 0 || optarg[4] == ':');
			v = 1000000000;
			if ((so.auto_rate && optarg[4] && cli_parse_u64(optarg + 5, 0, &v) != 0) ||
			    (!so.auto_rate && cli_parse_u64(optarg, 0, &v) != 0) || v < 8000)
				cli_usage_error("-W: bad bandwidth '%s' (bits/s, at least 8k, or "
						"auto[:MAX])", optarg);
			so.rate_bps = v;
			break;
		case 'b': so.burst_pkts = (unsigned)cli_parse_int(optarg, "-b", 1, 100000); break;
		case 'g': so.gap_us = (uint64_t)cli_parse_int(optarg, "-g", 1, 10000000); break;
		case 'T': idle = cli_parse_int(optarg, "-T", 0, 1000000000); break;
		case 't': no.ttl = cli_parse_int(optarg, "-t", 1, 255); break;
		case 'L': no.loop = 1; break;
		case 'J': json = optarg; break;
		case 'R': so.repair = 0; break;
		case 0x101: so.repair &= ~NDZ_FEAT_WHOLE; break;
		case 'F': manifest = optarg; break;
		case 'X': index = optarg; break;
		case 'K': control = optarg; break;
		case 0x111: case 0x112: cli_log_mode(c - 0x110); break;      /* 0x110 + CLI_LOG_* */
		case 0x104: so.lost_ms = 1000u * (uint32_t)cli_parse_int(optarg, "--lost-timeout", 1, 86400); break;
		case 0x105: s.growing = 1; break;
		default: cli_common_option(c, usage_text); break;
		}
	}
	if (optind != argc - 1)
		cli_usage_error("expected one IMAGE argument");
	if (ndz_net_group(no.group, &(uint32_t){ 0 }, &e) != 0)
		cli_usage_error("-m %s", ndz_error_msg(&e));
	if (!!so.burst_pkts != !!so.gap_us)
		cli_usage_error("-b and -g go together");
	if (so.burst_pkts && so.auto_rate)
		cli_usage_error("-W auto and -b/-g exclude each other");
	so.name = argv[optind];
	s.name = so.name;
	so.info.idle_timeout = (uint32_t)idle;
	if (ndz_io_open_file(so.name, NDZ_IO_READ, &s.img, &e) < 0 ||
	    ndz_server_image(s.img, &so, &e) < 0 ||
	    (c = ndz_server_manifest(so.name, manifest, &so, &e)) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (c > 0)
		cli_warn("%s; serving no manifest", ndz_error_msg(&e));
	else if (so.manifest && cli_verbose)
		cli_info("serving the manifest of %s as chunks %u-%u", so.name, so.info.chunks,
			 so.info.chunks + (uint32_t)((so.manifest_len - 1) / NDZ_CHUNK_SIZE));
	ndz_error_clear(&e);
	if ((c = ndz_server_index(so.name, index, &so, &e)) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (c > 0)
		cli_warn("%s; serving no index", ndz_error_msg(&e));
	ndz_error_clear(&e);
	if (ndz_server_create(&so, ndz_now_ns(), &s.srv, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	free((void *)so.manifest);
	free((void *)so.index);
	if (!(s.batch = malloc(sizeof(*s.batch))))
		cli_die(EXIT_FAIL, "out of memory");
	if (ndz_net_open(&no, &s.net, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (ndz_net_ignore(s.net, NDZ_PKT_TYPE_OFFSET, data_types, 2, &e) < 0 && cli_verbose)
		cli_warn("no socket filter (%s): reading every block back", ndz_error_msg(&e));
	ndz_error_clear(&e);
	pthread_mutex_init(&s.lock, NULL);
	pthread_cond_init(&s.cond, NULL);
	block_signals(&set);
	if (pthread_create(&rt, NULL, receiver, &s) || pthread_create(&stt, NULL, sender, &s))
		cli_die(EXIT_FAIL, "cannot start threads");
	if (control && ndz_sessans_start(control, s.srv, &s.lock, &s.cond, &ctl, &e) != 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (cli_verbose)
		cli_info("serving %s (%u chunks) on %s port %u at %.1f Mbit/s", so.name,
			 so.info.chunks, no.group, no.port, (double)ndz_server_info(s.srv)->rate_bps / 1e6);
	for (;;) {
		/* announce, three times 100 ms apart (one lost datagram does not matter):
		 * clients already waiting start now and together, not at their next JOIN */
		struct timespec ts = { 0, announce ? 100000000 : 200000000 };
		int sig, idle_now;

		if (announce) {
			pthread_mutex_lock(&s.lock);
			ndz_server_announce(s.srv, &rp);
			pthread_mutex_unlock(&s.lock);
			send_reply(&s, &rp);
			announce--;
		}
		sig = sigtimedwait(&set, &si, &ts);
		if (sig > 0 && on_signal(&s, sig))
			break;
		if (sig > 0)
			continue;
		/* under the lock a HOLD (the master sent a client) is taken under: once idle
		 * is decided here, holds are refused, and a taken one defers it */
		pthread_mutex_lock(&s.lock);
		idle_now = ndz_server_idle(s.srv, ndz_now_ns());
		ndz_error_copy(&e, &s.fatal);
		pthread_mutex_unlock(&s.lock);
		if (e.code)
			break;
		if (idle_now) {
			if (cli_verbose)
				cli_info("no client for %d s; exiting", idle);
			break;
		}
	}
	ndz_sessans_stop(ctl);
	atomic_store(&s.stop, 1);
	pthread_mutex_lock(&s.lock);
	pthread_cond_broadcast(&s.cond);
	pthread_mutex_unlock(&s.lock);
	pthread_join(rt, NULL);
	pthread_join(stt, NULL);
	if (e.code) {
		cli_error("%s", ndz_error_msg(&e));
		code = EXIT_FAIL;
	}
	if (!cli_quiet)
		print_stats(&s);
	ndz_error_clear(&e);
	if (json && write_json(&s, json, &e) < 0) {
		cli_error("%s", ndz_error_msg(&e));
		code = EXIT_FAIL;
	}
	ndz_server_free(s.srv);
	free(s.batch);
	ndz_net_free(s.net);
	ndz_io_close(s.img);
	pthread_mutex_destroy(&s.lock);
	pthread_cond_destroy(&s.cond);
	return code;
}
