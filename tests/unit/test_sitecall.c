/* Unit tests for lib/ctl/sitecall: the SITE request and reply, byte for byte. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "ctl/sitecall.h"

static void test_req_roundtrip(void **state)
{
	struct ndz_site_req r = { .id = 0x01020304, .what = NDZ_SITE_CHUNKS_OF, .first = 7,
				  .count = 3, .name = "img" }, d;
	uint8_t buf[NDZ_SITE_REQ_MAX];
	static const uint8_t want[] = { 'N', 'D', 'Z', 'C', 1, 8, 3, 0, 4, 3, 2, 1,
					3, 0, 0, 0, 7, 0, 0, 0, 3, 0, 0, 0, 'i', 'm', 'g' };
	int n;

	(void)state;
	n = ndz_site_req_encode(&r, buf, sizeof(buf), NULL);
	assert_int_equal(n, sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	assert_true(ndz_site_is_req(buf, (size_t)n));
	assert_int_equal(ndz_site_req_need(buf, 12, NULL), n);
	assert_int_equal(ndz_site_req_decode(buf, (size_t)n, &d, NULL), 0);
	assert_int_equal(d.id, r.id);
	assert_int_equal(d.what, r.what);
	assert_int_equal(d.first, 7);
	assert_int_equal(d.count, 3);
	assert_string_equal(d.name, "img");
	/* trailing bytes, a short one */
	assert_int_equal(ndz_site_req_decode(buf, (size_t)n - 1, &d, NULL), NDZ_EINVAL);
	/* an index asked with a count, chunks without one, too many chunks, a bad name */
	r.what = NDZ_SITE_INDEX;
	assert_int_equal(ndz_site_req_encode(&r, buf, sizeof(buf), NULL), NDZ_EINVAL);
	r.what = NDZ_SITE_CHUNKS_OF;
	r.count = 0;
	assert_int_equal(ndz_site_req_encode(&r, buf, sizeof(buf), NULL), NDZ_EINVAL);
	r.count = NDZ_SITE_CHUNKS + 1;
	assert_int_equal(ndz_site_req_encode(&r, buf, sizeof(buf), NULL), NDZ_EINVAL);
	r.count = 1;
	strcpy(r.name, "a/b");
	assert_int_equal(ndz_site_req_encode(&r, buf, sizeof(buf), NULL), NDZ_EINVAL);
	/* the same bytes with a bad kind are refused by decode */
	n = (int)sizeof(want);
	memcpy(buf, want, sizeof(want));
	buf[12] = 9;
	assert_int_equal(ndz_site_req_decode(buf, (size_t)n, &d, NULL), NDZ_EINVAL);
	/* a GET is no SITE request: its length comes from the control protocol */
	buf[5] = NDZ_CTL_GET;
	assert_false(ndz_site_is_req(buf, (size_t)n));
	assert_int_equal(ndz_site_req_need(buf, 12, NULL), 12 + 3);
}

static void test_rep(void **state)
{
	uint8_t b[NDZ_SITE_REP_LEN];
	uint16_t st;
	uint64_t len;

	(void)state;
	ndz_site_rep_encode(42, NDZ_CTL_OK, 1u << 20, b);
	assert_int_equal(b[5], 0x88);
	assert_int_equal(b[NDZ_CTL_REP_HDR + 2], 0x10);  /* 1 MiB, little-endian */
	assert_int_equal(ndz_site_rep_decode(b, 42, &st, &len, NULL), 0);
	assert_int_equal(st, NDZ_CTL_OK);
	assert_int_equal(len, 1u << 20);
	assert_int_equal(ndz_site_rep_decode(b, 43, &st, &len, NULL), NDZ_EPROTO);
	/* a refusal with bytes, or more bytes than a reply has */
	ndz_site_rep_encode(42, NDZ_CTL_UNKNOWN, 5, b);
	assert_int_equal(ndz_site_rep_decode(b, 42, &st, &len, NULL), NDZ_EPROTO);
	ndz_site_rep_encode(42, NDZ_CTL_OK, (uint64_t)NDZ_SITE_BLOB_MAX + 1, b);
	assert_int_equal(ndz_site_rep_decode(b, 42, &st, &len, NULL), NDZ_EPROTO);
}

static void test_report(void **state)
{
	struct ndz_site_req r = { .id = 9, .what = NDZ_SITE_REPORT, .count = 12, .name = "bldgB" },
			    d;
	uint8_t buf[NDZ_SITE_REQ_MAX], *body;
	const char *t, *j;
	size_t len, tl, jl;
	int n;

	(void)state;
	/* the request: its body's length in count, the body not counted by need */
	n = ndz_site_req_encode(&r, buf, sizeof(buf), NULL);
	assert_int_equal(n, NDZ_SITE_REQ_FIXED + 5);
	assert_int_equal(ndz_site_req_need(buf, 12, NULL), n);
	assert_int_equal(ndz_site_req_decode(buf, (size_t)n, &d, NULL), 0);
	assert_int_equal(d.what, NDZ_SITE_REPORT);
	assert_int_equal(d.count, 12);
	r.count = 3;                               /* shorter than its table length field */
	assert_int_equal(ndz_site_req_encode(&r, buf, sizeof(buf), NULL), NDZ_EINVAL);
	r.count = NDZ_SITE_REPORT_MAX + 1;
	assert_int_equal(ndz_site_req_encode(&r, buf, sizeof(buf), NULL), NDZ_EINVAL);
	/* the body: u32 table length, table, JSON */
	assert_int_equal(ndz_site_report_encode("T\n", 2, "{}", 2, &body, &len, NULL), 0);
	assert_int_equal(len, 8);
	assert_int_equal(body[0], 2);
	assert_int_equal(body[1] | body[2] | body[3], 0);
	assert_int_equal(ndz_site_report_decode(body, len, &t, &tl, &j, &jl, NULL), 0);
	assert_int_equal(tl, 2);
	assert_memory_equal(t, "T\n", 2);
	assert_int_equal(jl, 2);
	assert_memory_equal(j, "{}", 2);
	body[0] = 7;                               /* a table longer than the body */
	assert_int_equal(ndz_site_report_decode(body, len, &t, &tl, &j, &jl, NULL), NDZ_EPROTO);
	body[0] = 2;
	body[5] = 0;                               /* a NUL in the table */
	assert_int_equal(ndz_site_report_decode(body, len, &t, &tl, &j, &jl, NULL), NDZ_EPROTO);
	free(body);
}

static void test_want(void **state)
{
	char path[] = "/tmp/ndz-want-XXXXXX";
	int fd = mkstemp(path);
	char w[64];

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(ndz_site_want_read(path, 10), UINT32_MAX);   /* none told */
	ndz_site_want_write(path, 7);
	assert_int_equal(ndz_site_want_read(path, 10), 7);
	assert_int_equal(ndz_site_want_read(path, 7), UINT32_MAX);    /* past the image */
	snprintf(w, sizeof(w), "%s.want", path);
	unlink(w);
	unlink(path);
}

/* IDENT: the request, the reply's 80 bytes, and the identity of files. */
static void test_ident(void **state)
{
	struct ndz_site_req r = { .id = 9, .what = NDZ_SITE_IDENT, .name = "x" }, d;
	struct ndz_site_ident a = { .bytes = 0x0102030405060708ull, .manifest = 1 }, b, c;
	uint8_t buf[NDZ_SITE_REQ_MAX], rep[NDZ_SITE_IDENT_LEN];
	char dir[] = "/tmp/ndz-ident-XXXXXX", img[64], ix[64], mf[64];
	FILE *f;
	int n;

	(void)state;
	n = ndz_site_req_encode(&r, buf, sizeof(buf), NULL);
	assert_int_equal(n, NDZ_SITE_REQ_FIXED + 1);
	assert_int_equal(buf[12], 5);
	assert_int_equal(ndz_site_req_decode(buf, (size_t)n, &d, NULL), 0);
	assert_int_equal(d.what, NDZ_SITE_IDENT);
	r.count = 1;                   /* an identity asks no count */
	assert_int_equal(ndz_site_req_encode(&r, buf, sizeof(buf), NULL), NDZ_EINVAL);

	memset(a.index_sha, 0xab, 32);
	memset(a.manifest_sha, 0xcd, 32);
	ndz_site_ident_encode(&a, rep);
	assert_int_equal(rep[0], 8);
	assert_int_equal(rep[7], 1);
	assert_int_equal(rep[8], 1);
	assert_int_equal(rep[16], 0xab);
	assert_int_equal(rep[79], 0xcd);
	assert_int_equal(ndz_site_ident_decode(rep, sizeof(rep), &b, NULL), 0);
	assert_true(ndz_site_ident_same(&a, &b));
	b.index_sha[31] ^= 1;
	assert_false(ndz_site_ident_same(&a, &b));
	assert_int_equal(ndz_site_ident_decode(rep, sizeof(rep) - 1, &b, NULL), NDZ_EPROTO);
	rep[12] = 1;                   /* reserved */
	assert_int_equal(ndz_site_ident_decode(rep, sizeof(rep), &b, NULL), NDZ_EPROTO);

	/* files: an image, its index; a manifest added changes it, as does another index */
	assert_non_null(mkdtemp(dir));
	snprintf(img, sizeof(img), "%s/x.ndz", dir);
	snprintf(ix, sizeof(ix), "%s/x.ndz.index", dir);
	snprintf(mf, sizeof(mf), "%s/x.ndz.manifest", dir);
	assert_int_equal(ndz_site_ident_files(img, ix, mf, &b, NULL), NDZ_ENOIMAGE);
	assert_non_null(f = fopen(img, "w"));
	assert_int_equal(fputs("image", f) >= 0 && fclose(f) == 0, 1);
	assert_int_equal(ndz_site_ident_files(img, ix, mf, &b, NULL), NDZ_ENOIMAGE);
	assert_non_null(f = fopen(ix, "w"));
	assert_int_equal(fputs("abc", f) >= 0 && fclose(f) == 0, 1);
	assert_int_equal(ndz_site_ident_files(img, ix, mf, &b, NULL), 0);
	assert_int_equal(b.bytes, 5);
	assert_false(b.manifest);
	/* SHA-256("abc") */
	assert_int_equal(b.index_sha[0], 0xba);
	assert_int_equal(b.index_sha[31], 0xad);
	assert_non_null(f = fopen(mf, "w"));
	assert_int_equal(fputs("m", f) >= 0 && fclose(f) == 0, 1);
	assert_int_equal(ndz_site_ident_files(img, ix, mf, &c, NULL), 0);
	assert_true(c.manifest);
	assert_false(ndz_site_ident_same(&b, &c));
	assert_non_null(f = fopen(ix, "w"));
	assert_int_equal(fputs("abd", f) >= 0 && fclose(f) == 0, 1);
	assert_int_equal(ndz_site_ident_files(img, ix, mf, &b, NULL), 0);
	assert_false(ndz_site_ident_same(&b, &c));
	unlink(img);
	unlink(ix);
	unlink(mf);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_req_roundtrip),
		cmocka_unit_test(test_rep),
		cmocka_unit_test(test_report),
		cmocka_unit_test(test_want),
		cmocka_unit_test(test_ident),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
