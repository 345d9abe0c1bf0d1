/* A site master's fetches from its parent: the SITE request and reply, and one fetch. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sitecall.h"
#include "upload.h"
#include "core/le.h"

#define REPLY_FLAG 0x80

static int what_ok(const struct ndz_site_req *r)
{
	if (r->what == NDZ_SITE_CHUNKS_OF)
		return r->count >= 1 && r->count <= NDZ_SITE_CHUNKS &&
		       r->first <= UINT32_MAX - r->count;
	return (r->what == NDZ_SITE_INDEX || r->what == NDZ_SITE_MANIFEST) && !r->first &&
	       !r->count;
}

int ndz_site_req_encode(const struct ndz_site_req *r, uint8_t *buf, size_t cap,
			struct ndz_error *e)
{
	size_t n = strnlen(r->name, sizeof(r->name));

	if (!what_ok(r) || !ndz_ctl_valid_name(r->name))
		return ndz_error_set(e, NDZ_EINVAL, 0, "site request: bad kind %u, count %u or "
				     "name", r->what, r->count);
	if (cap < NDZ_SITE_REQ_FIXED + n)
		return ndz_error_set(e, NDZ_ERANGE, 0, "site request: %zu bytes do not fit",
				     NDZ_SITE_REQ_FIXED + n);
	put_le32(buf, NDZ_CTL_MAGIC);
	buf[4] = NDZ_CTL_VERSION;
	buf[5] = NDZ_CTL_SITE;
	put_le16(buf + 6, (uint16_t)n);
	put_le32(buf + 8, r->id);
	buf[12] = r->what;
	buf[13] = 0;
	put_le16(buf + 14, 0);
	put_le32(buf + 16, r->first);
	put_le32(buf + 20, r->count);
	memcpy(buf + NDZ_SITE_REQ_FIXED, r->name, n);
	return (int)(NDZ_SITE_REQ_FIXED + n);
}

int ndz_site_is_req(const uint8_t *buf, size_t len)
{
	return len >= NDZ_CTL_REQ_HDR && get_le32(buf) == NDZ_CTL_MAGIC &&
	       buf[4] == NDZ_CTL_VERSION && buf[5] == NDZ_CTL_SITE;
}

int ndz_site_req_decode(const uint8_t *buf, size_t len, struct ndz_site_req *r,
			struct ndz_error *e)
{
	size_t n;

	memset(r, 0, sizeof(*r));
	if (!ndz_site_is_req(buf, len))
		return ndz_error_set(e, NDZ_EPROTO, 0, "site request: not one");
	r->id = get_le32(buf + 8);
	n = get_le16(buf + 6);
	if (len < NDZ_SITE_REQ_FIXED || n > NDZ_CTL_NAME_MAX || len != NDZ_SITE_REQ_FIXED + n ||
	    buf[13] || get_le16(buf + 14))
		return ndz_error_set(e, NDZ_EINVAL, 0, "site request: %zu bytes: malformed", len);
	r->what = buf[12];
	r->first = get_le32(buf + 16);
	r->count = get_le32(buf + 20);
	memcpy(r->name, buf + NDZ_SITE_REQ_FIXED, n);
	r->name[n] = 0;
	if (!what_ok(r) || !ndz_ctl_valid_name(r->name))
		return ndz_error_set(e, NDZ_EINVAL, 0, "site request: bad kind %u, count %u or "
				     "name", r->what, r->count);
	return 0;
}

int ndz_site_req_need(const uint8_t *buf, size_t have, struct ndz_error *e)
{
	if (have < NDZ_CTL_REQ_HDR || !ndz_site_is_req(buf, have))
		return ndz_ctl_req_need(buf, have, e);
	if (get_le16(buf + 6) > NDZ_CTL_NAME_MAX)
		return ndz_error_set(e, NDZ_EINVAL, 0, "site request: a length no message has");
	return (int)(NDZ_SITE_REQ_FIXED + get_le16(buf + 6));
}

void ndz_site_rep_encode(uint32_t id, uint16_t status, uint64_t len,
			 uint8_t buf[NDZ_SITE_REP_LEN])
{
	put_le32(buf, NDZ_CTL_MAGIC);
	buf[4] = NDZ_CTL_VERSION;
	buf[5] = NDZ_CTL_SITE | REPLY_FLAG;
	put_le16(buf + 6, status);
	put_le32(buf + 8, id);
	put_le64(buf + NDZ_CTL_REP_HDR, len);
}

int ndz_site_rep_decode(const uint8_t buf[NDZ_SITE_REP_LEN], uint32_t id, uint16_t *status,
			uint64_t *len, struct ndz_error *e)
{
	if (get_le32(buf) != NDZ_CTL_MAGIC || buf[4] != NDZ_CTL_VERSION ||
	    buf[5] != (NDZ_CTL_SITE | REPLY_FLAG) || get_le32(buf + 8) != id)
		return ndz_error_set(e, NDZ_EPROTO, 0, "site reply: not the reply asked for");
	*status = get_le16(buf + 6);
	*len = get_le64(buf + NDZ_CTL_REP_HDR);
	if (*len > NDZ_SITE_BLOB_MAX || (*status != NDZ_CTL_OK && *len))
		return ndz_error_set(e, NDZ_EPROTO, 0, "site reply: %llu bytes: a length no "
				     "reply has", (unsigned long long)*len);
	return 0;
}

/* All of len bytes from fd (its receive timeout set): 0 or the code. */
static int read_full(int fd, uint8_t *p, size_t len)
{
	while (len) {
		ssize_t n = recv(fd, p, len, 0);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? NDZ_ETIMEDOUT : NDZ_ENET;
		if (n == 0)
			return NDZ_ESHORTREAD;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int ndz_site_fetch(const char *spec, const struct ndz_site_req *r, int wait_s, uint8_t **out,
		   size_t *len, struct ndz_error *e)
{
	uint8_t req[NDZ_SITE_REQ_MAX], rep[NDZ_SITE_REP_LEN], *b = NULL;
	char host[256];
	uint16_t port, status;
	uint64_t n;
	int fd, rc, k;

	*out = NULL;
	*len = 0;
	if (ndz_ctl_hostport(spec, NDZ_CTL_PORT, host, sizeof(host), &port, e) != 0)
		return NDZ_EINVAL;
	if ((k = ndz_site_req_encode(r, req, sizeof(req), e)) < 0)
		return k;
	if ((fd = ndz_upload_dial(host, port, wait_s, e)) < 0)
		return fd;
	for (size_t off = 0; off < (size_t)k;) {
		ssize_t w = send(fd, req + off, (size_t)k - off, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = ndz_error_set(e, NDZ_ENET, errno, "parent %s:%u: sending", host, port);
			goto out;
		}
		off += (size_t)w;
	}
	if ((rc = read_full(fd, rep, sizeof(rep))) != 0) {
		ndz_error_set(e, rc, 0, "parent %s:%u: no reply", host, port);
		goto out;
	}
	if ((rc = ndz_site_rep_decode(rep, r->id, &status, &n, e)) != 0) {
		ndz_error_prefix(e, "parent %s:%u", host, port);
		goto out;
	}
	if (status != NDZ_CTL_OK) {
		rc = ndz_error_set(e, status == NDZ_CTL_UNKNOWN ? NDZ_ENOIMAGE : NDZ_EREFUSED, 0,
				   "parent %s:%u: image '%s': %s", host, port, r->name,
				   ndz_ctl_strstatus(status));
		goto out;
	}
	if (n && !(b = malloc(n))) {
		rc = ndz_error_set(e, NDZ_ENOMEM, 0, "parent %s:%u: %llu bytes", host, port,
				   (unsigned long long)n);
		goto out;
	}
	if (n && (rc = read_full(fd, b, n)) != 0) {
		ndz_error_set(e, rc, 0, "parent %s:%u: image '%s': the reply ended early", host,
			      port, r->name);
		free(b);
		goto out;
	}
	*out = b;
	*len = n;
out:
	close(fd);
	return rc;
}
