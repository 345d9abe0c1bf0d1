/* Unit tests for lib/codec/job.c: the capture and restore jobs and their one report. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "codec/job.h"
#include "core/err.h"
#include "core/format.h"
#include "core/io.h"
#include "core/ranges.h"
#include "trust/index.h"
#include "trust/key.h"
#include "keyfix.h"

#define SECT 512u
#define SRC_BYTES (5u * 1024 * 1024)

static uint8_t src[SRC_BYTES];
static char dir[64], image[128], manifest[128], index_path[128];

/* What the report callback saw, in order. */
struct seen {
	char events[256];              /* one letter an event: S P F V W I E */
	size_t n;
	uint64_t last_bytes, total;
	int backwards, ok;
	uint32_t held;
	const char *start_phase, *of, *verb;
};

static void on_report(void *ctx, const struct ndz_job_report *r)
{
	struct seen *s = ctx;
	char c = "SPFWIE"[r->event];

	if (r->event == NDZ_JOB_PHASE)
		c = r->phase[0] == 'f' ? 'F' : 'V';
	/* a run of progress is one P */
	if (!(c == 'P' && s->n && s->events[s->n - 1] == 'P') && s->n + 1 < sizeof(s->events))
		s->events[s->n++] = c;
	switch (r->event) {
	case NDZ_JOB_START:
		s->total = r->total;
		s->start_phase = r->phase;
		s->of = r->of;
		s->verb = r->verb;
		break;
	case NDZ_JOB_PROGRESS:
		if (r->bytes < s->last_bytes)
			s->backwards = 1;
		s->last_bytes = r->bytes;
		break;
	case NDZ_JOB_END:
		s->ok = r->ok;
		s->held = r->held;
		break;
	default:
		break;
	}
}

/* The output: a file, the index and manifest checked to be in place at commit. */
struct out {
	struct ndz_io *io;
	int opened, committed, aborted, fail_commit;
	int index_there, manifest_there;
};

static int out_open(void *ctx, struct ndz_io **io, struct ndz_error *e)
{
	struct out *o = ctx;
	int rc = ndz_io_open_file(image, NDZ_IO_WRITE | NDZ_IO_CREATE, &o->io, e);

	o->opened = 1;
	*io = o->io;
	return rc;
}

static int out_commit(void *ctx, struct ndz_error *e)
{
	struct out *o = ctx;

	o->committed = 1;
	o->index_there = access(index_path, F_OK) == 0;
	o->manifest_there = access(manifest, F_OK) == 0;
	if (o->fail_commit)
		return ndz_error_set(e, NDZ_EIO, 0, "%s: the commit failed", image);
	return ndz_io_flush(o->io, e);
}

static void out_abort(void *ctx, struct ndz_error *e)
{
	struct out *o = ctx;

	(void)e;
	o->aborted = 1;
}

static int setup(void **state)
{
	uint64_t x = 88172645463325252ull;

	(void)state;
	/* half random, half text-like, so chunks compress to something real */
	for (size_t i = 0; i < SRC_BYTES; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		src[i] = i < SRC_BYTES / 2 ? (uint8_t)x : (uint8_t)("ndz job test "[i % 13]);
	}
	snprintf(dir, sizeof(dir), "/tmp/ndz-test-job.XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(image, sizeof(image), "%s/a.ndz", dir);
	snprintf(manifest, sizeof(manifest), "%s/a.ndz.manifest", dir);
	snprintf(index_path, sizeof(index_path), "%s/a.ndz.index", dir);
	return 0;
}

static int teardown(void **state)
{
	char cmd[160];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* The scan's decision: sectors [0, 2048) and [4096, 10240) of the source. */
static void decide(struct ndz_scan_result *scan)
{
	memset(scan, 0, sizeof(*scan));
	ndz_ranges_init(&scan->alloc);
	ndz_ranges_init(&scan->zero);
	assert_int_equal(ndz_ranges_add(&scan->alloc, 0, 2048, NULL), 0);
	assert_int_equal(ndz_ranges_add(&scan->alloc, 4096, 6144, NULL), 0);
	scan->bytes = SRC_BYTES;
	scan->image_kind = NDZ_KIND_WHOLE;
}

static int capture(struct out *o, struct seen *s, const struct ndz_key *sign,
		   struct ndz_capture_result *res, struct ndz_error *e)
{
	struct ndz_capture_opts jo = { 0 };
	struct ndz_scan_result scan;
	struct ndz_io *in;
	int rc;

	decide(&scan);
	assert_int_equal(ndz_io_open_mem(src, sizeof(src), 0, &in, NULL), 0);
	jo.src = in;
	jo.name = "src";
	jo.scan = &scan;
	ndz_zip_opts_init(&jo.zip);
	jo.sign = sign;
	jo.manifest = manifest;
	jo.index = index_path;
	jo.out = (struct ndz_job_output){ out_open, out_commit, out_abort, o };
	jo.report = on_report;
	jo.report_ctx = s;
	rc = ndz_capture(&jo, res, e);
	ndz_io_close(o->io);
	o->io = NULL;
	ndz_io_close(in);
	ndz_ranges_release(&scan.alloc);
	ndz_ranges_release(&scan.zero);
	return rc;
}

/* The capture: one report of start, progress, flush and end; index and manifest first. */
static void test_capture(void **state)
{
	struct ndz_capture_result res;
	struct ndz_error e = { 0 };
	struct ndz_key sec, pub;
	struct seen s = { 0 };
	struct out o = { 0 };
	struct ndz_index ix;

	(void)state;
	key_pair(&sec, &pub);
	assert_int_equal(capture(&o, &s, &sec, &res, &e), 0);
	s.events[s.n] = '\0';
	assert_string_equal(s.events, "SPFE");
	assert_string_equal(s.start_phase, "reading");
	assert_string_equal(s.of, "disk");
	assert_string_equal(s.verb, "read");
	assert_int_equal(s.total, 8192ull * SECT);
	assert_int_equal(s.last_bytes, 8192ull * SECT);
	assert_false(s.backwards);
	assert_true(s.ok);
	assert_true(o.committed && !o.aborted);
	assert_true(o.index_there && o.manifest_there);
	assert_int_equal(res.in_bytes, 8192ull * SECT);
	assert_int_equal(res.source_bytes, SRC_BYTES);
	assert_true(res.chunks >= 1);
	/* the index is signed, and of the image written */
	assert_int_equal(ndz_index_load(index_path, &pub, &ix, &e), 0);
	assert_int_equal(ix.chunks, res.chunks);
	ndz_index_release(&ix);
	ndz_key_wipe(&sec);
}

/* A commit that fails: the end says so, the output is aborted, index and manifest go. */
static void test_capture_fails(void **state)
{
	struct ndz_capture_result res;
	struct ndz_error e = { 0 };
	struct ndz_key sec;
	struct seen s = { 0 };
	struct out o = { .fail_commit = 1 };

	(void)state;
	unlink(index_path);
	unlink(manifest);
	assert_int_equal(ndz_key_generate(NDZ_KEY_SIGN_SECRET, &sec, NULL), 0);
	assert_int_equal(capture(&o, &s, &sec, &res, &e), NDZ_EIO);
	s.events[s.n] = '\0';
	assert_string_equal(s.events, "SPFE");
	assert_false(s.ok);
	assert_true(o.index_there && o.manifest_there);   /* in place before the commit */
	assert_true(o.aborted);
	assert_int_equal(access(index_path, F_OK), -1);   /* and removed after it failed */
	assert_int_equal(access(manifest, F_OK), -1);
	assert_non_null(strstr(ndz_error_msg(&e), "the commit failed"));
	ndz_key_wipe(&sec);
}

/* The restore's target: a memory disk. */
static uint8_t disk[SRC_BYTES];

static int target_open(void *ctx, const struct ndz_chunk_hdr *h0, struct ndz_io **io,
		       int *created, uint64_t *base, struct ndz_error *e)
{
	(void)h0;
	*created = 0;
	*base = 0;
	if (ndz_io_open_mem(disk, sizeof(disk), 1, io, e) < 0)
		return NDZ_ENOMEM;
	*(struct ndz_io **)ctx = *io;  /* the opener's: closed after the job */
	return 0;
}

static int restore(struct seen *s, int seed, int verify, const char *name,
		   struct ndz_restore_result *res, struct ndz_error *e)
{
	struct ndz_restore_opts jo = { 0 };
	struct ndz_key none = { 0 };
	struct ndz_io *in, *t = NULL;
	int rc;

	assert_int_equal(ndz_io_open_file(image, NDZ_IO_READ, &in, NULL), 0);
	jo.in = in;
	jo.name = name;
	jo.target = (struct ndz_job_target){ target_open, &t };
	ndz_unzip_opts_init(&jo.unzip);
	jo.pub = &none;
	jo.crypt = &none;
	jo.seed = seed;
	jo.verify_after = verify;
	jo.index = strcmp(name, "-") ? index_path : NULL;
	jo.report = on_report;
	jo.report_ctx = s;
	rc = ndz_restore(&jo, res, e);
	ndz_io_close(t);
	ndz_io_close(in);
	return rc;
}

/* The restore: the allocated sectors written; then seeded, every chunk held; verified. */
static void test_restore(void **state)
{
	struct ndz_restore_result res;
	struct ndz_error e = { 0 };
	struct seen s = { 0 };
	struct out o = { 0 };
	struct ndz_capture_result cres;

	(void)state;
	assert_int_equal(capture(&o, &s, NULL, &cres, &e), 0);
	memset(disk, 0xa5, sizeof(disk));
	memset(&s, 0, sizeof(s));
	assert_int_equal(restore(&s, 0, 0, image, &res, &e), 0);
	s.events[s.n] = '\0';
	assert_int_equal(s.events[0], 'S');
	assert_int_equal(s.events[s.n - 1], 'E');
	assert_string_equal(s.start_phase, "writing");
	assert_string_equal(s.verb, "written");
	assert_true(s.ok);
	assert_false(s.backwards);
	assert_int_equal(res.stats.chunks, cres.chunks);
	assert_int_equal(res.held, 0);
	assert_memory_equal(disk, src, 2048 * SECT);
	assert_memory_equal(disk + 4096 * SECT, src + 4096 * SECT, 6144 * SECT);
	assert_int_equal(disk[2048 * SECT], 0xa5);        /* a gap left as it was */
	/* again, seeded and verified: nothing written, every chunk held, read back */
	memset(&s, 0, sizeof(s));
	assert_int_equal(restore(&s, 1, 1, image, &res, &e), 0);
	s.events[s.n] = '\0';
	assert_non_null(strchr(s.events, 'V'));
	assert_int_equal(res.held, cres.chunks);
	assert_int_equal(s.held, cres.chunks);
	assert_int_equal(res.stats.chunks, 0);
	/* a changed byte: verify after the restore finds it held again (rewritten) */
	disk[17] ^= 1;
	memset(&s, 0, sizeof(s));
	assert_int_equal(restore(&s, 1, 1, image, &res, &e), 0);
	assert_int_equal(res.held + 1, cres.chunks);
	assert_memory_equal(disk, src, 2048 * SECT);
}

/* Options that do not fit the image come back as usage, before anything is written. */
static void test_restore_usage(void **state)
{
	struct ndz_restore_result res;
	struct ndz_error e = { 0 };
	struct seen s = { 0 };

	(void)state;
	memset(disk, 0x5a, sizeof(disk));
	assert_int_equal(restore(&s, 1, 0, "-", &res, &e), NDZ_EINVAL);
	assert_true(res.usage);
	assert_non_null(strstr(ndz_error_msg(&e), "needs --index FILE"));
	assert_int_equal(s.n, 0);                         /* no start, no end */
	assert_int_equal(disk[0], 0x5a);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_capture),
		cmocka_unit_test(test_capture_fails),
		cmocka_unit_test(test_restore),
		cmocka_unit_test(test_restore_usage),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
