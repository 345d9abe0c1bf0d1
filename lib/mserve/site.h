/*
 * Sites (doc/SITES.md): both ends of a site master's fetches from its parent.
 * The parent's end answers SITE requests (lib/ctl/sitecall) on its TCP control
 * port: an image's index, manifest, or chunks by number, to hosts its allow rules
 * let have the image. The site's end (a configuration with "parent") fetches an
 * image on the first GET for a name it does not hold: one thread per image, the
 * chunks into IMAGE.ndz.part in the site-cache directory, each checked before it
 * is kept (its data written before its header, so a header there means a whole,
 * checked chunk). Once the first and the last chunk are here the file is renamed
 * IMAGE.ndz beside a marker IMAGE.ndz.fetching and the configuration reread: a
 * session may start, its frisbeed waiting for chunks not yet written (--growing); a chunk that fails its check is fetched again (three times), a lost
 * link is retried with a growing pause, and the partial file is resumed, not
 * restarted (its chunks that pass the check are kept). A whole image is renamed
 * into place with its index and manifest, and the configuration reread: the cache
 * directory is an imagedir, and the next GET starts a session as on any master.
 * A new image's chunks that a complete cached image holds too (its content index
 * says so) are rebuilt from there and checked as fetched ones before any is fetched.
 * A GET for an image held whole whose last check is older than site-recheck starts
 * a recheck on a fetch thread (the GET is answered from the cache): upstream's index
 * against the held one; another index fetches the new version into IMAGE.ndz.part
 * (the old one among the images reused) and, once whole, puts it in place under the
 * lock, its old sessions retired (they finish; new GETs start new ones). An upstream
 * not reached leaves the held version, said once.
 * A site reports its lab's nodes to its parent on a change and every few seconds
 * (REPORT), and the
 * parent's nodes list shows them with a SITE column. The cache is bounded (site-cache-size): the least recently asked images not
 * pinned and not served go first (lib/master/sitecache decides).
 */
#ifndef NDZ_SITE_H
#define NDZ_SITE_H

#include <stddef.h>
#include <stdint.h>

#include "master/master.h"
#include "mlock.h"
#include "core/err.h"
#include "core/json.h"
#include "ctl/ctl.h"

struct ndz_site;

struct ndz_site_hooks {
	struct ndz_mlock *lock;        /* the master's: guards ms and its configuration */
	struct ndz_master *ms;
	void *ctx;
	/* under the lock: read the configuration anew */
	int (*reload)(void *ctx, struct ndz_error *e);
	/* tell people: level -1 a warning, 0 an error, 1 what happens, 2 more */
	void (*say)(void *ctx, int level, const char *fmt, ...)
		__attribute__((format(printf, 3, 4)));
	/* under the lock: image name's fetch failed after it was published: stop its
	 * sessions (their frisbeeds wait for chunks that will not come); may be NULL */
	void (*drop)(void *ctx, const char *name);
	/* under the lock: this master's lab nodes into j, a table (1) or JSON (0), for
	 * the reports a site sends its parent; may be NULL */
	void (*nodes)(void *ctx, int table, struct ndz_jbuf *j);
	/* under the lock: a task the parent sent (an admin request), done here; may be
	 * NULL */
	int (*apply)(void *ctx, const struct ndz_ctl_labreq *r, struct ndz_jbuf *j,
		     struct ndz_error *e);
};

/* ndz_site_create - the site's fetchers (none running). 0, or NDZ_ENOMEM with e. */
int ndz_site_create(const struct ndz_site_hooks *h, struct ndz_site **out,
		    struct ndz_error *e);

/* ndz_site_free - stop the fetchers (they stop between requests) and free; NULL is fine. */
void ndz_site_free(struct ndz_site *s);

/* Under the lock: what a GET for an image this master does not hold is answered. */
enum ndz_site_answer {
	NDZ_SITE_NOT_A_SITE = 0,       /* no parent: answer as before (UNKNOWN) */
	NDZ_SITE_FETCHING = 1,         /* on its way (a fetch started or running): WAIT */
	NDZ_SITE_FAILED = 2,           /* the last fetch failed; e says why (FAILED; the
					* parent has no such image: NDZ_ENOIMAGE, UNKNOWN) */
};

/*
 * ndz_site_want - under the lock: image name is asked for at this master, which
 * does not hold it. Starts its fetch unless one runs or failed less than a few
 * seconds ago (then e says why). Returns an enum ndz_site_answer.
 */
int ndz_site_want(struct ndz_site *s, const char *name, struct ndz_error *e);

/*
 * ndz_site_used - under the lock: image name (held) was just asked for: its LRU time;
 * an image still arriving whose fetch is not running (a restarted site master) has
 * its fetch resumed; an image held whole is rechecked upstream when its last check
 * is older than site-recheck (on a thread: nothing waits here).
 */
void ndz_site_used(struct ndz_site *s, const char *name);

/*
 * ndz_site_forward - under the lock: image name, uploaded to this site master and
 * stored at path (checked here), is sent on to the parent (ndz_upload_send; the
 * parent checks it again), on a thread of its own: a lost link is retried with a
 * growing pause, a refusal or rejection logged and counted. Nothing when this
 * master has no parent.
 */
void ndz_site_forward(struct ndz_site *s, const char *name, const char *path);

/*
 * ndz_site_changed - any thread: the lab changed (a node's task, state or result);
 * a site master sends its report to the parent at once (within a tenth of a second
 * of the last one), not only every few seconds. Nothing without a parent.
 */
void ndz_site_changed(struct ndz_site *s);

/*
 * ndz_site_partial - 1 when the image file at path is still arriving (a site's fetch
 * published it once its first and last chunks were here: PATH.fetching exists), so
 * that its sessions run frisbeed --growing; else 0.
 */
int ndz_site_partial(const char *path);

/*
 * ndz_site_status_json - the site's counters as a JSON object into buf (cap bytes):
 * {"fetched_chunks","fetched_bytes","refused_chunks","bad_chunks","retries",
 * "fetches_done","evicted","forwarded","forward_failed","reused_chunks",
 * "reuse_refused","site_rechecks","site_updates","recheck_failed"}; its length (the
 * "site" section of the HTTP /status.json). Any thread.
 */
size_t ndz_site_status_json(struct ndz_site *s, char *buf, size_t cap);

/*
 * ndz_site_nodes - under the lock, at a parent: its sites' last reports added to the
 * nodes list in j (the parent's own, as ndz_labsrv_nodes wrote it): as a table, every
 * line after a SITE column ("-" for the parent's own nodes); as JSON, a "sites"
 * member [{"site","addr","age_s","lab"}]. Returns how many sites reported (0: j as
 * it was).
 */
size_t ndz_site_nodes(struct ndz_site *s, int table, struct ndz_jbuf *j);

/*
 * ndz_site_task - under the lock, at a parent: the reload, capture or cancel r names
 * a node or group of no node here; the site whose last report lists it (a node's
 * name or MAC, a group) gets r with its next report's answer, and does it. 0 with
 * what happened in j, or NDZ_ENOENT (no site lists it) / NDZ_EBUSY (that site has
 * too many tasks waiting) with e.
 */
int ndz_site_task(struct ndz_site *s, const struct ndz_ctl_labreq *r, struct ndz_jbuf *j,
		  struct ndz_error *e);

/*
 * ndz_site_serve - the parent's end: the SITE request in the len bytes of buf (the
 * connection's first message) from addr (network order), answered on fd; the
 * lock is taken to find the image. The connection stays the caller's.
 */
void ndz_site_serve(struct ndz_site *s, int fd, const uint8_t *buf, size_t len,
		    uint32_t addr);

#endif
