/* Unit tests for lib/mconf: every keyword, defaults, image directories, and errors by file:line. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "hdrfix.h"

#include "cli/cli.h"
#include "core/err.h"
#include "ctl/ctl.h"
#include "master/mconf.h"

static struct ndz_mconf *parse(const char *text, struct ndz_error *e)
{
	struct ndz_mconf *c = (struct ndz_mconf *)1;

	ndz_error_clear(e);
	if (ndz_mconf_parse(text, strlen(text), "m.conf", &c, e) != 0) {
		assert_null(c);
		return NULL;
	}
	return c;
}

/* text must fail with exactly msg */
static void refused(const char *text, const char *msg)
{
	struct ndz_error e;

	assert_null(parse(text, &e));
	assert_int_equal(e.code, NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), msg);
}

static uint32_t ip(const char *s)
{
	return inet_addr(s);
}

/* c was read, and its sessions' settings are these */
static void sessions_are(const struct ndz_mconf *c, uint32_t pool_base, uint32_t pool_size,
			 unsigned max_sessions, uint64_t rate, uint64_t total_rate, unsigned idle)
{
	assert_non_null(c);
	assert_int_equal(c->pool_base, pool_base);
	assert_int_equal(c->pool_size, pool_size);
	assert_int_equal(c->max_sessions, max_sessions);
	assert_int_equal(c->rate, rate);
	assert_int_equal(c->total_rate, total_rate);
	assert_int_equal(c->idle_timeout, idle);
}

static void test_full(void **state)
{
	struct ndz_error e;
	struct ndz_mconf *c;
	const struct ndz_mconf_image *a, *b;

	(void)state;
	c = parse("# a comment\n"
		  "pool 239.192.7.0/30   # four addresses\n"
		  "\n"
		  "ports 5000-5003\n"
		  "max-sessions 3\n"
		  "rate 50M\n"
		  "total-rate 1G\n"
		  "idle-timeout 20\r\n"
		  "image a /img/a.ndz allow 10.0.0.0/8,192.168.1.5 rate 10M\n"
		  "\timage  b  /img/b.ndz\n", &e);
	sessions_are(c, 0xefc00700u, 4, 3, 50000000, 1000000000, 20);
	assert_int_equal(c->port_lo, 5000);
	assert_int_equal(c->port_hi, 5003);
	assert_int_equal(c->nimages, 2);
	a = ndz_mconf_find(c, "a");
	b = ndz_mconf_find(c, "b");
	assert_non_null(a);
	assert_non_null(b);
	assert_null(ndz_mconf_find(c, "c"));
	assert_string_equal(a->path, "/img/a.ndz");
	assert_int_equal(a->rate, 10000000);
	assert_int_equal(b->rate, 0);
	assert_true(ndz_mconf_allows(a, ip("10.1.2.3")));
	assert_true(ndz_mconf_allows(a, ip("192.168.1.5")));
	assert_false(ndz_mconf_allows(a, ip("192.168.1.6")));
	assert_false(ndz_mconf_allows(b, ip("10.1.2.3")));   /* no allow: nobody */
	assert_true(ndz_mconf_allows_any(c, ip("10.9.9.9")));
	assert_false(ndz_mconf_allows_any(c, ip("11.0.0.1")));
	ndz_mconf_free(c);
}

static void test_defaults(void **state)
{
	struct ndz_error e;
	struct ndz_mconf *c = parse("image x /x.ndz allow 0.0.0.0/0", &e);

	(void)state;
	sessions_are(c, 0xefc00100u, 256, 8, 100000000, 0, 60);
	assert_true(ndz_mconf_allows(&c->images[0], ip("1.2.3.4")));
	assert_int_equal(c->site_recheck, 30);
	ndz_mconf_free(c);
	ndz_mconf_free(NULL);
	c = parse("image x /x.ndz allow 0.0.0.0/0\nsite-recheck 0", &e);
	assert_int_equal(c->site_recheck, 0);
	ndz_mconf_free(c);
}

static void test_errors(void **state)
{
	(void)state;
	refused("pool 239.1.1.0/24\nbogus 1\n", "m.conf:2: unknown keyword 'bogus'");
	refused("pool 10.0.0.0/24\n", "m.conf:1: bad pool (a multicast prefix, /16 to /32) '10.0.0.0/24'");
	refused("pool 239.0.0.0/8\n", "m.conf:1: bad pool (a multicast prefix, /16 to /32) '239.0.0.0/8'");
	refused("\n\nports 5000-4000\n", "m.conf:3: bad port range (LOW-HIGH) '5000-4000'");
	refused("max-sessions 0\n", "m.conf:1: bad max-sessions (1 to 1024) '0'");
	refused("max-sessions\n", "m.conf:1: missing value after 'max-sessions'");
	refused("rate 1 2\n", "m.conf:1: too many values after 'rate'");
	refused("bogus\n", "m.conf:1: unknown keyword 'bogus'");
	refused("rate 7k\n", "m.conf:1: bad rate (bits/s, at least 8k) '7k'");
	refused("total-rate 1X\n", "m.conf:1: bad total-rate (bits/s, at least 8k) '1X'");
	refused("site-recheck 86401\n", "m.conf:1: bad site-recheck (0 to 86400 seconds) '86401'");
	refused("idle-timeout -1\n", "m.conf:1: bad idle-timeout (1 to 86400 seconds) '-1'");
	refused("image a\n", "m.conf:1: image needs a name and a path");
	refused("image a/b /x\n",
		"m.conf:1: bad image name (letters, digits, '.', '_', '-'; at most 64) 'a/b'");
	refused("image a /x allow\n", "m.conf:1: missing value after 'allow'");
	refused("image a /x allow 10.0.0.0/33\n", "m.conf:1: bad address or prefix (ADDR or ADDR/LEN, e.g. 10.0.0.0/8) '10.0.0.0/33'");
	refused("image a /x allow 10.0.0.1,nope\n", "m.conf:1: bad address or prefix (ADDR or ADDR/LEN, e.g. 10.0.0.0/8) 'nope'");
	refused("image a /x color red\n", "m.conf:1: unknown image option 'color'");
	refused("image a /x\nimage a /y\n", "m.conf:2: image defined twice 'a': /y, first "
		"defined as /x by an image line at line 1");
	refused("imagedir\n", "m.conf:1: imagedir needs a directory");
	refused("# nothing\n", "m.conf: no images");
	refused("a b c d e f g h i j k l m n o p q\n", "m.conf:1: too many words");
}

/* The object store's lines (doc/SITES.md, "An object store"). */
static void test_store(void **state)
{
	struct ndz_error e;
	struct ndz_mconf *c;
	struct ndz_s3_conf s3;
	const char *ok = "site-cache /c\nstore http://10.0.0.1:7480\n"
			 "store-bucket ndz\nstore-prefix lab/\nstore-credentials /etc/ndz/k\n";

	(void)state;
	c = parse(ok, &e);
	assert_non_null(c);
	ndz_mconf_s3(c, &s3);
	assert_string_equal(s3.endpoint, "http://10.0.0.1:7480");
	assert_string_equal(s3.bucket, "ndz");
	assert_string_equal(s3.prefix, "lab/");
	assert_null(s3.region);
	assert_string_equal(s3.credentials, "/etc/ndz/k");
	assert_true(ndz_mconf_site_allows(c, ip("10.0.0.1")) == 0);   /* no site-allow */
	ndz_mconf_free(c);
	/* a store alone fetches: no images here is fine */
	c = parse("site-cache /c\nstore https://s3.example.org\nstore-bucket ndz\n"
		  "store-credentials /k\nsite-allow 10.0.0.0/8\n", &e);
	assert_non_null(c);
	assert_true(ndz_mconf_site_allows(c, ip("10.0.0.1")));
	ndz_mconf_free(c);
	refused("store ftp://x\n", "m.conf:1: bad store (http://HOST[:PORT] or https://HOST[:PORT]) "
		"'ftp://x'");
	refused("store-bucket AB\n", "m.conf:1: bad store-bucket (3 to 63 of a-z, 0-9, '.', '-') 'AB'");
	refused("store-prefix /x\n", "m.conf:1: bad store-prefix (at most 200 of letters, digits, "
		"'.', '_', '-', '/'; no leading '/', no '//') '/x'");
	refused("store-credentials k\n", "m.conf:1: bad store-credentials (an absolute path) 'k'");
	refused("image a /x\nstore http://h\nstore-bucket ndz\nstore-credentials /k\n",
		"m.conf: a site master needs both parent (or store) and site-cache");
	refused("image a /x\nsite-cache /c\nstore http://h\nstore-credentials /k\n",
		"m.conf: a store needs store-bucket and store-credentials");
	refused("image a /x\nstore-bucket ndz\n", "m.conf: store-... lines need a store line");
}

/* "allow a, b" (issue 25): blanks next to a comma join the list; an empty entry is named */
static void test_lists(void **state)
{
	struct ndz_error e;
	struct ndz_mconf *c;
	const struct ndz_mconf_image *a;

	(void)state;
	c = parse("image a /a.ndz allow 10.0.0.0/8, 192.168.1.5 ,172.16.0.0/12 , 10.9.9.9 "
		  "rate 10M\nimage b /b.ndz allow 10.1.0.0/16,\t10.2.0.1\n", &e);
	assert_non_null(c);
	a = ndz_mconf_find(c, "a");
	assert_non_null(a);
	assert_int_equal(a->nallow, 4);
	assert_int_equal(ndz_mconf_find(c, "b")->nallow, 2);
	assert_int_equal(a->rate, 10000000);
	assert_true(ndz_mconf_allows(a, ip("192.168.1.5")));
	assert_true(ndz_mconf_allows(a, ip("172.20.0.1")));
	assert_true(ndz_mconf_allows(a, ip("10.9.9.9")));
	assert_false(ndz_mconf_allows(a, ip("192.168.1.6")));
	ndz_mconf_free(c);
	refused("image a /x allow 10.0.0.1,\n",
		"m.conf:1: empty entry in an address list (ADDR[/LEN],ADDR[/LEN],...)");
	refused("image a /x allow 10.0.0.1,,10.0.0.2\n",
		"m.conf:1: empty entry in an address list (ADDR[/LEN],ADDR[/LEN],...)");
}

/* a pool in 224.0.0.0/24 (all-hosts, routers) would reach every host on the link */
static void test_pool_control_block(void **state)
{
	struct ndz_error e;
	struct ndz_mconf *c;
	static const char *const bad[] = { "224.0.0.0/24", "224.0.0.1/32", "224.0.0.128/25",
					   "224.0.0.0/16" };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char text[128], msg[256];

		snprintf(text, sizeof(text), "pool %s\nimage a /a.ndz\n", bad[i]);
		snprintf(msg, sizeof(msg), "m.conf:1: bad pool '%s': it holds part of "
			 "224.0.0.0/24, the link-local control block (all-hosts, routers); "
			 "choose a prefix in 239.0.0.0/8", bad[i]);
		refused(text, msg);
	}
	c = parse("pool 224.0.1.0/24\nimage a /a.ndz\n", &e);
	assert_non_null(c);
	assert_int_equal(c->pool_base, 0xe0000100u);
	ndz_mconf_free(c);
}

static void test_imagedir(void **state)
{
	char dir[] = "/tmp/test_mconf.XXXXXX", path[160], text[320];
	struct ndz_error e;
	struct ndz_mconf *c;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	for (int i = 0; i < 3; i++) {
		static const char *const names[] = { "b.ndz", "a.ndz", "notes.txt" };

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		f = fopen(path, "w");
		assert_non_null(f);
		fclose(f);
	}
	snprintf(text, sizeof(text), "imagedir %s allow 10.0.0.0/8 rate 1M\n", dir);
	c = parse(text, &e);
	assert_non_null(c);
	assert_int_equal(c->nimages, 2);
	assert_string_equal(c->images[0].name, "a");
	assert_string_equal(c->images[1].name, "b");
	snprintf(path, sizeof(path), "%s/b.ndz", dir);
	assert_string_equal(c->images[1].path, path);
	assert_int_equal(c->images[1].rate, 1000000);
	assert_true(ndz_mconf_allows(&c->images[0], ip("10.0.0.1")));
	ndz_mconf_free(c);
	/* an image of the directory named twice; a directory that is not there */
	snprintf(text, sizeof(text), "image a /x\nimagedir %s\n", dir);
	assert_null(parse(text, &e));
	snprintf(path, sizeof(path), "m.conf:2: image defined twice 'a': %s/a.ndz, first "
		 "defined as /x by an image line at line 1", dir);
	assert_string_equal(ndz_error_msg(&e), path);
	/* the other way round: the first one is the directory's file, and says so */
	snprintf(text, sizeof(text), "imagedir %s\nimage a /x\n", dir);
	assert_null(parse(text, &e));
	snprintf(path, sizeof(path), "m.conf:2: image defined twice 'a': /x, first defined "
		 "as %s/a.ndz by a file of the imagedir at line 1", dir);
	assert_string_equal(ndz_error_msg(&e), path);
	snprintf(path, sizeof(path), "%s/config", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs("image x /x.ndz\nports 1-2-3\n", f);
	fclose(f);
	ndz_error_clear(&e);
	assert_int_equal(ndz_mconf_load(path, &c, &e), NDZ_EINVAL);
	snprintf(text, sizeof(text), "%s:2: bad port range (LOW-HIGH) '1-2-3'", path);
	assert_string_equal(ndz_error_msg(&e), text);
	for (int i = 0; i < 3; i++) {
		static const char *const names[] = { "b.ndz", "a.ndz", "notes.txt" };

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
		unlink(path);
	}
	snprintf(path, sizeof(path), "%s/config", dir);
	unlink(path);
	rmdir(dir);
	snprintf(text, sizeof(text), "imagedir %s\n", dir);
	assert_null(parse(text, &e));
	assert_true(strncmp(ndz_error_msg(&e), "m.conf:1: imagedir '", 20) == 0);
	ndz_error_clear(&e);
	assert_true(ndz_mconf_load("/nonexistent/mfrisbeed.conf", &c, &e) < 0);
	assert_null(c);
	assert_true(strncmp(ndz_error_msg(&e), "/nonexistent/mfrisbeed.conf", 27) == 0);
}

static void test_upload(void **state)
{
	char dir[] = "/tmp/test_mconf.XXXXXX", path[128], text[512], out[160];
	struct ndz_error e;
	struct ndz_mconf *c;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/old.ndz", dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	/* defaults: no upload directory, 30 s, 2 uploads, no quota */
	c = parse("image a /a.ndz\n", &e);
	assert_non_null(c);
	assert_null(c->upload_dir);
	assert_int_equal(c->upload_timeout, 30);
	assert_int_equal(c->max_uploads, 2);
	assert_int_equal(c->quota, 0);
	assert_int_equal(c->host_rate, 10);
	assert_int_equal(c->host_burst, 10);
	assert_int_equal(ndz_mconf_upload_target(c, "a", ip("10.0.0.1"), out, sizeof(out), NULL),
			 NDZ_EDENIED);
	assert_int_equal(ndz_mconf_upload_target(c, "new", ip("10.0.0.1"), out, sizeof(out), NULL),
			 NDZ_ENOIMAGE);
	ndz_mconf_free(c);
	snprintf(text, sizeof(text), "upload-dir %s allow 10.0.0.0/8 upload 10.0.9.0/24\n"
		 "image a /a.ndz upload 10.0.0.7\nquota 2G\nupload-timeout 5\nmax-uploads 9\n",
		 dir);
	c = parse(text, &e);
	assert_non_null(c);
	assert_string_equal(c->upload_dir, dir);
	assert_int_equal(c->quota, 2000000000ull);
	assert_int_equal(c->upload_timeout, 5);
	assert_int_equal(c->max_uploads, 9);
	assert_int_equal(c->nimages, 2);        /* the directory's old.ndz and a */
	assert_non_null(ndz_mconf_find(c, "old"));
	/* a configured image: its own list decides, the file is its path */
	assert_int_equal(ndz_mconf_upload_target(c, "a", ip("10.0.0.7"), out, sizeof(out), NULL),
			 0);
	assert_string_equal(out, "/a.ndz");
	assert_int_equal(ndz_mconf_upload_target(c, "a", ip("10.0.9.1"), out, sizeof(out), NULL),
			 NDZ_EDENIED);
	/* the directory's images and new names: the upload-dir line's list */
	assert_int_equal(ndz_mconf_upload_target(c, "old", ip("10.0.9.1"), out, sizeof(out), NULL),
			 0);
	assert_string_equal(out, path);
	assert_int_equal(ndz_mconf_upload_target(c, "new", ip("10.0.9.1"), out, sizeof(out), NULL),
			 0);
	snprintf(text, sizeof(text), "%s/new.ndz", dir);
	assert_string_equal(out, text);
	ndz_error_clear(&e);
	assert_int_equal(ndz_mconf_upload_target(c, "new", ip("10.0.8.1"), out, sizeof(out), &e),
			 NDZ_EDENIED);
	assert_string_equal(ndz_error_msg(&e), "no upload rule matches 10.0.8.1 for image 'new'");
	/* names that are no file name of ours */
	assert_int_equal(ndz_mconf_upload_target(c, "..", ip("10.0.9.1"), out, sizeof(out), NULL),
			 NDZ_ENOIMAGE);
	assert_int_equal(ndz_mconf_upload_target(c, "a/b", ip("10.0.9.1"), out, sizeof(out), NULL),
			 NDZ_ENOIMAGE);
	assert_int_equal(ndz_mconf_upload_target(c, "new", ip("10.0.9.1"), out, 8, NULL),
			 NDZ_ENOTSUP);
	ndz_mconf_free(c);
	/* errors */
	refused("image a /a.ndz upload 10.0.0.1\nrate 1M\n",
		"m.conf:1: 'upload' needs an upload-dir line (where uploads are written)");
	refused("image a /a.ndz upload 10.0.0.300\n", "m.conf:1: bad address or prefix (ADDR or ADDR/LEN, e.g. 10.0.0.0/8) '10.0.0.300'");
	refused("image a /a.ndz\nquota lots\n",
		"m.conf:2: bad quota (bytes, k/M/G/T: powers of 1000) 'lots'");
	refused("image a /a.ndz\nupload-timeout 0\n",
		"m.conf:2: bad upload-timeout (1 to 3600 seconds) '0'");
	refused("image a /a.ndz\nmax-uploads 65\n", "m.conf:2: bad max-uploads (1 to 64) '65'");
	refused("upload-dir\n", "m.conf:1: upload-dir needs a directory");
	refused("image a /a.ndz\nhost-rate 0\n", "m.conf:2: bad host-rate (1 to 100000 a second) '0'");
	refused("image a /a.ndz\nhost-burst x\n", "m.conf:2: bad host-burst (1 to 100000) 'x'");
	c = parse("image a /a.ndz\nhost-rate 50\nhost-burst 200\n", &e);
	assert_non_null(c);
	assert_int_equal(c->host_rate, 50);
	assert_int_equal(c->host_burst, 200);
	ndz_mconf_free(c);
	snprintf(text, sizeof(text), "upload-dir %s\nupload-dir %s\n", dir, dir);
	refused(text, "m.conf:2: upload-dir given twice");
	unlink(path);
	rmdir(dir);
}

/* a file whose name is no image name is skipped, not an error; the TCP admission keys */
static void test_skip_and_admission(void **state)
{
	char dir[] = "/tmp/test_mconf.XXXXXX", path[3][128], text[512];
	const char *files[3] = { "Win 10.ndz", "good.ndz", "a+b.ndz" };
	struct ndz_error e;
	struct ndz_mconf *c;

	(void)state;
	assert_non_null(mkdtemp(dir));
	for (int i = 0; i < 3; i++) {
		FILE *f;

		snprintf(path[i], sizeof(path[i]), "%s/%s", dir, files[i]);
		f = fopen(path[i], "w");
		assert_non_null(f);
		fclose(f);
	}
	snprintf(text, sizeof(text), "upload-dir %s allow 10.1.0.0/16 upload 10.2.0.0/16\n"
		 "image a /a.ndz allow 10.3.0.1 upload 10.4.0.1\n", dir);
	c = parse(text, &e);
	assert_non_null(c);
	assert_int_equal(c->nimages, 2);
	assert_non_null(ndz_mconf_find(c, "good"));
	assert_int_equal(c->nskipped, 2);
	assert_true(ndz_mconf_skipped(c, path[0]));
	assert_true(ndz_mconf_skipped(c, path[2]));
	assert_false(ndz_mconf_skipped(c, path[1]));
	assert_false(ndz_mconf_skipped(NULL, path[0]));
	/* defaults */
	assert_int_equal(c->request_timeout, 5);
	assert_int_equal(c->max_pending, 16);
	assert_int_equal(c->max_pending_host, 4);
	/* who may connect: any allow list or any upload list */
	assert_true(ndz_mconf_may_connect(c, ip("10.1.2.3")));
	assert_true(ndz_mconf_may_connect(c, ip("10.2.2.3")));
	assert_true(ndz_mconf_may_connect(c, ip("10.3.0.1")));
	assert_true(ndz_mconf_may_connect(c, ip("10.4.0.1")));
	assert_false(ndz_mconf_may_connect(c, ip("10.4.0.2")));
	assert_false(ndz_mconf_may_connect(c, ip("192.168.0.1")));
	ndz_mconf_free(c);
	c = parse("image a /a.ndz\nrequest-timeout 2\nmax-pending 256\nmax-pending-host 1\n", &e);
	assert_non_null(c);
	assert_int_equal(c->request_timeout, 2);
	assert_int_equal(c->max_pending, 256);
	assert_int_equal(c->max_pending_host, 1);
	assert_int_equal(c->nskipped, 0);
	ndz_mconf_free(c);
	refused("image a /a.ndz\nrequest-timeout 61\n",
		"m.conf:2: bad request-timeout (1 to 60 seconds) '61'");
	refused("image a /a.ndz\nmax-pending 0\n", "m.conf:2: bad max-pending (1 to 256) '0'");
	refused("image a /a.ndz\nmax-pending-host 257\n",
		"m.conf:2: bad max-pending-host (1 to 256) '257'");
	for (int i = 0; i < 3; i++)
		unlink(path[i]);
	rmdir(dir);
}

static void test_rate(void **state)
{
	struct ndz_error e = { 0 };
	uint64_t v;

	(void)state;
	assert_int_equal(ndz_parse_rate("8000", &v, NULL), 0);
	assert_int_equal(v, 8000);
	assert_int_equal(ndz_parse_rate("2T", &v, NULL), 0);
	assert_int_equal(v, 2000000000000ull);
	assert_int_equal(ndz_parse_rate("0", &v, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_parse_rate("", &v, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_parse_rate("-1", &v, NULL), NDZ_EINVAL);
	assert_int_equal(ndz_parse_rate("5Mb", &v, &e), NDZ_EINVAL);
	assert_string_equal(ndz_error_msg(&e), "bad rate '5Mb'");
	assert_int_equal(ndz_parse_rate("99999999999999999T", &v, NULL), NDZ_EINVAL);
}

/*
 * "rate 100m" in the file means what frisbeed -W 100m means: one suffix rule (lower-case
 * m was refused here while the options took it). Also line-too-long by file:line.
 */
static void test_rate_suffix_as_options(void **state)
{
	static const char *const rates[] = { "100m", "100M", "1g", "8k", "2T", "123456" };
	struct ndz_error e;
	char text[256];

	(void)state;
	for (size_t i = 0; i < sizeof(rates) / sizeof(rates[0]); i++) {
		struct ndz_mconf *c;
		uint64_t w;

		snprintf(text, sizeof(text), "rate %s\ntotal-rate %s\nquota %s\n"
			 "image a /a.ndz allow 0.0.0.0/0 rate %s\n", rates[i], rates[i], rates[i],
			 rates[i]);
		assert_int_equal(cli_parse_u64(rates[i], 0, &w), 0);     /* frisbeed -W */
		c = parse(text, &e);
		if (!c)
			fail_msg("rate %s: %s", rates[i], ndz_error_msg(&e));
		assert_int_equal(c->rate, w);
		assert_int_equal(c->total_rate, w);
		assert_int_equal(c->quota, w);
		assert_int_equal(c->images[0].rate, w);
		ndz_mconf_free(c);
	}
	refused("rate 100mb\n", "m.conf:1: bad rate (bits/s, at least 8k) '100mb'");
	memset(text, 'x', sizeof(text) - 1);
	text[sizeof(text) - 1] = 0;
	{
		char big[2048];

		snprintf(big, sizeof(big), "rate 1m\n# %s%s%s%s%s\n", text, text, text, text, text);
		refused(big, "m.conf:2: line too long");
	}
}

/* --check's verdict on one image: an image, one yet to be uploaded, neither. */
static void test_image_check(void **state)
{
	char path[] = "/tmp/test_mconf.XXXXXX", none[64];
	static uint8_t chunk[NDZ_CHUNK_SIZE];
	struct ndz_mconf_image im = { .name = (char *)"a", .path = path };
	struct ndz_error e = { 0 };
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	fix_hdr(chunk, NDZ_CHUNK_LAST);
	assert_int_equal(write(fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	close(fd);
	assert_int_equal(ndz_mconf_image_check(&im, &e), 0);
	/* not an image: can never be served, uploaders or not */
	fd = open(path, O_WRONLY | O_TRUNC);
	assert_int_equal(write(fd, "not an image", 12), 12);
	close(fd);
	im.nupload = 1;
	assert_true(ndz_mconf_image_check(&im, &e) < 0);
	assert_non_null(strstr(ndz_error_msg(&e), path));
	unlink(path);
	/* not there: to come when someone may upload it, else an error */
	snprintf(none, sizeof(none), "%s.none", path);
	im.path = none;
	assert_int_equal(ndz_mconf_image_check(&im, NULL), 1);
	im.nupload = 0;
	ndz_error_clear(&e);
	assert_int_equal(ndz_mconf_image_check(&im, &e), NDZ_ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_lists),
		cmocka_unit_test(test_pool_control_block),
		cmocka_unit_test(test_imagedir),
		cmocka_unit_test(test_rate),
		cmocka_unit_test(test_rate_suffix_as_options),
		cmocka_unit_test(test_upload),
		cmocka_unit_test(test_skip_and_admission),
		cmocka_unit_test(test_image_check),
		cmocka_unit_test(test_store),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
