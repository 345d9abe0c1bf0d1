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
/*
 * cli_info - to stderr, unless quiet: as given (plain mode), or as a log line
 * "TIME prog: msg" (time mode) or to syslog at LOG_INFO (syslog mode).
 */
void cli_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * How messages go out (cli_log_mode; the daemons mfrisbeed and frisbeed choose):
 * CLI_LOG_PLAIN "prog: msg" lines on stderr (the other programs); CLI_LOG_TIME each
 * line begun with its ISO 8601 UTC time, "2026-11-26T03:01:02.345Z prog: msg";
 * CLI_LOG_SYSLOG to syslog (openlog with the program's name and pid, facility
 * daemon): errors LOG_ERR, warnings LOG_WARNING, refusals LOG_NOTICE, info LOG_INFO.
 */
/*
 * cli_log - "prog: msg" as a log line at LOG_INFO, even when quiet (statistics the
 * user asked for: a daemon's at exit or on a signal); timed or to syslog as set.
 */
void cli_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
enum { CLI_LOG_PLAIN = 0, CLI_LOG_TIME = 1, CLI_LOG_SYSLOG = 2 };  /* fixed: options use them */
void cli_log_mode(int mode);

/*
 * cli_refusal - log a refused request, unless quiet: "refused: ADDR msg", msg
 * naming the rule that refused it; rule a short fixed name ("access denied",
 * "rate limit"...) that keys the rate limit and names the summary. At most
 * CLI_REFUSALS_PER_S lines per rule each second; the rest are counted and told as
 * "N more refused (RULE)" once that second is over (at the next refusal, the next
 * cli_tell_refusals, or at exit: cli_flush_refusals). Thread-safe.
 */
#define CLI_REFUSALS_PER_S 5u
void cli_refusal(const char *rule, const char *addr, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* cli_flush_refusals - tell the refusals counted and not yet told, now. */
void cli_flush_refusals(void);
/* cli_tell_refusals - tell those counted in seconds that are over (a daemon's loop). */
void cli_tell_refusals(void);
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
 * cli_parse_u64 - a decimal number with an optional suffix: k, m, g, t in either case
 * (powers of 1024 when binary, else of 1000), by ndz_parse_u64, the rule
 * mfrisbeed.conf follows too. Returns 0 or -1 when malformed or overflowing.
 */
int cli_parse_u64(const char *s, int binary, uint64_t *out);
/* cli_parse_int - an int within [lo, hi]; usage error naming opt otherwise. */
int cli_parse_int(const char *s, const char *opt, int lo, int hi);

/*
 * Progress of a long job on stderr (-o, --progress[=json]), one implementation for
 * every program. It counts one kind of bytes, named by "of" and "verb" ("disk" bytes
 * "written", "image" bytes "received"...), and shows the same label in the progress
 * and, through cli_progress_rate, in the program's summary. The job goes through
 * phases: the program's own ("reading", "writing", "receiving", "sending"), then
 * "flushing" (its duration is kept), then "done" or "failed".
 *
 * Text on a terminal: one line redrawn four times a second; text elsewhere (a file,
 * a pipe): a plain line every CLI_PROGRESS_PLAIN_S seconds and at each phase; JSON:
 * one object per line, every second and at each phase, fields:
 *   program, phase, bytes, bytes_total (null: unknown), bytes_of ("disk" or "image"),
 *   bytes_verb ("read", "written", "received", "sent"), percent (null: unknown),
 *   rate_bytes_s (bytes over the whole job's time), elapsed_s, eta_s (null: unknown;
 *   0 when done), chunks, chunks_total (null: not counted), and flush_s in the last
 *   line once a flush was timed.
 */
enum cli_progress_mode {
	CLI_PROGRESS_NONE,
	CLI_PROGRESS_TEXT,
	CLI_PROGRESS_JSON,
};
#define CLI_PROGRESS_TTY_S   0.25      /* a terminal's line is redrawn this often */
#define CLI_PROGRESS_PLAIN_S 5.0       /* a plain line this often (stderr not a terminal) */
#define CLI_PROGRESS_JSON_S  1.0       /* a JSON line this often */

/*
 * cli_progress_option - the mode -o or --progress[=ARG] asks for: NULL is text,
 * "json" JSON; anything else is a usage error.
 */
int cli_progress_option(const char *arg);

/* The fields are the implementation's; read them, do not set them (tests may set out, tty). */
struct cli_progress {
	int mode;                      /* enum cli_progress_mode; NONE still counts */
	int tty;                       /* out is a terminal: redraw one line */
	FILE *out;                     /* stderr */
	const char *phase, *of, *verb;
	uint64_t bytes, total;         /* total 0: unknown */
	uint32_t chunks, chunks_total; /* chunks_total 0: chunks not counted */
	double start, last;            /* cli_now() at init and at the last line */
	double flush_start, flush_s;   /* flush_s < 0: no flush timed */
	double end;                    /* cli_now() at cli_progress_end, else 0 */
	int width;                     /* a terminal's line: its length, to blank it */
	unsigned lines;                /* lines printed */
};

/*
 * cli_progress_init - start counting now, in phase, bytes of kind "of" that are
 * "verb"; mode from cli_progress_option (text is NONE under -q, JSON is not).
 * Prints nothing yet: the first update prints the first line. The strings must
 * outlive p.
 */
void cli_progress_init(struct cli_progress *p, int mode, const char *phase, const char *of,
		       const char *verb);
/* cli_progress_total - what the job will count: bytes (0: unknown) and chunks (0: not counted). */
void cli_progress_total(struct cli_progress *p, uint64_t bytes, uint32_t chunks);
/*
 * cli_progress_update - bytes and chunks done so far (never less than before: a
 * smaller value is ignored); prints the first line, then when one is due. Calls
 * must not overlap.
 */
void cli_progress_update(struct cli_progress *p, uint64_t bytes, uint32_t chunks);
/* cli_progress_phase - a new phase, shown at once; "flushing" starts the flush's clock. */
void cli_progress_phase(struct cli_progress *p, const char *phase);
/*
 * cli_progress_end - the job is over: "done" (ok) or "failed"; stops the flush's
 * clock and prints the last line (a terminal's gets its newline). Only the first
 * call counts.
 */
void cli_progress_end(struct cli_progress *p, int ok);
/* cli_progress_elapsed - seconds from init to the end (or to now while running). */
double cli_progress_elapsed(const struct cli_progress *p);
/*
 * cli_progress_rate - the job's rate with its label into buf, e.g. "disk 312.0 MB/s
 * written" (MB: 10^6 bytes), as the progress shows it; returns buf.
 */
const char *cli_progress_rate(const struct cli_progress *p, char *buf, size_t len);
/* cli_progress_eta - seconds left at now, from the part done so far; -1 when unknown. */
double cli_progress_eta(const struct cli_progress *p, double now);
/*
 * cli_progress_format - the line cli_progress prints at now, text or JSON, into
 * buf (NUL-terminated, without \r or \n); returns its length as snprintf does.
 */
int cli_progress_format(const struct cli_progress *p, double now, int json, char *buf,
			size_t len);

/* cli_now - monotonic seconds. */
double cli_now(void);

/*
 * cli_add_key - --key FILE: a public key into *pub or an encryption key into
 * *crypt, by what the file holds (ndz_key_add); a bad file or a second key of a
 * kind is a usage error, an unreadable one a failure.
 */
void cli_add_key(const char *path, struct ndz_key *pub, struct ndz_key *crypt);

struct ndz_io;
/*
 * cli_open_image - an image to read chunk by chunk: PATH, or stdin for "-" (a
 * terminal there is a usage error). Dies with the reason when it cannot be opened.
 * The caller closes it with ndz_io_close.
 */
struct ndz_io *cli_open_image(const char *path);

/*
 * cli_sibling - the path of program name in the directory this program runs from
 * (/proc/self/exe), into buf (cap bytes); name itself (found on PATH) when that
 * cannot be read or does not fit.
 */
const char *cli_sibling(char *buf, size_t cap, const char *name);

#endif
