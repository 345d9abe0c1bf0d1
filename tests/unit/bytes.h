/* Checks on byte buffers shared by the unit tests. */
#ifndef NDZ_TEST_BYTES_H
#define NDZ_TEST_BYTES_H

#include <stddef.h>
#include <stdint.h>

/* 1 when each of the n bytes at p is v (so also for n 0), else 0. */
static int all_equal(const uint8_t *p, size_t n, uint8_t v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return 0;
	return 1;
}

#endif
