/*
 * mfrisbeed: the image master. Clients ask it over UDP (lib/master/ctl) for an
 * image by name; lib/master/master decides (the session table, the pool, the rate
 * division, upload admission and quota) and this program acts: it starts one
 * frisbeed per image as a detached child and steers it through the session's
 * control socket in the run directory (lib/master/sessctl: status, rate,
 * identify, hold). A session ends when its frisbeed leaves on its idle timeout;
 * a GET is answered with a running session only once it has promised to stay for
 * the client (hold), else a new one is started. A restarted master adopts the
 * sessions its state file lists. Uploads and STATUS
 * come over TCP on the same port, one thread each: a host that nothing allows is
 * refused at accept; until its first message a connection holds one of a few
 * places per host and in all (lib/master/master); the upload is checked chunk by
 * chunk (lib/master/mconn, lib/master/upload) into a temporary file renamed into
 * place only whole, sound and synced. One lock guards the configuration and the
 * master object (its sessions, uploads and admissions).
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "cli/cli.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/image.h"
#include "master/ctl.h"
#include "master/http.h"
#include "master/master.h"
#include "master/mconf.h"
#include "master/mnet.h"
#include "master/labsrv.h"
#include "master/mconn.h"
#include "master/mreply.h"
#include "master/session.h"
#include "master/updir.h"
#include "master/upload.h"
#include "mcast/net.h"

#define DRAIN_S 5                      /* after a rejection, read what is in flight this long */

struct mfd {
	struct ndz_master *ms;
	struct ndz_master_counters *n;
	struct ndz_mconf *conf;
	const char *conf_path, *frisbeed, *run_dir, *iface;
	char state_path[PATH_MAX];
	int fd, tfd, ttl, loop, idle_override;
	uint32_t server;               /* the sessions' source address, network order */
	pthread_mutex_t lock;
	char tmp[NDZ_MASTER_UPLOADS][PATH_MAX]; /* per upload slot: its temporary file, or "" */
	unsigned nthreads;             /* connection threads running */
	struct ndz_mconn conn;         /* what the connection threads share */
	struct ndz_labsrv *lab;        /* nodes, tasks, admin requests (lib/master/labsrv) */
	uint64_t watched_ns;           /* adopted sessions last checked */
	struct ndz_http *http;         /* the HTTP endpoint (lib/master/http), or NULL */
	int log;                       /* CLI_LOG_*, passed on to the sessions */
	unsigned lost_s;               /* --lost-timeout for the sessions; 0: theirs */
};

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

/* The state file, replaced whole: a restarted master adopts what it lists. */
static void save_state(struct mfd *m)
{
	struct ndz_error e = { 0 };

	if (ndz_master_save(m->ms, m->state_path, &e) != 0)
		cli_error("%s", ndz_error_msg(&e));
}

static int session_alive(void *ctx, const struct ndz_master_session *s)
{
	return ndz_session_alive(((struct mfd *)ctx)->run_dir, s);
}

/* Before a GET is answered with s: will it stay for the client? (lib/master/master) */
static int session_hold(void *ctx, const struct ndz_master_session *s)
{
	const char *run_dir = ((struct mfd *)ctx)->run_dir;
	int r = ndz_session_hold(run_dir, s);

	if (r == NDZ_MASTER_GONE)
		ndz_session_forget(run_dir, s);
	if (r != NDZ_MASTER_HELD && cli_verbose)
		cli_info("session of %s: frisbeed %d %s; a new one for the request", s->image,
			 s->pid, r == NDZ_MASTER_GONE ? "has ended" : "is ending");
	return r;
}

static void session_live(void *ctx, const struct ndz_master_session *s,
			 struct ndz_master_live *out)
{
	ndz_session_live(((struct mfd *)ctx)->run_dir, s, out);
}

/* The identity of the image now under that name: uploaded anew while no master ran? */
static int image_now(void *ctx, const char *image, uint8_t uuid[16])
{
	const struct ndz_mconf_image *im = ndz_mconf_find(((struct mfd *)ctx)->conf, image);
	uint32_t chunks;
	uint64_t src;

	return im ? ndz_session_identity(im->path, uuid, &chunks, &src, NULL) : -1;
}

static void adopt_state(struct mfd *m)
{
	struct ndz_error e = { 0 };

	if (ndz_master_load(m->ms, m->state_path, session_alive, image_now, m, ndz_now_ns(),
			    &e) < 0)
		cli_error("%s", ndz_error_msg(&e));
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS && cli_verbose; i++) {
		const struct ndz_master_session *s = ndz_master_session(m->ms, i);
		char a[16];

		if (s->pid > 0)
			cli_info("adopted session of %s: frisbeed %d on %s port %u", s->image, s->pid,
				 ndz_net_ntoa(s->group, a), s->port);
	}
	save_state(m);
}

static void told(void *ctx, const struct ndz_master_session *s)
{
	(void)ctx;
	if (cli_verbose > 1)
		cli_info("session of %s: now %.1f Mbit/s", s->image, (double)s->rate / 1e6);
}

static void end_session(struct mfd *m, const struct ndz_master_session *s)
{
	ndz_session_forget(m->run_dir, s);
	ndz_master_end(m->ms, s->pid);
}

/* Sessions whose frisbeed has left: reap ours, notice adopted ones gone; the rates. */
static void reap(struct mfd *m)
{
	uint64_t now = ndz_now_ns();
	int changed = 0, st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++) {
			const struct ndz_master_session *s = ndz_master_session(m->ms, i);

			if (s->pid != pid || s->adopted)
				continue;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
				if (cli_verbose)
					cli_info("session of %s ended (%.0f s, %llu clients)", s->image,
						 (double)(now - s->started_ns) / 1e9,
						 (unsigned long long)s->clients);
			} else {
				cli_error("session of %s: frisbeed %ld %s %d", s->image, (long)pid,
					  WIFEXITED(st) ? "exited with status" : "killed by signal",
					  WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			}
			end_session(m, s);
			changed = 1;
		}
	}
	/* adopted ones are not our children: asked, once a second, whether they are there */
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS && now - m->watched_ns >= NDZ_NS_PER_S; i++) {
		const struct ndz_master_session *s = ndz_master_session(m->ms, i);

		if (s->pid > 0 && s->adopted && ndz_session_gone(m->run_dir, s)) {
			if (cli_verbose)
				cli_info("adopted session of %s ended", s->image);
			end_session(m, s);
			changed = 1;
		}
	}
	if (now - m->watched_ns >= NDZ_NS_PER_S)
		m->watched_ns = now;
	/* a session not yet listening (just started) is told its rate on the next round */
	if (ndz_session_rates(m->ms, m->run_dir, told, m) || changed)
		save_state(m);
}

/* Start frisbeed for the reserved slot; 0, or -1 with the slot freed. */
static int start_session(struct mfd *m, const struct ndz_master_plan *p)
{
	const struct ndz_master_session *s = ndz_master_session(m->ms, (size_t)p->slot);
	struct ndz_session_opts o = { m->frisbeed, m->run_dir, m->iface, m->idle_override ?
				      (unsigned)m->idle_override : m->conf->idle_timeout, m->ttl,
				      m->loop, cli_verbose < 2, m->log, m->lost_s };
	struct ndz_error e = { 0 };
	uint8_t uuid[16];
	uint32_t chunks;
	uint64_t src;
	pid_t pid;
	char a[16];

	if (ndz_session_identity(p->image->path, uuid, &chunks, &src, &e) != 0 ||
	    ndz_session_start(&o, s, p->image->path, &pid, &e) != 0) {
		cli_error("%s", ndz_error_msg(&e));
		ndz_master_start_failed(m->ms, p->slot);
		return -1;
	}
	ndz_master_started(m->ms, p->slot, pid, uuid, chunks, src, ndz_now_ns());
	if (cli_verbose)
		cli_info("session of %s: frisbeed %ld on %s port %u at %.1f Mbit/s", s->image,
			 (long)pid, ndz_net_ntoa(s->group, a), s->port, (double)s->rate / 1e6);
	ndz_session_rates(m->ms, m->run_dir, told, m);       /* the others' shares */
	save_state(m);
	return 0;
}

/* One request: bounded work (a table look-up, at most one frisbeed started). */
static void handle(struct mfd *m, const uint8_t *buf, size_t len, struct sockaddr_in *from)
{
	static uint8_t out[NDZ_CTL_REP_MAX];
	struct ndz_ctl_req req;
	struct ndz_ctl_rep rep;
	struct ndz_master_plan p;
	struct ndz_error e = { 0 };
	char a[16];
	int act = ndz_master_request(m->ms, buf, len, from->sin_addr.s_addr, ndz_now_ns(), &req,
				     &p, &rep, &e), n;

	ndz_net_ntoa(from->sin_addr.s_addr, a);
	if (act == NDZ_MASTER_DROP) {      /* e says why: each drop is a refusal */
		cli_refusal(e.code == NDZ_ERATE ? "rate limit" : "malformed", a, "%s",
			    ndz_error_msg(&e));
		return;
	}
	if (act == NDZ_MASTER_START)
		ndz_master_answer(m->ms, &p, start_session(m, &p), &rep);
	if (rep.status != NDZ_CTL_OK && rep.status != NDZ_CTL_USE_TCP && rep.status != NDZ_CTL_FAILED)
		cli_refusal(ndz_ctl_strstatus(rep.status), a, "asks for %s: %s: %s",
			    req.type == NDZ_CTL_GET ? req.name : "the status",
			    ndz_ctl_strstatus(rep.status), ndz_error_msg(&e));
	else if (rep.type == NDZ_CTL_GET && rep.status != NDZ_CTL_MALFORMED && cli_verbose > 1)
		cli_info("%s asks for %s: %s", a, req.name, ndz_ctl_strstatus(rep.status));
	n = ndz_ctl_rep_encode(&rep, out, sizeof(out), NULL);
	if (n > 0)
		sendto(m->fd, out, (size_t)n, 0, (struct sockaddr *)from, sizeof(*from));
}

/* ---- uploads and STATUS: one thread per TCP connection (lib/master/mconn) ---- */

static void said_stale(void *ctx, const char *name)
{
	if (cli_verbose)
		cli_info("%s/%s: removed, left by an earlier master", (const char *)ctx, name);
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

/* Files an image directory holds whose name is no image name: told once, when first skipped. */
static void tell_skipped(const struct ndz_mconf *old, const struct ndz_mconf *c)
{
	for (size_t i = 0; i < c->nskipped; i++)
		if (!ndz_mconf_skipped(old, c->skipped[i]))
			cli_warn("%s: skipped: not an image name (letters, digits, '.', '_', '-'; "
				 "at most 64)", c->skipped[i]);
}

/* Under the lock: read the configuration anew; 0, or e says why the old one stays. */
static int reload(struct mfd *m, struct ndz_error *e)
{
	struct ndz_mconf *c;
	int rc = ndz_mconf_load(m->conf_path, &c, e);

	if (rc != 0) {
		m->n->bad_reloads++;
		cli_error("%s; keeping the old configuration", ndz_error_msg(e));
		return rc;
	}
	tell_skipped(m->conf, c);
	ndz_mconf_free(m->conf);
	m->conf = c;
	ndz_master_set_conf(m->ms, c);
	ndz_labsrv_set_conf(m->lab, c);
	m->n->reloads++;
	if (cli_verbose)
		cli_info("%s reloaded: %zu images", m->conf_path, c->nimages);
	return 0;
}

static size_t status_json(void *ctx, char *buf, size_t cap)
{
	return ndz_master_status_json(((struct mfd *)ctx)->ms, ndz_now_ns(), session_live, ctx,
				      buf, cap);
}

static int reload_hook(void *ctx, struct ndz_error *e)
{
	return reload(ctx, e);
}

static void say(void *ctx, int level, const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	(void)ctx;
	if (level > cli_verbose)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level == 0)
		cli_error("%s", msg);
	else
		cli_info("%s", msg);
}

/* One TCP connection, accepted with a place before its first message. */
struct job {
	struct mfd *m;
	int fd;
	uint32_t addr;
};

static void *upload_thread(void *arg)
{
	struct job *j = arg;
	struct mfd *m = j->m;

	ndz_mconn_serve(&m->conn, j->fd, j->addr);
	close(j->fd);
	pthread_mutex_lock(&m->lock);
	m->nthreads--;
	pthread_mutex_unlock(&m->lock);
	free(j);
	return NULL;
}

/* Under the lock: a new TCP connection gets a thread, or a refusal at once. */
static void accept_upload(struct mfd *m)
{
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	int fd = accept4(m->tfd, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC), rc;
	struct ndz_error e = { 0 };
	struct job *j = NULL;
	pthread_attr_t at;
	pthread_t t;
	sigset_t all, old;

	if (fd < 0)
		return;
	rc = ndz_master_accept(m->ms, from.sin_addr.s_addr, m->nthreads, ndz_now_ns(), &e);
	if (rc == 0 && !(j = malloc(sizeof(*j)))) {
		ndz_master_release(m->ms, from.sin_addr.s_addr);
		rc = ndz_error_set(&e, NDZ_ECONNS, 0, "out of memory");
	}
	if (rc != 0)
		cli_refusal(rc == NDZ_ERATE ? "rate limit" : rc == NDZ_EDENIED ? "access denied" :
			    "too many connections", ndz_net_ntoa(from.sin_addr.s_addr,
			    (char[16]){ 0 }), "over TCP: %s", ndz_error_msg(&e));
	if (rc == NDZ_ERATE) {
		close(fd);
		return;
	}
	if (rc != 0) {
		ndz_mreply_refuse(fd, ndz_ctl_status_of(rc));
		return;
	}
	*j = (struct job){ m, fd, from.sin_addr.s_addr };
	/* signals are the main thread's */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &at, upload_thread, j);
	pthread_attr_destroy(&at);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		cli_error("pthread_create: %s", strerror(rc));
		ndz_master_release(m->ms, from.sin_addr.s_addr);
		close(fd);
		free(j);
		return;
	}
	m->nthreads++;
}

/* Where frisbeed is: next to our own binary. */
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
	static struct mfd m;
	static char exe[PATH_MAX];
	const char *listen = "0.0.0.0", *status = NULL;
	struct ndz_error e = { 0 };
	struct sigaction sa;
	int c, check = 0;

	cli_init(argv[0]);
	m.run_dir = "/run/mfrisbeed";
	m.ttl = 5;
	while ((c = getopt_long(argc, argv, "c:nl:r:F:i:S:T:t:Ls:qvhV", lopts, NULL)) != -1) {
		switch (c) {
		case 'c': m.conf_path = optarg; break;
		case 'n': check = 1; break;
		case 'l': listen = optarg; break;
		case 'r': m.run_dir = optarg; break;
		case 'F': m.frisbeed = optarg; break;
		case 'i': m.iface = optarg; break;
		case 'S':
			if (ndz_net_addr(optarg, &m.server, NULL) != 0)
				cli_usage_error("-S: bad IPv4 address '%s'", optarg);
			break;
		case 'T': m.idle_override = cli_parse_int(optarg, "-T", 1, 86400); break;
		case 't': m.ttl = cli_parse_int(optarg, "-t", 1, 255); break;
		case 'L': m.loop = 1; break;
		case 's': status = optarg; break;
		case 0x111: case 0x112: cli_log_mode(m.log = c - 0x110); break; /* 0x110 + CLI_LOG_* */
		case 0x104: m.lost_s = (unsigned)cli_parse_int(optarg, "--lost-timeout", 1, 86400); break;
		default: cli_common_option(c, usage_text); break;
		}
	}
	if (optind != argc)
		cli_usage_error("unexpected argument '%s'", argv[optind]);
	if (status)
		return query_status(status);
	if (!m.conf_path)
		cli_usage_error("-c CONFIG is required");
	if (ndz_mconf_load(m.conf_path, &m.conf, &e) != 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	tell_skipped(NULL, m.conf);
	if (check)
		return check_images(m.conf, m.conf_path, m.run_dir);
	if (!m.frisbeed)
		m.frisbeed = cli_sibling(exe, sizeof(exe), "frisbeed");
	if (access(m.frisbeed, X_OK) != 0)
		cli_die(EXIT_FAIL, "%s: %s", m.frisbeed, strerror(errno));
	if (mkdir(m.run_dir, 0755) != 0 && errno != EEXIST)
		cli_die(EXIT_FAIL, "run directory %s: %s%s", m.run_dir, strerror(errno),
			errno == EACCES || errno == EROFS ? " (not ours to write: give one that "
			"is with -r DIR, or run the master as its service: systemctl start "
			"mfrisbeed)" : "");
	if ((size_t)snprintf(m.state_path, sizeof(m.state_path), "%s/sessions", m.run_dir) >=
	    sizeof(m.state_path))
		cli_die(EXIT_FAIL, "%s: path too long", m.run_dir);
	if (ndz_mnet_listen(listen, &m.fd, &m.tfd, &e) != 0 ||
	    ndz_master_create(m.conf, &m.ms, &e) != 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	if (ndz_labsrv_open(m.conf, m.run_dir, &(struct ndz_labsrv_hooks){ &m, status_json, say,
			    &m.lock, m.ms, reload_hook, cli_refusal }, &m.lab, &e) != 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	ndz_labsrv_set_ctl(m.lab, m.fd);   /* the boot scripts' ndz.master (issue 24, PXE) */
	m.n = ndz_master_counters(m.ms);
	m.conn = (struct ndz_mconn){ &m.lock, m.ms, m.tmp, DRAIN_S, &m, status_json, reload_hook,
				     say, cli_refusal };
	pthread_mutex_init(&m.lock, NULL);
	if (ndz_http_start(m.conf->http, m.conf->nhttp, &(struct ndz_http_hooks){ &m.lock, m.ms,
			   &m, session_live, reload_hook, ndz_labsrv_http(m.lab), NDZ_LABSRV_HTTP_EXTS,
			   cli_refusal }, &m.http,
			   &e) != 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	ndz_updir_clean(m.conf->upload_dir, said_stale, m.conf->upload_dir);
	if (!m.server)
		m.server = ndz_mnet_source(m.iface, m.conf->pool_base, m.conf->port_lo);
	ndz_master_set_server(m.ms, m.server);
	ndz_master_set_hold(m.ms, session_hold, &m);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	adopt_state(&m);
	if (cli_verbose)
		cli_info("listening on %s, %zu images, sessions from %s", listen,
			 m.conf->nimages, ndz_net_ntoa(m.server, (char[16]){ 0 }));
	while (!got_stop) {
		struct pollfd p[2 + NDZ_LABSRV_FDS] = { { .fd = m.fd, .events = POLLIN },
							{ .fd = m.tfd, .events = POLLIN } };
		uint8_t buf[NDZ_CTL_LAB_MAX + 1];

		pthread_mutex_lock(&m.lock);
		if (got_hup) {
			got_hup = 0;
			ndz_error_clear(&e);
			reload(&m, &e);
		}
		reap(&m);
		ndz_labsrv_prepare(m.lab, ndz_now_ms(), p + 2);
		pthread_mutex_unlock(&m.lock);
		cli_tell_refusals();   /* "N more refused" once a flood's second is over */
		if (poll(p, 2 + NDZ_LABSRV_FDS, 200) <= 0)
			continue;
		pthread_mutex_lock(&m.lock);
		if (p[1].revents & POLLIN)
			accept_upload(&m);
		ndz_labsrv_serve(m.lab, p + 2, ndz_now_ms());
		/* a bounded batch, then the signals and the reaping again */
		for (int k = 0; k < 256 && (p[0].revents & POLLIN); k++) {
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			ssize_t n = recvfrom(m.fd, buf, sizeof(buf), MSG_DONTWAIT,
					     (struct sockaddr *)&from, &fl);

			if (n < 0)
				break;
			if (!ndz_labsrv_udp(m.lab, m.fd, buf, (size_t)n, &from, ndz_now_ms()))
				handle(&m, buf, (size_t)n, &from);
		}
		pthread_mutex_unlock(&m.lock);
	}
	/* uploads still running leave nothing behind; their uploaders see the end */
	ndz_http_stop(m.http);
	pthread_mutex_lock(&m.lock);
	for (size_t i = 0; i < NDZ_MASTER_UPLOADS; i++)
		if (m.tmp[i][0])
			unlink(m.tmp[i]);
	if (cli_verbose)
		cli_info("stopping; %zu sessions keep running", ndz_master_live(m.ms));
	close(m.fd);
	close(m.tfd);
	ndz_labsrv_free(m.lab);
	/* still locked: upload threads stop where they are when the process exits */
	return EXIT_OK;
}
