/*
 * Replacing a file so that a crash leaves the old one or the new one, never a
 * part: the new bytes go to a temporary file beside it, which is flushed, renamed
 * over the name, and the directory flushed. One durability rule for every file the
 * suite replaces (images, manifests, keys, state files): data, file and directory
 * fsync'd; any failure is an error and leaves the old file as it was.
 */
#ifndef NDZ_FILE_H
#define NDZ_FILE_H

#include <stddef.h>
#include <sys/types.h>

#include "err.h"

/*
 * ndz_file_temp - create a temporary file beside path ("PATH.tmp.XXXXXX", mode 0600,
 * O_CLOEXEC) and write its name to tmp (cap bytes). Returns its descriptor, or
 * NDZ_EINVAL (the name does not fit) or NDZ_EIO with e set.
 */
int ndz_file_temp(const char *path, char *tmp, size_t cap, struct ndz_error *e);

/*
 * ndz_file_commit - finish a temporary file from ndz_file_temp: chmod to mode,
 * fsync, close (always, even on failure), rename over path, fsync path's directory.
 * On failure the temporary file is removed and path is untouched unless the rename
 * happened (then only the directory flush failed, and the message says so).
 * Returns 0, or NDZ_EIO with e set.
 */
int ndz_file_commit(int fd, const char *tmp, const char *path, mode_t mode,
		    struct ndz_error *e);

/*
 * ndz_file_replace - path now holds exactly buf (len bytes) with mode, by
 * ndz_file_temp and ndz_file_commit. Returns 0, or a negative code with e set.
 */
int ndz_file_replace(const char *path, const void *buf, size_t len, mode_t mode,
		     struct ndz_error *e);

/*
 * ndz_write_all - the whole of len bytes onto fd: a socket is sent to without
 * SIGPIPE (MSG_NOSIGNAL), anything else is written; EINTR is retried. On failure
 * e gets code with the message from fmt (printf-style, naming what was written)
 * and the failing call's errno (ENOSPC when nothing more could be written).
 * Returns 0, or code with e set.
 */
int ndz_write_all(int fd, const void *buf, size_t len, int code, struct ndz_error *e,
		  const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/*
 * ndz_dir_sync - fsync the directory that holds path (its name made or changed
 * there is then on the disk). Returns 0, or NDZ_EIO with e set.
 */
int ndz_dir_sync(const char *path, struct ndz_error *e);

#endif
