/*
 * An upload sink: an image written in order goes to a master (mfrisbeed) over the
 * upload exchange (doc/PROTOCOL.md, "Uploads") instead of into a file, so that a
 * capture (imagezip --upload) is one process whose result is the master's verdict.
 */
#ifndef NDZ_UPSINK_H
#define NDZ_UPSINK_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

struct ndz_upsink;

/*
 * ndz_upsink_open - start uploading an image as name to the master at spec
 * ("HOST[:PORT]", TCP port NDZ_CTL_PORT by default), size bytes long when known,
 * else 0 (the exchange allows an unknown size, as for a pipe: the master then
 * checks its quota chunk by chunk). wait_s bounds the connection, each answer and
 * each write, as ndz_upload_send's does. The connection is made once the image's
 * first chunk header was written (ndz_upload_send checks that it starts an image).
 * Returns 0 with *out (free with ndz_upsink_finish), or NDZ_EINVAL (a bad spec or
 * a name no image can have), NDZ_ENOMEM or NDZ_ENET with e saying why.
 */
int ndz_upsink_open(const char *spec, const char *name, uint64_t size, int wait_s,
		    struct ndz_upsink **out, struct ndz_error *e);

/*
 * ndz_upsink_fd - the descriptor the image is written to, in order, from the
 * start (a stream socket: no seeking). Owned by the sink. Once the upload ended
 * early (the master rejected the image or went away), writes fail with EPIPE:
 * a writer ignores SIGPIPE or writes with ndz_upsink_write.
 */
int ndz_upsink_fd(const struct ndz_upsink *u);

/*
 * ndz_upsink_write - write len bytes of the image (no SIGPIPE). Returns 0, or,
 * when the upload ended early, its error (the master's reason) in e; NDZ_ENET
 * when the write failed for another reason.
 */
int ndz_upsink_write(struct ndz_upsink *u, const void *buf, size_t len, struct ndz_error *e);

/*
 * ndz_upsink_finish - end the upload and free u (NULL: returns 0).
 * cancel 0: the whole image was written; the end is sent and the master's verdict
 * awaited. Returns 0 only when the master said the image is stored (checked,
 * synced, in place); else the negative code ndz_upload_send gives, with e saying
 * why (the master's reason quoted) and *refused (may be NULL) 1 when the master
 * refused before the transfer began.
 * cancel 1: the writer failed. When the upload had already ended by itself, its
 * error is returned as above (it is why the writes failed). Else a stray byte
 * goes after what was written, so that the master sees a truncated chunk, or bytes
 * after the last chunk, and stores nothing even when the whole image had gone;
 * NDZ_ECANCELED is returned with e saying so.
 */
int ndz_upsink_finish(struct ndz_upsink *u, int cancel, int *refused, struct ndz_error *e);

#endif
