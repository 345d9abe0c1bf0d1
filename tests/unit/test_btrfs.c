/*
 * Unit tests for fs/btrfs.c over a synthetic one-device btrfs built in memory:
 * a DUP metadata/system chunk holding the chunk, root and extent trees (one
 * leaf each) and a SINGLE data chunk with one extent. With NDZ_BTRFS_SEEDS=DIR
 * set it also writes a small variant there as a fuzz seed
 * (tests/fuzz/corpus/fuzz_btrfs/ holds what it wrote).
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
#include "core/le.h"

#define VOL (4u << 20)
#define NODE 4096u
#define SB 65536u
#define LOG_A 0x1000000ull             /* logical start of the metadata chunk */
#define LOG_B 0x2000000ull             /* logical start of the data chunk */
#define DATA_OFF 16384u
#define DATA_LEN 32768u

#include "seedfile.h"                 /* write_seed */
#include "volfix.h"                   /* vol: VOL bytes */

static uint32_t size;                  /* of the filesystem: VOL, or 1 MiB for the seed */

struct geo {
	uint64_t a0, a1, b, len;       /* physical stripes; chunk length */
};

static const uint8_t fsid[16] = { 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5, 6 };

static uint32_t crc32c(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;

	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
	}
	return ~c;
}

static void seal(uint8_t *p, size_t n)
{
	memset(p, 0, 32);
	put_le32(p, crc32c(p + 32, n - 32));
}

static void key(uint8_t *k, uint64_t obj, uint8_t type, uint64_t off)
{
	put_le64(k, obj);
	k[8] = type;
	put_le64(k + 9, off);
}

/* chunk item (48 bytes + stripes) at d; returns its length */
static uint32_t chunk_item(uint8_t *d, uint64_t len, uint64_t type, const uint64_t *phys, int n)
{
	memset(d, 0, 48 + 32u * n);
	put_le64(d, len);
	put_le64(d + 8, 2);
	put_le64(d + 16, 65536);
	put_le64(d + 24, type);
	put_le32(d + 32, 65536);
	put_le32(d + 36, 65536);
	put_le32(d + 40, 4096);
	put_le16(d + 44, (uint16_t)n);
	put_le16(d + 46, 1);
	for (int i = 0; i < n; i++) {
		put_le64(d + 48 + 32 * i, 1);
		put_le64(d + 48 + 32 * i + 8, phys[i]);
	}
	return 48 + 32u * n;
}

struct item {
	uint64_t obj, off;
	uint8_t type;
	const uint8_t *data;
	uint32_t size;
};

/* a leaf at logical l (both DUP copies) holding items */
static void leaf(const struct geo *g, uint64_t l, uint64_t owner, const struct item *it, int n)
{
	uint8_t b[NODE];
	uint32_t end = NODE - 101;

	memset(b, 0, sizeof(b));
	memcpy(b + 0x20, fsid, 16);
	put_le64(b + 0x30, l);
	put_le64(b + 0x50, 7);
	put_le64(b + 0x58, owner);
	put_le32(b + 0x60, (uint32_t)n);
	b[0x64] = 0;
	for (int i = 0; i < n; i++) {
		uint8_t *e = b + 101 + 25 * i;

		end -= it[i].size;
		key(e, it[i].obj, it[i].type, it[i].off);
		put_le32(e + 17, end);
		put_le32(e + 21, it[i].size);
		memcpy(b + 101 + end, it[i].data, it[i].size);
	}
	seal(b, NODE);
	memcpy(vol + g->a0 + (l - LOG_A), b, NODE);
	memcpy(vol + g->a1 + (l - LOG_A), b, NODE);
}

static void make_btrfs(const struct geo *g, uint32_t fs_size)
{
	uint8_t *s = vol + SB, ca[128], cb[128], ri[439];
	uint64_t pa[2] = { g->a0, g->a1 }, pb[1] = { g->b };
	uint32_t la, lb;
	uint8_t none[1] = { 0 };

	size = fs_size;
	memset(vol, 0, VOL);
	la = chunk_item(ca, g->len, 0x2 | 0x4 | 0x20, pa, 2);
	lb = chunk_item(cb, g->len, 0x1, pb, 1);
	/* the superblock */
	memcpy(s + 0x20, fsid, 16);
	put_le64(s + 0x30, SB);
	memcpy(s + 0x40, "_BHRfS_M", 8);
	put_le64(s + 0x38, 1);                 /* written */
	put_le64(s + 0x48, 7);
	put_le64(s + 0x50, LOG_A + NODE);      /* root tree */
	put_le64(s + 0x58, LOG_A);             /* chunk tree */
	put_le64(s + 0x70, fs_size);
	put_le64(s + 0x78, 3 * NODE + DATA_LEN);
	put_le64(s + 0x88, 1);
	put_le32(s + 0x90, 4096);
	put_le32(s + 0x94, NODE);
	put_le32(s + 0xa0, 17 + la);
	put_le64(s + 0xbc, 0x1 | 0x40 | 0x100 | 0x200);
	put_le64(s + 0xc9, 1);                 /* devid */
	put_le64(s + 0xc9 + 8, fs_size);
	key(s + 0x32b, 256, 228, LOG_A);
	memcpy(s + 0x32b + 17, ca, la);
	seal(s, 4096);
	/* chunk tree, root tree, extent tree: one leaf each */
	{
		struct item c[2] = { { 256, LOG_A, 228, ca, la }, { 256, LOG_B, 228, cb, lb } };

		leaf(g, LOG_A, 3, c, 2);
	}
	memset(ri, 0, sizeof(ri));
	put_le64(ri + 176, LOG_A + 2 * NODE);
	ri[238] = 0;
	{
		struct item r[1] = { { 2, 0, 132, ri, sizeof(ri) } };

		leaf(g, LOG_A + NODE, 1, r, 1);
	}
	{
		uint8_t ext[24];
		struct item e[4] = {
			{ LOG_A, 0, 169, none, 1 }, { LOG_A + NODE, 0, 169, none, 1 },
			{ LOG_A + 2 * NODE, 0, 169, none, 1 },
			{ LOG_B + DATA_OFF, DATA_LEN, 168, ext, sizeof(ext) },
		};

		memset(ext, 0, sizeof(ext));
		leaf(g, LOG_A + 2 * NODE, 2, e, 4);
	}
}

static const struct geo big = { 1u << 20, 2u << 20, 3u << 20, 1u << 20 };

static int run(struct got *g, struct ndz_error *err)
{
	struct ndz_fs_stats st;

	return fs_walk_mem(&ndz_fs_btrfs, vol, size, g, &st, err);
}

/* kept: each tree block at both DUP copies, the data extent, the first MiB */
static void test_walk(void **state)
{
	struct ndz_error err = { 0 };
	struct got g;
	uint64_t want_off[] = { big.a0, big.a1, big.a0 + NODE, big.a1 + NODE, big.a0 + 2 * NODE,
				big.a1 + 2 * NODE, big.b + DATA_OFF, 0 };
	uint64_t want_len[] = { NODE, NODE, NODE, NODE, NODE, NODE, DATA_LEN, 1u << 20 };

	(void)state;
	make_btrfs(&big, VOL);
	assert_int_equal(run(&g, &err), 0);
	assert_int_equal(g.n, 8);
	for (int i = 0; i < 8; i++) {
		assert_int_equal(g.off[i], want_off[i]);
		assert_int_equal(g.len[i], want_len[i]);
	}
}

static void expect_bad(const char *msg)
{
	struct ndz_error err = { 0 };
	struct got g;

	assert_int_equal(run(&g, &err), NDZ_EFS);
	if (!strstr(ndz_error_msg(&err), msg))
		fail_msg("want '%s', got '%s'", msg, ndz_error_msg(&err));
}

static void resign_sb(void)
{
	seal(vol + SB, 4096);
}

static void test_damage(void **state)
{
	(void)state;
	make_btrfs(&big, VOL);
	vol[SB + 0x100]++;
	expect_bad("superblock checksum");
	make_btrfs(&big, VOL);
	put_le64(vol + SB + 0x88, 2);
	resign_sb();
	expect_bad("spans 2 devices");
	make_btrfs(&big, VOL);
	put_le64(vol + SB + 0x60, LOG_A);
	resign_sb();
	expect_bad("log tree");
	make_btrfs(&big, VOL);
	put_le64(vol + SB + 0x38, 0x5);        /* written, error */
	resign_sb();
	expect_bad("superblock flags");
	make_btrfs(&big, VOL);
	put_le64(vol + SB + 0xbc, 0x2000);     /* extent tree v2 */
	resign_sb();
	expect_bad("unknown incompatible");
	make_btrfs(&big, VOL);
	put_le16(vol + SB + 0xc4, 1);          /* xxhash */
	resign_sb();
	expect_bad("checksum type");
	make_btrfs(&big, VOL);
	put_le64(vol + SB + 0x78, 3 * NODE);   /* bytes_used short of the extents */
	resign_sb();
	expect_bad("extent tree holds");
	make_btrfs(&big, VOL);
	vol[big.a0 + 2 * NODE + 300]++;        /* extent leaf, first copy */
	expect_bad("checksum mismatch");
	make_btrfs(&big, VOL);
	put_le64(vol + SB + 0x50, LOG_A + 64 * NODE + 1000000000ull);
	resign_sb();
	expect_bad("outside every chunk");
	make_btrfs(&big, VOL);
	put_le64(vol + SB + 0x70, VOL * 2ull);
	resign_sb();
	expect_bad("larger than its partition");
	/* a RAID1 chunk in the system array */
	make_btrfs(&big, VOL);
	put_le64(vol + SB + 0x32b + 17 + 24, 0x2 | 0x10);
	resign_sb();
	expect_bad("more than one device");
	/* the root tree pointing at the chunk tree's leaf: keys fine, but not ROOT_ITEMs */
	make_btrfs(&big, VOL);
	put_le64(vol + SB + 0x50, LOG_A);
	resign_sb();
	expect_bad("no extent tree");
}

/* a node at logical l (both DUP copies), level level, pointing at n children */
static void node(const struct geo *g, uint64_t l, uint8_t level, const uint64_t *child, int n)
{
	uint8_t b[NODE];

	memset(b, 0, sizeof(b));
	memcpy(b + 0x20, fsid, 16);
	put_le64(b + 0x30, l);
	put_le64(b + 0x50, 7);
	put_le64(b + 0x58, 5);
	put_le32(b + 0x60, (uint32_t)n);
	b[0x64] = level;
	for (int i = 0; i < n; i++) {
		uint8_t *e = b + 101 + 33 * i;

		key(e, 256 + (uint64_t)i, 1, 0);
		put_le64(e + 17, child[i]);
		put_le64(e + 25, 7);
	}
	seal(b, NODE);
	memcpy(vol + g->a0 + (l - LOG_A), b, NODE);
	memcpy(vol + g->a1 + (l - LOG_A), b, NODE);
}

/* the root tree rewritten: the extent tree's root item and the fs tree's at fs_root */
static void add_fs_tree(const struct geo *g, uint64_t fs_root, uint8_t level)
{
	uint8_t re[439], rf[439];

	memset(re, 0, sizeof(re));
	put_le64(re + 176, LOG_A + 2 * NODE);
	put_le32(re + 216, 1);
	memset(rf, 0, sizeof(rf));
	put_le64(rf + 176, fs_root);
	put_le32(rf + 216, 1);
	rf[238] = level;
	{
		struct item r[2] = { { 2, 0, 132, re, sizeof(re) }, { 5, 0, 132, rf, sizeof(rf) } };

		leaf(g, LOG_A + NODE, 1, r, 2);
	}
}

static char warned[512];
static int nwarned;

static void warn_cb(void *ctx, const char *msg)
{
	(void)ctx;
	snprintf(warned, sizeof(warned), "%s", msg);
	nwarned++;
}

/* walk with a warning callback; returns walk's result */
static int run_warn(struct got *g)
{
	struct ndz_fs_opts o = { 0 };
	struct ndz_fs_stats st;
	struct ndz_error err = { 0 };
	struct ndz_io *io;
	void *fs = NULL;
	int rc;

	o.warn = warn_cb;
	warned[0] = 0;
	nwarned = 0;
	memset(g, 0, sizeof(*g));
	memset(&st, 0, sizeof(st));
	assert_int_equal(ndz_io_open_mem(vol, size, 0, &io, NULL), 0);
	rc = ndz_fs_btrfs.open(io, &o, &fs, &err);
	if (rc == 0) {
		rc = ndz_fs_btrfs.walk(fs, collect, g, &st, &err);
		ndz_fs_btrfs.close(fs);
	}
	ndz_io_close(io);
	return rc;
}

static int reported(const struct got *g, uint64_t off, uint64_t len)
{
	for (int i = 0; i < g->n && i < 16; i++)
		if (g->off[i] == off && g->len[i] == len)
			return 1;
	return 0;
}

/*
 * A tree the extent tree does not list: its blocks are kept at both copies and
 * a warning counts them; one it does list: nothing more, no warning.
 */
static void test_unlisted(void **state)
{
	struct got g;
	uint64_t leafs[2] = { LOG_A + 4 * NODE, LOG_A + 5 * NODE };

	(void)state;
	/* the fs tree's root a leaf the extent tree lacks (leaves are not read) */
	make_btrfs(&big, VOL);
	add_fs_tree(&big, LOG_A + 3 * NODE, 0);
	assert_int_equal(run_warn(&g), 0);
	assert_int_equal(g.n, 10);
	assert_true(reported(&g, big.a0 + 3 * NODE, NODE));
	assert_true(reported(&g, big.a1 + 3 * NODE, NODE));
	assert_int_equal(nwarned, 1);
	assert_non_null(strstr(warned, "btrfs: 1 tree block reached from the roots is missing "
				       "from the extent tree (the first at logical"));
	assert_non_null(strstr(warned, "of tree 5); imaging it too"));
	/* a level-1 root and its two leaves, none listed */
	make_btrfs(&big, VOL);
	add_fs_tree(&big, LOG_A + 3 * NODE, 1);
	node(&big, LOG_A + 3 * NODE, 1, leafs, 2);
	assert_int_equal(run_warn(&g), 0);
	assert_int_equal(g.n, 14);
	for (int i = 3; i < 6; i++) {
		assert_true(reported(&g, big.a0 + (uint64_t)i * NODE, NODE));
		assert_true(reported(&g, big.a1 + (uint64_t)i * NODE, NODE));
	}
	assert_non_null(strstr(warned, "3 tree blocks reached from the roots are missing"));
	/* the fs tree's root pointing at the extent tree's leaf: listed, so no warning */
	make_btrfs(&big, VOL);
	add_fs_tree(&big, LOG_A + 2 * NODE, 0);
	assert_int_equal(run_warn(&g), 0);
	assert_int_equal(g.n, 8);
	assert_int_equal(nwarned, 0);
	/* an unaligned block pointer: the walk cannot be trusted */
	make_btrfs(&big, VOL);
	add_fs_tree(&big, LOG_A + 3 * NODE + 1, 0);
	assert_int_equal(run_warn(&g), NDZ_EFS);
	/* a node whose child is the node itself: reached once, so the walk ends */
	make_btrfs(&big, VOL);
	add_fs_tree(&big, LOG_A + 3 * NODE, 1);
	leafs[0] = LOG_A + 3 * NODE;
	node(&big, LOG_A + 3 * NODE, 1, leafs, 1);
	assert_int_equal(run_warn(&g), 0);
	assert_int_equal(nwarned, 1);
}

/* NDZ_BTRFS_SEEDS=DIR: a 1 MiB variant, written up to its last tree block */
static void write_seeds(void)
{
	static const struct geo small = { 128u << 10, 192u << 10, 256u << 10, 64u << 10 };
	const char *dir = getenv("NDZ_BTRFS_SEEDS");

	if (!dir)
		return;
	make_btrfs(&small, 1u << 20);
	write_seed(dir, "dup-3-leaves", vol, small.a1 + 3 * NODE);
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
		cmocka_unit_test(test_damage),
		cmocka_unit_test(test_unlisted),
	};

	return cmocka_run_group_tests(tests, vol_setup, teardown);
}
