/* Sites: the parent's answers to SITE requests, and a site's fetches of whole images. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "site.h"
#include "ctl/sitecall.h"
#include "ctl/sitesrc.h"
#include "ctl/upload.h"
#include "master/images.h"
#include "master/sitecache.h"
#include "sitestore.h"
#include "codec/seed.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/io.h"
#include "core/format.h"
#include "trust/index.h"
#include "trust/key.h"
#include "trust/manifest.h"
#include "trust/verify.h"

#define FETCHES 16                     /* images fetched at once, at most */
#define BATCH 2                        /* chunks asked for at once: a session waits for
					* at most these before the one it asks */
#define TRIES 3                        /* a chunk that fails its check is asked this often */
#define WAIT_S 10                      /* a fetch's wait for the parent, each step */
#define BACKOFF_MIN_MS 250             /* the pause after a lost link, doubling ... */
#define BACKOFF_MAX_MS 8000            /* ... up to this */
#define FAILED_S 10                    /* a failed fetch is told to GETs this long */

/* The site's counters; one list (the JSON of ndz_site_status_json). */
#define SITE_COUNTERS(X)                                                       \
	X(fetched_chunks) X(fetched_bytes) X(refused_chunks) X(bad_chunks)     \
	X(retries) X(fetches_done) X(evicted) X(forwarded) X(forward_failed)   \
	X(reused_chunks) X(reuse_refused) X(site_rechecks) X(site_updates)      \
	X(recheck_failed)

#define CHECKS 64                      /* cached images whose last recheck is kept */

/* When a cached image was last compared with upstream's (doc/SITES.md, "Updates"). */
struct check {
	char name[NDZ_CTL_NAME_MAX + 1];   /* "": free */
	uint64_t at_ns;
	char tag[200];                 /* from a store: its index object's "SIZE ETAG" when
					* the held index was fetched or found the same ("": not
					* known) */
};

struct fetch {
	char name[NDZ_CTL_NAME_MAX + 1];
	int state;                     /* enum below; under the lock */
	uint64_t failed_ns;            /* FAILED: when */
	char why[256];                 /* FAILED: the reason */
	int code;                      /* FAILED: its code */
	pthread_t th;
	int joinable;
	struct ndz_site *site;
};

enum { IDLE = 0, RUNNING, FAILED };

/* An upload on its way to the parent. */
struct forward {
	struct ndz_site *site;
	char name[NDZ_CTL_NAME_MAX + 1], path[PATH_MAX], parent[300];
	struct ndz_s3 *s3;             /* the object store it goes to, or NULL: the parent */
	pthread_t th;
	int joinable;
	atomic_int done;
};

#define SITES 32                       /* sites a parent lists, at most */
#define REPORT_GAP_MS 100              /* a site reports a change at most this often */

/* At a parent: a node of a site's report, as its JSON names it. */
struct sitenode {
	char name[NDZ_CTL_NAME_MAX + 1], mac[24], group[NDZ_CTL_NAME_MAX + 1];
};

/* At a parent: a site's last report. */
struct sitelab {
	uint32_t addr;                 /* 0: free */
	char name[NDZ_CTL_NAME_MAX + 1];
	char *table, *json;
	struct sitenode *nodes;        /* decoded from json */
	size_t nnodes;
	uint64_t heard_ms;
	uint8_t tasks[NDZ_SITE_TASKS_MAX];  /* admin requests for it, sent with the reply */
	size_t ntasks;                 /* bytes */
};

struct ndz_site {
	struct ndz_site_hooks h;
	struct sitelab sl[SITES];      /* under the lock */
	pthread_t rep;                 /* the reporter (a site) */
	int rep_joinable;
	struct fetch f[FETCHES];
	struct forward fw[FETCHES];
	atomic_int stop;
	atomic_int changed;            /* the lab changed since the last report */
	atomic_uint report_ms;         /* the heartbeat: site-report */
	struct check chk[CHECKS];      /* under the lock */
	atomic_int cut_said;           /* an unreachable upstream was logged (once) */
	atomic_int store_said;         /* a failing store left for the parent was logged (once) */
	char noident[300];             /* a parent that has no IDENT (an older master: its
					* rechecks ask for the index); under the lock */
#define X(n) atomic_uint_fast64_t n;
	SITE_COUNTERS(X)
#undef X
};

#define SAY(h, level, ...)                                                      \
	do {                                                                    \
		if ((h)->say)                                                   \
			(h)->say((h)->ctx, (level), __VA_ARGS__);               \
	} while (0)

static void pause_ms(struct ndz_site *s, unsigned ms);

/* A site: the tasks its parent sent (admin requests), done here. */
static void apply_tasks(struct ndz_site *s, const uint8_t *b, size_t n, char *buf, size_t cap)
{
	for (size_t off = 0; off < n;) {
		struct ndz_ctl_labreq r;
		struct ndz_error e = { 0 };
		struct ndz_jbuf j;
		int k = ndz_ctl_lab_need(b + off, n - off, 0, NULL);

		if (k <= 0 || (size_t)k > n - off || ndz_ctl_lab_decode(b + off, (size_t)k, &r,
									NULL) != 0 ||
		    r.type != NDZ_CTL_ADMIN) {
			SAY(&s->h, 0, "site: the parent's tasks: malformed, the rest dropped");
			return;
		}
		off += (size_t)k;
		ndz_jbuf_init(&j, buf, cap);
		ndz_mlock_take(s->h.lock);
		if (s->h.apply && s->h.apply(s->h.ctx, &r, &j, &e) == 0)
			SAY(&s->h, 1, "site: the parent's task for %s: %s", r.args[0], j.p);
		else
			SAY(&s->h, 0, "site: the parent's task for %s: %s", r.args[0],
			    s->h.apply ? ndz_error_msg(&e) : "not done here");
		ndz_mlock_give(s->h.lock);
	}
}

/* A site: its nodes to the parent every REPORT_MS, on a connection kept open. */
static void *report_thread(void *arg)
{
	struct ndz_site *s = arg;
	struct ndz_site_link l;
	char *tb = malloc(NDZ_CTL_TEXT_BIG), *js = malloc(NDZ_CTL_TEXT_BIG);
	uint32_t id = 0;
	unsigned backoff = 0;          /* after a failed report: its retry's pause */
	int said_big = 0;

	ndz_site_link_init(&l, "", WAIT_S);
	while (tb && js && !atomic_load(&s->stop)) {
		struct ndz_site_req r = { 0 };
		struct ndz_jbuf jt, jj;
		struct ndz_error e = { 0 };
		const struct ndz_mconf *c;
		uint8_t *body;
		size_t len;
		unsigned waited = 0, every = atomic_load(&s->report_ms);

		if (backoff && backoff < every)
			every = backoff;

		/* the heartbeat's time (site-report), or a change, not sooner than
		   REPORT_GAP_MS after the last report */
		while (!atomic_load(&s->stop) && waited < every &&
		       (waited < REPORT_GAP_MS || !atomic_load(&s->changed))) {
			nanosleep(&(struct timespec){ 0, 20 * 1000000L }, NULL);
			waited += 20;
		}
		atomic_store(&s->changed, 0);
		ndz_mlock_take(s->h.lock);
		c = ndz_master_conf(s->h.ms);
		atomic_store(&s->report_ms, c->site_report * 1000u);
		if (!c->parent || !s->h.nodes || atomic_load(&s->stop)) {
			ndz_mlock_give(s->h.lock);
			continue;
		}
		if (strcmp(l.spec, c->parent) != 0) {
			ndz_site_link_close(&l);
			ndz_site_link_init(&l, c->parent, WAIT_S);
		}
		snprintf(r.name, sizeof(r.name), "%s", c->site_name ? c->site_name : "site");
		ndz_jbuf_init(&jt, tb, NDZ_CTL_TEXT_BIG);
		ndz_jbuf_init(&jj, js, NDZ_CTL_TEXT_BIG);
		s->h.nodes(s->h.ctx, 1, &jt);
		s->h.nodes(s->h.ctx, 0, &jj);
		ndz_mlock_give(s->h.lock);
		if (jt.over || jj.over) {      /* cut JSON: the parent refuses it as malformed */
			if (!said_big)
				SAY(&s->h, 0, "site: the lab does not fit a report (%u bytes at most): "
				    "not reported", NDZ_CTL_TEXT_BIG);
			said_big = 1;
			continue;
		}
		said_big = 0;
		r.id = ++id;
		if (ndz_site_report_encode(jt.p, jt.len, jj.p, jj.len, &body, &len, &e) == 0) {
			uint8_t *tasks = NULL;
			size_t tl = 0;
			int had = l.fd >= 0, rc = ndz_site_report(&l, &r, body, len, &tasks, &tl, &e);

			/* the parent closes a connection idle for a while (a long heartbeat):
			   made anew at once; a parent away: tried again after a growing pause */
			if (rc != 0 && had && l.fd < 0) {
				ndz_error_clear(&e);
				r.id = ++id;
				rc = ndz_site_report(&l, &r, body, len, &tasks, &tl, &e);
			}
			if (rc != 0) {
				SAY(&s->h, 2, "site: report to the parent: %s", ndz_error_msg(&e));
				backoff = !backoff ? BACKOFF_MIN_MS : backoff * 2 > BACKOFF_MAX_MS ?
					  BACKOFF_MAX_MS : backoff * 2;
			} else {
				backoff = 0;
				if (tl)
					apply_tasks(s, tasks, tl, jt.p, NDZ_CTL_TEXT_BIG);
			}
			free(tasks);
			free(body);
		}
	}
	ndz_site_link_close(&l);
	free(tb);
	free(js);
	return NULL;
}

int ndz_site_create(const struct ndz_site_hooks *h, struct ndz_site **out, struct ndz_error *e)
{
	struct ndz_site *s = calloc(1, sizeof(*s));

	*out = NULL;
	if (!s)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "site: %s", ndz_strerror(NDZ_ENOMEM));
	s->h = *h;
	atomic_store(&s->report_ms, 2000);
	if (pthread_create(&s->rep, NULL, report_thread, s) == 0)
		s->rep_joinable = 1;
	*out = s;
	return 0;
}

void ndz_site_free(struct ndz_site *s)
{
	if (!s)
		return;
	atomic_store(&s->stop, 1);
	if (s->rep_joinable)
		pthread_join(s->rep, NULL);
	for (size_t i = 0; i < SITES; i++) {
		free(s->sl[i].table);
		free(s->sl[i].json);
		free(s->sl[i].nodes);
	}
	for (size_t i = 0; i < FETCHES; i++) {
		if (s->f[i].joinable)
			pthread_join(s->f[i].th, NULL);
		if (s->fw[i].joinable)
			pthread_join(s->fw[i].th, NULL);
	}
	free(s);
}

size_t ndz_site_status_json(struct ndz_site *s, char *buf, size_t cap)
{
	size_t n = 0;
	int k;

	if (!cap)
		return 0;
	buf[0] = 0;
	k = snprintf(buf, cap, "{");
#define X(f) if (k >= 0 && (n += (size_t)k) < cap)                                   \
		k = snprintf(buf + n, cap - n, "%s\"" #f "\": %llu", n > 1 ? ", " : "",     \
			     (unsigned long long)atomic_load(&s->f));
	SITE_COUNTERS(X)
#undef X
	if (k >= 0 && (n += (size_t)k) < cap)
		k = snprintf(buf + n, cap - n, "}");
	if (k >= 0)
		n += (size_t)k;
	return n < cap ? n : cap - 1;
}

/* ---- the parent's end ---- */

/* All of len bytes onto fd: 0 or -1. */
static int send_all(int fd, const void *p, size_t len)
{
	const uint8_t *b = p;

	while (len) {
		ssize_t n = send(fd, b, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		b += n;
		len -= (size_t)n;
	}
	return 0;
}

static void refuse(int fd, uint32_t id, uint16_t status)
{
	uint8_t rep[NDZ_SITE_REP_LEN];

	ndz_site_rep_encode(id, status, 0, rep);
	send_all(fd, rep, sizeof(rep));
}

/*
 * The bytes [off, off + len) of the file at path onto fd after the reply header: 0
 * when sent or refused (the connection goes on), -1 when the connection broke.
 */
static int send_file(int fd, uint32_t id, const char *path, uint64_t off, uint64_t len,
		     int whole, uint64_t *sent)
{
	uint8_t rep[NDZ_SITE_REP_LEN], *buf = malloc(NDZ_CHUNK_SIZE);
	int in = open(path, O_RDONLY | O_CLOEXEC), rc = -1;
	struct stat st;

	*sent = 0;
	if (in < 0 || fstat(in, &st) != 0 || !buf) {
		refuse(fd, id, in < 0 && errno == ENOENT ? NDZ_CTL_UNKNOWN : NDZ_CTL_FAILED);
		rc = 0;
		goto out;
	}
	if (whole) {
		len = (uint64_t)st.st_size;
		if (len > NDZ_SITE_BLOB_MAX) {
			refuse(fd, id, NDZ_CTL_FAILED);
			rc = 0;
			goto out;
		}
	} else if (off + len > (uint64_t)st.st_size) {
		refuse(fd, id, NDZ_CTL_MALFORMED);  /* chunks past the image's end */
		rc = 0;
		goto out;
	}
	ndz_site_rep_encode(id, NDZ_CTL_OK, len, rep);
	if (send_all(fd, rep, sizeof(rep)) != 0)
		goto out;
	*sent = len;
	while (len) {
		size_t want = len < NDZ_CHUNK_SIZE ? (size_t)len : NDZ_CHUNK_SIZE;
		ssize_t n = pread(in, buf, want, (off_t)off);

		if (n <= 0 || send_all(fd, buf, (size_t)n) != 0)
			goto out;           /* the site sees a short reply and asks again */
		off += (uint64_t)n;
		len -= (uint64_t)n;
	}
	rc = 0;
out:
	if (in >= 0)
		close(in);
	free(buf);
	return rc;
}

/*
 * The nodes of a site's lab JSON ({"nodes":[{"mac","name","group",...}],...}, as
 * ndz_lab_json writes it; other members ignored) into *out (malloc'ed) and *n: 0, or
 * -1 when it is not that.
 */
static int decode_lab(const char *json, size_t len, struct sitenode **out, size_t *n)
{
	const char *arr, *e;
	size_t cap = 0;

	*out = NULL;
	*n = 0;
	if (!ndz_json_valid(json, len) || !(arr = ndz_json_member(json, "nodes")) ||
	    *arr != '[')
		return -1;
	for (e = ndz_json_first(arr); e; e = ndz_json_after(e)) {
		struct sitenode *x;
		const char *v;

		if (*n == cap) {
			struct sitenode *t = realloc(*out, (cap = cap ? 2 * cap : 64) * sizeof(*t));

			if (!t)
				goto bad;
			*out = t;
		}
		x = &(*out)[*n];
		memset(x, 0, sizeof(*x));
		if (*e != '{' || !(v = ndz_json_member(e, "mac")) ||
		    !ndz_json_string(v, x->mac, sizeof(x->mac)))
			goto bad;              /* every node has its MAC */
		if ((v = ndz_json_member(e, "name")) && *v != 'n' &&
		    !ndz_json_string(v, x->name, sizeof(x->name)))
			goto bad;
		if ((v = ndz_json_member(e, "group")) && *v != 'n' &&
		    !ndz_json_string(v, x->group, sizeof(x->group)))
			goto bad;
		(*n)++;
	}
	return 0;
bad:
	free(*out);
	*out = NULL;
	*n = 0;
	return -1;
}

/* A site's report (r, its body next on fd): kept, answered. 0, or -1 (connection broken). */
static int take_report(struct ndz_site *s, int fd, const struct ndz_site_req *r,
		       uint32_t addr, const char *a)
{
	uint8_t *b = malloc(r->count), rep[NDZ_SITE_REP_LEN];
	const char *t, *j;
	size_t tl, jl, got = 0;
	struct sitelab *sl = NULL;
	struct sitenode *nodes = NULL;
	size_t nn = 0;
	int rc;

	while (b && got < r->count) {
		ssize_t n = recv(fd, b + got, r->count - got, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (!b || got < r->count) {
		free(b);
		return -1;
	}
	if (ndz_site_report_decode(b, got, &t, &tl, &j, &jl, NULL) != 0 ||
	    decode_lab(j, jl, &nodes, &nn) != 0) {
		free(b);
		SAY(&s->h, 1, "site %s: malformed report", a);
		refuse(fd, r->id, NDZ_CTL_MALFORMED);
		return -1;
	}
	ndz_mlock_take(s->h.lock);
	if (!ndz_mconf_allows_any(ndz_master_conf(s->h.ms), addr)) {
		ndz_mlock_give(s->h.lock);
		free(b);
		free(nodes);
		refuse(fd, r->id, NDZ_CTL_DENIED);
		return 0;
	}
	for (size_t i = 0; i < SITES; i++)   /* its place, a free one, or the oldest */
		if (s->sl[i].addr == addr)
			sl = &s->sl[i];
	for (size_t i = 0; !sl && i < SITES; i++)
		if (!s->sl[i].addr)
			sl = &s->sl[i];
	for (size_t i = 0; !sl && i < SITES; i++)
		if (i == 0 || s->sl[i].heard_ms < sl->heard_ms)
			sl = &s->sl[i];
	if (sl->addr != addr)
		sl->ntasks = 0;        /* another site's place */
	free(sl->table);
	free(sl->json);
	free(sl->nodes);
	sl->table = strndup(t, tl);
	sl->json = strndup(j, jl);
	sl->nodes = nodes;
	sl->nnodes = nn;
	sl->addr = addr;
	snprintf(sl->name, sizeof(sl->name), "%s", r->name);
	sl->heard_ms = ndz_now_ms();
	ndz_site_rep_encode(r->id, NDZ_CTL_OK, sl->ntasks, rep);
	rc = send_all(fd, rep, sizeof(rep));
	if (rc == 0 && sl->ntasks)
		rc = send_all(fd, sl->tasks, sl->ntasks);
	if (rc == 0 && sl->ntasks)
		SAY(&s->h, 1, "site %s (%s): its tasks sent", a, sl->name);
	if (rc == 0)
		sl->ntasks = 0;        /* sent: the site does them (a lost one: sent again) */
	ndz_mlock_give(s->h.lock);
	free(b);
	return rc;
}

/*
 * An image without its content index (an upload: only the image comes): the index
 * made from its chunks (imagekey index's ndz_index_build, unsigned) and kept at
 * file beside it, so that a site can fetch it as any other. 0, or the code with e.
 */
static int make_index(const char *path, const char *file, struct ndz_error *e)
{
	struct ndz_io *io = NULL;
	struct ndz_index ix = { 0 };
	uint8_t *b = NULL;
	size_t bl = 0;
	int rc;

	if ((rc = ndz_io_open_file(path, NDZ_IO_READ | NDZ_IO_SEQUENTIAL, &io, e)) == 0 &&
	    (rc = ndz_index_build(io, path, &ix, e)) == 0 &&
	    (rc = ndz_index_encode(&ix, NULL, &b, &bl, e)) == 0)
		rc = ndz_index_save(file, b, bl, e);
	ndz_io_close(io);
	ndz_index_release(&ix);
	free(b);
	return rc;
}

/*
 * An IDENT request for the image at path: its identity (lib/ctl/sitecall), its index
 * made first when it has none (as for an INDEX request). 0, or -1: the link failed.
 */
static int serve_ident(struct ndz_site *s, int fd, const struct ndz_site_req *r,
		       const char *path, const char *a)
{
	uint8_t rep[NDZ_SITE_REP_LEN + NDZ_SITE_IDENT_LEN];
	char ip[PATH_MAX], mp[PATH_MAX];
	struct ndz_site_ident id;
	struct ndz_error why = { 0 };
	int rc;

	if (ndz_images_companion(path, 1, ip, sizeof(ip), NULL) != 0 ||
	    ndz_images_companion(path, 0, mp, sizeof(mp), NULL) != 0) {
		refuse(fd, r->id, NDZ_CTL_FAILED);
		return 0;
	}
	if (access(ip, F_OK) != 0 && errno == ENOENT && access(path, F_OK) == 0) {
		if (make_index(path, ip, &why) != 0) {
			SAY(&s->h, 0, "site %s asks for %s's identity: no index, and none made: %s",
			    a, r->name, ndz_error_msg(&why));
			refuse(fd, r->id, NDZ_CTL_FAILED);
			return 0;
		}
		SAY(&s->h, 1, "site %s asks for %s's identity: its index made from the image (%s)",
		    a, r->name, ip);
	}
	if ((rc = ndz_site_ident_files(path, ip, mp, &id, &why)) != 0) {
		SAY(&s->h, rc == NDZ_ENOIMAGE ? 2 : 0, "site %s asks for %s's identity: %s", a,
		    r->name, ndz_error_msg(&why));
		refuse(fd, r->id, rc == NDZ_ENOIMAGE ? NDZ_CTL_UNKNOWN : NDZ_CTL_FAILED);
		return 0;
	}
	ndz_site_rep_encode(r->id, NDZ_CTL_OK, NDZ_SITE_IDENT_LEN, rep);
	ndz_site_ident_encode(&id, rep + NDZ_SITE_REP_LEN);
	if (send_all(fd, rep, sizeof(rep)) != 0)
		return -1;
	SAY(&s->h, 2, "site %s: %s identity: %d bytes served", a, r->name, NDZ_SITE_IDENT_LEN);
	return 0;
}

static int serve_one(struct ndz_site *s, int fd, const uint8_t *buf, size_t len,
		     uint32_t addr, const char *a)
{
	const struct ndz_site_hooks *h = &s->h;
	struct ndz_site_req r;
	const struct ndz_mconf_image *im;
	char path[PATH_MAX], file[PATH_MAX];
	uint64_t off = 0, n = 0;
	int ok, rc;

	if (ndz_site_req_decode(buf, len, &r, NULL) != 0) {
		SAY(h, 1, "site %s: malformed request", a);
		refuse(fd, r.id, NDZ_CTL_MALFORMED);
		return -1;
	}
	if (r.what == NDZ_SITE_REPORT)
		return take_report(s, fd, &r, addr, a);
	ndz_mlock_take(h->lock);
	im = ndz_mconf_find(ndz_master_conf(h->ms), r.name);
	ok = im && ndz_mconf_allows(im, addr);
	if (ok)
		snprintf(path, sizeof(path), "%s", im->path);
	ndz_mlock_give(h->lock);
	if (!ok) {
		SAY(h, 1, "site %s asks for %s: %s", a, r.name, im ? "access denied" :
		    "unknown image");
		refuse(fd, r.id, im ? NDZ_CTL_DENIED : NDZ_CTL_UNKNOWN);
		return 0;
	}
	if (r.what == NDZ_SITE_IDENT)
		return serve_ident(s, fd, &r, path, a);
	if (r.what == NDZ_SITE_CHUNKS_OF) {
		snprintf(file, sizeof(file), "%s", path);
		off = (uint64_t)r.first * NDZ_CHUNK_SIZE;
		n = (uint64_t)r.count * NDZ_CHUNK_SIZE;
	} else if (ndz_images_companion(path, r.what == NDZ_SITE_INDEX ? 1 : 0, file,
					sizeof(file), NULL) != 0) {
		refuse(fd, r.id, NDZ_CTL_FAILED);
		return 0;
	} else if (r.what == NDZ_SITE_INDEX && access(file, F_OK) != 0 && errno == ENOENT &&
		   access(path, F_OK) == 0) {
		struct ndz_error why = { 0 };

		if (make_index(path, file, &why) != 0) {
			SAY(h, 0, "site %s asks for %s's index: none, and none made: %s", a, r.name,
			    ndz_error_msg(&why));
			refuse(fd, r.id, NDZ_CTL_FAILED);
			return 0;
		}
		SAY(h, 1, "site %s asks for %s's index: made from the image (%s)", a, r.name, file);
	}
	rc = send_file(fd, r.id, file, off, n, r.what != NDZ_SITE_CHUNKS_OF, &n);
	if (rc == 0 && n && r.what == NDZ_SITE_CHUNKS_OF)
		SAY(h, 1, "site %s: %s chunks %u-%u: %llu bytes served", a, r.name, r.first,
		    r.first + r.count - 1, (unsigned long long)n);
	else if (rc == 0 && n)
		SAY(h, 2, "site %s: %s %s: %llu bytes served", a, r.name,
		    r.what == NDZ_SITE_INDEX ? "index" : "manifest", (unsigned long long)n);
	return rc;
}

#define SITE_QUIET_MS 30000            /* a site's connection idle this long is closed */

void ndz_site_serve(struct ndz_site *s, int fd, const uint8_t *buf, size_t len,
		    uint32_t addr)
{
	uint8_t next[NDZ_SITE_REQ_MAX];
	char a[INET_ADDRSTRLEN];
	int k;

	inet_ntop(AF_INET, &addr, a, sizeof(a));
	/* the site's requests, one after another, until it closes or goes quiet */
	if (serve_one(s, fd, buf, len, addr, a) != 0)
		return;
	while ((k = ndz_upload_read_msg(fd, next, sizeof(next), ndz_site_req_need,
					SITE_QUIET_MS, NULL)) > 0 &&
	       ndz_site_is_req(next, (size_t)k) &&
	       serve_one(s, fd, next, (size_t)k, addr, a) == 0)
		;
}

/* ---- the site's end ---- */

/* One image on its way: what a fetch thread holds. */
struct job {
	struct ndz_site *s;
	struct fetch *f;
	char parent[300], dir[PATH_MAX];
	char final[PATH_MAX], part[PATH_MAX];
	struct ndz_index ix;
	char key[PATH_MAX];            /* site-key: the public key, or "" */
	struct ndz_manifest m;         /* with a key: the checked manifest (m.hash) */
	uint8_t *ixbuf, *mbuf;         /* the index's and the manifest's bytes (mbuf: or NULL) */
	size_t ixlen, mlen;
	char mark[PATH_MAX];           /* final.fetching: published, still arriving */
	struct ndz_sitesrc src;        /* the parent or the object store (lib/ctl/sitesrc) */
	int published;                 /* part is final now */
	struct ndz_sitefetch st;
	uint64_t asked, bytes, refused; /* this image's: chunks and bytes fetched, refused */
	uint64_t reused;               /* this image's chunks rebuilt from held ones */
	int update;                    /* a recheck of an image held whole: final is the
					* old version, served until the new one is whole */
	int left_said;                 /* the store left for the parent was said */
};

/*
 * Is chunk i (NDZ_CHUNK_SIZE bytes at b) chunk i of the image ix indexes, and sound:
 * the one m signs (m->hash: a site-key), else by its own checksums?
 */
static int check_chunk(const struct ndz_index *ix, const struct ndz_manifest *m, uint32_t i,
		       const uint8_t *b, struct ndz_error *e)
{
	struct ndz_chunk_hdr h;
	int rc;

	if ((rc = ndz_hdr_decode(b, &h, e)) != 0)
		return rc;
	if (h.index != i || memcmp(h.uuid, ix->uuid, 16) != 0 ||
	    h.source_bytes != ix->source_bytes || h.first != ix->e[i].first ||
	    h.last != ix->e[i].last)
		return ndz_error_set(e, NDZ_EMISMATCH, 0, "chunk %u: not the chunk the index "
				     "lists there", i);
	if (m->hash)
		return ndz_manifest_check_chunk(m, b, &h, e);
	return ndz_verify_stored(NULL, b, &h, e);
}

/* A pause of ms, cut short by a stop. */
static void pause_ms(struct ndz_site *s, unsigned ms)
{
	for (unsigned k = 0; k < ms && !atomic_load(&s->stop); k += 50)
		nanosleep(&(struct timespec){ 0, 50 * 1000000L }, NULL);
}

/* Under the lock: make room in the cache for need bytes (lib/master/sitecache). */
static int make_room(struct job *j, uint64_t need, struct ndz_error *e)
{
	const struct ndz_mconf *c = ndz_master_conf(j->s->h.ms);
	struct ndz_sitecache_entry *ents = calloc(c->nimages + 1, sizeof(*ents));
	size_t *out = calloc(c->nimages + 1, sizeof(*out)), n = 0, nout = 0, dl = strlen(j->dir);
	int rc;

	if (!ents || !out) {
		free(ents);
		free(out);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "site cache");
	}
	for (size_t i = 0; i < c->nimages; i++) {
		const struct ndz_mconf_image *im = &c->images[i];
		struct stat st;

		if (strncmp(im->path, j->dir, dl) != 0 || im->path[dl] != '/' ||
		    stat(im->path, &st) != 0)
			continue;
		ents[n] = (struct ndz_sitecache_entry){ im->name, (uint64_t)st.st_size,
			(uint64_t)st.st_atim.tv_sec * 1000000000u + (uint64_t)st.st_atim.tv_nsec,
			ndz_mconf_pinned(c, im->name),
			ndz_master_serving(j->s->h.ms, im->name) > 0 || ndz_site_partial(im->path) ||
			strcmp(im->path, j->final) == 0 };  /* an update's old version */
		n++;
	}
	rc = ndz_sitecache_evict(ents, n, need, c->site_cache_size, out, &nout, e);
	for (size_t k = 0; rc == 0 && k < nout; k++) {
		const struct ndz_mconf_image *im = ndz_mconf_find(c, ents[out[k]].name);
		struct ndz_error why = { 0 };

		if (im && ndz_images_unlink(im->path, &why) == 0) {
			atomic_fetch_add(&j->s->evicted, 1);
			SAY(&j->s->h, 1, "site cache: %s evicted (%llu bytes, least recently asked)",
			    im->name, (unsigned long long)ents[out[k]].bytes);
		} else if (im) {
			SAY(&j->s->h, 0, "site cache: %s", ndz_error_msg(&why));
		}
	}
	free(ents);
	free(out);
	if (rc != 0)
		ndz_error_prefix(e, "site cache %s", j->dir);
	return rc;
}

/*
 * The missing chunks that a complete image of the cache holds too (its index entry
 * writes the same: lib/master/sitecache): each read from there, its header made this
 * image's, then checked exactly as a fetched chunk (check_chunk: the signed manifest
 * with a site-key, else the index and its own checksums) and kept only when it
 * passes; the rest are fetched. b: NDZ_CHUNK_SIZE bytes to work in.
 */
#define REUSE_SOURCES 64               /* cached images looked at, at most */
static void reuse(struct job *j, int fd, uint8_t *b)
{
	const struct ndz_mconf *c;
	struct ndz_sitereuse *r = NULL;
	struct ndz_index ixs[REUSE_SOURCES];
	char *paths[REUSE_SOURCES];
	int fds[REUSE_SOURCES];
	size_t n = 0, dl = strlen(j->dir);
	uint64_t refused = 0;

	memset(ixs, 0, sizeof(ixs));
	ndz_mlock_take(j->s->h.lock);
	c = ndz_master_conf(j->s->h.ms);
	for (size_t i = 0; i < c->nimages && n < REUSE_SOURCES; i++) {
		const struct ndz_mconf_image *im = &c->images[i];

		if (strncmp(im->path, j->dir, dl) == 0 && im->path[dl] == '/' &&
		    (j->update || strcmp(im->path, j->final) != 0) && !ndz_site_partial(im->path) &&
		    (paths[n] = strdup(im->path)))
			n++;
	}
	ndz_mlock_give(j->s->h.lock);
	if (!n || ndz_sitereuse_create(&r, NULL) != 0)
		goto out;
	for (size_t k = 0; k < n; k++) {
		char ip[PATH_MAX];

		fds[k] = -1;
		/* a hint only: what is taken from it is checked against this image */
		if (ndz_images_companion(paths[k], 1, ip, sizeof(ip), NULL) != 0 ||
		    ndz_index_load(ip, NULL, &ixs[k], NULL) != 0 ||
		    ndz_sitereuse_add(r, &ixs[k], (uint32_t)k, NULL) != 0)
			ndz_index_release(&ixs[k]);
	}
	for (uint32_t i = 0; i < j->ix.chunks && !atomic_load(&j->s->stop); i++) {
		uint32_t src, at;
		struct ndz_error why = { 0 };

		if (ndz_sitefetch_has(&j->st, i) || !ndz_sitereuse_find(r, &j->ix.e[i], &src, &at))
			continue;
		if (fds[src] < 0 && (fds[src] = open(paths[src], O_RDONLY | O_CLOEXEC)) < 0)
			continue;
		if (pread(fds[src], b, NDZ_CHUNK_SIZE, (off_t)at * NDZ_CHUNK_SIZE) != NDZ_CHUNK_SIZE ||
		    ndz_sitereuse_rebuild(b, i, i == j->ix.chunks - 1, j->ix.uuid, j->ix.source_bytes,
					  &why) != 0 ||
		    check_chunk(&j->ix, &j->m, i, b, &why) != 0) {
			atomic_fetch_add(&j->s->reuse_refused, 1);
			if (!refused++)
				SAY(&j->s->h, -1, "site: %s: chunk %u from chunk %u of %s not used: %s; "
				    "fetched", j->f->name, i, at, paths[src], why.code ? ndz_error_msg(&why) :
				    "short read");
			continue;
		}
		/* as take: the data, then the header */
		if (pwrite(fd, b + NDZ_HDR_SIZE, NDZ_CHUNK_SIZE - NDZ_HDR_SIZE,
			   (off_t)i * NDZ_CHUNK_SIZE + NDZ_HDR_SIZE) != NDZ_CHUNK_SIZE - NDZ_HDR_SIZE ||
		    pwrite(fd, b, NDZ_HDR_SIZE, (off_t)i * NDZ_CHUNK_SIZE) != NDZ_HDR_SIZE)
			break;                 /* fetched instead; the write fails there too */
		ndz_sitefetch_mark(&j->st, i);
		atomic_fetch_add(&j->s->reused_chunks, 1);
		j->reused++;
	}
	if (j->reused || refused)
		SAY(&j->s->h, 1, "site: %s: %llu of %u chunks taken from images held here, %llu "
		    "refused", j->f->name, (unsigned long long)j->reused, j->ix.chunks,
		    (unsigned long long)refused);
	for (size_t k = 0; k < n; k++)
		if (fds[k] >= 0)
			close(fds[k]);
out:
	for (size_t k = 0; k < n; k++) {
		ndz_index_release(&ixs[k]);
		free(paths[k]);
	}
	ndz_sitereuse_free(r);
}

static void note_source(struct job *j);

/* The index and manifest, and the fetch state from the partial file: 0 or the code. */
static int begin(struct job *j, int *fd, struct ndz_error *e)
{
	struct ndz_site_req r = { .id = 1, .what = NDZ_SITE_INDEX };
	struct ndz_key pub = { 0 };
	uint8_t *b = malloc(NDZ_CHUNK_SIZE);
	struct stat st;
	uint64_t need;
	int rc;

	if (!b)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "fetch");
	snprintf(r.name, sizeof(r.name), "%s", j->f->name);
	if (!j->ixbuf) {
		rc = ndz_sitesrc_fetch(&j->src, &r, &j->ixbuf, &j->ixlen, e);
		note_source(j);
		if (rc != 0)
			goto out;
		if (j->key[0] &&
		    (rc = ndz_key_load_as(j->key, NDZ_KEY_BIT(NDZ_KEY_SIGN_PUBLIC), &pub, e)) != 0)
			goto out;
		if ((rc = ndz_index_decode(j->ixbuf, j->ixlen, j->key[0] ? &pub : NULL, &j->ix,
					   e)) != 0) {
			free(j->ixbuf);
			j->ixbuf = NULL;
			ndz_error_prefix(e, "index of %s from %s", r.name, j->parent);
			goto out;
		}
		r.what = NDZ_SITE_MANIFEST;
		rc = ndz_sitesrc_fetch(&j->src, &r, &j->mbuf, &j->mlen, e);
		if (rc == NDZ_ENOIMAGE && !j->key[0]) {
			ndz_error_clear(e);     /* an unsigned image: no manifest */
			rc = 0;
		} else if (rc == NDZ_ENOIMAGE) {
			ndz_error_clear(e);
			rc = ndz_error_set(e, NDZ_EUNSIGNED, 0, "%s from %s: no manifest, and "
					   "site-key wants one", r.name, j->parent);
		} else if (rc == 0 && j->key[0]) {
			if ((rc = ndz_manifest_open(j->mbuf, j->mlen, &pub, &j->m, e)) != 0)
				ndz_error_prefix(e, "manifest of %s from %s", r.name, j->parent);
			else if (j->m.chunks != j->ix.chunks ||
				 memcmp(j->m.uuid, j->ix.uuid, 16) != 0)
				rc = ndz_error_set(e, NDZ_EMISMATCH, 0, "%s from %s: the manifest "
						   "and the index are of two images", r.name,
						   j->parent);
		}
		if (rc != 0) {
			ndz_manifest_release(&j->m);
			ndz_index_release(&j->ix);
			free(j->ixbuf);
			free(j->mbuf);
			j->ixbuf = j->mbuf = NULL;
			goto out;
		}
	}
	if (!j->st.chunks) {
		if ((rc = ndz_sitefetch_init(&j->st, j->ix.chunks, e)) != 0)
			goto out;
		*fd = open(j->part, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (*fd < 0) {
			rc = ndz_error_set(e, NDZ_EIO, errno, "%s", j->part);
			goto out;
		}
		/* resume: what the partial file holds that passes the check stays */
		if (fstat(*fd, &st) == 0)
			for (uint32_t i = 0; i < j->ix.chunks &&
			     (uint64_t)(i + 1) * NDZ_CHUNK_SIZE <= (uint64_t)st.st_size; i++)
				if (pread(*fd, b, NDZ_CHUNK_SIZE, (off_t)i * NDZ_CHUNK_SIZE) ==
				    NDZ_CHUNK_SIZE && check_chunk(&j->ix, &j->m, i, b, NULL) == 0)
					ndz_sitefetch_mark(&j->st, i);
		if (j->st.have)
			SAY(&j->s->h, 1, "site: %s: resuming with %u of %u chunks", r.name,
			    j->st.have, j->st.chunks);
		/* its full size now: what frisbeed --growing and the image reader expect */
		if (ftruncate(*fd, (off_t)j->ix.chunks * NDZ_CHUNK_SIZE) != 0) {
			rc = ndz_error_set(e, NDZ_EIO, errno, "%s", j->part);
			goto out;
		}
		reuse(j, *fd, b);
	}
	need = (uint64_t)(j->ix.chunks - j->st.have) * NDZ_CHUNK_SIZE + j->ixlen + j->mlen;
	ndz_mlock_take(j->s->h.lock);
	rc = make_room(j, need, e);
	ndz_mlock_give(j->s->h.lock);
out:
	free(b);
	return rc;
}

/*
 * The missing chunks, run by run: 0 when all are here; NDZ_EDATACRC & co (a chunk
 * that stayed bad: the fetch fails); else the link's code (asked again later).
 */
/* One request's chunks, as they arrive (ndz_site_fetch_chunks). */
struct run {
	struct job *j;
	int fd;
	uint8_t *tries;
	uint32_t first;
	struct ndz_error *e;
};

/* Chunk first + k: checked, then kept (0), or refused (0; asked again), or the code. */
static int take(void *arg, uint32_t k, const uint8_t *c)
{
	struct run *u = arg;
	struct job *j = u->j;
	uint32_t i = u->first + k;
	struct ndz_error why = { 0 };
	int rc;

	atomic_fetch_add(&j->s->fetched_chunks, 1);
	atomic_fetch_add(&j->s->fetched_bytes, NDZ_CHUNK_SIZE);
	j->bytes += NDZ_CHUNK_SIZE;
	j->asked++;
	if ((rc = check_chunk(&j->ix, &j->m, i, c, &why)) != 0) {
		atomic_fetch_add(&j->s->refused_chunks, 1);
		j->refused++;
		SAY(&j->s->h, -1, "site: %s from %s: %s: refused (try %d of %d)", j->f->name,
		    j->parent, ndz_error_msg(&why), u->tries[i] + 1, TRIES);
		if (++u->tries[i] < TRIES)
			return 0;
		atomic_fetch_add(&j->s->bad_chunks, 1);
		return ndz_error_set(u->e, rc, 0, "%s from %s: %s, %d times", j->f->name,
				     j->parent, ndz_error_msg(&why), TRIES);
	}
	/* the data, then the header: a frisbeed --growing takes a header there as the
	   whole chunk there */
	if (pwrite(u->fd, c + NDZ_HDR_SIZE, NDZ_CHUNK_SIZE - NDZ_HDR_SIZE,
		   (off_t)i * NDZ_CHUNK_SIZE + NDZ_HDR_SIZE) != NDZ_CHUNK_SIZE - NDZ_HDR_SIZE ||
	    pwrite(u->fd, c, NDZ_HDR_SIZE, (off_t)i * NDZ_CHUNK_SIZE) != NDZ_HDR_SIZE)
		return ndz_error_set(u->e, NDZ_EIO, errno, "%s", j->part);
	ndz_sitefetch_mark(&j->st, i);
	return 0;
}

/*
 * The missing chunks from from on, batch at a time, each batch from where a session
 * waits when one does (once: chunk from alone): 0 when none is left; a chunk that
 * stayed bad (its check's code: the fetch fails); else the link's code.
 */
static int fetch_run(struct job *j, int fd, uint8_t *tries, uint32_t from, uint32_t batch,
		     int once, struct ndz_error *e)
{
	struct ndz_site_req r = { .what = NDZ_SITE_CHUNKS_OF };
	struct run u = { j, fd, tries, 0, e };
	uint32_t first = from, n;
	int rc;

	snprintf(r.name, sizeof(r.name), "%s", j->f->name);
	for (;;) {
		/* where a session waits (frisbeed --growing): from there */
		uint32_t want = once ? UINT32_MAX : ndz_site_want_read(j->final, j->st.chunks);

		if (want != UINT32_MAX && !ndz_sitefetch_has(&j->st, want))
			first = want;
		if (atomic_load(&j->s->stop) ||
		    (n = ndz_sitefetch_next(&j->st, first, batch, &first)) == 0 ||
		    (once && first != from))
			break;
		r.id++;
		r.first = u.first = first;
		r.count = n;
		if ((rc = ndz_sitesrc_fetch_chunks(&j->src, &r, take, &u, e)) != 0)
			return rc;
		if (!once || ndz_sitefetch_has(&j->st, from))
			first += n;     /* else refused: asked again, up to TRIES */
	}
	return atomic_load(&j->s->stop) ? NDZ_ECANCELED : 0;
}

/* The session's wishes (IMAGE.want) are moot once the image is whole or gone. */
static void unlink_want(const struct job *j)
{
	char w[PATH_MAX + 8];

	snprintf(w, sizeof(w), "%s.want", j->final);
	unlink(w);
}

static void sync_dir(const struct job *j)
{
	int dfd = open(j->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

	if (dfd >= 0) {
		fsync(dfd);
		close(dfd);
	}
}

/* Put the image in place beside its companions; with mark, still arriving. */
static int publish(struct job *j, int fd, int mark, struct ndz_error *e)
{
	char path[PATH_MAX];
	int rc;

	if (fsync(fd) != 0)
		return ndz_error_set(e, NDZ_EIO, errno, "%s", j->part);
	if ((rc = ndz_images_companion(j->final, 1, path, sizeof(path), e)) != 0 ||
	    (rc = ndz_file_replace(path, j->ixbuf, j->ixlen, 0644, e)) != 0)
		return rc;
	if (j->mbuf && ((rc = ndz_images_companion(j->final, 0, path, sizeof(path), e)) != 0 ||
			(rc = ndz_file_replace(path, j->mbuf, j->mlen, 0644, e)) != 0))
		return rc;
	if (mark && (rc = ndz_file_replace(j->mark, "fetching\n", 9, 0644, e)) != 0)
		return rc;
	if (rename(j->part, j->final) != 0)
		return ndz_error_set(e, NDZ_EIO, errno, "%s", j->final);
	snprintf(j->part, sizeof(j->part), "%s", j->final);
	j->published = 1;
	sync_dir(j);
	return 0;
}

/* Under the lock: reread the configuration (a published or finished image). */
static void reread(struct job *j)
{
	struct ndz_error why = { 0 };

	if (j->s->h.reload(j->s->h.ctx, &why) != 0)
		SAY(&j->s->h, 0, "site: %s here, but not served: %s", j->f->name,
		    ndz_error_msg(&why));
}

/*
 * The chunks: the first and the last (what opening an image reads), then the image
 * is published (a session may start), then the rest in order.
 */
static int fetch_chunks(struct job *j, int fd, uint8_t *tries, struct ndz_error *e)
{
	uint32_t last = j->ix.chunks - 1;
	int rc;

	if ((rc = fetch_run(j, fd, tries, 0, 1, 1, e)) != 0 ||
	    (rc = fetch_run(j, fd, tries, last, 1, 1, e)) != 0)
		return rc;
	if (!j->published && !j->update && ndz_sitefetch_has(&j->st, 0) &&
	    ndz_sitefetch_has(&j->st, last)) {
		if ((rc = publish(j, fd, 1, e)) != 0)
			return rc;
		ndz_mlock_take(j->s->h.lock);
		reread(j);
		ndz_mlock_give(j->s->h.lock);
		SAY(&j->s->h, 1, "site: %s served while it arrives (%u of %u chunks here)",
		    j->f->name, j->st.have, j->st.chunks);
	}
	return fetch_run(j, fd, tries, 0, BATCH, 0, e);
}

/*
 * The whole image in place, synced, its marker gone. An update replaces the old
 * version under the lock, so that a session starts on one version and its index:
 * the running ones keep their open file and take no new clients (as after an upload).
 */
static int finish(struct job *j, int fd, struct ndz_error *e)
{
	if (j->update) {
		char path[PATH_MAX];
		int rc;

		if (fsync(fd) != 0)
			return ndz_error_set(e, NDZ_EIO, errno, "%s", j->part);
		ndz_mlock_take(j->s->h.lock);
		/* an unsigned new version: the old one's manifest would not be its */
		if (!j->mbuf && ndz_images_companion(j->final, 0, path, sizeof(path), NULL) == 0)
			unlink(path);
		rc = publish(j, fd, 0, e);
		if (rc == 0)
			ndz_master_retire(j->s->h.ms, j->f->name);
		ndz_mlock_give(j->s->h.lock);
		return rc;
	}
	if (!j->published)
		return publish(j, fd, 0, e);
	if (fsync(fd) != 0)
		return ndz_error_set(e, NDZ_EIO, errno, "%s", j->final);
	if (unlink(j->mark) != 0 && errno != ENOENT)
		return ndz_error_set(e, NDZ_EIO, errno, "%s", j->mark);
	unlink_want(j);
	sync_dir(j);
	return 0;
}

static int is_link(int rc)
{
	return rc == NDZ_ENET || rc == NDZ_ETIMEDOUT || rc == NDZ_ESHORTREAD ||
	       rc == NDZ_EPROTO;
}

/* Under the lock: image name's recheck is now (a fetch of it has just ended, or begins). */
static void checked(struct ndz_site *s, const char *name)
{
	struct check *k = NULL, *old = &s->chk[0];

	for (size_t i = 0; i < CHECKS && !k; i++)
		if (strcmp(s->chk[i].name, name) == 0)
			k = &s->chk[i];
		else if (s->chk[i].at_ns < old->at_ns)
			old = &s->chk[i];   /* a free one is oldest (0) */
	if (!k) {
		k = old;
		snprintf(k->name, sizeof(k->name), "%s", name);
		k->tag[0] = 0;
	}
	k->at_ns = ndz_now_ns();
}

/* Image name's store tag (ndz_sitesrc tag) into out, or set (set: tag): under the lock. */
static void store_tag(struct ndz_site *s, const char *name, char *out, size_t cap,
		      const char *set)
{
	ndz_mlock_take(s->h.lock);
	if (out)
		out[0] = 0;
	for (size_t i = 0; i < CHECKS; i++)
		if (strcmp(s->chk[i].name, name) == 0) {
			if (set)
				snprintf(s->chk[i].tag, sizeof(s->chk[i].tag), "%s", set);
			else
				snprintf(out, cap, "%s", s->chk[i].tag);
		}
	ndz_mlock_give(s->h.lock);
}

/*
 * After a call on j's source: when the store was left for the parent, the fetch names
 * the parent from now on, and says why: an image the store lacks at -vv, a failing store
 * once until it answers again. A call the store answered clears that once.
 */
static void note_source(struct job *j)
{
	struct ndz_site *s = j->s;

	if (!j->src.via_parent) {
		atomic_store(&s->store_said, 0);
		return;
	}
	if (!j->src.left[0] || j->left_said)
		return;
	j->left_said = 1;
	snprintf(j->parent, sizeof(j->parent), "%.299s", j->src.name);
	if (j->src.left_code == NDZ_ENOIMAGE)
		SAY(&s->h, 2, "site: %s: not in the store (%s); asking the parent %s", j->f->name,
		    j->src.left, j->src.name);
	else if (!atomic_exchange(&s->store_said, 1))
		SAY(&s->h, -1, "site: %s: the store failed (%s); asking the parent %s (said once "
		    "until the store answers)", j->f->name, j->src.left, j->src.name);
}

/* 1 when the file at path holds exactly the len bytes at b. */
static int same_file(const char *path, const uint8_t *b, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), same = 0;
	uint8_t *p = NULL;
	struct stat st;

	if (fd >= 0 && fstat(fd, &st) == 0 && (uint64_t)st.st_size == len &&
	    (p = malloc(len ? len : 1)) && pread(fd, p, len, 0) == (ssize_t)len)
		same = memcmp(p, b, len) == 0;
	free(p);
	if (fd >= 0)
		close(fd);
	return same;
}

/*
 * An update's first step: has the image changed upstream? A parent answers its
 * identity (IDENT: the image's size, its index's and manifest's SHA-256), compared with
 * the held files'; a store the size and ETag of its index object (HEAD), compared with
 * the tag its fetch left. Only when those cannot tell (an older parent without IDENT,
 * said once; a store tag not known here, as after a restart) is upstream's index itself
 * fetched and compared byte for byte with the one held beside the image (the index
 * names the image's UUID and every chunk). 1: they differ, 0: the same, or the
 * fetch's code with e.
 */
static int changed(struct job *j, struct ndz_error *e)
{
	struct ndz_site *s = j->s;
	struct ndz_site_req r = { .id = 1, .what = NDZ_SITE_INDEX };
	struct ndz_sitesrc_ident up;
	struct ndz_site_ident held;
	char path[PATH_MAX], mpath[PATH_MAX], tag[200];
	uint8_t *b = NULL;
	size_t len = 0;
	int rc, old;

	ndz_mlock_take(s->h.lock);
	old = !j->src.s3 && strcmp(s->noident, j->src.link.spec) == 0;
	ndz_mlock_give(s->h.lock);
	store_tag(s, j->f->name, tag, sizeof(tag), NULL);
	if (ndz_images_companion(j->final, 1, path, sizeof(path), NULL) != 0 ||
	    ndz_images_companion(j->final, 0, mpath, sizeof(mpath), NULL) != 0)
		return 1;
	rc = old ? NDZ_ENOTSUP : ndz_sitesrc_ident(&j->src, j->f->name, &up, e);
	note_source(j);
	if (rc == NDZ_ENOTSUP && !old) {
		ndz_mlock_take(s->h.lock);
		old = strcmp(s->noident, j->src.link.spec) == 0;  /* another recheck's news */
		snprintf(s->noident, sizeof(s->noident), "%s", j->src.link.spec);
		ndz_mlock_give(s->h.lock);
		if (!old)
			SAY(&s->h, 1, "site: %s: %s; its rechecks ask for the whole index (said "
			    "once)", j->f->name, ndz_error_msg(e));
		ndz_error_clear(e);
	} else if (rc != 0 && rc != NDZ_ENOTSUP) {
		return rc;
	} else if (rc == 0 && up.from_parent) {
		return ndz_site_ident_files(j->final, path, mpath, &held, NULL) != 0 ||
		       !ndz_site_ident_same(&held, &up.id);
	} else if (rc == 0 && tag[0] && strcmp(tag, up.tag) == 0) {
		return 0;
	}
	snprintf(r.name, sizeof(r.name), "%s", j->f->name);
	if ((rc = ndz_sitesrc_fetch(&j->src, &r, &b, &len, e)) != 0)
		return rc;
	note_source(j);
	rc = !same_file(path, b, len);
	free(b);
	if (!rc && !j->src.via_parent)  /* the next recheck asks the store's HEAD only */
		store_tag(s, j->f->name, NULL, 0, j->src.tag);
	return rc;
}

/*
 * A recheck (j->update): 1 when the image changed upstream (fetched next), else 0
 * (the held version stays: the same upstream, or upstream not reached or without it;
 * a lost upstream is said once until it answers again).
 */
static int recheck(struct job *j)
{
	struct ndz_site *s = j->s;
	struct ndz_error e = { 0 };
	int rc = changed(j, &e);

	atomic_fetch_add(&s->site_rechecks, 1);
	if (rc == 1) {
		atomic_store(&s->cut_said, 0);
		SAY(&s->h, 1, "site: %s changed at %s: fetching the new version (the held one "
		    "is served until it is here)", j->f->name, j->parent);
		return 1;
	}
	if (rc == 0) {
		atomic_store(&s->cut_said, 0);
		SAY(&s->h, 2, "site: %s: the same at %s", j->f->name, j->parent);
		return 0;
	}
	atomic_fetch_add(&s->recheck_failed, 1);
	if (!is_link(rc))              /* gone upstream (an image made here): said at -vv */
		SAY(&s->h, rc == NDZ_ENOIMAGE ? 2 : -1, "site: recheck of %s at %s: %s; the "
		    "held version is served", j->f->name, j->parent, ndz_error_msg(&e));
	else if (!atomic_exchange(&s->cut_said, 1))
		SAY(&s->h, -1, "site: recheck of %s: %s; the held images are served (said once)",
		    j->f->name, ndz_error_msg(&e));
	return 0;
}

static void *fetch_thread(void *arg)
{
	struct job *j = arg;
	struct ndz_site *s = j->s;
	struct ndz_error e = { 0 };
	uint8_t *tries = NULL;
	unsigned backoff = BACKOFF_MIN_MS;
	uint64_t t0 = ndz_now_ns();
	uint32_t had = 0;
	int fd = -1, rc;

	if (j->update && !recheck(j)) {
		ndz_sitesrc_release(&j->src);
		ndz_mlock_take(s->h.lock);
		j->f->state = IDLE;
		ndz_mlock_give(s->h.lock);
		free(j);
		return NULL;
	}
	if (!j->update)
		SAY(&s->h, 1, "site: %s asked: fetching it from %s", j->f->name, j->parent);
	for (;;) {
		ndz_error_clear(&e);
		rc = begin(j, &fd, &e);
		if (rc == 0 && !tries && !(tries = calloc(j->ix.chunks, 1)))
			rc = ndz_error_set(&e, NDZ_ENOMEM, 0, "fetch");
		if (rc == 0)
			rc = fetch_chunks(j, fd, tries, &e);
		if (rc == 0)
			rc = finish(j, fd, &e);
		if (rc == 0 || !is_link(rc) || atomic_load(&s->stop))
			break;
		if (j->st.have > had)           /* it moved on since: a new outage */
			backoff = BACKOFF_MIN_MS;
		had = j->st.have;
		atomic_fetch_add(&s->retries, 1);
		SAY(&s->h, -1, "site: %s: %s; again in %.2f s (%u of %u chunks here)", j->f->name,
		    ndz_error_msg(&e), backoff / 1000.0, j->st.have, j->ix.chunks);
		pause_ms(s, backoff);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	if (fd >= 0)
		close(fd);
	ndz_sitesrc_release(&j->src);
	ndz_mlock_take(s->h.lock);
	if (rc == 0) {
		struct ndz_error why = { 0 };

		atomic_fetch_add(&s->fetches_done, 1);
		if (j->update)
			atomic_fetch_add(&s->site_updates, 1);
		checked(s, j->f->name);
		for (size_t i = 0; i < CHECKS; i++)  /* the held index's tag (store_tag, locked) */
			if (strcmp(s->chk[i].name, j->f->name) == 0)
				snprintf(s->chk[i].tag, sizeof(s->chk[i].tag), "%s",
					 j->src.via_parent ? "" : j->src.tag);
		SAY(&s->h, 1, "site: %s %s: %u chunks; %llu chunks, %llu bytes from the "
		    "parent, %llu refused, %llu reused, in %.1f s; now served here", j->f->name,
		    j->update ? "updated" : "fetched", j->ix.chunks, (unsigned long long)j->asked, (unsigned long long)j->bytes,
		    (unsigned long long)j->refused, (unsigned long long)j->reused,
		    (double)(ndz_now_ns() - t0) / 1e9);
		if (s->h.reload(s->h.ctx, &why) != 0)
			SAY(&s->h, 0, "site: %s fetched, but not served: %s", j->f->name,
			    ndz_error_msg(&why));
		j->f->state = IDLE;
	} else {
		struct ndz_error why = { 0 };

		if (!j->published && !atomic_load(&s->stop))
			unlink(j->part);        /* no half image left to fill the cache */
		if (j->published && !atomic_load(&s->stop)) {
			/* a bad chunk stays bad: not half an image with no way to finish it */
			if (ndz_images_unlink(j->final, &why) != 0)
				SAY(&s->h, 0, "site: %s", ndz_error_msg(&why));
			unlink(j->mark);
			unlink_want(j);
			if (s->h.drop)
				s->h.drop(s->h.ctx, j->f->name);
			reread(j);
		}
		SAY(&s->h, 0, "site: %s of %s failed: %s", j->update ? "update" : "fetch",
		    j->f->name, ndz_error_msg(&e));
		snprintf(j->f->why, sizeof(j->f->why), "%s", ndz_error_msg(&e));
		j->f->code = e.code;
		j->f->failed_ns = ndz_now_ns();
		/* an update's failure leaves the held version: no GET waits for it */
		j->f->state = j->update ? IDLE : FAILED;
	}
	ndz_mlock_give(s->h.lock);
	ndz_index_release(&j->ix);
	ndz_manifest_release(&j->m);
	ndz_sitefetch_release(&j->st);
	free(j->ixbuf);
	free(j->mbuf);
	free(tries);
	free(j);
	return NULL;
}

/* Under the lock: start image name's fetch (update: a recheck of the held one). */
static int want(struct ndz_site *s, const char *name, int update, struct ndz_error *e);

int ndz_site_want(struct ndz_site *s, const char *name, struct ndz_error *e)
{
	return want(s, name, 0, e);
}

static int want(struct ndz_site *s, const char *name, int update, struct ndz_error *e)
{
	const struct ndz_mconf *c = ndz_master_conf(s->h.ms);
	struct fetch *f = NULL;
	struct job *j;

	struct ndz_s3_conf store;

	if ((!c->parent && !c->store) || !c->site_cache || !ndz_ctl_valid_name(name))
		return NDZ_SITE_NOT_A_SITE;
	for (size_t i = 0; i < FETCHES; i++)
		if (s->f[i].state != IDLE && strcmp(s->f[i].name, name) == 0)
			f = &s->f[i];
	if (f && f->state == RUNNING)
		return NDZ_SITE_FETCHING;
	if (f && ndz_now_ns() - f->failed_ns < (uint64_t)FAILED_S * 1000000000u) {
		ndz_error_set(e, f->code == NDZ_ENOIMAGE ? NDZ_ENOIMAGE : NDZ_EIO, 0, "%s", f->why);
		return NDZ_SITE_FAILED;
	}
	for (size_t i = 0; !f && i < FETCHES; i++)
		if (s->f[i].state == IDLE)
			f = &s->f[i];
	if (!f) {
		ndz_error_set(e, NDZ_EBUSY, 0, "site: %d images are on their way already", FETCHES);
		return NDZ_SITE_FAILED;
	}
	if (f->joinable) {             /* its last thread has ended (its state says so) */
		pthread_join(f->th, NULL);
		f->joinable = 0;
	}
	if (!(j = calloc(1, sizeof(*j)))) {
		ndz_error_set(e, NDZ_ENOMEM, 0, "site: fetch of %s", name);
		return NDZ_SITE_FAILED;
	}
	j->s = s;
	j->f = f;
	j->update = update;
	snprintf(f->name, sizeof(f->name), "%s", name);
	ndz_mconf_s3(c, &store);
	if (ndz_sitesrc_init(&j->src, c->parent, &store, WAIT_S, e) != 0) {
		free(j);
		return NDZ_SITE_FAILED;
	}
	snprintf(j->parent, sizeof(j->parent), "%.299s", j->src.name);
	snprintf(j->key, sizeof(j->key), "%s", c->site_key ? c->site_key : "");
	snprintf(j->dir, sizeof(j->dir), "%s", c->site_cache);
	if ((size_t)snprintf(j->final, sizeof(j->final), "%s/%s.ndz", c->site_cache, name) >=
	    sizeof(j->final) ||
	    (size_t)snprintf(j->part, sizeof(j->part), "%s.part", j->final) >= sizeof(j->part) ||
	    (size_t)snprintf(j->mark, sizeof(j->mark), "%s.fetching", j->final) >=
	    sizeof(j->mark)) {
		free(j);
		ndz_error_set(e, NDZ_ERANGE, 0, "site-cache %s: path too long", c->site_cache);
		return NDZ_SITE_FAILED;
	}
	if (!update && ndz_site_partial(j->final)) {  /* published by an earlier fetch: resumed */
		snprintf(j->part, sizeof(j->part), "%s", j->final);
		j->published = 1;
	}
	f->state = RUNNING;
	if (pthread_create(&f->th, NULL, fetch_thread, j) != 0) {
		f->state = IDLE;
		free(j);
		ndz_error_set(e, NDZ_ENOMEM, errno, "site: fetch of %s: no thread", name);
		return NDZ_SITE_FAILED;
	}
	f->joinable = 1;
	return NDZ_SITE_FETCHING;
}

/*
 * Under the lock: a GET for image name, held whole: when its last recheck is older
 * than site-recheck, one starts on a thread of its own (the GET is answered from
 * the cache as it is); half the fetch slots at most go to rechecks.
 */
static void recheck_due(struct ndz_site *s, const struct ndz_mconf *c, const char *name)
{
	uint64_t now = ndz_now_ns(), every = (uint64_t)c->site_recheck * 1000000000u;
	size_t busy = 0;

	if (!c->parent && !c->store)
		return;
	for (size_t i = 0; i < FETCHES; i++) {
		if (s->f[i].state == RUNNING && strcmp(s->f[i].name, name) == 0)
			return;
		busy += s->f[i].state == RUNNING;
	}
	for (size_t i = 0; i < CHECKS; i++)
		if (strcmp(s->chk[i].name, name) == 0 && now - s->chk[i].at_ns < every)
			return;
	if (busy >= FETCHES / 2)
		return;
	checked(s, name);
	want(s, name, 1, &(struct ndz_error){ 0 });
}

void ndz_site_used(struct ndz_site *s, const char *name)
{
	const struct ndz_mconf *c = ndz_master_conf(s->h.ms);
	const struct ndz_mconf_image *im = ndz_mconf_find(c, name);
	size_t dl = c->site_cache ? strlen(c->site_cache) : 0;
	struct timespec ts[2] = { { 0, UTIME_NOW }, { 0, UTIME_OMIT } };

	/* the last-asked time of a cached image: its file's access time */
	if (!im || !dl || strncmp(im->path, c->site_cache, dl) != 0 || im->path[dl] != '/')
		return;
	utimensat(AT_FDCWD, im->path, ts, 0);
	if (ndz_site_partial(im->path) && (c->parent || c->store)) {
		int running = 0;

		for (size_t i = 0; i < FETCHES; i++)
			running |= s->f[i].state == RUNNING && strcmp(s->f[i].name, name) == 0;
		if (!running)
			ndz_site_want(s, name, &(struct ndz_error){ 0 });
		return;
	}
	recheck_due(s, c, name);
}

void ndz_site_changed(struct ndz_site *s)
{
	atomic_store(&s->changed, 1);
}

int ndz_site_partial(const char *path)
{
	char m[PATH_MAX];

	return (size_t)snprintf(m, sizeof(m), "%s.fetching", path) < sizeof(m) &&
	       access(m, F_OK) == 0;
}

static void *forward_thread(void *arg)
{
	struct forward *w = arg;
	struct ndz_site *s = w->site;
	unsigned backoff = BACKOFF_MIN_MS;

	SAY(&s->h, 1, "site: upload %s: sending it on to %s%s", w->name,
	    w->s3 ? "" : "the parent ", w->parent);
	while (!atomic_load(&s->stop)) {
		struct ndz_error e = { 0 };
		struct stat st;
		int refused = 0, rc, fd = open(w->path, O_RDONLY | O_CLOEXEC);

		if (fd < 0 || fstat(fd, &st) != 0) {
			rc = ndz_error_set(&e, NDZ_EIO, errno, "%s", w->path);
			if (fd >= 0)
				close(fd);
		} else if (w->s3) {
			close(fd);
			rc = ndz_sitestore_push(w->s3, w->name, w->path, &e);
		} else {
			rc = ndz_upload_send(w->parent, w->name, fd, (uint64_t)st.st_size, WAIT_S,
					     NULL, NULL, &refused, &e);
			close(fd);
		}
		if (rc == 0) {
			atomic_fetch_add(&s->forwarded, 1);
			SAY(&s->h, 1, "site: upload %s stored %s%s", w->name,
			    w->s3 ? "in " : "at the parent ", w->parent);
			break;
		}
		if (!is_link(rc)) {
			atomic_fetch_add(&s->forward_failed, 1);
			SAY(&s->h, 0, "site: upload %s not taken by %s%s: %s", w->name,
			    w->s3 ? "" : "the parent ", w->parent, ndz_error_msg(&e));
			break;
		}
		atomic_fetch_add(&s->retries, 1);
		SAY(&s->h, -1, "site: upload %s to the parent: %s; again in %.2f s", w->name,
		    ndz_error_msg(&e), backoff / 1000.0);
		pause_ms(s, backoff);
		backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
	}
	ndz_s3_free(w->s3);
	w->s3 = NULL;
	atomic_store(&w->done, 1);
	return NULL;
}

void ndz_site_forward(struct ndz_site *s, const char *name, const char *path)
{
	const struct ndz_mconf *c = ndz_master_conf(s->h.ms);
	struct forward *w = NULL;
	struct ndz_s3_conf store;
	struct ndz_s3 *s3 = NULL;
	struct ndz_error e = { 0 };

	if (!c->parent && !c->store)
		return;
	ndz_mconf_s3(c, &store);
	if (c->store && ndz_s3_open(&store, WAIT_S, &s3, &e) != 0) {
		atomic_fetch_add(&s->forward_failed, 1);
		SAY(&s->h, 0, "site: upload %s not sent on to the store: %s", name,
		    ndz_error_msg(&e));
		return;
	}
	for (size_t i = 0; !w && i < FETCHES; i++) {
		if (s->fw[i].joinable && atomic_load(&s->fw[i].done)) {
			pthread_join(s->fw[i].th, NULL);
			s->fw[i].joinable = 0;
		}
		if (!s->fw[i].joinable)
			w = &s->fw[i];
	}
	if (!w) {
		atomic_fetch_add(&s->forward_failed, 1);
		SAY(&s->h, 0, "site: upload %s not sent on to the parent: %d uploads are on "
		    "their way already", name, FETCHES);
		ndz_s3_free(s3);
		return;
	}
	w->site = s;
	atomic_store(&w->done, 0);
	snprintf(w->name, sizeof(w->name), "%s", name);
	snprintf(w->path, sizeof(w->path), "%s", path);
	snprintf(w->parent, sizeof(w->parent), "%s", s3 ? ndz_s3_name(s3) : c->parent);
	w->s3 = s3;
	if (pthread_create(&w->th, NULL, forward_thread, w) != 0) {
		ndz_s3_free(s3);
		w->s3 = NULL;
		atomic_fetch_add(&s->forward_failed, 1);
		SAY(&s->h, 0, "site: upload %s not sent on to the parent: no thread", name);
		return;
	}
	w->joinable = 1;
}

size_t ndz_site_nodes(struct ndz_site *s, int table, struct ndz_jbuf *j)
{
	uint64_t now = ndz_now_ms();
	size_t n = 0;
	char *own, *line, *save = NULL;

	for (size_t i = 0; i < SITES; i++)
		n += s->sl[i].addr && s->sl[i].table && s->sl[i].json;
	if (!n || (table && !(own = strdup(j->p))))
		return 0;
	if (!table) {                  /* {"nodes":[...],...} gets "sites" before its end */
		char *end = strrchr(j->p, '}');

		if (!end)
			return 0;
		j->len = (size_t)(end - j->p);
		j->p[j->len] = 0;
		ndz_jbuf_printf(j, ", \"sites\": [");
		for (size_t i = 0, k = 0; i < SITES; i++) {
			const struct sitelab *sl = &s->sl[i];
			char a[INET_ADDRSTRLEN];

			if (!sl->addr || !sl->table || !sl->json)
				continue;
			inet_ntop(AF_INET, &sl->addr, a, sizeof(a));
			ndz_jbuf_printf(j, "%s{\"site\": ", k++ ? ", " : "");
			ndz_jbuf_string(j, sl->name);
			ndz_jbuf_printf(j, ", \"addr\": \"%s\", \"age_s\": %llu, \"lab\": %s}", a,
					(unsigned long long)((now - sl->heard_ms) / 1000), sl->json);
		}
		ndz_jbuf_printf(j, "]}");
		return n;
	}
	/* the table again, each line after its SITE: "-" for the parent's own nodes */
	j->len = 0;
	j->p[0] = 0;
	for (line = strtok_r(own, "\n", &save), n = 0; line; line = strtok_r(NULL, "\n", &save))
		ndz_jbuf_printf(j, "%-12s  %s\n", n++ ? "-" : "SITE", line);
	free(own);
	n = 0;
	for (size_t i = 0; i < SITES; i++) {
		char *t;
		int first = 1;

		if (!s->sl[i].addr || !s->sl[i].table || !(t = strdup(s->sl[i].table)))
			continue;
		n++;
		for (line = strtok_r(t, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
			if (!first)            /* its header is the parent's */
				ndz_jbuf_printf(j, "%-12s  %s\n", s->sl[i].name, line);
			first = 0;
		}
		free(t);
	}
	return n;
}

/* Does a site's last report list target: a node's name or MAC (any case), or a group? */
static int lists(const struct sitelab *sl, const char *target)
{
	for (size_t i = 0; target[0] && i < sl->nnodes; i++)
		if (strcmp(sl->nodes[i].name, target) == 0 ||
		    strcasecmp(sl->nodes[i].mac, target) == 0 ||
		    strcmp(sl->nodes[i].group, target) == 0)
			return 1;
	return 0;
}

int ndz_site_task(struct ndz_site *s, const struct ndz_ctl_labreq *r, struct ndz_jbuf *j,
		  struct ndz_error *e)
{
	for (size_t i = 0; i < SITES; i++) {
		struct sitelab *sl = &s->sl[i];
		struct ndz_ctl_labreq f = *r;
		char a[INET_ADDRSTRLEN];
		int n;

		if (!sl->addr || !sl->json || !lists(sl, r->args[0]))
			continue;
		f.token[0] = 0;
		n = ndz_ctl_lab_encode(&f, sl->tasks + sl->ntasks,
				       sizeof(sl->tasks) - sl->ntasks, e);
		if (n < 0)
			return n == NDZ_ERANGE ? ndz_error_set(e, NDZ_EBUSY, 0, "site %s: too many "
							      "tasks waiting", sl->name) : n;
		sl->ntasks += (size_t)n;
		inet_ntop(AF_INET, &sl->addr, a, sizeof(a));
		ndz_jbuf_printf(j, "%s %s: sent to site %s (%s), which takes it at its next "
				"report", r->op == NDZ_CTL_OP_RELOAD ? "reload" :
				r->op == NDZ_CTL_OP_CAPTURE ? "capture" : "cancel", r->args[0],
				sl->name, a);
		SAY(&s->h, 1, "admin: %s", j->p);
		return 0;
	}
	return ndz_error_set(e, NDZ_ENOENT, 0, "%s: no such node or group here or at a site",
			     r->args[0]);
}
