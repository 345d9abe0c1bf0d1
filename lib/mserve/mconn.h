/*
 * The master's TCP connections (doc/PROTOCOL.md, "Uploads"): one connection's
 * work, on a thread of the caller's, from its first message to its verdict:
 * STATUS, or an upload admitted by lib/master/master, checked chunk by chunk
 * (lib/master/upreceive) into a temporary file of the upload directory, synced and
 * renamed into place only whole and sound, with the content index made from it
 * beside it (IMAGE.index; none for an encrypted one), and reported stored once served.
 */
#ifndef NDZ_MCONN_H
#define NDZ_MCONN_H

#include <limits.h>
#include <stdint.h>

#include "master/master.h"
#include "mlock.h"
#include "core/err.h"

struct ndz_mconn {
	struct ndz_mlock *lock;        /* the master's (mlock.h): guards ms, its configuration and tmp */
	struct ndz_master *ms;
	char (*tmp)[PATH_MAX];         /* NDZ_MASTER_UPLOADS: each upload slot's temporary file */
	unsigned drain_s;              /* after a rejection, read on this long */
	void *ctx;                     /* for the hooks */
	/* without the lock (it asks the sessions, then takes the lock itself): the
	 * STATUS JSON into buf (cap bytes); its length */
	size_t (*status_json)(void *ctx, char *buf, size_t cap);
	/* under the lock: read the configuration anew; 0, or e says why not */
	int (*reload)(void *ctx, struct ndz_error *e);
	/* tell people: level 0 an error, 1 what happens (-v), 2 more (-vv) */
	void (*say)(void *ctx, int level, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	/* a refused request from addr by rule (a short name), always told (may be NULL:
	 * then said at level 1); lib/cli's cli_refusal fits */
	void (*refused)(const char *rule, const char *addr, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	/* without the lock: a SITE request (lib/ctl/sitecall), the len bytes of buf, from
	 * a site master at addr, answered on fd (lib/mserve/site); NULL: refused */
	void (*site)(void *ctx, int fd, const uint8_t *buf, size_t len, uint32_t addr);
	/* without the lock: image name was uploaded and stored as path, and is served
	 * (a site master sends it on to its parent: lib/mserve/site); may be NULL */
	void (*stored)(void *ctx, const char *name, const char *path);
};

/*
 * ndz_mconn_serve - serve the TCP connection fd from addr (network order), which
 * holds one of the places before the first message (ndz_master_accept): its first
 * message within request-timeout seconds, then STATUS (the same rules as by UDP)
 * or an upload to its verdict (a DONE reply with a message), or a refusal. The
 * place is given back when an upload slot is taken instead, else at the end (a
 * refused connection holds it while it drains). fd stays the caller's to close.
 */
void ndz_mconn_serve(const struct ndz_mconn *c, int fd, uint32_t addr);

#endif
