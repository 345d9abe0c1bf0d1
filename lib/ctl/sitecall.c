/* A site master's fetches from its parent: the SITE request and reply, and one fetch. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "sitecall.h"
#include "upload.h"
#include "core/format.h"
#include "core/le.h"

#define REPLY_FLAG 0x80

static int what_ok(const struct ndz_site_req *r)
{
	if (r->what == NDZ_SITE_CHUNKS_OF)
		return r->count >= 1 && r->count <= NDZ_SITE_CHUNKS &&
		       r->first <= UINT32_MAX - r->count;
	if (r->what == NDZ_SITE_REPORT)
		return r->count >= 4 && r->count <= NDZ_SITE_REPORT_MAX && !r->first;
	return (r->what == NDZ_SITE_INDEX || r->what == NDZ_SITE_MANIFEST ||
		r->what == NDZ_SITE_IDENT) && !r->first && !r->count;
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

/*
 * Send r to the parent at spec and read the reply's fixed part: the connection (its
 * fd) with *n bytes to follow, or a negative code with e naming the parent.
 */
void ndz_site_link_init(struct ndz_site_link *l, const char *spec, int wait_s)
{
	snprintf(l->spec, sizeof(l->spec), "%s", spec);
	l->wait_s = wait_s;
	l->fd = -1;
}

void ndz_site_link_close(struct ndz_site_link *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
}

/*
 * Send r to the parent on l (connected first when it is not) and read the reply's
 * fixed part: 0 with *n bytes to follow on l->fd, or a negative code with e naming
 * the parent (l closed when the link failed; a refusal leaves it open).
 */
static int ask(struct ndz_site_link *l, const struct ndz_site_req *r, uint64_t *n,
	       char *host, size_t hcap, uint16_t *portp, struct ndz_error *e)
{
	uint8_t req[NDZ_SITE_REQ_MAX], rep[NDZ_SITE_REP_LEN];
	uint16_t port, status;
	int fd, rc, k;

	if (ndz_ctl_hostport(l->spec, NDZ_CTL_PORT, host, hcap, &port, e) != 0)
		return NDZ_EINVAL;
	*portp = port;
	if ((k = ndz_site_req_encode(r, req, sizeof(req), e)) < 0)
		return k;
	if (l->fd < 0 && (l->fd = ndz_upload_dial(host, port, l->wait_s, e)) < 0) {
		rc = l->fd;
		l->fd = -1;
		return rc;
	}
	fd = l->fd;
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
	if ((rc = ndz_site_rep_decode(rep, r->id, &status, n, e)) != 0) {
		ndz_error_prefix(e, "parent %s:%u", host, port);
		goto out;
	}
	if (status == NDZ_CTL_MALFORMED && r->what == NDZ_SITE_IDENT) {
		/* an older parent, which closes after a request it cannot read */
		ndz_site_link_close(l);
		return ndz_error_set(e, NDZ_ENOTSUP, 0, "parent %s:%u: no identity requests (an "
				     "older master)", host, port);
	}
	if (status != NDZ_CTL_OK)
		return ndz_error_set(e, status == NDZ_CTL_UNKNOWN ? NDZ_ENOIMAGE : NDZ_EREFUSED, 0,
				     "parent %s:%u: image '%s': %s", host, port, r->name,
				     ndz_ctl_strstatus(status));
	return 0;
out:
	ndz_site_link_close(l);
	return rc;
}

int ndz_site_fetch(struct ndz_site_link *l, const struct ndz_site_req *r, uint8_t **out,
		   size_t *len, struct ndz_error *e)
{
	uint8_t *b = NULL;
	char host[256];
	uint16_t port;
	uint64_t n;
	int rc;

	*out = NULL;
	*len = 0;
	if ((rc = ask(l, r, &n, host, sizeof(host), &port, e)) < 0)
		return rc;
	if (n && !(b = malloc(n))) {
		ndz_site_link_close(l);        /* its bytes are not read */
		return ndz_error_set(e, NDZ_ENOMEM, 0, "parent %s:%u: %llu bytes", host, port,
				     (unsigned long long)n);
	}
	if (n && (rc = read_full(l->fd, b, n)) != 0) {
		ndz_site_link_close(l);
		free(b);
		return ndz_error_set(e, rc, 0, "parent %s:%u: image '%s': the reply ended early",
				     host, port, r->name);
	}
	*out = b;
	*len = n;
	return 0;
}

void ndz_site_ident_encode(const struct ndz_site_ident *id, uint8_t buf[NDZ_SITE_IDENT_LEN])
{
	put_le64(buf, id->bytes);
	put_le32(buf + 8, id->manifest ? 1 : 0);
	put_le32(buf + 12, 0);
	memcpy(buf + 16, id->index_sha, 32);
	if (id->manifest)
		memcpy(buf + 48, id->manifest_sha, 32);
	else
		memset(buf + 48, 0, 32);
}

int ndz_site_ident_decode(const uint8_t *buf, size_t len, struct ndz_site_ident *id,
			  struct ndz_error *e)
{
	memset(id, 0, sizeof(*id));
	if (len != NDZ_SITE_IDENT_LEN || get_le32(buf + 8) > 1 || get_le32(buf + 12))
		return ndz_error_set(e, NDZ_EPROTO, 0, "site identity: %zu bytes: malformed", len);
	id->bytes = get_le64(buf);
	id->manifest = (int)get_le32(buf + 8);
	memcpy(id->index_sha, buf + 16, 32);
	memcpy(id->manifest_sha, buf + 48, 32);
	return 0;
}

/* The SHA-256 of the file at path into out: 0, NDZ_ENOENT (none), or the code with e. */
static int sha256_file(const char *path, uint8_t out[32], struct ndz_error *e)
{
	uint8_t b[65536];
	EVP_MD_CTX *c;
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;

	if (fd < 0)
		return errno == ENOENT ? NDZ_ENOENT : ndz_error_set(e, NDZ_EIO, errno, "%s", path);
	if (!(c = EVP_MD_CTX_new()) || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1) {
		rc = ndz_error_set(e, NDZ_ENOMEM, 0, "%s: SHA-256", path);
		goto out;
	}
	while ((n = read(fd, b, sizeof(b))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			rc = ndz_error_set(e, NDZ_EIO, errno, "%s", path);
			goto out;
		}
		if (EVP_DigestUpdate(c, b, (size_t)n) != 1) {
			rc = ndz_error_set(e, NDZ_ENOMEM, 0, "%s: SHA-256", path);
			goto out;
		}
	}
	if (EVP_DigestFinal_ex(c, out, NULL) != 1)
		rc = ndz_error_set(e, NDZ_ENOMEM, 0, "%s: SHA-256", path);
out:
	EVP_MD_CTX_free(c);
	close(fd);
	return rc;
}

int ndz_site_ident_files(const char *image, const char *index, const char *manifest,
			 struct ndz_site_ident *id, struct ndz_error *e)
{
	struct stat st;
	int rc;

	memset(id, 0, sizeof(*id));
	if (stat(image, &st) != 0)
		return errno == ENOENT ? ndz_error_set(e, NDZ_ENOIMAGE, 0, "%s: none", image) :
		       ndz_error_set(e, NDZ_EIO, errno, "%s", image);
	id->bytes = (uint64_t)st.st_size;
	if ((rc = sha256_file(index, id->index_sha, e)) == NDZ_ENOENT)
		return ndz_error_set(e, NDZ_ENOIMAGE, 0, "%s: none", index);
	if (rc != 0)
		return rc;
	if (!manifest || (rc = sha256_file(manifest, id->manifest_sha, e)) == NDZ_ENOENT)
		return 0;
	id->manifest = rc == 0;
	return rc;
}

int ndz_site_ident_same(const struct ndz_site_ident *a, const struct ndz_site_ident *b)
{
	return a->bytes == b->bytes && a->manifest == b->manifest &&
	       memcmp(a->index_sha, b->index_sha, 32) == 0 &&
	       (!a->manifest || memcmp(a->manifest_sha, b->manifest_sha, 32) == 0);
}

int ndz_site_ident(struct ndz_site_link *l, const char *name, struct ndz_site_ident *id,
		   struct ndz_error *e)
{
	struct ndz_site_req r = { .id = 1, .what = NDZ_SITE_IDENT };
	uint8_t *b = NULL;
	size_t len = 0;
	int rc;

	snprintf(r.name, sizeof(r.name), "%s", name);
	if ((rc = ndz_site_fetch(l, &r, &b, &len, e)) != 0)
		return rc;
	rc = ndz_site_ident_decode(b, len, id, e);
	free(b);
	if (rc != 0) {
		ndz_site_link_close(l);
		ndz_error_prefix(e, "parent %s", l->spec);
	}
	return rc;
}

int ndz_site_fetch_chunks(struct ndz_site_link *l, const struct ndz_site_req *r,
			  int (*each)(void *arg, uint32_t k, const uint8_t *chunk),
			  void *arg, struct ndz_error *e)
{
	uint8_t *b = NULL;
	char host[256];
	uint16_t port;
	uint64_t n;
	int rc;

	if ((rc = ask(l, r, &n, host, sizeof(host), &port, e)) < 0)
		return rc;
	if (r->what != NDZ_SITE_CHUNKS_OF || n != (uint64_t)r->count * NDZ_CHUNK_SIZE) {
		ndz_site_link_close(l);
		return ndz_error_set(e, NDZ_EPROTO, 0, "parent %s:%u: %llu bytes for %u chunks",
				     host, port, (unsigned long long)n, r->count);
	}
	if (!(b = malloc(NDZ_CHUNK_SIZE))) {
		ndz_site_link_close(l);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "parent %s:%u: a chunk", host, port);
	}
	for (uint32_t k = 0; k < r->count && rc == 0; k++) {
		if ((rc = read_full(l->fd, b, NDZ_CHUNK_SIZE)) != 0)
			ndz_error_set(e, rc, 0, "parent %s:%u: image '%s': the reply ended early",
				      host, port, r->name);
		else
			rc = each(arg, k, b);
	}
	if (rc != 0)                   /* the rest of the reply is not read */
		ndz_site_link_close(l);
	free(b);
	return rc;
}

int ndz_site_report_encode(const char *table, size_t tlen, const char *json, size_t jlen,
			   uint8_t **out, size_t *len, struct ndz_error *e)
{
	*out = NULL;
	*len = 0;
	if (4 + tlen + jlen > NDZ_SITE_REPORT_MAX)
		return ndz_error_set(e, NDZ_EINVAL, 0, "site report: %zu bytes, too long",
				     4 + tlen + jlen);
	if (!(*out = malloc(4 + tlen + jlen)))
		return ndz_error_set(e, NDZ_ENOMEM, 0, "site report");
	put_le32(*out, (uint32_t)tlen);
	memcpy(*out + 4, table, tlen);
	memcpy(*out + 4 + tlen, json, jlen);
	*len = 4 + tlen + jlen;
	return 0;
}

int ndz_site_report_decode(const uint8_t *buf, size_t len, const char **table, size_t *tlen,
			   const char **json, size_t *jlen, struct ndz_error *e)
{
	if (len < 4 || get_le32(buf) > len - 4)
		return ndz_error_set(e, NDZ_EPROTO, 0, "site report: %zu bytes: malformed", len);
	*tlen = get_le32(buf);
	*table = (const char *)buf + 4;
	*json = (const char *)buf + 4 + *tlen;
	*jlen = len - 4 - *tlen;
	if (memchr(*table, 0, *tlen) || memchr(*json, 0, *jlen))
		return ndz_error_set(e, NDZ_EPROTO, 0, "site report: a NUL in its text");
	return 0;
}

int ndz_site_report(struct ndz_site_link *l, struct ndz_site_req *r, const uint8_t *body,
		    size_t body_len, uint8_t **tasks, size_t *tlen, struct ndz_error *e)
{
	uint8_t req[NDZ_SITE_REQ_MAX], rep[NDZ_SITE_REP_LEN];
	char host[256];
	uint16_t port, status;
	uint64_t n;
	int k, rc;

	*tasks = NULL;
	*tlen = 0;
	r->what = NDZ_SITE_REPORT;
	r->first = 0;
	r->count = (uint32_t)body_len;
	if (ndz_ctl_hostport(l->spec, NDZ_CTL_PORT, host, sizeof(host), &port, e) != 0)
		return NDZ_EINVAL;
	if ((k = ndz_site_req_encode(r, req, sizeof(req), e)) < 0)
		return k;
	if (l->fd < 0 && (l->fd = ndz_upload_dial(host, port, l->wait_s, e)) < 0) {
		rc = l->fd;
		l->fd = -1;
		return rc;
	}
	for (size_t off = 0; off < (size_t)k + body_len;) {
		const uint8_t *p = off < (size_t)k ? req + off : body + (off - (size_t)k);
		size_t want = off < (size_t)k ? (size_t)k - off : body_len - (off - (size_t)k);
		ssize_t w = send(l->fd, p, want, MSG_NOSIGNAL);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			ndz_site_link_close(l);
			return ndz_error_set(e, NDZ_ENET, errno, "parent %s:%u: sending", host, port);
		}
		off += (size_t)w;
	}
	if ((rc = read_full(l->fd, rep, sizeof(rep))) != 0 ||
	    (rc = ndz_site_rep_decode(rep, r->id, &status, &n, e)) != 0 ||
	    n > NDZ_SITE_TASKS_MAX) {
		ndz_site_link_close(l);
		return ndz_error_set(e, rc ? rc : NDZ_EPROTO, 0, "parent %s:%u: no reply to the "
				     "report", host, port);
	}
	if (status != NDZ_CTL_OK)
		return ndz_error_set(e, NDZ_EREFUSED, 0, "parent %s:%u: report: %s", host, port,
				     ndz_ctl_strstatus(status));
	if (n && (!(*tasks = malloc(n)) || (rc = read_full(l->fd, *tasks, n)) != 0)) {
		free(*tasks);
		*tasks = NULL;
		ndz_site_link_close(l);
		return ndz_error_set(e, rc ? rc : NDZ_ENOMEM, 0, "parent %s:%u: the tasks "
				     "ended early", host, port);
	}
	*tlen = n;
	return 0;
}

void ndz_site_want_write(const char *image, uint32_t chunk)
{
	char path[PATH_MAX], tmp[PATH_MAX], line[16];
	int fd, n = snprintf(line, sizeof(line), "%u\n", chunk);

	if ((size_t)snprintf(path, sizeof(path), "%s.want", image) >= sizeof(path) ||
	    (size_t)snprintf(tmp, sizeof(tmp), "%s.want.%ld", image, (long)getpid()) >=
	    sizeof(tmp))
		return;
	/* renamed into place: a reader sees a whole line or the one before */
	if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		return;
	if (write(fd, line, (size_t)n) != n || close(fd) != 0 || rename(tmp, path) != 0)
		unlink(tmp);
}

uint32_t ndz_site_want_read(const char *image, uint32_t chunks)
{
	char path[PATH_MAX], line[16];
	unsigned long v;
	char *end;
	ssize_t n;
	int fd;

	if ((size_t)snprintf(path, sizeof(path), "%s.want", image) >= sizeof(path) ||
	    (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return UINT32_MAX;
	n = read(fd, line, sizeof(line) - 1);
	close(fd);
	if (n <= 1 || line[n - 1] != '\n')
		return UINT32_MAX;
	line[n - 1] = 0;
	errno = 0;
	v = strtoul(line, &end, 10);
	return errno || *end || line[0] < '0' || line[0] > '9' || v >= chunks ? UINT32_MAX :
	       (uint32_t)v;
}
