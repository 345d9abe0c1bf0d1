/* What the filesystem modules share: the "module: what" error and LSB-first bitmaps. */
#include <stdarg.h>
#include <stdio.h>

#include "fsutil.h"

int ndz_fs_bad(struct ndz_error *err, const char *module, const char *fmt, ...)
{
	char msg[NDZ_ERRMSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	return ndz_error_set(err, NDZ_EFS, 0, "%s: %s", module, msg);
}

void ndz_fs_warn(void (*warn)(void *ctx, const char *msg), void *ctx, const char *module,
		 const char *fmt, ...)
{
	char msg[NDZ_ERRMSG_MAX], full[NDZ_ERRMSG_MAX + 32];
	va_list ap;

	if (!warn)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(full, sizeof(full), "%s: %s", module, msg);
	warn(ctx, full);
}

/* The first index in [i, end) whose bit is not bit, or end; whole bytes at a time. */
static uint64_t run_end(const uint8_t *map, uint64_t i, uint64_t end, int bit)
{
	uint8_t whole = bit ? 0xff : 0x00;

	while (i < end) {
		if (!(i & 7) && end - i >= 8 && map[i >> 3] == whole) {
			i += 8;
			continue;
		}
		if (ndz_fs_bit(map, i) != bit)
			break;
		i++;
	}
	return i;
}

int ndz_fs_next_run(const uint8_t *map, uint64_t *pos, uint64_t end, int set, uint64_t *a,
		    uint64_t *b)
{
	uint64_t i = run_end(map, *pos, end, !set);

	if (i >= end) {
		*pos = end;
		return 0;
	}
	*a = i;
	*b = *pos = run_end(map, i, end, !!set);
	return 1;
}
