/* Uploads sent on to an S3 object store: the image, its manifest, its index last. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sitestore.h"
#include "codec/seed.h"
#include "core/io.h"
#include "ctl/sitesrc.h"
#include "master/images.h"
#include "trust/index.h"

/* The file at path put as key; a missing file is *none = 1 and 0. */
static int put_file(struct ndz_s3 *s3, const char *key, const char *path, int *none,
		    struct ndz_error *e)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;
	struct stat st;

	*none = 0;
	if (fd < 0 && errno == ENOENT) {
		*none = 1;
		return 0;
	}
	if (fd < 0 || fstat(fd, &st) != 0) {
		rc = ndz_error_set(e, NDZ_EIO, errno, "%s", path);
		if (fd >= 0)
			close(fd);
		return rc;
	}
	rc = ndz_s3_put_fd(s3, key, fd, (uint64_t)st.st_size, e);
	close(fd);
	return rc;
}

/*
 * The content index of the image at path, made now, unsigned, into the store as key;
 * an image that can have none (encrypted, original) has none there either.
 */
static int put_built_index(struct ndz_s3 *s3, const char *key, const char *name,
			   const char *path, struct ndz_error *e)
{
	struct ndz_index ix = { 0 };
	struct ndz_io *io = NULL;
	uint8_t *b = NULL;
	size_t len;
	int rc;

	if ((rc = ndz_io_open_file(path, NDZ_IO_READ, &io, e)) < 0)
		return rc;
	rc = ndz_index_build(io, name, &ix, e);
	ndz_io_close(io);
	if (rc == NDZ_ENOTSUP) {   /* encrypted or original: no index, nor an older one's */
		ndz_index_release(&ix);
		ndz_error_clear(e);
		rc = ndz_s3_delete(s3, key, e);
		if (rc == NDZ_ENOIMAGE) {
			ndz_error_clear(e);
			rc = 0;
		}
		return rc;
	}
	if (rc == 0)
		rc = ndz_index_encode(&ix, NULL, &b, &len, e);
	if (rc == 0)
		rc = ndz_s3_put(s3, key, b, len, e);
	free(b);
	ndz_index_release(&ix);
	return rc;
}

int ndz_sitestore_push(struct ndz_s3 *s3, const char *name, const char *path,
		       struct ndz_error *e)
{
	char key[NDZ_CTL_NAME_MAX + 32], file[PATH_MAX];
	int none, rc;

	if ((rc = ndz_sitesrc_key(name, NDZ_SITE_CHUNKS_OF, key, sizeof(key), e)) != 0 ||
	    (rc = put_file(s3, key, path, &none, e)) != 0)
		return rc;
	if (none)
		return ndz_error_set(e, NDZ_EIO, ENOENT, "%s", path);
	if ((rc = ndz_images_companion(path, 0, file, sizeof(file), e)) != 0 ||
	    (rc = ndz_sitesrc_key(name, NDZ_SITE_MANIFEST, key, sizeof(key), e)) != 0 ||
	    (rc = put_file(s3, key, file, &none, e)) != 0)
		return rc;
	/* an unsigned image: no manifest of an older version may stay beside it */
	if (none && (rc = ndz_s3_delete(s3, key, e)) != 0 && rc != NDZ_ENOIMAGE)
		return rc;
	ndz_error_clear(e);
	if ((rc = ndz_images_companion(path, 1, file, sizeof(file), e)) != 0 ||
	    (rc = ndz_sitesrc_key(name, NDZ_SITE_INDEX, key, sizeof(key), e)) != 0 ||
	    (rc = put_file(s3, key, file, &none, e)) != 0)
		return rc;
	return none ? put_built_index(s3, key, name, path, e) : 0;
}
