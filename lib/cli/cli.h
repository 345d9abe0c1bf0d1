/* Helpers for the programs only (they may print and exit): messages, numbers, progress. */
#ifndef NDZ_CLI_H
#define NDZ_CLI_H

#include <stdint.h>
#include <stdio.h>

/* Exit codes shared by every program. */
#define EXIT_OK       0
#define EXIT_FAIL     1                /* the job failed (I/O, bad image, network) */
#define EXIT_USAGE    2                /* bad command line */

extern const char *cli_progname;
extern int cli_verbose;                /* -v count */
extern int cli_quiet;                  /* -q */

struct ndz_key;

void cli_init(const char *argv0);
/* cli_die - print "prog: msg" to stderr, flush stdio and _exit(code). */
void cli_die(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
void cli_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * cli_own_file - path is a file this program created and must not leave behind
 * unless it succeeds: from now on cli_die removes it, and so does SIGINT, SIGTERM
 * or SIGHUP (the program then dies of that signal; one ignored from the start, as
 * under nohup, stays ignored). NULL: keep it after all. One file at a time; path
 * must stay valid.
 */
void cli_own_file(const char *path);
/* cli_drop_file - remove the file cli_own_file named, if any, now. */
void cli_drop_file(void);
/*
 * cli_hold_signals - 1: hold SIGINT, SIGTERM and SIGHUP back in the calling thread
 * (around creating a file and calling cli_own_file, so no signal comes between);
 * 0: let them in again (a held one is delivered then).
 */
void cli_hold_signals(int hold);
/*
 * cli_warn - "prog: warning: msg" to stderr, unless quiet. The same warning again
 * is counted, not printed: "prog: warning: msg (repeated N times)" follows once
 * another message is printed (cli_error, cli_info, cli_die, another warning), at
 * exit, or every 10 seconds while it keeps coming.
 */
void cli_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* cli_flush_warnings - tell now how often the last warning repeated, if it did. */
void cli_flush_warnings(void);
/* cli_info - to stderr, unless quiet. */
void cli_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* cli_usage_error - "prog: msg\nTry 'prog --help'." and exit 2. */
void cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void cli_version(void) __attribute__((noreturn));

/*
 * cli_common_option - the options every program shares, for getopt's switch default:
 * -q quiet, -v verbose (repeatable), -h/--help (prints help, exits 0), -V/--version
 * (exits 0); anything else is an unknown option getopt has already named: a hint
 * and exit 2.
 */
void cli_common_option(int c, const char *help);
/* The long names of those options, for the end of each program's getopt_long table. */
#define CLI_COMMON_LONGOPTS                                   \
	{ "quiet", no_argument, NULL, 'q' },                  \
	{ "verbose", no_argument, NULL, 'v' },                \
	{ "help", no_argument, NULL, 'h' },                   \
	{ "version", no_argument, NULL, 'V' }

/*
 * cli_parse_u64 - a decimal number with an optional suffix: k, M, G, T (powers of
 * 1024 when binary, else of 1000). Returns 0 or -1 when malformed or overflowing.
 */
int cli_parse_u64(const char *s, int binary, uint64_t *out);
/* cli_parse_int - an int within [lo, hi]; usage error naming opt otherwise. */
int cli_parse_int(const char *s, const char *opt, int lo, int hi);

/* A progress line on stderr, redrawn at most a few times a second when it is a tty. */
struct cli_progress {
	const char *what;
	uint64_t total;                /* 0 when unknown */
	double start, last;
	int enabled;
	int drawn;
};
void cli_progress_init(struct cli_progress *p, const char *what, uint64_t total, int enabled);
void cli_progress_update(struct cli_progress *p, uint64_t done);
void cli_progress_end(struct cli_progress *p, uint64_t done);

/* cli_now - monotonic seconds. */
double cli_now(void);

/*
 * cli_add_key - --key FILE: a public key into *pub or an encryption key into
 * *crypt, by what the file holds (ndz_key_add); a bad file or a second key of a
 * kind is a usage error, an unreadable one a failure.
 */
void cli_add_key(const char *path, struct ndz_key *pub, struct ndz_key *crypt);

#endif
