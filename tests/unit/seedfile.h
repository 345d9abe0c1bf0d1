/*
 * Fuzz seeds the fs module tests leave behind on request (NDZ_<FS>_SEEDS=DIR): the
 * first n bytes of p as DIR/name. Best effort: a seed that cannot be written is not a
 * test failure, so nothing is reported.
 */
#ifndef NDZ_TEST_SEEDFILE_H
#define NDZ_TEST_SEEDFILE_H

#include <stddef.h>
#include <stdio.h>

static void write_seed(const char *dir, const char *name, const void *p, size_t n)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f)
		return;
	fwrite(p, 1, n, f);
	fclose(f);
}

#endif
