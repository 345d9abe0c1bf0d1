/*
 * frisbeed: serve one image to frisbee clients over UDP multicast. The decisions are
 * lib/mcast/server.c's, and its driver (lib/mcast/sdrive: the lock, a receiving and
 * a sending thread) runs it over the socket and the image; main handles options,
 * signals, messages, statistics and the idle timeout.
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
#include "mcast/sdrive.h"
#include "mcast/server.h"

struct session {
	struct ndz_server *srv;
	struct ndz_sdrive *drv;        /* every call into srv goes through it, or its lock */
	struct ndz_sdrive_net io;      /* the socket and the image */
	int growing;                   /* --growing: chunks may still be arriving */
	const char *name;              /* the image file */
	atomic_int stopping;           /* set by main before the driver stops */
	int (*read)(void *ctx, uint8_t *buf, uint32_t chunk);  /* the table's own */
};

#define GROWING_WAIT 12000             /* --growing: 50 ms rounds a chunk is waited for */

static struct session *grow;           /* --growing: the one session of this process */

/*
 * The driver's read with --growing (a site master still fetching the image,
 * doc/SITES.md): a chunk whose header is not written yet (it is written after its
 * data) is read again until it is, for at most 10 minutes.
 */
static int growing_read(void *ctx, uint8_t *buf, uint32_t i)
{
	int r = grow->read(ctx, buf, i);

	for (int w = 0; r == 0 && !(buf[0] | buf[1] | buf[2] | buf[3]) &&
	     w < GROWING_WAIT && !atomic_load(&grow->stopping); w++) {
		if (w == 0)             /* the fetcher brings this one next (IMAGE.want) */
			ndz_site_want_write(grow->name, i);
		nanosleep(&(struct timespec){ 0, 50000000 }, NULL);
		r = grow->read(ctx, buf, i);
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
	"  --max-datagram BYTES     the largest UDP payload to send (default: the\n"
	"                           interface's MTU less 28): datagrams of several blocks\n"
	"                           to clients that all take them; 1044 or less: one block\n"
	"                           a datagram, as frisbeed before them\n"
	"  --no-repair              send no repair blocks (clients ask for blocks)\n"
	"  --no-whole-repair        send repairs of stripes only, none of whole chunks\n"
	"  --no-range-repair        answer no repair requests of block ranges (frisbee\n"
	"                           --seed then asks for the blocks it lost of a piece)\n"
	"  --manifest FILE          serve this signed manifest of IMAGE (default\n"
	"                           IMAGE.manifest when it exists), for frisbee --key\n"
	"  --index FILE             serve this content index of IMAGE (default IMAGE.index\n"
	"                           when it exists), for frisbee --seed\n"
	"  --stats-json FILE        write the statistics as JSON at exit\n"
	"  --control SOCKET         answer the image master's status, rate, identify and\n"
	"                           hold questions on this unix socket (lib/ctl/sessctl)\n"
	"  --lost-timeout SECONDS   a client silent this long is lost (default 30)\n"
	"  --gather MS              after a quiet spell (nothing sent for half a second),\n"
	"                           and on a first request for the index, wait up to MS\n"
	"                           before sending, so that clients started together share\n"
	"                           one pass (default 100, 0: send at once)\n"
	"  --growing                IMAGE is still arriving (a site master's fetch): wait\n"
	"                           for a chunk not yet written, up to 10 minutes\n"
	"  --log-time               begin each message line with its ISO 8601 UTC time\n"
	"  --syslog                 messages to syslog (facility daemon), not stderr\n"
	"  -q, --quiet              no statistics line at exit\n"
	"  -v, --verbose            more messages (repeat for more)\n"
	"  -h, --help               this help\n"
	"  -V, --version          show the version and exit\n"
	"\nExit status: 0 after the idle timeout or a signal; 1 failure; 2 bad usage.\n";

/* The driver's messages (lib/mcast/sdrive.h): an admitted packet. */
static void say_packet(void *ctx, const struct ndz_pkt *p, uint32_t from)
{
	char a[16];

	(void)ctx;
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
	else if (p->type == NDZ_PKT_RANGE_RREQUEST && cli_verbose > 2)
		cli_info("range repair request from %s: chunk %u, blocks %u+%u, %u repairs",
			 ndz_net_ntoa(from, a), p->chunk, p->block, p->count, p->wanted);
}

/* A batch that could not be sent. */
static void say_warn(void *ctx, const struct ndz_error *e)
{
	(void)ctx;
	cli_warn("%s", ndz_error_msg(e));
}

/* -W auto at -vv: each interval's decision. */
static void say_trace(void *ctx, const char *line)
{
	(void)ctx;
	cli_info("%s", line);
}

static void print_stats(struct session *s)
{
	struct ndz_server_stats st;

	ndz_sdrive_stats(s->drv, &st);
	cli_log("%llu clients, %llu requests (%llu merged), %llu blocks sent "
		"(%.1f%% re-sent), %llu repairs, %llu range repairs, %llu datagrams (%llu SPANs, "
		"%llu in offload runs), "
		"%.1f Mbit/s over %.2f s, "
		"%llu bad packets dropped", (unsigned long long)st.clients,
		(unsigned long long)st.requests,
		(unsigned long long)(st.merged + st.dropped_current),
		(unsigned long long)st.blocks_sent, st.resent_share * 100,
		(unsigned long long)st.repairs_sent, (unsigned long long)st.range_sent,
		(unsigned long long)st.datagrams_sent, (unsigned long long)st.spans_sent,
		(unsigned long long)st.offloaded, st.rate_bps / 1e6, st.seconds_sending,
		(unsigned long long)(st.bad_packets + st.bad_version + st.wrong_image + st.bad_chunk));
}

/* The statistics as JSON into path, replaced whole (readers never see half a file). */
static int write_json(struct session *s, const char *path, struct ndz_error *e)
{
	char buf[65536];              /* the JSON of a name of 4096 bytes, all escaped, and clients */
	int n;

	n = ndz_sdrive_status_json(s->drv, buf, sizeof(buf), e);
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
		{ "no-range-repair", no_argument, NULL, 0x107 },
		{ "manifest", required_argument, NULL, 'F' }, { "index", required_argument, NULL, 'X' },
		{ "stats-json", required_argument, NULL, 'J' },
		{ "control", required_argument, NULL, 'K' }, { "log-time", no_argument, NULL, 0x111 },
		{ "syslog", no_argument, NULL, 0x112 }, { "lost-timeout", required_argument, NULL, 0x104 },
		{ "max-datagram", required_argument, NULL, 0x105 },
		{ "growing", no_argument, NULL, 0x106 }, { "gather", required_argument, NULL, 0x108 },
		CLI_COMMON_LONGOPTS, { NULL, 0, NULL, 0 }
	};
	/* our own blocks, looped back (-L) or another server's, are never read: dropping
	 * them in the kernel spares the receiver a wake-up each */
	static const uint8_t data_types[] = { NDZ_PKT_BLOCK, NDZ_PKT_REPAIR, NDZ_PKT_BLOCKS,
					      NDZ_PKT_SPAN, NDZ_PKT_REPAIRS, NDZ_PKT_RANGE_REPAIR };
	struct session s;
	struct ndz_server_opts so = { .rate_bps = 100000000, .gather_ms = NDZ_SERVER_GATHER_MS,
				      .repair = NDZ_FEAT_REPAIR | NDZ_FEAT_WHOLE |
						NDZ_FEAT_RANGE };
	struct ndz_net_opts no = { .group = "239.192.0.1", .port = 3564, .ttl = 5 };
	const char *json = NULL, *manifest = NULL, *control = NULL, *index = NULL;
	struct ndz_sessans *ctl = NULL;
	uint64_t v;
	struct ndz_error e = { 0 };
	struct ndz_sdrive_opts dopt = { .packet = say_packet };
	sigset_t set;
	siginfo_t si;
	int c, code = EXIT_OK, announce = 3, idle = 1800, max_dgram = -1;
	unsigned mtu;

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
		case 0x107: so.repair &= ~NDZ_FEAT_RANGE; break;
		case 'F': manifest = optarg; break;
		case 'X': index = optarg; break;
		case 'K': control = optarg; break;
		case 0x111: case 0x112: cli_log_mode(c - 0x110); break;      /* 0x110 + CLI_LOG_* */
		case 0x105: max_dgram = cli_parse_int(optarg, "--max-datagram", 0, 65507); break;
		case 0x104: so.lost_ms = 1000u * (uint32_t)cli_parse_int(optarg, "--lost-timeout", 1, 86400); break;
		case 0x106: s.growing = 1; break;
		case 0x108: so.gather_ms = (uint32_t)cli_parse_int(optarg, "--gather", 0, 10000); break;
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
	if (ndz_io_open_file(so.name, NDZ_IO_READ, &s.io.img, &e) < 0 ||
	    ndz_server_image(s.io.img, &so, &e) < 0 ||
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
	if (ndz_net_open(&no, &s.io.net, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (ndz_net_ignore(s.io.net, NDZ_PKT_TYPE_OFFSET, data_types,
			   (unsigned)(sizeof(data_types) / sizeof(data_types[0])), &e) < 0 && cli_verbose)
		cli_warn("no socket filter (%s): reading every block back", ndz_error_msg(&e));
	ndz_error_clear(&e);
	/* what we may send: the interface's MTU less the IPv4 and UDP headers */
	mtu = ndz_net_mtu(s.io.net);
	so.max_payload = max_dgram >= 0 ? (uint32_t)max_dgram : mtu > 28 ? mtu - 28 : 0;
	if (cli_verbose > 1)
		cli_info("interface MTU %u: datagrams of up to %u bytes", mtu, so.max_payload);
	if (ndz_server_create(&so, ndz_now_ns(), &s.srv, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	free((void *)so.manifest);
	free((void *)so.index);
	dopt.io = ndz_sdrive_net_io(&s.io);
	if (s.growing) {
		grow = &s;
		s.read = dopt.io.read;
		dopt.io.read = growing_read;
	}
	if (cli_verbose)
		dopt.warn = say_warn;
	if (cli_verbose > 1)
		dopt.trace = say_trace;
	if (ndz_sdrive_create(s.srv, &dopt, &s.drv, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	block_signals(&set);
	if (ndz_sdrive_start(s.drv, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (control && ndz_sessans_start(control, s.srv, ndz_sdrive_lock(s.drv),
					 ndz_sdrive_wake(s.drv), &ctl, &e) != 0)
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
			ndz_sdrive_announce(s.drv);
			announce--;
		}
		sig = sigtimedwait(&set, &si, &ts);
		if (sig > 0 && on_signal(&s, sig))
			break;
		if (sig > 0)
			continue;
		/* under the lock a HOLD (the master sent a client) is taken under: once idle
		 * is decided here, holds are refused, and a taken one defers it */
		idle_now = ndz_sdrive_idle(s.drv);
		ndz_sdrive_fatal(s.drv, &e);
		if (e.code)
			break;
		if (idle_now) {
			if (cli_verbose)
				cli_info("no client for %d s; exiting", idle);
			break;
		}
	}
	ndz_sessans_stop(ctl);
	atomic_store(&s.stopping, 1);
	ndz_sdrive_stop(s.drv);
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
	ndz_sdrive_free(s.drv);
	ndz_net_free(s.io.net);
	ndz_io_close(s.io.img);
	return code;
}
