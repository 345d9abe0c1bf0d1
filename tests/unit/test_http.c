/*
 * Unit tests for lib/mserve/http: a real endpoint on 127.0.0.1 (a free port), asked
 * with a plain socket: the status page, /status.json (the master's STATUS JSON with
 * an extra section), /metrics (Prometheus text with HELP and TYPE lines and the
 * master's counters), refusals (404, 405, a huge header), POST without, with a bad
 * and with the right token, an extension's action and GET (text with the
 * connection's addresses, a file streamed, refusals), the configuration keys.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "core/err.h"
#include "mserve/http.h"
#include "master/master.h"
#include "master/mconf.h"

static char tokpath[] = "/tmp/test_http.XXXXXX";
static struct ndz_mlock *lock;         /* the master's lock, as lib/mserve/mserve makes it */

struct fix {
	struct ndz_mconf *c;
	struct ndz_master *m;
	struct ndz_http *h;
	uint16_t port;
	int reloads, actions;
	char body[256];
};

static void live(void *ctx, const struct ndz_master_session *s, struct ndz_master_live *out)
{
	(void)ctx;
	(void)s;
	out->receivers = 3;
	out->bytes_sent = 123456;
}

static int reload(void *ctx, struct ndz_error *e)
{
	(void)e;
	((struct fix *)ctx)->reloads++;
	return 0;
}

static size_t nodes_json(void *ctx, char *buf, size_t cap)
{
	(void)ctx;
	return (size_t)snprintf(buf, cap, "[{\"mac\": \"52:54:00:00:00:01\"}]");
}

static int nodes_post(void *ctx, const char *body, size_t len, char *out, size_t cap,
		      struct ndz_error *e)
{
	struct fix *f = ctx;

	if (len == 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "empty body");
	f->actions++;
	snprintf(f->body, sizeof(f->body), "%.*s", (int)len, body);
	snprintf(out, cap, "{\"done\": %d}", f->actions);
	return 0;
}

static char filepath[] = "/tmp/test_http_file.XXXXXX";

/* GET /x/...: the connection's addresses as text, a file, or a refusal by name */
static int x_get(void *ctx, const char *path, const struct ndz_http_conn *c,
		 struct ndz_http_reply *r, struct ndz_error *e)
{
	char a[16], b[16];

	(void)ctx;
	if (strcmp(path, "/x/file") == 0) {
		r->fd = open(filepath, O_RDONLY);
		r->size = 100000;
		return r->fd >= 0 ? 0 : ndz_error_set(e, NDZ_EIO, errno, "%s", filepath);
	}
	if (strcmp(path, "/x/bad") == 0)
		return ndz_error_set(e, NDZ_EINVAL, 0, "bad x");
	if (strcmp(path, "/x/none") == 0)
		return ndz_error_set(e, NDZ_ENOENT, 0, "no x");
	if (strcmp(path, "/x/broken") == 0)
		return ndz_error_set(e, NDZ_EIO, 0, "broken x");
	inet_ntop(AF_INET, &c->local.sin_addr, a, sizeof(a));
	inet_ntop(AF_INET, &c->peer.sin_addr, b, sizeof(b));
	r->len = (size_t)snprintf(r->body, r->cap, "path=%s local=%s:%u peer=%s cap=%zu\n", path,
				  a, ntohs(c->local.sin_port), b, r->cap);
	r->type = "text/x-test";
	return 0;
}

static struct fix fx;
static const struct ndz_http_ext ext[] = {
	{ .name = "nodes", .ctx = &fx, .json = nodes_json, .post = nodes_post },
	{ .name = "x", .ctx = &fx, .prefix = "/x/", .get = x_get },
};

/* The whole answer to req (sent as is) from the endpoint, into a static buffer. */
static const char *ask(const char *req, size_t len)
{
	static char buf[1 << 20];
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(fx.port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	size_t got = 0;
	ssize_t n;

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	for (size_t off = 0; off < len; off += (size_t)n) {
		n = send(fd, req + off, len - off, MSG_NOSIGNAL);
		if (n <= 0)
			break;             /* refused mid-request: read what it said */
	}
	while (got < sizeof(buf) - 1 && (n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
		got += (size_t)n;
	buf[got] = 0;
	close(fd);
	return buf;
}

static const char *get(const char *path)
{
	char req[512];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
			 path);

	return ask(req, (size_t)n);
}

static const char *post(const char *path, const char *auth, const char *body)
{
	char req[1024];
	int n = snprintf(req, sizeof(req), "POST %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
			 "%s%s%sContent-Length: %zu\r\n\r\n%s", path, auth ? "Authorization: " : "",
			 auth ? auth : "", auth ? "\r\n" : "", strlen(body), body);

	return ask(req, (size_t)n);
}

static int setup(void **state)
{
	struct ndz_error e = { 0 };
	char text[512];
	int fd = mkstemp(tokpath);
	struct ndz_http_hooks h = { NULL, NULL, &fx, live, reload, ext, 2, NULL };

	(void)state;
	if (ndz_mlock_create(&lock, &e) != 0)
		fail_msg("%s", ndz_error_msg(&e));
	h.lock = lock;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "s3cret-token-0123\n", 18), 18);
	close(fd);
	snprintf(text, sizeof(text), "image a /nonexistent/a.ndz allow 10.0.0.0/8\n"
		 "http-listen 127.0.0.1:0\nhttp-token-file %s\n", tokpath);
	if (ndz_mconf_parse(text, strlen(text), "m.conf", &fx.c, &e) != 0)
		fail_msg("%s", ndz_error_msg(&e));
	assert_int_equal(ndz_master_create(fx.c, &fx.m, NULL), 0);
	h.ms = fx.m;
	assert_int_equal(ndz_http_start(fx.c->http, fx.c->nhttp, &h, &fx.h, &e), 0);
	fx.port = ndz_http_port(fx.h, 0);
	assert_true(fx.port != 0);
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	ndz_http_stop(fx.h);
	ndz_master_free(fx.m);
	ndz_mconf_free(fx.c);
	ndz_mlock_free(lock);
	unlink(tokpath);
	return 0;
}

static void test_page(void **state)
{
	const char *r = get("/");

	(void)state;
	assert_non_null(strstr(r, "HTTP/1.1 200"));
	assert_non_null(strstr(r, "text/html"));
	assert_non_null(strstr(r, "fetch('status.json'"));
	assert_non_null(strstr(r, "id=\"sessions\""));
}

/* r holds each string of the NULL-terminated want; else the test fails naming it. */
static void has_all(const char *r, const char *const *want)
{
	for (; *want; want++)
		if (!strstr(r, *want))
			fail_msg("missing: %s", *want);
}

static void test_status_json(void **state)
{
	struct ndz_master_plan p;
	uint8_t uuid[16] = { 1 };
	const char *r;

	(void)state;
	ndz_mlock_take(lock);
	assert_int_equal(ndz_master_get(fx.m, "a", htonl(0x0a000001), &p, NULL), 0);
	ndz_master_started(fx.m, p.slot, 4242, uuid, 7, 1000, 1);
	ndz_mlock_give(lock);
	r = get("/status.json");
	has_all(r, (const char *const[]){
		"HTTP/1.1 200",
		"application/json",
		"{\"sessions\": [{\"image\": \"a\", \"pid\": 4242,",
		"\"receivers\": 3, \"bytes_sent\": 123456}",
		"\"images\": [{\"name\": \"a\"",
		/* the extra section, spliced in as the last key of the one object */
		", \"nodes\": [{\"mac\": \"52:54:00:00:00:01\"}]}\n",
		NULL });
}

/*
 * One list of counters (lib/master/counters.def): each counter, set to its own value,
 * is in the STATUS JSON under its name and on /metrics in each of its rows, and every
 * family's HELP line comes once.
 */
static void test_counters_one_list(void **state)
{
	static const struct {
		const char *json, *family[2], *label[2];
	} list[] = {
#define NDZ_COUNTER(field, json, family, label, family2, label2) \
	{ json, { family, family2 }, { label, label2 } },
#include "master/counters.def"
#undef NDZ_COUNTER
	};
	static char buf[1 << 16];
	struct ndz_mconf *c;
	struct ndz_master *m;
	struct ndz_master_counters *n;
	const char *at;
	uint64_t v = 1000;

	(void)state;
	assert_int_equal(ndz_mconf_parse("image a /a.ndz\n", 15, "x", &c, NULL), 0);
	assert_int_equal(ndz_master_create(c, &m, NULL), 0);
	n = ndz_master_counters(m);
	assert_int_equal(sizeof(*n), sizeof(list) / sizeof(list[0]) * sizeof(uint64_t));
#define NDZ_COUNTER(field, json, family, label, family2, label2) n->field = v++;
#include "master/counters.def"
#undef NDZ_COUNTER
	assert_true(ndz_master_status_json(m, 1, NULL, NULL, buf, sizeof(buf)) > 0);
	at = strstr(buf, "\"counters\": {");
	assert_non_null(at);
	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
		char want[128];

		snprintf(want, sizeof(want), "%s\"%s\": %zu", i ? ", " : "", list[i].json, 1000 + i);
		if (!strstr(at, want))
			fail_msg("status JSON lacks '%s'", want);
	}
	assert_true(ndz_http_metrics(m, NULL, NULL, 0, buf, sizeof(buf), NULL) > 0);
	for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++)
		for (int k = 0; k < 2 && list[i].family[k]; k++) {
			char want[160], help[96];

			snprintf(want, sizeof(want), "\nndz_%s%s %zu\n", list[i].family[k],
				 list[i].label[k], 1000 + i);
			if (!strstr(buf, want))
				fail_msg("/metrics lacks '%s'", want + 1);
			snprintf(help, sizeof(help), "# HELP ndz_%s ", list[i].family[k]);
			assert_non_null(strstr(buf, help));
			assert_null(strstr(strstr(buf, help) + 1, help));
		}
	ndz_master_free(m);
	ndz_mconf_free(c);
}

static void test_metrics(void **state)
{
	const char *r;

	(void)state;
	r = get("/metrics");
	has_all(r, (const char *const[]){
		"HTTP/1.1 200",
		"text/plain; version=0.0.4",
		"# HELP ndz_sessions ",
		"# TYPE ndz_sessions gauge\nndz_sessions 1\n",
		"\nndz_receivers 3\n",
		"\nndz_bytes_sent 123456\n",
		"\nndz_session_receivers{image=\"a\",group=\"239.192.1.0\"} 3\n",
		"# TYPE ndz_requests_total counter\n",
		"\nndz_requests_total{type=\"get\"} 1\n",
		"\nndz_replies_total{result=\"ok\"} 1\n",
		"\nndz_failures_total{reason=\"denied\"} 0\n",
		"\nndz_sessions_started_total 1\n",
		NULL });
	/* every sample's name has HELP and TYPE lines before it */
	for (const char *l = strstr(r, "\r\n\r\n") + 4; *l; l = strchr(l, '\n') + 1) {
		char name[64], help[80];

		if (*l == '#')
			continue;
		assert_int_equal(sscanf(l, "%63[a-z_]", name), 1);
		assert_int_equal(strncmp(name, "ndz_", 4), 0);
		snprintf(help, sizeof(help), "# TYPE %s ", name);
		assert_non_null(strstr(r, help));
	}
}

static void test_refusals(void **state)
{
	static char huge[80 * 1024 + 128];
	const char *r;
	int n;

	(void)state;
	assert_non_null(strstr(get("/nope"), "HTTP/1.1 404"));
	r = ask("DELETE / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 49);
	assert_non_null(strstr(r, "HTTP/1.1 405"));
	assert_non_null(strstr(r, "Allow: GET, HEAD, POST"));
	r = ask("garbage\r\n\r\n", 11);       /* closed unanswered */
	assert_null(strstr(r, "HTTP/1.1 200"));
	r = ask("GET /\r\n\r\n", 9);            /* no version */
	assert_non_null(strstr(r, "HTTP/1.1 400"));
	n = snprintf(huge, sizeof(huge), "GET / HTTP/1.1\r\nHost: x\r\nX-Big: ");
	memset(huge + n, 'a', 80 * 1024);
	n += 80 * 1024;
	n += snprintf(huge + n, sizeof(huge) - (size_t)n, "\r\nConnection: close\r\n\r\n");
	r = ask(huge, (size_t)n);
	assert_null(strstr(r, "HTTP/1.1 200"));
	assert_non_null(strstr(r, "HTTP/1.1 431"));
	/* the endpoint still answers */
	assert_non_null(strstr(get("/metrics"), "HTTP/1.1 200"));
}

static void test_token(void **state)
{
	const char *r;

	(void)state;
	r = post("/reload-config", NULL, "");
	assert_non_null(strstr(r, "HTTP/1.1 401"));
	r = post("/reload-config", "Bearer wrong", "");
	assert_non_null(strstr(r, "HTTP/1.1 401"));
	r = post("/reload-config", "Bearer s3cret-token-0123-and-more", "");
	assert_non_null(strstr(r, "HTTP/1.1 401"));
	r = post("/reload-config", "Basic s3cret-token-0123", "");
	assert_non_null(strstr(r, "HTTP/1.1 401"));
	r = post("/nodes", "Bearer wrong", "x");
	assert_non_null(strstr(r, "HTTP/1.1 401"));
	assert_int_equal(fx.reloads, 0);
	assert_int_equal(fx.actions, 0);
	r = post("/reload-config", "Bearer s3cret-token-0123", "");
	assert_non_null(strstr(r, "HTTP/1.1 200"));
	assert_non_null(strstr(r, "{\"ok\": true}"));
	assert_int_equal(fx.reloads, 1);
	r = post("/nodes", "Bearer s3cret-token-0123", "mac=52:54:00:00:00:01");
	assert_non_null(strstr(r, "HTTP/1.1 200"));
	assert_non_null(strstr(r, "{\"done\": 1}"));
	assert_string_equal(fx.body, "mac=52:54:00:00:00:01");
	r = post("/nodes", "Bearer s3cret-token-0123", "");
	assert_non_null(strstr(r, "HTTP/1.1 400"));
	assert_non_null(strstr(r, "empty body"));
	assert_non_null(strstr(post("/nothing", "Bearer s3cret-token-0123", ""), "HTTP/1.1 404"));
	/* a GET path is no action */
	assert_non_null(strstr(post("/metrics", "Bearer s3cret-token-0123", ""), "HTTP/1.1 404"));
}

/* An extension's GET: its text with the connection's addresses, a file, refusals. */
static void test_ext_get(void **state)
{
	static char want[100000];
	char line[128];
	const char *r, *body;
	int fd = mkstemp(filepath);

	(void)state;
	assert_true(fd >= 0);
	for (size_t i = 0; i < sizeof(want); i++)
		want[i] = (char)('a' + (i * 7 + i / 251) % 26);
	assert_int_equal(write(fd, want, sizeof(want)), (ssize_t)sizeof(want));
	close(fd);
	r = get("/x/hello");
	assert_non_null(strstr(r, "HTTP/1.1 200"));
	assert_non_null(strstr(r, "Content-Type: text/x-test"));
	snprintf(line, sizeof(line), "path=/x/hello local=127.0.0.1:%u peer=127.0.0.1 cap=%d\n",
		 fx.port, NDZ_HTTP_GET_MAX);
	assert_non_null(strstr(r, line));
	/* decoded by the endpoint, as the extension sees it */
	assert_non_null(strstr(get("/x/%2e%2e"), "path=/x/.. local="));
	r = get("/x/file");
	assert_non_null(strstr(r, "HTTP/1.1 200"));
	assert_non_null(strstr(r, "Content-Length: 100000"));
	assert_non_null(strstr(r, "application/octet-stream"));
	body = strstr(r, "\r\n\r\n");
	assert_non_null(body);
	assert_int_equal(strlen(body + 4), sizeof(want));
	assert_memory_equal(body + 4, want, sizeof(want));
	body = "HEAD /x/file HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
	r = ask(body, strlen(body));
	assert_non_null(strstr(r, "HTTP/1.1 200"));
	assert_non_null(strstr(r, "Content-Length: 100000"));
	assert_string_equal(strstr(r, "\r\n\r\n"), "\r\n\r\n");
	r = get("/x/bad");
	assert_non_null(strstr(r, "HTTP/1.1 400"));
	assert_non_null(strstr(r, "{\"error\": \"bad x\"}"));
	assert_non_null(strstr(get("/x/none"), "HTTP/1.1 404"));
	assert_non_null(strstr(get("/x/broken"), "HTTP/1.1 500"));
	/* the endpoint's own paths come first; a path outside every prefix is 404 */
	assert_non_null(strstr(get("/metrics"), "ndz_sessions"));
	assert_non_null(strstr(get("/x"), "HTTP/1.1 404"));
	/* no action through a GET extension */
	assert_non_null(strstr(post("/x", "Bearer s3cret-token-0123", ""), "HTTP/1.1 404"));
	unlink(filepath);
}

static void test_token_ok(void **state)
{
	(void)state;
	assert_int_equal(ndz_http_token_ok(tokpath, "Bearer s3cret-token-0123"), 1);
	assert_int_equal(ndz_http_token_ok(tokpath, "Bearer s3cret-token-012"), 0);
	assert_int_equal(ndz_http_token_ok(tokpath, "Bearer "), 0);
	assert_int_equal(ndz_http_token_ok(tokpath, NULL), 0);
	assert_int_equal(ndz_http_token_ok(NULL, "Bearer s3cret-token-0123"), 0);
	assert_int_equal(ndz_http_token_ok("/nonexistent/token", "Bearer x"), 0);
	/* the one reader's rule (ndz_ctl_read_token): a token under 16 bytes is none */
	{
		char shortpath[] = "/tmp/test_http_short.XXXXXX";
		int fd = mkstemp(shortpath);

		assert_true(fd >= 0);
		assert_int_equal(write(fd, "short-token\n", 12), 12);
		close(fd);
		assert_int_equal(ndz_http_token_ok(shortpath, "Bearer short-token"), 0);
		unlink(shortpath);
	}
}

static void test_conf(void **state)
{
	struct ndz_mconf *c = NULL;
	struct ndz_error e = { 0 };
	const char *bad[] = { "http-listen 127.0.0.1\n", "http-listen 1.2.3:80\n",
			      "http-listen 127.0.0.1:70000\n", "http-token-file rel/path\n",
			      "http-token-file /a\nhttp-token-file /b\n",
			      "token-file /a\ntoken-file /a\n",
			      "token-file /a\nhttp-token-file /b\n",
			      "http-token-file /a\ntoken-file /b\n" };
	char text[256];

	(void)state;
	snprintf(text, sizeof(text), "image a /x allow 10.0.0.0/8\n"
		 "http-listen 0.0.0.0:8080\nhttp-listen 10.1.2.3:0\n");
	assert_int_equal(ndz_mconf_parse(text, strlen(text), "m.conf", &c, &e), 0);
	assert_int_equal(c->nhttp, 2);
	assert_int_equal(c->http[0].port, 8080);
	assert_int_equal(c->http[1].addr, htonl(0x0a010203));
	assert_null(c->token_file);
	ndz_mconf_free(c);
	/* http-token-file is the old name of token-file: alone, or naming the same file */
	snprintf(text, sizeof(text), "image a /x allow 10.0.0.0/8\nhttp-token-file /t\n");
	assert_int_equal(ndz_mconf_parse(text, strlen(text), "m.conf", &c, &e), 0);
	assert_string_equal(c->token_file, "/t");
	ndz_mconf_free(c);
	snprintf(text, sizeof(text), "image a /x allow 10.0.0.0/8\ntoken-file /t\n"
		 "http-token-file /t\n");
	assert_int_equal(ndz_mconf_parse(text, strlen(text), "m.conf", &c, &e), 0);
	assert_string_equal(c->token_file, "/t");
	ndz_mconf_free(c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), "image a /x allow 10.0.0.0/8\n%s", bad[i]);
		ndz_error_clear(&e);
		assert_int_equal(ndz_mconf_parse(text, strlen(text), "m.conf", &c, &e), NDZ_EINVAL);
		assert_non_null(strstr(ndz_error_msg(&e), "m.conf:2: bad") ?
				strstr(ndz_error_msg(&e), "m.conf:2: bad") :
				strstr(ndz_error_msg(&e), "m.conf:3: http-token-file given twice") ?
				strstr(ndz_error_msg(&e), "m.conf:3: http-token-file given twice") :
				strstr(ndz_error_msg(&e), "m.conf:3: token-file given twice") ?
				strstr(ndz_error_msg(&e), "m.conf:3: token-file given twice") :
				strstr(ndz_error_msg(&e), "names on line 2"));
	}
}

static void test_bind_fail(void **state)
{
	struct ndz_mconf_listen at = { htonl(INADDR_LOOPBACK), fx.port };
	struct ndz_http_hooks h = { lock, fx.m, &fx, live, reload, NULL, 0, NULL };
	struct ndz_http *s = (struct ndz_http *)&h;
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_http_start(&at, 1, &h, &s, &e), NDZ_ENET);
	assert_null(s);
	assert_non_null(strstr(ndz_error_msg(&e), "http: cannot listen on 127.0.0.1:"));
	assert_int_equal(ndz_http_start(&at, 0, &h, &s, &e), 0);
	assert_null(s);
	ndz_http_stop(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_page),
		cmocka_unit_test(test_status_json),
		cmocka_unit_test(test_metrics),
		cmocka_unit_test(test_counters_one_list),
		cmocka_unit_test(test_refusals),
		cmocka_unit_test(test_token),
		cmocka_unit_test(test_ext_get),
		cmocka_unit_test(test_token_ok),
		cmocka_unit_test(test_conf),
		cmocka_unit_test(test_bind_fail),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
