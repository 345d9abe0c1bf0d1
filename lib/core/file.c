/* Replacing a file whole: temporary file, fsync, rename, directory fsync (file.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file.h"

int ndz_file_temp(const char *path, char *tmp, size_t cap, struct ndz_error *e)
{
	int n = snprintf(tmp, cap, "%s.tmp.XXXXXX", path);
	int fd;

	if (n < 0 || (size_t)n >= cap)
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: name too long", path);
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0)
		return ndz_error_set(e, NDZ_EIO, errno, "%s: cannot create a temporary file", path);
	return fd;
}

/* what: how the message names the directory ("its directory") */
static int dir_sync(const char *path, const char *what, struct ndz_error *e)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	int dfd, rc = 0;

	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else if ((size_t)(slash - path) >= sizeof(dir))
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: name too long", path);
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return ndz_error_set(e, NDZ_EIO, errno, "%s: cannot open its directory %s", path, dir);
	if (fsync(dfd) < 0)
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s: %s %s could not be flushed",
				   path, what, dir);
	close(dfd);
	return rc;
}

int ndz_dir_sync(const char *path, struct ndz_error *e)
{
	return dir_sync(path, "its directory", e);
}

int ndz_file_commit(int fd, const char *tmp, const char *path, mode_t mode,
		    struct ndz_error *e)
{
	int rc = 0;

	if (fchmod(fd, mode) < 0)
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s: cannot set its mode", tmp);
	else if (fsync(fd) < 0)
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s: flush failed", tmp);
	if (close(fd) < 0 && rc == 0)
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s: close failed", tmp);
	if (rc == 0 && rename(tmp, path) < 0)
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s: cannot rename %s to it", path, tmp);
	if (rc < 0) {
		unlink(tmp);
		return rc;
	}
	return dir_sync(path, "renamed into place, but its directory", e);
}

int ndz_write_all(int fd, const void *buf, size_t len, int code, struct ndz_error *e,
		  const char *fmt, ...)
{
	const uint8_t *p = buf;
	va_list ap;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == ENOTSOCK)
			n = write(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n == 0)
			errno = ENOSPC;
		if (n <= 0) {
			va_start(ap, fmt);
			ndz_error_vset(e, code, errno, fmt, ap);
			va_end(ap);
			return code;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ndz_file_replace(const char *path, const void *buf, size_t len, mode_t mode,
		     struct ndz_error *e)
{
	char tmp[PATH_MAX];
	int fd = ndz_file_temp(path, tmp, sizeof(tmp), e), rc;

	if (fd < 0)
		return fd;
	rc = ndz_write_all(fd, buf, len, NDZ_EIO, e, "%s: write error", tmp);
	if (rc < 0) {
		close(fd);
		unlink(tmp);
		return rc;
	}
	return ndz_file_commit(fd, tmp, path, mode, e);
}
