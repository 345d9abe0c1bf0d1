/*
 * ndzctl node: a lab node's whole turn (the boot environment's side of the lab): ask
 * the master for the task, run it (a capture in this process through the library's
 * capture job and its report callback; a multicast reload through frisbee as a child,
 * read through its --report-fd channel, never its messages), report progress while
 * it runs and the result at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "cli/capture.h"
#include "cli/cli.h"
#include "codec/job.h"
#include "core/clock.h"
#include "ctl/labcall.h"
#include "ctl/upsink.h"
#include "node.h"
#include "scan.h"

#define ASK_MAX_MS   (900u * 1000)    /* a group may keep a node waiting this long */
#define PROGRESS_MS  2000u             /* progress to the master this often */
#define RETRY_S      5                 /* between two attempts */

struct task {
	const char *master;            /* HOST[:PORT] */
	uint8_t mac[6];
	const char *macs, *disk;
	int lab;                       /* a lab node: asks, reports (else the task is given) */
	uint8_t kind, opts;            /* NDZ_LAB_RELOAD or _CAPTURE; NDZ_LAB_SEED... */
	char image[NDZ_CTL_NAME_MAX + 1];
	const struct node_opts *o;
	uint64_t bytes, total;         /* the last progress */
	uint64_t chunks_total;         /* the last progress's (0: not counted) */
	uint64_t last_report_ms;
	unsigned reports;              /* progress reports sent (every third: a console line) */
	/* the child's result line */
	int have_result, result_ok;
	uint64_t rbytes, held;
	char reason[NDZ_CTL_TEXT_MAX + 1];
};

/* A line for the console: "ndzctl: msg" on stderr, unless quiet. */
static void say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void say(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	cli_info("%s: %s", cli_progname, msg);
}

static void sleep_ms(uint32_t ms)
{
	nanosleep(&(struct timespec){ ms / 1000, (long)(ms % 1000) * 1000000 }, NULL);
}

/* One exchange with the master; 0 with rep, or -1 with e. */
static int call(struct task *t, struct ndz_ctl_labreq *r, struct ndz_ctl_labrep *rep,
		struct ndz_error *e)
{
	static uint8_t buf[NDZ_CTL_LABREP_MAX];

	memcpy(r->mac, t->mac, 6);
	r->id = (uint32_t)ndz_now_ms();
	if (ndz_labcall_node(t->master, r, buf, sizeof(buf), rep, e) != 0)
		return -1;
	if (rep->status != NDZ_CTL_OK) {
		ndz_error_set(e, NDZ_EPROTO, 0, "master %s: %s", t->master,
			      ndz_ctl_strstatus(rep->status));
		return -1;
	}
	return 0;
}

/* The task, asking again while told to wait. 0, 1 (no task: local), or -1 with e. */
static int ask(struct task *t, struct ndz_error *e)
{
	uint64_t t0 = ndz_now_ms();
	struct ndz_ctl_labrep rep;
	int told = 0;

	for (;;) {
		struct ndz_ctl_labreq r = { .type = NDZ_CTL_ASK };

		if (call(t, &r, &rep, e) < 0)
			return -1;
		if (rep.task != NDZ_LAB_WAIT)
			break;
		if (ndz_now_ms() - t0 > ASK_MAX_MS) {
			ndz_error_set(e, NDZ_ETIMEDOUT, 0, "master %s kept this node waiting for its "
				      "group over %u s", t->master, ASK_MAX_MS / 1000);
			return -1;
		}
		if (!told++)
			say("the group starts together: asking again in %u ms (told once)",
			    rep.wait_ms);
		sleep_ms(rep.wait_ms);
	}
	if (rep.task != NDZ_LAB_RELOAD && rep.task != NDZ_LAB_CAPTURE)
		return 1;
	t->kind = rep.task;
	t->opts = rep.opts;
	snprintf(t->image, sizeof(t->image), "%s", rep.name);
	return 0;
}

/* Progress to the master; a lost one changes nothing (the next one follows). */
static void report_progress(struct task *t)
{
	struct ndz_ctl_labreq r = { .type = NDZ_CTL_REPORT, .kind = NDZ_LAB_PROGRESS };
	struct ndz_ctl_labrep rep;

	r.bytes = t->bytes;
	r.total = t->total;
	t->last_report_ms = ndz_now_ms();
	if (t->lab)
		call(t, &r, &rep, NULL);
	if (t->total && !cli_quiet && t->reports++ % 3 == 2)
		say("%.1f of %.1f MB (%.0f%%)", (double)t->bytes / 1e6, (double)t->total / 1e6,
		    100.0 * (double)t->bytes / (double)t->total);
}

/*
 * The fields of one line of the --report-fd channel (a flat JSON object of our own
 * making: "key": number, "key": "string" or null). 1 when key is there.
 */
static int field_u64(const char *line, const char *key, uint64_t *v)
{
	char pat[64];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\": ", key);
	p = strstr(line, pat);
	if (!p || p[strlen(pat)] < '0' || p[strlen(pat)] > '9')
		return 0;
	*v = strtoull(p + strlen(pat), NULL, 10);
	return 1;
}

static int field_str(const char *line, const char *key, char *out, size_t cap)
{
	char pat[64];
	const char *p;
	size_t n = 0;

	snprintf(pat, sizeof(pat), "\"%s\": \"", key);
	p = strstr(line, pat);
	if (!p)
		return 0;
	for (p += strlen(pat); *p && *p != '"'; p++) {
		char c = *p;

		if (c == '\\' && p[1]) {
			p++;
			c = *p == 'u' ? '?' : *p;   /* a control character: shown as '?' */
			if (*p == 'u')
				p += strlen(p) >= 5 ? 4 : strlen(p) - 1;
		}
		if (n + 1 < cap)
			out[n++] = c;
	}
	out[n] = '\0';
	return 1;
}

static void take_line(struct task *t, const char *line)
{
	char res[16];
	uint64_t v;

	if (field_str(line, "result", res, sizeof(res))) {
		t->have_result = 1;
		t->result_ok = strcmp(res, "ok") == 0;
		if (field_u64(line, "bytes", &v))
			t->rbytes = v;
		if (field_u64(line, "held", &v))
			t->held = v;
		if (!field_str(line, "reason", t->reason, sizeof(t->reason)))
			t->reason[0] = '\0';
		return;
	}
	if (field_u64(line, "bytes", &v))
		t->bytes = v;
	if (field_u64(line, "chunks_total", &v))
		t->chunks_total = v;
	t->total = field_u64(line, "bytes_total", &v) ? v : 0;
}

/* frisbee's argument list for t's reload, NULL-terminated, in argv (cap entries). */
static void frisbee_args(const struct task *t, const char **argv, size_t cap)
{
	const struct node_opts *o = t->o;
	size_t n = 0;

#define ARG(s) do { if (n + 1 < cap) argv[n++] = (s); } while (0)
	ARG("frisbee");
	ARG("--report-fd");
	ARG("3");
	if (o->iface) {
		ARG("-i");
		ARG(o->iface);
	}
	ARG("-T");
	ARG(o->timeout);
	if (t->opts & NDZ_LAB_ZERO)
		ARG("-z");
	else if (o->discard)
		ARG("--discard");
	/* a seeded reload always ends verified: what it kept is read back too */
	if (t->opts & NDZ_LAB_SEED)
		ARG("--seed");
	if (t->opts & (NDZ_LAB_VERIFY | NDZ_LAB_SEED))
		ARG("--verify");
	for (int k = 0; k < o->nextra; k++)
		ARG(o->extra[k]);
	if (o->group) {
		ARG("-m");
		ARG(o->group);
		ARG("-p");
		ARG(o->port);
		if (o->server) {
			ARG("-S");
			ARG(o->server);
		}
	} else {
		ARG("-M");
		ARG(t->master);
		ARG("-I");
		ARG(t->image);
	}
	ARG(t->disk);
	argv[n] = NULL;
#undef ARG
}

/* ---- the capture, in this process: the library's job (lib/codec/job.h) ---- */

/* The image goes to the master as it is made (imagezip --upload's sink). */
struct upload {
	struct task *t;
	struct ndz_upsink *sink;
	struct ndz_io *io;
};

static int upload_open(void *ctx, struct ndz_io **io, struct ndz_error *e)
{
	struct upload *u = ctx;
	int rc = ndz_upsink_open(u->t->master, u->t->image, 0, atoi(u->t->o->timeout), &u->sink, e);

	if (rc == 0)
		rc = ndz_io_open_stream(ndz_upsink_fd(u->sink), u->t->image, &u->io, e);
	*io = u->io;
	return rc;
}

/* the master's verdict: it has checked, synced and stored the image */
static int upload_commit(void *ctx, struct ndz_error *e)
{
	struct upload *u = ctx;
	int rc = ndz_io_flush(u->io, e);

	if (rc == 0)
		rc = ndz_upsink_finish(u->sink, 0, NULL, e);
	else
		ndz_upsink_finish(u->sink, 1, NULL, NULL);
	u->sink = NULL;
	return rc;
}

/* cancelled: the master stores nothing; when it had ended the upload first, its reason */
static void upload_abort(void *ctx, struct ndz_error *e)
{
	struct upload *u = ctx;
	struct ndz_error ue = { 0 };

	if (u->sink && ndz_upsink_finish(u->sink, 1, NULL, &ue) != NDZ_ECANCELED && ue.code)
		*e = ue;
	u->sink = NULL;
}

/* The job's one report callback, the lab's face: progress to the master, warnings. */
static void job_report(void *ctx, const struct ndz_job_report *r)
{
	struct task *t = ctx;

	switch (r->event) {
	case NDZ_JOB_START:
		t->total = r->total;
		t->chunks_total = r->chunks_total;
		break;
	case NDZ_JOB_PROGRESS:
		t->bytes = r->bytes;
		if (ndz_now_ms() - t->last_report_ms >= PROGRESS_MS)
			report_progress(t);
		break;
	case NDZ_JOB_PHASE:
		say("%s", r->phase);
		break;
	case NDZ_JOB_WARN:
		cli_warn("%s", r->msg);
		break;
	case NDZ_JOB_INFO:
		if (cli_verbose)
			say("%s", r->msg);
		break;
	case NDZ_JOB_END:
		t->held = r->held;
		if (r->ok)
			t->bytes = r->bytes;
		break;
	}
}

static void scan_warn(void *ctx, const char *msg)
{
	(void)ctx;
	cli_warn("%s", msg);            /* fs/ messages name the source and partition */
}

/*
 * --opts for a capture: imagezip's scan and compression options (lib/cli/capture),
 * parsed as imagezip parses them. 0, or -1 with the reason in t->reason.
 */
static int capture_options(struct task *t, struct cli_capture *cap)
{
	static const struct option lopts[] = { CLI_CAPTURE_LONGOPTS, { NULL, 0, NULL, 0 } };
	const struct node_opts *o = t->o;
	char *argv[NODE_MAX_EXTRA + 2], msg[256];
	int c, rc = 0;

	cli_capture_init(cap);
	argv[0] = (char *)"capture";
	for (int k = 0; k < o->nextra; k++)
		argv[k + 1] = (char *)o->extra[k];
	argv[o->nextra + 1] = NULL;
	optind = 0;                    /* a new scan of a new argv (GNU getopt) */
	opterr = 0;
	while (rc == 0 && (c = getopt_long(o->nextra + 1, argv, "+" CLI_CAPTURE_SHORTOPTS, lopts,
					   NULL)) != -1) {
		rc = c == '?' ? 0 : cli_capture_option(cap, c, optarg, msg, sizeof(msg));
		if (rc == 0) {
			snprintf(msg, sizeof(msg), "'%s' is not an option of a capture (imagezip's "
				 "scan and compression options are)", argv[optind - 1]);
			rc = -1;
		} else {
			rc = rc < 0 ? -1 : 0;
		}
	}
	if (rc == 0 && optind < o->nextra + 1) {
		snprintf(msg, sizeof(msg), "'%s' is not an option", argv[optind]);
		rc = -1;
	}
	if (rc == 0)
		rc = cli_capture_done(cap, 0, msg, sizeof(msg));
	if (rc < 0)
		snprintf(t->reason, sizeof(t->reason), "ndzctl: --opts: %.140s", msg);
	return rc;
}

/* One capture: the disk scanned, then the capture job into the upload. 0, or -1 with t->reason. */
static int capture(struct task *t)
{
	struct upload up = { .t = t };
	struct ndz_capture_opts jo = { 0 };
	struct ndz_capture_result res;
	struct ndz_scan_result scan;
	struct cli_capture cap;
	struct ndz_error e = { 0 };
	struct ndz_io *src = NULL;
	int rc;

	t->reason[0] = '\0';
	if (capture_options(t, &cap) < 0)
		return -1;
	cap.scan.warn = scan_warn;
	memset(&scan, 0, sizeof(scan));
	rc = ndz_io_open_file(t->disk, NDZ_IO_READ, &src, &e);
	if (rc == 0)
		rc = ndz_scan(src, &cap.scan, &scan, &e);
	if (rc == 0) {
		jo.src = src;
		jo.name = t->disk;
		jo.scan = &scan;
		jo.zip = cap.zip;
		jo.out = (struct ndz_job_output){ upload_open, upload_commit, upload_abort, &up };
		jo.report = job_report;
		jo.report_ctx = t;
		rc = ndz_capture(&jo, &res, &e);
	}
	ndz_io_close(up.io);
	ndz_scan_result_release(&scan);
	ndz_io_close(src);
	if (rc < 0)
		snprintf(t->reason, sizeof(t->reason), "capture: %.150s", ndz_error_msg(&e));
	else
		say("stored as image '%s' on %s", t->image, t->master);
	return rc < 0 ? -1 : 0;
}

/*
 * One attempt: a capture in this process, or frisbee run to its end, its report
 * lines taken, progress sent. 0 when it succeeded, else -1 with t->reason.
 */
static int attempt(struct task *t)
{
	const char *argv[NODE_MAX_EXTRA + 32];
	char line[4096];
	size_t have = 0;
	int p[2], status;
	pid_t pid;

	if (t->kind == NDZ_LAB_CAPTURE)
		return capture(t);
	frisbee_args(t, argv, sizeof(argv) / sizeof(argv[0]));
	t->have_result = 0;
	t->reason[0] = '\0';
	if (pipe(p) < 0) {
		snprintf(t->reason, sizeof(t->reason), "ndzctl: pipe: %s", strerror(errno));
		return -1;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		snprintf(t->reason, sizeof(t->reason), "ndzctl: fork: %s", strerror(errno));
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		/* the child's stdout: our stderr (the console), never our result on stdout */
		if (dup2(p[1], 3) < 0 || dup2(STDERR_FILENO, STDOUT_FILENO) < 0)
			_exit(127);
		if (p[0] != 3)
			close(p[0]);
		if (p[1] != 3)
			close(p[1]);
		execvp(argv[0], (char *const *)argv);
		/* the channel's own result line: why there is no child */
		dprintf(3, "{\"program\": \"ndzctl\", \"result\": \"failed\", \"reason\": "
			"\"ndzctl: cannot run %s: %s\"}\n", argv[0], strerror(errno));
		_exit(127);
	}
	close(p[1]);
	for (;;) {
		struct pollfd pf = { .fd = p[0], .events = POLLIN };
		uint64_t now = ndz_now_ms();
		int wait_ms = (int)(t->last_report_ms + PROGRESS_MS > now ?
				    t->last_report_ms + PROGRESS_MS - now : 0);
		ssize_t k;

		if (wait_ms == 0) {
			report_progress(t);
			continue;
		}
		if (poll(&pf, 1, wait_ms) <= 0)
			continue;
		k = read(p[0], line + have, sizeof(line) - 1 - have);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			break;
		have += (size_t)k;
		for (;;) {
			char *nl = memchr(line, '\n', have);

			if (!nl) {
				if (have == sizeof(line) - 1)
					have = 0;      /* a line this long is not ours: dropped */
				break;
			}
			*nl = '\0';
			take_line(t, line);
			have -= (size_t)(nl + 1 - line);
			memmove(line, nl + 1, have);
		}
	}
	close(p[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
		if (t->have_result && t->result_ok)
			t->bytes = t->rbytes;
		return 0;
	}
	if (!t->reason[0]) {
		if (WIFEXITED(status))
			snprintf(t->reason, sizeof(t->reason), "%s: exit status %d", argv[0],
				 WEXITSTATUS(status));
		else
			snprintf(t->reason, sizeof(t->reason), "%s: killed by signal %d", argv[0],
				 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	}
	return -1;
}

/* The result to the master, three tries 2 s apart; a lost one leaves the disk as it is. */
static void report_result(struct task *t, int ok, uint64_t ms)
{
	struct ndz_ctl_labreq r = { .type = NDZ_CTL_REPORT };
	struct ndz_ctl_labrep rep;
	struct ndz_error e = { 0 };

	if (!t->lab)
		return;
	if (ok) {
		r.kind = NDZ_LAB_OK;
		r.bytes = r.total = t->bytes;
		r.ms = ms;
		r.skipped = t->held;
	} else {
		r.kind = NDZ_LAB_FAIL;
		snprintf(r.text, sizeof(r.text), "%s", t->reason);
	}
	for (int i = 0; i < 3; i++) {
		if (i)
			sleep_ms(2000);
		if (call(t, &r, &rep, &e) == 0) {
			say("result reported to master %s", t->master);
			return;
		}
	}
	cli_warn("the result could not be reported to master %s: %s", t->master,
		 ndz_error_msg(&e));
}

int node_run(const char *master, const char *mac, const char *disk,
	     const struct node_opts *o)
{
	struct task t = { .master = master, .macs = mac, .disk = disk, .o = o };
	struct ndz_error e = { 0 };
	uint64_t t0;
	int rc, n;

	t.lab = strcmp(mac, "-") != 0;
	if (t.lab && ndz_labcall_parse_mac(mac, t.mac, &e) != 0)
		cli_usage_error("node %s: %s", mac, ndz_error_msg(&e));
	signal(SIGPIPE, SIG_IGN);
	if (!t.lab) {
		t.kind = strcmp(o->task, "capture") == 0 ? NDZ_LAB_CAPTURE : NDZ_LAB_RELOAD;
		t.opts = (uint8_t)o->flags;
		snprintf(t.image, sizeof(t.image), "%s", o->image ? o->image : "");
	} else {
		for (n = 0;; n++) {
			say("asking master %s for the task of %s", master, mac);
			rc = ask(&t, &e);
			if (rc >= 0 || n >= o->retries)
				break;
			cli_warn("%s; asking again in %d s", ndz_error_msg(&e), RETRY_S);
			sleep(RETRY_S);
		}
		if (rc < 0) {
			printf("NDZ-RESULT: failed: %s\n", ndz_error_msg(&e));
			fflush(stdout);
			return NODE_NO_MASTER;
		}
		if (rc == 1) {
			say("no task");
			return NODE_NO_TASK;
		}
		say("task: %s %s%s%s%s", ndz_labcall_strtask(t.kind), t.image,
		    t.opts & NDZ_LAB_SEED ? " seed" : "", t.opts & NDZ_LAB_ZERO ? " zero" : "",
		    t.opts & NDZ_LAB_VERIFY ? " verify" : "");
	}
	t0 = ndz_now_ms();
	for (n = 0;; n++) {
		t.bytes = t.total = t.chunks_total = 0;
		t.held = 0;
		if (t.kind == NDZ_LAB_RELOAD && o->group)
			say("receiving group %s port %s onto %s", o->group, o->port, disk);
		else if (t.kind == NDZ_LAB_RELOAD)
			say("receiving image '%s' of master %s onto %s", t.image, master, disk);
		else
			say("capturing %s as image '%s' of master %s", disk, t.image, master);
		report_progress(&t);
		rc = attempt(&t);
		if (rc == 0 || n >= o->retries)
			break;
		cli_warn("attempt %d failed: %s; trying again in %d s (%d left)", n + 1, t.reason,
			 RETRY_S, o->retries - n);
		sleep(RETRY_S);
	}
	if (rc == 0) {
		char what[2 * NDZ_CTL_NAME_MAX + 64], held[80] = "";
		uint64_t ms = ndz_now_ms() - t0;

		report_result(&t, 1, ms);
		if (o->group)
			snprintf(what, sizeof(what), "group %s port %s", o->group, o->port);
		else
			snprintf(what, sizeof(what), "image '%s' of master %s", t.image, master);
		if (t.opts & NDZ_LAB_SEED)
			snprintf(held, sizeof(held), ", %llu of %llu chunks skipped (held by the disk)",
				 (unsigned long long)t.held, (unsigned long long)t.chunks_total);
		if (t.kind == NDZ_LAB_RELOAD && (t.opts & (NDZ_LAB_SEED | NDZ_LAB_VERIFY)))
			snprintf(held + strlen(held), sizeof(held) - strlen(held), ", verified");
		if (t.kind == NDZ_LAB_RELOAD)
			printf("NDZ-RESULT: ok: %s written to %s in %.1f s%s\n", what, disk,
			       (double)ms / 1000, held);
		else
			printf("NDZ-RESULT: ok: %s captured as %s in %.1f s\n", disk, what,
			       (double)ms / 1000);
	} else {
		report_result(&t, 0, 0);
		printf("NDZ-RESULT: failed: %s\n", t.reason);
	}
	if (fflush(stdout) != 0)
		return NODE_FAILED;
	return rc == 0 ? 0 : NODE_FAILED;
}
