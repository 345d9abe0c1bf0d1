/* An upload's chunks checked as they arrive, before each is written out. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/file.h"
#include "core/format.h"
#include "core/image.h"
#include "codec/seed.h"
#include "trust/index.h"
#include "trust/verify.h"
#include "updir.h"
#include "upreceive.h"

int ndz_upload_receive(struct ndz_io *in, int out_fd, uint64_t limit, uint64_t declared,
		       struct ndz_upload_stats *st, struct ndz_error *e)
{
	struct ndz_image_walk *w = NULL;
	struct ndz_chunk_hdr h;
	uint8_t *buf = malloc(NDZ_CHUNK_SIZE);
	int rc;

	memset(st, 0, sizeof(*st));
	if (!buf) {
		rc = ndz_error_set(e, NDZ_ENOMEM, 0, "%s: receive buffer", in->name);
		goto out;
	}
	/* the stored-image walk (in order, the image's rules), and the verifier's check
	   of a chunk kept as it is (no keys: its CRC) */
	rc = ndz_image_walk_open(in, NDZ_WALK_ORDER | NDZ_WALK_RULES, &w, e);
	while (rc >= 0 && (rc = ndz_image_walk_next(w, buf, &h, e)) == 1) {
		if ((rc = ndz_verify_stored(NULL, buf, &h, e)) < 0) {
			ndz_error_prefix(e, "%s", in->name);
			break;
		}
		if (limit && st->bytes + NDZ_CHUNK_SIZE > limit) {
			rc = ndz_error_set(e, NDZ_EQUOTA, 0, "%s: chunk %u: past the quota (%llu "
					   "bytes left)", in->name, h.index,
					   (unsigned long long)limit);
			break;
		}
		if (declared && st->bytes + NDZ_CHUNK_SIZE > declared) {
			rc = ndz_error_set(e, NDZ_ERANGE, 0, "%s: chunk %u: more than the %llu bytes "
					   "declared", in->name, h.index,
					   (unsigned long long)declared);
			break;
		}
		rc = ndz_write_all(out_fd, buf, NDZ_CHUNK_SIZE, NDZ_EIO, e, "writing chunk %u",
				   h.index);
		if (rc < 0)
			break;
		if (st->chunks == 0)
			memcpy(st->uuid, h.uuid, 16);
		st->bytes += NDZ_CHUNK_SIZE;
		st->chunks++;
		rc = 0;
	}
	/* a read that timed out (the socket's receive timeout) is the uploader gone quiet */
	if (rc < 0 && e && (e->sys == EAGAIN || e->sys == EWOULDBLOCK))
		rc = e->code = NDZ_ETIMEDOUT;
	if (rc == 0 && declared && st->bytes != declared)
		rc = ndz_error_set(e, NDZ_ERANGE, 0, "%s: %llu bytes, not the %llu declared",
				   in->name, (unsigned long long)st->bytes,
				   (unsigned long long)declared);
out:
	ndz_image_walk_free(w);
	free(buf);
	return rc < 0 ? rc : 0;
}

int ndz_upload_index(const char *image, const char *dir, const char *name, char *tmp,
		     size_t cap, uint32_t *chunks, struct ndz_error *e)
{
	struct ndz_index ix = { 0 };
	struct ndz_io *in = NULL;
	char iname[NAME_MAX + 1];
	uint8_t *enc = NULL;
	size_t len = 0;
	int fd = -1, rc;

	tmp[0] = 0;
	if ((size_t)snprintf(iname, sizeof(iname), "%s.index", name) >= sizeof(iname))
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s.index: name too long", name);
	rc = ndz_io_open_file(image, NDZ_IO_READ | NDZ_IO_SEQUENTIAL, &in, e);
	if (rc == 0)
		rc = ndz_index_build(in, name, &ix, e);
	ndz_io_close(in);
	if (rc == 0)
		rc = ndz_index_encode(&ix, NULL, &enc, &len, e);
	*chunks = ix.chunks;
	ndz_index_release(&ix);
	if (rc == 0 && (fd = rc = ndz_updir_temp(dir, iname, tmp, cap, e)) >= 0) {
		rc = ndz_write_all(fd, enc, len, NDZ_EIO, e, "writing %s", tmp);
		if (rc == 0 && fsync(fd) != 0)
			rc = ndz_error_set(e, NDZ_EIO, errno, "syncing %s", tmp);
	}
	free(enc);
	if (rc < 0 && fd >= 0) {
		close(fd);
		unlink(tmp);
	}
	if (rc < 0)
		tmp[0] = 0;
	return rc < 0 ? rc : fd;
}
