/* Messages, number parsing and a progress line for the programs. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "err.h"
#include "trust.h"

const char *cli_progname = "ndz";
int cli_verbose;
int cli_quiet;

void cli_init(const char *argv0)
{
	const char *s = argv0 ? strrchr(argv0, '/') : NULL;

	cli_progname = s ? s + 1 : (argv0 ? argv0 : "ndz");
	atexit(cli_flush_warnings);
}

static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
	cli_flush_warnings();
	fprintf(stderr, "%s: %s", cli_progname, prefix);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
}

/* The file cli_own_file names: removed by cli_die and by a signal that ends us. */
static const char *volatile owned_file;

void cli_drop_file(void)
{
	const char *path = owned_file;

	owned_file = NULL;
	if (path)
		unlink(path);
}

static void drop_on_signal(int sig)
{
	const char *path = owned_file;

	if (path)
		unlink(path);
	signal(sig, SIG_DFL);
	raise(sig);
}

void cli_own_file(const char *path)
{
	static const int sigs[] = { SIGINT, SIGTERM, SIGHUP };
	static int installed;
	struct sigaction sa;

	owned_file = path;
	if (!path || installed)
		return;
	installed = 1;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = drop_on_signal;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
		sigaddset(&sa.sa_mask, sigs[i]);
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction old;

		/* a signal ignored from the start (nohup) stays ignored */
		if (sigaction(sigs[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(sigs[i], &sa, NULL);
	}
}

void cli_hold_signals(int hold)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(hold ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

void cli_die(int code, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
	cli_drop_file();
	/*
	 * Leave at once: what the program holds goes back to the system. (exit() would
	 * run LeakSanitizer over buffers only a dead local still pointed to.)
	 */
	fflush(NULL);
	_exit(code);
}

void cli_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
}

/*
 * The last warning and how often it came again since it was printed: a warning
 * that repeats is counted, and the count told once another message comes, at
 * exit, or every REPEAT_S seconds while it keeps coming.
 */
#define REPEAT_S 10.0
static pthread_mutex_t warn_lock = PTHREAD_MUTEX_INITIALIZER;
static char last_warn[512];
static unsigned long warn_repeats;
static double warn_since;

/* Under warn_lock: tell how often the last warning came again, if it did. */
static void tell_repeats(void)
{
	if (warn_repeats)
		fprintf(stderr, "%s: warning: %s (repeated %lu time%s)\n", cli_progname,
			last_warn, warn_repeats, warn_repeats == 1 ? "" : "s");
	warn_repeats = 0;
}

void cli_flush_warnings(void)
{
	pthread_mutex_lock(&warn_lock);
	tell_repeats();
	last_warn[0] = 0;
	pthread_mutex_unlock(&warn_lock);
}

void cli_warn(const char *fmt, ...)
{
	char msg[sizeof(last_warn)];
	va_list ap;
	double now;

	if (cli_quiet)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	now = cli_now();
	pthread_mutex_lock(&warn_lock);
	if (strcmp(msg, last_warn) == 0) {
		if (!warn_repeats++)
			warn_since = now;
		if (now - warn_since >= REPEAT_S)
			tell_repeats();
	} else {
		tell_repeats();
		snprintf(last_warn, sizeof(last_warn), "%s", msg);
		fprintf(stderr, "%s: warning: %s\n", cli_progname, msg);
	}
	pthread_mutex_unlock(&warn_lock);
}

void cli_info(const char *fmt, ...)
{
	va_list ap;

	if (cli_quiet)
		return;
	cli_flush_warnings();
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

void cli_usage_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vmsg("", fmt, ap);
	va_end(ap);
	fprintf(stderr, "Try '%s --help' for more information.\n", cli_progname);
	exit(EXIT_USAGE);
}

void cli_version(void)
{
	printf("%s (ndz) %s\n", cli_progname, NDZ_VERSION);
	exit(EXIT_OK);
}

void cli_common_option(int c, const char *help)
{
	switch (c) {
	case 'q':
		cli_quiet = 1;
		return;
	case 'v':
		cli_verbose++;
		return;
	case 'h':
		fputs(help, stdout);
		exit(EXIT_OK);
	case 'V':
		cli_version();
	default:
		fprintf(stderr, "Try '%s --help' for more information.\n", cli_progname);
		exit(EXIT_USAGE);
	}
}

int cli_parse_u64(const char *s, int binary, uint64_t *out)
{
	uint64_t mult = 1, base = binary ? 1024 : 1000;
	unsigned long long v;
	char *end;

	/* strtoull would skip spaces and then accept a sign: " -5" is UINT64_MAX - 4 */
	if (!s || *s < '0' || *s > '9')
		return -1;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -1;
	switch (*end) {
	case '\0':
		break;
	case 'k': case 'K':
		mult = base;
		end++;
		break;
	case 'm': case 'M':
		mult = base * base;
		end++;
		break;
	case 'g': case 'G':
		mult = base * base * base;
		end++;
		break;
	case 't': case 'T':
		mult = base * base * base * base;
		end++;
		break;
	default:
		return -1;
	}
	if (*end != '\0' || (v && mult > UINT64_MAX / v))
		return -1;
	*out = (uint64_t)v * mult;
	return 0;
}

int cli_parse_int(const char *s, const char *opt, int lo, int hi)
{
	long v;
	char *end;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < lo || v > hi)
		cli_usage_error("option %s: '%s' is not a number from %d to %d", opt, s, lo, hi);
	return (int)v;
}

double cli_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void cli_progress_init(struct cli_progress *p, const char *what, uint64_t total, int enabled)
{
	p->what = what;
	p->total = total;
	p->start = cli_now();
	p->last = 0;
	p->enabled = enabled;
	p->drawn = 0;
}

static void draw(struct cli_progress *p, uint64_t done, double now)
{
	double secs = now - p->start, mb = (double)done / 1e6;
	double rate = secs > 0 ? mb / secs : 0;

	if (p->total)
		fprintf(stderr, "\r%s: %5.1f%%  %9.1f MB  %7.1f MB/s  %5.0f s ", p->what,
			100.0 * (double)done / (double)p->total, mb, rate, secs);
	else
		fprintf(stderr, "\r%s: %9.1f MB  %7.1f MB/s  %5.0f s ", p->what, mb, rate, secs);
	p->drawn = 1;
}

void cli_progress_update(struct cli_progress *p, uint64_t done)
{
	double now;

	if (!p->enabled)
		return;
	now = cli_now();
	if (now - p->last < 0.25)
		return;
	p->last = now;
	draw(p, done, now);
}

void cli_progress_end(struct cli_progress *p, uint64_t done)
{
	if (!p->enabled)
		return;
	draw(p, done, cli_now());
	fputc('\n', stderr);
}

void cli_add_key(const char *path, struct ndz_key *pub, struct ndz_key *crypt)
{
	struct ndz_error e = { 0 };
	int rc = ndz_key_add(path, pub, crypt, &e);

	if (rc == NDZ_EINVAL)
		cli_usage_error("--key %s", ndz_error_msg(&e));
	if (rc < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
}
