/* Unit tests for lib/core/file.c (whole-file replacement) and lib/core/clock.c. */
#include <dirent.h>
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

#include "core/clock.h"
#include "core/err.h"
#include "core/file.h"

#include "tmpdir.h"

/* the bytes of a file, NUL-terminated; its size in *len */
static char *slurp(const char *path, size_t *len)
{
	static char buf[4096];
	int fd = open(path, O_RDONLY);
	ssize_t n;

	assert_true(fd >= 0);
	n = read(fd, buf, sizeof(buf) - 1);
	assert_true(n >= 0);
	close(fd);
	buf[n] = '\0';
	*len = (size_t)n;
	return buf;
}

/* entries of tmpdir whose names start with prefix */
static unsigned count_entries(const char *prefix)
{
	DIR *d = opendir(tmpdir);
	struct dirent *de;
	unsigned n = 0;

	assert_non_null(d);
	while ((de = readdir(d)))
		if (strncmp(de->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(d);
	return n;
}

static void test_replace_new_and_existing(void **state)
{
	struct ndz_error e = { 0 };
	struct stat st;
	size_t len;

	(void)state;
	assert_int_equal(ndz_file_replace(at("state"), "one\n", 4, 0644, &e), 0);
	assert_string_equal(slurp(at("state"), &len), "one\n");
	assert_int_equal(stat(at("state"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0644);
	assert_int_equal(ndz_file_replace(at("state"), "two, longer\n", 12, 0600, &e), 0);
	assert_string_equal(slurp(at("state"), &len), "two, longer\n");
	assert_int_equal(stat(at("state"), &st), 0);
	assert_int_equal(st.st_mode & 07777, 0600);
	/* empty is a content like any other */
	assert_int_equal(ndz_file_replace(at("state"), "", 0, 0644, &e), 0);
	slurp(at("state"), &len);
	assert_int_equal(len, 0);
	assert_int_equal(count_entries("state.tmp"), 0);
	assert_int_equal(e.code, 0);
}

static void test_replace_fails_cleanly(void **state)
{
	struct ndz_error e = { 0 };
	char path[300];
	size_t len;

	(void)state;
	/* no such directory: an error naming the file, nothing made */
	snprintf(path, sizeof(path), "%s/none/state", tmpdir);
	assert_int_equal(ndz_file_replace(path, "x", 1, 0644, &e), NDZ_EIO);
	assert_non_null(strstr(ndz_error_msg(&e), path));
	/* the target is a directory: the rename fails, the temporary goes, the rest stays */
	assert_int_equal(mkdir(at("adir"), 0755), 0);
	ndz_error_clear(&e);
	assert_int_equal(ndz_file_replace(at("adir"), "x", 1, 0644, &e), NDZ_EIO);
	assert_non_null(strstr(ndz_error_msg(&e), "cannot rename"));
	assert_int_equal(count_entries("adir.tmp"), 0);
	/* a later success leaves the first error in e (first error wins) */
	assert_int_equal(ndz_file_replace(at("keep"), "old", 3, 0644, &e), 0);
	assert_int_equal(e.code, NDZ_EIO);
	assert_string_equal(slurp(at("keep"), &len), "old");
	/* a name too long for a temporary */
	{
		char lng[5000];

		memset(lng, 'a', sizeof(lng) - 1);
		lng[sizeof(lng) - 1] = '\0';
		ndz_error_clear(&e);
		assert_int_equal(ndz_file_replace(lng, "x", 1, 0644, &e), NDZ_EINVAL);
	}
}

static void test_temp_commit(void **state)
{
	struct ndz_error e = { 0 };
	char tmp[300];
	size_t len;
	int fd;

	(void)state;
	fd = ndz_file_temp(at("img"), tmp, sizeof(tmp), &e);
	assert_true(fd >= 0);
	assert_int_equal(strncmp(tmp, at("img.tmp."), strlen(at("img.tmp."))), 0);
	assert_int_equal(write(fd, "image", 5), 5);
	/* nothing at the name until the commit */
	assert_int_equal(access(at("img"), F_OK), -1);
	assert_int_equal(ndz_file_commit(fd, tmp, at("img"), 0644, &e), 0);
	assert_string_equal(slurp(at("img"), &len), "image");
	assert_int_equal(access(tmp, F_OK), -1);
	assert_int_equal(ndz_dir_sync(at("img"), &e), 0);
	assert_int_equal(ndz_dir_sync("relative-name", &e), 0);
	assert_int_equal(ndz_dir_sync("/top", &e), 0);
}

static void test_clock(void **state)
{
	uint64_t a = ndz_now_ns(), ms = ndz_now_ms();
	double s = ndz_now_s();
	uint64_t b = ndz_now_ns();

	(void)state;
	assert_true(b >= a);
	assert_true(ms >= a / NDZ_NS_PER_MS);
	assert_true(s >= (double)(a / NDZ_NS_PER_S));
	/* wall time is after 2020 and not a monotonic count */
	assert_true(ndz_wall_ns() > 1577836800ull * NDZ_NS_PER_S);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_replace_new_and_existing),
		cmocka_unit_test(test_replace_fails_cleanly),
		cmocka_unit_test(test_temp_commit),
		cmocka_unit_test(test_clock),
	};

	return cmocka_run_group_tests(tests, tmpdir_setup, tmpdir_teardown);
}
