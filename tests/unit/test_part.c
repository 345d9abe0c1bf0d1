/* Unit tests for fs/part.c: MBR with logical partitions, GPT and its backup, BSD labels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <zlib.h>

#include "core/err.h"
#include "core/io.h"
#include "core/le.h"
#include "part.h"

#define DISK_SECTORS 8192u             /* 4 MiB */

static uint8_t *disk;

static int setup(void **state)
{
	(void)state;
	disk = calloc(DISK_SECTORS, 512);
	return disk ? 0 : -1;
}

static int teardown(void **state)
{
	(void)state;
	free(disk);
	return 0;
}

static void mbr_entry(uint8_t *sec, int i, uint8_t type, uint32_t start, uint32_t count)
{
	uint8_t *e = sec + 446 + 16 * i;

	e[4] = type;
	put_le32(e + 8, start);
	put_le32(e + 12, count);
	sec[510] = 0x55;
	sec[511] = 0xaa;
}

static int read_table(struct ndz_ptable *t, struct ndz_error *err)
{
	struct ndz_io *io;
	int rc;

	assert_int_equal(ndz_io_open_mem(disk, (size_t)DISK_SECTORS * 512, 0, &io, NULL), 0);
	ndz_ptable_init(t);
	ndz_error_clear(err);           /* the first error wins: each read starts clear */
	rc = ndz_part_read(io, t, err);
	ndz_io_close(io);
	return rc;
}

static void test_no_table(void **state)
{
	struct ndz_ptable t;
	struct ndz_error err = { 0 };

	(void)state;
	memset(disk, 0, (size_t)DISK_SECTORS * 512);
	assert_int_equal(read_table(&t, &err), 0);
	assert_int_equal(t.scheme, NDZ_SCHEME_NONE);
	/* an NTFS boot sector ends in 55 aa too, and is not a table */
	memcpy(disk + 3, "NTFS    ", 8);
	mbr_entry(disk, 0, 0x07, 63, 100);
	assert_int_equal(read_table(&t, &err), 0);
	assert_int_equal(t.scheme, NDZ_SCHEME_NONE);
}

static void test_mbr_logical(void **state)
{
	struct ndz_ptable t;
	struct ndz_error err = { 0 };

	(void)state;
	memset(disk, 0, (size_t)DISK_SECTORS * 512);
	mbr_entry(disk, 0, 0x83, 2048, 1024);
	mbr_entry(disk, 1, 0x05, 4096, 4096);
	/* EBR 1 at 4096: logical at +64, next EBR at ext+2048 */
	mbr_entry(disk + 4096 * 512, 0, 0x82, 64, 512);
	mbr_entry(disk + 4096 * 512, 1, 0x05, 2048, 1024);
	/* EBR 2 at 6144: logical at +64, end of chain */
	mbr_entry(disk + 6144 * 512, 0, 0xda, 64, 256);
	assert_int_equal(read_table(&t, &err), 0);
	assert_int_equal(t.scheme, NDZ_SCHEME_MBR);
	assert_int_equal(t.n, 4);
	assert_int_equal(t.first_start, 2048);
	assert_non_null(ndz_part_find(&t, 2));
	assert_true(ndz_part_find(&t, 2)->container);
	assert_int_equal(ndz_part_find(&t, 5)->start, 4096 + 64);
	assert_int_equal(ndz_part_find(&t, 5)->type, 0x82);
	assert_int_equal(ndz_part_find(&t, 6)->start, 6144 + 64);
	assert_int_equal(ndz_part_find(&t, 6)->count, 256);
	assert_null(ndz_part_find(&t, 3));
	/* both EBR sectors are table metadata */
	assert_int_equal(t.meta.n, 2);
	assert_int_equal(t.meta.v[0].start, 4096);
	assert_int_equal(t.meta.v[1].start, 6144);
	ndz_ptable_release(&t);

	/* a chain pointing back at itself is refused */
	mbr_entry(disk + 6144 * 512, 1, 0x05, 2048, 1024);
	assert_int_equal(read_table(&t, &err), NDZ_EPART);
	assert_non_null(strstr(ndz_error_msg(&err), "broken chain"));
}

static void test_mbr_bad(void **state)
{
	struct ndz_ptable t;
	struct ndz_error err = { 0 };

	(void)state;
	memset(disk, 0, (size_t)DISK_SECTORS * 512);
	mbr_entry(disk, 0, 0x83, 2048, DISK_SECTORS);
	assert_int_equal(read_table(&t, &err), NDZ_EPART);
	assert_non_null(strstr(ndz_error_msg(&err), "beyond the disk"));
	mbr_entry(disk, 0, 0x83, 2048, 1024);
	mbr_entry(disk, 1, 0x83, 3000, 1024);
	assert_int_equal(read_table(&t, &err), NDZ_EPART);
	/* the code and the reason; the disk's name is the caller's to add */
	assert_int_equal(err.code, NDZ_EPART);
	assert_string_equal(ndz_error_msg(&err), "malformed partition table: overlapping partitions");
}

/* A GPT with one Linux partition at 2048..4095; header at lba, array at alba. */
static void gpt_write(uint64_t lba, uint64_t alt, uint64_t alba)
{
	static const uint8_t linux_guid[16] = { 0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47,
						0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4 };
	uint8_t *h = disk + lba * 512, *a = disk + alba * 512;

	memset(a, 0, 128 * 128);
	memcpy(a, linux_guid, 16);
	a[16] = 1;
	put_le64(a + 32, 2048);
	put_le64(a + 40, 4095);
	memset(h, 0, 512);
	memcpy(h, "EFI PART", 8);
	put_le32(h + 8, 0x00010000);
	put_le32(h + 12, 92);
	put_le64(h + 24, lba);
	put_le64(h + 32, alt);
	put_le64(h + 40, 34);
	put_le64(h + 48, DISK_SECTORS - 34);
	put_le64(h + 72, alba);
	put_le32(h + 80, 128);
	put_le32(h + 84, 128);
	put_le32(h + 88, (uint32_t)crc32(0, a, 128 * 128));
	put_le32(h + 16, (uint32_t)crc32(0, h, 92));
}

static void test_gpt(void **state)
{
	struct ndz_ptable t;
	struct ndz_error err = { 0 };

	(void)state;
	memset(disk, 0, (size_t)DISK_SECTORS * 512);
	mbr_entry(disk, 0, 0xee, 1, DISK_SECTORS - 1);
	gpt_write(1, DISK_SECTORS - 1, 2);
	gpt_write(DISK_SECTORS - 1, 1, DISK_SECTORS - 33);
	assert_int_equal(read_table(&t, &err), 0);
	assert_int_equal(t.scheme, NDZ_SCHEME_GPT);
	assert_int_equal(t.n, 1);
	assert_int_equal(t.v[0].index, 1);
	assert_int_equal(t.v[0].start, 2048);
	assert_int_equal(t.v[0].count, 2048);
	assert_int_equal(t.v[0].type, NDZ_GPT_LINUX);
	assert_false(t.used_backup);
	/* the backup array and header are kept */
	assert_int_equal(t.meta.n, 1);
	assert_int_equal(t.meta.v[0].start, DISK_SECTORS - 33);
	assert_int_equal(t.meta.v[0].count, 33);
	ndz_ptable_release(&t);

	/* damaged primary array: the backup is used and said so */
	disk[2 * 512 + 40] ^= 1;
	assert_int_equal(read_table(&t, &err), 0);
	assert_true(t.used_backup);
	assert_non_null(strstr(t.note, "array checksum"));
	assert_int_equal(t.v[0].start, 2048);
	ndz_ptable_release(&t);

	/* both damaged: a clear error */
	disk[(DISK_SECTORS - 1) * 512 + 20] ^= 1;
	assert_int_equal(read_table(&t, &err), NDZ_EPART);
	assert_non_null(strstr(ndz_error_msg(&err), "backup: bad header checksum"));
}

static void bsd_label(uint8_t *sec, uint32_t base)
{
	uint16_t sum = 0;

	memset(sec, 0, 512);
	put_le32(sec, 0x82564557);
	put_le32(sec + 132, 0x82564557);
	put_le16(sec + 138, 3);
	/* a: FFS at base+16, 1000 sectors; b: swap; c: the whole slice */
	put_le32(sec + 148, 1000);
	put_le32(sec + 148 + 4, base + 16);
	sec[148 + 12] = NDZ_BSD_FFS;
	put_le32(sec + 164, 500);
	put_le32(sec + 164 + 4, base + 1016);
	sec[164 + 12] = NDZ_BSD_SWAP;
	put_le32(sec + 180, 2048);
	put_le32(sec + 180 + 4, base);
	for (int i = 0; i < 148 + 3 * 16; i += 2)
		sum ^= get_le16(sec + i);
	put_le16(sec + 136, sum);
}

static void test_bsd(void **state)
{
	struct ndz_ptable t;
	struct ndz_io *io;
	struct ndz_error err = { 0 };

	(void)state;
	memset(disk, 0, 4096 * 512);
	bsd_label(disk + 512, 63);       /* absolute offsets: the slice starts at 63 */
	assert_int_equal(ndz_io_open_mem(disk, 2048 * 512, 0, &io, NULL), 0);
	ndz_ptable_init(&t);
	assert_int_equal(ndz_bsd_read(io, &t, &err), 0);
	assert_int_equal(t.scheme, NDZ_SCHEME_BSD);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.v[0].index, 1);
	assert_int_equal(t.v[0].start, 16);
	assert_int_equal(t.v[0].type, NDZ_BSD_FFS);
	assert_int_equal(t.v[1].start, 1016);
	assert_int_equal(t.first_start, 16);
	ndz_ptable_release(&t);
	disk[512 + 150] ^= 4;
	assert_int_equal(ndz_bsd_read(io, &t, &err), NDZ_EPART);
	assert_non_null(strstr(ndz_error_msg(&err), "checksum"));
	ndz_io_close(io);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_no_table),
		cmocka_unit_test(test_mbr_logical),
		cmocka_unit_test(test_mbr_bad),
		cmocka_unit_test(test_gpt),
		cmocka_unit_test(test_bsd),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
