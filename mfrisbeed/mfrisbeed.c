/*
 * mfrisbeed: the image master. Its options and signals; the service is
 * lib/mserve/mserve (the sockets, threads and lock: UDP GETs and the lab, TCP uploads
 * and STATUS, HTTP, the sessions' control sockets), its decisions lib/master (the
 * session table, the pool, the rate division, upload admission and quota). It starts
 * one frisbeed per image as a detached child and steers it through the session's
 * control socket in the run directory (lib/ctl/sessctl: status, rate, identify,
 * hold). A restarted master adopts the sessions its state file lists.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/err.h"
#include "ctl/ctl.h"
#include "ctl/upload.h"
#include "master/mconf.h"
#include "mcast/net.h"
#include "mserve/labsrv.h"
#include "mserve/mserve.h"

static volatile sig_atomic_t got_hup, got_stop;

static const char usage_text[] =
	"Usage: mfrisbeed [options] -c CONFIG\n"
	"       mfrisbeed --status HOST[:PORT]\n"
	"Hand out images by name, starting one frisbeed per image on demand; take\n"
	"uploads from frisbee-upload.\n\n"
	"  -c, --config FILE        the configuration (see mfrisbeed.conf(5))\n"
	"  -n, --check              check the configuration (images, lab state) and exit\n"
	"  -l, --listen ADDR[:PORT] control address: UDP, and TCP for uploads and status\n"
	"                           (default 0.0.0.0:3563)\n"
	"  -r, --run-dir DIR        where the session state lives (default /run/mfrisbeed,\n"
	"                           the service's; run by hand as a user, give one)\n"
	"  -F, --frisbeed PATH      the frisbeed to run (default: next to mfrisbeed)\n"
	"  -i, --interface IFACE    interface for the sessions (frisbeed -i)\n"
	"  -S, --server ADDR        the sessions' address told to clients (default: found)\n"
	"  -T, --idle-timeout SECONDS  overrides the configuration's idle-timeout\n"
	"  -t, --ttl TTL            multicast TTL for the sessions (default 5)\n"
	"  -L, --loopback           sessions also deliver to clients on this host\n"
	"  -s, --status HOST[:PORT] print a master's status as JSON and exit\n"
	"  --lost-timeout SECONDS   the sessions' clients silent this long are lost (30)\n"
	"  --log-time               begin each message line with its ISO 8601 UTC time\n"
	"  --syslog                 messages to syslog (facility daemon), not stderr\n"
	"  -q, --quiet              only errors\n"
	"  -v, --verbose            say what happens (sessions, reloads; repeat for more)\n"
	"  -h, --help               this help\n"
	"  -V, --version            show the version and exit\n"
	"\nSIGHUP rereads the configuration; SIGTERM stops the master, not its sessions.\n"
	"Exit status: 0 stopped by a signal, or --check/--status succeeded; 1 failure\n"
	"(a bad configuration, no answer); 2 bad usage.\n";

static void on_signal(int sig)
{
	if (sig == SIGHUP)
		got_hup = 1;
	else if (sig != SIGCHLD)
		got_stop = 1;
}

/* The service's say: -1 a warning, 0 an error, else information (it filters by level). */
static void say(void *ctx, int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	(void)ctx;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level < 0)
		cli_warn("%s", msg);
	else if (level == 0)
		cli_error("%s", msg);
	else
		cli_info("%s", msg);
}

static void tick(void *ctx)
{
	(void)ctx;
	cli_tell_refusals();
}

/*
 * --check: every image's file is there and starts with a chunk header, and some
 * address may fetch it (a warning when none may), and the lab state can be written.
 * Frees c; the exit status.
 */
static int check_images(struct ndz_mconf *c, const char *conf_path, const char *run_dir)
{
	struct ndz_error le = { 0 };
	size_t bad = 0, allowed = 0;

	for (size_t i = 0; i < c->nimages; i++) {
		const struct ndz_mconf_image *im = &c->images[i];
		struct ndz_error e = { 0 };
		int r = ndz_mconf_image_check(im, &e);

		if (r == 1)
			cli_warn("image %s: %s: not there until uploaded", im->name, im->path);
		else if (r < 0 && ++bad)
			cli_error("image %s: %s", im->name, ndz_error_msg(&e));
		if (!im->nallow)
			cli_warn("image %s: no allow list: no address may fetch it", im->name);
		allowed += im->nallow || im->nupload;
	}
	if (!allowed && !c->ndir_upload)
		cli_warn("%s: serves nothing: no image any address may fetch or upload (add "
			 "image, imagedir or upload-dir lines with allow or upload lists)", conf_path);
	if (ndz_labsrv_check_state(c, run_dir, &le) != 0)
		cli_error("%s", ndz_error_msg(&le));
	if (bad)
		cli_error("%s: %zu of %zu images cannot be served", conf_path, bad, c->nimages);
	else if (cli_verbose)
		cli_info("%s: %zu images", conf_path, c->nimages);
	ndz_mconf_free(c);
	return bad || le.code ? EXIT_FAIL : EXIT_OK;
}

/* --status: a master's STATUS over TCP, printed. */
static int query_status(const char *target)
{
	static uint8_t buf[NDZ_CTL_REP_MAX];
	struct ndz_ctl_rep rep;
	struct ndz_error e = { 0 };

	if (ndz_upload_status(target, 3, buf, sizeof(buf), &rep, &e) != 0)
		cli_die(e.code == NDZ_EINVAL ? EXIT_USAGE : EXIT_FAIL, "%s", ndz_error_msg(&e));
	printf("%.*s\n", (int)rep.json_len, rep.json);
	return fflush(stdout) == 0 ? EXIT_OK : EXIT_FAIL;
}

int main(int argc, char **argv)
{
	static const struct option lopts[] = {
		{ "config", required_argument, NULL, 'c' }, { "check", no_argument, NULL, 'n' },
		{ "listen", required_argument, NULL, 'l' }, { "run-dir", required_argument, NULL, 'r' },
		{ "frisbeed", required_argument, NULL, 'F' },
		{ "interface", required_argument, NULL, 'i' },
		{ "server", required_argument, NULL, 'S' },
		{ "idle-timeout", required_argument, NULL, 'T' }, { "ttl", required_argument, NULL, 't' },
		{ "loopback", no_argument, NULL, 'L' }, { "status", required_argument, NULL, 's' },
		{ "log-time", no_argument, NULL, 0x111 }, { "syslog", no_argument, NULL, 0x112 },
		{ "lost-timeout", required_argument, NULL, 0x104 }, CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	static char exe[PATH_MAX];
	struct ndz_mserve_opts o = { .listen = "0.0.0.0", .run_dir = "/run/mfrisbeed", .ttl = 5,
				     .say = say, .refused = cli_refusal, .tick = tick };
	const char *status = NULL;
	static struct ndz_mserve *ms;  /* static: reachable to the end (upload threads may run) */
	struct ndz_mconf *conf;
	struct ndz_error e = { 0 };
	struct sigaction sa;
	int c, check = 0;

	cli_init(argv[0]);
	while ((c = getopt_long(argc, argv, "c:nl:r:F:i:S:T:t:Ls:qvhV", lopts, NULL)) != -1) {
		switch (c) {
		case 'c': o.conf_path = optarg; break;
		case 'n': check = 1; break;
		case 'l': o.listen = optarg; break;
		case 'r': o.run_dir = optarg; break;
		case 'F': o.frisbeed = optarg; break;
		case 'i': o.iface = optarg; break;
		case 'S':
			if (ndz_net_addr(optarg, &o.server, NULL) != 0)
				cli_usage_error("-S: bad IPv4 address '%s'", optarg);
			break;
		case 'T': o.idle_override = (unsigned)cli_parse_int(optarg, "-T", 1, 86400); break;
		case 't': o.ttl = cli_parse_int(optarg, "-t", 1, 255); break;
		case 'L': o.loop = 1; break;
		case 's': status = optarg; break;
		case 0x111: case 0x112: cli_log_mode(o.log = c - 0x110); break; /* 0x110 + CLI_LOG_* */
		case 0x104: o.lost_s = (unsigned)cli_parse_int(optarg, "--lost-timeout", 1, 86400); break;
		default: cli_common_option(c, usage_text); break;
		}
	}
	if (optind != argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	if (status)
		return query_status(status);
	if (!o.conf_path)
		cli_usage_error("-c CONFIG is required");
	if (ndz_mconf_load(o.conf_path, &conf, &e) != 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	ndz_mserve_tell_skipped(NULL, conf, say, NULL);
	if (check)
		return check_images(conf, o.conf_path, o.run_dir);
	if (!o.frisbeed)
		o.frisbeed = cli_sibling(exe, sizeof(exe), "frisbeed");
	if (access(o.frisbeed, X_OK) != 0)
		cli_die(EXIT_FAIL, "%s: %s", o.frisbeed, strerror(errno));
	o.verbose = cli_verbose;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	if (ndz_mserve_open(conf, &o, &ms, &e) != 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	ndz_mserve_run(ms, &got_stop, &got_hup);
	ndz_mserve_end(ms);
	return EXIT_OK;
}
