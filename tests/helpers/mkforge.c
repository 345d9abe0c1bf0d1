/*
 * mkforge: a CRC-valid forgery of an image, for tests/cli/trust.sh: what a
 * tamperer who knows the format (but no key) can make. Works on raw bytes.
 *
 *   mkforge IN OUT flip OFFSET    xor 0x40 into the byte at OFFSET of the file,
 *                                 then make its chunk's data and header CRCs right
 *   mkforge IN OUT swap A B       exchange chunks A and B (the chunks untouched)
 *   mkforge IN DIR flips OFFSET...  each flip on its own, into DIR/OFFSET: many
 *                                 forgeries from one run (trust.sh makes hundreds)
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

/* xor 0x40 into byte a of img (len bytes; a < len), then its chunk's CRCs made right */
static void flip(uint8_t *img, long len, unsigned long long a)
{
	uint8_t *c;
	uint32_t dlen;

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
}

static void put(const char *path, const uint8_t *img, long len)
{
	FILE *f = fopen(path, "wb");

	if (!f || fwrite(img, 1, (size_t)len, f) != (size_t)len || fclose(f) != 0)
		die("cannot write", path);
}

int main(int argc, char **argv)
{
	unsigned long long a, b;
	uint8_t *img, *tmp;
	long len;
	FILE *f;

	if (argc < 5)
		die("usage:", "mkforge IN OUT flip OFFSET | swap A B | IN DIR flips OFFSET...");
	f = fopen(argv[1], "rb");
	if (!f || fseek(f, 0, SEEK_END) < 0 || (len = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) < 0)
		die("cannot read", argv[1]);
	img = malloc((size_t)len + 1);
	if (!img || fread(img, 1, (size_t)len, f) != (size_t)len)
		die("cannot read", argv[1]);
	fclose(f);
	if (!strcmp(argv[3], "flips")) {
		char path[4096];
		int i;

		tmp = malloc((size_t)len + 1);
		if (!tmp)
			die("out of memory", "");
		for (i = 4; i < argc; i++) {	/* every offset checked before a file is written */
			if (arg_num("mkforge", argv[i]) >= (unsigned long long)len)
				die("offset past the end:", argv[i]);
		}
		for (i = 4; i < argc; i++) {
			memcpy(tmp, img, (size_t)len);
			flip(tmp, len, arg_num("mkforge", argv[i]));
			if (snprintf(path, sizeof(path), "%s/%s", argv[2], argv[i]) >= (int)sizeof(path))
				die("path too long:", argv[2]);
			put(path, tmp, len);
		}
		free(tmp);
		free(img);
		return 0;
	}
	if (!strcmp(argv[3], "flip") && argc == 5) {
		a = arg_num("mkforge", argv[4]);
		if (a >= (unsigned long long)len)
			die("offset past the end:", argv[4]);
		flip(img, len, a);
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
	put(argv[2], img, len);
	free(img);
	return 0;
}
