/*
 * Unit tests for fs/xfs.c over a synthetic XFS (v4 and v5) built in memory:
 * 512-byte blocks, one or two AGs, a one- or two-level bnobt, a clean log.
 * With NDZ_XFS_SEEDS=DIR set it also writes the fuzz seeds there
 * (tests/fuzz/corpus/fuzz_xfs/ holds what it wrote).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/err.h"
#include "fs.h"
#include "core/io.h"
#include "fswalk.h"

#define VOL (1u << 20)
#define BS 512u
#define DBLOCKS 2048u
#define LOG_AGBNO 16u
#define LOG_BLOCKS 32u
#define ROOT_AGBNO 56u

#include "seedfile.h"                 /* write_seed */
#include "volfix.h"                   /* vol: VOL bytes */


struct shape {
	int v5, agcount, two_level;
};

static void pbe16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void pbe32(uint8_t *p, uint32_t v)
{
	pbe16(p, v >> 16);
	pbe16(p + 2, v & 0xffff);
}

static void pbe64(uint8_t *p, uint64_t v)
{
	pbe32(p, (uint32_t)(v >> 32));
	pbe32(p + 4, (uint32_t)v);
}

/* CRC32C of len bytes, the field at off taken as zero, stored little-endian there */
static void set_crc(uint8_t *p, size_t len, size_t off)
{
	uint32_t c = 0xffffffffu;

	memset(p + off, 0, 4);
	for (size_t i = 0; i < len; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	c = ~c;
	p[off] = (uint8_t)c;
	p[off + 1] = (uint8_t)(c >> 8);
	p[off + 2] = (uint8_t)(c >> 16);
	p[off + 3] = (uint8_t)(c >> 24);
}

static const uint8_t uuid[16] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

static uint32_t agblocks(const struct shape *s)
{
	return DBLOCKS / (uint32_t)s->agcount;
}

static uint8_t *blk(const struct shape *s, uint32_t agno, uint32_t agbno)
{
	return vol + ((size_t)agno * agblocks(s) + agbno) * BS;
}

/* A bnobt block at agbno: level, records (pairs) or child pointers. */
static void btree_block(const struct shape *s, uint32_t agno, uint32_t agbno, uint32_t level,
			const uint32_t *v, uint32_t n)
{
	uint8_t *b = blk(s, agno, agbno);
	uint32_t hdr = s->v5 ? 56 : 16, max = (BS - hdr) / 12;

	memset(b, 0, BS);
	pbe32(b, s->v5 ? 0x41423342u : 0x41425442u);
	pbe16(b + 4, level);
	pbe16(b + 6, n);
	pbe32(b + 8, 0xffffffffu);
	pbe32(b + 12, 0xffffffffu);
	for (uint32_t i = 0; i < n; i++) {
		if (level == 0) {
			pbe32(b + hdr + 8 * i, v[2 * i]);
			pbe32(b + hdr + 8 * i + 4, v[2 * i + 1]);
		} else {
			pbe32(b + hdr + 8 * i, 0);     /* keys are not read */
			pbe32(b + hdr + 8 * max + 4 * i, v[i]);
		}
	}
	if (s->v5) {
		pbe64(b + 16, (((uint64_t)agno * agblocks(s)) + agbno) * BS / 512);
		memcpy(b + 32, uuid, 16);
		pbe32(b + 48, agno);
		set_crc(b, BS, 52);
	}
}

/* The by-size tree: one leaf at block 5 with the same records (already in size order). */
static void cnt_leaf(const struct shape *s, uint32_t agno, const uint32_t *v, uint32_t n)
{
	uint8_t *b = blk(s, agno, 5);

	btree_block(s, agno, 5, 0, v, n);
	pbe32(b, s->v5 ? 0x41423343u : 0x41425443u);
	if (s->v5)
		set_crc(b, BS, 52);
}

static void agf(const struct shape *s, uint32_t agno, uint32_t levels, uint32_t freeblks,
		uint32_t longest)
{
	uint8_t *a = blk(s, agno, 1);

	memset(a, 0, BS);
	pbe32(a, 0x58414746u);
	pbe32(a + 4, 1);
	pbe32(a + 8, agno);
	pbe32(a + 12, agblocks(s));
	pbe32(a + 16, 4);              /* bnobt root */
	pbe32(a + 20, 5);
	pbe32(a + 28, levels);
	pbe32(a + 32, 1);
	pbe32(a + 48, 2);              /* flcount */
	pbe32(a + 52, freeblks);
	pbe32(a + 56, longest);
	if (s->v5) {
		memcpy(a + 64, uuid, 16);
		set_crc(a, BS, 216);
	}
}

static void superblock(const struct shape *s)
{
	uint8_t *sb = vol;
	uint32_t agb = agblocks(s);

	memset(sb, 0, BS);
	pbe32(sb, 0x58465342u);
	pbe32(sb + 4, BS);
	pbe64(sb + 8, DBLOCKS);
	memcpy(sb + 32, uuid, 16);
	pbe64(sb + 48, LOG_AGBNO);     /* logstart: AG 0 */
	pbe64(sb + 56, ROOT_AGBNO << 1);
	pbe32(sb + 84, agb);
	pbe32(sb + 88, (uint32_t)s->agcount);
	pbe32(sb + 96, LOG_BLOCKS);
	pbe16(sb + 100, s->v5 ? 0xb4a5 : 0x3404);
	pbe16(sb + 102, 512);
	pbe16(sb + 104, 256);
	pbe16(sb + 106, 2);
	sb[120] = 9;
	sb[121] = 9;
	sb[122] = 8;
	sb[123] = 1;
	sb[124] = agb == 2048 ? 11 : 10;
	if (s->v5) {
		pbe32(sb + 212, 0x5);  /* finobt, reflink */
		pbe32(sb + 216, 0x1);  /* ftype */
		set_crc(sb, BS, 224);
	}
}

/* A clean log: an unmount record at its start, nothing written after it. */
static void clean_log(void)
{
	uint8_t *l = vol + (size_t)LOG_AGBNO * BS;

	memset(l, 0, (size_t)LOG_BLOCKS * BS);
	pbe32(l, 0xfeedbabeu);
	pbe32(l + 4, 1);               /* cycle */
	pbe32(l + 8, 2);               /* version */
	pbe32(l + 12, 512);            /* len */
	pbe64(l + 16, (uint64_t)1 << 32);
	pbe64(l + 24, (uint64_t)1 << 32);
	pbe32(l + 40, 1);              /* one op */
	memcpy(l + 304, uuid, 16);
	pbe32(l + 320, 32768);
	pbe32(l + 512, 1);             /* the data block's cycle stamp */
	l[512 + 9] = 0x20;             /* XLOG_UNMOUNT_TRANS */
}

/* The whole filesystem: AG 0 frees [64,100) and [120,end), AG 1 [8,end). */
static void make_xfs(const struct shape *s)
{
	uint32_t agb = agblocks(s);
	uint32_t recs[4] = { 64, 36, 120, agb - 120 };

	memset(vol, 0, VOL);
	superblock(s);
	clean_log();
	if (s->two_level) {
		uint32_t kids[2] = { 6, 7 };

		btree_block(s, 0, 4, 1, kids, 2);
		btree_block(s, 0, 6, 0, recs, 1);
		btree_block(s, 0, 7, 0, recs + 2, 1);
	} else {
		btree_block(s, 0, 4, 0, recs, 2);
	}
	cnt_leaf(s, 0, recs, 2);
	agf(s, 0, s->two_level ? 2 : 1, 36 + agb - 120, agb - 120);
	if (s->agcount == 2) {
		uint32_t r1[2] = { 8, agb - 8 };

		memcpy(blk(s, 1, 0), vol, BS);
		btree_block(s, 1, 4, 0, r1, 1);
		cnt_leaf(s, 1, r1, 1);
		agf(s, 1, 1, agb - 8, agb - 8);
	}
}

/* open and walk vol; returns the first error, or 0 with g filled */
static int run(struct got *g, struct ndz_error *err)
{
	struct ndz_fs_stats st;
	int rc = fs_walk_mem(&ndz_fs_xfs, vol, VOL, g, &st, err);

	if (rc == 0)
		assert_int_equal(st.fs_bytes, (uint64_t)DBLOCKS * BS);
	return rc;
}

static void expect_ok(const struct shape *s)
{
	struct ndz_error err = { 0 };
	struct got g;
	uint32_t agb = agblocks(s);

	assert_int_equal(run(&g, &err), 0);
	/* AG 0: [0,64) and [100,120) kept, then the empty tail; AG 1: [0,8) */
	assert_int_equal(g.off[0], 0);
	assert_int_equal(g.len[0], 64 * BS);
	assert_int_equal(g.off[1], 100 * BS);
	assert_int_equal(g.len[1], 20 * BS);
	if (s->agcount == 2) {
		assert_int_equal(g.n, 3);
		assert_int_equal(g.off[2], (uint64_t)agb * BS);
		assert_int_equal(g.len[2], 8 * BS);
	} else {
		assert_int_equal(g.n, 2);
	}
}

static const struct shape shapes[] = {
	{ 0, 1, 0 }, { 1, 1, 0 }, { 0, 2, 0 }, { 1, 2, 1 }, { 0, 1, 1 },
};

static void test_walk(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++) {
		make_xfs(&shapes[i]);
		expect_ok(&shapes[i]);
	}
}

static void probe_rejects(void **state)
{
	struct ndz_io *io;

	(void)state;
	memset(vol, 0, VOL);
	assert_int_equal(ndz_io_open_mem(vol, VOL, 0, &io, NULL), 0);
	assert_int_equal(ndz_fs_xfs.probe(io), 0);
	make_xfs(&shapes[0]);
	assert_int_equal(ndz_fs_xfs.probe(io), 1);
	ndz_io_close(io);
}

/* damage after make_xfs(s) must give NDZ_EFS with msg in the message */
static void expect_bad(const char *msg)
{
	struct ndz_error err = { 0 };
	struct got g;

	assert_int_equal(run(&g, &err), NDZ_EFS);
	if (!strstr(ndz_error_msg(&err), msg))
		fail_msg("want '%s', got '%s'", msg, ndz_error_msg(&err));
}

static void test_damage(void **state)
{
	struct shape v4 = { 0, 2, 1 }, v5 = { 1, 2, 1 };
	uint32_t kids[2] = { 6, 6 }, self[1] = { 4 }, recs[4] = { 64, 36, 30, 10 };
	uint32_t over_log[2] = { 20, 4 }, over_root[2] = { 50, 10 };

	(void)state;
	make_xfs(&v4);
	pbe32(blk(&v4, 0, 5) + 16 + 4, 37);    /* cntbt: one extent a block longer */
	expect_bad("by-size free-space btree disagrees");
	make_xfs(&v4);
	cnt_leaf(&v4, 0, recs, 2);             /* cntbt out of (length, start) order */
	expect_bad("by-size free extents out of order");
	make_xfs(&v4);
	pbe32(blk(&v4, 1, 1) + 52, 1017);      /* AG 1 freeblks one too many */
	expect_bad("AG 1: free-space btree holds");
	make_xfs(&v4);
	btree_block(&v4, 0, 4, 1, kids, 2);    /* one leaf reached twice */
	expect_bad("out of order");
	make_xfs(&v4);
	btree_block(&v4, 0, 4, 1, self, 1);    /* a node pointing at itself */
	expect_bad("bad magic or level");
	make_xfs(&v4);
	btree_block(&v4, 0, 6, 0, recs, 2);    /* records out of order */
	expect_bad("out of order");
	make_xfs(&v4);
	btree_block(&v4, 0, 6, 0, over_log, 1);
	expect_bad("overlaps the log");
	make_xfs(&v4);
	btree_block(&v4, 0, 6, 0, over_root, 1);
	expect_bad("root inode");
	make_xfs(&v4);
	pbe32(blk(&v4, 0, 6) + 16 + 4, 5000);  /* beyond the AG */
	expect_bad("out of range");
	make_xfs(&v4);
	pbe32(blk(&v4, 0, 1) + 16, 3000);      /* root pointer beyond the AG */
	expect_bad("out of range");
	make_xfs(&v4);
	pbe32(blk(&v4, 0, 1) + 28, 12);        /* levels */
	expect_bad("AGF counts");
	make_xfs(&v4);
	pbe32(vol + 88, 3);                    /* agcount */
	expect_bad("block count");
	make_xfs(&v4);
	pbe32(vol + 4, 1000);                  /* block size */
	expect_bad("block size");
	make_xfs(&v4);
	pbe64(vol + 48, 0);                    /* external log */
	expect_bad("external log");
	make_xfs(&v4);
	vol[LOG_AGBNO * BS + 512 + 9] = 0;     /* last record is not an unmount */
	expect_bad("log is dirty");
	make_xfs(&v4);
	pbe32(vol + LOG_AGBNO * BS + 40, 2);   /* two ops */
	expect_bad("log is dirty");
	make_xfs(&v4);
	pbe32(vol + (LOG_AGBNO + 9) * BS, 1);  /* a stray block of this cycle */
	expect_bad("cycle numbers");
	make_xfs(&v4);
	memset(vol + LOG_AGBNO * BS, 0, LOG_BLOCKS * BS);
	expect_bad("log is empty");

	make_xfs(&v5);
	vol[100]++;                            /* superblock checksum */
	expect_bad("superblock checksum");
	make_xfs(&v5);
	blk(&v5, 1, 1)[60]++;                  /* AGF checksum */
	expect_bad("AGF checksum");
	make_xfs(&v5);
	blk(&v5, 0, 7)[200]++;                 /* bnobt leaf checksum */
	expect_bad("bad header or checksum");
	make_xfs(&v5);
	pbe32(vol + 216, 0x1000);              /* unknown incompat feature */
	set_crc(vol, BS, 224);
	expect_bad("unknown incompatible");
	make_xfs(&v5);
	pbe32(vol + 216, 0x11);                /* needs repair */
	set_crc(vol, BS, 224);
	expect_bad("needs repair");
	make_xfs(&v5);
	pbe32(vol + 220, 1);                   /* log incompat */
	set_crc(vol, BS, 224);
	expect_bad("log holds");
}

/* NDZ_XFS_SEEDS=DIR: write the one-AG volumes' used part as fuzz seeds */
static void write_seeds(void)
{
	const char *dir = getenv("NDZ_XFS_SEEDS");
	static const struct shape seeds[] = { { 0, 1, 0 }, { 0, 1, 1 }, { 1, 1, 1 } };
	static const char *const names[] = { "v4", "v4-2level", "v5-2level" };

	if (!dir)
		return;
	for (size_t i = 0; i < 3; i++) {
		make_xfs(&seeds[i]);
		write_seed(dir, names[i], vol, (LOG_AGBNO + LOG_BLOCKS) * BS);
	}
}

static int teardown(void **state)
{
	write_seeds();
	return vol_teardown(state);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_walk),
		cmocka_unit_test(probe_rejects),
		cmocka_unit_test(test_damage),
	};

	return cmocka_run_group_tests(tests, vol_setup, teardown);
}
