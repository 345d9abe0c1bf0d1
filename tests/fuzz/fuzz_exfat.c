/* libFuzzer target: the exFAT boot region, root directory and allocation bitmap parser. */
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t vol = 1u << 20;
	struct ndz_fs_opts o = { 0 };
	struct ndz_fs_stats st;
	struct ndz_io *io;
	uint8_t *buf;
	struct ndz_error err = { 0 };
	void *fs;

	if (size > vol)
		size = vol;
	buf = calloc(1, vol);
	if (!buf)
		return 0;
	memcpy(buf, data, size);
	if (ndz_io_open_mem(buf, vol, 0, &io) == 0) {
		if (ndz_fs_exfat.probe(io) > 0 &&
		    ndz_fs_exfat.open(io, &o, &fs, &err) == 0) {
			ndz_fs_exfat.walk(fs, sink, NULL, &st, &err);
			ndz_fs_exfat.close(fs);
		}
		ndz_io_close(io);
	}
	free(buf);
	return 0;
}
