/* CRC-32C, table-driven (see crc32c.h). */
#include <pthread.h>

#include "crc32c.h"

static uint32_t table[256];
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void make_table(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;

		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		table[i] = c;
	}
}

uint32_t ndz_crc32c_update(uint32_t state, const void *buf, size_t len)
{
	const uint8_t *p = buf;

	pthread_once(&once, make_table);
	for (size_t i = 0; i < len; i++)
		state = table[(state ^ p[i]) & 0xff] ^ (state >> 8);
	return state;
}

uint32_t ndz_crc32c(const void *buf, size_t len)
{
	return ~ndz_crc32c_update(0xffffffffu, buf, len);
}
