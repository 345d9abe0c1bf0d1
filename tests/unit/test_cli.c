/* Unit tests for lib/cli/cli.c: number parsing for the programs' options, repeated warnings. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/cli.h"

static void test_parse_u64(void **state)
{
	static const struct {
		const char *s;
		int binary, rc;
		uint64_t v;
	} cases[] = {
		{ "0", 1, 0, 0 },
		{ "5", 1, 0, 5 },
		{ "5k", 1, 0, 5120 },
		{ "5K", 0, 0, 5000 },
		{ "3M", 1, 0, 3u << 20 },
		{ "3m", 0, 0, 3000000 },
		{ "2G", 1, 0, 2ull << 30 },
		{ "1T", 1, 0, 1ull << 40 },
		{ "1t", 0, 0, 1000000000000ull },
		{ "18446744073709551615", 1, 0, UINT64_MAX },
		{ "18446744073709551616", 1, -1, 0 },
		{ "17179869183G", 1, 0, 17179869183ull << 30 },
		{ "17179869184G", 1, -1, 0 },
		{ "16777216T", 1, -1, 0 },
		{ "0T", 1, 0, 0 },
		{ "", 1, -1, 0 },
		{ "k", 1, -1, 0 },
		{ "-5", 1, -1, 0 },
		{ "+5", 1, -1, 0 },
		{ " 5", 1, -1, 0 },
		{ " -5", 1, -1, 0 },
		{ "5 ", 1, -1, 0 },
		{ "5x", 1, -1, 0 },
		{ "5kk", 1, -1, 0 },
		{ "5kB", 1, -1, 0 },
		{ "1.5G", 1, -1, 0 },
		{ "0x10", 1, -1, 0 },
	};
	size_t i;

	(void)state;
	assert_int_equal(cli_parse_u64(NULL, 1, NULL), -1);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint64_t v = 12345;
		int rc = cli_parse_u64(cases[i].s, cases[i].binary, &v);

		if (rc != cases[i].rc || (rc == 0 && v != cases[i].v))
			fail_msg("\"%s\": rc %d value %llu, want rc %d value %llu", cases[i].s, rc,
				 (unsigned long long)v, cases[i].rc,
				 (unsigned long long)cases[i].v);
		if (rc < 0 && v != 12345)
			fail_msg("\"%s\": output written on failure", cases[i].s);
	}
}

/* cli_parse_int exits 2 on a bad value: run it in a child. */
static int parse_int_status(const char *s, int lo, int hi, int *value)
{
	int fds[2], st;
	pid_t pid;

	assert_int_equal(pipe(fds), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int v;

		close(fds[0]);
		if (!freopen("/dev/null", "w", stderr))
			_exit(99);
		v = cli_parse_int(s, "-x", lo, hi);
		if (write(fds[1], &v, sizeof(v)) != sizeof(v))
			_exit(98);
		_exit(0);
	}
	close(fds[1]);
	if (read(fds[0], value, sizeof(*value)) != sizeof(*value))
		*value = -999;
	close(fds[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_parse_int(void **state)
{
	int v;

	(void)state;
	cli_init("test_cli");
	assert_int_equal(parse_int_status("4", 0, 9, &v), 0);
	assert_int_equal(v, 4);
	assert_int_equal(parse_int_status("0", 0, 9, &v), 0);
	assert_int_equal(v, 0);
	assert_int_equal(parse_int_status("9", 0, 9, &v), 0);
	assert_int_equal(v, 9);
	assert_int_equal(parse_int_status("10", 0, 9, &v), EXIT_USAGE);
	assert_int_equal(parse_int_status("-1", 0, 9, &v), EXIT_USAGE);
	assert_int_equal(parse_int_status("", 0, 9, &v), EXIT_USAGE);
	assert_int_equal(parse_int_status("x", 0, 9, &v), EXIT_USAGE);
	assert_int_equal(parse_int_status("4x", 0, 9, &v), EXIT_USAGE);
	assert_int_equal(parse_int_status("99999999999999999999", 0, 9, &v), EXIT_USAGE);
	assert_int_equal(parse_int_status("-3", -5, -1, &v), 0);
	assert_int_equal(v, -3);
}

/* What a child that calls body writes to stderr, into out (cap bytes). */
static void child_stderr(void (*body)(void), char *out, size_t cap)
{
	char path[] = "/tmp/test_cli.XXXXXX";
	int fd = mkstemp(path), st;
	pid_t pid;
	ssize_t n;

	assert_true(fd >= 0);
	unlink(path);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		if (dup2(fd, 2) < 0)
			_exit(99);
		cli_init("prog");
		body();
		exit(0);                /* at exit: the count of a warning still repeating */
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	n = pread(fd, out, cap - 1, 0);
	assert_true(n >= 0);
	out[n] = 0;
	close(fd);
}

static void warn_many(void)
{
	for (int i = 0; i < 1105; i++)
		cli_warn("chunk %u: signed by another key", 7u);
	cli_warn("something else");
	cli_warn("something else");
	cli_warn("something else");
}

static void warn_then_error(void)
{
	cli_warn("once");
	cli_warn("twice");
	cli_warn("twice");
	cli_error("the end");
}

/* frisbee -v printed 1,105 identical warnings (issue 25): a repeat is counted */
static void test_warn_repeats(void **state)
{
	char out[4096];

	(void)state;
	child_stderr(warn_many, out, sizeof(out));
	assert_string_equal(out, "prog: warning: chunk 7: signed by another key\n"
			    "prog: warning: chunk 7: signed by another key (repeated 1104 times)\n"
			    "prog: warning: something else\n"
			    "prog: warning: something else (repeated 2 times)\n");
	child_stderr(warn_then_error, out, sizeof(out));
	assert_string_equal(out, "prog: warning: once\n"
			    "prog: warning: twice\n"
			    "prog: warning: twice (repeated 1 time)\n"
			    "prog: the end\n");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_u64),
		cmocka_unit_test(test_parse_int),
		cmocka_unit_test(test_warn_repeats),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
