/*
 * Uploading an image to the master over TCP (doc/PROTOCOL.md, "Uploads"): the
 * messages on the stream, and the uploader's side, which streams a file or a pipe
 * and waits for the master's verdict (the master's check of every chunk as it
 * arrives is lib/master/upreceive.h).
 */
#ifndef NDZ_UPLOAD_H
#define NDZ_UPLOAD_H

#include <stddef.h>
#include <stdint.h>

#include "ctl.h"
#include "core/err.h"

/*
 * ndz_upload_read_msg - one control message from the stream fd into buf (cap
 * bytes), its length found with need (ndz_ctl_req_need or ndz_ctl_rep_need), the
 * whole of it within timeout_ms (< 0: each read waits as long as the socket's
 * receive timeout says). Returns the length, NDZ_ESHORTREAD (the peer closed
 * first), NDZ_ETIMEDOUT, NDZ_EPROTO / NDZ_EPROTOVER / NDZ_EINVAL (not one of
 * ours, or longer than cap) or NDZ_ENET, with e (may be NULL) saying so; the
 * caller names the peer (ndz_error_prefix).
 */
int ndz_upload_read_msg(int fd, uint8_t *buf, size_t cap,
			int (*need)(const uint8_t *buf, size_t have, struct ndz_error *e), int timeout_ms,
			struct ndz_error *e);

/*
 * ndz_upload_dial - a TCP connection to host:port within wait_s seconds, blocking,
 * its reads and writes timing out after wait_s (the uploader's and a site's fetches
 * alike). The fd, or NDZ_ETIMEDOUT / NDZ_ENET / NDZ_EINVAL with e naming the master.
 */
int ndz_upload_dial(const char *host, uint16_t port, int wait_s, struct ndz_error *e);

/*
 * ndz_upload_write_msg - the reply r, encoded, onto the stream fd (no SIGPIPE).
 * 0 or NDZ_ENET / the encoder's code, with e (may be NULL) set.
 */
int ndz_upload_write_msg(int fd, const struct ndz_ctl_rep *r, struct ndz_error *e);

/*
 * ndz_upload_send - upload the image read from in_fd (a file or a pipe, read to
 * its end; size bytes when known, else 0) as image name to the master at spec
 * ("HOST[:PORT]", TCP, port NDZ_CTL_PORT by default), waiting at most wait_s
 * seconds for the connection, each answer and each write, and at least 600 s for
 * the verdict after the last byte (the master syncs the image first). Returns 0 once the
 * master said the image is stored (checked, synced, renamed into place). Else a
 * negative code with e saying why: NDZ_EBADMAGIC, before connecting, when in_fd
 * does not start with a chunk header (ours or the original format's; a raw disk);
 * NDZ_EREFUSED when the master refused before
 * the transfer (*refused set to 1: unknown image, denied, busy, quota, too many; a
 * denial names this host's address, and a reason the master gave is quoted)
 * or rejected the image after it (the master's reason); NDZ_ETIMEDOUT, NDZ_ENET,
 * NDZ_EIO (reading in_fd) or NDZ_EINVAL (a bad spec, or a name no
 * image can have: ndz_ctl_valid_name). progress (may be NULL) is called with ctx
 * after each write with the bytes sent so far, and once more with sent_all 1 when
 * the last byte is sent and the verdict awaited.
 */
int ndz_upload_send(const char *spec, const char *name, int in_fd, uint64_t size, int wait_s,
		    void (*progress)(void *ctx, uint64_t sent, int sent_all), void *ctx,
		    int *refused, struct ndz_error *e);

/*
 * ndz_upload_status - ask the master at spec ("HOST[:PORT]") for its status over
 * TCP (the uploads' port: a STATUS reply is large, and TCP's handshake keeps it
 * from being sent to a forged address). The reply is decoded into rep, its bytes
 * kept in buf (cap >= NDZ_CTL_REP_MAX). Returns 0 (status OK), NDZ_EREFUSED with
 * e saying "master HOST:PORT: access denied: no image allows ADDR" (this host's), NDZ_EINVAL (a bad spec or host),
 * NDZ_ETIMEDOUT or NDZ_ENET, within about wait_s seconds.
 */
int ndz_upload_status(const char *spec, int wait_s, uint8_t *buf, size_t cap,
		      struct ndz_ctl_rep *rep, struct ndz_error *e);

#endif
