/*
 * Unit tests for lib/ctl/upsink.c against a scripted master on loopback: the
 * bytes written arrive as they were, the verdict is the result, a refusal and a
 * rejection carry the master's reason, a cancel never leaves a sound image behind,
 * a master that goes away is an error.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <netinet/in.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/format.h"
#include "ctl/ctl.h"
#include "ctl/upload.h"
#include "ctl/upsink.h"

#include "hdrfix.h"

#define IMG_LEN (2 * NDZ_CHUNK_SIZE)

enum act {
	STORE,                         /* go ahead, read to the end, "stored" */
	REFUSE,                        /* UPLOAD reply with QUOTA */
	REJECT_EARLY,                  /* go ahead, read a little, DONE BADIMAGE, close */
	VANISH,                        /* go ahead, read a little, close without a word */
};

struct master {
	int lfd;
	uint16_t port;
	enum act act;
	pthread_t thread;
	/* what it heard */
	struct ndz_ctl_req req;
	uint8_t *got;
	size_t got_len;
};

static void done(int fd, unsigned status, const char *msg)
{
	struct ndz_ctl_rep r = { .type = NDZ_CTL_DONE, .status = (uint16_t)status,
				 .json = msg, .json_len = (uint32_t)strlen(msg) };

	assert_int_equal(ndz_upload_write_msg(fd, &r, NULL), 0);
}

static void *serve(void *arg)
{
	struct master *m = arg;
	uint8_t msg[NDZ_CTL_REQ_MAX];
	struct ndz_ctl_rep go = { .type = NDZ_CTL_UPLOAD };
	int fd = accept(m->lfd, NULL, NULL), n;
	size_t cap = IMG_LEN + 16, stop;

	if (fd < 0)
		return NULL;
	n = ndz_upload_read_msg(fd, msg, sizeof(msg), ndz_ctl_req_need, -1, NULL);
	if (n < 0 || ndz_ctl_req_decode(msg, (size_t)n, &m->req, NULL) != 0) {
		close(fd);
		return NULL;
	}
	go.id = m->req.id;
	if (m->act == REFUSE)
		go.status = NDZ_CTL_QUOTA;
	ndz_upload_write_msg(fd, &go, NULL);
	if (m->act == REFUSE) {
		close(fd);
		return NULL;
	}
	m->got = malloc(cap);
	stop = m->act == STORE ? cap : NDZ_CHUNK_SIZE / 2;
	while (m->got_len < stop) {
		ssize_t k = read(fd, m->got + m->got_len, stop - m->got_len);

		if (k <= 0)
			break;
		m->got_len += (size_t)k;
	}
	if (m->act == STORE)
		done(fd, m->got_len == IMG_LEN ? NDZ_CTL_OK : NDZ_CTL_BADIMAGE,
		     m->got_len == IMG_LEN ? "stored: 2 chunks" : "upload: not 2 chunks");
	else if (m->act == REJECT_EARLY)
		done(fd, NDZ_CTL_BADIMAGE, "upload: chunk 0: bad data checksum");
	if (m->act == REJECT_EARLY) {
		/* drop what still comes, as the master does, then close */
		shutdown(fd, SHUT_WR);
		while (read(fd, msg, sizeof(msg)) > 0)
			;
	}
	close(fd);
	return NULL;
}

static void master_start(struct master *m, enum act act)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);

	memset(m, 0, sizeof(*m));
	m->act = act;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	m->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(m->lfd >= 0);
	assert_int_equal(bind(m->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(listen(m->lfd, 4), 0);
	assert_int_equal(getsockname(m->lfd, (struct sockaddr *)&a, &al), 0);
	m->port = ntohs(a.sin_port);
	assert_int_equal(pthread_create(&m->thread, NULL, serve, m), 0);
}

/* Closes the master's socket and frees what it heard; after its thread ended. */
static void master_close(struct master *m)
{
	close(m->lfd);
	free(m->got);
}

static void master_stop(struct master *m)
{
	pthread_join(m->thread, NULL);
	master_close(m);
}

static const char *spec(const struct master *m)
{
	static char s[64];

	snprintf(s, sizeof(s), "127.0.0.1:%u", m->port);
	return s;
}

/* Two chunks: a valid first header (what the uploader checks), then a pattern. */
static uint8_t *image(void)
{
	uint8_t *p = malloc(IMG_LEN);

	assert_non_null(p);
	for (size_t i = 0; i < IMG_LEN; i++)
		p[i] = (uint8_t)(i * 7 + i / 4096);
	fix_hdr(p, 0);
	return p;
}

/* Starts a master that acts as ACT and opens an upload of NAME to it; the sink. */
static struct ndz_upsink *open_to(struct master *m, enum act act, const char *name,
				  uint64_t size, struct ndz_error *e)
{
	struct ndz_upsink *u;

	master_start(m, act);
	assert_int_equal(ndz_upsink_open(spec(m), name, size, 10, &u, e), 0);
	return u;
}

/* Writes the image over and over until a write fails (64 times at most); that code. */
static int write_until_error(struct ndz_upsink *u, const uint8_t *img, struct ndz_error *e)
{
	int rc = 0;

	for (int i = 0; i < 64 && rc == 0; i++)
		rc = ndz_upsink_write(u, img, IMG_LEN, e);
	return rc;
}

static void test_stored(void **state)
{
	struct ndz_error e = { 0 };
	struct ndz_upsink *u;
	struct master m;
	uint8_t *img = image();
	int refused = 7;

	(void)state;
	u = open_to(&m, STORE, "gold", 0, &e);
	/* half through the descriptor, half through the write call */
	assert_int_equal(write(ndz_upsink_fd(u), img, NDZ_CHUNK_SIZE), NDZ_CHUNK_SIZE);
	assert_int_equal(ndz_upsink_write(u, img + NDZ_CHUNK_SIZE, NDZ_CHUNK_SIZE, &e), 0);
	assert_int_equal(ndz_upsink_finish(u, 0, &refused, &e), 0);
	assert_int_equal(e.code, 0);
	assert_int_equal(refused, 0);
	master_stop(&m);
	free(img);
}

static void test_stored_bytes(void **state)
{
	struct ndz_error e = { 0 };
	struct ndz_upsink *u;
	struct master m;
	uint8_t *img = image();

	(void)state;
	u = open_to(&m, STORE, "img-1.x", 12345, &e);
	assert_int_equal(ndz_upsink_write(u, img, IMG_LEN, &e), 0);
	assert_int_equal(ndz_upsink_finish(u, 0, NULL, &e), 0);
	pthread_join(m.thread, NULL);
	assert_int_equal(m.req.type, NDZ_CTL_UPLOAD);
	assert_string_equal(m.req.name, "img-1.x");
	assert_int_equal(m.req.size, 12345);
	assert_int_equal(m.got_len, IMG_LEN);
	assert_memory_equal(m.got, img, IMG_LEN);
	master_close(&m);
	free(img);
}

static void test_refused(void **state)
{
	struct ndz_error e = { 0 };
	struct ndz_upsink *u;
	struct master m;
	uint8_t *img = image();
	int refused = 0;

	(void)state;
	u = open_to(&m, REFUSE, "gold", 0, &e);
	/* the refusal comes once the first header went: a write fails with it */
	assert_int_equal(write_until_error(u, img, &e), NDZ_EREFUSED);
	assert_non_null(strstr(ndz_error_msg(&e), "image 'gold': upload quota exceeded"));
	/* a cancel after the upload ended by itself returns that end */
	assert_int_equal(ndz_upsink_finish(u, 1, &refused, NULL), NDZ_EREFUSED);
	assert_int_equal(refused, 1);
	master_stop(&m);
	free(img);
}

static void test_rejected_early(void **state)
{
	struct ndz_error e = { 0 };
	struct ndz_upsink *u;
	struct master m;
	uint8_t *img = image();
	int refused = 1;

	(void)state;
	u = open_to(&m, REJECT_EARLY, "gold", 0, &e);
	assert_int_equal(write_until_error(u, img, &e), NDZ_EREFUSED);
	assert_non_null(strstr(ndz_error_msg(&e), "upload: chunk 0: bad data checksum"));
	ndz_error_clear(&e);
	assert_int_equal(ndz_upsink_finish(u, 0, &refused, &e), NDZ_EREFUSED);
	assert_int_equal(refused, 0);
	assert_non_null(strstr(ndz_error_msg(&e), "bad data checksum"));
	master_stop(&m);
	free(img);
}

static void test_vanished(void **state)
{
	struct ndz_error e = { 0 };
	struct ndz_upsink *u;
	struct master m;
	uint8_t *img = image();
	int rc;

	(void)state;
	u = open_to(&m, VANISH, "gold", 0, &e);
	rc = write_until_error(u, img, &e);
	if (rc == 0)
		rc = ndz_upsink_finish(u, 0, NULL, &e);
	else
		assert_int_equal(ndz_upsink_finish(u, 0, NULL, NULL), rc);
	assert_true(rc == NDZ_ENET || rc == NDZ_EREFUSED);
	assert_non_null(strstr(ndz_error_msg(&e), "master 127.0.0.1:"));
	master_stop(&m);
	free(img);
}

/* A cancel after the whole image went still leaves the master no sound image. */
static void test_cancel(void **state)
{
	struct ndz_error e = { 0 };
	struct ndz_upsink *u;
	struct master m;
	uint8_t *img = image();

	(void)state;
	u = open_to(&m, STORE, "gold", 0, &e);
	assert_int_equal(ndz_upsink_write(u, img, IMG_LEN, &e), 0);
	assert_int_equal(ndz_upsink_finish(u, 1, NULL, &e), NDZ_ECANCELED);
	assert_non_null(strstr(ndz_error_msg(&e), "canceled, nothing stored"));
	pthread_join(m.thread, NULL);
	assert_int_equal(m.got_len, IMG_LEN + 1);
	master_close(&m);
	free(img);
}

static void test_bad_args(void **state)
{
	struct ndz_error e = { 0 };
	struct ndz_upsink *u = (struct ndz_upsink *)1;

	(void)state;
	assert_int_equal(ndz_upsink_open("host:99999", "gold", 0, 1, &u, &e), NDZ_EINVAL);
	assert_null(u);
	assert_non_null(strstr(ndz_error_msg(&e), "bad master address 'host:99999'"));
	ndz_error_clear(&e);
	assert_int_equal(ndz_upsink_open("127.0.0.1", "my image", 0, 1, &u, &e), NDZ_EINVAL);
	assert_non_null(strstr(ndz_error_msg(&e), "'my image' is not a valid image name"));
	assert_int_equal(ndz_upsink_finish(NULL, 0, NULL, NULL), 0);
}

/* Nothing listens: the error names the master; nothing was written but a header. */
static void test_no_master(void **state)
{
	struct ndz_error e = { 0 };
	struct ndz_upsink *u;
	struct master m = { .lfd = -1 };
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t al = sizeof(a);
	uint8_t *img = image();
	int rc, fd = socket(AF_INET, SOCK_STREAM, 0);

	(void)state;
	/* a port that was free a moment ago: bound, then closed, never listened on */
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
	m.port = ntohs(a.sin_port);
	close(fd);
	assert_int_equal(ndz_upsink_open(spec(&m), "gold", 0, 2, &u, &e), 0);
	rc = write_until_error(u, img, &e);
	if (rc == 0)
		rc = ndz_upsink_finish(u, 0, NULL, &e);
	else
		ndz_upsink_finish(u, 0, NULL, NULL);
	assert_int_equal(rc, NDZ_ENET);
	assert_non_null(strstr(ndz_error_msg(&e), "connect"));
	free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_stored),
		cmocka_unit_test(test_stored_bytes),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_rejected_early),
		cmocka_unit_test(test_vanished),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_bad_args),
		cmocka_unit_test(test_no_master),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
