/*
 * mfrisbeed: the image master. Clients ask it over UDP (lib/ctl) for an image by
 * name; it checks the configuration (lib/mconf), starts one frisbeed per image on
 * demand as a detached child and tells every client asking for that image where
 * the session is. A session ends when its frisbeed leaves on its idle timeout.
 * Uploads and STATUS come over TCP on the same port, one thread each. A host that
 * nothing allows is refused at accept; until its first message a connection holds
 * one of a few places per host and in all (lib/admit) and has a few seconds to
 * speak; an upload slot is taken only once that message names an image the peer
 * may upload. The thread checks every chunk as it arrives (lib/upload), writes a
 * temporary file in the upload directory and renames only a whole, sound, synced
 * image into place; a new image is reported stored once the reload that serves it
 * succeeded. One lock guards the configuration, the sessions and the uploads' and
 * admissions' tables.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <dirent.h>
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

#include "master/admit.h"
#include "cli/cli.h"
#include "master/ctl.h"
#include "core/err.h"
#include "core/image.h"
#include "core/io.h"
#include "master/mconf.h"
#include "mcast/net.h"
#include "master/upload.h"

#define MAX_SESSIONS 1024
#define HOSTS 1024                     /* rate limiter slots */
#define MAX_UPLOADS 64                 /* the configuration's max-uploads is at most this */
#define DRAIN_S 5                      /* after a rejection, read what is in flight this long */
#define TMP_PREFIX ".upload-"          /* temporary files in the upload directory */

struct session {
	pid_t pid;                     /* 0: slot free */
	int adopted;                   /* left by an earlier master: watched, not reaped */
	char image[NDZ_CTL_NAME_MAX + 1];
	uint32_t group;                /* network order */
	uint16_t port;
	uint64_t rate, source_bytes;
	uint32_t chunks;
	uint8_t uuid[16];
	uint64_t clients;              /* GET replies that named it */
	double started;
	int replaced;                  /* its image was uploaded anew: no new clients */
};

struct upload {
	int used;
	char name[NDZ_CTL_NAME_MAX + 1];
	char tmp[PATH_MAX];            /* the temporary file; "" once renamed or removed */
	uint32_t from;
};

struct host {
	uint32_t addr;
	double tokens, last;
};

struct counters {
	uint64_t requests, get, status, ok, unknown, denied, pool, too_many, failed;
	uint64_t malformed, dropped, rate_limited, started, ended, reloads, bad_reloads;
	uint64_t uploads, uploads_stored, uploads_rejected, uploads_refused, status_udp;
	uint64_t tcp_denied, tcp_busy, tcp_quiet;
};

struct master {
	struct ndz_mconf *conf;
	const char *conf_path, *frisbeed, *run_dir, *iface;
	char state_path[PATH_MAX];
	int fd, ttl, loop, idle_override;
	uint32_t server;               /* the sessions' source address, network order */
	struct session s[MAX_SESSIONS];
	struct host hosts[HOSTS];
	struct counters n;
	int tfd;                       /* TCP: uploads */
	pthread_mutex_t lock;
	struct upload up[MAX_UPLOADS];
	unsigned nthreads;             /* connection threads running */
	struct ndz_admit admit;        /* connections not yet past their first message */
};

static volatile sig_atomic_t got_hup, got_stop, got_chld;

static const char usage_text[] =
	"Usage: mfrisbeed [options] -c CONFIG\n"
	"       mfrisbeed --status HOST[:PORT]\n"
	"Hand out images by name, starting one frisbeed per image on demand; take\n"
	"uploads from frisbee-upload.\n\n"
	"  -c, --config FILE        the configuration (see mfrisbeed.conf(5))\n"
	"  -n, --check              check the configuration and exit\n"
	"  -l, --listen ADDR[:PORT] control address: UDP, and TCP for uploads and status\n"
	"                           (default 0.0.0.0:3563)\n"
	"  -r, --run-dir DIR        where the session state lives (default /run/mfrisbeed)\n"
	"  -F, --frisbeed PATH      the frisbeed to run (default: next to mfrisbeed)\n"
	"  -i, --interface IFACE    interface for the sessions (frisbeed -i)\n"
	"  -S, --server ADDR        the sessions' address told to clients (default: found)\n"
	"  -T, --idle-timeout SECONDS  overrides the configuration's idle-timeout\n"
	"  -t, --ttl TTL            multicast TTL for the sessions (default 5)\n"
	"  -L, --loopback           sessions also deliver to clients on this host\n"
	"  -s, --status HOST[:PORT] print a master's status as JSON and exit\n"
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
	else if (sig == SIGCHLD)
		got_chld = 1;
	else
		got_stop = 1;
}

static double now_s(void)
{
	return cli_now();
}

static size_t live_sessions(const struct master *m)
{
	size_t k = 0;

	for (size_t i = 0; i < MAX_SESSIONS; i++)
		k += m->s[i].pid != 0;
	return k;
}

/* Where a session's frisbeed keeps its statistics (--stats-live): by group and port. */
static void stats_path(const struct master *m, const struct session *s, char *buf, size_t cap)
{
	char a[16];

	snprintf(buf, cap, "%s/stats-%s-%u.json", m->run_dir, ndz_net_ntoa(s->group, a), s->port);
}

/*
 * What frisbeed last wrote: the clients it has seen and the bytes it has sent
 * (0 when it has written nothing yet). Our own child's file, read whole.
 */
static void session_stats(const struct master *m, const struct session *s, uint64_t *clients,
			  uint64_t *bytes)
{
	char path[PATH_MAX], text[2048], *p;
	ssize_t n;
	int fd;

	*clients = *bytes = 0;
	stats_path(m, s, path, sizeof(path));
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	n = read(fd, text, sizeof(text) - 1);
	close(fd);
	if (n <= 0)
		return;
	text[n] = 0;
	if ((p = strstr(text, "\"clients\": ")))
		*clients = strtoull(p + 11, NULL, 10);
	if ((p = strstr(text, "\"bytes_sent\": ")))
		*bytes = strtoull(p + 14, NULL, 10);
}

/* The state file: one line per session, so that a restarted master skips or adopts it. */
static void save_state(struct master *m)
{
	char tmp[PATH_MAX + 8];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", m->state_path);
	f = fopen(tmp, "w");
	if (!f) {
		cli_error("%s: %s", tmp, strerror(errno));
		return;
	}
	for (size_t i = 0; i < MAX_SESSIONS; i++) {
		const struct session *s = &m->s[i];
		char a[16];

		if (!s->pid)
			continue;
		fprintf(f, "%ld %s %s %u %llu %u %llu ", (long)s->pid, s->image,
			ndz_net_ntoa(s->group, a), s->port, (unsigned long long)s->rate,
			s->chunks, (unsigned long long)s->source_bytes);
		for (int k = 0; k < 16; k++)
			fprintf(f, "%02x", s->uuid[k]);
		fputc('\n', f);
	}
	if (fclose(f) != 0 || rename(tmp, m->state_path) != 0)
		cli_error("%s: %s", m->state_path, strerror(errno));
}

/* pid is still a frisbeed (not gone, not reused by something else). */
static int is_frisbeed(pid_t pid)
{
	char path[64], cmd[256];
	ssize_t n;
	int fd;

	if (kill(pid, 0) != 0 && errno == ESRCH)
		return 0;
	snprintf(path, sizeof(path), "/proc/%ld/cmdline", (long)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = read(fd, cmd, sizeof(cmd) - 1);
	close(fd);
	if (n <= 0)
		return 0;                      /* a zombie has no command line */
	cmd[n] = 0;
	return strstr(cmd, "frisbeed") != NULL;
}

static int read_identity(const char *path, struct session *s);

static void adopt_state(struct master *m)
{
	const struct ndz_mconf_image *im;
	struct session now;
	FILE *f = fopen(m->state_path, "r");
	char line[512];
	size_t k = 0;

	if (!f)
		return;
	while (fgets(line, sizeof(line), f) && k < MAX_SESSIONS) {
		struct session *s = &m->s[k];
		char img[NDZ_CTL_NAME_MAX + 1], grp[16], uuid[33];
		long pid;
		unsigned port;
		unsigned long long rate, src;

		memset(s, 0, sizeof(*s));
		if (sscanf(line, "%ld %64s %15s %u %llu %u %llu %32s", &pid, img, grp, &port, &rate,
			   &s->chunks, &src, uuid) != 8 || pid <= 0 || port > 65535 ||
		    ndz_net_addr(grp, &s->group) != 0 || strlen(uuid) != 32 || !is_frisbeed((pid_t)pid))
			continue;
		for (int b = 0; b < 16; b++) {
			unsigned v;

			sscanf(uuid + 2 * b, "%2x", &v);
			s->uuid[b] = (uint8_t)v;
		}
		s->pid = (pid_t)pid;
		s->adopted = 1;
		snprintf(s->image, sizeof(s->image), "%s", img);
		/* uploaded anew while no master ran: it keeps its clients, gets no new ones */
		im = ndz_mconf_find(m->conf, img);
		if (im && read_identity(im->path, &now) == 0 && memcmp(now.uuid, s->uuid, 16) != 0)
			s->replaced = 1;
		s->port = (uint16_t)port;
		s->rate = rate;
		s->source_bytes = src;
		s->started = now_s();
		if (cli_verbose)
			cli_info("adopted session of %s: frisbeed %ld on %s port %u", img, pid, grp,
				 port);
		k++;
	}
	fclose(f);
	save_state(m);
}

/*
 * Under a total cap every running session gets an equal share (at most its image's
 * own rate), divided again whenever a session starts or ends: frisbeed takes a new
 * rate in kbit/s from sigqueue(SIGUSR2), without a restart.
 */
static void redivide(struct master *m)
{
	const struct ndz_mconf *c = m->conf;
	size_t k = live_sessions(m);
	int changed = 0;

	if (!c->total_rate || !k)
		return;
	for (size_t i = 0; i < MAX_SESSIONS; i++) {
		struct session *s = &m->s[i];
		const struct ndz_mconf_image *im = s->pid ? ndz_mconf_find(c, s->image) : NULL;
		uint64_t want = im && im->rate ? im->rate : c->rate;
		union sigval v;

		if (!s->pid)
			continue;
		if (want > c->total_rate / k)
			want = c->total_rate / k;
		want = want < 8000 ? 8 : want / 1000;
		if (want == s->rate / 1000 || want > INT_MAX)
			continue;
		v.sival_int = (int)want;
		if (sigqueue(s->pid, SIGUSR2, v) == 0) {
			s->rate = want * 1000;
			changed = 1;
			if (cli_verbose > 1)
				cli_info("session of %s: now %.1f Mbit/s", s->image,
					 (double)s->rate / 1e6);
		}
	}
	if (changed)
		save_state(m);
}

/* Sessions whose frisbeed has left: reap ours, notice adopted ones gone. */
static void reap(struct master *m)
{
	char path[PATH_MAX];
	int changed = 0, st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (size_t i = 0; i < MAX_SESSIONS; i++) {
			struct session *s = &m->s[i];

			if (s->pid != pid || s->adopted)
				continue;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
				if (cli_verbose)
					cli_info("session of %s ended (%.0f s, %llu clients)",
						 s->image, now_s() - s->started,
						 (unsigned long long)s->clients);
			} else {
				cli_error("session of %s: frisbeed %ld %s %d", s->image, (long)pid,
					  WIFEXITED(st) ? "exited with status" : "killed by signal",
					  WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			}
			stats_path(m, s, path, sizeof(path));
			unlink(path);
			s->pid = 0;
			m->n.ended++;
			changed = 1;
		}
	}
	for (size_t i = 0; i < MAX_SESSIONS; i++) {
		struct session *s = &m->s[i];

		if (s->pid && s->adopted && !is_frisbeed(s->pid)) {
			if (cli_verbose)
				cli_info("adopted session of %s ended", s->image);
			stats_path(m, s, path, sizeof(path));
			unlink(path);
			s->pid = 0;
			m->n.ended++;
			changed = 1;
		}
	}
	if (changed) {
		save_state(m);
		redivide(m);
	}
}

/* A per-host token bucket: a flood from one host costs it, not the others. */
static int rate_ok(struct master *m, uint32_t addr)
{
	struct host *h = &m->hosts[(ntohl(addr) * 2654435761u) % HOSTS];
	double t = now_s(), burst = m->conf->host_burst;

	if (h->addr != addr) {
		h->addr = addr;
		h->tokens = burst;
		h->last = t;
	}
	h->tokens += (t - h->last) * m->conf->host_rate;
	if (h->tokens > burst)
		h->tokens = burst;
	h->last = t;
	if (h->tokens < 1.0)
		return 0;
	h->tokens -= 1.0;
	return 1;
}

static int read_identity(const char *path, struct session *s)
{
	struct ndz_io *io = NULL;
	struct ndz_image_reader *r = NULL;
	struct ndz_error e = { 0 };
	const struct ndz_chunk_hdr *h;

	if (ndz_io_open_file(path, NDZ_IO_READ, &io, &e) < 0 ||
	    ndz_image_reader_open(io, &r, &e) < 0) {
		cli_error("%s", ndz_error_msg(&e));
		ndz_io_close(io);
		return -1;
	}
	h = ndz_image_reader_first(r);
	memcpy(s->uuid, h->uuid, 16);
	s->chunks = ndz_image_reader_chunks(r);
	s->source_bytes = h->source_bytes;
	ndz_image_reader_free(r);
	ndz_io_close(io);
	return 0;
}

/*
 * Start frisbeed for im in a session of its own (setsid: a master killed or stopped
 * leaves it running). An exec failure comes back through a close-on-exec pipe.
 */
static int start_session(struct master *m, struct session *s, const struct ndz_mconf_image *im)
{
	const struct ndz_mconf *c = m->conf;
	char grp[16], port[8], rate[24], idle[16], ttl[8], stats[PATH_MAX];
	const char *argv[24];
	int argc = 0, pfd[2], err = 0;
	size_t running = live_sessions(m);
	pid_t pid;

	if (read_identity(im->path, s) != 0)
		return -1;
	s->rate = im->rate ? im->rate : c->rate;
	if (c->total_rate && s->rate > c->total_rate / (running + 1))
		s->rate = c->total_rate / (running + 1);
	s->rate = s->rate < 8000 ? 8000 : s->rate / 1000 * 1000;
	snprintf(s->image, sizeof(s->image), "%s", im->name);
	ndz_net_ntoa(s->group, grp);
	snprintf(port, sizeof(port), "%u", s->port);
	snprintf(rate, sizeof(rate), "%llu", (unsigned long long)s->rate);
	snprintf(idle, sizeof(idle), "%d", m->idle_override ? m->idle_override : (int)c->idle_timeout);
	snprintf(ttl, sizeof(ttl), "%d", m->ttl);
	argv[argc++] = m->frisbeed;
	argv[argc++] = "-m"; argv[argc++] = grp;
	argv[argc++] = "-p"; argv[argc++] = port;
	argv[argc++] = "-W"; argv[argc++] = rate;
	argv[argc++] = "-T"; argv[argc++] = idle;
	argv[argc++] = "-t"; argv[argc++] = ttl;
	if (m->iface) {
		argv[argc++] = "-i";
		argv[argc++] = m->iface;
	}
	if (m->loop)
		argv[argc++] = "-L";
	stats_path(m, s, stats, sizeof(stats));
	argv[argc++] = "--stats-live";
	argv[argc++] = stats;
	if (cli_verbose < 2)
		argv[argc++] = "-q";
	argv[argc++] = "--";
	argv[argc++] = im->path;
	argv[argc] = NULL;
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		cli_error("pipe: %s", strerror(errno));
		return -1;
	}
	pid = fork();
	if (pid == 0) {
		sigset_t none;
		int fd = open("/dev/null", O_RDONLY);

		/* SIGUSR2 (a new rate) stays blocked: one may come before frisbeed waits for it */
		sigemptyset(&none);
		sigaddset(&none, SIGUSR2);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid();
		if (fd >= 0 && fd != 0) {
			dup2(fd, 0);
			close(fd);
		}
		execv(m->frisbeed, (char *const *)argv);
		err = errno;
		if (write(pfd[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(127);
	}
	close(pfd[1]);
	if (pid < 0) {
		close(pfd[0]);
		cli_error("fork: %s", strerror(errno));
		return -1;
	}
	while (read(pfd[0], &err, sizeof(err)) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	if (err) {
		cli_error("cannot run %s: %s", m->frisbeed, strerror(err));
		waitpid(pid, NULL, 0);
		return -1;
	}
	s->pid = pid;
	s->adopted = 0;
	s->clients = 0;
	s->started = now_s();
	m->n.started++;
	if (cli_verbose)
		cli_info("session of %s: frisbeed %ld on %s port %u at %.1f Mbit/s", im->name,
			 (long)pid, grp, s->port, (double)s->rate / 1e6);
	save_state(m);
	redivide(m);
	return 0;
}

/* The session serving name, or a new one; sets *status when there is none. */
static struct session *session_for(struct master *m, const struct ndz_mconf_image *im,
				   unsigned *status)
{
	const struct ndz_mconf *c = m->conf;
	struct session *slot = NULL;
	uint32_t idx;

	for (size_t i = 0; i < MAX_SESSIONS; i++)
		if (m->s[i].pid && !m->s[i].replaced && strcmp(m->s[i].image, im->name) == 0)
			return &m->s[i];
	if (live_sessions(m) >= c->max_sessions) {
		*status = NDZ_CTL_TOO_MANY;
		return NULL;
	}
	/* the lowest pool address no session (ours or adopted) holds */
	for (idx = 0; idx < c->pool_size; idx++) {
		uint32_t g = htonl(c->pool_base + idx);
		size_t i;

		for (i = 0; i < MAX_SESSIONS; i++)
			if (m->s[i].pid && m->s[i].group == g)
				break;
		if (i == MAX_SESSIONS)
			break;
	}
	if (idx == c->pool_size) {
		*status = NDZ_CTL_POOL;
		return NULL;
	}
	for (size_t i = 0; i < MAX_SESSIONS && !slot; i++)
		if (!m->s[i].pid)
			slot = &m->s[i];
	if (!slot) {
		*status = NDZ_CTL_TOO_MANY;
		return NULL;
	}
	memset(slot, 0, sizeof(*slot));
	slot->group = htonl(c->pool_base + idx);
	slot->port = (uint16_t)(c->port_lo + idx % ((unsigned)c->port_hi - c->port_lo + 1));
	if (start_session(m, slot, im) != 0) {
		slot->pid = 0;
		*status = NDZ_CTL_FAILED;
		return NULL;
	}
	return slot;
}

/* A bounded JSON writer: past the end it only notes the overflow. */
struct jbuf {
	char *p;
	size_t len, cap;
	int over;
};

static void jprintf(struct jbuf *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jprintf(struct jbuf *j, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (j->over)
		return;
	va_start(ap, fmt);
	n = vsnprintf(j->p + j->len, j->cap - j->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= j->cap - j->len)
		j->over = 1;
	else
		j->len += (size_t)n;
}

/* Names are [A-Za-z0-9._-] (lib/mconf), paths are written with JSON escapes. */
static void jstring(struct jbuf *j, const char *s)
{
	jprintf(j, "\"");
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			jprintf(j, "\\%c", *s);
		else if ((unsigned char)*s < 0x20)
			jprintf(j, "\\u%04x", (unsigned char)*s);
		else
			jprintf(j, "%c", *s);
	}
	jprintf(j, "\"");
}

static size_t status_json(struct master *m, char *buf, size_t cap)
{
	struct jbuf j = { buf, 0, cap, 0 };
	const struct counters *n = &m->n;
	int first = 1;

	jprintf(&j, "{\"sessions\": [");
	for (size_t i = 0; i < MAX_SESSIONS; i++) {
		const struct session *s = &m->s[i];
		uint64_t receivers, bytes;
		char a[16];

		if (!s->pid)
			continue;
		session_stats(m, s, &receivers, &bytes);
		jprintf(&j, "%s{\"image\": \"%s\", \"pid\": %ld, \"group\": \"%s\", \"port\": %u, "
			"\"rate_bps\": %llu, \"clients\": %llu, \"age_s\": %.0f, \"adopted\": %s, "
			"\"replaced\": %s, \"receivers\": %llu, \"bytes_sent\": %llu}",
			first ? "" : ", ", s->image, (long)s->pid, ndz_net_ntoa(s->group, a),
			s->port, (unsigned long long)s->rate, (unsigned long long)s->clients,
			now_s() - s->started, s->adopted ? "true" : "false",
			s->replaced ? "true" : "false", (unsigned long long)receivers,
			(unsigned long long)bytes);
		first = 0;
	}
	jprintf(&j, "], \"counters\": {\"requests\": %llu, \"get\": %llu, \"status\": %llu, "
		"\"ok\": %llu, \"unknown\": %llu, \"denied\": %llu, \"pool_exhausted\": %llu, "
		"\"too_many\": %llu, \"failed\": %llu, \"malformed\": %llu, \"dropped\": %llu, "
		"\"rate_limited\": %llu, \"sessions_started\": %llu, \"sessions_ended\": %llu, "
		"\"reloads\": %llu, \"bad_reloads\": %llu, \"status_udp\": %llu, \"uploads\": %llu, "
		"\"uploads_stored\": %llu, \"uploads_rejected\": %llu, \"uploads_refused\": %llu, "
		"\"tcp_denied\": %llu, \"tcp_busy\": %llu, \"tcp_quiet\": %llu}, "
		"\"max_sessions\": %u, \"pool_size\": %u, \"uploading\": [",
		(unsigned long long)n->requests, (unsigned long long)n->get,
		(unsigned long long)n->status, (unsigned long long)n->ok,
		(unsigned long long)n->unknown, (unsigned long long)n->denied,
		(unsigned long long)n->pool, (unsigned long long)n->too_many,
		(unsigned long long)n->failed, (unsigned long long)n->malformed,
		(unsigned long long)n->dropped, (unsigned long long)n->rate_limited,
		(unsigned long long)n->started, (unsigned long long)n->ended,
		(unsigned long long)n->reloads, (unsigned long long)n->bad_reloads,
		(unsigned long long)n->status_udp, (unsigned long long)n->uploads,
		(unsigned long long)n->uploads_stored,
		(unsigned long long)n->uploads_rejected, (unsigned long long)n->uploads_refused,
		(unsigned long long)n->tcp_denied, (unsigned long long)n->tcp_busy,
		(unsigned long long)n->tcp_quiet, m->conf->max_sessions, m->conf->pool_size);
	first = 1;
	for (size_t i = 0; i < MAX_UPLOADS; i++) {
		char a[16];

		if (!m->up[i].used)
			continue;
		jprintf(&j, "%s{\"image\": \"%s\", \"from\": \"%s\"}", first ? "" : ", ",
			m->up[i].name, ndz_net_ntoa(m->up[i].from, a));
		first = 0;
	}
	jprintf(&j, "], \"images\": [");
	for (size_t i = 0; i < m->conf->nimages; i++) {
		const struct ndz_mconf_image *im = &m->conf->images[i];

		jprintf(&j, "%s{\"name\": \"%s\", \"path\": ", i ? ", " : "", im->name);
		jstring(&j, im->path);
		jprintf(&j, ", \"rate_bps\": %llu}",
			(unsigned long long)(im->rate ? im->rate : m->conf->rate));
	}
	jprintf(&j, "]}");
	if (j.over) {
		j.over = 0;
		j.len = 0;
		jprintf(&j, "{\"error\": \"status longer than %u bytes\"}", NDZ_CTL_JSON_MAX);
	}
	return j.len;
}

/* One request: bounded work (a table look-up, at most one frisbeed started). */
static void handle(struct master *m, const uint8_t *buf, size_t len, struct sockaddr_in *from)
{
	static uint8_t out[NDZ_CTL_REP_MAX];
	struct ndz_ctl_req req;
	struct ndz_ctl_rep rep;
	uint32_t addr = from->sin_addr.s_addr;
	char a[16];
	int rc, n;

	m->n.requests++;
	rc = ndz_ctl_req_decode(buf, len, &req);
	if (rc == NDZ_EPROTO || rc == NDZ_EPROTOVER) {
		m->n.dropped++;
		return;
	}
	if (!rate_ok(m, addr)) {
		m->n.rate_limited++;
		return;
	}
	memset(&rep, 0, sizeof(rep));
	rep.type = req.type == NDZ_CTL_STATUS || req.type == NDZ_CTL_UPLOAD ? req.type : NDZ_CTL_GET;
	rep.id = req.id;
	if (rc != 0 || req.type == NDZ_CTL_UPLOAD) {   /* uploads come by TCP */
		rep.status = NDZ_CTL_MALFORMED;
		m->n.malformed++;
	} else if (!ndz_mconf_allows_any(m->conf, addr) && ntohl(addr) != INADDR_LOOPBACK) {
		rep.status = NDZ_CTL_DENIED;
		m->n.denied++;
		if (cli_verbose && rc == 0 && req.type == NDZ_CTL_GET)
			cli_info("%s asks for %s: access denied: no allow rule matches %s for "
				 "image '%s' (nor for any image)", ndz_net_ntoa(addr, a), req.name,
				 a, req.name);
		else if (cli_verbose)
			cli_info("%s asks for the status: access denied: no image allows %s",
				 ndz_net_ntoa(addr, a), a);
	} else if (req.type == NDZ_CTL_STATUS) {
		rep.status = NDZ_CTL_USE_TCP;  /* a 12-byte datagram must not buy 16 KB */
		m->n.status_udp++;
	} else {
		const struct ndz_mconf_image *im = ndz_mconf_find(m->conf, req.name);
		struct session *s = NULL;
		unsigned st = NDZ_CTL_OK;

		m->n.get++;
		if (!im)
			st = NDZ_CTL_UNKNOWN;
		else if (!ndz_mconf_allows(im, addr))
			st = NDZ_CTL_DENIED;
		else
			s = session_for(m, im, &st);
		rep.status = (uint16_t)st;
		switch (st) {
		case NDZ_CTL_OK: m->n.ok++; break;
		case NDZ_CTL_UNKNOWN: m->n.unknown++; break;
		case NDZ_CTL_DENIED: m->n.denied++; break;
		case NDZ_CTL_POOL: m->n.pool++; break;
		case NDZ_CTL_TOO_MANY: m->n.too_many++; break;
		default: m->n.failed++; break;
		}
		if (s) {
			s->clients++;
			rep.group = s->group;
			rep.port = s->port;
			rep.server = m->server;
			memcpy(rep.uuid, s->uuid, 16);
			rep.chunks = s->chunks;
			rep.source_bytes = s->source_bytes;
			rep.rate_bps = s->rate;
		}
		if (st == NDZ_CTL_DENIED && cli_verbose)
			cli_info("%s asks for %s: access denied: no allow rule matches %s for "
				 "image '%s'", ndz_net_ntoa(addr, a), req.name, a, req.name);
		else if (cli_verbose > 1)
			cli_info("%s asks for %s: %s", ndz_net_ntoa(addr, a), req.name,
				 ndz_ctl_strstatus(st));
	}
	n = ndz_ctl_rep_encode(&rep, out, sizeof(out));
	if (n > 0)
		sendto(m->fd, out, (size_t)n, 0, (struct sockaddr *)from, sizeof(*from));
}

/* ---- uploads: one thread per connection ---- */

/* Bytes in the upload directory, but for the file an upload is about to replace. */
static uint64_t dir_usage(const char *dir, const char *replaced)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	uint64_t sum = 0;
	struct stat st, rst;
	int have_r = stat(replaced, &rst) == 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if (have_r && st.st_dev == rst.st_dev && st.st_ino == rst.st_ino)
			continue;
		sum += (uint64_t)st.st_size;
	}
	closedir(d);
	return sum;
}

/* Make the rename durable: sync the directory path's file lives in. */
static int sync_dir_of(const char *path)
{
	char dir[PATH_MAX];
	char *slash;
	int fd, rc;

	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = 0;
	else if (slash)
		*slash = 0;
	else
		strcpy(dir, ".");
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/* Temporary files a master killed mid-upload left behind: nobody else writes them. */
static void remove_stale(const char *dir)
{
	DIR *d = dir ? opendir(dir) : NULL;
	struct dirent *de;

	if (!d)
		return;
	while ((de = readdir(d)))
		if (strncmp(de->d_name, TMP_PREFIX, strlen(TMP_PREFIX)) == 0 &&
		    unlinkat(dirfd(d), de->d_name, 0) == 0 && cli_verbose)
			cli_info("%s/%s: removed, left by an earlier master", dir, de->d_name);
	closedir(d);
}

/*
 * Under the lock: may name be uploaded from addr now? Takes an uploads' table slot
 * and creates the temporary file (*tfd) when it may; sets *limit (0: none).
 */
static unsigned upload_begin(struct master *m, const struct ndz_ctl_req *req, uint32_t addr,
			     char *final, size_t cap, struct upload **slot, int *tfd,
			     uint64_t *limit)
{
	const struct ndz_mconf *c = m->conf;
	struct upload *u = NULL;
	unsigned st = ndz_mconf_upload_target(c, req->name, addr, final, cap);

	if (st != NDZ_CTL_OK)
		return st;
	size_t running = 0;

	for (size_t i = 0; i < MAX_UPLOADS; i++) {
		if (m->up[i].used && strcmp(m->up[i].name, req->name) == 0)
			return NDZ_CTL_BUSY;
		running += m->up[i].used != 0;
		if (!m->up[i].used && !u)
			u = &m->up[i];
	}
	if (!u || running >= c->max_uploads)
		return NDZ_CTL_UPLOADS;
	*limit = 0;
	if (c->quota) {
		uint64_t used = dir_usage(c->upload_dir, final);

		if (used >= c->quota || (req->size && req->size > c->quota - used))
			return NDZ_CTL_QUOTA;
		*limit = c->quota - used;
	}
	memset(u, 0, sizeof(*u));
	snprintf(u->name, sizeof(u->name), "%s", req->name);
	if ((size_t)snprintf(u->tmp, sizeof(u->tmp), "%s/" TMP_PREFIX "%s.XXXXXX", c->upload_dir,
			     req->name) >= sizeof(u->tmp) ||
	    (*tfd = mkostemp(u->tmp, O_CLOEXEC)) < 0) {
		cli_error("%s: %s", u->tmp, strerror(errno));
		return NDZ_CTL_FAILED;
	}
	fchmod(*tfd, 0644);            /* as imagezip would have made it */
	u->used = 1;
	u->from = addr;
	*slot = u;
	return NDZ_CTL_OK;
}

/*
 * --check: every image's file is there and starts with a chunk header, and some
 * address may fetch it. Frees c; the exit status.
 */
static int check_images(struct ndz_mconf *c, const char *conf_path)
{
	size_t bad = 0;

	for (size_t i = 0; i < c->nimages; i++) {
		const struct ndz_mconf_image *im = &c->images[i];
		struct ndz_error e = { 0 };

		if (ndz_image_probe_file(im->path, &e) >= 0) {
			;
		} else if (im->nupload && e.code == NDZ_ENOENT) {
			/* an image its uploaders have yet to send */
			cli_warn("image %s: %s: not there until uploaded", im->name, im->path);
		} else {
			cli_error("image %s: %s", im->name, ndz_error_msg(&e));
			bad++;
		}
		if (!im->nallow)
			cli_warn("image %s: no allow list: no address may fetch it", im->name);
	}
	if (bad)
		cli_error("%s: %zu of %zu images cannot be served", conf_path, bad, c->nimages);
	else if (cli_verbose)
		cli_info("%s: %zu images", conf_path, c->nimages);
	ndz_mconf_free(c);
	return bad ? EXIT_FAIL : EXIT_OK;
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
static int reload(struct master *m, struct ndz_error *e)
{
	struct ndz_mconf *c;
	int rc = ndz_mconf_load(m->conf_path, &c, e);

	if (rc != 0) {
		m->n.bad_reloads++;
		cli_error("%s; keeping the old configuration", ndz_error_msg(e));
		return rc;
	}
	tell_skipped(m->conf, c);
	ndz_mconf_free(m->conf);
	m->conf = c;
	m->n.reloads++;
	if (cli_verbose)
		cli_info("%s reloaded: %zu images", m->conf_path, c->nimages);
	return 0;
}

/* Under the lock: the checked, synced file takes the name; the old sessions keep theirs. */
static int upload_commit(struct master *m, struct upload *u, const char *final,
			 struct ndz_error *e)
{
	if (rename(u->tmp, final) != 0)
		return ndz_error_set(e, NDZ_EIO, errno, "renaming into %s", final);
	u->tmp[0] = 0;
	for (size_t i = 0; i < MAX_SESSIONS; i++)
		if (m->s[i].pid && strcmp(m->s[i].image, u->name) == 0)
			m->s[i].replaced = 1;
	return 0;
}

/*
 * Under the lock: a stored image is reported stored only once a GET would serve
 * it: a new name in the upload directory needs a reload that picks it up.
 */
static int upload_served(struct master *m, const char *name, const char *final,
			 struct ndz_error *e)
{
	const struct ndz_mconf_image *im = ndz_mconf_find(m->conf, name);
	struct ndz_error why = { 0 };

	if (im && strcmp(im->path, final) == 0)
		return 0;
	if (reload(m, &why) != 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "stored as %s, but not served: the "
				     "configuration does not load: %s", final, ndz_error_msg(&why));
	im = ndz_mconf_find(m->conf, name);
	if (!im || strcmp(im->path, final) != 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "stored as %s, but not served: the "
				     "configuration has no image '%s' there", final, name);
	return 0;
}

/* Why an upload of name (NULL: unknown) from a is refused with st, for the uploader: "" if no more to say. */
static void refusal_why(unsigned st, const char *name, const char *a, char *buf, size_t cap)
{
	buf[0] = 0;
	if (!name)
		return;
	if (st == NDZ_CTL_UNKNOWN && (!ndz_ctl_valid_name(name) || name[0] == '.'))
		snprintf(buf, cap, "'%s' is not a valid image name (%s; a new one may not start "
			 "with '.')", name, NDZ_CTL_NAME_RULE);
	else if (st == NDZ_CTL_UNKNOWN)
		snprintf(buf, cap, "no image '%s', and no upload-dir takes new names", name);
	else if (st == NDZ_CTL_DENIED)
		snprintf(buf, cap, "no upload rule matches %s for image '%s'", a, name);
}

static void upload_end(struct master *m, struct upload *u)
{
	pthread_mutex_lock(&m->lock);
	if (u->tmp[0])
		unlink(u->tmp);
	u->used = 0;
	pthread_mutex_unlock(&m->lock);
}

static void reply_done(int fd, uint32_t id, unsigned status, const char *msg)
{
	struct ndz_ctl_rep rep = { .type = NDZ_CTL_DONE, .status = (uint16_t)status, .id = id };

	rep.json = msg;
	rep.json_len = strnlen(msg, NDZ_CTL_MSG_MAX);
	ndz_upload_write_msg(fd, &rep);
}

/* After a rejection: let the uploader read the verdict before the connection goes. */
static void drain(int fd)
{
	static uint8_t sink[65536];
	double end = now_s() + DRAIN_S;
	struct timeval tv = { .tv_sec = 1 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	shutdown(fd, SHUT_WR);
	while (now_s() < end && read(fd, sink, sizeof(sink)) > 0)
		;
}

/* Under the lock, which it releases: STATUS over TCP, the same rules as by UDP. */
static void tcp_status(struct master *m, int fd, uint32_t id, uint32_t addr)
{
	static char json[NDZ_CTL_JSON_MAX];
	static uint8_t out[NDZ_CTL_REP_MAX];
	struct ndz_ctl_rep rep = { .type = NDZ_CTL_STATUS, .id = id };
	int n;

	if (!ndz_mconf_allows_any(m->conf, addr) && ntohl(addr) != INADDR_LOOPBACK) {
		rep.status = NDZ_CTL_DENIED;
		m->n.denied++;
	} else {
		m->n.status++;
		rep.json = json;
		rep.json_len = status_json(m, json, sizeof(json));
	}
	/* encoded under the lock: json and out are shared by the threads */
	n = ndz_ctl_rep_encode(&rep, out, sizeof(out));
	if (n > 0)
		n = send(fd, out, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) == n ? 0 : -1;
	pthread_mutex_unlock(&m->lock);
	if (n != 0 && cli_verbose)
		cli_info("status reply not sent whole");
}

/*
 * The first message on a new connection, whole within secs seconds however it is
 * dribbled: the length, or ndz_upload_read_msg's codes (NDZ_ETIMEDOUT at the end).
 */
static int read_first(int fd, uint8_t *buf, size_t cap, unsigned secs)
{
	double end = now_s() + secs;
	size_t have = 0;
	int want;

	while ((want = ndz_ctl_req_need(buf, have)) > 0 && (size_t)want > have) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		double left = end - now_s();
		ssize_t n;

		if ((size_t)want > cap)
			return NDZ_EINVAL;
		if (left <= 0)
			return NDZ_ETIMEDOUT;
		if (poll(&p, 1, (int)(left * 1000) + 1) < 0 && errno != EINTR)
			return NDZ_ENET;
		if (!p.revents)
			continue;
		n = recv(fd, buf + have, (size_t)want - have, MSG_DONTWAIT);
		if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
			continue;
		if (n < 0)
			return NDZ_ENET;
		if (n == 0)
			return NDZ_ESHORTREAD;
		have += (size_t)n;
	}
	return want;
}

/* One TCP connection, accepted with a place in m->admit (admitted). */
struct job {
	struct master *m;
	int fd;
	uint32_t addr;
	int admitted;
};

static void run_upload(struct master *m, struct job *j)
{
	uint8_t buf[NDZ_CTL_REQ_MAX];
	struct ndz_ctl_req req;
	struct ndz_ctl_rep rep = { .type = NDZ_CTL_UPLOAD };
	struct ndz_upload_stats stats = { 0 };
	struct ndz_error e = { 0 };
	struct upload *u = NULL;
	struct ndz_io *io = NULL;
	struct timeval tv = { 0 };
	char final[PATH_MAX], a[16], msg[NDZ_CTL_MSG_MAX + 1];
	uint64_t limit = 0;
	unsigned st, quiet;
	int n, tfd = -1, rc, fd = j->fd;
	uint32_t addr = j->addr;
	double t0 = now_s();

	ndz_net_ntoa(addr, a);
	pthread_mutex_lock(&m->lock);
	tv.tv_sec = m->conf->request_timeout;
	quiet = m->conf->upload_timeout;
	pthread_mutex_unlock(&m->lock);
	/* the first message comes at once or never: a few seconds, not upload-timeout */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	n = read_first(fd, buf, sizeof(buf), (unsigned)tv.tv_sec);
	rc = n < 0 ? n : ndz_ctl_req_decode(buf, (size_t)n, &req);
	pthread_mutex_lock(&m->lock);
	if (rc == 0 && req.type == NDZ_CTL_STATUS) {
		tcp_status(m, fd, req.id, addr);
		return;                /* unlocked there */
	}
	if (rc == NDZ_EINVAL || (rc == 0 && req.type != NDZ_CTL_UPLOAD)) {
		st = NDZ_CTL_MALFORMED;
		m->n.uploads++;
		m->n.malformed++;
	} else if (rc < 0) {
		m->n.dropped++;        /* not ours, or gone quiet before asking */
		if (rc == NDZ_ETIMEDOUT)
			m->n.tcp_quiet++;
		pthread_mutex_unlock(&m->lock);
		if (cli_verbose > 1 && rc == NDZ_ETIMEDOUT)
			cli_info("%s said nothing for %ld s; closed", a, (long)tv.tv_sec);
		return;
	} else {
		m->n.uploads++;
		st = upload_begin(m, &req, addr, final, sizeof(final), &u, &tfd, &limit);
	}
	if (st != NDZ_CTL_OK) {
		m->n.uploads_refused++;
	} else if (j->admitted) {
		/* past its first message, it holds an upload slot instead of a place */
		ndz_admit_release(&m->admit, addr);
		j->admitted = 0;
	}
	pthread_mutex_unlock(&m->lock);
	rep.id = rc == 0 ? req.id : 0;
	rep.status = (uint16_t)st;
	if (st != NDZ_CTL_OK) {
		refusal_why(st, rc == 0 ? req.name : NULL, a, msg, sizeof(msg));
		if (cli_verbose)
			cli_info("%s may not upload %s: %s%s%s", a, rc == 0 ? req.name : "?",
				 ndz_ctl_strstatus(st), *msg ? ": " : "", msg);
		/* a verdict with its reason (uploaders take DONE as an answer to UPLOAD too) */
		if (*msg && rc == 0)
			reply_done(fd, req.id, st, msg);
		else
			ndz_upload_write_msg(fd, &rep);
		drain(fd);
		return;
	}
	if (cli_verbose)
		cli_info("%s uploads %s (%llu bytes declared)", a, req.name,
			 (unsigned long long)req.size);
	tv.tv_sec = quiet;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (ndz_upload_write_msg(fd, &rep) != 0 || ndz_io_open_stream(fd, "upload", &io, NULL) != 0) {
		st = NDZ_CTL_FAILED;
		ndz_error_set(&e, NDZ_ENET, errno, "%s: connection lost", a);
	} else {
		rc = ndz_upload_receive(io, tfd, limit, req.size, &stats, &st, &e);
		if (rc == 0 && fsync(tfd) != 0) {
			st = NDZ_CTL_FAILED;
			rc = ndz_error_set(&e, NDZ_EIO, errno, "syncing %s", u->tmp);
		}
		if (rc == 0) {
			pthread_mutex_lock(&m->lock);
			rc = upload_commit(m, u, final, &e);
			pthread_mutex_unlock(&m->lock);
			if (rc == 0 && sync_dir_of(final) != 0)
				rc = ndz_error_set(&e, NDZ_EIO, errno, "syncing the directory of %s",
						   final);
			if (rc == 0) {
				pthread_mutex_lock(&m->lock);
				rc = upload_served(m, req.name, final, &e);
				pthread_mutex_unlock(&m->lock);
			}
			if (rc != 0)
				st = NDZ_CTL_FAILED;
		}
	}
	ndz_io_close(io);
	close(tfd);
	upload_end(m, u);
	pthread_mutex_lock(&m->lock);
	if (st == NDZ_CTL_OK)
		m->n.uploads_stored++;
	else
		m->n.uploads_rejected++;
	pthread_mutex_unlock(&m->lock);
	if (st == NDZ_CTL_OK) {
		snprintf(msg, sizeof(msg), "stored: %u chunks, %llu bytes", stats.chunks,
			 (unsigned long long)stats.bytes);
		if (cli_verbose)
			cli_info("%s from %s %s as %s (%.1f s)", req.name, a, msg, final,
				 now_s() - t0);
		reply_done(fd, req.id, st, msg);
		return;
	}
	if (st == NDZ_CTL_TIMEOUT) {   /* "read error: Resource temporarily unavailable" */
		ndz_error_clear(&e);
		ndz_error_set(&e, NDZ_ETIMEDOUT, 0, "nothing received for %ld s, after %llu bytes",
			      (long)tv.tv_sec, (unsigned long long)stats.bytes);
	}
	cli_error("upload of %s from %s rejected: %s", req.name, a, ndz_error_msg(&e));
	reply_done(fd, req.id, st, ndz_error_msg(&e));
	drain(fd);
}

static void *upload_thread(void *arg)
{
	struct job *j = arg;
	struct master *m = j->m;

	run_upload(m, j);
	close(j->fd);
	pthread_mutex_lock(&m->lock);
	if (j->admitted)
		ndz_admit_release(&m->admit, j->addr);
	m->nthreads--;
	pthread_mutex_unlock(&m->lock);
	free(j);
	return NULL;
}

/* A refusal before the first message: an UPLOAD reply header alone, then close. */
static void refuse_conn(int fd, unsigned status)
{
	struct ndz_ctl_rep rep = { .type = NDZ_CTL_UPLOAD, .status = (uint16_t)status };
	uint8_t out[NDZ_CTL_REQ_MAX];

	/* the request, if here, is read first: unread data would reset the connection */
	(void)!recv(fd, out, sizeof(out), MSG_DONTWAIT);
	if (ndz_ctl_rep_encode(&rep, out, sizeof(out)) > 0 &&
	    send(fd, out, NDZ_CTL_REP_HDR, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && cli_verbose > 1)
		cli_info("refusing a connection: %s", strerror(errno));
	shutdown(fd, SHUT_WR);
	close(fd);
}

/*
 * Under the lock: a new TCP connection gets a thread, or a refusal at once: from a
 * host that nothing allows (neither an image nor an upload list, nor 127.0.0.1),
 * or when max-pending-host connections from its host, or max-pending in all, have
 * not yet sent their first message. Upload slots are taken later, by the request.
 */
static void accept_upload(struct master *m)
{
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	int fd = accept4(m->tfd, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC);
	const struct ndz_mconf *c = m->conf;
	struct job *j = NULL;
	pthread_attr_t at;
	pthread_t t;
	sigset_t all, old;
	uint32_t addr;
	char a[16];
	int rc;

	if (fd < 0)
		return;
	addr = from.sin_addr.s_addr;
	m->n.requests++;
	if (!rate_ok(m, addr)) {
		m->n.rate_limited++;
		close(fd);
		return;
	}
	if (!ndz_mconf_may_connect(c, addr) && ntohl(addr) != INADDR_LOOPBACK) {
		m->n.denied++;
		m->n.tcp_denied++;
		if (cli_verbose > 1)
			cli_info("%s: connection refused: no image allows it", ndz_net_ntoa(addr, a));
		refuse_conn(fd, NDZ_CTL_DENIED);
		return;
	}
	rc = ndz_admit_take(&m->admit, addr, c->max_pending, c->max_pending_host);
	/* threads past their first message are bounded by max-uploads, twice (draining) */
	if (rc != NDZ_ADMIT_OK || m->nthreads >= 2 * c->max_uploads + c->max_pending ||
	    !(j = malloc(sizeof(*j)))) {
		if (rc == NDZ_ADMIT_OK)
			ndz_admit_release(&m->admit, addr);
		m->n.tcp_busy++;
		if (cli_verbose > 1)
			cli_info("%s: connection refused: %s", ndz_net_ntoa(addr, a),
				 rc == NDZ_ADMIT_HOST ? "max-pending-host of its connections wait" :
				 "max-pending connections wait");
		refuse_conn(fd, NDZ_CTL_CONNS);
		return;
	}
	j->m = m;
	j->fd = fd;
	j->addr = addr;
	j->admitted = 1;
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
		ndz_admit_release(&m->admit, addr);
		close(fd);
		free(j);
		return;
	}
	m->nthreads++;
}

static int open_control(const char *listen, struct ndz_error *e)
{
	char host[64];
	uint16_t port;
	struct sockaddr_in sa;
	int fd, one = 1, rb = 1 << 20;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	if (ndz_ctl_hostport(listen, NDZ_CTL_PORT, host, sizeof(host), &port) != 0 ||
	    ndz_net_addr(host, &sa.sin_addr.s_addr) != 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "--listen: bad address '%s'", listen);
	sa.sin_port = htons(port);
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ndz_error_set(e, NDZ_ENET, errno, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rb, sizeof(rb));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		close(fd);
		return ndz_error_set(e, NDZ_ENET, errno, "bind %s", listen);
	}
	return fd;
}

/* The upload listener: TCP on the control address and port. */
static int open_upload(const char *addr, struct ndz_error *e)
{
	char host[64];
	uint16_t port;
	struct sockaddr_in sa;
	int fd, one = 1;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	if (ndz_ctl_hostport(addr, NDZ_CTL_PORT, host, sizeof(host), &port) != 0 ||
	    ndz_net_addr(host, &sa.sin_addr.s_addr) != 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "--listen: bad address '%s'", addr);
	sa.sin_port = htons(port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return ndz_error_set(e, NDZ_ENET, errno, "socket");
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 16) != 0) {
		close(fd);
		return ndz_error_set(e, NDZ_ENET, errno, "bind %s (TCP)", addr);
	}
	return fd;
}

/* Where frisbeed is: next to our own binary. */
static const char *find_frisbeed(char *buf, size_t cap)
{
	ssize_t n = readlink("/proc/self/exe", buf, cap - 16);
	char *slash;

	if (n <= 0)
		return "frisbeed";
	buf[n] = 0;
	slash = strrchr(buf, '/');
	strcpy(slash ? slash + 1 : buf, "frisbeed");
	return buf;
}

/*
 * The address the sessions will send from: the interface's (-i), else that of the
 * route to the pool. 0 when unknown: clients then learn it from the JOIN_REPLY.
 */
static uint32_t source_address(const struct master *m)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(m->conf->port_lo) };
	socklen_t len = sizeof(sa);
	uint32_t a = 0;
	int fd;

	if (m->iface) {
		struct ndz_net_opts no = { .iface = m->iface, .port = m->conf->port_lo };
		struct ndz_net *net;
		char g[16];

		no.group = ndz_net_ntoa(htonl(m->conf->pool_base), g);
		if (ndz_net_open(&no, &net, NULL) == 0) {
			a = ndz_net_local(net);
			ndz_net_free(net);
		}
		return a;
	}
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	sa.sin_addr.s_addr = htonl(m->conf->pool_base);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sa, &len) == 0)
		a = sa.sin_addr.s_addr;
	if (fd >= 0)
		close(fd);
	return a;
}

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
		{ "config", required_argument, NULL, 'c' },
		{ "check", no_argument, NULL, 'n' },
		{ "listen", required_argument, NULL, 'l' },
		{ "run-dir", required_argument, NULL, 'r' },
		{ "frisbeed", required_argument, NULL, 'F' },
		{ "interface", required_argument, NULL, 'i' },
		{ "server", required_argument, NULL, 'S' },
		{ "idle-timeout", required_argument, NULL, 'T' },
		{ "ttl", required_argument, NULL, 't' },
		{ "loopback", no_argument, NULL, 'L' },
		{ "status", required_argument, NULL, 's' },
		CLI_COMMON_LONGOPTS,
		{ NULL, 0, NULL, 0 }
	};
	static struct master m;
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
			if (ndz_net_addr(optarg, &m.server) != 0)
				cli_usage_error("-S: bad IPv4 address '%s'", optarg);
			break;
		case 'T': m.idle_override = cli_parse_int(optarg, "-T", 1, 86400); break;
		case 't': m.ttl = cli_parse_int(optarg, "-t", 1, 255); break;
		case 'L': m.loop = 1; break;
		case 's': status = optarg; break;
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
		return check_images(m.conf, m.conf_path);
	if (!m.frisbeed)
		m.frisbeed = find_frisbeed(exe, sizeof(exe));
	if (access(m.frisbeed, X_OK) != 0)
		cli_die(EXIT_FAIL, "%s: %s", m.frisbeed, strerror(errno));
	if (mkdir(m.run_dir, 0755) != 0 && errno != EEXIST)
		cli_die(EXIT_FAIL, "%s: %s", m.run_dir, strerror(errno));
	if ((size_t)snprintf(m.state_path, sizeof(m.state_path), "%s/sessions", m.run_dir) >=
	    sizeof(m.state_path))
		cli_die(EXIT_FAIL, "%s: path too long", m.run_dir);
	m.fd = open_control(listen, &e);
	if (m.fd < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	m.tfd = open_upload(listen, &e);
	if (m.tfd < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	pthread_mutex_init(&m.lock, NULL);
	ndz_admit_init(&m.admit);
	remove_stale(m.conf->upload_dir);
	if (!m.server)
		m.server = source_address(&m);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGHUP, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGCHLD, &sa, NULL);
	adopt_state(&m);
	if (cli_verbose) {
		char a[16];

		cli_info("listening on %s, %zu images, sessions from %s", listen,
			 m.conf->nimages, ndz_net_ntoa(m.server, a));
	}
	while (!got_stop) {
		struct pollfd p[2] = { { .fd = m.fd, .events = POLLIN },
				       { .fd = m.tfd, .events = POLLIN } };
		uint8_t buf[NDZ_CTL_REQ_MAX + 1];

		pthread_mutex_lock(&m.lock);
		if (got_hup) {
			got_hup = 0;
			ndz_error_clear(&e);
			reload(&m, &e);
		}
		got_chld = 0;
		reap(&m);
		pthread_mutex_unlock(&m.lock);
		if (poll(p, 2, 200) <= 0)
			continue;
		pthread_mutex_lock(&m.lock);
		if (p[1].revents & POLLIN)
			accept_upload(&m);
		/* a bounded batch, then the signals and the reaping again */
		for (int k = 0; k < 256 && (p[0].revents & POLLIN); k++) {
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			ssize_t n = recvfrom(m.fd, buf, sizeof(buf), MSG_DONTWAIT,
					     (struct sockaddr *)&from, &fl);

			if (n < 0)
				break;
			handle(&m, buf, (size_t)n, &from);
		}
		pthread_mutex_unlock(&m.lock);
	}
	/* uploads still running leave nothing behind; their uploaders see the end */
	pthread_mutex_lock(&m.lock);
	for (size_t i = 0; i < MAX_UPLOADS; i++)
		if (m.up[i].used && m.up[i].tmp[0])
			unlink(m.up[i].tmp);
	if (cli_verbose)
		cli_info("stopping; %zu sessions keep running", live_sessions(&m));
	close(m.fd);
	close(m.tfd);
	/* still locked: upload threads stop where they are when the process exits */
	return EXIT_OK;
}
