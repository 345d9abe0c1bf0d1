/*
 * The image master's service (doc/PROTOCOL.md): the one owner of the daemon's lock,
 * threads and sockets. It serves every door of the master: the UDP control port
 * (GET, and the lab's node datagrams: one dispatcher, lib/mserve/labsrv's first),
 * TCP on the same port (uploads and STATUS, a thread per connection:
 * lib/mserve/mconn), the lab's admin sockets (lib/mserve/labsrv), the HTTP endpoint
 * (lib/mserve/http), and the sessions' control sockets (lib/mserve/session: one
 * frisbeed per image, started, held, told its rate, asked its statistics). The
 * decisions are lib/master's.
 *
 * One lock guards the configuration and the master object (sessions, uploads,
 * admissions) and the lab. Nothing waits on a socket while holding it: what a
 * question to a frisbeed needs is copied under the lock, the lock is released for
 * the question, and the answer is taken back under it after checking that the
 * session is still the one asked.
 */
#ifndef NDZ_MSERVE_H
#define NDZ_MSERVE_H

#include <signal.h>
#include <stdint.h>

#include "master/mconf.h"
#include "core/err.h"

struct ndz_mserve;

/* How the service runs, and what it tells the program. */
struct ndz_mserve_opts {
	const char *conf_path;         /* reread on a reload */
	const char *listen;            /* ADDR[:PORT]: UDP, and TCP on the same port */
	const char *run_dir;           /* the sessions' control sockets and the state file */
	const char *frisbeed;          /* the program the sessions run */
	const char *iface;             /* frisbeed -i; NULL: by route */
	uint32_t server;               /* the sessions' address told to clients; 0: found */
	unsigned idle_override;        /* the sessions' idle timeout, s; 0: the configuration's */
	int ttl, loop;                 /* frisbeed -t, -L */
	int log;                       /* frisbeed's log mode (lib/cli: CLI_LOG_*) */
	unsigned lost_s;               /* frisbeed --lost-timeout; 0: its own */
	int verbose;                   /* what say is called with: up to this level */
	void *ctx;                     /* for the hooks */
	/* tell people: level -1 a warning, 0 an error, 1 what happens (-v), 2 more (-vv) */
	void (*say)(void *ctx, int level, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	/* a request refused by rule (a short name) from addr; lib/cli's cli_refusal fits */
	void (*refused)(const char *rule, const char *addr, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	/* each round of the loop, about five times a second (may be NULL) */
	void (*tick)(void *ctx);
};

/*
 * ndz_mserve_open - listen (o->listen), make the run directory, adopt the sessions
 * its state file lists, open the lab and the HTTP endpoint, clean the upload
 * directory. conf is taken (freed with the service, or at once on failure); o is
 * copied, its strings borrowed. 0 with *out, or a negative code with e saying why.
 */
int ndz_mserve_open(struct ndz_mconf *conf, const struct ndz_mserve_opts *o,
		    struct ndz_mserve **out, struct ndz_error *e);

/*
 * ndz_mserve_run - serve until *stop is set (a signal); *hup set means reread the
 * configuration (it is cleared).
 */
void ndz_mserve_run(struct ndz_mserve *s, volatile sig_atomic_t *stop,
		    volatile sig_atomic_t *hup);

/*
 * ndz_mserve_end - stop serving before the process exits: the HTTP endpoint
 * stopped, the uploads' temporary files removed, the sockets closed. The sessions
 * keep running. Upload threads still running are left where they are (the lock
 * stays taken): call it only to exit.
 */
void ndz_mserve_end(struct ndz_mserve *s);

/*
 * ndz_mserve_tell_skipped - through say, once each: the files of c's image
 * directories that are no image name and were not already skipped in old (may
 * be NULL).
 */
void ndz_mserve_tell_skipped(const struct ndz_mconf *old, const struct ndz_mconf *c,
			     void (*say)(void *ctx, int level, const char *fmt, ...), void *ctx);

#endif
