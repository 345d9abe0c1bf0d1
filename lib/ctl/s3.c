/* An S3-compatible object store's client on libcurl (AWS SigV4 signed by curl). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "s3.h"

#define ERRBODY 2048                   /* of an error reply's XML, kept for its <Code> */

struct ndz_s3 {
	CURL *c;
	char endpoint[256], region[64], bucket[64], prefix[208];
	char access[256], secret[256];
	char sigv4[96];
	uint64_t part;                 /* a multipart upload's part; an object over it is one */
	char name[600];
	int wait_s;
	char etag[160];                /* the last successful reply's ETag ("": none) */
};

static int isalnum_(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
}

int ndz_s3_valid_endpoint(const char *s)
{
	const char *h;
	size_t n = 0;

	if (!s || strlen(s) >= 200)
		return 0;
	if (strncmp(s, "http://", 7) == 0)
		h = s + 7;
	else if (strncmp(s, "https://", 8) == 0)
		h = s + 8;
	else
		return 0;
	for (; h[n]; n++)
		if (!isalnum_(h[n]) && !strchr(".-:[]", h[n]))
			return 0;
	return n > 0;
}

int ndz_s3_valid_bucket(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n < 3 || n > 63)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] >= 'a' && s[i] <= 'z') && !(s[i] >= '0' && s[i] <= '9') &&
		    s[i] != '.' && s[i] != '-')
			return 0;
	return 1;
}

int ndz_s3_valid_prefix(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n > 200 || (n && s[0] == '/') || (s && strstr(s, "//")))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum_(s[i]) && !strchr("._-/", s[i]))
			return 0;
	return 1;
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static CURLcode global_rc = CURLE_FAILED_INIT;

static void global_init(void)
{
	global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* "access-key KEY" and "secret-key SECRET" from path, a file only its owner reads. */
static int read_credentials(struct ndz_s3 *s, const char *path, struct ndz_error *e)
{
	char line[600];
	unsigned no = 0;
	struct stat st;
	FILE *f;
	int rc = 0;

	if (!path)
		return ndz_error_set(e, NDZ_EINVAL, 0, "store: no store-credentials file");
	if (!(f = fopen(path, "re")))
		return ndz_error_set(e, errno == ENOENT ? NDZ_EINVAL : NDZ_EIO, errno,
				     "store credentials %s", path);
	if (fstat(fileno(f), &st) != 0 || (st.st_mode & 077)) {
		fclose(f);
		return ndz_error_set(e, NDZ_EKEYPERM, 0, "store credentials %s: readable by group "
				     "or others (chmod 600)", path);
	}
	while (rc == 0 && fgets(line, sizeof(line), f)) {
		char k[32], v[300], extra[2];
		int n;

		no++;
		if (!strchr(line, '\n') && !feof(f))
			rc = ndz_error_set(e, NDZ_EINVAL, 0, "store credentials %s:%u: line too long",
					   path, no);
		else if ((n = sscanf(line, "%31s %299s %1s", k, v, extra)) <= 0 || k[0] == '#')
			continue;
		else if (n != 2 || strlen(v) >= sizeof(s->access))
			rc = ndz_error_set(e, NDZ_EINVAL, 0, "store credentials %s:%u: not "
					   "'access-key KEY' or 'secret-key SECRET'", path, no);
		else if (strcmp(k, "access-key") == 0)
			snprintf(s->access, sizeof(s->access), "%s", v);
		else if (strcmp(k, "secret-key") == 0)
			snprintf(s->secret, sizeof(s->secret), "%s", v);
		else
			rc = ndz_error_set(e, NDZ_EINVAL, 0, "store credentials %s:%u: unknown key "
					   "'%s'", path, no, k);
	}
	if (ferror(f) && rc == 0)
		rc = ndz_error_set(e, NDZ_EIO, errno, "store credentials %s", path);
	fclose(f);
	if (rc == 0 && (!s->access[0] || !s->secret[0]))
		rc = ndz_error_set(e, NDZ_EINVAL, 0, "store credentials %s: needs an access-key "
				   "and a secret-key line", path);
	return rc;
}

int ndz_s3_open(const struct ndz_s3_conf *c, int wait_s, struct ndz_s3 **out,
		struct ndz_error *e)
{
	struct ndz_s3 *s;
	int rc;

	*out = NULL;
	if (!ndz_s3_valid_endpoint(c->endpoint))
		return ndz_error_set(e, NDZ_EINVAL, 0, "store: bad endpoint '%s' (http:// or "
				     "https://, a host and a port)", c->endpoint ? c->endpoint : "");
	if (!ndz_s3_valid_bucket(c->bucket))
		return ndz_error_set(e, NDZ_EINVAL, 0, "store: bad bucket '%s' (3-63 of a-z 0-9 . -)",
				     c->bucket ? c->bucket : "");
	if (!ndz_s3_valid_prefix(c->prefix))
		return ndz_error_set(e, NDZ_EINVAL, 0, "store: bad prefix '%s'", c->prefix);
	pthread_once(&once, global_init);
	if (global_rc != CURLE_OK)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "store: libcurl: %s",
				     curl_easy_strerror(global_rc));
	if (!(s = calloc(1, sizeof(*s))))
		return ndz_error_set(e, NDZ_ENOMEM, 0, "store");
	snprintf(s->endpoint, sizeof(s->endpoint), "%s", c->endpoint);
	snprintf(s->region, sizeof(s->region), "%s", c->region ? c->region : "us-east-1");
	snprintf(s->bucket, sizeof(s->bucket), "%s", c->bucket);
	snprintf(s->prefix, sizeof(s->prefix), "%s", c->prefix ? c->prefix : "");
	snprintf(s->sigv4, sizeof(s->sigv4), "aws:amz:%s:s3", s->region);
	snprintf(s->name, sizeof(s->name), "store %s/%s%s%s", s->endpoint, s->bucket,
		 s->prefix[0] ? "/" : "", s->prefix);
	s->wait_s = wait_s > 0 ? wait_s : 10;
	s->part = c->part_bytes ? c->part_bytes : NDZ_S3_PART;
	if (s->part < NDZ_S3_PART_MIN)
		s->part = NDZ_S3_PART_MIN;
	if ((rc = read_credentials(s, c->credentials, e)) != 0) {
		ndz_s3_free(s);
		return rc;
	}
	if (!(s->c = curl_easy_init())) {
		ndz_s3_free(s);
		return ndz_error_set(e, NDZ_ENOMEM, 0, "store: libcurl");
	}
	*out = s;
	return 0;
}

void ndz_s3_free(struct ndz_s3 *s)
{
	if (!s)
		return;
	if (s->c)
		curl_easy_cleanup(s->c);
	memset(s->secret, 0, sizeof(s->secret));
	free(s);
}

const char *ndz_s3_name(const struct ndz_s3 *s)
{
	return s->name;
}

/* One request's reply body and upload source. */
struct xfer {
	CURL *c;
	uint8_t *b;                    /* the body (a 2xx reply) */
	size_t len, cap;
	uint64_t max;
	int over;                      /* more than max came */
	char err[ERRBODY];             /* an error reply's body, cut */
	size_t elen;
	const uint8_t *up;             /* PUT: from memory ... */
	int fd;                        /* ... or from fd at base (-1: memory) */
	uint64_t base, upoff, uplen;
	const char *post;              /* POST: the body (postlen bytes) */
	size_t postlen;
	char etag[160];                /* the reply's ETag header */
	int ioerr;
};

static size_t on_body(char *p, size_t one, size_t n, void *arg)
{
	struct xfer *x = arg;
	long code = 0;

	n *= one;
	curl_easy_getinfo(x->c, CURLINFO_RESPONSE_CODE, &code);
	if (code < 200 || code >= 300) {
		size_t k = n < sizeof(x->err) - 1 - x->elen ? n : sizeof(x->err) - 1 - x->elen;

		memcpy(x->err + x->elen, p, k);
		x->elen += k;
		x->err[x->elen] = 0;
		return n;
	}
	if (x->len + n > x->max) {
		x->over = 1;
		return 0;
	}
	if (x->len + n > x->cap) {
		size_t cap = x->cap ? x->cap : 65536;
		uint8_t *b;

		while (cap < x->len + n)
			cap *= 2;
		if (cap > x->max)
			cap = (size_t)x->max;
		if (!(b = realloc(x->b, cap))) {
			x->ioerr = ENOMEM;
			return 0;
		}
		x->b = b;
		x->cap = cap;
	}
	memcpy(x->b + x->len, p, n);
	x->len += n;
	return n;
}

static size_t on_read(char *p, size_t one, size_t n, void *arg)
{
	struct xfer *x = arg;
	uint64_t left = x->uplen - x->upoff;
	size_t k = (n *= one) < left ? n : (size_t)left;

	if (!k)
		return 0;
	if (x->fd < 0) {
		memcpy(p, x->up + x->upoff, k);
	} else {
		ssize_t got = pread(x->fd, p, k, (off_t)(x->base + x->upoff));

		if (got <= 0) {
			x->ioerr = got < 0 ? errno : EIO;
			return CURL_READFUNC_ABORT;
		}
		k = (size_t)got;
	}
	x->upoff += k;
	return k;
}

/* A reply's header line: its ETag kept (a part's, for the multipart upload's end). */
static size_t on_header(char *p, size_t one, size_t n, void *arg)
{
	struct xfer *x = arg;
	size_t len = n * one, k = 0;

	if (len > 5 && strncasecmp(p, "etag:", 5) == 0) {
		for (p += 5, len -= 5; len && (*p == ' ' || *p == '\t'); p++, len--)
			;
		while (k < len && k < sizeof(x->etag) - 1 && p[k] != '\r' && p[k] != '\n')
			k++;
		memcpy(x->etag, p, k);
		x->etag[k] = 0;
	}
	return n * one;
}

/* The text between <tag> and </tag> in xml (NUL-ended), or "". */
static void xml_value(const char *xml, const char *tag, char *out, size_t cap)
{
	char open[40], close[40];
	const char *a, *b;
	size_t n = 0;

	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	if ((a = strstr(xml, open)) && (b = strstr(a, close))) {
		a += strlen(open);
		n = (size_t)(b - a) < cap - 1 ? (size_t)(b - a) : cap - 1;
	}
	memcpy(out, n ? a : "", n);
	out[n] = 0;
}

/* The <Code> of an S3 error reply, or "". */
static void s3_code(const char *xml, char *out, size_t cap)
{
	const char *a = strstr(xml, "<Code>"), *b = a ? strstr(a, "</Code>") : NULL;
	size_t n = a && b ? (size_t)(b - a - 6) : 0;

	if (n >= cap)
		n = cap - 1;
	memcpy(out, a ? a + 6 : "", n);
	out[n] = 0;
	for (size_t i = 0; i < n; i++)
		if (!isalnum_(out[i]) && out[i] != '.' && out[i] != '-' && out[i] != '_')
			out[i] = '?';
}

static int transient_http(long code)
{
	return code == 500 || code == 502 || code == 503 || code == 504 || code == 429;
}

/*
 * One request: method on key; range len bytes at off (len 0: none); upload from x; head:
 * no body. The HTTP status into *code; 0 when 2xx, else the code with e set.
 */
static int once_(struct ndz_s3 *s, const char *method, const char *key, uint64_t off,
		 uint64_t len, int head, struct xfer *x, long *code, struct ndz_error *e)
{
	char url[2560], range[64], what[3200], s3c[64];
	struct curl_slist *hd;
	CURL *c = s->c;
	CURLcode cr;
	int n;

	n = snprintf(url, sizeof(url), "%s/%s/%s%s", s->endpoint, s->bucket, s->prefix, key);
	snprintf(what, sizeof(what), "%s: %s %s%s", s->name, method, s->prefix, key);
	if (n < 0 || (size_t)n >= sizeof(url))
		return ndz_error_set(e, NDZ_EINVAL, 0, "%s: the address is too long", what);
	curl_easy_reset(c);
	x->c = c;
	/* curl signs the headers it is given: no "Expect:" to drop its 100-continue, which
	   would be signed as sent and is not */
	if (!(hd = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD")))
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s", what);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
	curl_easy_setopt(c, CURLOPT_USERNAME, s->access);
	curl_easy_setopt(c, CURLOPT_PASSWORD, s->secret);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hd);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, (long)s->wait_s);
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);       /* wait_s of silence: lost */
	curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (long)s->wait_s);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	if (head)
		curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	if (len) {
		snprintf(range, sizeof(range), "%llu-%llu", (unsigned long long)off,
			 (unsigned long long)(off + len - 1));
		curl_easy_setopt(c, CURLOPT_RANGE, range);
	}
	if (strcmp(method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, x->post);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->postlen);
	} else if (strcmp(method, "DELETE") == 0) {
		curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "DELETE");
	}
	if (strcmp(method, "PUT") == 0) {
		curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
		curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
		curl_easy_setopt(c, CURLOPT_READDATA, x);
		curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)x->uplen);
	}
	cr = curl_easy_perform(c);
	curl_slist_free_all(hd);
	*code = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, code);
	if (x->ioerr)
		return ndz_error_set(e, x->ioerr == ENOMEM ? NDZ_ENOMEM : NDZ_EIO, x->ioerr, "%s",
				     what);
	if (x->over)
		return ndz_error_set(e, NDZ_ERANGE, 0, "%s: more than %llu bytes", what,
				     (unsigned long long)x->max);
	if (cr == CURLE_OPERATION_TIMEDOUT)
		return ndz_error_set(e, NDZ_ETIMEDOUT, 0, "%s: no answer in %d s", what, s->wait_s);
	if (cr == CURLE_PARTIAL_FILE)
		return ndz_error_set(e, NDZ_ESHORTREAD, 0, "%s: the reply was cut short", what);
	if (cr != CURLE_OK)
		return ndz_error_set(e, NDZ_ENET, 0, "%s: %s", what, curl_easy_strerror(cr));
	if (*code >= 200 && *code < 300)
		return 0;
	s3_code(x->err, s3c, sizeof(s3c));
	if (!s3c[0])
		snprintf(s3c, sizeof(s3c), "no S3 code");
	if (*code == 404)
		return ndz_error_set(e, NDZ_ENOIMAGE, 0, "%s: not found (HTTP 404, %s)", what,
				     s3c);
	if (*code == 403)
		return ndz_error_set(e, NDZ_EDENIED, 0, "%s: refused (HTTP 403, %s: check the "
				     "store-credentials and the clock)", what, s3c);
	if (*code == 416)
		return ndz_error_set(e, NDZ_ERANGE, 0, "%s: past the object's end (HTTP 416)",
				     what);
	if (transient_http(*code))
		return ndz_error_set(e, NDZ_ENET, 0, "%s: the store failed (HTTP %ld, %s)", what,
				     *code, s3c);
	return ndz_error_set(e, NDZ_EREFUSED, 0, "%s: refused (HTTP %ld, %s)", what, *code, s3c);
}

/* once_, again after a failure in passing (the link, a 5xx), up to NDZ_S3_TRIES times. */
static int request(struct ndz_s3 *s, const char *method, const char *key, uint64_t off,
		   uint64_t len, int head, struct xfer *x, struct ndz_error *e)
{
	int rc = 0;

	for (int t = 0; t < NDZ_S3_TRIES; t++) {
		long code;

		if (t) {
			ndz_error_clear(e);
			nanosleep(&(struct timespec){ 0, (250L << (t - 1)) * 1000000L }, NULL);
		}
		x->len = x->elen = 0;
		x->err[0] = 0;
		x->over = x->ioerr = 0;
		x->upoff = 0;
		x->etag[0] = 0;
		rc = once_(s, method, key, off, len, head, x, &code, e);
		if (rc != NDZ_ENET && rc != NDZ_ETIMEDOUT && rc != NDZ_ESHORTREAD)
			break;
	}
	if (rc == 0)
		memcpy(s->etag, x->etag, sizeof(s->etag));
	else
		s->etag[0] = 0;
	return rc;
}

int ndz_s3_get(struct ndz_s3 *s, const char *key, uint64_t off, uint64_t len, uint64_t max,
	       uint8_t **out, size_t *outlen, struct ndz_error *e)
{
	struct xfer x = { .max = len ? len : max, .fd = -1 };
	int rc;

	*out = NULL;
	*outlen = 0;
	rc = request(s, "GET", key, off, len, 0, &x, e);
	if (rc == 0 && len && x.len != len)
		rc = ndz_error_set(e, NDZ_ESHORTREAD, 0, "%s: GET %s%s: %zu of %llu bytes came",
				   s->name, s->prefix, key, x.len, (unsigned long long)len);
	if (rc != 0) {
		free(x.b);
		return rc;
	}
	*out = x.b;
	*outlen = x.len;
	return 0;
}

int ndz_s3_head(struct ndz_s3 *s, const char *key, uint64_t *size, struct ndz_error *e)
{
	struct xfer x = { .fd = -1 };
	curl_off_t n = -1;
	int rc = request(s, "HEAD", key, 0, 0, 1, &x, e);

	free(x.b);
	if (rc != 0)
		return rc;
	curl_easy_getinfo(s->c, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &n);
	if (n < 0)
		return ndz_error_set(e, NDZ_EPROTO, 0, "%s: HEAD %s%s: no length", s->name,
				     s->prefix, key);
	*size = (uint64_t)n;
	return 0;
}

const char *ndz_s3_etag(const struct ndz_s3 *s)
{
	return s->etag;
}

int ndz_s3_put(struct ndz_s3 *s, const char *key, const void *buf, size_t len,
	       struct ndz_error *e)
{
	struct xfer x = { .fd = -1, .up = buf, .uplen = len, .max = ERRBODY };
	int rc = request(s, "PUT", key, 0, 0, 0, &x, e);

	free(x.b);
	return rc;
}

int ndz_s3_delete(struct ndz_s3 *s, const char *key, struct ndz_error *e)
{
	struct xfer x = { .fd = -1, .max = ERRBODY };
	int rc = request(s, "DELETE", key, 0, 0, 0, &x, e);

	free(x.b);
	return rc;
}

/* s with each byte but A-Z a-z 0-9 - . _ ~ as %XX (a query value, as SigV4 wants it). */
static void uri_encode(const char *s, char *out, size_t cap)
{
	size_t n = 0;

	for (; *s && n + 4 < cap; s++) {
		if (isalnum_(*s) || strchr("-._~", *s))
			out[n++] = *s;
		else
			n += (size_t)snprintf(out + n, cap - n, "%%%02X", (unsigned char)*s);
	}
	out[n] = 0;
}

/* The reply's body as a string ("" when none or no memory). */
static const char *nul_ended(struct xfer *x)
{
	uint8_t *b;

	if (x->len < x->cap) {
		x->b[x->len] = 0;
		return (const char *)x->b;
	}
	if (!(b = realloc(x->b, x->len + 1)))
		return "";
	x->b = b;
	x->cap = x->len + 1;
	b[x->len] = 0;
	return (const char *)b;
}

/*
 * A multipart upload: begun (POST ?uploads=), each part of s->part bytes PUT with its
 * number, then completed with the parts' ETags (POST ?uploadId=); aborted (DELETE) when
 * a step fails, so that no half object stays behind.
 */
static int put_multipart(struct ndz_s3 *s, const char *key, int fd, uint64_t size,
			 struct ndz_error *e)
{
	uint32_t parts = (uint32_t)((size + s->part - 1) / s->part);
	char q[2048], id[256], eid[768];
	struct xfer x = { .fd = -1, .post = "", .max = 65536 };
	size_t cap = 128 + (size_t)parts * 220, len = 0;
	char *xml = malloc(cap);
	int rc;

	if (!xml)
		return ndz_error_set(e, NDZ_ENOMEM, 0, "%s", s->name);
	snprintf(q, sizeof(q), "%s?uploads=", key);
	if ((rc = request(s, "POST", q, 0, 0, 0, &x, e)) != 0)
		goto out;
	xml_value(nul_ended(&x), "UploadId", id, sizeof(id));
	if (!id[0]) {
		rc = ndz_error_set(e, NDZ_EPROTO, 0, "%s: POST %s%s: no UploadId", s->name,
				   s->prefix, q);
		goto out;
	}
	uri_encode(id, eid, sizeof(eid));
	len = (size_t)snprintf(xml, cap, "<CompleteMultipartUpload>");
	for (uint32_t i = 0; rc == 0 && i < parts; i++) {
		uint64_t off = (uint64_t)i * s->part;
		struct xfer px = { .fd = fd, .base = off, .max = ERRBODY,
				   .uplen = size - off < s->part ? size - off : s->part };

		snprintf(q, sizeof(q), "%s?partNumber=%u&uploadId=%s", key, i + 1, eid);
		rc = request(s, "PUT", q, 0, 0, 0, &px, e);
		free(px.b);
		if (rc == 0 && !px.etag[0])
			rc = ndz_error_set(e, NDZ_EPROTO, 0, "%s: PUT %s%s part %u: no ETag",
					   s->name, s->prefix, key, i + 1);
		if (rc == 0)
			len += (size_t)snprintf(xml + len, cap - len, "<Part><PartNumber>%u"
						"</PartNumber><ETag>%s</ETag></Part>", i + 1,
						px.etag);
	}
	if (rc == 0) {
		len += (size_t)snprintf(xml + len, cap - len, "</CompleteMultipartUpload>");
		snprintf(q, sizeof(q), "%s?uploadId=%s", key, eid);
		free(x.b);
		x = (struct xfer){ .fd = -1, .post = xml, .postlen = len, .max = 65536 };
		rc = request(s, "POST", q, 0, 0, 0, &x, e);
		/* a 200 whose body is an <Error> is a failure too (S3 says so) */
		if (rc == 0) {
			char code[64];

			xml_value(nul_ended(&x), "Code", code, sizeof(code));
			if (strstr(nul_ended(&x), "<Error>"))
				rc = ndz_error_set(e, NDZ_ENET, 0, "%s: POST %s%s: %s", s->name,
						   s->prefix, q, code[0] ? code : "an error");
		}
	}
	if (rc != 0) {
		struct xfer d = { .fd = -1, .max = ERRBODY };

		snprintf(q, sizeof(q), "%s?uploadId=%s", key, eid);
		if (id[0])
			once_(s, "DELETE", q, 0, 0, 0, &d, &(long){ 0 }, NULL);
		free(d.b);
	}
out:
	free(x.b);
	free(xml);
	return rc;
}

int ndz_s3_put_fd(struct ndz_s3 *s, const char *key, int fd, uint64_t size,
		  struct ndz_error *e)
{
	struct xfer x = { .fd = fd, .uplen = size, .max = ERRBODY };
	int rc;

	if (size > s->part * 10000)
		return ndz_error_set(e, NDZ_ERANGE, 0, "%s: PUT %s%s: %llu bytes, over 10000 "
				     "parts", s->name, s->prefix, key, (unsigned long long)size);
	if (size > s->part)
		return put_multipart(s, key, fd, size, e);
	rc = request(s, "PUT", key, 0, 0, 0, &x, e);
	free(x.b);
	return rc;
}
