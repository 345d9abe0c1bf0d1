/*
 * zipranges: make an image of chosen sector ranges of a file, for tests of gaps
 * and zero-fill before filesystems are understood.
 * Usage: zipranges SOURCE IMAGE START:COUNT...   (sectors)
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/err.h"
#include "core/io.h"
#include "codec/zip.h"

static int out_fd;

static int put(void *ctx, const uint8_t *chunk, uint32_t index, struct ndz_error *e)
{
	(void)ctx;
	(void)index;
	(void)e;
	return write(out_fd, chunk, NDZ_CHUNK_SIZE) == NDZ_CHUNK_SIZE ? 0 : NDZ_EIO;
}

int main(int argc, char **argv)
{
	struct ndz_ranges r = NDZ_RANGES_INIT;
	struct ndz_zip_opts o;
	struct ndz_io *src;
	struct ndz_error err = { 0 };
	int i, rc;

	if (argc < 3) {
		fprintf(stderr, "usage: zipranges SOURCE IMAGE START:COUNT...\n");
		return 2;
	}
	if (ndz_io_open_file(argv[1], NDZ_IO_READ, &src, &err) < 0) {
		fprintf(stderr, "zipranges: %s\n", ndz_error_msg(&err));
		return 1;
	}
	for (i = 3; i < argc; i++) {
		unsigned long long s, c;

		if (sscanf(argv[i], "%llu:%llu", &s, &c) != 2 || ndz_ranges_add(&r, s, c, NULL) < 0)
			return 2;
	}
	ndz_ranges_normalize(&r);
	out_fd = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out_fd < 0) {
		perror(argv[2]);
		return 1;
	}
	ndz_zip_opts_init(&o);
	rc = ndz_zip(src, src->size, &r, &o, put, NULL, NULL, &err);
	if (rc < 0)
		fprintf(stderr, "zipranges: %s\n", ndz_error_msg(&err));
	close(out_fd);
	ndz_ranges_release(&r);
	ndz_io_close(src);
	return rc < 0;
}
