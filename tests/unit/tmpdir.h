/* A scratch directory for a test group: the group's setup makes it, its teardown removes it. */
#ifndef NDZ_TEST_TMPDIR_H
#define NDZ_TEST_TMPDIR_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmpdir[64];

/* cmocka group setup: makes a fresh directory under /tmp; 0, or -1 if it cannot. */
static int tmpdir_setup(void **state)
{
	(void)state;
	strcpy(tmpdir, "/tmp/ndz-unit.XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

/* cmocka group teardown: removes the directory with all it holds. */
static int tmpdir_teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

/* NAME inside the directory, in a static buffer; the last four answers stay valid. */
static const char *at(const char *name)
{
	static char buf[4][256];
	static unsigned i;
	char *p = buf[i++ % 4];

	snprintf(p, sizeof(buf[0]), "%s/%s", tmpdir, name);
	return p;
}

#endif
