/*
 * Unit tests for lib/ctl/sessctl: a session's control messages encoded and
 * decoded, refused when malformed; and an endpoint answering STATUS, RATE,
 * IDENTIFY and HOLD on a unix socket through its callbacks, as the master asks.
 */
#include <pthread.h>
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
#include <sys/wait.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/format.h"
#include "core/json.h"
#include "mcast/server.h"
#include "ctl/ctl.h"
#include "master/master.h"
#include "master/mconf.h"
#include "mserve/session.h"
#include "ctl/sessctl.h"
#include "mcast/sessans.h"
#include "master/images.h"

static char dir[] = "/tmp/test_sessctl.XXXXXX";

/* The codec tests' messages and buffer (large: not on the stack). */
static struct ndz_sessctl_msg cm, cd;
static uint8_t buf[NDZ_SESSCTL_MSG_MAX];

static void test_codec(void **state)
{
	struct ndz_error e = { 0 };
	int n;

	(void)state;
	/* RATE request: header and the rate */
	memset(&cm, 0, sizeof(cm));
	cm.type = NDZ_SESSCTL_RATE;
	cm.id = 0x01020304;
	cm.rate_bps = 123456789;
	n = ndz_sessctl_encode(&cm, 0, buf, sizeof(buf), NULL);
	assert_int_equal(n, 20);
	assert_int_equal(buf[5], NDZ_SESSCTL_RATE);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 0, &cd, NULL), 0);
	assert_int_equal(cd.rate_bps, 123456789);
	assert_int_equal(cd.id, 0x01020304);
	/* a request is no reply, and the length is exact */
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &cd, NULL), NDZ_EPROTO);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n - 1, 0, &cd, &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "session control: 19 bytes, not 20");
	buf[4] = 9;
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 0, &cd, NULL), NDZ_EPROTOVER);
	buf[4] = NDZ_CTL_VERSION;
	buf[5] = 2;                    /* the master's STATUS: not a session's question */
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 0, &cd, NULL), NDZ_EINVAL);
	/* STATUS reply with its JSON */
	memset(&cm, 0, sizeof(cm));
	cm.type = NDZ_SESSCTL_STATUS;
	cm.st.clients = 5;
	cm.st.bytes_sent = 1ull << 40;
	cm.st.rate_bps = 8000;
	strcpy(cm.st.json, "{\"clients\": 5}");
	cm.st.json_len = strlen(cm.st.json);
	n = ndz_sessctl_encode(&cm, 1, buf, sizeof(buf), NULL);
	assert_int_equal(n, 12 + 26 + (int)cm.st.json_len);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &cd, NULL), 0);
	assert_int_equal(cd.st.clients, 5);
	assert_int_equal(cd.st.bytes_sent, 1ull << 40);
	assert_string_equal(cd.st.json, "{\"clients\": 5}");
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n + 1, 1, &cd, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_sessctl_encode(&cm, 1, buf, 20, NULL), NDZ_ERANGE);
	assert_false(cd.st.states);     /* a frisbeed before the states: none told */
	/* STATUS reply with the clients' states as fields after the JSON */
	{
		static const struct ndz_sessctl_status st = {
			.clients = 5, .bytes_sent = 1ull << 40, .rate_bps = 8000,
			.json = "{\"clients\": 5}", .json_len = 14,
			.states = 1, .active = 2, .done = 1ull << 33, .failed = 3, .lost = 4,
			.nclient = 2, .client = {
				{ 7, 0, NDZ_SESSCTL_RX_DONE, 10, 12, 1ull << 35, 8000000, 1500000000 },
				{ 0xfffffffe, 0, NDZ_SESSCTL_RX_LOST, 0, 0, 0, 0, 0 } },
		};

		cm.st = st;
		cm.st.client[0].addr = htonl(0x0a000005);
		cm.st.client[1].addr = htonl(0xc0a80001);
	}
	n = ndz_sessctl_encode(&cm, 1, buf, sizeof(buf), NULL);
	assert_int_equal(n, 12 + 26 + (int)cm.st.json_len + 34 + 2 * 41);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &cd, NULL), 0);
	assert_true(cd.st.states);
	assert_string_equal(cd.st.json, "{\"clients\": 5}");
	assert_int_equal(cd.st.active, 2);
	assert_int_equal(cd.st.done, 1ull << 33);
	assert_int_equal(cd.st.failed, 3);
	assert_int_equal(cd.st.lost, 4);
	assert_int_equal(cd.st.nclient, 2);
	assert_memory_equal(&cd.st.client[0], &cm.st.client[0], sizeof(cm.st.client[0]));
	assert_memory_equal(&cd.st.client[1], &cm.st.client[1], sizeof(cm.st.client[1]));
	/* cut, or one entry short, or a byte more: refused */
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n - 1, 1, &cd, &e), NDZ_EINVAL);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n - 41, 1, &cd, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_sessctl_decode(buf, 12 + 26 + cm.st.json_len + 33, 1, &cd, NULL),
			 NDZ_EINVAL);
	/* a state past "lost" */
	buf[12 + 26 + cm.st.json_len + 34 + 8] = 4;
	ndz_error_clear(&e);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &cd, &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "session control: bad client states");
	/* more entries than a reply may carry */
	cm.st.nclient = NDZ_SESSCTL_CLIENTS + 1;
	assert_int_equal(ndz_sessctl_encode(&cm, 1, buf, sizeof(buf), NULL), NDZ_EINVAL);
	cm.st.nclient = NDZ_SESSCTL_CLIENTS;
	n = ndz_sessctl_encode(&cm, 1, buf, sizeof(buf), NULL);
	assert_int_equal(n, 12 + 26 + (int)cm.st.json_len + 34 + NDZ_SESSCTL_CLIENTS * 41);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &cd, NULL), 0);
	assert_int_equal(cd.st.nclient, NDZ_SESSCTL_CLIENTS);
	/* one client entry as JSON, the same text frisbeed --stats-json writes */
	{
		char js[256];
		struct ndz_jbuf j;

		ndz_jbuf_init(&j, js, sizeof(js));
		ndz_sessctl_client_json(&cm.st.client[0], &j);
		assert_string_equal(js, "{\"id\": 7, \"address\": \"10.0.0.5\", \"state\": \"done\", "
				    "\"chunks_done\": 10, \"chunks_total\": 12, "
				    "\"bytes_written\": 34359738368, \"write_bps\": 8000000, "
				    "\"age_s\": 1.5}");
		assert_string_equal(ndz_sessctl_state_name(4), "unknown");
	}
	/* IDENTIFY reply */
	memset(&cm, 0, sizeof(cm));
	cm.type = NDZ_SESSCTL_IDENTIFY;
	cm.who.pid = 4242;
	cm.who.uuid[3] = 7;
	cm.who.chunks = 9;
	cm.who.source_bytes = 77;
	strcpy(cm.who.path, "/srv/a.ndz");
	n = ndz_sessctl_encode(&cm, 1, buf, sizeof(buf), NULL);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &cd, NULL), 0);
	assert_int_equal(cd.who.pid, 4242);
	assert_int_equal(cd.who.uuid[3], 7);
	assert_int_equal(cd.who.chunks, 9);
	assert_int_equal(cd.who.source_bytes, 77);
	assert_string_equal(cd.who.path, "/srv/a.ndz");
	buf[12 + 34] = 0;              /* a NUL in the path */
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &cd, NULL), NDZ_EINVAL);
	/* a refusal is a header only */
	cm.status = NDZ_CTL_FAILED;
	assert_int_equal(ndz_sessctl_encode(&cm, 1, buf, sizeof(buf), NULL), 12);
	assert_int_equal(ndz_sessctl_decode(buf, 12, 1, &cd, NULL), 0);
	assert_int_equal(cd.status, NDZ_CTL_FAILED);
	/* bad type */
	cm.type = 3;
	assert_int_equal(ndz_sessctl_encode(&cm, 0, buf, sizeof(buf), NULL), NDZ_EINVAL);
	assert_int_equal(ndz_sessctl_decode(buf, 3, 0, &cd, NULL), NDZ_EPROTO);
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
	int states;                    /* tell the clients' states (a frisbeed of now) */
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
	if (f->states) {               /* the JSON says nothing of them: the fields do */
		out->states = 1;
		out->active = 1;
		out->done = 5;
		out->nclient = 2;
		out->client[0] = (struct ndz_sessctl_client){ 1, htonl(0x0a000001),
							      NDZ_SESSCTL_RX_ACTIVE, 2, 9, 4096, 800,
							      250000000 };
		out->client[1] = (struct ndz_sessctl_client){ 2, htonl(0x0a000002),
							      NDZ_SESSCTL_RX_DONE, 9, 9, 1 << 20, 0,
							      3000000000ull };
	}
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

/* HOLD: held while ctx's int is 1, ending when 0, refused when negative; above 1: held
 * after that many milliseconds (a busy frisbeed) */
static int f_hold(void *ctx)
{
	int v = __atomic_load_n((int *)ctx, __ATOMIC_SEQ_CST);  /* the test changes it */

	if (v > 1)
		usleep((useconds_t)v * 1000);
	return v > 1 ? 1 : v;
}

static void test_hold_codec(void **state)
{
	struct ndz_error e = { 0 };
	int n;

	(void)state;
	memset(&cm, 0, sizeof(cm));
	cm.type = NDZ_SESSCTL_HOLD;
	cm.id = 7;
	n = ndz_sessctl_encode(&cm, 0, buf, sizeof(buf), NULL);
	assert_int_equal(n, 12);               /* the request: the header alone */
	assert_int_equal(buf[5], 19);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 0, &cd, NULL), 0);
	assert_int_equal(cd.type, NDZ_SESSCTL_HOLD);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n + 1, 0, &cd, NULL), NDZ_EINVAL);
	/* the reply: one byte, 1 held or 0 ending */
	cm.held = 1;
	n = ndz_sessctl_encode(&cm, 1, buf, sizeof(buf), NULL);
	assert_int_equal(n, 13);
	assert_int_equal(buf[5], 19 | 0x80);
	assert_int_equal(buf[12], 1);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &cd, NULL), 0);
	assert_int_equal(cd.held, 1);
	assert_int_equal(cd.id, 7);
	cm.held = 0;
	n = ndz_sessctl_encode(&cm, 1, buf, sizeof(buf), NULL);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &cd, NULL), 0);
	assert_int_equal(cd.held, 0);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n - 1, 1, &cd, NULL), NDZ_EINVAL);
	buf[12] = 2;
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &cd, &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "session control: bad hold answer 2");
	/* a refusal is the header alone */
	cm.status = NDZ_CTL_FAILED;
	n = ndz_sessctl_encode(&cm, 1, buf, sizeof(buf), NULL);
	assert_int_equal(n, 12);
	assert_int_equal(ndz_sessctl_decode(buf, (size_t)n, 1, &cd, NULL), 0);
	assert_int_equal(cd.status, NDZ_CTL_FAILED);
	assert_int_equal(ndz_sessctl_encode(&cm, 1, buf, 11, NULL), NDZ_ERANGE);
}

/* HOLD through an endpoint: yes, no, a refusal; an endpoint without HOLD refuses it. */
static void test_hold_endpoint(void **state)
{
	static const struct ndz_sessctl_ops ops = { NULL, NULL, NULL, f_hold };
	static const struct ndz_sessctl_ops old = { f_status, f_rate, f_identify, NULL };
	struct fake f = { 100000000, 0, 0 };
	struct ndz_sessctl *s = NULL;
	struct ndz_error e = { 0 };
	char path[256];
	int say = 1;

	(void)state;
	snprintf(path, sizeof(path), "%s/h.sock", dir);
	assert_int_equal(ndz_sessctl_hold(path, 300, &e), NDZ_ENOENT);
	assert_int_equal(ndz_sessctl_start(path, &ops, &say, &s, NULL), 0);
	assert_int_equal(ndz_sessctl_hold(path, 300, NULL), 1);
	__atomic_store_n(&say, 0, __ATOMIC_SEQ_CST);
	assert_int_equal(ndz_sessctl_hold(path, 300, NULL), 0);
	__atomic_store_n(&say, NDZ_EIO, __ATOMIC_SEQ_CST);
	assert_int_equal(ndz_sessctl_hold(path, 300, NULL), NDZ_EREFUSED);
	ndz_sessctl_stop(s);
	assert_int_equal(ndz_sessctl_start(path, &old, &f, &s, NULL), 0);
	assert_int_equal(ndz_sessctl_hold(path, 300, NULL), NDZ_EREFUSED);
	ndz_sessctl_stop(s);
}

static void test_endpoint(void **state)
{
	static const struct ndz_sessctl_ops ops = { f_status, f_rate, f_identify, NULL };
	static struct ndz_sessctl_status st;
	struct ndz_sessctl_identity who;
	struct ndz_sessctl *s = NULL;
	struct fake f = { 100000000, 0, 0 };
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

/* A real session server answering through ndz_sessans_start. */
static void test_server_endpoint(void **state)
{
	struct ndz_server_opts o = { .name = "/img/srv.ndz", .rate_bps = 50000000 };
	static struct ndz_sessctl_status st;
	struct ndz_sessctl_identity who;
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t wake = PTHREAD_COND_INITIALIZER;
	struct ndz_server *srv;
	struct ndz_sessans *s = NULL;
	struct ndz_error e = { 0 };
	char path[256];

	(void)state;
	memset(o.info.uuid, 0x5a, 16);
	o.info.chunks = 3;
	o.info.block_size = NDZ_BLOCK_SIZE;
	o.info.blocks_per_chunk = NDZ_BLOCKS_PER_CHUNK;
	o.info.image_bytes = 3ull * NDZ_CHUNK_SIZE;
	o.info.source_bytes = 7ull << 20;
	o.info.idle_timeout = 10;
	assert_int_equal(ndz_server_create(&o, 0, &srv, NULL), 0);
	snprintf(path, sizeof(path), "%s/srv.sock", dir);
	assert_int_equal(ndz_sessans_start(path, srv, &lock, &wake, &s, &e), 0);
	assert_int_equal(ndz_sessctl_identify(path, 1000, &who, NULL), 0);
	assert_int_equal(who.chunks, 3);
	assert_int_equal(who.source_bytes, 7ull << 20);
	assert_int_equal(who.uuid[0], 0x5a);
	assert_string_equal(who.path, "/img/srv.ndz");
	assert_int_equal(ndz_sessctl_status(path, 1000, &st, NULL), 0);
	assert_int_equal(st.clients, 0);
	assert_int_equal(st.rate_bps, 50000000);
	assert_non_null(strstr(st.json, "srv.ndz"));
	assert_true(st.states);                /* no clients yet: counts 0, no entries */
	assert_int_equal(st.nclient, 0);
	/* a new cap is the server's at once; one it refuses changes nothing */
	assert_int_equal(ndz_sessctl_rate(path, 20000000, 1000, NULL), 0);
	assert_int_equal(ndz_server_info(srv)->rate_bps, 20000000);
	assert_int_equal(ndz_sessctl_rate(path, 10, 1000, NULL), NDZ_EREFUSED);
	assert_int_equal(ndz_sessctl_status(path, 1000, &st, NULL), 0);
	assert_int_equal(st.rate_bps, 20000000);
	/* HOLD: held while the session is not over; no once it has decided to end idle */
	assert_int_equal(ndz_sessctl_hold(path, 300, NULL), 1);
	pthread_mutex_lock(&lock);
	assert_true(ndz_server_idle(srv, UINT64_MAX / 2));
	pthread_mutex_unlock(&lock);
	assert_int_equal(ndz_sessctl_hold(path, 300, NULL), 0);
	ndz_sessans_stop(s);
	ndz_server_free(srv);
}

/* lib/mserve/session: the master's questions to a session, through a real endpoint. */
static void test_session(void **state)
{
	static const struct ndz_sessctl_ops ops = { f_status, f_rate, f_identify, NULL };
	struct fake f = { 100000000, 0, 0 };
	struct ndz_sessctl *ep = NULL;
	struct ndz_mconf *c = NULL;
	struct ndz_master *m = NULL;
	struct ndz_master_plan p;
	struct ndz_master_live live;
	struct ndz_master_session s;
	struct ndz_error e = { 0 };
	const char *text = "pool 239.7.0.0/30\nports 7000-7003\nrate 100M\ntotal-rate 100M\n"
			   "image a /a.ndz allow 10.0.0.0/8\nimage b /b.ndz allow 10.0.0.0/8\n";
	uint8_t uuid[16];
	char path[256];
	pid_t pid;
	int st;

	(void)state;
	assert_int_equal(ndz_mconf_parse(text, strlen(text), "m.conf", &c, NULL), 0);
	assert_int_equal(ndz_master_create(c, &m, NULL), 0);
	memset(uuid, 0xab, 16);
	/* session a on 239.7.0.0:7000, its endpoint where the master looks */
	assert_int_equal(ndz_master_get(m, "a", htonl(0x0a000001), &p, NULL), 0);
	ndz_master_started(m, p.slot, getpid(), uuid, 12, 34, 0);
	s = *ndz_master_session(m, (size_t)p.slot);
	assert_int_equal(ndz_sessctl_path(dir, s.group, s.port, path, sizeof(path), NULL), 0);
	assert_int_equal(ndz_session_alive(dir, &s), 0);       /* not listening yet */
	assert_int_equal(ndz_sessctl_start(path, &ops, &f, &ep, NULL), 0);
	assert_int_equal(ndz_session_alive(dir, &s), 1);
	assert_int_equal(ndz_session_gone(dir, &s), 0);
	s.pid++;                               /* another process under that pid */
	assert_int_equal(ndz_session_alive(dir, &s), 0);
	assert_int_equal(ndz_session_gone(dir, &s), 1);
	s.pid--;
	s.uuid[0] = 0;                         /* serving another image */
	assert_int_equal(ndz_session_alive(dir, &s), 0);
	s.uuid[0] = 0xab;
	ndz_session_live(dir, &s, &live);
	assert_int_equal(live.receivers, 3);
	assert_int_equal(live.bytes_sent, 1000);
	assert_false(live.states);
	/* the clients' states come from STATUS's fields, never from its JSON */
	f.states = 1;
	ndz_session_live(dir, &s, &live);
	assert_true(live.states);
	assert_int_equal(live.receivers, 1);
	assert_int_equal(live.active, 1);
	assert_int_equal(live.done, 5);
	assert_string_equal(live.clients,
			    "{\"id\": 1, \"address\": \"10.0.0.1\", \"state\": \"active\", "
			    "\"chunks_done\": 2, \"chunks_total\": 9, \"bytes_written\": 4096, "
			    "\"write_bps\": 800, \"age_s\": 0.2}, {\"id\": 2, \"address\": "
			    "\"10.0.0.2\", \"state\": \"done\", \"chunks_done\": 9, "
			    "\"chunks_total\": 9, \"bytes_written\": 1048576, \"write_bps\": 0, "
			    "\"age_s\": 3.0}");
	f.states = 0;
	/* a second session halves the total: a is told 50M; b does not listen, asked again */
	assert_int_equal(ndz_master_get(m, "b", htonl(0x0a000001), &p, NULL), 0);
	ndz_master_started(m, p.slot, 999999, uuid, 1, 1, 0);
	assert_int_equal(ndz_session_rates(m, dir, NULL, NULL), 1);
	assert_int_equal(f.rate, 50000000);
	assert_int_equal(ndz_master_session(m, 0)->rate, 50000000);
	assert_int_equal(ndz_session_rates(m, dir, NULL, NULL), 0);
	ndz_sessctl_stop(ep);
	assert_int_equal(ndz_session_gone(dir, &s), 1);
	ndz_session_forget(dir, &s);
	/* starting one: a program that is not there, one that is */
	{
		struct ndz_session_opts o = { "/nonexistent/frisbeed", dir, NULL, 5, 1, 0, 1, 0, 0, 0 };

		assert_int_equal(ndz_session_start(&o, &s, "/a.ndz", &pid, &e), NDZ_EIO);
		assert_string_equal(ndz_error_msg(&e), "cannot run /nonexistent/frisbeed: "
				    "No such file or directory");
		o.frisbeed = "/bin/true";
		assert_int_equal(ndz_session_start(&o, &s, "/a.ndz", &pid, NULL), 0);
		assert_int_equal(waitpid(pid, &st, 0), pid);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	ndz_error_clear(&e);
	assert_true(ndz_images_identity("/nonexistent.ndz", uuid, &(uint32_t){ 0 },
					 &(uint64_t){ 0 }, &e) < 0);
	assert_non_null(strstr(ndz_error_msg(&e), "/nonexistent.ndz"));
	ndz_master_free(m);
	ndz_mconf_free(c);
}

/* lib/mserve/session: ndz_session_hold's verdicts from the answer and the process. */
static void test_session_hold(void **state)
{
	static const struct ndz_sessctl_ops ops = { NULL, NULL, NULL, f_hold };
	struct ndz_sessctl *ep = NULL;
	struct ndz_master_session s;
	char path[256];
	pid_t dead;
	int say = 1;

	(void)state;
	memset(&s, 0, sizeof(s));
	s.group = htonl(0xefc80001);
	s.port = 7100;
	s.pid = getpid();
	assert_int_equal(ndz_sessctl_path(dir, s.group, s.port, path, sizeof(path), NULL), 0);
	/* an exited child (not yet reaped) */
	dead = fork();
	if (dead == 0)
		_exit(0);
	assert_true(dead > 0);
	assert_int_equal(ndz_sessctl_start(path, &ops, &say, &ep, NULL), 0);
	assert_int_equal(ndz_session_hold(dir, &s), NDZ_MASTER_HELD);
	/* a frisbeed that does not know HOLD, or one too busy to answer: as before, held */
	__atomic_store_n(&say, NDZ_ENOTSUP, __ATOMIC_SEQ_CST);
	assert_int_equal(ndz_session_hold(dir, &s), NDZ_MASTER_HELD);
	__atomic_store_n(&say, 3 * NDZ_SESSION_HOLD_MS, __ATOMIC_SEQ_CST);
	assert_int_equal(ndz_session_hold(dir, &s), NDZ_MASTER_HELD);
	usleep(3 * NDZ_SESSION_HOLD_MS * 1000);        /* its answer is not waited for */
	/* says no: gone once its process has exited, else ending */
	__atomic_store_n(&say, 0, __ATOMIC_SEQ_CST);
	s.pid = dead;
	assert_int_equal(ndz_session_hold(dir, &s), NDZ_MASTER_GONE);
	s.pid = getpid();
	assert_int_equal(ndz_session_hold(dir, &s), NDZ_MASTER_ENDING);
	ndz_sessctl_stop(ep);
	/* nothing listens: gone when the process has exited; a live one is answered with */
	s.pid = dead;
	assert_int_equal(ndz_session_hold(dir, &s), NDZ_MASTER_GONE);
	s.pid = getpid();
	assert_int_equal(ndz_session_hold(dir, &s), NDZ_MASTER_HELD);
	/* the child was looked at, not reaped */
	assert_int_equal(waitpid(dead, NULL, 0), dead);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_codec),
		cmocka_unit_test(test_path),
		cmocka_unit_test(test_endpoint),
		cmocka_unit_test(test_hold_codec),
		cmocka_unit_test(test_hold_endpoint),
		cmocka_unit_test(test_server_endpoint),
		cmocka_unit_test(test_session),
		cmocka_unit_test(test_session_hold),
	};
	int rc;

	if (!mkdtemp(dir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rmdir(dir);
	return rc;
}
