/*
 * The master's side of an upload (doc/PROTOCOL.md, "Uploads"): every chunk checked
 * as it arrives, before it is written out.
 */
#ifndef NDZ_UPRECEIVE_H
#define NDZ_UPRECEIVE_H

#include <stdint.h>

#include "core/err.h"
#include "core/io.h"

struct ndz_upload_stats {
	uint64_t bytes;                /* written */
	uint32_t chunks;
	uint8_t uuid[16];
};

/*
 * ndz_upload_receive - read an image from in (a stream) and append it to out_fd,
 * checking each chunk before it is written: header and data checksums and padding,
 * one image (UUID, sizes, kind), the index its place says, regions chained from
 * sector 0, one LAST chunk and nothing after it. At most limit bytes (0: no limit);
 * exactly declared bytes when declared is not 0. Returns 0 with *st, or a negative
 * code with e saying why: an image fault (ndz_ctl_status_of: NDZ_CTL_BADIMAGE),
 * NDZ_EQUOTA (past limit), NDZ_ETIMEDOUT (a read on in timed out: EAGAIN) or
 * NDZ_EIO (writing out_fd failed). Nothing is synced; out_fd stays the caller's.
 */
int ndz_upload_receive(struct ndz_io *in, int out_fd, uint64_t limit, uint64_t declared,
		       struct ndz_upload_stats *st, struct ndz_error *e);

/*
 * ndz_upload_index - the content index (doc/FORMAT.md, "The content index") of the
 * image received into the file image (its temporary file, read back whole: what
 * imagekey index makes of it, version 2 pieces for zstd chunks, unsigned: the master
 * holds no signing key), written and synced into a new temporary file of dir for
 * name (ndz_updir_temp of "NAME.index"), whose path goes to tmp (cap bytes), to be
 * committed beside the image when it is. Returns that file's descriptor (the
 * caller's; *chunks: the index's), NDZ_ENOTSUP with e when the image can have none
 * made from its bytes (encrypted or original format: tmp is ""), or another negative
 * code with e (tmp "": nothing is left).
 */
int ndz_upload_index(const char *image, const char *dir, const char *name, char *tmp,
		     size_t cap, uint32_t *chunks, struct ndz_error *e);

#endif
