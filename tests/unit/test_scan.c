/* Unit tests for fs/scan.c's findings: one line per filesystem, with what was done. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/err.h"
#include "core/io.h"
#include "core/le.h"
#include "scan.h"

#define VSIZE (4u << 20)

static char lines[4][2048];
static int nlines;

static void keep_warn(void *ctx, const char *msg)
{
	(void)ctx;
	if (nlines < 4)
		snprintf(lines[nlines], sizeof(lines[0]), "%s", msg);
	nlines++;
}

/* Scan vol (VSIZE bytes, no table) under name; the report's one entry in *rep. */
static void scan_named(uint8_t *vol, const char *name, struct ndz_scan_report *rep)
{
	struct ndz_scan_opts o;
	struct ndz_scan_result res;
	struct ndz_error err = { 0 };
	struct ndz_io *io;

	assert_int_equal(ndz_io_open_mem(vol, VSIZE, 0, &io, NULL), 0);
	free(io->name);
	io->name = strdup(name);
	assert_non_null(io->name);
	ndz_scan_opts_init(&o);
	o.warn = keep_warn;
	o.report = rep;
	nlines = 0;
	assert_int_equal(ndz_scan(io, &o, &res, &err), 0);
	assert_int_equal(rep->n, 1);
	ndz_scan_result_release(&res);
	ndz_io_close(io);
}

/* A FAT16 of 8192 sectors: two tables of 32 sectors, 512 root entries. */
static void make_fat16(uint8_t *v)
{
	memset(v, 0, VSIZE);
	v[0] = 0xeb;
	v[1] = 0x3c;
	v[2] = 0x90;
	put_le16(v + 11, 512);
	v[13] = 1;
	put_le16(v + 14, 1);
	v[16] = 2;
	put_le16(v + 17, 512);
	put_le16(v + 19, 8192);
	v[21] = 0xf8;
	put_le16(v + 22, 32);
	v[38] = 0x29;
	v[510] = 0x55;
	v[511] = 0xaa;
	for (int k = 0; k < 2; k++) {
		uint8_t *t = v + 512 + k * 32 * 512;

		put_le16(t, 0xfff8);
		put_le16(t + 2, 0xffff);
	}
}

/* Two findings of one filesystem: one line naming the source whole, the union. */
static void test_fat_findings_one_line(void **state)
{
	uint8_t *v = malloc(VSIZE);
	struct ndz_scan_report rep;
	char name[300], want[1024];

	(void)state;
	assert_non_null(v);
	/* a long path: once cut at 79 characters */
	memset(name, 'p', sizeof(name) - 1);
	name[0] = '/';
	name[sizeof(name) - 1] = 0;

	make_fat16(v);
	scan_named(v, name, &rep);
	assert_int_equal(nlines, 0);                 /* a sound one says nothing */
	assert_string_equal(rep.v[0].fs, "fat");
	assert_string_equal(rep.v[0].note, "");
	ndz_scan_report_release(&rep);

	v[37] = 1;                                   /* dirty */
	put_le16(v + 512 + 32 * 512 + 2 * 7, 0xffff); /* copy 1 holds a cluster copy 0 does not */
	scan_named(v, name, &rep);
	assert_int_equal(nlines, 1);
	snprintf(want, sizeof(want), "%s: fat: not cleanly unmounted (dirty bit set); allocation "
		 "table copy 1 differs from copy 0; imaging what either calls in use; taking the "
		 "union", name);
	assert_string_equal(lines[0], want);
	assert_int_equal(rep.v[0].how, NDZ_HOW_FS);
	assert_string_equal(rep.v[0].note, want + strlen(name) + 2);
	ndz_scan_report_release(&rep);
	free(v);
}

/* The volume taken raw: the findings before the failure and the failure, one line. */
static void test_raw_one_line(void **state)
{
	uint8_t *v = calloc(1, VSIZE);
	struct ndz_scan_report rep;

	(void)state;
	assert_non_null(v);
	scan_named(v, "blank.img", &rep);
	assert_int_equal(nlines, 1);
	assert_string_equal(lines[0], "blank.img: no filesystem recognized; taking it raw");
	assert_int_equal(rep.v[0].how, NDZ_HOW_RAW);
	assert_string_equal(rep.v[0].note, "no filesystem recognized; taking it raw");
	ndz_scan_report_release(&rep);

	/* FAT whose root directory does not fit its type, after a dirty bit */
	make_fat16(v);
	v[37] = 1;
	put_le16(v + 17, 0);
	scan_named(v, "f.img", &rep);
	assert_int_equal(nlines, 1);
	assert_string_equal(lines[0], "f.img: fat: not cleanly unmounted (dirty bit set); root "
			    "directory does not match the FAT type; taking it raw");
	assert_int_equal(rep.v[0].how, NDZ_HOW_RAW);
	ndz_scan_report_release(&rep);
	free(v);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fat_findings_one_line),
		cmocka_unit_test(test_raw_one_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
