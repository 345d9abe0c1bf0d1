/*
 * btrfsedit: damage a btrfs image the way a lost write does, for the damaged
 * filesystem tests (tests/cli/fs_damaged_other.sh). Checksums are fixed after
 * each edit, so the damage is in what the metadata says, not in its CRCs.
 *
 *   btrfsedit IMG dropitem NODESIZE ITEM PHYS...   remove item ITEM of the leaf
 *                                                  at each byte offset PHYS (its
 *                                                  copies)
 *   btrfsedit IMG sbused DELTA                     add DELTA (may be negative) to
 *                                                  the primary superblock's
 *                                                  bytes_used
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/crc32c.h"
#include "core/le.h"

#define HDR 101u
#define ITEM 25u
#define SB_OFF 65536L
#define SB_SIZE 4096u

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fputs("btrfsedit: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static void rw(FILE *f, uint8_t *p, size_t n, long off, int write)
{
	if (fseek(f, off, SEEK_SET) != 0 ||
	    (write ? fwrite(p, 1, n, f) : fread(p, 1, n, f)) != n)
		die("cannot %s %zu bytes at %ld", write ? "write" : "read", n, off);
}

static void seal(uint8_t *p, size_t n)
{
	memset(p, 0, 32);
	put_le32(p, ndz_crc32c(p + 32, n - 32));
}

/* Remove item i of leaf p (nodesize n): its header, its data, the offsets that moved. */
static void drop_item(uint8_t *p, uint32_t n, uint32_t i)
{
	uint32_t nr = get_le32(p + 0x60), off, size, low;

	if (p[0x64] != 0 || i >= nr || nr > (n - HDR) / ITEM)
		die("not a leaf, or no item %u", i);
	off = get_le32(p + HDR + ITEM * i + 17);
	size = get_le32(p + HDR + ITEM * i + 21);
	low = get_le32(p + HDR + ITEM * (nr - 1) + 17);
	if (off > n - HDR || size > n - HDR - off || low > off)
		die("item %u out of the leaf", i);
	/* data lies from the block's end downwards in item order: close the gap */
	memmove(p + HDR + low + size, p + HDR + low, off - low);
	memset(p + HDR + low, 0, size);
	for (uint32_t k = i + 1; k < nr; k++)
		put_le32(p + HDR + ITEM * k + 17, get_le32(p + HDR + ITEM * k + 17) + size);
	memmove(p + HDR + ITEM * i, p + HDR + ITEM * (i + 1), ITEM * (nr - 1 - i));
	memset(p + HDR + ITEM * (nr - 1), 0, ITEM);
	put_le32(p + 0x60, nr - 1);
	seal(p, n);
}

int main(int argc, char **argv)
{
	FILE *f;

	if (argc < 4)
		die("usage: btrfsedit IMG dropitem NODESIZE ITEM PHYS... | IMG sbused DELTA");
	f = fopen(argv[1], "r+b");
	if (!f)
		die("cannot open %s", argv[1]);
	if (!strcmp(argv[2], "dropitem") && argc >= 6) {
		uint32_t n = (uint32_t)strtoul(argv[3], NULL, 0);
		uint8_t *p = malloc(n);

		if (!p || n < 4096 || n > 65536)
			die("bad node size");
		for (int a = 5; a < argc; a++) {
			long at = strtol(argv[a], NULL, 0);

			rw(f, p, n, at, 0);
			drop_item(p, n, (uint32_t)strtoul(argv[4], NULL, 0));
			rw(f, p, n, at, 1);
		}
		free(p);
	} else if (!strcmp(argv[2], "sbused")) {
		uint8_t s[SB_SIZE];

		rw(f, s, SB_SIZE, SB_OFF, 0);
		put_le64(s + 0x78, get_le64(s + 0x78) + (uint64_t)strtoll(argv[3], NULL, 0));
		seal(s, SB_SIZE);
		rw(f, s, SB_SIZE, SB_OFF, 1);
	} else {
		die("unknown command %s", argv[2]);
	}
	if (fclose(f) != 0)
		die("cannot write %s", argv[1]);
	return 0;
}
