/*
 * Unit tests for lib/ctl/s3: the store's settings and credentials file, and the client
 * against a small HTTP server in a thread that answers each connection with the next
 * canned reply (a store failing in passing, a missing object, a short range, a refusal).
 * The real store (Ceph's radosgw) is tests/ceph/site_store.sh's.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>

#include "ctl/s3.h"

static void test_valid(void **state)
{
	(void)state;
	assert_true(ndz_s3_valid_endpoint("http://10.0.0.1:7480"));
	assert_true(ndz_s3_valid_endpoint("https://s3.example.org"));
	assert_false(ndz_s3_valid_endpoint("ftp://x"));
	assert_false(ndz_s3_valid_endpoint("http://"));
	assert_false(ndz_s3_valid_endpoint("http://h/path"));
	assert_false(ndz_s3_valid_endpoint("http://h?x"));
	assert_true(ndz_s3_valid_bucket("ndz-images.1"));
	assert_false(ndz_s3_valid_bucket("ab"));
	assert_false(ndz_s3_valid_bucket("Upper"));
	assert_false(ndz_s3_valid_bucket("a/b"));
	assert_true(ndz_s3_valid_prefix(""));
	assert_true(ndz_s3_valid_prefix("lab/images/"));
	assert_false(ndz_s3_valid_prefix("/lab"));
	assert_false(ndz_s3_valid_prefix("a//b"));
	assert_false(ndz_s3_valid_prefix("a b"));
}

static char dir[64];

static const char *cred(const char *name, const char *text, mode_t mode)
{
	static char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(chmod(path, mode), 0);
	return path;
}

static void test_credentials(void **state)
{
	struct ndz_s3_conf c = { .endpoint = "http://127.0.0.1:9", .bucket = "bkt", .prefix = "" };
	struct ndz_error e = { 0 };
	struct ndz_s3 *s;

	(void)state;
	c.credentials = cred("ok", "# the store's user\naccess-key AK\nsecret-key SK\n", 0600);
	assert_int_equal(ndz_s3_open(&c, 2, &s, &e), 0);
	assert_string_equal(ndz_s3_name(s), "store http://127.0.0.1:9/bkt");
	ndz_s3_free(s);
	c.credentials = cred("open", "access-key AK\nsecret-key SK\n", 0644);
	assert_int_equal(ndz_s3_open(&c, 2, &s, &e), NDZ_EKEYPERM);
	assert_non_null(strstr(ndz_error_msg(&e), "chmod 600"));
	ndz_error_clear(&e);
	c.credentials = cred("half", "access-key AK\n", 0600);
	assert_int_equal(ndz_s3_open(&c, 2, &s, &e), NDZ_EINVAL);
	ndz_error_clear(&e);
	c.credentials = cred("junk", "access-key AK\nsecret SK\n", 0600);
	assert_int_equal(ndz_s3_open(&c, 2, &s, &e), NDZ_EINVAL);
	assert_non_null(strstr(ndz_error_msg(&e), ":2: unknown key 'secret'"));
	ndz_error_clear(&e);
	c.credentials = NULL;
	assert_int_equal(ndz_s3_open(&c, 2, &s, &e), NDZ_EINVAL);
	ndz_error_clear(&e);
	c.credentials = cred("ok", "access-key AK\nsecret-key SK\n", 0600);
	c.bucket = "No";
	assert_int_equal(ndz_s3_open(&c, 2, &s, &e), NDZ_EINVAL);
	assert_null(s);
	ndz_error_clear(&e);
}

/* The server: each connection gets the next reply of replies[], then is closed. */
static const char *replies[8];
static int nreplies, served, lfd;
static char lastreq[4096];

static void *server(void *arg)
{
	(void)arg;
	for (int i = 0; i < nreplies; i++) {
		int fd = accept(lfd, NULL, NULL);
		size_t got = 0;

		if (fd < 0)
			break;
		/* the request's head (and a PUT's body: what comes within the read) */
		while (got < sizeof(lastreq) - 1) {
			ssize_t n = recv(fd, lastreq + got, sizeof(lastreq) - 1 - got, 0);

			if (n <= 0)
				break;
			got += (size_t)n;
			lastreq[got] = 0;
			if (strstr(lastreq, "\r\n\r\n"))
				break;
		}
		served++;
		if (send(fd, replies[i], strlen(replies[i]), MSG_NOSIGNAL) < 0)
			break;
		shutdown(fd, SHUT_WR);
		close(fd);
	}
	return NULL;
}

static struct ndz_s3 *serve(pthread_t *th, int n, ...)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	char ep[64];
	struct ndz_s3_conf c = { .endpoint = ep, .region = "eu-1", .bucket = "bkt", .prefix = "lab/" };
	struct ndz_s3 *s;
	va_list ap;

	va_start(ap, n);
	for (int i = 0; i < n; i++)
		replies[i] = va_arg(ap, const char *);
	va_end(ap);
	nreplies = n;
	served = 0;
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(lfd >= 0);
	assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(lfd, 8), 0);
	assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
	snprintf(ep, sizeof(ep), "http://127.0.0.1:%u", ntohs(a.sin_port));
	c.credentials = cred("ok", "access-key AKID\nsecret-key SK\n", 0600);
	assert_int_equal(ndz_s3_open(&c, 2, &s, NULL), 0);
	assert_int_equal(pthread_create(th, NULL, server, NULL), 0);
	return s;
}

static void done(pthread_t th, struct ndz_s3 *s)
{
	pthread_join(th, NULL);
	close(lfd);
	ndz_s3_free(s);
}

#define OK206 "HTTP/1.1 206 Partial Content\r\nContent-Length: 4\r\nContent-Range: bytes 8-11/100\r\n\r\nabcd"

static void test_get_range_retried(void **state)
{
	pthread_t th;
	struct ndz_s3 *s = serve(&th, 3,
		"HTTP/1.1 503 Slow Down\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 206 Partial Content\r\nContent-Length: 4\r\n\r\nab", /* cut short */
		OK206);
	struct ndz_error e = { 0 };
	uint8_t *b;
	size_t n;

	(void)state;
	assert_int_equal(ndz_s3_get(s, "a.ndz", 8, 4, 0, &b, &n, &e), 0);
	assert_int_equal(n, 4);
	assert_memory_equal(b, "abcd", 4);
	free(b);
	done(th, s);
	assert_int_equal(served, 3);
	/* path style, the range, signed by curl (SigV4 with our key and region), unsigned payload */
	assert_non_null(strstr(lastreq, "GET /bkt/lab/a.ndz HTTP/1.1\r\n"));
	assert_non_null(strstr(lastreq, "Range: bytes=8-11\r\n"));
	assert_non_null(strstr(lastreq, "AWS4-HMAC-SHA256 Credential=AKID/"));
	assert_non_null(strstr(lastreq, "/eu-1/s3/aws4_request"));
	assert_non_null(strstr(lastreq, "x-amz-content-sha256: UNSIGNED-PAYLOAD"));
}

static void test_errors(void **state)
{
	pthread_t th;
	struct ndz_s3 *s = serve(&th, 5,
		"HTTP/1.1 404 Not Found\r\nContent-Length: 54\r\n\r\n"
		"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code></Error>",
		"HTTP/1.1 403 Forbidden\r\nContent-Length: 55\r\n\r\n"
		"<Error><Code>SignatureDoesNotMatch</Code></Error>      ",
		"HTTP/1.1 206 Partial Content\r\nContent-Length: 2\r\n\r\nab",  /* 2 of 4 */
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789",      /* over max */
		"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
	struct ndz_error e = { 0 };
	uint8_t *b;
	size_t n;

	(void)state;
	assert_int_equal(ndz_s3_get(s, "x.ndz.index", 0, 0, 100, &b, &n, &e), NDZ_ENOIMAGE);
	assert_non_null(strstr(ndz_error_msg(&e), "GET lab/x.ndz.index: not found (HTTP 404, NoSuchKey)"));
	ndz_error_clear(&e);
	assert_int_equal(ndz_s3_get(s, "x.ndz", 0, 0, 100, &b, &n, &e), NDZ_EDENIED);
	assert_non_null(strstr(ndz_error_msg(&e), "HTTP 403, SignatureDoesNotMatch"));
	ndz_error_clear(&e);
	assert_int_equal(ndz_s3_get(s, "x.ndz", 0, 4, 0, &b, &n, &e), NDZ_ESHORTREAD);
	assert_null(b);
	ndz_error_clear(&e);
	assert_int_equal(ndz_s3_get(s, "x.ndz", 0, 0, 5, &b, &n, &e), NDZ_ERANGE);
	ndz_error_clear(&e);
	assert_int_equal(ndz_s3_put(s, "y", "hello", 5, &e), NDZ_EREFUSED);
	assert_non_null(strstr(ndz_error_msg(&e), "PUT lab/y: refused (HTTP 400"));
	ndz_error_clear(&e);
	done(th, s);
	assert_int_equal(served, 5);
}

/* The ETag of the last reply: a HEAD's and a GET's; none after a failure. */
static void test_etag(void **state)
{
	pthread_t th;
	struct ndz_s3 *s = serve(&th, 3,
		"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nETag: \"abc1\"\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nETag: \"def2\"\r\n\r\nxyz",
		"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n");
	struct ndz_error e = { 0 };
	uint64_t size = 0;
	uint8_t *b;
	size_t n;

	(void)state;
	assert_string_equal(ndz_s3_etag(s), "");
	assert_int_equal(ndz_s3_head(s, "x.ndz.index", &size, &e), 0);
	assert_int_equal(size, 7);
	assert_string_equal(ndz_s3_etag(s), "\"abc1\"");
	assert_non_null(strstr(lastreq, "HEAD /bkt/lab/x.ndz.index HTTP/1.1\r\n"));
	assert_int_equal(ndz_s3_get(s, "x.ndz.index", 0, 0, 100, &b, &n, &e), 0);
	free(b);
	assert_string_equal(ndz_s3_etag(s), "\"def2\"");
	assert_int_equal(ndz_s3_head(s, "y.ndz.index", &size, &e), NDZ_ENOIMAGE);
	assert_string_equal(ndz_s3_etag(s), "");
	done(th, s);
}

static void test_unreachable(void **state)
{
	struct ndz_s3_conf c = { .endpoint = "http://127.0.0.1:1", .bucket = "bkt" };
	struct ndz_error e = { 0 };
	struct ndz_s3 *s;
	uint64_t size;

	(void)state;
	c.credentials = cred("ok", "access-key AK\nsecret-key SK\n", 0600);
	assert_int_equal(ndz_s3_open(&c, 2, &s, &e), 0);
	assert_int_equal(ndz_s3_head(s, "a", &size, &e), NDZ_ENET);
	assert_non_null(strstr(ndz_error_msg(&e), "store http://127.0.0.1:1/bkt: HEAD a: "));
	ndz_s3_free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_credentials),
		cmocka_unit_test(test_get_range_retried),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_etag),
		cmocka_unit_test(test_unreachable),
	};
	int rc;

	snprintf(dir, sizeof(dir), "/tmp/ndz-s3test.XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	for (const char *n = "ok\0open\0half\0junk\0"; *n; n += strlen(n) + 1) {
		char p[128];

		snprintf(p, sizeof(p), "%s/%s", dir, n);
		unlink(p);
	}
	rmdir(dir);
	return rc;
}
