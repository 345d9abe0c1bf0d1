/* What the filesystem modules share: the "module: what" error and LSB-first bitmaps. */
#ifndef NDZ_FSUTIL_H
#define NDZ_FSUTIL_H

#include <stdint.h>

#include "core/err.h"

/*
 * ndz_fs_bad - record NDZ_EFS in err with the message "module: " followed by fmt
 * (printf-style), the form every module's open and walk use for inconsistent
 * metadata ("xfs: AG 3: bad AGF"). The first error wins, as with ndz_error_set;
 * err may be NULL. Returns NDZ_EFS. A module wraps it in a one-line macro that
 * names the module.
 */
int ndz_fs_bad(struct ndz_error *err, const char *module, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * ndz_fs_warn - hand warn (may be NULL) the message "module: " followed by fmt,
 * for a disagreement the walk survives by imaging more (fs.h ndz_fs_opts.warn).
 */
void ndz_fs_warn(void (*warn)(void *ctx, const char *msg), void *ctx, const char *module,
		 const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* ndz_fs_bit - bit i of an LSB-first bitmap (bit 0 is the low bit of map[0]): 0 or 1. */
static inline int ndz_fs_bit(const uint8_t *map, uint64_t i)
{
	return (map[i >> 3] >> (i & 7)) & 1;
}

/*
 * ndz_fs_next_run - the next run of bits equal to set (0 or 1) in bits [*pos, end)
 * of map. Returns 1 with the run in [*a, *b) and *pos moved to *b, or 0 with
 * *pos = end when no such bit is left. Reads no bit at or past end.
 */
int ndz_fs_next_run(const uint8_t *map, uint64_t *pos, uint64_t end, int set, uint64_t *a,
		    uint64_t *b);

#endif
