/*
 * fakesess [frisbeed's options] -- IMAGE: a stand-in for frisbeed that the image
 * master can start (mfrisbeed -F): it serves nothing, but answers on its --control
 * socket that it is ending to the first HOLD, as a frisbeed that has just decided to
 * exit idle does, and then exits as that one would. Answers IDENTIFY with its pid.
 * Exits after 30 s in any case.
 */
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/clock.h"
#include "ctl/sessctl.h"

static atomic_int asked;

static int identify(void *ctx, struct ndz_sessctl_identity *out)
{
	(void)ctx;
	(void)out;
	return 0;
}

static int hold(void *ctx)
{
	(void)ctx;
	atomic_store(&asked, 1);
	return 0;
}

int main(int argc, char **argv)
{
	static const struct ndz_sessctl_ops ops = { NULL, NULL, identify, hold };
	const char *control = NULL;
	struct ndz_sessctl *s = NULL;
	struct ndz_error e = { 0 };
	uint64_t end = ndz_now_ms() + 30000;

	for (int i = 1; i + 1 < argc; i++)
		if (strcmp(argv[i], "--control") == 0)
			control = argv[i + 1];
	if (!control) {
		fprintf(stderr, "fakesess: no --control\n");
		return 2;
	}
	if (ndz_sessctl_start(control, &ops, NULL, &s, &e) != 0) {
		fprintf(stderr, "fakesess: %s\n", ndz_error_msg(&e));
		return 1;
	}
	while (!atomic_load(&asked) && ndz_now_ms() < end)
		usleep(10000);
	usleep(50000);                 /* a frisbeed stops its threads before it exits */
	ndz_sessctl_stop(s);
	return 0;
}
