/* Messages, number parsing and a progress line for the programs. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "core/clock.h"
#include "core/err.h"
#include "core/fields.h"
#include "core/json.h"
#include "core/io.h"
#include "trust/key.h"

const char *cli_progname = "ndz";
int cli_verbose;
int cli_quiet;

void cli_init(const char *argv0)
{
	const char *s = argv0 ? strrchr(argv0, '/') : NULL;

	cli_progname = s ? s + 1 : (argv0 ? argv0 : "ndz");
	atexit(cli_flush_warnings);
	atexit(cli_flush_refusals);
}

static void end_line(void);

static int log_mode = CLI_LOG_PLAIN;

void cli_log_mode(int mode)
{
	if (mode == CLI_LOG_SYSLOG && log_mode != CLI_LOG_SYSLOG)
		openlog(cli_progname, LOG_PID, LOG_DAEMON);
	log_mode = mode;
}

/*
 * One message line: "[TIME ]prog: " named (when named) prefix msg, written with one
 * call (threads' lines do not mix), or to syslog at prio in syslog mode.
 */
static void put_line(int prio, int named, const char *prefix, const char *msg)
{
	char stamp[40] = "";

	end_line();
	if (log_mode == CLI_LOG_SYSLOG) {
		syslog(prio, "%s%s", prefix, msg);
		return;
	}
	if (log_mode == CLI_LOG_TIME) {
		uint64_t ns = ndz_wall_ns();
		time_t t = (time_t)(ns / 1000000000u);
		struct tm tm;

		gmtime_r(&t, &tm);
		strftime(stamp, 24, "%Y-%m-%dT%H:%M:%S", &tm);
		snprintf(stamp + strlen(stamp), sizeof(stamp) - strlen(stamp), ".%03uZ ",
			 (unsigned)(ns / 1000000u % 1000u));
	}
	fprintf(stderr, "%s%s%s%s%s\n", stamp, named ? cli_progname : "", named ? ": " : "",
		prefix, msg);
}

/* msg (an array) as this variadic function's own fmt and arguments say */
#define FORMAT(msg, fmt)                                   \
	do {                                               \
		va_list ap_;                               \
		va_start(ap_, fmt);                        \
		vsnprintf(msg, sizeof(msg), fmt, ap_);     \
		va_end(ap_);                               \
	} while (0)

static void vmsg(const char *prefix, const char *fmt, va_list ap)
{
	char msg[2048];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	cli_flush_warnings();
	put_line(LOG_ERR, 1, prefix, msg);
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
	if (warn_repeats) {
		char msg[sizeof(last_warn) + 40];

		snprintf(msg, sizeof(msg), "%s (repeated %lu time%s)", last_warn, warn_repeats,
			 warn_repeats == 1 ? "" : "s");
		put_line(LOG_WARNING, 1, "warning: ", msg);
	}
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
	double now;

	if (cli_quiet)
		return;
	FORMAT(msg, fmt);
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
		put_line(LOG_WARNING, 1, "warning: ", msg);
	}
	pthread_mutex_unlock(&warn_lock);
}

void cli_info(const char *fmt, ...)
{
	char msg[2048];

	if (cli_quiet)
		return;
	FORMAT(msg, fmt);
	cli_flush_warnings();
	/* plain: as given (some programs' info lines are output); logged: named */
	put_line(LOG_INFO, log_mode != CLI_LOG_PLAIN, "", msg);
}

void cli_log(const char *fmt, ...)
{
	char msg[2048];

	FORMAT(msg, fmt);
	cli_flush_warnings();
	put_line(LOG_INFO, 1, "", msg);
}

/*
 * Refusals, per rule: lines this second and those not printed. A rule past its
 * CLI_REFUSALS_PER_S lines counts the rest, told as "N more refused" once a later
 * second has come (at the rule's or another's next refusal, or at exit).
 */
#define RULES 16
static pthread_mutex_t refuse_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	char rule[48];
	uint64_t second;
	unsigned lines;
	unsigned long more;
} rules[RULES];

/* Under refuse_lock: the summaries of rules whose second is over (all: every one). */
static void tell_refusals(uint64_t second, int all)
{
	char msg[160];

	for (unsigned i = 0; i < RULES; i++) {
		if (!rules[i].more || (!all && rules[i].second == second))
			continue;
		snprintf(msg, sizeof(msg), "%lu more refused (%.47s)", rules[i].more, rules[i].rule);
		put_line(LOG_NOTICE, 1, "", msg);
		rules[i].more = 0;
	}
}

void cli_tell_refusals(void)
{
	pthread_mutex_lock(&refuse_lock);
	tell_refusals(ndz_now_ns() / 1000000000u, 0);
	pthread_mutex_unlock(&refuse_lock);
}

void cli_flush_refusals(void)
{
	pthread_mutex_lock(&refuse_lock);
	tell_refusals(0, 1);
	pthread_mutex_unlock(&refuse_lock);
}

void cli_refusal(const char *rule, const char *addr, const char *fmt, ...)
{
	uint64_t second = ndz_now_ns() / 1000000000u;
	char msg[1024], line[1200];
	unsigned i, free_i = RULES;

	if (cli_quiet)
		return;
	pthread_mutex_lock(&refuse_lock);
	tell_refusals(second, 0);
	for (i = 0; i < RULES && strcmp(rules[i].rule, rule) != 0; i++)
		if (!rules[i].rule[0] && free_i == RULES)
			free_i = i;
	if (i == RULES)
		i = free_i < RULES ? free_i : RULES - 1;   /* the last is shared when full */
	if (strcmp(rules[i].rule, rule) != 0)
		snprintf(rules[i].rule, sizeof(rules[i].rule), "%s", rule);
	if (rules[i].second != second) {
		rules[i].second = second;
		rules[i].lines = 0;
	}
	if (rules[i].lines >= CLI_REFUSALS_PER_S) {
		rules[i].more++;
		pthread_mutex_unlock(&refuse_lock);
		return;
	}
	rules[i].lines++;
	FORMAT(msg, fmt);
	snprintf(line, sizeof(line), "refused: %s %s", addr, msg);
	put_line(LOG_NOTICE, 1, "", line);
	pthread_mutex_unlock(&refuse_lock);
}

void cli_usage_error(const char *fmt, ...)
{
	va_list ap;

	log_mode = CLI_LOG_PLAIN;      /* a command line's mistake is the user's to see */
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
	return ndz_parse_u64(s, binary, out, NULL) == 0 ? 0 : -1;
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
	return ndz_now_s();
}

/* ---- progress ---- */

/* A terminal's progress line is drawn and not yet ended: a message ends it first. */
static int line_open;

static void end_line(void)
{
	if (__atomic_exchange_n(&line_open, 0, __ATOMIC_RELAXED))
		fputc('\n', stderr);
}

int cli_progress_option(const char *arg)
{
	if (!arg)
		return CLI_PROGRESS_TEXT;
	if (strcmp(arg, "json") == 0)
		return CLI_PROGRESS_JSON;
	cli_usage_error("--progress: unknown format '%s' (--progress or --progress=json)", arg);
}

void cli_progress_init(struct cli_progress *p, int mode, const char *phase, const char *of,
		       const char *verb)
{
	memset(p, 0, sizeof(*p));
	p->mode = mode == CLI_PROGRESS_TEXT && cli_quiet ? CLI_PROGRESS_NONE : mode;
	p->out = stderr;
	p->tty = isatty(STDERR_FILENO);
	p->phase = phase;
	p->of = of;
	p->verb = verb;
	p->start = p->last = cli_now();
	p->flush_s = -1;
}

void cli_progress_total(struct cli_progress *p, uint64_t bytes, uint32_t chunks)
{
	p->total = bytes;
	p->chunks_total = chunks;
}

double cli_progress_elapsed(const struct cli_progress *p)
{
	return (p->end ? p->end : cli_now()) - p->start;
}

/* The part done, from bytes when their total is known, else from chunks; -1: unknown. */
static double fraction(const struct cli_progress *p)
{
	double f;

	if (p->total)
		f = (double)p->bytes / (double)p->total;
	else if (p->chunks_total)
		f = (double)p->chunks / (double)p->chunks_total;
	else
		return -1;
	return f > 1 ? 1 : f;
}

static int is_over(const struct cli_progress *p)
{
	return !strcmp(p->phase, "done") || !strcmp(p->phase, "failed");
}

double cli_progress_eta(const struct cli_progress *p, double now)
{
	double f = fraction(p), secs = now - p->start;

	if (!strcmp(p->phase, "done"))
		return 0;
	/* a flush takes what it takes: nothing done so far predicts it */
	if (is_over(p) || !strcmp(p->phase, "flushing") || f <= 0 || secs <= 0)
		return -1;
	return secs * (1 - f) / f;
}

static double rate_at(const struct cli_progress *p, double now)
{
	double secs = (p->end ? p->end : now) - p->start;

	return secs > 0 ? (double)p->bytes / secs : 0;
}

const char *cli_progress_rate(const struct cli_progress *p, char *buf, size_t len)
{
	snprintf(buf, len, "%s %.1f MB/s %s", p->of, rate_at(p, cli_now()) / 1e6, p->verb);
	return buf;
}

/* m:ss, or h:mm:ss from an hour on */
static void clock_text(double secs, char *buf, size_t len)
{
	unsigned long s = secs > 0 ? (unsigned long)(secs + 0.5) : 0;

	if (s >= 3600)
		snprintf(buf, len, "%lu:%02lu:%02lu", s / 3600, s / 60 % 60, s % 60);
	else
		snprintf(buf, len, "%lu:%02lu", s / 60, s % 60);
}

/* snprintf appending at *n (which may run past len: the total length is kept) */
static void add(char *buf, size_t len, int *n, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void add(char *buf, size_t len, int *n, const char *fmt, ...)
{
	va_list ap;
	size_t at = (size_t)*n < len ? (size_t)*n : len;
	int k;

	va_start(ap, fmt);
	k = vsnprintf(buf + at, len - at, fmt, ap);
	va_end(ap);
	if (k > 0)
		*n += k;
}

int cli_progress_format(const struct cli_progress *p, double now, int json, char *buf,
			size_t len)
{
	double f = fraction(p), eta = cli_progress_eta(p, now), rate = rate_at(p, now);
	double eta_up = eta >= 0 ? (double)(unsigned long long)eta : -1; /* whole s, up */
	double secs = (p->end ? p->end : now) - p->start;
	char t[32], e[32], name[256];
	int n = 0;

	if (eta_up < eta)
		eta_up += 1;
	if (len)
		buf[0] = '\0';
	if (json) {
		struct ndz_jbuf j;

		/* the names here are ours, but a program name comes from argv[0] */
		ndz_jbuf_init(&j, name, sizeof(name));
		ndz_jbuf_string(&j, cli_progname);
		add(buf, len, &n, "{\"program\": %s, \"phase\": \"%s\", \"bytes\": %llu, "
		    "\"bytes_total\": ", name, p->phase, (unsigned long long)p->bytes);
		if (p->total)
			add(buf, len, &n, "%llu", (unsigned long long)p->total);
		else
			add(buf, len, &n, "null");
		add(buf, len, &n, ", \"bytes_of\": \"%s\", \"bytes_verb\": \"%s\", \"percent\": ",
		    p->of, p->verb);
		if (f >= 0)
			add(buf, len, &n, "%.1f", 100 * f);
		else
			add(buf, len, &n, "null");
		add(buf, len, &n, ", \"rate_bytes_s\": %.0f, \"elapsed_s\": %.3f, \"eta_s\": ",
		    rate, secs);
		if (eta >= 0)
			add(buf, len, &n, "%.0f", eta_up);
		else
			add(buf, len, &n, "null");
		if (p->chunks_total)
			add(buf, len, &n, ", \"chunks\": %u, \"chunks_total\": %u", p->chunks,
			    p->chunks_total);
		else
			add(buf, len, &n, ", \"chunks\": null, \"chunks_total\": null");
		if (p->flush_s >= 0)
			add(buf, len, &n, ", \"flush_s\": %.3f", p->flush_s);
		add(buf, len, &n, "}");
		return n;
	}
	add(buf, len, &n, "%s: %s%s", cli_progname, p->phase,
	    strcmp(p->phase, "flushing") ? "" : "...");
	if (f >= 0)
		add(buf, len, &n, "  %5.1f%%", 100 * f);
	if (p->total)
		add(buf, len, &n, "  %.1f of %.1f MB", (double)p->bytes / 1e6,
		    (double)p->total / 1e6);
	else
		add(buf, len, &n, "  %.1f MB", (double)p->bytes / 1e6);
	clock_text(secs, t, sizeof(t));
	add(buf, len, &n, "  %s %.1f MB/s %s  %s", p->of, rate / 1e6, p->verb, t);
	if (eta >= 0 && !is_over(p)) {
		clock_text(eta_up, e, sizeof(e));
		add(buf, len, &n, "  ETA %s", e);
	}
	if (p->flush_s >= 0)
		add(buf, len, &n, ", flushed in %.1f s", p->flush_s);
	return n;
}

/* One line now: a terminal's redrawn in place, else a line of its own. */
static void emit(struct cli_progress *p, double now)
{
	char buf[512];
	int n;

	if (p->mode == CLI_PROGRESS_NONE)
		return;
	p->last = now;
	p->lines++;
	n = cli_progress_format(p, now, p->mode == CLI_PROGRESS_JSON, buf, sizeof(buf));
	if (n >= (int)sizeof(buf))
		n = (int)sizeof(buf) - 1;
	if (p->mode == CLI_PROGRESS_TEXT && p->tty) {
		/* blank what a longer line before left */
		fprintf(p->out, "\r%s%*s", buf, p->width > n ? p->width - n : 0, "");
		if (n > p->width)
			p->width = n;
		__atomic_store_n(&line_open, p->out == stderr, __ATOMIC_RELAXED);
	} else {
		fprintf(p->out, "%s\n", buf);
	}
	fflush(p->out);
}

void cli_progress_update(struct cli_progress *p, uint64_t bytes, uint32_t chunks)
{
	double now, every;

	if (bytes > p->bytes)
		p->bytes = bytes;
	if (chunks > p->chunks)
		p->chunks = chunks;
	if (p->mode == CLI_PROGRESS_NONE)
		return;
	every = p->mode == CLI_PROGRESS_JSON ? CLI_PROGRESS_JSON_S :
		p->tty ? CLI_PROGRESS_TTY_S : CLI_PROGRESS_PLAIN_S;
	now = cli_now();
	if (!p->lines || now - p->last >= every)
		emit(p, now);
}

void cli_progress_phase(struct cli_progress *p, const char *phase)
{
	double now = cli_now();

	p->phase = phase;
	if (!strcmp(phase, "flushing"))
		p->flush_start = now;
	emit(p, now);
}

void cli_progress_end(struct cli_progress *p, int ok)
{
	if (p->end)
		return;
	p->end = cli_now();
	if (p->flush_start > 0)
		p->flush_s = p->end - p->flush_start;
	p->phase = ok ? "done" : "failed";
	emit(p, p->end);
	if (p->mode == CLI_PROGRESS_TEXT && p->tty) {
		if (p->out == stderr)
			end_line();
		else
			fputc('\n', p->out);
	}
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

struct ndz_io *cli_open_image(const char *path)
{
	struct ndz_error e = { 0 };
	struct ndz_io *in;

	if (strcmp(path, "-") == 0) {
		if (isatty(STDIN_FILENO))
			cli_usage_error("refusing to read an image from a terminal");
		if (ndz_io_open_stream(STDIN_FILENO, "stdin", &in, NULL) < 0)
			cli_die(EXIT_FAIL, "%s", ndz_strerror(NDZ_ENOMEM));
		return in;
	}
	if (ndz_io_open_file(path, NDZ_IO_READ | NDZ_IO_SEQUENTIAL, &in, &e) < 0)
		cli_die(EXIT_FAIL, "%s", ndz_error_msg(&e));
	return in;
}

const char *cli_sibling(char *buf, size_t cap, const char *name)
{
	size_t want = strlen(name) + 1;
	ssize_t n = cap > want ? readlink("/proc/self/exe", buf, cap - want) : -1;
	char *slash;

	if (n <= 0)
		return name;
	buf[n] = 0;
	slash = strrchr(buf, '/');
	memcpy(slash ? slash + 1 : buf, name, want);
	return buf;
}
