/* The volume the fs module tests build a file system in: VOL bytes (defined first). */
#ifndef NDZ_TEST_VOLFIX_H
#define NDZ_TEST_VOLFIX_H

#include <stdint.h>
#include <stdlib.h>

static uint8_t *vol;

/* cmocka group setup: allocates vol; 0, or -1 without memory. */
static int vol_setup(void **state)
{
	(void)state;
	vol = malloc(VOL);
	return vol ? 0 : -1;
}

/* cmocka group teardown: frees vol. */
static int vol_teardown(void **state)
{
	(void)state;
	free(vol);
	return 0;
}

#endif
