/* Unit tests for lib/cli/cli.c: number parsing for the programs' options, progress,
   repeated warnings, log lines and refusals. */
#include <regex.h>
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
#include "core/io.h"
#include "core/clock.h"
#include "core/fields.h"

/* The options' numbers are lib/core/fields' (test_fields has the cases): -1 when refused. */
static void test_parse_u64(void **state)
{
	static const char *const some[] = { "0", "5k", "3M", "100m", "1t", "", "5x", " 5",
					    "18446744073709551616", "17179869184G" };
	uint64_t v = 0, w = 0;

	(void)state;
	assert_int_equal(cli_parse_u64(NULL, 1, NULL), -1);
	for (size_t i = 0; i < sizeof(some) / sizeof(some[0]); i++)
		for (int bin = 0; bin < 2; bin++) {
			int rc = ndz_parse_u64(some[i], bin, &w, NULL);

			assert_int_equal(cli_parse_u64(some[i], bin, &v), rc ? -1 : 0);
			if (!rc)
				assert_int_equal(v, w);
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

/* A progress that prints nothing itself, its start set so the lines are known. */
static void progress_at(struct cli_progress *p, const char *phase, const char *of,
			const char *verb, uint64_t total, uint32_t chunks_total)
{
	cli_progress_init(p, CLI_PROGRESS_NONE, phase, of, verb);
	cli_progress_total(p, total, chunks_total);
	p->start = 100;
}

static const char *line(const struct cli_progress *p, double now, int json)
{
	static char buf[1024];
	int n = cli_progress_format(p, now, json, buf, sizeof(buf));

	assert_int_equal((size_t)n, strlen(buf));
	assert_null(strchr(buf, '\r'));
	assert_null(strchr(buf, '\n'));
	return buf;
}

/* The text line: phase, part done, bytes, the labelled rate, time so far and left. */
static void test_progress_text(void **state)
{
	struct cli_progress p;

	(void)state;
	cli_progname = "imagezip";
	cli_quiet = 0;
	progress_at(&p, "reading", "disk", "read", 1000000000, 0);
	/* nothing done: no part, no ETA */
	assert_string_equal(line(&p, 100, 0),
			    "imagezip: reading    0.0%  0.0 of 1000.0 MB  disk 0.0 MB/s read  0:00");
	/* 40% in 4 s: 6 s left */
	cli_progress_update(&p, 400000000, 0);
	assert_string_equal(line(&p, 104, 0),
			    "imagezip: reading   40.0%  400.0 of 1000.0 MB  disk 100.0 MB/s read  "
			    "0:04  ETA 0:06");
	/* a smaller count is ignored: counts only grow */
	cli_progress_update(&p, 300000000, 0);
	assert_int_equal(p.bytes, 400000000);
	/* an ETA past an hour; part seconds round up */
	cli_progress_update(&p, 500000000, 0);
	assert_string_equal(line(&p, 100 + 3725, 0),
			    "imagezip: reading   50.0%  500.0 of 1000.0 MB  disk 0.1 MB/s read  "
			    "1:02:05  ETA 1:02:05");
	assert_true(cli_progress_eta(&p, 100.5) == 0.5);
	assert_non_null(strstr(line(&p, 100.5, 0), "ETA 0:01"));
	/* flushing: no ETA (nothing predicts a flush) */
	cli_progress_update(&p, 1000000000, 0);
	p.phase = "flushing";
	assert_string_equal(line(&p, 110, 0),
			    "imagezip: flushing...  100.0%  1000.0 of 1000.0 MB  disk 100.0 MB/s "
			    "read  0:10");
	assert_true(cli_progress_eta(&p, 110) < 0);
	/* done: the rate over the whole job, and how long the flush took */
	p.phase = "done";
	p.end = 120;
	p.flush_s = 10;
	assert_string_equal(line(&p, 500, 0),
			    "imagezip: done  100.0%  1000.0 of 1000.0 MB  disk 50.0 MB/s read  "
			    "0:20, flushed in 10.0 s");
	assert_true(cli_progress_eta(&p, 500) == 0);

	/* no byte total: the part done and the ETA come from chunks */
	cli_progname = "imageunzip";
	progress_at(&p, "writing", "disk", "written", 0, 8);
	cli_progress_update(&p, 3000000, 2);
	assert_string_equal(line(&p, 102, 0),
			    "imageunzip: writing   25.0%  3.0 MB  disk 1.5 MB/s written  0:02  ETA 0:06");
	/* neither: no part, no ETA */
	progress_at(&p, "sending", "image", "sent", 0, 0);
	cli_progress_update(&p, 3000000, 0);
	assert_string_equal(line(&p, 102, 0),
			    "imageunzip: sending  3.0 MB  image 1.5 MB/s sent  0:02");
	assert_true(cli_progress_eta(&p, 102) < 0);
}

/* The JSON line: every documented field, null for what is not known. */
static void test_progress_json(void **state)
{
	struct cli_progress p;
	char small[16];
	int n;

	(void)state;
	cli_progname = "frisbee";
	progress_at(&p, "receiving", "image", "received", 4u << 20, 4);
	cli_progress_update(&p, 1u << 20, 1);
	assert_string_equal(line(&p, 102, 1),
			    "{\"program\": \"frisbee\", \"phase\": \"receiving\", \"bytes\": 1048576, "
			    "\"bytes_total\": 4194304, \"bytes_of\": \"image\", \"bytes_verb\": "
			    "\"received\", \"percent\": 25.0, \"rate_bytes_s\": 524288, "
			    "\"elapsed_s\": 2.000, \"eta_s\": 6, \"chunks\": 1, \"chunks_total\": 4}");
	cli_progress_update(&p, 4u << 20, 4);
	p.phase = "done";
	p.end = 104;
	p.flush_s = 1.5;
	assert_string_equal(line(&p, 200, 1),
			    "{\"program\": \"frisbee\", \"phase\": \"done\", \"bytes\": 4194304, "
			    "\"bytes_total\": 4194304, \"bytes_of\": \"image\", \"bytes_verb\": "
			    "\"received\", \"percent\": 100.0, \"rate_bytes_s\": 1048576, "
			    "\"elapsed_s\": 4.000, \"eta_s\": 0, \"chunks\": 4, \"chunks_total\": 4, "
			    "\"flush_s\": 1.500}");
	/* nothing known: nulls */
	cli_progname = "a\"b\\c\x01";
	progress_at(&p, "sending", "image", "sent", 0, 0);
	assert_string_equal(line(&p, 100, 1),
			    "{\"program\": \"a\\\"b\\\\c\\u0001\", \"phase\": \"sending\", \"bytes\": 0, "
			    "\"bytes_total\": null, \"bytes_of\": \"image\", \"bytes_verb\": \"sent\", "
			    "\"percent\": null, \"rate_bytes_s\": 0, \"elapsed_s\": 0.000, "
			    "\"eta_s\": null, \"chunks\": null, \"chunks_total\": null}");
	/* a short buffer: cut and terminated, the whole length returned */
	n = cli_progress_format(&p, 100, 1, small, sizeof(small));
	assert_int_equal((size_t)n, strlen(line(&p, 100, 1)));
	assert_int_equal(strlen(small), sizeof(small) - 1);
	cli_progname = "test_cli";
}

/* The lines as printed: captured from the stream a program's progress writes. */
static char *run_job(int mode, int tty, const char **verbs)
{
	struct cli_progress p;
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	cli_progress_init(&p, mode, "writing", "disk", "written");
	cli_progress_total(&p, 0, 2);
	p.out = f;
	p.tty = tty;
	cli_progress_update(&p, 1000, 1);      /* the first line at once */
	p.last = 1e12;                         /* the next not due, however slow this machine */
	cli_progress_update(&p, 1500, 1);
	cli_progress_update(&p, 2000, 2);
	cli_progress_phase(&p, "flushing");
	cli_progress_end(&p, 1);
	*verbs = p.phase;
	assert_true(p.flush_s >= 0);
	fclose(f);
	return text;
}

static int count(const char *s, const char *what)
{
	int n = 0;

	for (; (s = strstr(s, what)); s += strlen(what))
		n++;
	return n;
}

static void test_progress_lines(void **state)
{
	const char *phase;
	char *t;

	(void)state;
	cli_progname = "imageunzip";
	cli_quiet = 0;
	/* not a terminal: plain lines, each ended, no \r; flushing and done shown */
	t = run_job(CLI_PROGRESS_TEXT, 0, &phase);
	assert_string_equal(phase, "done");
	assert_null(strchr(t, '\r'));
	assert_int_equal(count(t, "\n"), 3);
	assert_non_null(strstr(t, "imageunzip: writing   50.0%  0.0 MB  disk "));
	assert_non_null(strstr(t, "\nimageunzip: flushing...  100.0%"));
	assert_non_null(strstr(t, "\nimageunzip: done  100.0%"));
	assert_non_null(strstr(t, ", flushed in "));
	assert_true(t[strlen(t) - 1] == '\n');
	free(t);
	/* a terminal: one line redrawn with \r, one newline at the end */
	t = run_job(CLI_PROGRESS_TEXT, 1, &phase);
	assert_int_equal(count(t, "\r"), 3);
	assert_int_equal(count(t, "\n"), 1);
	assert_true(t[0] == '\r' && t[strlen(t) - 1] == '\n');
	free(t);
	/* JSON: one object a line, the last done at 100% with the flush's time */
	t = run_job(CLI_PROGRESS_JSON, 1, &phase);
	assert_null(strchr(t, '\r'));
	assert_int_equal(count(t, "\n"), 3);
	assert_int_equal(count(t, "{\"program\": \"imageunzip\""), 3);
	assert_non_null(strstr(t, "\"phase\": \"flushing\""));
	assert_non_null(strstr(t, "\"phase\": \"done\", \"bytes\": 2000, \"bytes_total\": null, "
			       "\"bytes_of\": \"disk\", \"bytes_verb\": \"written\", "
			       "\"percent\": 100.0"));
	assert_non_null(strstr(t, "\"flush_s\": "));
	free(t);
	/* -q silences text, not JSON */
	cli_quiet = 1;
	t = run_job(CLI_PROGRESS_TEXT, 0, &phase);
	assert_string_equal(t, "");
	free(t);
	t = run_job(CLI_PROGRESS_JSON, 0, &phase);
	assert_int_equal(count(t, "\n"), 3);
	free(t);
	cli_quiet = 0;
	t = run_job(CLI_PROGRESS_NONE, 1, &phase);
	assert_string_equal(t, "");
	free(t);
	cli_progname = "test_cli";
}

/* cli_progress_option exits 2 on a bad value: run it in a child. */
static int option_status(const char *arg)
{
	int st;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		if (!freopen("/dev/null", "w", stderr))
			_exit(99);
		_exit(cli_progress_option(arg) == CLI_PROGRESS_JSON ? 40 : 41);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_progress_option(void **state)
{
	(void)state;
	assert_int_equal(cli_progress_option(NULL), CLI_PROGRESS_TEXT);
	assert_int_equal(cli_progress_option("json"), CLI_PROGRESS_JSON);
	assert_int_equal(option_status("json"), 40);
	assert_int_equal(option_status("JSON"), EXIT_USAGE);
	assert_int_equal(option_status(""), EXIT_USAGE);
	assert_int_equal(option_status("text"), EXIT_USAGE);
}

/* What a child that calls body writes to stderr, into out (cap bytes); it exits with status. */
static void child_stderr_status(void (*body)(void), char *out, size_t cap, int status)
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
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == status);
	n = pread(fd, out, cap - 1, 0);
	assert_true(n >= 0);
	out[n] = 0;
	close(fd);
}

static void child_stderr(void (*body)(void), char *out, size_t cap)
{
	child_stderr_status(body, out, cap, 0);
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

static void open_missing(void)
{
	cli_open_image("/nonexistent/ndz-test.ndz");
}

/* cli_sibling: a program beside this one; the bare name when there is no room. */
static void test_sibling(void **state)
{
	char buf[4096], self[4096], tiny[4];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	const char *p;

	(void)state;
	assert_true(n > 0);
	self[n] = 0;
	*strrchr(self, '/') = 0;
	p = cli_sibling(buf, sizeof(buf), "frisbeed");
	assert_ptr_equal(p, buf);
	assert_int_equal(strncmp(p, self, strlen(self)), 0);
	assert_string_equal(p + strlen(self), "/frisbeed");
	assert_string_equal(cli_sibling(tiny, sizeof(tiny), "frisbeed"), "frisbeed");
}

/* cli_open_image reads a file as it is; one that is not there ends the program. */
static void test_open_image(void **state)
{
	char path[] = "/tmp/test_cli.XXXXXX", buf[8], out[512];
	int fd = mkstemp(path);
	struct ndz_io *in;

	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "ndzbytes", 8), 8);
	close(fd);
	in = cli_open_image(path);
	assert_non_null(in);
	assert_int_equal(ndz_io_read_full(in, buf, 8, 0, NULL, NULL), 0);
	assert_memory_equal(buf, "ndzbytes", 8);
	ndz_io_close(in);
	unlink(path);
	child_stderr_status(open_missing, out, sizeof(out), EXIT_FAIL);
	assert_non_null(strstr(out, "prog: "));
	assert_non_null(strstr(out, "/nonexistent/ndz-test.ndz"));
}

static void log_time(void)
{
	cli_log_mode(CLI_LOG_TIME);
	cli_info("hello %d", 1);
	cli_warn("careful");
	cli_error("bad");
}

/* --log-time: every message line begins with its ISO 8601 UTC time, then the name */
static void test_log_time(void **state)
{
	char out[4096];
	regex_t re;

	(void)state;
	child_stderr(log_time, out, sizeof(out));
	assert_int_equal(regcomp(&re, "^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:"
				 "[0-6][0-9]\\.[0-9]{3}Z prog: hello 1\n"
				 "[0-9]{4}-[^ ]*Z prog: warning: careful\n"
				 "[0-9]{4}-[^ ]*Z prog: bad\n$", REG_EXTENDED), 0);
	assert_int_equal(regexec(&re, out, 0, NULL, 0), 0);
	regfree(&re);
}

static void refuse_flood(void)
{
	uint64_t second;

	for (int i = 0; i < 1000; i++)
		cli_refusal("access denied", "10.0.0.9", "asks for a: access denied: rule %d", i);
	/* once the second is over, a daemon's loop tells what was counted */
	second = ndz_now_ns() / 1000000000u;
	while (ndz_now_ns() / 1000000000u == second)
		usleep(10000);
	cli_tell_refusals();
	cli_info("told");
	cli_refusal("rate limit", "10.0.0.8", "rate limit: over its request rate");
}

/* A flood of refusals: a few lines per rule, the rest counted; every one accounted for. */
static void test_refusals(void **state)
{
	char out[16384], *p;
	unsigned lines = 0, more = 0, other = 0, told = 0;

	(void)state;
	child_stderr(refuse_flood, out, sizeof(out));
	for (p = strtok(out, "\n"); p; p = strtok(NULL, "\n")) {
		unsigned long k;

		if (strncmp(p, "prog: refused: 10.0.0.9 asks for a: access denied: rule ", 56) == 0)
			lines++;
		else if (strcmp(p, "prog: refused: 10.0.0.8 rate limit: over its request rate") == 0)
			other++;
		else if (sscanf(p, "prog: %lu more refused (access denied)", &k) == 1 && !told)
			more += (unsigned)k;
		else if (strcmp(p, "told") == 0)
			told++;
		else
			fail_msg("unexpected line '%s'", p);
	}
	assert_int_equal(lines + more, 1000);
	assert_true(lines >= 1 && lines <= 100);   /* 5 a second: the loop takes far less */
	assert_int_equal(other, 1);                /* another rule has its own limit */
	assert_int_equal(told, 1);                 /* every summary came before it */
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_u64),
		cmocka_unit_test(test_parse_int),
		cmocka_unit_test(test_progress_text),
		cmocka_unit_test(test_progress_json),
		cmocka_unit_test(test_progress_lines),
		cmocka_unit_test(test_progress_option),
		cmocka_unit_test(test_warn_repeats),
		cmocka_unit_test(test_open_image),
		cmocka_unit_test(test_sibling),
		cmocka_unit_test(test_log_time),
		cmocka_unit_test(test_refusals),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
