/* Unit tests for fs/ffs.c and fs/scan.c over a synthetic UFS2 built in memory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/err.h"
#include "fs.h"
#include "core/io.h"
#include "core/le.h"
#include "core/ranges.h"
#include "scan.h"

#define VOL (4u << 20)                 /* 4096 fragments of 1 KiB, 2 cylinder groups */
#define FPG 2048u
#define CBLKNO 80u
#define FREEOFF 168u

#include "volfix.h"                   /* vol: VOL bytes */


static void set_free(uint8_t *cg, uint32_t from, uint32_t to)
{
	for (uint32_t i = from; i < to; i++)
		cg[FREEOFF + i / 8] |= (uint8_t)(1u << (i % 8));
}

static void make_cg(uint32_t c, uint32_t used_to, uint32_t nfree)
{
	uint8_t *cg = vol + ((size_t)c * FPG + CBLKNO) * 1024;

	memset(cg, 0, 8192);
	put_le32(cg + 4, 0x090255);
	put_le32(cg + 12, c);
	put_le32(cg + 20, FPG);
	put_le32(cg + 28, 0);          /* nbfree */
	put_le32(cg + 36, nfree);      /* nffree */
	put_le32(cg + 96, FREEOFF);
	set_free(cg, used_to, FPG);
}

/* UFS2, superblock at 65536, bsize 8192, fsize 1024. */
static void make_ufs(void)
{
	uint8_t *sb = vol + 65536;

	memset(vol, 0, VOL);
	put_le32(sb + 8, 72);          /* sblkno */
	put_le32(sb + 12, CBLKNO);
	put_le32(sb + 16, 88);         /* iblkno */
	put_le32(sb + 20, 120);        /* dblkno */
	put_le32(sb + 44, 2);          /* ncg */
	put_le32(sb + 48, 8192);
	put_le32(sb + 52, 1024);
	put_le32(sb + 56, 8);
	put_le32(sb + 104, 2048);      /* sbsize */
	put_le32(sb + 160, 8192);      /* cgsize */
	put_le32(sb + 188, FPG);
	put_le64(sb + 1000, 65536);    /* sblockloc */
	put_le64(sb + 1080, 2 * FPG);  /* size */
	put_le32(sb + 1372, 0x19540119);
	sb[209] = 1;                   /* fs_clean */
	make_cg(0, 200, FPG - 200 - 4);
	/* frags 500-503 of group 0 in use */
	vol[(CBLKNO * 1024) + FREEOFF + 500 / 8] &= (uint8_t)~0xf0;
	make_cg(1, 120, FPG - 120);
}

struct got {
	struct ndz_ranges r;
};

static int collect(void *ctx, uint64_t off, uint64_t len)
{
	struct got *g = ctx;

	assert_int_equal(off % 512, 0);
	assert_int_equal(len % 512, 0);
	return ndz_ranges_add(&g->r, off / 512, len / 512, NULL);
}

static int walk_ufs(struct got *g, struct ndz_error *err)
{
	struct ndz_fs_opts o = { 0 };
	struct ndz_fs_stats st;
	struct ndz_io *io;
	void *fs;
	int rc;

	ndz_ranges_init(&g->r);
	ndz_error_clear(err);           /* the first error wins: each walk starts clear */
	assert_int_equal(ndz_io_open_mem(vol, VOL, 0, &io, NULL), 0);
	rc = ndz_fs_ufs.probe(io);
	if (rc == 1)
		rc = ndz_fs_ufs.open(io, &o, &fs, err);
	else
		rc = -100;
	if (rc == 0) {
		rc = ndz_fs_ufs.walk(fs, collect, g, &st, err);
		ndz_fs_ufs.close(fs);
		ndz_ranges_normalize(&g->r);
	}
	ndz_io_close(io);
	return rc;
}

static void test_walk(void **state)
{
	struct got g;
	struct ndz_error err = { 0 };

	(void)state;
	make_ufs();
	assert_int_equal(walk_ufs(&g, &err), 0);
	assert_int_equal(g.r.n, 4);
	assert_int_equal(g.r.v[0].start, 0);
	assert_int_equal(g.r.v[0].count, 400);       /* fragments 0-199 */
	assert_int_equal(g.r.v[1].start, 1000);
	assert_int_equal(g.r.v[1].count, 8);         /* fragments 500-503 */
	assert_int_equal(g.r.v[2].start, 2 * FPG);
	assert_int_equal(g.r.v[2].count, 240);       /* group 1's metadata */
	assert_int_equal(g.r.v[3].start, VOL / 512 - 1);  /* newfs' last sector */
	ndz_ranges_release(&g.r);
}

static void test_damage(void **state)
{
	struct got g;
	struct ndz_error err = { 0 };

	(void)state;
	make_ufs();
	vol[(FPG + CBLKNO) * 1024 + 4] = 0;
	assert_int_equal(walk_ufs(&g, &err), NDZ_EFS);
	assert_non_null(strstr(ndz_error_msg(&err), "cylinder group 1: bad magic"));
	ndz_ranges_release(&g.r);

	make_ufs();
	vol[CBLKNO * 1024 + FREEOFF + 100] = 0;      /* free fragments marked in use */
	assert_int_equal(walk_ufs(&g, &err), NDZ_EFS);
	assert_non_null(strstr(ndz_error_msg(&err), "free counts disagree"));
	ndz_ranges_release(&g.r);

	make_ufs();
	put_le32(vol + 65536 + 52, 2048);            /* fsize != bsize / frag */
	assert_int_equal(walk_ufs(&g, &err), NDZ_EFS);
	ndz_ranges_release(&g.r);

	make_ufs();
	put_le64(vol + 65536 + 1000, 8192);          /* UFS2 not where it says it is */
	assert_int_equal(walk_ufs(&g, &err), -100);
	ndz_ranges_release(&g.r);
}

static int nwarn;

static void count_warn(void *ctx, const char *msg)
{
	(void)ctx;
	print_message("warning: %s\n", msg);
	nwarn++;
}

/* The synthetic UFS2 as partition 2 of an MBR disk, with Linux swap as partition 1. */
static void test_scan_disk(void **state)
{
	size_t dsize = 16u << 20;
	uint8_t *d = calloc(1, dsize);
	struct ndz_scan_opts o;
	struct ndz_scan_result res;
	struct ndz_scan_report rep;
	struct ndz_io *io;
	struct ndz_error err = { 0 };

	(void)state;
	assert_non_null(d);
	make_ufs();
	memcpy(d + 8192 * 512, vol, VOL);
	memcpy(d + 2048 * 512 + 4086, "SWAPSPACE2", 10);
	d[446 + 4] = 0x82;
	put_le32(d + 446 + 8, 2048);
	put_le32(d + 446 + 12, 4096);
	d[446 + 16 + 4] = 0xa9;         /* NetBSD: probed, found to be UFS */
	put_le32(d + 446 + 16 + 8, 8192);
	put_le32(d + 446 + 16 + 12, VOL / 512);
	d[446 + 32 + 4] = 0xda;         /* unknown */
	put_le32(d + 446 + 32 + 8, 20480);
	put_le32(d + 446 + 32 + 12, 1024);
	d[510] = 0x55;
	d[511] = 0xaa;
	assert_int_equal(ndz_io_open_mem(d, dsize, 0, &io, NULL), 0);

	ndz_scan_opts_init(&o);
	o.min_free = 0;
	o.warn = count_warn;
	o.report = &rep;
	nwarn = 0;
	assert_int_equal(ndz_scan(io, &o, &res, &err), 0);
	assert_int_equal(nwarn, 1);                  /* partition 3 is unknown */
	assert_int_equal(rep.n, 3);
	assert_string_equal(rep.v[0].fs, "swap");
	assert_int_equal(rep.v[0].used_bytes, 4096);
	assert_string_equal(rep.v[1].fs, "ufs");
	assert_int_equal(rep.v[2].how, NDZ_HOW_RAW);
	/* gap + swap page, UFS ranges at 8192, partition 3 whole */
	assert_int_equal(res.alloc.v[0].start, 0);
	assert_int_equal(res.alloc.v[0].count, 2048 + 8);
	assert_int_equal(res.alloc.v[1].start, 8192);
	assert_int_equal(res.alloc.v[1].count, 400);
	assert_int_equal(res.alloc.v[res.alloc.n - 1].start, 20480);
	assert_int_equal(res.alloc.v[res.alloc.n - 1].count, 1024);
	ndz_scan_result_release(&res);
	ndz_scan_report_release(&rep);

	/* -I 3, -R 1, -S 2=swap (not swap: raw with a warning), min_free 1 MiB */
	assert_int_equal(ndz_scan_override_parse(&o, NDZ_SCAN_IGNORE, "3"), 0);
	assert_int_equal(ndz_scan_override_parse(&o, NDZ_SCAN_RAW, "1"), 0);
	assert_int_equal(ndz_scan_override_parse(&o, NDZ_SCAN_FORCE, "2=swap"), 0);
	assert_int_equal(ndz_scan_override_parse(&o, NDZ_SCAN_FORCE, "2=zfs"), NDZ_EINVAL);
	assert_int_equal(ndz_scan_override_parse(&o, NDZ_SCAN_RAW, "x"), NDZ_EINVAL);
	nwarn = 0;
	assert_int_equal(ndz_scan(io, &o, &res, &err), 0);
	assert_int_equal(nwarn, 1);
	assert_int_equal(res.alloc.n, 2);            /* free space between partitions left out */
	assert_int_equal(res.alloc.v[0].start, 0);
	assert_int_equal(res.alloc.v[0].count, 2048 + 4096);
	assert_int_equal(res.alloc.v[1].start, 8192);
	assert_int_equal(res.alloc.v[1].count, VOL / 512);
	assert_int_equal(rep.v[2].how, NDZ_HOW_IGNORED);
	ndz_scan_result_release(&res);
	ndz_scan_report_release(&rep);

	/* BSD partitions inside a slice are named by number and letter */
	{
		struct ndz_scan_opts po;

		ndz_scan_opts_init(&po);
		assert_int_equal(ndz_scan_override_parse(&po, NDZ_SCAN_RAW, "3a"), 0);
		assert_int_equal(ndz_scan_override_parse(&po, NDZ_SCAN_FORCE, "12d=ufs"), 0);
		assert_int_equal(po.noverrides, 2);
		assert_int_equal(po.overrides[0].index, 3);
		assert_int_equal(po.overrides[0].sub, 1);
		assert_int_equal(po.overrides[1].index, 12);
		assert_int_equal(po.overrides[1].sub, 4);
		assert_string_equal(po.overrides[1].fstype, "ufs");
		assert_int_equal(ndz_scan_override_parse(&po, NDZ_SCAN_RAW, "0a"), NDZ_EINVAL);
		assert_int_equal(ndz_scan_override_parse(&po, NDZ_SCAN_RAW, "3A"), NDZ_EINVAL);
		assert_int_equal(ndz_scan_override_parse(&po, NDZ_SCAN_RAW, "3ab"), NDZ_EINVAL);
		assert_int_equal(ndz_scan_override_parse(&po, NDZ_SCAN_FORCE, "3a"), NDZ_EINVAL);
		assert_int_equal(po.noverrides, 2);
	}

	/* -s 2: the UFS alone, relative to its start */
	ndz_scan_opts_init(&o);
	o.min_free = 0;
	o.partition = 2;
	assert_int_equal(ndz_scan(io, &o, &res, &err), 0);
	assert_int_equal(res.base, 8192 * 512);
	assert_int_equal(res.bytes, VOL);
	assert_int_equal(res.part_index, 2);
	assert_int_equal(res.part_type, 0xa9);
	assert_int_equal(res.part_start, 8192);
	assert_int_equal(res.alloc.v[0].start, 0);
	assert_int_equal(res.alloc.v[0].count, 400);
	ndz_scan_result_release(&res);
	o.partition = 4;
	assert_int_equal(ndz_scan(io, &o, &res, &err), NDZ_ENOENT);
	assert_non_null(strstr(ndz_error_msg(&err), "partition 4: no such partition"));
	ndz_io_close(io);
	free(d);
}

/* Space a partition holds after its filesystem is kept: nobody vouched for it. */
static void test_scan_keeps_tail(void **state)
{
	size_t dsize = 8u << 20;
	uint32_t start = 2048, extra = 64;
	uint8_t *d = calloc(1, dsize);
	struct ndz_scan_opts o;
	struct ndz_scan_result res;
	struct ndz_io *io;
	struct ndz_error err = { 0 };

	(void)state;
	assert_non_null(d);
	make_ufs();
	memcpy(d + (size_t)start * 512, vol, VOL);
	d[446 + 4] = 0xa9;
	put_le32(d + 446 + 8, start);
	put_le32(d + 446 + 12, VOL / 512 + extra);
	d[510] = 0x55;
	d[511] = 0xaa;
	assert_int_equal(ndz_io_open_mem(d, dsize, 0, &io, NULL), 0);
	ndz_scan_opts_init(&o);
	o.min_free = 0;
	nwarn = 0;
	o.warn = count_warn;
	assert_int_equal(ndz_scan(io, &o, &res, &err), 0);
	assert_int_equal(nwarn, 0);
	/* newfs' last sector, then the partition's tail after the filesystem */
	assert_int_equal(res.alloc.v[res.alloc.n - 1].start, start + VOL / 512 - 1);
	assert_int_equal(res.alloc.v[res.alloc.n - 1].count, 1 + extra);
	ndz_scan_result_release(&res);
	ndz_io_close(io);
	free(d);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walk),
		cmocka_unit_test(test_damage),
		cmocka_unit_test(test_scan_disk),
		cmocka_unit_test(test_scan_keeps_tail),
	};

	return cmocka_run_group_tests(tests, vol_setup, vol_teardown);
}
