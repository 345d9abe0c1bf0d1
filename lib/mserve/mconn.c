/* The master's TCP connections: STATUS, and uploads from admission to their verdict. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "ctl/ctl.h"
#include "ctl/sitecall.h"
#include "mconn.h"
#include "mreply.h"
#include "master/images.h"
#include "master/updir.h"
#include "ctl/upload.h"
#include "master/upreceive.h"
#include "core/clock.h"
#include "core/file.h"
#include "core/io.h"
#include "trust/index.h"

/*
 * Under the lock, which it releases: STATUS over TCP, the same rules as by UDP; the
 * JSON is asked for without the lock (status_json asks the sessions, then takes it).
 */
static void status(const struct ndz_mconn *c, int fd, uint32_t id, uint32_t addr)
{
	struct ndz_master_counters *n = ndz_master_counters(c->ms);
	struct ndz_ctl_rep rep = { .type = NDZ_CTL_STATUS, .id = id };
	char *json = NULL;
	int rc;

	if (!ndz_mconf_allows_any(ndz_master_conf(c->ms), addr) &&
	    ntohl(addr) != INADDR_LOOPBACK) {
		char a[16];

		rep.status = NDZ_CTL_DENIED;
		n->denied++;
		inet_ntop(AF_INET, &addr, a, sizeof(a));
		if (c->refused)
			c->refused("access denied", a, "asks for the status: access denied: no image "
				   "allows %s", a);
		ndz_mlock_give(c->lock);
	} else {
		n->status++;
		ndz_mlock_give(c->lock);
		if ((json = malloc(NDZ_CTL_JSON_MAX + 1))) {
			rep.json = json;
			rep.json_len = c->status_json(c->ctx, json, NDZ_CTL_JSON_MAX + 1);
		} else {
			rep.status = NDZ_CTL_FAILED;
		}
	}
	rc = ndz_mreply_send(fd, &rep, NULL);
	free(json);
	if (rc != 0)
		c->say(c->ctx, 1, "status reply not sent whole");
}

static uint64_t usage(void *ctx, const char *final)
{
	return ndz_updir_usage(ndz_master_conf(ctx)->upload_dir, final);
}

/*
 * Under the lock: the upload of req from addr may begin (an upload slot and its
 * temporary file, *tfd), or a negative code with e saying why.
 */
static int begin(const struct ndz_mconn *c, const struct ndz_ctl_req *req, uint32_t addr,
		 char *final, int *slot, int *tfd, uint64_t *limit, struct ndz_error *e)
{
	int rc = ndz_master_upload_begin(c->ms, req->name, addr, req->size, usage, c->ms, final,
					 PATH_MAX, slot, limit, e);

	if (rc != 0)
		return rc;
	*tfd = ndz_updir_temp(ndz_master_conf(c->ms)->upload_dir, req->name, c->tmp[*slot],
			      PATH_MAX, e);
	if (*tfd < 0) {
		c->say(c->ctx, 0, "%s", ndz_error_msg(e));
		ndz_master_upload_end(c->ms, *slot, -1);
		return *tfd;
	}
	return 0;
}

/*
 * Under the lock: a stored image is reported stored only once a GET would serve
 * it: a new name in the upload directory needs a reload that picks it up.
 */
static int served(const struct ndz_mconn *c, const char *name, const char *final,
		  struct ndz_error *e)
{
	const struct ndz_mconf_image *im = ndz_mconf_find(ndz_master_conf(c->ms), name);
	struct ndz_error why = { 0 };

	if (im && strcmp(im->path, final) == 0)
		return 0;
	if (c->reload(c->ctx, &why) != 0)
		return ndz_error_set(e, NDZ_EIO, 0, "stored as %s, but not served: the "
				     "configuration does not load: %s", final, ndz_error_msg(&why));
	im = ndz_mconf_find(ndz_master_conf(c->ms), name);
	if (!im || strcmp(im->path, final) != 0)
		return ndz_error_set(e, NDZ_EIO, 0, "stored as %s, but not served: the "
				     "configuration has no image '%s' there", final, name);
	return 0;
}

/*
 * Without the lock: the content index of the image received into tmp (read back
 * whole: the longest step after the transfer), into a temporary file of the same
 * directory (its path in itmp) that index_beside puts in place. Its descriptor, or
 * -1 (said why: an encrypted or original-format image has none to be made here).
 */
static int index_of(const struct ndz_mconn *c, const char *name, const char *tmp,
		    char *itmp)
{
	struct ndz_error e = { 0 };
	char dir[PATH_MAX];
	const char *slash = strrchr(tmp, '/');
	uint32_t chunks = 0;
	int fd;

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - tmp) : 1, slash ? tmp : ".");
	fd = ndz_upload_index(tmp, dir, name, itmp, PATH_MAX, &chunks, &e);
	if (fd < 0)
		c->say(c->ctx, fd == NDZ_ENOTSUP ? 1 : 0, "%s: stored with no content index: %s",
		       name, ndz_error_msg(&e));
	else
		c->say(c->ctx, 2, "%s: content index of %u chunks made", name, chunks);
	return fd;
}

/*
 * Under the lock, the image just renamed to final: its index (ifd, at itmp) renamed
 * to FINAL.index beside it, or, with none (ifd < 0), the one an earlier image of
 * that name left removed: an index is of the image beside it or there is none.
 */
static void index_beside(const struct ndz_mconn *c, const char *final, int ifd,
			 const char *itmp)
{
	struct ndz_error e = { 0 };
	char path[PATH_MAX];

	if (ndz_index_path(final, path, sizeof(path), &e) < 0) {
		if (ifd >= 0) {
			close(ifd);
			unlink(itmp);
		}
	} else if (ifd >= 0) {
		ndz_file_commit(ifd, itmp, path, 0644, &e);
	} else if (unlink(path) != 0 && errno != ENOENT) {
		ndz_error_set(&e, NDZ_EIO, errno, "removing %s", path);
	}
	if (e.code)
		c->say(c->ctx, 0, "%s: no content index: %s", final, ndz_error_msg(&e));
}

/* The admitted upload in slot: its bytes into tfd, then into place. 0 once served. */
static int store(const struct ndz_mconn *c, int fd, const struct ndz_ctl_req *req, int slot,
		 int tfd, uint64_t limit, const char *final, struct ndz_upload_stats *stats,
		 struct ndz_error *e)
{
	struct ndz_io *io = NULL;
	char itmp[PATH_MAX];
	int rc, ifd;

	if (ndz_io_open_stream(fd, "upload", &io, NULL) != 0)
		return ndz_error_set(e, NDZ_ENET, errno, "connection lost");
	rc = ndz_upload_receive(io, tfd, limit, req->size, stats, e);
	ndz_io_close(io);
	if (rc != 0)
		return rc;
	/* past the image's checks, what fails is ours: NDZ_EIO (FAILED) */
	if (fsync(tfd) != 0)          /* the long flush outside the lock */
		return ndz_error_set(e, NDZ_EIO, errno, "syncing %s", c->tmp[slot]);
	ifd = index_of(c, req->name, c->tmp[slot], itmp);
	ndz_mlock_take(c->lock);
	rc = ndz_file_commit(dup(tfd), c->tmp[slot], final, 0644, e);
	c->tmp[slot][0] = 0;           /* renamed, or removed by the commit */
	/* an upload is the image alone: an index or manifest beside an earlier one is
	   that one's (a site comparing indexes would never see the new version) */
	for (int k = 0; rc == 0 && k < NDZ_IMAGES_COMPANIONS; k++) {
		char comp[PATH_MAX];

		if (ndz_images_companion(final, k, comp, sizeof(comp), NULL) == 0)
			unlink(comp);
	}
	if (rc == 0)
		index_beside(c, final, ifd, itmp);
	else if (ifd >= 0) {
		close(ifd);
		unlink(itmp);
	}
	if (rc == 0)
		ndz_master_upload_stored(c->ms, slot);
	if (rc == 0)
		rc = served(c, req->name, final, e);
	ndz_mlock_give(c->lock);
	return rc;
}

/* The connection; *admitted cleared once its place is given back for an upload slot. */
static void serve(const struct ndz_mconn *c, int fd, uint32_t addr, int *admitted)
{
	uint8_t buf[NDZ_SITE_REQ_MAX];
	struct ndz_ctl_req req;
	struct ndz_ctl_rep rep = { .type = NDZ_CTL_UPLOAD };
	struct ndz_upload_stats stats = { 0 };
	struct ndz_master_counters *n = ndz_master_counters(c->ms);
	struct ndz_error e = { 0 };
	struct timeval tv = { 0 };
	char final[PATH_MAX], a[INET_ADDRSTRLEN], msg[NDZ_CTL_MSG_MAX + 1];
	uint64_t limit = 0, t0 = ndz_now_ns();
	unsigned quiet;
	int k, tfd = -1, rc, slot = -1;

	inet_ntop(AF_INET, &addr, a, sizeof(a));
	ndz_mlock_take(c->lock);
	tv.tv_sec = ndz_master_conf(c->ms)->request_timeout;
	quiet = ndz_master_conf(c->ms)->upload_timeout;
	ndz_mlock_give(c->lock);
	/* the first message comes at once or never: a few seconds, not upload-timeout */
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	k = ndz_upload_read_msg(fd, buf, sizeof(buf), ndz_site_req_need, (int)tv.tv_sec * 1000,
				NULL);
	if (k > 0 && ndz_site_is_req(buf, (size_t)k) && c->site) {
		/* a site master fetches, request after request: past its first message
		   it holds no place */
		ndz_mlock_take(c->lock);
		ndz_master_release(c->ms, addr);
		ndz_mlock_give(c->lock);
		*admitted = 0;
		c->site(c->ctx, fd, buf, (size_t)k, addr);
		return;
	}
	rc = k < 0 ? k : ndz_ctl_req_decode(buf, (size_t)k, &req, NULL);
	ndz_mlock_take(c->lock);
	if (rc == 0 && req.type == NDZ_CTL_STATUS) {
		status(c, fd, req.id, addr);
		return;                        /* unlocked there */
	}
	if (rc == NDZ_EINVAL || (rc == 0 && req.type != NDZ_CTL_UPLOAD)) {
		rc = NDZ_EINVAL;
		n->uploads++;
		n->malformed++;
		n->uploads_refused++;
	} else if (rc < 0) {
		n->dropped++;                  /* not ours, or gone quiet before asking */
		if (rc == NDZ_ETIMEDOUT)
			n->tcp_quiet++;
		ndz_mlock_give(c->lock);
		if (rc == NDZ_ETIMEDOUT)
			c->say(c->ctx, 2, "%s said nothing for %ld s; closed", a, (long)tv.tv_sec);
		return;
	} else if ((rc = begin(c, &req, addr, final, &slot, &tfd, &limit, &e)) == 0) {
		/* past its first message, it holds an upload slot instead of a place */
		ndz_master_release(c->ms, addr);
		*admitted = 0;
	}
	ndz_mlock_give(c->lock);
	rep.id = req.id;
	rep.status = (uint16_t)ndz_ctl_status_of(rc);
	if (rc != 0) {
		/* a verdict with its reason (uploaders take DONE as an answer to UPLOAD too) */
		int why = rc == NDZ_ENOIMAGE || rc == NDZ_EDENIED;

		if (c->refused)
			c->refused(ndz_ctl_strstatus(rep.status), a, "may not upload %s: %s%s%s",
				   rc != NDZ_EINVAL ? req.name : "?", ndz_ctl_strstatus(rep.status),
				   e.code ? ": " : "", e.code ? ndz_error_msg(&e) : "");
		else
			c->say(c->ctx, 1, "%s may not upload %s: %s%s%s", a,
			       rc != NDZ_EINVAL ? req.name : "?", ndz_ctl_strstatus(rep.status),
			       why ? ": " : "", why ? ndz_error_msg(&e) : "");
		if (why)
			ndz_mreply_done(fd, req.id, rep.status, ndz_error_msg(&e), NULL);
		else
			ndz_upload_write_msg(fd, &rep, NULL);
		ndz_mreply_drain(fd, c->drain_s);
		return;
	}
	c->say(c->ctx, 1, "%s uploads %s (%llu bytes declared)", a, req.name,
	       (unsigned long long)req.size);
	tv.tv_sec = quiet;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	if (ndz_upload_write_msg(fd, &rep, NULL) != 0)
		rc = ndz_error_set(&e, NDZ_ENET, errno, "%s: connection lost", a);
	else
		rc = store(c, fd, &req, slot, tfd, limit, final, &stats, &e);
	close(tfd);
	ndz_mlock_take(c->lock);
	if (c->tmp[slot][0])
		unlink(c->tmp[slot]);
	c->tmp[slot][0] = 0;
	ndz_master_upload_end(c->ms, slot, rc == 0);
	ndz_mlock_give(c->lock);
	if (rc == 0) {
		snprintf(msg, sizeof(msg), "stored: %u chunks, %llu bytes", stats.chunks,
			 (unsigned long long)stats.bytes);
		c->say(c->ctx, 1, "%s from %s %s as %s (%.1f s)", req.name, a, msg, final,
		       (double)(ndz_now_ns() - t0) / 1e9);
		ndz_mreply_done(fd, req.id, NDZ_CTL_OK, msg, NULL);
		if (c->stored)
			c->stored(c->ctx, req.name, final);
		return;
	}
	if (rc == NDZ_ETIMEDOUT) {     /* "read error: Resource temporarily unavailable" */
		ndz_error_clear(&e);
		ndz_error_set(&e, NDZ_ETIMEDOUT, 0, "nothing received for %ld s, after %llu bytes",
			      (long)tv.tv_sec, (unsigned long long)stats.bytes);
	}
	c->say(c->ctx, 0, "upload of %s from %s rejected: %s", req.name, a, ndz_error_msg(&e));
	ndz_mreply_done(fd, req.id, ndz_ctl_status_of(rc), ndz_error_msg(&e),
			NULL);
	ndz_mreply_drain(fd, c->drain_s);
}

void ndz_mconn_serve(const struct ndz_mconn *c, int fd, uint32_t addr)
{
	int admitted = 1;

	serve(c, fd, addr, &admitted);
	if (!admitted)
		return;
	ndz_mlock_take(c->lock);
	ndz_master_release(c->ms, addr);
	ndz_mlock_give(c->lock);
}
