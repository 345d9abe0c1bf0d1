/* The admin's image operations: info, remove, rename, with an image's companion files. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>

#include "images.h"
#include "core/file.h"
#include "core/image.h"
#include "core/io.h"
#include "trust/index.h"
#include "trust/manifest.h"

int ndz_images_identity(const char *path, uint8_t uuid[16], uint32_t *chunks,
			uint64_t *source_bytes, struct ndz_error *e)
{
	struct ndz_io *io = NULL;
	struct ndz_image_reader *r = NULL;
	const struct ndz_chunk_hdr *h;
	int rc;

	if ((rc = ndz_io_open_file(path, NDZ_IO_READ, &io, e)) < 0 ||
	    (rc = ndz_image_reader_open(io, &r, e)) < 0) {
		ndz_io_close(io);
		return rc;
	}
	h = ndz_image_reader_first(r);
	memcpy(uuid, h->uuid, 16);
	*chunks = ndz_image_reader_chunks(r);
	*source_bytes = h->source_bytes;
	ndz_image_reader_free(r);
	ndz_io_close(io);
	return 0;
}

int ndz_images_companion(const char *path, int k, char *out, size_t cap, struct ndz_error *e)
{
	if (k == 0)
		return ndz_manifest_path(path, out, cap, e);
	if (k == 1)
		return ndz_index_path(path, out, cap, e);
	return ndz_error_set(e, NDZ_EINVAL, 0, "%s: no companion %d", path, k);
}

int ndz_images_unlink(const char *path, struct ndz_error *e)
{
	char c[PATH_MAX];

	if (unlink(path) != 0)
		return ndz_error_set(e, errno == ENOENT ? NDZ_ENOENT : NDZ_EIO, errno, "%s", path);
	for (int k = 0; k < NDZ_IMAGES_COMPANIONS; k++) {
		if (ndz_images_companion(path, k, c, sizeof(c), e) != 0)
			return NDZ_EIO;
		if (unlink(c) != 0 && errno != ENOENT)
			return ndz_error_set(e, NDZ_EIO, errno, "%s", c);
	}
	return ndz_dir_sync(path, e);
}

/* rename, never over a file: renameat2's NOREPLACE, or link and unlink where it is not known. */
static int move_one(const char *from, const char *to)
{
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	if (link(from, to) != 0)
		return -1;
	if (unlink(from) != 0) {
		int err = errno;

		unlink(to);
		errno = err;
		return -1;
	}
	return 0;
}

int ndz_images_move(const char *from, const char *to, struct ndz_error *e)
{
	char f[NDZ_IMAGES_COMPANIONS + 1][PATH_MAX], t[NDZ_IMAGES_COMPANIONS + 1][PATH_MAX];
	int moved[NDZ_IMAGES_COMPANIONS + 1] = { 0 }, rc = 0;
	struct stat st;

	/* the companions first (0, 1), the image last (NDZ_IMAGES_COMPANIONS) */
	for (int k = 0; k < NDZ_IMAGES_COMPANIONS; k++)
		if (ndz_images_companion(from, k, f[k], sizeof(f[k]), e) != 0 ||
		    ndz_images_companion(to, k, t[k], sizeof(t[k]), e) != 0)
			return NDZ_EINVAL;
	if ((size_t)snprintf(f[NDZ_IMAGES_COMPANIONS], PATH_MAX, "%s", from) >= PATH_MAX ||
	    (size_t)snprintf(t[NDZ_IMAGES_COMPANIONS], PATH_MAX, "%s", to) >= PATH_MAX)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: path too long", to);
	if (lstat(from, &st) != 0)
		return ndz_error_set(e, errno == ENOENT ? NDZ_ENOENT : NDZ_EIO, errno, "%s", from);
	for (int k = NDZ_IMAGES_COMPANIONS; k >= 0; k--)    /* the image's name first */
		if (lstat(t[k], &st) == 0 || errno != ENOENT)
			return ndz_error_set(e, NDZ_EEXIST, errno == ENOENT ? 0 : errno,
					     "%s: already there", t[k]);
	for (int k = 0; k <= NDZ_IMAGES_COMPANIONS && rc == 0; k++) {
		if (move_one(f[k], t[k]) == 0)
			moved[k] = 1;
		else if (errno != ENOENT || k == NDZ_IMAGES_COMPANIONS)
			rc = ndz_error_set(e, errno == EEXIST ? NDZ_EEXIST : NDZ_EIO, errno,
					   "%s -> %s", f[k], t[k]);
	}
	if (rc != 0)                   /* back as it was: the name either old or new, whole */
		for (int k = NDZ_IMAGES_COMPANIONS; k >= 0; k--)
			if (moved[k])
				move_one(t[k], f[k]);
	if (rc == 0 && (rc = ndz_dir_sync(to, e)) == 0)
		rc = ndz_dir_sync(from, e);
	return rc;
}

static const char *from_word(uint8_t from)
{
	return from == NDZ_MCONF_IMAGEDIR ? "imagedir" : from == NDZ_MCONF_UPLOAD_DIR ?
	       "upload-dir" : "image";
}

static const struct ndz_mconf_image *find(const struct ndz_images_ctx *x, const char *name,
					  struct ndz_error *e)
{
	const struct ndz_mconf_image *im = ndz_mconf_find(x->c, name);

	if (!im)
		ndz_error_set(e, NDZ_ENOIMAGE, 0, "image '%s': no such image", name);
	return im;
}

int ndz_images_info(const struct ndz_images_ctx *x, const char *name, int table,
		    struct ndz_jbuf *j, struct ndz_error *e)
{
	const struct ndz_mconf_image *im = find(x, name, e);
	char mpath[PATH_MAX] = "", ipath[PATH_MAX] = "";
	struct stat st;
	long long bytes;
	uint8_t uuid[16];
	uint32_t chunks = 0;
	uint64_t src = 0;
	int is_image, sig, idx;
	size_t tasks, ns = 0;

	if (!im)
		return NDZ_ENOIMAGE;
	bytes = stat(im->path, &st) == 0 ? (long long)st.st_size : -1;
	is_image = ndz_images_identity(im->path, uuid, &chunks, &src, NULL) == 0;
	sig = ndz_images_companion(im->path, 0, mpath, sizeof(mpath), NULL) == 0 &&
	      stat(mpath, &st) == 0;
	idx = ndz_images_companion(im->path, 1, ipath, sizeof(ipath), NULL) == 0 &&
	      stat(ipath, &st) == 0;
	tasks = x->lab ? ndz_lab_image_tasks(x->lab, name, NULL) : 0;
	if (table) {
		ndz_jbuf_printf(j, "name:       %s\npath:       %s\nfrom:       %s line %u of %s\n",
				im->name, im->path, from_word(im->from), im->line, x->c->fname);
		ndz_jbuf_printf(j, "bytes:      %lld%s\n", bytes, bytes < 0 ? " (no file)" : "");
		if (is_image)
			ndz_jbuf_printf(j, "chunks:     %u\nsize:       %llu bytes (the disk it "
					"restores)\n", chunks, (unsigned long long)src);
		else
			ndz_jbuf_printf(j, "chunks:     - (not an image)\n");
		ndz_jbuf_printf(j, "signed:     %s\nindex:      %s\n", sig ? mpath : "no",
				idx ? ipath : "no");
	} else {
		ndz_jbuf_printf(j, "{\"name\":");
		ndz_jbuf_string(j, im->name);
		ndz_jbuf_printf(j, ",\"path\":");
		ndz_jbuf_string(j, im->path);
		ndz_jbuf_printf(j, ",\"from\":\"%s\",\"line\":%u,\"bytes\":%lld,\"chunks\":%lld,"
				"\"source_bytes\":%lld,\"signed\":%s,\"index\":%s,\"manifest_path\":",
				from_word(im->from), im->line, bytes, is_image ? (long long)chunks : -1,
				is_image ? (long long)src : -1, sig ? "true" : "false",
				idx ? "true" : "false");
		ndz_jbuf_string(j, mpath);
		ndz_jbuf_printf(j, ",\"index_path\":");
		ndz_jbuf_string(j, ipath);
		ndz_jbuf_printf(j, ",\"sessions\":[");
	}
	for (size_t i = 0; x->ms && i < NDZ_MASTER_SESSIONS; i++) {
		const struct ndz_master_session *s = ndz_master_session(x->ms, i);
		char g[INET_ADDRSTRLEN];

		if (s->pid <= 0 || strcmp(s->image, name) != 0)
			continue;
		inet_ntop(AF_INET, &s->group, g, sizeof(g));
		if (table)
			ndz_jbuf_printf(j, "session:    frisbeed %d on %s port %u, %llu clients%s\n",
					s->pid, g, s->port, (unsigned long long)s->clients,
					s->replaced ? " (finishing: no new clients)" : "");
		else
			ndz_jbuf_printf(j, "%s{\"pid\":%d,\"group\":\"%s\",\"port\":%u,\"clients\":%llu,"
					"\"replaced\":%s}", ns ? "," : "", s->pid, g, s->port,
					(unsigned long long)s->clients, s->replaced ? "true" : "false");
		ns++;
	}
	if (table)
		ndz_jbuf_printf(j, "%stasks:      %zu node%s to reload it\n", ns ? "" :
				"sessions:   none\n", tasks, tasks == 1 ? "" : "s");
	else
		ndz_jbuf_printf(j, "],\"tasks\":%zu}", tasks);
	return 0;
}

/* May name's files change? 0, or the refusal in e. */
static int may_change(const struct ndz_images_ctx *x, const struct ndz_mconf_image *im,
		      int force, int removing, const char *verb, struct ndz_error *e)
{
	size_t ns = x->ms ? ndz_master_serving(x->ms, im->name) : 0;
	size_t tasks = x->lab && removing ? ndz_lab_image_tasks(x->lab, im->name, NULL) : 0;

	if (im->from == NDZ_MCONF_IMAGE_LINE)
		return ndz_error_set(e, NDZ_ENOTSUP, 0, "image '%s' is defined by %s line %u: edit "
				     "the configuration to %s it (then reload: SIGHUP)", im->name,
				     x->c->fname, im->line, verb);
	if (x->ms && ndz_master_uploading(x->ms, im->name))
		return ndz_error_set(e, NDZ_EBUSY, 0, "image '%s': an upload to it is running",
				     im->name);
	if (ns && !force)
		return ndz_error_set(e, NDZ_EBUSY, 0, "image '%s': %zu session%s serve%s it now "
				     "(--force: %s it anyway; the session%s finish%s with the "
				     "clients %s)", im->name, ns, ns == 1 ? "" : "s",
				     ns == 1 ? "s" : "", verb, ns == 1 ? "" : "s",
				     ns == 1 ? "es" : "", ns == 1 ? "it has" : "they have");
	if (tasks && !force)
		return ndz_error_set(e, NDZ_EBUSY, 0, "image '%s': %zu node%s %s a task to reload "
				     "it (cancel %s, or --force: %s it and cancel %s)", im->name,
				     tasks, tasks == 1 ? "" : "s", tasks == 1 ? "has" : "have",
				     tasks == 1 ? "it" : "them", verb, tasks == 1 ? "it" : "them");
	return 0;
}

/* After the files changed: sessions, tasks, the configuration reread; the outcome in j. */
static int after(const struct ndz_images_ctx *x, const char *name, const char *to,
		 struct ndz_jbuf *j, struct ndz_error *e)
{
	size_t ns = x->ms ? ndz_master_retire(x->ms, name) : 0;
	size_t tasks = x->lab ? ndz_lab_image_tasks(x->lab, name, to ? to : "") : 0;
	struct ndz_error re = { 0 };

	if (ns)
		ndz_jbuf_printf(j, "; %zu session%s of '%s' finish%s with %s clients, no new ones",
				ns, ns == 1 ? "" : "s", name, ns == 1 ? "es" : "", ns == 1 ? "its" :
				"their");
	if (tasks)
		ndz_jbuf_printf(j, "; %zu reload task%s %s", tasks, tasks == 1 ? "" : "s",
				to ? "now name it" : "cancelled");
	if (x->reload && x->reload(x->ctx, &re) != 0)
		return ndz_error_set(e, NDZ_EIO, 0, "%s; but the configuration could not be "
				     "reread (%s): the master still lists '%s' until it is fixed "
				     "and reloaded", j->p, ndz_error_msg(&re), name);
	return 0;
}

int ndz_images_remove(const struct ndz_images_ctx *x, const char *name, int force,
		      struct ndz_jbuf *j, struct ndz_error *e)
{
	const struct ndz_mconf_image *im = find(x, name, e);
	char path[PATH_MAX], n[NDZ_CTL_NAME_MAX + 1];
	int rc;

	if (!im)
		return NDZ_ENOIMAGE;
	if ((rc = may_change(x, im, force, 1, "remove", e)) != 0)
		return rc;
	/* the configuration (and im with it) may be replaced by the reload */
	snprintf(path, sizeof(path), "%s", im->path);
	snprintf(n, sizeof(n), "%s", name);
	if ((rc = ndz_images_unlink(path, e)) != 0) {
		ndz_error_prefix(e, "image '%s'", n);
		return rc;
	}
	ndz_jbuf_printf(j, "image %s removed (%s and its companions)", n, path);
	return after(x, n, NULL, j, e);
}

int ndz_images_rename(const struct ndz_images_ctx *x, const char *name, const char *newname,
		      int force, struct ndz_jbuf *j, struct ndz_error *e)
{
	const struct ndz_mconf_image *im = find(x, name, e);
	char from[PATH_MAX], to[PATH_MAX], n[NDZ_CTL_NAME_MAX + 1], nn[NDZ_CTL_NAME_MAX + 1];
	const char *slash;
	int rc;

	if (!im)
		return NDZ_ENOIMAGE;
	if (!ndz_ctl_valid_name(newname) || newname[0] == '.')
		return ndz_error_set(e, NDZ_EINVAL, 0, "new name '%s': not " NDZ_CTL_NAME_RULE
				     " (not starting with '.')", newname);
	if (ndz_mconf_find(x->c, newname))
		return ndz_error_set(e, NDZ_EEXIST, 0, "image '%s' already exists", newname);
	if (x->ms && ndz_master_uploading(x->ms, newname))
		return ndz_error_set(e, NDZ_EBUSY, 0, "image '%s': an upload to it is running",
				     newname);
	if ((rc = may_change(x, im, force, 0, "rename", e)) != 0)
		return rc;
	slash = strrchr(im->path, '/');
	snprintf(from, sizeof(from), "%s", im->path);
	if ((size_t)snprintf(to, sizeof(to), "%.*s%s.ndz", slash ? (int)(slash - im->path + 1) : 0,
			     im->path, newname) >= sizeof(to))
		return ndz_error_set(e, NDZ_EINVAL, 0, "image '%s': path too long", newname);
	snprintf(n, sizeof(n), "%s", name);
	snprintf(nn, sizeof(nn), "%s", newname);
	if ((rc = ndz_images_move(from, to, e)) != 0) {
		ndz_error_prefix(e, "image '%s'", n);
		return rc;
	}
	ndz_jbuf_printf(j, "image %s renamed %s (%s and its companions)", n, nn, to);
	return after(x, n, nn, j, e);
}
