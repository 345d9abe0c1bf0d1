/* The lab's wire from the other end: an admin's call, a node's call, and the MAC and task
   names both ends spell. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "core/clock.h"
#include "core/fields.h"
#include "labcall.h"

int ndz_labcall_parse_mac(const char *s, uint8_t mac[6], struct ndz_error *e)
{
	if (strlen(s) != 17)
		goto bad;
	for (int i = 0; i < 6; i++) {
		if (ndz_hex_decode(s + 3 * i, &mac[i], 1, NULL) ||
		    (i < 5 && s[3 * i + 2] != ':' && s[3 * i + 2] != '-'))
			goto bad;
	}
	return 0;
bad:
	return ndz_error_set(e, NDZ_EINVAL, 0, "bad MAC address '%.40s' (aa:bb:cc:dd:ee:ff)", s);
}

void ndz_labcall_format_mac(const uint8_t mac[6], char *buf, size_t cap)
{
	snprintf(buf, cap, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3],
		 mac[4], mac[5]);
}

static const char *const tasks[] = { "none", "reload", "capture", "local", "wait" };

const char *ndz_labcall_strtask(unsigned task)
{
	return task < 5 ? tasks[task] : "?";
}

/* Read exactly n bytes by deadline end (ms); 0 or -1. */
int ndz_labcall_read_by(int fd, uint8_t *b, size_t n, uint64_t end)
{
	size_t have = 0;

	while (have < n) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		uint64_t now = ndz_now_ms();
		ssize_t r;

		if (now >= end || poll(&p, 1, (int)(end - now)) <= 0)
			return -1;
		r = read(fd, b + have, n - have);
		if (r <= 0 && !(r < 0 && (errno == EINTR || errno == EAGAIN)))
			return -1;
		if (r > 0)
			have += (size_t)r;
	}
	return 0;
}

int ndz_labcall_write_by(int fd, const uint8_t *b, size_t n, uint64_t end)
{
	while (n) {
		struct pollfd p = { .fd = fd, .events = POLLOUT };
		uint64_t now = ndz_now_ms();
		ssize_t w;

		if (now >= end || poll(&p, 1, (int)(end - now)) <= 0)
			return -1;
		w = write(fd, b, n);
		if (w < 0 && errno != EINTR && errno != EAGAIN)
			return -1;
		if (w > 0) {
			b += w;
			n -= (size_t)w;
		}
	}
	return 0;
}


static int connect_to(const char *where, struct ndz_error *e)
{
	int fd;

	if (strncmp(where, "tcp:", 4) == 0) {
		struct sockaddr_in sa;
		char host[256];
		uint16_t port;

		if (ndz_ctl_hostport(where + 4, 0, host, sizeof(host), &port, NULL) != 0 || !port)
			return ndz_error_set(e, NDZ_EINVAL, 0, "bad admin address '%s' (tcp:HOST:PORT)",
					     where);
		if (ndz_ctl_resolve(host, port, &sa, e) < 0)
			return NDZ_EINVAL;
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			int err = errno;

			if (fd >= 0)
				close(fd);
			return ndz_error_set(e, NDZ_ENET, err, "master %s", where + 4);
		}
	} else {
		struct sockaddr_un sa = { .sun_family = AF_UNIX };

		if (strlen(where) >= sizeof(sa.sun_path))
			return ndz_error_set(e, NDZ_EINVAL, 0, "%s: path too long", where);
		strcpy(sa.sun_path, where);
		fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			int err = errno;

			if (fd >= 0)
				close(fd);
			/* what an admin meets first: the master not running, or not in its group */
			if (err != ENOENT && err != ECONNREFUSED && err != EACCES)
				return ndz_error_set(e, NDZ_ENET, err, "master's admin socket %s",
						     where);
			return ndz_error_set(e, NDZ_ENET, 0, "master's admin socket %s: %s (%s)",
					     where, strerror(err), err == EACCES ?
					     "its owner and group may use it: run as root, or join "
					     "the master's group, e.g. adduser USER ndz" :
					     "is the master running? systemctl status mfrisbeed; or "
					     "give -m");
		}
	}
	return fd;
}

int ndz_labcall(const char *where, const struct ndz_ctl_labreq *req, uint8_t *buf,
		    size_t cap, struct ndz_ctl_labrep *rep, struct ndz_error *e)
{
	uint8_t out[NDZ_CTL_LAB_MAX];
	uint64_t end;
	int n = ndz_ctl_lab_encode(req, out, sizeof(out), e), fd, need;

	if (n < 0)
		return n;
	if ((fd = connect_to(where, e)) < 0)
		return fd;
	end = ndz_now_ms() + 10000;
	if (ndz_labcall_write_by(fd, out, (size_t)n, end) != 0) {
		close(fd);
		return ndz_error_set(e, NDZ_ENET, 0, "master %s: the request could not be sent", where);
	}
	/* the header, then as much as it says, until the message is whole */
	for (size_t have = 0;; have = (size_t)need) {
		need = have ? ndz_ctl_lab_need(buf, have, 1, e) : NDZ_CTL_REP_HDR;
		if (need < 0 || (size_t)need > cap) {
			close(fd);
			return ndz_error_set(e, NDZ_EPROTO, 0, "master %s: a reply we cannot read",
					     where);
		}
		if ((size_t)need <= have)
			break;
		if (ndz_labcall_read_by(fd, buf + have, (size_t)need - have, end) != 0) {
			close(fd);
			return ndz_error_set(e, NDZ_ETIMEDOUT, 0, "master %s: no answer", where);
		}
	}
	close(fd);
	return ndz_ctl_labrep_decode(buf, (size_t)need, rep, e);
}

struct node_take {
	const struct ndz_ctl_labreq *req;
	struct ndz_ctl_labrep *rep;
};

/* ndz_ctl_exchange's take of a node call: the reply to this request. */
static int node_take(void *arg, const uint8_t *buf, size_t n)
{
	struct node_take *q = arg;

	return ndz_ctl_labrep_decode(buf, n, q->rep, NULL) == 0 && q->rep->id == q->req->id &&
	       q->rep->type == q->req->type;
}

int ndz_labcall_node(const char *spec, const struct ndz_ctl_labreq *req, uint8_t *buf,
			 size_t cap, struct ndz_ctl_labrep *rep, struct ndz_error *e)
{
	struct node_take q = { req, rep };
	uint8_t out[NDZ_CTL_LAB_MAX];
	char host[256];
	uint16_t port;
	int n = ndz_ctl_lab_encode(req, out, sizeof(out), e);

	if (n < 0)
		return n;
	if (ndz_ctl_hostport(spec, NDZ_CTL_PORT, host, sizeof(host), &port, NULL) != 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "bad master address '%s' (HOST[:PORT])", spec);
	return ndz_ctl_exchange(host, port, out, (size_t)n, 4, 700, buf, cap, node_take, &q, e);
}
