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

#endif
