/*
 * The image master's service: the lock, the threads and the sockets of the daemon
 * (mserve.h). A GET is answered with a running session only once it has promised
 * to stay for the client (hold), else a new one is started; a session ends when its
 * frisbeed leaves on its idle timeout; a restarted master adopts the sessions its
 * state file lists. Uploads and STATUS come over TCP, one thread each: a host that
 * nothing allows is refused at accept; until its first message a connection holds
 * one of a few places per host and in all (lib/master/master).
 */
#include <errno.h>
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
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "ctl/ctl.h"
#include "http.h"
#include "labsrv.h"
#include "logring.h"
#include "mconn.h"
#include "mlock.h"
#include "mnet.h"
#include "mreply.h"
#include "mserve.h"
#include "session.h"
#include "site.h"
#include "master/images.h"
#include "master/master.h"
#include "master/updir.h"
#include "core/clock.h"
#include "mcast/net.h"

#define DRAIN_S 5                      /* after a rejection, read what is in flight this long */
#define HOLD_ASKS 4                    /* sessions asked to hold for one GET, at most */
#define NOTE_MS 5000                   /* the sessions' bytes sent noted this often */

struct ndz_mserve {
	struct ndz_mserve_opts o;
	struct ndz_master *ms;
	struct ndz_master_counters *n;
	struct ndz_mconf *conf;
	char state_path[PATH_MAX];
	int fd, tfd;
	struct ndz_mlock *lock;        /* the one lock (mlock.h) */
	char tmp[NDZ_MASTER_UPLOADS][PATH_MAX]; /* per upload slot: its temporary file, or "" */
	unsigned nthreads;             /* connection threads running */
	struct ndz_mconn conn;         /* what the connection threads share */
	struct ndz_labsrv *lab;        /* nodes, tasks, admin requests */
	uint64_t watched_ns;           /* adopted sessions last checked */
	struct ndz_http *http;         /* the HTTP endpoint, or NULL */
	struct ndz_http_ext ext[NDZ_LABSRV_HTTP_EXTS + 2];  /* the lab's, "log", "site" */
	uint64_t noted_ms;             /* the sessions' bytes sent last noted */
	struct ndz_site *site;         /* sites (lib/mserve/site): a parent's answers, a
					* site's fetches */
};

/*
 * The page's log tail: what the master says up to level 1 and every refusal, in a
 * ring (logring.h). Refusals come through a hook without a context (lib/cli's
 * cli_refusal), so the ring and the program's own hook are the process's: one
 * service per process.
 */
static struct ndz_logring *ring;
static void (*outer_refused)(const char *rule, const char *addr, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void ring_refused(const char *rule, const char *addr, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void ring_refused(const char *rule, const char *addr, const char *fmt, ...)
{
	char msg[1024], line[1200];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(line, sizeof(line), "(%s) %s: %s", rule, addr, msg);
	ndz_logring_add(ring, 3, (uint64_t)time(NULL), line);
	if (outer_refused)
		outer_refused(rule, addr, "%s", msg);
}

static void tell(void *ctx, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
#define SAY(s, level, ...) tell((s), (level), __VA_ARGS__)

/* The state file, replaced whole: a restarted master adopts what it lists. */
static void save_state(struct ndz_mserve *s)
{
	struct ndz_error e = { 0 };

	if (ndz_master_save(s->ms, s->state_path, &e) != 0)
		SAY(s, 0, "%s", ndz_error_msg(&e));
}

static int session_alive(void *ctx, const struct ndz_master_session *ss)
{
	return ndz_session_alive(((struct ndz_mserve *)ctx)->o.run_dir, ss);
}

/* Without the lock: a copy of a session, asked for its own statistics. */
static void session_live(void *ctx, const struct ndz_master_session *ss,
			 struct ndz_master_live *out)
{
	ndz_session_live(((struct ndz_mserve *)ctx)->o.run_dir, ss, out);
}

/* The identity of the image now under that name: uploaded anew while no master ran? */
static int image_now(void *ctx, const char *image, uint8_t uuid[16])
{
	const struct ndz_mconf_image *im = ndz_mconf_find(((struct ndz_mserve *)ctx)->conf, image);
	uint32_t chunks;
	uint64_t src;

	return im ? ndz_images_identity(im->path, uuid, &chunks, &src, NULL) : -1;
}

/* Before the lock is first taken (no thread runs yet): the sessions left running. */
static void adopt_state(struct ndz_mserve *s)
{
	struct ndz_error e = { 0 };

	if (ndz_master_load(s->ms, s->state_path, session_alive, image_now, s, ndz_now_ns(),
			    &e) < 0)
		SAY(s, 0, "%s", ndz_error_msg(&e));
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS && s->o.verbose; i++) {
		const struct ndz_master_session *ss = ndz_master_session(s->ms, i);
		char a[16];

		if (ss->pid > 0)
			SAY(s, 1, "adopted session of %s: frisbeed %d on %s port %u", ss->image,
			    ss->pid, ndz_net_ntoa(ss->group, a), ss->port);
	}
	save_state(s);
}

static void end_session(struct ndz_mserve *s, const struct ndz_master_session *ss)
{
	ndz_session_forget(s->o.run_dir, ss);
	ndz_master_end(s->ms, ss->pid);
}

/* A session copied under the lock, to be asked without it. */
struct ask {
	struct ndz_master_session ss;
	int slot;
	uint64_t rate;
	int yes;                       /* the answer: took the rate; has gone */
};

/*
 * Under the lock, which it releases while the frisbeeds are asked: tell each session
 * whose share of the total rate changed its new rate; those that took it (and are
 * still the session asked) keep it. A session not yet listening is asked again on
 * the next round. 1 when a rate changed.
 */
static int rates(struct ndz_mserve *s)
{
	struct ndz_master_rate *r = malloc(NDZ_MASTER_SESSIONS * sizeof(*r));
	struct ask *a = NULL;
	size_t k = r ? ndz_master_rates(s->ms, r, NDZ_MASTER_SESSIONS) : 0, n = 0;

	if (k && (a = malloc(k * sizeof(*a))))
		for (size_t i = 0; i < k; i++)
			a[i] = (struct ask){ *ndz_master_session(s->ms, (size_t)r[i].slot),
					     r[i].slot, r[i].rate, 0 };
	free(r);
	if (!a)
		return 0;
	ndz_mlock_give(s->lock);
	for (size_t i = 0; i < k; i++)
		a[i].yes = ndz_session_rate(s->o.run_dir, &a[i].ss, a[i].rate) == 0;
	ndz_mlock_take(s->lock);
	for (size_t i = 0; i < k; i++) {
		const struct ndz_master_session *ss = ndz_master_session(s->ms, (size_t)a[i].slot);

		if (!a[i].yes || ss->pid != a[i].ss.pid)
			continue;
		ndz_master_set_rate(s->ms, a[i].slot, a[i].rate);
		n++;
		SAY(s, 2, "session of %s: now %.1f Mbit/s", ss->image, (double)ss->rate / 1e6);
	}
	free(a);
	return n > 0;
}

/*
 * Under the lock, which it releases while they are asked: adopted sessions are not
 * our children; asked whether they are there, the gone ones end. 1 when one did.
 */
static int watch_adopted(struct ndz_mserve *s)
{
	struct ask *a = malloc(NDZ_MASTER_SESSIONS * sizeof(*a));
	size_t k = 0;
	int changed = 0;

	for (size_t i = 0; a && i < NDZ_MASTER_SESSIONS; i++) {
		const struct ndz_master_session *ss = ndz_master_session(s->ms, i);

		if (ss->pid > 0 && ss->adopted)
			a[k++] = (struct ask){ *ss, (int)i, 0, 0 };
	}
	if (!k) {
		free(a);
		return 0;
	}
	ndz_mlock_give(s->lock);
	for (size_t i = 0; i < k; i++)
		a[i].yes = ndz_session_gone(s->o.run_dir, &a[i].ss);
	ndz_mlock_take(s->lock);
	for (size_t i = 0; i < k; i++) {
		const struct ndz_master_session *ss = ndz_master_session(s->ms, (size_t)a[i].slot);

		if (!a[i].yes || ss->pid != a[i].ss.pid)
			continue;
		SAY(s, 1, "adopted session of %s ended", ss->image);
		end_session(s, ss);
		changed = 1;
	}
	free(a);
	return changed;
}

/* Under the lock: sessions whose frisbeed has left: reap ours, notice adopted ones gone; the rates. */
static void reap(struct ndz_mserve *s)
{
	uint64_t now = ndz_now_ns();
	int changed = 0, st;
	pid_t pid;

	while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
		for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++) {
			const struct ndz_master_session *ss = ndz_master_session(s->ms, i);

			if (ss->pid != pid || ss->adopted)
				continue;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
				SAY(s, 1, "session of %s ended (%.0f s, %llu clients)", ss->image,
				    (double)(now - ss->started_ns) / 1e9,
				    (unsigned long long)ss->clients);
			else
				SAY(s, 0, "session of %s: frisbeed %ld %s %d", ss->image, (long)pid,
				    WIFEXITED(st) ? "exited with status" : "killed by signal",
				    WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
			end_session(s, ss);
			changed = 1;
		}
	}
	/* adopted ones: once a second */
	if (now - s->watched_ns >= NDZ_NS_PER_S) {
		s->watched_ns = now;
		changed |= watch_adopted(s);
	}
	/* a session not yet listening (just started) is told its rate on the next round */
	if (rates(s) || changed)
		save_state(s);
}

/* Under the lock: start frisbeed for the reserved slot; 0, or -1 with the slot freed. */
static int start_session(struct ndz_mserve *s, const struct ndz_master_plan *p)
{
	const struct ndz_master_session *ss = ndz_master_session(s->ms, (size_t)p->slot);
	struct ndz_session_opts o = { s->o.frisbeed, s->o.run_dir, s->o.iface,
				      s->o.idle_override ? s->o.idle_override :
				      s->conf->idle_timeout, s->o.ttl, s->o.loop, s->o.verbose < 2,
				      s->o.log, s->o.lost_s, ndz_site_partial(p->image->path) };
	struct ndz_error e = { 0 };
	uint8_t uuid[16];
	uint32_t chunks;
	uint64_t src;
	pid_t pid;
	char a[16];

	if (ndz_images_identity(p->image->path, uuid, &chunks, &src, &e) != 0 ||
	    ndz_session_start(&o, ss, p->image->path, &pid, &e) != 0) {
		SAY(s, 0, "%s", ndz_error_msg(&e));
		ndz_master_start_failed(s->ms, p->slot);
		return -1;
	}
	ndz_master_started(s->ms, p->slot, pid, uuid, chunks, src, ndz_now_ns());
	SAY(s, 1, "session of %s: frisbeed %ld on %s port %u at %.1f Mbit/s", ss->image,
	    (long)pid, ndz_net_ntoa(ss->group, a), ss->port, (double)ss->rate / 1e6);
	save_state(s);
	return 0;
}

/*
 * Under the lock, which it releases while a session is asked: will the running
 * session p names stay for one more client? Its verdict is told to the master (a
 * session gone meanwhile is not), which decides again.
 */
static int ask_hold(struct ndz_mserve *s, const struct ndz_ctl_req *req, uint32_t addr,
		    struct ndz_master_plan *p, struct ndz_ctl_rep *rep, struct ndz_error *e)
{
	int act = NDZ_MASTER_HOLD;

	for (int k = 0; act == NDZ_MASTER_HOLD; k++) {
		struct ndz_master_session ss = *ndz_master_session(s->ms, (size_t)p->slot);
		int r = NDZ_MASTER_HELD;

		ndz_mlock_give(s->lock);
		if (k < HOLD_ASKS)     /* past that: as a session that cannot say, held */
			r = ndz_session_hold(s->o.run_dir, &ss);
		if (r == NDZ_MASTER_GONE)
			ndz_session_forget(s->o.run_dir, &ss);
		ndz_mlock_take(s->lock);
		if (r != NDZ_MASTER_HELD)
			SAY(s, 1, "session of %s: frisbeed %d %s; a new one for the request",
			    ss.image, ss.pid, r == NDZ_MASTER_GONE ? "has ended" : "is ending");
		ndz_master_held(s->ms, p, r);
		act = ndz_master_resume(s->ms, req, addr, p, rep, e);
	}
	return act;
}

/* Under the lock: one request: bounded work (a table look-up, at most one frisbeed started). */
static void handle(struct ndz_mserve *s, const uint8_t *buf, size_t len,
		   const struct sockaddr_in *from)
{
	static uint8_t out[NDZ_CTL_REP_MAX];
	struct ndz_ctl_req req;
	struct ndz_ctl_rep rep;
	struct ndz_master_plan p;
	struct ndz_error e = { 0 };
	char a[16];
	uint32_t addr = from->sin_addr.s_addr;
	int started = 0;
	int act = ndz_master_request(s->ms, buf, len, addr, ndz_now_ns(), &req, &p, &rep, &e), n;

	ndz_net_ntoa(addr, a);
	if (act == NDZ_MASTER_DROP) {      /* e says why: each drop is a refusal */
		s->o.refused(e.code == NDZ_ERATE ? "rate limit" : "malformed", a, "%s",
			     ndz_error_msg(&e));
		return;
	}
	if (act == NDZ_MASTER_HOLD)
		act = ask_hold(s, &req, addr, &p, &rep, &e);
	if (act == NDZ_MASTER_START) {
		started = start_session(s, &p) == 0;
		ndz_master_answer(s->ms, &p, started ? 0 : -1, &rep);
	}
	if (rep.type == NDZ_CTL_GET && rep.status == NDZ_CTL_OK)
		ndz_site_used(s->site, req.name);
	else if (rep.type == NDZ_CTL_GET && rep.status == NDZ_CTL_UNKNOWN &&
		 ndz_mconf_site_allows(s->conf, addr)) {
		/* a site master fetches what it does not hold from its parent (doc/SITES.md) */
		int w;

		ndz_error_clear(&e);
		w = ndz_site_want(s->site, req.name, &e);

		if (w == NDZ_SITE_FETCHING)
			rep.status = NDZ_CTL_WAIT;
		else if (w == NDZ_SITE_FAILED)
			rep.status = e.code == NDZ_ENOIMAGE ? NDZ_CTL_UNKNOWN : NDZ_CTL_FAILED;
		if (w == NDZ_SITE_FAILED)
			SAY(s, 1, "%s asks for %s: %s", a, req.name, ndz_error_msg(&e));
	}
	if (rep.status != NDZ_CTL_OK && rep.status != NDZ_CTL_USE_TCP &&
	    rep.status != NDZ_CTL_FAILED && rep.status != NDZ_CTL_WAIT)
		s->o.refused(ndz_ctl_strstatus(rep.status), a, "asks for %s: %s: %s",
			     req.type == NDZ_CTL_GET ? req.name : "the status",
			     ndz_ctl_strstatus(rep.status), ndz_error_msg(&e));
	else if (rep.type == NDZ_CTL_GET && rep.status != NDZ_CTL_MALFORMED)
		SAY(s, 2, "%s asks for %s: %s", a, req.name, ndz_ctl_strstatus(rep.status));
	n = ndz_ctl_rep_encode(&rep, out, sizeof(out), NULL);
	if (n > 0)
		sendto(s->fd, out, (size_t)n, 0, (const struct sockaddr *)from, sizeof(*from));
	if (started && rates(s))       /* the others' shares, once the client has its answer */
		save_state(s);
}

void ndz_mserve_tell_skipped(const struct ndz_mconf *old, const struct ndz_mconf *c,
			     void (*say)(void *ctx, int level, const char *fmt, ...), void *ctx)
{
	for (size_t i = 0; i < c->nskipped; i++)
		if (!ndz_mconf_skipped(old, c->skipped[i]))
			say(ctx, -1, "%s: skipped: not an image name (letters, digits, '.', '_', "
			    "'-'; at most 64)", c->skipped[i]);
}

/* Under the lock: read the configuration anew; 0, or e says why the old one stays. */
static int reload(void *ctx, struct ndz_error *e)
{
	struct ndz_mserve *s = ctx;
	struct ndz_mconf *c;
	int rc = ndz_mconf_load(s->o.conf_path, &c, e);

	if (rc != 0) {
		s->n->bad_reloads++;
		SAY(s, 0, "%s; keeping the old configuration", ndz_error_msg(e));
		return rc;
	}
	ndz_mserve_tell_skipped(s->conf, c, s->o.say, s->o.ctx);
	ndz_mconf_free(s->conf);
	s->conf = c;
	ndz_master_set_conf(s->ms, c);
	ndz_labsrv_set_conf(s->lab, c);
	s->n->reloads++;
	SAY(s, 1, "%s reloaded: %zu images", s->o.conf_path, c->nimages);
	return 0;
}

/*
 * Without the lock: the STATUS JSON. The sessions are listed under the lock, asked
 * for their statistics without it (each may take a second), and the JSON is made
 * under it again.
 */
static size_t status_json(void *ctx, char *buf, size_t cap)
{
	struct ndz_mserve *s = ctx;
	struct ndz_session_lives *l;
	size_t len;

	ndz_mlock_take(s->lock);
	ndz_session_lives_list(s->ms, &l, NULL);  /* none: zeros */
	ndz_mlock_give(s->lock);
	ndz_session_lives_ask(l, session_live, s);
	ndz_mlock_take(s->lock);
	len = ndz_master_status_json(s->ms, ndz_now_ns(), ndz_session_lives_find, l, buf, cap);
	ndz_mlock_give(s->lock);
	ndz_session_lives_free(l);
	return len;
}

/* The hooks' say, for the parts: as the program's, filtered by verbosity; up to
 * level 1 also into the log tail. */
static void tell(void *ctx, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void tell(void *ctx, int level, const char *fmt, ...)
{
	struct ndz_mserve *s = ctx;
	char msg[1024];
	va_list ap;

	if ((level > s->o.verbose || !s->o.say) && (level > 1 || !ring))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (level <= 1)
		ndz_logring_add(ring, level, (uint64_t)time(NULL), msg);
	if (level <= s->o.verbose && s->o.say)
		s->o.say(s->o.ctx, level, "%s", msg);
}

/* ---- uploads and STATUS: one thread per TCP connection (lib/mserve/mconn) ---- */

/* Under the lock: this master's nodes, for a site's reports to its parent. */
static void site_nodes(void *ctx, int table, struct ndz_jbuf *j)
{
	struct ndz_mserve *s = ctx;

	ndz_labsrv_nodes(s->lab, table, j);
}

/* Under the lock: a parent's nodes list gets its sites' nodes. */
static size_t site_list(void *ctx, int table, struct ndz_jbuf *j)
{
	struct ndz_mserve *s = ctx;

	return s->site ? ndz_site_nodes(s->site, table, j) : 0;
}

/* Under the lock: the lab changed; a site tells its parent at once. */
static void site_changed(void *ctx)
{
	struct ndz_mserve *s = ctx;

	if (s->site)
		ndz_site_changed(s->site);
}

/* Under the lock, at a parent: a task for a node of a site goes to that site. */
static int site_task(void *ctx, const struct ndz_ctl_labreq *r, struct ndz_jbuf *j,
		     struct ndz_error *e)
{
	struct ndz_mserve *s = ctx;

	return s->site ? ndz_site_task(s->site, r, j, e) :
	       ndz_error_set(e, NDZ_ENOENT, 0, "no site");
}

/* Under the lock, at a site: a task its parent sent, done as an admin request. */
static int site_apply(void *ctx, const struct ndz_ctl_labreq *r, struct ndz_jbuf *j,
		      struct ndz_error *e)
{
	struct ndz_mserve *s = ctx;

	return ndz_labsrv_admin(s->lab, r, j, e);
}

/* An upload stored here: a site master sends it on to its parent. */
static void site_stored(void *ctx, const char *name, const char *path)
{
	struct ndz_mserve *s = ctx;

	ndz_mlock_take(s->lock);
	ndz_site_forward(s->site, name, path);
	ndz_mlock_give(s->lock);
}

/* Under the lock: a site's fetch of name failed once served: its sessions stop. */
static void site_drop(void *ctx, const char *name)
{
	struct ndz_mserve *s = ctx;

	ndz_master_retire(s->ms, name);
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS; i++) {
		const struct ndz_master_session *ss = ndz_master_session(s->ms, i);

		if (ss->pid > 0 && !ss->adopted && strcmp(ss->image, name) == 0) {
			SAY(s, 0, "session of %s: frisbeed %d stopped: the image did not arrive "
			    "whole", name, ss->pid);
			kill(ss->pid, SIGTERM);
		}
	}
}

/* A site master's fetch from this one (lib/mserve/site), on its connection's thread. */
static void site_serve(void *ctx, int fd, const uint8_t *buf, size_t len, uint32_t addr)
{
	struct ndz_mserve *s = ctx;

	ndz_site_serve(s->site, fd, buf, len, addr);
}

static void said_stale(void *ctx, const char *name)
{
	struct ndz_mserve *s = ctx;

	SAY(s, 1, "%s/%s: removed, left by an earlier master", s->conf->upload_dir, name);
}

/* One TCP connection, accepted with a place before its first message. */
struct job {
	struct ndz_mserve *s;
	int fd;
	uint32_t addr;
};

static void *upload_thread(void *arg)
{
	struct job *j = arg;
	struct ndz_mserve *s = j->s;

	ndz_mconn_serve(&s->conn, j->fd, j->addr);
	close(j->fd);
	ndz_mlock_take(s->lock);
	s->nthreads--;
	ndz_mlock_give(s->lock);
	free(j);
	return NULL;
}

/* Under the lock: a new TCP connection gets a thread, or a refusal at once. */
static void accept_upload(struct ndz_mserve *s)
{
	struct sockaddr_in from;
	socklen_t fl = sizeof(from);
	int fd = accept4(s->tfd, (struct sockaddr *)&from, &fl, SOCK_CLOEXEC), rc;
	struct ndz_error e = { 0 };
	struct job *j = NULL;
	pthread_attr_t at;
	pthread_t t;
	sigset_t all, old;

	if (fd < 0)
		return;
	rc = ndz_master_accept(s->ms, from.sin_addr.s_addr, s->nthreads, ndz_now_ns(), &e);
	if (rc == 0 && !(j = malloc(sizeof(*j)))) {
		ndz_master_release(s->ms, from.sin_addr.s_addr);
		rc = ndz_error_set(&e, NDZ_ECONNS, 0, "out of memory");
	}
	if (rc != 0)
		s->o.refused(rc == NDZ_ERATE ? "rate limit" : rc == NDZ_EDENIED ? "access denied" :
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
	*j = (struct job){ s, fd, from.sin_addr.s_addr };
	/* signals are the main thread's */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &at, upload_thread, j);
	pthread_attr_destroy(&at);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		SAY(s, 0, "pthread_create: %s", strerror(rc));
		ndz_master_release(s->ms, from.sin_addr.s_addr);
		close(fd);
		free(j);
		return;
	}
	s->nthreads++;
}

/* The HTTP status's "log" section: the ring's lines. */
static size_t log_json(void *ctx, char *buf, size_t cap)
{
	(void)ctx;
	return ring ? ndz_logring_json(ring, buf, cap) : 0;
}

/* The HTTP status's "site" section (under the lock): a site master's counters
   (doc/SITES.md); none at a master without a parent or store. */
static size_t site_json(void *ctx, char *buf, size_t cap)
{
	struct ndz_mserve *s = ctx;
	const struct ndz_mconf *c = ndz_master_conf(s->ms);

	return s->site && (c->parent || c->store) ? ndz_site_status_json(s->site, buf, cap) : 0;
}

/* The HTTP endpoint's extensions: the lab's, the log tail, the site's counters. */
static const struct ndz_http_ext *log_ext(struct ndz_mserve *s)
{
	memcpy(s->ext, ndz_labsrv_http(s->lab), NDZ_LABSRV_HTTP_EXTS * sizeof(s->ext[0]));
	s->ext[NDZ_LABSRV_HTTP_EXTS] = (struct ndz_http_ext){ .name = "log", .ctx = s,
							      .json = log_json };
	s->ext[NDZ_LABSRV_HTTP_EXTS + 1] = (struct ndz_http_ext){ .name = "site", .ctx = s,
								  .json = site_json };
	return s->ext;
}

int ndz_mserve_open(struct ndz_mconf *conf, const struct ndz_mserve_opts *o,
		    struct ndz_mserve **out, struct ndz_error *e)
{
	struct ndz_mserve *s = calloc(1, sizeof(*s));
	int rc;

	*out = NULL;
	if (!s) {
		ndz_mconf_free(conf);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "master: %s", ndz_strerror(NDZ_ENOMEM));
	}
	s->o = *o;
	s->conf = conf;
	if (!ring && ndz_logring_new(&ring, NULL) != 0)
		ring = NULL;                 /* no memory: no log tail, the rest as ever */
	outer_refused = o->refused;
	s->o.refused = ring_refused;
	s->fd = s->tfd = -1;
	if ((rc = ndz_mlock_create(&s->lock, e)) != 0)
		goto fail;
	if (mkdir(o->run_dir, 0755) != 0 && errno != EEXIST) {
		int err = errno;

		rc = ndz_error_set(e, NDZ_EIO, 0, "run directory %s: %s%s", o->run_dir,
				   strerror(err), err == EACCES || err == EROFS ? " (not ours to write: give one "
				   "that is with -r DIR, or run the master as its service: "
				   "systemctl start mfrisbeed)" : "");
		goto fail;
	}
	if ((size_t)snprintf(s->state_path, sizeof(s->state_path), "%s/sessions", o->run_dir) >=
	    sizeof(s->state_path)) {
		rc = ndz_error_set(e, NDZ_ERANGE, 0, "%s: path too long", o->run_dir);
		goto fail;
	}
	if ((rc = ndz_mnet_listen(o->listen, &s->fd, &s->tfd, e)) != 0 ||
	    (rc = ndz_master_create(s->conf, &s->ms, e)) != 0 ||
	    (rc = ndz_labsrv_open(s->conf, o->run_dir, &(struct ndz_labsrv_hooks){ s, status_json,
				  tell, s->lock, s->ms, reload, s->o.refused,
				  site_list, site_task, site_changed }, &s->lab, e)) != 0)
		goto fail;
	ndz_labsrv_set_ctl(s->lab, s->fd); /* the boot scripts' ndz.master (issue 24, PXE) */
	s->n = ndz_master_counters(s->ms);
	s->conn = (struct ndz_mconn){ s->lock, s->ms, s->tmp, DRAIN_S, s, status_json, reload,
				      tell, s->o.refused, site_serve, site_stored };
	if ((rc = ndz_site_create(&(struct ndz_site_hooks){ s->lock, s->ms, s, reload, tell,
							     site_drop, site_nodes, site_apply },
				  &s->site,
				  e)) != 0)
		goto fail;
	if ((rc = ndz_http_start(s->conf->http, s->conf->nhttp, &(struct ndz_http_hooks){ s->lock,
				 s->ms, s, session_live, reload, log_ext(s),
				 NDZ_LABSRV_HTTP_EXTS + 2, s->o.refused }, &s->http, e)) != 0)
		goto fail;
	ndz_updir_clean(s->conf->upload_dir, said_stale, s);
	if (!s->o.server)
		s->o.server = ndz_mnet_source(o->iface, s->conf->pool_base, s->conf->port_lo);
	ndz_master_set_server(s->ms, s->o.server);
	ndz_master_set_hold_ask(s->ms, 1);
	adopt_state(s);
	SAY(s, 1, "listening on %s, %zu images, sessions from %s", o->listen, s->conf->nimages,
	    ndz_net_ntoa(s->o.server, (char[16]){ 0 }));
	*out = s;
	return 0;
fail:
	ndz_site_free(s->site);
	ndz_labsrv_free(s->lab);
	ndz_master_free(s->ms);
	if (s->fd >= 0)
		close(s->fd);
	if (s->tfd >= 0)
		close(s->tfd);
	ndz_mconf_free(s->conf);
	ndz_mlock_free(s->lock);
	free(s);
	return rc;
}

void ndz_mserve_run(struct ndz_mserve *s, volatile sig_atomic_t *stop,
		    volatile sig_atomic_t *hup)
{
	while (!*stop) {
		struct pollfd p[2 + NDZ_LABSRV_FDS] = { { .fd = s->fd, .events = POLLIN },
							{ .fd = s->tfd, .events = POLLIN } };
		uint8_t buf[NDZ_CTL_LAB_MAX + 1];
		struct ndz_error e = { 0 };

		ndz_mlock_take(s->lock);
		if (*hup) {
			*hup = 0;
			reload(s, &e);
		}
		reap(s);
		ndz_labsrv_prepare(s->lab, ndz_now_ms(), p + 2);
		ndz_mlock_give(s->lock);
		if (s->o.tick)
			s->o.tick(s->o.ctx);   /* "N more refused" once a flood's second is over */
		if (s->http && ndz_now_ms() >= s->noted_ms + NOTE_MS) {
			s->noted_ms = ndz_now_ms();
			ndz_http_note(s->http);   /* the bytes sent per image, between scrapes */
		}
		if (poll(p, 2 + NDZ_LABSRV_FDS, 200) <= 0)
			continue;
		ndz_mlock_take(s->lock);
		if (p[1].revents & POLLIN)
			accept_upload(s);
		ndz_labsrv_serve(s->lab, p + 2, ndz_now_ms());
		/* the UDP port's one dispatcher (by the header's type: ndz_ctl_is_lab): the
		   lab's datagrams, else the master's requests; a bounded batch, then the
		   signals and the reaping again */
		for (int k = 0; k < 256 && (p[0].revents & POLLIN); k++) {
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			ssize_t n = recvfrom(s->fd, buf, sizeof(buf), MSG_DONTWAIT,
					     (struct sockaddr *)&from, &fl);

			if (n < 0)
				break;
			if (ndz_ctl_is_lab(buf, (size_t)n))
				ndz_labsrv_udp(s->lab, s->fd, buf, (size_t)n, &from, ndz_now_ms());
			else
				handle(s, buf, (size_t)n, &from);
		}
		ndz_mlock_give(s->lock);
	}
}

void ndz_mserve_end(struct ndz_mserve *s)
{
	/* uploads still running leave nothing behind; their uploaders see the end */
	ndz_http_stop(s->http);
	ndz_site_free(s->site);        /* its fetches stop between requests; files stay */
	s->site = NULL;
	ndz_mlock_take(s->lock);
	for (size_t i = 0; i < NDZ_MASTER_UPLOADS; i++)
		if (s->tmp[i][0])
			unlink(s->tmp[i]);
	SAY(s, 1, "stopping; %zu sessions keep running", ndz_master_live(s->ms));
	close(s->fd);
	close(s->tfd);
	ndz_labsrv_free(s->lab);
	s->lab = NULL;
	/* still locked: upload threads stop where they are when the process exits */
}
