/*
 * mkcorrupt: derive a damaged image from a good one, for the must-fail corpus
 * (tests/cli/corrupt.sh). Works on raw bytes so it can make headers the library
 * would refuse to encode; "fix" variants recompute the header CRC afterwards.
 *
 *   mkcorrupt IN OUT flip CHUNK OFFSET            xor 0x40 into one byte
 *   mkcorrupt IN OUT set16|set32|set64 CHUNK OFFSET VALUE   store, fix the CRC
 *   mkcorrupt IN OUT region CHUNK I START COUNT   rewrite region I, fix the CRC
 *   mkcorrupt IN OUT truncate BYTES               keep the first BYTES bytes
 *   mkcorrupt IN OUT drop CHUNK                   leave a chunk out
 *   mkcorrupt IN OUT dup CHUNK                    repeat a chunk right after itself
 *   mkcorrupt IN OUT splice CHUNK OTHER OCHUNK    put OTHER's chunk OCHUNK in its place
 *   mkcorrupt IN OUT dataflip CHUNK OFFSET        xor 0x40 into compressed byte OFFSET,
 *                                                 then fix both CRCs (the codec must see it)
 *   mkcorrupt IN OUT datalen CHUNK LEN            cut the compressed data to LEN bytes
 *                                                 (or add LEN - data_len bytes 0xa5), fix CRCs
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/format.h"
#include "core/le.h"

#include "argnum.h"

#define OFF_DATA_LEN 88
#define OFF_DATA_CRC 92
#define OFF_HDR_CRC 100

static const char *prog = "mkcorrupt";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void die(const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t n = 0, alloc = 0, got;

	if (!f)
		die("cannot open %s", path);
	for (;;) {
		if (n == alloc) {
			alloc = alloc ? alloc * 2 : NDZ_CHUNK_SIZE;
			buf = realloc(buf, alloc);
			if (!buf)
				die("out of memory reading %s", path);
		}
		got = fread(buf + n, 1, alloc - n, f);
		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f))
		die("cannot read %s", path);
	fclose(f);
	*len = n;
	return buf;
}

static uint8_t *chunk_at(uint8_t *img, size_t len, unsigned long long i)
{
	if (i >= len / NDZ_CHUNK_SIZE)
		die("no chunk %llu in the input", i);
	return img + i * NDZ_CHUNK_SIZE;
}

static void fix_crc(uint8_t *c)
{
	put_le32(c + OFF_HDR_CRC, 0);
	put_le32(c + OFF_HDR_CRC, (uint32_t)crc32(crc32(0L, Z_NULL, 0), c, NDZ_HDR_SIZE));
}

/* The data CRC of a chunk whose data_len is set, then the header CRC. */
static void fix_crcs(uint8_t *c)
{
	put_le32(c + OFF_DATA_CRC, (uint32_t)crc32(crc32(0L, Z_NULL, 0), c + NDZ_HDR_SIZE,
						   get_le32(c + OFF_DATA_LEN)));
	fix_crc(c);
}

int main(int argc, char **argv)
{
	const char *op;
	uint8_t *img, *out;
	size_t len, olen;
	FILE *f;

	if (argc < 4)
		die("usage: mkcorrupt IN OUT OP ARGS...");
	img = slurp(argv[1], &len);
	op = argv[3];
	out = img;
	olen = len;
	if (!strcmp(op, "flip") && argc == 6) {
		uint64_t off = arg_num(prog, argv[5]);

		if (off >= NDZ_CHUNK_SIZE)
			die("offset %s past the chunk", argv[5]);
		chunk_at(img, len, arg_num(prog, argv[4]))[off] ^= 0x40;
	} else if (!strncmp(op, "set", 3) && argc == 7) {
		uint8_t *c = chunk_at(img, len, arg_num(prog, argv[4]));
		uint64_t off = arg_num(prog, argv[5]), v = arg_num(prog, argv[6]);

		if (off + 8 > NDZ_HDR_SIZE)
			die("offset %s outside the header", argv[5]);
		if (!strcmp(op, "set16"))
			put_le16(c + off, (uint16_t)v);
		else if (!strcmp(op, "set32"))
			put_le32(c + off, (uint32_t)v);
		else if (!strcmp(op, "set64"))
			put_le64(c + off, v);
		else
			die("unknown operation %s", op);
		fix_crc(c);
	} else if (!strcmp(op, "region") && argc == 8) {
		uint8_t *c = chunk_at(img, len, arg_num(prog, argv[4]));
		uint64_t i = arg_num(prog, argv[5]);

		if (i >= NDZ_MAX_REGIONS)
			die("region %s out of range", argv[5]);
		put_le64(c + NDZ_FIXED_HDR + i * NDZ_REGION_SIZE, arg_num(prog, argv[6]));
		put_le32(c + NDZ_FIXED_HDR + i * NDZ_REGION_SIZE + 8, (uint32_t)arg_num(prog, argv[7]));
		fix_crc(c);
	} else if (!strcmp(op, "truncate") && argc == 5) {
		olen = (size_t)arg_num(prog, argv[4]);
		if (olen > len)
			die("%s is longer than the input", argv[4]);
	} else if (!strcmp(op, "drop") && argc == 5) {
		uint8_t *c = chunk_at(img, len, arg_num(prog, argv[4]));

		memmove(c, c + NDZ_CHUNK_SIZE, (size_t)(img + len - c - NDZ_CHUNK_SIZE));
		olen = len - NDZ_CHUNK_SIZE;
	} else if (!strcmp(op, "dup") && argc == 5) {
		uint8_t *c = chunk_at(img, len, arg_num(prog, argv[4]));
		size_t at = (size_t)(c - img) + NDZ_CHUNK_SIZE;

		out = malloc(len + NDZ_CHUNK_SIZE);
		if (!out)
			die("out of memory");
		memcpy(out, img, at);
		memcpy(out + at, c, NDZ_CHUNK_SIZE);
		memcpy(out + at + NDZ_CHUNK_SIZE, img + at, len - at);
		olen = len + NDZ_CHUNK_SIZE;
	} else if (!strcmp(op, "splice") && argc == 7) {
		size_t olen2;
		uint8_t *other = slurp(argv[5], &olen2);

		memcpy(chunk_at(img, len, arg_num(prog, argv[4])), chunk_at(other, olen2, arg_num(prog, argv[6])),
		       NDZ_CHUNK_SIZE);
		free(other);
	} else if (!strcmp(op, "dataflip") && argc == 6) {
		uint8_t *c = chunk_at(img, len, arg_num(prog, argv[4]));
		uint64_t off = arg_num(prog, argv[5]);

		if (off >= get_le32(c + OFF_DATA_LEN))
			die("offset %s past the data", argv[5]);
		c[NDZ_HDR_SIZE + off] ^= 0x40;
		fix_crcs(c);
	} else if (!strcmp(op, "datalen") && argc == 6) {
		uint8_t *c = chunk_at(img, len, arg_num(prog, argv[4]));
		uint64_t n = arg_num(prog, argv[5]), was = get_le32(c + OFF_DATA_LEN);

		if (n > NDZ_MAX_DATA)
			die("length %s too long", argv[5]);
		if (n < was)
			memset(c + NDZ_HDR_SIZE + n, 0, (size_t)(was - n));
		else
			memset(c + NDZ_HDR_SIZE + was, 0xa5, (size_t)(n - was));
		put_le32(c + OFF_DATA_LEN, (uint32_t)n);
		fix_crcs(c);
	} else {
		die("bad operation or arguments: %s", op);
	}
	f = fopen(argv[2], "wb");
	if (!f || fwrite(out, 1, olen, f) != olen || fclose(f) != 0)
		die("cannot write %s", argv[2]);
	if (out != img)
		free(out);
	free(img);
	return 0;
}
