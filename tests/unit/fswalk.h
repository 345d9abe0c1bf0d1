/* Shared by the fs module tests (test_xfs.c, test_btrfs.c): walk a volume in memory. */
#ifndef NDZ_TEST_FSWALK_H
#define NDZ_TEST_FSWALK_H

#include <stdint.h>
#include <string.h>

#include "core/err.h"
#include "fs.h"
#include "core/io.h"

/* The first 16 ranges a walk reported, and how many it reported in all. */
struct got {
	uint64_t off[16], len[16];
	int n;
};

static inline int collect(void *ctx, uint64_t off, uint64_t len)
{
	struct got *g = ctx;

	if (g->n < 16) {
		g->off[g->n] = off;
		g->len[g->n] = len;
	}
	g->n++;
	return 0;
}

/*
 * fs_walk_mem - open module m over vol[0..size) and walk it into g, st filled.
 * Returns open's error, or walk's return. Include after cmocka.h.
 */
static inline int fs_walk_mem(const struct ndz_fs_module *m, uint8_t *vol, size_t size,
			      struct got *g, struct ndz_fs_stats *st, struct ndz_error *err)
{
	struct ndz_fs_opts o = { 0 };
	struct ndz_io *io;
	void *fs = NULL;
	int rc;

	memset(g, 0, sizeof(*g));
	memset(st, 0, sizeof(*st));
	assert_int_equal(ndz_io_open_mem(vol, size, 0, &io, NULL), 0);
	rc = m->open(io, &o, &fs, err);
	if (rc == 0) {
		rc = m->walk(fs, collect, g, st, err);
		m->close(fs);
	}
	ndz_io_close(io);
	return rc;
}

#endif
