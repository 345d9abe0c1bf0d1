/* libFuzzer target: the UFS1/UFS2 superblock and cylinder group parser, and swap. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int sink(void *ctx, uint64_t off, uint64_t len)
{
	(void)ctx;
	(void)off;
	(void)len;
	return 0;
}

static void run(const struct ndz_fs_module *m, struct ndz_io *io)
{
	struct ndz_fs_opts o = { 0 };
	struct ndz_fs_stats st;
	struct ndz_error err = { 0 };
	void *fs;

	if (m->probe(io) <= 0 || m->open(io, &o, &fs, &err) < 0)
		return;
	m->walk(fs, sink, NULL, &st, &err);
	m->close(fs);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* the input lands where UFS1/makefs UFS2 keep the superblock (8192) */
	size_t vol = 1u << 20;
	uint8_t *buf;
	struct ndz_io *io;

	if (size > vol - 8192)
		size = vol - 8192;
	buf = calloc(1, vol);
	if (!buf)
		return 0;
	memcpy(buf + 8192, data, size);
	if (ndz_io_open_mem(buf, vol, 0, &io) == 0) {
		run(&ndz_fs_ufs, io);
		ndz_io_close(io);
	}
	/* and at 0, for the swap header */
	memset(buf, 0, vol);
	memcpy(buf, data, size);
	if (ndz_io_open_mem(buf, vol, 0, &io) == 0) {
		run(&ndz_fs_swap, io);
		ndz_io_close(io);
	}
	free(buf);
	return 0;
}
