/* Unit tests for lib/target.c: what an image may replace; a target nothing uses passes. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/err.h"
#include "core/format.h"
#include "core/target.h"

#include "hdrfix.h"
#include "tmpdir.h"

static void put(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, buf, len), (ssize_t)len);
	close(fd);
}

static void test_output_missing_empty_image(void **state)
{
	struct ndz_error e = { 0 };
	uint8_t *area = calloc(1, NDZ_HDR_SIZE);

	(void)state;
	assert_int_equal(ndz_output_check(at("none.ndz"), 0, &e), 0);
	put(at("empty"), "", 0);
	assert_int_equal(ndz_output_check(at("empty"), 0, &e), 0);
	fix_hdr(area, NDZ_CHUNK_LAST);
	put(at("a.ndz"), area, NDZ_HDR_SIZE);
	assert_int_equal(ndz_output_check(at("a.ndz"), 0, &e), 0);
	assert_int_equal(e.code, 0);
	free(area);
}

static void test_output_not_an_image(void **state)
{
	struct ndz_error e = { 0 };
	uint8_t *area = calloc(1, NDZ_HDR_SIZE);

	(void)state;
	put(at("notes"), "keep me\n", 8);
	assert_int_equal(ndz_output_check(at("notes"), 0, &e), NDZ_EBADMAGIC);
	assert_non_null(strstr(e.msg, "notes exists and is not an image"));
	assert_int_equal(ndz_output_check(at("notes"), 1, NULL), 0);
	/* a valid header with one bit flipped: named by the header's own check */
	fix_hdr(area, NDZ_CHUNK_LAST);
	area[40] ^= 1;
	put(at("bent.ndz"), area, NDZ_HDR_SIZE);
	ndz_error_clear(&e);
	assert_int_equal(ndz_output_check(at("bent.ndz"), 0, &e), NDZ_EBADMAGIC);
	assert_non_null(strstr(e.msg, "its first chunk header"));
	free(area);
}

static void test_output_not_a_file(void **state)
{
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_output_check("/dev/null", 1, &e), NDZ_ENOTFILE);
	assert_string_equal(e.msg, "/dev/null is a character device, not an image file");
	assert_int_equal(mkdir(at("d"), 0755), 0);
	assert_int_equal(ndz_output_check(at("d"), 1, NULL), NDZ_ENOTFILE);
	assert_int_equal(symlink("/dev/null", at("ln")), 0);
	ndz_error_clear(&e);
	assert_int_equal(ndz_output_check(at("ln"), 1, &e), NDZ_ENOTFILE);
	assert_non_null(strstr(e.msg, "is a link to a character device"));
}

static void test_output_links(void **state)
{
	struct ndz_error e = { 0 };

	(void)state;
	put(at("f.ndz"), "", 0);
	assert_int_equal(symlink(at("f.ndz"), at("l.ndz")), 0);
	assert_int_equal(ndz_output_check(at("l.ndz"), 0, &e), NDZ_EEXIST);
	assert_non_null(strstr(e.msg, "is a symbolic link"));
	assert_int_equal(ndz_output_check(at("l.ndz"), 1, NULL), 0);
	/* a link to nothing is a link too */
	assert_int_equal(symlink(at("nothing"), at("dangling")), 0);
	assert_int_equal(ndz_output_check(at("dangling"), 0, NULL), NDZ_EEXIST);
	assert_int_equal(ndz_output_check(at("dangling"), 1, NULL), 0);
}

static void test_target_unused(void **state)
{
	struct ndz_error e = { 0 };

	(void)state;
	assert_int_equal(ndz_target_check(at("new.img"), &e), 0);
	put(at("old.img"), "x", 1);
	assert_int_equal(ndz_target_check(at("old.img"), &e), 0);
	assert_int_equal(ndz_target_check("/dev/null", &e), 0);
	assert_int_equal(e.code, 0);
}

/* one file by two names (issue 25): imagezip/imageunzip would read what they overwrite */
static void test_same_file(void **state)
{
	(void)state;
	put(at("a.img"), "a", 1);
	put(at("b.img"), "a", 1);
	assert_int_equal(symlink(at("a.img"), at("sym.img")), 0);
	assert_int_equal(link(at("a.img"), at("hard.img")), 0);
	assert_int_equal(ndz_same_file(at("a.img"), at("a.img")), 1);
	assert_int_equal(ndz_same_file(at("sym.img"), at("a.img")), 1);
	assert_int_equal(ndz_same_file(at("hard.img"), at("sym.img")), 1);
	assert_int_equal(ndz_same_file(at("a.img"), at("b.img")), 0);
	/* a new output, a device that is no loop device */
	assert_int_equal(ndz_same_file(at("a.img"), at("new.img")), 0);
	assert_int_equal(ndz_same_file(at("a.img"), "/dev/null"), 0);
	assert_int_equal(ndz_same_file("/dev/null", "/dev/null"), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_output_missing_empty_image),
		cmocka_unit_test(test_output_not_an_image),
		cmocka_unit_test(test_output_not_a_file),
		cmocka_unit_test(test_output_links),
		cmocka_unit_test(test_target_unused),
		cmocka_unit_test(test_same_file),
	};

	return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
