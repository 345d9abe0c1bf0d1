/*
 * The admin's image operations (ndzctl images info, remove, rename): the facts of
 * one image, and its files (IMAGE, IMAGE.manifest, IMAGE.index) removed or moved
 * together, never while a session serves it, a task names it or an upload writes
 * it unless forced. An image an "image" line of the configuration defines is not
 * removed or renamed here: the line would stay (and bring the name back at the
 * next reload, without its file); the admin edits the configuration. Images of an
 * imagedir or the upload-dir are their files: removing or renaming those is the
 * whole change, and the caller then rereads the configuration (the table follows
 * the directories). Not locked: the caller serialises (the master's lock, lib/mserve).
 */
#ifndef NDZ_IMAGES_H
#define NDZ_IMAGES_H

#include <stddef.h>

#include "core/json.h"
#include "lab.h"
#include "master.h"
#include "mconf.h"
#include "core/err.h"

#define NDZ_IMAGES_COMPANIONS 2        /* IMAGE.manifest, IMAGE.index */

/*
 * ndz_images_companion - the path of image file path's companion k (0: its signed
 * manifest, 1: its content index) into out (cap bytes). 0, or NDZ_EINVAL (k out of
 * range, or the path does not fit) with e set.
 */
int ndz_images_companion(const char *path, int k, char *out, size_t cap, struct ndz_error *e);

/*
 * ndz_images_unlink - remove the image file path and its companions (those that
 * are there), the image first (it stops being an image before its companions
 * go), then fsync the directory. 0, or NDZ_ENOENT (no file at path) / NDZ_EIO with
 * e naming the file that could not go (those before it are gone).
 */
int ndz_images_unlink(const char *path, struct ndz_error *e);

/*
 * ndz_images_move - rename the image file from and its companions to to (the same
 * file system: each rename atomic, never over an existing file), the companions
 * first so that the image appears under its new name whole, then fsync both
 * directories. Refuses with NDZ_EEXIST when to or one of its companions exists,
 * NDZ_ENOENT when from does not. On a failure the files moved are moved back:
 * 0, or a negative code with e naming the file.
 */
int ndz_images_move(const char *from, const char *to, struct ndz_error *e);

/* What an operation works on; all borrowed. */
struct ndz_images_ctx {
	const struct ndz_mconf *c;     /* the configuration in force */
	struct ndz_master *ms;         /* sessions and uploads; NULL: none known */
	struct ndz_lab *lab;           /* tasks; NULL: none */
	/* reread the configuration after files changed (NULL: the caller will) */
	int (*reload)(void *ctx, struct ndz_error *e);
	void *ctx;
};

/*
 * ndz_images_info - the facts of image name into j, as a table for people (table
 * 1: "key: value" lines) or as JSON: {"name","path","from" ("image", "imagedir",
 * "upload-dir"),"line","bytes" (the file; -1 missing),"chunks","source_bytes"
 * (-1 when the file is no image),"signed","index","manifest_path","index_path",
 * "sessions":[{"pid","group","port","clients","replaced"}],"tasks"}. 0, or
 * NDZ_ENOIMAGE with e set.
 */
int ndz_images_info(const struct ndz_images_ctx *x, const char *name, int table,
		    struct ndz_jbuf *j, struct ndz_error *e);

/*
 * ndz_images_remove / ndz_images_rename - remove image name's files, or move them
 * to newname's (the same directory: NEWNAME.ndz there), then x->reload. Refused
 * with e saying why: NDZ_ENOIMAGE (no such image), NDZ_ENOTSUP (an "image" line
 * defines it: "defined by FILE line N: edit the configuration"), NDZ_EEXIST
 * (rename: newname is an image, or its files exist), NDZ_EBUSY (an upload to
 * either name runs; or without force: a session serves it, or (remove) reload
 * tasks name it). With force, running sessions of it finish with the clients
 * they have from the file they hold open (ndz_master_retire: no new clients; the
 * disk space of a removed image comes back when they end), and remove cancels
 * the reload tasks that name it. Rename moves the reload tasks to newname, forced
 * or not. 0 with the outcome for people in j ("image X removed (3 files); 1
 * session finishes with its 4 clients; 2 reload tasks cancelled").
 */
int ndz_images_remove(const struct ndz_images_ctx *x, const char *name, int force,
		      struct ndz_jbuf *j, struct ndz_error *e);
int ndz_images_rename(const struct ndz_images_ctx *x, const char *name, const char *newname,
		      int force, struct ndz_jbuf *j, struct ndz_error *e);

/*
 * ndz_images_identity - the image at path: its uuid, chunks and source bytes, from
 * its first chunk. 0, or a negative code with e naming the file.
 */
int ndz_images_identity(const char *path, uint8_t uuid[16], uint32_t *chunks,
			uint64_t *source_bytes, struct ndz_error *e);

#endif
