/*
 * The master's replies on a TCP connection (doc/PROTOCOL.md, "Uploads"): a
 * verdict, a refusal before the first message, STATUS; and the drain after a
 * rejection, so that the peer reads the verdict before the connection goes.
 */
#ifndef NDZ_MREPLY_H
#define NDZ_MREPLY_H

#include <stdint.h>

#include "ctl/ctl.h"

/*
 * ndz_mreply_done - a DONE reply with status and msg (cut to NDZ_CTL_MSG_MAX) onto
 * the stream fd. 0 or NDZ_ENET with e (may be NULL) set.
 */
int ndz_mreply_done(int fd, uint32_t id, unsigned status, const char *msg,
		    struct ndz_error *e);

/*
 * ndz_mreply_refuse - refuse a connection before its first message: what it sent
 * so far is read (unread data would reset it), an UPLOAD reply header with status
 * is sent without waiting, then fd is shut for writing and closed.
 */
void ndz_mreply_refuse(int fd, unsigned status);

/*
 * ndz_mreply_send - r encoded onto fd at once (no waiting, no SIGPIPE). 0, or
 * NDZ_ENET when it was not sent whole, or the encoder's code, with e (may be
 * NULL) set.
 */
int ndz_mreply_send(int fd, const struct ndz_ctl_rep *r, struct ndz_error *e);

/*
 * ndz_mreply_drain - shut fd for writing and read what the peer still sends, for
 * at most secs seconds (then the caller closes it).
 */
void ndz_mreply_drain(int fd, unsigned secs);

#endif
