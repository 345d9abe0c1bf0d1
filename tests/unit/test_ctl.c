/* Unit tests for lib/ctl: requests and replies round-trip; the layout is fixed; bad input is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <netinet/in.h>

#include <arpa/inet.h>
#include <cmocka.h>

#include "ctl/ctl.h"
#include "core/err.h"

static void test_request(void **state)
{
	struct ndz_ctl_req r = { .type = NDZ_CTL_GET, .id = 0x01020304 }, d;
	uint8_t b[NDZ_CTL_REQ_MAX + 1];
	static const uint8_t want[] = { 'N', 'D', 'Z', 'C', 1, 1, 3, 0, 4, 3, 2, 1, 'w', 'e', 'b' };
	int n;

	(void)state;
	strcpy(r.name, "web");
	n = ndz_ctl_req_encode(&r, b, sizeof(b), NULL);
	assert_int_equal(n, sizeof(want));
	assert_memory_equal(b, want, sizeof(want));
	assert_int_equal(ndz_ctl_req_decode(b, (size_t)n, &d, NULL), 0);
	assert_int_equal(d.type, NDZ_CTL_GET);
	assert_int_equal(d.id, 0x01020304);
	assert_string_equal(d.name, "web");
	/* trailing byte, short, bad magic, other version, a NUL in the name */
	assert_int_equal(ndz_ctl_req_decode(b, (size_t)n + 1, &d, NULL), NDZ_EINVAL);
	assert_int_equal(d.id, 0x01020304);
	assert_int_equal(ndz_ctl_req_decode(b, 11, &d, NULL), NDZ_EPROTO);
	b[0] = 'X';
	assert_int_equal(ndz_ctl_req_decode(b, (size_t)n, &d, NULL), NDZ_EPROTO);
	b[0] = 'N';
	b[4] = 2;
	assert_int_equal(ndz_ctl_req_decode(b, (size_t)n, &d, NULL), NDZ_EPROTOVER);
	b[4] = 1;
	b[13] = 0;
	assert_int_equal(ndz_ctl_req_decode(b, (size_t)n, &d, NULL), NDZ_EINVAL);
	/* GET needs a name, STATUS has none; unknown types */
	r.name[0] = 0;
	assert_int_equal(ndz_ctl_req_encode(&r, b, sizeof(b), NULL), NDZ_EINVAL);
	r.type = NDZ_CTL_STATUS;
	assert_int_equal(ndz_ctl_req_encode(&r, b, sizeof(b), NULL), NDZ_CTL_REQ_HDR);
	assert_int_equal(ndz_ctl_req_decode(b, NDZ_CTL_REQ_HDR, &d, NULL), 0);
	b[5] = 9;
	assert_int_equal(ndz_ctl_req_decode(b, NDZ_CTL_REQ_HDR, &d, NULL), NDZ_EINVAL);
	b[5] = 0x81;                   /* a reply is not a request */
	assert_int_equal(ndz_ctl_req_decode(b, NDZ_CTL_REQ_HDR, &d, NULL), NDZ_EPROTO);
	/* a name of 64 bytes fits, the cap is checked */
	r.type = NDZ_CTL_GET;
	memset(r.name, 'x', NDZ_CTL_NAME_MAX);
	r.name[NDZ_CTL_NAME_MAX] = 0;
	assert_int_equal(ndz_ctl_req_encode(&r, b, sizeof(b), NULL), NDZ_CTL_REQ_HDR + NDZ_CTL_NAME_MAX);
	assert_int_equal(ndz_ctl_req_encode(&r, b, NDZ_CTL_REQ_HDR + NDZ_CTL_NAME_MAX - 1, NULL), NDZ_ERANGE);
}

static void test_get_reply(void **state)
{
	struct ndz_ctl_rep r, d;
	uint8_t b[NDZ_CTL_REP_MAX];
	int n;

	(void)state;
	memset(&r, 0, sizeof(r));
	r.type = NDZ_CTL_GET;
	r.id = 7;
	r.group = htonl(0xefc00102);   /* 239.192.1.2 */
	r.server = htonl(0x0a4d0001);
	r.port = 5001;
	for (int i = 0; i < 16; i++)
		r.uuid[i] = (uint8_t)(i + 1);
	r.chunks = 12;
	r.source_bytes = 0x123456789aull;
	r.rate_bps = 100000000;
	n = ndz_ctl_rep_encode(&r, b, sizeof(b), NULL);
	assert_int_equal(n, NDZ_CTL_GET_LEN);
	assert_int_equal(b[5], 0x81);
	/* addresses as little-endian numbers: 239.192.1.2 is 0xefc00102 */
	assert_int_equal(b[12], 0x02);
	assert_int_equal(b[15], 0xef);
	assert_int_equal(b[20] | b[21] << 8, 5001);
	assert_int_equal(ndz_ctl_rep_decode(b, (size_t)n, &d, NULL), 0);
	assert_int_equal(d.group, r.group);
	assert_int_equal(d.server, r.server);
	assert_int_equal(d.port, 5001);
	assert_memory_equal(d.uuid, r.uuid, 16);
	assert_int_equal(d.chunks, 12);
	assert_int_equal(d.source_bytes, r.source_bytes);
	assert_int_equal(d.rate_bps, r.rate_bps);
	assert_int_equal(ndz_ctl_rep_decode(b, (size_t)n - 1, &d, NULL), NDZ_EPROTO);
	b[22] = 1;                     /* reserved */
	assert_int_equal(ndz_ctl_rep_decode(b, (size_t)n, &d, NULL), NDZ_EPROTO);
	/* refusals are a bare header */
	r.status = NDZ_CTL_POOL;
	n = ndz_ctl_rep_encode(&r, b, sizeof(b), NULL);
	assert_int_equal(n, NDZ_CTL_REP_HDR);
	assert_int_equal(ndz_ctl_rep_decode(b, (size_t)n, &d, NULL), 0);
	assert_int_equal(d.status, NDZ_CTL_POOL);
	assert_string_equal(ndz_ctl_strstatus(d.status), "multicast address pool exhausted");
	assert_string_equal(ndz_ctl_strstatus(99), "unknown reply status");
}

static void test_status_reply(void **state)
{
	static uint8_t b[NDZ_CTL_REP_MAX + 1];
	static char big[NDZ_CTL_JSON_MAX + 1];
	struct ndz_ctl_rep r = { .type = NDZ_CTL_STATUS, .id = 9, .json = "{}", .json_len = 2 }, d;
	int n;

	(void)state;
	n = ndz_ctl_rep_encode(&r, b, sizeof(b), NULL);
	assert_int_equal(n, NDZ_CTL_REP_HDR + 4);
	assert_int_equal(ndz_ctl_rep_decode(b, (size_t)n, &d, NULL), 0);
	assert_int_equal(d.json_len, 2);
	assert_memory_equal(d.json, "{}", 2);
	assert_int_equal(ndz_ctl_rep_decode(b, (size_t)n + 1, &d, NULL), NDZ_EPROTO);
	memset(big, ' ', sizeof(big));
	r.json = big;
	r.json_len = NDZ_CTL_JSON_MAX + 1;
	assert_int_equal(ndz_ctl_rep_encode(&r, b, sizeof(b), NULL), NDZ_EINVAL);
	r.json_len = NDZ_CTL_JSON_MAX;
	assert_int_equal(ndz_ctl_rep_encode(&r, b, sizeof(b), NULL), NDZ_CTL_REP_MAX);
}

static void test_upload(void **state)
{
	struct ndz_ctl_req r = { .type = NDZ_CTL_UPLOAD, .id = 7, .size = 0x0102030405060708ull }, d;
	struct ndz_ctl_rep rep = { .type = NDZ_CTL_UPLOAD, .id = 7 }, dr;
	static const uint8_t want[] = { 'N', 'D', 'Z', 'C', 1, 3, 2, 0, 7, 0, 0, 0,
					8, 7, 6, 5, 4, 3, 2, 1, 'g', 'o' };
	uint8_t b[NDZ_CTL_REP_HDR + 2 + NDZ_CTL_MSG_MAX + 1];
	char msg[NDZ_CTL_MSG_MAX + 1];
	int n;

	(void)state;
	strcpy(r.name, "go");
	n = ndz_ctl_req_encode(&r, b, sizeof(b), NULL);
	assert_int_equal(n, sizeof(want));
	assert_memory_equal(b, want, sizeof(want));
	/* read from a stream: the header says how long the request is */
	assert_int_equal(ndz_ctl_req_need(b, 0, NULL), NDZ_CTL_REQ_HDR);
	assert_int_equal(ndz_ctl_req_need(b, NDZ_CTL_REQ_HDR, NULL), sizeof(want));
	assert_int_equal(ndz_ctl_req_decode(b, (size_t)n, &d, NULL), 0);
	assert_int_equal(d.type, NDZ_CTL_UPLOAD);
	assert_true(d.size == 0x0102030405060708ull);
	assert_string_equal(d.name, "go");
	assert_int_equal(ndz_ctl_req_decode(b, (size_t)n - 1, &d, NULL), NDZ_EINVAL);
	b[6] = 65;
	assert_int_equal(ndz_ctl_req_need(b, NDZ_CTL_REQ_HDR, NULL), NDZ_EINVAL);
	b[0] = 'X';
	assert_int_equal(ndz_ctl_req_need(b, NDZ_CTL_REQ_HDR, NULL), NDZ_EPROTO);
	/* the go-ahead is the header alone, whatever the status */
	n = ndz_ctl_rep_encode(&rep, b, sizeof(b), NULL);
	assert_int_equal(n, NDZ_CTL_REP_HDR);
	assert_int_equal(b[5], 0x83);
	assert_int_equal(ndz_ctl_rep_need(b, (size_t)n, NULL), NDZ_CTL_REP_HDR);
	assert_int_equal(ndz_ctl_rep_decode(b, (size_t)n, &dr, NULL), 0);
	assert_int_equal(dr.type, NDZ_CTL_UPLOAD);
	assert_int_equal(ndz_ctl_rep_decode(b, (size_t)n + 1, &dr, NULL), NDZ_EPROTO);
	/* the verdict carries a message, also with status 0 */
	rep.type = NDZ_CTL_DONE;
	rep.status = NDZ_CTL_BADIMAGE;
	rep.json = "upload: chunk 6: bad data checksum";
	rep.json_len = strlen(rep.json);
	n = ndz_ctl_rep_encode(&rep, b, sizeof(b), NULL);
	assert_int_equal(n, NDZ_CTL_REP_HDR + 2 + rep.json_len);
	assert_int_equal(ndz_ctl_rep_need(b, NDZ_CTL_REP_HDR, NULL), NDZ_CTL_REP_HDR + 2);
	assert_int_equal(ndz_ctl_rep_need(b, NDZ_CTL_REP_HDR + 2, NULL), n);
	assert_int_equal(ndz_ctl_rep_decode(b, (size_t)n, &dr, NULL), 0);
	assert_int_equal(dr.status, NDZ_CTL_BADIMAGE);
	assert_int_equal(dr.json_len, rep.json_len);
	assert_memory_equal(dr.json, rep.json, rep.json_len);
	assert_int_equal(ndz_ctl_rep_decode(b, (size_t)n - 1, &dr, NULL), NDZ_EPROTO);
	assert_string_equal(ndz_ctl_strstatus(NDZ_CTL_BUSY), "another upload to that image is running");
	assert_string_equal(ndz_ctl_strstatus(NDZ_CTL_UPLOADS), "too many uploads at once");
	memset(msg, 'x', sizeof(msg));
	rep.json = msg;
	rep.json_len = NDZ_CTL_MSG_MAX + 1;
	assert_int_equal(ndz_ctl_rep_encode(&rep, b, sizeof(b), NULL), NDZ_EINVAL);
	/* STATUS replies come over a stream: framed by their JSON length */
	rep.type = NDZ_CTL_STATUS;
	rep.status = NDZ_CTL_OK;
	rep.json = "{}";
	rep.json_len = 2;
	n = ndz_ctl_rep_encode(&rep, b, sizeof(b), NULL);
	assert_int_equal(ndz_ctl_rep_need(b, NDZ_CTL_REP_HDR, NULL), NDZ_CTL_REP_HDR + 2);
	assert_int_equal(ndz_ctl_rep_need(b, (size_t)n, NULL), n);
	rep.status = NDZ_CTL_USE_TCP;
	n = ndz_ctl_rep_encode(&rep, b, sizeof(b), NULL);
	assert_int_equal(n, NDZ_CTL_REP_HDR);
	assert_int_equal(ndz_ctl_rep_need(b, (size_t)n, NULL), NDZ_CTL_REP_HDR);
	/* GET replies do not */
	rep.type = NDZ_CTL_GET;
	rep.status = NDZ_CTL_UNKNOWN;
	n = ndz_ctl_rep_encode(&rep, b, sizeof(b), NULL);
	assert_int_equal(ndz_ctl_rep_need(b, (size_t)n, NULL), NDZ_EINVAL);
}

static void test_hostport(void **state)
{
	char h[32];
	uint16_t p;

	(void)state;
	assert_int_equal(ndz_ctl_hostport("10.0.0.1", 3563, h, sizeof(h), &p, NULL), 0);
	assert_string_equal(h, "10.0.0.1");
	assert_int_equal(p, 3563);
	assert_int_equal(ndz_ctl_hostport("master:99", 3563, h, sizeof(h), &p, NULL), 0);
	assert_string_equal(h, "master");
	assert_int_equal(p, 99);
	assert_int_equal(ndz_ctl_hostport("m:0", 1, h, sizeof(h), &p, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_ctl_hostport("m:70000", 1, h, sizeof(h), &p, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_ctl_hostport("m:", 1, h, sizeof(h), &p, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_ctl_hostport(":5", 1, h, sizeof(h), &p, NULL), NDZ_EINVAL);
}

static void test_ask_bad_address(void **state)
{
	static uint8_t b[NDZ_CTL_REP_MAX];
	struct ndz_ctl_req r = { .type = NDZ_CTL_STATUS };
	struct ndz_ctl_rep rep;
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_ctl_ask("m:99999", &r, b, sizeof(b), &rep, &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "bad master address 'm:99999' (HOST[:PORT])");
}

/* image names: the rule the master's configuration and the clients share */
/* The one table from library codes to wire statuses. */
static void test_status_of(void **state)
{
	(void)state;
	assert_int_equal(ndz_ctl_status_of(0), NDZ_CTL_OK);
	assert_int_equal(ndz_ctl_status_of(NDZ_ENOIMAGE), NDZ_CTL_UNKNOWN);
	assert_int_equal(ndz_ctl_status_of(NDZ_EDENIED), NDZ_CTL_DENIED);
	assert_int_equal(ndz_ctl_status_of(NDZ_EPOOL), NDZ_CTL_POOL);
	assert_int_equal(ndz_ctl_status_of(NDZ_ESESSIONS), NDZ_CTL_TOO_MANY);
	assert_int_equal(ndz_ctl_status_of(NDZ_EINVAL), NDZ_CTL_MALFORMED);
	assert_int_equal(ndz_ctl_status_of(NDZ_EBUSY), NDZ_CTL_BUSY);
	assert_int_equal(ndz_ctl_status_of(NDZ_EQUOTA), NDZ_CTL_QUOTA);
	assert_int_equal(ndz_ctl_status_of(NDZ_ETIMEDOUT), NDZ_CTL_TIMEOUT);
	assert_int_equal(ndz_ctl_status_of(NDZ_EUPLOADS), NDZ_CTL_UPLOADS);
	assert_int_equal(ndz_ctl_status_of(NDZ_ECONNS), NDZ_CTL_CONNS);
	/* what is wrong with uploaded bytes */
	assert_int_equal(ndz_ctl_status_of(NDZ_EDATACRC), NDZ_CTL_BADIMAGE);
	assert_int_equal(ndz_ctl_status_of(NDZ_ESHORTREAD), NDZ_CTL_BADIMAGE);
	assert_int_equal(ndz_ctl_status_of(NDZ_ERANGE), NDZ_CTL_BADIMAGE);
	/* ours: the master's own failures */
	assert_int_equal(ndz_ctl_status_of(NDZ_EIO), NDZ_CTL_FAILED);
	assert_int_equal(ndz_ctl_status_of(NDZ_ENOMEM), NDZ_CTL_FAILED);
	assert_int_equal(ndz_ctl_status_of(-9999), NDZ_CTL_FAILED);
	/* every status has its words */
	for (unsigned st = NDZ_CTL_OK; st <= NDZ_CTL_CONNS; st++)
		assert_string_not_equal(ndz_ctl_strstatus(st), "unknown reply status");
}

static void test_valid_name(void **state)
{
	char long_name[NDZ_CTL_NAME_MAX + 2];

	(void)state;
	assert_true(ndz_ctl_valid_name("debian-12_amd64.v2"));
	assert_false(ndz_ctl_valid_name("my image"));
	assert_false(ndz_ctl_valid_name(""));
	assert_false(ndz_ctl_valid_name("a/b"));
	assert_false(ndz_ctl_valid_name(".hidden"));
	assert_false(ndz_ctl_valid_name("."));
	assert_false(ndz_ctl_valid_name(".."));
	assert_true(ndz_ctl_valid_name("a..b"));
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	assert_false(ndz_ctl_valid_name(long_name));
	long_name[NDZ_CTL_NAME_MAX] = 0;
	assert_true(ndz_ctl_valid_name(long_name));
}

static int take_any(void *arg, const uint8_t *buf, size_t n)
{
	(void)arg, (void)buf, (void)n;
	return 1;
}

/* ndz_ctl_exchange: an unknown host, and a master that never answers (a bound socket). */
static void test_exchange_no_answer(void **state)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	struct ndz_error e = { 0 };
	uint8_t out[4] = { 1, 2, 3, 4 }, buf[64];
	char want[64];
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	(void)state;
	assert_int_equal(ndz_ctl_exchange("no-such-host.invalid", 1, out, sizeof(out), 1, 10,
					  buf, sizeof(buf), take_any, NULL, &e), NDZ_EINVAL);
	assert_string_equal(e.msg, "master no-such-host.invalid: unknown host");
	assert_true(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	memset(&e, 0, sizeof(e));
	assert_int_equal(ndz_ctl_exchange("127.0.0.1", ntohs(a.sin_port), out, sizeof(out), 2, 20,
					  buf, sizeof(buf), take_any, NULL, &e), NDZ_ETIMEDOUT);
	snprintf(want, sizeof(want), "no answer from master 127.0.0.1:%u", ntohs(a.sin_port));
	assert_string_equal(e.msg, want);
	/* both requests arrived */
	assert_int_equal(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), 4);
	assert_int_equal(recv(fd, buf, sizeof(buf), MSG_DONTWAIT), 4);
	close(fd);
}

/* ndz_ctl_resolve: a dotted address with the port, and an unknown host. */
static void test_resolve(void **state)
{
	struct sockaddr_in to;
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_ctl_resolve("127.0.0.1", 3564, &to, &e), 0);
	assert_int_equal(to.sin_family, AF_INET);
	assert_int_equal(to.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	assert_int_equal(to.sin_port, htons(3564));
	assert_int_equal(ndz_ctl_resolve("no-such-host.invalid", 1, &to, &e), NDZ_EINVAL);
	assert_string_equal(e.msg, "master no-such-host.invalid: unknown host");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request),
		cmocka_unit_test(test_get_reply),
		cmocka_unit_test(test_status_reply),
		cmocka_unit_test(test_upload),
		cmocka_unit_test(test_hostport),
		cmocka_unit_test(test_ask_bad_address),
		cmocka_unit_test(test_exchange_no_answer),
		cmocka_unit_test(test_resolve),
		cmocka_unit_test(test_valid_name),
		cmocka_unit_test(test_status_of),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
