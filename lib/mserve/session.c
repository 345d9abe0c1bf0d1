/* The master's sessions as processes: start, and the questions asked of them. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "session.h"
#include "ctl/sessctl.h"
#include "core/clock.h"
#include "core/image.h"
#include "core/io.h"
#include "core/json.h"
#include "core/pool.h"

#define LIVES_ASKERS 16                /* sessions asked for their statistics at once */

int ndz_session_start(const struct ndz_session_opts *o, const struct ndz_master_session *s,
		      const char *path, pid_t *pid, struct ndz_error *e)
{
	char grp[INET_ADDRSTRLEN], port[8], rate[24], idle[16], ttl[8], ctl[PATH_MAX], lost[16];
	const char *argv[24];
	int argc = 0, pfd[2], err = 0, rc;
	pid_t p;

	if ((rc = ndz_sessctl_path(o->run_dir, s->group, s->port, ctl, sizeof(ctl), e)) < 0)
		return rc;
	inet_ntop(AF_INET, &s->group, grp, sizeof(grp));
	snprintf(port, sizeof(port), "%u", s->port);
	snprintf(rate, sizeof(rate), "%llu", (unsigned long long)s->rate);
	snprintf(idle, sizeof(idle), "%u", o->idle_s);
	snprintf(ttl, sizeof(ttl), "%d", o->ttl);
	argv[argc++] = o->frisbeed;
	argv[argc++] = "-m"; argv[argc++] = grp;
	argv[argc++] = "-p"; argv[argc++] = port;
	argv[argc++] = "-W"; argv[argc++] = rate;
	argv[argc++] = "-T"; argv[argc++] = idle;
	argv[argc++] = "-t"; argv[argc++] = ttl;
	argv[argc++] = "--control"; argv[argc++] = ctl;
	if (o->iface) {
		argv[argc++] = "-i";
		argv[argc++] = o->iface;
	}
	if (o->loop)
		argv[argc++] = "-L";
	if (o->quiet)
		argv[argc++] = "-q";
	if (o->log)
		argv[argc++] = o->log == 2 ? "--syslog" : "--log-time";
	if (o->lost_s) {
		snprintf(lost, sizeof(lost), "%u", o->lost_s);
		argv[argc++] = "--lost-timeout";
		argv[argc++] = lost;
	}
	if (o->growing)
		argv[argc++] = "--growing";
	argv[argc++] = "--";
	argv[argc++] = path;
	argv[argc] = NULL;

	if (pipe2(pfd, O_CLOEXEC) != 0)
		return ndz_error_set(e, NDZ_EIO, errno, "pipe");
	p = fork();
	if (p == 0) {
		sigset_t none;
		int fd = open("/dev/null", O_RDONLY);

		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		setsid();
		if (fd > 0) {
			dup2(fd, 0);
			close(fd);
		}
		execv(argv[0], (char *const *)argv);
		err = errno;
		if (write(pfd[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(127);
	}
	close(pfd[1]);
	if (p < 0) {
		close(pfd[0]);
		return ndz_error_set(e, NDZ_EIO, errno, "fork");
	}
	while (read(pfd[0], &err, sizeof(err)) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	if (err) {
		waitpid(p, NULL, 0);
		return ndz_error_set(e, NDZ_EIO, err, "cannot run %s", argv[0]);
	}
	*pid = p;
	return 0;
}

/* The session's control socket; "" when its name does not fit. */
static void sock_path(const char *run_dir, const struct ndz_master_session *s, char *buf)
{
	if (ndz_sessctl_path(run_dir, s->group, s->port, buf, PATH_MAX, NULL) != 0)
		buf[0] = 0;
}

/* 1: s's frisbeed answers as itself; 0: nobody listens, or another answers; -1: no answer. */
static int identify(const char *run_dir, const struct ndz_master_session *s)
{
	struct ndz_sessctl_identity who;
	char path[PATH_MAX];
	int rc;

	sock_path(run_dir, s, path);
	if (!path[0])
		return 0;
	rc = ndz_sessctl_identify(path, NDZ_SESSION_ASK_MS, &who, NULL);
	if (rc == NDZ_ENOENT)
		return 0;
	if (rc < 0)
		return -1;
	return who.pid == s->pid && memcmp(who.uuid, s->uuid, 16) == 0;
}

int ndz_session_alive(const char *run_dir, const struct ndz_master_session *s)
{
	return identify(run_dir, s) == 1;
}

int ndz_session_gone(const char *run_dir, const struct ndz_master_session *s)
{
	return identify(run_dir, s) == 0;
}

/* 1 when pid has exited: a child not yet reaped (left so), or another process gone. */
static int exited(pid_t pid)
{
	siginfo_t si;

	memset(&si, 0, sizeof(si));
	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0)
		return si.si_pid == pid;
	if (errno != ECHILD)
		return 0;
	return kill(pid, 0) != 0 && errno == ESRCH;
}

int ndz_session_hold(const char *run_dir, const struct ndz_master_session *s)
{
	uint64_t end = ndz_now_ms() + NDZ_SESSION_HOLD_WAIT_MS;
	char path[PATH_MAX];
	int said_no = 0, rc;

	sock_path(run_dir, s, path);
	if (!path[0] || s->pid <= 0)
		return NDZ_MASTER_HELD;
	for (;;) {
		rc = said_no ? 0 : ndz_sessctl_hold(path, NDZ_SESSION_HOLD_MS, NULL);
		/* held, busy, or an older frisbeed: as before HOLD, it is answered with */
		if (rc == 1 || (rc < 0 && rc != NDZ_ENOENT && rc != NDZ_ENET))
			return NDZ_MASTER_HELD;
		said_no |= rc == 0;
		if (exited(s->pid))
			return NDZ_MASTER_GONE;
		if (ndz_now_ms() >= end)
			return said_no ? NDZ_MASTER_ENDING : NDZ_MASTER_HELD;
		usleep(20000);
	}
}

/*
 * What a frisbeed's STATUS tells of its clients (its fields, decoded by lib/ctl/sessctl):
 * the counts, receivers the active ones, and the entries as JSON, whole ones as fit.
 */
static void live_states(const struct ndz_sessctl_status *st, struct ndz_master_live *out)
{
	struct ndz_jbuf j;

	if (!st->states)
		return;                 /* a frisbeed before them: receivers stays "seen" */
	out->active = st->active;
	out->done = st->done;
	out->failed = st->failed;
	out->lost = st->lost;
	out->receivers = st->active;
	out->states = 1;
	ndz_jbuf_init(&j, out->clients, sizeof(out->clients));
	for (size_t i = 0; i < st->nclient; i++) {
		size_t at = j.len;

		ndz_jbuf_printf(&j, "%s", i ? ", " : "");
		ndz_sessctl_client_json(&st->client[i], &j);
		if (j.over) {
			out->clients[at] = 0;
			break;
		}
	}
}

void ndz_session_live(const char *run_dir, const struct ndz_master_session *s,
		      struct ndz_master_live *out)
{
	struct ndz_sessctl_status *st = malloc(sizeof(*st));
	char path[PATH_MAX];

	memset(out, 0, sizeof(*out));
	sock_path(run_dir, s, path);
	if (st && path[0] && ndz_sessctl_status(path, NDZ_SESSION_ASK_MS, st, NULL) == 0) {
		out->receivers = st->clients;
		out->bytes_sent = st->bytes_sent;
		live_states(st, out);
	}
	free(st);
}

int ndz_session_rate(const char *run_dir, const struct ndz_master_session *s, uint64_t rate)
{
	char path[PATH_MAX];

	sock_path(run_dir, s, path);
	return path[0] && ndz_sessctl_rate(path, rate, NDZ_SESSION_ASK_MS, NULL) == 0 ? 0 : -1;
}

size_t ndz_session_rates(struct ndz_master *m, const char *run_dir,
			 void (*told)(void *ctx, const struct ndz_master_session *s), void *ctx)
{
	struct ndz_master_rate r[NDZ_MASTER_SESSIONS];
	size_t k = ndz_master_rates(m, r, NDZ_MASTER_SESSIONS), n = 0;

	for (size_t i = 0; i < k; i++) {
		const struct ndz_master_session *s = ndz_master_session(m, (size_t)r[i].slot);

		if (ndz_session_rate(run_dir, s, r[i].rate) != 0)
			continue;
		ndz_master_set_rate(m, r[i].slot, r[i].rate);
		n++;
		if (told)
			told(ctx, s);
	}
	return n;
}

void ndz_session_forget(const char *run_dir, const struct ndz_master_session *s)
{
	char path[PATH_MAX];

	sock_path(run_dir, s, path);
	if (path[0])
		unlink(path);
}

struct ndz_session_lives {
	size_t n;
	struct ndz_master_session *s;  /* copies, taken under the lock */
	struct ndz_master_live *lv;    /* their answers */
};

int ndz_session_lives_list(const struct ndz_master *m, struct ndz_session_lives **out,
			   struct ndz_error *e)
{
	size_t n = ndz_master_live(m), k = 0;
	struct ndz_session_lives *l = calloc(1, sizeof(*l));

	*out = NULL;
	if (!l || !(l->s = calloc(n ? n : 1, sizeof(*l->s))) ||
	    !(l->lv = calloc(n ? n : 1, sizeof(*l->lv)))) {
		ndz_session_lives_free(l);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "sessions' statistics: %s",
				     ndz_strerror(NDZ_ENOMEM));
	}
	for (size_t i = 0; i < NDZ_MASTER_SESSIONS && k < n; i++) {
		const struct ndz_master_session *s = ndz_master_session(m, i);

		if (s->pid > 0)
			l->s[k++] = *s;
	}
	l->n = k;
	*out = l;
	return 0;
}

/* ndz_session_lives_ask's questions: each job asks the next session not yet asked. */
struct asker {
	struct ndz_session_lives *l;
	void (*live)(void *ctx, const struct ndz_master_session *s, struct ndz_master_live *out);
	void *ctx;
	atomic_size_t next;
};

static void ask_one(void *arg)
{
	struct asker *a = arg;
	size_t i = atomic_fetch_add(&a->next, 1);

	if (i < a->l->n)
		a->live(a->ctx, &a->l->s[i], &a->l->lv[i]);
}

void ndz_session_lives_ask(struct ndz_session_lives *l,
			   void (*live)(void *ctx, const struct ndz_master_session *s,
					struct ndz_master_live *out), void *ctx)
{
	struct asker a = { l, live, ctx, 0 };
	struct ndz_pool *p = NULL;
	sigset_t all, old;

	if (!l || !live)
		return;
	/*
	 * A few at once, on lib/core's pool: slow sessions cost about one question's
	 * time, not one each. Its threads take no signals (they are the daemon's). A
	 * pool that cannot be made leaves the questions to this thread, one by one.
	 */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	if (ndz_pool_create(l->n > 1 ? (unsigned)(l->n < LIVES_ASKERS ? l->n : LIVES_ASKERS) : 0,
			    (unsigned)l->n, &p, NULL) != 0)
		p = NULL;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	for (size_t i = 0; i < l->n; i++) {
		if (p)
			ndz_pool_add(p, ask_one, &a);
		else
			ask_one(&a);
	}
	ndz_pool_free(p);              /* every question answered (or timed out) */
}

void ndz_session_lives_find(void *arg, const struct ndz_master_session *s,
			    struct ndz_master_live *out)
{
	const struct ndz_session_lives *l = arg;

	for (size_t i = 0; l && i < l->n; i++)
		if (l->s[i].pid == s->pid && l->s[i].group == s->group &&
		    l->s[i].port == s->port && l->s[i].started_ns == s->started_ns) {
			*out = l->lv[i];
			return;
		}
	memset(out, 0, sizeof(*out));
}

void ndz_session_lives_free(struct ndz_session_lives *l)
{
	if (!l)
		return;
	free(l->s);
	free(l->lv);
	free(l);
}
