/*
 * A client of an S3-compatible object store (Ceph's RADOS Gateway, MinIO, AWS; doc/SITES.md
 * "An object store"): GET whole or by range, HEAD, PUT, over libcurl, which signs each
 * request with AWS Signature Version 4. Path-style addresses (ENDPOINT/BUCKET/KEY), so
 * that a store without wildcard DNS works. One handle per thread; its connection is kept.
 */
#ifndef NDZ_S3_H
#define NDZ_S3_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define NDZ_S3_TRIES 3                 /* a request that fails in passing is made this often */
#define NDZ_S3_PART (64ull << 20)      /* an object over this is put in parts of it */
#define NDZ_S3_PART_MIN (5ull << 20)   /* S3's smallest part (but the last) */

/* Where the objects are: what mfrisbeed.conf's store lines say. */
struct ndz_s3_conf {
	const char *endpoint;          /* http://HOST[:PORT] or https://...; no path */
	const char *region;            /* NULL: us-east-1 */
	const char *bucket;
	const char *prefix;            /* put before each key ("" or NULL: none), e.g. "ndz/" */
	const char *credentials;       /* a file: "access-key KEY" and "secret-key SECRET" lines */
	uint64_t part_bytes;           /* a multipart upload's part: 0 NDZ_S3_PART; at least
					* NDZ_S3_PART_MIN */
};

struct ndz_s3;

/*
 * ndz_s3_valid_endpoint / _bucket / _prefix - 1 when the value is usable: an endpoint is
 * http:// or https://, a host and an optional port, nothing else; a bucket 3-63 of
 * a-z 0-9 . -; a prefix at most 200 of A-Z a-z 0-9 . _ - / (no "//", no leading "/").
 */
int ndz_s3_valid_endpoint(const char *s);
int ndz_s3_valid_bucket(const char *s);
int ndz_s3_valid_prefix(const char *s);

/*
 * ndz_s3_open - a handle for the store c (its strings copied), the credentials read
 * from c->credentials (a file no group or other may read: NDZ_EKEYPERM), waiting at
 * most wait_s seconds for a connection and for each silence. 0 with *out, or NDZ_EINVAL
 * (a bad value, a malformed credentials file) / NDZ_EIO / NDZ_ENOMEM with e set.
 * ndz_s3_free - the handle gone; NULL is fine. ndz_s3_name - "ENDPOINT/BUCKET/PREFIX",
 * for messages.
 */
int ndz_s3_open(const struct ndz_s3_conf *c, int wait_s, struct ndz_s3 **out,
		struct ndz_error *e);
void ndz_s3_free(struct ndz_s3 *s);
const char *ndz_s3_name(const struct ndz_s3 *s);

/*
 * ndz_s3_get - object key (the prefix put before it): with len 0 the whole object (at
 * most max bytes), else the bytes [off, off + len), which must all come. 0 with *out
 * (malloc'ed, the caller frees) and *outlen; NDZ_ENOIMAGE (no such object or bucket),
 * NDZ_EDENIED (403: bad credentials or signature, no right), NDZ_ERANGE (past the
 * object's end, or over max), NDZ_EREFUSED (another refusal), NDZ_ENET / NDZ_ETIMEDOUT
 * (the connection, or the store failing (5xx) NDZ_S3_TRIES times), NDZ_ESHORTREAD (fewer
 * bytes than asked); e says which with the store's own code ("SignatureDoesNotMatch").
 * ndz_s3_head - the object's size into *size; codes as ndz_s3_get's.
 */
int ndz_s3_get(struct ndz_s3 *s, const char *key, uint64_t off, uint64_t len, uint64_t max,
	       uint8_t **out, size_t *outlen, struct ndz_error *e);
int ndz_s3_head(struct ndz_s3 *s, const char *key, uint64_t *size, struct ndz_error *e);

/*
 * ndz_s3_etag - the ETag the last request on s answered with, as the store sent it
 * (quotes and all; "" when it failed or sent none): a GET's or HEAD's tells whether an
 * object changed since (a recheck, doc/SITES.md "Updates"). Valid until the next request.
 */
const char *ndz_s3_etag(const struct ndz_s3 *s);

/*
 * ndz_s3_put - the object key made (or replaced) with len bytes of buf. ndz_s3_put_fd - the
 * same with size bytes read from fd at offset 0: one PUT up to the part size, else a
 * multipart upload (aborted when a step fails; at most 10000 parts: NDZ_ERANGE).
 * 0, or codes as ndz_s3_get's (NDZ_EPROTO: a multipart reply without its UploadId or
 * a part's ETag).
 */
int ndz_s3_put(struct ndz_s3 *s, const char *key, const void *buf, size_t len,
	       struct ndz_error *e);
int ndz_s3_put_fd(struct ndz_s3 *s, const char *key, int fd, uint64_t size,
		  struct ndz_error *e);

/* ndz_s3_delete - the object key gone (S3 answers 204 for one that was not there). 0, or
 * codes as ndz_s3_get's. */
int ndz_s3_delete(struct ndz_s3 *s, const char *key, struct ndz_error *e);

#endif
