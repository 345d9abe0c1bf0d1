/*
 * The master's sessions as processes: the image a session serves, its frisbeed
 * started as a process of its own session (so that it outlives the master), and
 * the questions the master asks it on its control socket (lib/ctl/sessctl).
 */
#ifndef NDZ_SESSION_H
#define NDZ_SESSION_H

#include <stdint.h>
#include <sys/types.h>

#include "master/master.h"
#include "core/err.h"

#define NDZ_SESSION_ASK_MS 1000        /* a session's control socket answers within this */
#define NDZ_SESSION_HOLD_MS 300        /* a HOLD is answered within this, or taken as held */
#define NDZ_SESSION_HOLD_WAIT_MS 1000  /* an ending or unheard frisbeed is watched this long */

/* How to start a session's frisbeed (ndz_session_start). */
struct ndz_session_opts {
	const char *frisbeed;          /* the program */
	const char *run_dir;           /* its control socket goes here (ndz_sessctl_path) */
	const char *iface;             /* -i; NULL: by route */
	unsigned idle_s;               /* -T */
	int ttl, loop, quiet;          /* -t, -L, -q */
	int log;                       /* 1: --log-time, 2: --syslog (cli.h's CLI_LOG_*) */
	unsigned lost_s;               /* --lost-timeout; 0: frisbeed's default */
	int growing;                   /* --growing: the image is still arriving (a site's fetch) */
};

/*
 * ndz_session_start - run frisbeed for s (its group, port, rate) serving path, with
 * its control socket in o->run_dir, as a child in a new session (setsid), stdin
 * from /dev/null, no signal blocked. Returns 0 with *pid once the program runs (an
 * exec failure comes back through a close-on-exec pipe and the child is reaped),
 * or NDZ_EIO / NDZ_ERANGE with e saying why ("cannot run PATH: ...").
 */
int ndz_session_start(const struct ndz_session_opts *o, const struct ndz_master_session *s,
		      const char *path, pid_t *pid, struct ndz_error *e);

/*
 * ndz_session_alive - 1 when s's frisbeed answers on its control socket under
 * run_dir as s->pid serving s->uuid, else 0 (gone, or another process).
 */
int ndz_session_alive(const char *run_dir, const struct ndz_master_session *s);

/*
 * ndz_session_gone - 1 when s's frisbeed is surely gone: nothing listens on its
 * control socket, or another process (a reused pid) or another image answers;
 * 0 while it answers as itself or does not answer in time (busy: not gone).
 */
int ndz_session_gone(const char *run_dir, const struct ndz_master_session *s);

/*
 * ndz_session_hold - ask s's frisbeed to hold for a client just sent to it (HOLD on
 * its control socket, NDZ_SESSION_HOLD_MS): NDZ_MASTER_HELD when it holds, does not
 * answer in time (busy: it is not idle) or does not know HOLD (an older frisbeed);
 * NDZ_MASTER_GONE when its process has exited (it answered that it is ending, or
 * nothing listens on its socket: a frisbeed stopping or still starting is watched
 * up to NDZ_SESSION_HOLD_WAIT_MS, polling); NDZ_MASTER_ENDING when it said it is
 * ending and has not exited by then. The process is looked at without reaping it
 * (a child's exit status stays for the caller's waitpid).
 */
int ndz_session_hold(const char *run_dir, const struct ndz_master_session *s);

/* ndz_session_live - s's own statistics (receivers, bytes sent), zeros when it does not answer. */
void ndz_session_live(const char *run_dir, const struct ndz_master_session *s,
		      struct ndz_master_live *out);

/*
 * ndz_session_rates - tell each session whose share of the total rate changed
 * (ndz_master_rates) its new rate, and record those that took it
 * (ndz_master_set_rate); one not yet listening is asked again next time. told
 * (may be NULL) is called with ctx for each. Returns how many took a new rate.
 */
size_t ndz_session_rates(struct ndz_master *m, const char *run_dir,
			 void (*told)(void *ctx, const struct ndz_master_session *s), void *ctx);

/*
 * ndz_session_rate - tell s's frisbeed its new rate (bits/s). 0 when it took it,
 * else -1 (not listening yet, or it refused). Waits on the socket: no lock held.
 */
int ndz_session_rate(const char *run_dir, const struct ndz_master_session *s, uint64_t rate);

/*
 * The running sessions' own statistics, asked without the master's lock (a
 * frisbeed may take NDZ_SESSION_ASK_MS to answer): ndz_session_lives_list copies
 * the running sessions into *out (under the lock; 0, or NDZ_ENOMEM with *out NULL:
 * every session then shows zeros), ndz_session_lives_ask asks each through live (without the
 * lock), and ndz_session_lives_find is ndz_master_status_json's live over them
 * (under the lock again: a session that has gone or started meanwhile shows zeros).
 */
struct ndz_session_lives;
int ndz_session_lives_list(const struct ndz_master *m, struct ndz_session_lives **out,
			   struct ndz_error *e);
void ndz_session_lives_ask(struct ndz_session_lives *l,
			   void (*live)(void *ctx, const struct ndz_master_session *s,
					struct ndz_master_live *out), void *ctx);
void ndz_session_lives_find(void *l, const struct ndz_master_session *s,
			    struct ndz_master_live *out);
void ndz_session_lives_free(struct ndz_session_lives *l);

/* ndz_session_forget - remove s's control socket (its frisbeed has left). */
void ndz_session_forget(const char *run_dir, const struct ndz_master_session *s);

#endif
