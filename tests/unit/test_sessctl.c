/*
 * Unit tests for lib/master/sessctl: a session's control messages encoded and
 * decoded, refused when malformed; and an endpoint answering STATUS, RATE and
 * IDENTIFY on a unix socket through its callbacks, as the master asks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <cmocka.h>

#include "core/err.h"
#include "master/ctl.h"
#include "master/sessctl.h"

static char dir[] = "/tmp/test_sessctl.XXXXXX";

static void test_codec(void **state)
{
	static struct ndz_sessctl_msg m, d;
	uint8_t buf[NDZ_SESSCTL_MSG_MAX];
	struct ndz_error e = { 0 };
	int n;

	(void)state;
	/* RATE request: header and the rate */
	memset(&m, 0, sizeof(m));
	m.type = NDZ_SESSCTL_RATE;
	m.id = 0x01020304;
	m.rate_bps = 123456789;
	n = ndz_sessctl_encode(&m, 0, buf, sizeof(buf), NULL);
	assert_int_equal(n, 20);
	assert_int_equal(buf[5], NDZ_SESSCTL_RATE);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 0, &d, NULL), 0);
	assert_int_equal(d.rate_bps, 123456789);
	assert_int_equal(d.id, 0x01020304);
	/* a request is no reply, and the length is exact */
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &d, NULL), NDZ_EPROTO);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n - 1, 0, &d, &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "session control: 19 bytes, not 20");
	buf[4] = 9;
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 0, &d, NULL), NDZ_EPROTOVER);
	buf[4] = NDZ_CTL_VERSION;
	buf[5] = 2;                    /* the master's STATUS: not a session's question */
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 0, &d, NULL), NDZ_EINVAL);
	/* STATUS reply with its JSON */
	memset(&m, 0, sizeof(m));
	m.type = NDZ_SESSCTL_STATUS;
	m.st.clients = 5;
	m.st.bytes_sent = 1ull << 40;
	m.st.rate_bps = 8000;
	strcpy(m.st.json, "{\"clients\": 5}");
	m.st.json_len = strlen(m.st.json);
	n = ndz_sessctl_encode(&m, 1, buf, sizeof(buf), NULL);
	assert_int_equal(n, 12 + 26 + (int)m.st.json_len);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &d, NULL), 0);
	assert_int_equal(d.st.clients, 5);
	assert_int_equal(d.st.bytes_sent, 1ull << 40);
	assert_string_equal(d.st.json, "{\"clients\": 5}");
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n + 1, 1, &d, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_sessctl_encode(&m, 1, buf, 20, NULL), NDZ_ERANGE);
	/* IDENTIFY reply */
	memset(&m, 0, sizeof(m));
	m.type = NDZ_SESSCTL_IDENTIFY;
	m.who.pid = 4242;
	m.who.uuid[3] = 7;
	m.who.chunks = 9;
	m.who.source_bytes = 77;
	strcpy(m.who.path, "/srv/a.ndz");
	n = ndz_sessctl_encode(&m, 1, buf, sizeof(buf), NULL);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &d, NULL), 0);
	assert_int_equal(d.who.pid, 4242);
	assert_int_equal(d.who.uuid[3], 7);
	assert_int_equal(d.who.chunks, 9);
	assert_int_equal(d.who.source_bytes, 77);
	assert_string_equal(d.who.path, "/srv/a.ndz");
	buf[12 + 34] = 0;              /* a NUL in the path */
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &d, NULL), NDZ_EINVAL);
	/* a refusal is a header only */
	m.status = NDZ_CTL_FAILED;
	assert_int_equal(ndz_sessctl_encode(&m, 1, buf, sizeof(buf), NULL), 12);
	assert_int_equal(ndz_sessctl_decode(buf, 12, 1, &d, NULL), 0);
	assert_int_equal(d.status, NDZ_CTL_FAILED);
	/* bad type */
	m.type = 3;
	assert_int_equal(ndz_sessctl_encode(&m, 0, buf, sizeof(buf), NULL), NDZ_EINVAL);
	assert_int_equal(ndz_sessctl_decode(buf, 3, 0, &d, NULL), NDZ_EPROTO);
}

static void test_path(void **state)
{
	char p[256], longdir[200];
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_sessctl_path("/run/m", htonl(0xefc00101), 5001, p, sizeof(p), NULL),
			 0);
	assert_string_equal(p, "/run/m/session-239.192.1.1-5001.sock");
	memset(longdir, 'x', sizeof(longdir) - 1);
	longdir[sizeof(longdir) - 1] = 0;
	longdir[0] = '/';
	assert_int_equal(ndz_sessctl_path(longdir, 0, 1, p, sizeof(p), &e), NDZ_ERANGE);
	assert_int_equal(strncmp(ndz_error_msg(&e), "/xxx", 4), 0);
}

struct fake {
	uint64_t rate;
	int fail_status;
};

static int f_status(void *ctx, struct ndz_sessctl_status *out)
{
	struct fake *f = ctx;

	if (f->fail_status)
		return NDZ_EIO;
	out->clients = 3;
	out->bytes_sent = 1000;
	out->rate_bps = f->rate;
	out->json_len = (size_t)snprintf(out->json, sizeof(out->json), "{\"rate\": %llu}",
					 (unsigned long long)f->rate);
	return 0;
}

static int f_rate(void *ctx, uint64_t rate)
{
	struct fake *f = ctx;

	if (rate < 8000)
		return NDZ_EINVAL;
	f->rate = rate;
	return 0;
}

static int f_identify(void *ctx, struct ndz_sessctl_identity *out)
{
	(void)ctx;
	memset(out->uuid, 0xab, 16);
	out->chunks = 12;
	out->source_bytes = 34;
	strcpy(out->path, "/img/a.ndz");
	return 0;
}

static void test_endpoint(void **state)
{
	static const struct ndz_sessctl_ops ops = { f_status, f_rate, f_identify };
	static struct ndz_sessctl_status st;
	struct ndz_sessctl_identity who;
	struct ndz_sessctl *s = NULL;
	struct fake f = { 100000000, 0 };
	struct ndz_error e = { 0 };
	struct stat sb;
	char path[256];

	(void)state;
	snprintf(path, sizeof(path), "%s/s.sock", dir);
	/* nobody there yet */
	assert_int_equal(ndz_sessctl_identify(path, 500, &who, &e), NDZ_ENOENT);
	assert_non_null(strstr(ndz_error_msg(&e), path));
	assert_int_equal(ndz_sessctl_start(path, &ops, &f, &s, NULL), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(ndz_sessctl_status(path, 1000, &st, NULL), 0);
	assert_int_equal(st.clients, 3);
	assert_int_equal(st.rate_bps, 100000000);
	assert_string_equal(st.json, "{\"rate\": 100000000}");
	assert_int_equal(ndz_sessctl_rate(path, 42000, 1000, NULL), 0);
	assert_int_equal(f.rate, 42000);
	assert_int_equal(ndz_sessctl_status(path, 1000, &st, NULL), 0);
	assert_int_equal(st.rate_bps, 42000);
	/* a rate the session refuses: its status, named */
	ndz_error_clear(&e);
	assert_int_equal(ndz_sessctl_rate(path, 10, 1000, &e), NDZ_EREFUSED);
	assert_non_null(strstr(ndz_error_msg(&e), "malformed request"));
	assert_int_equal(f.rate, 42000);
	f.fail_status = 1;
	ndz_error_clear(&e);
	assert_int_equal(ndz_sessctl_status(path, 1000, &st, &e), NDZ_EREFUSED);
	assert_non_null(strstr(ndz_error_msg(&e), ndz_ctl_strstatus(NDZ_CTL_FAILED)));
	assert_int_equal(ndz_sessctl_identify(path, 1000, &who, NULL), 0);
	assert_int_equal(who.pid, getpid());
	assert_int_equal(who.uuid[15], 0xab);
	assert_int_equal(who.chunks, 12);
	assert_string_equal(who.path, "/img/a.ndz");
	/* junk on the socket gets no answer, and the endpoint goes on */
	{
		struct sockaddr_un sa = { .sun_family = AF_UNIX };
		int fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
		char junk[8] = "junkjunk";

		strcpy(sa.sun_path, path);
		assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
		assert_int_equal(send(fd, junk, sizeof(junk), 0), sizeof(junk));
		assert_int_equal(recv(fd, junk, sizeof(junk), 0), 0);
		close(fd);
	}
	assert_int_equal(ndz_sessctl_identify(path, 1000, &who, NULL), 0);
	ndz_sessctl_stop(s);
	assert_int_not_equal(stat(path, &sb), 0);
	assert_int_equal(ndz_sessctl_identify(path, 500, &who, NULL), NDZ_ENOENT);
	ndz_sessctl_stop(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codec),
		cmocka_unit_test(test_path),
		cmocka_unit_test(test_endpoint),
	};
	int rc;

	if (!mkdtemp(dir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(dir);
	return rc;
}
