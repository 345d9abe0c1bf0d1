/* The master's control protocol: encode and decode its datagrams; one client exchange. */
#include <errno.h>
#include <stdio.h>
#include <netdb.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include "ctl.h"
#include "core/clock.h"
#include "core/le.h"

#define REPLY_FLAG 0x80

static void put_hdr(uint8_t *b, uint8_t type, uint16_t v16, uint32_t id)
{
	put_le32(b, NDZ_CTL_MAGIC);
	b[4] = NDZ_CTL_VERSION;
	b[5] = type;
	put_le16(b + 6, v16);
	put_le32(b + 8, id);
}

static int check_hdr(const uint8_t *b, size_t len)
{
	if (len < NDZ_CTL_REQ_HDR || get_le32(b) != NDZ_CTL_MAGIC)
		return NDZ_EPROTO;
	if (b[4] != NDZ_CTL_VERSION)
		return NDZ_EPROTOVER;
	return 0;
}

/* The body after the header: UPLOAD has the size before the name. */
static size_t req_body(uint8_t type)
{
	return type == NDZ_CTL_UPLOAD ? 8 : 0;
}

static int req_type_ok(unsigned type)
{
	return type == NDZ_CTL_GET || type == NDZ_CTL_STATUS || type == NDZ_CTL_UPLOAD;
}

int ndz_ctl_req_encode(const struct ndz_ctl_req *r, uint8_t *buf, size_t cap,
		       struct ndz_error *e)
{
	size_t n = strnlen(r->name, sizeof(r->name)), b = req_body(r->type);

	if (!req_type_ok(r->type) || n > NDZ_CTL_NAME_MAX ||
	    (r->type != NDZ_CTL_STATUS) != (n > 0))
		return ndz_error_set(e, NDZ_EINVAL, 0, "control request: bad type %u or name",
				     r->type);
	if (cap < NDZ_CTL_REQ_HDR + b + n)
		return ndz_error_set(e, NDZ_ERANGE, 0, "control request: %zu bytes do not fit",
				     NDZ_CTL_REQ_HDR + b + n);
	put_hdr(buf, r->type, (uint16_t)n, r->id);
	if (b)
		put_le64(buf + NDZ_CTL_REQ_HDR, r->size);
	memcpy(buf + NDZ_CTL_REQ_HDR + b, r->name, n);
	return (int)(NDZ_CTL_REQ_HDR + b + n);
}

int ndz_ctl_req_decode(const uint8_t *buf, size_t len, struct ndz_ctl_req *r,
		       struct ndz_error *e)
{
	size_t n, b;
	int rc = check_hdr(buf, len);

	memset(r, 0, sizeof(*r));
	if (rc)
		return ndz_error_set(e, rc, 0, "control request: %s", rc == NDZ_EPROTO ?
				     "not one of ours" : "another version");
	r->type = buf[5];
	r->id = get_le32(buf + 8);
	n = get_le16(buf + 6);
	b = req_body(r->type);
	if (buf[5] & REPLY_FLAG)       /* a reply sent to us: not a request at all */
		return ndz_error_set(e, NDZ_EPROTO, 0, "control request: a reply");
	if (!req_type_ok(r->type) || n > NDZ_CTL_NAME_MAX || len != NDZ_CTL_REQ_HDR + b + n ||
	    (r->type != NDZ_CTL_STATUS) != (n > 0) || memchr(buf + NDZ_CTL_REQ_HDR + b, 0, n))
		return ndz_error_set(e, NDZ_EINVAL, 0, "control request: type %u, %zu bytes: "
				     "malformed", r->type, len);
	if (b)
		r->size = get_le64(buf + NDZ_CTL_REQ_HDR);
	memcpy(r->name, buf + NDZ_CTL_REQ_HDR + b, n);
	return 0;
}

int ndz_ctl_req_need(const uint8_t *buf, size_t have, struct ndz_error *e)
{
	int rc;

	if (have < NDZ_CTL_REQ_HDR)
		return NDZ_CTL_REQ_HDR;
	if ((rc = check_hdr(buf, have)) != 0)
		return ndz_error_set(e, rc, 0, "control message: %s", ndz_strerror(rc));
	if ((buf[5] & REPLY_FLAG) || !req_type_ok(buf[5]) || get_le16(buf + 6) > NDZ_CTL_NAME_MAX)
		return ndz_error_set(e, NDZ_EINVAL, 0, "control message: a length no message has");
	return (int)(NDZ_CTL_REQ_HDR + req_body(buf[5]) + get_le16(buf + 6));
}

int ndz_ctl_rep_need(const uint8_t *buf, size_t have, struct ndz_error *e)
{
	int rc;

	if (have < NDZ_CTL_REP_HDR)
		return NDZ_CTL_REP_HDR;
	if ((rc = check_hdr(buf, have)) != 0)
		return ndz_error_set(e, rc, 0, "control message: %s", ndz_strerror(rc));
	if (!(buf[5] & REPLY_FLAG))
		return NDZ_EPROTO;
	switch (buf[5] & ~REPLY_FLAG) {
	case NDZ_CTL_UPLOAD:
		return NDZ_CTL_REP_HDR;
	case NDZ_CTL_STATUS:
		if (get_le16(buf + 6) != NDZ_CTL_OK)
			return NDZ_CTL_REP_HDR;
		if (have < NDZ_CTL_REP_HDR + 2)
			return NDZ_CTL_REP_HDR + 2;
		if (get_le16(buf + NDZ_CTL_REP_HDR) > NDZ_CTL_JSON_MAX)
			return ndz_error_set(e, NDZ_EINVAL, 0, "control message: a length no message has");
		return NDZ_CTL_REP_HDR + 2 + get_le16(buf + NDZ_CTL_REP_HDR);
	case NDZ_CTL_DONE:
		if (have < NDZ_CTL_REP_HDR + 2)
			return NDZ_CTL_REP_HDR + 2;
		if (get_le16(buf + NDZ_CTL_REP_HDR) > NDZ_CTL_MSG_MAX)
			return ndz_error_set(e, NDZ_EINVAL, 0, "control message: a length no message has");
		return NDZ_CTL_REP_HDR + 2 + get_le16(buf + NDZ_CTL_REP_HDR);
	default:
		return ndz_error_set(e, NDZ_EINVAL, 0, "control message: a length no message has");     /* GET replies come by UDP only */
	}
}

int ndz_ctl_rep_encode(const struct ndz_ctl_rep *r, uint8_t *buf, size_t cap,
		       struct ndz_error *e)
{
	size_t len = NDZ_CTL_REP_HDR;

	if (r->type < NDZ_CTL_GET || r->type > NDZ_CTL_DONE)
		return ndz_error_set(e, NDZ_EINVAL, 0, "control reply: bad type %u", r->type);
	if (r->type == NDZ_CTL_DONE) {
		if (r->json_len > NDZ_CTL_MSG_MAX)
			return ndz_error_set(e, NDZ_EINVAL, 0, "control reply: message too long");
		if (cap < NDZ_CTL_REP_HDR + 2 + r->json_len)
			return ndz_error_set(e, NDZ_ERANGE, 0, "control reply: does not fit");
		put_hdr(buf, NDZ_CTL_DONE | REPLY_FLAG, r->status, r->id);
		put_le16(buf + NDZ_CTL_REP_HDR, (uint16_t)r->json_len);
		if (r->json_len)
			memcpy(buf + NDZ_CTL_REP_HDR + 2, r->json, r->json_len);
		return (int)(NDZ_CTL_REP_HDR + 2 + r->json_len);
	}
	if (r->status == NDZ_CTL_OK && r->type == NDZ_CTL_UPLOAD)
		len = NDZ_CTL_REP_HDR;
	else if (r->status == NDZ_CTL_OK)
		len = r->type == NDZ_CTL_GET ? NDZ_CTL_GET_LEN : NDZ_CTL_REP_HDR + 2 + r->json_len;
	if (r->status == NDZ_CTL_OK && r->type == NDZ_CTL_STATUS && r->json_len > NDZ_CTL_JSON_MAX)
		return ndz_error_set(e, NDZ_EINVAL, 0, "control reply: status JSON too long");
	if (cap < len)
		return ndz_error_set(e, NDZ_ERANGE, 0, "control reply: does not fit");
	put_hdr(buf, (uint8_t)(r->type | REPLY_FLAG), r->status, r->id);
	if (r->status != NDZ_CTL_OK || r->type == NDZ_CTL_UPLOAD)
		return (int)len;
	if (r->type == NDZ_CTL_GET) {
		uint8_t *p = buf + NDZ_CTL_REP_HDR;

		put_le32(p, ntohl(r->group));
		put_le32(p + 4, ntohl(r->server));
		put_le16(p + 8, r->port);
		put_le16(p + 10, 0);
		memcpy(p + 12, r->uuid, 16);
		put_le32(p + 28, r->chunks);
		put_le64(p + 32, r->source_bytes);
		put_le64(p + 40, r->rate_bps);
	} else {
		put_le16(buf + NDZ_CTL_REP_HDR, (uint16_t)r->json_len);
		if (r->json_len)
			memcpy(buf + NDZ_CTL_REP_HDR + 2, r->json, r->json_len);
	}
	return (int)len;
}

static int rep_decode(const uint8_t *buf, size_t len, struct ndz_ctl_rep *r)
{
	int rc = check_hdr(buf, len);

	memset(r, 0, sizeof(*r));
	if (rc)
		return rc;
	if (!(buf[5] & REPLY_FLAG))
		return NDZ_EPROTO;
	r->type = buf[5] & ~REPLY_FLAG;
	r->status = get_le16(buf + 6);
	r->id = get_le32(buf + 8);
	if (r->type < NDZ_CTL_GET || r->type > NDZ_CTL_DONE)
		return NDZ_EPROTO;
	if (r->type == NDZ_CTL_DONE) {
		if (len < NDZ_CTL_REP_HDR + 2)
			return NDZ_EPROTO;
		r->json_len = get_le16(buf + NDZ_CTL_REP_HDR);
		if (r->json_len > NDZ_CTL_MSG_MAX || len != NDZ_CTL_REP_HDR + 2 + r->json_len)
			return NDZ_EPROTO;
		r->json = (const char *)buf + NDZ_CTL_REP_HDR + 2;
		return 0;
	}
	if (r->status != NDZ_CTL_OK || r->type == NDZ_CTL_UPLOAD)
		return len == NDZ_CTL_REP_HDR ? 0 : NDZ_EPROTO;
	if (r->type == NDZ_CTL_GET) {
		const uint8_t *p = buf + NDZ_CTL_REP_HDR;

		if (len != NDZ_CTL_GET_LEN || get_le16(p + 10) != 0)
			return NDZ_EPROTO;
		r->group = htonl(get_le32(p));
		r->server = htonl(get_le32(p + 4));
		r->port = get_le16(p + 8);
		memcpy(r->uuid, p + 12, 16);
		r->chunks = get_le32(p + 28);
		r->source_bytes = get_le64(p + 32);
		r->rate_bps = get_le64(p + 40);
		return 0;
	}
	if (len < NDZ_CTL_REP_HDR + 2)
		return NDZ_EPROTO;
	r->json_len = get_le16(buf + NDZ_CTL_REP_HDR);
	if (r->json_len > NDZ_CTL_JSON_MAX || len != NDZ_CTL_REP_HDR + 2 + r->json_len)
		return NDZ_EPROTO;
	r->json = (const char *)buf + NDZ_CTL_REP_HDR + 2;
	return 0;
}

int ndz_ctl_rep_decode(const uint8_t *buf, size_t len, struct ndz_ctl_rep *r,
		       struct ndz_error *e)
{
	int rc = rep_decode(buf, len, r);

	if (rc < 0)
		ndz_error_set(e, rc, 0, "control reply: %s", rc == NDZ_EPROTOVER ?
			      "another version" : "not one we understand");
	return rc;
}

int ndz_ctl_valid_name(const char *s)
{
	size_t n = strlen(s);

	/* a name may be a file name in the master's upload-dir: no hidden file, no "..". */
	if (n == 0 || n > NDZ_CTL_NAME_MAX || s[0] == '.')
		return 0;
	for (; *s; s++)
		if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'))
			return 0;
	return 1;
}

const char *ndz_ctl_strstatus(unsigned status)
{
	static const char *const msg[] = {
		[NDZ_CTL_OK] = "ok",
		[NDZ_CTL_UNKNOWN] = "unknown image",
		[NDZ_CTL_DENIED] = "access denied",
		[NDZ_CTL_POOL] = "multicast address pool exhausted",
		[NDZ_CTL_TOO_MANY] = "too many sessions",
		[NDZ_CTL_MALFORMED] = "malformed request",
		[NDZ_CTL_FAILED] = "the server could not start a session",
		[NDZ_CTL_BUSY] = "another upload to that image is running",
		[NDZ_CTL_QUOTA] = "upload quota exceeded",
		[NDZ_CTL_BADIMAGE] = "not a sound image",
		[NDZ_CTL_TIMEOUT] = "the upload went quiet for too long",
		[NDZ_CTL_UPLOADS] = "too many uploads at once",
		[NDZ_CTL_USE_TCP] = "status is answered over TCP only",
		[NDZ_CTL_CONNS] = "too many connections waiting to be heard",
		[NDZ_CTL_NONODE] = "no such node or group, or no task",
		[NDZ_CTL_WAIT] = "the image is on its way to this site",
	};

	return status < sizeof(msg) / sizeof(msg[0]) ? msg[status] : "unknown reply status";
}

unsigned ndz_ctl_status_of(int code)
{
	static const struct {
		int code;
		unsigned status;
	} map[] = {
		{ NDZ_OK, NDZ_CTL_OK },
		{ NDZ_ENOIMAGE, NDZ_CTL_UNKNOWN },
		{ NDZ_EDENIED, NDZ_CTL_DENIED },
		{ NDZ_EPOOL, NDZ_CTL_POOL },
		{ NDZ_ESESSIONS, NDZ_CTL_TOO_MANY },
		{ NDZ_EINVAL, NDZ_CTL_MALFORMED },
		{ NDZ_EPROTO, NDZ_CTL_MALFORMED },
		{ NDZ_EBUSY, NDZ_CTL_BUSY },
		{ NDZ_EQUOTA, NDZ_CTL_QUOTA },
		{ NDZ_ETIMEDOUT, NDZ_CTL_TIMEOUT },
		{ NDZ_EUPLOADS, NDZ_CTL_UPLOADS },
		{ NDZ_ECONNS, NDZ_CTL_CONNS },
		/* what the uploaded bytes can be wrong with */
		{ NDZ_EBADMAGIC, NDZ_CTL_BADIMAGE },
		{ NDZ_EVERSION, NDZ_CTL_BADIMAGE },
		{ NDZ_EFEATURE, NDZ_CTL_BADIMAGE },
		{ NDZ_EHDRCRC, NDZ_CTL_BADIMAGE },
		{ NDZ_EDATACRC, NDZ_CTL_BADIMAGE },
		{ NDZ_EHEADER, NDZ_CTL_BADIMAGE },
		{ NDZ_ETRUNC, NDZ_CTL_BADIMAGE },
		{ NDZ_EREGION, NDZ_CTL_BADIMAGE },
		{ NDZ_EMISSING, NDZ_CTL_BADIMAGE },
		{ NDZ_EDUP, NDZ_CTL_BADIMAGE },
		{ NDZ_EMISMATCH, NDZ_CTL_BADIMAGE },
		{ NDZ_ECORRUPT, NDZ_CTL_BADIMAGE },
		{ NDZ_ELENGTH, NDZ_CTL_BADIMAGE },
		{ NDZ_ECODEC, NDZ_CTL_BADIMAGE },
		{ NDZ_ESHORTREAD, NDZ_CTL_BADIMAGE },
		{ NDZ_ERANGE, NDZ_CTL_BADIMAGE },
		{ NDZ_EPADDING, NDZ_CTL_BADIMAGE },
		{ NDZ_EFORGED, NDZ_CTL_BADIMAGE },
		{ NDZ_EORIGSUM, NDZ_CTL_BADIMAGE },
		{ NDZ_EBIGENDIAN, NDZ_CTL_BADIMAGE },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].code == code)
			return map[i].status;
	return NDZ_CTL_FAILED;
}

int ndz_ctl_hostport(const char *s, uint16_t defport, char *h, size_t hcap, uint16_t *port,
		     struct ndz_error *e)
{
	const char *colon = strrchr(s, ':');
	size_t n = colon ? (size_t)(colon - s) : strlen(s);

	*port = defport;
	if (n == 0 || n >= hcap)
		return ndz_error_set(e, NDZ_EINVAL, 0, "bad address '%s' (HOST[:PORT])", s);
	memcpy(h, s, n);
	h[n] = 0;
	if (colon) {
		char *end;
		unsigned long v;

		errno = 0;
		v = strtoul(colon + 1, &end, 10);
		if (!colon[1] || *end || errno || v == 0 || v > 65535)
			return ndz_error_set(e, NDZ_EINVAL, 0, "bad address '%s' (HOST[:PORT])", s);
		*port = (uint16_t)v;
	}
	return 0;
}

int ndz_ctl_resolve(const char *host, uint16_t port, struct sockaddr_in *to,
		    struct ndz_error *e)
{
	struct addrinfo hints, *ai = NULL;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_DGRAM;
	if (getaddrinfo(host, NULL, &hints, &ai) != 0 || !ai)
		return ndz_error_set(e, NDZ_EINVAL, 0, "master %s: unknown host", host);
	memcpy(to, ai->ai_addr, sizeof(*to));
	freeaddrinfo(ai);
	to->sin_port = htons(port);
	return 0;
}

int ndz_ctl_exchange(const char *host, uint16_t port, const uint8_t *out, size_t len,
		     int tries, int wait_ms, uint8_t *buf, size_t cap,
		     int (*take)(void *arg, const uint8_t *buf, size_t n), void *arg,
		     struct ndz_error *e)
{
	struct sockaddr_in to;
	int fd, rc = ndz_ctl_resolve(host, port, &to, e);

	if (rc < 0)
		return rc;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return ndz_error_set(e, NDZ_ENET, errno, "socket");
	rc = NDZ_ETIMEDOUT;
	for (int t = 0; t < tries && rc == NDZ_ETIMEDOUT; t++) {
		uint64_t end = ndz_now_ms() + (uint64_t)wait_ms;

		if (sendto(fd, out, len, 0, (struct sockaddr *)&to, sizeof(to)) < 0 &&
		    errno != ECONNREFUSED) {
			rc = ndz_error_set(e, NDZ_ENET, errno, "master %s:%u: send", host, port);
			break;
		}
		for (uint64_t now = ndz_now_ms(); now < end && rc == NDZ_ETIMEDOUT; now = ndz_now_ms()) {
			struct pollfd pfd = { .fd = fd, .events = POLLIN };
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			ssize_t n;

			if (poll(&pfd, 1, (int)(end - now)) <= 0)
				continue;
			n = recvfrom(fd, buf, cap, 0, (struct sockaddr *)&from, &fl);
			/* only the master's reply to this request counts */
			if (n < 0 || from.sin_addr.s_addr != to.sin_addr.s_addr ||
			    from.sin_port != to.sin_port || !take(arg, buf, (size_t)n))
				continue;
			rc = 0;
		}
	}
	close(fd);
	if (rc == NDZ_ETIMEDOUT)
		ndz_error_set(e, rc, 0, "no answer from master %s:%u", host, port);
	return rc;
}

struct query_take {
	const struct ndz_ctl_req *r;
	struct ndz_ctl_rep *rep;
};

/* ndz_ctl_exchange's take of ndz_ctl_query: the reply to this request. */
static int query_take(void *arg, const uint8_t *buf, size_t n)
{
	struct query_take *q = arg;

	return ndz_ctl_rep_decode(buf, n, q->rep, NULL) == 0 && q->rep->id == q->r->id &&
	       q->rep->type == q->r->type;
}

int ndz_ctl_query(const char *host, uint16_t port, const struct ndz_ctl_req *req, int tries,
		  int wait_ms, uint8_t *buf, size_t cap, struct ndz_ctl_rep *rep,
		  struct ndz_error *e)
{
	struct ndz_ctl_req r = *req;
	struct query_take q = { &r, rep };
	uint8_t out[NDZ_CTL_REQ_MAX];
	int len;

	if (!r.id && getrandom(&r.id, sizeof(r.id), 0) != sizeof(r.id))
		r.id = (uint32_t)ndz_now_ms() | 1;
	len = ndz_ctl_req_encode(&r, out, sizeof(out), NULL);
	if (len < 0)
		return ndz_error_set(e, len, 0, "master %s: bad request", host);
	return ndz_ctl_exchange(host, port, out, (size_t)len, tries, wait_ms, buf, cap,
				query_take, &q, e);
}

void ndz_ctl_local_addr(const char *host, uint16_t port, char *buf, size_t cap)
{
	struct sockaddr_in to, me;
	socklen_t ml = sizeof(me);
	int fd = -1;

	snprintf(buf, cap, "this host's address");
	if (ndz_ctl_resolve(host, port, &to, NULL) < 0)
		return;
	/* a connected UDP socket sends nothing: the kernel only picks the route */
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&to, sizeof(to)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&me, &ml) == 0 && me.sin_addr.s_addr)
		inet_ntop(AF_INET, &me.sin_addr, buf, (socklen_t)cap);
	if (fd >= 0)
		close(fd);
}

int ndz_ctl_ask(const char *spec, const struct ndz_ctl_req *req, uint8_t *buf, size_t cap,
		struct ndz_ctl_rep *rep, struct ndz_error *e)
{
	char host[256];
	uint16_t port;
	int rc;

	if (ndz_ctl_hostport(spec, NDZ_CTL_PORT, host, sizeof(host), &port, NULL) != 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "bad master address '%s' (HOST[:PORT])", spec);
	if (req->type == NDZ_CTL_GET && !ndz_ctl_valid_name(req->name))
		return ndz_error_set(e, NDZ_EINVAL, 0, "'%s' is not a valid image name (%s)",
				     req->name, NDZ_CTL_NAME_RULE);
	rc = ndz_ctl_query(host, port, req, 4, 700, buf, cap, rep, e);
	for (uint64_t t0 = ndz_now_ns(); rc == 0 && rep->status == NDZ_CTL_WAIT &&
	     ndz_now_ns() - t0 < (uint64_t)NDZ_CTL_WAIT_S * 1000000000u;) {
		nanosleep(&(struct timespec){ 0, 250000000 }, NULL);
		rc = ndz_ctl_query(host, port, req, 4, 700, buf, cap, rep, e);
	}
	if (rc == 0 && rep->status == NDZ_CTL_DENIED) {
		char me[64];

		ndz_ctl_local_addr(host, port, me, sizeof(me));
		if (req->type == NDZ_CTL_GET)
			rc = ndz_error_set(e, NDZ_EREFUSED, 0, "master %s:%u: image '%s': access "
					   "denied: no allow rule matches %s for image '%s'", host,
					   port, req->name, me, req->name);
		else
			rc = ndz_error_set(e, NDZ_EREFUSED, 0, "master %s:%u: access denied: no "
					   "image allows %s", host, port, me);
	} else if (rc == 0 && rep->status != NDZ_CTL_OK) {
		if (req->type == NDZ_CTL_GET)
			rc = ndz_error_set(e, NDZ_EREFUSED, 0, "master %s:%u: image '%s': %s", host,
					   port, req->name, ndz_ctl_strstatus(rep->status));
		else
			rc = ndz_error_set(e, NDZ_EREFUSED, 0, "master %s:%u: %s", host, port,
					   ndz_ctl_strstatus(rep->status));
	}
	return rc;
}

/* The lab's messages: doc/PROTOCOL.md, "Lab messages". */
#define ASK_LEN (NDZ_CTL_REQ_HDR + 8)
#define REPORT_LEN (NDZ_CTL_REQ_HDR + 40)
#define ADMIN_LEN (NDZ_CTL_REQ_HDR + 4 + NDZ_CTL_TOKEN_MAX)

static int lab_type(unsigned t)
{
	return t == NDZ_CTL_ASK || t == NDZ_CTL_REPORT || t == NDZ_CTL_ADMIN;
}

int ndz_ctl_is_lab(const uint8_t *buf, size_t len)
{
	return check_hdr(buf, len) == 0 && lab_type(buf[5]);
}

/*
 * The image operations' arguments: IMAGE [NEWNAME] as image names, no third, flags
 * FORCE and TABLE only. 0 or NDZ_EINVAL with e set; other operations pass.
 */
static int image_op_check(const struct ndz_ctl_labreq *r, struct ndz_error *e)
{
	int rename = r->op == NDZ_CTL_OP_IMAGE_RENAME;

	if (r->op != NDZ_CTL_OP_IMAGE_INFO && r->op != NDZ_CTL_OP_IMAGE_REMOVE && !rename)
		return 0;
	if (!ndz_ctl_valid_name(r->args[0]))
		return ndz_error_set(e, NDZ_EINVAL, 0, "image '%.64s': not " NDZ_CTL_NAME_RULE,
				     r->args[0]);
	if (rename && !ndz_ctl_valid_name(r->args[1]))
		return ndz_error_set(e, NDZ_EINVAL, 0, "new name '%.64s': not " NDZ_CTL_NAME_RULE,
				     r->args[1]);
	if ((!rename && r->args[1][0]) || r->args[2][0] ||
	    (r->flags & ~(NDZ_CTL_FLAG_FORCE | NDZ_CTL_FLAG_TABLE)))
		return ndz_error_set(e, NDZ_EINVAL, 0, "image operation %u: bad arguments or flags",
				     r->op);
	return 0;
}

static size_t lab_fixed(uint8_t type)
{
	return type == NDZ_CTL_ASK ? ASK_LEN : type == NDZ_CTL_REPORT ? REPORT_LEN : ADMIN_LEN;
}

int ndz_ctl_lab_encode(const struct ndz_ctl_labreq *r, uint8_t *buf, size_t cap,
		       struct ndz_error *e)
{
	size_t n = 0, fixed;
	uint8_t *p = buf + NDZ_CTL_REQ_HDR;

	if (!lab_type(r->type))
		return ndz_error_set(e, NDZ_EINVAL, 0, "lab request: bad type %u", r->type);
	fixed = lab_fixed(r->type);
	if (r->type == NDZ_CTL_REPORT)
		n = strnlen(r->text, sizeof(r->text));
	if (r->type == NDZ_CTL_ADMIN)
		for (int k = 0; k < NDZ_CTL_ARGS; k++)
			n += strnlen(r->args[k], sizeof(r->args[k])) + 1;
	if (n > NDZ_CTL_ARGS * (NDZ_CTL_NAME_MAX + 1) ||
	    strnlen(r->token, sizeof(r->token)) > NDZ_CTL_TOKEN_MAX)
		return ndz_error_set(e, NDZ_EINVAL, 0, "lab request: a string too long");
	if (r->type == NDZ_CTL_ADMIN && image_op_check(r, e) != 0)
		return NDZ_EINVAL;
	if (cap < fixed + n)
		return ndz_error_set(e, NDZ_ERANGE, 0, "lab request: %zu bytes do not fit", fixed + n);
	memset(buf, 0, fixed + n);
	put_hdr(buf, r->type, (uint16_t)n, r->id);
	if (r->type != NDZ_CTL_ADMIN)
		memcpy(p, r->mac, 6);
	if (r->type == NDZ_CTL_REPORT) {
		p[6] = r->kind;
		put_le64(p + 8, r->bytes);
		put_le64(p + 16, r->total);
		put_le64(p + 24, r->ms);
		put_le64(p + 32, r->skipped);
		memcpy(p + 40, r->text, n);
	} else if (r->type == NDZ_CTL_ADMIN) {
		uint8_t *a = buf + ADMIN_LEN;

		p[0] = r->op;
		p[1] = r->flags;
		memcpy(p + 4, r->token, strnlen(r->token, sizeof(r->token)));
		for (int k = 0; k < NDZ_CTL_ARGS; k++) {
			size_t m = strnlen(r->args[k], sizeof(r->args[k]));

			memcpy(a, r->args[k], m);
			a += m + 1;
		}
	}
	return (int)(fixed + n);
}

int ndz_ctl_lab_decode(const uint8_t *buf, size_t len, struct ndz_ctl_labreq *r,
		       struct ndz_error *e)
{
	int rc = check_hdr(buf, len);
	const uint8_t *p = buf + NDZ_CTL_REQ_HDR;
	size_t n, fixed;

	memset(r, 0, sizeof(*r));
	if (rc)
		return ndz_error_set(e, rc, 0, "lab request: %s", ndz_strerror(rc));
	r->type = buf[5];
	r->id = get_le32(buf + 8);
	n = get_le16(buf + 6);
	if (!lab_type(r->type) || len != (fixed = lab_fixed(r->type)) + n)
		return ndz_error_set(e, NDZ_EPROTO, 0, "lab request: type %u, %zu bytes: malformed",
				     r->type, len);
	if (r->type != NDZ_CTL_ADMIN)
		memcpy(r->mac, p, 6);
	/* padding is zero: one message, one encoding */
	if (r->type == NDZ_CTL_ASK)
		return n || p[6] || p[7] ? ndz_error_set(e, NDZ_EPROTO, 0, "lab request: ask with "
							 "a body") : 0;
	if (r->type == NDZ_CTL_REPORT) {
		if (n > NDZ_CTL_TEXT_MAX || memchr(p + 40, 0, n) || p[7])
			return ndz_error_set(e, NDZ_EPROTO, 0, "lab request: bad reason or padding");
		r->kind = p[6];
		r->bytes = get_le64(p + 8);
		r->total = get_le64(p + 16);
		r->ms = get_le64(p + 24);
		r->skipped = get_le64(p + 32);
		memcpy(r->text, p + 40, n);
		return 0;
	}
	r->op = p[0];
	r->flags = p[1];
	memcpy(r->token, p + 4, NDZ_CTL_TOKEN_MAX);
	for (size_t k = strlen(r->token); k < NDZ_CTL_TOKEN_MAX; k++)
		if (p[4 + k])
			return ndz_error_set(e, NDZ_EPROTO, 0, "lab request: bad token padding");
	if (p[2] || p[3])
		return ndz_error_set(e, NDZ_EPROTO, 0, "lab request: bad padding");
	p = buf + ADMIN_LEN;
	for (int k = 0; k < NDZ_CTL_ARGS; k++) {
		const uint8_t *z = n ? memchr(p, 0, n) : NULL;
		size_t m;

		if (!z || (m = (size_t)(z - p)) > NDZ_CTL_NAME_MAX)
			return ndz_error_set(e, NDZ_EPROTO, 0, "lab request: bad argument %d", k + 1);
		memcpy(r->args[k], p, m);
		p += m + 1;
		n -= m + 1;
	}
	if (n)
		return ndz_error_set(e, NDZ_EPROTO, 0, "lab request: trailing bytes");
	return image_op_check(r, e) ? NDZ_EPROTO : 0;
}

int ndz_ctl_labrep_encode(const struct ndz_ctl_labrep *r, uint8_t *buf, size_t cap,
			  struct ndz_error *e)
{
	size_t n = r->type == NDZ_CTL_ASK ? strnlen(r->name, sizeof(r->name)) :
		   r->type == NDZ_CTL_ADMIN ? r->text_len : 0;
	size_t len = NDZ_CTL_REP_HDR + (r->type == NDZ_CTL_REPORT ? 0 : 8) + n;
	uint8_t *p = buf + NDZ_CTL_REP_HDR;

	if (!lab_type(r->type) || n > NDZ_CTL_TEXT_BIG)
		return ndz_error_set(e, NDZ_EINVAL, 0, "lab reply: bad type %u or text", r->type);
	if (cap < len)
		return ndz_error_set(e, NDZ_ERANGE, 0, "lab reply: does not fit");
	memset(buf, 0, len);
	put_hdr(buf, (uint8_t)(r->type | REPLY_FLAG), r->status, r->id);
	if (r->type == NDZ_CTL_REPORT)
		return (int)len;
	if (r->type == NDZ_CTL_ASK) {
		put_le16(p, (uint16_t)n);
		p[2] = r->task;
		p[3] = r->opts;
		put_le32(p + 4, r->wait_ms);
		memcpy(p + 8, r->name, n);
	} else {
		put_le32(p, (uint32_t)n);
		if (n)
			memcpy(p + 8, r->text, n);
	}
	return (int)len;
}

int ndz_ctl_labrep_decode(const uint8_t *buf, size_t len, struct ndz_ctl_labrep *r,
			  struct ndz_error *e)
{
	int rc = check_hdr(buf, len);
	const uint8_t *p = buf + NDZ_CTL_REP_HDR;
	size_t n;

	memset(r, 0, sizeof(*r));
	if (rc)
		return ndz_error_set(e, rc, 0, "lab reply: %s", ndz_strerror(rc));
	r->type = buf[5] & ~REPLY_FLAG;
	r->status = get_le16(buf + 6);
	r->id = get_le32(buf + 8);
	if (!(buf[5] & REPLY_FLAG) || !lab_type(r->type))
		return ndz_error_set(e, NDZ_EPROTO, 0, "lab reply: not one we understand");
	if (r->type == NDZ_CTL_REPORT)
		return len == NDZ_CTL_REP_HDR ? 0 :
		       ndz_error_set(e, NDZ_EPROTO, 0, "lab reply: %zu bytes", len);
	if (len < NDZ_CTL_REP_HDR + 8 || len != NDZ_CTL_REP_HDR + 8 +
	    (n = r->type == NDZ_CTL_ASK ? get_le16(p) : get_le32(p)) ||
	    (r->type == NDZ_CTL_ASK && (n > NDZ_CTL_NAME_MAX || memchr(p + 8, 0, n))) ||
	    n > NDZ_CTL_TEXT_BIG)
		return ndz_error_set(e, NDZ_EPROTO, 0, "lab reply: %zu bytes: malformed", len);
	if (r->type == NDZ_CTL_ASK) {
		r->task = p[2];
		r->opts = p[3];
		r->wait_ms = get_le32(p + 4);
		memcpy(r->name, p + 8, n);
	} else {
		if (get_le32(p + 4))
			return ndz_error_set(e, NDZ_EPROTO, 0, "lab reply: bad padding");
		r->text = (const char *)p + 8;
		r->text_len = n;
	}
	return 0;
}

int ndz_ctl_lab_need(const uint8_t *buf, size_t have, int reply, struct ndz_error *e)
{
	int rc;

	if (have < NDZ_CTL_REQ_HDR)
		return NDZ_CTL_REQ_HDR;
	if ((rc = check_hdr(buf, have)) != 0)
		return ndz_error_set(e, rc, 0, "lab message: %s", ndz_strerror(rc));
	if (!!(buf[5] & REPLY_FLAG) != !!reply || !lab_type(buf[5] & ~REPLY_FLAG))
		return ndz_error_set(e, NDZ_EPROTO, 0, "lab message: not one we understand");
	if (!reply && get_le16(buf + 6) > NDZ_CTL_ARGS * (NDZ_CTL_NAME_MAX + 1))
		return ndz_error_set(e, NDZ_EINVAL, 0, "lab message: a length no message has");
	if (!reply)
		return (int)(lab_fixed(buf[5]) + get_le16(buf + 6));
	if ((buf[5] & ~REPLY_FLAG) == NDZ_CTL_REPORT)
		return NDZ_CTL_REP_HDR;
	if (have < NDZ_CTL_REP_HDR + 4)
		return NDZ_CTL_REP_HDR + 4;
	if ((buf[5] & ~REPLY_FLAG) == NDZ_CTL_ASK)
		return (int)(NDZ_CTL_REP_HDR + 8 + get_le16(buf + NDZ_CTL_REP_HDR));
	if (get_le32(buf + NDZ_CTL_REP_HDR) > NDZ_CTL_TEXT_BIG)
		return ndz_error_set(e, NDZ_EINVAL, 0, "lab message: a length no message has");
	return (int)(NDZ_CTL_REP_HDR + 8 + get_le32(buf + NDZ_CTL_REP_HDR));
}

int ndz_ctl_read_token(const char *path, char *tok, size_t cap, struct ndz_error *e)
{
	FILE *f = fopen(path, "re");
	char line[256];
	size_t n;

	memset(tok, 0, cap);
	if (!f)
		return ndz_error_set(e, NDZ_EIO, errno, "token file %s", path);
	if (!fgets(line, sizeof(line), f))
		line[0] = 0;
	fclose(f);
	n = strcspn(line, "\r\n");
	line[n] = 0;
	for (size_t k = 0; k < n; k++)
		if (line[k] <= ' ' || line[k] > '~')
			n = 0;
	if (n < 16 || n > NDZ_CTL_TOKEN_MAX || cap <= NDZ_CTL_TOKEN_MAX)
		return ndz_error_set(e, NDZ_EINVAL, 0, "token file %s: the first line is not 16 "
				     "to 64 printable characters", path);
	memcpy(tok, line, n);
	return 0;
}
