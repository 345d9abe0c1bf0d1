/* A number argument of the image-editing helpers (mkcorrupt, mkforge). */
#ifndef NDZ_HELPERS_ARGNUM_H
#define NDZ_HELPERS_ARGNUM_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* s as a whole number (decimal, 0x hex or 0 octal); else "PROG: bad number S", exit 2. */
static unsigned long long arg_num(const char *prog, const char *s)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s || *end) {
		fprintf(stderr, "%s: bad number %s\n", prog, s);
		exit(2);
	}
	return v;
}

#endif
