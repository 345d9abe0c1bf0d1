/* A session's control endpoint: a frisbeed answers STATUS, RATE, IDENTIFY and HOLD on a unix socket. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "ctl.h"
#include "sessctl.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/le.h"

#define HDR NDZ_CTL_REQ_HDR
#define REPLY_FLAG 0x80
#define ANSWER_MS 1000                 /* a peer has this long to send its request */

const char *ndz_sessctl_state_name(unsigned state)
{
	static const char *const names[] = { "active", "done", "failed", "lost" };

	return state < 4 ? names[state] : "unknown";
}

void ndz_sessctl_client_json(const struct ndz_sessctl_client *c, struct ndz_jbuf *j)
{
	char a[INET_ADDRSTRLEN];
	struct in_addr in = { c->addr };

	inet_ntop(AF_INET, &in, a, sizeof(a));
	ndz_jbuf_printf(j, "{\"id\": %u, \"address\": \"%s\", \"state\": \"%s\", "
			"\"chunks_done\": %u, \"chunks_total\": %u, \"bytes_written\": %llu, "
			"\"write_bps\": %llu, \"age_s\": %.1f}", c->id, a,
			ndz_sessctl_state_name(c->state), c->chunks_done, c->chunks_total,
			(unsigned long long)c->bytes_written, (unsigned long long)c->write_bps,
			(double)c->age_ns / 1e9);
}

/* A STATUS reply's states after its JSON: the counts, then the entries. */
static size_t states_len(const struct ndz_sessctl_status *st)
{
	return st->states ? 34 + st->nclient * NDZ_SESSCTL_CLIENT_LEN : 0;
}

static void put_states(uint8_t *b, const struct ndz_sessctl_status *st)
{
	put_le64(b, st->active);
	put_le64(b + 8, st->done);
	put_le64(b + 16, st->failed);
	put_le64(b + 24, st->lost);
	put_le16(b + 32, (uint16_t)st->nclient);
	b += 34;
	for (size_t i = 0; i < st->nclient; i++, b += NDZ_SESSCTL_CLIENT_LEN) {
		const struct ndz_sessctl_client *c = &st->client[i];

		put_le32(b, c->id);
		memcpy(b + 4, &c->addr, 4);            /* network order as it is */
		b[8] = c->state;
		put_le32(b + 9, c->chunks_done);
		put_le32(b + 13, c->chunks_total);
		put_le64(b + 17, c->bytes_written);
		put_le64(b + 25, c->write_bps);
		put_le64(b + 33, c->age_ns);
	}
}

/* The states of n bytes at b (n > 0) into st; 0 or -1 when they are not well formed. */
static int get_states(const uint8_t *b, size_t n, struct ndz_sessctl_status *st)
{
	if (n < 34)
		return -1;
	st->active = get_le64(b);
	st->done = get_le64(b + 8);
	st->failed = get_le64(b + 16);
	st->lost = get_le64(b + 24);
	st->nclient = get_le16(b + 32);
	if (st->nclient > NDZ_SESSCTL_CLIENTS || n != states_len(&(struct ndz_sessctl_status){
			.states = 1, .nclient = st->nclient }))
		return -1;
	b += 34;
	for (size_t i = 0; i < st->nclient; i++, b += NDZ_SESSCTL_CLIENT_LEN) {
		struct ndz_sessctl_client *c = &st->client[i];

		c->id = get_le32(b);
		memcpy(&c->addr, b + 4, 4);
		c->state = b[8];
		if (c->state > NDZ_SESSCTL_RX_LOST)
			return -1;
		c->chunks_done = get_le32(b + 9);
		c->chunks_total = get_le32(b + 13);
		c->bytes_written = get_le64(b + 17);
		c->write_bps = get_le64(b + 25);
		c->age_ns = get_le64(b + 33);
	}
	st->states = 1;
	return 0;
}

static int type_ok(unsigned t)
{
	return t == NDZ_SESSCTL_STATUS || t == NDZ_SESSCTL_RATE || t == NDZ_SESSCTL_IDENTIFY ||
	       t == NDZ_SESSCTL_HOLD;
}

int ndz_sessctl_encode(const struct ndz_sessctl_msg *m, int reply, uint8_t *buf, size_t cap,
		       struct ndz_error *e)
{
	size_t len = HDR, jl = m->st.json_len, pl = strnlen(m->who.path, sizeof(m->who.path));
	int ok = !reply || m->status == NDZ_CTL_OK;

	if (!type_ok(m->type))
		return ndz_error_set(e, NDZ_EINVAL, 0, "session control: bad type %u", m->type);
	if (reply && ok && m->type == NDZ_SESSCTL_STATUS && jl > NDZ_SESSCTL_JSON_MAX)
		return ndz_error_set(e, NDZ_EINVAL, 0, "session control: statistics too long");
	if (reply && ok && m->type == NDZ_SESSCTL_STATUS && m->st.nclient > NDZ_SESSCTL_CLIENTS)
		return ndz_error_set(e, NDZ_EINVAL, 0, "session control: %zu client entries, at "
				     "most %d", m->st.nclient, NDZ_SESSCTL_CLIENTS);
	if (reply && ok && m->type == NDZ_SESSCTL_IDENTIFY && pl > NDZ_SESSCTL_PATH_MAX)
		return ndz_error_set(e, NDZ_EINVAL, 0, "session control: image path too long");
	if (!reply && m->type == NDZ_SESSCTL_RATE)
		len += 8;
	else if (reply && ok && m->type == NDZ_SESSCTL_STATUS)
		len += 26 + jl + states_len(&m->st);
	else if (reply && ok && m->type == NDZ_SESSCTL_IDENTIFY)
		len += 34 + pl;
	else if (reply && ok && m->type == NDZ_SESSCTL_HOLD)
		len += 1;
	if (cap < len)
		return ndz_error_set(e, NDZ_ERANGE, 0, "session control: %zu bytes do not fit %zu",
				     len, cap);
	put_le32(buf, NDZ_CTL_MAGIC);
	buf[4] = NDZ_CTL_VERSION;
	buf[5] = (uint8_t)(m->type | (reply ? REPLY_FLAG : 0));
	put_le16(buf + 6, reply ? m->status : 0);
	put_le32(buf + 8, m->id);
	if (!reply && m->type == NDZ_SESSCTL_RATE) {
		put_le64(buf + HDR, m->rate_bps);
	} else if (reply && ok && m->type == NDZ_SESSCTL_STATUS) {
		put_le64(buf + HDR, m->st.clients);
		put_le64(buf + HDR + 8, m->st.bytes_sent);
		put_le64(buf + HDR + 16, m->st.rate_bps);
		put_le16(buf + HDR + 24, (uint16_t)jl);
		memcpy(buf + HDR + 26, m->st.json, jl);
		if (m->st.states)
			put_states(buf + HDR + 26 + jl, &m->st);
	} else if (reply && ok && m->type == NDZ_SESSCTL_IDENTIFY) {
		put_le32(buf + HDR, (uint32_t)m->who.pid);
		memcpy(buf + HDR + 4, m->who.uuid, 16);
		put_le32(buf + HDR + 20, m->who.chunks);
		put_le64(buf + HDR + 24, m->who.source_bytes);
		put_le16(buf + HDR + 32, (uint16_t)pl);
		memcpy(buf + HDR + 34, m->who.path, pl);
	} else if (reply && ok && m->type == NDZ_SESSCTL_HOLD) {
		buf[HDR] = m->held ? 1 : 0;
	}
	return (int)len;
}

int ndz_sessctl_decode(const uint8_t *buf, size_t len, int reply, struct ndz_sessctl_msg *m,
		       struct ndz_error *e)
{
	const uint8_t *b = buf + HDR;
	size_t want = HDR;

	memset(m, 0, sizeof(*m));
	if (len < HDR || get_le32(buf) != NDZ_CTL_MAGIC || !(buf[5] & REPLY_FLAG) != !reply)
		return ndz_error_set(e, NDZ_EPROTO, 0, "session control: not a %s of ours",
				     reply ? "reply" : "request");
	if (buf[4] != NDZ_CTL_VERSION)
		return ndz_error_set(e, NDZ_EPROTOVER, 0, "session control: version %u", buf[4]);
	m->type = buf[5] & ~REPLY_FLAG;
	m->status = get_le16(buf + 6);
	m->id = get_le32(buf + 8);
	if (!type_ok(m->type) || (!reply && m->status))
		return ndz_error_set(e, NDZ_EINVAL, 0, "session control: bad type %u", m->type);
	if (!reply && m->type == NDZ_SESSCTL_RATE)
		want += 8;
	else if (reply && m->status == NDZ_CTL_OK && m->type == NDZ_SESSCTL_STATUS)
		/* the states follow the JSON: what is there past it is theirs */
		want = len >= HDR + 26 + (size_t)get_le16(b + 24) ? len : HDR + 26 +
		       (len >= HDR + 26 ? (size_t)get_le16(b + 24) : 0);
	else if (reply && m->status == NDZ_CTL_OK && m->type == NDZ_SESSCTL_IDENTIFY)
		want += len >= HDR + 34 ? 34 + (size_t)get_le16(b + 32) : 34;
	else if (reply && m->status == NDZ_CTL_OK && m->type == NDZ_SESSCTL_HOLD)
		want += 1;
	if (len != want)
		return ndz_error_set(e, NDZ_EINVAL, 0, "session control: %zu bytes, not %zu", len,
				     want);
	if (!reply && m->type == NDZ_SESSCTL_RATE) {
		m->rate_bps = get_le64(b);
	} else if (reply && m->status == NDZ_CTL_OK && m->type == NDZ_SESSCTL_STATUS) {
		m->st.clients = get_le64(b);
		m->st.bytes_sent = get_le64(b + 8);
		m->st.rate_bps = get_le64(b + 16);
		m->st.json_len = get_le16(b + 24);
		if (m->st.json_len > NDZ_SESSCTL_JSON_MAX)
			return ndz_error_set(e, NDZ_EINVAL, 0, "session control: statistics too long");
		memcpy(m->st.json, b + 26, m->st.json_len);
		if (len > HDR + 26 + m->st.json_len &&
		    get_states(b + 26 + m->st.json_len, len - HDR - 26 - m->st.json_len, &m->st))
			return ndz_error_set(e, NDZ_EINVAL, 0, "session control: bad client states");
	} else if (reply && m->status == NDZ_CTL_OK && m->type == NDZ_SESSCTL_IDENTIFY) {
		size_t pl = get_le16(b + 32);

		if (pl > NDZ_SESSCTL_PATH_MAX || memchr(b + 34, 0, pl))
			return ndz_error_set(e, NDZ_EINVAL, 0, "session control: bad image path");
		m->who.pid = (int32_t)get_le32(b);
		memcpy(m->who.uuid, b + 4, 16);
		m->who.chunks = get_le32(b + 20);
		m->who.source_bytes = get_le64(b + 24);
		memcpy(m->who.path, b + 34, pl);
	} else if (reply && m->status == NDZ_CTL_OK && m->type == NDZ_SESSCTL_HOLD) {
		if (b[0] > 1)
			return ndz_error_set(e, NDZ_EINVAL, 0, "session control: bad hold answer %u",
					     b[0]);
		m->held = b[0];
	}
	return 0;
}

int ndz_sessctl_path(const char *run_dir, uint32_t group, uint16_t port, char *buf, size_t cap,
		     struct ndz_error *e)
{
	struct sockaddr_un sa;
	char a[INET_ADDRSTRLEN];
	int n;

	inet_ntop(AF_INET, &group, a, sizeof(a));
	n = snprintf(buf, cap, "%s/session-%s-%u.sock", run_dir, a, port);
	if (n < 0 || (size_t)n >= cap || (size_t)n >= sizeof(sa.sun_path))
		return ndz_error_set(e, NDZ_ERANGE, 0, "%s: too long for a unix socket's name",
				     run_dir);
	return 0;
}

static int unix_addr(const char *path, struct sockaddr_un *sa, struct ndz_error *e)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	if (strlen(path) >= sizeof(sa->sun_path))
		return ndz_error_set(e, NDZ_ERANGE, 0, "%s: too long for a unix socket's name",
				     path);
	strcpy(sa->sun_path, path);
	return 0;
}

struct ndz_sessctl {
	int fd, stop[2];
	char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
	struct ndz_sessctl_ops ops;
	void *ctx;
	pthread_t thread;
	uint8_t buf[NDZ_SESSCTL_MSG_MAX];
	struct ndz_sessctl_msg req, rep;
};

/* One connection's one request, answered. */
static void answer(struct ndz_sessctl *s, int fd)
{
	uint8_t *buf = s->buf;
	struct ndz_sessctl_msg *req = &s->req, *rep = &s->rep;
	struct pollfd p = { .fd = fd, .events = POLLIN };
	struct ucred cred;
	socklen_t cl = sizeof(cred);
	ssize_t n;
	int rc, len;

	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) != 0 ||
	    (cred.uid != geteuid() && cred.uid != 0))
		return;
	if (poll(&p, 1, ANSWER_MS) <= 0 || (n = recv(fd, buf, NDZ_SESSCTL_MSG_MAX, 0)) <= 0)
		return;
	rc = ndz_sessctl_decode(buf, (size_t)n, 0, req, NULL);
	memset(rep, 0, sizeof(*rep));
	rep->type = req->type;
	rep->id = req->id;
	if (rc == 0 && req->type == NDZ_SESSCTL_STATUS)
		rc = s->ops.status ? s->ops.status(s->ctx, &rep->st) : NDZ_ENOTSUP;
	else if (rc == 0 && req->type == NDZ_SESSCTL_RATE)
		rc = s->ops.rate ? s->ops.rate(s->ctx, req->rate_bps) : NDZ_ENOTSUP;
	else if (rc == 0 && req->type == NDZ_SESSCTL_IDENTIFY)
		rc = s->ops.identify ? s->ops.identify(s->ctx, &rep->who) : NDZ_ENOTSUP;
	else if (rc == 0 && req->type == NDZ_SESSCTL_HOLD)
		rc = s->ops.hold ? s->ops.hold(s->ctx) : NDZ_ENOTSUP;
	if (rc > 0 || (rc == 0 && req->type == NDZ_SESSCTL_HOLD)) {
		rep->held = rc > 0;
		rc = 0;
	}
	if (rc == NDZ_EPROTO || rc == NDZ_EPROTOVER)
		return;
	rep->who.pid = (int32_t)getpid();
	rep->status = (uint16_t)ndz_ctl_status_of(rc);
	len = ndz_sessctl_encode(rep, 1, buf, NDZ_SESSCTL_MSG_MAX, NULL);
	if (len < 0) {
		rep->status = NDZ_CTL_FAILED;
		len = ndz_sessctl_encode(rep, 1, buf, NDZ_SESSCTL_MSG_MAX, NULL);
	}
	if (len > 0)
		(void)!send(fd, buf, (size_t)len, MSG_NOSIGNAL | MSG_DONTWAIT);
}

static void *serve(void *arg)
{
	struct ndz_sessctl *s = arg;

	for (;;) {
		struct pollfd p[2] = { { .fd = s->fd, .events = POLLIN },
				       { .fd = s->stop[0], .events = POLLIN } };
		int fd;

		if (poll(p, 2, -1) < 0 && errno != EINTR)
			break;
		if (p[1].revents)
			break;
		if (!(p[0].revents & POLLIN))
			continue;
		fd = accept4(s->fd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		answer(s, fd);
		close(fd);
	}
	return NULL;
}

int ndz_sessctl_start(const char *path, const struct ndz_sessctl_ops *ops, void *ctx,
		      struct ndz_sessctl **out, struct ndz_error *e)
{
	struct ndz_sessctl *s;
	struct sockaddr_un sa;
	sigset_t all, old;
	int rc;

	*out = NULL;
	if ((rc = unix_addr(path, &sa, e)) < 0)
		return rc;
	s = calloc(1, sizeof(*s));
	if (!s)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s", path);
	s->ops = *ops;
	s->ctx = ctx;
	s->stop[0] = s->stop[1] = -1;
	strcpy(s->path, path);
	s->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (s->fd < 0) {
		rc = ndz_error_set(e, NDZ_ENET, errno, "%s: socket", path);
		goto fail;
	}
	unlink(path);
	if (bind(s->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || chmod(path, 0600) != 0 ||
	    listen(s->fd, 8) != 0) {
		rc = ndz_error_set(e, NDZ_ENET, errno, "%s: listen", path);
		goto fail;
	}
	if (pipe2(s->stop, O_CLOEXEC) != 0) {
		rc = ndz_error_set(e, NDZ_ENET, errno, "%s: pipe", path);
		goto fail;
	}
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&s->thread, NULL, serve, s);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		rc = ndz_error_set(e, NDZ_ENOMEM, rc, "%s: thread", path);
		goto fail;
	}
	*out = s;
	return 0;
fail:
	if (s->fd >= 0) {
		close(s->fd);
		unlink(path);
	}
	if (s->stop[0] >= 0) {
		close(s->stop[0]);
		close(s->stop[1]);
	}
	free(s);
	return rc;
}

void ndz_sessctl_stop(struct ndz_sessctl *s)
{
	if (!s)
		return;
	(void)!write(s->stop[1], "x", 1);
	pthread_join(s->thread, NULL);
	close(s->fd);
	close(s->stop[0]);
	close(s->stop[1]);
	unlink(s->path);
	free(s);
}

int ndz_sessctl_ask(const char *path, const struct ndz_sessctl_msg *req, int timeout_ms,
		    struct ndz_sessctl_msg *rep, struct ndz_error *e)
{
	uint8_t *buf;
	struct sockaddr_un sa;
	struct pollfd p;
	ssize_t n;
	int fd = -1, len, rc;

	if ((rc = unix_addr(path, &sa, e)) < 0)
		return rc;
	if (!(buf = malloc(NDZ_SESSCTL_MSG_MAX)))
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s", path);
	len = ndz_sessctl_encode(req, 0, buf, NDZ_SESSCTL_MSG_MAX, e);
	if (len < 0) {
		rc = len;
		goto out;
	}
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = ndz_error_set(e, NDZ_ENET, errno, "%s: socket", path);
		goto out;
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = ndz_error_set(e, errno == ENOENT || errno == ECONNREFUSED ? NDZ_ENOENT : NDZ_ENET,
				   errno, "%s: connect", path);
		goto out;
	}
	if (send(fd, buf, (size_t)len, MSG_NOSIGNAL) != len) {
		rc = ndz_error_set(e, NDZ_ENET, errno, "%s: send", path);
		goto out;
	}
	p.fd = fd;
	p.events = POLLIN;
	if ((rc = poll(&p, 1, timeout_ms)) <= 0) {
		rc = ndz_error_set(e, NDZ_ETIMEDOUT, rc < 0 ? errno : 0, "%s: no answer in %d ms",
				   path, timeout_ms);
		goto out;
	}
	n = recv(fd, buf, NDZ_SESSCTL_MSG_MAX, 0);
	if (n <= 0) {
		rc = ndz_error_set(e, NDZ_ENET, n < 0 ? errno : 0, "%s: no answer", path);
		goto out;
	}
	if ((rc = ndz_sessctl_decode(buf, (size_t)n, 1, rep, e)) < 0) {
		ndz_error_prefix(e, "%s", path);
		goto out;
	}
	if (rep->type != req->type || rep->id != req->id)
		rc = ndz_error_set(e, NDZ_EPROTO, 0, "%s: the answer to another question", path);
	else if (rep->status != NDZ_CTL_OK)
		rc = ndz_error_set(e, NDZ_EREFUSED, 0, "%s: %s", path,
				   ndz_ctl_strstatus(rep->status));
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}

/*
 * Asks REQ and, when the answer is OK, copies LEN bytes of it from OFF into OUT
 * (none when LEN is 0). A reply is large: it is on the heap, not the stack.
 */
static int ask_copy(const char *path, const struct ndz_sessctl_msg *req, int timeout_ms,
		    size_t off, void *out, size_t len, struct ndz_error *e)
{
	struct ndz_sessctl_msg *rep = malloc(sizeof(*rep));
	int rc;

	if (!rep)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s", path);
	if ((rc = ndz_sessctl_ask(path, req, timeout_ms, rep, e)) == 0 && len)
		memcpy(out, (const char *)rep + off, len);
	free(rep);
	return rc;
}

int ndz_sessctl_status(const char *path, int timeout_ms, struct ndz_sessctl_status *out,
		       struct ndz_error *e)
{
	struct ndz_sessctl_msg req = { .type = NDZ_SESSCTL_STATUS, .id = 1 };

	return ask_copy(path, &req, timeout_ms, offsetof(struct ndz_sessctl_msg, st), out,
			sizeof(*out), e);
}

int ndz_sessctl_rate(const char *path, uint64_t rate_bps, int timeout_ms, struct ndz_error *e)
{
	struct ndz_sessctl_msg req = { .type = NDZ_SESSCTL_RATE, .id = 2, .rate_bps = rate_bps };

	return ask_copy(path, &req, timeout_ms, 0, NULL, 0, e);
}

int ndz_sessctl_identify(const char *path, int timeout_ms, struct ndz_sessctl_identity *out,
			 struct ndz_error *e)
{
	struct ndz_sessctl_msg req = { .type = NDZ_SESSCTL_IDENTIFY, .id = 3 };

	return ask_copy(path, &req, timeout_ms, offsetof(struct ndz_sessctl_msg, who), out,
			sizeof(*out), e);
}

int ndz_sessctl_hold(const char *path, int timeout_ms, struct ndz_error *e)
{
	struct ndz_sessctl_msg req = { .type = NDZ_SESSCTL_HOLD, .id = 4 };
	uint8_t held = 0;
	int rc = ask_copy(path, &req, timeout_ms, offsetof(struct ndz_sessctl_msg, held), &held,
			  sizeof(held), e);

	return rc < 0 ? rc : held;
}
