/* The one way the filesystem fuzz targets drive a module: probe, open, walk, zeros, close. */
#ifndef NDZ_FUZZ_FSMODULE_H
#define NDZ_FUZZ_FSMODULE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fs.h"
#include "core/io.h"

#define FUZZ_VOL_BYTES (1u << 20)

static int fuzz_sink(void *ctx, uint64_t off, uint64_t len)
{
	(void)ctx;
	(void)off;
	(void)len;
	return 0;
}

/*
 * fuzz_module - place data (cut to fit) at byte at of a zeroed 1 MiB volume and
 * run m over it: walk only when probe and open accept it.
 */
static inline void fuzz_module(const struct ndz_fs_module *m, const uint8_t *data, size_t size,
			       size_t at)
{
	struct ndz_fs_opts o = { 0 };
	struct ndz_fs_stats st;
	struct ndz_error err = { 0 };
	struct ndz_io *io;
	uint8_t *buf;
	void *fs;

	if (size > FUZZ_VOL_BYTES - at)
		size = FUZZ_VOL_BYTES - at;
	buf = calloc(1, FUZZ_VOL_BYTES);
	if (!buf)
		return;
	memcpy(buf + at, data, size);
	if (ndz_io_open_mem(buf, FUZZ_VOL_BYTES, 0, &io, NULL) == 0) {
		if (m->probe(io) > 0 && m->open(io, &o, &fs, &err) == 0) {
			if (m->walk(fs, fuzz_sink, NULL, &st, &err) == 0 && m->zeros)
				m->zeros(fs, fuzz_sink, NULL);
			m->close(fs);
		}
		ndz_io_close(io);
	}
	free(buf);
}

#endif
