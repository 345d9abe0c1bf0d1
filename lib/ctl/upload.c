/* Uploads over TCP, the wire and the uploader's side: it streams and waits for the verdict
   (the master's check of the chunks is lib/master/upreceive). */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "core/clock.h"
#include "core/file.h"
#include "core/format.h"
#include "core/image.h"
#include "core/orig.h"
#include "upload.h"

#define VERDICT_S 600                  /* the least wait for the verdict, seconds */

static int read_msg(int fd, uint8_t *buf, size_t cap,
		    int (*need)(const uint8_t *buf, size_t have, struct ndz_error *e), int timeout_ms)
{
	uint64_t end = ndz_now_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
	size_t have = 0;
	int want;

	while ((want = need(buf, have, NULL)) > 0 && (size_t)want > have) {
		ssize_t n;

		if ((size_t)want > cap)
			return NDZ_EINVAL;
		if (timeout_ms >= 0) {
			/* the whole message within timeout_ms, however it is dribbled */
			struct pollfd p = { .fd = fd, .events = POLLIN };
			uint64_t now = ndz_now_ms();

			if (now >= end)
				return NDZ_ETIMEDOUT;
			if (poll(&p, 1, (int)(end - now)) < 0 && errno != EINTR)
				return NDZ_ENET;
			if (!p.revents)
				continue;
		}
		n = timeout_ms >= 0 ? recv(fd, buf + have, (size_t)want - have, MSG_DONTWAIT) :
				      read(fd, buf + have, (size_t)want - have);
		if (n < 0 && (errno == EINTR ||
			      (timeout_ms >= 0 && (errno == EAGAIN || errno == EWOULDBLOCK))))
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return NDZ_ETIMEDOUT;
		if (n < 0)
			return NDZ_ENET;
		if (n == 0)
			return NDZ_ESHORTREAD;
		have += (size_t)n;
	}
	return want;
}

int ndz_upload_read_msg(int fd, uint8_t *buf, size_t cap,
			int (*need)(const uint8_t *buf, size_t have, struct ndz_error *e), int timeout_ms,
			struct ndz_error *e)
{
	int err, n = read_msg(fd, buf, cap, need, timeout_ms);

	err = errno;
	if (n == NDZ_ESHORTREAD)
		ndz_error_set(e, n, 0, "closed before its message was whole");
	else if (n == NDZ_ETIMEDOUT)
		ndz_error_set(e, n, 0, "no whole message in time");
	else if (n == NDZ_ENET)
		ndz_error_set(e, n, err, "reading a message");
	else if (n < 0)
		ndz_error_set(e, n, 0, "not a message of ours");
	return n;
}

int ndz_upload_write_msg(int fd, const struct ndz_ctl_rep *r, struct ndz_error *e)
{
	uint8_t out[NDZ_CTL_REP_HDR + 2 + NDZ_CTL_MSG_MAX];
	int n = ndz_ctl_rep_encode(r, out, sizeof(out), e);

	if (n < 0)
		return n;
	return ndz_write_all(fd, out, (size_t)n, NDZ_ENET, e, "sending a reply");
}

static void set_timeouts(int fd, int wait_s)
{
	struct timeval tv = { .tv_sec = wait_s };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

/* A TCP connection to host:port within wait_s seconds; the fd or a negative code. */
static int dial(const char *host, uint16_t port, int wait_s, struct ndz_error *e)
{
	struct sockaddr_in to;
	struct pollfd p;
	int fd, err = 0;
	socklen_t el = sizeof(err);

	if ((fd = ndz_ctl_resolve(host, port, &to, e)) < 0)
		return fd;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return ndz_error_set(e, NDZ_ENET, errno, "socket");
	if (connect(fd, (struct sockaddr *)&to, sizeof(to)) != 0 && errno != EINPROGRESS) {
		err = errno;
	} else {
		p.fd = fd;
		p.events = POLLOUT;
		if (poll(&p, 1, wait_s * 1000) <= 0)
			err = ETIMEDOUT;
		else if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) != 0)
			err = errno;
	}
	if (err) {
		close(fd);
		return ndz_error_set(e, err == ETIMEDOUT ? NDZ_ETIMEDOUT : NDZ_ENET, err,
				     "master %s:%u: connect", host, port);
	}
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
	set_timeouts(fd, wait_s);
	return fd;
}

/* The address the connection fd goes from, dotted into buf. 0 or -1. */
int ndz_upload_dial(const char *host, uint16_t port, int wait_s, struct ndz_error *e)
{
	return dial(host, port, wait_s, e);
}

static int local_addr(int fd, char *buf, size_t cap)
{
	struct sockaddr_in me;
	socklen_t ml = sizeof(me);

	if (getsockname(fd, (struct sockaddr *)&me, &ml) != 0 || me.sin_family != AF_INET)
		return -1;
	return inet_ntop(AF_INET, &me.sin_addr, buf, (socklen_t)cap) ? 0 : -1;
}

/* The master's verdict after (or instead of) the image. */
static int read_done(int fd, const char *host, uint16_t port, const char *name,
		     struct ndz_error *e)
{
	uint8_t buf[NDZ_CTL_REP_HDR + 2 + NDZ_CTL_MSG_MAX];
	struct ndz_ctl_rep rep;
	int n = ndz_upload_read_msg(fd, buf, sizeof(buf), ndz_ctl_rep_need, -1, NULL);

	if (n == NDZ_ETIMEDOUT)
		return ndz_error_set(e, n, 0, "master %s:%u: image '%s': no verdict in time", host,
				     port, name);
	if (n < 0 || ndz_ctl_rep_decode(buf, (size_t)n, &rep, NULL) != 0 || rep.type != NDZ_CTL_DONE)
		return ndz_error_set(e, NDZ_ENET, 0, "master %s:%u: image '%s': connection lost "
				     "before the master's verdict", host, port, name);
	if (rep.status == NDZ_CTL_OK)
		return 0;
	return ndz_error_set(e, NDZ_EREFUSED, 0, "master %s:%u: image '%s': %s%s%.*s", host, port,
			     name, ndz_ctl_strstatus(rep.status), rep.json_len ? ": " : "",
			     (int)rep.json_len, rep.json);
}

/*
 * The first NDZ_HDR_SIZE bytes of in_fd into buf (*got of them), checked to start
 * an image: a chunk header of ours or of the original format. 0, NDZ_EBADMAGIC
 * or NDZ_EIO with e saying why.
 */
static int read_head(int in_fd, uint8_t *buf, size_t *got, struct ndz_error *e)
{
	struct ndz_chunk_hdr h;
	int rc;

	*got = 0;
	while (*got < NDZ_HDR_SIZE) {
		ssize_t n = read(in_fd, buf + *got, NDZ_HDR_SIZE - *got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return ndz_error_set(e, NDZ_EIO, errno, "reading the image");
		if (n == 0)
			break;
		*got += (size_t)n;
	}
	if (*got == 0)
		return ndz_error_set(e, NDZ_EBADMAGIC, 0, "empty, not an image; nothing sent");
	if (ndz_orig_probe(buf, *got, NULL) > 0)
		return 0;
	rc = *got < NDZ_HDR_SIZE ? NDZ_EBADMAGIC : ndz_hdr_decode(buf, &h, NULL);
	if (rc == NDZ_EBADMAGIC)
		return ndz_error_set(e, rc, 0, "not an image (no chunk header at its start, "
				     "as a raw disk has); make one with imagezip; nothing sent");
	if (rc < 0)
		return ndz_error_set(e, NDZ_EBADMAGIC, 0, "not an image (its first chunk header: %s); "
				     "nothing sent", ndz_strerror(rc));
	return 0;
}

int ndz_upload_send(const char *spec, const char *name, int in_fd, uint64_t size, int wait_s,
		    void (*progress)(void *ctx, uint64_t sent, int sent_all), void *ctx,
		    int *refused, struct ndz_error *e)
{
	struct ndz_ctl_req req = { .type = NDZ_CTL_UPLOAD, .size = size };
	struct ndz_ctl_rep rep;
	uint8_t msg[NDZ_CTL_REQ_MAX], *buf = NULL;
	uint64_t sent = 0;
	char host[256];
	uint16_t port;
	size_t head = 0;
	int fd, n, rc = 0;

	*refused = 0;
	if (ndz_ctl_hostport(spec, NDZ_CTL_PORT, host, sizeof(host), &port, NULL) != 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "bad master address '%s' (HOST[:PORT])", spec);
	if (!ndz_ctl_valid_name(name))
		return ndz_error_set(e, NDZ_EINVAL, 0, "'%s' is not a valid image name (%s)", name,
				     NDZ_CTL_NAME_RULE);
	strcpy(req.name, name);
	n = ndz_ctl_req_encode(&req, msg, sizeof(msg), NULL);
	if (n < 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "bad image name '%s'", name);
	/*
	 * Its first chunk header before anything goes: a raw disk is "not an image"
	 * here, not refused by the master for its size. Those bytes go first below.
	 */
	buf = malloc(NDZ_CHUNK_SIZE);
	if (!buf)
		return ndz_error_set(e, NDZ_ENOMEM, 0, NULL);
	if ((rc = read_head(in_fd, buf, &head, e)) < 0) {
		free(buf);
		return rc;
	}
	if ((fd = dial(host, port, wait_s, e)) < 0) {
		free(buf);
		return fd;
	}
	rc = ndz_write_all(fd, msg, (size_t)n, NDZ_ENET, e, "master %s:%u: send", host, port);
	if (rc < 0)
		goto out;
	n = ndz_upload_read_msg(fd, msg, sizeof(msg), ndz_ctl_rep_need, -1, NULL);
	if (n < 0 || ndz_ctl_rep_decode(msg, (size_t)n, &rep, NULL) != 0 ||
	    (rep.type != NDZ_CTL_UPLOAD && rep.type != NDZ_CTL_DONE)) {
		rc = ndz_error_set(e, n == NDZ_ETIMEDOUT ? n : NDZ_ENET, 0,
				   "master %s:%u: %s", host, port,
				   n == NDZ_ETIMEDOUT ? "no answer" : "no sensible answer");
		goto out;
	}
	if (rep.status != NDZ_CTL_OK) {
		char me[64] = "this host's address";

		*refused = 1;
		if (rep.type == NDZ_CTL_DONE && rep.json_len) /* the master says why */
			rc = ndz_error_set(e, NDZ_EREFUSED, 0, "master %s:%u: image '%s': %s: %.*s",
					   host, port, name, ndz_ctl_strstatus(rep.status),
					   (int)rep.json_len, rep.json);
		else if (rep.status == NDZ_CTL_DENIED && local_addr(fd, me, sizeof(me)) == 0)
			rc = ndz_error_set(e, NDZ_EREFUSED, 0, "master %s:%u: image '%s': %s: no "
					   "upload rule matches %s for image '%s'", host, port, name,
					   ndz_ctl_strstatus(rep.status), me, name);
		else
			rc = ndz_error_set(e, NDZ_EREFUSED, 0, "master %s:%u: image '%s': %s", host,
					   port, name, ndz_ctl_strstatus(rep.status));
		goto out;
	}
	if (head && ndz_write_all(fd, buf, head, NDZ_ENET, NULL, NULL) != 0)
		head = 0;              /* the master has answered: hear why below */
	sent = head;
	for (;;) {
		/* the master answering now means it has rejected the image: hear why */
		struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = in_fd, .events = POLLIN } };
		ssize_t got;

		if (poll(p, 2, -1) < 0 && errno != EINTR) {
			rc = ndz_error_set(e, NDZ_EIO, errno, "poll");
			goto out;
		}
		if (p[0].revents)
			break;
		if (!p[1].revents)
			continue;
		got = read(in_fd, buf, NDZ_CHUNK_SIZE);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0) {
			/* closing without the rest: the master sees an image cut short */
			rc = ndz_error_set(e, NDZ_EIO, errno, "reading the image");
			goto out;
		}
		if (got == 0 || ndz_write_all(fd, buf, (size_t)got, NDZ_ENET, NULL, NULL) != 0)
			break;
		sent += (uint64_t)got;
		if (progress)
			progress(ctx, sent, 0);
	}
	shutdown(fd, SHUT_WR);
	if (progress)
		progress(ctx, sent, 1);
	/* the verdict follows the master's fsync of the whole image: allow for slow disks */
	set_timeouts(fd, wait_s < VERDICT_S ? VERDICT_S : wait_s);
	rc = read_done(fd, host, port, name, e);
out:
	free(buf);
	close(fd);
	return rc;
}

int ndz_upload_status(const char *spec, int wait_s, uint8_t *buf, size_t cap,
		      struct ndz_ctl_rep *rep, struct ndz_error *e)
{
	struct ndz_ctl_req req = { .type = NDZ_CTL_STATUS, .id = 1 };
	uint8_t msg[NDZ_CTL_REQ_MAX];
	char host[256], me[64];
	uint16_t port;
	int fd, n, rc = 0;

	if (ndz_ctl_hostport(spec, NDZ_CTL_PORT, host, sizeof(host), &port, NULL) != 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "bad master address '%s' (HOST[:PORT])", spec);
	n = ndz_ctl_req_encode(&req, msg, sizeof(msg), NULL);
	if (n < 0)
		return ndz_error_set(e, n, 0, "status request");
	if ((fd = dial(host, port, wait_s, e)) < 0)
		return fd;
	rc = ndz_write_all(fd, msg, (size_t)n, NDZ_ENET, e, "master %s:%u: send", host, port);
	if (rc < 0)
		goto out;
	n = ndz_upload_read_msg(fd, buf, cap, ndz_ctl_rep_need, -1, NULL);
	/* a refusal before the master read the request comes as an UPLOAD reply */
	if (n < 0 || ndz_ctl_rep_decode(buf, (size_t)n, rep, NULL) != 0 ||
	    (rep->type != NDZ_CTL_STATUS && (rep->type != NDZ_CTL_UPLOAD || rep->status == NDZ_CTL_OK))) {
		rc = ndz_error_set(e, n == NDZ_ETIMEDOUT ? n : NDZ_ENET, 0, "master %s:%u: %s", host,
				   port, n == NDZ_ETIMEDOUT ? "no answer" : "no sensible answer");
		goto out;
	}
	if (rep->status == NDZ_CTL_DENIED && local_addr(fd, me, sizeof(me)) == 0)
		rc = ndz_error_set(e, NDZ_EREFUSED, 0, "master %s:%u: %s: no image allows %s",
				   host, port, ndz_ctl_strstatus(rep->status), me);
	else if (rep->status != NDZ_CTL_OK)
		rc = ndz_error_set(e, NDZ_EREFUSED, 0, "master %s:%u: %s", host, port,
				   ndz_ctl_strstatus(rep->status));
out:
	close(fd);
	return rc;
}
