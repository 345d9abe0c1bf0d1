/*
 * mfrisbeed: the image master. Clients ask it over UDP (lib/master/ctl) for an
 * image by name; lib/master/master decides (the session table, the pool, the rate
 * division, upload admission and quota) and this program acts: it starts one
 * frisbeed per image as a detached child and steers it through the session's
 * control socket in the run directory (lib/master/sessctl: status, rate,
 * identify). A session ends when its frisbeed leaves on its idle timeout; a
 * restarted master adopts the sessions its state file lists. Uploads and STATUS
 * come over TCP on the same port, one thread each: a host that nothing allows is
 * refused at accept; until its first message a connection holds one of a few
 * places per host and in all (lib/master/admit); the upload is checked chunk by
 * chunk (lib/master/upload) into a temporary file renamed into place only whole,
 * sound and synced. One lock guards the configuration, the master object and the
 * admissions.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <dirent.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
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
#include "core/file.h"
#include "core/image.h"
#include "core/io.h"
#include "master/admit.h"
#include "master/ctl.h"
#include "master/master.h"
#include "master/mconf.h"
#include "master/mnet.h"
#include "master/mreply.h"
#include "master/sessctl.h"
#include "master/spawn.h"
#include "master/updir.h"
#include "master/upload.h"
#include "mcast/net.h"

#define DRAIN_S 5                      /* after a rejection, read what is in flight this long */
#define ASK_MS 1000                    /* a session's control socket answers within this */

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
	struct ndz_admit admit;        /* connections not yet past their first message */
	uint64_t watched_ns;           /* adopted sessions last checked */
};

static volatile sig_atomic_t got_hup, got_stop;

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
	else if (sig != SIGCHLD)
		got_stop = 1;
}

static void sock_path(const struct mfd *m, const struct ndz_master_session *s, char *buf)
{
	if (ndz_sessctl_path(m->run_dir, s->group, s->port, buf, PATH_MAX, NULL) != 0)
		buf[0] = 0;
}

/* The state file, replaced whole: a restarted master adopts what it lists. */
static void save_state(struct mfd *m)
{
	static char text[NDZ_MASTER_SESSIONS * 160];
	struct ndz_error e = { 0 };
	int n = ndz_master_state(m->ms, text, sizeof(text), &e);

	if (n < 0 || ndz_file_replace(m->state_path, text, (size_t)n, 0644, &e) != 0)
		cli_error("%s: %s", m->state_path, ndz_error_msg(&e));
}

static int read_identity(const char *path, uint8_t uuid[16], uint32_t *chunks, uint64_t *src)
{
	struct ndz_error e = { 0 };

	if (ndz_spawn_identity(path, uuid, chunks, src, &e) == 0)
		return 0;
	cli_error("%s", ndz_error_msg(&e));
	return -1;
}

/* The session's frisbeed answers on its socket, as that pid, serving that image. */
static int session_alive(void *ctx, const struct ndz_master_session *s)
{
	struct ndz_sessctl_identity who;
	char path[PATH_MAX];

	sock_path(ctx, s, path);
	return ndz_sessctl_identify(path, ASK_MS, &who, NULL) == 0 && who.pid == s->pid &&
	       memcmp(who.uuid, s->uuid, 16) == 0;
}

static int image_now(void *ctx, const char *image, uint8_t uuid[16])
{
	const struct ndz_mconf_image *im = ndz_mconf_find(((struct mfd *)ctx)->conf, image);
	uint32_t chunks;
	uint64_t src;

	return im ? read_identity(im->path, uuid, &chunks, &src) : -1;
}

static void session_live(void *ctx, const struct ndz_master_session *s,
			 struct ndz_master_live *out)
{
	static struct ndz_sessctl_status st;
	char path[PATH_MAX];

	sock_path(ctx, s, path);
	if (ndz_sessctl_status(path, ASK_MS, &st, NULL) == 0) {
		out->receivers = st.clients;
		out->bytes_sent = st.bytes_sent;
	}
}

static void adopt_state(struct mfd *m)
{
	static char text[NDZ_MASTER_SESSIONS * 160];
	FILE *f = fopen(m->state_path, "r");
	size_t len;

	if (!f)
		return;
	len = fread(text, 1, sizeof(text), f);
	fclose(f);
	ndz_master_adopt(m->ms, text, len, session_alive, image_now, m, ndz_now_ns());
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS && cli_verbose; i++) {
		const struct ndz_master_session *s = ndz_master_session(m->ms, i);
		char a[16];

		if (s->pid > 0)
			cli_info("adopted session of %s: frisbeed %d on %s port %u", s->image, s->pid,
				 ndz_net_ntoa(s->group, a), s->port);
	}
	save_state(m);
}

/* Each session gets its share of the total rate, told on its control socket. */
static void redivide(struct mfd *m)
{
	struct ndz_master_rate r[NDZ_MASTER_SESSIONS];
	size_t k = ndz_master_rates(m->ms, r, NDZ_MASTER_SESSIONS);
	int changed = 0;

	for (size_t i = 0; i < k; i++) {
		const struct ndz_master_session *s = ndz_master_session(m->ms, (size_t)r[i].slot);
		char path[PATH_MAX];

		sock_path(m, s, path);
		/* not yet listening (just started): asked again on the next round */
		if (ndz_sessctl_rate(path, r[i].rate, ASK_MS, NULL) != 0)
			continue;
		ndz_master_set_rate(m->ms, r[i].slot, r[i].rate);
		changed = 1;
		if (cli_verbose > 1)
			cli_info("session of %s: now %.1f Mbit/s", s->image, (double)r[i].rate / 1e6);
	}
	if (changed)
		save_state(m);
}

static void end_session(struct mfd *m, const struct ndz_master_session *s)
{
	char path[PATH_MAX];

	sock_path(m, s, path);
	if (path[0])
		unlink(path);
	ndz_master_end(m->ms, s->pid);
}

/* Sessions whose frisbeed has left: reap ours, notice adopted ones gone. */
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

		if (s->pid > 0 && s->adopted && !session_alive(m, s)) {
			if (cli_verbose)
				cli_info("adopted session of %s ended", s->image);
			end_session(m, s);
			changed = 1;
		}
	}
	if (now - m->watched_ns >= NDZ_NS_PER_S)
		m->watched_ns = now;
	if (changed)
		save_state(m);
	redivide(m);
}

/*
 * Start frisbeed for the reserved slot in a session of its own (setsid: a master
 * killed or stopped leaves it running). An exec failure comes back through a
 * close-on-exec pipe. 0, or -1 with the slot freed.
 */
static int start_session(struct mfd *m, const struct ndz_master_plan *p)
{
	const struct ndz_master_session *s = ndz_master_session(m->ms, (size_t)p->slot);
	const struct ndz_mconf_image *im = p->image;
	char grp[16], port[8], rate[24], idle[16], ttl[8], ctl[PATH_MAX];
	const char *argv[24];
	struct ndz_error e = { 0 };
	int argc = 0;
	uint8_t uuid[16];
	uint32_t chunks;
	uint64_t src;
	pid_t pid;

	sock_path(m, s, ctl);
	if (!ctl[0] || read_identity(im->path, uuid, &chunks, &src) != 0)
		goto fail;
	ndz_net_ntoa(s->group, grp);
	snprintf(port, sizeof(port), "%u", s->port);
	snprintf(rate, sizeof(rate), "%llu", (unsigned long long)s->rate);
	snprintf(idle, sizeof(idle), "%d", m->idle_override ? m->idle_override :
		 (int)m->conf->idle_timeout);
	snprintf(ttl, sizeof(ttl), "%d", m->ttl);
	argv[argc++] = m->frisbeed;
	argv[argc++] = "-m"; argv[argc++] = grp;
	argv[argc++] = "-p"; argv[argc++] = port;
	argv[argc++] = "-W"; argv[argc++] = rate;
	argv[argc++] = "-T"; argv[argc++] = idle;
	argv[argc++] = "-t"; argv[argc++] = ttl;
	argv[argc++] = "--control"; argv[argc++] = ctl;
	if (m->iface) {
		argv[argc++] = "-i";
		argv[argc++] = m->iface;
	}
	if (m->loop)
		argv[argc++] = "-L";
	if (cli_verbose < 2)
		argv[argc++] = "-q";
	argv[argc++] = "--";
	argv[argc++] = im->path;
	argv[argc] = NULL;
	if (ndz_spawn(argv, &pid, &e) != 0) {
		cli_error("%s", ndz_error_msg(&e));
		goto fail;
	}
	ndz_master_started(m->ms, p->slot, pid, uuid, chunks, src, ndz_now_ns());
	if (cli_verbose)
		cli_info("session of %s: frisbeed %ld on %s port %u at %.1f Mbit/s", im->name,
			 (long)pid, grp, s->port, (double)s->rate / 1e6);
	save_state(m);
	redivide(m);
	return 0;
fail:
	ndz_master_start_failed(m->ms, p->slot);
	return -1;
}

/* 127.0.0.1 or an address some image allows. */
static int may_ask(const struct mfd *m, uint32_t addr)
{
	return ndz_mconf_allows_any(m->conf, addr) || ntohl(addr) == INADDR_LOOPBACK;
}

/* One request: bounded work (a table look-up, at most one frisbeed started). */
static void handle(struct mfd *m, const uint8_t *buf, size_t len, struct sockaddr_in *from)
{
	static uint8_t out[NDZ_CTL_REP_MAX];
	struct ndz_ctl_req req;
	struct ndz_ctl_rep rep = { 0 };
	struct ndz_master_plan p;
	struct ndz_error e = { 0 };
	uint32_t addr = from->sin_addr.s_addr;
	char a[16];
	int rc, n;

	m->n->requests++;
	rc = ndz_ctl_req_decode(buf, len, &req);
	if (rc == NDZ_EPROTO || rc == NDZ_EPROTOVER) {
		m->n->dropped++;
		return;
	}
	if (!ndz_master_host_ok(m->ms, addr, ndz_now_ns())) {
		m->n->rate_limited++;
		return;
	}
	ndz_net_ntoa(addr, a);
	rep.type = req.type == NDZ_CTL_STATUS || req.type == NDZ_CTL_UPLOAD ? req.type : NDZ_CTL_GET;
	rep.id = req.id;
	if (rc != 0 || req.type == NDZ_CTL_UPLOAD) {   /* uploads come by TCP */
		rep.status = NDZ_CTL_MALFORMED;
		m->n->malformed++;
	} else if (!may_ask(m, addr)) {
		rep.status = NDZ_CTL_DENIED;
		m->n->denied++;
		if (cli_verbose && req.type == NDZ_CTL_GET)
			cli_info("%s asks for %s: access denied: no allow rule matches %s for "
				 "image '%s' (nor for any image)", a, req.name, a, req.name);
		else if (cli_verbose)
			cli_info("%s asks for the status: access denied: no image allows %s", a, a);
	} else if (req.type == NDZ_CTL_STATUS) {
		rep.status = NDZ_CTL_USE_TCP;  /* a 12-byte datagram must not buy 16 KB */
		m->n->status_udp++;
	} else {
		rc = ndz_master_get(m->ms, req.name, addr, &p, &e);
		if (rc == 0 && p.start && start_session(m, &p) != 0)
			rc = NDZ_EIO;
		else if (rc == 0 && !p.start)
			ndz_master_served(m->ms, p.slot);
		rep.status = (uint16_t)ndz_ctl_status_of(rc);
		if (rc == 0) {
			const struct ndz_master_session *s = ndz_master_session(m->ms, (size_t)p.slot);

			rep.group = s->group;
			rep.port = s->port;
			rep.server = m->server;
			memcpy(rep.uuid, s->uuid, 16);
			rep.chunks = s->chunks;
			rep.source_bytes = s->source_bytes;
			rep.rate_bps = s->rate;
		}
		if (rc == NDZ_EDENIED && cli_verbose)
			cli_info("%s asks for %s: access denied: no allow rule matches %s for "
				 "image '%s'", a, req.name, a, req.name);
		else if (cli_verbose > 1)
			cli_info("%s asks for %s: %s", a, req.name, ndz_ctl_strstatus(rep.status));
	}
	n = ndz_ctl_rep_encode(&rep, out, sizeof(out));
	if (n > 0)
		sendto(m->fd, out, (size_t)n, 0, (struct sockaddr *)from, sizeof(*from));
}

/* ---- uploads: one thread per connection ---- */

static uint64_t dir_usage(void *ctx, const char *replaced)
{
	return ndz_updir_usage(((struct mfd *)ctx)->conf->upload_dir, replaced);
}

static void said_stale(void *ctx, const char *name)
{
	if (cli_verbose)
		cli_info("%s/%s: removed, left by an earlier master", (const char *)ctx, name);
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
	m->n->reloads++;
	if (cli_verbose)
		cli_info("%s reloaded: %zu images", m->conf_path, c->nimages);
	return 0;
}

/*
 * Under the lock: a stored image is reported stored only once a GET would serve
 * it: a new name in the upload directory needs a reload that picks it up.
 */
static int upload_served(struct mfd *m, const char *name, const char *final,
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

/* Under the lock, which it releases: STATUS over TCP, the same rules as by UDP. */
static void tcp_status(struct mfd *m, int fd, uint32_t id, uint32_t addr)
{
	static char json[NDZ_CTL_JSON_MAX + 1];
	struct ndz_ctl_rep rep = { .type = NDZ_CTL_STATUS, .id = id };
	int n;

	if (!may_ask(m, addr)) {
		rep.status = NDZ_CTL_DENIED;
		m->n->denied++;
	} else {
		m->n->status++;
		rep.json = json;
		rep.json_len = ndz_master_status_json(m->ms, ndz_now_ns(), session_live, m, json,
						      sizeof(json));
	}
	n = ndz_mreply_send(fd, &rep);        /* under the lock: json is shared */
	pthread_mutex_unlock(&m->lock);
	if (n != 0 && cli_verbose)
		cli_info("status reply not sent whole");
}

/*
 * Under the lock: the upload of req from addr may begin (an upload slot and its
 * temporary file, *tfd), or a negative code with e saying why.
 */
static int upload_begin(struct mfd *m, const struct ndz_ctl_req *req, uint32_t addr,
			char *final, int *slot, int *tfd, uint64_t *limit, struct ndz_error *e)
{
	int rc = ndz_master_upload_begin(m->ms, req->name, addr, req->size, dir_usage, m, final,
					 PATH_MAX, slot, limit, e);
	char *tmp;

	if (rc != 0)
		return rc;
	tmp = m->tmp[*slot];
	if ((*tfd = ndz_updir_temp(m->conf->upload_dir, req->name, tmp, PATH_MAX, e)) < 0) {
		cli_error("%s", ndz_error_msg(e));
		ndz_master_upload_end(m->ms, *slot, -1);
		return *tfd;
	}
	return 0;
}

/* One TCP connection, accepted with a place in m->admit (admitted). */
struct job {
	struct mfd *m;
	int fd;
	uint32_t addr;
	int admitted;
};

static void run_upload(struct mfd *m, struct job *j)
{
	uint8_t buf[NDZ_CTL_REQ_MAX];
	struct ndz_ctl_req req;
	struct ndz_ctl_rep rep = { .type = NDZ_CTL_UPLOAD };
	struct ndz_upload_stats stats = { 0 };
	struct ndz_error e = { 0 };
	struct ndz_io *io = NULL;
	struct timeval tv = { 0 };
	char final[PATH_MAX], a[16], msg[NDZ_CTL_MSG_MAX + 1];
	uint64_t limit = 0, t0 = ndz_now_ns();
	unsigned quiet;
	int n, tfd = -1, rc, slot = -1, fd = j->fd, stored = 0;

	ndz_net_ntoa(j->addr, a);
	pthread_mutex_lock(&m->lock);
	tv.tv_sec = m->conf->request_timeout;
	quiet = m->conf->upload_timeout;
	pthread_mutex_unlock(&m->lock);
	/* the first message comes at once or never: a few seconds, not upload-timeout */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	n = ndz_upload_read_msg(fd, buf, sizeof(buf), ndz_ctl_req_need, (int)tv.tv_sec * 1000);
	rc = n < 0 ? n : ndz_ctl_req_decode(buf, (size_t)n, &req);
	pthread_mutex_lock(&m->lock);
	if (rc == 0 && req.type == NDZ_CTL_STATUS) {
		tcp_status(m, fd, req.id, j->addr);
		return;                /* unlocked there */
	}
	if (rc == NDZ_EINVAL || (rc == 0 && req.type != NDZ_CTL_UPLOAD)) {
		rc = NDZ_EINVAL;
		m->n->uploads++;
		m->n->malformed++;
		m->n->uploads_refused++;
	} else if (rc < 0) {
		m->n->dropped++;        /* not ours, or gone quiet before asking */
		if (rc == NDZ_ETIMEDOUT)
			m->n->tcp_quiet++;
		pthread_mutex_unlock(&m->lock);
		if (cli_verbose > 1 && rc == NDZ_ETIMEDOUT)
			cli_info("%s said nothing for %ld s; closed", a, (long)tv.tv_sec);
		return;
	} else if ((rc = upload_begin(m, &req, j->addr, final, &slot, &tfd, &limit, &e)) == 0 &&
		   j->admitted) {
		/* past its first message, it holds an upload slot instead of a place */
		ndz_admit_release(&m->admit, j->addr);
		j->admitted = 0;
	}
	pthread_mutex_unlock(&m->lock);
	rep.id = req.id;
	rep.status = (uint16_t)ndz_ctl_status_of(rc);
	if (rc != 0) {
		/* a verdict with its reason (uploaders take DONE as an answer to UPLOAD too) */
		int why = rc == NDZ_ENOIMAGE || rc == NDZ_EDENIED;

		if (cli_verbose)
			cli_info("%s may not upload %s: %s%s%s", a, rc != NDZ_EINVAL ? req.name : "?",
				 ndz_ctl_strstatus(rep.status), why ? ": " : "",
				 why ? ndz_error_msg(&e) : "");
		if (why)
			ndz_mreply_done(fd, req.id, rep.status, ndz_error_msg(&e));
		else
			ndz_upload_write_msg(fd, &rep);
		ndz_mreply_drain(fd, DRAIN_S);
		return;
	}
	if (cli_verbose)
		cli_info("%s uploads %s (%llu bytes declared)", a, req.name,
			 (unsigned long long)req.size);
	tv.tv_sec = quiet;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (ndz_upload_write_msg(fd, &rep) != 0 || ndz_io_open_stream(fd, "upload", &io) != 0) {
		rc = ndz_error_set(&e, NDZ_ENET, errno, "%s: connection lost", a);
	} else if ((rc = ndz_upload_receive(io, tfd, limit, req.size, &stats, &e)) == 0) {
		unsigned st;

		/* past the image's checks, what fails is ours */
		if (fsync(tfd) != 0)
			rc = ndz_error_set(&e, NDZ_EIO, errno, "syncing %s", m->tmp[slot]);
		pthread_mutex_lock(&m->lock);
		if (rc == 0 && rename(m->tmp[slot], final) != 0)
			rc = ndz_error_set(&e, NDZ_EIO, errno, "renaming into %s", final);
		if (rc == 0) {
			m->tmp[slot][0] = 0;
			ndz_master_upload_stored(m->ms, slot);
		}
		pthread_mutex_unlock(&m->lock);
		if (rc == 0)
			rc = ndz_dir_sync(final, &e);
		if (rc == 0) {
			pthread_mutex_lock(&m->lock);
			rc = upload_served(m, req.name, final, &e);
			pthread_mutex_unlock(&m->lock);
		}
		st = rc == 0 ? NDZ_CTL_OK : NDZ_CTL_FAILED;
		stored = rc == 0;
		rep.status = (uint16_t)st;
	}
	if (rc != 0 && rep.status == NDZ_CTL_OK)
		rep.status = (uint16_t)ndz_ctl_status_of(rc);
	ndz_io_close(io);
	close(tfd);
	pthread_mutex_lock(&m->lock);
	if (m->tmp[slot][0])
		unlink(m->tmp[slot]);
	m->tmp[slot][0] = 0;
	ndz_master_upload_end(m->ms, slot, stored);
	pthread_mutex_unlock(&m->lock);
	if (stored) {
		snprintf(msg, sizeof(msg), "stored: %u chunks, %llu bytes", stats.chunks,
			 (unsigned long long)stats.bytes);
		if (cli_verbose)
			cli_info("%s from %s %s as %s (%.1f s)", req.name, a, msg, final,
				 (double)(ndz_now_ns() - t0) / 1e9);
		ndz_mreply_done(fd, req.id, NDZ_CTL_OK, msg);
		return;
	}
	if (rc == NDZ_ETIMEDOUT) {     /* "read error: Resource temporarily unavailable" */
		ndz_error_clear(&e);
		ndz_error_set(&e, NDZ_ETIMEDOUT, 0, "nothing received for %ld s, after %llu bytes",
			      (long)tv.tv_sec, (unsigned long long)stats.bytes);
	}
	cli_error("upload of %s from %s rejected: %s", req.name, a, ndz_error_msg(&e));
	ndz_mreply_done(fd, req.id, rep.status, ndz_error_msg(&e));
	ndz_mreply_drain(fd, DRAIN_S);
}

static void *upload_thread(void *arg)
{
	struct job *j = arg;
	struct mfd *m = j->m;

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

/*
 * Under the lock: a new TCP connection gets a thread, or a refusal at once: from a
 * host that nothing allows (neither an image nor an upload list, nor 127.0.0.1),
 * or when max-pending-host connections from its host, or max-pending in all, have
 * not yet sent their first message. Upload slots are taken later, by the request.
 */
static void accept_upload(struct mfd *m)
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
	ndz_net_ntoa(addr, a);
	m->n->requests++;
	if (!ndz_master_host_ok(m->ms, addr, ndz_now_ns())) {
		m->n->rate_limited++;
		close(fd);
		return;
	}
	if (!ndz_mconf_may_connect(c, addr) && ntohl(addr) != INADDR_LOOPBACK) {
		m->n->denied++;
		m->n->tcp_denied++;
		if (cli_verbose > 1)
			cli_info("%s: connection refused: no image allows it", a);
		ndz_mreply_refuse(fd, NDZ_CTL_DENIED);
		return;
	}
	rc = ndz_admit_take(&m->admit, addr, c->max_pending, c->max_pending_host);
	/* threads past their first message are bounded by max-uploads, twice (draining) */
	if (rc != NDZ_ADMIT_OK || m->nthreads >= 2 * c->max_uploads + c->max_pending ||
	    !(j = malloc(sizeof(*j)))) {
		if (rc == NDZ_ADMIT_OK)
			ndz_admit_release(&m->admit, addr);
		m->n->tcp_busy++;
		if (cli_verbose > 1)
			cli_info("%s: connection refused: %s", a, rc == NDZ_ADMIT_HOST ?
				 "max-pending-host of its connections wait" :
				 "max-pending connections wait");
		ndz_mreply_refuse(fd, ndz_ctl_status_of(NDZ_ECONNS));
		return;
	}
	*j = (struct job){ m, fd, addr, 1 };
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
	if (ndz_mnet_listen(listen, &m.fd, &m.tfd, &e) != 0 ||
	    ndz_master_create(m.conf, &m.ms, &e) != 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	m.n = ndz_master_counters(m.ms);
	pthread_mutex_init(&m.lock, NULL);
	ndz_admit_init(&m.admit);
	ndz_updir_clean(m.conf->upload_dir, said_stale, m.conf->upload_dir);
	if (!m.server)
		m.server = ndz_mnet_source(m.iface, m.conf->pool_base, m.conf->port_lo);
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
	for (size_t i = 0; i < NDZ_MASTER_UPLOADS; i++)
		if (m.tmp[i][0])
			unlink(m.tmp[i]);
	if (cli_verbose)
		cli_info("stopping; %zu sessions keep running", ndz_master_live(m.ms));
	close(m.fd);
	close(m.tfd);
	/* still locked: upload threads stop where they are when the process exits */
	return EXIT_OK;
}
