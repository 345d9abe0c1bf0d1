/*
 * Unit tests for the master's TCP side without a network: lib/mserve/mconn serving
 * one end of a socket pair (STATUS allowed and denied, an upload stored, a corrupt
 * one rejected, a refusal with its reason, a connection that says nothing),
 * lib/mserve/mreply's messages, lib/master/updir's temporary files and usage, and
 * lib/mserve/mnet's listening sockets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "zipfix.h"
#include "ctl/ctl.h"
#include "master/master.h"
#include "master/mconf.h"
#include "mserve/mconn.h"
#include "mserve/mnet.h"
#include "mserve/mreply.h"
#include "master/updir.h"
#include "ctl/upload.h"
#include "core/format.h"
#include "trust/index.h"

static char dir[] = "/tmp/test_mconn.XXXXXX";

struct fixture {
	struct ndz_mlock *lock;
	struct ndz_mconf *conf;
	struct ndz_master *ms;
	char tmp[NDZ_MASTER_UPLOADS][PATH_MAX];
	struct ndz_mconn c;
	char said[1024];
	int reloads;
};

static size_t status_json(void *ctx, char *buf, size_t cap)
{
	struct fixture *f = ctx;

	return ndz_master_status_json(f->ms, 0, NULL, NULL, buf, cap);
}

static int reload(void *ctx, struct ndz_error *e)
{
	struct fixture *f = ctx;

	f->reloads++;
	return ndz_error_set(e, NDZ_EIO, 0, "no reloads here");
}

static void say(void *ctx, int level, const char *fmt, ...)
{
	struct fixture *f = ctx;
	va_list ap;

	(void)level;
	va_start(ap, fmt);
	vsnprintf(f->said, sizeof(f->said), fmt, ap);
	va_end(ap);
}

static struct fixture *make(void)
{
	struct fixture *f = calloc(1, sizeof(*f));
	struct ndz_error e = { 0 };
	char text[1024];

	assert_non_null(f);
	snprintf(text, sizeof(text), "upload-dir %s allow 10.0.0.0/8 upload 10.0.9.0/24\n"
		 "image a %s/a.ndz allow 10.0.0.0/8 upload 10.0.0.7\nrequest-timeout 1\n"
		 "upload-timeout 2\n", dir, dir);
	if (ndz_mconf_parse(text, strlen(text), "m.conf", &f->conf, &e) != 0)
		fail_msg("%s", ndz_error_msg(&e));
	assert_int_equal(ndz_master_create(f->conf, &f->ms, NULL), 0);
	assert_int_equal(ndz_mlock_create(&f->lock, NULL), 0);
	f->c = (struct ndz_mconn){ f->lock, f->ms, f->tmp, 0, f, status_json, reload, say,
				   NULL, NULL, NULL };
	return f;
}

static void drop(struct fixture *f)
{
	ndz_master_free(f->ms);
	ndz_mconf_free(f->conf);
	ndz_mlock_free(f->lock);
	free(f);
}

struct conn {
	struct fixture *f;
	int fd;
	uint32_t addr;
	pthread_t t;
};

static void *serve(void *arg)
{
	struct conn *k = arg;

	ndz_mconn_serve(&k->f->c, k->fd, k->addr);
	close(k->fd);
	return NULL;
}

/* A connection from addr served on a thread (admitted: past ndz_master_accept); our end. */
static int connect_as(struct fixture *f, struct conn *k, const char *addr, int admitted)
{
	int sv[2];

	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
	k->f = f;
	k->fd = sv[1];
	assert_int_equal(inet_pton(AF_INET, addr, &k->addr), 1);
	if (admitted)
		assert_int_equal(ndz_master_accept(f->ms, k->addr, 0, 0, NULL), 0);
	assert_int_equal(pthread_create(&k->t, NULL, serve, k), 0);
	return sv[0];
}

static int connect_from(struct fixture *f, struct conn *k, const char *addr)
{
	return connect_as(f, k, addr, 1);
}

static void send_req(int fd, const struct ndz_ctl_req *r)
{
	uint8_t b[NDZ_CTL_REQ_MAX];
	int n = ndz_ctl_req_encode(r, b, sizeof(b), NULL);

	assert_true(n > 0);
	assert_int_equal(write(fd, b, (size_t)n), n);
}

static void read_rep(int fd, uint8_t *buf, size_t cap, struct ndz_ctl_rep *rep)
{
	int n = ndz_upload_read_msg(fd, buf, cap, ndz_ctl_rep_need, 5000, NULL);

	assert_true(n > 0);
	assert_int_equal(ndz_ctl_rep_decode(buf, (size_t)n, rep, NULL), 0);
}

static void test_status(void **state)
{
	struct fixture *f = make();
	static uint8_t buf[NDZ_CTL_REP_MAX];
	struct ndz_ctl_req req = { .type = NDZ_CTL_STATUS, .id = 9 };
	struct ndz_ctl_rep rep;
	struct conn k;
	int fd;

	(void)state;
	fd = connect_from(f, &k, "10.0.0.5");
	send_req(fd, &req);
	read_rep(fd, buf, sizeof(buf), &rep);
	assert_int_equal(rep.type, NDZ_CTL_STATUS);
	assert_int_equal(rep.status, NDZ_CTL_OK);
	assert_int_equal(rep.id, 9);
	assert_int_equal(strncmp(rep.json, "{\"sessions\": [", 14), 0);
	pthread_join(k.t, NULL);
	close(fd);
	/* a host no image allows (ndz_master_accept would have refused it first) */
	fd = connect_as(f, &k, "192.168.1.1", 0);
	send_req(fd, &req);
	read_rep(fd, buf, sizeof(buf), &rep);
	assert_int_equal(rep.status, NDZ_CTL_DENIED);
	pthread_join(k.t, NULL);
	close(fd);
	assert_int_equal(ndz_master_counters(f->ms)->status, 1);
	assert_int_equal(ndz_master_counters(f->ms)->denied, 1);
	drop(f);
}

/* A whole small image, and its bytes. */
static uint8_t *image(size_t *len)
{
	uint8_t *src = fix_data(FIX_MIXED, 3 << 20, 7);
	struct fix_image img;
	struct ndz_zip_stats st;

	assert_int_equal(fix_zip(src, 3 << 20, NULL, 1, 6, &img, &st, NULL, 0), 0);
	free(src);
	*len = img.n * NDZ_CHUNK_SIZE;
	return img.data;
}

/* Upload len bytes of data as name from addr: the verdict's status, its message in msg. */
static unsigned upload(struct fixture *f, const char *name, const char *addr, const uint8_t *data,
		       size_t len, char *msg, size_t cap)
{
	static uint8_t buf[NDZ_CTL_REP_MAX];
	struct ndz_ctl_req req = { .type = NDZ_CTL_UPLOAD, .id = 5, .size = len };
	struct ndz_ctl_rep rep;
	struct conn k;
	int fd = connect_from(f, &k, addr);

	snprintf(req.name, sizeof(req.name), "%s", name);
	send_req(fd, &req);
	read_rep(fd, buf, sizeof(buf), &rep);
	if (rep.type == NDZ_CTL_UPLOAD && rep.status == NDZ_CTL_OK) {
		for (size_t at = 0; at < len;) {
			ssize_t n = write(fd, data + at, len - at);

			if (n <= 0)
				break;         /* the master answered early */
			at += (size_t)n;
		}
		shutdown(fd, SHUT_WR);
		read_rep(fd, buf, sizeof(buf), &rep);
	}
	snprintf(msg, cap, "%.*s", (int)rep.json_len, rep.json ? rep.json : "");
	pthread_join(k.t, NULL);
	close(fd);
	return rep.status;
}

static int temporaries(void)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	int n = 0;

	while ((de = readdir(d)))
		n += strncmp(de->d_name, NDZ_UPDIR_TMP, strlen(NDZ_UPDIR_TMP)) == 0;
	closedir(d);
	return n;
}

static void test_upload(void **state)
{
	struct fixture *f = make();
	char msg[NDZ_CTL_MSG_MAX + 1], path[PATH_MAX + 16], ipath[PATH_MAX + 32], want[128];
	struct ndz_index ix = { 0 };
	struct ndz_chunk_hdr h;
	size_t len;
	uint8_t *img = image(&len), *back;
	struct stat sb;
	FILE *fp;

	(void)state;
	snprintf(path, sizeof(path), "%s/a.ndz", dir);
	assert_int_equal(upload(f, "a", "10.0.0.7", img, len, msg, sizeof(msg)), NDZ_CTL_OK);
	snprintf(want, sizeof(want), "stored: %zu chunks, %zu bytes", len / NDZ_CHUNK_SIZE, len);
	assert_string_equal(msg, want);
	assert_int_equal(strncmp(f->said, "a from 10.0.0.7 stored: ", 24), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, (off_t)len);
	assert_int_equal(sb.st_mode & 0777, 0644);
	back = malloc(len);
	fp = fopen(path, "rb");
	assert_int_equal(fread(back, 1, len, fp), len);
	fclose(fp);
	assert_memory_equal(back, img, len);
	free(back);
	/* its content index beside it, of this image, made before "stored" */
	snprintf(ipath, sizeof(ipath), "%s.index", path);
	assert_int_equal(ndz_index_load(ipath, NULL, &ix, NULL), 0);
	assert_int_equal(ix.chunks, len / NDZ_CHUNK_SIZE);
	assert_int_equal(ndz_hdr_decode(img, &h, NULL), 0);
	assert_memory_equal(ix.uuid, h.uuid, 16);
	assert_int_equal(ix.signed_, 0);
	ndz_index_release(&ix);
	assert_int_equal(temporaries(), 0);
	assert_int_equal(ndz_master_counters(f->ms)->uploads_stored, 1);
	assert_int_equal(f->reloads, 0);       /* a configured image: served as it is */
	/* a corrupt one: rejected, the stored image untouched, nothing left behind */
	img[NDZ_CHUNK_SIZE + 5000] ^= 1;
	assert_int_equal(upload(f, "a", "10.0.0.7", img, len, msg, sizeof(msg)), NDZ_CTL_BADIMAGE);
	assert_non_null(strstr(msg, "chunk 1"));
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, (off_t)len);
	assert_int_equal(stat(ipath, &sb), 0);     /* and its index */
	assert_int_equal(temporaries(), 0);
	assert_int_equal(ndz_master_counters(f->ms)->uploads_rejected, 1);
	/* refusals with their reason */
	assert_int_equal(upload(f, "a", "10.0.0.8", img, len, msg, sizeof(msg)), NDZ_CTL_DENIED);
	assert_string_equal(msg, "no upload rule matches 10.0.0.8 for image 'a'");
	assert_int_equal(upload(f, ".x", "10.0.9.1", img, len, msg, sizeof(msg)), NDZ_CTL_UNKNOWN);
	assert_non_null(strstr(msg, "is not a valid image name"));
	/* a new name: stored, but not served without a reload that picks it up */
	img[NDZ_CHUNK_SIZE + 5000] ^= 1;
	assert_int_equal(upload(f, "new", "10.0.9.1", img, len, msg, sizeof(msg)), NDZ_CTL_FAILED);
	assert_non_null(strstr(msg, "but not served: the configuration does not load: no reloads"));
	assert_int_equal(f->reloads, 1);
	free(img);
	drop(f);
	unlink(path);
	unlink(ipath);
	snprintf(path, sizeof(path), "%s/new.ndz", dir);
	unlink(path);
	snprintf(ipath, sizeof(ipath), "%s.index", path);
	unlink(ipath);
}

static void test_quiet(void **state)
{
	struct fixture *f = make();
	struct conn k;
	char b[16];
	int fd;

	(void)state;
	fd = connect_from(f, &k, "10.0.0.5");
	assert_int_equal(write(fd, "NDZC", 4), 4);     /* a part of a header, then silence */
	assert_int_equal(read(fd, b, sizeof(b)), 0);   /* closed unanswered after 1 s */
	pthread_join(k.t, NULL);
	close(fd);
	assert_int_equal(ndz_master_counters(f->ms)->tcp_quiet, 1);
	/* its place is given back */
	for (int i = 0; i < 4; i++)
		assert_int_equal(ndz_master_accept(f->ms, k.addr, 0, 0, NULL), 0);
	assert_int_equal(ndz_master_accept(f->ms, k.addr, 0, 0, NULL), NDZ_ECONNS);
	drop(f);
}

static void test_mreply(void **state)
{
	uint8_t buf[NDZ_CTL_REP_MAX];
	struct ndz_ctl_rep rep;
	int sv[2];

	(void)state;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	assert_int_equal(ndz_mreply_done(sv[0], 3, NDZ_CTL_QUOTA, "over", NULL), 0);
	read_rep(sv[1], buf, sizeof(buf), &rep);
	assert_int_equal(rep.type, NDZ_CTL_DONE);
	assert_int_equal(rep.status, NDZ_CTL_QUOTA);
	assert_int_equal(rep.json_len, 4);
	assert_memory_equal(rep.json, "over", 4);
	ndz_mreply_refuse(sv[0], NDZ_CTL_CONNS);
	read_rep(sv[1], buf, sizeof(buf), &rep);
	assert_int_equal(rep.type, NDZ_CTL_UPLOAD);
	assert_int_equal(rep.status, NDZ_CTL_CONNS);
	close(sv[1]);
}

static void test_updir(void **state)
{
	char a[PATH_MAX], tmp[PATH_MAX], small[8];
	struct ndz_error e = { 0 };
	struct stat sb;
	int fd;
	FILE *fp;

	(void)state;
	snprintf(a, sizeof(a), "%s/u1.ndz", dir);
	fp = fopen(a, "w");
	fputs("0123456789", fp);
	fclose(fp);
	fd = ndz_updir_temp(dir, "u2", tmp, sizeof(tmp), NULL);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "abc", 3), 3);
	close(fd);
	assert_int_equal(stat(tmp, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0644);
	assert_non_null(strstr(tmp, "/" NDZ_UPDIR_TMP "u2."));
	/* the file to be replaced does not count */
	assert_int_equal(ndz_updir_usage(dir, "/nonexistent"), 13);
	assert_int_equal(ndz_updir_usage(dir, a), 3);
	ndz_updir_clean(dir, NULL, NULL);
	assert_int_not_equal(stat(tmp, &sb), 0);
	assert_int_equal(stat(a, &sb), 0);
	unlink(a);
	assert_int_equal(ndz_updir_temp(dir, "u3", small, sizeof(small), &e), NDZ_EIO);
	assert_int_equal(ndz_updir_temp("/nonexistent", "u3", tmp, sizeof(tmp), NULL), NDZ_EIO);
}

static void test_mnet(void **state)
{
	struct ndz_error e = { 0 };
	int u, t, u2, t2;

	(void)state;
	assert_int_equal(ndz_mnet_listen("300.1.1.1", &u, &t, &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "--listen: bad address '300.1.1.1'");
	assert_int_equal(u, -1);
	assert_int_equal(ndz_mnet_listen("127.0.0.1:39563", &u, &t, NULL), 0);
	assert_true(u >= 0 && t >= 0);
	assert_true(fcntl(t, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(u, F_GETFD) & FD_CLOEXEC);
	/* the TCP port is taken now */
	ndz_error_clear(&e);
	assert_int_equal(ndz_mnet_listen("127.0.0.1:39563", &u2, &t2, &e), NDZ_ENET);
	assert_int_equal(u2, -1);
	assert_int_equal(t2, -1);
	close(u);
	close(t);
	/* the route to a pool on this host goes from 127.0.0.1 */
	assert_int_equal(ndz_mnet_source(NULL, 0x7f000001, 5000), htonl(0x7f000001));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status),
		cmocka_unit_test(test_upload),
		cmocka_unit_test(test_quiet),
		cmocka_unit_test(test_mreply),
		cmocka_unit_test(test_updir),
		cmocka_unit_test(test_mnet),
	};
	char path[PATH_MAX];
	int rc;

	if (!mkdtemp(dir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	snprintf(path, sizeof(path), "%s/a.ndz", dir);
	unlink(path);
	snprintf(path, sizeof(path), "%s/new.ndz", dir);
	unlink(path);
	rmdir(dir);
	return rc;
}
