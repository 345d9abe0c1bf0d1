/*
 * mkforge: a CRC-valid forgery of an image, for tests/cli/trust.sh: what a
 * tamperer who knows the format (but no key) can make. Works on raw bytes.
 *
 *   mkforge IN OUT flip OFFSET    xor 0x40 into the byte at OFFSET of the file,
 *                                 then make its chunk's data and header CRCs right
 *   mkforge IN OUT swap A B       exchange chunks A and B (the chunks untouched)
 */
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

static void die(const char *msg, const char *arg)
{
	fprintf(stderr, "mkforge: %s %s\n", msg, arg);
	exit(2);
}

int main(int argc, char **argv)
{
	unsigned long long a, b;
	uint8_t *img, *c, *tmp;
	long len;
	FILE *f;

	if (argc < 5)
		die("usage:", "mkforge IN OUT flip OFFSET | swap A B");
	f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0)
		die("cannot read", argv[1]);
	img = malloc((size_t)len + 1);
	if (!img || fread(img, 1, (size_t)len, f) != (size_t)len)
		die("cannot read", argv[1]);
	fclose(f);
	if (!strcmp(argv[3], "flip") && argc == 5) {
		uint32_t dlen;

		a = arg_num("mkforge", argv[4]);
		if (a >= (unsigned long long)len)
			die("offset past the end:", argv[4]);
		img[a] ^= 0x40;
		c = img + a / NDZ_CHUNK_SIZE * NDZ_CHUNK_SIZE;
		if ((unsigned long long)len - (unsigned long long)(c - img) >= NDZ_CHUNK_SIZE) {
			dlen = get_le32(c + OFF_DATA_LEN);
			if (dlen <= NDZ_MAX_DATA && (a % NDZ_CHUNK_SIZE < OFF_DATA_CRC ||
						     a % NDZ_CHUNK_SIZE >= OFF_DATA_CRC + 4))
				put_le32(c + OFF_DATA_CRC, (uint32_t)crc32(crc32(0L, Z_NULL, 0),
					 c + NDZ_HDR_SIZE, dlen));
			if (a % NDZ_CHUNK_SIZE < OFF_HDR_CRC || a % NDZ_CHUNK_SIZE >= OFF_HDR_CRC + 4) {
				put_le32(c + OFF_HDR_CRC, 0);
				put_le32(c + OFF_HDR_CRC, (uint32_t)crc32(crc32(0L, Z_NULL, 0), c,
									NDZ_HDR_SIZE));
			}
		}
	} else if (!strcmp(argv[3], "swap") && argc == 6) {
		a = arg_num("mkforge", argv[4]);
		b = arg_num("mkforge", argv[5]);
		if ((a + 1) * NDZ_CHUNK_SIZE > (unsigned long long)len ||
		    (b + 1) * NDZ_CHUNK_SIZE > (unsigned long long)len)
			die("no such chunk in", argv[1]);
		tmp = malloc(NDZ_CHUNK_SIZE);
		if (!tmp)
			die("out of memory", "");
		memcpy(tmp, img + a * NDZ_CHUNK_SIZE, NDZ_CHUNK_SIZE);
		memcpy(img + a * NDZ_CHUNK_SIZE, img + b * NDZ_CHUNK_SIZE, NDZ_CHUNK_SIZE);
		memcpy(img + b * NDZ_CHUNK_SIZE, tmp, NDZ_CHUNK_SIZE);
		free(tmp);
	} else {
		die("unknown operation", argv[3]);
	}
	f = fopen(argv[2], "wb");
	if (!f || fwrite(img, 1, (size_t)len, f) != (size_t)len || fclose(f) != 0)
		die("cannot write", argv[2]);
	free(img);
	return 0;
}
