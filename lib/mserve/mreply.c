/* The master's replies on a TCP connection: verdicts, refusals, STATUS, the drain. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "mreply.h"
#include "ctl/upload.h"
#include "core/clock.h"

int ndz_mreply_done(int fd, uint32_t id, unsigned status, const char *msg,
		    struct ndz_error *e)
{
	struct ndz_ctl_rep rep = { .type = NDZ_CTL_DONE, .status = (uint16_t)status, .id = id };

	rep.json = msg;
	rep.json_len = strnlen(msg, NDZ_CTL_MSG_MAX);
	return ndz_upload_write_msg(fd, &rep, e);
}

void ndz_mreply_refuse(int fd, unsigned status)
{
	struct ndz_ctl_rep rep = { .type = NDZ_CTL_UPLOAD, .status = (uint16_t)status };
	uint8_t out[NDZ_CTL_REQ_MAX];

	(void)!recv(fd, out, sizeof(out), MSG_DONTWAIT);
	if (ndz_ctl_rep_encode(&rep, out, sizeof(out), NULL) > 0)
		(void)!send(fd, out, NDZ_CTL_REP_HDR, MSG_DONTWAIT | MSG_NOSIGNAL);
	shutdown(fd, SHUT_WR);
	close(fd);
}

int ndz_mreply_send(int fd, const struct ndz_ctl_rep *r, struct ndz_error *e)
{
	uint8_t out[NDZ_CTL_REP_MAX];
	int n = ndz_ctl_rep_encode(r, out, sizeof(out), e);

	if (n < 0)
		return n;
	if (send(fd, out, (size_t)n, MSG_DONTWAIT | MSG_NOSIGNAL) != n)
		return ndz_error_set(e, NDZ_ENET, errno, "reply not sent whole");
	return 0;
}

void ndz_mreply_drain(int fd, unsigned secs)
{
	uint8_t sink[16384];
	uint64_t end = ndz_now_ns() + secs * NDZ_NS_PER_S;
	struct timeval tv = { .tv_sec = 1 };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	shutdown(fd, SHUT_WR);
	while (ndz_now_ns() < end && read(fd, sink, sizeof(sink)) > 0)
		;
}
