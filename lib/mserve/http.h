/*
 * The master's HTTP endpoint (doc/mfrisbeed.conf.5, "http-listen"): a live view
 * and an API over libmicrohttpd, on its own thread, bound to the addresses the
 * configuration names. Read-only by default: GET / (a status page whose script
 * fetches /status.json every 2 s), GET /status.json (the master's STATUS JSON,
 * ndz_master_status_json, with any extra sections), GET /metrics (Prometheus
 * text format 0.0.4: the master's counters, names prefixed ndz_). A POST needs
 * "Authorization: Bearer TOKEN" matching the token-file's contents
 * (compared in constant time); POST /reload-config rereads the configuration.
 * Other parts of the program add JSON sections, POST actions and GET paths (with
 * the connection's addresses: the PXE scripts of lib/master/pxe) through a table
 * of struct ndz_http_ext. The master's data is read under the caller's lock.
 */
#ifndef NDZ_HTTP_H
#define NDZ_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>

#include "master/master.h"
#include "master/mconf.h"
#include "mlock.h"
#include "core/err.h"

#define NDZ_HTTP_BODY_MAX 4096         /* a POST body longer than this is refused (413) */
#define NDZ_HTTP_CONN_MAX 256          /* connections at once, per address */
#define NDZ_HTTP_CONN_PER_IP 16        /* ... and per client address */
#define NDZ_HTTP_TIMEOUT_S 10          /* a connection quiet this long is closed */
#define NDZ_HTTP_CONN_MEM (32 * 1024)  /* memory per connection: a larger header gets 431 */

#define NDZ_HTTP_GET_MAX 16384       /* an extension's GET answer in memory, bytes */

/* The connection a GET came over. */
struct ndz_http_conn {
	struct sockaddr_in local;      /* the address and port it came to: this master as
					* the client reached it (getsockname) */
	struct sockaddr_in peer;       /* the client */
};

/*
 * An extension's answer to a GET (200): len bytes of body, or the open file fd
 * (its first size bytes, sent from the file as the client reads: never held in
 * memory; the endpoint closes fd, also when it cannot send it).
 */
struct ndz_http_reply {
	char *body;                    /* the endpoint's buffer ... */
	size_t cap;                    /* ... of NDZ_HTTP_GET_MAX bytes */
	size_t len;                    /* set by the extension */
	const char *type;              /* Content-Type (static); NULL: text/plain, utf-8 */
	int fd;                        /* -1, or a file to send instead of body */
	uint64_t size;
};

/*
 * An extra part of the endpoint: a section of /status.json named name (json set),
 * and/or an action POST /name (post set), and/or GET (and HEAD) of every path that
 * starts with prefix and is none of the endpoint's own (get set). All are called
 * under the lock.
 */
struct ndz_http_ext {
	const char *name;              /* a JSON key and a path: letters, digits, '-', '_' */
	void *ctx;
	/* the section's JSON value into buf (cap bytes); its length (0: left out) */
	size_t (*json)(void *ctx, char *buf, size_t cap);
	/*
	 * the action with the request's body (len bytes, NUL-terminated): 0 with a JSON
	 * answer in out (cap bytes, NUL-terminated; "" for {"ok": true}), or a negative
	 * code with e saying why (NDZ_EINVAL: 400, NDZ_ENOENT/NDZ_ENOIMAGE: 404, else 500)
	 */
	int (*post)(void *ctx, const char *body, size_t len, char *out, size_t cap,
		    struct ndz_error *e);
	const char *prefix;            /* of the paths get answers ("/pxe/") */
	/*
	 * the GET of path (decoded, without its query) over c: 0 with r filled, or a
	 * negative code with e saying why (NDZ_EINVAL: 400, NDZ_ENOENT: 404, else 500)
	 */
	int (*get)(void *ctx, const char *path, const struct ndz_http_conn *c,
		   struct ndz_http_reply *r, struct ndz_error *e);
};

struct ndz_http_hooks {
	struct ndz_mlock *lock;        /* the master's (mlock.h): guards ms and its configuration */
	struct ndz_master *ms;
	void *ctx;                     /* for live and reload */
	/* without the lock (it may wait on the session's socket): a session's own
	   statistics, asked of a copy of it (ndz_session_lives_ask) */
	void (*live)(void *ctx, const struct ndz_master_session *s, struct ndz_master_live *out);
	/* under the lock: read the configuration anew; 0, or e says why not */
	int (*reload)(void *ctx, struct ndz_error *e);
	const struct ndz_http_ext *ext; /* next entries, borrowed: extra sections, actions */
	size_t next;
	/* an action (POST) refused from addr by rule, always told (NULL: not told);
	 * lib/cli's cli_refusal fits */
	void (*refused)(const char *rule, const char *addr, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
};

struct ndz_http;

/*
 * ndz_http_start - listen on the n addresses at (port 0: any free port) and serve
 * on the endpoint's own threads, with the limits above. h is copied; what it points
 * to must outlive the endpoint. The admin token is read from the token-file
 * of the configuration in force at each POST (none: every POST is refused).
 * Returns 0 with *out (stop with ndz_http_stop; NULL when n is 0), or NDZ_ENET
 * with e naming the address that cannot be bound, NDZ_ENOMEM.
 */
int ndz_http_start(const struct ndz_mconf_listen *at, size_t n, const struct ndz_http_hooks *h,
		   struct ndz_http **out, struct ndz_error *e);

/* ndz_http_port - the port the i-th address listens on (0 when there is none). */
uint16_t ndz_http_port(const struct ndz_http *s, size_t i);

/* ndz_http_requests - the requests answered so far. */
uint64_t ndz_http_requests(const struct ndz_http *s);

/* ndz_http_stop - stop serving and free; accepts NULL. Call it without the lock held. */
void ndz_http_stop(struct ndz_http *s);

/*
 * ndz_http_metrics - the Prometheus text (format 0.0.4) of the master's counters and
 * sessions into buf (cap bytes, NUL-terminated), live asked per session (may be
 * NULL: zeros), plus http_requests. The caller holds the lock. Returns its length,
 * or NDZ_ERANGE with e set when it does not fit.
 */
int ndz_http_metrics(const struct ndz_master *m,
		     void (*live)(void *ctx, const struct ndz_master_session *s,
				  struct ndz_master_live *out),
		     void *ctx, uint64_t http_requests, char *buf, size_t cap,
		     struct ndz_error *e);

/*
 * ndz_http_token_ok - 1 when the header value auth ("Bearer TOKEN", may be NULL) names
 * the admin token in the file at path (as ndz_ctl_read_token reads it; may be NULL:
 * no token), compared in constant time; else 0. A file that holds no valid token
 * matches nothing.
 */
int ndz_http_token_ok(const char *path, const char *auth);

#endif
