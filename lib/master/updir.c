/* The upload directory: its usage, the uploads' temporary files and stale ones. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "updir.h"

uint64_t ndz_updir_usage(const char *dir, const char *replaced)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	struct stat st, rst;
	uint64_t sum = 0;
	int have_r = stat(replaced, &rst) == 0;

	while (d && (de = readdir(d))) {
		if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode) ||
		    (have_r && st.st_dev == rst.st_dev && st.st_ino == rst.st_ino))
			continue;
		sum += (uint64_t)st.st_size;
	}
	if (d)
		closedir(d);
	return sum;
}

void ndz_updir_clean(const char *dir, void (*removed)(void *ctx, const char *name), void *ctx)
{
	DIR *d = dir ? opendir(dir) : NULL;
	struct dirent *de;

	while (d && (de = readdir(d)))
		if (strncmp(de->d_name, NDZ_UPDIR_TMP, strlen(NDZ_UPDIR_TMP)) == 0 &&
		    unlinkat(dirfd(d), de->d_name, 0) == 0 && removed)
			removed(ctx, de->d_name);
	if (d)
		closedir(d);
}

int ndz_updir_temp(const char *dir, const char *name, char *tmp, size_t cap,
		   struct ndz_error *e)
{
	int fd, n = snprintf(tmp, cap, "%s/" NDZ_UPDIR_TMP "%s.XXXXXX", dir, name);

	if (n < 0 || (size_t)n >= cap) {
		if (cap)
			tmp[0] = 0;
		return ndz_error_set(e, NDZ_EIO, 0, "%s: path too long", dir);
	}
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		ndz_error_set(e, NDZ_EIO, errno, "%s", tmp);
		tmp[0] = 0;
		return NDZ_EIO;
	}
	fchmod(fd, 0644);
	return fd;
}
